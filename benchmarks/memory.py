"""Memory of a long LCPO run on windy Pendulum: resident set size after every chunk of steps, and the peak.

The reservoir, rollout batch and networks are preallocated, so memory must stay flat after start-up; what grows
is only the per-episode record (a few numbers per 200-step episode).

Usage: ``python benchmarks/memory.py [--steps 1000000] [--chunk 100000] [--reservoir 200000]``.
"""

from __future__ import annotations

import argparse
import json
import resource

import gymnasium as gym
import psutil
import torch

import lcpo.envs  # noqa: F401
from lcpo.agents import LCPO


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1_000_000)
    p.add_argument("--chunk", type=int, default=100_000)
    p.add_argument("--reservoir", type=int, default=200_000)
    p.add_argument("--trace", default="ndbc-46002")
    args = p.parse_args()
    torch.set_num_threads(1)
    proc = psutil.Process()
    env = gym.make("lcpo/WindyPendulum-v0", trace=args.trace)
    agent = LCPO(env, seed=0, reservoir_size=args.reservoir)
    rows = []
    done = 0
    while done < args.steps:
        agent.learn(args.chunk)
        done += args.chunk
        rows.append({"steps": done, "rss_mib": round(proc.memory_info().rss / 2**20, 1),
                     "reservoir_filled": len(agent.reservoir)})
        print(json.dumps(rows[-1]), flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peak_rss_mib": round(peak, 1), "reservoir_bytes": agent.reservoir.data.nbytes}))


if __name__ == "__main__":
    main()
