"""The automatic OOD threshold (``ood_threshold="auto"``, lcpo.ood.calibration): unit invariance at the OOD-sampler
level, the rules' defining properties, the declared-threshold default, diagnostics and exact resume."""

import math

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import lcpo.envs  # noqa: F401
from lcpo.agents import LCPO, LCPOP
from lcpo.envs.context import ContextSpec, get_context_spec
from lcpo.memory.reservoir import ReservoirBuffer
from lcpo.ood import (AutoThreshold, L2Distance, Mahalanobis, RunningMoments, make_detector, quantile_statistic,
                      sample_ood)
from lcpo.online.run import RunConfig, execute
from summaries import comparable

# observation = [id, 2 state entries, 3 x-lags, 3 y-lags]; entry 0 identifies each state (never scaled)
SPEC = ContextSpec((3, 4, 5, 6, 7, 8), tuple(f"c{i}" for i in range(6)), ((3, 4, 5), (6, 7, 8)))
BATCH, UPDATES = 200, 40


def _wind_stream(seed=0, updates=UPDATES):
    """``(updates * 200, 9)`` float64 observations whose 2-axis context jumps between levels and drifts, with
    noise, in 3 lags per axis (like the windy environments' observations)."""
    rng = np.random.default_rng(seed)
    T = updates * BATCH
    levels = rng.normal(scale=1.5, size=(6, 2))
    ctx = levels[np.minimum(np.arange(T) * 6 // T, 5)] + np.cumsum(rng.normal(scale=0.01, size=(T, 2)), axis=0)
    ctx += rng.normal(scale=0.2, size=(T, 2))
    obs = np.zeros((T, 9))
    obs[:, 0] = np.arange(T)
    obs[:, 1:3] = rng.normal(size=(T, 2))
    for k in range(3):
        obs[:, 3 + k] = np.roll(ctx[:, 0], k)
        obs[:, 6 + k] = np.roll(ctx[:, 1], k)
    return obs


def _replay(obs, detector, scale=None, seed=0, batch=BATCH, anchors_per_update=200):
    """Run LCPO's OOD path over ``obs`` in batches: fit, sample (Algorithm 3), add to the reservoir. The context
    entries are multiplied by ``scale`` (a scalar or per-entry array) first, in float32 as observations are.

    Returns the anchor ids of every update (None where no anchor batch was found), and the smallest relative
    gap between a candidate's distance and the threshold over all decisions (the margin that makes the
    comparison of labels exact despite the float rounding of the change of units)."""
    obs = np.array(obs, dtype=np.float64)
    if scale is not None:
        idx = list(detector.spec.indices) if detector.spec is not None else slice(None)
        obs[:, idx] = obs[:, idx] * scale
    obs = obs.astype(np.float32)
    res = ReservoirBuffer(2000, obs.shape[1], np.random.default_rng(seed))
    picked, gap = [], math.inf
    for u in range(obs.shape[0] // batch):
        recent = obs[batch * u: batch * (u + 1)]
        detector.fit(recent)
        anchors, _ = sample_ood(res, detector, anchors_per_update, 5)
        picked.append(None if anchors is None else anchors[:, 0].astype(int).tolist())
        if len(res) and isinstance(detector, AutoThreshold) and math.isfinite(detector.threshold):
            d = detector.distance_sq(res.data[: len(res)])
            gap = min(gap, float(np.min(np.abs(d - detector.threshold)) / detector.threshold))
        res.add_batch(recent)
    return picked, gap


@pytest.mark.parametrize("kind", [dict(detector="l2"), dict(detector="l2", rule="standardized"),
                                  dict(detector="mahalanobis"), dict(detector="mahalanobis-full")])
@pytest.mark.parametrize("factor", [10.0, 0.01])
def test_auto_threshold_selects_the_same_anchors_in_other_units(kind, factor):
    obs = _wind_stream()
    base, base_gap = _replay(obs, AutoThreshold(spec=SPEC, **kind))
    scaled, scaled_gap = _replay(obs, AutoThreshold(spec=SPEC, **kind), scale=factor)
    assert min(base_gap, scaled_gap) > 1e-5  # no distance within float rounding of the threshold
    found = [p for p in base if p is not None]
    assert len(found) >= UPDATES // 4  # the stream is non-stationary: LCPO is constrained often
    assert scaled == base  # the same anchor states, update by update


@pytest.mark.parametrize("factor", [10.0, 0.01])
def test_a_fixed_threshold_selects_other_anchors_in_other_units(factor):
    obs = _wind_stream()
    base, _ = _replay(obs, L2Distance(SPEC, sigma2=1.0))
    scaled, _ = _replay(obs, L2Distance(SPEC, sigma2=1.0), scale=factor)
    assert any(p is not None for p in base)
    assert scaled != base
    if factor < 1:  # a hundredth of the wind: nothing is ever far enough, LCPO silently becomes A2C
        assert all(p is None for p in scaled)


def _straggler_observations(steps=12_000):
    env = gym.make("lcpo/StragglerMitigation-v0", workload="synthetic-ramp")
    obs, _ = env.reset(seed=0)
    out = np.empty((steps, obs.shape[0]), np.float64)
    rng = np.random.default_rng(0)
    for t in range(steps):
        out[t] = obs
        obs, *_ = env.step(int(rng.integers(9)))
    out[:, 0] = np.arange(steps)  # entry 0 (a queue length, not context) becomes the state's id
    return out, get_context_spec(env)


def test_straggler_two_feature_context_mahalanobis_auto_is_unit_free():
    """The straggler context (rate and size EMAs, different units): rate x10 and size x0.01 together, with
    the paper's Mahalanobis detector and the automatic threshold, select exactly the same anchors."""
    obs, spec = _straggler_observations()
    assert spec.indices[0] != 0
    kw = dict(batch=600, anchors_per_update=20)
    base, g0 = _replay(obs, AutoThreshold("mahalanobis", spec), **kw)
    scaled, g1 = _replay(obs, AutoThreshold("mahalanobis", spec), scale=np.array([10.0, 0.01]), **kw)
    assert min(g0, g1) > 1e-5
    assert sum(p is not None for p in base) >= 5
    assert scaled == base
    # a fixed D^2 is unit-free except through its absolute covariance floor (1e-6 squared context units): with
    # the rate EMA in units 1e4 times larger (x 1e-4) the floor swamps its variance and the labels change
    fixed = [_replay(obs, Mahalanobis(spec, 24.0), scale=s, **kw)[0] for s in (None, np.array([1e-4, 1.0]))]
    auto = [_replay(obs, AutoThreshold("mahalanobis", spec), scale=s, **kw)[0] for s in (None, np.array([1e-4, 1.0]))]
    assert auto[0] == auto[1] == base
    assert fixed[0] != fixed[1]


def _degenerate_streams():
    """Streams on which a unit-dependent floor would show: the context is exactly 0 for the first 10 updates
    and then moves (as `_wind_stream`), and one whose y axis is always exactly 0."""
    zero_then = _wind_stream()
    zero_then[: 10 * BATCH, 3:] = 0.0
    flat_y = _wind_stream(seed=4)
    flat_y[:, 6:] = 0.0
    return {"zero-then-moving": zero_then, "y-always-zero": flat_y}


@pytest.mark.parametrize("stream", ["zero-then-moving", "y-always-zero"])
@pytest.mark.parametrize("kind", [dict(detector="l2"), dict(detector="l2", rule="standardized"),
                                  dict(detector="mahalanobis")])
@pytest.mark.parametrize("factor", [10.0, 0.01, 1e-3])
def test_invariance_holds_with_zero_contexts(stream, kind, factor):
    """A context entry that is (or has been) exactly 0 carries no unit: no floor may bring one in."""
    obs = _degenerate_streams()[stream]
    base, g0 = _replay(obs, AutoThreshold(spec=SPEC, **kind))
    scaled, g1 = _replay(obs, AutoThreshold(spec=SPEC, **kind), scale=factor)
    assert min(g0, g1) > 1e-5
    assert sum(p is not None for p in base) >= UPDATES // 4
    assert scaled == base


def test_quantile_statistic_ties_and_rounding():
    # every distance tied: a threshold on the tie would label none OOD; all of them are
    assert quantile_statistic(np.full(10, 2.0), 0.5) == 1.0
    # a tie at the k-th largest: the tied ones are labelled with it
    d = np.array([5.0, 3.0, 3.0, 3.0, 1.0])
    assert int((d > quantile_statistic(d, 0.5)).sum()) == 4
    assert quantile_statistic(np.zeros(4), 0.5) == 0.0
    # q N computed in floats is 7.000000000000001 for q = 0.07, N = 100; k must be 7, not 8
    for n, q, k in [(100, 0.07, 7), (200, 0.07, 14), (100, 0.55, 55), (200, 0.55, 110), (3, 1 / 3, 1)]:
        d = np.arange(n, dtype=float)
        assert int((d > quantile_statistic(d, q)).sum()) == k, (n, q)
    with pytest.raises(ValueError, match="non-finite distance nan"):
        quantile_statistic(np.array([1.0, np.nan, 3.0]), 0.5)


def test_a_constant_regime_then_a_change_is_all_ood_and_unit_free():
    """A long regime whose context never moves, then a change: the first update after it finds every stored
    state OOD (they all tie at one distance), whatever the units; the constant regime calibrated nothing."""
    obs = np.zeros((30 * BATCH, 9))
    obs[:, 0] = np.arange(obs.shape[0])
    obs[20 * BATCH:, 3:] = 1.0
    for factor in (1.0, 1e-3, 1e3):
        det = AutoThreshold("l2", SPEC)
        res = ReservoirBuffer(4000, 9, np.random.default_rng(0))
        fracs = []
        for u in range(30):
            recent = (obs[BATCH * u: BATCH * (u + 1)] * np.r_[1, 1, 1, [factor] * 6]).astype(np.float32)
            det.fit(recent)
            fracs.append(sample_ood(res, det, 200, 5)[1])
            if u == 19:
                assert det.calibrations == 0 and det.threshold == math.inf
            res.add_batch(recent)
        assert max(fracs[:20]) == 0.0 and fracs[20] == 1.0, factor


def test_non_finite_context_is_named():
    det = AutoThreshold("l2", SPEC)
    obs = _wind_stream()[:BATCH]
    obs[17, 7] = np.nan
    with pytest.raises(ValueError, match="non-finite value nan in row 17, feature 1"):
        det.fit(obs)


def test_calibration_state_is_refused_by_another_setting():
    obs = _wind_stream()
    det = AutoThreshold("l2", SPEC)
    _replay(obs[: 5 * BATCH], det)
    state = det.state_dict()
    other = AutoThreshold("l2", SPEC, target_fraction=0.25)
    with pytest.raises(ValueError, match="target_fraction=0.5, this agent uses target_fraction=0.25"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="detector='l2', this agent uses detector='mahalanobis'"):
        AutoThreshold("mahalanobis", SPEC).load_state_dict(state)
    same = AutoThreshold("l2", SPEC)
    same.load_state_dict(state)
    assert same.threshold == det.threshold
    old = {k: state[k] for k in ("moments", "log_sum", "calibrations")}  # written before the identity was kept
    AutoThreshold("l2", SPEC, rule="standardized").load_state_dict(old)


def test_reservoir_smaller_than_the_anchor_batch_is_refused():
    pend = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    with pytest.raises(ValueError, match="reservoir_size=100 is smaller than ood_batch=200"):
        LCPO(pend, reservoir_size=100)
    with pytest.raises(ValueError, match="LCPO-P: reservoir_size=50 is smaller than ood_batch=64"):
        LCPOP(pend, reservoir_size=50, ood_batch=64)
    LCPO(pend, reservoir_size=200)  # the smallest that can ever find an anchor batch


def test_quantile_statistic_labels_exactly_the_target_fraction():
    rng = np.random.default_rng(1)
    for n, q in [(1000, 0.5), (1000, 0.25), (7, 0.5), (1, 0.5), (50, 0.99)]:
        d = rng.exponential(size=n)
        t = quantile_statistic(d, q)
        assert int((d > t).sum()) == min(n, math.ceil(q * n))
        assert quantile_statistic(100.0 * d, q) == pytest.approx(100.0 * t, rel=1e-12)
    with pytest.raises(ValueError, match="target OOD fraction"):
        quantile_statistic(np.ones(3), 1.0)
    with pytest.raises(ValueError, match="no distances"):
        quantile_statistic(np.zeros(0), 0.5)


def test_running_moments_equal_numpy_over_the_concatenation():
    rng = np.random.default_rng(2)
    batches = [rng.normal(loc=3.0, scale=s, size=(n, 3)) for s, n in [(1, 10), (5, 1), (0.1, 200), (2, 37)]]
    m = RunningMoments(3)
    for b in batches:
        m.update(b)
    m.update(np.zeros((0, 3)))
    allx = np.concatenate(batches)
    np.testing.assert_allclose(m.mean, allx.mean(0), rtol=1e-12)
    np.testing.assert_allclose(m.var, allx.var(0), rtol=1e-10)
    with pytest.raises(ValueError, match="non-finite"):
        m.update(np.full((2, 3), np.nan))
    with pytest.raises(ValueError, match="shape"):
        m.update(np.zeros((2, 4)))


def test_quantile_rule_on_a_stationary_stream_finds_the_target_fraction():
    """i.i.d. contexts: every update's distances have one distribution, so the running threshold converges to
    its (1 - q) quantile and the mean OOD fraction of the candidates to q."""
    rng = np.random.default_rng(3)
    obs = np.zeros((60 * BATCH, 9))
    obs[:, 0] = np.arange(obs.shape[0])
    obs[:, 3:] = np.repeat(rng.normal(size=(obs.shape[0], 2)), 3, axis=1)
    for q in (0.3, 0.5):
        det = AutoThreshold("l2", SPEC, target_fraction=q)
        res = ReservoirBuffer(5000, 9, np.random.default_rng(0))
        fracs = []
        for u in range(60):
            recent = obs[BATCH * u: BATCH * (u + 1)]
            det.fit(recent)
            fracs.append(sample_ood(res, det, 200, 5)[1])
            res.add_batch(recent.astype(np.float32))
        assert abs(np.mean(fracs[10:]) - q) < 0.05


@pytest.mark.parametrize("kind", [dict(detector="l2"), dict(detector="l2", rule="standardized"),
                                  dict(detector="mahalanobis")])
@pytest.mark.parametrize("value", [0.0, 0.1, -3e5])
def test_a_constant_context_is_never_ood_then_a_change_is(kind, value):
    """No unit-free rule can call a never-changing context OOD (float rounding of the batch mean must not turn
    into OOD states); once the context moves, the states of the old context are OOD."""
    obs = np.zeros((30 * BATCH, 9), np.float32)
    obs[:, 0] = np.arange(obs.shape[0])
    obs[:, 3:] = value
    obs[20 * BATCH:, 3:] = value + (1.0 if value == 0 else abs(value))  # the context moves at update 20
    det = AutoThreshold(spec=SPEC, **kind)
    res = ReservoirBuffer(4000, 9, np.random.default_rng(0))
    fracs = []
    for u in range(30):
        recent = obs[BATCH * u: BATCH * (u + 1)]
        det.fit(recent)
        fracs.append(sample_ood(res, det, 200, 5)[1])
        res.add_batch(recent)
    assert max(fracs[:20]) == 0.0
    assert fracs[20] == 1.0  # right after the change, every stored state is of the old context


def test_invalid_settings_are_named():
    with pytest.raises(ValueError, match="'standardized' OOD threshold rule applies to the l2 detector only"):
        AutoThreshold("mahalanobis", SPEC, rule="standardized")
    with pytest.raises(ValueError, match="unknown automatic OOD threshold rule 'median'"):
        AutoThreshold("l2", SPEC, rule="median")
    with pytest.raises(ValueError, match="ood_target_fraction must be a number in \\(0, 1\\), got 0.0"):
        AutoThreshold("l2", SPEC, target_fraction=0.0)
    with pytest.raises(ValueError, match="ood_target_fraction must be a number in \\(0, 1\\), got None"):
        AutoThreshold("l2", SPEC, target_fraction=None)
    with pytest.raises(ValueError, match="ood_std_threshold must be a positive finite number, got '1'"):
        AutoThreshold("l2", SPEC, rule="standardized", std_threshold="1")
    with pytest.raises(ValueError, match="ood_std_threshold"):
        AutoThreshold("l2", SPEC, rule="standardized", std_threshold=-1.0)
    with pytest.raises(ValueError, match="'auto' or 'env', got 'tuned'"):
        make_detector("l2", SPEC, "tuned")
    with pytest.raises(ValueError, match="declared OOD threshold l2=-1.0"):
        ContextSpec((0,), ("z",), ood_thresholds={"l2": -1.0})
    pend = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    with pytest.raises(ValueError, match="rule 'median'"):  # even where the threshold is a number
        LCPO(pend, ood_threshold=1.0, ood_auto_rule="median")
    with pytest.raises(ValueError, match="'ood_target_fraction' must be in \\(0, 1\\), got 1.0"):
        LCPO(pend, ood_target_fraction=1.0)
    with pytest.raises(ValueError, match="'ood_std_threshold' must be > 0"):
        LCPOP(pend, ood_std_threshold=0.0)
    det = AutoThreshold("l2", SPEC)
    with pytest.raises(RuntimeError, match="fit"):
        det.distance_sq(np.zeros((1, 9)))
    assert math.isnan(det.threshold_report)


def test_env_default_uses_the_declared_threshold_else_auto():
    declared = ContextSpec((3, 4), ("a", "b"), ood_thresholds={"l2": 2.0})
    det = make_detector("l2", declared, "env")
    assert isinstance(det, L2Distance) and det.sigma2 == 2.0
    assert isinstance(make_detector("mahalanobis", declared, "env"), AutoThreshold)
    assert isinstance(make_detector("l2", ContextSpec((3,), ("a",)), "env"), AutoThreshold)
    assert declared.to_dict()["ood_thresholds"] == {"l2": 2.0}

    pend = gym.make("lcpo/WindyPendulum-v0", trace="wind-3")
    agent = LCPO(pend, seed=0, reservoir_size=500)
    assert agent.hp.ood_threshold == "env"
    assert isinstance(agent.detector, L2Distance) and agent.detector.sigma2 == 1.0  # the paper's sigma^2 = 1
    assert isinstance(LCPO(pend, seed=0, reservoir_size=500, detector="mahalanobis").detector, AutoThreshold)
    assert isinstance(LCPOP(pend, seed=0, reservoir_size=500, ood_threshold="auto").detector, AutoThreshold)
    strag = gym.make("lcpo/StragglerMitigation-v0", workload="synthetic-ramp")
    det = LCPO(strag, seed=0, reservoir_size=500, detector="mahalanobis").detector
    assert isinstance(det, Mahalanobis) and det.threshold == 24.0  # the paper's "Med"
    assert isinstance(LCPO(strag, seed=0, reservoir_size=500).detector, AutoThreshold)  # L2: none declared
    with pytest.raises(ValueError, match="'ood_threshold' must be a positive number or one of 'auto', 'env'"):
        LCPO(pend, ood_threshold="sometimes")
    with pytest.raises(ValueError, match="'ood_threshold' must be > 0"):
        LCPO(pend, ood_threshold=0)
    assert LCPO(pend, seed=0, reservoir_size=500, ood_threshold=3).detector.sigma2 == 3.0


@pytest.mark.parametrize("cls", [LCPO, LCPOP])
def test_agents_report_the_threshold_in_the_diagnostics(cls):
    env = gym.make("lcpo/WindyPendulum-v0", trace="wind-2")
    diags = []
    agent = cls(env, seed=0, reservoir_size=2000, ood_threshold="auto", rollout_steps=200)
    agent.learn(2000, callback=lambda step, d: diags.append(d))
    assert "ood/threshold" not in diags[0]  # the first update finds an empty reservoir
    thresholds = [d["ood/threshold"] for d in diags[1:]]
    assert len(thresholds) == len(diags) - 1 and all(t > 0 and math.isfinite(t) for t in thresholds)
    assert thresholds[-1] == pytest.approx(agent.detector.threshold)  # Pendulum: trace units = obs units
    fixed = []
    cls(env, seed=0, reservoir_size=2000, ood_threshold=0.5, rollout_steps=200).learn(
        600, callback=lambda s, d: fixed.append(d))
    assert [d["ood/threshold"] for d in fixed] == [0.5] * len(fixed)


def test_threshold_report_is_in_trace_units_on_a_divided_trace():
    """InvertedDoublePendulum divides its trace by 8: the same stream of winds gives the same reported
    sigma^2 (trace units) as on an undivided environment."""
    obs = _wind_stream(updates=10)
    divided = ContextSpec(SPEC.indices, SPEC.names, SPEC.groups, scale=1 / 8)
    reports = []
    for spec, s in ((SPEC, None), (divided, 1 / 8)):
        det = AutoThreshold("l2", spec)
        _replay(obs, det, scale=s)
        reports.append(det.threshold_report)
    assert reports[1] == pytest.approx(reports[0], rel=1e-5)


@pytest.mark.parametrize("overrides", [{"ood_threshold": "auto"},
                                       {"ood_threshold": "auto", "ood_auto_rule": "standardized"},
                                       {"ood_threshold": "auto", "detector": "mahalanobis"}])
def test_resume_with_an_automatic_threshold_is_exact(tmp_path, overrides):
    cfg = RunConfig(trace="wind-3", trace_length=6000, agent="lcpo", steps=3000, seed=4, checkpoint_every=1000,
                    overrides={"reservoir_size": 1000, **overrides})
    full = execute(cfg, tmp_path / "full")
    assert execute(cfg, tmp_path / "part", stop_at=2000) == {"interrupted_at": 2000}
    resumed = execute(cfg, tmp_path / "part")
    assert comparable(resumed, "resumed_from") == comparable(full, "resumed_from")
    diag = [pd.read_csv(tmp_path / d / "diagnostics.csv") for d in ("part", "full")]
    pd.testing.assert_frame_equal(diag[0], diag[1])
    assert "ood/threshold" in diag[1].columns and diag[1]["ood/threshold"].notna().all()


def test_state_dict_round_trip_continues_identically():
    def make():
        return LCPO(gym.make("lcpo/WindyPendulum-v0", trace="wind-2"), seed=1, reservoir_size=1000,
                    ood_threshold="auto", detector="mahalanobis")

    a = make().learn(1200)
    state = a.state_dict()
    assert state["ood_calibration"]["calibrations"] == 5  # updates 2..6 had a reservoir
    b = make()
    b.load_state_dict(state)
    assert b.detector.state_dict()["log_sum"] == a.detector.state_dict()["log_sum"]
    np.testing.assert_array_equal(b.detector.moments.m2, a.detector.moments.m2)
    fixed = LCPO(gym.make("lcpo/WindyPendulum-v0", trace="wind-2"), seed=1, reservoir_size=1000,
                 ood_threshold=1.0).learn(400).state_dict()
    assert "ood_calibration" not in fixed
    with pytest.raises(ValueError, match="fixed OOD threshold"):
        make().load_state_dict(fixed)
    fixed_agent = LCPO(gym.make("lcpo/WindyPendulum-v0", trace="wind-2"), seed=1, reservoir_size=1000,
                       ood_threshold=1.0, detector="mahalanobis")
    with pytest.raises(ValueError, match="calibrated automatically .* but the agent uses a fixed one"):
        fixed_agent.load_state_dict(state)


def test_refused_fits_and_states_leave_the_calibration_as_it_was():
    """A first fit with a NaN leaves no moments behind; a 1-D batch is refused naming its shape; a state without
    log_sum, or moments with a mean that is not a number, change nothing."""
    auto = AutoThreshold("mahalanobis", SPEC)
    obs = np.random.default_rng(0).normal(size=(50, 9))
    bad = obs.copy()
    bad[3, 4] = np.nan
    with pytest.raises(ValueError, match="non-finite value nan"):
        auto.fit(bad)
    assert auto.moments is None
    with pytest.raises(ValueError, match=r"expects \(M, obs_dim\) observations, got shape \(9,\)"):
        auto.fit(obs[0])
    auto.fit(obs)
    state = auto.state_dict()
    before = (auto.moments.n, auto.moments.mean.copy(), auto.log_sum, auto.calibrations)
    broken = dict(state)
    del broken["log_sum"]
    with pytest.raises(KeyError, match="log_sum"):
        auto.load_state_dict(broken)
    m = auto.moments
    m_state = m.state_dict()
    with pytest.raises(ValueError):
        m.load_state_dict({"n": 7, "mean": ["x", "y"], "m2": m_state["m2"]})
    with pytest.raises(ValueError, match="expected two"):
        m.load_state_dict({"n": 7, "mean": np.zeros(3), "m2": m_state["m2"]})
    assert auto.moments is m and (m.n, auto.log_sum, auto.calibrations) == (before[0], before[2], before[3])
    np.testing.assert_array_equal(m.mean, before[1])
