"""The report: tables with Student-t intervals, Welch/Holm comparisons, provenance, best-scheme marking, normalized CDF, ablations, figures; and
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


def test_no_cdf_for_two_schemes_whose_intervals_overlap(tmp_path):
    cells = {("wind-1", "lcpo"): [-100.0, -80.0, -120.0], ("wind-1", "a2c"): [-101.0, -81.0, -119.0]}
    md = write_report(make_runs(cells), pd.DataFrame(columns=["run_id", "episode", "step", "return"]),
                      tmp_path).read_text()
    norm = pd.read_csv(tmp_path / "normalized_return.csv").set_index("scheme")["normalized"]
    assert (norm["lcpo"], norm["a2c"]) == (1.0, 0.0)  # what min-max does to two overlapping schemes
    assert not (tmp_path / "normalized_return_cdf.png").exists()
    assert "No CDF figure: with 2 online scheme(s)" in md and "intervals overlap" in md


def test_cdf_drawn_with_three_schemes_and_names_its_caveat(tmp_path):
    cells = {("wind-1", s): [v, v + 1.0, v - 1.0] for s, v in (("lcpo", -100.0), ("a2c", -150.0), ("trpo", -120.0))}
    md = write_report(make_runs(cells), pd.DataFrame(columns=["run_id", "episode", "step", "return"]),
                      tmp_path).read_text()
    assert (tmp_path / "normalized_return_cdf.png").stat().st_size > 1000
    assert "![normalized return CDF]" in md and "seed means only" in md


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
    (tmp_path / "sweep.toml").write_text("")
    assert report_cli.main([str(tmp_path / "sweep.toml"), "--out", str(tmp_path / "r")]) == 2
    assert "sweep.toml: a file, not a sweep folder" in capsys.readouterr().err
    assert report_cli.main([str(tmp_path), "--confidence", "1.5"]) == 2


def test_sweep_cli_bad_config_names_the_key(tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('steps = 10\nenvs = ["lcpo/WindyPendulum-v0"]\ntraces = ["wind-1"]\nagents = ["lcpo"]\n'
                   'seedz = 3\n')
    assert sweep_cli.main([str(cfg), "--out", str(tmp_path / "runs")]) == 2
    assert "seedz: unknown key" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


@pytest.mark.skipif(importlib.util.find_spec("lcpo.online.run") is None, reason="lcpo.online.run not available")
def test_smoke_sweep_then_report_with_the_real_executor(tmp_path):
    runs_dir, rep = tmp_path / "runs", tmp_path / "report"
    assert sweep_cli.main([str(REPO / "configs" / "smoke.toml"), "--out", str(runs_dir), "--workers", "2",
                           "--no-progress"]) == 0
    runs = pd.read_parquet(runs_dir / "results.parquet")
    assert len(runs) == 8 and (runs["status"] == "done").all() and runs["lifelong_return"].notna().all()
    assert (runs["steps_done"] == 2000).all()
    before = {p: p.stat().st_mtime_ns for p in runs_dir.rglob("*")}
    assert report_cli.main([str(runs_dir), "--out", str(rep)]) == 0
    assert {p: p.stat().st_mtime_ns for p in runs_dir.rglob("*")} == before  # writes only into --out
    assert len(pd.read_parquet(rep / "results.parquet")) == 8
    md = (rep / "report.md").read_text()
    assert "## Lifelong return" in md and "## LCPO's rank" in md
    table = pd.read_csv(rep / "lifelong_return.csv")
    assert set(table["trace"]) == {"wind-1", "wind-3"} and (table["n"] == 2).all()
    for name in ("timeseries_WindyPendulum-v0_wind-1.png", "timeseries_WindyPendulum-v0_wind-3.png"):
        assert (rep / name).stat().st_size > 1000


def test_cdf_xlim_is_padded_and_every_curve_is_visible():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lcpo.experiments.report import _cdf_figure

    pairs = [f"wind-{i}" for i in range(1, 5)]
    norm = pd.DataFrame(
        [{"env": "e", "trace": t, "scheme": "best", "normalized": 1.0} for t in pairs]
        + [{"env": "e", "trace": t, "scheme": "worst", "normalized": 0.0} for t in pairs]
        + [{"env": "e", "trace": t, "scheme": s, "normalized": 0.5} for t in pairs for s in ("tie-a", "tie-b")])
    schemes = ["best", "worst", "tie-a", "tie-b"]
    fig = _cdf_figure(norm, schemes)
    try:
        ax = fig.axes[0]
        lo, hi = ax.get_xlim()
        assert lo < 0.0 and hi > 1.0  # steps at 0 and 1 are inside the frame, not on it
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert set(lines) == set(schemes)
        for line in lines.values():
            x = np.asarray(line.get_xdata(), dtype=float)
            assert lo <= x.min() < 0.0 and 1.0 < x.max() <= hi  # drawn from below 0 to above 1
        # "best" is 0 until its jump to 1 at x = 1, strictly inside the axes
        xb, yb = (np.asarray(a, dtype=float) for a in lines["best"].get_data())
        assert yb[0] == 0.0 and yb[-1] == 1.0 and np.any((xb == 1.0) & (yb == 1.0)) and hi > 1.0
        assert lines["best"].get_drawstyle() == "steps-post"
        # coinciding curves differ in line style and marker
        a, b = lines["tie-a"], lines["tie-b"]
        assert np.array_equal(a.get_xdata(), b.get_xdata()) and np.array_equal(a.get_ydata(), b.get_ydata())
        assert a.get_linestyle() != b.get_linestyle() and a.get_marker() != b.get_marker()
    finally:
        plt.close(fig)


def test_bold_mark_needs_min_seeds_and_report_states_n(tmp_path):
    from lcpo.experiments.report import MIN_SEEDS_FOR_MARK

    assert MIN_SEEDS_FOR_MARK == 3
    cells = {
        ("wind-1", "lcpo"): [-100.0, -100.5],  # 2 seeds, far apart from a2c: separated but not marked
        ("wind-1", "a2c"): [-150.0, -150.5],
        ("wind-2", "lcpo"): [-100.0, -100.5, -99.5],  # 3 seeds, separated: marked
        ("wind-2", "a2c"): [-150.0, -150.5, -149.5],
    }
    runs = make_runs(cells)
    ranks = rank_table(lifelong_table(runs, seed=0)).set_index(["trace", "scheme"])
    assert bool(ranks.loc[("wind-1", "lcpo"), "best_separated"])  # the t intervals do not overlap ...
    assert not bool(ranks.loc[("wind-1", "lcpo"), "best_marked"])  # ... but 2 seeds are too few for the mark
    assert bool(ranks.loc[("wind-2", "lcpo"), "best_marked"])
    md = write_report(runs, pd.DataFrame(columns=["run_id", "episode", "step", "return"]), tmp_path).read_text()
    lines = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| wind-")}
    assert "**" not in lines["wind-1"] and "(n=2)" in lines["wind-1"]
    assert "**-100.0 [" in lines["wind-2"] and "(n=3)" in lines["wind-2"]
    assert "Cells average 2 to 3 seeds" in md and "coverage is exact for normal scores" in md
    rk = pd.read_csv(tmp_path / "ranks.csv")
    assert set(rk.loc[rk["best_marked"], "trace"]) == {"wind-2"}  # a row-level flag, like best_separated


def test_report_states_a_uniform_seed_count_once(tmp_path):
    runs = make_runs({("wind-1", "lcpo"): [1.0, 2.0, 3.0], ("wind-1", "a2c"): [0.0, 1.0, 2.0]})
    md = write_report(runs, pd.DataFrame(columns=["run_id", "episode", "step", "return"]), tmp_path).read_text()
    assert "Every cell averages 3 seeds" in md and "(n=" not in md


def test_timeseries_places_episodes_at_their_middle_step():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lcpo.experiments.report import _binned_returns, _timeseries_figure

    n_ep, length = 10, 200  # episodes cover [0, 200), [200, 400), ... [1800, 2000)
    rows = []
    for run in ("r0", "r1"):
        for k in range(n_ep):
            rows.append({"run_id": run, "episode": k, "step": (k + 1) * length, "return": float(k),
                         "length": length, "context_mean_wind_x": 10.0 * k})
    ep = pd.DataFrame(rows)
    edges = np.linspace(0.0, n_ep * length, n_ep + 1)
    means, counts = _binned_returns(ep[ep.run_id == "r0"], edges)
    np.testing.assert_array_equal(counts, np.ones(n_ep))  # no empty first bin, no double-filled bin
    np.testing.assert_allclose(means, np.arange(n_ep, dtype=float))  # bin k holds episode k
    # without a length column the start is the previous episode's end (0 for the first): same result
    means2, counts2 = _binned_returns(ep[ep.run_id == "r0"].drop(columns="length"), edges)
    np.testing.assert_array_equal(counts2, counts)
    np.testing.assert_allclose(means2, means)
    # bins two episodes wide: bin j holds episodes 2j and 2j + 1
    means3, counts3 = _binned_returns(ep[ep.run_id == "r0"], np.linspace(0.0, 2000.0, 6))
    np.testing.assert_array_equal(counts3, np.full(5, 2))
    np.testing.assert_allclose(means3, 4.0 * np.arange(5) / 2 + 0.5)

    grp = pd.DataFrame({"run_id": ["r0", "r1"], "scheme": ["lcpo", "lcpo"]})
    fig = _timeseries_figure(grp, ep, ["lcpo"], ["context_mean_wind_x"], "t")
    try:
        ret_line = fig.axes[0].get_lines()[0]
        x, y = (np.asarray(a, dtype=float) for a in ret_line.get_data())
        assert 0.0 <= x[0] <= length and x[0] == pytest.approx(100.0)
        np.testing.assert_allclose(x, np.arange(n_ep) * length + length / 2)
        np.testing.assert_allclose(y, np.arange(n_ep, dtype=float))  # aligned: point k is episode k
        cx, cy = (np.asarray(a, dtype=float) for a in fig.axes[1].get_lines()[0].get_data())
        np.testing.assert_allclose(cx, x)  # the context panel uses the same x for the same episode
        np.testing.assert_allclose(cy, 10.0 * np.arange(n_ep))
        assert fig.axes[0].get_xlim() == pytest.approx((0.0, n_ep * length))
    finally:
        plt.close(fig)


# -- issue 27: significance, aggregates across cells, provenance -------------------------------------------------
_EMPTY_EP = pd.DataFrame(columns=["run_id", "episode", "step", "return"])
_AUDIT = {("wind-1", "lcpo"): [-170.7, -174.7, -172.1], ("wind-1", "trpo"): [-171.3, -170.7, -182.4],
          ("wind-1", "a2c"): [-198.0, -183.1, -178.8], ("wind-1", "ppo"): [-212.7, -201.2, -211.6],
          ("wind-3", "lcpo"): [-255.6, -267.1, -267.0], ("wind-3", "trpo"): [-240.5, -314.5, -214.0],
          ("wind-3", "a2c"): [-268.7, -420.2, -272.8], ("wind-3", "ppo"): [-307.8, -275.1, -270.9],
          ("wind-1", "sac"): [-181.3]}


def test_comparisons_are_welch_with_holm_over_the_family(tmp_path):
    from scipy import stats as sps

    from lcpo.experiments.report import MARK_BELOW_LCPO, NOT_TESTED, comparison_table
    from lcpo.experiments.stats import holm

    runs = make_runs(_AUDIT)
    comp = comparison_table(runs).set_index(["trace", "baseline"])
    tested = [(t, b) for t in ("wind-1", "wind-3") for b in ("trpo", "a2c", "ppo")]
    p = [sps.ttest_ind(_AUDIT[(t, "lcpo")], _AUDIT[(t, b)], equal_var=False).pvalue for t, b in tested]
    assert [comp.loc[k, "p"] for k in tested] == pytest.approx(p)
    assert [comp.loc[k, "p_holm"] for k in tested] == pytest.approx(holm(p))  # one family of six
    assert comp.loc[("wind-1", "sac"), "verdict"] == NOT_TESTED and np.isnan(comp.loc[("wind-1", "sac"), "p"])
    assert comp.index[comp["significant"]].tolist() == [("wind-1", "ppo")]  # issue 27: only LCPO > PPO on wind-1
    assert comp.loc[("wind-1", "ppo"), "verdict"] == "LCPO higher"
    md = write_report(runs, _EMPTY_EP, tmp_path).read_text()
    row = next(line for line in md.splitlines() if line.startswith("| wind-1 |") and "-208.5" in line)
    assert f"-208.5 [-224.3, -192.7] (n=3){MARK_BELOW_LCPO}" in row and row.count(MARK_BELOW_LCPO) == 1
    assert "-172.5 [-177.5, -167.5]" in row and "**" not in row  # the audit's t interval, no bold lead
    assert "## LCPO against each baseline" in md and (tmp_path / "comparisons.csv").exists()


def test_across_cells_iqm_and_probability_of_improvement(tmp_path):
    from lcpo.experiments.report import across_cells, lifelong_table

    runs = make_runs(_AUDIT)
    agg = across_cells(runs, lifelong_table(runs), seed=0)
    poi = agg["poi"].set_index("baseline")
    assert poi.loc["ppo", "poi"] == 1.0  # every LCPO seed beats every PPO seed on both traces
    # TRPO, wind-1: -170.7 beats -171.3 and -182.4 and ties -170.7 (2.5), -174.7 and -172.1 beat -182.4 (1 + 1);
    # wind-3: each LCPO seed beats only -314.5 (3 of 9)
    assert poi.loc["trpo", "poi"] == pytest.approx((4.5 / 9 + 3 / 9) / 2)
    assert poi.loc["sac", "cells"] == 1 and poi.loc["sac", "poi"] == 1.0  # -181.3 is below every LCPO seed
    iq = agg["iqm"].set_index("scheme")
    assert iq.loc["lcpo", "runs"] == 6 and iq.loc["lcpo", "ci_low"] <= iq.loc["lcpo", "iqm"] <= iq.loc["lcpo", "ci_high"]
    assert "sac" not in iq.index and agg["left_out_schemes"] == {"sac": 1}  # one row: outside the task set
    assert set(iq.index) == {"lcpo", "trpo", "a2c", "ppo"} and set(iq["cells"]) == {2}
    assert set(agg["rows"]) == {"WindyPendulum-v0/wind-1", "WindyPendulum-v0/wind-3"} and not agg["left_out_rows"]
    taus, prof, lo, hi = agg["profiles"]["lcpo"]
    assert prof[0] == 1.0 and np.all(np.diff(prof) <= 0) and np.all(lo <= prof + 1e-12)
    md = write_report(runs, _EMPTY_EP, tmp_path).read_text()
    assert "## Across environments and traces" in md and (tmp_path / "performance_profile.png").stat().st_size > 1000
    assert pd.read_csv(tmp_path / "iqm.csv")["scheme"].tolist()[0] == "lcpo"


def test_a_cell_with_one_scheme_is_left_out_of_the_normalized_aggregates():
    """A cell where a single scheme finished has no min-max scale (lowest = highest mean): it was scored 1, "the
    best", for that scheme against nobody, lifting its IQM (the study's wind-3 A2C cell, issue 27 item 6)."""
    from lcpo.experiments.report import across_cells, lifelong_table, normalized_table

    cells = {("wind-4", "lcpo"): [-280.0, -276.0, -284.0, -281.0], ("wind-4", "a2c"): [-300.0, -310.0, -290.0, -302.0],
             ("wind-4", "trpo"): [-700.0, -650.0, -760.0, -720.0], ("wind-3", "a2c"): [-263.0, -250.0, -270.0, -240.0],
             ("wind-2", "ppo"): [-400.0, -410.0]}
    runs = make_runs(cells)
    table = lifelong_table(runs)
    norm = normalized_table(table)
    assert set(norm["trace"]) == {"wind-4"} and len(norm) == 3
    agg = across_cells(runs, table, seed=0)
    iq = agg["iqm"].set_index("scheme")
    assert iq.loc["a2c", "cells"] == 1 and iq.loc["a2c", "runs"] == 4  # wind-4 only
    low, high = np.mean(cells[("wind-4", "trpo")]), np.mean(cells[("wind-4", "lcpo")])  # the cell's agent means
    a2c = np.sort([(x - low) / (high - low) for x in cells[("wind-4", "a2c")]])
    assert iq.loc["a2c", "iqm"] == pytest.approx(a2c[1:3].mean()) and iq.loc["a2c", "iqm"] < 0.96  # middle 2 of 4
    assert "ppo" not in iq.index and "ppo" not in agg["profiles"]  # in no cell with a second scheme
    assert agg["poi"].set_index("baseline").loc["a2c", "cells"] == 1


