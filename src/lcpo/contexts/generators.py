"""Seeded, vectorised generators of synthetic context traces.

Every generator takes a ``seed`` (an ``int``, a :class:`numpy.random.SeedSequence` or a
:class:`numpy.random.Generator`; never global random state), returns a ``(T, d)`` float64 NumPy array and runs
in C-speed vectorised code: a 20M x 2 Ornstein-Uhlenbeck trace takes a few seconds (the recursion is a first-order
IIR filter, run by :func:`scipy.signal.lfilter`). Wrap the result in
:class:`~lcpo.contexts.trace.ContextTrace` to give it a name and metadata; :mod:`lcpo.contexts.canonical`
builds the paper's traces (Figure 7) from these pieces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Union

import numpy as np

from lcpo.contexts.trace import ContextTrace, TraceError

__all__ = [
    "SeedLike",
    "as_generator",
    "ornstein_uhlenbeck",
    "piecewise_constant",
    "signal_plus_noise",
    "clip",
]

SeedLike = Union[int, np.integer, np.random.SeedSequence, np.random.Generator]


def as_generator(seed: SeedLike) -> np.random.Generator:
    """Return a NumPy generator for ``seed``.

    Args:
        seed: an ``int >= 0``, a ``SeedSequence``, or a ``Generator`` (returned as is, so draws continue from
            its current state).

    Returns:
        A :class:`numpy.random.Generator`.

    Raises:
        TypeError: if ``seed`` is ``None``, a bool, or another type (unseeded randomness is not allowed).
        ValueError: if ``seed`` is a negative integer.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, SeedSequence or numpy Generator, got {seed!r}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    return np.random.default_rng(int(seed))


def _check_length(length: int, what: str = "length") -> int:
    if isinstance(length, (bool, np.bool_)) or not isinstance(length, (int, np.integer)) or length < 1:
        raise TraceError(f"{what} must be a positive integer, got {length!r}")
    return int(length)


