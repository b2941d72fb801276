"""Workloads: validation, file loading, synthetic arrivals by time rescaling, presets, the Azure workload."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lcpo.envs.straggler import (
    WORKLOAD_NAMES,
    Simulator,
    SyntheticWorkload,
    TraceWorkload,
    WorkloadError,
    azure_llm_workload,
    constant_workload,
    load_workload,
    noisy_workload,
    ramp_workload,
    resolve_workload,
)


@pytest.mark.parametrize("bad, match", [
    (np.zeros((3, 3)), "shape"),
    (np.zeros((0, 2)), "shape"),
    (np.array([[1.0, 1.0], [np.nan, 1.0]]), "non-finite processing ms nan at row 1"),
    (np.array([[1.0, 1.0], [1.0, -2.0]]), "negative inter-arrival ms -2.0 at row 1"),
    (np.array([[1.0, 0.0], [2.0, 0.0]]), "inter-arrival times are zero"),
    (np.array([["a", "b"]]), "real numbers"),
])
def test_array_validation(bad, match):
    with pytest.raises(WorkloadError, match=match):
        TraceWorkload(bad)


def test_load_npy_and_csv_roundtrip_and_errors(tmp_path):
    data = np.array([[10.0, 5.0], [20.0, 15.0], [30.0, 10.0]])
    np.save(tmp_path / "w.npy", data)
    (tmp_path / "w.csv").write_text("processing_ms,interarrival_ms\n10,5\n20,15\n30,10\n")
    (tmp_path / "nohead.csv").write_text("10,5\n20,15\n30,10\n")
    for name in ("w.npy", "w.csv", "nohead.csv"):
        wl = load_workload(tmp_path / name)
        np.testing.assert_array_equal(wl.data, data)
        assert wl.mean_rate == pytest.approx(100.0) and wl.mean_size == pytest.approx(20.0)
    (tmp_path / "bad.csv").write_text("10,5\n20,-1\n")
    with pytest.raises(WorkloadError, match=r"bad\.csv.*negative inter-arrival"):
        load_workload(tmp_path / "bad.csv")
    np.save(tmp_path / "three.npy", np.zeros((4, 3)))
    with pytest.raises(WorkloadError, match=r"three\.npy.*\(n, 2\)"):
        load_workload(tmp_path / "three.npy")
    with pytest.raises(WorkloadError, match="not found"):
        load_workload(tmp_path / "missing.npy")
    assert isinstance(resolve_workload(str(tmp_path / "w.npy")), TraceWorkload)
    with pytest.raises(WorkloadError, match="unknown workload 'nope'"):
        resolve_workload("nope")


def test_synthetic_constant_rate_gives_poisson_arrivals_and_pareto_sizes():
    wl = constant_workload(60.0, 28.0, seed=0)
    data = np.concatenate([wl.chunk(k)[0] for k in range(6)])          # one hour
    assert len(data) == pytest.approx(60 * 3600, rel=0.02)
    # inter-arrivals exponential with mean 1000/60 ms (chunk seams included)
    assert stats.kstest(data[:, 1], "expon", args=(0, 1000 / 60)).pvalue > 1e-3
    # classical Pareto(2) with mean 28: x_m = 14, P(X > x) = (14 / x)^2
    assert data[:, 0].min() >= 14.0
    assert stats.kstest(data[:, 0], "pareto", args=(2.0, 0, 14.0)).pvalue > 1e-3


def test_chunks_are_deterministic_and_seams_are_exact():
    wl = constant_workload(20.0, 80.0, seed=4)
    a, tail = wl.chunk(3)
    b, _ = constant_workload(20.0, 80.0, seed=4).chunk(3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a[:10], constant_workload(20.0, 80.0, seed=5).chunk(3)[0][:10])
    # arrival times of chunk 3 lie inside [3 D, 4 D) and the tail gap reaches the chunk end
    t = 3 * wl.chunk_ms + np.cumsum(a[:, 1])
    assert t[0] >= 3 * wl.chunk_ms and t[-1] + tail == pytest.approx(4 * wl.chunk_ms)
    # the simulator reproduces the concatenated arrival process across chunks
    sim = Simulator(wl, seed=0, log=True, p_inflate=0.0)
    sim.run(np.inf, 2 * wl.chunk_ms, need_completion=False)
    ids, arrivals = sim.request_log[:, 0].astype(np.int64), sim.request_log[:, 1]
    expect = np.concatenate([k * wl.chunk_ms + np.cumsum(wl.chunk(k)[0][:, 1]) for k in range(2)])
    assert sim.counters["arrivals"] == len(expect)
    np.testing.assert_allclose(arrivals, expect[ids], rtol=0, atol=1e-6)


def test_time_rescaling_follows_the_rate_curve():
    # lambda(t) = 10 req/s for the first half of each chunk, 50 req/s for the second half
    wl = SyntheticWorkload(lambda t: np.where(np.mod(t, 600_000.0) < 300_000.0, 10.0, 50.0),
                           lambda t: np.full(np.shape(t), 5.0), seed=1)
    data, _ = wl.chunk(0)
    t = np.cumsum(data[:, 1])
    first, second = (t < 300_000).sum(), (t >= 300_000).sum()
    assert first == pytest.approx(3000, rel=0.06) and second == pytest.approx(15000, rel=0.03)
    assert wl.mean_rate == pytest.approx(30.0)


def test_presets_have_the_documented_shape():
    ramp = ramp_workload(seed=0, period_h=6.0)
    hour = 3_600_000.0
    r = ramp.rate_fn(np.array([0.0, 0.5 * 6 * hour, 0.95 * 6 * hour]))
    np.testing.assert_allclose(r, [8.0, 38.0, 10.0])
    assert ramp.mean_size == pytest.approx(80.0, rel=0.05)
    noisy = noisy_workload(seed=0)
    lam = noisy.rate_fn(np.arange(0, 6 * hour, 1000.0))
    assert lam.min() >= 30.0 and lam.max() <= 200.0 and lam.max() > 150 and lam.min() < 40
    assert noisy.mean_size == pytest.approx(28.0, rel=0.1)
    for name in WORKLOAD_NAMES:
        wl = resolve_workload(name)
        assert 0.05 < wl.offered_load < 0.6, name


def test_bundled_azure_workload_matches_its_provenance():
    wl = azure_llm_workload()
    assert len(wl) == 8819 + 19366
    assert wl.mean_rate == pytest.approx(8.02, rel=0.01)
    # processing time = 1.25 ms per generated token: multiples of 1.25 between 6 and 1899 tokens
    tokens = wl.data[:, 0] / 1.25
    np.testing.assert_allclose(tokens, np.round(tokens), atol=1e-3)
    assert tokens.min() == 6 and tokens.max() == 1899
    assert wl.offered_load == pytest.approx(0.29, abs=0.01)
