"""The OOD sampler of the paper's Algorithm 3."""

from __future__ import annotations

import numpy as np

from lcpo.memory.reservoir import ReservoirBuffer
from lcpo.ood.detectors import OODDetector

__all__ = ["check_ood_sizes", "sample_ood"]


def check_ood_sizes(reservoir_size: int, ood_batch: int, agent: str = "LCPO") -> None:
    """Reject a reservoir too small for :func:`sample_ood` ever to return an anchor batch.

    The sampler draws ``N = min(factor * b, len(reservoir))`` candidates and needs ``b`` of them OOD, so a
    reservoir holding fewer than ``b`` states silently turns LCPO into an unconstrained learner. (That each size
    is a positive integer is checked where hyperparameters are parsed, :mod:`lcpo.agents.base`.)

    Args:
        reservoir_size: reservoir capacity (states).
        ood_batch: anchor batch size ``b``.
        agent: the agent's name, for the message.

    Raises:
        ValueError: if ``reservoir_size < ood_batch``, naming both values.
    """
    if reservoir_size < ood_batch:
        raise ValueError(f"{agent}: reservoir_size={reservoir_size} is smaller than ood_batch={ood_batch}: the OOD "
                         f"sampler could never find an anchor batch (the paper: reservoir = 1% of the run's steps, "
                         f"b = 200)")


def sample_ood(reservoir: ReservoirBuffer, detector: OODDetector, batch: int, factor: int = 5):
    """Draw an anchor batch of OOD states (paper Algorithm 3).

    Draws ``N = min(factor * batch, len(reservoir))`` candidates uniformly without replacement from the
    reservoir, keeps those the (already fitted) detector labels OOD, and returns the first ``batch`` of them,
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

    Raises:
        RuntimeError: if the detector was not fitted on the recent batch; ValueError from an automatic
            threshold's ``calibrate`` (a non-finite distance).
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
