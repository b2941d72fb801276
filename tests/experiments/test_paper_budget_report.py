"""Issue 16's results script (benchmarks/paper_budget.py): the compact files it commits and the verdicts its
report states (issue 27: t intervals, Welch + Holm, the paper's quotes, provenance, the straggler score both ways).

The runs take core-hours; these tests build tiny fake run folders and check, without learning, that the binned
episode file keeps every episode and weights each window's mean correctly, that the tables rank agents by their
mean and compare to the paper's own ranking, and that the straggler section's "vs best fixed" percentages and
"Paper Table 1's shape" sentence follow the numbers (a report whose verdicts ignored them would be worthless).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


@pytest.fixture(scope="module")
def pb(load_benchmark):
    return load_benchmark("paper_budget")


def test_harvest_bins_every_episode_with_its_window_mean(pb, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    rng = np.random.default_rng(0)
    n = 500
    steps = np.sort(rng.integers(1, 5 * pb.BIN_STEPS + 1, size=n))  # episodes end anywhere in 5 windows
    ep = pd.DataFrame({"step": steps, "return": rng.normal(-300.0, 50.0, size=n),
                       "context_0": rng.normal(size=n), "length": 200})
    ep.to_csv(run / "episodes.csv", index=False)
    assert pb.harvest_run(run) == ["episodes_binned.csv.gz"]
    with gzip.open(run / "episodes_binned.csv.gz", "rt") as f:
        binned = pd.read_csv(f)
    assert int(binned["episodes"].sum()) == n  # no episode lost or counted twice
    assert list(binned.columns) == ["step", "episodes", "return", "context_0"]
    for _, row in binned.iterrows():
        # an episode ending exactly at a window's last step belongs to that window
        inside = ep[(ep["step"] > row["step"] - pb.BIN_STEPS) & (ep["step"] <= row["step"])]
        assert row["episodes"] == len(inside)
        assert row["step"] % pb.BIN_STEPS == 0
        assert row["return"] == pytest.approx(inside["return"].mean(), rel=1e-4)
        assert row["context_0"] == pytest.approx(inside["context_0"].mean(), rel=1e-3, abs=1e-4)
    # the episode-weighted mean of the windows is the run's mean episodic return (what the figures average)
    assert np.average(binned["return"], weights=binned["episodes"]) == pytest.approx(ep["return"].mean(), rel=1e-4)
    assert pb.harvest_run(run) == []  # already harvested: nothing rewritten without --force


def test_harvest_without_drift_skips_only_the_drift_file(pb, tmp_path, monkeypatch):
    run = tmp_path / "run"
    (run / "probes").mkdir(parents=True)
    pd.DataFrame({"step": [1, 2], "return": [-1.0, -2.0], "length": 200}).to_csv(run / "episodes.csv", index=False)
    calls = []
    monkeypatch.setattr(pb, "forgetting_of", lambda r: calls.append(r) or pd.DataFrame({"lag": [1], "kl": [0.5]}))
    assert pb.harvest_run(run, drift=False) == ["episodes_binned.csv.gz"]
    assert calls == [] and not (run / "forgetting.csv.gz").exists()
    # a later harvest with the drift diagnostic writes only what is missing: the drift file
    assert pb.harvest_run(run) == ["forgetting.csv.gz"]
    assert calls == [run]
    with gzip.open(run / "forgetting.csv.gz", "rt") as f:
        assert pd.read_csv(f)["kl"].tolist() == [0.5]


def _runs(rows) -> pd.DataFrame:
    return pd.DataFrame([{"trace": t, "agent": a, "seed": s, "steps": 20_000_000, "lifelong_return": r}
                         for t, a, s, r in rows])


def _table_rows(lines: list[str]) -> dict[str, list[str]]:
    return {cells[0]: cells for cells in ([c.strip() for c in ln.strip("|").split("|")] for ln in lines
                                          if ln.startswith("| ") and not ln.startswith("| agent"))}


def test_main_table_ranks_by_mean_and_against_the_papers_order(pb):
    runs = _runs([("wind-1", "lcpo", 0, -170.0), ("wind-1", "lcpo", 1, -180.0),
                  ("wind-1", "a2c", 0, -150.0), ("wind-1", "a2c", 1, -200.0), ("wind-1", "a2c", 2, -220.0),
                  ("wind-1", "ppo", 0, -210.0)])
    rows = _table_rows(pb.main_table(runs))
    assert set(rows) == {"LCPO", "A2C", "PPO"}
    # columns: agent, seeds, mean [CI], per seed, paper, rank (ours), rank (paper)
    assert rows["LCPO"][1] == "2" and rows["LCPO"][2].startswith("-175.0 [")
    assert rows["A2C"][2].startswith("-190.0 [") and rows["A2C"][3] == "-150.0, -200.0, -220.0"
    assert rows["PPO"][2] == "-210.0 (1 seed)"  # one seed: no interval claimed
    assert [rows[a][5] for a in ("LCPO", "A2C", "PPO")] == ["1", "2", "3"]
    # the paper ranks only the agents it reports: LCPO -190 before A2C -201; PPO is not in its tables
    assert [rows[a][4] for a in ("LCPO", "A2C", "PPO")] == ["-190", "-201", "—"]
    assert [rows[a][6] for a in ("LCPO", "A2C", "PPO")] == ["1", "2", "—"]
    lo, hi = map(float, re.findall(r"-?\d+\.\d", rows["A2C"][2])[1:3])
    half = 4.302653 * np.std([-150.0, -200.0, -220.0], ddof=1) / np.sqrt(3)  # t_{0.975, 2} s / sqrt(n)
    assert (lo, hi) == pytest.approx((-190.0 - half, -190.0 + half), abs=0.06)  # the Student-t interval
    assert rows["A2C"][7] == "not significant" or rows["A2C"][7].endswith("not significant")
    assert rows["PPO"][7] == "not tested (1 seed)" and rows["LCPO"][7] == "—"


def test_the_papers_numbers_are_quoted_exactly(pb):
    """Issue 27 item 4: paper Table 6 gives trace 3 DDQN -612 and SAC -402; prescient TRPO -197 / -320; the
    paper's best prescient agent is SAC, -187 / -203."""
    assert pb.PAPER["wind-1"] == {"lcpo": -190, "a2c": -201, "trpo": -222, "ddqn": -219, "sac": -207,
                                  "prescient-trpo": -197}
    assert pb.PAPER["wind-3"] == {"lcpo": -240, "a2c": -307, "trpo": -511, "ddqn": -612, "sac": -402,
                                  "prescient-trpo": -320}
    assert pb.PAPER_BEST_PRESCIENT == {"wind-1": ("prescient SAC", -187), "wind-3": ("prescient SAC", -203)}
    runs = _runs([("wind-3", "sac", 0, -264.4), ("wind-3", "lcpo", 0, -255.0), ("wind-3", "lcpo", 1, -265.0)])
    text = "\n".join(pb.main_table(runs))
    assert _table_rows(text.splitlines())["SAC"][4] == "-402"
    assert "best prescient agent on this trace is prescient SAC (-203); its prescient TRPO scores -320" in text


