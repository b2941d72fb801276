"""A learner failure as an operator meets it from a terminal (``lcpo serve`` as a subprocess): one stderr line at
the moment it fails, a stop without a traceback (exit 1, one final line naming ``--resume-learner``), no zombie
learner process and no stale pid or checkpoint position in ``/v1/status``; and a hand-edited failure file that
names a later record than the real failure starts in the failed state instead of crashing."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from lcpo.serve.learner import FAILURE_FILE, load_failures
from serve_cli import SPEC
from serve_cli import free_port as _free_port
from serve_cli import serve_process

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

BIG = 3e38  # six of them overflow the second update's advantages without the return normaliser
FAILED_AT = 12  # record 0 starts the stream; records 1-6 complete update 1; records 7-12 the failing update 2
FAILURE_LINE = f"lcpo serve: the learner failed at log record {FAILED_AT}: ValueError: advantages"


def _serve(tmp_path, port: int, *extra: str):
    return serve_process(tmp_path, port, *extra, sets=("rollout_steps=6", "normalize_returns=false"))


def _until(check, what: str, proc, timeout: float = 180.0):
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited with {proc.returncode}: {proc.stderr.read()}"
        try:
            out = check()
            if out:
                return out
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{what} within {timeout} s")


def _stop(proc) -> tuple[int, str]:
    """SIGTERM, as a service manager sends it; the exit code and the whole stderr."""
    try:
        os.kill(proc.pid, signal.SIGTERM)
        rc = proc.wait(timeout=120)
        return rc, proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _gone(pid: int) -> bool:
    """No process ``pid``, not even a zombie (its parent reaped it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "X"
    except (FileNotFoundError, ProcessLookupError):
        return True


def _latest_step(tmp_path) -> int:
    from lcpo.persistence.checkpoint import RunCheckpoints

    return RunCheckpoints(tmp_path / "state/checkpoint").latest().step


def _assert_clean_failed_stop(rc: int, err: str) -> list[str]:
    assert rc == 1, err
    assert "Traceback" not in err and "Application shutdown failed" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("lcpo serve: stopped without a final checkpoint (the learner failed: learning from log "
                           f"record {FAILED_AT} failed: ValueError: advantages"), err
    assert "--resume-learner retry or skip" in last, err
    return err.strip().splitlines()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, signals")
@pytest.mark.parametrize("learn", ["process", "thread"])
def test_a_learner_failure_is_told_once_and_every_stop_after_it_is_clean(tmp_path, learn):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("uvicorn")
    port = _free_port()
    proc = _serve(tmp_path, port, "--learn", learn)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            pid = _until(lambda: http.get("/v1/status").json()["learner_ready"] and
                         (http.get("/v1/status").json()["learner_pid"] or -1), "server ready", proc)
            steps = [{"stream": "s", "obs": [0, 0, 0]}] + [{"stream": "s", "obs": [0, 0, 0], "reward": r}
                                                           for r in [0.5] * 6 + [BIG] * 6]
            # one burst: the learner checkpoints after update 1 and fails before its next periodic status
            assert http.post("/v1/batch", json={"steps": steps}).status_code == 200
            st = _until(lambda: (s := http.get("/v1/status").json())["error"] and s, "the failure in /v1/status",
                        proc)
            assert st["learner_failed_at"] == FAILED_AT and st["policy_version"] == 1
            assert st["learner_pid"] is None, st  # reaped: no pid of a dead process
            assert st["checkpoint_position"] == _latest_step(tmp_path) == 7, st  # not the last periodic report's
            if learn == "process":
                assert pid > 0 and _gone(pid), "the failed learner process is left a zombie"
            assert http.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0], "reward": 1.0}).json()[
                "policy_version"] == 1
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    lines = _assert_clean_failed_stop(*_stop(proc))
    told = [line for line in lines if line.startswith(FAILURE_LINE)]
    assert len(told) == 1, lines  # said once, when it happened
    assert "serving the last good policy (version 1)" in told[0] and "--resume-learner" in told[0]

    # a restart in the failed state (no learner runs), then --resume-learner retry (fails again): both stop cleanly
    for extra, expect in [((), "lcpo serve: not learning: "), (("--resume-learner", "retry"), FAILURE_LINE)]:
        proc = _serve(tmp_path, port, "--learn", learn, *extra)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                st = _until(lambda: (s := http.get("/v1/status").json())["error"] and s, "the failure", proc)
                assert st["learner_pid"] is None and st["learner_failed_at"] == FAILED_AT, st
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        lines = _assert_clean_failed_stop(*_stop(proc))
        assert sum(line.startswith(expect) for line in lines) == 1, lines
        assert sum(line.startswith(FAILURE_LINE) or line.startswith("lcpo serve: not learning") for line in lines) \
            == 1, lines


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, signals")
def test_a_killed_learner_process_is_told_reaped_and_the_stop_is_clean(tmp_path):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("uvicorn")
    port = _free_port()
    proc = _serve(tmp_path, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            pid = _until(lambda: http.get("/v1/status").json()["learner_ready"] and
                         http.get("/v1/status").json()["learner_pid"], "server ready", proc)
            steps = [{"stream": "s", "obs": [0, 0, 0]}] + [{"stream": "s", "obs": [0, 0, 0], "reward": 0.5}] * 13
            assert http.post("/v1/batch", json={"steps": steps}).status_code == 200
            _until(lambda: http.get("/v1/status").json()["learner_position"] == 14, "learned", proc)
            os.kill(pid, signal.SIGKILL)
            st = _until(lambda: (s := http.get("/v1/status").json())["error"] and s, "the death in /v1/status", proc)
            assert st["learner_pid"] is None and _gone(pid), st
            assert st["checkpoint_position"] == _latest_step(tmp_path) == 13, st
            assert http.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0]}).status_code == 503
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    rc, err = _stop(proc)
    assert rc == 1 and "Traceback" not in err and "Application shutdown failed" not in err, err
    lines = err.strip().splitlines()
    assert sum(line.startswith("lcpo serve: the learner stopped: the learner process exited (exit code -9); "
                               "requests are refused with 503") for line in lines) == 1, lines
    assert lines[-1].startswith("lcpo serve: stopped without a final checkpoint") and "--resume-learner" not in \
        lines[-1], lines


