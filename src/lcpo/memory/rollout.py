"""On-policy rollout batch: preallocated arrays filled one transition per step."""

from __future__ import annotations

import numpy as np

__all__ = ["RolloutBuffer"]


class RolloutBuffer:
    """A fixed-size batch of consecutive transitions (A2C/LCPO: 200 steps; TRPO: 3,200).

    Arrays (``N`` = size): ``obs (N, obs_dim) float32``, ``actions (N, D) int64``, ``rewards (N,) float64``,
    ``next_obs (N, obs_dim) float32``, ``terminated (N,) bool``, ``truncated (N,) bool``,
    ``policy_mask (N,) bool`` (False for steps whose action was forced by the environment: they train the critic
    but not the policy), ``gammas (N,) float64`` (per-step discount; the agent's gamma unless the environment
    reports a time-dependent one in ``info["gamma"]``).

    Raises:
        OverflowError: when adding to a full buffer.
    """

    def __init__(self, size: int, obs_dim: int, action_dims: int):
        self.size = int(size)
        self.obs = np.zeros((self.size, obs_dim), dtype=np.float32)
        self.next_obs = np.zeros((self.size, obs_dim), dtype=np.float32)
        self.actions = np.zeros((self.size, action_dims), dtype=np.int64)
        self.rewards = np.zeros(self.size, dtype=np.float64)
        self.terminated = np.zeros(self.size, dtype=bool)
        self.truncated = np.zeros(self.size, dtype=bool)
        self.policy_mask = np.ones(self.size, dtype=bool)
        self.gammas = np.zeros(self.size, dtype=np.float64)
        self.ptr = 0

    @property
    def full(self) -> bool:
        """True once ``size`` transitions are stored."""
        return self.ptr >= self.size

    def add(self, obs, action, reward: float, next_obs, terminated: bool, truncated: bool,
            gamma: float, policy_mask: bool = True) -> None:
        """Store one transition at the next slot."""
        i = self.ptr
        if i >= self.size:
            raise OverflowError("rollout buffer is full; call reset() after the update")
        self.obs[i] = obs
        self.actions[i] = action
        self.rewards[i] = reward
        self.next_obs[i] = next_obs
        self.terminated[i] = terminated
        self.truncated[i] = truncated
        self.gammas[i] = gamma
        self.policy_mask[i] = policy_mask
        self.ptr = i + 1

    def reset(self) -> None:
        """Start a new batch (arrays are reused)."""
        self.ptr = 0

    _FIELDS = ("obs", "next_obs", "actions", "rewards", "terminated", "truncated", "policy_mask", "gammas")

    def state_dict(self) -> dict:
        """The filled part of the batch and the pointer (for an exact resume mid-rollout)."""
        return {"ptr": int(self.ptr), **{f: getattr(self, f)[: self.ptr].copy() for f in self._FIELDS}}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output."""
        self.ptr = int(state["ptr"])
        for f in self._FIELDS:
            getattr(self, f)[: self.ptr] = state[f]
