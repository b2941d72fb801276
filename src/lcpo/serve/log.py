"""The append-only transition log: every accepted request, written before its answer is sent.

Layout (``STATE/log/``): segments ``<first record index, 12 digits>.jsonl``; one record per line,
``<JSON object>\\t<CRC-32 of the JSON bytes, 8 hex digits>\\n``, each object carrying its record index ``"#"``
(float32 observations as ``{"f32": base64 of their little-endian bytes}``: exact, and cheap to write).
A new segment starts when the current one passes ``segment_bytes``; segments whose records all lie before the
committed checkpoint's position may be deleted (:meth:`TransitionLog.discard_before`).

**Durability.** :meth:`TransitionLog.append` hands the line to the kernel with ``os.write`` (an unbuffered file
descriptor) before it returns, so a killed process (``kill -9``) loses nothing it acknowledged: the kernel's
page cache outlives the process. ``fsync`` decides what survives a power loss or a kernel crash:

* ``"always"``: ``fdatasync`` before every answer (nothing acknowledged is lost; the slowest);
* ``"interval"`` (default): a background thread runs ``fdatasync`` every ``fsync_interval_s`` (a power loss
  loses at most that much acknowledged history);
* ``"never"``: the kernel writes back on its own schedule (typically within 30 s).

**Recovery** (:meth:`TransitionLog.open`): a torn last line (a write cut by the kill) fails its CRC or lacks its
newline; it was never acknowledged and is cut off. A bad line anywhere else, or a gap in the record indices,
is corruption and is refused, naming the file and line.
"""

from __future__ import annotations

import base64
import errno
import os
import threading
import zlib
from pathlib import Path
from typing import Iterator

import numpy as np

from lcpo.serve.protocol import dumps, loads

__all__ = ["LogError", "TransitionLog", "LogReader", "discard_segments", "FSYNC_POLICIES"]

FSYNC_POLICIES = ("always", "interval", "never")
#: the longest ``fsync_interval_s`` (seconds): a power loss loses at most this much acknowledged history
MAX_FSYNC_INTERVAL_S = 3600.0


class LogError(ValueError):
    """The log is corrupt (not only a torn last line) or does not continue the checkpoint; names file and line."""


def _array(obj):
    if isinstance(obj, np.ndarray) and obj.dtype == np.float32:
        return {"f32": base64.b64encode(obj.astype("<f4").tobytes()).decode("ascii")}
    raise TypeError(f"a log record cannot hold a {type(obj).__name__}")


def _encode(rec: dict) -> bytes:
    body = dumps(rec, default=_array)  # records hold validated finite numbers only (lcpo.serve.protocol)
    return body + b"\t%08x\n" % zlib.crc32(body)


def _decode(line: bytes) -> dict | None:
    """The record of one complete line (without its newline), or None if its CRC or JSON is bad."""
    body, sep, crc = line.rpartition(b"\t")
    if not sep or len(crc) != 8:
        return None
    try:
        if int(crc, 16) != zlib.crc32(body):
            return None
        rec = loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return rec if isinstance(rec, dict) and isinstance(rec.get("#"), int) else None


