"""``lcpo traces``: list, generate, import and plot context traces.

Subcommands::

    lcpo traces list
    lcpo traces make NAME --length N [--seed S] --out FILE.npy|FILE.csv
    lcpo traces import ndbc FILE --out FILE.npy|FILE.csv [--step-seconds S | --length N] [--scale auto|X]
    lcpo traces import csv FILE --out FILE.npy|FILE.csv [--time COL] [--columns A,B] [--na-values 9999,...]
                                [--step-seconds S | --length N] [--scale auto|X]
    lcpo traces plot NAME_OR_FILE [NAME_OR_FILE ...] --out PNG [--length N] [--seed S]

``list`` reads the static tables of :mod:`lcpo.cli.catalog` (no NumPy import: it answers at once); the others
import what they need when they run. ``python -m lcpo.cli.traces ...`` runs the same commands without the
``lcpo`` entry point.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lcpo.cli.catalog import TRACE_NAMES, WORKLOADS
from lcpo.cli.argtypes import nonneg_int, positive_int

__all__ = ["add_parser", "main", "plot_traces", "MAX_PLOT_POINTS"]

MAX_PLOT_POINTS = 5_000
"""Long traces are plotted as per-bin min/max envelopes over at most this many bins per axis."""

#: ``--length`` default of the synthetic traces (:data:`lcpo.contexts.DEFAULT_LENGTH`, checked by the tests).
_DEFAULT_LENGTH = 400_000


def _cmd_list(args: argparse.Namespace) -> int:
    width = max(len(name) for name in [*TRACE_NAMES, *WORKLOADS])
    print("context traces (--trace of the windy environments and your own; or a .npy/.csv file, see "
          "`lcpo traces import`):")
    for name, description in TRACE_NAMES.items():
        print(f"  {name:<{width}}  {description}")
    print("straggler workloads (--trace of lcpo/StragglerMitigation-v0; or a .npy/.csv file of "
          "(processing ms, inter-arrival ms) rows):")
    for name, description in WORKLOADS.items():
        print(f"  {name:<{width}}  {description}")
    return 0


def _cmd_make(args: argparse.Namespace) -> int:
    from lcpo.contexts import resolve_trace, save_trace

    _check_out(args.out)
    trace = resolve_trace(args.name, length=args.length, seed=args.seed)
    _create_folder(args.out)
    path = save_trace(trace, args.out)
    print(f"wrote {path} ({len(trace)} x {trace.dim}, name {trace.name!r}) and {path}.json")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from lcpo.contexts import save_trace
    from lcpo.contexts.importers import import_csv, import_ndbc

    if args.step_seconds is not None and args.length is not None:
        raise _trace_error("give --step-seconds or --length, not both")
    _check_out(args.out)
    out = Path(args.out).resolve()
    if Path(args.file).resolve() in (out, out.with_name(out.name + ".json")):
        raise _trace_error(f"--out {args.out} would overwrite the source file {args.file}; choose another name")
    if args.format == "ndbc":
        trace, report = import_ndbc(args.file, step_seconds=args.step_seconds, length=args.length,
                                    scale=args.scale, name=args.name)
    else:
        columns = None if args.columns is None else [c.strip() for c in args.columns.split(",") if c.strip()]
        na_values = [] if args.na_values is None else [v.strip() for v in args.na_values.split(",")]
        trace, report = import_csv(args.file, time_column=args.time, columns=columns,
                                   step_seconds=args.step_seconds, length=args.length, scale=args.scale,
                                   na_values=na_values, name=args.name)
    _create_folder(args.out)
    path = save_trace(trace, args.out)
    print("\n".join(report.lines()))
    print(f"wrote {path} ({len(trace):,} x {trace.dim}, name {trace.name!r}) and {path}.json; use it with "
          f"--trace {path}")
    return 0


#: Figure formats ``traces plot`` writes (matplotlib's savefig formats; the file name must end in one).
FIGURE_SUFFIXES = (".png", ".pdf", ".svg", ".svgz", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff", ".webp")


def _check_out(out, figure: bool = False) -> None:
    """Refuse an ``--out`` file that cannot be written before any work (one line naming it; see
    :mod:`lcpo.persistence.outputs`), or whose extension is not one the command writes (a trace: ``.npy`` or
    ``.csv``; a figure: :data:`FIGURE_SUFFIXES`). Missing folders are accepted (created by :func:`_create_folder`
    once the input is known good, as ``lcpo run --out`` creates its folder)."""
    from lcpo.persistence.outputs import check_output_file

    path = Path(out)
    if figure:
        if path.suffix.lower() not in FIGURE_SUFFIXES:
            raise _trace_error(f"--out {out}: a figure file name ending in one of {', '.join(FIGURE_SUFFIXES)}, "
                               f"got {path.suffix or 'no extension'!r}")
    else:
        from lcpo.contexts.io import SUFFIXES

        if path.suffix.lower() not in SUFFIXES:
            raise _trace_error(f"--out {out}: unknown trace file extension {path.suffix!r}; expected one of "
                               f"{SUFFIXES}")
    check_output_file(out, missing_parent_ok=True)


def _create_folder(out) -> None:
    """Create the missing folders of the ``--out`` file :func:`_check_out` accepted, just before it is written."""
    from lcpo.persistence.outputs import check_output_file

    check_output_file(out, create_parent=True)


def _trace_error(message: str):
    from lcpo.contexts import TraceError

    return TraceError(message)


def _envelope(values, bins: int):
    """Per-bin (step, min, max) of a ``(T,)`` series cut into ``bins`` contiguous bins."""
    import numpy as np

    edges = np.linspace(0, values.size, bins + 1).astype(np.int64)
    starts = edges[:-1]
    return starts, np.minimum.reduceat(values, starts), np.maximum.reduceat(values, starts)


def plot_traces(traces: Sequence, out: str | Path, max_points: int = MAX_PLOT_POINTS) -> Path:
    """Plot traces, one panel per trace and one line per axis against the step, into a PNG.

    Traces longer than ``max_points`` are drawn as per-bin min/max bands (plus the bin mean as the line), so
    a 20M-step trace plots in about a second and keeps its extremes visible.

    Args:
        traces: one or more traces.
        out: PNG path (its folder must exist).
        max_points: most points drawn per axis.

    Returns:
        The path written.

    Raises:
        TraceError: if ``traces`` is empty.
    """
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not traces:
        raise _trace_error("nothing to plot: no traces given")
    fig, axes = plt.subplots(len(traces), 1, figsize=(10, 2.4 * len(traces)), squeeze=False)
    for ax, trace in zip(axes[:, 0], traces):
        columns = trace.metadata.get("columns")
        if not (isinstance(columns, list) and len(columns) == trace.dim):
            columns = [f"axis {k}" for k in range(trace.dim)]
        n = len(trace)
        for k in range(trace.dim):
            series = trace.values[:, k]
            if n > max_points:
                steps, low, high = _envelope(series, max_points)
                sums = np.add.reduceat(series, steps)
                counts = np.diff(np.append(steps, n))
                (line,) = ax.plot(steps, sums / counts, lw=0.8, label=str(columns[k]))
                ax.fill_between(steps, low, high, color=line.get_color(), alpha=0.25, lw=0)
            else:
                ax.plot(np.arange(n), series, lw=0.8, label=str(columns[k]))
        ax.set_title(f"{trace.name} ({n:,} steps)", fontsize=10)
        ax.set_ylabel(str(trace.metadata.get("units", "value")), fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("environment step")
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _cmd_plot(args: argparse.Namespace) -> int:
    from lcpo.contexts import resolve_trace

    _check_out(args.out, figure=True)
    traces = [resolve_trace(spec, length=args.length, seed=args.seed) for spec in args.traces]
    _create_folder(args.out)
    path = plot_traces(traces, args.out)
    print(f"wrote {path}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``traces`` command (with ``list``, ``make``, ``plot``) to an argparse subparsers object.

    Each subcommand sets ``func`` on the parsed namespace: ``args.func(args)`` runs it and returns the exit
    status; it raises :class:`TraceError` on bad names, lengths or files.

    Returns:
        The ``traces`` parser.
    """
    parser = subparsers.add_parser("traces", help="list, generate, import and plot context traces",
                                   description="List, generate, import and plot context traces (paper Figure 7).")
    sub = parser.add_subparsers(dest="traces_command", required=True, metavar="{list,make,import,plot}")

    p_list = sub.add_parser("list", help="registered trace names and straggler workloads, with descriptions")
    p_list.set_defaults(func=_cmd_list)

    p_make = sub.add_parser("make", help="generate a trace and save it as .npy or .csv (+ .json metadata)")
    p_make.add_argument("name", help="registered trace name (see `traces list`) or a trace file")
    p_make.add_argument("--length", type=positive_int, default=None,
                        help=f"number of steps (default: the trace's own; {_DEFAULT_LENGTH} for synthetic traces)")
    p_make.add_argument("--seed", type=nonneg_int, default=0, help="generator seed (default: 0)")
    p_make.add_argument("--out", type=Path, required=True, help="output file ending in .npy or .csv")
    p_make.set_defaults(func=_cmd_make)

    p_imp = sub.add_parser(
        "import", help="turn raw timestamped data (an NDBC buoy file, a CSV) into a trace file",
        description="Convert raw measurements into a trace, one row per environment step: parse (missing codes "
                    "dropped), convert (NDBC: u = -WSPD sin(WDIR), v = -WSPD cos(WDIR), scaled by 4 / max(|u|, "
                    "|v|): exactly as the bundled ndbc-46002), bridge gaps by linear interpolation in time, "
                    "resample onto steps; then print what was read (records, missing values, gaps, duration, "
                    "ranges) and write FILE plus FILE.json (name and metadata, the report included).")
    p_imp.add_argument("format", choices=("ndbc", "csv"),
                       help="ndbc: NOAA NDBC standard-meteorological or continuous-winds text file (WDIR, WSPD; "
                            "99/999/MM = missing); csv: a header row, a timestamp column and value columns")
    p_imp.add_argument("file", type=Path, help="the raw data file")
    p_imp.add_argument("--out", type=Path, required=True, help="output trace file ending in .npy or .csv")
    p_imp.add_argument("--step-seconds", type=_positive_float, default=None,
                       help="real time per environment step (default: 30 s for ndbc, as ndbc-46002; the "
                            "nominal sampling interval for csv)")
    p_imp.add_argument("--length", type=positive_int, default=None,
                       help="instead, resample the whole record onto this many steps")
    p_imp.add_argument("--scale", default=None,
                       help="'auto' (4 / max |value|, so the trace spans [-4, 4]) or a number to multiply by "
                            "(default: auto for ndbc, 1 for csv)")
    p_imp.add_argument("--name", default=None, help="trace name (default: the file's stem)")
    p_imp.add_argument("--time", default=None, help="csv: the timestamp column (default: the first); text "
                                                    "dates in UTC unless they say otherwise, numbers = seconds")
    p_imp.add_argument("--columns", default=None, help="csv: value columns in order, comma-separated "
                                                       "(default: all the others)")
    p_imp.add_argument("--na-values", default=None,
                       help="csv: comma-separated cell texts that mean missing, e.g. 9999,-999 (empty cells "
                            "always do)")
    p_imp.set_defaults(func=_cmd_import)

    p_plot = sub.add_parser("plot", help="plot traces (one panel each, one line per axis) into a PNG")
    p_plot.add_argument("traces", nargs="+", metavar="NAME_OR_FILE", help="trace names or .npy/.csv files")
    p_plot.add_argument("--out", type=Path, required=True, help="output PNG")
    p_plot.add_argument("--length", type=positive_int, default=None, help="number of steps to generate")
    p_plot.add_argument("--seed", type=nonneg_int, default=0, help="generator seed (default: 0)")
    p_plot.set_defaults(func=_cmd_plot)
    return parser


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``traces`` subcommands standalone (``python -m lcpo.cli.traces list``).

    Args:
        argv: arguments after the program name (default: ``sys.argv[1:]``).

    Returns:
        Exit status: 0 on success, 2 on a trace error (the message goes to stderr).
    """
    parser = argparse.ArgumentParser(prog="python -m lcpo.cli.traces")
    subparsers = parser.add_subparsers(dest="command")
    add_parser(subparsers)
    args = parser.parse_args(["traces", *(sys.argv[1:] if argv is None else argv)])
    from lcpo.contexts import TraceError
    from lcpo.persistence.outputs import OutputError

    try:
        return int(args.func(args))
    except (TraceError, OutputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