def test_aggregate_block_is_the_largest_scheme_by_row_block_with_lcpo_in():
    from lcpo.experiments.report import aggregate_block

    # the study before its wind-2 LCPO runs: A2C and TRPO on 4 traces, LCPO on 3, DDQN on 2
    rows = {"lcpo": [1, 3, 4], "a2c": [1, 2, 3, 4], "trpo": [1, 2, 3, 4], "ddqn": [3, 4]}
    assert aggregate_block(rows, ["lcpo"]) == (["lcpo", "a2c", "trpo"], [1, 3, 4])  # 9 pairs, not 4 x 2 = 8
    rows["lcpo"].append(2)
    assert aggregate_block(rows, ["lcpo"]) == (["lcpo", "a2c", "trpo"], [1, 3, 4, 2])  # order of first appearance
    # without the requirement the best block may leave LCPO out; ties go to more rows, then more schemes
    assert aggregate_block({"lcpo": {1}, "a2c": {1, 2, 3}, "trpo": {1, 2, 3}}) == (["a2c", "trpo"], [1, 2, 3])
    assert aggregate_block({"lcpo": {1}, "a2c": {1, 2, 3}, "trpo": {1, 2, 3}}, ["lcpo"]) == (
        ["lcpo", "a2c", "trpo"], [1])
    # 4 schemes x 1 row ties 2 x 2: more rows win, then the first schemes in order
    assert aggregate_block({"a": {1, 2}, "b": {1, 2}, "c": {2, 3}, "d": {2, 3}}) == (["a", "b"], [1, 2])
    assert aggregate_block({"a": {1, 2}, "b": {1, 2}, "c": {2}, "d": {2}, "e": {2}}) == (["a", "b", "c", "d", "e"], [2])
    assert aggregate_block({"lcpo": {1}, "a2c": {2}}, ["lcpo"]) == ([], [])  # no shared row
    # many schemes: subsets by coverage order, still a full block
    many = {f"s{i}": set(range(10 - i % 3)) for i in range(16)}
    schemes, block_rows = aggregate_block(many)
    assert all(set(block_rows) <= many[x] for x in schemes) and len(schemes) * len(block_rows) >= 16 * 8


