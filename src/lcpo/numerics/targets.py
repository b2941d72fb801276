"""Targets from padded n-step windows: n-step returns, V-trace, Retrace(lambda).

Pure NumPy functions on windows as produced by :meth:`lcpo.memory.ReplayBuffer.sample_windows`: every array is
``(B, n)`` with a boolean ``mask (B, n)`` that is true on a prefix of each row (at least one step). They honour
the same rules as :func:`lcpo.numerics.returns.gae`:

* ``terminated`` stops bootstrapping: the value after a terminal step is zero;
* ``truncated`` bootstraps from the value of the real last state (``next_obs`` of the truncated step);
* a window never spans two episodes: the first step with ``terminated`` or ``truncated`` set ends the window
  (later steps are ignored even if ``mask`` says otherwise);
* the end of the window (last valid step) bootstraps like a truncation;
* discount exponents count actual steps (a window of length ``L`` discounts its bootstrap by ``gamma**L``).

``gamma`` is a scalar in [0, 1] or a ``(B, n)`` array of per-step discounts (time-dependent discounts);
``gamma[b, t]`` discounts what follows step ``t``. Entries outside the valid part of a window are ignored (they
may hold anything finite or not). Termination wins when both flags are set.
"""

from __future__ import annotations

import numpy as np

__all__ = ["nstep_returns", "vtrace", "retrace"]


