"""Gaussian distance math of the OOD detectors (paper Appendix F): the squared Mahalanobis distance and a
regularised Gaussian fit. Pure NumPy; used by the fixed-threshold detectors (:mod:`lcpo.ood.detectors`) and by the
automatic threshold (:mod:`lcpo.ood.calibration`), so neither imports the other's module for it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["gaussian_fit", "mahalanobis_sq"]


def mahalanobis_sq(x: np.ndarray, mean: np.ndarray, precision: np.ndarray) -> np.ndarray:
    """``(N,)`` float64 squared Mahalanobis distances ``(x - mean)^T P (x - mean)`` for ``x (N, d)``, ``mean (d,)``
    and a symmetric positive definite precision ``P (d, d)`` (paper Appendix F's detector); no checks (hot path).
    """
    d = x - mean
    return np.einsum("ij,jk,ik->i", d, precision, d)


def gaussian_fit(x: np.ndarray, ridge: float = 1e-6, floor: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """Mean and regularised precision of ``x (M, d)``, ``M >= 1`` (the Mahalanobis detector's fit).

    The sample covariance ``Sigma`` (zero for ``M = 1``) is regularised as
    ``Sigma + (ridge * tr(Sigma) / d + floor) I`` and inverted by symmetric eigendecomposition, so the
    precision is finite even for a constant or collinear ``x`` (paper Appendix F fits a Gaussian to the recent
    batch's contexts; the regularisation is ours).

    Returns:
        ``(mean (d,), precision (d, d))``, float64.

    Raises:
        ValueError: from NumPy for an ``x`` that is not 2-D or is empty.
    """
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=0)
    cov = np.cov(x, rowvar=False, bias=False) if x.shape[0] > 1 else np.zeros((x.shape[1],) * 2)
    cov = np.atleast_2d(cov)
    d = cov.shape[0]
    reg = ridge * max(np.trace(cov), 0.0) / d + floor
    w, v = np.linalg.eigh(cov + reg * np.eye(d))
    w = np.maximum(w, reg)
    return mean, (v / w) @ v.T
