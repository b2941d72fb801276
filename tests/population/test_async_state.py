"""A user's ``TimeLimit`` env on Gymnasium's AsyncVectorEnv in checkpoints (issue 24 item 2 / issue 26 item 2
follow-up): the wrappers' state of every sub-env (the TimeLimit's step counter) is saved and restored inside the
workers through ``AsyncVectorEnv.call`` / ``set_attr``, so a population stopped mid-episode resumes exactly; a
user's own AsyncVectorEnv, whose workers' wrappers cannot be reached, is refused in one line before any step or
file. Every AsyncVectorEnv is closed (its worker processes reaped)."""

from __future__ import annotations

import multiprocessing
import sys

import gymnasium as gym
import numpy as np
import pytest

from lcpo.envs.vector import VectorStream, make_vector_env
from lcpo.online.population import PopulationLoop, execute_population
from lcpo.online.run import RunConfig

# Drift has no time limit of its own: Gymnasium's TimeLimit (max_episode_steps=50, from the registration) ends
# its episodes, and the reward depends on the environment's own step counter, so an episode of the wrong length
# changes the returns. Two vector entry points: lcpo's AsyncVectorEnv (exact), and a user's own (refused).
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


def lcpo_async(num_envs=2):
    from lcpo.envs.vector import make_vector_env

    return make_vector_env("byo_async:byo_async-v0", [{}] * num_envs, mode="async")


class OwnAsync(gym.vector.AsyncVectorEnv):
    def __init__(self, num_envs=2):
        super().__init__([lambda: gym.make("byo_async-v0") for _ in range(num_envs)],
                         autoreset_mode=gym.vector.AutoresetMode.DISABLED)


