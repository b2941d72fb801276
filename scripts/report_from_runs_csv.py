"""Rewrite a committed sweep report from its exported per-run table (``runs.csv``) with the current report code.

Usage::

    python scripts/report_from_runs_csv.py docs/results/paper-mini [--title "Sweep report: paper-mini"]
        [--note "why and when"]

For a report folder that kept only the per-run results (``runs.csv``: one row per run with its lifelong
return, as :func:`lcpo.experiments.store.collect` builds them), not the run folders. Every table and figure that
reads per-run values is written again by :func:`lcpo.experiments.report.write_report` (Student-t intervals,
Welch/Holm comparisons, IQM and performance profiles, ranks, the normalized-return CDF, OOD detection). What
needs the per-episode rows (the return-and-context time series) cannot be redrawn; the ``timeseries_*.png`` files
already in the folder are kept and linked under a heading that says they are the original report's. The note
(``--note``) and the command (without the note) are written at the top of ``report.md``.

Raises (as a one-line error, exit status 2): no ``runs.csv`` in the folder, or a table without the store's
columns (``run_id``, ``status``, ``env``, ``trace``, ``agent``, ``scheme``, ``lifelong_return``).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import pandas as pd

from lcpo.experiments.report import write_report

TIMESERIES_NOTE = ("These figures are the original report's: they need the per-episode rows, which were not "
                   "committed with this folder, so they were not redrawn. They show the mean over seeds with a "
                   "min-max band (no interval), so the interval method does not change them.")


def rewrite(folder: Path, title: str, note: str, command: str) -> Path:
    """Write the report of ``folder/runs.csv`` into ``folder``, keep and link its time-series figures.

    Args:
        folder: the report folder holding ``runs.csv``.
        title: heading of ``report.md``.
        note: a paragraph placed under the heading (why and when it was regenerated).
        command: the command line, quoted in the note.

    Returns:
        The path of ``report.md``.

    Raises:
        FileNotFoundError: no ``runs.csv`` in ``folder``.
        ValueError: the table lacks the store's columns (:func:`lcpo.experiments.report.write_report`).
    """
    table = folder / "runs.csv"
    if not table.is_file():
        raise FileNotFoundError(f"{table}: no such file (the folder's exported per-run table)")
    runs = pd.read_csv(table)
    # before write_report (it draws none without episodes): the figures, in the order the old report links them
    old = (folder / "report.md").read_text() if (folder / "report.md").is_file() else ""
    figures = sorted(folder.glob("timeseries_*.png"), key=lambda p: (old.find(f"({p.name})") % (len(old) + 1), p.name))
    path = write_report(runs, pd.DataFrame(), folder, title=title)
    lines = path.read_text().split("\n")
    lines[1:1] = ["", f"{note} Command: `{command}`."]
    if figures:
        lines += ["## Return and context over time (paper Figure 9)", "", TIMESERIES_NOTE, ""]
        lines += [f"![{p.stem}]({p.name})\n" for p in figures]
    path.write_text("\n".join(lines).rstrip("\n") + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="report folder holding runs.csv (written in place)")
    parser.add_argument("--title", default=None, help="report heading (default: 'Sweep report: FOLDER name')")
    parser.add_argument("--note", default="Regenerated from runs.csv with the current report code.",
                        help="paragraph under the heading")
    args = parser.parse_args(argv)
    title = args.title or f"Sweep report: {args.folder.name}"
    command = shlex.join(["python", "scripts/report_from_runs_csv.py", str(args.folder), "--title", title])
    try:
        path = rewrite(args.folder, title, args.note, command)
    except (FileNotFoundError, ValueError) as exc:
        print(f"report_from_runs_csv: error: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
