"""Stopping a local sweep (issue 24 item 1): SIGINT or SIGTERM, to the sweep process alone or to its process
group, stops it: no new run starts, running runs checkpoint and stop, every child is reaped, the exit status is
128 + the signal with one line saying how to resume; a second signal stops at once; no process outlives it.

Runs use the fake executor ``lcpo_fake_run`` (``delay`` seconds per 200-step episode). Processes are found
through /proc: everything in the sweep's own session (it is started with ``start_new_session``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import lcpo_fake_run as fake
import numpy as np
import pandas as pd
import pytest

from lcpo.experiments.config import expand, parse_config
from lcpo.experiments.runner import run_dir, run_sweep

FAKE = "lcpo_fake_run"
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def _config(tmp_path: Path, delay: float, stop_delay: float = 0.0) -> tuple[Path, list]:
    d = {"name": "t", "steps": 1200, "seeds": 2, "envs": ["lcpo/WindyPendulum-v0"], "traces": ["wind-1"],
         "agents": ["lcpo", "a2c"], "checkpoint_every": 400, "warmup_steps": 400,
         "env_kwargs": {"lcpo/WindyPendulum-v0": {"delay": delay, "stop_delay": stop_delay}}}
    path = tmp_path / "sweep.toml"
    path.write_text(
        'name = "t"\nsteps = 1200\nseeds = 2\nenvs = ["lcpo/WindyPendulum-v0"]\ntraces = ["wind-1"]\n'
        'agents = ["lcpo", "a2c"]\ncheckpoint_every = 400\nwarmup_steps = 400\n'
        f'[env_kwargs."lcpo/WindyPendulum-v0"]\ndelay = {delay}\nstop_delay = {stop_delay}\n')
    return path, expand(parse_config(d, executor=FAKE), executor=FAKE)


def _session(sid: int) -> dict[int, str]:
    """pid -> state of every process in session ``sid`` (zombies included)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == sid:  # state ppid pgrp session ...
            out[int(entry.name)] = fields[0]
    return out