_AUDIT = [("wind-1", "lcpo", [-170.7, -174.7, -172.1]), ("wind-1", "trpo", [-171.3, -170.7, -182.4]),
          ("wind-1", "a2c", [-198.0, -183.1, -178.8]), ("wind-1", "ppo", [-212.7, -201.2, -211.6]),
          ("wind-3", "lcpo", [-255.6, -267.1, -267.0]), ("wind-3", "trpo", [-240.5, -314.5, -214.0]),
          ("wind-3", "a2c", [-268.7, -420.2, -272.8]), ("wind-3", "ppo", [-307.8, -275.1, -270.9]),
          ("wind-1", "sac", [-181.3])]


def test_comparisons_reproduce_the_audit_of_issue_27(pb):
    runs = _runs([(t, a, i, v) for t, a, vals in _AUDIT for i, v in enumerate(vals)])
    comp = pb.comparisons(runs).set_index(["trace", "baseline"])
    p = [comp.loc[(t, b), "p"] for t in ("wind-1", "wind-3") for b in ("trpo", "a2c", "ppo")]
    assert np.round(p, 2).tolist() == pytest.approx([0.61, 0.13, 0.01, 0.84, 0.37, 0.20], abs=0.006)
    assert comp.index[comp["significant"]].tolist() == [("wind-1", "ppo")]
    assert np.isnan(comp.loc[("wind-1", "sac"), "p"])  # one seed: outside the family
    lines = pb.main_table(runs)
    rows = _table_rows(lines[:lines.index("### Trace `wind-3` (20,000,000 steps, 6M-step warm-up excluded)")])
    assert rows["LCPO"][2] == "-172.5 [-177.5, -167.5]" and rows["TRPO"][2] == "-174.8 [-191.2, -158.4]"
    assert rows["A2C"][2] == "-186.6 [-211.7, -161.6]"
    assert rows["PPO"][7].endswith("**LCPO higher**") and rows["TRPO"][7].endswith("not significant")
    assert "Significant after the correction: LCPO > PPO on wind-1." in "\n".join(lines)


