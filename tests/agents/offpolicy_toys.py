"""Small environments for the off-policy agent tests (a contextual bandit with a known best action)."""

import gymnasium as gym
import numpy as np


class ContextBandit(gym.Env):
    """One-step episodes: observe a one-hot state ``s`` in {0, .., n-1}; action ``(D,)`` bins of ``K``.

    Reward: the fraction of dimensions ``d`` with ``a_d == (s + d) % K`` (1.0 for the best action, in [0, 1]).
    Every step terminates (no bootstrapping), so the optimal Q-value of the best action is 1.
    """

    def __init__(self, n_states: int = 2, dims: int = 2, bins: int = 3):
        self.n, self.dims, self.bins = n_states, dims, bins
        self.observation_space = gym.spaces.Box(0.0, 1.0, (n_states,), dtype=np.float32)
        self.action_space = gym.spaces.MultiDiscrete([bins] * dims)
        self._s = 0

    def best_action(self, s: int) -> np.ndarray:
        return (s + np.arange(self.dims)) % self.bins

    def _obs(self):
        o = np.zeros(self.n, dtype=np.float32)
        o[self._s] = 1.0
        return o

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._s = int(self.np_random.integers(self.n))
        return self._obs(), {}

    def step(self, action):
        r = float(np.mean(np.asarray(action) == self.best_action(self._s)))
        return self._obs(), r, True, False, {}
