"""Discretization of continuous (Box) action spaces into per-dimension bins (paper Appendix F).

Each action dimension ``j`` is split into ``bins`` evenly spaced values ``linspace(low[j], high[j], bins)``;
the agent picks one bin index per dimension (a ``MultiDiscrete`` action) and the policy is a product of
per-dimension categoricals. Bins are looked up per dimension (the public reference indexed every dimension
into the first dimension's bins; harmless only when all ranges agree).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from lcpo.envs.arguments import integer

__all__ = ["DiscretizeActions", "bin_table"]


def bin_table(low: np.ndarray, high: np.ndarray, bins: int) -> np.ndarray:
    """Per-dimension bin values.

    Args:
        low: ``(d,)`` lower bounds of the Box action space.
        high: ``(d,)`` upper bounds.
        bins: number of bins per dimension (>= 2).

    Returns:
        ``(d, bins)`` float64 table; row ``j`` is ``linspace(low[j], high[j], bins)``.

    Raises:
        ValueError: if ``bins < 2`` or a bound is not finite.
    """
    low = np.asarray(low, dtype=np.float64).reshape(-1)
    high = np.asarray(high, dtype=np.float64).reshape(-1)
    if bins < 2:
        raise ValueError(f"bins must be >= 2, got {bins}")
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ValueError(f"cannot discretize an unbounded action space: low={low}, high={high}")
    return np.stack([np.linspace(lo, hi, bins) for lo, hi in zip(low, high)])


class DiscretizeActions(gym.ActionWrapper):
    """Turn a ``Box(d)`` action space into ``MultiDiscrete([bins] * d)``.

    ``action(a)`` maps a ``(d,)`` integer vector of bin indices to the ``(d,)`` continuous action
    ``table[j, a[j]]`` in the Box's dtype.

    Args:
        env: environment with a bounded 1-D ``Box`` action space.
        bins: bins per dimension (15 in the paper).

    Raises:
        TypeError: if the action space is not a 1-D Box.
        ValueError: ``bins`` not an integer >= 2 (named with its value); on an out-of-range bin index or wrong
            action shape (at ``step``).
    """

    def __init__(self, env: gym.Env, bins: int = 15):
        super().__init__(env)
        space = env.action_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise TypeError(f"DiscretizeActions needs a 1-D Box action space, got {space}")
        self.bins = integer(bins, "bins", minimum=2)
        self.table = bin_table(space.low, space.high, self.bins).astype(space.dtype)
        self._rows = np.arange(space.shape[0])
        self.action_space = gym.spaces.MultiDiscrete(np.full(space.shape[0], self.bins, dtype=np.int64))

    def action(self, action) -> np.ndarray:
        """Continuous ``(d,)`` action for the bin indices ``action`` (``(d,)`` ints or a scalar when d = 1)."""
        idx = np.asarray(action, dtype=np.int64).reshape(-1)
        if idx.shape[0] != self._rows.shape[0]:
            raise ValueError(f"expected {self._rows.shape[0]} bin indices, got action {action!r}")
        if idx.min() < 0 or idx.max() >= self.bins:
            raise ValueError(f"bin index out of range [0, {self.bins}): {action!r}")
        return self.table[self._rows, idx]
