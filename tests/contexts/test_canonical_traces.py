"""The canonical named traces, the packaged NDBC wind, and resolve_trace."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from lcpo.contexts import (DEFAULT_LENGTH, DEFAULT_TRACE, PAPER_LENGTHS, TRACE_NAMES, ContextTrace, TraceError,
                           resolve_trace, save_trace)
from lcpo.contexts import canonical

NDBC_SOURCE = Path("/work/shared/data/ndbc_46002_cwind_2016/46002c2016.txt")
SYNTHETIC = ["wind-1", "wind-2", "wind-3", "wind-4"]


def test_registry():
    assert set(TRACE_NAMES) == {"wind-1", "wind-2", "wind-3", "wind-4", "zero", "ndbc-46002"}
    assert all(isinstance(d, str) and d and "\n" not in d for d in TRACE_NAMES.values())
    assert DEFAULT_TRACE == "ndbc-46002" and DEFAULT_TRACE in TRACE_NAMES
    assert PAPER_LENGTHS == {"wind-1": 20_000_000, "wind-2": 20_000_000, "wind-3": 8_000_000,
                             "wind-4": 8_000_000}


@pytest.mark.parametrize("name", SYNTHETIC + ["zero"])
def test_synthetic_default_and_requested_length(name):
    trace = resolve_trace(name)
    assert len(trace) == DEFAULT_LENGTH and trace.dim == 2 and trace.name == name
    assert np.abs(trace.values).max() <= 4.0
    assert trace.metadata["columns"] == ["wind_x", "wind_y"]
    short = resolve_trace(name, length=1234, seed=3)
    assert short.values.shape == (1234, 2)
    assert np.abs(short.values).max() <= 4.0


@pytest.mark.parametrize("name", SYNTHETIC)
def test_synthetic_seeded(name):
    a, b, c = (resolve_trace(name, length=5000, seed=s) for s in (1, 1, 2))
    np.testing.assert_array_equal(a.values, b.values)
    assert not np.array_equal(a.values, c.values)
    assert a.metadata["seed"] == 1


def test_traces_with_the_same_seed_are_independent():
    w1, w2 = resolve_trace("wind-1", seed=0), resolve_trace("wind-2", seed=0)
    corr = np.corrcoef(w1.values[:, 0], w2.values[:, 0])[0, 1]
    assert abs(corr) < 0.5


def test_wind_1_and_2_ranges_and_spread():
    w1 = resolve_trace("wind-1", seed=0).values
    assert w1.min() >= -2.5 and w1.max() <= 1.0
    assert np.all(np.abs(w1.mean(axis=0) + 0.75) < 0.5)
    w2 = resolve_trace("wind-2", seed=0).values
    assert w2.min() >= -4.0 and w2.max() <= 4.0
    assert np.all(w2.std(axis=0) > 2 * w1.std(axis=0))  # "wider"
    # Slow drift: the lag-1000 autocorrelation stays high (relaxation time 2% of 400K = 8K steps).
    c = w2[:, 0] - w2[:, 0].mean()
    assert (c[1000:] * c[:-1000]).mean() / c.var() > 0.7


def test_ou_time_structure_scales_with_length():
    short = resolve_trace("wind-2", length=10_000).metadata["params"]
    long = resolve_trace("wind-2", length=100_000).metadata["params"]
    assert short["theta"] == pytest.approx(10 * long["theta"])
    assert short["theta"] == pytest.approx(1 / (0.02 * 10_000))


@pytest.mark.parametrize("length", [8_000, 80_000, 800_000])
def test_wind_3_levels_at_the_paper_places(length):
    trace = resolve_trace("wind-3", length=length, seed=4)
    cps = np.round(np.array([1.1, 2.2, 3.9, 5.4, 6.9]) / 8 * length).astype(int)
    assert trace.metadata["params"]["change_points"] == cps.tolist()
    levels = np.array([[-0.3, -1.0], [0.7, -0.5], [0.6, 0.8], [3.5, -0.4], [-0.4, 0.0], [-1.9, -2.7]])
    edges = np.concatenate([[0], cps, [length]])
    for k in range(6):
        seg = trace.values[edges[k]:edges[k + 1]]
        n = len(seg)
        # median: robust to the clipping of level 3.5 + noise at 4
        np.testing.assert_allclose(np.median(seg, axis=0), levels[k], atol=6 * 0.3 / np.sqrt(n) + 1e-9)


def test_wind_3_paper_length_reachable():
    trace = resolve_trace("wind-3", length=PAPER_LENGTHS["wind-3"])
    assert trace.metadata["params"]["change_points"] == [1_100_000, 2_200_000, 3_900_000, 5_400_000, 6_900_000]
    assert len(trace) == 8_000_000


def test_wind_4_calm_then_bursts():
    trace = resolve_trace("wind-4", length=80_000, seed=2)
    onset = trace.metadata["params"]["onset"]
    assert onset == 45_000
    calm, tail = trace.values[:onset], trace.values[onset:]
    assert calm.std() == pytest.approx(0.1, rel=0.05) and np.abs(calm.mean()) < 0.01
    amps = np.array(trace.metadata["params"]["amplitude"])
    assert amps.shape == (7, 2) and amps.min() >= 2.5 and amps.max() <= 5.0
    assert np.abs(tail).max(axis=0).min() >= 2.4  # every axis bursts to at least ~2.5
    for k in range(7):  # each burst window reaches a good fraction of its amplitude on each axis
        w = tail[k * len(tail) // 7:(k + 1) * len(tail) // 7]
        assert np.all(np.abs(w).max(axis=0) > 0.5 * np.minimum(amps[k], 4.0))


def test_zero_trace():
    trace = resolve_trace("zero", length=10)
    np.testing.assert_array_equal(trace.values, np.zeros((10, 2)))


def test_paper_traces_bad_length():
    with pytest.raises(TraceError, match="length must be a positive integer, got 0"):
        resolve_trace("wind-1", length=0)
    with pytest.raises(TraceError, match=">= 8"):
        resolve_trace("wind-3", length=5)


# --- NDBC buoy 46002 ---------------------------------------------------------------------------------------

def test_ndbc_packaged_trace():
    trace = resolve_trace("ndbc-46002")
    records = canonical._ndbc_records()
    assert records.shape == (28_468, 3)
    assert len(trace) == int(records[-1, 0] * 2) + 1 == 575_501
    assert np.abs(trace.values).max() == pytest.approx(4.0, abs=1e-5)  # scaled by 4 / max component
    # Step 20 j falls on a record time wherever the record is on the 10-minute grid: values equal the record.
    on_grid = np.flatnonzero(records[:, 0] % 10 == 0)
    steps = (records[on_grid, 0] * 2).astype(int)
    np.testing.assert_allclose(trace.values[steps], records[on_grid, 1:], atol=1e-6)
    # Gaps are honoured: a 70-minute gap spans 140 steps, linearly interpolated.
    gap = int(np.flatnonzero(np.diff(records[:, 0]) == 70)[0])
    s0 = int(records[gap, 0] * 2)
    mid = trace.values[s0 + 70]
    np.testing.assert_allclose(mid, (records[gap, 1:] + records[gap + 1, 1:]) / 2, atol=1e-6)
    assert trace.metadata["scale"] == pytest.approx(4 / 20.851519386404032)


def test_ndbc_length_and_rate():
    assert len(resolve_trace("ndbc-46002", length=1000)) == 1000
    coarse = canonical.ndbc_46002(steps_per_10min=1)
    assert len(coarse) == 28_776
    with pytest.raises(TraceError, match="steps_per_10min"):
        canonical.ndbc_46002(steps_per_10min=0)


@pytest.mark.skipif(not NDBC_SOURCE.exists(), reason="shared NDBC source file not available")
def test_ndbc_built_from_source_equals_packaged():
    assert hashlib.sha256(NDBC_SOURCE.read_bytes()).hexdigest() == canonical.NDBC_46002_SOURCE_SHA256
    built = canonical.build_ndbc_records(NDBC_SOURCE)
    packaged = np.load(Path(canonical.__file__).parents[1] / "data" / "ndbc_46002_wind.npy")
    assert built.dtype == np.float32
    np.testing.assert_array_equal(built, packaged)
    raw = np.loadtxt(NDBC_SOURCE, comments="#")
    rad = np.radians(raw[:, 5])
    u, v = -raw[:, 6] * np.sin(rad), -raw[:, 6] * np.cos(rad)
    assert max(np.abs(u).max(), np.abs(v).max()) == pytest.approx(canonical.NDBC_46002_MAX_COMPONENT)
    # First record: 2015-12-31 23:00, wind from 132 deg (south-east) at 7.9 m/s, i.e. toward 312 deg.
    np.testing.assert_allclose(built[0, 1:], np.array([u[0], v[0]]) * canonical.NDBC_46002_SCALE, rtol=1e-6)
    assert built[0, 1] < 0 and built[0, 2] > 0  # wind from the south-east blows toward the north-west


def test_build_ndbc_rejects_missing_values(tmp_path):
    src = tmp_path / "bad.txt"
    src.write_text("#YY MM DD hh mm WDIR WSPD GDR GST GTIME\n#yr mo dy hr mn degT m/s degT m/s hhmm\n"
                   "2016 01 01 00 00 100 5.0 999 99.0 9999\n2016 01 01 00 10 999 99.0 999 99.0 9999\n")
    with pytest.raises(TraceError, match="record 1"):
        canonical.build_ndbc_records(src)


# --- resolve_trace -------------------------------------------------------------------------------------------

def test_resolve_trace_passthrough_array_and_files(tmp_path):
    trace = ContextTrace(np.arange(10.0).reshape(5, 2), "mine")
    assert resolve_trace(trace) is trace
    arr = resolve_trace(np.ones((3, 1)))
    assert arr.name == "array" and arr.values.shape == (3, 1)
    for suffix in (".npy", ".csv"):
        path = save_trace(trace, tmp_path / f"mine{suffix}")
        for spec in (path, str(path)):
            loaded = resolve_trace(spec)
            np.testing.assert_array_equal(loaded.values, trace.values)
            assert loaded.name == "mine"


def test_resolve_trace_fits_concrete_traces_to_length():
    trace = ContextTrace(np.arange(10.0).reshape(5, 2), "mine")
    np.testing.assert_array_equal(resolve_trace(trace, length=2).values, trace.values[:2])
    wrapped = resolve_trace(trace, length=12)
    np.testing.assert_array_equal(wrapped.values[:, 0], np.arange(12) % 5 * 2.0)
    assert wrapped.metadata["fitted_from"] == 5


def test_resolve_trace_errors(tmp_path):
    with pytest.raises(TraceError, match=r"unknown trace name 'wind1' \(did you mean 'wind-1'") as err:
        resolve_trace("wind1")
    for name in TRACE_NAMES:
        assert name in str(err.value)
    with pytest.raises(TraceError, match=r"unknown trace name 'gale'; known names"):
        resolve_trace("gale")
    with pytest.raises(TraceError, match="not found") as err:
        resolve_trace(str(tmp_path / "nothing.npy"))
    assert str(tmp_path / "nothing.npy") in str(err.value)
    with pytest.raises(TraceError, match=r"shape \(2, 2, 2\)"):
        resolve_trace(np.zeros((2, 2, 2)))
    with pytest.raises(TraceError, match="unknown trace file extension '.npz'"):
        resolve_trace("wind.npz")
    with pytest.raises(TypeError, match="trace must be"):
        resolve_trace(42)


@pytest.mark.slow
def test_paper_length_ou_trace():
    trace = resolve_trace("wind-1", length=PAPER_LENGTHS["wind-1"])
    assert trace.values.shape == (20_000_000, 2)
    assert trace.values.min() >= -2.5 and trace.values.max() <= 1.0


def test_a_repeated_request_reuses_the_generated_trace():
    a = canonical.make_trace("wind-2", 3000, seed=5)
    assert canonical.make_trace("wind-2", 3000, seed=5) is a and canonical.make_trace("wind-2", np.int64(3000), seed=np.int64(5)) is a
    assert not a.values.flags.writeable
    other = canonical.make_trace("wind-2", 3000, seed=6)
    assert other is not a and not np.array_equal(other.values, a.values)
    fresh = canonical.make_trace("wind-2", 3000, seed=np.random.default_rng(5))  # a Generator is stateful: never reused
    assert fresh is not canonical.make_trace("wind-2", 3000, seed=np.random.default_rng(5))


def test_only_the_most_recent_traces_are_kept():
    first = canonical.make_trace("wind-1", 1001, seed=0)
    for k in range(canonical.RECENT_TRACES):
        canonical.make_trace("wind-1", 1002 + k, seed=0)
    again = canonical.make_trace("wind-1", 1001, seed=0)
    assert again is not first and np.array_equal(again.values, first.values)
    assert canonical._recent.cache_info().currsize == canonical.RECENT_TRACES


def test_a_population_generates_its_trace_once(tmp_path, monkeypatch):
    """Four seeds on one 20k-step trace: one generation, not one per seed and per run-folder environment."""
    from lcpo.online.population import execute_population
    from lcpo.online.run import RunConfig

    calls = []
    real = canonical._MAKERS["wind-4"]

    def counted(length=None, seed=0):
        calls.append((length, seed))
        return real(length=length, seed=seed)

    monkeypatch.setitem(canonical._MAKERS, "wind-4", counted)
    canonical._recent.cache_clear()  # a trace made by an earlier test would not count
    cfgs = [RunConfig(trace="wind-4", trace_length=20_000, agent="a2c", steps=200, seed=s, checkpoint_every=0,
                      overrides={"hidden": [8]}) for s in range(4)]
    execute_population(cfgs, [tmp_path / f"s{s}" for s in range(4)])
    assert calls == [(20_000, 0)]
    assert all((tmp_path / f"s{s}" / "summary.json").exists() for s in range(4))
