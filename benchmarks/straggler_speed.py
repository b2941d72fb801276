"""Speed of the straggler environment: environment steps per second on one core.

Measures, for 60 req/s workloads (``constant-60x28``: Poisson 60 req/s with Pareto(2) 28 ms sizes; and the
``synthetic-noisy`` preset, ~50 req/s on average with bursts to 200 req/s), after a warm-up that triggers numba compilation:

- ``sim``: the compiled simulator alone (one window + p95 per step);
- ``env``: ``StragglerMitigationEnv.step`` (simulator + observation + info);
- ``gym.make``: the registered id through Gymnasium's default wrappers;
- ``vector``: ``lcpo.envs.vector.make_vector_env`` of ``--vector N`` sub-environments (a ``SyncVectorEnv``:
  the simulator is an event heap per environment with a data-dependent number of events per step, so there is
  no array version), environment steps/s per sub-environment: what a population of N seeds pays for the env.

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
from lcpo.envs.vector import make_vector_env


def _policies(steps: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"never": np.full(steps, 8), "tau30": np.full(steps, 2), "random": rng.integers(0, 9, steps)}


def bench(workload: str, steps: int, vector: int = 16) -> list[dict]:
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

        venv = make_vector_env("lcpo/StragglerMitigation-v0", [{"workload": workload}] * vector, mode="sync",
                               autoreset_mode="SameStep")
        venv.reset(seed=list(range(vector)))
        vsteps = max(1, steps // vector)
        batches = [np.full(vector, a) for a in acts[:vsteps + 100]]
        for b in batches[:100]:
            venv.step(b)
        t0 = time.perf_counter()
        for b in batches[100:]:
            venv.step(b)
        vec_rate = vector * (len(batches) - 100) / (time.perf_counter() - t0)
        venv.close()
        c = sim.counters
        rows.append({"workload": workload, "policy": pol, "sim_steps_per_s": sim_rate,
                     "env_steps_per_s": env_rate, "gym_make_steps_per_s": gym_rate,
                     "vector_size": vector, "vector_steps_per_s": vec_rate,
                     "events_per_step": (c["arrivals"] + c["copies"] + c["duplicates"]) / (steps + 1000)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description="straggler environment steps/s")
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--workloads", nargs="+", default=["constant-60x28", "synthetic-noisy"])
    ap.add_argument("--vector", type=int, default=16, help="sub-environments of the vector env row (default 16)")
    ap.add_argument("--json", type=str, default=None)
    args = ap.parse_args()
    if args.vector < 1:
        ap.error(f"--vector must be >= 1, got {args.vector}")
    rows = [r for w in args.workloads for r in bench(w, args.steps, args.vector)]
    vec = f"vector{args.vector}/s"
    print(f"{'workload':18s} {'policy':7s} {'sim/s':>9s} {'env/s':>9s} {'gym.make/s':>11s} {vec:>12s} "
          f"{'events/step':>12s}")
    for r in rows:
        print(f"{r['workload']:18s} {r['policy']:7s} {r['sim_steps_per_s']:9.0f} {r['env_steps_per_s']:9.0f} "
              f"{r['gym_make_steps_per_s']:11.0f} {r['vector_steps_per_s']:12.0f} {r['events_per_step']:12.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
