"""Throughput of straggler populations (the study's LCPO-Med and A2C settings), env steps/s in all.

The straggler environment's per-step path is NumPy (the simulator, the permutation-invariant network's acting
mirror), so a population's cost is mostly per step, not per update. This measures one ``Population`` per agent
and size on the ``azure-llm`` workload with the paper's straggler settings
(:func:`lcpo.envs.straggler.presets.straggler_overrides`; LCPO-Med: the Mahalanobis detector at ``D^2 > 24``,
the study's 207,360-state reservoir),
a warm-up first, then a timed stretch that holds updates (every agent's rollout is 4,608 steps here, so the
timed stretch holds an update of each seed only when ``--warmup + --steps`` reaches a multiple of 4,608 inside it;
the defaults, 4,608 + 9,216, hold two).

To compare two trees of the code side by side, run this script once per tree in alternating rounds, e.g.::

    for r in 1 2 3; do
      PYTHONPATH=/path/to/before/src python benchmarks/straggler_population.py --tag before --json b$r.json
      PYTHONPATH=src python benchmarks/straggler_population.py --tag after --json a$r.json
    done

Usage:
    python benchmarks/straggler_population.py [--agents lcpo a2c] [--sizes 1 10] [--steps 9216]
        [--warmup 4608] [--clock cpu|wall] [--tag NAME] [--json out.json]

One torch thread. ``--clock cpu`` (default) times with the process's CPU time, the better number beside other
jobs; ``wall`` with the wall clock.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from lcpo.cli.argtypes import nonneg_int, positive_int  # noqa: E402
from lcpo.envs.straggler.presets import STRAGGLER_OVERRIDES, straggler_overrides  # noqa: E402
from lcpo.online.population import Population  # noqa: E402


def measure(agent: str, size: int, steps: int, warmup: int, clock: str) -> float:
    """Env steps/s in all of one population of ``size`` seeds of ``agent``, timed over ``steps`` steps per seed
    after ``warmup`` untimed ones."""
    hp = straggler_overrides(agent)
    if agent == "lcpo":
        hp["reservoir_size"] = 207_360  # the study's: 1% of 20,736,000 steps
    tick = time.process_time if clock == "cpu" else time.perf_counter
    with Population(agent, "lcpo/StragglerMitigation-v0", seeds=list(range(size)), trace="azure-llm",
                    **hp) as pop:
        pop.learn(warmup)
        t0 = tick()
        pop.learn(steps)
        return size * steps / (tick() - t0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", nargs="+", choices=sorted(STRAGGLER_OVERRIDES), default=["lcpo", "a2c"])
    p.add_argument("--sizes", nargs="+", type=positive_int, default=[1, 10])
    p.add_argument("--steps", type=positive_int, default=9216, help="timed env steps per seed")
    p.add_argument("--warmup", type=nonneg_int, default=4608, help="untimed env steps per seed first")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    p.add_argument("--tag", default="")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    torch.set_num_threads(1)
    rows = []
    for agent in args.agents:
        for size in args.sizes:
            rate = measure(agent, size, args.steps, args.warmup, args.clock)
            rows.append({"tag": args.tag, "agent": agent, "size": size, "steps_per_s": rate})
            print(f"{args.tag:>8} {agent:>5} N={size:<3} {rate:10,.0f} env steps/s in all ({args.clock})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
