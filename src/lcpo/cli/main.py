"""Entry point of the ``lcpo`` command."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The full ``lcpo`` argument parser."""
    from lcpo.cli import info, run, traces

    from lcpo.cli.run import DEFAULT_STEPS

    parser = argparse.ArgumentParser(
        prog="lcpo", description="Online RL in non-stationary, context-driven environments (LCPO and baselines). "
                                 f"A bare `lcpo` starts the default run, `lcpo run`: LCPO on the windy Pendulum "
                                 f"over the bundled real wind trace for {DEFAULT_STEPS:,} steps (about 2 minutes "
                                 "on 2 busy cores).",
        epilog="Help and list commands import no learning code and answer at once; "
               "`lcpo COMMAND --help` for each command.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run.add_parser(sub)
    traces.add_parser(sub)
    info.add_parsers(sub)
    for name in ("sweep", "report", "figure"):
        try:
            module = __import__(f"lcpo.cli.{name}", fromlist=["add_parser"])
        except ImportError:
            continue
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``lcpo`` command; with no command, runs the bundled default (``lcpo run``).

    Returns:
        0 on success, 2 on bad input (the error is printed, no traceback).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv:
        argv = ["run"]
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    from lcpo.runlock import RunFolderBusy

    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, TypeError, RunFolderBusy) as exc:
        print(f"lcpo: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
