"""Directory fsync (issue 24 item 5): only "not supported here" errors are ignored; the rest are raised."""

import errno
import os
import stat

import numpy as np
import pytest

from lcpo.persistence.atomic import atomic_write_text, fsync_dir
from lcpo.persistence.checkpoint import RunCheckpoints

UNSUPPORTED = [errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EBADF]
FAILURES = [errno.EIO, errno.ENOSPC, errno.EDQUOT, errno.EROFS]


def _fail_folder_fsync(monkeypatch, code):
    """``os.fsync`` raising ``OSError(code)`` for folders (files are flushed as usual); returns the calls."""
    real, calls = os.fsync, []

    def fsync(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            calls.append(fd)
            raise OSError(code, os.strerror(code))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


@pytest.mark.parametrize("code", UNSUPPORTED, ids=errno.errorcode.get)
def test_folder_fsync_not_supported_here_is_ignored(tmp_path, monkeypatch, code):
    calls = _fail_folder_fsync(monkeypatch, code)
    atomic_write_text(tmp_path / "a.txt", "hello")
    assert (tmp_path / "a.txt").read_text() == "hello" and len(calls) == 1
    fsync_dir(tmp_path)


@pytest.mark.parametrize("code", FAILURES, ids=errno.errorcode.get)
def test_folder_fsync_failure_is_raised_naming_the_folder(tmp_path, monkeypatch, code):
    _fail_folder_fsync(monkeypatch, code)
    with pytest.raises(OSError) as info:
        fsync_dir(tmp_path)
    assert info.value.errno == code
    message = str(info.value)
    assert str(tmp_path) in message and "\n" not in message
    with pytest.raises(OSError, match="flushing folder"):
        atomic_write_text(tmp_path / "a.txt", "hello")


def test_checkpoint_commit_reports_an_eio_of_its_folder(tmp_path, monkeypatch):
    store = RunCheckpoints(tmp_path / "checkpoint")
    store.commit(1, {"x": np.zeros(2)}, {"seed": 0})
    _fail_folder_fsync(monkeypatch, errno.EIO)
    with pytest.raises(OSError) as info:
        store.commit(2, {"x": np.ones(2)}, {"seed": 0})
    assert info.value.errno == errno.EIO and str(tmp_path / "checkpoint") in str(info.value)
    monkeypatch.undo()
    assert store.load()[0] == 1  # the commit point was not passed: the previous checkpoint stands


def test_folder_that_cannot_be_opened_here_is_skipped(tmp_path, monkeypatch):
    real = os.open

    def no_folders(path, flags, *a, **k):
        if os.path.isdir(path):
            raise PermissionError(errno.EACCES, "folders cannot be opened here")
        return real(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", no_folders)
    fsync_dir(tmp_path)
    monkeypatch.setattr(os, "open", lambda *a, **k: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
    with pytest.raises(OSError, match=str(tmp_path)):
        fsync_dir(tmp_path)
