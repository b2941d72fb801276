"""Crash injection for persistence tests: a process that dies between two file operations.

While armed, :class:`FileFaults` counts every call of the ``os`` functions that change the file system
(``open`` (creating temporary files), ``write``, ``pwrite``, ``ftruncate``, ``fsync``, ``chmod``, ``mkdir``, ``rename``, ``replace``,
``unlink``, ``remove``, ``rmdir``). Operation number ``crash_at`` (1-based) raises :class:`Crash` instead of
running, and so does every later one: like a killed process, nothing more reaches the disk (no cleanup in
``except``/``finally`` blocks either). Reads (``stat``, ``scandir``, reading files) are not counted.

``fsync`` is counted but not performed (while patched, armed or not): a killed process loses nothing that
reached the page cache, so skipping the flush changes no outcome here and keeps the tests fast.
"""

from __future__ import annotations

import os

_OPS = ("open", "write", "pwrite", "ftruncate", "fsync", "chmod", "mkdir", "rename", "replace", "unlink", "remove", "rmdir")


class Crash(BaseException):
    """The injected crash (a BaseException, so that ``except Exception`` handlers do not swallow it)."""


class FileFaults:
    """Count file operations while armed; crash at operation ``crash_at`` (None: never, only count).

    Use with pytest's ``monkeypatch``: ``FileFaults(monkeypatch, crash_at=k)``, then :meth:`arm` /
    :meth:`disarm` around the code under test.
    """

    def __init__(self, monkeypatch, crash_at: int | None = None):
        self.crash_at = crash_at
        self.count = 0
        self.armed = False
        self.crashed = False
        self.log: list[str] = []
        for name in _OPS:
            real = getattr(os, name)
            monkeypatch.setattr(os, name, self._wrap(name, real))

    def _wrap(self, name, real):
        def op(*args, **kwargs):
            if self.armed:
                if self.crashed:
                    raise Crash(f"dead process: {name}")
                if name == "open" and not (len(args) > 1 and args[1] & os.O_CREAT):
                    return real(*args, **kwargs)  # opening to read (a folder to fsync) changes nothing
                self.count += 1
                self.log.append(f"{name}{args[:1]!r}")
                if self.crash_at is not None and self.count >= self.crash_at:
                    self.crashed = True
                    raise Crash(f"crash before file operation {self.count}: {name}{args[:1]!r}")
            if name == "fsync":
                return None
            return real(*args, **kwargs)

        return op

    def arm(self) -> None:
        self.armed = True

    def disarm(self) -> None:
        self.armed = False
