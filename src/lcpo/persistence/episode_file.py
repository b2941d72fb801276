"""A run folder's ``episodes.csv``, written append-only so that a checkpoint records where it ends, not its rows.

A long run ends millions of episodes. Rewriting the whole table at every checkpoint, and keeping a copy of it in
every checkpoint, made both grow with the run: at 12.55M steps of windy InvertedPendulum (5.0M episodes) one
seed's checkpoint held 743 MB of JSON and took about 50 s to write, so a run's checkpoint cost grew with the
square of its length. Here a checkpoint appends only the rows that ended since the last one, fsyncs the file and
records a *marker*: the number of rows, the file's length in bytes and the SHA-256 of those bytes (kept as a
running hash, so a checkpoint reads nothing back). A resume (:meth:`EpisodeFile.restore`) reads the file up to
the marker, checks its hash and row count, and parses the rows back; the next write first cuts off whatever a
stopped process appended after the marker. Values round-trip exactly: integers as written, floats written by
``repr`` (the shortest string that parses back to the same double) and parsed by NumPy as ``float()``
parses them.

Atomicity: the file's first write (header and the rows so far) is atomic
(:func:`lcpo.persistence.atomic.atomic_write_bytes`); later writes append. A crash part-way through an append
leaves a partial last line *after* the last marker, which the resume removes; a finished run's file is complete
before its ``summary.json`` is written. If the file no longer holds what this process wrote (removed, shortened,
or replaced by another file), or is hard-linked elsewhere (a ``cp -al`` copy of the run folder, which an append
would change too), the next write rewrites it whole, atomically, from the rows in memory. So does a row wider than
the table (an environment that reports a context only from some episode on): the header widens, and a resume from
a checkpoint taken before that accepts the wider file if its rows, written at the checkpoint's width, give the
bytes the checkpoint recorded.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
from pathlib import Path

import numpy as np

from lcpo.online.episodes import EpisodeRows
from lcpo.online.loop import EPISODE_COLUMNS
from lcpo.persistence.atomic import atomic_write_bytes

__all__ = ["EpisodeFile"]


def _identity(st: os.stat_result) -> tuple:
    """Which file, as last changed: a file removed and written again (even on a reused inode) differs."""
    return st.st_dev, st.st_ino, st.st_mtime_ns


class EpisodeFile:
    """``episodes.csv``: a header ``episode,step,return,length`` plus one ``context_mean_<name>`` column per
    context dimension, then one line per episode row (see :class:`lcpo.online.episodes.EpisodeRows`).

    Args:
        path: the file (its folder must exist when :meth:`write` is first called).
        context_names: names of the context dimensions, used for the header; dimensions beyond them are named
            ``context_mean_<i>``.
    """

    def __init__(self, path: str | Path, context_names=()):
        self.path = Path(path)
        self.context_names = tuple(context_names)
        self._rows: int | None = None  # rows the file holds, as far as this object knows; None: rewrite it whole
        self._bytes = 0
        self._hash = hashlib.sha256()
        self._file_id: tuple | None = None  # (st_dev, st_ino, st_mtime_ns) of the file as last written or restored
        self._width: int | None = None  # values per row under the file's header

    def header(self, width: int) -> list[str]:
        """The column names for rows of ``width`` values."""
        ctx = [f"context_mean_{n}" for n in self.context_names][: max(0, width - 4)]
        ctx += [f"context_mean_{i}" for i in range(len(ctx), width - 4)]
        return list(EPISODE_COLUMNS) + ctx

    def _header_bytes(self, width: int) -> bytes:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(self.header(width))  # quoted where a name needs it
        return buf.getvalue().encode("utf-8")

    @staticmethod
    def _lines(rows: list[tuple]) -> bytes:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        return buf.getvalue().encode("utf-8")

    def write(self, rows: EpisodeRows) -> None:
        """Bring the file up to ``rows``: append the rows it does not hold yet, then fsync.

        The first write (or one after the file changed under this object, or before any row) writes the whole
        file atomically. With no rows yet the file holds only the 4-column header, and the first row rewrites it.

        Raises:
            OSError: the file or its folder cannot be written.
        """
        n = len(rows)
        if self._rows is not None and n >= self._rows and rows.width == self._width:
            try:
                st = os.stat(self.path)
                # another file, or one hard-linked elsewhere (a `cp -al` copy of the folder): rewritten, not shared
                size = st.st_size if _identity(st) == self._file_id and st.st_nlink == 1 else -1
            except FileNotFoundError:
                size = -1
            if size >= self._bytes:
                if n > self._rows or size > self._bytes:
                    data = self._lines(rows[self._rows:])
                    fd = os.open(self.path, os.O_WRONLY)
                    try:
                        os.ftruncate(fd, self._bytes)  # what a stopped process appended after the last marker
                        view, at = memoryview(data), self._bytes
                        while view:
                            done = os.pwrite(fd, view, at)
                            view, at = view[done:], at + done
                        os.fsync(fd)
                        self._file_id = _identity(os.fstat(fd))
                    finally:
                        os.close(fd)
                    self._hash.update(data)
                    self._rows, self._bytes = n, self._bytes + len(data)
                return
        self._rewrite(rows)

    def _rewrite(self, rows: EpisodeRows) -> None:
        n = len(rows)
        self._width = rows.width or 4
        data = self._header_bytes(self._width) + self._lines(list(rows))
        atomic_write_bytes(self.path, data)
        self._file_id = _identity(os.stat(self.path))
        if n == 0:  # the width is not known yet: the first row rewrites the header
            self._rows, self._bytes, self._hash = None, 0, hashlib.sha256()
        else:
            self._rows, self._bytes, self._hash = n, len(data), hashlib.sha256(data)

    def marker(self) -> dict:
        """Where the file ends as last written: ``{"rows": int, "bytes": int, "sha256": hex str, "width": int}``
        (0 rows and 0 bytes, width None, before the first row)."""
        if not self._rows:
            return {"rows": 0, "bytes": 0, "sha256": hashlib.sha256().hexdigest(), "width": None}
        return {"rows": self._rows, "bytes": self._bytes, "sha256": self._hash.hexdigest(), "width": self._width}

    def restore(self, marker: dict) -> EpisodeRows:
        """Read back the rows a checkpoint's :meth:`marker` counts, and carry on appending after them.

        Nothing is written: the next :meth:`write` cuts the file at the marker before appending.

        Returns:
            The rows, equal bit for bit to those written.

        Raises:
            lcpo.persistence.checkpoint.CheckpointError: the marker is malformed; the file is missing, shorter
                than the marker, differs from what was written (SHA-256), or does not parse into the marker's
                number of rows (the message names the file and the figures).
        """
        from lcpo.persistence.checkpoint import CheckpointError

        rows, size, digest, width = self._check_marker(marker)
        if rows == 0:
            self._rows, self._bytes, self._hash, self._width = None, 0, hashlib.sha256(), None
            return EpisodeRows()
        fix = "restore the file from a copy, or delete the run folder to start the run afresh"
        try:
            st = os.stat(self.path)
            have = st.st_size
            with open(self.path, "rb") as f:
                data = f.read(size)
        except FileNotFoundError:
            raise CheckpointError(f"{self.path}: missing, but the checkpoint counts {rows:,} episode rows in it "
                                  f"({fix})") from None
        except IsADirectoryError:
            raise CheckpointError(f"{self.path}: is a folder, not the run's episode table ({fix})") from None
        if have < size:
            raise CheckpointError(f"{self.path}: holds {have:,} bytes, but the checkpoint's {rows:,} episode rows "
                                  f"end at byte {size:,}: the file was cut short or replaced ({fix})")
        h = hashlib.sha256(data)
        if h.hexdigest() == digest and data.endswith(b"\n"):
            arr = self._parse(data)
            self._file_id, self._width = _identity(st), arr.shape[1]
        else:
            arr = self._widened(rows, digest, width)  # a row wider than the table rewrote it after the checkpoint
            if arr is None:
                raise CheckpointError(f"{self.path}: its first {size:,} bytes differ from those the checkpoint "
                                      f"recorded (SHA-256): the file was changed after the checkpoint ({fix})")
            self._rows = None  # the next write rewrites the file at the checkpoint's width
            return EpisodeRows(arr)
        if arr.shape[0] != rows:
            raise CheckpointError(f"{self.path}: its first {size:,} bytes hold {arr.shape[0]:,} episode rows, the "
                                  f"checkpoint counts {rows:,}")
        self._rows, self._bytes, self._hash = rows, size, h
        return EpisodeRows(arr)

    def _check_marker(self, marker) -> tuple[int, int, str, int | None]:
        from lcpo.persistence.checkpoint import CheckpointError

        ok = isinstance(marker, dict)
        vals = [marker.get(k) for k in ("rows", "bytes", "sha256", "width")] if ok else [None] * 4
        rows, size, digest, width = vals
        ok = (ok and all(type(v) is int and v >= 0 for v in (rows, size)) and isinstance(digest, str)
              and len(digest) == 64 and (width is None or (type(width) is int and width >= 4)))
        if not ok:
            raise CheckpointError(f"{self.path}: the checkpoint's episode-file marker is malformed: {marker!r}")
        return rows, size, digest, width

    def _widened(self, rows: int, digest: str, width: int | None) -> np.ndarray | None:
        """The checkpoint's rows from a file rewritten wider after it (an episode reported more context values
        than the table had: :meth:`write` rewrote the whole file with a wider header, and the process stopped
        before its next checkpoint). The rows are taken back at the checkpoint's width only if writing them at
        that width gives the bytes the checkpoint recorded. None if not."""
        if width is None:
            return None
        from lcpo.persistence.checkpoint import CheckpointError

        data = self.path.read_bytes()
        data = data[: data.rfind(b"\n") + 1]  # a line a stopped process left cut short is not a row
        try:
            arr = self._parse(data)
        except CheckpointError:
            return None
        if arr.shape[1] <= width or arr.shape[0] < rows:
            return None
        arr = np.ascontiguousarray(arr[:rows, :width])
        back = EpisodeRows(arr)
        if hashlib.sha256(self._header_bytes(width) + self._lines(list(back))).hexdigest() != digest:
            return None
        return arr

    def _parse(self, data: bytes) -> np.ndarray:
        from lcpo.persistence.checkpoint import CheckpointError

        head, _, body = data.partition(b"\n")
        names = next(csv.reader([head.decode("utf-8", "replace")]), [])
        if names[:4] != list(EPISODE_COLUMNS):
            raise CheckpointError(f"{self.path}: its header starts {names[:4]}, not {list(EPISODE_COLUMNS)}")
        if not body.strip():
            return np.empty((0, len(names)))
        try:  # NumPy's parser converts as float() does: the double repr() wrote, bit for bit
            arr = np.loadtxt(io.BytesIO(body), delimiter=",", dtype=np.float64, ndmin=2)
        except ValueError as exc:
            raise CheckpointError(f"{self.path}: does not parse as an episode table: "
                                  f"{(str(exc).splitlines() or [type(exc).__name__])[0]}") from None
        if arr.size and (arr.shape[1] != len(names) or not np.isfinite(arr[:, [0, 1, 3]]).all()):
            raise CheckpointError(f"{self.path}: rows of {arr.shape[1]} values under a header of {len(names)}, or an "
                                  "episode, step or length value that is not finite")
        return arr
