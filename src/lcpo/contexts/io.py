"""Reading and writing context traces as ``.npy`` or ``.csv`` files, validated.

File formats:

- ``.npy``: one 2-D ``(T, d)`` array of real numbers (float or integer dtype), loaded with
  ``allow_pickle=False``; written as float64.
- ``.csv``: comma-separated numbers, one row per step, ``d`` columns per row; an optional first row of column
  names (e.g. ``wind_x,wind_y``), which is kept in ``metadata["columns"]``. Blank lines are skipped.
  Written with 17 significant digits, so float64 values round-trip exactly.
- Sidecar ``<file>.json`` (e.g. ``wind.npy.json``): ``{"name": ..., "metadata": {...}}``; optional on load.

Every error is a :class:`~lcpo.contexts.trace.TraceError` whose message starts with the file path and says what
is wrong (shape, dtype, the first non-finite row, the first ragged or non-numeric CSV line). Writes are atomic:
data go to a temporary file in the destination folder, which is then renamed over the target with
:func:`os.replace`.
"""

from __future__ import annotations

import csv
import json
import os
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from lcpo.persistence.atomic import atomic_write, json_default
from lcpo.contexts.trace import ContextTrace, TraceError

__all__ = ["SUFFIXES", "save_trace", "load_trace", "sidecar_path"]

#: Text files a user wrote (CSV traces, JSON sidecars) are UTF-8; a byte-order mark (as spreadsheet programs
#: write on export) is skipped, never read as part of the first header or number.
_ENCODING = "utf-8-sig"

SUFFIXES = (".npy", ".csv")


def sidecar_path(path: str | os.PathLike) -> Path:
    """Return the metadata sidecar path of a trace file: ``<file>.json`` (``wind.npy`` -> ``wind.npy.json``)."""
    path = Path(path)
    return path.with_name(path.name + ".json")


def _suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise TraceError(f"{path}: unknown trace file extension {path.suffix!r}; expected one of {SUFFIXES}")
    return suffix


def _default_columns(trace: ContextTrace) -> list[str]:
    cols = trace.metadata.get("columns")
    if (isinstance(cols, (list, tuple)) and len(cols) == trace.dim
            and all(isinstance(c, str) and c and "," not in c and "\n" not in c for c in cols)):
        return list(cols)
    return [f"c{k}" for k in range(trace.dim)]


