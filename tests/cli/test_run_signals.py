"""Ctrl-C or SIGTERM during `lcpo run`: the running runs checkpoint where they stand (not at their last periodic
checkpoint), the command says how to resume and exits 128 + the signal, and the resumed run equals an
uninterrupted one."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lcpo.cli.main import main

ARGS = ["run", "--agent", "a2c", "--trace", "wind-3", "--trace-length", "120000", "--steps", "120000", "--seed", "0-1",
        "--checkpoint-every", "40000", "--no-progress", "--set", "hidden=[16]"]


def _generations(run: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in (run / "checkpoint").glob("step-*") if p.is_dir())


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_checkpoints_where_the_runs_stand_and_the_resume_equals_an_unbroken_run(tmp_path, capsys, signum):
    """Before, Ctrl-C lost up to --checkpoint-every steps and SIGTERM ended the run silently (exit 143)."""
    out = tmp_path / "stopped"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "lcpo.cli.main", *ARGS, "--out", str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not _generations(out / "a2c-s0") and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)  # wait for the first periodic checkpoint (step 40,000), then stop between two
        assert _generations(out / "a2c-s0") == [40000], "the run ended or never reached its first checkpoint"
        time.sleep(0.3)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum, err
    name = signal.Signals(signum).name
    assert f"lcpo: stopped by {name}; the runs keep their checkpoints: `lcpo resume {out}` continues them" in err
    stopped = [g[-1] for g in (_generations(out / f"a2c-s{k}") for k in (0, 1))]
    # where it stood (a checkpoint between two periodic ones), both seeds at one step
    assert stopped[0] == stopped[1] and 40000 < stopped[0] < 120000 and stopped[0] % 40000, (stopped, err)
    assert f"a2c seed 0: stopped at step {stopped[0]:,}" in err
    assert not (out / "a2c-s0" / "summary.json").exists()
    if signum != signal.SIGINT:
        return  # one handler serves both signals: the resume is checked once

    assert main(["resume", str(out), "--no-progress"]) == 0
    assert main([*ARGS, "--out", str(tmp_path / "unbroken")]) == 0
    capsys.readouterr()
    for k in (0, 1):
        for f in ("episodes.csv", "diagnostics.csv"):
            assert (out / f"a2c-s{k}" / f).read_bytes() == (tmp_path / "unbroken" / f"a2c-s{k}" / f).read_bytes()


def test_a_signal_during_a_prescient_agents_offline_training_stops_it_there(tmp_path):
    """Before, the process ran the whole offline training (1.6M steps by default, about a minute) before it
    stopped. Now it stops within STOP_POLL_STEPS training steps; no checkpoint, and the last line says so."""
    out = tmp_path / "p"
    common = ["--trace", "wind-3", "--steps", "1000", "--set", "hidden=[16]", "--no-progress", "--out", str(out)]
    assert main(["run", "--agent", "a2c", *common]) == 0  # finished before: not counted among the stopped runs
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "lcpo.cli.main", "run", "--agent", "prescient-a2c", "a2c",
                             "--resume", *common], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "prescient-a2c-s0" / "config.json").is_file() and time.monotonic() < deadline:
            time.sleep(0.05)  # the folder is written just before the training starts
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGINT, err
    m = re.search(r"stopped during the offline training of prescient-a2c at its step ([\d,]+) of 1,600,000", err)
    assert m and 0 < int(m.group(1).replace(",", "")) < 1_600_000, err  # part-way, not after the whole training
    assert ("lcpo: stopped by SIGINT; the run stopped before its first checkpoint (it starts afresh, to the same "
            f"result): `lcpo resume {out}` continues them") in err
    assert not (out / "prescient-a2c-s0" / "checkpoint").exists() or not any(
        (out / "prescient-a2c-s0" / "checkpoint").glob("step-*"))
