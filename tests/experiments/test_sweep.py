"""The sweep runner: failures recorded, finished runs skipped, SIGKILL + resume, Dask backend with a killed worker.

Runs use the fake executor ``lcpo_fake_run`` (exact, known results; ``delay`` seconds per episode). Everything
binds to 127.0.0.1 only.
"""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time

import lcpo_fake_run as fake
import numpy as np
import pandas as pd
import pytest

from lcpo.experiments.config import expand, parse_config
from lcpo.experiments.runner import run_dir, run_sweep
from lcpo.experiments.store import collect

FAKE = "lcpo_fake_run"


def sweep_dict(agents=("lcpo", "a2c"), seeds=3, delay=0.0, **kw):
    d = {"name": "t", "steps": 2000, "seeds": seeds, "envs": ["lcpo/WindyPendulum-v0"], "traces": ["wind-1"],
         "agents": list(agents), "checkpoint_every": 400, "warmup_steps": 400,
         "env_kwargs": {"lcpo/WindyPendulum-v0": {"delay": delay}}}
    d.update(kw)
    return d


def specs_of(d):
    return expand(parse_config(d, executor=FAKE), executor=FAKE)


def expected_lifelong(config) -> float:
    rc = fake.RunConfig.from_dict(config)
    n = rc.steps // 200
    return float(np.mean([fake.episode_return(rc, k) for k in range(n) if (k + 1) * 200 > rc.warmup_steps]))


def calls(runs_dir, run_id):
    return [int(x) for x in (run_dir(runs_dir, run_id) / "calls.log").read_text().split()]


def test_local_sweep_records_failures_skips_finished_and_stores_one_row_per_spec(tmp_path):
    specs = specs_of(sweep_dict(agents=("lcpo", "a2c", "fail"), seeds=2))
    out = run_sweep(specs, tmp_path, workers=2, executor=FAKE, progress=False)
    status = {o.run_id: o.status for o in out}
    assert sorted(status.values()) == ["done"] * 4 + ["failed"] * 2
    for s in specs:
        if s.config["agent"] == "fail":
            err = json.loads((run_dir(tmp_path, s.run_id) / "error.json").read_text())
            assert "fake failure for testing" in err["error"] and "Traceback" in err["traceback"]
            assert not (run_dir(tmp_path, s.run_id) / "summary.json").exists()
    runs = pd.read_parquet(tmp_path / "results.parquet")
    assert sorted(runs["run_id"]) == sorted(s.run_id for s in specs)
    for s in specs:
        row = runs.set_index("run_id").loc[s.run_id]
        if s.config["agent"] == "fail":
            assert row["status"] == "failed" and "fake failure" in row["error"]
        else:
            assert row["status"] == "done"
            assert row["lifelong_return"] == pytest.approx(expected_lifelong(s.config), rel=1e-12)
            assert row["steps_done"] == 2000 and row["episodes"] == 10
            assert row["diag/train/kl_anchor"] == pytest.approx(1e-4)
    episodes = pd.read_parquet(tmp_path / "episodes.parquet")
    assert len(episodes) == 4 * 10 and set(episodes["run_id"]) == {s.run_id for s in specs if s.config["agent"] != "fail"}

    mtimes = {s.run_id: (run_dir(tmp_path, s.run_id) / "summary.json").stat().st_mtime_ns
              for s in specs if s.config["agent"] != "fail"}
    again = run_sweep(specs, tmp_path, workers=2, executor=FAKE, progress=False)
    assert {o.run_id: o.status for o in again} == status | {rid: "skipped" for rid in mtimes}
    for rid, m in mtimes.items():
        assert (run_dir(tmp_path, rid) / "summary.json").stat().st_mtime_ns == m
        assert calls(tmp_path, rid) == [0]  # executed exactly once
    failed = [s.run_id for s in specs if s.config["agent"] == "fail"]
    assert all(len(calls(tmp_path, rid)) == 2 for rid in failed)  # failures are retried on a re-run


