"""Wrapper state in checkpoints (issue 24 item 2): a user's env registered with ``max_episode_steps`` (a
``TimeLimit``) resumes and extends exactly; a wrapper whose state lcpo cannot save is refused up front, named."""

from __future__ import annotations

import sys

import gymnasium as gym
import pandas as pd
import pytest

from faults import Crash, FileFaults
from lcpo.cli.main import main
from lcpo.envs.registration import make_env
from lcpo.envs.wrapper_state import load_wrappers_state, unsaved_wrappers, wrappers_state
from lcpo.online.run import RunConfig, execute
from lcpo.persistence.checkpoint import RunCheckpoints

# A user's environment without a time limit of its own: Gymnasium's TimeLimit (max_episode_steps=50) ends its
# episodes. The reward depends on the global step, so an episode of the wrong length has a different return.
MODULE = '''
import gymnasium as gym
import numpy as np


class Drift(gym.Env):
    metadata = {"continuing": False}

    def __init__(self):
        self.observation_space = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t, self.x = 0, 0.0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0 if seed is not None else self.t
        self.x = float(self.np_random.uniform(-1, 1))
        return np.array([self.x, np.sin(self.t / 7.0)], np.float32), {}

    def step(self, action):
        self.t += 1
        self.x = float(np.clip(self.x + (0.1 if action else -0.1) + 0.05 * self.np_random.standard_normal(), -5, 5))
        reward = -abs(self.x - np.sin(self.t / 7.0))
        return np.array([self.x, np.sin(self.t / 7.0)], np.float32), reward, False, False, {}

    def get_state(self):
        return {"t": self.t, "x": self.x, "rng": self.np_random.bit_generator.state}

    def set_state(self, s):
        self.t, self.x, self.np_random.bit_generator.state = int(s["t"]), float(s["x"]), s["rng"]


def with_statistics():
    return gym.wrappers.RecordEpisodeStatistics(gym.wrappers.TimeLimit(Drift(), 50))


gym.register("byo_tl-v0", entry_point=Drift, max_episode_steps=50)
'''

ENV = "byo_tl:byo_tl-v0"


@pytest.fixture
def user_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "byo_tl.py").write_text(MODULE)
    yield tmp_path
    sys.modules.pop("byo_tl", None)
    gym.registry.pop("byo_tl-v0", None)


def _cfg(steps, **kw):
    return RunConfig(env=ENV, agent="a2c", steps=steps, seed=1, checkpoint_every=70, diagnostics_every=100,
                     **kw)


def _episodes(folder):
    return pd.read_csv(folder / "episodes.csv")


def test_timelimit_counter_is_in_the_checkpoint_and_restored(user_env):
    env = make_env(ENV)
    assert unsaved_wrappers(env) == []
    env.reset(seed=0)
    for _ in range(17):
        env.step(0)
    saved = wrappers_state(env)
    assert {"wrapper": "gymnasium.wrappers.common.TimeLimit",
            "state": {"_max_episode_steps": 50, "_elapsed_steps": 17}} in saved
    other = make_env(ENV)
    other.reset(seed=0)
    load_wrappers_state(other, saved)
    truncated = [other.step(0)[3] for _ in range(33)]
    assert truncated == [False] * 32 + [True]  # the 50th step of the episode, counted across the restore


def test_killed_run_resumes_with_the_episode_lengths_and_returns_of_the_uninterrupted_run(user_env, monkeypatch):
    """The process dies while the step-140 checkpoint is written; it resumes from step 70, 20 steps into an
    episode. Before the fix the TimeLimit counter restarted at 0 there: one 70-step episode and another return."""
    import os

    monkeypatch.setattr(os, "fsync", lambda fd: None)
    cfg = _cfg(300)
    full = execute(cfg, user_env / "full")
    assert set(_episodes(user_env / "full")["length"]) == {50}
    out = user_env / "cut"
    faults = FileFaults(monkeypatch, crash_at=1)
    real = RunCheckpoints.commit

    def commit(self, step, state, config):
        if step == 140:
            faults.arm()
        return real(self, step, state, config)

    monkeypatch.setattr(RunCheckpoints, "commit", commit)
    with pytest.raises(Crash):
        execute(cfg, out)
    faults.disarm()
    monkeypatch.setattr(RunCheckpoints, "commit", real)
    resumed = execute(cfg, out)
    assert resumed["resumed_from"] == [70]
    pd.testing.assert_frame_equal(_episodes(out), _episodes(user_env / "full"))
    assert resumed["lifelong_return"] == full["lifelong_return"]


def test_extended_finished_run_equals_the_uninterrupted_run(user_env):
    """A run that finished at step 120 (20 steps into its third episode), extended to 300."""
    full = execute(_cfg(300), user_env / "full")
    out = user_env / "ext"
    execute(_cfg(120), out)
    extended = execute(_cfg(300), out)
    assert extended["resumed_from"] == [120]
    pd.testing.assert_frame_equal(_episodes(out), _episodes(user_env / "full"))
    assert extended["lifelong_return"] == full["lifelong_return"]


