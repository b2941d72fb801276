"""``lcpo report RUNS_DIR --out DIR``: the paper's tables and figures from a sweep folder."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["add_parser", "build_parser", "main", "run"]

_DESCRIPTION = """Write report.md, CSV tables (mean lifelong return with Student-t confidence intervals across
seeds, Welch's tests of LCPO against each baseline with Holm's correction, ranks, normalized returns, IQM and
probability of improvement across traces, ablations) and PNG figures (normalized-return CDF, ablations, return and
context over time) for a sweep folder written by `lcpo sweep`, or for the --out folder of `lcpo run`
(its AGENT-sSEED/ run folders), e.g. `lcpo run --agent lcpo a2c --seed 0 1 2 --out runs/x && lcpo report runs/x`."""


def _configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("runs_dir", help="sweep folder (the --out of `lcpo sweep`) or the --out folder of `lcpo run`")
    parser.add_argument("--out", default=None, help="report folder (default: RUNS_DIR/report)")
    parser.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed of the stratified bootstraps across traces (default 0)")
    parser.add_argument("--title", default=None, help="report heading")
    parser.add_argument("--allow-mixed-code", action="store_true",
                        help="pool the seeds of a cell even when they ran on different git commits (summary.json "
                             "`code`); the report says so. Without it such a cell is an error")
    parser.add_argument("--forgetting", action="store_true",
                        help="add the forgetting section (frozen snapshots re-evaluated on reference contexts: "
                             "about 45 s per run the first time, then cached; docs/forgetting.md)")
    parser.set_defaults(func=run)
    return parser


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``report`` command to an ``argparse`` subparsers object; returns its parser."""
    return _configure(subparsers.add_parser("report", help="tables and figures from a sweep folder",
                                            description=_DESCRIPTION))


def build_parser() -> argparse.ArgumentParser:
    """A standalone parser (``python -m lcpo.cli.report``)."""
    return _configure(argparse.ArgumentParser(prog="lcpo report", description=_DESCRIPTION))


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``report`` command; returns the exit status (2 for a missing or bad sweep folder)."""
    from pathlib import Path

    from lcpo.experiments.report import report

    if not 0.0 < args.confidence < 1.0:
        print(f"lcpo report: error: --confidence must be in (0, 1), got {args.confidence}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path(args.runs_dir) / "report"
    try:
        path = report(args.runs_dir, out, confidence=args.confidence, seed=args.seed, title=args.title,
                      allow_mixed_code=args.allow_mixed_code, forgetting=args.forgetting)
    except (FileNotFoundError, ValueError) as exc:
        print(f"lcpo report: error: {exc}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``python -m lcpo.cli.report RUNS_DIR --out DIR``."""
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
