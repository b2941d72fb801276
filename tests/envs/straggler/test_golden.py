"""The spec's golden figures (mean per-step p95 latency) and the N = 1 Pollaczek-Khinchine check.

Golden table (spec "Golden figures"; Pareto(2) sizes, Poisson arrivals, N = 10, 100k steps, +-3%). The long
versions are slow-marked; the fast versions run 15k steps with a looser tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

from lcpo.envs.straggler import Simulator, StragglerMitigationEnv, TIMEOUTS_MS, constant_workload
from straggler_helpers import exp_workload

ACTION = {float(t): i for i, t in enumerate(TIMEOUTS_MS)}
GOLDEN = [  # (rate req/s, mean size ms, timeout ms, mean per-step p95 ms)
    (60.0, 28.0, np.inf, 190.0), (60.0, 28.0, 100.0, 120.0), (60.0, 28.0, 30.0, 86.0),
    (20.0, 80.0, np.inf, 488.0), (20.0, 80.0, 600.0, 391.0), (20.0, 80.0, 60.0, 235.0), (20.0, 80.0, 3.0, 250.0),
]
# The spec's tau = 60 ms entry for 20 req/s x 80 ms was corrected on 2026-11-30 from ~252 to ~235 ms (an
# independent implementation of the rules gives 234.9 +- 1.5 ms); this implementation measures 234-239 ms.


def mean_step_p95(rate, size, tau, steps, seed=0):
    env = StragglerMitigationEnv(constant_workload(rate, size, seed=seed))
    env.reset(seed=seed)
    a = ACTION[float(tau)]
    return float(np.mean([env.step(a)[4]["p95_ms"] for _ in range(steps)]))


def _params(slow):
    return [pytest.param(rate, size, tau, want, id=f"{rate:g}x{size:g}-tau{tau:g}") for rate, size, tau, want in GOLDEN]


@pytest.mark.parametrize("rate, size, tau, want", _params(slow=False))
def test_golden_figures_fast(rate, size, tau, want):
    assert mean_step_p95(rate, size, tau, 15_000) == pytest.approx(want, rel=0.08)


@pytest.mark.slow
@pytest.mark.parametrize("rate, size, tau, want", _params(slow=True))
def test_golden_figures_100k_steps(rate, size, tau, want):
    assert mean_step_p95(rate, size, tau, 100_000) == pytest.approx(want, rel=0.03)


def _pk_mean_latency(n_requests, seed):
    # lambda = 1/40 per ms, exponential sizes of mean 10 ms, one server, no hedging
    wl = exp_workload(n_requests, 25.0, 10.0, seed=seed)
    sim = Simulator(wl, n_servers=1, seed=seed, log=True)
    sim.run(np.inf, 0.98 * wl.data[:, 1].sum(), need_completion=False)
    return sim.request_log[:, 2].mean()


def _pk_theory():
    lam, m = 1 / 40, 10.0
    es, es2 = 1.9 * m, 10.9 * 2 * m**2        # E[S] = 1.9 m, E[S^2] = (0.9 + 0.1 * 100) E[X^2]
    rho = lam * es
    return es + lam * es2 / (2 * (1 - rho))


def test_pollaczek_khinchine_theory_value():
    assert _pk_theory() == pytest.approx(70.9, abs=0.05)


def test_pollaczek_khinchine_single_server_fast():
    assert _pk_mean_latency(400_000, seed=0) == pytest.approx(_pk_theory(), rel=0.05)


@pytest.mark.slow
def test_pollaczek_khinchine_single_server_long():
    assert _pk_mean_latency(4_000_000, seed=1) == pytest.approx(_pk_theory(), rel=0.02)
