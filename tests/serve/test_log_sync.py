"""A failed background sync of the transition log is reported, not swallowed (issue 24 item 5, as for folder
fsync): the next append raises naming the log's folder; "not supported here" is harmless."""

import errno
import os

import pytest

from lcpo.serve.log import TransitionLog


def _log(tmp_path):
    log = TransitionLog(tmp_path / "log", fsync="never")
    log.open(0)
    log.append({"k": 1})
    return log


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC])
def test_a_failed_sync_stops_the_next_append(tmp_path, monkeypatch, code):
    log = _log(tmp_path)
    monkeypatch.setattr(os, "fdatasync", lambda fd: (_ for _ in ()).throw(OSError(code, os.strerror(code))))
    log.sync()
    with pytest.raises(OSError) as info:
        log.append({"k": 2})
    assert info.value.errno == code and str(tmp_path / "log") in str(info.value)
    assert log.next_index == 1  # nothing appended after the failure
    monkeypatch.undo()
    log.close()


@pytest.mark.parametrize("code", [errno.EINVAL, errno.ENOTSUP])
def test_sync_not_supported_here_is_harmless(tmp_path, monkeypatch, code):
    log = _log(tmp_path)
    monkeypatch.setattr(os, "fdatasync", lambda fd: (_ for _ in ()).throw(OSError(code, os.strerror(code))))
    log.sync()
    assert log.append({"k": 2}) == 1
    monkeypatch.undo()
    log.close()
