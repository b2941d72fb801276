"""Double DQN: the target on a hand-built batch, the exploration schedule, bootstrapping at truncation,
persistence, resume equality through runs, and a learning sanity check."""

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import torch
from offpolicy_toys import ContextBandit

import lcpo.envs  # noqa: F401
from lcpo.agents import AGENTS
from lcpo.agents.ddqn import DDQN, double_dqn_target
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

ONLINE = [[0.0, 5.0, 1.0], [2.0, 0.0, 0.0]]  # greedy bins (1, 0)
TARGET = [[10.0, 20.0, 30.0], [7.0, 8.0, 9.0]]  # own argmax (2, 2); at the online's picks: 20 and 7


def test_registry_lists_ddqn():
    assert AGENTS["ddqn"] is DDQN


def test_double_dqn_target_pure_function():
    qo = torch.tensor([ONLINE] * 3)
    qt = torch.tensor([TARGET] * 3)
    y = double_dqn_target(qo, qt, torch.tensor([1.0, 1.0, 2.0]), torch.tensor([1.0, 0.0, 1.0]), 0.9)
    # online picks bins (1, 0); the target values them 20 and 7; mean 13.5. Row 1 is terminal: reward only.
    torch.testing.assert_close(y, torch.tensor([1.0 + 0.9 * 13.5, 1.0, 2.0 + 0.9 * 13.5]))
    y_sum = double_dqn_target(qo, qt, torch.tensor([1.0, 1.0, 2.0]), torch.tensor([1.0, 0.0, 1.0]), 0.9, "sum")
    torch.testing.assert_close(y_sum, torch.tensor([1.0 + 0.9 * 27.0, 1.0, 2.0 + 0.9 * 27.0]))
    with pytest.raises(ValueError, match="both be"):
        double_dqn_target(qo, qt[:, :1], torch.ones(3), torch.ones(3), 0.9)


def _constant_q(agent, table):
    """Make the (single Linear layer) online Q-network output ``table`` for every observation."""
    (lin,) = agent.q.body
    with torch.no_grad():
        lin.weight.zero_()
        lin.bias.copy_(torch.tensor(table).reshape(-1))


def test_agent_target_on_hand_built_batch():
    """Online net picks, target net evaluates; zero after termination; bootstrap after truncation; info gamma."""
    env = ContextBandit(n_states=2, dims=2, bins=3)
    agent = DDQN(env, seed=0, hidden=(), learning_starts=1000, gamma=0.99, normalize_returns=False,
                 head_reduction="mean")  # the hand-computed v below is the mean over the two heads
    _constant_q(agent, ONLINE)
    with torch.no_grad():
        lin = agent.q_target.body[0]
        lin.weight.zero_()
        lin.bias.copy_(torch.tensor(TARGET).reshape(-1))
    o = np.array([1.0, 0.0], np.float32)
    a = np.array([0, 1])
    rows = [(1.0, False, False, None), (2.0, True, False, None), (3.0, False, True, None),
            (4.0, False, False, {"gamma": 0.5}), (5.0, True, True, None)]
    for r, te, tr, info in rows:
        assert agent.observe(Transition(o, a, r, o, te, tr, info)) is None
    y = agent.targets(agent.get_batch(np.arange(5)))
    v = 13.5  # a target that used the target net's own argmax would give mean(30, 9) = 19.5
    expected = torch.tensor([1 + 0.99 * v, 2.0, 3 + 0.99 * v, 4 + 0.5 * v, 5.0])
    torch.testing.assert_close(y, expected)


def test_epsilon_schedule():
    env = ContextBandit()
    agent = DDQN(env, seed=0, epoch_steps=10, random_epochs=2, decay_epochs=4, epsilon_final=0.1)
    for steps, eps in [(0, 1.0), (19, 1.0), (20, 1.0), (40, 0.55), (60, 0.1), (1000, 0.1)]:
        agent.steps = steps
        assert agent.epsilon == pytest.approx(eps)
    default = DDQN(env, seed=0)
    for steps, eps in [(199_999, 1.0), (200_000 + 500_000, 0.5), (1_200_000, 0.0), (1_600_000, 0.0)]:
        default.steps = steps
        assert default.epsilon == pytest.approx(eps)


def test_acting_greedy_at_epsilon_zero_and_uniform_at_one():
    env = ContextBandit(dims=2, bins=3)
    agent = DDQN(env, seed=0, hidden=(), random_epochs=0, decay_epochs=0)
    _constant_q(agent, ONLINE)
    agent._sync_fast()
    o = np.array([1.0, 0.0], np.float32)
    assert agent.epsilon == 0.0
    for _ in range(20):
        np.testing.assert_array_equal(agent.act(o), [1, 0])
    agent = DDQN(env, seed=0, hidden=())
    _constant_q(agent, ONLINE)
    agent._sync_fast()
    acts = np.array([agent.act(o) for _ in range(3000)])
    np.testing.assert_array_equal(agent.act(o, deterministic=True), [1, 0])
    freq = np.stack([np.bincount(acts[:, d], minlength=3) for d in range(2)]) / 3000
    np.testing.assert_allclose(freq, 1 / 3, atol=0.04)  # 4+ standard deviations


