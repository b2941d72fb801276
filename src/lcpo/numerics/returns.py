"""Target math shared by every learner: GAE and (in the same style) n-step returns, V-trace, Retrace.

All functions are pure NumPy, take ``(T,)`` arrays in time order, and keep ``terminated`` and ``truncated``
apart until here: ``terminated`` stops bootstrapping (the value after a real terminal state is zero);
any episode end (terminated or truncated) stops the accumulation across the boundary; so does the batch end.
A truncated step still bootstraps from ``V(next_obs)`` of the real last state.
"""

from __future__ import annotations

import numpy as np

__all__ = ["gae"]


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
    T = rewards.shape[0] if rewards.ndim == 1 else -1
    if rewards.ndim != 1:
        raise ValueError(f"rewards must be 1-D (T,), got shape {rewards.shape}")
    rewards = _as_float(rewards, "rewards", T)
    values = _as_float(values, "values", T)
    next_values = _as_float(next_values, "next_values", T)
    term = _as_flags(terminated, "terminated", T)
    trunc = _as_flags(truncated, "truncated", T)
    g = np.asarray(gamma, dtype=np.float64)
    if g.ndim not in (0, 1) or (g.ndim == 1 and g.shape != (T,)):
        raise ValueError(f"gamma must be a float or a ({T},) array, got shape {g.shape}")
    if not (np.all((0.0 <= g) & (g <= 1.0)) and 0.0 <= lam <= 1.0):
        raise ValueError(f"gamma and lam must lie in [0, 1], got gamma={gamma}, lam={lam}")
    gamma = g
    deltas = rewards + gamma * next_values * (~term) - values
    carry = np.broadcast_to(gamma * lam * ~(term | trunc), (T,)).tolist()
    d = deltas.tolist()
    out = [0.0] * T
    acc = 0.0
    for t in range(T - 1, -1, -1):
        acc = d[t] + carry[t] * acc
        out[t] = acc
    adv = np.array(out, dtype=np.float64)
    return adv, adv + values


# n-step returns, V-trace and Retrace on padded windows live in lcpo.numerics.targets (one module per concept);
# they are re-exported here so that all target math is reachable from one place.
from lcpo.numerics.targets import nstep_returns, retrace, vtrace  # noqa: E402

__all__ += ["nstep_returns", "vtrace", "retrace"]
