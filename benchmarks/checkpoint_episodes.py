"""Cost of a run checkpoint's episode rows, by episode count: rows in the checkpoint against an append-only file.

Side by side, in one process, for a run that has ended ``n`` episodes (rows of windy InvertedPendulum's width: 4
values and 2 context means) and ends ``--new`` more before each checkpoint:

* **in the checkpoint** (lcpo before 2026-12-05): the loop state holds every row, saved as JSON by
  :func:`lcpo.persistence.checkpoint.save_state`, and ``episodes.csv`` is rewritten whole
  (:func:`lcpo.persistence.atomic.atomic_write_bytes`), at every checkpoint; rows are a list of tuples in memory.
* **append-only** (now): the loop state counts the rows; :class:`lcpo.persistence.episode_file.EpisodeFile`
  appends the new rows and records where the file ends; rows are an :class:`lcpo.online.episodes.EpisodeRows`.

Reported per ``n``: the checkpoint's write time and its bytes on disk (checkpoint files plus ``episodes.csv``),
the resume's read time (loading the rows back), and the memory the rows take (``tracemalloc``). Both layouts
write through the same library functions (fsync included), so the difference is the layout alone.

Usage::

    python benchmarks/checkpoint_episodes.py [--sizes 100000 1000000 5000000] [--new 2500] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from lcpo.online.episodes import EpisodeRows
from lcpo.persistence.atomic import atomic_write_bytes
from lcpo.persistence.checkpoint import load_state, save_state
from lcpo.persistence.episode_file import EpisodeFile


def _rows(n: int, seed: int = 0) -> list[tuple]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 6, n)
    ends = np.cumsum(lengths)
    ret = rng.normal(3.0, 1.0, n)
    ctx = rng.normal(0.0, 1.0, (n, 2))
    return [(i, int(e), float(r), int(ln), float(a), float(b))
            for i, (e, r, ln, (a, b)) in enumerate(zip(ends.tolist(), ret.tolist(), lengths.tolist(), ctx.tolist()))]


def _memory(build) -> tuple[object, int]:
    gc.collect()
    tracemalloc.start()
    obj = build()
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return obj, size


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def old_layout(rows: list[tuple], new: list[tuple], folder: Path) -> dict:
    """Rows in the checkpoint's JSON and episodes.csv rewritten whole (one checkpoint after ``new`` more rows)."""
    rows = rows + new
    header = ",".join(EpisodeFile(folder / "x").header(6)).encode() + b"\n"
    t = time.perf_counter()
    save_state(folder / "state", {"loop": {"steps": rows[-1][1], "episodes": [list(r) for r in rows]}},
               generation=1)
    atomic_write_bytes(folder / "episodes.csv", header + EpisodeFile._lines(rows))
    write_s = time.perf_counter() - t
    size = _bytes(folder)
    t = time.perf_counter()
    back = [tuple(r) for r in load_state(folder / "state", generation=1)["loop"]["episodes"]]
    read_s = time.perf_counter() - t
    assert back == rows
    return {"write_s": write_s, "bytes": size, "read_s": read_s}


def new_layout(rows: EpisodeRows, new: list[tuple], folder: Path) -> dict:
    """The rows so far already in episodes.csv (earlier checkpoints); this checkpoint appends ``new``."""
    f = EpisodeFile(folder / "episodes.csv", ("wind_x", "wind_y"))
    f.write(rows)  # the earlier checkpoints' appends (untimed)
    rows.extend(new)
    t = time.perf_counter()
    f.write(rows)
    save_state(folder / "state", {"loop": {"steps": rows[-1][1], "episode_count": len(rows)},
                                  "log": {"episodes_file": f.marker()}}, generation=1)
    write_s = time.perf_counter() - t
    size = _bytes(folder)
    t = time.perf_counter()
    state = load_state(folder / "state", generation=1)
    back = EpisodeFile(folder / "episodes.csv").restore(state["log"]["episodes_file"])
    read_s = time.perf_counter() - t
    assert back == rows
    return {"write_s": write_s, "bytes": size, "read_s": read_s}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 5_000_000])
    p.add_argument("--new", type=int, default=2500, help="rows ended since the previous checkpoint")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    print(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}; rows of 6 values, "
          f"{args.new:,} new rows per checkpoint\n")
    print("| episodes | layout | checkpoint write | bytes on disk | resume read | rows in memory |")
    print("|---:|---|---:|---:|---:|---:|")
    out = []
    for n in args.sizes:
        base, old_mem = _memory(lambda: _rows(n))
        new = _rows(args.new, seed=1)
        new = [(n + i, base[-1][1] + r[1], *r[2:]) for i, r in enumerate(new)]
        cols, new_mem = _memory(lambda: EpisodeRows(base))
        for name, fn, rows, mem in (("in the checkpoint", old_layout, base, old_mem),
                                    ("append-only", new_layout, cols, new_mem)):
            folder = Path(tempfile.mkdtemp(prefix="ckpt-bench-", dir="."))
            try:
                r = fn(rows, new, folder)
            finally:
                shutil.rmtree(folder)
            r.update(episodes=n, layout=name, memory_bytes=mem)
            out.append(r)
            print(f"| {n:,} | {name} | {r['write_s']:.3f} s | {r['bytes'] / 1e6:,.1f} MB | {r['read_s']:.2f} s | "
                  f"{mem / 1e6:,.1f} MB |")
        del base, cols
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