def test_bad_arguments():
    specs = specs_of(sweep_dict(seeds=1))
    with pytest.raises(ValueError, match="backend"):
        run_sweep(specs, "/nonexistent-never-created", backend="ray")
    with pytest.raises(ValueError, match="workers"):
        run_sweep(specs, "/nonexistent-never-created", workers=0)
    with pytest.raises(ValueError, match="address"):
        run_sweep(specs, "/nonexistent-never-created", address="tcp://127.0.0.1:1")


def test_only_runs_the_selected_runs_in_pattern_order_and_keeps_the_whole_manifest(tmp_path):
    from lcpo.experiments.runner import select_runs

    specs = specs_of(sweep_dict(agents=("lcpo", "a2c"), seeds=3))
    ids = [s.run_id for s in specs]
    a2c_s2 = next(i for i in ids if "_a2c_s2-" in i)
    # priority: A2C seed 2 first, then every LCPO run; A2C seeds 0 and 1 are not selected
    patterns = ["*_a2c_s2-*", "*_lcpo_*"]
    chosen = [s.run_id for s in select_runs(specs, patterns)]
    assert chosen[0] == a2c_s2 and sorted(chosen[1:]) == sorted(i for i in ids if "_lcpo_" in i)
    assert [i for i in ids if "_lcpo_" in i] == chosen[1:]  # same pattern: the sweep's order
    with pytest.raises(ValueError, match=r"'\*_ppo_\*' match no run"):
        select_runs(specs, ["*_lcpo_*", "*_ppo_*"])
    with pytest.raises(ValueError, match="no --only pattern"):
        select_runs(specs, [])
    # one pattern given as a plain string is one pattern, not its characters
    assert [s.run_id for s in select_runs(specs, "*_lcpo_*")] == chosen[1:]
    # a pattern matched by a spec already claimed by an earlier pattern still counts as matching
    assert len(select_runs(specs, ["*", "*_lcpo_*"])) == len(specs)

    out = run_sweep(specs, tmp_path, workers=1, executor=FAKE, progress=False, only=patterns)
    status = {o.run_id: o.status for o in out}
    assert [o.run_id for o in out] == ids  # one outcome per spec, in spec order
    for i in ids:
        assert status[i] == ("done" if i in chosen else "deselected")
        assert (run_dir(tmp_path, i) / "summary.json").exists() == (i in chosen)
    # one worker: the runs finished in the patterns' order
    finish = sorted(chosen, key=lambda i: (run_dir(tmp_path, i) / "summary.json").stat().st_mtime_ns)
    assert finish == chosen
    # the manifest still describes the whole sweep
    assert [d["run_id"] for d in json.loads((tmp_path / "sweep.json").read_text())["specs"]] == ids
    # a later full sweep skips the selected runs and runs the rest
    out = run_sweep(specs, tmp_path, workers=1, executor=FAKE, progress=False)
    assert {o.run_id for o in out if o.status == "skipped"} == set(chosen)
    assert {o.run_id for o in out if o.status == "done"} == set(ids) - set(chosen)


