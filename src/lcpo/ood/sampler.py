"""The OOD sampler of the paper's Algorithm 3."""

from __future__ import annotations

import numpy as np

from lcpo.memory.reservoir import ReservoirBuffer
from lcpo.ood.detectors import OODDetector

__all__ = ["sample_ood"]


def sample_ood(reservoir: ReservoirBuffer, detector: OODDetector, batch: int, factor: int = 5):
    """Draw an anchor batch of OOD states (paper Algorithm 3).

    Draws ``s = factor * batch`` candidates uniformly without replacement from the reservoir (all of it if it
    holds fewer), keeps those the (already fitted) detector labels OOD, and returns the first ``batch`` of them,
    or nothing if fewer than ``batch`` were found. A detector with a ``calibrate(candidates)`` method (the
    automatic threshold, :class:`lcpo.ood.calibration.AutoThreshold`) gets the candidates first, once per call.

    Args:
        reservoir: the buffer of past states.
        detector: a detector fitted on the recent batch.
        batch: ``b``, the anchor batch size (200 in the paper).
        factor: candidates per requested state (5).

    Returns:
        ``(anchor_obs (batch, obs_dim) float32 or None, ood_fraction float)``: the fraction of candidates that
        were OOD (0 when the reservoir is empty).
    """
    idx = reservoir.sample_indices(factor * batch)
    if idx.size == 0:
        return None, 0.0
    cand = reservoir.data[idx]
    calibrate = getattr(detector, "calibrate", None)
    if calibrate is not None:  # an automatic threshold (lcpo.ood.calibration) absorbs this update's candidates
        calibrate(cand)
    mask = detector(cand)
    frac = float(mask.mean())
    hits = np.flatnonzero(mask)
    if hits.size < batch:
        return None, frac
    return cand[hits[:batch]], frac
