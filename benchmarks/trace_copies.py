"""Memory of a population task's context trace: one shared copy against one per Gymnasium wrapper and seed.

``gym.make`` keeps, in every wrapper it adds, a deep copy of the environment's spec, and the spec's kwargs hold
the environment's context trace. Until 2026-12-05 a :class:`lcpo.contexts.trace.ContextTrace` deep-copied its
``values`` array with it: 8 * T * d bytes (320 MB for a 20M-step wind trace) per wrapper and seed. Since then
its ``__deepcopy__`` shares the read-only array.

Side by side, each in a fresh Python process (so that resident memory is the task's own), the same library
call a sweep makes for a population task, :func:`lcpo.online.population.execute_population`, on a study's
MuJoCo cell (``--env``, default windy InvertedPendulum; ``--trace``, default ``wind-1`` at its full 20M-step
length; 5 seeds of ``--agent``), run for ``--steps`` steps per seed into a temporary folder:

* **copied** (before b53d331): ``ContextTrace.__deepcopy__`` removed in that process, so ``copy.deepcopy`` falls
  back to copying every field, as it did, and each ``scaled`` call divides into a private array;
* **deep copies shared** (b53d331 to session 22): the deep copies share the array, each ``scaled`` call still
  divides into a private array (the same array as now where the divisor is 1);
* **shared** (now): the library as it is.

Reported for each: the peak resident set size of the process (``ru_maxrss``), its resident set size at the end,
the wall time of the call, the number of distinct trace arrays reachable from the population's environments
(each wrapper's cached spec), and that both give the same lifelong returns (the copy is the same numbers).

Usage::

    python benchmarks/trace_copies.py [--env lcpo/WindyInvertedPendulum-v0] [--trace wind-1] [--agent a2c]
        [--seeds 5] [--steps 2000] [--trace-length 20000000] [--json out.json]
    python benchmarks/trace_copies.py --env lcpo/WindyInvertedDoublePendulum-v0   # divisor 8 on every trace
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time

CHILD = r"""
import json, resource, sys, tempfile, time
from pathlib import Path
import torch
torch.set_num_threads(1)
from lcpo.contexts.trace import ContextTrace
from lcpo.online.population import execute_population
from lcpo.online.run import RunConfig

mode, agent, seeds, steps, length = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
env_id, trace_name = sys.argv[6], sys.argv[7]
if mode == "copied":
    del ContextTrace.__deepcopy__
if mode in ("copied", "deep copies shared"):  # every scaled() call divides into an array of its own, as before
    import lcpo.contexts.trace as trace_module
    def private_quotient(values, divisor):
        out = values / divisor
        out.setflags(write=False)
        return out
    trace_module._shared_quotient = private_quotient

def rss_mb():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) / 1024

# count the distinct trace arrays the environments hold: wrap execute's environment factory
import lcpo.envs.registration as reg
made = []
_make = reg.make_env
def counting_make(*a, **k):
    env = _make(*a, **k)
    made.append(env)
    return env
reg.make_env = counting_make

with tempfile.TemporaryDirectory() as tmp:
    cfgs = [RunConfig(env=env_id, trace=trace_name, trace_length=length, agent=agent,
                      steps=steps, seed=s, checkpoint_every=10**9, diagnostics_every=1000) for s in range(seeds)]
    outs = [Path(tmp) / f"s{s}" for s in range(seeds)]
    t0 = time.perf_counter()
    summaries = execute_population(cfgs, outs)
    wall = time.perf_counter() - t0
    arrays = set()
    for env in made:
        arrays.add(env.unwrapped.wind.values.__array_interface__["data"][0])  # the (divided) array it reads
        e = env
        while e is not None:
            spec = getattr(e, "_cached_spec", None) or getattr(e, "spec", None)
            tr = (spec.kwargs or {}).get("trace") if spec is not None else None
            if isinstance(tr, ContextTrace):
                arrays.add(tr.values.__array_interface__["data"][0])
            e = getattr(e, "env", None)
    print(json.dumps({"mode": mode, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "end_rss_mb": rss_mb(), "wall_s": wall, "envs_made": len(made),
                      "distinct_trace_arrays": len(arrays), "divisor": made[0].unwrapped.wind.divisor,
                      "lifelong_returns": [s["lifelong_return"] for s in summaries]}))
"""


def run(mode: str, args) -> dict:
    """One measurement in a fresh interpreter; returns its JSON line as a dict."""
    out = subprocess.run([sys.executable, "-c", CHILD, mode, args.agent, str(args.seeds), str(args.steps),
                          str(args.trace_length), args.env, args.trace], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"trace_copies: the {mode} measurement failed: {(out.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="lcpo/WindyInvertedPendulum-v0")
    p.add_argument("--trace", default="wind-1")
    p.add_argument("--agent", default="a2c")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--trace-length", type=int, default=20_000_000)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    t0 = time.time()
    rows = [run(mode, args) for mode in ("copied", "deep copies shared", "shared")]
    same = all(r["lifelong_returns"] == rows[0]["lifelong_returns"] for r in rows)
    print(f"{args.env}, {args.trace} at {args.trace_length:,} steps (wind divisor {rows[0]['divisor']:g}), "
          f"{args.seeds} seeds of {args.agent}, {args.steps:,} steps each (execute_population, fresh process each)")
    print("| trace arrays | peak RSS | RSS at the end | wall | environments made | distinct trace arrays |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['mode']} | {r['peak_rss_mb']:,.0f} MB | {r['end_rss_mb']:,.0f} MB | {r['wall_s']:.1f} s | "
              f"{r['envs_made']} | {r['distinct_trace_arrays']} |")
    print(f"lifelong returns equal: {same}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "same_returns": same, "args": vars(args), "python": platform.python_version(),
                       "started_unix": t0}, f, indent=1)
    if not same:
        sys.exit("the modes gave different lifelong returns")


if __name__ == "__main__":
    main()
