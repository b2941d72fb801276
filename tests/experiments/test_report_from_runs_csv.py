"""The committed paper-mini report, regenerated from its runs.csv (scripts/report_from_runs_csv.py): Student-t
intervals recomputed by hand from the per-seed returns, and the script's handling of a folder without episodes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

ROOT = Path(__file__).resolve().parents[2]
PAPER_MINI = ROOT / "docs" / "results" / "paper-mini"


def _script():
    spec = importlib.util.spec_from_file_location("report_from_runs_csv", ROOT / "scripts" / "report_from_runs_csv.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _t_interval(values: np.ndarray) -> tuple[float, float, float]:
    n = len(values)
    half = stats.t.ppf(0.975, n - 1) * values.std(ddof=1) / np.sqrt(n)
    return values.mean(), values.mean() - half, values.mean() + half


def test_the_committed_paper_mini_report_shows_student_t_intervals_of_its_runs():
    """Every cell of lifelong_return.csv and of report.md is mean +- t_{0.975, n-1} s / sqrt(n) of the cell's
    seeds in runs.csv (the report of 2026-11-29 showed percentile-bootstrap intervals: about the seeds' range)."""
    from lcpo.experiments.report import _cell

    runs = pd.read_csv(PAPER_MINI / "runs.csv")
    table = pd.read_csv(PAPER_MINI / "lifelong_return.csv").set_index(["env", "trace", "scheme"])
    md = (PAPER_MINI / "report.md").read_text()
    assert "95% Student-t interval across seeds" in md
    cells = runs.groupby(["env", "trace", "scheme"])["lifelong_return"]
    assert len(cells) == len(table) == 120
    for key, values in cells:
        mean, low, high = _t_interval(values.to_numpy(dtype=float))
        row = table.loc[key]
        assert row["n"] == len(values) == 3
        np.testing.assert_allclose([row["mean"], row["ci_low"], row["ci_high"]], [mean, low, high], rtol=1e-9)
        assert _cell(mean, low, high) in md, key


def test_the_script_rewrites_a_folder_without_episodes_and_keeps_its_figures(tmp_path, capsys):
    script = _script()
    rng = np.random.default_rng(0)
    rows = [{"run_id": f"{trace}-{scheme}-{seed}", "status": "done", "env": "lcpo/WindyPendulum-v0",
             "trace": trace, "agent": scheme, "seed": seed, "scheme": scheme,
             "lifelong_return": float(base + rng.normal()), "steps_done": 1000, "wall_time_s": 1.0}
            for trace in ("wind-1", "wind-2") for scheme, base in (("lcpo", -100.0), ("a2c", -110.0))
            for seed in range(3)]
    folder = tmp_path / "mini"
    folder.mkdir()
    pd.DataFrame(rows).to_csv(folder / "runs.csv", index=False)
    for name in ("timeseries_b.png", "timeseries_a.png"):
        (folder / name).write_bytes(b"png")
    (folder / "report.md").write_text("old\n![b](timeseries_b.png)\n![a](timeseries_a.png)\n")
    assert script.main([str(folder), "--note", "Redone."]) == 0
    md = (folder / "report.md").read_text()
    assert md.startswith("# Sweep report: mini\n\nRedone. Command: `python scripts/report_from_runs_csv.py ")
    assert "Student-t interval" in md and script.TIMESERIES_NOTE in md
    assert md.index("(timeseries_b.png)") < md.index("(timeseries_a.png)")  # the old report's order
    lcpo = pd.read_csv(folder / "lifelong_return.csv").set_index(["trace", "scheme"]).loc[("wind-1", "lcpo")]
    values = np.array([r["lifelong_return"] for r in rows if r["trace"] == "wind-1" and r["scheme"] == "lcpo"])
    np.testing.assert_allclose([lcpo["ci_low"], lcpo["ci_high"]], _t_interval(values)[1:], rtol=1e-9)
    capsys.readouterr()
    assert script.main([str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "none/runs.csv: no such file" in err


@pytest.mark.parametrize("column", ["lifelong_return", "scheme"])
def test_the_script_names_a_table_without_the_store_columns(tmp_path, capsys, column):
    folder = tmp_path / "bad"
    folder.mkdir()
    pd.DataFrame([{"run_id": "r", "status": "done", "env": "e", "trace": "t", "agent": "a", "scheme": "a",
                   "lifelong_return": 1.0}]).drop(columns=column).to_csv(folder / "runs.csv", index=False)
    assert _script().main([str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and column in err and not (folder / "report.md").exists()
