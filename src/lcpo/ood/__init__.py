"""OOD detection on declared context entries, and the OOD sampler (paper Algorithm 3)."""

from lcpo.ood.detectors import L2Distance, Mahalanobis, OODDetector, make_detector, mahalanobis_sq
from lcpo.ood.sampler import sample_ood

__all__ = ["L2Distance", "Mahalanobis", "OODDetector", "make_detector", "mahalanobis_sq", "sample_ood"]
