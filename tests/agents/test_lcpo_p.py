"""LCPO-P: the anchor term's gradient (zero at the old parameters, nonzero after a step), its effect, no-OOD case."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import lcpo.envs  # noqa: F401
from lcpo.agents.lcpo_p import LCPOP, anchor_cross_entropy
from lcpo.agents.ppo import PPO
from lcpo.online.loop import Transition
from lcpo.agents.nets import CategoricalPolicy
from lcpo.optim import flat_grad
from lcpo.online.threads import limit_threads


@pytest.fixture(autouse=True)
def _one_thread():
    with limit_threads(1):  # torch and BLAS: updates are also called directly, outside learn()
        yield


def _windy_states(n, wind, seed=0):
    rng = np.random.default_rng(seed)
    s = np.zeros((n, 9), np.float32)
    th = rng.uniform(-np.pi, np.pi, n)
    s[:, 0], s[:, 1], s[:, 2] = np.cos(th), np.sin(th), rng.uniform(-8, 8, n)
    s[:, 3:] = wind
    return s


def test_anchor_term_gradient_is_zero_at_old_parameters_and_nonzero_after_one_step():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    agent = LCPOP(env, seed=0, reservoir_size=200)
    anchors = torch.from_numpy(_windy_states(200, 3.0))
    with torch.no_grad():
        logp_old = agent.actor.log_probs(anchors)
    g0 = flat_grad(anchor_cross_entropy(logp_old, agent.actor.log_probs(anchors)), agent.actor)
    # analytic: d/dtheta sum_a p_old log p_theta = sum_a p_old (dz_a - sum_b p_theta dz_b) = 0 at p_theta = p_old
    assert float(g0.abs().max()) < 1e-6
    # one Adam step on an unrelated loss (push toward bin 0 everywhere), then the term pulls back
    # (on the stacked (1, ...) parameters: the actor module's own parameters are views whose gradients move there)
    opt = torch.optim.Adam(agent.actors.parameters(), lr=1e-2)
    opt.zero_grad()
    (-agent.actor.log_probs(anchors)[:, :, 0].mean()).backward()
    opt.step()
    logp_new = agent.actor.log_probs(anchors)
    ce = anchor_cross_entropy(logp_old, logp_new)
    g1 = flat_grad(ce, agent.actor)
    assert float(g1.norm()) > 1e-3
    # CE = KL(old || new) + H(old): strictly above the old entropy once the policy moved
    h_old = float(CategoricalPolicy.entropy_of(logp_old).mean())
    kl = float(CategoricalPolicy.kl(logp_old, logp_new.detach()).mean())
    assert float(ce.detach()) == pytest.approx(h_old + kl, rel=1e-5) and kl > 0
    with pytest.raises(ValueError, match="shapes differ"):
        anchor_cross_entropy(logp_old, logp_old[:, :, :3])


def _update_with_anchors(kappa):
    """One LCPO-P update on a zero-wind batch with a reservoir of strong-wind (OOD) states."""
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    agent = LCPOP(env, seed=0, reservoir_size=2000, kappa=kappa, max_kl=1e9, actor_lr=3e-3)
    agent.reservoir.add_batch(_windy_states(2000, 3.0, seed=1))
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    while agent.rollout.ptr < agent.rollout.size - 1:
        a = agent.act(obs)
        nobs, r, te, tr, _ = env.step(a)
        agent.rollout.add(obs, a, r + 50.0 * rng.normal(), nobs, te, tr, agent.hp.gamma)
        obs = env.reset()[0] if te or tr else nobs
    probe = torch.from_numpy(_windy_states(500, 3.0, seed=2))  # fresh OOD states, not the anchors themselves
    with torch.no_grad():
        before = agent.actor.log_probs(probe)
    diag = agent.observe(Transition(obs, agent.act(obs), -1.0, obs, False, False))
    with torch.no_grad():
        kl_probe = float(CategoricalPolicy.kl(before, agent.actor.log_probs(probe)).mean())
    return agent, diag, kl_probe


def test_anchor_term_keeps_the_policy_on_ood_states():
    _, d_free, kl_free = _update_with_anchors(kappa=0.0)
    held, d_held, kl_held = _update_with_anchors(kappa=10.0)
    assert d_free["train/constrained"] == d_held["train/constrained"] == 1.0
    assert d_held["ood/fraction"] == 1.0
    assert d_held["train/kl_anchor"] < 0.1 * d_free["train/kl_anchor"]
    assert kl_held < 0.1 * kl_free
    assert held.constrained_updates == 1 and held.reservoir.seen == 2200  # the recent batch was offered


def test_without_ood_states_lcpo_p_is_ppo():
    def run(cls, **kw):
        env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        return cls(env, seed=5, **kw).learn(1000)

    p = run(PPO)
    q = run(LCPOP, reservoir_size=5000)
    assert q.constrained_updates == 0 and q.updates == 5  # constant wind: nothing is OOD
    for a, b in zip(p.actor.parameters(), q.actor.parameters()):
        assert torch.equal(a, b)
    np.testing.assert_array_equal(np.array(p.episodes), np.array(q.episodes))


def test_defaults_are_appendix_e1():
    hp = LCPOP.Hyperparameters()
    assert (hp.kappa, hp.clip, hp.epochs, hp.max_kl) == (10.0, 0.2, 30, 0.01)
    with pytest.raises(ValueError, match="kappa must be >= 0"):
        LCPOP(gym.make("lcpo/WindyPendulum-v0", trace="zero"), kappa=-1.0)
