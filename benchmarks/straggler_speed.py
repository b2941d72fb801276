"""Speed of the straggler environment: environment steps per second on one core.

Measures, for 60 req/s workloads (``constant-60x28``: Poisson 60 req/s with Pareto(2) 28 ms sizes; and the
``synthetic-noisy`` preset, ~50 req/s on average with bursts to 200 req/s), after a warm-up that triggers numba compilation:

- ``sim``: the compiled simulator alone (one window + p95 per step);
- ``env``: ``StragglerMitigationEnv.step`` (simulator + observation + info);
- ``gym.make``: the registered id through Gymnasium's default wrappers.

The target of issue 7 is >= 20,000 environment steps/s. Single-threaded by construction (numba code is not
parallel); pin to one core with ``taskset -c 0`` for a clean number.

Usage:
    python benchmarks/straggler_speed.py [--steps 100000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np

import lcpo.envs  # noqa: F401
from lcpo.envs.straggler import StragglerMitigationEnv, TIMEOUTS_MS, percentile95, resolve_workload
from lcpo.envs.straggler.sim import Simulator


def _policies(steps: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"never": np.full(steps, 8), "tau30": np.full(steps, 2), "random": rng.integers(0, 9, steps)}


def bench(workload: str, steps: int) -> list[dict]:
    """Run the three measurements for each policy on ``workload``; returns rows of results."""
    rows = []
    for pol, actions in _policies(steps).items():
        sim = Simulator(resolve_workload(workload), seed=0)
        taus = TIMEOUTS_MS[actions]
        for i in range(1000):
            sim.run(taus[i], sim.now + 500.0)
        t0 = time.perf_counter()
        for i in range(steps):
            sim.run(taus[i], sim.now + 500.0)
            percentile95(sim.lat, sim.si[12])
        sim_rate = steps / (time.perf_counter() - t0)

        env = StragglerMitigationEnv(workload)
        env.reset(seed=0)
        for i in range(1000):
            env.step(actions[i])
        acts = actions.tolist()
        t0 = time.perf_counter()
        for a in acts:
            env.step(a)
        env_rate = steps / (time.perf_counter() - t0)

        genv = gym.make("lcpo/StragglerMitigation-v0", workload=workload)
        genv.reset(seed=0)
        for i in range(1000):
            genv.step(acts[i])
        t0 = time.perf_counter()
        for a in acts:
            genv.step(a)
        gym_rate = steps / (time.perf_counter() - t0)
        c = sim.counters
        rows.append({"workload": workload, "policy": pol, "sim_steps_per_s": sim_rate,
                     "env_steps_per_s": env_rate, "gym_make_steps_per_s": gym_rate,
                     "events_per_step": (c["arrivals"] + c["copies"] + c["duplicates"]) / (steps + 1000)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description="straggler environment steps/s")
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--workloads", nargs="+", default=["constant-60x28", "synthetic-noisy"])
    ap.add_argument("--json", type=str, default=None)
    args = ap.parse_args()
    rows = [r for w in args.workloads for r in bench(w, args.steps)]
    print(f"{'workload':18s} {'policy':7s} {'sim/s':>9s} {'env/s':>9s} {'gym.make/s':>11s} {'events/step':>12s}")
    for r in rows:
        print(f"{r['workload']:18s} {r['policy']:7s} {r['sim_steps_per_s']:9.0f} {r['env_steps_per_s']:9.0f} "
              f"{r['gym_make_steps_per_s']:11.0f} {r['events_per_step']:12.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