def test_provenance_refuses_mixed_cells_unless_told(pb):
    from lcpo.persistence.provenance import MixedCodeError

    runs = pd.DataFrame([{"trace": "wind-1", "agent": "lcpo", "seed": s, "commit": c, "commit_source": "notes"}
                         for s, c in enumerate(("45a036a", "ea600fc", "ea600fc"))]
                        + [{"trace": "wind-1", "agent": "ddqn", "seed": 0, "commit": "unknown",
                            "commit_source": "none"}])
    with pytest.raises(MixedCodeError, match="cell wind-1/lcpo .*45a036a, ea600fc"):
        pb.provenance_section({"pendulum": runs}, allow_mixed_code=False)
    text = "\n".join(pb.provenance_section({"pendulum": runs}, allow_mixed_code=True))
    assert "passes `allow_mixed_code` explicitly**: wind-1/lcpo: 45a036a, ea600fc" in text
    assert "do not name the code of wind-1/ddqn seed 0: unknown" in text
    assert pb.RECORDED_COMMITS[("wind-1", "lcpo", 0)] == "45a036a"  # the notes' record of the committed runs


def _binned(path: Path, returns: list[float]) -> None:
    """An ``episodes_binned.csv.gz`` with one 4,000-step window (20 episodes of 200 steps) per return."""
    pd.DataFrame({"step": 4000 * np.arange(1, len(returns) + 1), "episodes": 20,
                  "return": returns}).to_csv(path, index=False, compression="gzip")


def test_straggler_score_both_ways(pb, tmp_path, monkeypatch):
    monkeypatch.setattr(pb, "STRAGGLER_LEARNING_STEPS", 8000)  # 2 of the 4 windows are the learning period
    folder = tmp_path / "straggler"
    (folder / "fixed_binned").mkdir(parents=True)
    _binned(folder / "fixed_binned" / "azure-llm__never_hedge.csv.gz", [-100.0] * 4)  # 800 ms per step
    _binned(folder / "fixed_binned" / "azure-llm__timeout_600_ms.csv.gz", [-60.0] * 4)  # 480 ms: the best fixed
    learners = {("med", "lcpo", 24.0): [[-90.0, -90.0, -50.0, -50.0], [-90.0, -90.0, -52.0, -52.0]],
                ("a2c", "a2c", None): [[-60.0, -60.0, -60.0, -60.0], [-70.0, -70.0, -62.0, -62.0]]}
    for (name, agent, thr), per_seed in learners.items():
        for seed, ret in enumerate(per_seed):
            _straggler_run(folder, f"{name}{seed}", agent, thr, seed, 700.0)
            _binned(folder / "runs" / f"{name}{seed}" / "episodes_binned.csv.gz", ret)
    text = "\n".join(pb.straggler_scores_section(folder))
    rows = _table_rows(text.splitlines())
    assert rows["never hedge"][2] == "800.0" and rows["never hedge"][4] == "800.0"
    med = rows["LCPO-Med (D^2 > 24)"]
    # after the learning period: 8 x 50 = 400 and 8 x 52 = 416 ms; whole run: 8 x 70 = 560, 8 x 71 = 568 ms
    assert med[2].startswith("408.0 [") and med[3] == "-49.0 %" and med[4].startswith("564.0 [")
    # A2C: after, 8 x 60 = 480 and 8 x 62 = 496; whole run, 480 and 8 x 66 = 528
    assert rows["A2C"][2].startswith("488.0 [") and rows["A2C"][4].startswith("504.0 [")
    assert "LCPO-Med against A2C, after 3.5M steps" not in text  # the period is named from the constant
    assert "LCPO-Med against A2C, after 0.0M steps: difference -80.0 ms" in text
    # one workload ran: the Holm family is its two scores, and the text says so
    assert "Holm over the 2 tests here (1 workload(s) with at least 2 seeds of both agents: azure-llm;" in text
    # against the best fixed policy (480 ms after the learning period): A2C's 496 ms seed is above it, 480 is
    # not; at 2 seeds no interval (t with 1 degree of freedom) lies below it
    assert ("Against the best fixed policy (timeout 600 ms, 480.0 ms after 0.0M steps): whole 95% interval below "
            "it: none; seeds above it: A2C 1 of 2, LCPO-Med (D^2 > 24) 0 of 2.") in text


