"""Resident memory of a run's episode rows: the growing array's spare capacity written (NaN) or left unwritten.

:class:`lcpo.online.episodes.EpisodeRows` doubles its float64 array when full. Until 2026-12-05 (session 23) the
new array was filled with NaN, which writes every page of it, so the doubling's unused half was resident too; now
it is ``np.empty`` (rows past the count are never read, and each append writes its whole row), so the operating
system maps pages only as rows reach them.

Side by side, each measurement in a fresh Python process: append ``n`` rows of 6 values (windy InvertedPendulum's
width: 4 columns and 2 context means; its 20M-step study runs end about 8M episodes per seed) one at a time, as the
loop does, then report the process's resident memory growth (``VmRSS`` after minus before), its peak (``VmHWM``
growth), the array's capacity and the append time. Modes:

* **NaN fill** (before): the module's ``np.empty`` replaced, in that process, by a NaN fill, as the code was;
* **unwritten** (now): the library as it is.

Usage::

    python benchmarks/episode_rows_memory.py [--sizes 1100000 4300000 8000000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time, types
import numpy as np
import lcpo.online.episodes as episodes

mode, n = sys.argv[1], int(sys.argv[2])
if mode == "NaN fill":
    proxy = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    proxy.empty = lambda shape: np.full(shape, np.nan)
    episodes.np = proxy

def status(key):
    return int(open("/proc/self/status").read().split(key + ":")[1].split()[0]) / 1024

rows = episodes.EpisodeRows()
rows.append((0, 0, 0.0, 1, 0.0, 0.0))
rss0, hwm0 = status("VmRSS"), status("VmHWM")
t0 = time.perf_counter()
for i in range(1, n):
    rows.append((i, 2 * i, 1.0 + (i % 7) / 10, 2, -0.75, 0.25))
wall = time.perf_counter() - t0
print(json.dumps({"mode": mode, "rows": n, "capacity": int(rows._a.shape[0]), "rss_growth_mb": status("VmRSS") - rss0,
                  "peak_growth_mb": status("VmHWM") - hwm0, "append_s": wall,
                  "data_mb": n * 6 * 8 / 2**20, "checksum": float(np.asarray(rows)[:, 2].sum())}))
"""


def run(mode: str, n: int) -> dict:
    """One measurement in a fresh interpreter; returns its JSON line as a dict."""
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(n)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"episode_rows_memory: {mode} at {n:,} rows failed: "
                 f"{(out.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1_100_000, 4_300_000, 8_000_000])
    p.add_argument("--json", default=None)
    args = p.parse_args()
    started = time.time()
    rows = [run(mode, n) for n in args.sizes for mode in ("NaN fill", "unwritten")]
    print("| rows | capacity | rows' bytes | spare capacity | resident growth | peak growth | append time |")
    print("|---:|---:|---:|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['rows']:,} | {r['capacity']:,} | {r['data_mb']:,.0f} MB | {r['mode']} | "
              f"{r['rss_growth_mb']:,.0f} MB | {r['peak_growth_mb']:,.0f} MB | {r['append_s']:.1f} s |")
    same = all(a["checksum"] == b["checksum"] for a, b in zip(rows[::2], rows[1::2]))
    print(f"same rows in both modes: {same}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "same": same, "python": platform.python_version(), "started_unix": started},
                      f, indent=1)
    if not same:
        sys.exit("the two modes stored different rows")


if __name__ == "__main__":
    main()
