"""A sweep folder after `lcpo resume RUNS_DIR --steps N` (issue 24, usability): the resume's table tells the
runs apart (env and trace columns), and running the original `lcpo sweep` again warns that the finished runs
ran with other settings, while results.parquet keeps each run's settings and results together."""

from __future__ import annotations

import contextlib
import io

import pandas as pd
import pytest

from lcpo.cli.main import main
from lcpo.experiments.config import expand, parse_config
from lcpo.experiments.runner import run_dir, run_sweep
from lcpo.online.run import RunConfig, execute

SWEEP = {"name": "t", "envs": ["lcpo/WindyPendulum-v0"], "traces": ["wind-1", "wind-3"], "trace_length": 1000,
         "agents": ["a2c"], "seeds": 1, "steps": 200, "checkpoint_every": 100}


@pytest.fixture(scope="module")
def extended_sweep(tmp_path_factory):
    """A finished two-run sweep folder (the runs executed in this process, as a sweep worker executes them),
    then extended by `lcpo resume RUNS_DIR --steps 400`; returns (runs_dir, specs, resume's stdout)."""
    specs = expand(parse_config(SWEEP))
    runs_dir = tmp_path_factory.mktemp("extended") / "sweep"
    for spec in specs:
        execute(RunConfig.from_dict(spec.config), run_dir(runs_dir, spec.run_id))
    with contextlib.redirect_stderr(io.StringIO()):
        assert {o.status for o in run_sweep(specs, runs_dir, progress=False)} == {"skipped"}  # manifest, store
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["resume", str(runs_dir), "--steps", "400", "--no-progress"]) == 0
    return runs_dir, specs, out.getvalue()


def test_multi_run_resume_table_names_env_and_trace(extended_sweep):
    _, _, out = extended_sweep
    header, *rows = out.strip().splitlines()
    assert header.split()[:3] == ["trace", "agent", "seed"]
    assert sorted(row.split()[0] for row in rows) == ["wind-1", "wind-3"]  # rows told apart, not look-alikes
    assert len(set(rows)) == 2


def test_rerunning_the_original_sweep_warns_and_keeps_results_consistent(extended_sweep, capsys):
    runs_dir, specs, _ = extended_sweep
    outcomes = run_sweep(specs, runs_dir, progress=False)
    assert {o.status for o in outcomes} == {"skipped"}
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "warning: 2 finished run(s)" in err and "steps 200 -> 400" in err
    runs = pd.read_parquet(runs_dir / "results.parquet")
    assert list(runs["steps"]) == [400, 400] and list(runs["steps_done"]) == [400, 400]
    eps = pd.read_parquet(runs_dir / "episodes.parquet")
    assert eps.groupby("run_id")["step"].max().tolist() == [400, 400]