def _wait_for(predicate, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def _states(runs_dir, specs):
    finished = [s.run_id for s in specs if (run_dir(runs_dir, s.run_id) / "summary.json").exists()]
    partial = [s.run_id for s in specs if (run_dir(runs_dir, s.run_id) / "checkpoint" / "state.json").exists()
               and s.run_id not in finished]
    return finished, partial


def test_sigkill_mid_sweep_then_rerun_resumes_and_never_reruns_finished(tmp_path):
    d = sweep_dict(delay=0.1)
    cfg_file = tmp_path / "sweep.toml"
    cfg_file.write_text(
        'name = "t"\nsteps = 2000\nseeds = 3\nenvs = ["lcpo/WindyPendulum-v0"]\ntraces = ["wind-1"]\n'
        'agents = ["lcpo", "a2c"]\ncheckpoint_every = 400\nwarmup_steps = 400\n'
        '[env_kwargs."lcpo/WindyPendulum-v0"]\ndelay = 0.1\n')
    specs = specs_of(d)
    runs_dir = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "lcpo.cli.sweep", str(cfg_file), "--out", str(runs_dir),
                             "--workers", "2", "--executor", FAKE, "--no-progress"],
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _wait_for(lambda: all(map(len, _states(runs_dir, specs)))), "no finished + partial run seen"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the runner and its pool workers, like a killed batch job
        proc.wait()
    finished, partial = _states(runs_dir, specs)
    assert finished and partial and len(finished) < len(specs)
    mtimes = {rid: (run_dir(runs_dir, rid) / "summary.json").stat().st_mtime_ns for rid in finished}

    out = run_sweep(specs, runs_dir, workers=2, executor=FAKE, progress=False)
    assert {o.run_id for o in out if o.status == "skipped"} == set(finished)
    for rid, m in mtimes.items():
        assert (run_dir(runs_dir, rid) / "summary.json").stat().st_mtime_ns == m
        assert calls(runs_dir, rid) == [0]
    for rid in partial:
        starts = calls(runs_dir, rid)
        assert len(starts) == 2 and starts[1] > 0  # resumed from its checkpoint, not from scratch
    runs = pd.read_parquet(runs_dir / "results.parquet")
    assert len(runs) == len(specs) and runs["run_id"].is_unique and (runs["status"] == "done").all()
    by_id = runs.set_index("run_id")
    for s in specs:  # equal to an uninterrupted run
        assert by_id.loc[s.run_id, "lifelong_return"] == pytest.approx(expected_lifelong(s.config), rel=1e-12)
        eps = pd.read_csv(run_dir(runs_dir, s.run_id) / "episodes.csv")
        assert list(eps["episode"]) == list(range(10))


def _comparable(runs: pd.DataFrame) -> pd.DataFrame:
    cols = ["run_id", "status", "env", "trace", "agent", "seed", "scheme", "lifelong_return", "episodes",
            "steps_done"]
    return runs[cols].sort_values("run_id").reset_index(drop=True)