def save_trace(trace: ContextTrace | np.ndarray, path: str | os.PathLike) -> Path:
    """Save a trace as ``.npy`` or ``.csv`` plus a JSON sidecar with its name and metadata.

    The CSV header row is ``metadata["columns"]`` when it names every column (canonical wind traces use
    ``wind_x,wind_y``), else ``c0,c1,...``.

    Args:
        trace: a :class:`ContextTrace`, or a ``(T, d)`` array (named after the file stem).
        path: destination ending in ``.npy`` or ``.csv``; the folder must exist.

    Returns:
        The path written.

    Raises:
        TraceError: unknown extension, missing destination folder, metadata that is not JSON-serialisable,
            or an invalid array.
    """
    path = Path(path)
    suffix = _suffix(path)
    if not isinstance(trace, ContextTrace):
        trace = ContextTrace(np.asarray(trace), name=path.stem)
    if not path.parent.is_dir():
        raise TraceError(f"{path}: destination folder {path.parent} does not exist")
    try:
        sidecar = json.dumps({"name": trace.name, "metadata": trace.metadata}, indent=2, sort_keys=True,
                             default=json_default, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TraceError(f"{path}: trace metadata is not JSON-serialisable: {exc}") from exc

    values = trace.values
    if suffix == ".npy":
        atomic_write(path, lambda handle: np.save(handle, values, allow_pickle=False))
    else:
        header = ",".join(_default_columns(trace))
        atomic_write(path, lambda handle: np.savetxt(handle, values, fmt="%.17g", delimiter=",",
                                                      header=header, comments=""))
    atomic_write(sidecar_path(path), lambda handle: handle.write((sidecar + "\n").encode()))
    return path


def _read_sidecar(path: Path) -> tuple[str | None, dict[str, Any]]:
    side = sidecar_path(path)
    if not side.exists():
        return None, {}
    try:
        data = json.loads(side.read_text(encoding=_ENCODING))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"{side}: cannot read the trace metadata sidecar: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("metadata", {}), dict):
        raise TraceError(f"{side}: expected a JSON object {{'name': str, 'metadata': object}}")
    name = data.get("name")
    if name is not None and not isinstance(name, str):
        raise TraceError(f"{side}: 'name' must be a string, got {name!r}")
    return name, dict(data.get("metadata", {}))


def _load_npy(path: Path) -> np.ndarray:
    try:
        with open(path, "rb") as handle:
            magic = handle.read(6)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read .npy file: {exc}") from exc
    if magic != b"\x93NUMPY":
        raise TraceError(f"{path}: not a valid .npy file (no NumPy header)")
    try:
        arr = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "allow_pickle" in str(exc) or "object" in str(exc).lower():
            raise TraceError(f"{path}: wrong dtype: the array holds Python objects (dtype object); "
                             "a trace must be real numbers") from exc
        raise TraceError(f"{path}: not a valid .npy file: {exc}") from exc
    except (OSError, EOFError) as exc:
        raise TraceError(f"{path}: cannot read .npy file: {exc}") from exc
    if not isinstance(arr, np.ndarray):
        raise TraceError(f"{path}: expected one array in a .npy file, got {type(arr).__name__}")
    return arr


#: A field that looks like a date or a time of day (``2024-01-31``, ``01/31/2024``, ``12:30``).
_TIMESTAMP = re.compile(r"\d{1,4}[-/]\d{1,2}[-/]\d{1,4}|\d{1,2}:\d{2}")
#: First-column names of a timestamped table (a trace holds context values only, one row per step).
_TIME_COLUMNS = frozenset({"time", "timestamp", "date", "datetime", "time_utc", "utc", "epoch", "unix_time"})


def _import_hint(path: Path) -> str:
    return ("; it looks like a timestamped table: a trace file holds one row of context values per step, "
            f"without times; convert the table with `lcpo traces import csv {path} --out trace.npy` (which "
            "resamples it onto steps; docs/traces.md)")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _csv_diagnose(path: Path, first_data_line: int) -> TraceError:
    """Scan a CSV that NumPy rejected and describe its first bad line (slow path, errors only)."""
    try:
        return _csv_first_bad_line(path, first_data_line)
    except UnicodeDecodeError as exc:
        return TraceError(f"{path}: not UTF-8 text ({exc}); save the CSV as UTF-8")


def _csv_first_bad_line(path: Path, first_data_line: int) -> TraceError:
    width = None
    with open(path, newline="", encoding=_ENCODING) as handle:
        for lineno, row in enumerate(csv.reader(handle), start=1):
            if lineno < first_data_line or not row or all(not f.strip() for f in row):
                continue
            if width is None:
                width = len(row)
            elif len(row) != width:
                return TraceError(f"{path}: ragged rows: line {lineno} has {len(row)} fields, expected {width} "
                                  "(as on the first data line)")
            for col, field in enumerate(row, start=1):
                if not _is_number(field.strip()):
                    hint = _import_hint(path) if _TIMESTAMP.search(field) else ""
                    return TraceError(f"{path}: wrong dtype: line {lineno}, column {col}: {field.strip()!r} "
                                      f"is not a real number{hint}")
    return TraceError(f"{path}: cannot parse the CSV file")


def _load_csv(path: Path) -> tuple[np.ndarray, list[str] | None]:
    try:
        with open(path, newline="", encoding=_ENCODING) as handle:
            first = ""
            first_lineno = 0
            for first_lineno, line in enumerate(handle, start=1):
                if line.strip():
                    first = line
                    break
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text ({exc}); save the CSV as UTF-8") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read CSV file: {exc}") from exc
    if not first:
        raise TraceError(f"{path}: empty CSV file (no rows)")
    fields = [f.strip() for f in next(csv.reader([first]))]
    columns = None
    skip = first_lineno - 1
    if not all(_is_number(f) for f in fields):
        if any(_is_number(f) for f in fields) or any(not f for f in fields):
            # Mixed numbers and text on the first line: a bad data row rather than a header.
            raise _csv_diagnose(path, first_lineno)
        columns = fields
        skip = first_lineno
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": reported below
            arr = np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=2, dtype=np.float64, comments=None,
                             encoding=_ENCODING)
    except ValueError:
        raise _csv_diagnose(path, skip + 1) from None
    if arr.size == 0:
        raise TraceError(f"{path}: wrong shape: no data rows" + (" after the header" if columns else ""))
    if (columns is not None and columns[0].lower() in _TIME_COLUMNS and arr.shape[0] > 1
            and np.all(np.diff(arr[:, 0]) > 0)):  # named like a time axis, and increasing like one
        raise TraceError(f"{path}: the first column, {columns[0]!r}, increases row by row{_import_hint(path)}")
    if columns is not None and len(columns) != arr.shape[1]:
        raise TraceError(f"{path}: ragged rows: the header names {len(columns)} columns, "
                         f"the data rows have {arr.shape[1]}")
    return arr, columns


def load_trace(path: str | os.PathLike, name: str | None = None) -> ContextTrace:
    """Load and validate a trace from a ``.npy`` or ``.csv`` file (and its optional JSON sidecar).

    Args:
        path: the file.
        name: the trace name; default: the sidecar's name, else the file stem.

    Returns:
        A :class:`ContextTrace` with float64 ``(T, d)`` values. Its metadata is the sidecar's, plus
        ``"source"`` (the path) and, for a CSV with a header, ``"columns"``.

    Raises:
        TraceError: missing file, unknown extension, wrong shape (not 2-D, empty), wrong dtype (object,
            strings, complex, bool), a non-finite value (the message gives the row and column), ragged or
            non-numeric CSV lines (the message gives the line), an unreadable sidecar. Every message starts
            with the file path.
    """
    path = Path(path)
    suffix = _suffix(path)
    if not path.is_file():
        raise TraceError(f"{path}: trace file not found")
    side_name, metadata = _read_sidecar(path)
    columns = None
    if suffix == ".npy":
        arr = _load_npy(path)
        if arr.dtype.kind not in "fiu":
            raise TraceError(f"{path}: wrong dtype {arr.dtype}: a trace must hold real numbers (float or int)")
    else:
        arr, columns = _load_csv(path)
    if arr.ndim != 2:
        hint = "; reshape a 1-D context to (T, 1)" if arr.ndim == 1 else ""
        raise TraceError(f"{path}: wrong shape {arr.shape}: expected a 2-D (T, d) array{hint}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise TraceError(f"{path}: wrong shape {arr.shape}: the trace is empty")
    arr = arr.astype(np.float64, copy=False)
    bad = ~np.isfinite(arr)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise TraceError(f"{path}: non-finite value {arr[row, col]} at row {row}, column {col} (0-based data rows) "
                         f"({int(bad.any(axis=1).sum())} bad rows in all)")
    if columns is not None:
        metadata["columns"] = columns
    metadata["source"] = str(path)
    return ContextTrace(arr, name or side_name or path.stem, metadata)