def test_across_cells_scores_every_scheme_on_one_task_set():
    """An agent missing from a hard row used to be scored over its other rows only, and a row missing a strong
    agent scaled the others against a weaker field: IQMs over different task sets, not comparable. Now one block:
    here LCPO and A2C on both traces, TRPO on wind-1 only -> the block is LCPO x A2C x TRPO on wind-1 (3 pairs)
    or LCPO x A2C on both (4 pairs): the latter, TRPO named as left out."""
    from lcpo.experiments.report import across_cells, lifelong_table

    cells = {("wind-1", "lcpo"): [-170.0, -172.0, -174.0], ("wind-1", "a2c"): [-180.0, -186.0, -190.0],
             ("wind-1", "trpo"): [-160.0, -165.0, -161.0],
             ("wind-3", "lcpo"): [-250.0, -260.0, -255.0], ("wind-3", "a2c"): [-300.0, -290.0, -310.0]}
    runs = make_runs(cells)
    agg = across_cells(runs, lifelong_table(runs), seed=0)
    iq = agg["iqm"].set_index("scheme")
    assert list(iq.index) == ["lcpo", "a2c"] and agg["left_out_schemes"] == {"trpo": 1}
    # each row scaled by LCPO's and A2C's means only (TRPO, outside the block, is not in the field): LCPO 1, A2C 0
    lo1, hi1 = np.mean(cells[("wind-1", "a2c")]), np.mean(cells[("wind-1", "lcpo")])
    lcpo1 = sorted((x - lo1) / (hi1 - lo1) for x in cells[("wind-1", "lcpo")])
    lo3, hi3 = np.mean(cells[("wind-3", "a2c")]), np.mean(cells[("wind-3", "lcpo")])
    lcpo3 = sorted((x - lo3) / (hi3 - lo3) for x in cells[("wind-3", "lcpo")])
    pooled = np.sort(lcpo1 + lcpo3)  # 6 runs: the IQM is the mean of the middle 3 (scipy's trim of 25% each side)
    from scipy.stats import trim_mean

    assert iq.loc["lcpo", "iqm"] == pytest.approx(trim_mean(pooled, 0.25))
    assert agg["poi"].set_index("baseline").loc["trpo", "cells"] == 1  # pairwise: over their common row


