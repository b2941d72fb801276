"""Tests for lcpo/TrapGrid-v0, the trap grid world of the paper's Figure 1."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import lcpo.envs  # noqa: F401  (registers the ids)
from lcpo.contexts import TraceError
from lcpo.envs import get_context_spec
from lcpo.envs.gridworld import (DECISION, DOWN, EXIT, LEFT, RIGHT, START, TRAP, UP, WALL, TrapGridEnv,
                                 cell_index)


def _cell(obs) -> int:
    assert obs.dtype == np.float32 and obs.shape == (10,) and obs[:9].sum() == 1.0
    return int(obs[:9].argmax())


def test_passes_gymnasium_env_checker_and_registration():
    check_env(TrapGridEnv(), skip_render_check=True)
    check_env(TrapGridEnv(trace=[0, 1, 1, 0], trace_unit="step"), skip_render_check=True)
    env = gym.make("lcpo/TrapGrid-v0", trace=[1, 0], time_limit=7)
    assert isinstance(env.unwrapped, TrapGridEnv) and env.unwrapped.max_episode_steps == 7
    assert isinstance(env.action_space, gym.spaces.Discrete) and env.action_space.n == 4
    check_env(env.unwrapped, skip_render_check=True)


def test_layout_constants():
    assert (START, EXIT, WALL, TRAP, DECISION) == (8, 2, 5, 4, 7)
    assert cell_index(2, 1) == DECISION


def test_value_iteration_gives_the_papers_optimal_returns():
    no_trap, trap = TrapGridEnv.optimal_values(False), TrapGridEnv.optimal_values(True)
    assert no_trap[START] == -3.0 and trap[START] == -5.0
    # the optimal first move from the decision cell: Up without the trap (-2), Left with it (-4)
    assert no_trap[DECISION] == -2.0 and trap[DECISION] == -4.0
    assert np.isnan(no_trap[WALL]) and no_trap[EXIT] == 0.0


@pytest.mark.parametrize("trap,path,rewards", [
    (0, (LEFT, UP, UP, RIGHT), [-1, -1, -1, 0]),
    (1, (LEFT, LEFT, UP, UP, RIGHT, RIGHT), [-1, -1, -1, -1, -1, 0]),
    (1, (LEFT, UP, UP, RIGHT), [-1, -10, -1, 0]),
])
def test_paths_rewards_and_termination(trap, path, rewards):
    env = TrapGridEnv(trace=[trap])
    obs, info = env.reset(seed=0)
    assert _cell(obs) == START and obs[9] == trap and info["context"].tolist() == [trap]
    got = []
    for i, a in enumerate(path):
        obs, r, term, trunc, info = env.step(a)
        got.append(r)
        assert term == (i == len(path) - 1) and not trunc and info["context"].tolist() == [float(trap)]
    assert got == rewards and _cell(obs) == EXIT


def test_walls_and_edges_block_moves():
    env = TrapGridEnv()
    obs, _ = env.reset(seed=0)
    for a in (UP, RIGHT, DOWN):  # the wall above the start, the right and bottom edges
        obs, r, *_ = env.step(a)
        assert _cell(obs) == START and r == -1.0


def test_truncates_at_the_time_limit():
    env = TrapGridEnv(max_episode_steps=20)
    env.reset(seed=0)
    for t in range(1, 21):
        _, r, term, trunc, _ = env.step(DOWN)
        assert not term and trunc == (t == 20)


def test_episode_schedule_one_value_per_episode_and_wraps():
    env = TrapGridEnv(trace=np.array([0, 1, 1])[:, None])
    zs = []
    obs, _ = env.reset(seed=3)
    zs.append(obs[9])
    for _ in range(4):
        env.step(DOWN)
        obs, _ = env.reset()
        zs.append(obs[9])
    assert zs == [0, 1, 1, 0, 1]
    obs, _ = env.reset(seed=1)
    assert obs[9] == 0
    obs, _ = env.reset(options={"trace_index": 2})
    assert obs[9] == 1 and env.reset()[0][9] == 0


def test_step_schedule_is_global_time_and_switches_mid_episode():
    env = TrapGridEnv(trace=[0, 0, 1, 1], trace_unit="step")
    obs, info = env.reset(seed=0)
    ctx = [info["context"][0]]
    seen = [obs[9]]
    for _ in range(3):
        obs, _, _, _, info = env.step(DOWN)
        ctx.append(info["context"][0]), seen.append(obs[9])
    # info: z applied in each step; obs: z of the next move
    assert ctx == [0, 0, 0, 1] and seen == [0, 0, 1, 1]
    obs, _ = env.reset()  # unseeded: global time continues (row 3, then wraps to 0)
    assert obs[9] == 1 and env.step(LEFT)[4]["context"][0] == 1 and env.step(UP)[0][9] == 0


def test_context_spec_declares_the_trap_entry():
    env = gym.make("lcpo/TrapGrid-v0")
    spec = get_context_spec(env)
    assert spec.indices == (9,) and spec.names == ("trap",)
    obs = np.stack([TrapGridEnv.observation_of(DECISION, z) for z in (False, True)])
    assert spec.select(obs)[:, 0].tolist() == [0.0, 1.0]
    assert TrapGridEnv.tabular_index(obs).tolist() == [DECISION, DECISION + 9]


def test_get_set_state_round_trip():
    env = TrapGridEnv(trace=[0, 1, 0, 1, 1], trace_unit="step")
    env.reset(seed=0)
    for a in (LEFT, UP, DOWN):
        env.step(a)
    state = env.get_state()
    expected = [env.step(a) for a in (LEFT, UP, UP, RIGHT)]
    other = TrapGridEnv(trace=[0, 1, 0, 1, 1], trace_unit="step")
    other.reset(seed=5)
    other.set_state(state)
    got = [other.step(a) for a in (LEFT, UP, UP, RIGHT)]
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(e[0], g[0])
        assert e[1:4] == g[1:4] and e[4]["context"].tolist() == g[4]["context"].tolist()
    with pytest.raises(ValueError, match="pos"):
        other.set_state(dict(state, pos=WALL))


@pytest.mark.parametrize("kwargs,err,match", [
    ({"trace": [0, 0.5]}, TraceError, "0.5 at row 1"),
    ({"trace": np.zeros((3, 2))}, TraceError, "one column"),
    ({"trace": [0, np.nan]}, TraceError, "non-finite"),
    ({"trace_unit": "epoch"}, ValueError, "'epoch'"),
    ({"trace_unit": None}, ValueError, "trace_unit must be 'episode' or 'step', got null$"),  # JSON's word (was None)
    ({"max_episode_steps": 0}, ValueError, "0"),
])
def test_bad_arguments_raise_naming_the_value(kwargs, err, match):
    with pytest.raises(err, match=match):
        TrapGridEnv(**kwargs)


def test_bad_action_raises():
    env = TrapGridEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="7"):
        env.step(7)


def test_schedule_from_a_file(tmp_path):
    from lcpo.contexts.io import save_trace
    from lcpo.contexts import ContextTrace

    path = tmp_path / "sched.npy"
    save_trace(ContextTrace(np.array([[1.0], [0.0]]), "sched"), path)
    env = TrapGridEnv(trace=str(path))
    assert env.reset(seed=0)[0][9] == 1 and env.reset()[0][9] == 0
    with pytest.raises(TraceError, match="one column"):
        TrapGridEnv(trace="wind-1")