def test_truncation_bootstraps_infinite_horizon_value():
    """Reward 1 every step, gamma 0.9, truncated every 10 steps, never terminated: Q = 10 for every action.

    Treating the truncation as a termination would give values between 1 and 6.5 (about 5.3 on average). The
    Q-network learns in the return normaliser's units (rewards / scale), so Q * scale is compared with 10.
    """
    env = gym.make("lcpo/ContinuingChain-v0", n_states=5)
    agent = DDQN(env, seed=0, gamma=0.9, hidden=(32, 32), lr=3e-3, batch_size=64, tau=0.05, learning_starts=100,
                 train_every=1, random_epochs=0, decay_epochs=1, loss="mse")
    agent.learn(2500, reset_condition="every:10")
    with torch.no_grad():
        q = agent.q(torch.eye(5)).numpy()
    assert agent.reward_scale > 1.5  # the normaliser is on and the returns vary (1 ... 6.5)
    np.testing.assert_allclose(q * agent.reward_scale, 10.0, atol=0.7)


def test_learns_context_bandit():
    env = ContextBandit(n_states=2, dims=2, bins=3)
    agent = DDQN(env, seed=1, hidden=(32,), lr=3e-3, batch_size=64, learning_starts=100, epoch_steps=100,
                 train_every=1, random_epochs=1, decay_epochs=5, tau=0.05)
    agent.learn(1500)
    for s in range(2):
        o = np.eye(2, dtype=np.float32)[s]
        np.testing.assert_array_equal(agent.act(o, deterministic=True), env.best_action(s))
        with torch.no_grad():
            heads = agent.q(torch.from_numpy(o)[None])[0].max(-1).values  # best bin of each action dimension
            q_best = (heads.sum() if agent.hp.head_reduction == "sum" else heads.mean()).item()  # the joint Q
        assert q_best == pytest.approx(1.0, abs=0.15)


def test_save_load_gives_identical_actions_and_continuation(tmp_path):
    env = gym.make("lcpo/WindyPendulum-v0", trace="wind-3")
    agent = DDQN(env, seed=3, **SMALL, random_epochs=1, decay_epochs=2).learn(500)
    agent.save(tmp_path / "a")
    twin = DDQN.load(tmp_path / "a", gym.make("lcpo/WindyPendulum-v0", trace="wind-3"))
    assert twin.replay.total_added == 500 and twin.steps == 500 and twin.epsilon == agent.epsilon
    obs = np.random.default_rng(0).normal(size=(50, 9)).astype(np.float32)
    for o in obs:
        np.testing.assert_array_equal(agent.act(o), twin.act(o))
        np.testing.assert_array_equal(agent.act(o, deterministic=True), twin.act(o, deterministic=True))
    b1, b2 = agent.sample_batch(8), twin.sample_batch(8)
    for k in b1:
        assert torch.equal(b1[k], b2[k])
    agent.update(b1)
    twin.update(b2)
    for p, q in zip([*agent.q.parameters(), *agent.q_target.parameters()],
                    [*twin.q.parameters(), *twin.q_target.parameters()]):
        assert torch.equal(p, q)


def test_interrupted_and_resumed_run_equals_uninterrupted(tmp_path):
    cfg = RunConfig(trace="wind-3", trace_length=20_000, agent="ddqn", steps=1200, seed=4, checkpoint_every=400,
                    overrides={**SMALL, "random_epochs": 1, "decay_epochs": 2, "train_every": 2})
    full = execute(cfg, tmp_path / "full")
    assert execute(cfg, tmp_path / "part", stop_at=800) == {"interrupted_at": 800}
    resumed = execute(cfg, tmp_path / "part")
    assert comparable(resumed, "resumed_from") == comparable(full, "resumed_from")
    assert (tmp_path / "part" / "episodes.csv").read_text() == (tmp_path / "full" / "episodes.csv").read_text()
    diag = [pd.read_csv(tmp_path / d / "diagnostics.csv") for d in ("part", "full")]
    pd.testing.assert_frame_equal(diag[0].sort_index(axis=1), diag[1].sort_index(axis=1))


def test_bad_hyperparameters_are_named():
    env = ContextBandit()
    with pytest.raises(ValueError, match="unknown hyperparameter 'epsilon_end'"):
        DDQN(env, epsilon_end=0.1)
    with pytest.raises(ValueError, match="unknown DDQN loss 'l1'"):
        DDQN(env, loss="l1")
    with pytest.raises(ValueError, match="head reduction 'max'"):
        DDQN(env, head_reduction="max")
    with pytest.raises(ValueError, match="batch_size"):
        DDQN(env, batch_size=0)
    with pytest.raises(ValueError, match="non-finite reward"):
        DDQN(env).observe(Transition(np.zeros(2, np.float32), np.zeros(2, int), float("nan"),
                                     np.zeros(2, np.float32), False, False))