def test_fixed_binned_reproduces_the_fixed_policy_whole_run_mean(pb, tmp_path):
    folder = tmp_path / "straggler"
    folder.mkdir()
    written = pb.fixed_binned(folder, 8000, {"azure-llm": ["never hedge"]})
    assert [p.name for p in written] == ["azure-llm__never_hedge.csv.gz"]
    b = pd.read_csv(written[0])
    assert b["step"].tolist() == [4000, 8000] and (b["episodes"] == 20).all()
    env = pb._straggler_env("azure-llm", 8000).unwrapped  # the pass fixed_policies makes
    env.reset(seed=0)
    for _ in range(8000):
        env.step(8)  # never hedge
    never = env.run_metrics()
    # never hedging forces no step, so -8 x the mean window return is the mean per-step p95
    assert never["forced_fraction"] == 0.0
    assert -8.0 * b["return"].mean() == pytest.approx(never["mean_step_p95_ms"], rel=1e-6)
    assert pb.fixed_binned(folder, 8000, {"azure-llm": ["never hedge"]}) == []  # kept, not recomputed


def test_fixed_binned_labels_can_come_from_another_folders_fixed_json(pb, tmp_path, monkeypatch):
    """A study folder has no fixed.json of its own: --policies-from picks never hedging and each workload's best
    fixed policy (lowest bucketed p95) from another one; a missing file is refused in one line."""
    src = tmp_path / "fixed.json"
    src.write_text(json.dumps({"steps": 8000, "seed": 0, "results": {
        "azure-llm": {"never hedge": {"bucketed_p95_ms": 900.0}, "timeout 600 ms": {"bucketed_p95_ms": 500.0},
                      "timeout 300 ms": {"bucketed_p95_ms": 510.0}},
        "synthetic-ramp": {"never hedge": {"bucketed_p95_ms": 527.0}, "timeout 600 ms": {"bucketed_p95_ms": 700.0}}}}))
    assert pb.default_fixed_labels(src) == {"azure-llm": ["never hedge", "timeout 600 ms"],
                                            "synthetic-ramp": ["never hedge"]}
    assert pb.default_fixed_labels(tmp_path / "none.json") == {}
    seen = {}
    monkeypatch.setattr(pb, "fixed_binned", lambda folder, steps, labels=None: seen.update(
        folder=folder, steps=steps, labels=labels) or [])
    pb.main(["fixed-binned", "--folder", str(tmp_path / "study"), "--steps", "8000", "--policies-from", str(src)])
    assert seen == {"folder": tmp_path / "study" / "straggler", "steps": 8000,
                    "labels": pb.default_fixed_labels(src)}
    with pytest.raises(SystemExit, match="--policies-from .*none.json: no such file"):
        pb.main(["fixed-binned", "--folder", str(tmp_path), "--policies-from", str(tmp_path / "none.json")])


def test_diagnostics_table_averages_after_the_warmup_and_skips_frozen_agents(pb, tmp_path):
    rows = []
    for agent, seed, kl in (("trpo", 0, 0.01), ("trpo", 1, 0.03), ("prescient-trpo", 0, None)):
        run = tmp_path / f"{agent}_{seed}"
        run.mkdir()
        steps = np.arange(1, 81) * 100_000  # 8M steps, a window every 100k
        diag = pd.DataFrame({"step": steps, "updates": 0 if kl is None else 10})
        if kl is not None:  # a learner: large KLs in the warm-up, which must not enter the table
            diag["train/kl"] = np.where(steps > 6_000_000, kl, 5.0)
        diag.to_csv(run / "diagnostics.csv", index=False)
        rows.append({"trace": "wind-3", "agent": agent, "seed": seed, "run": run})
    lines = pb.diagnostics_table(pd.DataFrame(rows))
    header = next(ln for ln in lines if ln.startswith("| |"))
    assert "TRPO" in header and "PRESCIENT" not in header  # an agent that never updates gets no column
    kl_row = next(ln for ln in lines if ln.startswith("| KL per update"))
    assert float(kl_row.split("|")[2]) == pytest.approx(0.02, rel=1e-2)  # mean over seeds, after 6M steps only


