"""One writer per run folder: an advisory lock file (``fcntl.flock``) held while a run writes its folder.

The lock is ``<run folder>/.lock``; its holder writes its process id, host name and start time into it (for the
message a second writer gets). The kernel releases an ``flock`` lock when its holder exits, however it exits
(``kill -9`` included), so a lock left behind by a dead process is never in force: the next writer simply takes
it, and overwrites the holder line. Nothing has to be cleaned up by hand.

A second writer either refuses at once (:class:`RunFolderBusy`, the default: ``lcpo run``) or waits until the
folder is free (``wait=True``: the sweep runner, so that a task that Dask runs again while its first copy is
still alive waits for that copy and then finds its result). Holding is re-entrant within one thread (the sweep
runner takes the lock, then ``lcpo.online.run.execute`` takes it again); another thread of the same process is a
second writer like any other.

``flock`` works on local file systems and on NFS (Linux maps it to NFS byte-range locks); on a shared file
system that does not support locks, acquiring raises ``OSError``.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import threading
import time
from pathlib import Path

__all__ = ["LOCK_NAME", "RunFolderBusy", "RunLock", "lock_holder", "lock_in_force"]

#: File name of the lock inside a run folder.
LOCK_NAME = ".lock"

_held = threading.local()  # per thread: {resolved folder: re-entry count}


class RunFolderBusy(RuntimeError):
    """Another process (or thread) holds the run folder's lock; the message names the folder and the holder."""


def lock_holder(folder: str | Path) -> dict | None:
    """The holder line of ``folder``'s lock file (``{"pid", "host", "since"}``), or None if unreadable.

    The line stays in the file after its holder exits; whether it is in force is what :class:`RunLock` tells.
    """
    try:
        return json.loads((Path(folder) / LOCK_NAME).read_text())
    except (OSError, ValueError):
        return None


def lock_in_force(folder: str | Path) -> bool:
    """Whether a process holds ``folder``'s lock now, probed read-only: the lock file is opened for reading and a
    shared lock tried and dropped at once, so nothing is written (unlike :class:`RunLock`, which writes its holder
    line). False where there is no lock file, and on a file system without locks, where the probe cannot tell."""
    try:
        fh = open(Path(folder) / LOCK_NAME, "rb")  # noqa: SIM115 - closed below
    except OSError:
        return False
    try:
        fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:  # held: EWOULDBLOCK; a file system without locks (ENOLCK, ...) cannot tell: not held
        return exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)
    else:
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False
    finally:
        fh.close()


def _describe(folder: Path) -> str:
    h = lock_holder(folder)
    if not h:
        return "another process"
    return f"process {h.get('pid')} on host {h.get('host')} (since {h.get('since')})"


class RunLock:
    """Exclusive lock of one run folder, as a context manager.

    Args:
        folder: the run folder (must exist).
        wait: False: raise :class:`RunFolderBusy` at once if the folder is held; True: wait until it is free;
            a number: wait at most that many seconds, then raise.
        poll_s: seconds between attempts while waiting.

    Raises:
        RunFolderBusy: (on entering) the folder is held by another writer and ``wait`` did not allow waiting
            (long enough); the message names the folder, the lock file and the holder's pid and host.
        OSError: the lock file cannot be created or the file system does not support locks.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     with RunLock(d):
        ...         with RunLock(d):      # re-entrant in the same thread
        ...             lock_holder(d)["pid"] == os.getpid()
        True
    """

    def __init__(self, folder: str | Path, wait: bool | float = False, poll_s: float = 0.1):
        self.folder = Path(folder)
        self.wait = wait
        self.poll_s = float(poll_s)
        self._fh = None
        self._key = None

    def _counts(self) -> dict:
        if not hasattr(_held, "counts"):
            _held.counts = {}
        return _held.counts

    def acquire(self) -> "RunLock":
        """Take the lock (see the class docstring); returns ``self``."""
        key = str(self.folder.resolve())
        counts = self._counts()
        if counts.get(key):
            counts[key] += 1
            self._key = key
            return self
        path = self.folder / LOCK_NAME
        deadline = None if self.wait is True or self.wait is False else time.monotonic() + float(self.wait)
        while True:
            fh = open(path, "a+")  # noqa: SIM115 - held until release()
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                fh.close()
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                if self.wait is False or (deadline is not None and time.monotonic() >= deadline):
                    raise RunFolderBusy(
                        f"run folder {self.folder} is in use by {_describe(self.folder)} (lock {path}); wait "
                        "for it to finish, or use another folder") from None
                time.sleep(self.poll_s)
                continue
            # the file may have been replaced between open and flock (a cleanup removed the folder's lock):
            # hold the lock only on the file that is at the path now
            try:
                same = os.fstat(fh.fileno()).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                fh.close()
                if not self.folder.is_dir():
                    raise FileNotFoundError(f"run folder {self.folder} was removed while waiting for its lock")
                continue
            break
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                             "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}) + "\n")
        fh.flush()
        self._fh, self._key = fh, key
        counts[key] = 1
        return self

    def release(self) -> None:
        """Release (the outermost release of a thread closes the file, which drops the lock)."""
        if self._key is None:
            return
        counts = self._counts()
        counts[self._key] -= 1
        if counts[self._key] == 0:
            del counts[self._key]
            if self._fh is not None:
                fcntl.flock(self._fh, fcntl.LOCK_UN)
                self._fh.close()
        self._fh, self._key = None, None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