def test_a_wrapper_whose_state_is_not_saved_is_refused_before_the_run_naming_it(user_env, capsys):
    argv = ["run", "--no-progress", "--env", "byo_tl:with_statistics", "--agent", "a2c", "--steps", "100",
            "--out", "runs"]
    assert main(argv + ["--checkpoint-every", "50"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "RecordEpisodeStatistics" in err and "--checkpoint-every 0" in err
    assert not (user_env / "runs").exists()
    assert main(argv + ["--checkpoint-every", "0"]) == 0


@pytest.mark.parametrize("population", [False, True], ids=["single", "population"])
def test_the_library_refuses_an_unsaved_wrapper_before_the_first_step(user_env, monkeypatch, population):
    """``execute`` and ``execute_population`` (no CLI preflight) refuse checkpoints of an env whose wrapper
    state would be lost, in one line naming the wrapper, before any step (the loops' ``run`` is never called)
    and leaving no folder behind. Before, the refusal came at the first checkpoint, 50 steps in (a TypeError)."""
    from lcpo.online.loop import OnlineLoop
    from lcpo.online.population import PopulationLoop, execute_population

    def no_step(self, until_step):
        raise AssertionError("a step was taken before the refusal")

    monkeypatch.setattr(OnlineLoop, "run", no_step)
    monkeypatch.setattr(PopulationLoop, "run", no_step)
    cfgs = [RunConfig(env="byo_tl:with_statistics", agent="a2c", steps=100, seed=s, checkpoint_every=50)
            for s in (1, 2)]
    outs = [user_env / "runs" / f"s{s}" for s in (1, 2)]
    with pytest.raises(ValueError) as info:
        if population:
            execute_population(cfgs, outs)
        else:
            execute(cfgs[0], outs[0])
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("environment 'byo_tl:with_statistics' cannot be checkpointed: its "
                                              "wrapper(s) gymnasium.wrappers.common.RecordEpisodeStatistics hold")
    assert not (user_env / "runs").exists()


def test_a_wrapper_with_its_own_state_methods_is_saved():
    class Counting(gym.Wrapper):
        def __init__(self, env):
            super().__init__(env)
            self.n = 0

        def step(self, action):
            self.n += 1
            return self.env.step(action)

        def get_state(self):
            return {"n": self.n}

        def set_state(self, state):
            self.n = int(state["n"])

    env = Counting(gym.make("CartPole-v1"))
    env.reset(seed=0)
    env.step(0)
    env.step(1)
    assert unsaved_wrappers(env) == []
    other = Counting(gym.make("CartPole-v1"))
    other.reset(seed=0)
    load_wrappers_state(other, wrappers_state(env))
    assert other.n == 2 and other.env._elapsed_steps == 2
    with pytest.raises(ValueError, match="wrappers .* differ"):
        load_wrappers_state(gym.make("CartPole-v1"), wrappers_state(env))


def test_population_of_a_timelimit_env_stopped_mid_episode_resumes_as_uninterrupted(user_env):
    """Two seeds of the user's TimeLimit env as one population (a SyncVectorEnv of gym.make'd sub-envs): stopped
    at step 140 (40 steps into an episode) and resumed, each seed's episodes (all 50 steps long) and return equal
    the uninterrupted population's. Without the sub-envs' wrapper state the counter restarts at 0 on resume."""
    from lcpo.online.population import execute_population

    cfgs = [RunConfig(env=ENV, agent="a2c", steps=300, seed=s, checkpoint_every=70, diagnostics_every=100)
            for s in (1, 2)]
    full = execute_population(cfgs, [user_env / f"full{s}" for s in (1, 2)])
    cut = [user_env / f"cut{s}" for s in (1, 2)]
    assert execute_population(cfgs, cut, stop_at=140) == [{"interrupted_at": 140}] * 2
    resumed = execute_population(cfgs, cut)
    for s, r, f in zip((1, 2), resumed, full):
        assert set(_episodes(user_env / f"cut{s}")["length"]) == {50}
        pd.testing.assert_frame_equal(_episodes(user_env / f"cut{s}"), _episodes(user_env / f"full{s}"))
        assert r["lifelong_return"] == f["lifelong_return"]


def test_single_run_restore_with_a_different_time_limit_changes_nothing(user_env):
    """OnlineLoop.load_state_dict checks the wrappers before resetting or writing the env: a refused restore
    leaves the env's own state (t, x) and its TimeLimit counter as they were."""
    from lcpo.online.loop import OnlineLoop

    class Still:
        def act(self, obs):
            return 0

        def observe(self, *args, **kwargs):
            return None

    loop = OnlineLoop(make_env(ENV), Still(), seed=1)
    loop.run(17)
    state = loop.state_dict()
    other = OnlineLoop(make_env(ENV, max_episode_steps=30), Still(), seed=2)
    other.run(5)
    before = (other.env.unwrapped.t, other.env.unwrapped.x, other.env._elapsed_steps, other.steps)
    with pytest.raises(ValueError, match="TimeLimit has max_episode_steps=30, the checkpoint's 50"):
        other.load_state_dict(state)
    assert (other.env.unwrapped.t, other.env.unwrapped.x, other.env._elapsed_steps, other.steps) == before
