"""Forgetting as lost return on reference contexts (lcpo.experiments.forgetting, issue 27 item 2)."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from lcpo.agents import A2C
from lcpo.experiments.forgetting import (active_regimes, backward_transfer, evaluate_snapshots, forgetting_matrix,
                                         reference_contexts, run_trace, seed_interval)
from lcpo.experiments.snapshots import SnapshotRecorder, load_run_snapshots
from lcpo.online.run import RunConfig, execute


# -- the metrics on hand matrices --------------------------------------------------------------------------
def test_forgetting_matrix_is_the_drop_from_the_best_earlier_return():
    R = np.array([[-10.0, -5.0, 0.0],
                  [-4.0, -6.0, 1.0],
                  [-8.0, -1.0, 1.0],
                  [-2.0, -3.0, -2.0]])
    F = forgetting_matrix(R)
    expected = np.array([[0.0, 0.0, 0.0],
                         [0.0, 1.0, 0.0],    # regime 1: best so far -5
                         [4.0, 0.0, 0.0],    # regime 0: best -4, now -8
                         [2.0, 2.0, 3.0]])   # bests -2 (new), -1, 1
    expected[3, 0] = 0.0                     # -2 is regime 0's new best
    np.testing.assert_array_equal(F, expected)
    np.testing.assert_allclose(F.mean(1), [0.0, 1 / 3, 4 / 3, 5 / 3])
    with pytest.raises(ValueError, match="without NaN"):
        forgetting_matrix(np.array([[1.0, np.nan]]))


def test_backward_transfer_compares_the_end_with_each_regimes_last_active_snapshot():
    R = np.array([[-9.0, -9.0, -9.0],
                  [-2.0, -8.0, -9.0],   # regime 0 active (learned): -2
                  [-3.0, -1.0, -9.0],   # regime 1 active: -1
                  [-1.0, -4.0, -9.0],   # regime 0 active again: -1 (its last visit)
                  [-5.0, -2.0, -7.0]])  # final; regime 2 active only in the last interval: left out
    active = np.array([0, 0, 1, 0, 2])
    # regime 0: R[4,0] - R[3,0] = -5 - -1 = -4; regime 1: R[4,1] - R[2,1] = -2 - -1 = -1
    assert backward_transfer(R, active) == pytest.approx(-2.5)
    assert math.isnan(backward_transfer(R[:1], active[:1]))
    with pytest.raises(ValueError, match="must agree"):
        backward_transfer(R, active[:2])


def test_active_regime_is_the_majority_of_the_rows_consumed_with_wrap():
    labels = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 2])  # T = 10
    # (0, 4]: rows 0-3 -> 0; (4, 10]: rows 4-9 -> 2; (10, 14]: rows 0-3 again -> 0; (14, 37]: 2 laps + rows 4-6
    np.testing.assert_array_equal(active_regimes(np.array([4, 10, 14, 37]), labels), [0, 2, 0, 2])


def test_seed_interval_is_students_t():
    from scipy import stats

    x = np.array([-170.0, -175.0, -172.5, -168.0])
    ci = seed_interval(x, 0.9)
    half = stats.t.ppf(0.95, 3) * x.std(ddof=1) / 2
    assert (ci.mean, ci.low, ci.high, ci.n) == pytest.approx((x.mean(), x.mean() - half, x.mean() + half, 4))
    assert math.isnan(seed_interval([1.0]).low) and seed_interval([]).n == 0


# -- reference contexts ------------------------------------------------------------------------------------
def test_reference_contexts_are_the_traces_regimes_and_the_same_for_every_agent_and_seed():
    cfgs = [RunConfig(agent=a, seed=s, trace="wind-3", trace_length=8000, steps=100) for a, s in
            (("a2c", 0), ("lcpo", 3), ("trpo", 7))]
    refs = [reference_contexts(run_trace(c), regimes=6) for c in cfgs]
    for r in refs[1:]:
        np.testing.assert_array_equal(r.centres, refs[0].centres)
        np.testing.assert_array_equal(r.labels, refs[0].labels)
    # trace 3 is six constant levels plus noise: k-means finds them, ordered by norm
    levels = np.array(run_trace(cfgs[0]).metadata["params"]["levels"])
    levels = levels[np.argsort(np.linalg.norm(levels, axis=1))]
    np.testing.assert_allclose(refs[0].centres, levels, atol=0.1)
    assert np.all(np.diff(np.linalg.norm(refs[0].centres, axis=1)) >= 0)


def test_window_mode_replays_the_window_holding_most_of_the_regime():
    trace = np.concatenate([np.full((50, 1), -1.0), np.full((30, 1), 2.0), np.full((20, 1), -1.0),
                            np.full((100, 1), 2.0)])
    refs = reference_contexts(trace, regimes=2, mode="window", episode_steps=40)
    np.testing.assert_allclose(refs.centres, [[-1.0], [2.0]])
    assert refs.window_starts.tolist() == [0, 100]  # earliest all--1 window; earliest all-2 window of 40 rows
    np.testing.assert_array_equal(refs.context(1), np.full((40, 1), 2.0))
    with pytest.raises(ValueError, match="mode"):
        reference_contexts(trace, mode="held")
    with pytest.raises(ValueError, match="exceed"):
        reference_contexts(trace, mode="window", episode_steps=500)


# -- planted forgetting ------------------------------------------------------------------------------------
def _plant(agent, best: int) -> None:
    """Make the actor choose action ``best`` with probability ~1 on every state (weights 0, bias one-hot 30)."""
    with torch.no_grad():
        for m in agent.actor.modules():
            if isinstance(m, torch.nn.Linear):
                m.weight.zero_()
                m.bias.zero_()
        last = [m for m in agent.actor.modules() if isinstance(m, torch.nn.Linear)][-1]
        last.bias[best] = 30.0


def _planted_run(tmp_path, name, sequence):
    trace = np.concatenate([np.full((40, 1), -1.0), np.full((40, 1), 1.0)])  # regime A (c = -1), regime B
    np.save(tmp_path / "match.npy", trace)
    cfg = RunConfig(env="forgetting_match_env:MatchEnv", trace=str(tmp_path / "match.npy"), agent="a2c",
                    steps=80, overrides={"hidden": [8]})
    run = tmp_path / name
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"run": cfg.to_dict()}))
    agent = A2C(__import__("forgetting_match_env").MatchEnv(trace), seed=0, hidden=(8,))
    rec = SnapshotRecorder(run, agent, steps=80)
    for i, best in enumerate(sequence):
        _plant(agent, best)
        rec.take(20 * (i + 1))
    rec.write()
    return cfg, run


def test_planted_forgetting_shows_on_the_regime_the_policy_lost_and_never_without_a_change(tmp_path):
    # good on A (action 0) for two snapshots, then replaced by a policy good on B only (action 2)
    cfg, run = _planted_run(tmp_path, "forgets", [0, 0, 2, 2])
    _, still = _planted_run(tmp_path, "still", [0, 0, 0, 0])
    refs = reference_contexts(run_trace(cfg), regimes=2, episode_steps=10)
    np.testing.assert_allclose(refs.centres, [[-1.0], [1.0]])
    res = evaluate_snapshots(run, refs, episodes=3, episode_steps=10)
    np.testing.assert_array_equal(res["R"], [[10, 0], [10, 0], [0, 10], [0, 10]])
    F = forgetting_matrix(res["R"])
    np.testing.assert_array_equal(F[:, 0], [0, 0, 10, 10])  # F_A > 0 after the replacement
    np.testing.assert_array_equal(F[:, 1], 0)               # B only improved
    assert res["rule"] == "sample" and res["module"] == "actor"
    F_still = forgetting_matrix(evaluate_snapshots(still, refs, episodes=3, episode_steps=10)["R"])
    np.testing.assert_array_equal(F_still, 0)


def test_the_snapshotted_network_is_the_one_that_acts_with_the_agents_rule():
    import gymnasium as gym

    from lcpo.agents import AGENTS
    from lcpo.experiments.snapshots import acting_module

    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    def found(name, **kw):
        f = acting_module(AGENTS[name](env, seed=0, **kw))
        return None if f is None else (f[0], f[2])

    assert found("a2c") == ("actor", "sample") and found("sac") == ("actor", "sample")
    assert found("ddqn") == ("q", "greedy")
    assert found("prescient-trpo") == ("base.actor", "sample")
    assert found("prescient-trpo", eval_deterministic=True) == ("base.actor", "greedy")
    assert found("mbcd") is None  # actions from a changing collection of SAC learners: nothing to snapshot
    a2c = AGENTS["a2c"](env, seed=0)
    assert acting_module(a2c)[1] is a2c.actor


# -- snapshots kept by every run, and a short end-to-end ---------------------------------------------------
def _tiny(**kw):
    return RunConfig(env="lcpo/WindyPendulum-v0", trace="wind-3", trace_length=1600, agent="a2c", steps=1600,
                     checkpoint_every=400, overrides={"hidden": [16], "rollout_steps": 100}, **kw)


def test_every_run_keeps_compact_snapshots_and_a_resumed_run_the_same_ones(tmp_path):
    execute(_tiny(), tmp_path / "once")
    snaps = load_run_snapshots(tmp_path / "once")
    assert snaps.every == 50 and snaps.module == "actor" and snaps.rule == "sample"
    np.testing.assert_array_equal(snaps.steps, np.arange(100, 1601, 100))  # updates every 100 steps, last at the end
    assert all(v.dtype == np.float16 and v.shape[0] == 16 for v in snaps.params.values())
    assert execute(_tiny(), tmp_path / "cut", stop_at=800) == {"interrupted_at": 800}
    assert load_run_snapshots(tmp_path / "cut").steps[-1] == 800
    execute(_tiny(), tmp_path / "cut")
    again = load_run_snapshots(tmp_path / "cut")
    np.testing.assert_array_equal(again.steps, snaps.steps)
    for k, v in snaps.params.items():
        np.testing.assert_array_equal(again.params[k], v)


@pytest.mark.parametrize("population", [False, True])
def test_a_run_resumed_between_an_update_and_a_snapshot_multiple_keeps_every_snapshot(tmp_path, population):
    """A run checkpointed at step 250 (snapshots every 50 steps, updates every 20: the last update at 240, the
    next at 260) and resumed lost its snapshot at 260: the resume took the checkpoint's step, not the last
    snapshot's, as the multiple of ``every`` already covered (found by Ctrl-C of `lcpo run --seed 0-2
    --checkpoint-every 500` at step 5,500 and `lcpo resume`: 31 snapshots, the uninterrupted run 32)."""
    from lcpo.online.population import execute_population

    def run(out, **kw):
        cfgs = [RunConfig(env="lcpo/WindyPendulum-v0", trace="wind-3", trace_length=1600, agent="a2c", steps=1600,
                          seed=s, checkpoint_every=250, overrides={"hidden": [16], "rollout_steps": 20})
                for s in ((0, 1) if population else (0,))]
        if population:
            return execute_population(cfgs, [out / f"s{c.seed}" for c in cfgs], **kw)
        return [execute(cfgs[0], out / "s0", **kw)]

    run(tmp_path / "once")
    assert run(tmp_path / "cut", stop_at=250)[0] == {"interrupted_at": 250}
    run(tmp_path / "cut")
    for seed in ((0, 1) if population else (0,)):
        snaps = load_run_snapshots(tmp_path / "once" / f"s{seed}")
        assert 260 in snaps.steps
        again = load_run_snapshots(tmp_path / "cut" / f"s{seed}")
        np.testing.assert_array_equal(again.steps, snaps.steps)
        for k, v in snaps.params.items():
            np.testing.assert_array_equal(again.params[k], v)


def test_snapshot_files_are_not_git_ignored_in_the_committed_results():
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    path = "docs/results/paper-budget/runs/WindyPendulum-v0_wind-1_lcpo_s0-x/snapshots.npz"
    try:
        rc = subprocess.run(["git", "-C", str(root), "check-ignore", "-q", path], capture_output=True).returncode
    except FileNotFoundError:
        pytest.skip("git not installed")
    if rc == 128:
        pytest.skip("not a git checkout")
    assert rc == 1, f"{path} is git-ignored"


def test_end_to_end_on_windy_pendulum_is_deterministic(tmp_path, monkeypatch, capsys):
    execute(_tiny(), tmp_path / "runs" / "a2c-s0")
    execute(_tiny(seed=1), tmp_path / "runs" / "a2c-s1")
    refs = reference_contexts(run_trace(_tiny()), regimes=2)
    a = evaluate_snapshots(tmp_path / "runs" / "a2c-s0", refs, episodes=1, episode_steps=50, snapshots=[0, 15])
    b = evaluate_snapshots(tmp_path / "runs" / "a2c-s0", refs, episodes=1, episode_steps=50, snapshots=[0, 15])
    assert a["R"].shape == (2, 2) and np.isfinite(a["R"]).all()
    assert np.array_equal(a["R_episodes"], b["R_episodes"])  # bit for bit
    from lcpo.cli.main import main

    capsys.readouterr()
    assert main(["forgetting", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--regimes", "2",
                 "--episodes", "1", "--episode-steps", "20"]) == 0
    err = capsys.readouterr().err
    assert "a2c-s0: " in err and "cached" not in err  # evaluated now: its seconds, no word of a cache
    md = (tmp_path / "out" / "forgetting.md").read_text()
    assert "| WindyPendulum-v0 wind-3 | a2c[hidden=[16],rollout_steps=100] | 2 |" in md
    assert md.startswith("# Forgetting: lost return on reference contexts\n") and md.count("# Forgetting") == 1
    assert "1 seeded episode of at most 20 steps" in md
    assert "can reach below 0: shown as computed, not clipped" in md  # the table's F intervals are said to be raw
    import re

    assert re.search(r"Cost: 64 episodes in \d+\.\d s \(when first evaluated", md), md  # formatted, not a template
    m = pd.read_csv(tmp_path / "out" / "forgetting_matrix.csv")
    assert len(m) == 2 * 16 * 2 and (m["F"] >= 0).all() and (m[m["snapshot"] == 0]["F"] == 0).all()
    assert (tmp_path / "out" / "forgetting_WindyPendulum-v0_wind-3.png").stat().st_size > 0
    s = pd.read_csv(tmp_path / "out" / "forgetting_summary.csv").iloc[0]
    assert s["n"] == 2 and s["final_F_low"] <= s["final_F"] <= s["final_F_high"]
    # a second call reuses the cached evaluations and writes the same numbers
    assert sorted(p.name for p in (tmp_path / "out" / "cache").iterdir()) == ["a2c-s0.npz", "a2c-s1.npz"]
    before = (tmp_path / "out" / "forgetting_matrix.csv").read_bytes()
    assert main(["forgetting", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--regimes", "2",
                 "--episodes", "1", "--episode-steps", "20"]) == 0
    assert (tmp_path / "out" / "forgetting_matrix.csv").read_bytes() == before
    err = capsys.readouterr().err  # the second call says each run came from the cache
    assert "a2c-s0: cached (" in err and "a2c-s1: cached (" in err
    from lcpo.experiments.forgetting import forgetting_study

    again = forgetting_study(tmp_path / "runs", regimes=2, episodes=1, episode_steps=20,
                             cache_dir=tmp_path / "out" / "cache")
    assert again["cached"] == 2 and again["computed_seconds"] == 0.0 and again["seconds"] > 0
    fresh = forgetting_study(tmp_path / "runs", regimes=2, episodes=1, episode_steps=20)
    assert fresh["cached"] == 0 and fresh["computed_seconds"] == fresh["seconds"] > 0
    assert fresh["matrix"].equals(again["matrix"])
    # lcpo report appends the section (its one call, here with the short settings)
    import functools

    import lcpo.experiments.forgetting as forgetting
    from lcpo.experiments.report import report

    monkeypatch.setattr(forgetting, "append_forgetting_section", functools.partial(
        forgetting.append_forgetting_section, regimes=2, episodes=1, episode_steps=20))
    assert "## Forgetting" not in report(tmp_path / "runs", tmp_path / "rep0").read_text()  # opt-in
    md = report(tmp_path / "runs", tmp_path / "rep", forgetting=True).read_text()
    assert "## Forgetting: lost return on reference contexts" in md and "| a2c[hidden=[16],rollout_steps=100] | 2 |" in md
    from lcpo.cli.report import build_parser

    assert build_parser().parse_args(["x", "--forgetting"]).forgetting is True
    assert build_parser().parse_args(["x"]).forgetting is False


def test_one_trace_name_at_two_lengths_is_two_cells_each_with_its_own_references(tmp_path):
    """The references are made per trace (name and length), and every run of a cell must share them. A trace
    file cut to 400 rows for one seed and to 1,200 for another (`--trace my.npy --trace-length N`) gives two
    traces with different regimes; forgetting_study pooled both seeds in one cell "WindyPendulum-v0 my" (its
    docstring said cells are keyed by trace length too), on different references."""
    from lcpo.experiments.forgetting import forgetting_study

    rng = np.random.default_rng(0)
    levels = np.repeat(np.array([[0.0, 0.0], [3.0, 0.0], [0.0, -3.0]]), 400, axis=0)
    np.save(tmp_path / "my.npy", levels + 0.05 * rng.standard_normal(levels.shape))
    for seed, length in ((0, 400), (1, 1200)):
        execute(RunConfig(env="lcpo/WindyPendulum-v0", trace=str(tmp_path / "my.npy"), trace_length=length,
                          agent="a2c", steps=400, seed=seed, checkpoint_every=0,
                          overrides={"hidden": [8], "rollout_steps": 100}), tmp_path / "runs" / f"a2c-s{seed}")
    study = forgetting_study(tmp_path / "runs", regimes=3, episodes=1, episode_steps=10)
    short, full = "WindyPendulum-v0 my (400 rows)", "WindyPendulum-v0 my (1,200 rows)"
    assert sorted(study["refs"]) == sorted([short, full])
    assert study["summary"].set_index("cell")["n"].to_dict() == {short: 1, full: 1}
    assert not np.allclose(study["refs"][short].centres, study["refs"][full].centres)
    np.testing.assert_allclose(sorted(study["refs"][full].centres.round(1).tolist()), [[0, -3], [0, 0], [3, 0]],
                               atol=0.1)
    # one length per name: the cell keeps its plain name
    (tmp_path / "runs" / "a2c-s0" / "snapshots.npz").unlink()
    assert list(forgetting_study(tmp_path / "runs", regimes=3, episodes=1, episode_steps=10)["refs"]) == [
        "WindyPendulum-v0 my"]


def test_forgetting_comparisons_are_welch_tests_with_holm_over_the_table():
    """Hand-computed: LCPO's final F [1, 2, 3] against A2C's [4, 6, 8]: t = -4 / sqrt(1/3 + 4/3) = -3.0984,
    Welch df = (5/3)^2 / ((1/3)^2/2 + (4/3)^2/2) = 2.9412; mean F constant on both sides is not tested; BWT
    [0, 1, 2] against [0, 2, 4] (same t up to scale); Holm over the 2 tested rows doubles the smaller p."""
    import pandas as pd
    from scipy import stats as st

    from lcpo.experiments.forgetting import _comparison_lines, forgetting_comparisons

    per = pd.DataFrame({"cell": ["c"] * 7, "scheme": ["lcpo"] * 3 + ["a2c"] * 3 + ["ppo"],
                        "seed": [0, 1, 2, 0, 1, 2, 0], "final_F": [1.0, 2, 3, 4, 6, 8, 9],
                        "mean_F": [5.0] * 7, "bwt": [0.0, 1, 2, 0, 2, 4, 1], "final_R": [0.0] * 7})
    cmp = forgetting_comparisons(per)
    assert list(cmp["baseline"]) == ["a2c"] * 3  # PPO's single run is not tested
    f, m, b = (cmp[cmp["measure"] == k].iloc[0] for k in ("final_F", "mean_F", "bwt"))
    t, df = -4 / np.sqrt(1 / 3 + 4 / 3), (5 / 3) ** 2 / ((1 / 3) ** 2 / 2 + (4 / 3) ** 2 / 2)
    assert df == pytest.approx(2.9411764705882355)
    p = 2 * st.t.sf(abs(t), df)
    assert f["diff"] == -4.0 and f["p"] == pytest.approx(p, rel=1e-12)
    assert np.isnan(m["p"]) and np.isnan(m["p_holm"])
    assert b["diff"] == -1.0 and b["p"] == pytest.approx(2 * st.t.sf(1 / np.sqrt(1 / 3 + 4 / 3), df), rel=1e-12)
    assert f["p"] < b["p"]  # t = -3.10 against -0.77
    assert f["p_holm"] == pytest.approx(2 * f["p"], rel=1e-12)
    assert b["p_holm"] == pytest.approx(max(2 * f["p"], b["p"]), rel=1e-12)
    lines = "\n".join(_comparison_lines(per, 0.95))
    assert "not tested (no variance)" in lines and "Holm's correction over the 2 tests" in lines
    with pytest.raises(ValueError, match="unknown forgetting measure 'lost'"):
        forgetting_comparisons(per, measures=["lost"])


def test_forgetting_comparisons_take_lcpo_with_hyperparameter_overrides_as_the_reference():
    """A run with overrides has the scheme ``lcpo[hidden=[16]]``; the tests matched ``"lcpo"`` exactly and so
    dropped every comparison of such a study (``lcpo run --set ...``, a sweep's [overrides.lcpo]) without a word.
    The p-values are those of the plain scheme; two LCPO variants are each tested, not against each other."""
    import pandas as pd

    from lcpo.experiments.forgetting import _comparison_lines, forgetting_comparisons

    base = {"cell": ["c"] * 6, "seed": [0, 1, 2, 0, 1, 2], "final_F": [1.0, 2, 3, 4, 6, 8],
            "mean_F": [1.0, 2, 4, 4, 6, 9], "bwt": [0.0, 1, 2, 0, 2, 4], "final_R": [0.0] * 6}
    plain = forgetting_comparisons(pd.DataFrame(base | {"scheme": ["lcpo"] * 3 + ["a2c"] * 3}))
    per = pd.DataFrame(base | {"scheme": ["lcpo[hidden=[16]]"] * 3 + ["a2c"] * 3})
    over = forgetting_comparisons(per)
    assert len(over) == len(plain) == 3 and set(over["reference"]) == {"lcpo[hidden=[16]]"}
    assert np.array_equal(over["p"].to_numpy(), plain["p"].to_numpy())
    lines = "\n".join(_comparison_lines(per, 0.95))
    assert "a2c (against lcpo[hidden=[16]])" in lines and "Holm's correction over the 3 tests" in lines
    two = pd.concat([per, per.iloc[:3].assign(scheme="lcpo")], ignore_index=True)
    both = forgetting_comparisons(two)
    assert sorted(set(both["reference"])) == ["lcpo", "lcpo[hidden=[16]]"] and set(both["baseline"]) == {"a2c"}


def test_forgetting_comparisons_leave_out_prescient_agents_and_undefined_measures():
    """The study's report stopped on 'y (cell ... lcpo vs prescient-a2c bwt) must be finite': a prescient agent acts
    frozen online (a reference, not a baseline) and its BWT is undefined (NaN); an undefined measure of a baseline
    is not tested either, while its defined measures are."""
    import pandas as pd

    from lcpo.experiments.forgetting import forgetting_comparisons

    nan = float("nan")
    per = pd.DataFrame({"cell": ["c"] * 9, "scheme": ["lcpo"] * 3 + ["prescient-a2c"] * 3 + ["a2c"] * 3,
                        "seed": [0, 1, 2] * 3, "final_F": [1.0, 2, 3, 0, 0, 0, 4, 6, 8],
                        "mean_F": [1.0, 2, 3, 0, 0, 0, 4, 6, 8], "bwt": [0.0, 1, 2, nan, nan, nan, nan, nan, nan],
                        "final_R": [0.0] * 9})
    cmp = forgetting_comparisons(per)
    assert list(zip(cmp["baseline"], cmp["measure"])) == [("a2c", "final_F"), ("a2c", "mean_F")]
    assert cmp["p_holm"].notna().all()


def test_forgetting_comparison_verdicts_follow_the_measures_direction():
    """A significantly lower final F is 'forgets less'; a significantly lower BWT is 'forgets more'."""
    import pandas as pd

    from lcpo.experiments.forgetting import _comparison_lines

    n = 10
    per = pd.DataFrame({"cell": ["c"] * 2 * n, "scheme": ["lcpo"] * n + ["a2c"] * n, "seed": list(range(n)) * 2,
                        "final_F": np.r_[np.linspace(0, 1, n), np.linspace(10, 11, n)],
                        "mean_F": np.r_[np.linspace(0, 1, n), np.linspace(0.1, 1.1, n)],
                        "bwt": np.r_[np.linspace(-11, -10, n), np.linspace(0, 1, n)], "final_R": 0.0})
    rows = [line for line in _comparison_lines(per, 0.95) if line.startswith("| c |")]
    assert "final F" in rows[0] and "LCPO forgets less" in rows[0]
    assert "mean F" in rows[1] and "not significant" in rows[1]
    assert "BWT" in rows[2] and "LCPO forgets more" in rows[2]


def test_lcpo_forgetting_refuses_an_unwritable_out_in_one_line_before_any_work(tmp_path, capsys):
    """It said `[Errno 2] No such file or directory` or `.../cache: Not a directory` after evaluating."""
    from lcpo.cli.main import main

    (tmp_path / "runs").mkdir()
    (tmp_path / "regfile").write_text("x")
    assert main(["forgetting", str(tmp_path / "runs"), "--out", str(tmp_path / "regfile" / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lcpo forgetting: error: ") and "regfile" in err and "is a file" in err
    assert err.count("\n") == 1 and not (tmp_path / "runs" / "forgetting").exists()


def test_regimes_beyond_the_trace_rows_or_the_cap_are_refused_in_one_line():
    from lcpo.experiments.forgetting import MAX_REGIMES

    levels = np.repeat(np.array([[0.0, 0.0], [3.0, 0.0]]), 20, axis=0)
    with pytest.raises(ValueError, match=r"^regimes 41: more than the 40 rows of trace 'array'$"):
        reference_contexts(levels, regimes=41)
    with pytest.raises(ValueError, match=rf"^regimes {MAX_REGIMES + 1}: more than the {MAX_REGIMES} allowed"):
        reference_contexts(np.zeros((1000, 2)), regimes=MAX_REGIMES + 1)
    assert reference_contexts(levels, regimes=40).regimes == 2  # two distinct rows: two regimes, as documented


def test_runs_left_out_are_named_with_their_own_reason_and_a_malformed_summary_is_refused(tmp_path, capsys):
    from lcpo.experiments.forgetting import forgetting_section, forgetting_study

    execute(_tiny(), tmp_path / "runs" / "a2c-s0")
    execute(_tiny(seed=1), tmp_path / "runs" / "a2c-s1")
    (tmp_path / "runs" / "a2c-s1" / "snapshots.npz").unlink()
    study = forgetting_study(tmp_path / "runs", regimes=2, episodes=1, episode_steps=10)
    assert study["without_reasons"] == {"a2c-s1": "no snapshots.npz in the run folder: made before runs kept "
                                                  "snapshots, or the file was removed (`lcpo run` writes it for "
                                                  "every agent with one acting network)"}
    md = "\n".join(forgetting_section(study, tmp_path / "out"))
    assert "1 finished run(s) are left out:" in md and "- no snapshots.npz in the run folder" in md
    assert "(1): a2c-s1" in md and "an environment without a context trace" not in md
    (tmp_path / "runs" / "a2c-s1" / "summary.json").write_text('{"lifelong_return": "high"}')
    from lcpo.cli.main import main

    assert main(["forgetting", str(tmp_path / "runs"), "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert "a2c-s1/summary.json: lifelong_return must be a number, got 'high'" in err and err.count("\n") == 1


def test_a_trace_that_cannot_be_made_is_its_own_reason_and_regimes_are_checked_before_any_evaluation(tmp_path):
    from lcpo.experiments.forgetting import forgetting_study

    levels = np.repeat(np.array([[0.0, 0.0], [3.0, 0.0]]), 20, axis=0)
    np.save(tmp_path / "mine.npy", levels)
    execute(RunConfig(env="lcpo/WindyPendulum-v0", trace=str(tmp_path / "mine.npy"), agent="a2c", steps=400,
                      checkpoint_every=0, overrides={"hidden": [8], "rollout_steps": 100}), tmp_path / "runs" / "mine")
    execute(_tiny(), tmp_path / "runs" / "a2c-s0")
    cache = tmp_path / "cache"
    # the 40-row trace refuses 50 regimes: before a2c-s0 (sorted first) is evaluated and cached
    with pytest.raises(ValueError, match=r"^regimes 50: more than the 40 rows of trace 'mine'"):
        forgetting_study(tmp_path / "runs", regimes=50, episodes=1, episode_steps=10, cache_dir=cache)
    assert not cache.exists()
    (tmp_path / "mine.npy").rename(tmp_path / "moved.npy")
    study = forgetting_study(tmp_path / "runs", regimes=2, episodes=1, episode_steps=10)
    why = study["without_reasons"]["mine"]
    assert why.startswith("its trace cannot be made: ") and "mine.npy" in why and "no context trace" not in why


def test_a_file_given_for_a_folder_is_named_as_a_file(tmp_path, capsys):
    from lcpo.cli.main import main

    (tmp_path / "sweep.json").write_text("{}")
    assert main(["forgetting", str(tmp_path / "sweep.json")]) == 2
    assert "sweep.json: a file, not a folder" in capsys.readouterr().err
    assert main(["resume", str(tmp_path / "sweep.json")]) == 2
    assert "sweep.json: a file, not a folder" in capsys.readouterr().err
