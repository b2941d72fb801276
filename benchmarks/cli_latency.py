"""Start-up latency of the ``lcpo`` commands: help and list commands (issue 14: target under 1 s on 2 cores) and,
with ``--code``, commands that load code (issue 24: ``agents show``, a 200-step SAC ``lcpo run`` whose time is
mostly start-up: PyTorch, and before issue 24 also its compiler, imported by the first optimizer).

Each command runs as a fresh process (``python -m lcpo.cli.main ARGS``, the code the ``lcpo`` console script
runs), ``--repeats`` times after one warm-up run that fills the OS file cache and Python's bytecode cache; the
table gives the median and the fastest wall time, and the machine's load average when the measurement started.

    python benchmarks/cli_latency.py                      # this checkout
    python benchmarks/cli_latency.py --src /tmp/old/src   # another checkout's sources (e.g. `git archive`
                                                          # of an older commit), for before/after numbers
    python benchmarks/cli_latency.py --code --src A --src B   # also code-loading commands; A and B alternate
                                                              # run by run, so both see the same load
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

#: The commands measured (argument lists after ``lcpo``).
COMMANDS = (["--help"], ["run", "--help"], ["agents", "list"], ["envs", "list"], ["traces", "list"])
#: With ``--code``: commands that load code; ``{out}`` is a fresh temporary folder for each run.
CODE_COMMANDS = (["agents", "show", "lcpo"],
                 ["run", "--agent", "sac", "--env", "lcpo/ContinuingChain-v0", "--steps", "200", "--no-progress",
                  "--checkpoint-every", "0", "--out", "{out}"])


def _once(args: list[str], src: str | None) -> float:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "lcpo.cli.main", *[a.replace("{out}", os.path.join(tmp, "out")) for a in args]]
        start = time.perf_counter()
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"lcpo {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return elapsed


def measure(args: list[str], repeats: int, srcs: list[str | None]) -> list[list[float]]:
    """Wall times in seconds of ``repeats`` runs of ``lcpo ARGS`` per source folder (after one unmeasured
    warm-up run each), the sources alternating run by run.

    Raises:
        RuntimeError: if the command exits with a non-zero status (its stderr in the message).
    """
    for src in srcs:
        _once(args, src)
    times: list[list[float]] = [[] for _ in srcs]
    for _ in range(repeats):
        for i, src in enumerate(srcs):
            times[i].append(_once(args, src))
    return times


def main(argv: list[str] | None = None) -> int:
    """Measure every command of :data:`COMMANDS` (and :data:`CODE_COMMANDS` with ``--code``) and print a
    Markdown table (and JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="measured runs per command (default 5)")
    parser.add_argument("--src", action="append", default=None,
                        help="a source folder to put first on PYTHONPATH (repeatable: the sources alternate; "
                             "default: the installed lcpo)")
    parser.add_argument("--code", action="store_true", help="also the commands that load code")
    parser.add_argument("--only-code", action="store_true", help="only the commands that load code")
    parser.add_argument("--json", default=None, help="also write the times to this JSON file")
    args = parser.parse_args(argv)
    srcs = args.src or [None]
    commands = (() if args.only_code else COMMANDS) + (CODE_COMMANDS if args.code or args.only_code else ())
    load = os.getloadavg()[0]
    cpu_start = os.times()
    results = {}
    for command in commands:
        times = measure(command, args.repeats, srcs)
        name = " ".join(command).replace(" {out}", " OUT")
        results[name] = [{"src": src, "median_s": statistics.median(t), "min_s": min(t), "runs": t}
                         for src, t in zip(srcs, times)]
    cpu = os.times()
    children_cpu = (cpu.children_user - cpu_start.children_user) + (cpu.children_system - cpu_start.children_system)
    print(f"{os.cpu_count()} CPUs, load average {load:.1f} at the start and {os.getloadavg()[0]:.1f} at the end, "
          f"Python {sys.version.split()[0]}, median and fastest of {args.repeats} runs per source "
          f"(CPU time of all measured processes: {children_cpu:.1f} s)\n")
    print("| command | source | median s | fastest s |\n|---|---|---|---|")
    for name, rows in results.items():
        for r in rows:
            print(f"| `lcpo {name}` | {r['src'] or 'installed lcpo'} | {r['median_s']:.2f} | {r['min_s']:.2f} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"load_average": load, "srcs": srcs, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
