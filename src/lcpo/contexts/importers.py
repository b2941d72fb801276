"""Raw measurements to context traces: NDBC buoy wind files and timestamped CSV tables (``lcpo traces import``).

A measured context arrives as timestamped records with holes: missing values, irregular spacing, outages.
A trace is one row per environment step. Converting one into the other takes four steps, the same for every
source, and the bundled ``ndbc-46002`` trace is built by exactly this code
(``scripts/build_ndbc_trace.py`` calls :func:`ndbc_records`; :func:`lcpo.contexts.canonical.ndbc_46002`
calls :func:`resample`):

1. **Parse** (pandas): timestamps in UTC; missing-value codes become missing.
2. **Drop** the records with a missing value (their time becomes part of a gap).
3. **Convert and scale**: NDBC wind speed ``WSPD`` (m/s) and direction ``WDIR`` (degrees the wind comes *from*,
   clockwise from true north) become the components the wind blows *toward*, ``u = -WSPD sin(WDIR)`` (east,
   ``wind_x``) and ``v = -WSPD cos(WDIR)`` (north, ``wind_y``); the scale is ``4 / max(|u|, |v|)`` over the
   record unless given, so the trace spans exactly ``[-4, 4]``, the range of the windy environments
   (:data:`lcpo.envs.wind.WIND_BOUND`). CSV values are kept as they are unless a scale is given.
4. **Resample** onto steps by linear interpolation in time (:func:`numpy.interp`): step ``k`` is real time
   ``k * step_seconds`` after the first record (default 30 s for NDBC, as ``ndbc-46002``), so gaps are bridged
   over their real duration; or, given ``length``, the whole record onto ``length`` equally spaced steps.

NDBC formats read (:func:`read_ndbc`): standard meteorological (``stdmet``, hourly or 10-minute:
``#YY MM DD hh mm WDIR WSPD GST WVHT ...``), continuous winds (``cwind``, 10-minute:
``#YY MM DD hh mm WDIR WSPD GDR GST GTIME``), the older headers without minutes or with ``YYYY``/``WD``/``DIR``/
``SPD``, and realtime files (``MM`` for missing). Missing-value codes: direction 999 (or anything outside
[0, 360]), speed 99 (or more), ``MM``; other columns (gusts 99/999, GTIME 9999, ...) are not used.

Every import returns an :class:`ImportReport` (records, missing, gaps, duration, value ranges, scale, steps),
which ``lcpo traces import`` prints and stores in the trace's metadata.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lcpo.contexts.trace import ContextTrace, TraceError

__all__ = ["ImportReport", "NDBC_STEP_SECONDS", "SCALE_BOUND", "import_csv", "import_ndbc", "ndbc_records",
           "read_ndbc", "resample"]

#: Real time per environment step of an imported NDBC trace (as ``ndbc-46002``: 20 steps per 10 minutes).
NDBC_STEP_SECONDS = 30.0

#: ``scale="auto"`` maps the largest absolute value of the record to this bound (the windy environments' +-4).
SCALE_BOUND = 4.0

_YEAR = ("YY", "YYYY")
_DIRECTION = ("WDIR", "WD", "DIR")
_SPEED = ("WSPD", "SPD")
_MISSING_DIRECTION = 999.0
_MISSING_SPEED = 99.0


@dataclass(frozen=True)
class ImportReport:
    """What an import read, dropped and wrote.

    Attributes:
        source: the input file.
        kind: ``"ndbc"`` or ``"csv"``.
        records: data rows in the file.
        missing: rows dropped for a missing value (NDBC codes 999/99/``MM``; CSV empty cells or ``na_values``).
        used: rows converted (``records - missing``).
        first, last: UTC time of the first and last used record (ISO 8601).
        duration_s: ``last - first`` in seconds.
        interval_s: the nominal sampling interval: the most common spacing of the file's records, in seconds.
        gaps: spacings between consecutive used records longer than ``interval_s``.
        longest_gap_s: the longest spacing, in seconds (``interval_s`` when there is no gap).
        columns: names of the trace's columns.
        raw_min, raw_max: per column, the range before scaling (NDBC: u and v in m/s).
        scale: the factor applied (trace value = raw value x scale).
        steps: rows of the trace.
        step_s: real time per step in seconds.
    """

    source: str
    kind: str
    records: int
    missing: int
    used: int
    first: str
    last: str
    duration_s: float
    interval_s: float
    gaps: int
    longest_gap_s: float
    columns: tuple[str, ...]
    raw_min: tuple[float, ...]
    raw_max: tuple[float, ...]
    scale: float
    steps: int
    step_s: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (stored in the trace's metadata as ``import``)."""
        d = asdict(self)
        d["columns"], d["raw_min"], d["raw_max"] = list(self.columns), list(self.raw_min), list(self.raw_max)
        return d

    def lines(self) -> list[str]:
        """The report as ``lcpo traces import`` prints it."""
        unit = " m/s" if self.kind == "ndbc" else ""
        ranges = ", ".join(f"{c} in [{lo:.4g}, {hi:.4g}]{unit}"
                           for c, lo, hi in zip(self.columns, self.raw_min, self.raw_max))
        scaled = ", ".join(f"{c} in [{lo * self.scale:.4g}, {hi * self.scale:.4g}]"
                           for c, lo, hi in zip(self.columns, self.raw_min, self.raw_max))
        return [
            f"records   {self.records:,} in {self.source} ({self.missing:,} with a missing value dropped, "
            f"{self.used:,} used)",
            f"time      {self.first} to {self.last} UTC ({_duration(self.duration_s)}), "
            f"every {_duration(self.interval_s)}",
            f"gaps      {self.gaps:,} longer than {_duration(self.interval_s)}"
            + (f", the longest {_duration(self.longest_gap_s)} (bridged by linear interpolation)" if self.gaps else ""),
            f"range     {ranges}",
            f"scale     x {self.scale:.6g}: {scaled}",
            f"steps     {self.steps:,} of {_duration(self.step_s)} of real time each",
        ]


