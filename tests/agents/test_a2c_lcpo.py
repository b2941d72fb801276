"""A2C and LCPO: the infinite-horizon value check, LCPO's constrained step, persistence, determinism."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import lcpo.envs  # noqa: F401
from lcpo.agents import A2C, LCPO
from lcpo.online.loop import Transition
from lcpo.agents.nets import CategoricalPolicy
from lcpo.optim import flat_params


def test_infinite_horizon_critic_converges_to_one_over_one_minus_gamma():
    """Reward 1 every step, gamma 0.9, truncated every 10 steps, never terminated: V = 10 everywhere.

    Treating the truncation as a termination would give values between 1 and 6.5 (about 5.3 on average).
    """
    env = gym.make("lcpo/ContinuingChain-v0", n_states=5)
    agent = A2C(env, seed=0, gamma=0.9, gae_lambda=0.9, critic_lr=3e-3, rollout_steps=200)
    agent.learn(40_000, reset_condition="every:10")
    with torch.no_grad():
        v = agent.critic(torch.eye(5)).numpy()
    # the critic learns in the return normaliser's units (rewards / scale)
    assert agent.return_norm.scale > 1.5
    np.testing.assert_allclose(v * agent.return_norm.scale, 10.0, atol=0.5)


def _lcpo_with_anchors(seed=0, **kw):
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    agent = LCPO(env, seed=seed, reservoir_size=2000, **kw)
    rng = np.random.default_rng(seed)
    # past states under a strong wind (far from the recent zero-wind batch): OOD anchors
    past = np.zeros((2000, 9), np.float32)
    th = rng.uniform(-np.pi, np.pi, 2000)
    past[:, 0], past[:, 1], past[:, 2] = np.cos(th), np.sin(th), rng.uniform(-8, 8, 2000)
    past[:, 3:] = 3.0
    agent.reservoir.add_batch(past)
    return agent, env


def _fill_rollout(agent, env, seed=0):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    while agent.rollout.ptr < agent.rollout.size - 1:
        a = agent.act(obs)
        nobs, r, te, tr, info = env.step(a)
        agent.rollout.add(obs, a, r + rng.normal() * 50, nobs, te, tr, agent.hp.gamma)
        obs = env.reset()[0] if te or tr else nobs
    return obs


def test_lcpo_step_meets_both_kl_limits_and_improves_surrogate():
    agent, env = _lcpo_with_anchors(c_recent=0.1, c_anchor=1e-4)
    _fill_rollout(agent, env)
    # the last add through observe() triggers the update
    obs = torch.from_numpy(agent.rollout.obs[: agent.rollout.ptr].copy())
    anchors_before = agent.reservoir.data[:2000].copy()
    logp_before = agent.actor.log_probs(torch.from_numpy(anchors_before)).detach()
    logp_recent_before = agent.actor.log_probs(obs).detach()
    o = np.asarray(agent.rollout.obs[agent.rollout.ptr - 1])
    diag = agent.observe(Transition(o, agent.act(o), -1.0, o, False, False))
    assert diag["train/constrained"] == 1.0 and diag["train/line_search_ok"] == 1.0
    assert diag["train/kl_anchor"] <= 1e-4 and diag["train/kl_recent"] <= 0.1
    # independently recomputed: the KL over all (OOD) reservoir states stays tiny, the recent batch moved more
    with torch.no_grad():
        kl_anchor_all = CategoricalPolicy.kl(logp_before, agent.actor.log_probs(torch.from_numpy(anchors_before))).mean()
        kl_recent = CategoricalPolicy.kl(logp_recent_before, agent.actor.log_probs(obs)).mean()
    assert float(kl_anchor_all) < 3e-4
    assert float(kl_recent) > float(kl_anchor_all)


def test_rejected_line_search_leaves_parameters_bit_identical():
    agent, env = _lcpo_with_anchors(c_recent=1e-12)  # no move can satisfy this limit
    _fill_rollout(agent, env)
    before = flat_params(agent.actor)
    o = np.asarray(agent.rollout.obs[agent.rollout.ptr - 1])
    diag = agent.observe(Transition(o, agent.act(o), -1.0, o, False, False))
    assert diag["train/constrained"] == 1.0 and diag["train/line_search_ok"] == 0.0
    assert torch.equal(flat_params(agent.actor), before)


def test_no_ood_batch_means_plain_a2c_step():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    agent = LCPO(env, seed=0, reservoir_size=5000)
    agent.learn(1000)
    assert agent.constrained_updates == 0 and agent.updates == 5  # constant wind: nothing is OOD


def test_entropy_temperature_moves_toward_target():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    agent = LCPO(env, seed=0, reservoir_size=1000)
    agent.learn(400)  # a fresh policy is near uniform: entropy above 0.1 ln 15, so alpha must fall
    assert agent.alpha < agent.hp.entropy_base


@pytest.mark.parametrize("cls", [A2C, LCPO])
def test_save_load_gives_identical_actions_and_continuation(cls, tmp_path):
    env = gym.make("lcpo/WindyPendulum-v0", trace="wind-3")
    agent = cls(env, seed=3).learn(1100)
    agent.save(tmp_path / "a")
    twin = cls.load(tmp_path / "a", gym.make("lcpo/WindyPendulum-v0", trace="wind-3"))
    obs = np.random.default_rng(0).normal(size=(50, 9)).astype(np.float32)
    for o in obs:
        np.testing.assert_array_equal(agent.act(o), twin.act(o))
        np.testing.assert_array_equal(agent.act(o, deterministic=True), twin.act(o, deterministic=True))
    for p, q in zip(agent.actor.parameters(), twin.actor.parameters()):
        assert torch.equal(p, q)


def test_same_seed_same_run():
    def run(seed):
        env = gym.make("lcpo/WindyPendulum-v0", trace="wind-2")
        return np.array(LCPO(env, seed=seed, reservoir_size=500).learn(2000).episodes)

    np.testing.assert_array_equal(run(1), run(1))
    assert not np.array_equal(run(1), run(2))


def test_unknown_hyperparameter_is_named():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    with pytest.raises(ValueError, match="unknown hyperparameter 'c_anchr'"):
        LCPO(env, c_anchr=1.0)
    with pytest.raises(ValueError, match="must be a number"):
        A2C(env, actor_lr="fast")
