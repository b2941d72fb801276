"""Runs that never update (prescient agents; runs shorter than one rollout) in a sweep and its report, end to end
with the real executor, as configs/paper-pendulum.toml's prescient agents would run (tiny budget)."""

import importlib.util
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from lcpo.cli import report as report_cli
from lcpo.cli import sweep as sweep_cli

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("lcpo.online.run") is None, reason="lcpo.online.run not available")
def test_sweep_and_report_with_prescient_and_too_short_runs(tmp_path):
    paper = tomllib.loads((REPO / "configs" / "paper-pendulum.toml").read_text())
    prescient = [a for a in paper["agents"] if a.startswith("prescient-")]
    assert "prescient-a2c" in prescient  # the paper config holds the agents this test stands in for
    cfg = tmp_path / "tiny.toml"
    cfg.write_text('name = "tiny"\nenvs = ["lcpo/WindyPendulum-v0"]\ntraces = ["wind-3"]\ntrace_length = 800\n'
                   'agents = ["lcpo", "a2c", "prescient-a2c"]\nseeds = 1\nsteps = 400\ncheckpoint_every = 200\n'
                   'diagnostics_every = 200\n[overrides.lcpo]\nreservoir_size = 1000\n'
                   '[overrides.a2c]\nrollout_steps = 1000\n'          # longer than the run: never updates
                   '[overrides.prescient-a2c]\ntrain_steps = 200\n')
    runs_dir, rep = tmp_path / "runs", tmp_path / "report"
    assert sweep_cli.main([str(cfg), "--out", str(runs_dir), "--workers", "1", "--no-progress"]) == 0
    runs = pd.read_parquet(runs_dir / "results.parquet")
    assert len(runs) == 3 and (runs["status"] == "done").all() and runs["lifelong_return"].notna().all()
    by_agent = runs.set_index("agent")
    assert by_agent.loc["lcpo", "diag/updates"] == 1.0  # one update per 200-step window
    for agent in ("a2c", "prescient-a2c"):  # no diagnostics rows: header only
        folder = runs_dir / "runs" / by_agent.loc[agent, "run_id"]
        assert (folder / "diagnostics.csv").read_text() == "step,updates\n"
    assert report_cli.main([str(runs_dir), "--out", str(rep)]) == 0
    assert "## Lifelong return" in (rep / "report.md").read_text()
