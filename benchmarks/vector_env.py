"""Per seed-step time of a windy environment as a vector env (issue 26, item 2), one core.

For N = 1, 4, 16, 64 sub-environments (trace ``wind-1``, the env's own episode length, pre-drawn random bin
indices, ended sub-envs reset with a reset mask; resets are timed too), the microseconds per seed-step of:

* ``native``: the id's native vector env (``make_vector_env(mode="native")``, DISABLED autoreset) stepped
  directly: :class:`lcpo.envs.windy_pendulum_vector.WindyPendulumVectorEnv` for the windy Pendulum,
  :class:`lcpo.envs.mujoco.vector.WindyMujocoVectorEnv` (a ``SyncVectorEnv`` with a lean step) for MuJoCo;
* ``native+stream``: the same through :class:`lcpo.envs.vector.VectorStream` (what a population sees: copied
  observations, per-sub-env info dicts);
* ``sync``: Gymnasium's ``SyncVectorEnv`` of N single envs (``make_vector_env(mode="sync")``) through the stream;
* ``single loop``: N single envs (``make_env``) stepped one after another in a Python loop.

``--env`` picks the id (default ``lcpo/WindyPendulum-v0``); ``--sizes`` the N.

``--population AGENT ...`` times whole populations instead (:meth:`lcpo.online.population.Population.learn`:
env, acting, updates, loop) of ``--pop-seeds`` seeds on trace ``wind-2`` with the id's native vector env against
the same population over Gymnasium's ``SyncVectorEnv`` (the path without it), after ``--pop-warmup`` untimed
steps per seed; rounds of ``--pop-steps`` steps per seed alternate between the two (a change of the machine's
load hits both alike); reported: environment steps per CPU-second, the best round of ``--repeats``.

Each figure is the best of ``--repeats`` runs of about ``--seed-steps`` seed-steps (the ``timeit``
convention on a shared machine), timed in process CPU time by default (``--clock wall`` for wall time; the
code is single-threaded, so the two agree on a quiet machine). Never a test.

Usage::

    python benchmarks/vector_env.py [--env ID] [--seed-steps 64000] [--repeats 5] [--sizes 1 4 16 64]
                                    [--clock cpu|wall] [--json out.json]
    python benchmarks/vector_env.py --env lcpo/WindyInvertedPendulum-v0 --population a2c trpo lcpo
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
from lcpo.envs.registration import make_env  # noqa: E402
from lcpo.envs.vector import VectorStream, make_vector_env  # noqa: E402

ENV = "lcpo/WindyPendulum-v0"
_clock = time.process_time  # CPU time of this (single-threaded) process: robust to a shared, loaded machine


def _actions(venv, n: int, steps: int) -> np.ndarray:
    """Pre-drawn uniformly random bin indices ``(steps, N, d)`` (seeded)."""
    d = venv.single_action_space.shape[0]
    return np.random.default_rng(0).integers(0, 15, (steps, n, d))


def time_native(env_id: str, n: int, steps: int, trace) -> float:
    venv = make_vector_env(env_id, [{"trace": trace}] * n, mode="native")
    actions = _actions(venv, n, steps)
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
    actions = _actions(venv, n, steps)
    stream.reset(seeds=list(range(n)))
    step, reset_where = stream.step, stream.reset_where
    start = _clock()
    for a in actions:
        _, _, term, trunc, _ = step(a)
        ended = term | trunc
        if ended.any():
            reset_where(ended)
    return _clock() - start


def time_singles(env_id: str, n: int, steps: int, trace) -> float:
    envs = [make_env(env_id, trace=trace) for _ in range(n)]
    d = envs[0].action_space.shape[0]
    actions = np.random.default_rng(0).integers(0, 15, (steps, n, d))
    for k, e in enumerate(envs):
        e.reset(seed=k)
    start = _clock()
    for a in actions:
        for k, e in enumerate(envs):
            _, _, term, trunc, _ = e.step(a[k])
            if term or trunc:
                e.reset()
    return _clock() - start


def time_populations(env: str, agents: list[str], seeds: int, warmup: int, steps: int, repeats: int) -> dict:
    """``{agent: {"native": steps/s, "sync": steps/s}}``: environment steps per CPU-second of a population of
    ``seeds`` seeds with the id's native vector env and with ``SyncVectorEnv`` (best of ``repeats`` alternating
    rounds of ``steps`` steps per seed)."""
    import lcpo.envs.vector as vector
    from lcpo.online.population import Population

    out: dict[str, dict[str, float]] = {}
    native = vector.NATIVE_VECTOR_ENVS[env]
    for agent in agents:
        pops = {}
        for kind in ("native", "sync"):
            if kind == "sync":
                del vector.NATIVE_VECTOR_ENVS[env]  # make_vector_env's "auto" then builds a SyncVectorEnv
            try:
                pops[kind] = Population(agent, env, seeds=list(range(seeds)), trace="wind-2")
            finally:
                vector.NATIVE_VECTOR_ENVS[env] = native
            pops[kind].learn(warmup)
        best = {kind: 0.0 for kind in pops}
        for _ in range(repeats):
            for kind, pop in pops.items():
                start = _clock()
                pop.learn(steps)
                best[kind] = max(best[kind], seeds * steps / (_clock() - start))
        out[agent] = best
        print(f"{agent}: {type(pops['native'].stream.venv).__name__} {best['native']:,.0f} env steps/s, "
              f"SyncVectorEnv {best['sync']:,.0f} ({best['native'] / best['sync']:.2f}x)", flush=True)
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default=ENV, help="environment id with a native vector env (default: %(default)s)")
    p.add_argument("--seed-steps", type=int, default=64_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--json", default=None)
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                   help="cpu: time.process_time (default; excludes waiting for the CPU), wall: time.perf_counter")
    p.add_argument("--population", nargs="+", default=None, metavar="AGENT",
                   help="time populations of these agents (native vector env against SyncVectorEnv) instead")
    p.add_argument("--pop-seeds", type=int, default=5)
    p.add_argument("--pop-warmup", type=int, default=2000, help="untimed steps per seed first")
    p.add_argument("--pop-steps", type=int, default=4000, help="timed steps per seed and round")
    args = p.parse_args(argv)
    global _clock
    _clock = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.population:
        print(f"{args.env}: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
              f"{args.pop_seeds} seeds, trace wind-2, {args.pop_warmup} warm-up steps, best of {args.repeats} "
              f"rounds of {args.pop_steps} steps per seed, {args.clock} time, load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        out = time_populations(args.env, args.population, args.pop_seeds, args.pop_warmup, args.pop_steps,
                               args.repeats)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"env": args.env, "env_steps_per_s": out}, f, indent=2)
        return out
    trace = resolve_trace("wind-1")
    env = args.env
    make_vector_env(env, [{}], mode="native").reset(seed=0)  # compile (or load) numba kernels outside the timing
    kinds = {
        "native": lambda n, s: time_native(env, n, s, trace),
        "native+stream": lambda n, s: time_stream(make_vector_env(env, [{"trace": trace}] * n, mode="native"), n, s),
        "sync": lambda n, s: time_stream(make_vector_env(env, [{"trace": trace}] * n, mode="sync"), n, s),
        "single loop": lambda n, s: time_singles(env, n, s, trace),
    }
    out: dict[str, dict[int, float]] = {k: {} for k in kinds}
    for n in args.sizes:
        steps = max(args.seed_steps // n, 200)
        for name, fn in kinds.items():
            fn(n, min(steps, 2000))  # warm-up
            best = min(fn(n, steps) for _ in range(args.repeats))
            out[name][n] = best / (steps * n) * 1e6
    print(f"{env}: {platform.processor() or platform.machine()}, Python {platform.python_version()}, one core, "
          f"~{args.seed_steps} seed-steps per run, best of {args.repeats}, {args.clock} time, load average "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| us per seed-step | " + " | ".join(f"N={n}" for n in args.sizes) + " |")
    print("|---|" + "---|" * len(args.sizes))
    for name, row in out.items():
        print(f"| {name} | " + " | ".join(f"{row[n]:.2f}" for n in args.sizes) + " |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"env": env, "us_per_seed_step": out, "seed_steps": args.seed_steps,
                       "repeats": args.repeats}, f, indent=2)
    return out


if __name__ == "__main__":
    main()
