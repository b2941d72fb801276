"""The paper's metric: p95 over 5-minute arrival buckets, averaged."""

from __future__ import annotations

import numpy as np
import pytest

from lcpo.envs.straggler import bucket_percentiles, bucketed_p95


def test_bucketed_p95_by_hand():
    arrival = [0.0, 1.0, 299_999.0, 300_000.0, 900_000.0]
    latency = [10.0, 20.0, 30.0, 5.0, 7.0]
    keys, vals = bucket_percentiles(arrival, latency)
    np.testing.assert_array_equal(keys, [0, 1, 3])                 # empty bucket 2 skipped
    np.testing.assert_allclose(vals, [np.percentile([10, 20, 30], 95), 5.0, 7.0])
    assert bucketed_p95(arrival, latency) == pytest.approx((29.0 + 5.0 + 7.0) / 3)


def test_bucketed_p95_is_order_invariant_and_validates():
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 3_600_000, 5000)
    lat = rng.exponential(50, 5000)
    p = rng.permutation(5000)
    assert bucketed_p95(a, lat) == pytest.approx(bucketed_p95(a[p], lat[p]), rel=1e-12)
    with pytest.raises(ValueError, match="equal length"):
        bucketed_p95(a, lat[:10])
    with pytest.raises(ValueError, match="non-finite"):
        bucketed_p95([0.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="negative"):
        bucketed_p95([0.0], [-1.0])
    with pytest.raises(ValueError, match="empty"):
        bucketed_p95([], [])
