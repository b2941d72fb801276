"""Invariants of the discrete-event simulator (spec "Invariants worth testing")."""

from __future__ import annotations

import numpy as np
import pytest

from lcpo.envs.straggler import Simulator, TraceWorkload, percentile95
from lcpo.envs.straggler.sim import _shortest

from straggler_helpers import exp_workload, run_for


@pytest.mark.parametrize("tau", [np.inf, 3.0, 30.0, 300.0])
def test_conservation_and_one_latency_per_request(exp60, tau):
    sim = Simulator(exp60, seed=3, log=True)
    run_for(sim, tau, 2000)
    c = sim.counters
    pend = sim.pending_events()
    # arrivals = completions + in flight; in-flight requests hold exactly one winning finish or one duplicate
    assert c["arrivals"] == c["completions"] + pend["finish_win"] + pend["duplicate"]
    # queues count every copy not yet finished
    assert int(sim.q.sum()) == pend["finish_win"] + pend["finish_lose"]
    assert c["copies"] == c["arrivals"] + c["duplicates"]
    log = sim.request_log
    ids = log[:, 0].astype(np.int64)
    assert len(ids) == c["completions"]
    assert len(np.unique(ids)) == len(ids)          # one latency per request
    assert ids.min() >= 0 and ids.max() < c["arrivals"]
    assert np.all(log[:, 2] >= 0)


@pytest.mark.parametrize("tau", [np.inf, 10.0, 100.0])
def test_busy_time_equals_sum_of_copy_service_times(exp60, tau):
    sim = Simulator(exp60, seed=4)
    run_for(sim, tau, 1000)
    remaining = np.clip(sim.lastfin - sim.now, 0.0, None).sum()
    # a FIFO server is busy exactly while its queue is non-empty (work conserving)
    np.testing.assert_allclose(sim.qbusy.sum() + remaining, sim.counters["busy_ms"], rtol=1e-9)


def test_utilization_without_hedging_matches_offered_load():
    wl = exp_workload(400_000, 60.0, 28.0, seed=2)
    sim = Simulator(wl, seed=5)
    run_for(sim, np.inf, 8000)
    util = sim.qbusy.sum() / (sim.now * 10)
    assert util == pytest.approx(1.9 * 0.060 * 28.0 / 10, rel=0.03)


def test_tau_below_min_size_hedges_every_request():
    rng = np.random.default_rng(0)
    n = 100_000
    data = np.stack([rng.uniform(5.0, 15.0, n), rng.exponential(1000.0 / 40.0, n)], axis=1)
    base = Simulator(TraceWorkload(data), seed=1)
    hedge = Simulator(TraceWorkload(data), seed=1)
    run_for(base, np.inf, 4000)
    run_for(hedge, 3.0, 4000)
    c = hedge.counters
    assert c["arrivals"] - c["duplicates"] <= hedge.pending_events()["duplicate"] + 0  # every request hedged
    u0 = base.qbusy.sum() / base.now
    u1 = hedge.qbusy.sum() / hedge.now
    assert u1 / u0 == pytest.approx(2.0, rel=0.03)


@pytest.mark.parametrize("tau", [3.0, 30.0, 100.0, 600.0])
def test_hedged_iff_original_finishes_after_arrival_plus_tau(exp60, tau):
    sim = Simulator(exp60, seed=6, log=True)
    run_for(sim, tau, 2000)
    log = sim.request_log
    arrival, latency, hedged, f1 = log[:, 1], log[:, 2], log[:, 3] == 1.0, log[:, 4]
    np.testing.assert_array_equal(hedged, arrival + tau < f1)
    np.testing.assert_allclose(latency[~hedged], (f1 - arrival)[~hedged], rtol=0, atol=1e-9)
    assert np.all(latency[hedged] <= (f1 - arrival)[hedged] + 1e-9)
    assert np.all(latency[hedged] >= tau - 1e-9)  # a duplicate starts at arrival + tau at the earliest
    assert 0 < hedged.mean() < 1


def test_never_hedge_equals_huge_timeout_sample_path(exp60):
    a = Simulator(exp60, seed=7, log=True)
    b = Simulator(exp60, seed=7, log=True)
    la = run_for(a, np.inf, 1500)
    lb = run_for(b, 1e12, 1500)
    for x, y in zip(la, lb):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a.request_log, b.request_log)
    np.testing.assert_array_equal(a.q, b.q)
    assert a.counters == b.counters


def test_shortest_queue_rule_lowest_index_and_exclusion():
    rng = np.random.default_rng(0)
    for _ in range(500):
        q = rng.integers(0, 4, size=10).astype(np.int32)
        assert _shortest(q, -1) == int(np.argmin(q))   # argmin returns the lowest index among ties
        ex = int(rng.integers(0, 10))
        masked = q.astype(np.int64)
        masked[ex] = 1 << 40
        assert _shortest(q, ex) == int(np.argmin(masked))


