"""Bootstrap intervals, separation, and the normalized score of paper Figure 3."""

import numpy as np
import pytest

from lcpo.experiments.stats import MeanCI, mean_ci, normalize_scores, separates


def test_ci_matches_normal_theory_and_is_seeded():
    x = np.random.default_rng(1).normal(5.0, 2.0, size=400)
    ci = mean_ci(x, seed=0)
    se = x.std(ddof=0) / np.sqrt(x.size)
    assert ci.mean == pytest.approx(x.mean())
    # percentile bootstrap of the mean ~ mean +- 1.96 se for a large normal sample
    assert ci.low == pytest.approx(x.mean() - 1.96 * se, abs=0.15 * se * 1.96)
    assert ci.high == pytest.approx(x.mean() + 1.96 * se, abs=0.15 * se * 1.96)
    assert mean_ci(x, seed=0) == ci
    assert mean_ci(x, seed=1) != ci
    wider = mean_ci(x, confidence=0.99, seed=0)
    assert wider.low < ci.low and wider.high > ci.high


def test_degenerate_cases():
    assert mean_ci([3.0, 3.0, 3.0]) == MeanCI(3.0, 3.0, 3.0, 3)
    one = mean_ci([2.0])
    assert one.mean == 2.0 and np.isnan(one.low) and np.isnan(one.high) and one.n == 1
    for bad in ([], [1.0, np.nan], [[1.0, 2.0]]):
        with pytest.raises(ValueError):
            mean_ci(bad)
    with pytest.raises(ValueError, match="confidence"):
        mean_ci([1.0, 2.0], confidence=1.5)


def test_separates():
    best = MeanCI(10.0, 9.0, 11.0, 5)
    assert separates(best, [MeanCI(5.0, 4.0, 8.9, 5), MeanCI(1.0, 0.0, 2.0, 5)])
    assert not separates(best, [MeanCI(8.0, 7.0, 9.5, 5)])
    assert not separates(MeanCI(10.0, np.nan, np.nan, 1), [MeanCI(1.0, 0.0, 2.0, 5)])


def test_normalize_scores():
    np.testing.assert_allclose(normalize_scores([-200.0, -150.0, -100.0]), [0.0, 0.5, 1.0])
    np.testing.assert_allclose(normalize_scores([4.0, 4.0]), [1.0, 1.0])
    with pytest.raises(ValueError):
        normalize_scores([1.0, np.inf])
