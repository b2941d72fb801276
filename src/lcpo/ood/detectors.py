"""OOD detectors on the declared context entries (paper section 4.2 and Appendix F, "OOD detection").

A detector is fitted on the recent batch's observations and then labels candidate observations as
out-of-distribution (True) or not. It reads only the context entries an environment declares
(:class:`~lcpo.envs.context.ContextSpec`), so it works on any environment.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from lcpo.envs.context import ContextSpec
from lcpo.ood.calibration import AutoThreshold
from lcpo.ood.gaussian import gaussian_fit, mahalanobis_sq

__all__ = ["OODDetector", "L2Distance", "Mahalanobis", "gaussian_fit", "make_detector", "mahalanobis_sq"]


class OODDetector(Protocol):
    """``fit(recent_obs (M, obs_dim))`` then ``__call__(obs (N, obs_dim)) -> (N,) bool`` (True = OOD)."""

    def fit(self, recent_obs: np.ndarray) -> "OODDetector":
        """Fit the detector to the recent batch's observations ``(M, obs_dim)``; returns itself."""

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """``(N,) bool`` OOD labels of ``obs (N, obs_dim)`` relative to the fitted recent batch (True = OOD)."""


class L2Distance:
    """OOD if the squared L2 distance of a sample's context summary to the recent mean exceeds ``sigma2``.

    The summary averages each context group (e.g. the 3 lags of wind x, then of wind y) into one value per
    axis, giving a 2-D wind for the windy environments (spec: main runs sigma^2 = 1; ablation 0.25 .. 4).

    Args:
        spec: the environment's context declaration.
        sigma2: squared-distance threshold in squared *trace* units: the detector compares with
            ``sigma2 * spec.scale ** 2`` in observation units, so a trace divided by 8 by the environment keeps
            the same meaning of "far".

    Raises:
        ValueError: if ``sigma2`` is not positive and finite.
    """

    def __init__(self, spec: ContextSpec, sigma2: float = 1.0):
        if not (np.isfinite(sigma2) and sigma2 > 0):
            raise ValueError(f"L2Distance threshold sigma2 must be positive and finite, got {sigma2}")
        self.spec, self.sigma2 = spec, float(sigma2)
        self.threshold = self.sigma2 * spec.scale ** 2  # in observation units
        self.center = None

    def fit(self, recent_obs: np.ndarray) -> "L2Distance":
        """Fit the recent mean context summary (``(groups,)``)."""
        self.center = self.spec.summary(recent_obs).mean(axis=0)
        return self

    def distance_sq(self, obs: np.ndarray) -> np.ndarray:
        """``(N,)`` squared distance of each observation's context summary to the fitted center."""
        if self.center is None:
            raise RuntimeError("L2Distance: call fit(recent_obs) first")
        d = self.spec.summary(obs) - self.center
        return np.einsum("ij,ij->i", d, d)

    @property
    def threshold_report(self) -> float:
        """The threshold as a diagnostic (``ood/threshold``): sigma^2 in trace units."""
        return self.sigma2

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """``(N,) bool``: True where the distance of ``obs (N, obs_dim)`` exceeds the threshold (strictly).

        Raises:
            RuntimeError: before :meth:`fit`.
        """
        return self.distance_sq(obs) > self.threshold