def test_a_one_row_lcpo_ablation_does_not_shrink_the_task_set():
    """Requiring every LCPO variant in the block made an ablation run on one row collapse the IQM to that row
    (or, sharing no row with LCPO, remove the aggregates): only the LCPO scheme with the most rows is required."""
    from lcpo.experiments.report import across_cells, lifelong_table

    cells = {(t, s): [v, v - 2.0, v + 1.0] for t, base in (("wind-1", -170.0), ("wind-3", -250.0))
             for s, v in (("lcpo", base), ("a2c", base - 20.0), ("trpo", base - 40.0))}
    cells[("wind-3", "lcpo[ood_threshold=5]")] = [-260.0, -262.0, -258.0]
    runs = make_runs(cells)
    agg = across_cells(runs, lifelong_table(runs), seed=0)
    assert set(agg["iqm"]["scheme"]) == {"lcpo", "a2c", "trpo"} and set(agg["iqm"]["cells"]) == {2}
    assert agg["left_out_schemes"] == {"lcpo[ood_threshold=5]": 1}
    poi = agg["poi"]  # both LCPO schemes still compared with each baseline on their common rows
    assert set(zip(poi["scheme"], poi["baseline"], poi["cells"])) == {
        ("lcpo", "a2c", 2), ("lcpo", "trpo", 2), ("lcpo[ood_threshold=5]", "a2c", 1),
        ("lcpo[ood_threshold=5]", "trpo", 1)}


