"""Run metrics: per-episode rows, aggregated training diagnostics, optional TensorBoard, and the summary.

Metric keys are namespaced (``rollout/episode_return``, ``train/kl_anchor``, ``train/line_search_ok``,
``ood/fraction``, ``time/steps_per_s``).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

from lcpo.online.episodes import EpisodeRows
from lcpo.persistence.checkpoint import atomic_write_text
from lcpo.persistence.episode_file import EpisodeFile

__all__ = ["RunLog", "lifelong_return", "scored_episodes"]


def lifelong_return(episodes: list[tuple], warmup_steps: int = 0) -> float:
    """Mean episodic return over the run (the paper's score), dropping episodes that end within the warm-up.

    Args:
        episodes: rows ``(episode, end_step, return, length, ...)``: an :class:`lcpo.online.episodes.EpisodeRows`
            or any sequence of rows.
        warmup_steps: episodes whose end step is ``<= warmup_steps`` are excluded.

    Returns:
        The mean return, or NaN if no episode ended after the warm-up.
    """
    if isinstance(episodes, EpisodeRows):
        rets = episodes.returns[episodes.end_steps > warmup_steps]
        return float(np.mean(rets)) if rets.size else math.nan
    rets = [r[2] for r in episodes if r[1] > warmup_steps]
    return float(np.mean(rets)) if rets else math.nan


def scored_episodes(episodes: list[tuple], warmup_steps: int = 0) -> int:
    """How many episodes :func:`lifelong_return` averages: those whose end step is ``> warmup_steps``.

    Args:
        episodes: rows ``(episode, end_step, return, length, ...)`` (as :func:`lifelong_return`).
        warmup_steps: episodes whose end step is ``<= warmup_steps`` are not counted.
    """
    if isinstance(episodes, EpisodeRows):
        return int(np.count_nonzero(episodes.end_steps > warmup_steps))
    return sum(1 for r in episodes if r[1] > warmup_steps)


class RunLog:
    """Collects training diagnostics and writes ``episodes.csv`` (append-only, :class:`EpisodeFile`) and
    ``diagnostics.csv``.

    Diagnostics of each update are summed into a window of ``every`` environment steps; each closed window
    becomes one row of means (columns: ``step``, ``updates``, then the other keys seen, sorted). Each key's mean is
    over the updates that reported it (LCPO reports ``train/kl_anchor`` only on constrained updates: its column is
    the mean anchor KL of those, not diluted by the unconstrained ones); ``updates`` counts all updates. A row's ``step``
    is its window's end, except the run's last row, which is labelled with the run's last step. A run that
    never updated (a prescient agent, or a run shorter than one rollout) gets a ``diagnostics.csv`` holding
    only the header ``step,updates``.

    Args:
        out_dir: run folder.
        context_names: names of the per-episode context-mean columns (e.g. ``("wind_x", "wind_y")``).
        every: diagnostics window in environment steps.
        tensorboard: also write TensorBoard event files under ``out_dir/tb``.
        purge_step: with ``tensorboard``, a run resumed from a checkpoint taken at step ``k`` passes ``k + 1``:
            TensorBoard then discards the events at steps ``>= k + 1`` written before the resume (by the
            interrupted process), so no step appears twice (``SummaryWriter(purge_step=...)``).
    """

    def __init__(self, out_dir: str | Path, context_names=(), every: int = 10_000, tensorboard: bool = False,
                 purge_step: int | None = None):
        self.out_dir = Path(out_dir)
        self.context_names = tuple(context_names)
        self.episode_file = EpisodeFile(self.out_dir / "episodes.csv", self.context_names)
        self.every = int(every)
        self.rows: list[dict] = []
        self._sum: dict[str, float] = {}
        self._n: dict[str, int] = {}
        self._count = 0
        self._window_end = self.every
        self.totals: dict[str, float] = {}
        self.totals_n: dict[str, int] = {}
        self.updates = 0
        self._tb = None
        if tensorboard:
            self.open_tensorboard(purge_step)

    def open_tensorboard(self, purge_step: int | None = None) -> None:
        """Start writing TensorBoard event files under ``out_dir/tb`` (see ``purge_step`` in the class docstring)."""
        from torch.utils.tensorboard import SummaryWriter

        if self._tb is None:
            self._tb = SummaryWriter(str(self.out_dir / "tb"), purge_step=purge_step)

    def on_update(self, step: int, diag: dict) -> None:
        """Record one update's diagnostics at global step ``step``."""
        while step > self._window_end:
            self._close_window()
        for k, v in diag.items():
            self._sum[k] = self._sum.get(k, 0.0) + v
            self._n[k] = self._n.get(k, 0) + 1
            self.totals[k] = self.totals.get(k, 0.0) + v
            self.totals_n[k] = self.totals_n.get(k, 0) + 1
        self._count += 1
        self.updates += 1
        if self._tb is not None:
            for k, v in diag.items():
                self._tb.add_scalar(k, v, step)

    def on_episode(self, row: tuple) -> None:
        """Record a finished episode (only TensorBoard needs it; rows live in the loop)."""
        if self._tb is not None:
            self._tb.add_scalar("rollout/episode_return", row[2], row[1])
            for name, v in zip(self.context_names, row[4:]):
                self._tb.add_scalar(f"context/{name}", v, row[1])

    def _close_window(self, last_step: int | None = None) -> None:
        if self._count:
            end = self._window_end if last_step is None else min(self._window_end, int(last_step))
            row = {"step": end, "updates": self._count}
            row.update({k: v / self._n.get(k, self._count) for k, v in self._sum.items()})
            self.rows.append(row)
        self._sum, self._n, self._count = {}, {}, 0
        self._window_end += self.every

    def mean(self, key: str) -> float:
        """Mean of a diagnostic over the updates that reported it (0 when never reported)."""
        n = self.totals_n.get(key, self.updates if key in self.totals else 0)
        return self.totals.get(key, 0.0) / n if n else 0.0

    def write(self, episodes: EpisodeRows, final: bool = False, last_step: int | None = None) -> None:
        """Bring ``episodes.csv`` up to ``episodes`` (appending the new rows and fsyncing: :meth:`EpisodeFile.write`)
        and write ``diagnostics.csv`` atomically.

        Args:
            episodes: the loop's episode rows.
            final: flush the open window into a last row (at the end of the run).
            last_step: the run's last step, the label of that last row (default: the window's end).

        Raises:
            OSError: a file cannot be written.
        """
        if final:
            self._close_window(last_step)
        self.episode_file.write(episodes if isinstance(episodes, EpisodeRows) else EpisodeRows(episodes))
        # stable column order (a resumed run's rows come back from JSON with sorted keys)
        seen = {k for r in self.rows for k in r}
        keys = ["step", "updates"] + sorted(seen - {"step", "updates"})  # header even without rows
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
        w.writeheader()
        w.writerows(self.rows)
        atomic_write_text(self.out_dir / "diagnostics.csv", buf.getvalue())
        if self._tb is not None:
            self._tb.flush()

    def close(self) -> None:
        """Close TensorBoard files."""
        if self._tb is not None:
            self._tb.close()

    def state_dict(self) -> dict:
        """Window sums, rows and totals, and where ``episodes.csv`` ends as last written (``"episodes_file"``:
        :meth:`EpisodeFile.marker`), for an exact resume. Call :meth:`write` first: the marker covers the rows
        written so far."""
        return {"rows": self.rows, "sum": self._sum, "n": self._n, "count": self._count,
                "window_end": self._window_end, "totals": self.totals, "totals_n": self.totals_n,
                "updates": self.updates, "episodes_file": self.episode_file.marker()}

    def restore_episodes(self, state: dict) -> EpisodeRows | None:
        """The episode rows a :meth:`state_dict` counts, read back from ``episodes.csv``
        (:meth:`EpisodeFile.restore`); None for a checkpoint of an older lcpo, whose loop state holds the rows
        itself (the file is then rewritten whole at the next :meth:`write`).

        Raises:
            lcpo.persistence.checkpoint.CheckpointError: as :meth:`EpisodeFile.restore`.
        """
        marker = state.get("episodes_file")
        return None if marker is None else self.episode_file.restore(marker)

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output."""
        self.rows = [dict(r) for r in state["rows"]]
        self._sum, self._count = dict(state["sum"]), int(state["count"])
        self._window_end = int(state["window_end"])
        self.totals, self.updates = dict(state["totals"]), int(state["updates"])
        # checkpoints written before per-key counts: every key counted as reported by every update
        self._n = {k: int(v) for k, v in state.get("n", {k: self._count for k in self._sum}).items()}
        self.totals_n = {k: int(v) for k, v in state.get("totals_n", {k: self.updates for k in self.totals}).items()}
