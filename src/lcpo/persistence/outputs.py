"""Output paths checked before a command writes anything: one-line errors naming the path.

Every command that writes files (``lcpo run``, ``sweep``, ``report``, ``figure``, ``traces make``/``import``/
``plot``) checks its ``--out`` here before it computes anything, so that an output it cannot write is refused
at once, with one line naming the path and the reason, and nothing half-written (issue 24). A write that still
fails later (a disk that fills, a folder removed meanwhile) is an ``OSError`` naming its file, which
:func:`lcpo.cli.main.main` prints as one line as well.

The check does not rely on permission bits alone (root passes those): the nearest existing folder on the way
must take a probe file (created and removed at once), so a read-only file system or a path under a regular
file (``notes.txt/out``) is refused for every user.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["OutputError", "check_output_dir", "check_output_file"]


class OutputError(ValueError):
    """An output path that cannot be written; the message names it and says why (one line)."""


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and not p.is_symlink():
        if p.parent == p:
            break
        p = p.parent
    return p


def _writable_folder(folder: Path, what: str, path: Path) -> None:
    if not folder.is_dir():
        raise OutputError(f"{what} {path}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{what} {path}: cannot write in {folder} (permission denied or a read-only file system)")
    import tempfile

    try:  # the file system has the last word (root on a read-only mount, /proc): a probe file, removed at once
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".lcpo-write-check-")
    except OSError as exc:
        import errno

        # the folder is there, so ENOENT is the file system refusing new files (procfs, sysfs), not a missing path
        why = ("its file system does not accept new files" if exc.errno == errno.ENOENT
               else exc.strerror or str(exc))
        raise OutputError(f"{what} {path}: cannot write in {folder}: {why}") from None
    os.close(fd)
    os.unlink(probe)


def check_output_dir(path: str | os.PathLike, what: str = "--out", create: bool = False) -> Path:
    """Check that folder ``path`` exists and can be written, or can be created; optionally create it.

    Args:
        path: the output folder.
        what: how the user named it, for the message (``"--out"``, ``"report folder"``).
        create: create the folder (and missing parents) once the check passed.

    Returns:
        ``Path(path)``.

    Raises:
        OutputError: (a ValueError) ``path`` is an existing file; a parent of it is a file; the nearest existing
            folder on the way cannot be written; or creating it failed. The message names ``path`` and the
            folder at fault.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{what} {path} is an existing file, not a folder")
    _writable_folder(_nearest_existing(path), what, path)
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{what} {path}: cannot create it: {exc.strerror or exc}") from None
    return path


def check_output_file(path: str | os.PathLike, what: str = "--out", create_parent: bool = False,
                      missing_parent_ok: bool = False) -> Path:
    """Check that file ``path`` can be written (created or replaced): its folder exists (or, with
    ``create_parent`` or ``missing_parent_ok``, can be created) and can be written, and ``path`` is not a folder.

    Args:
        path: the file.
        what: how the user named it, for the message.
        create_parent: create the missing folders once the check passed.
        missing_parent_ok: accept missing folders that could be created, without creating them (a command that
            checks first and writes later, once its input is known good, creates them then).

    Returns:
        ``Path(path)``.

    Raises:
        OutputError: (a ValueError) ``path`` is a folder, its folder is missing (without ``create_parent`` or
            ``missing_parent_ok``), a parent is a file, or the folder cannot be written; the message names
            ``path``.
    """
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{what} {path} is a folder; give a file name")
    parent = path.parent
    if not (create_parent or missing_parent_ok) and not parent.exists():
        existing = _nearest_existing(parent)
        if not existing.is_dir():
            raise OutputError(f"{what} {path}: {existing} is a file, not a folder")
        raise OutputError(f"{what} {path}: folder {parent} does not exist")
    _writable_folder(_nearest_existing(parent), what, path)
    if create_parent:
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{what} {path}: cannot create its folder {parent}: {exc.strerror or exc}") from None
    return path
