"""The report: tables with bootstrap intervals, best-scheme marking, normalized CDF, ablations, figures; and
the acceptance smoke test (``lcpo sweep configs/smoke.toml`` then ``lcpo report``) with the real executor."""

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lcpo.cli import report as report_cli
from lcpo.cli import sweep as sweep_cli
from lcpo.experiments.report import lifelong_table, rank_table, write_report
from lcpo.experiments.stats import mean_ci

REPO = Path(__file__).resolve().parents[2]


def make_runs(cells):
    """cells: {(trace, scheme): [lifelong returns per seed]} -> a store-like runs table."""
    rows = []
    for (trace, scheme), values in cells.items():
        agent = scheme.split("[")[0]
        for seed, v in enumerate(values):
            row = {"run_id": f"{trace}-{scheme}-{seed}", "status": "done", "env": "lcpo/WindyPendulum-v0",
                   "trace": trace, "agent": agent, "seed": seed, "scheme": scheme, "lifelong_return": v,
                   "steps_done": 1000, "wall_time_s": 1.0, "error": None}
            if "[" in scheme:
                k, val = scheme[len(agent) + 1:-1].split("=")
                row[f"hp/{k}"] = int(val)
            rows.append(row)
    return pd.DataFrame(rows)


def test_table_values_marking_prescient_and_ranks(tmp_path):
    cells = {
        ("wind-1", "lcpo"): [-100.0, -101.0, -99.0, -100.5],
        ("wind-1", "a2c"): [-150.0, -149.0, -151.0, -150.5],
        ("wind-1", "prescient-a2c"): [-90.0, -91.0, -89.0, -90.0],
        ("wind-2", "lcpo"): [-120.0, -80.0, -100.0, -110.0],  # overlaps a2c: no mark
        ("wind-2", "a2c"): [-105.0, -95.0, -100.0, -101.0],
    }
    runs = make_runs(cells)
    table = lifelong_table(runs, seed=0)
    for (trace, scheme), values in cells.items():
        row = table[(table.trace == trace) & (table.scheme == scheme)].iloc[0]
        ci = mean_ci(values, seed=0)
        assert row["mean"] == pytest.approx(np.mean(values))
        assert (row.ci_low, row.ci_high, row.n) == (ci.low, ci.high, 4)
        assert row.ci_low <= row["mean"] <= row.ci_high
    ranks = rank_table(table).set_index(["trace", "scheme"])
    assert ranks.loc[("wind-1", "lcpo"), "rank"] == 1 and ranks.loc[("wind-1", "a2c"), "rank"] == 2
    assert bool(ranks.loc[("wind-1", "lcpo"), "best_separated"])
    assert not bool(ranks.loc[("wind-2", "a2c"), "best_separated"])
    assert ("wind-1", "prescient-a2c") not in ranks.index  # prescient agents are not ranked

    md = write_report(runs, pd.DataFrame(columns=["run_id", "episode", "step", "return"]), tmp_path).read_text()
    lines = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| wind-")}
    assert "**-100.1 [" in lines["wind-1"] and "(prescient-a2c)" in lines["wind-1"]
    assert "**" not in lines["wind-2"] and lines["wind-2"].rstrip().endswith("| - |")
    assert "best prescient" in md
    norm = pd.read_csv(tmp_path / "normalized_return.csv")
    for _, grp in norm.groupby("trace"):
        assert grp["normalized"].min() == 0.0 and grp["normalized"].max() == 1.0
    w1 = norm[norm.trace == "wind-1"].set_index("scheme")["normalized"]
    assert w1["lcpo"] == pytest.approx((-100.125 + 150.125) / (-90.0 + 150.125))
    assert (tmp_path / "normalized_return_cdf.png").stat().st_size > 0


def test_ablation_tables_for_varied_hyperparameters(tmp_path):
    cells = {("wind-1", f"lcpo[reservoir_size={r}]"): [float(r), r + 1.0, r - 1.0] for r in (100, 1000, 10000)}
    cells[("wind-1", "a2c")] = [0.0, 1.0, 2.0]
    runs = make_runs(cells)
    md = write_report(runs, pd.DataFrame(columns=["run_id", "episode", "step", "return"]), tmp_path).read_text()
    tab = pd.read_csv(tmp_path / "ablation_lcpo_reservoir_size.csv")
    assert list(tab["reservoir_size"]) == [100, 1000, 10000]
    np.testing.assert_allclose(tab["mean"], [100.0, 1000.0, 10000.0])
    assert (tmp_path / "ablation_lcpo_reservoir_size.png").exists()
    assert "### lcpo: reservoir_size" in md


def test_report_cli_errors(tmp_path, capsys):
    assert report_cli.main([str(tmp_path / "nope"), "--out", str(tmp_path / "r")]) == 2
    assert "no such sweep folder" in capsys.readouterr().err
    assert report_cli.main([str(tmp_path), "--confidence", "1.5"]) == 2


def test_sweep_cli_bad_config_names_the_key(tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('steps = 10\nenvs = ["lcpo/WindyPendulum-v0"]\ntraces = ["wind-1"]\nagents = ["lcpo"]\n'
                   'seedz = 3\n')
    assert sweep_cli.main([str(cfg), "--out", str(tmp_path / "runs")]) == 2
    assert "seedz: unknown key" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


@pytest.mark.skipif(importlib.util.find_spec("lcpo.run") is None, reason="lcpo.run not available")
def test_smoke_sweep_then_report_with_the_real_executor(tmp_path):
    runs_dir, rep = tmp_path / "runs", tmp_path / "report"
    assert sweep_cli.main([str(REPO / "configs" / "smoke.toml"), "--out", str(runs_dir), "--workers", "2",
                           "--no-progress"]) == 0
    runs = pd.read_parquet(runs_dir / "results.parquet")
    assert len(runs) == 8 and (runs["status"] == "done").all() and runs["lifelong_return"].notna().all()
    assert (runs["steps_done"] == 2000).all()
    assert report_cli.main([str(runs_dir), "--out", str(rep)]) == 0
    md = (rep / "report.md").read_text()
    assert "## Lifelong return" in md and "## LCPO's rank" in md
    table = pd.read_csv(rep / "lifelong_return.csv")
    assert set(table["trace"]) == {"wind-1", "wind-3"} and (table["n"] == 2).all()
    for name in ("normalized_return_cdf.png", "timeseries_WindyPendulum-v0_wind-1.png",
                 "timeseries_WindyPendulum-v0_wind-3.png"):
        assert (rep / name).stat().st_size > 1000
