"""Steps per second of each windy environment alone (random discrete actions, one core).

Each environment is built by its registered factory (``DiscretizeActions`` over the windy env, as agents
see it) with canonical trace ``wind-1`` and the environment's divisor for it, and stepped with pre-drawn
uniformly random bin indices; episodes are reset when they terminate or truncate (resets are timed too).
The figure is the best of ``--repeats`` timed runs of ``--steps`` steps after a warm-up (the ``timeit``
convention: the fastest run is the least disturbed by other processes on a shared machine).

Usage::

    python benchmarks/env_speed.py [--steps 10000] [--repeats 5] [--json out.json]

Prints a Markdown table (the one in ``docs/envs.md``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core: no BLAS threads (torch is not imported)

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import lcpo.envs  # noqa: E402,F401  (registers the ids)
from common import report  # benchmarks/common.py (scripts run with benchmarks/ on sys.path)

ENV_IDS = (
    "lcpo/WindyPendulum-v0",
    "lcpo/WindyInvertedPendulum-v0",
    "lcpo/WindyInvertedDoublePendulum-v0",
    "lcpo/WindyHopper-v0",
    "lcpo/WindyReacher-v0",
)


def make(env_id: str):
    """The environment as agents see it, without Gymnasium's extra wrappers (trace wind-1)."""
    entry = gym.registry[env_id].entry_point
    module, name = entry.split(":")
    factory = getattr(__import__(module, fromlist=[name]), name)
    return factory(trace="wind-1")  # the windy MuJoCo factories infer trace_id 1 (its divisor) from the name


def time_env(env, steps: int, seed: int = 0) -> float:
    """Seconds to take ``steps`` random-action steps (with resets at episode ends)."""
    rng = np.random.default_rng(seed)
    nvec = np.asarray(env.action_space.nvec).reshape(-1)
    actions = rng.integers(0, nvec, size=(steps, nvec.shape[0]))
    env.reset(seed=seed)
    step, reset = env.step, env.reset
    start = time.perf_counter()
    for a in actions:
        _, _, terminated, truncated, _ = step(a)
        if terminated or truncated:
            reset()
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10_000, help="steps per timed run")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per environment (best reported)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for env_id in ENV_IDS:
            try:
                env = make(env_id)
            except (ImportError, AttributeError, ValueError) as exc:  # an environment not written yet
                print(f"skipping {env_id}: {exc}", file=sys.stderr)
                continue
            time_env(env, min(2_000, args.steps), seed=1)  # warm-up
            secs = [time_env(env, args.steps, seed=k) for k in range(args.repeats)]
            results[env_id] = args.steps / min(secs)
    report(results, "environment", args.steps, args.repeats, args.json, "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
