"""Throughput of the online loop on windy Pendulum: environment steps per second, one core, one torch thread.

Measures (best of ``--repeats``, after a warm-up so LCPO's reservoir is populated and OOD anchors exist):
- ``env``: the environment step alone (random bins, through ``gymnasium.make``);
- ``act``: one agent ``act`` call alone;
- ``a2c`` / ``lcpo``: full online training (acting, storing, updates every 200 steps).

Usage: ``python benchmarks/throughput.py [--steps 50000] [--repeats 3] [--trace wind-2] [--env ID]``
(``--env`` measures another environment, e.g. ``lcpo/WindyHopper-v0``).
Pin to one core with ``taskset -c 0`` for stable figures. Report the output in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np
import torch

import lcpo.envs  # noqa: F401
from lcpo.agents import AGENTS
from lcpo.contexts import resolve_trace


ENV = "lcpo/WindyPendulum-v0"


def env_rate(trace, steps: int) -> float:
    env = gym.make(ENV, trace=trace)
    env.reset(seed=0)
    acts = np.random.default_rng(0).integers(15, size=(steps, env.action_space.shape[0]))
    t = time.perf_counter()
    for a in acts:
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - t)


def act_rate(agent, trace, steps: int) -> float:
    env = gym.make(ENV, trace=trace)
    obs, _ = env.reset(seed=0)
    t = time.perf_counter()
    for _ in range(steps):
        agent.act(obs)
    return steps / (time.perf_counter() - t)


def train_rate(name: str, trace, steps: int, warmup: int) -> float:
    env = gym.make(ENV, trace=trace)
    agent = AGENTS[name](env, seed=0)
    agent.learn(warmup)
    t = time.perf_counter()
    agent.learn(steps)
    return steps / (time.perf_counter() - t)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50_000)
    p.add_argument("--warmup", type=int, default=20_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--trace", default="wind-2")
    p.add_argument("--agents", nargs="+", default=["a2c", "lcpo"])
    p.add_argument("--env", default=ENV)
    args = p.parse_args()
    globals()["ENV"] = args.env
    torch.set_num_threads(1)
    trace = resolve_trace(args.trace, length=400_000)
    res = {"env": max(env_rate(trace, args.steps) for _ in range(args.repeats))}
    agent = AGENTS["lcpo"](gym.make(ENV, trace=trace), seed=0)
    res["act"] = max(act_rate(agent, trace, args.steps) for _ in range(args.repeats))
    for name in args.agents:
        res[name] = max(train_rate(name, trace, args.steps, args.warmup) for _ in range(args.repeats))
    if "a2c" in res and "lcpo" in res:
        res["lcpo/a2c"] = res["lcpo"] / res["a2c"]
    print(json.dumps({"env_id": ENV, **{k: round(v, 3 if k == "lcpo/a2c" else 0) for k, v in res.items()}}))


if __name__ == "__main__":
    main()