def _straggler_run(folder: Path, name: str, agent: str, threshold, seed: int, p95: float) -> None:
    run = folder / "runs" / name
    run.mkdir(parents=True)
    overrides = {} if threshold is None else {"ood_threshold": threshold}
    lcpo = agent == "lcpo"  # A2C's summary records no constrained or OOD fraction (null)
    (run / "summary.json").write_text(json.dumps({
        "config": {"agent": agent, "trace": "azure-llm", "seed": seed, "overrides": overrides},
        "env_metrics": {"bucketed_p95_ms": p95, "forced_fraction": 0.0}, "steps": 10_000_000,
        "lifelong_return": -p95 / 10, "constrained_fraction": 0.5 if lcpo else None,
        "ood_fraction": 0.1 if lcpo else None,
        "wall_time_s": 60.0, "steps_per_s": 1000.0}))


def _fixed(folder: Path, p95: dict[str, float]) -> None:
    results = {label: {"bucketed_p95_ms": v, "forced_fraction": 0.0, "action": i}
               for i, (label, v) in enumerate(p95.items())}
    (folder / "fixed.json").write_text(json.dumps({"steps": 10_000_000, "seed": 0,
                                                   "results": {"azure-llm": results}}))


@pytest.mark.parametrize("med, a2c, where, order", [
    ((840.0, 860.0), (900.0, 910.0), "within 10% of the best fixed policy", "ahead of"),
    ((780.0, 790.0), (760.0, 770.0), "better than the best fixed policy by 3.1%", "behind"),
    ((950.0, 960.0), (900.0, 910.0), "not within 10% of the best fixed policy", "behind"),
])
def test_straggler_verdict_follows_the_numbers(pb, tmp_path, med, a2c, where, order):
    folder = tmp_path / "straggler"
    folder.mkdir()
    _fixed(folder, {"timeout 300 ms": 1000.0, "timeout 600 ms": 810.0, "never hedge": 1400.0})
    for s, v in enumerate(med):
        _straggler_run(folder, f"med{s}", "lcpo", 24.0, s, v)
    for s, v in enumerate(a2c):
        _straggler_run(folder, f"a2c{s}", "a2c", None, s, v)
    _straggler_run(folder, "agg0", "lcpo", 20.0, 0, 2000.0)  # a worse Agg run must not enter the verdict
    text = "\n".join(pb.straggler_section(folder))
    rows = _table_rows(text.splitlines())
    assert rows["best fixed (timeout 600 ms)"][2] == "810.0"
    assert rows["never hedge"][4] == f"{100 * (1400 / 810 - 1):+.1f} %"
    m = float(np.mean(med))
    assert rows["LCPO-Med (D^2 > 24)"][4] == f"{100 * (m / 810 - 1):+.1f} %"
    assert rows["LCPO-Agg (D^2 > 20)"][1] == "1" and rows["LCPO-Agg (D^2 > 20)"][2] == "2000.0 (1 seed)"
    assert rows["A2C"][-2:] == ["—", "—"] and rows["LCPO-Med (D^2 > 24)"][-2:] == ["0.50", "0.100"]  # never nan
    verdict = next(ln for ln in text.splitlines() if ln.startswith("Paper Table 1's shape"))
    assert f"LCPO-Med is {where} ({m:.1f} vs 810.0 ms)" in verdict
    assert f"{order} A2C by {abs(np.mean(a2c) - m):.1f} ms" in verdict


