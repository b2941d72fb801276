"""On-policy rollout batch: preallocated arrays filled one transition per step."""

from __future__ import annotations

import numpy as np

__all__ = ["RolloutBuffer", "SeedRollout"]


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


class SeedRollout:
    """Rollout batches of N seeds on a leading seed axis: seed ``k``'s batch is row ``k`` of every array.

    Arrays as :class:`RolloutBuffer`'s with a leading ``(N,)`` axis (``obs (N, size, obs_dim)``, ...); ``ptr``
    is ``(N,)`` int64, one fill pointer per seed (seeds fill in step but a seed's state may be loaded from a solo
    run mid-rollout). :meth:`seed` gives seed ``k``'s batch as a :class:`RolloutBuffer` whose arrays are views of
    row ``k`` (its ``add``/``state_dict`` read and write the stack).

    Args:
        n_seeds: N.
        size: transitions per batch.
        obs_dim: observation size.
        action_dims: action dimensions ``D``.
    """

    _FIELDS = RolloutBuffer._FIELDS

    def __init__(self, n_seeds: int, size: int, obs_dim: int, action_dims: int):
        self.n, self.size = int(n_seeds), int(size)
        self.obs = np.zeros((self.n, self.size, obs_dim), dtype=np.float32)
        self.next_obs = np.zeros((self.n, self.size, obs_dim), dtype=np.float32)
        self.actions = np.zeros((self.n, self.size, action_dims), dtype=np.int64)
        self.rewards = np.zeros((self.n, self.size), dtype=np.float64)
        self.terminated = np.zeros((self.n, self.size), dtype=bool)
        self.truncated = np.zeros((self.n, self.size), dtype=bool)
        self.policy_mask = np.ones((self.n, self.size), dtype=bool)
        self.gammas = np.zeros((self.n, self.size), dtype=np.float64)
        self.ptr = np.zeros(self.n, dtype=np.int64)
        self._rows = np.arange(self.n)
        self._views = [_SeedRolloutView(self, k) for k in range(self.n)]

    def add_batch(self, obs, actions, rewards, next_obs, terminated, truncated, gammas, policy_mask) -> None:
        """Store one transition per seed (``(N, ...)`` arrays) at each seed's next slot.

        Raises:
            OverflowError: if a seed's batch is full (naming the seed slot).
        """
        i = self.ptr
        if self.n == 1:  # one seed: basic indexing (the single agent's hot path)
            p = int(i[0])
            if p >= self.size:
                raise OverflowError("rollout buffer is full; call reset() after the update")
            self.obs[0, p] = obs[0]
            self.actions[0, p] = actions[0]
            self.rewards[0, p] = rewards[0]
            self.next_obs[0, p] = next_obs[0]
            self.terminated[0, p] = terminated[0]
            self.truncated[0, p] = truncated[0]
            self.gammas[0, p] = gammas[0]
            self.policy_mask[0, p] = policy_mask[0]
            i[0] = p + 1
            return
        p = int(i[0])
        if not np.count_nonzero(i != p):  # the seeds in lockstep (the usual case): basic indexing, one slot
            if p >= self.size:
                raise OverflowError("rollout of seed slot 0 is full; reset it first")
            self.obs[:, p] = obs
            self.actions[:, p] = actions
            self.rewards[:, p] = rewards
            self.next_obs[:, p] = next_obs
            self.terminated[:, p] = terminated
            self.truncated[:, p] = truncated
            self.gammas[:, p] = gammas
            self.policy_mask[:, p] = policy_mask
            i += 1
            return
        if np.count_nonzero(i >= self.size):
            raise OverflowError(f"rollout of seed slot {int(np.argmax(i >= self.size))} is full; reset it first")
        r = self._rows
        self.obs[r, i] = obs
        self.actions[r, i] = actions
        self.rewards[r, i] = rewards
        self.next_obs[r, i] = next_obs
        self.terminated[r, i] = terminated
        self.truncated[r, i] = truncated
        self.gammas[r, i] = gammas
        self.policy_mask[r, i] = policy_mask
        self.ptr += 1

    @property
    def full(self) -> np.ndarray:
        """``(N,)`` bool: the seeds whose batch holds ``size`` transitions."""
        return self.ptr >= self.size

    def reset(self, idx=None) -> None:
        """Start new batches for the seeds ``idx`` (None: all)."""
        if idx is None:
            self.ptr[:] = 0
        else:
            self.ptr[idx] = 0

    def seed(self, k: int) -> RolloutBuffer:
        """Seed ``k``'s batch as a :class:`RolloutBuffer` of views (single-agent interface and state format)."""
        return self._views[k]


class _SeedRolloutView(RolloutBuffer):
    """Row ``k`` of a :class:`SeedRollout` with the :class:`RolloutBuffer` interface (arrays are views)."""

    def __init__(self, parent: SeedRollout, k: int):  # noqa: D107 - no super().__init__: the arrays are views
        self._parent, self._k = parent, k
        self.size = parent.size
        for f in self._FIELDS:
            setattr(self, f, getattr(parent, f)[k])

    @property
    def ptr(self) -> int:  # type: ignore[override]
        """This seed's fill pointer."""
        return int(self._parent.ptr[self._k])

    @ptr.setter
    def ptr(self, value: int) -> None:
        self._parent.ptr[self._k] = int(value)
