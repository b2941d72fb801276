"""Target math shared by every learner: GAE and (in the same style) n-step returns, V-trace, Retrace.

All functions are pure NumPy, take ``(T,)`` arrays in time order, and keep ``terminated`` and ``truncated``
apart until here: ``terminated`` stops bootstrapping (the value after a real terminal state is zero);
any episode end (terminated or truncated) stops the accumulation across the boundary; so does the batch end.
A truncated step still bootstraps from ``V(next_obs)`` of the real last state.
"""

from __future__ import annotations

import numpy as np

__all__ = ["gae", "gae_batch"]


def _as_flags(x: np.ndarray, name: str, T: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.shape != (T,):
        raise ValueError(f"{name} must have shape ({T},), got {arr.shape}")
    return arr.astype(bool)


def _as_float(x: np.ndarray, name: str, T: int) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.shape != (T,):
        raise ValueError(f"{name} must have shape ({T},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} holds non-finite values at indices {np.flatnonzero(~np.isfinite(arr))[:5]}")
    return arr


def gae(rewards, values, next_values, terminated, truncated, gamma: float, lam: float):
    """Generalized advantage estimation (Schulman et al. 2016, eq. 16) with episode cuts.

    ``delta_t = r_t + gamma * next_values_t * (1 - terminated_t) - values_t`` and
    ``A_t = delta_t + gamma * lam * (1 - end_t) * A_{t+1}`` with ``end_t = terminated_t or truncated_t``
    and ``A_T = 0`` (the batch end cuts the recursion; the last step still bootstraps through
    ``next_values``). Termination wins when both flags are set.

    Args:
        rewards: ``(T,)`` rewards.
        values: ``(T,)`` V(obs_t).
        next_values: ``(T,)`` V(next_obs_t), the value of the real state reached (also at a truncation).
        terminated: ``(T,)`` bool, true if next_obs_t is a terminal state.
        truncated: ``(T,)`` bool, true if the episode was cut after step t (time limit, forced reset).
        gamma: discount in [0, 1], a float or a ``(T,)`` array of per-step discounts (time-dependent
            discounting, e.g. the straggler environment's ``0.81 ** elapsed_seconds``).
        lam: GAE lambda in [0, 1].

    Returns:
        ``(advantages, returns)``: two ``(T,)`` float64 arrays; ``returns = advantages + values`` (the
        lambda-returns used as critic targets).

    Raises:
        ValueError: on shape mismatch, non-finite input, or gamma/lam outside [0, 1].

    Example:
        >>> a, r = gae([1.0, 1.0], [0.0, 0.0], [0.0, 0.0], [False, True], [False, False], 0.5, 1.0)
        >>> a.tolist()
        [1.5, 1.0]
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    if rewards.ndim != 1:
        raise ValueError(f"rewards must be 1-D (T,), got shape {rewards.shape}")
    T = rewards.shape[0]
    rewards = _as_float(rewards, "rewards", T)
    values = _as_float(values, "values", T)
    next_values = _as_float(next_values, "next_values", T)
    term = _as_flags(terminated, "terminated", T)
    trunc = _as_flags(truncated, "truncated", T)
    g = np.asarray(gamma, dtype=np.float64)
    if g.ndim not in (0, 1) or (g.ndim == 1 and g.shape != (T,)):
        raise ValueError(f"gamma must be a float or a ({T},) array, got shape {g.shape}")
    adv, ret = gae_batch(rewards[None], values[None], next_values[None], term[None], trunc[None],
                         g if g.ndim == 0 else g[None], lam)
    return adv[0], ret[0]


def gae_batch(rewards, values, next_values, terminated, truncated, gamma, lam: float):
    """:func:`gae` of N seeds at once: every argument with a leading seed axis, ``(N, T)``.

    Row ``k`` of the result is bit for bit :func:`gae` of row ``k`` (the same IEEE double operations in the same
    order: a scalar recursion per row for small N, the recursion vectorised over rows for larger N).

    Args:
        rewards, values, next_values: ``(N, T)`` float arrays.
        terminated, truncated: ``(N, T)`` bool.
        gamma: a float or an ``(N, T)`` array of per-step discounts in [0, 1].
        lam: GAE lambda in [0, 1].

    Returns:
        ``(advantages, returns)``: two ``(N, T)`` float64 arrays.

    Raises:
        ValueError: on shape mismatch, non-finite input, or gamma/lam outside [0, 1].
    """
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(f"rewards must be 2-D (N, T), got shape {r.shape}")
    shape = r.shape
    arrays = {}
    for name, x in (("rewards", r), ("values", values), ("next_values", next_values)):
        a = np.asarray(x, dtype=np.float64)
        if a.shape != shape:
            raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} holds non-finite values at indices {np.argwhere(~np.isfinite(a))[:5].tolist()}")
        arrays[name] = a
    flags = {}
    for name, x in (("terminated", terminated), ("truncated", truncated)):
        a = np.asarray(x)
        if a.shape != shape:
            raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
        flags[name] = a.astype(bool)
    g = np.asarray(gamma, dtype=np.float64)
    if g.ndim != 0 and g.shape != shape:
        raise ValueError(f"gamma must be a float or a {shape} array, got shape {g.shape}")
    if not (np.all((0.0 <= g) & (g <= 1.0)) and 0.0 <= lam <= 1.0):
        raise ValueError(f"gamma and lam must lie in [0, 1], got gamma={gamma}, lam={lam}")
    term, trunc, values = flags["terminated"], flags["truncated"], arrays["values"]
    deltas = arrays["rewards"] + g * arrays["next_values"] * (~term) - values
    carry = np.broadcast_to(g * lam * ~(term | trunc), shape)
    n, T = shape
    adv = np.empty(shape, dtype=np.float64)
    if n <= 4:
        for k in range(n):
            d, c = deltas[k].tolist(), carry[k].tolist()
            out = [0.0] * T
            acc = 0.0
            for t in range(T - 1, -1, -1):
                acc = d[t] + c[t] * acc
                out[t] = acc
            adv[k] = out
    else:
        acc = np.zeros(n, dtype=np.float64)
        tmp = np.empty(n, dtype=np.float64)
        for t in range(T - 1, -1, -1):
            np.multiply(carry[:, t], acc, out=tmp)
            np.add(deltas[:, t], tmp, out=acc)
            adv[:, t] = acc
    return adv, adv + values


# n-step returns, V-trace and Retrace on padded windows live in lcpo.numerics.targets (one module per concept);
# they are re-exported here so that all target math is reachable from one place.
from lcpo.numerics.targets import nstep_returns, retrace, vtrace  # noqa: E402

__all__ += ["nstep_returns", "vtrace", "retrace"]