def _per_dim(value: float | Sequence[float] | np.ndarray, dim: int, name: str, *, min_value: float | None = None,
             ) -> np.ndarray:
    """Broadcast a scalar or ``(dim,)`` parameter to a finite ``(dim,)`` float64 array."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(dim, float(arr))
    if arr.shape != (dim,):
        raise TraceError(f"{name} must be a scalar or have shape ({dim},), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise TraceError(f"{name} must be finite, got {arr.tolist()}")
    if min_value is not None and np.any(arr < min_value):
        raise TraceError(f"{name} must be >= {min_value}, got {arr.tolist()}")
    return arr


def ornstein_uhlenbeck(length: int, dim: int = 1, theta: float | Sequence[float] = 1e-3,
                       mu: float | Sequence[float] = 0.0, sigma: float | Sequence[float] = 0.05,
                       x0: float | Sequence[float] | None = None, seed: SeedLike = 0) -> np.ndarray:
    """Sample an Ornstein-Uhlenbeck process on the integer time grid, exactly.

    The process ``dx = theta (mu - x) dt + sigma dW`` with ``dt = 1`` environment step is sampled with its exact
    transition: ``x[t+1] = mu + a (x[t] - mu) + s * eps[t]``, ``a = exp(-theta)``,
    ``s = sigma * sqrt((1 - a**2) / (2 theta))``, ``eps ~ N(0, 1)``. The stationary law is
    ``N(mu, sigma**2 / (2 theta))`` and the lag-k autocorrelation is ``exp(-theta k)``; ``1 / theta`` is the
    relaxation time in steps. ``theta = 0`` gives a random walk with step std ``sigma``. Axes are independent.

    Args:
        length: number of steps ``T >= 1``.
        dim: number of axes ``d >= 1``.
        theta: mean-reversion rate per step, ``>= 0``; scalar or ``(d,)``.
        mu: long-run mean; scalar or ``(d,)``.
        sigma: diffusion scale per ``sqrt(step)``, ``>= 0``; scalar or ``(d,)``.
        x0: value at ``t = 0``; scalar or ``(d,)``. ``None`` draws it from the stationary law (``mu`` where
            ``theta = 0``), so the whole trace is stationary.
        seed: int, ``SeedSequence`` or ``Generator``.

    Returns:
        ``(length, dim)`` float64 array.

    Raises:
        TraceError: non-positive ``length``/``dim``, negative ``theta``/``sigma``, non-finite or mis-shaped
            parameters.
        TypeError: if ``seed`` is not a valid seed.
    """
    length = _check_length(length)
    dim = _check_length(dim, "dim")
    theta_ = _per_dim(theta, dim, "theta", min_value=0.0)
    mu_ = _per_dim(mu, dim, "mu")
    sigma_ = _per_dim(sigma, dim, "sigma", min_value=0.0)
    rng = as_generator(seed)
    a = np.exp(-theta_)
    safe = np.where(theta_ > 0, theta_, 1.0)
    # -expm1(-2 theta) = 1 - a**2, accurate for the tiny theta of slow drifts.
    s = np.where(theta_ > 0, sigma_ * np.sqrt(-np.expm1(-2.0 * theta_) / (2.0 * safe)), sigma_)
    if x0 is None:
        stationary_std = np.where(theta_ > 0, sigma_ / np.sqrt(2.0 * safe), 0.0)
        start = mu_ + stationary_std * rng.standard_normal(dim)
    else:
        start = _per_dim(x0, dim, "x0")
    drive = rng.standard_normal((length, dim))
    drive *= s
    drive[0] = start - mu_
    from scipy.signal import lfilter  # imported here: scipy.signal costs ~1 s, and only this generator needs it

    out = np.empty((length, dim))
    for k in range(dim):  # one C-level IIR pass per axis: y[t] = a y[t-1] + drive[t]
        out[:, k] = lfilter([1.0], [1.0, -a[k]], drive[:, k])
    out += mu_
    return out


def piecewise_constant(length: int, change_points: Sequence[int] | np.ndarray,
                       levels: Sequence[float] | Sequence[Sequence[float]] | np.ndarray,
                       noise_std: float | Sequence[float] = 0.0, seed: SeedLike = 0) -> np.ndarray:
    """Piecewise-constant levels plus i.i.d. Gaussian noise (the "piecewise Gaussian" traces).

    Segment ``i`` covers steps ``change_points[i-1] <= t < change_points[i]`` (with ``0`` and ``length`` as
    the outer ends) and has mean ``levels[i]``.

    Args:
        length: number of steps ``T >= 1``.
        change_points: ``(n - 1,)`` strictly increasing integer steps in ``(0, length)``.
        levels: ``(n,)`` (one axis) or ``(n, d)`` segment means.
        noise_std: standard deviation of the added noise, ``>= 0``; scalar or ``(d,)``.
        seed: int, ``SeedSequence`` or ``Generator``.

    Returns:
        ``(length, d)`` float64 array.

    Raises:
        TraceError: if the change points are not increasing integers inside ``(0, length)``, if the number of
            levels is not ``len(change_points) + 1``, or on non-finite values.
    """
    length = _check_length(length)
    cps = np.asarray(change_points)
    if cps.ndim != 1 or (cps.size and cps.dtype.kind not in "iu"):
        raise TraceError(f"change_points must be a 1-D sequence of integers, got {change_points!r}")
    cps = cps.astype(np.int64)
    if cps.size and (cps[0] <= 0 or cps[-1] >= length or np.any(np.diff(cps) <= 0)):
        raise TraceError(f"change_points must be strictly increasing inside (0, {length}), got {cps.tolist()}")
    lv = np.asarray(levels, dtype=np.float64)
    if lv.ndim == 1:
        lv = lv[:, None]
    if lv.ndim != 2 or lv.shape[0] != cps.size + 1:
        raise TraceError(f"levels must have shape ({cps.size + 1},) or ({cps.size + 1}, d) for "
                         f"{cps.size} change points, got shape {np.shape(levels)}")
    if not np.all(np.isfinite(lv)):
        raise TraceError(f"levels must be finite, got {lv.tolist()}")
    dim = lv.shape[1]
    std = _per_dim(noise_std, dim, "noise_std", min_value=0.0)
    rng = as_generator(seed)
    seg_lengths = np.diff(np.concatenate([[0], cps, [length]]))
    out = np.repeat(lv, seg_lengths, axis=0)
    if np.any(std > 0):
        out += std * rng.standard_normal((length, dim))
    return out


def signal_plus_noise(length: int, signal: Callable[[np.ndarray], np.ndarray] | np.ndarray,
                      noise_std: float | Sequence[float] = 0.0, seed: SeedLike = 0) -> np.ndarray:
    """A deterministic signal plus i.i.d. Gaussian noise (hand-crafted traces).

    Args:
        length: number of steps ``T >= 1``.
        signal: either a vectorised function of the step index ``t`` (an ``(T,)`` int64 array) returning
            ``(T,)`` or ``(T, d)`` values, or such an array directly.
        noise_std: standard deviation of the added noise, ``>= 0``; scalar or ``(d,)``.
        seed: int, ``SeedSequence`` or ``Generator``.

    Returns:
        ``(length, d)`` float64 array.

    Raises:
        TraceError: if the signal has the wrong length or shape, or holds NaN/inf (the row is named).
    """
    length = _check_length(length)
    if callable(signal):
        values = signal(np.arange(length, dtype=np.int64))
    else:
        values = signal
    arr = np.array(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] != length:
        raise TraceError(f"signal must have shape ({length},) or ({length}, d), got shape {np.shape(values)}")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise TraceError(f"signal has a non-finite value at row {int(np.argwhere(bad)[0, 0])}")
    std = _per_dim(noise_std, arr.shape[1], "noise_std", min_value=0.0)
    rng = as_generator(seed)
    if np.any(std > 0):
        arr += std * rng.standard_normal(arr.shape)
    return arr


def clip(values: np.ndarray | ContextTrace, bound: float | tuple[float, float] = 4.0,
         ) -> np.ndarray | ContextTrace:
    """Clip values into ``[-bound, bound]`` or ``[low, high]``.

    Args:
        values: an array, or a :class:`ContextTrace` (a new trace with the same name and the bounds recorded in
            its metadata under ``"clip"`` is returned).
        bound: ``b > 0`` for ``[-b, b]``, or a ``(low, high)`` pair with ``low < high``.

    Returns:
        The clipped array (float64) or trace.

    Raises:
        TraceError: if the bounds are not finite or empty.
    """
    if isinstance(bound, (tuple, list)):
        if len(bound) != 2:
            raise TraceError(f"bound must be a number or a (low, high) pair, got {bound!r}")
        low, high = float(bound[0]), float(bound[1])
    else:
        low, high = -float(bound), float(bound)
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise TraceError(f"clip bounds must be finite with low < high, got ({low}, {high})")
    if isinstance(values, ContextTrace):
        meta = dict(values.metadata, clip=[low, high])
        return ContextTrace(np.clip(values.values, low, high), values.name, meta)
    return np.clip(np.asarray(values, dtype=np.float64), low, high)