class TransitionLog:
    """Append-only, segmented, CRC-checked record log (module docstring).

    Args:
        folder: the log folder (created).
        fsync: ``"always"``, ``"interval"`` or ``"never"``.
        fsync_interval_s: period of the background ``fdatasync`` under ``"interval"``.
        segment_bytes: size after which a new segment starts.

    Raises:
        ValueError: an unknown fsync policy or a non-positive interval.
    """

    def __init__(self, folder: str | Path, fsync: str = "interval", fsync_interval_s: float = 0.05,
                 segment_bytes: int = 64 << 20):
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync must be one of {', '.join(FSYNC_POLICIES)}, got {fsync!r}")
        if not 0 < fsync_interval_s <= MAX_FSYNC_INTERVAL_S:  # (inf would crash the sync thread: no sync at all)
            raise ValueError(f"fsync_interval_s must be in (0, {MAX_FSYNC_INTERVAL_S:g}] seconds, got "
                             f"{fsync_interval_s!r}")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.fsync, self.interval, self.segment_bytes = fsync, float(fsync_interval_s), int(segment_bytes)
        self.next_index = 0
        self._fd: int | None = None
        self._size = 0
        self._lock = threading.Lock()
        self._dirty = False
        self._sync_error: OSError | None = None  # a failed background sync, raised by the next append
        self._stop = threading.Event()
        self._syncer: threading.Thread | None = None

    # -- reading -------------------------------------------------------------------------------------------------
    def segments(self) -> list[Path]:
        """The segment files, oldest first."""
        return sorted(p for p in self.folder.glob("*.jsonl") if p.stem.isdigit())

    def open(self, start: int) -> list[dict]:
        """Check the log, cut a torn last line, open it for appending, and return the records from ``start`` on.

        Args:
            start: the first record index wanted (the checkpoint's position; 0 without a checkpoint).

        Returns:
            Record dicts in log order (their ``"#"`` runs ``start, start + 1, ...``).

        Raises:
            LogError: for corruption, a gap, or a log that starts after ``start`` (records were lost).
        """
        return list(self._scan(start))

    def _scan(self, start: int) -> Iterator[dict]:
        segs = self.segments()
        expected = None
        for k, seg in enumerate(segs):
            first = int(seg.stem)
            if expected is not None and first != expected:
                raise LogError(f"log segment {seg} starts at record {first}, expected {expected} (a segment is "
                               "missing)")
            data = seg.read_bytes()
            lines = data.split(b"\n")
            tail = lines.pop()  # b"" after a final newline, else a torn line
            index, offset = first, 0
            last = k == len(segs) - 1
            for j, line in enumerate(lines):
                rec = _decode(line)
                if rec is None or rec["#"] != index:
                    if last and j == len(lines) - 1 and not tail:
                        lines = lines[:j]
                        tail = b"torn"
                        break
                    raise LogError(f"log segment {seg} line {j + 1} is corrupt (bad CRC, JSON or record index)")
                if index >= start:
                    yield rec
                index += 1
                offset += len(line) + 1
            if tail:
                if not last:
                    raise LogError(f"log segment {seg} ends without a newline but is not the last segment")
                with open(seg, "r+b") as fh:  # a torn line is never acknowledged: cut it off
                    fh.truncate(offset)
                    os.fsync(fh.fileno())
            expected = index
        if segs and int(segs[0].stem) > start:
            raise LogError(f"the log starts at record {int(segs[0].stem)} but the checkpoint needs record {start} "
                           f"on (records were deleted from {self.folder})")
        if expected is not None and expected < start:
            raise LogError(f"the log ends at record {expected} but the checkpoint was taken at record {start}")
        self.next_index = start if expected is None else expected
        self._open_segment(segs[-1] if segs else None)
        if self.fsync == "interval":
            self._syncer = threading.Thread(target=self._sync_loop, name="lcpo-serve-fsync", daemon=True)
            self._syncer.start()

    def _open_segment(self, path: Path | None) -> None:
        if path is None:
            path = self.folder / f"{self.next_index:012d}.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
        self._fd = fd
        self._size = os.fstat(fd).st_size
        from lcpo.persistence.atomic import fsync_dir

        fsync_dir(self.folder)

    # -- writing ---------------------------------------------------------------------------------------------------
    def append(self, rec: dict) -> int:
        """Write one record (its ``"#"`` is set here) and, under ``fsync="always"``, sync it; returns its index.

        Raises:
            OSError: if the write fails (the partial line, if any, is cut off again; nothing is appended).
        """
        rec["#"] = self.next_index
        line = _encode(rec)
        with self._lock:
            if self._sync_error is not None:  # records acknowledged before it may not be on disk: stop here
                err = self._sync_error
                del rec["#"]
                raise OSError(err.errno, f"the transition log in {self.folder} could not be flushed to disk "
                                         f"({err.strerror or err}); records acknowledged since the last good sync "
                                         "may be lost")
            if self._size >= self.segment_bytes:
                self._open_segment(self.folder / f"{self.next_index:012d}.jsonl")
            view, done = memoryview(line), 0
            try:
                while done < len(line):
                    done += os.write(self._fd, view[done:])
                if self.fsync == "always":
                    os.fdatasync(self._fd)
            except OSError:
                os.ftruncate(self._fd, self._size)
                del rec["#"]
                raise
            self._size += len(line)
            self._dirty = True
            self.next_index += 1
            return rec["#"]

    def _sync_loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sync()

    def sync(self) -> None:
        """``fdatasync`` the current segment if anything was written since the last sync.

        A failure other than "not supported here" (EINVAL, ENOTSUP, ENOSYS) is kept and raised by the next
        :meth:`append` (this runs on the background thread, where raising would go unseen).
        """
        with self._lock:
            fd, dirty = self._fd, self._dirty
            self._dirty = False
        if dirty and fd is not None:
            try:
                os.fdatasync(fd)
            except OSError as exc:  # only "not supported here" is harmless (as for folders: lcpo.persistence.atomic)
                if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS):
                    with self._lock:
                        self._sync_error = self._sync_error or exc

    def discard_before(self, position: int) -> int:
        """Delete segments whose records all lie before ``position`` (covered by a committed checkpoint).

        Returns:
            The number of segments deleted.
        """
        with self._lock:
            return discard_segments(self.folder, position)

    def close(self) -> None:
        """Stop the background sync, sync and close."""
        self._stop.set()
        if self._syncer is not None:
            self._syncer.join()
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)
                os.close(self._fd)
                self._fd = None


