"""Discrete SAC: finite log-probabilities at zero probability, the soft value, the temperature's direction,
bootstrapping at truncation, persistence, resume equality through runs, and a learning sanity check."""

import math

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import torch
from offpolicy_toys import ContextBandit

import lcpo.envs  # noqa: F401
from lcpo.agents import AGENTS
from lcpo.agents.sac import SAC, finite_log_probs, policy_entropy
from lcpo.online.loop import Transition
from lcpo.online.run import RunConfig, execute
from summaries import comparable


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """One intra-op thread: tiny networks, and a shared machine where spinning OpenMP threads stall."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


SMALL = {"hidden": [16, 16], "train_every": 1, "batch_size": 32, "buffer_size": 2000, "learning_starts": 100}


def test_registry_lists_sac():
    assert AGENTS["sac"] is SAC


def test_log_probs_and_entropy_finite_with_an_exactly_zero_probability():
    logits = torch.tensor([[[0.0, -1e4, 3.0], [0.0, -math.inf, 0.0]]], requires_grad=True)  # (1, 2, 3)
    probs = torch.softmax(logits, -1)
    assert probs[0, 0, 1].item() == 0.0 and probs[0, 1, 1].item() == 0.0  # underflow / impossible bin
    assert torch.isinf(torch.log(probs)).any()  # the naive log(softmax) is -inf there
    logp = finite_log_probs(logits)
    assert torch.isfinite(logp).all()
    torch.testing.assert_close(logp.exp(), probs)
    h = policy_entropy(logp)
    p0 = torch.softmax(torch.tensor([0.0, 3.0]), -1)
    torch.testing.assert_close(h, torch.tensor([-(p0 * p0.log()).sum().item() + math.log(2.0)]))
    # the actor loss and its gradient stay finite
    q = torch.randn(1, 2, 3)
    loss = -((logp.exp() * q).sum(-1).mean(-1) + 0.1 * h).mean()
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()


def test_soft_value_is_exact_expectation():
    env = ContextBandit(dims=2, bins=3)
    p = torch.tensor([[[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]])
    q = torch.tensor([[[1.0, 3.0, 100.0], [0.0, 10.0, -2.0]]])
    logp = finite_log_probs(torch.log(p))
    h = -(0.5 * math.log(0.5) * 2) - sum(x * math.log(x) for x in (0.2, 0.3, 0.5))
    # E_pi_1[Q_1] = 2 and E_pi_2[Q_2] = 0.3 * 10 - 0.5 * 2 = 2, reduced over dims, + alpha * joint entropy
    for reduction, expected in (("sum", 2.0 + 2.0 + 0.7 * h), ("mean", 0.5 * (2.0 + 2.0) + 0.7 * h)):
        agent = SAC(env, seed=0, head_reduction=reduction)
        torch.testing.assert_close(agent.soft_value(logp, q, 0.7), torch.tensor([expected]))


def test_temperature_rises_below_target_and_falls_above():
    env = ContextBandit(dims=2, bins=15)
    agent = SAC(env, seed=0)
    assert agent.target_entropy == pytest.approx(0.1 * math.log(15) * 2)
    a0 = agent.alpha
    agent.temperature_step(0.0)  # entropy below target
    assert agent.alpha > a0
    a1 = agent.alpha
    agent.temperature_step(2 * math.log(15))  # maximal entropy, above target
    assert agent.alpha < a1
    with pytest.raises(ValueError, match="entropy must be finite"):
        agent.temperature_step(float("nan"))


def test_fresh_policy_above_target_entropy_lowers_alpha_in_training():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    agent = SAC(env, seed=0, **SMALL).learn(300)
    assert agent.updates == 201 and agent.alpha < agent.hp.alpha_init


def test_agent_target_bootstraps_after_truncation_not_termination():
    env = ContextBandit(dims=1, bins=3)
    agent = SAC(env, seed=0, hidden=(), learning_starts=1000, gamma=0.9, normalize_returns=False)
    with torch.no_grad():
        for net, table in ((agent.actor, [0.0, 0.0, 0.0]), (agent.q1_target, [1.0, 2.0, 3.0]),
                           (agent.q2_target, [3.0, 0.0, 3.0])):
            net.body[0].weight.zero_()
            net.body[0].bias.copy_(torch.tensor(table))
    o = np.zeros(2, np.float32)
    for r, te, tr in [(1.0, False, False), (1.0, True, False), (1.0, False, True)]:
        agent.observe(Transition(o, np.array([0]), r, o, te, tr))
    logp = finite_log_probs(agent.actor(torch.from_numpy(o)[None]))
    v = agent.soft_value(logp, torch.tensor([[[1.0, 0.0, 3.0]]]), agent.alpha).item()  # elementwise min
    assert v == pytest.approx(4.0 / 3.0 + agent.alpha * math.log(3.0))
    y = agent.targets(agent.get_batch([0, 1, 2]))
    torch.testing.assert_close(y, torch.tensor([1.0 + 0.9 * v, 1.0, 1.0 + 0.9 * v]))


def test_truncation_bootstraps_infinite_horizon_value():
    """Reward 1 every step, gamma 0.9, truncated every 10 steps: with a negligible temperature Q = 10."""
    env = gym.make("lcpo/ContinuingChain-v0", n_states=5)
    agent = SAC(env, seed=0, gamma=0.9, hidden=(32, 32), critic_lr=3e-3, batch_size=64, tau=0.05,
                learning_starts=100, train_every=1, auto_entropy=False, alpha_init=1e-6)
    agent.learn(2500, reset_condition="every:10")
    with torch.no_grad():
        q = torch.stack([agent.q1(torch.eye(5)), agent.q2(torch.eye(5))]).numpy()
    assert agent.reward_scale > 1.5  # critics learn in the return normaliser's units
    np.testing.assert_allclose(q * agent.reward_scale, 10.0, atol=0.7)


def test_learns_context_bandit():
    env = ContextBandit(n_states=2, dims=2, bins=3)
    agent = SAC(env, seed=1, hidden=(32,), actor_lr=3e-3, critic_lr=3e-3, batch_size=64, learning_starts=100,
                train_every=1, tau=0.05)
    agent.learn(1500)
    for s in range(2):
        o = np.eye(2, dtype=np.float32)[s]
        np.testing.assert_array_equal(agent.act(o, deterministic=True), env.best_action(s))


def test_save_load_gives_identical_actions_and_continuation(tmp_path):
    env = gym.make("lcpo/WindyPendulum-v0", trace="wind-3")
    agent = SAC(env, seed=3, **SMALL).learn(500)
    agent.save(tmp_path / "a")
    twin = SAC.load(tmp_path / "a", gym.make("lcpo/WindyPendulum-v0", trace="wind-3"))
    assert twin.replay.total_added == 500 and twin.alpha == agent.alpha
    obs = np.random.default_rng(0).normal(size=(300, 9)).astype(np.float32)  # crosses a noise refill
    for o in obs:
        np.testing.assert_array_equal(agent.act(o), twin.act(o))
        np.testing.assert_array_equal(agent.act(o, deterministic=True), twin.act(o, deterministic=True))
    b1, b2 = agent.sample_batch(8), twin.sample_batch(8)
    agent.update(b1)
    twin.update(b2)
    nets = ("actor", "q1", "q2", "q1_target", "q2_target")
    for p, q in zip([p for n in nets for p in getattr(agent, n).parameters()],
                    [p for n in nets for p in getattr(twin, n).parameters()]):
        assert torch.equal(p, q)
    assert agent.alpha == twin.alpha


def test_interrupted_and_resumed_run_equals_uninterrupted(tmp_path):
    cfg = RunConfig(trace="wind-3", trace_length=20_000, agent="sac", steps=1200, seed=4, checkpoint_every=400,
                    overrides={**SMALL, "train_every": 2})
    full = execute(cfg, tmp_path / "full")
    assert execute(cfg, tmp_path / "part", stop_at=800) == {"interrupted_at": 800}
    resumed = execute(cfg, tmp_path / "part")
    assert comparable(resumed, "resumed_from") == comparable(full, "resumed_from")
    assert (tmp_path / "part" / "episodes.csv").read_text() == (tmp_path / "full" / "episodes.csv").read_text()
    diag = [pd.read_csv(tmp_path / d / "diagnostics.csv") for d in ("part", "full")]
    pd.testing.assert_frame_equal(diag[0].sort_index(axis=1), diag[1].sort_index(axis=1))


def test_bad_hyperparameters_are_named():
    env = ContextBandit()
    with pytest.raises(ValueError, match="unknown hyperparameter 'alpha'"):
        SAC(env, alpha=0.1)
    with pytest.raises(ValueError, match="alpha_init"):
        SAC(env, alpha_init=0.0)
    with pytest.raises(ValueError, match="gamma"):
        SAC(env, gamma=1.5)