def _window_mask(mask, terminated, truncated, shape_from) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validate the mask and flags; return (valid, term, last, length) with the episode-end cut applied."""
    rew = np.asarray(shape_from)
    if rew.ndim != 2:
        raise ValueError(f"rewards must be 2-D (B, n), got shape {rew.shape}")
    shape = rew.shape
    arrs = []
    for name, x in (("mask", mask), ("terminated", terminated), ("truncated", truncated)):
        a = np.asarray(x)
        if a.shape != shape:
            raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
        if a.dtype != bool and not np.all(np.isin(a, (0, 1))):
            raise ValueError(f"{name} must be boolean (0/1), got values {np.unique(a)[:5]}")
        arrs.append(a.astype(bool))
    m, term, trunc = arrs
    if shape[1] == 0:
        raise ValueError("windows must have n >= 1 steps")
    if not np.all(m[:, 0]):
        raise ValueError(f"every window needs at least one valid step; rows {np.flatnonzero(~m[:, 0])[:5]} have none")
    if np.any(m[:, 1:] & ~m[:, :-1]):
        bad = np.flatnonzero(np.any(m[:, 1:] & ~m[:, :-1], axis=1))
        raise ValueError(f"mask must be a prefix (True..True False..False) per row; rows {bad[:5]} are not")
    done = (term | trunc) & m
    ended_before = (np.cumsum(done, axis=1) - done) > 0
    valid = m & ~ended_before
    length = valid.sum(axis=1)
    last = np.zeros(shape, dtype=bool)
    last[np.arange(shape[0]), length - 1] = True
    return valid, term & valid, last, length


def _float(x, name: str, shape, valid: np.ndarray, allow_neg_inf: bool = False) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
    a = np.where(valid, a, 0.0)
    bad = np.isnan(a) | (a == np.inf) | ((a == -np.inf) & (not allow_neg_inf))
    if np.any(bad):
        raise ValueError(f"{name} holds non-finite values at (row, step) {np.argwhere(bad)[:5].tolist()}")
    return a


def _gamma(gamma, shape, valid: np.ndarray) -> np.ndarray:
    g = np.asarray(gamma, dtype=np.float64)
    if g.ndim == 0:
        if not 0.0 <= float(g) <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {float(g)}")
        return np.full(shape, float(g))
    if g.shape != shape:
        raise ValueError(f"gamma must be a scalar or have shape {shape}, got {g.shape}")
    g = np.where(valid, g, 0.0)
    bad = ~((g >= 0.0) & (g <= 1.0))
    if np.any(bad):
        raise ValueError(f"per-step gamma must lie in [0, 1], bad entries at {np.argwhere(bad)[:5].tolist()}")
    return g


def nstep_returns(rewards, bootstrap_values, terminated, truncated, mask, gamma):
    """n-step discounted return of the first step of each window, with bootstrap.

    For a window of ``L`` valid steps (after the episode-end cut):
    ``G = sum_{k<L} (prod_{j<k} gamma_j) r_k + (prod_{j<L} gamma_j) * (1 - terminated_{L-1}) * V(next_obs_{L-1})``,
    i.e. with a scalar gamma ``G = sum_k gamma^k r_k + gamma^L V(s_L)`` (Sutton & Barto 2018, eq. 7.1).

    Args:
        rewards: ``(B, n)`` rewards.
        bootstrap_values: ``(B,)`` value of the real last state ``next_obs[b, L_b - 1]`` of each window, or
            ``(B, n)`` values of every step's ``next_obs`` (the entry at the last valid step is used).
        terminated: ``(B, n)`` bool, ``next_obs`` of that step is terminal.
        truncated: ``(B, n)`` bool, the episode was cut after that step.
        mask: ``(B, n)`` bool valid steps (a prefix of each row, at least one step).
        gamma: scalar in [0, 1] or ``(B, n)`` per-step discounts.

    Returns:
        ``(B,)`` float64 returns.

    Raises:
        ValueError: on shape mismatch, a malformed mask, non-finite valid entries, or gamma outside [0, 1].

    Example:
        >>> nstep_returns([[1.0, 1.0, 0.0]], [10.0], [[False, False, False]], [[False, True, False]],
        ...               [[True, True, True]], 0.5).tolist()
        [4.0]
    """
    valid, term, last, length = _window_mask(mask, terminated, truncated, rewards)
    shape = valid.shape
    r = _float(rewards, "rewards", shape, valid)
    g = _gamma(gamma, shape, valid)
    boot = np.asarray(bootstrap_values, dtype=np.float64)
    if boot.shape == (shape[0],):
        boot_last = boot
    elif boot.shape == shape:
        boot_last = boot[np.arange(shape[0]), length - 1]
    else:
        raise ValueError(f"bootstrap_values must have shape ({shape[0]},) or {shape}, got {boot.shape}")
    if not np.all(np.isfinite(boot_last)):
        bad_rows = np.flatnonzero(~np.isfinite(boot_last))[:5].tolist()
        raise ValueError(f"bootstrap_values hold non-finite values in rows {bad_rows}")
    gv = np.where(valid, g, 1.0)
    disc_after = np.cumprod(gv, axis=1)  # prod_{j<=k} gamma_j
    disc_before = np.concatenate([np.ones((shape[0], 1)), disc_after[:, :-1]], axis=1)
    ret = np.sum(np.where(valid, disc_before * r, 0.0), axis=1)
    term_last = term[np.arange(shape[0]), length - 1]
    return ret + disc_after[:, -1] * np.where(term_last, 0.0, boot_last)


def vtrace(rewards, values, next_values, log_rhos, terminated, truncated, mask, gamma, rho_bar=1.0, c_bar=1.0):
    """V-trace targets and policy-gradient advantages (Espeholt et al. 2018, IMPALA, eq. 1 and Sec. 4.2).

    With ``rho_t = min(rho_bar, pi/mu)``, ``c_t = min(c_bar, pi/mu)`` and
    ``delta_t = rho_t (r_t + gamma_t (1 - terminated_t) V(next_obs_t) - V(obs_t))``:
    ``v_t = V(obs_t) + delta_t + gamma_t c_t (1 - end_t) (v_{t+1} - V(obs_{t+1}))``, where ``end_t`` is an episode
    end or the window's last valid step (there ``v_{t+1} - V(obs_{t+1}) = 0``: the window bootstraps from
    ``V(next_obs)``). The advantage is ``rho_t (r_t + gamma_t (1 - terminated_t) v'_{t+1} - V(obs_t))`` with
    ``v'_{t+1} = V(next_obs_t) + (1 - end_t)(v_{t+1} - V(obs_{t+1}))``. As used by CLEAR (Rolnick et al. 2019).
    With on-policy ratios (``log_rhos = 0``, ``rho_bar, c_bar >= 1``) ``v_t`` is the n-step return to the
    window's end.

    Args:
        rewards: ``(B, n)`` rewards.
        values: ``(B, n)`` V(obs_t).
        next_values: ``(B, n)`` V(next_obs_t), the real state reached (also at a truncation).
        log_rhos: ``(B, n)`` ``log pi(a_t|obs_t) - log mu(a_t|obs_t)`` (target minus behaviour; ``-inf`` allowed).
        terminated: ``(B, n)`` bool.
        truncated: ``(B, n)`` bool.
        mask: ``(B, n)`` bool valid steps.
        gamma: scalar in [0, 1] or ``(B, n)`` per-step discounts.
        rho_bar: clip of the importance weights in ``delta`` (> 0).
        c_bar: clip of the trace coefficients (> 0).

    Returns:
        ``(vs, pg_advantages)``: two ``(B, n)`` float64 arrays, zero at invalid steps.

    Raises:
        ValueError: on shape mismatch, a malformed mask, NaN/+inf valid entries, gamma outside [0, 1], or
            non-positive clips.
    """
    valid, term, last, _ = _window_mask(mask, terminated, truncated, rewards)
    shape = valid.shape
    if not (rho_bar > 0 and c_bar > 0):
        raise ValueError(f"rho_bar and c_bar must be > 0, got rho_bar={rho_bar}, c_bar={c_bar}")
    r = _float(rewards, "rewards", shape, valid)
    v = _float(values, "values", shape, valid)
    nv = _float(next_values, "next_values", shape, valid)
    lr = _float(log_rhos, "log_rhos", shape, valid, allow_neg_inf=True)
    g = _gamma(gamma, shape, valid)
    ratio = np.exp(lr)
    rho = np.minimum(rho_bar, ratio)
    c = np.minimum(c_bar, ratio)
    carry_ok = valid & ~last
    deltas = rho * (r + g * np.where(term, 0.0, nv) - v)
    acc = np.zeros(shape)  # acc_t = v_t - V(obs_t)
    pg = np.zeros(shape)
    nxt = np.zeros(shape[0])
    for t in range(shape[1] - 1, -1, -1):
        nxt = np.where(carry_ok[:, t], nxt, 0.0)
        acc[:, t] = np.where(valid[:, t], deltas[:, t] + g[:, t] * c[:, t] * nxt, 0.0)
        # The advantage uses v'_{t+1} = V(next_obs_t) + (v_{t+1} - V(obs_{t+1})) when the window continues.
        nxt_v = np.where(term[:, t], 0.0, nv[:, t] + nxt)
        pg[:, t] = np.where(valid[:, t], rho[:, t] * (r[:, t] + g[:, t] * nxt_v - v[:, t]), 0.0)
        nxt = acc[:, t]
    vs = np.where(valid, v + acc, 0.0)
    return vs, pg


def retrace(q_taken, expected_q_next, log_ratios, rewards, terminated, truncated, mask, gamma, lam):
    """Retrace(lambda) Q targets (Munos et al. 2016, eq. 3, in its recursive form as in ACER).

    ``Q_ret_t = r_t + gamma_t (1 - terminated_t) [E_pi Q(next_obs_t, .) + (1 - end_t) c_{t+1}
    (Q_ret_{t+1} - Q(obs_{t+1}, a_{t+1}))]`` with ``c_t = lam * min(1, pi(a_t|obs_t) / mu(a_t|obs_t))``,
    where ``end_t`` is an episode end or the window's last valid step (there the target bootstraps from the
    target policy's expected Q at the real last state, zero if terminated).

    Args:
        q_taken: ``(B, n)`` ``Q(obs_t, a_t)`` of the actions taken.
        expected_q_next: ``(B, n)`` ``E_{a ~ pi} Q(next_obs_t, a)`` at the real state reached.
        log_ratios: ``(B, n)`` ``log pi(a_t|obs_t) - log mu(a_t|obs_t)`` (``-inf`` allowed).
        rewards: ``(B, n)`` rewards.
        terminated: ``(B, n)`` bool.
        truncated: ``(B, n)`` bool.
        mask: ``(B, n)`` bool valid steps.
        gamma: scalar in [0, 1] or ``(B, n)`` per-step discounts.
        lam: trace decay lambda in [0, 1].

    Returns:
        ``(B, n)`` float64 Q targets for ``(obs_t, a_t)``, zero at invalid steps.

    Raises:
        ValueError: on shape mismatch, a malformed mask, NaN/+inf valid entries, gamma or lam outside [0, 1].
    """
    valid, term, last, _ = _window_mask(mask, terminated, truncated, rewards)
    shape = valid.shape
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must lie in [0, 1], got {lam}")
    q = _float(q_taken, "q_taken", shape, valid)
    eq = _float(expected_q_next, "expected_q_next", shape, valid)
    lr = _float(log_ratios, "log_ratios", shape, valid, allow_neg_inf=True)
    r = _float(rewards, "rewards", shape, valid)
    g = _gamma(gamma, shape, valid)
    c = lam * np.minimum(1.0, np.exp(lr))
    carry_ok = valid & ~last
    out = np.zeros(shape)
    corr = np.zeros(shape[0])  # c_{t+1} (Q_ret_{t+1} - Q(obs_{t+1}, a_{t+1}))
    for t in range(shape[1] - 1, -1, -1):
        corr = np.where(carry_ok[:, t], corr, 0.0)
        boot = np.where(term[:, t], 0.0, eq[:, t] + corr)
        out[:, t] = np.where(valid[:, t], r[:, t] + g[:, t] * boot, 0.0)
        corr = c[:, t] * (out[:, t] - q[:, t])
    return out
