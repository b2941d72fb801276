"""Short online runs of LCPO and A2C on the straggler environment, next to fixed-timeout policies (issue 7).

For each workload, with the same environment seed:

- every fixed policy (the 9 actions: timeouts 3 ... 1000 ms and "never hedge") is run through the environment
  directly; "best fixed" is the one with the lowest bucketed p95 over the whole run;
- A2C and LCPO learn online for the same number of steps on the continuing task (one reset, never again), with
  the paper's straggler hyperparameters (:data:`lcpo.envs.straggler.presets.STRAGGLER_OVERRIDES`; LCPO with the
  Mahalanobis detector, ``D^2 > 24``; reservoir 1 % of the run's steps as in the paper) and the
  permutation-invariant networks.

Reported per policy: the paper's metric (mean over 5-minute arrival buckets of the bucket's p95 latency, ms)
over the whole run and over its last quarter (buckets whose arrivals start in the last 25 % of simulated time:
how good the policy is once it has learned), the mean per-step p95 (ms), the fraction of steps forced to
"never hedge" by the safety rule, and steps/s (one core, ``torch`` single-threaded), both per wall-clock second
and per CPU second of the process (``time.process_time``; the better number on a shared machine).

Acting: by default the agents act through :class:`lcpo.envs.straggler.nets.NumpyPermInvariantPolicy` (a NumPy
mirror of the policy, which ``lcpo.agents.nets.make_fast_policy`` takes from the body's ``fast_policy``);
``--torch-act`` swaps in the generic torch path instead. ``--speed-steps N`` additionally measures LCPO's steps/s
with both paths on ``synthetic-noisy``.

Usage:
    python benchmarks/straggler_runs.py [--steps 200000] [--workloads synthetic-ramp azure-llm]
        [--agents lcpo a2c] [--seed 0] [--markdown out.md] [--json out.json] [--speed-steps 20000]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

import lcpo.envs  # noqa: F401  (registers the ids)
from lcpo.agents import AGENTS
from lcpo.envs.registration import make_env
from lcpo.envs.straggler import TIMEOUTS_MS, StragglerMitigationEnv
from lcpo.envs.straggler.nets import NumpyPermInvariantPolicy
from lcpo.envs.straggler.presets import straggler_overrides

ENV_ID = "lcpo/StragglerMitigation-v0"
BUCKET_MS = 300_000.0


def _label(action: int) -> str:
    t = TIMEOUTS_MS[action]
    return "never hedge" if np.isinf(t) else f"timeout {t:g} ms"


def _summarize(env: StragglerMitigationEnv, start_ms: float) -> dict:
    """Run metrics plus the bucketed p95 over the buckets starting at or after ``start_ms``."""
    m = env.run_metrics()
    vals = env.bucket_p95s()
    first = int(np.ceil(start_ms / BUCKET_MS))
    # bucket indices are consecutive from 0 when every bucket holds requests (true for these workloads)
    late = vals[first:] if vals.size > first else vals[-1:]
    m["bucketed_p95_last_quarter_ms"] = float(late.mean())
    return m


def run_fixed(workload: str, action: int, steps: int, seed: int) -> dict:
    """One fixed-timeout policy for ``steps`` steps; returns its metrics."""
    env = StragglerMitigationEnv(workload, workload_seed=seed)
    env.reset(seed=seed)
    t_quarter = None
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(steps):
        info = env.step(action)[-1]
        if i == (3 * steps) // 4:
            t_quarter = info["time_ms"]
    m = _summarize(env, t_quarter)
    m.update(policy=_label(action), action=action, steps_per_s=steps / (time.perf_counter() - t0),
             steps_per_cpu_s=steps / (time.process_time() - c0))
    return m


def run_agent(workload: str, agent_name: str, steps: int, seed: int, numpy_act: bool = True,
              reservoir_fraction: float = 0.01) -> dict:
    """Online training of ``agent_name`` for ``steps`` steps (continuing task); returns metrics and steps/s."""
    env = make_env(ENV_ID, workload=workload, workload_seed=seed)
    # 1% of the run, never below the 5 x ood_batch candidates of one anchor draw (lcpo.agents.run_length)
    extra = {"reservoir_size": max(5 * straggler_overrides("lcpo")["ood_batch"], int(steps * reservoir_fraction))} \
        if agent_name == "lcpo" else {}
    agent = AGENTS[agent_name](env, seed=seed, **straggler_overrides(agent_name, **extra))
    if numpy_act:
        agent.fast_actor = NumpyPermInvariantPolicy(agent.actor)
    quarter = (3 * steps) // 4
    t0, c0 = time.perf_counter(), time.process_time()
    agent.learn(quarter, reset_condition="never")
    t_quarter = env.unwrapped.sim.now
    agent.learn(steps - quarter)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    m = _summarize(env.unwrapped, t_quarter)
    m.update(policy=agent_name.upper() if agent_name == "lcpo" else "A2C", steps_per_s=steps / wall,
             steps_per_cpu_s=steps / cpu, updates=agent.updates)
    if agent_name == "lcpo":
        m["constrained_updates"] = agent.constrained_updates
        m["accepted_steps"] = agent.accepted_steps
    return m


def _table(rows: list[dict]) -> str:
    head = ("| policy | bucketed p95 (ms) | bucketed p95, last quarter (ms) | mean step p95 (ms) | forced steps "
            "| steps/s (wall) | steps/s (CPU) |\n|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        lines.append(f"| {r['policy']} | {r['bucketed_p95_ms']:.0f} | {r['bucketed_p95_last_quarter_ms']:.0f} | "
                     f"{r['mean_step_p95_ms']:.0f} | {100 * r['forced_fraction']:.1f} % | "
                     f"{r['steps_per_s']:,.0f} | {r['steps_per_cpu_s']:,.0f} |")
    return head + "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description="LCPO and A2C vs fixed timeouts on the straggler environment")
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--workloads", nargs="+", default=["synthetic-ramp", "azure-llm"])
    ap.add_argument("--agents", nargs="+", default=["lcpo", "a2c"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--torch-act", action="store_true", help="act through torch instead of the NumPy mirror")
    ap.add_argument("--speed-steps", type=int, default=0, help="also measure LCPO steps/s, both acting paths")
    ap.add_argument("--markdown", type=str, default=None)
    ap.add_argument("--json", type=str, default=None)
    args = ap.parse_args()
    if args.steps < 8:
        raise SystemExit(f"--steps must be >= 8, got {args.steps}")
    torch.set_num_threads(1)
    results: dict[str, list[dict]] = {}
    md = [f"Steps per run: {args.steps:,} (500 ms each); seed {args.seed}.\n"]
    for wl in args.workloads:
        fixed = []
        for a in range(len(TIMEOUTS_MS)):
            fixed.append(run_fixed(wl, a, args.steps, args.seed))
            print(f"{wl} {fixed[-1]['policy']}: {fixed[-1]['bucketed_p95_ms']:.0f} ms", flush=True)
        best = min(fixed, key=lambda r: r["bucketed_p95_ms"])
        never = fixed[-1]
        rows = [dict(never, policy="never hedge")]
        rows.append(dict(best, policy=f"best fixed ({best['policy']})"))
        for name in args.agents:
            r = run_agent(wl, name, args.steps, args.seed, numpy_act=not args.torch_act)
            print(f"{wl} {r['policy']}: {r['bucketed_p95_ms']:.0f} ms, {r['steps_per_s']:.0f} steps/s", flush=True)
            rows.append(r)
        results[wl] = {"summary": rows, "fixed": fixed}
        md.append(f"\n**{wl}**\n\n" + _table(rows))
        md.append("\nAll fixed timeouts (bucketed p95, ms): "
                  + ", ".join(f"{r['policy'].replace('timeout ', '')} {r['bucketed_p95_ms']:.0f}" for r in fixed)
                  + "\n")
    if args.speed_steps:
        md.append("\nLCPO online training speed (synthetic-noisy, "
                  f"{args.speed_steps:,} steps, rollout 4,608):\n\n| acting path | steps/s (wall) | steps/s (CPU) |\n"
                  "|---|---|---|\n")
        for numpy_act in (True, False):
            r = run_agent("synthetic-noisy", "lcpo", args.speed_steps, args.seed, numpy_act=numpy_act)
            label = "NumPy mirror" if numpy_act else "torch (generic fallback)"
            md.append(f"| {label} | {r['steps_per_s']:,.0f} | {r['steps_per_cpu_s']:,.0f} |\n")
            results.setdefault("speed", []).append({"acting": label, **r})
    text = "".join(md)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, default=float)


if __name__ == "__main__":
    main()
