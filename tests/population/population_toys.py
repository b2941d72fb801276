"""Toy environments for population edge cases: observations tell the step within the episode and the episode
number, so the true final observation and the absence of transitions across a reset can be read off."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from lcpo.envs.context import ContextSpec


class EdgeEnv(gym.Env):
    """Episode step ``t`` and episode count ``e`` in the observation ``[t, e, ctx]``; reward ``t + 1``.

    Args:
        terminate_at: the episode terminates on its ``terminate_at``-th step (None: never).
        time_limit: truncation on the ``time_limit``-th step (None: none); with ``terminate_at`` equal, both
            flags are set on the same step.
    """

    metadata = {"continuing": False}

    def __init__(self, terminate_at: int | None = None, time_limit: int | None = None):
        self.terminate_at, self.time_limit = terminate_at, time_limit
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.context_spec = ContextSpec(indices=(2,), names=("ctx",), groups=((2,),))
        self.t, self.e, self.g = 0, -1, 0

    def _obs(self):
        return np.array([self.t, self.e, np.sin(self.g)], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.g = int(seed) * 100
            self.e = -1
        self.t, self.e = 0, self.e + 1
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.g += 1
        obs = self._obs()
        term = self.terminate_at is not None and self.t >= self.terminate_at
        trunc = self.time_limit is not None and self.t >= self.time_limit
        return obs, float(self.t + int(action)), bool(term), bool(trunc), {"context": obs[2:3].copy()}

    def get_state(self):
        return {"t": self.t, "e": self.e, "g": self.g}

    def set_state(self, s):
        self.t, self.e, self.g = int(s["t"]), int(s["e"]), int(s["g"])


class EdgeVectorEnv(gym.vector.VectorEnv):
    """A user's own vector env: ``num_envs`` :class:`EdgeEnv` s stepped in one call, NEXT_STEP autoreset
    (Gymnasium's default), no ``reset_mask``: the population must hide its autoreset step."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 2, time_limit: int = 5):
        self.num_envs = num_envs
        self.envs = [EdgeEnv(time_limit=time_limit) for _ in range(num_envs)]
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.context_spec = self.envs[0].context_spec
        self._pending = np.zeros(num_envs, dtype=bool)

    def reset(self, *, seed=None, options=None):
        seeds = seed if isinstance(seed, list) else [seed] * self.num_envs
        obs = np.stack([e.reset(seed=s)[0] for e, s in zip(self.envs, seeds)])
        self._pending[:] = False
        return obs, {}

    def step(self, actions):
        out = []
        for i, (e, a) in enumerate(zip(self.envs, actions)):
            if self._pending[i]:
                out.append((e.reset()[0], 0.0, False, False, {"context": np.zeros(1, np.float32)}))
            else:
                out.append(e.step(a))
        obs = np.stack([o[0] for o in out])
        term = np.array([o[2] for o in out])
        trunc = np.array([o[3] for o in out])
        self._pending = term | trunc
        return (obs, np.array([o[1] for o in out]), term, trunc,
                {"context": np.stack([o[4]["context"] for o in out]), "_context": np.ones(self.num_envs, bool)})

    def get_state(self):
        return [e.get_state() for e in self.envs]

    def set_state(self, states):
        for e, s in zip(self.envs, states):
            e.set_state(s)
