"""Exact, finite math of product-of-categoricals policies: log-probabilities, entropy, KL, cross-entropy.

Every agent with a categorical actor (A2C, LCPO, TRPO, PPO, LCPO-P, CLEAR, SAC and the SAC-based baselines)
computes these quantities here. A distribution over ``K`` choices per action dimension is given by its
log-probabilities ``logp (..., D, K)`` (``log_softmax`` of the logits); a joint distribution is the product over
the ``D`` dimensions, so entropies and KLs are sums over dimensions.

Zero-probability choices (a ``-inf`` logit, or a probability that underflows to 0) are handled exactly, values
and gradients:

* entropy: ``0 log 0 = 0``;
* ``KL(p || q)``: a choice with ``p = 0`` adds nothing; a choice with ``p > 0 = q`` makes the KL ``+inf``;
* cross-entropy ``-sum p log q``: ``0 log q = 0``, also for ``q = 0``;

and no ``NaN`` enters a gradient (the ``where``-masked terms are masked *before* the product, so autograd never
multiplies ``0 * inf``).

The KL is a sum of non-negative terms by construction, so it is ``>= 0`` on every CPU and exactly 0 for equal
distributions: with ``r = q / p`` and ``d = log r`` on the support of ``p``,

    KL(p || q) = sum_{p > 0} p (r - 1 - log r) + sum_{p = 0} q,

which equals ``sum p log(p / q)`` because ``sum_{p > 0} p (r - 1) = sum_{p > 0} q - 1 = -sum_{p = 0} q``. Each
term ``r - 1 - log r = expm1(d) - d`` is ``>= 0`` and is evaluated without cancellation for small ``d``, so a
tiny KL (e.g. a line-search step halved nine times) keeps its relative precision, where the textbook form
``sum p (log p - log q)`` loses it to rounding and can come out negative in float32 (issue 13, item 1).
"""

from __future__ import annotations

import math
import warnings

import torch

__all__ = ["log_probs", "log_prob_of", "entropy", "kl", "cross_entropy", "entropy_target_nats",
           "ENTROPY_TARGET_WARN"]

#: Entropy-target fractions above this draw a warning (see :func:`entropy_target_nats`).
ENTROPY_TARGET_WARN = 0.95

_DIMS = (-1, -2)


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """Per-dimension log-probabilities ``log_softmax(logits)`` of ``logits (..., D, K)``.

    A ``-inf`` logit gives an exact ``-inf`` log-probability (probability 0). Each ``(.., d, :)`` row needs at
    least one finite logit (an all ``-inf`` row has no distribution and gives NaN).
    """
    return torch.log_softmax(logits, dim=-1)


