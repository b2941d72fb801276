"""Tests for the trap grid world experiment (paper Figure 1) and ``lcpo figure gridworld``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from lcpo.cli.main import main
from lcpo.experiments.gridworld import (COLUMNS, GRID_AGENTS, acceptance, decision_probs, phases, run_experiment,
                                       schedule)


def test_phases_scale_uniformly():
    assert phases(1.0) == [(0, 4000), (1, 12000), (0, 4000)]
    assert phases(0.1) == [(0, 400), (1, 1200), (0, 400)]
    assert phases(1e-6) == [(0, 1), (1, 1), (0, 1)]
    flags = schedule(0.01)
    assert flags.shape == (200,) and flags[:40].sum() == 0 and flags[40:160].all() and flags[160:].sum() == 0
    for bad in (0, 1.5, float("nan"), "0.1"):
        with pytest.raises(ValueError, match="scale"):
            phases(bad)


def test_decision_probs_of_a_tabular_policy():
    import gymnasium as gym
    import torch

    from lcpo.agents.tabular_a2c import TabularA2C
    from lcpo.envs.gridworld import DECISION, LEFT, UP

    agent = TabularA2C(gym.make("lcpo/TrapGrid-v0"), seed=0)
    assert decision_probs(agent) == pytest.approx((0.25, 0.25))
    agent.actor.body.table.data[DECISION, UP] = 100.0
    agent.actor.body.table.data[DECISION + 9] = torch.tensor([0.0, 0.0, 0.0, 0.0])
    agent.actor.body.table.data[DECISION + 9, LEFT] = np.log(3.0)
    p_up, p_left = decision_probs(agent)
    assert p_up == pytest.approx(1.0) and p_left == pytest.approx(0.5)


def _synthetic(n1=20, n2=60, n3=20):
    """A table whose acceptance numbers are known: A2C forgets, tabular is flat, LCPO holds."""
    trap = np.r_[np.zeros(n1), np.ones(n2), np.zeros(n3)].astype(int)
    n = trap.size
    e = np.arange(n)
    rows = []
    for seed in range(2):
        a2c_tv = np.where(trap == 1, np.linspace(0, 0.9, n), 0.05)
        a2c_ret = np.where(e >= n1 + n2, -6.0 + 0.5 * seed, -3.0)
        lcpo_ret = np.where(e == n1 + n2, -4.0, -3.2)
        for agent, ret, tv in (("a2c", a2c_ret, a2c_tv), ("tabular-a2c", np.full(n, -3.0), np.full(n, 0.01)),
                               ("lcpo", lcpo_ret, np.full(n, 0.1))):
            rows += [(agent, seed, i, trap[i], ret[i], tv[i], 0.5) for i in range(n)]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def test_acceptance_numbers_on_a_known_table():
    acc = acceptance(_synthetic())
    assert acc.seeds == 2 and acc.a2c_tv_no_trap_before == pytest.approx(0.05)
    assert acc.a2c_min_return_after == pytest.approx(-5.75)
    assert acc.tabular_tv_no_trap_change == 0.0
    assert acc.lcpo_tv_no_trap_max == pytest.approx(0.1)
    assert acc.lcpo_worst_return_after == pytest.approx(-3.2)  # the -4 at the switch is within `settle`
    assert all(acc.checks().values())
    bad = _synthetic()
    bad.loc[(bad.agent == "tabular-a2c") & (bad.epoch == 50), "tv_no_trap"] = 0.5
    assert not acceptance(bad).checks()["tabular_does_not_change"]
    with pytest.raises(ValueError, match="missing"):
        acceptance(bad[bad.agent != "lcpo"])


def test_cli_figure_gridworld_end_to_end_tiny_scale(tmp_path):
    out = tmp_path / "fig"
    rc = main(["figure", "gridworld", "--out", str(out), "--scale", "0.001", "--seeds", "1", "--workers", "1",
               "--no-progress"])
    assert rc == 0
    df = pd.read_csv(out / "gridworld.csv")
    assert tuple(df.columns) == COLUMNS and len(df) == 3 * 20
    assert list(df["agent"].unique()) == list(GRID_AGENTS)
    one = df[df.agent == "a2c"]
    assert one["trap"].tolist() == [0] * 4 + [1] * 12 + [0] * 4 and one["epoch"].tolist() == list(range(20))
    assert df[["tv_no_trap", "tv_trap"]].stack().between(0, 1).all()
    assert df["return"].dropna().between(-200, 0).all()
    assert (out / "gridworld.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads((out / "acceptance.json").read_text())
    assert report["scale"] == 0.001 and set(report["checks"]) >= {"a2c_forgets", "lcpo_return_within_0.5"}


@pytest.mark.parametrize("args", [["--scale", "0"], ["--scale", "2"], ["--seeds", "0"], []])
def test_cli_figure_rejects_bad_arguments(args, tmp_path, capsys):
    argv = ["figure", "gridworld", *args] + (["--out", str(tmp_path)] if args else [])
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert ("--scale" in capsys.readouterr().err) if "--scale" in args else True


def test_run_experiment_rejects_unknown_agents_and_stray_overrides():
    with pytest.raises(ValueError, match="'nope'"):
        run_experiment(scale=0.001, seeds=1, agents=("nope",))
    with pytest.raises(ValueError, match="'lcpo'"):
        run_experiment(scale=0.001, seeds=1, agents=("a2c",), overrides={"lcpo": {"c_anchor": 1e-4}})


@pytest.mark.slow
def test_acceptance_ordering_of_issue_4():
    """A2C forgets, tabular A2C cannot, LCPO does not (4 seeds, scale 0.05: 200 / 600 / 200 epochs)."""
    df = run_experiment(scale=0.05, seeds=4, workers=2)
    acc = acceptance(df)
    checks = acc.checks()
    assert all(checks.values()), (checks, acc)


@pytest.mark.parametrize("check, expected_rc", [(False, 0), (True, 1)])
def test_cli_figure_says_which_criteria_do_not_hold_and_check_makes_it_an_exit_status(tmp_path, capsys, monkeypatch,
                                                                                      check, expected_rc):
    import lcpo.experiments.gridworld as gridworld

    bad = _synthetic()
    bad.loc[(bad.agent == "tabular-a2c") & (bad.epoch == 50), "tv_no_trap"] = 0.5  # tabular A2C changes
    monkeypatch.setattr(gridworld, "run_experiment", lambda **kwargs: bad)
    rc = main(["figure", "gridworld", "--out", str(tmp_path), "--scale", "0.01", "--seeds", "2", "--no-progress",
               *(["--check"] if check else [])])
    out = capsys.readouterr().out
    assert rc == expected_rc
    assert "does not hold tabular_does_not_change" in out and "holds         a2c_forgets" in out
    assert "1 of 5 acceptance criteria do not hold at --scale 0.01" in out
    assert ("--check makes this exit" in out) is (not check)
    assert json.loads((tmp_path / "acceptance.json").read_text())["checks"]["tabular_does_not_change"] is False
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary file


def test_cli_figure_exits_zero_with_check_when_every_criterion_holds(tmp_path, capsys, monkeypatch):
    import lcpo.experiments.gridworld as gridworld

    monkeypatch.setattr(gridworld, "run_experiment", lambda **kwargs: _synthetic())
    assert main(["figure", "gridworld", "--out", str(tmp_path), "--check", "--no-progress"]) == 0
    assert "do not hold" not in capsys.readouterr().out
