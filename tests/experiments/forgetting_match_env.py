"""A tiny context-driven environment with a known best action per context, for the planted-forgetting test.

Observation ``[c]`` (the context of the current trace row); action ``MultiDiscrete([3])``; reward 1 for action
0 when ``c < 0`` and for action 2 when ``c >= 0``, else 0; ``horizon`` steps per episode. The trace index
follows the windy environments' global-time rule (a seeded reset starts at row 0, one row per step, wrapping).
"""

import gymnasium as gym
import numpy as np

from lcpo.contexts.trace import ContextTrace
from lcpo.envs.context import ContextSpec


class MatchEnv(gym.Env):
    metadata = {"render_modes": [], "continuing": False}

    def __init__(self, trace=None, horizon: int = 10):
        values = np.asarray(trace.values if isinstance(trace, ContextTrace) else
                            np.array([[-1.0]]) if trace is None else trace, dtype=np.float64)
        self.trace = trace if isinstance(trace, ContextTrace) else ContextTrace(values, "match")
        self.values, self.horizon = values[:, 0], int(horizon)
        self.observation_space = gym.spaces.Box(-5.0, 5.0, (1,), np.float32)
        self.action_space = gym.spaces.MultiDiscrete([3])
        self.context_spec = ContextSpec(indices=(0,), names=("c",), groups=((0,),))
        self.index = self.t = 0

    def _obs(self):
        return np.array([self.values[self.index % len(self.values)]], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.index = 0
        self.t = 0
        return self._obs(), {"context": self._obs().astype(np.float64)}

    def step(self, action):
        c = self.values[self.index % len(self.values)]
        best = 0 if c < 0 else 2
        reward = 1.0 if int(np.asarray(action).reshape(-1)[0]) == best else 0.0
        self.index += 1
        self.t += 1
        return self._obs(), reward, False, self.t >= self.horizon, {"context": np.array([c])}