def _wait_for(predicate, timeout: float = 60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def _started(runs_dir: Path, specs) -> set[str]:
    return {s.run_id for s in specs if (run_dir(runs_dir, s.run_id) / "calls.log").exists()}


def _start(cfg: Path, runs_dir: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lcpo.cli.sweep", str(cfg), "--out", str(runs_dir),
                             "--workers", "2", "--executor", FAKE, "--no-progress"],
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kill_session(proc: subprocess.Popen) -> None:
    for pid in _session(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def _expected(config) -> float:
    rc = fake.RunConfig.from_dict(config)
    return float(np.mean([fake.episode_return(rc, k) for k in range(rc.steps // 200)
                          if (k + 1) * 200 > rc.warmup_steps]))


@pytest.mark.parametrize("signum,target", [
    (signal.SIGTERM, "parent"), (signal.SIGINT, "parent"), (signal.SIGINT, "group"),  # Ctrl-C: the group
    pytest.param(signal.SIGTERM, "group", marks=pytest.mark.slow)])
def test_a_signal_stops_the_sweep_checkpoints_running_runs_and_leaves_no_process(tmp_path, signum, target):
    cfg, specs = _config(tmp_path, delay=0.25)
    runs_dir = tmp_path / "runs"
    proc = _start(cfg, runs_dir)
    try:
        assert _wait_for(lambda: len(_started(runs_dir, specs)) == 2), "the two workers never started a run"
        assert len(_session(proc.pid)) >= 3  # the sweep, its two workers (and the resource tracker)
        running = _started(runs_dir, specs)
        if target == "parent":
            os.kill(proc.pid, signum)
        else:
            os.killpg(proc.pid, signum)
        _, err = proc.communicate(timeout=60)
        # every child was reaped by the sweep itself: nothing of its session is left, not even a zombie
        assert _wait_for(lambda: not _session(proc.pid), timeout=10), _session(proc.pid)
    finally:
        if proc.returncode is None:
            _kill_session(proc)
    assert proc.returncode == 128 + signum, err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 2, err  # "stopping ..." when it came, and the last line
    assert lines[-1].startswith(f"lcpo sweep: stopped by {signal.Signals(signum).name}: 2 running run(s) "
                                "checkpointed where they stood, 2 not started")
    assert lines[-1].endswith(f"to resume: lcpo sweep {cfg} --out {runs_dir} --workers 2 --executor {FAKE}")
    assert _started(runs_dir, specs) == running  # no new run started after the signal
    for rid in running:  # each stopped at a checkpoint of its last finished episode
        stopped = [int(x) for x in (run_dir(runs_dir, rid) / "stops.log").read_text().split()]
        state = (run_dir(runs_dir, rid) / "checkpoint" / "state.json").read_text()
        assert len(stopped) == 1 and f'"step": {stopped[0]}' in state
        assert not (run_dir(runs_dir, rid) / "summary.json").exists()

    if (signum, target) != (signal.SIGTERM, "parent"):
        return  # resuming is the same whatever the signal: checked once
    out = run_sweep(specs, runs_dir, workers=2, executor=FAKE, progress=False)  # the same sweep, resumed
    assert {o.status for o in out} == {"done"}
    for rid in running:  # continued from where it stopped, not from scratch
        starts = [int(x) for x in (run_dir(runs_dir, rid) / "calls.log").read_text().split()]
        assert starts == [0, int((run_dir(runs_dir, rid) / "stops.log").read_text())]
    runs = pd.read_parquet(runs_dir / "results.parquet").set_index("run_id")
    for s in specs:  # equal to uninterrupted runs
        assert runs.loc[s.run_id, "lifelong_return"] == pytest.approx(_expected(s.config), rel=1e-12)


def test_a_second_signal_stops_at_once(tmp_path):
    """The runs take 120 s to write their final checkpoint; the second signal kills them instead."""
    cfg, specs = _config(tmp_path, delay=0.3, stop_delay=120.0)
    runs_dir = tmp_path / "runs"
    proc = _start(cfg, runs_dir)
    try:
        assert _wait_for(lambda: len(_started(runs_dir, specs)) == 2), "the two workers never started a run"
        os.kill(proc.pid, signal.SIGINT)
        assert _wait_for(lambda: _first_line_seen(proc), timeout=30), "no 'stopping' line after the first signal"
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)  # far less than the 120 s a graceful stop would take
        assert _wait_for(lambda: not _session(proc.pid), timeout=10), _session(proc.pid)
    finally:
        if proc.returncode is None:
            _kill_session(proc)
    assert proc.returncode == 128 + signal.SIGINT, err
    err = proc._seen + err
    assert "Traceback" not in err and "second signal" in err
    assert err.strip().splitlines()[-1].startswith("lcpo sweep: stopped by SIGINT: 2 running run(s) killed at once")
    assert not any((run_dir(runs_dir, rid) / "stops.log").exists() for rid in _started(runs_dir, specs))


def _first_line_seen(proc: subprocess.Popen) -> bool:
    """True once the sweep has printed its "stopping" line (read from its stderr without blocking)."""
    import select

    if not hasattr(proc, "_seen"):
        proc._seen = ""
    while select.select([proc.stderr], [], [], 0)[0]:
        chunk = os.read(proc.stderr.fileno(), 4096).decode()
        if not chunk:
            break
        proc._seen += chunk
    return "stopping" in proc._seen


@pytest.mark.slow
def test_dask_sweep_stops_on_sigint_and_its_local_cluster_closes_without_killing_workers(tmp_path):
    """The Dask backend: a SIGINT stops the sweep the same way (tasks poll a distributed Event), and the
    LocalCluster it started closes without "Worker process still alive after 4.0 seconds, killing" (its
    workers imported torch, whose teardown outlasts the nanny's wait on a busy machine)."""
    pytest.importorskip("dask.distributed")
    cfg, specs = _config(tmp_path, delay=0.25)
    cfg.write_text(cfg.read_text() + "import_torch = true\n")
    runs_dir = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "lcpo.cli.sweep", str(cfg), "--out", str(runs_dir), "--backend",
                             "dask", "--workers", "2", "--executor", FAKE, "--no-progress"],
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(lambda: len(list(runs_dir.glob("runs/*/calls.log"))) == 2, timeout=120)
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert _wait_for(lambda: not _session(proc.pid), timeout=10), _session(proc.pid)
    finally:
        if proc.returncode is None:
            _kill_session(proc)
    assert proc.returncode == 130, err
    assert "still alive" not in err and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("lcpo sweep:")]
    assert lines[-1].startswith("lcpo sweep: stopped by SIGINT: 2 running run(s) checkpointed where they stood")
    assert len(list(runs_dir.glob("runs/*/stops.log"))) == 2


@pytest.mark.slow
def test_workers_stop_by_themselves_when_the_sweep_process_is_killed(tmp_path):
    """kill -9 of the sweep process alone: its workers notice, checkpoint their runs and exit."""
    cfg, specs = _config(tmp_path, delay=0.25)
    runs_dir = tmp_path / "runs"
    proc = _start(cfg, runs_dir)
    try:
        assert _wait_for(lambda: len(_started(runs_dir, specs)) == 2), "the two workers never started a run"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        # orphans are reparented (and reaped by whoever adopts them): none may still be running
        assert _wait_for(lambda: all(state == "Z" for state in _session(proc.pid).values()), timeout=30)
    finally:
        _kill_session(proc)
    assert all((run_dir(runs_dir, rid) / "stops.log").exists() for rid in _started(runs_dir, specs))
