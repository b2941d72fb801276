"""Per seed-step time of the windy Pendulum as a vector env (issue 26, item 2), one core.

For N = 1, 4, 16, 64 sub-environments (trace ``wind-1``, 200-step episodes, pre-drawn random bin indices,
ended sub-envs reset with a reset mask; resets are timed too), the microseconds per seed-step of:

* ``native``: :class:`lcpo.envs.windy_pendulum_vector.WindyPendulumVectorEnv` stepped directly;
* ``native+stream``: the same through :class:`lcpo.envs.vector.VectorStream` (what a population sees: copied
  observations, per-sub-env info dicts);
* ``sync``: Gymnasium's ``SyncVectorEnv`` of N ``lcpo/WindyPendulum-v0`` envs (``make_vector_env(mode="sync")``);
* ``single loop``: N single ``lcpo/WindyPendulum-v0`` envs stepped one after another in a Python loop (today).

Each figure is the best of ``--repeats`` runs of about ``--seed-steps`` seed-steps (the ``timeit``
convention on a shared machine), timed in process CPU time by default (``--clock wall`` for wall time; the
code is single-threaded, so the two agree on a quiet machine). Never a test.

Usage::

    python benchmarks/vector_env.py [--seed-steps 64000] [--repeats 5] [--sizes 1 4 16 64] [--clock cpu|wall]
                                    [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import lcpo.envs  # noqa: E402,F401  (registers the ids)
from lcpo.contexts import resolve_trace  # noqa: E402
from lcpo.envs.vector import VectorStream, make_vector_env  # noqa: E402
from lcpo.envs.windy_pendulum import make_windy_pendulum  # noqa: E402
from lcpo.envs.windy_pendulum_vector import WindyPendulumVectorEnv  # noqa: E402

ENV = "lcpo/WindyPendulum-v0"
_clock = time.process_time  # CPU time of this (single-threaded) process: robust to a shared, loaded machine


def time_native(n: int, steps: int, trace) -> float:
    venv = WindyPendulumVectorEnv(env_kwargs=[{"trace": trace}] * n, autoreset_mode="Disabled")
    actions = np.random.default_rng(0).integers(0, 15, (steps, n, 1))
    venv.reset(seed=list(range(n)))
    step, reset = venv.step, venv.reset
    start = _clock()
    for a in actions:
        _, _, term, trunc, _ = step(a)
        ended = term | trunc
        if ended.any():
            reset(options={"reset_mask": ended})
    return _clock() - start


def time_stream(venv, n: int, steps: int) -> float:
    stream = VectorStream(venv)
    actions = np.random.default_rng(0).integers(0, 15, (steps, n, 1))
    stream.reset(seeds=list(range(n)))
    step, reset_where = stream.step, stream.reset_where
    start = _clock()
    for a in actions:
        _, _, term, trunc, _ = step(a)
        ended = term | trunc
        if ended.any():
            reset_where(ended)
    return _clock() - start


def time_singles(n: int, steps: int, trace) -> float:
    envs = [make_windy_pendulum(trace=trace) for _ in range(n)]
    actions = np.random.default_rng(0).integers(0, 15, (steps, n, 1))
    for k, e in enumerate(envs):
        e.reset(seed=k)
    start = _clock()
    for a in actions:
        for k, e in enumerate(envs):
            _, _, term, trunc, _ = e.step(a[k])
            if term or trunc:
                e.reset()
    return _clock() - start


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed-steps", type=int, default=64_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--json", default=None)
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                   help="cpu: time.process_time (default; excludes waiting for the CPU), wall: time.perf_counter")
    args = p.parse_args(argv)
    global _clock
    _clock = time.process_time if args.clock == "cpu" else time.perf_counter
    trace = resolve_trace("wind-1")
    WindyPendulumVectorEnv(num_envs=1).reset(seed=0)  # compile (or load) the numba kernels outside the timing
    kinds = {
        "native": lambda n, s: time_native(n, s, trace),
        "native+stream": lambda n, s: time_stream(make_vector_env(ENV, [{"trace": trace}] * n, mode="native"), n, s),
        "sync": lambda n, s: time_stream(make_vector_env(ENV, [{"trace": trace}] * n, mode="sync"), n, s),
        "single loop": lambda n, s: time_singles(n, s, trace),
    }
    out: dict[str, dict[int, float]] = {k: {} for k in kinds}
    for n in args.sizes:
        steps = max(args.seed_steps // n, 200)
        for name, fn in kinds.items():
            fn(n, min(steps, 2000))  # warm-up
            best = min(fn(n, steps) for _ in range(args.repeats))
            out[name][n] = best / (steps * n) * 1e6
    print(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, one core, "
          f"~{args.seed_steps} seed-steps per run, best of {args.repeats}, {args.clock} time, load average "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| us per seed-step | " + " | ".join(f"N={n}" for n in args.sizes) + " |")
    print("|---|" + "---|" * len(args.sizes))
    for name, row in out.items():
        print(f"| {name} | " + " | ".join(f"{row[n]:.2f}" for n in args.sizes) + " |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"us_per_seed_step": out, "seed_steps": args.seed_steps, "repeats": args.repeats}, f, indent=2)
    return out


if __name__ == "__main__":
    main()
