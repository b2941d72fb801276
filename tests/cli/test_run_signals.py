"""Ctrl-C or SIGTERM during `lcpo run`: the running runs checkpoint where they stand (not at their last periodic
checkpoint), the command says how to resume and exits 128 + the signal, and the resumed run equals an
uninterrupted one."""

from __future__ import annotations

import os
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