def log_prob_of(logp_all: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """``(B,)`` joint log-probability of ``actions (B, D)`` int64 under ``logp_all (B, D, K)``.

    Exact: ``-inf`` for an action with probability 0 under the policy.
    """
    return logp_all.gather(-1, actions.unsqueeze(-1)).squeeze(-1).sum(-1)


def entropy(logp: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of a product of categoricals, summed over dimensions.

    Args:
        logp: ``(..., D, K)`` log-probabilities (``-inf`` allowed).

    Returns:
        ``(...)`` entropy ``-sum_d sum_k p log p`` with ``0 log 0 = 0``; ``>= 0`` and finite, gradients finite.
    """
    p = logp.exp()
    safe = torch.where(p > 0, logp, torch.zeros_like(logp))  # mask before the product: no 0 * inf
    return -(p * safe).sum(dim=_DIMS)


def kl(logp_p: torch.Tensor, logp_q: torch.Tensor) -> torch.Tensor:
    """``KL(p || q)`` (nats) of two products of categoricals, summed over dimensions; ``>= 0`` by construction.

    Computed as ``sum_{p > 0} p (expm1(d) - d) + sum_{p = 0} q`` with ``d = log q - log p`` (module docstring):
    every term is non-negative, so the result is ``>= 0`` on every CPU, exactly 0 when ``p == q``, and keeps
    full relative precision for tiny divergences.

    Args:
        logp_p: ``(..., D, K)`` log-probabilities of ``p`` (the reference, e.g. the policy before an update).
        logp_q: ``(..., D, K)`` log-probabilities of ``q`` (e.g. the current policy; differentiable).

    Returns:
        ``(...)`` the KL: finite when ``q > 0`` wherever ``p > 0``, ``+inf`` otherwise (exact); choices with
        ``p = 0`` add nothing. Gradients are finite in both cases (``d KL / d logits_q = q - p``).

    Raises:
        ValueError: if the shapes differ.
    """
    if logp_p.shape != logp_q.shape:
        raise ValueError(f"kl: shapes differ: {tuple(logp_p.shape)} vs {tuple(logp_q.shape)}")
    p = logp_p.exp()
    support = p > 0
    zero = torch.zeros((), dtype=logp_q.dtype, device=logp_q.device)
    d = torch.where(support, logp_q - logp_p, zero)  # log(q / p) on p's support, 0 elsewhere
    # p (r - 1 - log r): expm1 form for moderate d (no cancellation); for d > 1 (q >> p) the direct form
    # q - p - p d, whose terms cannot cancel there (and expm1 could overflow)
    big = d > 1.0
    d_small = torch.where(big, zero, d)
    inside = torch.where(big, logp_q.exp() - p - p * torch.where(big, d, zero),
                         p * (torch.expm1(d_small) - d_small))
    outside = torch.where(support, zero, logp_q.exp())  # q's mass where p = 0
    return (inside.clamp_min(0.0) + outside).sum(dim=_DIMS)


def cross_entropy(logp_p: torch.Tensor, logp_q: torch.Tensor) -> torch.Tensor:
    """Cross-entropy ``-sum_d sum_k p log q`` (nats) of two products of categoricals; ``0 log q = 0``.

    Args:
        logp_p: ``(..., D, K)`` log-probabilities of ``p`` (the weights, usually without gradient).
        logp_q: ``(..., D, K)`` log-probabilities of ``q`` (differentiable).

    Returns:
        ``(...)``: equals ``H(p) + KL(p || q)``; ``+inf`` if ``q = 0`` where ``p > 0``; gradients finite.

    Raises:
        ValueError: if the shapes differ.
    """
    if logp_p.shape != logp_q.shape:
        raise ValueError(f"cross_entropy: shapes differ: {tuple(logp_p.shape)} vs {tuple(logp_q.shape)}")
    p = logp_p.exp()
    safe = torch.where(p > 0, logp_q, torch.zeros((), dtype=logp_q.dtype, device=logp_q.device))
    return -(p * safe).sum(dim=_DIMS)


def entropy_target_nats(fraction: float, bins: int, dims: int, agent: str = "agent") -> float:
    """The target entropy (nats) of an automatically tuned temperature, from a fraction of the maximum.

    The target is ``fraction * ln(bins)`` per action dimension, ``dims`` dimensions (SAC and LCPO: paper
    Table 11, fraction 0.1). The uniform policy has the maximum entropy ``ln(bins)``, and ``ln(bins) - H(pi)``
    is ``KL(pi || uniform)``: a target ``fraction`` leaves the policy at most ``(1 - fraction) ln(bins)`` nats
    per dimension to depart from uniform. At ``fraction >= 1`` no policy other than the uniform one (reached
    only in the limit of infinite temperature) meets the target, and the temperature grows without bound; it
    is refused. Above :data:`ENTROPY_TARGET_WARN` (0.95: less than 5% of ``ln(bins)`` left, e.g. 0.035 nats with
    2 choices) the temperature must grow very large before the policy can prefer any action, which is almost
    never intended; a warning says so.

    Args:
        fraction: the ``entropy_target`` hyperparameter, in ``[0, 1)``.
        bins: choices per action dimension ``K >= 1``.
        dims: action dimensions ``D >= 1``.
        agent: name used in messages.

    Returns:
        ``fraction * ln(bins) * dims`` (nats).

    Raises:
        ValueError: if ``fraction`` is not a finite number in ``[0, 1)`` (the message names the value).

    Warns:
        UserWarning: if ``fraction > ENTROPY_TARGET_WARN`` and ``bins > 1``.
    """
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not math.isfinite(fraction) \
            or not 0.0 <= fraction < 1.0:
        raise ValueError(f"{agent} entropy_target must be a fraction in [0, 1) of the maximum entropy ln(bins), "
                         f"got {fraction!r} (1 targets the uniform policy, which no finite temperature reaches)")
    if fraction > ENTROPY_TARGET_WARN and bins > 1:
        gap = (1.0 - fraction) * math.log(bins)
        warnings.warn(f"{agent} entropy_target={fraction!r} is within {100 * (1 - fraction):.1f}% of the maximum "
                      f"entropy ln({bins}): the policy may depart from uniform by only {gap:.3g} nats per action "
                      f"dimension and the temperature will grow very large (rule: warn above "
                      f"{ENTROPY_TARGET_WARN})", UserWarning, stacklevel=3)
    return fraction * math.log(bins) * dims
