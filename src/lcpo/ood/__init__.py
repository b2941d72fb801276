"""OOD detection on declared context entries, its automatic threshold, and the OOD sampler (paper Algorithm 3)."""

from lcpo.ood.calibration import AUTO_RULES, AutoThreshold, RunningMoments, quantile_statistic
from lcpo.ood.detectors import L2Distance, Mahalanobis, OODDetector, gaussian_fit, make_detector, mahalanobis_sq
from lcpo.ood.sampler import check_ood_sizes, sample_ood

__all__ = ["AUTO_RULES", "AutoThreshold", "L2Distance", "Mahalanobis", "OODDetector", "RunningMoments",
           "gaussian_fit", "check_ood_sizes", "make_detector", "mahalanobis_sq", "quantile_statistic", "sample_ood"]
