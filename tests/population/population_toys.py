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
