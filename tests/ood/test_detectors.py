"""OOD detectors and the OOD sampler (paper Algorithm 3)."""

import numpy as np
import pytest
from scipy.spatial.distance import mahalanobis as scipy_mahalanobis

from lcpo.envs.context import ContextSpec
from lcpo.memory.reservoir import ReservoirBuffer
from lcpo.ood import L2Distance, Mahalanobis, make_detector, sample_ood

SPEC = ContextSpec((3, 4, 5, 6, 7, 8), tuple(f"c{i}" for i in range(6)), ((3, 4, 5), (6, 7, 8)))


def _obs(ctx6, n=None):
    ctx6 = np.atleast_2d(ctx6)
    return np.concatenate([np.full((ctx6.shape[0], 3), 7.0), ctx6], axis=1)


def test_mahalanobis_equals_scipy_on_well_conditioned_data():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(6, 6))
    recent = rng.normal(size=(500, 6)) @ A + 1.0
    det = Mahalanobis(SPEC, threshold=20.0).fit(_obs(recent))
    cov = np.cov(recent, rowvar=False)
    VI = np.linalg.inv(cov)
    x = rng.normal(size=(20, 6)) @ A
    expected = np.array([scipy_mahalanobis(xi, recent.mean(0), VI) ** 2 for xi in x])
    np.testing.assert_allclose(det.distance_sq(_obs(x)), expected, rtol=1e-4)
    np.testing.assert_array_equal(det(_obs(x)), expected > 20.0)


def test_mahalanobis_constant_recent_context_is_finite():
    recent = np.tile([0.5, 0.5, 0.5, -1.0, -1.0, -1.0], (200, 1))
    det = Mahalanobis(SPEC, threshold=20.0).fit(_obs(recent))
    d = det.distance_sq(_obs(np.array([[0.5, 0.5, 0.5, -1, -1, -1], [0.6, 0.5, 0.5, -1, -1, -1]])))
    assert np.all(np.isfinite(d))
    assert d[0] == pytest.approx(0.0, abs=1e-9)
    assert d[1] > 20.0  # any change of a constant context is far away


def test_mahalanobis_collinear_lags_do_not_blow_up():
    t = np.linspace(0, 1, 300)
    recent = np.stack([t, t, t, 2 * t, 2 * t, 2 * t], axis=1)
    det = Mahalanobis(SPEC, threshold=24.0).fit(_obs(recent))
    d = det.distance_sq(_obs(recent[::10]))
    assert np.all(np.isfinite(d)) and d.max() < 24.0  # in-distribution samples are not OOD


def test_l2_uses_per_axis_mean_of_lags():
    recent = np.tile([0.0, 0.0, 0.0, 0.0, 0.0, 0.0], (10, 1))
    det = L2Distance(SPEC, sigma2=1.0).fit(_obs(recent))
    # lags (1.5, 0, 0) average to 0.5 on x; (0.9, 0.9, 0.9) to 0.9 on y: 0.25 + 0.81 = 1.06 > 1
    x = np.array([[1.5, 0, 0, 0.9, 0.9, 0.9], [0.9, 0.9, 0.9, 0, 0, 0]])
    np.testing.assert_allclose(det.distance_sq(_obs(x)), [1.06, 0.81])
    np.testing.assert_array_equal(det(_obs(x)), [True, False])


def test_detectors_reject_bad_thresholds_and_names():
    with pytest.raises(ValueError, match="sigma2"):
        L2Distance(SPEC, sigma2=-1)
    with pytest.raises(ValueError, match="threshold"):
        Mahalanobis(SPEC, threshold=float("nan"))
    with pytest.raises(ValueError, match="unknown OOD detector 'cosine'"):
        make_detector("cosine", SPEC, 1.0)


def _reservoir(n_far, n_near, rng):
    res = ReservoirBuffer(n_far + n_near, 9, rng)
    res.add_batch(np.concatenate([_obs(np.full((n_far, 6), 3.0)), _obs(np.zeros((n_near, 6)))]).astype(np.float32))
    return res


def test_sampler_returns_b_ood_states_or_nothing():
    rng = np.random.default_rng(0)
    det = L2Distance(SPEC, 1.0).fit(_obs(np.zeros((200, 6))))
    anchors, frac = sample_ood(_reservoir(1000, 1000, rng), det, batch=20, factor=5)
    assert anchors.shape == (20, 9) and np.all(anchors[:, 3:] == 3.0)  # only OOD states are returned
    assert 0.3 < frac < 0.7
    # 5% OOD: 1000 candidates hold about 50 OOD states, fewer than b = 200 -> nothing
    anchors, frac = sample_ood(_reservoir(100, 1900, rng), det, batch=200, factor=5)
    assert anchors is None and 0.0 < frac < 0.1
    assert sample_ood(ReservoirBuffer(10, 9, rng), det, 5) == (None, 0.0)


def test_l2_threshold_is_in_trace_units():
    """A trace divided by 8 by the environment: the same wind change must still count as OOD."""
    scaled = ContextSpec(SPEC.indices, SPEC.names, SPEC.groups, scale=1 / 8)
    recent = _obs(np.zeros((10, 6)))
    x = _obs(np.full((1, 6), 1.5 / 8))  # 1.5 trace units of wind on both axes, as observed after the divisor
    assert L2Distance(scaled, sigma2=1.0).fit(recent)(x)[0]          # 1.5^2 * 2 = 4.5 > 1 in trace units
    assert not L2Distance(SPEC, sigma2=1.0).fit(recent)(x)[0]        # without the scale it would look near
