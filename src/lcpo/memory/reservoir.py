"""Reservoir buffer: a uniform sample of every state seen so far (Vitter's Algorithm R; paper Algorithm 2)."""

from __future__ import annotations

import numpy as np

from lcpo.memory.budget import require_fits
from lcpo.persistence.checkpoint import check_generator_state

__all__ = ["ReservoirBuffer"]


class ReservoirBuffer:
    """Fixed-capacity uniform sample of a stream of observations.

    After ``n`` items have been offered to a buffer of capacity ``k``, every item is held with probability
    ``min(1, k / n)``: the first ``k`` items are stored; item ``i`` (0-based, ``i >= k``) replaces a uniformly
    chosen slot ``j = U{0..i}`` when ``j < k`` (Algorithm R). Memory is constant: one preallocated array.

    Args:
        capacity: ``k``, number of observations kept (paper: 1% of the run, 200K or 80K).
        obs_dim: observation size.
        rng: ``numpy.random.Generator`` used for replacement draws.
        dtype: storage dtype (float32).

    Raises:
        ValueError: on a non-positive capacity or ``obs_dim``, a buffer larger than this machine's memory
            or than what is left beside the buffers this process already holds (a population's other seeds;
            :func:`lcpo.memory.budget.require_fits`), or an observation batch of the wrong shape.
    """

    def __init__(self, capacity: int, obs_dim: int, rng: np.random.Generator, dtype=np.float32):
        if capacity < 1:
            raise ValueError(f"reservoir capacity must be >= 1, got {capacity}")
        if obs_dim < 1:
            raise ValueError(f"reservoir obs_dim must be >= 1, got {obs_dim}")
        self.capacity = int(capacity)
        self.obs_dim = int(obs_dim)
        require_fits(self.capacity * self.obs_dim * np.dtype(dtype).itemsize,
                     f"a reservoir of {self.capacity:,} states x {self.obs_dim}",
                     "reservoir_size (1% of the run's steps by default) or --steps", owner=self)
        self.rng = rng
        self.data = np.zeros((self.capacity, self.obs_dim), dtype=dtype)
        self.seen = 0

    def __len__(self) -> int:
        return min(self.seen, self.capacity)

    def add_batch(self, obs: np.ndarray) -> None:
        """Offer a batch ``(B, obs_dim)`` of observations (cast to the storage dtype), in stream order (equivalent
        to B single adds; Vitter 1985, Algorithm R; paper Algorithm 2).

        Raises:
            ValueError: if ``obs`` is not ``(B, obs_dim)`` (naming its shape) or has no numeric form (naming its
                dtype); the reservoir and its RNG are left as they were.
        """
        obs = np.asarray(obs)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise ValueError(f"reservoir expects (B, {self.obs_dim}) observations, got shape {obs.shape}")
        try:  # cast before the generator draws: a refused batch leaves the reservoir and its RNG as they were
            obs = obs.astype(self.data.dtype, copy=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"reservoir observations of dtype {obs.dtype} cannot be stored as {self.data.dtype} "
                             f"({exc})") from None
        B = obs.shape[0]
        n0, k = self.seen, self.capacity
        fill = max(0, min(B, k - n0))
        if fill:
            self.data[n0:n0 + fill] = obs[:fill]
        if fill < B:
            idx = np.arange(n0 + fill, n0 + B)  # global index i of each remaining item
            j = self.rng.integers(0, idx + 1)   # U{0..i}
            keep = j < k
            if keep.any():
                slots, src = j[keep], np.flatnonzero(keep) + fill
                # a later item overwrites an earlier one in the same slot: keep the last occurrence
                last_slots, first_rev = np.unique(slots[::-1], return_index=True)
                self.data[last_slots] = obs[src[::-1][first_rev]]
        self.seen = n0 + B

    def sample_indices(self, count: int) -> np.ndarray:
        """``(min(count, len),)`` int64 distinct slot indices drawn uniformly without replacement.

        Raises:
            ValueError: for a negative ``count`` (naming it).
        """
        if count < 0:
            raise ValueError(f"reservoir sample count must be >= 0, got {count}")
        n = len(self)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        if count >= n:
            return np.arange(n)
        return self.rng.choice(n, size=count, replace=False)

    def state_dict(self) -> dict:
        """Arrays, counters and RNG state for an exact resume: ``data`` (a ``(len, obs_dim)`` copy in the storage
        dtype), ``seen`` (int) and ``rng`` (the generator's ``bit_generator.state``)."""
        return {"data": self.data[: len(self)].copy(), "seen": int(self.seen),
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output.

        Raises:
            KeyError: for a missing ``data``, ``seen`` or ``rng``.
            ValueError: ``data`` of another shape than ``(min(seen, capacity), obs_dim)``, or an RNG state of
                another bit generator (the reservoir is left as it was).
        """
        data, seen, rng_state = np.asarray(state["data"]), int(state["seen"]), state["rng"]
        rows = min(seen, self.capacity)  # checked before anything changes: a refused state leaves the reservoir
        if data.size == 0 and rows == 0:
            data = data.reshape(0, self.obs_dim)
        if data.shape != (rows, self.obs_dim):
            raise ValueError(f"reservoir state's data has shape {data.shape}, expected ({rows}, {self.obs_dim}) for "
                             f"seen={seen} and capacity {self.capacity}")
        check_generator_state(self.rng, rng_state, "reservoir state")
        self.seen = seen
        self.data[:rows] = data
        self.rng.bit_generator.state = rng_state