def _segments(folder: Path) -> list[Path]:
    return sorted(p for p in Path(folder).glob("*.jsonl") if p.stem.isdigit())


def discard_segments(folder: str | Path, position: int) -> int:
    """Delete the segments of the log in ``folder`` whose records all lie before record ``position`` (a segment
    goes only when the next one starts at or before ``position``, so the segment being appended to, always the
    last, is never deleted). Safe while another process appends: used by a learner process after a checkpoint.

    Returns:
        The number of segments deleted.
    """
    segs = _segments(Path(folder))
    gone = 0
    for seg, nxt in zip(segs, segs[1:]):
        if int(nxt.stem) <= position:
            try:
                seg.unlink()
            except FileNotFoundError:  # deleted by a concurrent discard
                continue
            gone += 1
    return gone


class LogReader:
    """Reads, in order, the records of a log that another process is appending to (the learner process).

    The writer tells the reader how many records it has written completely (``limit`` of :meth:`read`: in
    ``lcpo serve``, a shared counter the server sets after each append); the reader never decodes beyond it, so
    a line being written, or one whose write failed and was cut off again, is never consumed. Each call reads
    from the byte offset after the last record consumed (``os.pread``), and moves to the next segment when the
    current one holds no further complete line and a segment named after the next record exists.

    Args:
        folder: the log folder.
        start: the first record index to read (e.g. a checkpoint's position).

    Raises:
        LogError: (from :meth:`read`) a complete line that fails its CRC or holds another record index than
            expected, or no segment holding record ``start``.
    """

    CHUNK = 64 << 10  # bytes asked for per system call (doubled while one line does not fit)

    def __init__(self, folder: str | Path, start: int):
        self.folder = Path(folder)
        self.next_index = int(start)
        self._fd: int | None = None
        self._path: Path | None = None
        self._offset = 0

    def _open_first(self) -> None:
        segs = [p for p in _segments(self.folder) if int(p.stem) <= self.next_index]
        if not segs:
            raise LogError(f"no log segment in {self.folder} holds record {self.next_index}")
        self._open(segs[-1])
        first = int(segs[-1].stem)
        skip = self.next_index - first  # records of this segment before the start: skip their lines
        size = self.CHUNK
        while skip > 0:
            data = os.pread(self._fd, size, self._offset)
            pos = 0
            while skip > 0:
                nl = data.find(b"\n", pos)
                if nl < 0:
                    break
                pos, skip = nl + 1, skip - 1
            if pos == 0:
                if data and len(data) == size:  # a line longer than what was read
                    size *= 2
                    continue
                raise LogError(f"log segment {self._path} ends before record {self.next_index}")
            self._offset += pos
            size = self.CHUNK

    def _open(self, path: Path) -> None:
        self.close()
        self._fd = os.open(path, os.O_RDONLY)
        self._path, self._offset = path, 0

    def read(self, limit: int) -> list[dict]:
        """The records with index in ``[next_index, limit)`` that are complete on disk, in order (fewer if the
        writer's data is not all visible yet; the rest comes with a later call).

        Raises:
            LogError: a corrupt line or a record index out of sequence (names file and line offset).
        """
        out: list[dict] = []
        if self.next_index >= limit:
            return out
        if self._fd is None:
            self._open_first()
        size = self.CHUNK
        while self.next_index < limit:
            data = os.pread(self._fd, size, self._offset)
            end = data.rfind(b"\n")
            if end < 0 and len(data) == size:  # a line longer than what was read: read more of it at once
                size *= 2
                continue
            size = self.CHUNK
            if end < 0:  # nothing complete here: the next segment, if the writer has started it
                nxt = self.folder / f"{self.next_index:012d}.jsonl"
                if nxt != self._path and nxt.exists():
                    self._open(nxt)
                    continue
                break
            pos = 0
            while pos <= end and self.next_index < limit:
                nl = data.index(b"\n", pos)
                rec = _decode(data[pos:nl])
                if rec is None or rec["#"] != self.next_index:
                    raise LogError(f"log segment {self._path} at byte {self._offset + pos} is corrupt (bad CRC, "
                                   f"JSON or record index; expected record {self.next_index})")
                out.append(rec)
                self.next_index += 1
                pos = nl + 1
            self._offset += pos
        return out

    def close(self) -> None:
        """Close the open segment (a later :meth:`read` finds record ``next_index`` again)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
