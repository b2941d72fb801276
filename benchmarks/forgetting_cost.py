"""Cost of the forgetting measure, and the effect of storing snapshots as float16 (docs/forgetting.md).

For each finished run folder given (with ``snapshots.npz`` and a final checkpoint): evaluates every snapshot on
the trace's reference contexts (:mod:`lcpo.experiments.forgetting`, default settings unless told) and prints
the seconds per snapshot x regime x episode; then evaluates the run's final actor twice, from its float32
checkpoint and from its float16 snapshot, on the same seeded episodes, and prints the difference of ``R``.

Usage::

    nice -n 15 python benchmarks/forgetting_cost.py RUN_DIR [RUN_DIR ...] [--episodes 10] [--regimes 6]
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np


def float32_twin(run: Path, tmp: Path) -> Path:
    """A copy of ``run``'s config with a one-snapshot ``snapshots.npz`` holding the final checkpoint's
    acting network in float32."""
    from lcpo.experiments.snapshots import load_run_snapshots
    from lcpo.persistence.atomic import atomic_write_bytes
    from lcpo.persistence.checkpoint import RunCheckpoints

    snaps = load_run_snapshots(run)
    step, state = RunCheckpoints(run / "checkpoint").load()
    if step != int(snaps.steps[-1]):
        raise SystemExit(f"{run}: final checkpoint at {step}, last snapshot at {snaps.steps[-1]}")
    sd = state["agent"]
    for part in snaps.module.split("."):
        sd = sd[part]
    twin = tmp / run.name
    twin.mkdir()
    shutil.copy(run / "config.json", twin / "config.json")
    buf = io.BytesIO()
    np.savez(buf, steps=snaps.steps[-1:], every=np.int64(snaps.every), module=np.str_(snaps.module),
             rule=np.str_(snaps.rule), **{f"p.{k}": v.detach().numpy()[None].astype(np.float32) for k, v in sd.items()})
    atomic_write_bytes(twin / "snapshots.npz", buf.getvalue())
    return twin


def main(argv=None) -> int:
    from lcpo.experiments.forgetting import evaluate_snapshots, reference_contexts, run_trace, _run_config

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--regimes", type=int, default=6)
    args = p.parse_args(argv)
    print("| run | snapshots x regimes x episodes | seconds | ms per snapshot x regime x episode | "
          "float16 - float32 final R, mean over regimes (max abs per regime) |\n|---|---|---|---|---|")
    for run in args.runs:
        refs = reference_contexts(run_trace(_run_config(run)), regimes=args.regimes)
        res = evaluate_snapshots(run, refs, episodes=args.episodes)
        n = res["R_episodes"].size
        with tempfile.TemporaryDirectory() as tmp:
            twin = float32_twin(run, Path(tmp))
            r32 = evaluate_snapshots(twin, refs, episodes=args.episodes)["R"][-1]
        d = res["R"][-1] - r32
        print(f"| {run.name} | {res['R_episodes'].shape[0]} x {res['R_episodes'].shape[1]} x "
              f"{res['R_episodes'].shape[2]} | {res['seconds']:.1f} | {1000 * res['seconds'] / n:.2f} | "
              f"{d.mean():+.2f} ({np.abs(d).max():.2f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
