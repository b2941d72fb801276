"""Sliding OGD on SAC: the basis stays orthonormal and the projection orthogonal over many insertions, the window
slides, the agent's actor steps are orthogonal to its stored directions, persistence and resume equality."""

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import torch
from cl_checks import check_resume_equality

import lcpo.envs  # noqa: F401
from lcpo.agents import AGENTS
from lcpo.agents.ogd import OGD, SlidingBasis
from lcpo.online.run import RunConfig, execute


@pytest.fixture(autouse=True)
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


SMALL = {"hidden": [16, 16], "train_every": 1, "batch_size": 32, "buffer_size": 2000, "learning_starts": 100}


def test_registry_lists_ogd():
    assert AGENTS["ogd"] is OGD


def test_projection_orthogonal_to_every_direction_after_1000_insertions():
    rng = np.random.default_rng(0)
    dim = 300
    basis = SlidingBasis(dim, window=25)
    worst = 0.0
    for i in range(1000):
        d = rng.normal(size=(3, dim)) * 10.0 ** rng.uniform(-3, 3)
        d[2] = d[0] + 1e-9 * rng.normal(size=dim)  # nearly dependent on another of its group
        if i % 7 == 0:
            d[1] = basis.directions[0] if basis.directions.shape[0] else d[1]  # a repeat of a held direction
        basis.add(d)
        if i % 50 == 49 or i == 999:
            g = rng.normal(size=dim) * 100.0
            p = basis.project(g)
            worst = max(worst, float(np.abs(basis.directions @ p).max()))
            q = basis.basis
            np.testing.assert_allclose(q.T @ q, np.eye(q.shape[1]), atol=1e-12)
    assert worst < 1e-6
    assert len(basis.groups) == 25 and basis.directions.shape == (75, dim)
    # the projection keeps what is orthogonal and removes what lies in the span
    q = basis.basis
    v = rng.normal(size=dim)
    v_perp = v - q @ (q.T @ v)
    np.testing.assert_allclose(basis.project(v_perp), v_perp, atol=1e-10)
    np.testing.assert_allclose(basis.project(basis.directions[5]), 0.0, atol=1e-10)


def test_window_drops_the_oldest_group():
    basis = SlidingBasis(4, window=2)
    e = np.eye(4)
    for i in range(3):
        basis.add(e[i:i + 1] * 5.0)
    np.testing.assert_allclose(basis.directions, e[1:3])
    np.testing.assert_allclose(basis.project(np.ones(4)), [1.0, 0.0, 0.0, 1.0], atol=1e-15)
    with pytest.raises(ValueError, match="shape"):
        basis.add(np.ones((1, 3)))
    with pytest.raises(ValueError, match="non-finite"):
        basis.add(np.full((1, 4), np.nan))


def test_agent_actor_step_is_orthogonal_to_stored_directions():
    env = gym.make("lcpo/WindyPendulum-v0", trace="wind-3")
    agent = OGD(env, seed=0, **SMALL).learn(600)  # 3 episodes of 200 steps
    assert agent.basis.directions.shape[0] == 12 and agent.basis.basis.shape[1] == 12
    # stored directions are the normalised log-probability gradients of evenly spaced steps of the last episode
    b = agent.get_batch(np.array([400, 466, 533, 599]))
    assert len(agent.basis.groups) == 3
    g = agent.log_prob_gradients(b["obs"], b["actions"])
    np.testing.assert_allclose(agent.basis.groups[-1], g / np.linalg.norm(g, axis=1, keepdims=True), atol=1e-12)
    before = torch.nn.utils.parameters_to_vector(agent.actor.parameters()).detach().double().numpy()
    critic_before = torch.nn.utils.parameters_to_vector(agent.q1.parameters()).clone()
    agent.update(agent.sample_batch(32))
    delta = torch.nn.utils.parameters_to_vector(agent.actor.parameters()).detach().double().numpy() - before
    assert np.linalg.norm(delta) > 1e-4
    # float32 parameters: orthogonal up to the rounding of theta + delta
    assert np.abs(agent.basis.directions @ delta).max() < 1e-6
    assert not torch.equal(critic_before, torch.nn.utils.parameters_to_vector(agent.q1.parameters()))


def test_save_load_gives_identical_actions_and_continuation(tmp_path):
    env = gym.make("lcpo/WindyPendulum-v0", trace="wind-3")
    agent = OGD(env, seed=3, **SMALL).learn(500)
    agent.save(tmp_path / "a")
    twin = OGD.load(tmp_path / "a", gym.make("lcpo/WindyPendulum-v0", trace="wind-3"))
    np.testing.assert_array_equal(agent.basis.basis, twin.basis.basis)
    obs = np.random.default_rng(0).normal(size=(300, 9)).astype(np.float32)
    for o in obs:
        np.testing.assert_array_equal(agent.act(o), twin.act(o))
    agent.update(agent.sample_batch(8))
    twin.update(twin.sample_batch(8))
    for p, q in zip(agent.actor.parameters(), twin.actor.parameters()):
        assert torch.equal(p, q)


def test_interrupted_and_resumed_run_equals_uninterrupted(tmp_path):
    check_resume_equality(tmp_path, "ogd", {**SMALL, "train_every": 2}, steps=2000, stop_at=1100, checkpoint_every=500)
    diag = pd.read_csv(tmp_path / "full" / "diagnostics.csv")
    assert diag["train/ogd_rank"].max() > 0


def test_bad_hyperparameters_are_named():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    with pytest.raises(ValueError, match="ogd_episodes"):
        OGD(env, ogd_episodes=0)
    with pytest.raises(ValueError, match="directions_per_episode"):
        OGD(env, directions_per_episode=0)


@pytest.mark.slow
def test_runs_50k_steps_on_windy_pendulum(tmp_path):
    cfg = RunConfig(trace="wind-1", agent="ogd", steps=50_000, seed=0, checkpoint_every=0)
    summary = execute(cfg, tmp_path / "run")
    assert summary["steps"] == 50_000 and np.isfinite(summary["lifelong_return"])
