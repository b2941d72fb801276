"""Helpers for the straggler tests: small analytic workloads and a step runner."""

from __future__ import annotations

import numpy as np

from lcpo.envs.straggler import Simulator, TraceWorkload


def exp_workload(n: int, rate_per_s: float, mean_size: float, seed: int = 0) -> TraceWorkload:
    """Exponential sizes and exponential inter-arrivals (an M/M-type trace of ``n`` requests)."""
    rng = np.random.default_rng(seed)
    data = np.stack([rng.exponential(mean_size, n), rng.exponential(1000.0 / rate_per_s, n)], axis=1)
    return TraceWorkload(data, "exp")


def run_for(sim: Simulator, tau: float, steps: int, window: float = 500.0) -> list[np.ndarray]:
    """Run ``steps`` environment-like steps and return each step's latencies."""
    out = []
    for _ in range(steps):
        sim.run(tau, sim.now + window)
        out.append(sim.step_latencies.copy())
    return out