def _frozen_run(folder: Path, name: str, *, never_hedge: bool) -> Path:
    """A finished straggler run folder whose last snapshot is a real LCPO actor (``never_hedge``: one that puts
    all its mass on the last action, "never hedge")."""
    from lcpo.online.run import AGENTS, RunConfig, make_run_env

    rc = RunConfig(env="lcpo/StragglerMitigation-v0", agent="lcpo", trace="synthetic-ramp", steps=1000,
                   reset="never", overrides={"reservoir_size": 1000})
    actor = AGENTS["lcpo"](make_run_env(rc), seed=0, **rc.overrides).actor
    params = {f"p.{k}": v.numpy().copy() for k, v in actor.state_dict().items()}
    if never_hedge:
        params["p.body.rho.4.weight"][:] = 0.0
        params["p.body.rho.4.bias"][:] = -50.0
        params["p.body.rho.4.bias"][-1] = 50.0
    run = folder / "runs" / name
    (run / "probes").mkdir(parents=True)
    np.savez(run / "probes" / "k00001.npz", step=np.int64(900), obs=np.zeros((1, 1), np.float32), **params)
    (run / "config.json").write_text(json.dumps({"run": rc.to_dict()}))
    (run / "summary.json").write_text(json.dumps({"config": rc.to_dict(), "steps": 1000}))
    return run


def test_frozen_never_hedging_policy_reproduces_the_fixed_policy(pb, tmp_path):
    folder = tmp_path / "straggler"
    folder.mkdir()
    (folder / "fixed.json").write_text(json.dumps({"steps": 10, "seed": 0, "results": {
        "synthetic-ramp": {"never hedge": {"bucketed_p95_ms": 650.0, "forced_fraction": 0.0, "action": 8},
                           "timeout 600 ms": {"bucketed_p95_ms": 600.0, "forced_fraction": 0.0, "action": 6}}}}))
    nh = _frozen_run(folder, "nh", never_hedge=True)
    fresh = _frozen_run(folder, "fresh", never_hedge=False)
    data = pb.final_policies(folder, 400)
    ramp = data["fixed"]["synthetic-ramp"]
    assert set(ramp) == {"never hedge", "timeout 600 ms", "timeout 1000 ms"}  # the best fixed, 1000 ms, never
    assert set(data["runs"]) == {"nh", "fresh"} and data["runs"]["nh"]["snapshot_step"] == 900
    # a policy that always picks "never hedge" drives the same fresh pass as the fixed policy, request by request
    for key in ("bucketed_p95_ms", "mean_step_p95_ms", "completions", "buckets"):
        assert data["runs"]["nh"][key] == ramp["never hedge"][key]
    # an untrained policy hedges at random, so its pass differs
    assert data["runs"]["fresh"]["mean_step_p95_ms"] != ramp["never hedge"]["mean_step_p95_ms"]
    on_disk = json.loads((folder / "final.json").read_text())
    assert on_disk == json.loads(json.dumps(data))
    # resumable: a second call with the same steps recomputes nothing (a changed entry survives it)
    on_disk["runs"]["nh"]["bucketed_p95_ms"] = -1.0
    (folder / "final.json").write_text(json.dumps(on_disk))
    assert pb.final_policies(folder, 400)["runs"]["nh"]["bucketed_p95_ms"] == -1.0
    assert nh.exists() and fresh.exists()


def test_final_section_compares_with_the_best_fixed_policy_on_the_same_pass(pb, tmp_path):
    folder = tmp_path / "straggler"
    folder.mkdir()
    for s, v in enumerate((500.0, 520.0)):
        _straggler_run(folder, f"med{s}", "lcpo", 24.0, s, 900.0)
    (folder / "final.json").write_text(json.dumps({"steps": 2000, "seed": 0, "fixed": {"azure-llm": {
        "never hedge": {"bucketed_p95_ms": 1000.0, "forced_fraction": 0.0},
        "timeout 600 ms": {"bucketed_p95_ms": 800.0, "forced_fraction": 0.0}}},
        "runs": {"med0": {"bucketed_p95_ms": 500.0, "forced_fraction": 0.0, "snapshot_step": 9_900_000},
                 "med1": {"bucketed_p95_ms": 520.0, "forced_fraction": 0.01, "snapshot_step": 9_800_000}}}))
    rows = _table_rows(pb.final_section(folder, pb.load_straggler_runs(folder)))
    assert rows["timeout 600 ms"][4] == "+0.0 %" and rows["never hedge"][4] == "+25.0 %"
    assert rows["LCPO-Med (D^2 > 24)"][3] == "500.0, 520.0"
    assert rows["LCPO-Med (D^2 > 24)"][4] == f"{100 * (510 / 800 - 1):+.1f} %"
    assert rows["LCPO-Med (D^2 > 24)"][5] == "0.50 %"
    text = "\n".join(pb.final_section(folder, pb.load_straggler_runs(folder)))
    assert "at most 200,000 steps before the end" in text  # the furthest snapshot from its run's end