def test_dask_local_cluster_matches_local_backend_with_a_worker_killed(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    specs = specs_of(sweep_dict(delay=0.1))
    run_sweep(specs, tmp_path / "local", workers=2, executor=FAKE, progress=False)
    local = _comparable(collect(tmp_path / "local")[0])

    with distributed.LocalCluster(host="127.0.0.1", n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        workers = client.scheduler_info()["workers"]
        assert len(workers) == 2 and all(a.startswith("tcp://127.0.0.1:") for a in workers)
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        result = {}
        t = threading.Thread(target=lambda: result.setdefault(
            "out", run_sweep(specs, tmp_path / "dask", backend="dask", address=cluster.scheduler_address,
                             executor=FAKE, progress=False)))
        t.start()
        try:
            assert _wait_for(lambda: _states(tmp_path / "dask", specs)[1]), "no run in progress seen"
            victim = _states(tmp_path / "dask", specs)[1][0]  # checkpointed, not finished
            pid = int((run_dir(tmp_path / "dask", victim) / "pid").read_text())
            assert pid in client.run(os.getpid).values()  # a Dask worker process, not this one
            os.kill(pid, signal.SIGKILL)
        finally:
            t.join(timeout=120)
        assert not t.is_alive()
    assert all(o.status in ("done", "skipped") for o in result["out"])
    dask = _comparable(pd.read_parquet(tmp_path / "dask" / "results.parquet"))
    pd.testing.assert_frame_equal(dask, local)
    starts = calls(tmp_path / "dask", victim)
    if len(starts) == 1:  # the run finished in the instant between the check and the kill
        pytest.skip("race: the chosen run finished before its worker was killed")
    assert len(starts) == 2 and starts[1] > 0  # the killed worker's run was retried and resumed


def test_which_errors_are_retried():
    from lcpo.experiments.runner import _retryable
    from lcpo.persistence.runlock import RunFolderBusy

    assert _retryable(OSError(28, "No space left on device")) and _retryable(MemoryError())
    assert _retryable(RunFolderBusy("busy")) and _retryable(type("OutOfMemoryError", (RuntimeError,), {})())
    for exc in (FileNotFoundError("trace.npy"), PermissionError("out"), IsADirectoryError("x"),
                NotADirectoryError("y"), ValueError("refused"), RuntimeError("non-finite"), KeyError("k")):
        assert not _retryable(exc), exc


def test_dask_retries_only_failures_that_may_be_transient(tmp_path):
    """Dask's ``retries`` re-runs a task that raised (a worker's death is rescheduled by ``allowed-failures``
    whatever ``retries`` says): a refusal or a deterministic error used to run three times, failing the same
    way each time; now once, while an OSError (a full disk) is still tried three times."""
    pytest.importorskip("dask.distributed")
    det = specs_of(sweep_dict(agents=("fail",), seeds=1))
    transient = specs_of(sweep_dict(agents=("fail",), seeds=1, name="u",
                                    env_kwargs={"lcpo/WindyPendulum-v0": {"os_error": True}}))
    out = run_sweep(det + transient, tmp_path / "d", backend="dask", workers=1, executor=FAKE, progress=False)
    assert [o.status for o in out] == ["failed", "failed"]
    assert "RuntimeError: fake failure for testing" in out[0].error and "OSError" in out[1].error
    assert len(calls(tmp_path / "d", det[0].run_id)) == 1
    assert len(calls(tmp_path / "d", transient[0].run_id)) == 3
    for spec in (*det, *transient):  # each failure recorded where the sweep's report looks for it
        assert json.loads((run_dir(tmp_path / "d", spec.run_id) / "error.json").read_text())["error"]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("lcpo.online.run") is None, reason="lcpo.online.run not available")
def test_sigkill_with_the_real_executor_resumes_to_the_uninterrupted_result(tmp_path):
    cfg_file = tmp_path / "one.toml"
    cfg_file.write_text('name = "one"\nsteps = 16000\nseeds = 1\nenvs = ["lcpo/WindyPendulum-v0"]\n'
                        'traces = ["wind-3"]\ntrace_length = 16000\nagents = ["lcpo"]\ncheckpoint_every = 2000\n'
                        'warmup_steps = 2000\n[overrides.lcpo]\nreservoir_size = 1000\n')
    (spec,) = expand(parse_config({"name": "one", "steps": 16000, "seeds": 1, "envs": ["lcpo/WindyPendulum-v0"],
                                   "traces": ["wind-3"], "trace_length": 16000, "agents": ["lcpo"],
                                   "checkpoint_every": 2000, "warmup_steps": 2000,
                                   "overrides": {"lcpo": {"reservoir_size": 1000}}}))
    cut, full = tmp_path / "cut", tmp_path / "full"
    cmd = [sys.executable, "-m", "lcpo.cli.sweep", str(cfg_file), "--workers", "1", "--no-progress", "--out"]
    proc = subprocess.Popen(cmd + [str(cut)], start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        assert _wait_for(lambda: (run_dir(cut, spec.run_id) / "checkpoint" / "latest.json").exists(), timeout=120)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (run_dir(cut, spec.run_id) / "summary.json").exists(), "the run finished before the kill"
    assert run_sweep([spec], cut, workers=1, progress=False)[0].status == "done"
    assert run_sweep([spec], full, workers=1, progress=False)[0].status == "done"
    a, b = (json.loads((run_dir(d, spec.run_id) / "summary.json").read_text()) for d in (cut, full))
    assert a["lifelong_return"] == b["lifelong_return"] and a["episodes"] == b["episodes"] == 80
    ea, eb = (pd.read_csv(run_dir(d, spec.run_id) / "episodes.csv") for d in (cut, full))
    pd.testing.assert_frame_equal(ea, eb)
