"""Start-up latency of the ``lcpo`` help and list commands (issue 14: target under 1 s on 2 cores).

Each command runs as a fresh process (``python -m lcpo.cli.main ARGS``, the code the ``lcpo`` console script
runs), ``--repeats`` times after one warm-up run that fills the OS file cache and Python's bytecode cache; the
table gives the median and the fastest wall time, and the machine's load average when the measurement started.

    python benchmarks/cli_latency.py                      # this checkout
    python benchmarks/cli_latency.py --src /tmp/old/src   # another checkout's sources (e.g. `git archive`
                                                          # of an older commit), for before/after numbers
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

#: The commands measured (argument lists after ``lcpo``).
COMMANDS = (["--help"], ["run", "--help"], ["agents", "list"], ["envs", "list"], ["traces", "list"])


def measure(args: list[str], repeats: int, src: str | None) -> list[float]:
    """Wall times in seconds of ``repeats`` runs of ``lcpo ARGS`` (after one unmeasured warm-up run).

    Raises:
        RuntimeError: if the command exits with a non-zero status (its stderr in the message).
    """
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "lcpo.cli.main", *args]
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"lcpo {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
        if i:
            times.append(elapsed)
    return times


def main(argv: list[str] | None = None) -> int:
    """Measure every command of :data:`COMMANDS` and print a Markdown table (and JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="measured runs per command (default 5)")
    parser.add_argument("--src", default=None, help="a source folder to put first on PYTHONPATH (default: the "
                                                    "installed lcpo)")
    parser.add_argument("--json", default=None, help="also write the times to this JSON file")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    results = {}
    for command in COMMANDS:
        times = measure(command, args.repeats, args.src)
        results[" ".join(command)] = {"median_s": statistics.median(times), "min_s": min(times), "runs": times}
    print(f"{args.src or 'installed lcpo'}: {os.cpu_count()} CPUs, load average {load:.1f} at the start, "
          f"Python {sys.version.split()[0]}, median and fastest of {args.repeats} runs\n")
    print("| command | median s | fastest s |\n|---|---|---|")
    for name, r in results.items():
        print(f"| `lcpo {name}` | {r['median_s']:.2f} | {r['min_s']:.2f} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"load_average": load, "src": args.src, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