def test_dispatch_scenario_by_hand():
    # 3 servers, no inflation. Requests of 1000 ms arrive at t = 1, 2, 3, 4 ms, then a 10 ms one at 5 ms.
    data = np.array([[1000.0, 1.0], [1000.0, 1.0], [1000.0, 1.0], [1000.0, 1.0], [10.0, 1.0],
                     [1.0, 1e7]])
    sim = Simulator(TraceWorkload(data), n_servers=3, p_inflate=0.0, seed=0, log=True)
    sim.run(np.inf, 10.0, need_completion=False)
    # servers 0,1,2 take the first three; the 4th goes to server 0 (tie, lowest index), the 5th to server 1
    np.testing.assert_array_equal(sim.q, [2, 2, 1])
    np.testing.assert_array_equal(sim.lastfin, [2001.0, 1012.0, 1003.0])
    sim.run(np.inf, 5000.0, need_completion=False)
    lat = dict(zip(sim.request_log[:, 0].astype(int), sim.request_log[:, 2]))
    assert lat == {0: 1000.0, 1: 1000.0, 2: 1000.0, 3: 1997.0, 4: 1007.0}


def test_duplicate_goes_to_other_server_and_wins_when_original_waits():
    # 2 servers, no inflation. A (500 ms) at t=1 -> server 0; B (10 ms) at t=2 -> server 1 (done at 12); both
    # under "never hedge". Then timeout 30: C (10 ms) at t=3 -> server 0 (tie, lowest index) behind A, would
    # finish at 511 > 3 + 30, so a duplicate goes at t=33 to server 1 (idle) and finishes at 43: latency 40.
    data = np.array([[500.0, 1.0], [10.0, 1.0], [10.0, 1.0], [1.0, 1e7]])
    sim = Simulator(TraceWorkload(data), n_servers=2, p_inflate=0.0, seed=0, log=True)
    sim.run(np.inf, 2.5, need_completion=False)
    sim.run(30.0, 2000.0, need_completion=False)
    log = {int(r[0]): r for r in sim.request_log}
    assert log[0][3] == 0.0 and log[0][2] == 500.0          # A arrived under "never": not hedged
    assert log[2][3] == 1.0 and log[2][2] == pytest.approx(40.0)
    assert log[2][4] == pytest.approx(511.0)                # the losing original still runs to 511 ms
    np.testing.assert_allclose(sim.lastfin, [511.0, 43.0])
    assert sim.counters["busy_ms"] == pytest.approx(500 + 10 + 10 + 10)
    assert sim.counters["duplicates"] == 1


def test_inflation_frequency(exp60):
    sim = Simulator(exp60, seed=8)
    run_for(sim, 30.0, 3000)
    c = sim.counters
    n = c["copies"]
    assert abs(c["inflated"] / n - 0.1) < 4 * np.sqrt(0.09 / n)


def test_percentile95_equals_numpy_including_1_and_2_values():
    rng = np.random.default_rng(0)
    for n in list(range(1, 60)) + [101, 1000]:
        for _ in range(5):
            x = rng.exponential(100.0, n) * rng.choice([1.0, 10.0], n)
            assert percentile95(x, n) == np.percentile(x, 95)
    assert percentile95(np.array([7.0]), 1) == 7.0
    assert percentile95(np.array([10.0, 20.0]), 2) == np.percentile([10.0, 20.0], 95) == 19.5


def test_determinism_per_seed(exp60):
    a, b, c = (Simulator(exp60, seed=s) for s in (11, 11, 12))
    la, lb, lc = (run_for(s, 30.0, 500) for s in (a, b, c))
    assert all(np.array_equal(x, y) for x, y in zip(la, lb))
    assert not all(np.array_equal(x, y) for x, y in zip(la, lc))


def test_state_roundtrip_resumes_exactly(exp60):
    sim = Simulator(exp60, seed=9, log=True, capacity=16)   # tiny capacity: growth is exercised
    run_for(sim, 10.0, 300)
    state = sim.get_state()
    first = run_for(sim, 10.0, 300)
    sim2 = Simulator(exp60, seed=0, log=True)
    sim2.set_state(state)
    second = run_for(sim2, 10.0, 300)
    assert all(np.array_equal(x, y) for x, y in zip(first, second))
    np.testing.assert_array_equal(sim.request_log, sim2.request_log)


def test_trace_wraps_and_invalid_arguments():
    data = np.array([[1.0, 10.0], [2.0, 10.0]])
    sim = Simulator(TraceWorkload(data), seed=0, log=True)
    sim.run(np.inf, 1000.0, need_completion=False)
    assert sim.counters["arrivals"] == 100       # arrivals every 10 ms, trace repeated
    with pytest.raises(ValueError, match="n_servers"):
        Simulator(TraceWorkload(data), n_servers=0)
    with pytest.raises(ValueError, match="p_inflate"):
        Simulator(TraceWorkload(data), p_inflate=1.5)


def test_overload_is_reported_not_silent():
    from lcpo.envs.straggler import SimulatorError
    data = np.array([[100.0, 1.0]])            # 1000 req/s of 100 ms on 10 servers: load 10+
    sim = Simulator(TraceWorkload(data), seed=0, capacity=64, max_capacity=4096)
    with pytest.raises(SimulatorError, match="overload"):
        sim.run(np.inf, 1e6, need_completion=False)
