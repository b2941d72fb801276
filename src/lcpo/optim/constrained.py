"""The KL-constrained policy step shared by LCPO and TRPO (paper Algorithm 1; TRPO section 6 / appendix C).

Given the gradient ``g`` of a surrogate loss to minimise and a damped Fisher-vector product ``A v`` on the
states whose policy must barely move (LCPO: the OOD anchor states; TRPO: the batch itself), the step is

1. ``x = CG(A, -g)``: the natural-gradient direction (conjugate gradient, 15 iterations);
2. ``step = sqrt(2 c / x^T A x) * x``: scaled so the quadratic model of the KL equals ``c`` (``c_anchor``);
3. backtracking line search over ``step * 0.5^i``, ``i = 0 .. max_backtracks - 1``: accept the first candidate
   whose surrogate improves (actual improvement > 0 and at least ``accept_ratio`` of the linear prediction)
   and whose KL on every constrained set is within its limit (LCPO: ``KL_anchor <= c_anchor`` and
   ``KL_recent <= c_recent``); if none is accepted, the old parameters are restored bit for bit.

Every KL compared here comes from :func:`lcpo.numerics.categorical.kl`, a sum of non-negative terms, so rounding can
never make a KL negative and slip a step under a limit. If the Fisher-vector product is not positive definite
or not finite (conjugate gradient meets ``p^T A p <= 0`` or NaN, or ``x^T A x`` of the solution is not a
positive number), the update is *skipped*: the parameters are left untouched and :attr:`StepResult.skipped` is
set, so the caller records it and the run goes on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

from lcpo.optim.cg import NotPositiveDefiniteError, conjugate_gradient, conjugate_gradient_numpy
from lcpo.optim.fisher import flat_params, set_flat_params

__all__ = ["StepResult", "kl_constrained_step", "kl_constrained_step_batch"]


@dataclass(frozen=True)
class StepResult:
    """Outcome of :func:`kl_constrained_step`.

    Attributes:
        accepted: the line search accepted a candidate (parameters changed).
        backtracks: number of halvings before acceptance (``max_backtracks`` if rejected).
        kls: the KL of each constrained set at the final parameters (nats, mean over states).
        improvement: decrease of the surrogate loss at the final parameters (0 if rejected).
        expected_improvement: the linear model's predicted decrease for the full step.
        skipped: no step was tried because the curvature was unusable (the Fisher-vector product not positive
            definite along a conjugate-gradient direction, or NaN/inf); the parameters are unchanged.
    """

    accepted: bool
    backtracks: int
    kls: tuple[float, ...]
    improvement: float
    expected_improvement: float
    skipped: bool = False


def kl_constrained_step(module: nn.Module, grad: torch.Tensor, fvp: Callable[[torch.Tensor], torch.Tensor],
                        loss_fn: Callable[[], torch.Tensor],
                        kl_fns: Sequence[Callable[[], torch.Tensor]], kl_limits: Sequence[float],
                        scale_kl: float, cg_iters: int = 15, max_backtracks: int = 10,
                        accept_ratio: float = 0.1, loss_old: float | None = None) -> StepResult:
    """Take one KL-constrained natural-gradient step on ``module`` in place.

    Args:
        module: the policy whose parameters move.
        grad: ``(n,)`` gradient of the surrogate loss (to minimise) at the current parameters.
        fvp: damped Fisher-vector product on the constraining states (``(n,) -> (n,)``).
        loss_fn: evaluates the surrogate loss at the current parameters (called under ``no_grad``).
        kl_fns: each evaluates a mean KL(pi_old || pi_current) (nats) at the current parameters. They are always
            called right after ``loss_fn`` at the same parameters, so they may reuse its forward pass.
        kl_limits: the limit of each KL (``c_anchor``, ``c_recent``).
        scale_kl: the KL the full step is scaled to (``c_anchor`` for LCPO, ``max_kl`` for TRPO).
        cg_iters: conjugate-gradient iterations.
        max_backtracks: line-search halvings.
        accept_ratio: minimal actual / expected improvement.
        loss_old: the surrogate at the current parameters if the caller has it (saves a forward pass).

    Returns:
        A :class:`StepResult`. On rejection, and when the update is skipped for an unusable Fisher-vector
        product (``skipped``: CG met non-positive or non-finite curvature), the parameters are bit-identical to
        the input's. A NaN surrogate or KL never satisfies the acceptance test.

    Raises:
        ValueError: on mismatched ``kl_fns``/``kl_limits`` or a non-finite gradient.
    """
    if len(kl_fns) != len(kl_limits):
        raise ValueError(f"{len(kl_fns)} KL functions for {len(kl_limits)} limits")
    if not torch.all(torch.isfinite(grad)):
        raise ValueError("kl_constrained_step: non-finite policy gradient")
    old = flat_params(module)
    if loss_old is None:
        with torch.no_grad():
            loss_old = float(loss_fn())
    kls_old = (0.0,) * len(kl_fns)  # KL(pi_old || pi_old): what a rejected step leaves
    if not torch.any(grad):
        return StepResult(False, max_backtracks, kls_old, 0.0, 0.0)  # nothing to improve: no step
    try:
        x = conjugate_gradient(fvp, -grad, iters=cg_iters)
    except NotPositiveDefiniteError:
        return StepResult(False, max_backtracks, kls_old, 0.0, 0.0, skipped=True)
    shs = float(torch.dot(x, fvp(x)))
    if not (math.isfinite(shs) and shs > 0.0) or not torch.all(torch.isfinite(x)):
        return StepResult(False, max_backtracks, kls_old, 0.0, 0.0, skipped=True)
    step = x * (2.0 * scale_kl / shs) ** 0.5
    expected = float(-torch.dot(grad, step))
    if not expected > 0.0:
        return StepResult(False, max_backtracks, kls_old, 0.0, expected)
    frac = 1.0
    with torch.no_grad():
        for i in range(max_backtracks):
            set_flat_params(module, old + frac * step)
            improvement = loss_old - float(loss_fn())
            kls = tuple(float(f()) for f in kl_fns)
            if (improvement > 0.0 and improvement / (expected * frac) > accept_ratio
                    and all(k <= lim for k, lim in zip(kls, kl_limits))):
                return StepResult(True, i, kls, improvement, expected)
            frac *= 0.5
        set_flat_params(module, old)
    return StepResult(False, max_backtracks, kls_old, 0.0, expected)


def kl_constrained_step_batch(get_flat: Callable[[], torch.Tensor], set_flat: Callable[[torch.Tensor], None],
                              grad: torch.Tensor, fvp: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None,
                              loss_fn: Callable[[], torch.Tensor],
                              kl_fns: Sequence[Callable[[], torch.Tensor]], kl_limits: Sequence[float],
                              scale_kl: float, cg_iters: int = 15, max_backtracks: int = 10,
                              accept_ratio: float = 0.1, loss_old: Sequence[float] | None = None,
                              row_matvecs: Sequence[Callable[[np.ndarray], np.ndarray]] | None = None
                              ) -> list[StepResult]:
    """:func:`kl_constrained_step` for N independent policies (a population's seeds) at once.

    Each row follows the single step's rules with its own scalars: the natural-gradient direction by
    :func:`~lcpo.optim.cg.conjugate_gradient_batch` (a row with unusable curvature is skipped, the others go on;
    run row by row, each to its own convergence, so that a row's Fisher-vector products stay in cache),
    its own step scale ``sqrt(2 c / x^T A x)`` and expected improvement, and a line search with per-row
    acceptance: the candidates ``old + 0.5^i step`` of the rows still searching are evaluated together, a row
    that accepts keeps its candidate and stops, and the loop ends when the last row has accepted or after
    ``max_backtracks``; rows never accepted are restored bit for bit.

    Args:
        get_flat: ``() -> (N, n)`` the rows' current flat parameters (a copy).
        set_flat: ``(N, n) -> None`` writes all rows' flat parameters.
        grad: ``(N, n)`` gradients of the surrogate losses (to minimise).
        fvp: ``(V (m, n), rows (m,) int64) -> (m, n)`` damped Fisher-vector products of the rows ``rows`` (not
            called, and may be None, when ``row_matvecs`` is given). Rows are solved one after another (each
            row's conjugate gradient to its end), unless ``fvp.batched`` is True (one call costs about the same
            for any number of rows, :func:`lcpo.optim.fisher.stacked_mlp_fvp`): then all rows in one
            :func:`~lcpo.optim.cg.conjugate_gradient_batch`, with the same per-row scalars.
        loss_fn: ``() -> (N,)`` the surrogates at the current parameters (called under ``no_grad``).
        kl_fns: each ``() -> (N,)`` mean KLs, called right after ``loss_fn`` at the same parameters.
        kl_limits: the limit of each KL.
        scale_kl: the KL the full step is scaled to.
        cg_iters, max_backtracks, accept_ratio: as :func:`kl_constrained_step`.
        loss_old: the rows' surrogates at the current parameters (else computed).
        row_matvecs: optional N NumPy forms of the rows' products (``v (n,) -> A_k v (n,)``, e.g.
            :func:`lcpo.optim.fisher.mlp_fvp`'s ``.numpy``): each row's solve and ``x^T A x`` then run in NumPy
            (:func:`~lcpo.optim.cg.conjugate_gradient_numpy`, no torch operation per iteration) and ``fvp`` is
            not called. Each row's item is read once, when its solve starts (a lazy sequence may build it then).
            A row's outcome never depends on the other rows either way.

    Returns:
        N :class:`StepResult`, one per row.

    Raises:
        ValueError: on mismatched ``kl_fns``/``kl_limits`` or a non-finite gradient.
    """
    from lcpo.optim.cg import conjugate_gradient_batch

    if len(kl_fns) != len(kl_limits):
        raise ValueError(f"{len(kl_fns)} KL functions for {len(kl_limits)} limits")
    if not torch.all(torch.isfinite(grad)):
        raise ValueError("kl_constrained_step_batch: non-finite policy gradient")
    N = grad.shape[0]
    old = get_flat()
    if loss_old is None:
        with torch.no_grad():
            loss_old = loss_fn().tolist()
    loss_old = [float(v) for v in loss_old]
    kls_old = (0.0,) * len(kl_fns)
    results: list[StepResult | None] = [None] * N
    nonzero = grad.ne(0).any(dim=1).tolist()
    for k in range(N):
        if not nonzero[k]:
            results[k] = StepResult(False, max_backtracks, kls_old, 0.0, 0.0)
    live = torch.tensor(nonzero, dtype=torch.bool, device=grad.device)
    step = torch.zeros_like(grad)
    expected = [0.0] * N
    if live.any():
        rows = torch.nonzero(live).squeeze(1)
        # seed-major: each row's solve runs to its end before the next row's (its products reuse the same
        # activations while they are in cache); row-wise arithmetic makes this equal to solving all rows together
        if row_matvecs is not None:
            if len(row_matvecs) != N:
                raise ValueError(f"{len(row_matvecs)} row products for {N} rows")
            xs, oks, shs = [], [], []
            g_np = grad.detach().numpy()
            for k in rows.tolist():
                matvec = row_matvecs[k]  # read once: a lazy sequence may build the row's product here
                xk, okk = conjugate_gradient_numpy(matvec, -g_np[k], iters=cg_iters)
                xs.append(xk)
                oks.append(okk)
                shs.append(float(np.dot(xk, matvec(xk))) if okk else math.nan)
                del matvec
            x_rows, ok = torch.from_numpy(np.stack(xs)).to(grad.dtype), oks
        elif getattr(fvp, "batched", False):
            # products that take all rows in one call (lcpo.optim.fisher.stacked_mlp_fvp, a GPU): one solve for
            # all rows, each with its own scalars and early exit
            x_rows, okt = conjugate_gradient_batch(lambda V, r: fvp(V, rows[r]), -grad[rows], iters=cg_iters)
            ok = okt.tolist()
            shs = (x_rows * fvp(x_rows, rows)).sum(-1).tolist()
        else:
            xs, oks = [], []
            for j in range(rows.numel()):
                one = rows[j:j + 1]
                xj, okj = conjugate_gradient_batch(lambda V, r, one=one: fvp(V, one[r]), -grad[one],
                                                   iters=cg_iters)
                xs.append(xj)
                oks.append(okj)
            x_rows, ok = torch.cat(xs), torch.cat(oks).tolist()
            shs = (x_rows * fvp(x_rows, rows)).sum(-1).tolist()
        finite_x = torch.isfinite(x_rows).all(dim=1).tolist()
        for j, k in enumerate(rows.tolist()):
            if not (ok[j] and math.isfinite(shs[j]) and shs[j] > 0.0 and finite_x[j]):
                results[k] = StepResult(False, max_backtracks, kls_old, 0.0, 0.0, skipped=True)
                live[k] = False
                continue
            step[k] = x_rows[j] * (2.0 * scale_kl / shs[j]) ** 0.5
            expected[k] = float(-(grad[k] * step[k]).sum())
            if not expected[k] > 0.0:
                results[k] = StepResult(False, max_backtracks, kls_old, 0.0, expected[k])
                live[k] = False
    searching = live.clone()
    final = old.clone()
    frac = 1.0
    with torch.no_grad():
        for i in range(max_backtracks):
            if not searching.any():
                break
            cand = torch.where(searching.unsqueeze(1), old + frac * step, final)
            set_flat(cand)
            losses = loss_fn().tolist()
            kls = [f().tolist() for f in kl_fns]
            for k in torch.nonzero(searching).squeeze(1).tolist():
                improvement = loss_old[k] - losses[k]
                kk = tuple(float(v[k]) for v in kls)
                if (improvement > 0.0 and improvement / (expected[k] * frac) > accept_ratio
                        and all(a <= lim for a, lim in zip(kk, kl_limits))):
                    results[k] = StepResult(True, i, kk, improvement, expected[k])
                    final[k] = cand[k]
                    searching[k] = False
            frac *= 0.5
        set_flat(final)
    for k in range(N):
        if results[k] is None:
            results[k] = StepResult(False, max_backtracks, kls_old, 0.0, expected[k])
    return results
