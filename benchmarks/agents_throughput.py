"""Steps per second of full online training of each agent on windy Pendulum (one torch thread, one core).

Each agent (default hyperparameters, paper Table 11 where they apply) runs ``agent.learn(--steps)`` from
scratch on ``lcpo/WindyPendulum-v0`` with canonical trace ``wind-1``: acting, storing, and every update on the
agent's own schedule, exactly as in a run (without the run folder's logging and checkpoints). The figure is
``steps / seconds`` of the best of ``--repeats`` runs after an untimed warm-up run of 2,000 steps (the
``timeit`` convention: the fastest run is the least disturbed by other processes on a shared machine).

Prescient agents are timed end to end: offline training for ``--steps`` steps (``train_steps``), then
``--steps`` frozen online steps; their figure is ``2 * steps / seconds`` (environment steps of both phases).

Usage::

    python benchmarks/agents_throughput.py [--agents trpo ppo ...] [--steps 20000] [--repeats 1] [--json out.json]

Prints a Markdown table (the one in ``docs/agents.md``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

from lcpo.agents import AGENTS
from lcpo.contexts import resolve_trace
from lcpo.envs.registration import make_env
from common import report  # benchmarks/common.py (scripts run with benchmarks/ on sys.path)

#: agents timed by default (those whose modules exist)
DEFAULT_AGENTS = ("a2c", "lcpo", "trpo", "ppo", "lcpo-p", "ddqn", "sac", "prescient-a2c", "prescient-trpo",
                  "prescient-ddqn", "prescient-sac", "ewc", "ogd", "clear", "ptdqn", "bfdqn", "mbcd",
                  "mbpo")


def time_agent(name: str, steps: int, trace, seed: int = 0, overrides: dict | None = None) -> tuple[float, int]:
    """Seconds of ``learn(steps)`` for a fresh agent, and the environment steps they covered.

    Raises:
        KeyError: for an unknown agent name.
    """
    cls = AGENTS[name]
    kw = dict(overrides or {})
    prescient = name.startswith("prescient-")
    if prescient:
        kw.setdefault("train_steps", steps)
    env = make_env("lcpo/WindyPendulum-v0", trace=trace)
    start = time.perf_counter()
    agent = cls(env, seed=seed, **kw)
    agent.learn(steps)
    secs = time.perf_counter() - start
    return secs, steps + (kw["train_steps"] if prescient else 0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", nargs="+", default=None, help=f"agent names (default: {' '.join(DEFAULT_AGENTS)})")
    parser.add_argument("--steps", type=int, default=20_000, help="online steps per timed run")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per agent (best reported)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    names = args.agents or [a for a in DEFAULT_AGENTS if a in AGENTS]
    unknown = [a for a in names if a not in AGENTS]
    if unknown:
        parser.error(f"unknown agent(s) {unknown}; known: {sorted(AGENTS)}")
    trace = resolve_trace("wind-1", length=max(2 * args.steps, 10_000))
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for name in names:
            time_agent(name, min(args.steps, 2_000), trace, seed=99)  # warm-up (lazy imports, first kernels)
            best = min(time_agent(name, args.steps, trace, seed=k) for k in range(args.repeats))
            results[name] = best[1] / best[0]
            print(f"{name}: {results[name]:,.0f} steps/s", file=sys.stderr, flush=True)
    report(results, "agent", args.steps, args.repeats, args.json, f"torch {torch.__version__}, 1 thread, ")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
