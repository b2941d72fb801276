"""One writer per run folder: a second process or thread is refused (or waits); a kill -9 frees the lock."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from lcpo.cli.main import main
from lcpo.online.run import RunConfig, execute
from lcpo.persistence.runlock import RunFolderBusy, RunLock, lock_holder

_HOLD = """
import sys, time
from lcpo.persistence.runlock import RunLock
lock = RunLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(120)
"""

_TRY = """
import sys
from lcpo.persistence.runlock import RunFolderBusy, RunLock
try:
    RunLock(sys.argv[1]).acquire()
except RunFolderBusy as exc:
    print(exc)
    sys.exit(3)
print("acquired")
"""


def _holder(folder):
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_second_process_is_refused_naming_the_holder(tmp_path):
    proc = _holder(tmp_path)
    try:
        r = subprocess.run([sys.executable, "-c", _TRY, str(tmp_path)], capture_output=True, text=True)
        assert r.returncode == 3, r.stderr
        assert f"run folder {tmp_path} is in use by process {proc.pid} on host" in r.stdout
        assert str(tmp_path / ".lock") in r.stdout
        with pytest.raises(RunFolderBusy, match=f"process {proc.pid}"):
            RunLock(tmp_path).acquire()
    finally:
        proc.kill()
        proc.wait()


def test_lock_of_a_killed_process_is_taken_over(tmp_path):
    """kill -9 leaves the lock file and its holder line behind; the kernel released the lock, so the next
    writer gets it at once and records itself."""
    proc = _holder(tmp_path)
    assert lock_holder(tmp_path)["pid"] == proc.pid
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (tmp_path / ".lock").exists() and lock_holder(tmp_path)["pid"] == proc.pid  # stale line left
    t = time.monotonic()
    with RunLock(tmp_path):
        assert lock_holder(tmp_path)["pid"] == os.getpid()
    assert time.monotonic() - t < 1.0


def test_reentrant_in_one_thread_exclusive_between_threads(tmp_path):
    errors = []
    with RunLock(tmp_path):
        with RunLock(tmp_path):  # the sweep runner holds it around execute, which takes it again
            pass

        def other():
            try:
                RunLock(tmp_path).acquire()
            except RunFolderBusy as exc:
                errors.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert len(errors) == 1  # still held after the inner release
    RunLock(tmp_path).acquire().release()  # free after the outer release


def test_waiting_writer_gets_the_lock_when_it_is_released(tmp_path):
    order = []
    first = RunLock(tmp_path).acquire()

    def waiter():
        with RunLock(tmp_path, wait=True, poll_s=0.01):
            order.append("waiter")

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)
    order.append("first done")
    first.release()
    t.join(5)
    assert order == ["first done", "waiter"]
    held = RunLock(tmp_path).acquire()
    timed_out = []

    def bounded():
        t0 = time.monotonic()
        try:
            RunLock(tmp_path, wait=0.2, poll_s=0.01).acquire()
        except RunFolderBusy:
            timed_out.append(time.monotonic() - t0)

    t = threading.Thread(target=bounded)
    t.start()
    t.join(5)
    held.release()
    assert len(timed_out) == 1 and timed_out[0] >= 0.2


def test_run_refuses_a_folder_another_process_writes(tmp_path, capsys):
    """`lcpo run` on a folder that another process holds: a one-line refusal, and nothing is written."""
    out = tmp_path / "runs" / "a2c-s0"
    out.mkdir(parents=True)
    proc = _holder(out)
    try:
        rc = main(["run", "--agent", "a2c", "--trace", "wind-3", "--trace-length", "2000", "--steps", "200",
                   "--no-progress", "--out", str(tmp_path / "runs")])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and f"in use by process {proc.pid}" in err, err
        assert sorted(p.name for p in out.iterdir()) == [".lock"]
        with pytest.raises(RunFolderBusy):
            execute(RunConfig(agent="a2c", trace="wind-3", trace_length=2000, steps=200), out)
    finally:
        proc.kill()
        proc.wait()
    s = execute(RunConfig(agent="a2c", trace="wind-3", trace_length=2000, steps=200), out)
    assert s["steps"] == 200 and json.loads((out / "summary.json").read_text()) == s
