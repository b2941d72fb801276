"""benchmarks/study.py (issue 27 item 6): harvest and report any study sweep folder, finished or partial.

Fast tests: a synthetic sweep folder written here (sweep.json specs and summary.json files with chosen lifelong
returns, windy Pendulum traces wind-1 and wind-3, LCPO, A2C, TRPO and two prescient agents at 3 seeds; the
wind-3 TRPO cell never ran and one wind-3 A2C seed failed), whose report is checked against values computed here:
the Student-t intervals, Welch's p-values and Holm's correction by hand, the "not run yet" rows, the paper's
values, the verdict sentence, the settings tables, the per-cell code and the refusal of cells that mix commits.
Slow test: a tiny real sweep (3,000-step runs) harvested and reported with forgetting as lost return.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

TRACES = ("wind-1", "wind-3")
COMMIT = "96e83d8aa2b84f36f1d7e0d3f0c2a1b0c9d8e7f6"
#: (trace, agent) -> lifelong returns of seeds 0, 1, 2: LCPO far above A2C on both traces (significant), close
#: to TRPO on wind-1 (not significant)
VALUES = {("wind-1", "lcpo"): [-170.0, -172.0, -174.0], ("wind-1", "a2c"): [-230.0, -236.0, -228.0],
          ("wind-1", "trpo"): [-168.0, -180.0, -175.0], ("wind-1", "prescient-a2c"): [-160.0, -166.0, -163.0],
          ("wind-1", "prescient-trpo"): [-190.0, -150.0, -170.0],
          ("wind-3", "lcpo"): [-250.0, -262.0, -255.0], ("wind-3", "a2c"): [-300.0, -310.0, None],
          ("wind-3", "prescient-a2c"): [-240.0, -245.0, -250.0], ("wind-3", "prescient-trpo"): [-260.0, -270.0,
                                                                                                 -255.0]}
NOT_RUN = ("wind-3", "trpo")


@pytest.fixture(scope="module")
def study(load_benchmark):
    return load_benchmark("study")


AGENTS = ("lcpo", "a2c", "trpo", "prescient-a2c", "prescient-trpo")


def _write_synthetic(folder: Path, agents=AGENTS) -> Path:
    """A sweep folder as `lcpo sweep` leaves it, without learning: sweep.json, and per finished run a
    summary.json (a failed run: error.json; the not-run cell: nothing)."""
    specs = []
    for trace in TRACES:
        steps = 20_000_000 if trace == "wind-1" else 8_000_000
        for agent in agents:
            for seed in range(3):
                cfg = {"env": "lcpo/WindyPendulum-v0", "trace": trace, "trace_length": steps, "agent": agent,
                       "steps": steps, "seed": seed, "overrides": {}, "env_kwargs": {}, "warmup_steps": 6_000_000,
                       "reset": "end", "checkpoint_every": 1_000_000, "tensorboard": False}
                rid = f"WindyPendulum-v0_{trace}_{agent}_s{seed}"
                specs.append({"run_id": rid, "config": cfg})
                run = folder / "runs" / rid
                value = None if (trace, agent) == NOT_RUN else VALUES[(trace, agent)][seed]
                if (trace, agent) == NOT_RUN:
                    continue
                run.mkdir(parents=True)
                if value is None:
                    (run / "error.json").write_text(json.dumps({"error": "RuntimeError: boom", "config": cfg}))
                    continue
                (run / "summary.json").write_text(json.dumps({
                    "config": cfg, "lifelong_return": value, "episodes": steps // 200, "steps": steps,
                    "wall_time_s": 3600.0 + seed, "steps_per_s": steps / 3600.0,
                    "code": {"commit": COMMIT, "dirty": False}, "population": {"size": 3}}))
    (folder / "sweep.json").write_text(json.dumps({"name": "synthetic-study", "executor": "lcpo.online.run",
                                                   "specs": specs}))
    return folder


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    return _write_synthetic(tmp_path_factory.mktemp("study") / "sweep")


@pytest.fixture(scope="module")
def text(study, synthetic) -> str:
    return study.report(synthetic, forgetting=False).read_text()


def _summaries(folder: Path) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = {}
    for f in sorted((folder / "runs").glob("*/summary.json")):
        s = json.loads(f.read_text())
        out.setdefault((s["config"]["trace"], s["config"]["agent"]), []).append(s["lifelong_return"])
    return out


def _rows(text: str, heading: str) -> dict[str, list[str]]:
    """The first table after ``heading``: first cell -> cells (header and separator left out)."""
    out, seen = {}, False
    for ln in text.split(heading, 1)[1].splitlines()[1:]:
        if ln.startswith("|"):
            seen = True
            cells = [x.strip() for x in ln.strip().strip("|").split("|")]
            if cells[0] not in ("agent", "X") and not set(ln) <= set("|-"):
                out[cells[0]] = cells
        elif seen:
            break
    return out


def _row_list(text: str, heading: str) -> list[list[str]]:
    part = text.split(heading, 1)[1].split("\n## ", 1)[0]
    return [[x.strip() for x in ln.strip().strip("|").split("|")] for ln in part.splitlines()
            if ln.startswith("| ") and not ln.startswith("| env")]


def _holm(p: np.ndarray) -> np.ndarray:
    order = np.argsort(p)
    adj = np.empty_like(p)
    running = 0.0
    for i, k in enumerate(order):
        running = max(running, (len(p) - i) * p[k])
        adj[k] = min(1.0, running)
    return adj


def _p(x: float) -> str:
    return f"{x:.3f}" if x >= 0.001 else f"{x:.1e}"


def _finished(trace: str, agent: str) -> np.ndarray:
    return np.array([v for v in VALUES.get((trace, agent), []) if v is not None])


def test_cell_tables_hold_t_intervals_and_not_run_yet_rows(text):
    for trace in TRACES:
        rows = _rows(text, f"trace `{trace}`")
        for agent in ("lcpo", "a2c", "trpo", "prescient-a2c", "prescient-trpo"):
            if (trace, agent) == NOT_RUN:
                continue
            v = _finished(trace, agent)
            half = stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
            got = [float(x) for x in re.findall(r"-?\d+\.\d", rows[agent.upper()][2])]
            assert got == pytest.approx([v.mean(), v.mean() - half, v.mean() + half], abs=0.051)
    assert _rows(text, "trace `wind-3`")["A2C"][1] == "2 of 3"  # a failed seed: a partial cell says so
    trpo3 = _rows(text, "trace `wind-3`")["TRPO"]
    assert trpo3[1:4] == ["0 of 3", "not run yet", "-511"]  # the paper's trace-3 TRPO (Table 6)
    rows = _rows(text, "trace `wind-1`")
    assert [rows[a][3] for a in ("LCPO", "A2C", "TRPO")] == ["-190", "-201", "-222"]  # paper, trace 1
    # our ranks among the online agents by mean (LCPO -172.0, TRPO -174.3, A2C -231.3) and the paper's
    assert [rows[a][4] for a in ("LCPO", "TRPO", "A2C")] == ["1", "2", "3"]
    assert [rows[a][5] for a in ("LCPO", "A2C", "TRPO")] == ["1", "2", "3"]
    assert rows["PRESCIENT-A2C"][4] == "—"  # prescient agents are not ranked with the online ones
    assert "Best prescient agent here: PRESCIENT-A2C (-163.0), the highest mean of 2" in text
    assert "The paper's best prescient agent on this trace is prescient SAC (-187)." in text
    assert "**Status**: 30 runs in the sweep: 26 finished, 1 failed, 3 not run yet" in text


def test_welch_holm_over_the_whole_report_and_the_verdict_sentence(text):
    pairs = [("wind-1", "a2c"), ("wind-1", "trpo"), ("wind-3", "a2c")]
    p = np.array([stats.ttest_ind(_finished(t, "lcpo"), _finished(t, b), equal_var=False).pvalue
                  for t, b in pairs])
    adj = _holm(p)
    assert (adj <= 0.05).tolist() == [True, False, True]  # the chosen values: A2C below LCPO, TRPO level
    for (t, b), pi, ai in zip(pairs, p, adj):
        cell = _rows(text, f"trace `{t}`")[b.upper()][6]
        assert cell == f"{_p(pi)} / {_p(ai)}: " + ("**LCPO higher**" if ai <= 0.05 else "not significant")
    sentence = next(ln for ln in text.splitlines() if ln.startswith("Welch's t-test (two-sided)"))
    assert "over all 3 tested pairs" in sentence and "The other 1 difference is not significant" in sentence
    assert re.search(r"Significant after the correction: LCPO above A2C on WindyPendulum-v0 `wind-1` "
                     r"\(difference \+\d+\.\d, Holm p [\d.e-]+\); LCPO above A2C on WindyPendulum-v0 `wind-3`",
                     sentence)
    lc = _row_list(text, "LCPO's rank among the online agents")
    assert [r[:3] for r in lc] == [["WindyPendulum-v0", "wind-1", "1 of 3"], ["WindyPendulum-v0", "wind-3", "1 of 2"]]


def test_across_cells_settings_and_runs_sections(text, synthetic):
    assert (synthetic / "performance_profile.png").is_file()
    iqm = _rows(text, "| agent | cells | runs | IQM")
    assert "IQM: the mean of the middle half" in text  # the method of the IQM printed
    # wind-3 has no TRPO: pooled, A2C's IQM came from 2 cells and TRPO's from 1 (A2C's score on wind-3 measured
    # against a field without TRPO); now one task set, the largest block: LCPO x A2C on both cells (4 agent-cells)
    # beats LCPO x A2C x TRPO on wind-1 (3), and TRPO is named as left out
    assert set(iqm) == {"LCPO", "A2C"} and [iqm[a][1:3] for a in ("LCPO", "A2C")] == [["2", "6"], ["2", "5"]]  # one A2C seed failed
    assert ("One task set: 2 cell(s) x 2 online agents (A2C, LCPO), the largest block in which every agent "
            "finished in every cell (of 3 online agents") in text
    assert "Left out: TRPO (finished in 1 of the cells)." in text
    assert "No CDF: 2 online agent(s)" in text  # min-max of two agents is 0 / 1 in every cell
    # the field of the normalization: the block's agents and both prescient agents (they finished in both cells)
    norm = pd.read_csv(synthetic / "normalized_return.csv")
    assert set(norm["scheme"]) == {"lcpo", "a2c", "prescient-a2c", "prescient-trpo"} and len(norm) == 8
    poi = _rows(text, "| X | common cells |")
    # LCPO wins every (LCPO seed, A2C seed) pair on both traces: P = 1; TRPO: Mann-Whitney U / 9 on wind-1
    u = sum((a > b) + 0.5 * (a == b) for a in _finished("wind-1", "lcpo") for b in _finished("wind-1", "trpo"))
    assert poi["A2C"][2].startswith("1.00") and poi["TRPO"][2].startswith(f"{u / 9:.2f}")
    assert "Not evaluated in this report (`--no-forgetting`)." in text
    settings = text.split("## Settings: ours, the paper's, the authors'", 1)[1].split("\n## Runs per cell", 1)[0]
    assert "### LCPO\n" in settings and "### TRPO\n" in settings and "### Prescient agents" in settings
    assert "### PPO" not in settings and "straggler" not in settings.lower()  # only this study's agents
    runs = _row_list(text, "## Runs per cell")
    assert [r[3:6] for r in runs if r[1] == "wind-3" and r[2] == "trpo"] == [["0 / 3", "0", "not run yet"]]
    (a2c3,) = [r for r in runs if r[1] == "wind-3" and r[2] == "a2c"]
    # two finished seeds of a 3-seed population: each counts its third of the population's wall time
    assert a2c3[3:6] == ["2 / 3", "1", f"{(3600 + 3601) / 3 / 3600:.2f} h ({(3600 + 3601) / 3600:.2f} h summed "
                                       "over seeds)"] and a2c3[7:] == ["3", COMMIT[:7]]


def test_mixed_commits_are_refused_unless_told(study, tmp_path):
    from lcpo.persistence.provenance import MixedCodeError

    folder = _write_synthetic(tmp_path / "mixed")
    f = folder / "runs" / "WindyPendulum-v0_wind-1_a2c_s0" / "summary.json"
    s = json.loads(f.read_text())
    s["code"] = {"commit": "0123456789abcdef", "dirty": True}
    f.write_text(json.dumps(s))
    with pytest.raises(MixedCodeError, match=r"cell WindyPendulum-v0/wind-1/.*/a2c pools seeds that ran on "
                                             r"different code \(0123456\+dirty, 96e83d8\)"):
        study.report(folder, forgetting=False)
    assert not (folder / "report.md").exists()  # refused before anything is written
    text = study.report(folder, forgetting=False, allow_mixed_code=True).read_text()
    assert "**Seeds that ran on different code are pooled, as told (--allow-mixed-code)**" in text
    (row,) = [r for r in _row_list(text, "## Runs per cell") if r[1] == "wind-1" and r[2] == "a2c"]
    assert row[-1] == f"0123456+dirty, {COMMIT[:7]}"


def test_runs_of_another_sweep_folder_join_the_tables(study, tmp_path, text):
    """configs/study-pendulum-extra.toml runs into a folder of its own; --include puts its runs in the tables."""
    main = _write_synthetic(tmp_path / "main", agents=("lcpo", "a2c", "trpo"))
    _write_synthetic(tmp_path / "main" / "extra", agents=("prescient-a2c", "prescient-trpo"))
    alone = study.report(main, forgetting=False).read_text()
    assert "PRESCIENT-A2C" not in alone
    both = study.report(main, include=[main / "extra"], forgetting=False).read_text()
    for trace in TRACES:  # the same cell tables as one folder holding every run
        assert _rows(both, f"trace `{trace}`") == _rows(text, f"trace `{trace}`")
    assert "**Status**: 30 runs in the sweep: 26 finished, 1 failed, 3 not run yet" in both


@pytest.mark.slow
def test_a_tiny_real_sweep_is_harvested_and_reported_with_forgetting(study, tmp_path):
    from lcpo.experiments.config import expand, parse_config
    from lcpo.experiments.runner import run_sweep

    folder = tmp_path / "sweep"
    cfg = parse_config({"name": "tiny-study", "envs": ["lcpo/WindyPendulum-v0"], "traces": list(TRACES),
                        "trace_length": 1000, "agents": ["lcpo", "a2c", "trpo"], "seeds": 3, "steps": 1000,
                        "warmup_steps": 400, "checkpoint_every": 0, "overrides": {"lcpo": {"reservoir_size": 2000}}})
    specs = expand(cfg)
    only = [s.run_id for s in specs if not (s.config["trace"], s.config["agent"]) == NOT_RUN]
    run_sweep(specs, folder, workers=1, name="tiny-study", progress=False, write_store=False, only=only)
    study.main(["harvest", "--out", str(folder)])
    assert len(list((folder / "runs").glob("*/episodes_binned.csv.gz"))) == 15
    study.main(["report", "--out", str(folder), "--regimes", "2", "--episodes", "1", "--episode-steps", "10"])
    text = (folder / "report.md").read_text()
    assert "**Status**: 18 runs in the sweep: 15 finished, 0 failed, 3 not run yet" in text
    vals = {}
    for f in (folder / "runs").glob("*/summary.json"):
        sm = json.loads(f.read_text())
        vals.setdefault((sm["config"]["trace"], sm["config"]["agent"]), []).append(sm["lifelong_return"])
    v = np.array(vals[("wind-1", "lcpo")])
    half = stats.t.ppf(0.975, 2) * v.std(ddof=1) / math.sqrt(3)
    got = [float(x) for x in re.findall(r"-?\d+\.\d", _rows(text, "trace `wind-1`")["LCPO"][2])]
    assert got == pytest.approx([v.mean(), v.mean() - half, v.mean() + half], abs=0.051)
    forgetting = text.split("## Forgetting: lost return on reference contexts", 1)[1]
    for trace in TRACES:  # forgetting per agent, 3 seeds each, from the runs' snapshots
        for agent in (r"lcpo\[reservoir_size=2000\]", "a2c"):  # the forgetting module names schemes in full
            assert re.search(rf"\| WindyPendulum-v0 {trace} \| {agent} \| 3 \| -?\d", forgetting)
    assert (folder / "forgetting_summary.csv").is_file()


def test_an_agent_alone_in_its_cell_gets_no_rank(study, tmp_path):
    """docs/results/study/report.md gave wind-4 LCPO "rank (ours) 1" with A2C and TRPO not run yet: first of
    one is no rank (the closing note: no rank to claim). A rank needs a second finished online agent."""
    alone = study.report(_write_synthetic(tmp_path / "alone", agents=("lcpo", "prescient-a2c")),
                         forgetting=False).read_text()
    for trace in TRACES:
        row = _rows(alone, f"trace `{trace}`")["LCPO"]
        assert row[4] == "—" and row[5] == "—", row  # rank (ours), rank (paper)
    both = _rows(study.report(_write_synthetic(tmp_path / "both", agents=("lcpo", "a2c")),
                              forgetting=False).read_text(), "trace `wind-1`")
    assert (both["LCPO"][4], both["A2C"][4]) == ("1", "2")


def test_prescient_sac_row_shows_the_papers_value(study, tmp_path):
    """Issue 27 item 4: the paper's best prescient agent is SAC (-187 on trace 1, -203 on trace 3). The study
    runs prescient SAC (configs/study-pendulum-extra.toml), and its row showed "—" in the paper column."""
    VALUES.update({(t, "prescient-sac"): [-180.0 - i, -181.0 - i, -182.0 - i] for i, t in enumerate(TRACES)})
    try:
        text = study.report(_write_synthetic(tmp_path / "s", agents=("lcpo", "a2c", "prescient-sac")),
                            forgetting=False).read_text()
    finally:
        for t in TRACES:
            VALUES.pop((t, "prescient-sac"))
    assert _rows(text, "trace `wind-1`")["PRESCIENT-SAC"][3] == "-187"
    assert _rows(text, "trace `wind-3`")["PRESCIENT-SAC"][3] == "-203"
    assert _rows(text, "trace `wind-3`")["A2C"][3] == "-307"


def test_a_populations_wall_time_is_counted_once(study, tmp_path):
    """The 10 seeds of docs/results/study's wind-4 LCPO ran as one population of 2.66 h; each seed's summary
    holds that wall time, and "wall time (sum over seeds)" showed 26.61 h, ten times the cost."""
    folder = _write_synthetic(tmp_path / "pop", agents=("lcpo", "a2c"))
    for f in (folder / "runs").glob("*_lcpo_*/summary.json"):
        s = json.loads(f.read_text())
        s["wall_time_s"], s["population"] = 9000.0, {"size": 3, "seeds": [0, 1, 2], "steps_per_s": 1.0}
        f.write_text(json.dumps(s))
    for f in (folder / "runs").glob("*_a2c_*/summary.json"):  # the A2C seeds ran alone
        s = json.loads(f.read_text())
        del s["population"]
        f.write_text(json.dumps(s))
    rows = _row_list(study.report(folder, forgetting=False).read_text(), "## Runs per cell")
    wall = {(r[1], r[2]): r[5] for r in rows}
    assert wall[("wind-1", "lcpo")] == "2.50 h (7.50 h summed over seeds)"
    assert wall[("wind-1", "a2c")] == f"{(3600 * 3 + 0 + 1 + 2) / 3600:.2f} h"  # solo runs: each counts


def test_a_cell_where_one_agent_finished_is_left_out_of_the_aggregates(study, tmp_path):
    """docs/results/study/report.md pooled wind-3, where only A2C had finished, into A2C's IQM: min-max
    normalization of a cell with one agent mean scored every A2C seed 1, "the best", against nobody (A2C's IQM
    0.99 beside LCPO's 1.00). Such a cell has no scale; it is left out and named."""
    import shutil

    import pandas as pd

    folder = _write_synthetic(tmp_path / "lone", agents=("lcpo", "a2c", "trpo"))
    for run in (folder / "runs").glob("WindyPendulum-v0_wind-3_lcpo_*"):
        shutil.rmtree(run)  # wind-3: A2C alone (TRPO never ran there)
    text = study.report(folder, forgetting=False).read_text()
    iqm = _rows(text, "| agent | cells | runs | IQM")
    assert [iqm[a][1:3] for a in ("LCPO", "A2C", "TRPO")] == [["1", "3"], ["1", "3"], ["1", "3"]]
    assert ("One task set: 1 cell(s) x 3 online agents (A2C, LCPO, TRPO), the largest block in which every agent "
            "finished in every cell") in text
    assert "Left out: WindyPendulum-v0 `wind-3` (no LCPO, TRPO)." in text
    assert set(pd.read_csv(folder / "normalized_return.csv")["trace"]) == {"wind-1"}
    only = study.report(_write_synthetic(tmp_path / "only", agents=("a2c",)), forgetting=False).read_text()
    assert "No cell has two online agents finished yet: nothing to normalize or aggregate." in only
    assert "| agent | cells | runs | IQM" not in only


def test_a_run_in_two_given_folders_is_refused_not_counted_twice(study, tmp_path):
    """`study.py report --out S --include S` (or --include a copy of S) put every seed in the tables twice: the
    cells showed 8 seeds for 4 and Student-t intervals narrowed as if they were independent."""
    import shutil

    folder = _write_synthetic(tmp_path / "main", agents=("lcpo", "a2c"))
    copy = Path(shutil.copytree(folder, tmp_path / "copy"))
    with pytest.raises(ValueError, match=r"main/runs/.. is given twice"):
        study.report(folder, include=[folder / "runs" / ".."], forgetting=False)
    with pytest.raises(ValueError, match=r"run WindyPendulum-v0_wind-1_lcpo_s0 is in .*main and in .*copy"):
        study.report(folder, include=[copy], forgetting=False)
    assert not (folder / "report.md").exists()  # refused before anything is written
    with pytest.raises(SystemExit) as info:  # the command: one line, no traceback
        study.main(["report", "--out", str(folder), "--include", str(copy), "--no-forgetting"])
    assert "run WindyPendulum-v0_wind-1_lcpo_s0 is in" in str(info.value.code)


def test_mixed_commits_are_one_line_from_the_command(study, tmp_path):
    """The refusal of a cell whose seeds ran on different code ended `study.py report` with a traceback."""
    folder = _write_synthetic(tmp_path / "mixed", agents=("lcpo", "a2c"))
    f = folder / "runs" / "WindyPendulum-v0_wind-1_a2c_s0" / "summary.json"
    s = json.loads(f.read_text())
    s["code"] = {"commit": "0123456789abcdef", "dirty": False}
    f.write_text(json.dumps(s))
    with pytest.raises(SystemExit) as info:
        study.main(["report", "--out", str(folder), "--no-forgetting"])
    message = str(info.value.code)
    assert "pools seeds that ran on different code" in message and "--allow-mixed-code" in message
    assert len(message.splitlines()) == 1


def test_pending_cells_say_what_their_runs_are_doing_and_two_agents_get_no_iqm(study, tmp_path):
    folder = _write_synthetic(tmp_path / "two", agents=("lcpo", "a2c"))
    for run in (folder / "runs").glob("WindyPendulum-v0_wind-3_a2c_*"):
        for f in run.iterdir():
            f.unlink()
        (run / "config.json").write_text("{}")  # started, stopped before a summary (the error.json run too)
    text = study.report(folder, forgetting=False).read_text()
    cells = text.split("## Lifelong return per cell", 1)[1].split("\n## Which differences", 1)[0]
    runs = text.split("## Runs per cell", 1)[1]
    assert "| A2C | 0 of 3 | 3 interrupted |" in cells and "not run yet" not in cells
    assert "3 interrupted" in runs and "not run yet" not in runs
    assert "No IQM or performance profiles: 2 agent(s) set the 0-1 scale" in text
    assert "| agent | cells | runs | IQM" not in text and not (folder / "performance_profile.png").exists()
    assert "IQM: the mean" not in text and "P(LCPO > X): per cell" in text


def test_a_straggler_only_report_says_why_forgetting_is_not_measured(study, tmp_path):
    """A folder of straggler runs has no context trace to hold fixed: the report says so, rather than pointing at
    a `--no-forgetting` flag that would change nothing; a windy folder keeps the flag's sentence."""
    folder = tmp_path / "straggler"
    folder.mkdir()
    specs = []
    for agent in ("lcpo", "a2c"):
        for seed in range(2):
            cfg = {"env": "lcpo/StragglerMitigation-v0", "trace": "azure-llm", "trace_length": 400_000,
                   "agent": agent, "steps": 400_000, "seed": seed, "overrides": {}, "env_kwargs": {},
                   "warmup_steps": 0, "reset": "end", "checkpoint_every": 100_000, "tensorboard": False}
            rid = f"StragglerMitigation-v0_azure-llm_{agent}_s{seed}"
            specs.append({"run_id": rid, "config": cfg})
            (folder / "runs" / rid).mkdir(parents=True)
            (folder / "runs" / rid / "summary.json").write_text(json.dumps({
                "config": cfg, "lifelong_return": -60.0 - seed - (agent == "a2c"), "episodes": 2000,
                "steps": 400_000, "wall_time_s": 100.0, "steps_per_s": 4000.0,
                "code": {"commit": COMMIT, "dirty": False}, "population": {"size": 2}}))
    (folder / "sweep.json").write_text(json.dumps({"name": "s", "executor": "lcpo.online.run", "specs": specs}))
    text = study.report(folder, forgetting=False).read_text()
    section = text.split("## Forgetting: lost return on reference contexts")[1].split("\n## ")[0]
    assert "no reference context regimes" in section and "NoContextTrace" in section
    assert "`--no-forgetting`" not in section