class Mahalanobis:
    """OOD if the squared Mahalanobis distance under a Gaussian fitted to the recent batch exceeds ``threshold``.

    The covariance of the recent contexts is singular whenever the context is constant over the batch
    (piecewise-constant traces) and nearly singular when lags are collinear; it is regularised as
    ``Sigma + (ridge * tr(Sigma) / d + floor) I`` before inversion (by symmetric eigendecomposition), so the
    answer is always finite: with a constant recent context every differing sample is far away, an equal one at
    distance 0. On well-conditioned data the distances equal SciPy's to about ``ridge`` relative error.
    The distance is invariant to rescaling the context, so no trace-divisor correction is needed.

    Args:
        spec: the environment's context declaration.
        threshold: D^2 threshold (straggler: 20, 24, 28).
        full_observation: use every observation entry instead of the context entries (the paper's
            "handicapped" variant).
        ridge: relative shrinkage (default 1e-6).
        floor: absolute variance floor in squared context units (default 1e-6).

    Raises:
        ValueError: for a threshold that is not positive and finite, or no ``spec`` without
            ``full_observation``; :meth:`fit` for an empty recent batch.
    """

    def __init__(self, spec: ContextSpec | None, threshold: float, full_observation: bool = False,
                 ridge: float = 1e-6, floor: float = 1e-6):
        if not (np.isfinite(threshold) and threshold > 0):
            raise ValueError(f"Mahalanobis threshold must be positive and finite, got {threshold}")
        if spec is None and not full_observation:
            raise ValueError("Mahalanobis needs a ContextSpec unless full_observation=True")
        self.spec, self.threshold = spec, float(threshold)
        self.full_observation, self.ridge, self.floor = full_observation, float(ridge), float(floor)
        self.mean = self.precision = None

    def _features(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float64)
        return obs if self.full_observation else self.spec.select(obs)

    def fit(self, recent_obs: np.ndarray) -> "Mahalanobis":
        """Fit mean ``(d,)`` and regularised precision ``(d, d)`` on ``recent_obs (M, obs_dim)``."""
        x = self._features(recent_obs)
        if x.shape[0] < 1:
            raise ValueError("Mahalanobis.fit needs at least one recent observation")
        self.mean, self.precision = gaussian_fit(x, self.ridge, self.floor)
        return self

    def distance_sq(self, obs: np.ndarray) -> np.ndarray:
        """``(N,)`` squared Mahalanobis distances to the fitted Gaussian."""
        if self.mean is None:
            raise RuntimeError("Mahalanobis: call fit(recent_obs) first")
        return mahalanobis_sq(self._features(obs), self.mean, self.precision)

    @property
    def threshold_report(self) -> float:
        """The threshold as a diagnostic (``ood/threshold``): ``D^2``."""
        return self.threshold

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """``(N,) bool``: True where the distance of ``obs (N, obs_dim)`` exceeds the threshold (strictly).

        Raises:
            RuntimeError: before :meth:`fit`.
        """
        return self.distance_sq(obs) > self.threshold


def make_detector(name: str, spec: ContextSpec, threshold: float | str, *, rule: str = "quantile",
                  target_fraction: float = 0.5, std_threshold: float = 1.0) -> OODDetector:
    """Build a detector by name: ``"l2"``, ``"mahalanobis"`` or ``"mahalanobis-full"`` (handicapped).

    Args:
        name: the detector.
        spec: the environment's context declaration.
        threshold: a positive number (sigma^2 in trace units for L2, ``D^2`` for Mahalanobis); ``"auto"``: an
            automatically calibrated threshold (:class:`lcpo.ood.calibration.AutoThreshold` with ``rule``,
            ``target_fraction``, ``std_threshold``); ``"env"``: the threshold ``spec`` declares for ``name``
            (:meth:`ContextSpec.declared_threshold`), else ``"auto"``.
        rule, target_fraction, std_threshold: the automatic threshold's settings (ignored for a number).

    Returns:
        A detector (:class:`L2Distance`, :class:`Mahalanobis` or :class:`lcpo.ood.calibration.AutoThreshold`),
        not yet fitted.

    Raises:
        ValueError: for an unknown name, a threshold that is neither a positive number nor ``"auto"``/``"env"``,
            or invalid automatic settings.
    """
    if name not in ("l2", "mahalanobis", "mahalanobis-full"):
        raise ValueError(f"unknown OOD detector {name!r}; choose 'l2', 'mahalanobis' or 'mahalanobis-full'")
    if rule not in ("quantile", "standardized"):  # checked even when unused, so a typo never goes unnoticed
        raise ValueError(f"unknown automatic OOD threshold rule {rule!r}; choose 'quantile' or 'standardized'")
    if isinstance(threshold, str):
        if threshold == "env":
            declared = spec.declared_threshold(name) if spec is not None else None
            threshold = "auto" if declared is None else declared
        if threshold == "auto":
            return AutoThreshold(name, spec, rule=rule, target_fraction=target_fraction,
                                 std_threshold=std_threshold)
        if isinstance(threshold, str):
            raise ValueError(f"OOD threshold must be a positive number, 'auto' or 'env', got {threshold!r}")
    if name == "l2":
        return L2Distance(spec, threshold)
    if name == "mahalanobis":
        return Mahalanobis(spec, threshold)
    return Mahalanobis(spec, threshold, full_observation=True)