@pytest.mark.parametrize("learn", ["inline", "process"])
def test_a_failure_file_naming_a_later_record_starts_in_the_real_failure(tmp_path, learn):
    from lcpo.serve.app import ServeConfig, Server

    def server(**kw) -> Server:
        return Server(ServeConfig(agent="a2c", spec=SPEC, overrides={"rollout_steps": 6, "normalize_returns": False},
                                  state_dir=str(tmp_path / "state"), learn="inline", keep_log=True,
                                  checkpoint_every=0, **kw))

    srv = server()
    srv.step({"stream": "s", "obs": [0, 0, 0]})
    for r in [0.5] * 6 + [BIG] * 6 + [1.0] * 4:  # records 13-16 logged after the failure
        srv.step({"stream": "s", "obs": [0, 0, 0], "reward": r})
    assert srv.status()["learner_failed_at"] == FAILED_AT
    with pytest.raises(RuntimeError):
        srv.close()
    path = tmp_path / "state" / FAILURE_FILE
    path.write_text(json.dumps({"failed": {"position": 15, "error": "ValueError: edited\nby hand"}, "skipped": []}))
    srv = Server(ServeConfig(agent="a2c", spec=SPEC, overrides={"rollout_steps": 6, "normalize_returns": False},
                             state_dir=str(tmp_path / "state"), learn=learn, keep_log=True, checkpoint_every=0))
    try:  # no LearnerFailure out of the start: the real failure is found in the replay and recorded
        st = srv.status()
        assert st["learner_failed_at"] == FAILED_AT and "advantages" in st["error"] and st["learner_pid"] is None
        assert load_failures(tmp_path / "state")[0].position == FAILED_AT
    finally:
        srv.close_error = None
        with pytest.raises(RuntimeError):
            srv.close()
    # a recorded error with a line break is served on one line
    path.write_text(json.dumps({"failed": {"position": FAILED_AT, "error": "ValueError: two\nlines"}, "skipped": []}))
    srv = server()
    try:
        assert srv.status()["error"] == f"learning from log record {FAILED_AT} failed: ValueError: two lines"
    finally:
        with pytest.raises(RuntimeError):
            srv.close()
