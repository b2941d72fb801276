"""Interval estimates across seeds and the normalized score of paper Figure 3.

Confidence intervals are percentile bootstrap intervals of the mean from :func:`scipy.stats.bootstrap`, drawn
with a fresh ``numpy.random.Generator`` seeded by the caller for every interval, so the same results always give
the same intervals, whatever order the cells are computed in. (The percentile method is used rather than BCa:
with the 3-25 seeds of a sweep, BCa's jackknife acceleration is unstable and degenerate when seeds tie.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["MeanCI", "mean_ci", "normalize_scores", "separates"]


@dataclass(frozen=True)
class MeanCI:
    """A sample mean with its bootstrap confidence interval.

    Attributes:
        mean: the sample mean.
        low, high: interval bounds; NaN when ``n < 2`` (no interval from one seed).
        n: number of finite values used.
    """

    mean: float
    low: float
    high: float
    n: int


def mean_ci(values: Sequence[float] | np.ndarray, confidence: float = 0.95, seed: int = 0,
            n_resamples: int = 9999) -> MeanCI:
    """Mean and percentile-bootstrap confidence interval of the mean (paper Tables 5-8: 95% CIs over seeds).

    Args:
        values: ``(n,)`` per-seed scores (e.g. lifelong returns); must be finite.
        confidence: confidence level in (0, 1).
        seed: seed of the ``numpy.random.Generator`` used for the resampling.
        n_resamples: bootstrap resamples.

    Returns:
        A :class:`MeanCI`; with identical values the interval is that value, with one value it is NaN.

    Raises:
        ValueError: if ``values`` is empty, not 1-D, or holds NaN/inf, or ``confidence`` is outside (0, 1).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"values must be a non-empty 1-D array, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"values must be finite, got {x.tolist()}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    mean = float(x.mean())
    if x.size < 2:
        return MeanCI(mean, float("nan"), float("nan"), 1)
    if np.all(x == x[0]):
        return MeanCI(mean, mean, mean, int(x.size))
    res = stats.bootstrap((x,), np.mean, n_resamples=n_resamples, confidence_level=confidence,
                          method="percentile", vectorized=True, rng=np.random.default_rng(seed))
    ci = res.confidence_interval
    return MeanCI(mean, float(ci.low), float(ci.high), int(x.size))


def separates(best: MeanCI, others: Sequence[MeanCI]) -> bool:
    """Whether ``best``'s interval lies strictly above every other interval (lower bound > their upper bounds).

    Used to mark the best scheme of a table row only when the evidence separates it; a NaN bound (one seed)
    never separates.
    """
    if not np.isfinite(best.low):
        return False
    return all(np.isfinite(o.high) and best.low > o.high for o in others)


def normalize_scores(means: Sequence[float] | np.ndarray) -> np.ndarray:
    """Min-max normalize one (env, trace)'s mean lifelong returns across agents (paper Figure 3).

    The lowest mean maps to 0, the highest to 1. When all agents tie, every score is 1.

    Args:
        means: ``(k,)`` finite mean lifelong returns, one per agent.

    Returns:
        ``(k,)`` float64 in [0, 1].

    Raises:
        ValueError: for an empty or non-finite input.

    >>> normalize_scores([-200.0, -150.0, -100.0]).tolist()
    [0.0, 0.5, 1.0]
    """
    m = np.asarray(means, dtype=np.float64)
    if m.ndim != 1 or m.size == 0 or not np.all(np.isfinite(m)):
        raise ValueError(f"means must be a non-empty finite 1-D array, got {m.tolist()}")
    lo, hi = m.min(), m.max()
    if hi == lo:
        return np.ones_like(m)
    return (m - lo) / (hi - lo)