gym.register("byo_async-v0", entry_point=Drift, max_episode_steps=50)
gym.register("byo_async_vec-v0", entry_point=None, vector_entry_point=lcpo_async)
'''

ENV = "byo_async:byo_async-v0"
LIMIT = 50


@pytest.fixture
def user_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the workers are forked from here: they import the module the same way
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    (tmp_path / "byo_async.py").write_text(MODULE)
    __import__("byo_async")
    yield tmp_path
    assert multiprocessing.active_children() == []  # every AsyncVectorEnv closed: its workers reaped
    sys.modules.pop("byo_async", None)
    for name in ("byo_async-v0", "byo_async_vec-v0"):
        gym.registry.pop(name, None)


class Follow:
    """Acts on the observation (so a different state shows in the actions) and keeps every transition."""

    def __init__(self, n):
        self.transitions = [[] for _ in range(n)]

    def act_batch(self, obs):
        return (obs[:, 0] < obs[:, 1]).astype(np.int64)

    def observe_batch(self, obs, actions, rewards, next_obs, terminated, truncated, infos):
        for k in range(obs.shape[0]):
            self.transitions[k].append((obs[k].tolist(), int(actions[k]), float(rewards[k]), next_obs[k].tolist(),
                                        bool(terminated[k]), bool(truncated[k])))
        return [None] * obs.shape[0]


def _loop(mode, seeds=(3, 8)):
    stream = VectorStream(make_vector_env(ENV, [{} for _ in seeds], mode=mode))
    agents = Follow(len(seeds))
    return PopulationLoop(stream, agents, ["end"] * len(seeds), list(seeds)), agents


def test_async_population_stopped_mid_episode_resumes_to_the_uninterrupted_run(user_env):
    full, full_agents = _loop("async")
    half, _ = _loop("async")
    again, again_agents = _loop("async")
    sync, _ = _loop("sync")
    try:
        full.run(130)
        half.run(75)  # 25 steps into the second 50-step episode
        sync.run(75)
        state = half.state_dict()
        for k, seed_state in enumerate(state["seeds"]):
            limit = [w for w in seed_state["wrappers"] if w["wrapper"].endswith(".TimeLimit")]
            assert limit == [{"wrapper": "gymnasium.wrappers.common.TimeLimit",
                              "state": {"_max_episode_steps": LIMIT, "_elapsed_steps": 75 - LIMIT}}]
            # the workers' answer is the SyncVectorEnv's, wrapper by wrapper
            assert seed_state["wrappers"] == sync.state_dict()["seeds"][k]["wrappers"]
        again.load_state_dict(state)
        again.run(130)
        assert again.episodes == full.episodes
        assert [[r[3] for r in eps] for eps in full.episodes] == [[LIMIT, LIMIT]] * 2  # episode lengths
        for k in range(2):
            assert again_agents.transitions[k] == full_agents.transitions[k][75:]
            ends = [i for i, t in enumerate(full_agents.transitions[k]) if t[5]]
            assert ends == [LIMIT - 1, 2 * LIMIT - 1]  # truncated by the TimeLimit, on its 50th step
    finally:
        for loop in (full, half, again, sync):
            loop.stream.close()


def test_async_restore_refuses_a_different_time_limit_before_touching_the_env(user_env):
    half, _ = _loop("async")
    other = VectorStream(make_vector_env(ENV, [{"max_episode_steps": 30}] * 2, mode="async"))
    try:
        half.run(10)
        states = half.stream.get_state()
        other.reset([3, 8])
        with pytest.raises(ValueError, match="sub-environment 0: cannot resume: the environment's TimeLimit has "
                                             "max_episode_steps=30, the checkpoint's 50"):
            other.set_state(states)
        after = other.venv.call("lcpo_get_state")  # the workers are alive, and nothing is half-written:
        assert [a["env"]["t"] for a in after] == [0, 0]
        assert [[w["state"] for w in a["wrappers"] if w["wrapper"].endswith("TimeLimit")] for a in after] == \
            [[{"_max_episode_steps": 30, "_elapsed_steps": 0}]] * 2
    finally:
        half.stream.close()
        other.close()


def _cfg(env, seed, **kw):
    return RunConfig(env=env, agent="a2c", steps=130, seed=seed, checkpoint_every=75, diagnostics_every=100,
                     overrides={"hidden": [8], "rollout_steps": 25}, **kw)


def test_user_vector_env_on_lcpo_async_resumes_exactly_from_a_stop(user_env, tmp_path):
    """`--env byo_async:byo_async_vec-v0`: the user's registered vector env is lcpo's AsyncVectorEnv."""
    env = "byo_async:byo_async_vec-v0"
    cfgs = [_cfg(env, s) for s in (0, 1)]
    full = execute_population(cfgs, [tmp_path / f"full{s}" for s in (0, 1)])
    outs = [tmp_path / f"cut{s}" for s in (0, 1)]
    assert execute_population(cfgs, outs, stop_at=75) == [{"interrupted_at": 75}] * 2
    resumed = execute_population(cfgs, outs)
    for s, a, b in zip((0, 1), resumed, full):
        assert a["resumed_from"] == [75] and a["lifelong_return"] == b["lifelong_return"]
        assert a["episodes"] == b["episodes"] == 2
        assert (tmp_path / f"cut{s}" / "episodes.csv").read_text() == (tmp_path / f"full{s}" /
                                                                        "episodes.csv").read_text()


def test_users_own_async_vector_env_is_refused_before_any_step_or_file(user_env, tmp_path):
    cfgs = [_cfg("byo_async:OwnAsync", s) for s in (0, 1)]
    outs = [tmp_path / f"own{s}" for s in (0, 1)]
    with pytest.raises(ValueError) as err:
        execute_population(cfgs, outs)
    msg = str(err.value)
    assert "\n" not in msg and "'byo_async:OwnAsync' is a user's AsyncVectorEnv" in msg and "mode='sync'" in msg
    assert not any(o.exists() for o in outs)
    stream = VectorStream(gym.make_vec("byo_async-v0", num_envs=2, vectorization_mode="async",
                                       vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.DISABLED}))
    try:
        stream.reset([0, 1])
        with pytest.raises(TypeError, match="is a user's AsyncVectorEnv"):
            stream.get_state()
        stream.step(np.array([0, 1]))  # refused without a call into the workers: they still step
    finally:
        stream.close()


def test_sync_restore_refuses_a_different_time_limit_before_touching_any_sub_env(user_env):
    """A SyncVectorEnv restore whose second sub-env's TimeLimit differs: refused in one line naming it, and the
    first sub-env (whose wrappers fit) is not written either (it was before: env state set, then refused)."""
    half, _ = _loop("sync")
    other = VectorStream(gym.vector.SyncVectorEnv([lambda: gym.make(ENV), lambda: gym.make(ENV, max_episode_steps=30)],
                                                  autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP))
    try:
        half.run(10)
        states = half.stream.get_state()
        other.reset([3, 8])
        before = [(e.unwrapped.t, e.unwrapped.x) for e in other.venv.envs]
        with pytest.raises(ValueError, match="sub-environment 1: cannot resume: the environment's TimeLimit has "
                                             "max_episode_steps=30, the checkpoint's 50"):
            other.set_state(states)
        assert [(e.unwrapped.t, e.unwrapped.x) for e in other.venv.envs] == before
        assert [e._elapsed_steps for e in other.venv.envs] == [0, 0]
    finally:
        half.stream.close()
        other.close()
