"""Entry point of the ``lcpo`` command."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

__all__ = ["build_parser", "main", "version_line"]


def version_line() -> str:
    """``lcpo --version``'s line: the package version and the code it runs, as recorded in every run's
    ``summary.json`` (:func:`lcpo.persistence.provenance.code_provenance`): ``lcpo 0.1.0 (commit 0123456+dirty)``,
    or ``(commit unknown: no git work tree)`` for an installed copy."""
    import lcpo
    from lcpo.persistence.provenance import code_label, code_provenance

    code = code_provenance()
    label = code_label(code)
    why = "" if code.get("commit") else f": {code.get('source')}"
    return f"lcpo {lcpo.__version__} (commit {label}{why})"


class _VersionAction(argparse.Action):
    """``--version``: print :func:`version_line` (one git call, made only when asked) and exit 0."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    """The full ``lcpo`` argument parser."""
    from lcpo.cli import info, run, traces
    from lcpo.cli.argtypes import LcpoParser
    from lcpo.cli.run import DEFAULT_STEPS

    parser = LcpoParser(
        prog="lcpo", description="Online RL in non-stationary, context-driven environments (LCPO and baselines). "
                                 f"A bare `lcpo` starts the default run, `lcpo run`: LCPO on the windy Pendulum "
                                 f"over the bundled real wind trace for {DEFAULT_STEPS:,} steps (about a minute on "
                                 "one core: 55 s measured, README).",
        epilog="Help and list commands import no learning code and answer at once; "
               "`lcpo COMMAND --help` for each command.")
    parser.add_argument("--version", action=_VersionAction,
                        help="print the version and the git commit of the code, then exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    parser.commands = sub.choices  # name -> the command's parser
    run.add_parser(sub)
    run.add_resume_parser(sub)
    traces.add_parser(sub)
    info.add_parsers(sub)
    for name in ("sweep", "report", "figure", "forgetting", "serve"):
        try:
            module = __import__(f"lcpo.cli.{name}", fromlist=["add_parser"])
        except ImportError:
            continue
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``lcpo`` command; with no command, runs the bundled default (``lcpo run``).

    Returns:
        0 on success, 2 on bad input or a file that cannot be written (the error is printed as one line naming
        the value or the path, no traceback; an error raised in the user's own code, e.g. their environment,
        keeps its traceback), 130 when interrupted (Ctrl-C); a sweep stopped by a signal: 128 + the signal's
        number (:mod:`lcpo.cli.sweep`).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv:
        argv = ["run"]
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the command's own parser, so that the hint points to its --help
        command = parser.commands.get(getattr(args, "command", None), parser)
        command.error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    from lcpo.persistence.runlock import RunFolderBusy

    # the prefix argparse gives a command's own errors (``lcpo sweep: error: ...``), so every error of a command
    # reads the same whichever layer reports it
    prefix = f"lcpo {args.command}" if getattr(args, "command", None) else "lcpo"
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # the reader of our output went away (`lcpo sweep ... --dry-run | head`): stop quietly, as Unix tools do
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        hint = _resume_hint(args)
        print(f"{prefix}: interrupted" + (f"; {hint}" if hint else ""), file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, TypeError, RunFolderBusy) as exc:
        if _raised_in_user_code(exc):
            raise  # a bug in the user's own environment: the traceback shows their file and line
        print(f"{prefix}: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError as exc:
        # an array larger than the machine (a --trace-length or --length of 10**13, a huge batch): one line, with
        # NumPy's or PyTorch's own figure, instead of a traceback
        if _raised_in_user_code(exc):
            raise
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else "an allocation failed"
        print(f"{prefix}: error: not enough memory: {why}; lower the length or size that asks for it", file=sys.stderr)
        return 2
    except OSError as exc:
        # a file that could not be read or written after the up-front checks (lcpo.persistence.outputs): a
        # disk that filled, a folder removed meanwhile; one line naming the file
        if _raised_in_user_code(exc) or exc.filename is None:
            raise
        print(f"{prefix}: error: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2


def _resume_hint(args) -> str:
    """The interrupted command's way back (one clause naming its own folder and command): ``lcpo run`` and
    ``lcpo resume`` keep each run's last periodic checkpoint, a sweep checkpoints its running runs where they stood;
    ``""`` for the other commands."""
    command = getattr(args, "command", None)
    out = getattr(args, "out", None)
    if command == "sweep":
        return "the same `lcpo sweep` command continues: finished runs are skipped, the others resume"
    if command in ("run", "resume"):
        where = getattr(args, "folder", None) or out or "runs"
        return (f"each run keeps its last checkpoint (up to --checkpoint-every steps back): `lcpo resume {where}` "
                f"continues from there")
    return ""


def _raised_in_user_code(exc: BaseException) -> bool:
    """True if the traceback of ``exc`` passes through a file outside lcpo, the standard library and the
    installed packages: the user's own code (e.g. the module of ``--env my_module:MyEnv-v0``), whose bugs must
    show their traceback rather than a one-line error without file or line."""
    import sysconfig
    from pathlib import Path

    import lcpo

    library = [Path(lcpo.__file__).resolve().parent]
    library += [Path(p).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib")
                if (p := sysconfig.get_paths().get(key))]
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not name.startswith("<"):
            path = Path(name).resolve()
            if not any(path.is_relative_to(root) for root in library):
                return True
        tb = tb.tb_next
    return False


if __name__ == "__main__":
    raise SystemExit(main())
