"""``lcpo figure``: reproduce the paper's figures.

``lcpo figure gridworld --out DIR [--scale F] [--seeds N] [--workers W]`` runs A2C, tabular A2C and LCPO on the
trap grid world schedule (paper Figure 1; :mod:`lcpo.experiments.gridworld`) and writes to ``DIR``:

* ``gridworld.png``: the three panels (episodic return; the two total-variation distances; trap periods shaded);
* ``gridworld.csv``: one row per agent, seed and epoch (:data:`lcpo.experiments.gridworld.COLUMNS`);
* ``acceptance.json``: the measured acceptance numbers of issue 4 and whether each criterion holds.

Whether the criteria hold is printed, one line each; with ``--check`` the command exits 1 when any does not (a
shortened schedule, ``--scale`` below about 0.05, need not reproduce the figure, so that is not an error by
default). The CSV and JSON are written atomically.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from lcpo.cli.argtypes import positive_int

__all__ = ["add_parser", "run_gridworld"]


def _scale(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--scale must be a number in (0, 1], got {text!r}") from None
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"--scale must be a number in (0, 1], got {text!r}")
    return v


def add_parser(subparsers) -> None:
    """Add ``lcpo figure`` (with the ``gridworld`` figure) to the ``lcpo`` command's subparsers (imports nothing
    heavy: the experiment module is imported when the figure runs)."""
    p = subparsers.add_parser("figure", help="reproduce a figure of the paper",
                              description="Reproduce a figure of the paper (PNG + the numbers as CSV).")
    sub = p.add_subparsers(dest="figure", metavar="FIGURE")
    g = sub.add_parser("gridworld", help="paper Figure 1: forgetting in the trap grid world",
                       description="Run A2C, tabular A2C and LCPO on the trap grid world (no trap 4K epochs, trap "
                                   "12K, no trap 4K; 200 steps per epoch, scaled by --scale) and write "
                                   "gridworld.png, gridworld.csv and acceptance.json to --out.")
    g.add_argument("--out", required=True, type=Path, help="output folder (created if missing)")
    g.add_argument("--scale", type=_scale, default=1.0,
                   help="multiply the three phase lengths by F in (0, 1] (default 1: the paper's 20K epochs)")
    g.add_argument("--seeds", type=positive_int, default=4, help="seeds per agent (default 4)")
    g.add_argument("--workers", type=positive_int, default=None,
                   help="worker processes (default: available CPUs, at most 4)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("--check", action="store_true",
                   help="exit with status 1 when an acceptance criterion does not hold (default: report it, exit 0)")
    g.set_defaults(func=run_gridworld)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def run_gridworld(args: argparse.Namespace) -> int:
    """Run the grid world experiment and write the figure, the CSV and the acceptance numbers.

    Returns:
        0; 1 with ``--check`` when a criterion does not hold (errors raise ValueError, reported by
        :func:`lcpo.cli.main.main`).
    """
    from lcpo.experiments.gridworld import acceptance, default_workers, plot_gridworld, run_experiment

    from lcpo.persistence.atomic import atomic_write_text
    from lcpo.persistence.outputs import check_output_dir

    out = check_output_dir(args.out, create=True)  # before the runs: one line naming the path
    progress = None
    if not args.no_progress:
        from tqdm import tqdm

        def progress(it, total):
            return tqdm(it, total=total, desc="grid world runs", unit="run")

    workers = args.workers if args.workers is not None else default_workers()
    df = run_experiment(scale=args.scale, seeds=args.seeds, workers=workers, progress=progress)
    atomic_write_text(out / "gridworld.csv", df.to_csv(index=False))
    png = plot_gridworld(df, out / "gridworld.png")
    acc = acceptance(df)
    report = {"scale": args.scale, "seeds": args.seeds, "numbers": dataclasses.asdict(acc), "checks": acc.checks()}
    atomic_write_text(out / "acceptance.json", json.dumps(report, indent=2) + "\n")
    print(f"wrote {png}, {out / 'gridworld.csv'} and {out / 'acceptance.json'}")
    for name, ok in report["checks"].items():
        print(f"  {'holds        ' if ok else 'does not hold'} {name}")
    failed = [name for name, ok in report["checks"].items() if not ok]
    if failed:
        print(f"{len(failed)} of {len(report['checks'])} acceptance criteria do not hold at --scale {args.scale} "
              f"with {args.seeds} seed(s) (docs/gridworld.md: --scale 0.05 and 4 seeds reproduce the figure)"
              + ("" if args.check else "; --check makes this exit with status 1"))
        return 1 if args.check else 0
    return 0
