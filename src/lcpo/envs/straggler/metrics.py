"""The paper's tail-latency metric for the straggler benchmark.

The paper reports the 95th percentile latency over 5-minute buckets of request arrivals, averaged over the
buckets (spec "Golden figures"; issue 7, "A metric matching the paper's"). This differs from the mean per-step
p95 that the reward uses: buckets hold ~10^4 requests and are keyed by arrival, not by completion.
"""

from __future__ import annotations

import numpy as np

__all__ = ["bucket_percentiles", "bucketed_p95"]


def _check(arrival_ms, latency_ms, bucket_ms: float, q: float) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(arrival_ms, dtype=np.float64)
    lat = np.asarray(latency_ms, dtype=np.float64)
    if a.ndim != 1 or lat.ndim != 1 or a.shape != lat.shape:
        raise ValueError(f"arrival_ms and latency_ms must be 1-D of equal length, got shapes {a.shape} "
                         f"and {lat.shape}")
    if a.size == 0:
        raise ValueError("no requests: arrival_ms and latency_ms are empty")
    for name, v in (("arrival_ms", a), ("latency_ms", lat)):
        bad = ~np.isfinite(v)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{name} has a non-finite value {v[i]} at index {i}")
    if np.any(lat < 0):
        i = int(np.argmax(lat < 0))
        raise ValueError(f"latency_ms has a negative value {lat[i]} at index {i}")
    if not (np.isfinite(bucket_ms) and bucket_ms > 0):
        raise ValueError(f"bucket_ms must be positive and finite, got {bucket_ms!r}")
    if not (0 <= q <= 100):
        raise ValueError(f"percentile q must be in [0, 100], got {q!r}")
    return a, lat


def bucket_percentiles(arrival_ms, latency_ms, bucket_ms: float = 300_000.0, q: float = 95.0
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Per-bucket latency percentile, buckets keyed by arrival time.

    Args:
        arrival_ms: ``(n,)`` arrival times (ms).
        latency_ms: ``(n,)`` latencies (ms, ``>= 0``) of the same requests.
        bucket_ms: bucket width (ms); bucket ``b`` holds arrivals in ``[b w, (b + 1) w)``.
        q: percentile in [0, 100] (``numpy.percentile``, linear interpolation).

    Returns:
        ``(buckets, values)``: ``(m,)`` int64 indices of the non-empty buckets (ascending) and ``(m,)``
        float64 percentiles.

    Raises:
        ValueError: shapes differ or are not 1-D, empty input, non-finite values, negative latencies, a
            non-positive bucket width or ``q`` outside [0, 100].
    """
    a, lat = _check(arrival_ms, latency_ms, bucket_ms, q)
    b = np.floor(a / bucket_ms).astype(np.int64)
    order = np.argsort(b, kind="stable")
    b, lat = b[order], lat[order]
    keys, starts = np.unique(b, return_index=True)
    groups = np.split(lat, starts[1:])
    return keys, np.array([np.percentile(g, q) for g in groups])


def bucketed_p95(arrival_ms, latency_ms, bucket_ms: float = 300_000.0) -> float:
    """The paper's metric: the mean over 5-minute arrival buckets of each bucket's p95 latency (ms).

    Args:
        arrival_ms: ``(n,)`` arrival times (ms).
        latency_ms: ``(n,)`` latencies (ms).
        bucket_ms: bucket width (default 5 minutes).

    Returns:
        The average of the non-empty buckets' 95th percentiles (ms).

    Raises:
        ValueError: see :func:`bucket_percentiles`.

    Example:
        >>> bucketed_p95([0.0, 1.0, 400_000.0], [10.0, 20.0, 5.0])
        12.25
    """
    return float(bucket_percentiles(arrival_ms, latency_ms, bucket_ms, 95.0)[1].mean())
