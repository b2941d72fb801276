"""``lcpo serve`` as a user meets it from a terminal: Ctrl-C, a port that is taken or meaningless, an unknown
agent on a state folder that exists."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time

import pytest

from serve_cli import SPEC
from serve_cli import free_port as _free_port
from serve_cli import serve_process as _serve


def _wait_ready(http, proc) -> None:
    import httpx

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited with {proc.returncode} while starting: {proc.stderr.read()}"
        try:
            if http.get("/v1/status").json()["learner_ready"]:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("server did not start within 180 s")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups, /proc")
def test_ctrl_c_drains_checkpoints_and_exits_0_as_sigterm_does(tmp_path):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("uvicorn")
    from lcpo.persistence.checkpoint import RunCheckpoints

    port = _free_port()
    proc = _serve(tmp_path, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            _wait_ready(http, proc)
            http.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0]})
            for _ in range(20):
                assert http.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0], "reward": 1.0}).status_code == 200
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole foreground group
        rc = proc.wait(timeout=120)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert rc == 0, err
    assert "lcpo serve: stopped after 20 steps" in err and "lcpo resume" not in err, err
    step, saved = RunCheckpoints(tmp_path / "state/checkpoint").load()
    assert f"checkpoint of the first {step} log records" in err, err  # the record count the checkpoint holds
    assert step == 21 and saved["agent"]["updates"] == 20 // 8


def test_port_zero_is_refused_naming_the_value(tmp_path, capsys):
    from lcpo.cli.main import main

    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    rc = main(["serve", "--spec", str(tmp_path / "spec.json"), "--agent", "a2c", "--state", str(tmp_path / "state"),
               "--port", "0"])
    assert rc == 2 and "--port must be in [1, 65535], got 0" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()


def test_a_port_in_use_is_refused_in_one_line_before_anything_starts(tmp_path, capsys):
    pytest.importorskip("uvicorn")
    from lcpo.cli.main import main

    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        rc = main(["serve", "--spec", str(tmp_path / "spec.json"), "--agent", "a2c", "--state",
                   str(tmp_path / "state"), "--port", str(port)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.strip().splitlines() == [f"lcpo serve: error: cannot listen on 127.0.0.1 port {port}: address already in use"]
    assert not (tmp_path / "state").exists()  # no state folder, no learner process


def test_an_unknown_agent_is_named_as_such_on_an_existing_state_folder(tmp_path, capsys):
    from lcpo.serve.app import ServeConfig, Server

    Server(ServeConfig(agent="a2c", spec=SPEC, state_dir=str(tmp_path / "state"))).close()
    with pytest.raises(ValueError, match="unknown agent 'nope'"):
        Server(ServeConfig(agent="nope", spec=SPEC, state_dir=str(tmp_path / "state")))
    with pytest.raises(ValueError, match="unknown agent 'nope'"):  # and a fresh folder is not made
        Server(ServeConfig(agent="nope", spec=SPEC, state_dir=str(tmp_path / "fresh")))
    assert not (tmp_path / "fresh").exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="state folder .*file is a file"):
        Server(ServeConfig(agent="a2c", spec=SPEC, state_dir=str(tmp_path / "file")))


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan", "1e300"])
def test_a_bad_fsync_interval_is_refused_naming_the_flag_and_the_value(tmp_path, capsys, value):
    from lcpo.cli.main import main
    from lcpo.serve.log import TransitionLog

    with pytest.raises(ValueError, match="fsync_interval_s must be in"):  # inf crashed the sync thread: no sync
        TransitionLog(tmp_path / "log", fsync_interval_s=float(value))
    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    rc = main(["serve", "--spec", str(tmp_path / "spec.json"), "--agent", "a2c", "--state", str(tmp_path / "state"),
               "--fsync-interval", value])
    assert rc == 2 and f"--fsync-interval must be in (0, 3600] seconds, got {float(value)}" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()


def test_a_negative_seed_is_refused_naming_the_flag(tmp_path, capsys):
    from lcpo.cli.main import main

    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    rc = main(["serve", "--spec", str(tmp_path / "spec.json"), "--agent", "a2c", "--state", str(tmp_path / "state"),
               "--seed", "-1"])
    assert rc == 2 and "--seed must be a non-negative integer, got -1" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()
