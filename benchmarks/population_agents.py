"""Act + observe throughput of agent populations at N = 1, 4, 16, 64 seeds (one thread), and the single agent.

What is timed: act + observe of the agent (every update included, on the agent's own schedule) plus a cheap
NumPy array pendulum written here (:class:`ArrayPendulum`: N pendulums with Pendulum-v1's dynamics, a wind
torque read from the canonical trace ``wind-3``, the 9-entry windy-Pendulum observation, 15 action bins,
200-step episodes), stepped as arrays; the pendulum's own throughput is printed in the last row (about 1 us per
seed-step at N = 64), so the agent's share can be read off. It is not bit-exact with ``lcpo/WindyPendulum-v0`` (the population
runtime's native vector env is); the learning problem is the same.

Modes:

- ``single``: today's single agent, ``agent.act(obs)`` / ``agent.observe(Transition)`` per step (N = 1). Works
  against any lcpo tree, e.g. ``PYTHONPATH=/work/main/src`` for the code before the seed axis;
- ``population`` (``--anchors``: LCPO's and LCPO-P's reservoirs pre-filled with 2,000 strong-wind states, so that
  every update takes the constrained step or the anchor penalty, the worst case): ``lcpo.agents.population.make_population(name, env, range(N))`` stepped with
  ``act_batch`` / ``observe_batch`` (batch-native where ``BATCH_NATIVE`` lists the agent, else the generic
  loop).

The figure is environment steps per second in all (N seed-steps per population step), best of ``--repeats``;
the timed window holds at least three rollouts of the agent (updates included) after a warm-up of at least one. ``--fvp`` also prints the Fisher-vector products' achieved GFLOP/s
(:func:`fvp_gflops`) at each N. ``--cpu-time`` times with the process's CPU time instead of wall time (on a
machine whose cores other jobs share, what one core gives).

Usage::

    python benchmarks/population_agents.py [--agents a2c lcpo] [--sizes 1 4 16 64] [--steps 4000]
        [--repeats 2] [--modes single population] [--cpu-time] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np
import torch

torch.set_num_threads(1)

#: ``--anchors``: pre-fill LCPO's reservoirs with out-of-distribution states (every update constrained)
ANCHORS = False
#: the clock of every figure: wall time (default) or, with ``--cpu-time``, this process's CPU time (what one core
#: gives, when other jobs share the machine's cores)
CLOCK = time.perf_counter


class ArrayPendulum:
    """N windy pendulums as arrays (Pendulum-v1 dynamics, wind torque ``w_x cos(th) + w_y sin(th)``).

    Args:
        n: number of pendulums.
        wind: ``(T, 2)`` float64 wind trace, read with one global clock shared by all pendulums.
        seed: seed of the initial states.
    """

    def __init__(self, n: int, wind: np.ndarray, seed: int = 0):
        self.n, self.wind = n, np.asarray(wind, dtype=np.float64)
        self.rng = np.random.default_rng(seed)
        self.t = 0
        self.hist = np.zeros((n, 6), dtype=np.float64)
        self.th = self.rng.uniform(-np.pi, np.pi, n)
        self.thdot = self.rng.uniform(-1, 1, n)
        self.elapsed = np.zeros(n, dtype=np.int64)
        self.torques = np.linspace(-2.0, 2.0, 15)

    def obs(self) -> np.ndarray:
        """``(N, 9)`` float32 observations."""
        return np.concatenate([np.cos(self.th)[:, None], np.sin(self.th)[:, None], self.thdot[:, None],
                               self.hist], axis=1).astype(np.float32)

    def step(self, actions: np.ndarray):
        """``actions (N, 1)`` bins -> ``(next_obs, rewards, terminated, truncated, infos, reset_obs)``."""
        a = self.torques[np.asarray(actions).reshape(self.n)]
        wx, wy = self.wind[self.t % len(self.wind)]
        self.t += 1
        u = np.clip(a + wx * np.cos(self.th) + wy * np.sin(self.th), -2, 2)
        ang = ((self.th + np.pi) % (2 * np.pi)) - np.pi
        cost = ang ** 2 + 0.1 * self.thdot ** 2 + 0.001 * a ** 2
        self.thdot = np.clip(self.thdot + (15.0 * np.sin(self.th) + 3.0 * u) * 0.05, -8, 8)
        self.th = self.th + self.thdot * 0.05
        self.hist[:, 1:3] = self.hist[:, 0:2]
        self.hist[:, 0] = wx
        self.hist[:, 4:6] = self.hist[:, 3:5]
        self.hist[:, 3] = wy
        self.elapsed += 1
        trunc = self.elapsed >= 200
        nxt = self.obs()
        infos = [{"context": np.array([wx, wy])} for _ in range(self.n)]
        reset_obs = nxt
        if trunc.any():
            k = np.flatnonzero(trunc)
            self.th[k] = self.rng.uniform(-np.pi, np.pi, k.size)
            self.thdot[k] = self.rng.uniform(-1, 1, k.size)
            self.elapsed[k] = 0
            reset_obs = self.obs()
        return nxt, -cost, np.zeros(self.n, bool), trunc, infos, reset_obs


def _template_env():
    import gymnasium as gym

    import lcpo.envs  # noqa: F401

    return gym.make("lcpo/WindyPendulum-v0", trace="wind-3")


def _wind():
    from lcpo.contexts import resolve_trace

    return resolve_trace("wind-3", length=100_000).values[:, :2]


def time_single(name: str, steps: int, warmup: int, wind) -> float:
    """Steps/s of one single agent driven by ``act`` / ``observe`` on a one-pendulum :class:`ArrayPendulum`."""
    from lcpo.agents import AGENTS
    from lcpo.online.loop import Transition

    agent = AGENTS[name](_template_env(), seed=0)
    env = ArrayPendulum(1, wind)
    obs = env.obs()[0]

    def run(n):
        nonlocal obs
        for _ in range(n):
            a = agent.act(obs)
            nxt, r, term, trunc, infos, reset_obs = env.step(a[None])
            agent.observe(Transition(obs, a, float(r[0]), nxt[0], bool(term[0]), bool(trunc[0]), infos[0]))
            obs = reset_obs[0]

    run(warmup)
    t0 = CLOCK()
    run(steps)
    return steps / (CLOCK() - t0)


def time_population(name: str, n: int, steps: int, warmup: int, wind) -> tuple[float, float]:
    """Env steps/s in all (``n`` per population step) of ``make_population(name, env, range(n))``, and the
    fraction of the timed updates that took the KL-constrained step (NaN for agents that report none).

    The timed window holds at least three of the agent's rollouts (``3 * rollout_steps`` population steps) after
    a warm-up of at least one, so that every figure includes updates (TRPO's 3,200-step batches too).
    """
    from lcpo.agents.population import make_population

    pop = make_population(name, _template_env(), list(range(n)))
    if ANCHORS and hasattr(pop, "reservoirs"):
        # LCPO's worst case: 2,000 past states under a strong wind in every reservoir, so every update finds
        # anchors and takes the constrained step (conjugate gradient, Fisher-vector products, line search)
        rng = np.random.default_rng(0)
        past = np.zeros((2000, 9), np.float32)
        th = rng.uniform(-np.pi, np.pi, 2000)
        past[:, 0], past[:, 1], past[:, 2], past[:, 3:] = np.cos(th), np.sin(th), rng.uniform(-8, 8, 2000), 3.0
        for res in pop.reservoirs:
            res.add_batch(past)
    env = ArrayPendulum(n, wind)
    obs = env.obs()
    counts = [0, 0]

    def run(k, count=False):
        nonlocal obs
        for _ in range(k):
            a = pop.act_batch(obs)
            nxt, r, term, trunc, infos, reset_obs = env.step(a)
            out = pop.observe_batch(obs, a, r, nxt, term, trunc, infos)
            if count:
                for d in out:
                    if d is not None and "train/constrained" in d:
                        counts[0] += 1
                        counts[1] += int(d["train/constrained"] == 1.0)
            obs = reset_obs

    rollout = int(getattr(pop.hp, "rollout_steps", 1))
    rounds = max(1, steps // n, 3 * rollout)
    run(max(1, warmup // n, rollout))
    t0 = CLOCK()
    run(rounds, count=True)
    return rounds * n / (CLOCK() - t0), (counts[1] / counts[0] if counts[0] else math.nan)


def time_env(n: int, steps: int, wind) -> float:
    """Env steps/s in all of :class:`ArrayPendulum` alone (random actions)."""
    env = ArrayPendulum(n, wind)
    acts = np.random.default_rng(0).integers(0, 15, size=(64, n, 1))
    rounds = max(1, steps // n)
    t0 = CLOCK()
    for i in range(rounds):
        env.step(acts[i % 64])
    return rounds * n / (CLOCK() - t0)


def fvp_gflops(n: int, repeats: int = 5) -> float:
    """Achieved GFLOP/s of the Fisher-vector products of one batched constrained step at ``n`` seeds.

    As LCPO's update computes them: each seed's own product (:func:`lcpo.optim.fisher.make_fvp` on its member
    module of a ``(64, 64)`` MLP policy, 15 bins) on 200 anchor states, applied to one vector per seed, 16 products
    per seed (15 CG iterations and ``x^T A x``), seed by seed, in the form the step calls (the NumPy product where
    the tree has one), timed with the script's clock (``--cpu-time``: the process's CPU time). FLOPs per product:
    ``8 B sum(in * out) - 4 B in_0 out_0`` (the forward-mode pass and the backward pass, two GEMMs per layer each,
    none for the input's Jacobian).
    """
    from lcpo.agents.nets import CategoricalPolicy
    from lcpo.agents.stacked import SeedStack
    from lcpo.optim.fisher import make_fvp

    B, sizes = 200, [9, 64, 64, 15]
    pols = []
    for s in range(n):
        torch.manual_seed(s)
        pols.append(CategoricalPolicy(9, 1, 15, (64, 64)))
    stack = SeedStack(pols)
    states = torch.randn(n, B, 9)
    fvps = [make_fvp(stack.members[k], states[k], 0.1) for k in range(n)]
    P = sum(p[0].numel() for p in stack.params)
    V = torch.randn(n, P)
    flops = 8 * B * sum(a * b for a, b in zip(sizes[:-1], sizes[1:])) - 4 * B * sizes[0] * sizes[1]
    # the form the constrained step calls: the NumPy product where make_fvp offers one (its per-seed NumPy CG),
    # else the torch form (an lcpo tree before the NumPy CG)
    calls = [(f.numpy, v.numpy()) if callable(getattr(f, "numpy", None)) else (f, v) for f, v in zip(fvps, V)]
    best = math.inf
    for _ in range(repeats):
        t0 = CLOCK()
        for f, v in calls:  # seed-major, as kl_constrained_step_batch runs each seed's CG to its end
            for _ in range(16):
                f(v)
        best = min(best, CLOCK() - t0)
    return 16 * n * flops / best / 1e9


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--agents", nargs="+", default=["a2c", "lcpo"])
    p.add_argument("--sizes", nargs="+", type=int, default=[1, 4, 16, 64])
    p.add_argument("--steps", type=int, default=8000, help="timed env steps in all per measurement")
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--modes", nargs="+", default=["single", "population"], choices=["single", "population"])
    p.add_argument("--fvp", action="store_true", help="also measure the Fisher-vector product's GFLOP/s")
    p.add_argument("--anchors", action="store_true",
                   help="pre-fill LCPO's and LCPO-P's reservoirs with OOD states so that every update is constrained")
    p.add_argument("--cpu-time", action="store_true", help="time with the process's CPU time, not wall time")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    global ANCHORS, CLOCK
    ANCHORS = args.anchors
    CLOCK = time.process_time if args.cpu_time else time.perf_counter
    wind = _wind()
    import lcpo

    print(f"lcpo from {os.path.dirname(lcpo.__file__)}; torch {torch.__version__}, 1 thread; "
          f"{args.steps} timed steps, best of {args.repeats}; {'process CPU' if args.cpu_time else 'wall'} time")
    results: dict[str, dict[str, float]] = {}
    constrained: dict[str, dict[str, float]] = {}
    for name in args.agents:
        row = {}
        if "single" in args.modes:
            row["single"] = max(time_single(name, args.steps, args.warmup, wind) for _ in range(args.repeats))
        if "population" in args.modes:
            for n in args.sizes:
                runs = [time_population(name, n, args.steps, args.warmup, wind) for _ in range(args.repeats)]
                row[f"N={n}"] = max(r[0] for r in runs)
                if not math.isnan(runs[0][1]):
                    constrained.setdefault(name, {})[f"N={n}"] = runs[0][1]
        results[name] = row
        print(name, {k: round(v) for k, v in row.items()}, flush=True)
    env_row = {f"N={n}": time_env(n, 20_000, wind) for n in args.sizes}
    cols = sorted({c for r in results.values() for c in r}, key=lambda c: (c != "single", len(c), c))
    print("\n| agent | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
    for name, row in results.items():
        print(f"| {name} | " + " | ".join(f"{row[c]:,.0f}" if c in row else "" for c in cols) + " |")
    print("| (array pendulum alone) | " + " | ".join(f"{env_row[c]:,.0f}" if c in env_row else "" for c in cols)
          + " |")
    for name, row in constrained.items():
        print(f"{name}: fraction of timed updates that were constrained: "
              + ", ".join(f"{c} {v:.2f}" for c, v in row.items()))
    fv = {}
    if args.fvp:
        for n in args.sizes:
            fv[n] = fvp_gflops(n)
        if fv:
            print("\nFisher-vector product GFLOP/s by N: " + ", ".join(f"{n}: {g:.1f}" for n, g in fv.items()))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"steps_per_s": results, "env_steps_per_s": env_row, "fvp_gflops": fv,
                       "constrained_fraction": constrained}, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
