"""Conjugate gradient for symmetric positive-definite systems given only matrix-vector products.

Three forms of one iteration (Hestenes & Stiefel 1952; TRPO appendix C): :func:`conjugate_gradient` (one torch
system), :func:`conjugate_gradient_batch` (N torch systems with per-row scalars) and
:func:`conjugate_gradient_numpy` (one system on NumPy vectors: the per-seed solve of the batched constrained step,
a few microseconds of overhead per iteration where the torch forms on one-row tensors take about a hundred).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

__all__ = ["conjugate_gradient", "conjugate_gradient_batch", "conjugate_gradient_numpy", "NotPositiveDefiniteError"]


class NotPositiveDefiniteError(ValueError):
    """Conjugate gradient met a curvature ``p^T A p`` that is not a positive finite number: ``A`` is not
    positive definite along ``p``, or its product returned NaN/inf. Callers that can go on without the solve
    (LCPO and TRPO skip that update) catch this; others see a ``ValueError``."""


def conjugate_gradient(matvec: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor, iters: int = 15,
                       residual_tol: float = 1e-10) -> torch.Tensor:
    """Approximately solve ``A x = b`` for SPD ``A`` (Hestenes & Stiefel 1952; TRPO appendix C).

    Starts at ``x = 0`` and stops after ``iters`` iterations or when ``|r|^2 < residual_tol``. With
    ``iters >= n`` it solves an ``n``-dimensional SPD system exactly up to rounding.

    Args:
        matvec: ``v (n,) -> A v (n,)``; ``A`` must be symmetric positive definite (LCPO/TRPO pass a damped
            Fisher-vector product).
        b: ``(n,)`` right-hand side (float32 or float64).
        iters: maximum iterations (15 in the paper).
        residual_tol: squared-residual tolerance for early exit.

    Returns:
        ``(n,)`` approximate solution, same dtype as ``b``.

    Raises:
        ValueError: if ``b`` is not 1-D or ``iters < 1``.
        NotPositiveDefiniteError: (a ``ValueError``) if a curvature ``p^T A p`` is not a positive finite number
            (``A`` not positive definite, or a NaN/inf matrix-vector product).
    """
    if b.dim() != 1:
        raise ValueError(f"conjugate_gradient needs a 1-D right-hand side, got shape {tuple(b.shape)}")
    if iters < 1:
        raise ValueError(f"iters must be >= 1, got {iters}")
    x = torch.zeros_like(b)
    r = b.clone()
    p = b.clone()
    rr = torch.dot(r, r)
    for _ in range(iters):
        if rr.item() < residual_tol:
            break
        Ap = matvec(p)
        pAp = torch.dot(p, Ap)
        if not torch.isfinite(pAp) or pAp.item() <= 0:
            raise NotPositiveDefiniteError(
                f"conjugate_gradient: p^T A p = {pAp.item()} (matrix not positive definite, or a non-finite product)")
        alpha = rr / pAp
        x.add_(alpha * p)
        r.sub_(alpha * Ap)
        rr_new = torch.dot(r, r)
        p.mul_(rr_new / rr).add_(r)
        rr = rr_new
    return x


def conjugate_gradient_batch(matvec: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], b: torch.Tensor,
                             iters: int = 15, residual_tol: float = 1e-10) -> tuple[torch.Tensor, torch.Tensor]:
    """Conjugate gradient on N independent SPD systems ``A_k x_k = b_k`` at once, with per-system scalars.

    Every row runs :func:`conjugate_gradient`'s iteration with its own ``alpha``, ``beta`` and residual; a row
    stops (frozen, its products no longer computed) once its squared residual is below ``residual_tol``, and a
    row whose curvature ``p^T A p`` is not a positive finite number is marked failed (its solve is unusable, the
    others go on). The loop runs until every row has stopped or ``iters`` iterations (the idea of GPyTorch's
    ``linear_cg`` with batch-shaped scalars).

    Args:
        matvec: ``(V (m, n), rows (m,) int64) -> A V (m, n)``: the products of the systems ``rows`` (the rows still
            running), one vector each.
        b: ``(N, n)`` right-hand sides.
        iters: maximum iterations.
        residual_tol: squared-residual tolerance of each row's early exit.

    Returns:
        ``(x (N, n), ok (N,) bool)``: the solutions, and False for rows whose curvature was unusable.

    Raises:
        ValueError: if ``b`` is not 2-D or ``iters < 1``.
    """
    if b.dim() != 2:
        raise ValueError(f"conjugate_gradient_batch needs (N, n) right-hand sides, got shape {tuple(b.shape)}")
    if iters < 1:
        raise ValueError(f"iters must be >= 1, got {iters}")
    N = b.shape[0]
    x = torch.zeros_like(b)
    r = b.clone()
    p = b.clone()
    rr = (r * r).sum(-1)
    ok = torch.ones(N, dtype=torch.bool, device=b.device)
    running = torch.ones(N, dtype=torch.bool, device=b.device)
    for _ in range(iters):
        running &= rr >= residual_tol
        if not running.any():
            break
        rows = torch.nonzero(running).squeeze(1)
        pr = p[rows]
        Ap = matvec(pr, rows)
        pAp = (pr * Ap).sum(-1)
        bad = ~torch.isfinite(pAp) | (pAp <= 0)
        if bad.any():
            ok[rows[bad]] = False
            running[rows[bad]] = False
            keep = ~bad
            rows, pr, Ap, pAp = rows[keep], pr[keep], Ap[keep], pAp[keep]
            if rows.numel() == 0:
                break
        rr_rows = rr[rows]
        alpha = (rr_rows / pAp).unsqueeze(1)
        x[rows] = x[rows] + alpha * pr
        r_rows = r[rows] - alpha * Ap
        r[rows] = r_rows
        rr_new = (r_rows * r_rows).sum(-1)
        p[rows] = pr * (rr_new / rr_rows).unsqueeze(1) + r_rows
        rr[rows] = rr_new
    return x, ok


def conjugate_gradient_numpy(matvec: Callable[[np.ndarray], np.ndarray], b: np.ndarray, iters: int = 15,
                             residual_tol: float = 1e-10) -> tuple[np.ndarray, bool]:
    """:func:`conjugate_gradient` on NumPy vectors, reporting unusable curvature instead of raising.

    The same iteration, stopping rule and checks: starts at ``x = 0``; before each product it stops if
    ``|r|^2 < residual_tol``; a curvature ``p^T A p`` that is not a positive finite number ends the solve as
    failed. Dot products are BLAS ``dot`` in ``b``'s dtype (the torch forms round differently: the same math, not
    the same bits). Used row by row by :func:`lcpo.optim.constrained.kl_constrained_step_batch` when the rows'
    products are NumPy functions (:func:`lcpo.optim.fisher.mlp_fvp`'s ``.numpy``), so that one seed's solve costs
    its products and a few vector operations per iteration, whatever the population size.

    Args:
        matvec: ``v (n,) -> A v (n,)`` in ``b``'s dtype; ``A`` symmetric positive definite. It must return a fresh
            array (or one it does not write again before the next call).
        b: ``(n,)`` float32 or float64 right-hand side.
        iters: maximum iterations (15 in the paper).
        residual_tol: squared-residual tolerance for early exit.

    Returns:
        ``(x (n,), ok)``: the approximate solution in ``b``'s dtype, and False if a curvature was unusable
        (``x`` is then not to be used).

    Raises:
        ValueError: if ``b`` is not 1-D or ``iters < 1``.
    """
    b = np.asarray(b)
    if b.ndim != 1:
        raise ValueError(f"conjugate_gradient_numpy needs a 1-D right-hand side, got shape {b.shape}")
    if iters < 1:
        raise ValueError(f"iters must be >= 1, got {iters}")
    x = np.zeros_like(b)
    r = b.copy()
    p = b.copy()
    rr = np.dot(r, r)
    tmp = np.empty_like(b)
    for _ in range(iters):
        if rr < residual_tol:
            break
        Ap = matvec(p)
        pAp = np.dot(p, Ap)
        if not (np.isfinite(pAp) and pAp > 0):
            return x, False
        alpha = rr / pAp
        np.multiply(p, alpha, out=tmp)
        x += tmp
        np.multiply(Ap, alpha, out=tmp)
        r -= tmp
        rr_new = np.dot(r, r)
        p *= rr_new / rr
        p += r
        rr = rr_new
    return x, True