def test_mixed_code_is_refused_unless_allowed_and_then_stated(tmp_path):
    from lcpo.persistence.provenance import MixedCodeError

    runs = make_runs({("wind-1", "lcpo"): [1.0, 2.0, 3.0], ("wind-1", "a2c"): [0.0, 1.0, 2.0]})
    md = write_report(runs, _EMPTY_EP, tmp_path / "old").read_text()  # no code column: unknown, said so
    assert "6 run(s) recorded no commit" in md and "unknown (6 runs)" in md
    runs["code_commit"] = ["aaaaaaa1111", "aaaaaaa1111", "bbbbbbb2222", "ccccccc", "ccccccc", "ccccccc"]
    runs["code_dirty"] = [False] * 5 + [True]
    with pytest.raises(MixedCodeError, match=r"cell WindyPendulum-v0/wind-1/lcpo .*aaaaaaa, bbbbbbb.*--allow-mixed-code"):
        write_report(runs, _EMPTY_EP, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()  # nothing half-written
    md = write_report(runs, _EMPTY_EP, tmp_path / "allowed", allow_mixed_code=True).read_text()
    assert "pooled, as told (--allow-mixed-code)**: WindyPendulum-v0/wind-1/lcpo: aaaaaaa, bbbbbbb" in md
    assert "1 run(s) ran from a tree with uncommitted changes" in md
    runs.loc[0, "code_commit"] = None  # a known commit mixed with an unknown one is mixed too
    runs.loc[1:2, "code_commit"] = "bbbbbbb2222"
    with pytest.raises(MixedCodeError, match="bbbbbbb, unknown"):
        write_report(runs, _EMPTY_EP, tmp_path / "refused2")


def test_report_cli_allow_mixed_code(tmp_path, capsys):
    import json

    from lcpo.online.run import RunConfig, execute

    import shutil

    first = tmp_path / "runs" / "a2c-s0"
    execute(RunConfig(trace="wind-3", trace_length=2000, agent="a2c", steps=400, seed=0), first)
    shutil.copytree(first, tmp_path / "runs" / "a2c-s1")  # a second seed of the cell, on other code
    for seed, commit in ((0, "a" * 40), (1, "b" * 40)):
        out = tmp_path / "runs" / f"a2c-s{seed}"
        for name in ("summary.json", "config.json"):
            d = json.loads((out / name).read_text())
            (d["config"] if name == "summary.json" else d["run"])["seed"] = seed
            if name == "summary.json":
                d["code"] = {"commit": commit, "dirty": False, "source": "git"}
            (out / name).write_text(json.dumps(d))
    assert report_cli.main([str(tmp_path / "runs"), "--out", str(tmp_path / "r1")]) == 2
    assert "pools seeds that ran on different code (aaaaaaa, bbbbbbb)" in capsys.readouterr().err
    assert report_cli.main([str(tmp_path / "runs"), "--out", str(tmp_path / "r2"), "--allow-mixed-code"]) == 0
    assert "as told (--allow-mixed-code)" in (tmp_path / "r2" / "report.md").read_text()


def test_two_constant_cells_are_listed_untested_and_the_report_is_written(tmp_path):
    """Every seed of LCPO and of a baseline at the same value (a sparse reward's floor, -200 per episode on
    MountainCar at a short budget): Welch's test is undefined. The pair is listed as not tested and the report
    is still written, the other pairs tested as before (it used to stop the whole report with a ValueError)."""
    from lcpo.experiments.report import NO_VARIANCE, comparison_table

    cells = {("wind-1", "lcpo"): [-200.0, -200.0, -200.0], ("wind-1", "a2c"): [-200.0, -200.0, -200.0],
             ("wind-1", "trpo"): [-210.0, -190.0, -205.0], ("wind-3", "lcpo"): [-250.0, -250.0],
             ("wind-3", "a2c"): [-300.0, -300.0]}
    comp = comparison_table(make_runs(cells)).set_index(["trace", "baseline"])
    for k in (("wind-1", "a2c"), ("wind-3", "a2c")):
        assert comp.loc[k, "verdict"] == NO_VARIANCE and np.isnan(comp.loc[k, "p"]) and not comp.loc[k, "significant"]
    assert np.isfinite(comp.loc[("wind-1", "trpo"), "p"])
    assert comp.loc[("wind-1", "trpo"), "p_holm"] == pytest.approx(comp.loc[("wind-1", "trpo"), "p"])  # family of 1
    md = write_report(make_runs(cells), _EMPTY_EP, tmp_path).read_text()
    assert NO_VARIANCE in md and "## LCPO against each baseline" in md


def test_a_seed_from_a_modified_tree_beside_a_clean_one_of_the_same_commit_is_mixed_code(tmp_path):
    """Issue 27 item 5: seeds of one cell that ran on different code are not pooled unless told. A seed run
    from a tree with uncommitted changes to the package (summary.json ``code.dirty``) ran on other code than a
    clean seed of the same commit; the report used to pool them, only counting the dirty run."""
    from lcpo.persistence.provenance import MixedCodeError

    runs = make_runs({("wind-1", "lcpo"): [1.0, 2.0, 3.0], ("wind-1", "a2c"): [0.0, 1.0, 2.0]})
    runs["code_commit"] = ["a" * 40] * 6
    runs["code_dirty"] = [False, False, True, True, True, True]
    with pytest.raises(MixedCodeError, match=r"cell WindyPendulum-v0/wind-1/lcpo .*\(aaaaaaa, aaaaaaa\+dirty\)"):
        write_report(runs, _EMPTY_EP, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()
    md = write_report(runs, _EMPTY_EP, tmp_path / "allowed", allow_mixed_code=True).read_text()
    assert "WindyPendulum-v0/wind-1/lcpo: aaaaaaa, aaaaaaa+dirty" in md
    assert "wind-1/a2c: " not in md  # every a2c seed from the same modified tree: pooled, counted
    assert "4 run(s) ran from a tree with uncommitted changes" in md


def test_wall_time_counts_each_population_once(tmp_path):
    """Seeds of one population share its wall time: a 4-seed population of 100 s plus one solo run of 20 s ran
    in 120 s of process time, not 420 s."""
    runs = make_runs({("wind-1", "lcpo"): [-100.0, -101.0, -99.0, -100.5], ("wind-1", "a2c"): [-150.0]})
    runs["wall_time_s"] = [100.0] * 4 + [20.0]
    runs["population_size"] = [4, 4, 4, 4, 1]
    from lcpo.experiments.report import process_wall_time

    assert process_wall_time(runs) == pytest.approx(120.0)
    assert process_wall_time(runs.drop(columns="population_size")) == pytest.approx(420.0)  # older stores
    runs["wall_share_s"] = [np.nan, np.nan, 30.0, 30.0, np.nan]  # where recorded, a run's share counts instead
    assert process_wall_time(runs) == pytest.approx(25.0 + 25.0 + 30.0 + 30.0 + 20.0)
    runs = runs.drop(columns="wall_share_s")
    md = write_report(runs, pd.DataFrame(columns=["run_id", "episode", "step", "return"]), tmp_path).read_text()
    assert "5,000 environment steps in 2.0 min of summed process wall time" in md
    runs.loc[0, "population_size"] = 0
    with pytest.raises(ValueError, match="population_size must be >= 1, got 0"):
        process_wall_time(runs)


def test_store_records_population_size(tmp_path):
    """The store's population_size comes from summary.json's population record (1 when there is none)."""
    import json

    from lcpo.experiments.store import collect

    for name, population in (("a2c-s0", {"size": 3, "seeds": [0, 1, 2]}), ("a2c-s1", None)):
        d = tmp_path / name
        d.mkdir()
        cfg = {"agent": "a2c", "env": "lcpo/WindyPendulum-v0", "seed": int(name[-1]), "steps": 10}
        (d / "config.json").write_text(json.dumps(cfg))
        summary = {"config": cfg, "lifelong_return": -1.0, "steps": 10, "wall_time_s": 3.0}
        if population is not None:
            summary["population"] = population
        (d / "summary.json").write_text(json.dumps(summary))
    runs, _ = collect(tmp_path, episodes=False)
    assert dict(zip(runs.run_id, runs.population_size)) == {"a2c-s0": 3, "a2c-s1": 1}


def test_header_counts_every_state_and_names_finished_runs_without_a_return(tmp_path):
    runs = make_runs({("wind-1", "lcpo"): [-10.0, -11.0, -12.0], ("wind-1", "a2c"): [-20.0, -21.0, np.nan]})
    extra = runs.iloc[[0, 0, 0]].copy()
    extra["run_id"] = ["r-running", "r-interrupted", "r-missing"]
    extra["status"] = ["running", "interrupted", "missing"]
    extra["lifelong_return"] = np.nan
    runs = pd.concat([runs, extra], ignore_index=True)
    text = write_report(runs, pd.DataFrame(), tmp_path).read_text()
    assert ("9 runs: 6 done, 1 running, 1 interrupted (started, not running: rerun the sweep or `lcpo resume` to "
            "continue), 1 not started.") in text
    assert ("1 finished run(s) have no lifelong return (no episode ended after the warm-up, or summary.json "
            "records none) and are left out of every cell: wind-1-a2c-2.") in text
    table = pd.read_csv(tmp_path / "lifelong_return.csv").set_index("scheme")
    assert table.loc["a2c", "n"] == 2 and table.loc["lcpo", "n"] == 3


def test_two_schemes_get_no_iqm_or_profiles_but_keep_the_probability_of_improvement(tmp_path):
    cells = {(t, s): [v, v + 5.0, v - 5.0] for t in ("wind-1", "wind-3") for s, v in (("lcpo", -100.0),
                                                                                     ("a2c", -101.0))}
    md = write_report(make_runs(cells), _EMPTY_EP, tmp_path).read_text()
    assert "No IQM or performance profiles: with 2 scheme(s) setting the scale" in md
    three = {**cells, **{(t, "trpo"): [-130.0, -125.0, -135.0] for t in ("wind-1", "wind-3")}}
    md3 = write_report(make_runs(three), _EMPTY_EP, tmp_path / "reused").read_text()
    assert (tmp_path / "reused" / "performance_profile.png").exists() and "IQM: the mean" in md3
    write_report(make_runs(cells), _EMPTY_EP, tmp_path / "reused")  # the same --out, two schemes now
    assert not (tmp_path / "reused" / "performance_profile.png").exists()
    assert not (tmp_path / "reused" / "normalized_return_cdf.png").exists()
    assert "IQM [95% CI]" not in md and not (tmp_path / "performance_profile.png").exists()
    assert pd.read_csv(tmp_path / "iqm.csv").empty
    assert "P(LCPO > baseline) [95% CI]" in md  # reads the returns, not the 0/1 normalization
    assert "IQM: the mean" not in md and "stratified-bootstrap interval (seeds resampled" in md  # no method, no IQM
    # a scheme left out of the block is still named when there is no IQM (trpo finished on one row of two)
    partial = {**cells, ("wind-1", "trpo"): [-130.0, -125.0, -135.0]}
    md = write_report(make_runs(partial), _EMPTY_EP, tmp_path / "partial").read_text()
    assert "No IQM or performance profiles" in md and "Left out of the block: trpo (finished in 1 row)" in md
    assert "IQM: the mean" not in md


def test_two_online_schemes_with_a_prescient_one_on_the_scale_keep_the_iqm(tmp_path):
    """The prescient scheme's mean is on the min-max scale: the two online schemes are not forced to 0 and 1."""
    cells = {(t, s): [v, v + 5.0, v - 5.0] for t in ("wind-1", "wind-3")
             for s, v in (("lcpo", -100.0), ("a2c", -160.0), ("prescient-a2c", -90.0))}
    md = write_report(make_runs(cells), _EMPTY_EP, tmp_path).read_text()
    iq = pd.read_csv(tmp_path / "iqm.csv").set_index("scheme")["iqm"]
    assert iq["lcpo"] == pytest.approx(60 / 70) and iq["a2c"] == pytest.approx(0.0, abs=1e-12)
    assert "No IQM" not in md and (tmp_path / "performance_profile.png").exists()


def test_a_normalized_zero_prints_as_zero_not_float_noise():
    from lcpo.experiments.report import _denoised

    assert _denoised(iqm=1.4210854715202004e-14, ci_low=-1e-15, ci_high=0.5 + 1e-14) == {
        "iqm": 0.0, "ci_low": 0.0, "ci_high": 0.5}
    assert str(_denoised(iqm=-1e-15)["iqm"]) == "0.0"  # no "-0.0"
    assert np.isnan(_denoised(iqm=np.nan)["iqm"])


def test_the_confidence_level_is_the_one_printed_everywhere(tmp_path):
    cells = {("wind-1", s): [v, v + 1.0, v - 2.0] for s, v in (("lcpo", -100.0), ("a2c", -150.0), ("trpo", -120.0))}
    md = write_report(make_runs(cells), _EMPTY_EP, tmp_path, confidence=0.9).read_text()
    assert "95%" not in md.replace("simulated at the 95% level", "")
    assert "lifelong return [90% CI]" in md and "IQM [90% CI]" in md and "The t interval's 90% coverage" in md
    md = write_report(make_runs(cells), _EMPTY_EP, tmp_path / "995", confidence=0.995).read_text()
    assert "100%" not in md and "lifelong return [99.5% CI]" in md and "a 99.5% Student-t interval" in md


def test_one_seed_cells_are_said_to_have_no_interval(tmp_path):
    cells = {("wind-1", s): [v] for s, v in (("lcpo", -100.0), ("a2c", -150.0), ("trpo", -120.0))}
    md = write_report(make_runs(cells), _EMPTY_EP, tmp_path).read_text()
    assert "no cell has an interval and no difference is tested" in md and "coverage is exact" not in md
    mixed = {**cells, ("wind-3", "lcpo"): [-1.0, -2.0]}
    md = write_report(make_runs(mixed), _EMPTY_EP, tmp_path / "m").read_text()
    assert "Cells with one seed have no interval and are not tested." in md


def test_a_sweep_with_no_finished_run_gets_a_report_not_a_crash(tmp_path):
    """The rank table selected columns instead of rows on an empty lifelong table (object-dtype mask): KeyError."""
    runs = make_runs({("wind-1", "lcpo"): [np.nan, np.nan], ("wind-1", "prescient-sac"): [np.nan]})
    runs["status"] = ["running", "running", "missing"]
    runs["steps_done"] = runs["wall_time_s"] = np.nan  # what the store gives runs without a summary
    text = write_report(runs, _EMPTY_EP, tmp_path).read_text()
    assert "3 runs: 2 running, 1 not started. No compute recorded yet (no run has finished)." in text
    assert "No finished runs yet." in text and "nan" not in text


def test_finished_runs_without_a_lifelong_return_are_not_called_unfinished(tmp_path):
    runs = make_runs({("wind-1", "lcpo"): [np.nan], ("wind-1", "a2c"): [np.nan]})
    runs["code_commit"], runs["code_dirty"] = "abcdef0123456789", False
    text = write_report(runs, _EMPTY_EP, tmp_path).read_text()
    assert "2 runs: 2 done." in text and "Code of the finished runs (summary.json `code`): abcdef0 (2 runs)." in text
    assert "Seeds per cell: none, no finished run has a lifelong return yet." in text
    assert "No tables: no finished run has a lifelong return (listed above)." in text
    assert "none finished yet" not in text and "No finished runs yet" not in text


@pytest.mark.parametrize("args, text", [
    ((-172.5, -177.5, -167.5), "-172.5 [-177.5, -167.5]"),  # half-width 5: 1 decimal, as before
    ((2.29, 2.28, 2.30), "2.290 [2.280, 2.300]"),  # half-width 0.01: 3 decimals (1 decimal hid the interval)
    ((348.61, 346.12, 351.1), "348.6 [346.1, 351.1]"),
    ((0.5, 0.2, 0.8), "0.50 [0.20, 0.80]"),  # half-width 0.3
    ((1234.0, 1000.0, 1468.0), "1234.0 [1000.0, 1468.0]"),  # never fewer than 1 decimal
    ((1e-9, 0.0, 2e-9), "0.000000 [0.000000, 0.000000]"),  # never more than 6
    ((2.29, float("nan"), float("nan")), "2.29"),  # 1 seed: 3 significant digits
    ((-172.54, float("nan"), float("nan")), "-172.5"),
    ((0.001234, float("nan"), float("nan")), "0.00123"),
    ((3.0, 3.0, 3.0), "3.00 [3.00, 3.00]"),  # seeds all equal: a zero-width interval, shown
    ((float("nan"), 1.0, 2.0), "n/a"),
])
def test_interval_text_shows_the_interval_at_its_scale(args, text):
    from lcpo.experiments.report import interval_text

    assert interval_text(*args) == text
