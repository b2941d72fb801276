"""Tests for lcpo/ContinuingChain-v0, the continuing example task with a known value function."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import lcpo.envs  # noqa: F401  (registers the ids)
from lcpo.envs import get_context_spec
from lcpo.envs.chain import ContinuingChainEnv


def test_passes_gymnasium_env_checker():
    check_env(ContinuingChainEnv(), skip_render_check=True)
    check_env(ContinuingChainEnv(n_states=3, max_episode_steps=4), skip_render_check=True)
    env = gym.make("lcpo/ContinuingChain-v0", n_states=4)
    assert isinstance(env.unwrapped, ContinuingChainEnv) and env.unwrapped.n_states == 4
    check_env(env.unwrapped, skip_render_check=True)


def test_cycle_reward_and_no_termination():
    env = ContinuingChainEnv(n_states=5, reward=2.5)
    obs, info = env.reset(seed=0)
    assert obs.dtype == np.float32 and obs.tolist() == [1, 0, 0, 0, 0] and info["state"] == 0
    for t in range(1, 10_001):
        a = t % 2
        obs, r, term, trunc, info = env.step(a)
        assert r == 2.5 and not term and not trunc
        assert info["state"] == t % 5 and obs.argmax() == t % 5 and obs.sum() == 1.0


def test_actions_do_not_matter():
    a, b = ContinuingChainEnv(n_states=3), ContinuingChainEnv(n_states=3)
    a.reset(seed=1, options={"state": 2})
    b.reset(seed=2, options={"state": 2})
    for _ in range(7):
        ra, rb = a.step(0), b.step(1)
        np.testing.assert_array_equal(ra[0], rb[0])
        assert ra[1:4] == rb[1:4]


def test_truncation_only_with_a_time_limit_and_next_obs_is_real():
    env = ContinuingChainEnv(n_states=5, max_episode_steps=10)
    env.reset(seed=0)
    flags = [env.step(0) for _ in range(10)]
    assert [f[3] for f in flags] == [False] * 9 + [True]
    assert not any(f[2] for f in flags)
    assert flags[-1][0].argmax() == 10 % 5  # the state actually reached, not a reset state
    env.reset()
    assert not env.step(0)[3]  # the counter restarts at reset


@pytest.mark.parametrize("gamma", [0.0, 0.5, 0.9])
def test_value_function_matches_simulated_discounted_return(gamma):
    env = ContinuingChainEnv(n_states=4, reward=1.5)
    expected = env.value_function(gamma)
    np.testing.assert_allclose(expected, 1.5 / (1 - gamma))
    for s in range(4):
        env.reset(options={"state": s})
        ret, disc = 0.0, 1.0
        for _ in range(400):  # gamma**400 < 1e-18
            ret += disc * env.step(1)[1]
            disc *= gamma
        assert ret == pytest.approx(expected[s], rel=1e-12)


def test_get_set_state_round_trip():
    env = ContinuingChainEnv(n_states=5, max_episode_steps=7)
    env.reset(seed=3)
    for _ in range(4):
        env.step(0)
    state = env.get_state()
    later = [env.step(1) for _ in range(5)]
    other = ContinuingChainEnv(n_states=5, max_episode_steps=7)
    other.reset(seed=99)
    other.set_state(state)
    again = [other.step(1) for _ in range(5)]
    for x, y in zip(later, again):
        np.testing.assert_array_equal(x[0], y[0])
        assert x[1:4] == y[1:4]
    assert other.np_random.bit_generator.state == env.np_random.bit_generator.state
    with pytest.raises(ValueError, match="state"):
        other.set_state({"state": 9, "elapsed": 0, "np_random": state["np_random"]})


def test_declares_no_context_and_rejects_bad_arguments():
    env = ContinuingChainEnv()
    assert env.context_spec is None
    with pytest.raises(AttributeError, match="context_spec"):
        get_context_spec(env)
    with pytest.raises(ValueError, match="n_states"):
        ContinuingChainEnv(n_states=0)
    with pytest.raises(ValueError, match="'n_states' must be an integer >= 1, got true$"):  # JSON's word (was True)
        ContinuingChainEnv(n_states=True)
    with pytest.raises(ValueError, match="reward"):
        ContinuingChainEnv(reward=float("nan"))
    with pytest.raises(ValueError, match="max_episode_steps"):
        ContinuingChainEnv(max_episode_steps=0)
    with pytest.raises(ValueError, match="state"):
        env.reset(options={"state": 5})
    env.reset()
    with pytest.raises(ValueError, match="action"):
        env.step(2)
    with pytest.raises(ValueError, match="gamma"):
        env.value_function(1.0)
