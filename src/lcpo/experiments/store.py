"""The results store: one row per run and the per-episode series of every run, as Parquet tables.

``RUNS_DIR/results.parquet`` (one row per spec of the sweep, whatever its state):

=====================  ==========================================================================
column                 meaning
=====================  ==========================================================================
run_id                 folder name under ``RUNS_DIR/runs``
status                 ``done`` (summary.json present), ``failed`` (error.json), ``running`` (neither, and a
                       process holds the run folder's lock now), ``interrupted`` (neither, the folder
                       exists and nobody holds it: the run started and stopped; rerunning the sweep or
                       ``lcpo resume`` continues it), ``missing`` (no run folder: not started)
env, trace, agent      from the resolved config (a run without a named trace: the trace its summary
                       records, e.g. ``ndbc-46002`` for ``lcpo run``'s default)
trace_length, steps,   from the configuration the run ran with (its summary's; else the sweep's spec):
                       ``steps`` is the budget, ``steps_done`` what ran
warmup_steps, reset,
seed
scheme                 agent plus its overrides, e.g. ``lcpo[ood_threshold=0.5]``; the report's column
hp/<name>              one column per overridden hyperparameter (lists as JSON text; a column that
                       mixes words and numbers, e.g. ``ood_threshold`` "auto" and 0.25, is text throughout)
env_kwargs             JSON text
lifelong_return        mean episodic return of episodes ending after the warm-up (paper Section 5)
episodes, steps_done,  from summary.json
wall_time_s,
wall_share_s,          (the run's share of its processes' wall time; NaN for runs that recorded none)
steps_per_s,           (online steps per second of the online phase)
offline_train_s,       (a prescient agent's offline training, seconds of wall_time_s; 0 for the others,
                       NaN for runs that recorded none)
constrained_fraction,
ood_fraction
population_size        the number of seeds of the population the run trained in (summary.json
                       ``population.size``; a run trained alone records 1, and one that recorded none counts 1): its
                       ``wall_time_s`` is the whole population's, shared by its seeds
code_commit,           the git commit and dirty flag the run recorded (summary.json ``code``,
code_dirty             :mod:`lcpo.persistence.provenance`); None for runs that recorded none
diag/<column>          mean of each numeric column of the run's diagnostics.csv
error                  first line of error.json's message for failed runs
=====================  ==========================================================================

``RUNS_DIR/episodes.parquet``: the rows of every run's ``episodes.csv`` (episode, step, return, length,
``context_mean_*``) with a ``run_id`` column; an unfinished run's partial last line (a kill in the middle of an append)
is left out.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["SUMMARY_FIELDS", "check_folder_for", "collect", "load_store", "read_summary", "runs_root", "scheme_label",
           "write_store"]

#: summary.json fields copied into the per-run table (``steps`` is renamed ``steps_done``).
SUMMARY_FIELDS = ("lifelong_return", "episodes", "steps", "wall_time_s", "wall_share_s", "steps_per_s",
                  "offline_train_s", "constrained_fraction", "ood_fraction")
_CONFIG_FIELDS = ("env", "trace", "trace_length", "agent", "seed", "steps", "warmup_steps", "reset")


def _fmt(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def scheme_label(agent: str, overrides: Mapping[str, Any] | None) -> str:
    """The report's name for an agent with hyperparameter overrides: ``agent`` or ``agent[k=v,...]``.

    >>> scheme_label("lcpo", {"ood_threshold": 0.5, "reservoir_size": 2000})
    'lcpo[ood_threshold=0.5,reservoir_size=2000]'
    """
    if not overrides:
        return agent
    return agent + "[" + ",".join(f"{k}={_fmt(v)}" for k, v in sorted(overrides.items())) + "]"


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: malformed JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: malformed: a JSON object was expected, got {type(data).__name__}")
    return data


def read_summary(path: str | Path) -> dict | None:
    """A run's ``summary.json`` (None if absent), checked as the store reads it.

    Raises:
        ValueError: one line naming the file: not JSON, not an object, or a field of :data:`SUMMARY_FIELDS`
            that is not a number (null stands for none).
    """
    path = Path(path)
    summary = _read_json(path)
    for key in SUMMARY_FIELDS:
        _summary_number(path, key, (summary or {}).get(key))
    return summary


def _summary_number(path: Path, key: str, value: Any) -> float | int:
    """``value`` of summary field ``key`` as a number (None: NaN); one line naming the file otherwise."""
    if value is None:
        return np.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{path}: {key} must be a number, got {value!r}")
    return value




def _is_run_folder(path: Path) -> bool:
    """True for a run folder: one holding the ``config.json`` a run writes when it starts (finished, running or
    interrupted alike), a summary, or the ``error.json`` of a run that failed before writing its configuration
    (a population's own ``.population-*`` folder holds none of them)."""
    return path.is_dir() and any((path / name).is_file() for name in ("config.json", "summary.json", "error.json"))


def runs_root(runs_dir: str | Path) -> Path:
    """The folder that holds the run folders of ``runs_dir``.

    A sweep folder keeps them under ``runs/``; a folder written by ``lcpo run --out DIR`` (``DIR/AGENT-sSEED/``
    with ``config.json``, written when the run starts) holds them directly, so ``lcpo report`` works on both.

    Raises:
        FileNotFoundError: if ``runs_dir`` is neither.
    """
    runs_dir = Path(runs_dir)
    if (runs_dir / "sweep.json").is_file() or (runs_dir / "runs").is_dir():
        return runs_dir / "runs"
    if runs_dir.is_dir() and any(_is_run_folder(p) for p in runs_dir.iterdir()):
        return runs_dir
    raise FileNotFoundError(f"{runs_dir}: not a sweep folder (no sweep.json and no runs/ folder) and no "
                            "`lcpo run` output folders (AGENT-sSEED/ with config.json) in it")


def check_folder_for(folder: str | Path, writer: str) -> None:
    """Refuse to write one kind of run folder into a folder that holds the other kind.

    A sweep folder (``sweep.json``, runs under ``runs/``) and an ``lcpo run --out`` folder (``AGENT-sSEED/``
    folders directly in it) are read differently by :func:`runs_root`: in a folder holding both, ``lcpo report``
    reads the sweep's runs and silently leaves the others out. So a sweep is refused a folder that holds
    ``lcpo run`` output folders and no manifest, and ``lcpo run`` a folder that holds a sweep manifest.

    Args:
        folder: the output folder (``--out``); a missing or empty folder passes.
        writer: ``"sweep"`` or ``"run"``, the command about to write there.

    Raises:
        ValueError: one line naming the folder, what it holds and the way out (another ``--out``); also for an
            unknown ``writer``.
    """
    folder = Path(folder)
    if writer not in ("sweep", "run"):
        raise ValueError(f"writer must be 'sweep' or 'run', got {writer!r}")
    if not folder.is_dir():
        return
    if writer == "sweep":
        if (folder / "sweep.json").is_file():
            return
        found = sorted(p.name for p in folder.iterdir() if p.name != "runs" and _is_run_folder(p))
        if found:
            named = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
            raise ValueError(f"{folder} holds `lcpo run` output folders ({named}), not a sweep: the sweep's runs "
                             f"would go to {folder / 'runs'} beside them and `lcpo report {folder}` would read only "
                             "the sweep's; give the sweep another folder (--out, or the config's `out`)")
    elif (folder / "sweep.json").is_file():
        raise ValueError(f"{folder} is a sweep folder (it holds sweep.json): `lcpo run` folders there would be left "
                         f"out by `lcpo report {folder}`; give the run another --out")


def _manifest_specs(runs_dir: Path) -> list[tuple[str, dict | None]]:
    manifest = _read_json(runs_dir / "sweep.json")
    if manifest is not None:
        return [(s["run_id"], s["config"]) for s in manifest["specs"]]
    root = runs_root(runs_dir)
    if root == runs_dir:
        return [(p.name, None) for p in sorted(root.iterdir()) if _is_run_folder(p)]
    return [(p.name, None) for p in sorted(root.iterdir()) if _is_run_folder(p)]


def _diagnostic_means(path: Path) -> dict[str, float]:
    if not path.is_file() or path.stat().st_size == 0:
        return {}
    df = pd.read_csv(path)
    out = {}
    for col in df.columns:
        if col in ("step", "update", "episode") or not pd.api.types.is_numeric_dtype(df[col]):
            continue
        out[f"diag/{col}"] = float(df[col].mean()) if len(df) else float("nan")
    return out


def _read_episodes(path: Path) -> pd.DataFrame | None:
    """A run's ``episodes.csv`` up to its last complete line (None when there is no complete line).

    ``episodes.csv`` is append-only (:class:`lcpo.persistence.episode_file.EpisodeFile`): a run killed in the middle
    of an append leaves a partial last line until it resumes, which cuts it. Parsed as it stands, that line would be
    a row of truncated numbers (``12`` of ``1234``) or NaN fields, so it is left out; the complete lines are real
    episodes of the unfinished run.
    """
    if not path.is_file() or path.stat().st_size == 0:
        return None
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        complete = f.read(1) == b"\n"
    if complete:
        return pd.read_csv(path)
    data = path.read_bytes()
    cut = data.rfind(b"\n")
    return None if cut < 0 else pd.read_csv(io.BytesIO(data[: cut + 1]))


def _run_row(runs_dir: Path, run_id: str, config: dict | None) -> dict[str, Any]:
    folder = runs_root(runs_dir) / run_id
    summary = read_summary(folder / "summary.json")
    error = _read_json(folder / "error.json")
    if isinstance((summary or {}).get("config"), dict):
        # what the run ran with: a finished run extended after its sweep (`lcpo resume RUNS_DIR --steps N`)
        # records its new steps, and its row must not pair the sweep's steps with the longer run's results
        config = summary["config"]
    if config is None:
        written = _read_json(folder / "config.json") or {}
        config = (error or {}).get("config") or written.get("run", written or None)
        if config is None:
            raise ValueError(f"{folder}: no config (no sweep.json entry, config.json, summary or error)")
    row: dict[str, Any] = {"run_id": run_id}
    if summary is not None:
        row["status"] = "done"
    elif error is not None:
        row["status"] = "failed"
    elif folder.is_dir():
        from lcpo.persistence.runlock import lock_in_force

        row["status"] = "running" if lock_in_force(folder) else "interrupted"
    else:
        row["status"] = "missing"
    for key in _CONFIG_FIELDS:
        row[key] = config.get(key)
    if row["trace"] is None:  # the environment's default trace: the name the run recorded, else "default"
        row["trace"] = ((summary or {}).get("trace") or {}).get("name") or "default"
    overrides = dict(config.get("overrides") or {})
    row["scheme"] = scheme_label(str(config.get("agent")), overrides)
    for key, value in overrides.items():
        row[f"hp/{key}"] = value if isinstance(value, (int, float, str, bool)) else _fmt(value)
    row["env_kwargs"] = json.dumps(config.get("env_kwargs") or {}, sort_keys=True)
    for key in SUMMARY_FIELDS:
        value = _summary_number(folder / "summary.json", key, (summary or {}).get(key))
        row["steps_done" if key == "steps" else key] = value
    population = (summary or {}).get("population")
    size = population.get("size") if isinstance(population, dict) else None
    row["population_size"] = int(size) if isinstance(size, int) and size >= 1 else 1
    code = (summary or {}).get("code") or {}
    row["code_commit"] = code.get("commit") or None  # None: the run recorded no commit (older runs, no git)
    row["code_dirty"] = code.get("dirty")
    if summary is not None:
        row.update(_diagnostic_means(folder / "diagnostics.csv"))
    row["error"] = (error or {}).get("error", "").split("\n", 1)[0] if error is not None else None
    return row


def collect(runs_dir: str | Path, run_ids: Sequence[str] | None = None,
            episodes: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Gather the per-run table and the per-episode table of a sweep folder.

    Args:
        runs_dir: the sweep folder, or a folder of ``lcpo run --out`` outputs (see :func:`runs_root`).
        run_ids: runs to include; default the specs in ``sweep.json`` (or every run folder when there is no
            manifest).
        episodes: read every run's ``episodes.csv`` (False: the per-episode table is empty; a study of 20M-step
            runs has about 100,000 episodes per run).

    Returns:
        ``(runs, episodes)``: one row per run id (see the module docstring) and the concatenated
        ``episodes.csv`` rows with a ``run_id`` column (empty frame when no run has episodes).

    Raises:
        FileNotFoundError: if ``runs_dir`` is not a sweep folder.
        ValueError: for a malformed summary/error/config JSON, or a summary field of :data:`SUMMARY_FIELDS` that
            is not a number (message names the file and the field).
    """
    runs_dir = Path(runs_dir)
    specs = _manifest_specs(runs_dir)
    if run_ids is not None:
        wanted = set(run_ids)
        known = dict(specs)
        specs = [(rid, known.get(rid)) for rid in run_ids]
        specs = [s for s in specs if s[0] in wanted]
    rows = [_run_row(runs_dir, rid, cfg) for rid, cfg in specs]
    runs = pd.DataFrame(rows)
    for col in runs.columns:
        if col.startswith("hp/") or col == "trace_length":
            vals = [r[col] for r in rows if r.get(col) is not None]
            if vals and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in vals):
                runs[col] = runs[col].astype("Int64")  # keep integers integer next to missing values
            elif any(isinstance(v, str) for v in vals) and not all(isinstance(v, str) for v in vals):
                # words next to numbers (ood_threshold = ["auto", 0.25, 1.0]): one text column, numbers as JSON
                runs[col] = [None if r.get(col) is None else _fmt(r[col]) for r in rows]
    episode_frames = []
    for rid, _ in specs if episodes else ():
        path = runs_root(runs_dir) / rid / "episodes.csv"
        ep = _read_episodes(path)
        if ep is not None:
            ep.insert(0, "run_id", rid)
            episode_frames.append(ep)
    episodes = pd.concat(episode_frames, ignore_index=True) if episode_frames else pd.DataFrame(
        {"run_id": pd.Series(dtype=str), "episode": pd.Series(dtype=int), "step": pd.Series(dtype=int),
         "return": pd.Series(dtype=float)})
    return runs, episodes


def write_store(runs_dir: str | Path, run_ids: Sequence[str] | None = None) -> tuple[Path, Path]:
    """Collect a sweep folder and write ``results.parquet`` and ``episodes.parquet`` into it (atomically).

    Args:
        runs_dir: the sweep folder.
        run_ids: see :func:`collect`.

    Returns:
        The two paths written.
    """
    runs_dir = Path(runs_dir)
    runs, episodes = collect(runs_dir, run_ids)
    paths = []
    for df, name in ((runs, "results.parquet"), (episodes, "episodes.parquet")):
        path = runs_dir / name
        tmp = path.with_name(f".{name}.tmp")
        df.to_parquet(tmp, index=False)
        tmp.replace(path)
        paths.append(path)
    return paths[0], paths[1]


def load_store(runs_dir: str | Path, refresh: bool = True, write: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``(runs, episodes)`` tables of a sweep folder.

    Args:
        runs_dir: the sweep folder.
        refresh: when the run folders are present, collect from them (they are the truth; the Parquet files
            may predate runs that finished later); otherwise read the Parquet files.
        write: with ``refresh``, also rewrite the store's Parquet files in ``runs_dir``; ``False`` leaves the
            folder untouched (``lcpo report`` writes only into its ``--out``).

    Raises:
        FileNotFoundError: if ``runs_dir`` has neither run folders nor a store.
        ValueError: a malformed summary/error/config JSON or a non-number summary field (:func:`collect`).
    """
    runs_dir = Path(runs_dir)
    res, eps = runs_dir / "results.parquet", runs_dir / "episodes.parquet"
    if refresh and runs_dir.is_dir() and (
            (runs_dir / "runs").is_dir() or any(_is_run_folder(p) for p in runs_dir.iterdir())):
        if not write:
            return collect(runs_dir)
        write_store(runs_dir)
    if res.is_file() and eps.is_file():
        return pd.read_parquet(res), pd.read_parquet(eps)
    return collect(runs_dir)
