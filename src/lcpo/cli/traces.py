"""``lcpo traces``: list, generate and plot context traces.

Subcommands::

    lcpo traces list
    lcpo traces make NAME --length N [--seed S] --out FILE.npy|FILE.csv
    lcpo traces plot NAME_OR_FILE [NAME_OR_FILE ...] --out PNG [--length N] [--seed S]

``python -m lcpo.cli.traces ...`` runs the same commands without the ``lcpo`` entry point.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lcpo.contexts import DEFAULT_LENGTH, TRACE_NAMES, ContextTrace, TraceError, resolve_trace, save_trace
from lcpo.cli.argtypes import nonneg_int, positive_int

__all__ = ["add_parser", "main", "plot_traces", "MAX_PLOT_POINTS"]

MAX_PLOT_POINTS = 5_000
"""Long traces are plotted as per-bin min/max envelopes over at most this many bins per axis."""


def _cmd_list(args: argparse.Namespace) -> int:
    width = max(len(name) for name in TRACE_NAMES)
    for name, description in TRACE_NAMES.items():
        print(f"{name:<{width}}  {description}")
    return 0


def _cmd_make(args: argparse.Namespace) -> int:
    trace = resolve_trace(args.name, length=args.length, seed=args.seed)
    path = save_trace(trace, args.out)
    print(f"wrote {path} ({len(trace)} x {trace.dim}, name {trace.name!r}) and {path.name}.json")
    return 0


def _envelope(values: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-bin (step, min, max) of a ``(T,)`` series cut into ``bins`` contiguous bins."""
    edges = np.linspace(0, values.size, bins + 1).astype(np.int64)
    starts = edges[:-1]
    return starts, np.minimum.reduceat(values, starts), np.maximum.reduceat(values, starts)


def plot_traces(traces: Sequence[ContextTrace], out: str | Path, max_points: int = MAX_PLOT_POINTS) -> Path:
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

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not traces:
        raise TraceError("nothing to plot: no traces given")
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
    traces = [resolve_trace(spec, length=args.length, seed=args.seed) for spec in args.traces]
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
    parser = subparsers.add_parser("traces", help="list, generate and plot context traces",
                                   description="List, generate and plot context traces (paper Figure 7).")
    sub = parser.add_subparsers(dest="traces_command", required=True, metavar="{list,make,plot}")

    p_list = sub.add_parser("list", help="registered trace names and descriptions")
    p_list.set_defaults(func=_cmd_list)

    p_make = sub.add_parser("make", help="generate a trace and save it as .npy or .csv (+ .json metadata)")
    p_make.add_argument("name", help="registered trace name (see `traces list`) or a trace file")
    p_make.add_argument("--length", type=positive_int, default=None,
                        help=f"number of steps (default: the trace's own; {DEFAULT_LENGTH} for synthetic traces)")
    p_make.add_argument("--seed", type=nonneg_int, default=0, help="generator seed (default: 0)")
    p_make.add_argument("--out", type=Path, required=True, help="output file ending in .npy or .csv")
    p_make.set_defaults(func=_cmd_make)

    p_plot = sub.add_parser("plot", help="plot traces (one panel each, one line per axis) into a PNG")
    p_plot.add_argument("traces", nargs="+", metavar="NAME_OR_FILE", help="trace names or .npy/.csv files")
    p_plot.add_argument("--out", type=Path, required=True, help="output PNG")
    p_plot.add_argument("--length", type=positive_int, default=None, help="number of steps to generate")
    p_plot.add_argument("--seed", type=nonneg_int, default=0, help="generator seed (default: 0)")
    p_plot.set_defaults(func=_cmd_plot)
    return parser


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
    try:
        return int(args.func(args))
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
