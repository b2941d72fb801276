"""Atomic file writes (no torch import): a reader sees either the old file or the complete new one.

Every result file of the project (summaries, episode tables, traces, checkpoints) is written through here:
the content goes to a temporary file in the destination folder, is flushed and fsynced, given the usual
permissions (``0666 & ~umask``; ``mkstemp`` would leave ``0600``), and renamed over the destination; the
folder is then fsynced so that the rename itself is durable.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Callable

import numpy as np

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_text", "atomic_write_json", "fsync_dir", "json_default"]


#: errnos of ``open`` on a folder meaning "folders cannot be opened here" (Windows: EACCES; some systems: EISDIR)
_DIR_OPEN_UNSUPPORTED = frozenset({errno.EACCES, errno.EISDIR})
#: errnos of ``fsync`` on a folder meaning "folders cannot be synchronised here", not "the data was lost":
#: EINVAL (POSIX and Linux fsync(2): a descriptor that does not support synchronisation), ENOTSUP/EOPNOTSUPP
#: (file systems without the operation: some network and FUSE mounts), ENOSYS (not implemented), EBADF (systems
#: that fsync only descriptors open for writing, which a folder's never is). The same list PostgreSQL's
#: ``fsync_fname_ext`` ignores for folders (EBADF, EINVAL), plus the explicit "not supported" codes.
_DIR_FSYNC_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EBADF})


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush a folder's entries (a rename or a new file in it) to disk, so they survive a power loss.

    Where the platform or file system cannot synchronise a folder (``_DIR_OPEN_UNSUPPORTED``,
    ``_DIR_FSYNC_UNSUPPORTED``: e.g. Windows, some network mounts) this is a no-op; every other error, an EIO
    above all, means the folder's entries may not be on disk, and is raised.

    Raises:
        OSError: with the original errno and a one-line message naming the folder.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        if exc.errno in _DIR_OPEN_UNSUPPORTED:
            return
        raise OSError(exc.errno, f"cannot open folder {os.fspath(path)} to flush it to disk: "
                                 f"{exc.strerror or exc}") from None
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _DIR_FSYNC_UNSUPPORTED:
            raise OSError(exc.errno, f"flushing folder {os.fspath(path)} to disk failed ({exc.strerror or exc}): "
                                     "the files just written there may be lost") from None
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> None:
    """Write ``path`` atomically; ``write(handle)`` streams the content into a binary file handle.

    Raises:
        OSError: if the folder cannot be written (the temporary file is removed).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Atomically write ``data``."""
    atomic_write(path, lambda handle: handle.write(data))


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Atomically write a UTF-8 text file."""
    atomic_write_bytes(path, text.encode("utf-8"))


def json_default(obj: Any) -> Any:
    """``json.dumps`` fallback: NumPy scalars and arrays, paths."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Atomically write ``obj`` as indented, key-sorted JSON (NumPy values converted)."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=json_default) + "\n")
