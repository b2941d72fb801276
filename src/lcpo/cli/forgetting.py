"""``lcpo forgetting RUNS_DIR --out DIR``: forgetting as lost return of frozen snapshots on reference contexts."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lcpo.cli.argtypes import positive_int

__all__ = ["add_parser", "build_parser", "main", "run"]

_DESCRIPTION = """Evaluate every finished run's frozen actor snapshots (snapshots.npz, kept by every run) on the
context regimes of its trace (k-means of the trace with a fixed seed: the same references for every agent and
seed), K seeded episodes per snapshot and regime, giving R[t, k]; write forgetting.md with the forgetting
F_k(t) = max_{t'<=t} R[t', k] - R[t, k] (its mean over regimes), backward transfer and the final return per
agent with Student-t intervals over seeds, the CSVs, and heat maps of R[t, k] above the context trace.
Deterministic: the same runs and options give the same numbers bit for bit. See docs/forgetting.md."""


def _configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("runs_dir", help="sweep folder, the --out folder of `lcpo run`, or one run folder")
    parser.add_argument("--out", default=None, help="output folder (default: RUNS_DIR/forgetting)")
    parser.add_argument("--regimes", type=positive_int, default=6,
                        help="context regimes per trace (k-means clusters; default 6, at most 64 and the trace's rows)")
    parser.add_argument("--mode", choices=("constant", "window"), default="constant",
                        help="constant: each regime's centre held for the whole episode (default); window: the "
                             "trace replayed from the episode-long window holding most of the regime's rows")
    parser.add_argument("--episodes", type=positive_int, default=10,
                        help="episodes per snapshot and regime (default 10)")
    parser.add_argument("--episode-steps", type=positive_int, default=200,
                        help="steps per episode at most (default 200, the windy environments' time limit)")
    parser.add_argument("--seed", type=int, default=0, help="evaluation seed (resets and action noise; default 0)")
    parser.add_argument("--greedy", action="store_true",
                        help="act greedily (default: each agent's own rule: policies sample, Q-learners are greedy)")
    parser.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    parser.set_defaults(func=run)
    return parser


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``forgetting`` command to an ``argparse`` subparsers object; returns its parser."""
    return _configure(subparsers.add_parser("forgetting", help="forgetting as lost return on reference contexts",
                                            description=_DESCRIPTION))


def build_parser() -> argparse.ArgumentParser:
    """A standalone parser (``python -m lcpo.cli.forgetting``)."""
    return _configure(argparse.ArgumentParser(prog="lcpo forgetting", description=_DESCRIPTION))


def _report_run(run, seconds: float, cached: bool) -> None:
    """One stderr line per run: its evaluation time, or that it came from the cache (and what it cost then)."""
    if cached:
        print(f"{run.name}: cached ({seconds:.1f} s when evaluated)", file=sys.stderr)
    else:
        print(f"{run.name}: {seconds:.1f} s", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``forgetting`` command; returns the exit status (2 for a bad folder or option)."""
    from pathlib import Path

    if not 0.0 < args.confidence < 1.0:
        print(f"lcpo forgetting: error: --confidence must be in (0, 1), got {args.confidence}", file=sys.stderr)
        return 2
    from lcpo.experiments.forgetting import write_forgetting

    out = Path(args.out) if args.out else Path(args.runs_dir) / "forgetting"
    try:
        if not Path(args.runs_dir).exists():
            raise FileNotFoundError(f"{args.runs_dir}: no such folder")
        if not Path(args.runs_dir).is_dir():
            raise FileNotFoundError(f"{args.runs_dir}: a file, not a folder (give the sweep, `lcpo run --out` or "
                                    "run folder)")
        from lcpo.persistence.outputs import check_output_dir

        check_output_dir(out, "--out")  # before any evaluation: a one-line error for an unwritable folder
        path = write_forgetting(args.runs_dir, out, regimes=args.regimes, mode=args.mode, episodes=args.episodes,
                                episode_steps=args.episode_steps, seed=args.seed,
                                rule="greedy" if args.greedy else None, confidence=args.confidence,
                                on_run=_report_run)
    except (FileNotFoundError, ValueError) as exc:
        print(f"lcpo forgetting: error: {exc}", file=sys.stderr)
        return 2
    print(f"forgetting: {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``python -m lcpo.cli.forgetting RUNS_DIR --out DIR``."""
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