def _duration(seconds: float) -> str:
    """``90 s``, ``10 min``, ``2 h 10 min``, ``6 d 19 h 50 min``."""
    seconds = float(seconds)
    if seconds < 60 or seconds % 60:
        return f"{seconds:g} s"
    minutes = int(round(seconds / 60))
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    parts = [f"{days} d"] * bool(days) + [f"{hours} h"] * bool(hours) + [f"{mins} min"] * bool(mins)
    return " ".join(parts) or "0 min"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _header_tokens(path: Path) -> tuple[list[str], bool]:
    """The column names of an NDBC file's first line and whether that line is a ``#`` comment."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as handle:  # a BOM is skipped
            first = handle.readline()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read NDBC file: {exc}") from exc
    tokens = first.lstrip("#").split()
    if not tokens or not tokens[0].isalpha():
        raise TraceError(f"{path}: expected a header line naming the columns (e.g. '#YY MM DD hh mm WDIR WSPD "
                         f"...'), got {first.strip()[:60]!r}")
    return tokens, first.startswith("#")


def _pick(path: Path, tokens: list[str], names: Sequence[str], what: str) -> str:
    for name in names:
        if name in tokens:
            return name
    raise TraceError(f"{path}: no {what} column ({' or '.join(names)}) in the header {' '.join(tokens)!r}")


def read_ndbc(path: str | os.PathLike):
    """Parse an NDBC standard-meteorological or continuous-winds text file.

    Args:
        path: the file (see the module docstring for the formats).

    Returns:
        A :class:`pandas.DataFrame`, one row per data line in file order, with columns ``time``
        (``datetime64``, UTC, naive), ``direction`` (degrees the wind comes from) and ``speed`` (m/s), NaN where
        the file codes the value as missing (999 / 99 / ``MM``) or it is out of range.

    Raises:
        TraceError: unreadable file, no header, no time/direction/speed column, a malformed line or date
            (the message names the file and, where it can, the line).
    """
    import pandas as pd

    path = Path(path)
    tokens, commented = _header_tokens(path)
    year = _pick(path, tokens, _YEAR, "year")
    direction = _pick(path, tokens, _DIRECTION, "wind direction")
    speed = _pick(path, tokens, _SPEED, "wind speed")
    for name in ("MM", "DD", "hh"):
        _pick(path, tokens, (name,), {"MM": "month", "DD": "day", "hh": "hour"}[name])
    try:
        raw = pd.read_csv(path, sep=r"\s+", comment="#", header=None, names=tokens, skiprows=0 if commented else 1,
                          na_values=["MM"], dtype=float, encoding="utf-8-sig")
    except (ValueError, pd.errors.ParserError) as exc:
        raise TraceError(f"{path}: malformed NDBC data line: {exc}") from exc
    if raw.empty:
        raise TraceError(f"{path}: no data lines after the header")
    parts = raw[[year, "MM", "DD", "hh"] + (["mm"] if "mm" in tokens else [])]
    bad = parts.isna().any(axis=1) | (parts % 1 != 0).any(axis=1)
    if bad.any():
        i = int(np.argmax(bad.to_numpy()))
        raise TraceError(f"{path}: record {i}: date/time fields {parts.iloc[i].tolist()} are not whole numbers")
    years = parts[year].to_numpy(np.int64)
    years = np.where(years < 100, years + 1900, years)  # two-digit years: files before 1999
    stamps = pd.DataFrame({"year": years, "month": parts["MM"].to_numpy(np.int64),
                           "day": parts["DD"].to_numpy(np.int64), "hour": parts["hh"].to_numpy(np.int64),
                           "minute": parts["mm"].to_numpy(np.int64) if "mm" in tokens else 0})
    time = pd.to_datetime(stamps, errors="coerce")
    if time.isna().any():
        i = int(np.argmax(time.isna().to_numpy()))
        raise TraceError(f"{path}: record {i}: invalid date {stamps.iloc[i].tolist()} (year, month, day, hour, "
                         "minute)")
    wdir = raw[direction].to_numpy(np.float64)
    wspd = raw[speed].to_numpy(np.float64)
    wdir = np.where((wdir >= _MISSING_DIRECTION) | (wdir > 360) | (wdir < 0), np.nan, wdir)
    wspd = np.where((wspd >= _MISSING_SPEED) | (wspd < 0), np.nan, wspd)
    return pd.DataFrame({"time": time, "direction": wdir, "speed": wspd})


def _minutes(times) -> np.ndarray:
    """Minutes since the first of a pandas datetime series, float64."""
    return ((times - times.iloc[0]).dt.total_seconds() / 60.0).to_numpy()


def _check_increasing(path: Path, minutes: np.ndarray, rows: np.ndarray) -> None:
    step = np.diff(minutes)
    if np.any(step <= 0):
        k = int(np.argmax(step <= 0)) + 1
        raise TraceError(f"{path}: record times must strictly increase (first violation at record {int(rows[k])})")


def _interval_and_gaps(all_minutes: np.ndarray, used_minutes: np.ndarray) -> tuple[float, int, float]:
    """(nominal spacing: the most common spacing of all the file's records, number of spacings of the used
    records longer than that, the longest spacing of the used records), in minutes."""
    spacing = np.diff(all_minutes)
    spacing = spacing[spacing > 0]
    values, counts = np.unique(spacing, return_counts=True)
    nominal = float(values[np.argmax(counts)]) if values.size else float(np.diff(used_minutes).min())
    used = np.diff(used_minutes)
    return nominal, int(np.sum(used > nominal)), float(used.max())


def _scale_of(path: Path, values: np.ndarray, scale: float | str | None, default: float | str) -> float:
    """Resolve a scale: a positive number, or ``"auto"``: :data:`SCALE_BOUND` / max |value|."""
    scale = default if scale is None else scale
    if isinstance(scale, str):
        if scale != "auto":
            try:
                scale = float(scale)
            except ValueError:
                raise TraceError(f"{path}: scale must be 'auto' or a positive number, got {scale!r}") from None
        else:
            peak = float(np.abs(values).max())
            if peak == 0:
                raise TraceError(f"{path}: every value is 0, so scale 'auto' (4 / max |value|) is undefined; "
                                 "give a number")
            return SCALE_BOUND / peak
    if isinstance(scale, bool) or not (isinstance(scale, (int, float, np.floating)) and math.isfinite(scale)
                                       and scale > 0):
        raise TraceError(f"{path}: scale must be 'auto' or a positive number, got {scale!r}")
    return float(scale)


def ndbc_records(path: str | os.PathLike, scale: float | str | None = None, missing: str = "drop"
                 ) -> tuple[np.ndarray, ImportReport]:
    """Per-record wind of an NDBC file: minutes since the first used record and the scaled u, v.

    This is the packaged ``lcpo/data/ndbc_46002_wind.npy`` (``scripts/build_ndbc_trace.py``, with
    ``missing="error"``) and the first half of :func:`import_ndbc`.

    Args:
        path: NDBC stdmet or cwind file.
        scale: ``None`` or ``"auto"``: ``4 / max(|u|, |v|)`` over the used records; or a positive number (e.g.
            :data:`lcpo.contexts.canonical.NDBC_46002_SCALE` to put another buoy on ``ndbc-46002``'s scale).
        missing: ``"drop"`` records with a missing direction or speed, or ``"error"`` (raise on the first).

    Returns:
        ``(records, report)``: ``(N, 3)`` float32 rows ``(minutes, u * scale, v * scale)``, and the report
        (``steps`` and ``step_s`` are 0 until resampled).

    Raises:
        TraceError: see :func:`read_ndbc`; a missing value with ``missing="error"`` (names the record); fewer
            than 2 usable records; times that do not strictly increase; a bad scale.
    """
    if missing not in ("drop", "error"):
        raise ValueError(f"missing must be 'drop' or 'error', got {missing!r}")
    path = Path(path)
    frame = read_ndbc(path)
    ok = frame["direction"].notna().to_numpy() & frame["speed"].notna().to_numpy()
    if missing == "error" and not ok.all():
        raise TraceError(f"{path}: missing or invalid WDIR/WSPD in record {int(np.argmin(ok))}")
    rows = np.flatnonzero(ok)
    if rows.size < 2:
        raise TraceError(f"{path}: {rows.size} record(s) with both wind direction and speed; need at least 2")
    used = frame.iloc[rows]
    minutes = _minutes(used["time"])
    _check_increasing(path, minutes, rows)
    rad = np.radians(used["direction"].to_numpy())
    wspd = used["speed"].to_numpy()
    uv = np.stack([-wspd * np.sin(rad), -wspd * np.cos(rad)], axis=1)
    factor = _scale_of(path, uv, scale, "auto")
    records = np.column_stack([minutes, uv * factor]).astype(np.float32)
    nominal, gaps, longest = _interval_and_gaps(_minutes(frame["time"]), minutes)
    report = ImportReport(
        source=str(path), kind="ndbc", records=len(frame), missing=int(len(frame) - rows.size), used=int(rows.size),
        first=used["time"].iloc[0].isoformat(), last=used["time"].iloc[-1].isoformat(),
        duration_s=float(minutes[-1] * 60.0), interval_s=nominal * 60.0, gaps=gaps, longest_gap_s=longest * 60.0,
        columns=("wind_x", "wind_y"), raw_min=tuple(float(x) for x in uv.min(axis=0)),
        raw_max=tuple(float(x) for x in uv.max(axis=0)), scale=factor, steps=0, step_s=0.0)
    return records, report


def resample(minutes: np.ndarray, values: np.ndarray, step_minutes: float | None = None,
             length: int | None = None) -> tuple[np.ndarray, str]:
    """Linear interpolation of timestamped records onto environment steps.

    Args:
        minutes: ``(N,)`` strictly increasing record times, minutes since the first (``minutes[0] == 0``).
        values: ``(N, d)`` record values.
        step_minutes: real time per step: step ``k`` is at ``k * step_minutes``, up to the last record
            (``floor(minutes[-1] / step_minutes) + 1`` steps).
        length: instead, ``length`` equally spaced steps from the first record to the last.

    Returns:
        ``((T, d) float64 values, a one-line description of the rule)``.

    Raises:
        TraceError: if neither or both of ``step_minutes`` and ``length`` are given, or either is not positive.
    """
    if (step_minutes is None) == (length is None):
        raise TraceError(f"resample needs exactly one of step_minutes and length, got {step_minutes!r}, {length!r}")
    minutes = np.asarray(minutes, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if length is None:
        if not (math.isfinite(step_minutes) and step_minutes > 0):
            raise TraceError(f"step length must be positive, got {step_minutes!r} min")
        n = int(np.floor(minutes[-1] / step_minutes + 1e-9)) + 1
        t = np.arange(n) * step_minutes
        rule = f"linear interpolation in time, {step_minutes * 60:g} s per step"
    else:
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
            raise TraceError(f"length must be a positive integer, got {length!r}")
        n = int(length)
        t = np.linspace(0.0, minutes[-1], n)
        rule = f"linear interpolation in time onto {n} equally spaced steps"
    out = np.stack([np.interp(t, minutes, values[:, k]) for k in range(values.shape[1])], axis=1)
    return out, rule


def _finish(path: Path, report: ImportReport, values: np.ndarray, rule: str, step_s: float, meta: dict[str, Any],
            name: str | None) -> tuple[ContextTrace, ImportReport]:
    report = ImportReport(**{**asdict(report), "steps": int(values.shape[0]), "step_s": float(step_s)})
    meta = dict(meta, length=int(values.shape[0]), columns=list(report.columns), resampling=rule,
                source=path.name, source_sha256=_sha256(path), scale=report.scale)
    meta["import"] = report.to_dict()
    return ContextTrace(values, name or path.stem, meta), report


def _steps(step_seconds: float | None, length: int | None, default_s: float) -> tuple[float | None, int | None]:
    if step_seconds is not None and length is not None:
        raise TraceError("give step_seconds or length, not both")
    if length is not None:
        return None, length
    step = default_s if step_seconds is None else step_seconds
    if isinstance(step, bool) or not (isinstance(step, (int, float)) and math.isfinite(step) and step > 0):
        raise TraceError(f"step_seconds must be a positive number, got {step!r}")
    return float(step) / 60.0, None


def import_ndbc(path: str | os.PathLike, step_seconds: float | None = None, length: int | None = None,
                scale: float | str | None = None, name: str | None = None) -> tuple[ContextTrace, ImportReport]:
    """An NDBC wind file as a ``(T, 2)`` wind trace, converted exactly as the bundled ``ndbc-46002``.

    ``import_ndbc("46002c2016.txt")`` returns the values of ``resolve_trace("ndbc-46002")``, bit for bit.

    Args:
        path: NDBC stdmet or cwind file (missing values are dropped, their time bridged).
        step_seconds: real time per step (default :data:`NDBC_STEP_SECONDS`).
        length: instead, resample the whole record onto this many steps.
        scale: ``None``/``"auto"`` (``4 / max(|u|, |v|)``) or a positive number.
        name: trace name (default: the file stem).

    Returns:
        ``(trace, report)``; the trace's columns are ``wind_x`` (u, east) and ``wind_y`` (v, north), its
        metadata holds the rule, the scale, the source's sha256 and the report.

    Raises:
        TraceError: see :func:`ndbc_records` and :func:`resample`.
    """
    path = Path(path)
    step_minutes, length = _steps(step_seconds, length, NDBC_STEP_SECONDS)
    records, report = ndbc_records(path, scale=scale)
    values, rule = resample(records[:, 0], records[:, 1:], step_minutes, length)
    step_s = step_minutes * 60.0 if step_minutes is not None else (
        records[-1, 0] * 60.0 / max(len(values) - 1, 1))
    meta = {"generator": "lcpo traces import ndbc", "units": "trace units (m/s times scale)",
            "scale_rule": "4 / max(|u|, |v|) over the record" if scale in (None, "auto") else "given",
            "description": "u = -WSPD sin(WDIR) (east), v = -WSPD cos(WDIR) (north): where the wind blows to"}
    return _finish(path, report, values, rule, float(step_s), meta, name)


def import_csv(path: str | os.PathLike, time_column: str | None = None, columns: Sequence[str] | None = None,
               step_seconds: float | None = None, length: int | None = None, scale: float | str | None = None,
               na_values: Sequence[str] = (), name: str | None = None) -> tuple[ContextTrace, ImportReport]:
    """A CSV table with a timestamp column and value columns as a ``(T, d)`` trace.

    Args:
        path: comma-separated file with a header row.
        time_column: the timestamp column (default: the first). Text is parsed by :func:`pandas.to_datetime`
            (ISO 8601 and the like; a time zone is converted to UTC, none means UTC); a numeric column is
            seconds.
        columns: value columns, in trace order (default: every other column).
        step_seconds: real time per step (default: the nominal interval, one step per record).
        length: instead, resample the whole record onto this many steps.
        scale: ``None`` (values as they are), ``"auto"`` (``4 / max |value|``) or a positive number.
        na_values: extra cell texts meaning "missing" (e.g. ``["9999", "-999"]``); empty cells always are.
        name: trace name (default: the file stem).

    Returns:
        ``(trace, report)``.

    Raises:
        TraceError: unreadable file, an unknown column (names the known ones), a non-numeric value or an
            unparseable timestamp (names the row), fewer than 2 complete rows, times that do not strictly
            increase, a bad scale or step.
    """
    import pandas as pd

    path = Path(path)
    step_minutes, length = _steps(step_seconds, length, 0.0) if (step_seconds is not None or length is not None) \
        else (None, None)
    try:
        table = pd.read_csv(path, na_values=list(na_values), skipinitialspace=True, encoding="utf-8-sig")
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise TraceError(f"{path}: cannot read CSV: {exc}") from exc
    if table.shape[1] < 2:
        raise TraceError(f"{path}: need a timestamp column and at least one value column, got columns "
                         f"{list(table.columns)}")
    time_column = table.columns[0] if time_column is None else time_column
    columns = [c for c in table.columns if c != time_column] if columns is None else list(columns)
    for c in [time_column, *columns]:
        if c not in table.columns:
            raise TraceError(f"{path}: no column {c!r}; columns: {list(table.columns)}")
    if not columns:
        raise TraceError(f"{path}: no value columns besides the timestamp column {time_column!r}")
    values = table[columns].apply(pd.to_numeric, errors="coerce")
    wrong = values.isna() & table[columns].notna()
    if wrong.any().any():
        r, c = np.argwhere(wrong.to_numpy())[0]
        raise TraceError(f"{path}: row {r}: column {columns[c]!r} holds {table[columns[c]].iloc[r]!r}, not a number "
                         "(pass it in na_values if it codes a missing value)")
    stamp = table[time_column]
    if pd.api.types.is_numeric_dtype(stamp):
        time = pd.to_datetime(stamp, unit="s", utc=True, errors="coerce")
    else:
        time = pd.to_datetime(stamp, utc=True, errors="coerce", format="mixed")
    if time.isna().any():
        r = int(np.argmax(time.isna().to_numpy()))
        raise TraceError(f"{path}: row {r}: timestamp {stamp.iloc[r]!r} in column {time_column!r} cannot be parsed")
    ok = values.notna().all(axis=1).to_numpy()
    rows = np.flatnonzero(ok)
    if rows.size < 2:
        raise TraceError(f"{path}: {rows.size} complete row(s); need at least 2")
    every = time.dt.tz_convert(None)
    time = every.iloc[rows].reset_index(drop=True)
    minutes = _minutes(time)
    _check_increasing(path, minutes, rows)
    raw = values.iloc[rows].to_numpy(np.float64)
    factor = _scale_of(path, raw, scale, 1.0)
    nominal, gaps, longest = _interval_and_gaps(_minutes(every), minutes)
    if step_minutes is None and length is None:
        step_minutes = nominal
    resampled, rule = resample(minutes, raw * factor, step_minutes, length)
    step_s = step_minutes * 60.0 if step_minutes is not None else minutes[-1] * 60.0 / max(len(resampled) - 1, 1)
    report = ImportReport(
        source=str(path), kind="csv", records=len(table), missing=int(len(table) - rows.size), used=int(rows.size),
        first=time.iloc[0].isoformat(), last=time.iloc[-1].isoformat(), duration_s=float(minutes[-1] * 60.0),
        interval_s=nominal * 60.0, gaps=gaps, longest_gap_s=longest * 60.0, columns=tuple(str(c) for c in columns),
        raw_min=tuple(float(x) for x in raw.min(axis=0)), raw_max=tuple(float(x) for x in raw.max(axis=0)),
        scale=factor, steps=0, step_s=0.0)
    meta = {"generator": "lcpo traces import csv", "units": "as in the file" if factor == 1.0 else
            f"file units times {factor:g}", "time_column": str(time_column)}
    return _finish(path, report, resampled, rule, float(step_s), meta, name)
