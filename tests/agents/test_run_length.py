"""Run-length defaults and the paper's / authors' settings as our defaults (issue 27, item 3; docs/settings.md)."""

from __future__ import annotations

import json

import pytest

from lcpo.agents import AGENTS
from lcpo.agents.base import resolve_hyperparameters
from lcpo.agents.run_length import RUN_LENGTH_RULES, run_length_overrides
from lcpo.envs.straggler.presets import straggler_overrides
from lcpo.online.run import RunConfig


@pytest.mark.parametrize("steps, reservoir", [(8_000_000, 80_000), (20_000_000, 200_000), (200_000, 2_000),
                                              (50_000, 1_000)])
def test_lcpo_run_reservoir_is_one_percent_of_the_run(steps, reservoir):
    """`lcpo run --steps 8000000` builds LCPO with an 80,000-state reservoir (paper: 1% of samples); never below
    the s = 5 b = 1,000 candidates one anchor draw asks for."""
    for agent in ("lcpo", "lcpo-p"):
        assert RunConfig(agent=agent, steps=steps).agent_overrides() == {"reservoir_size": reservoir}


def test_user_reservoir_wins_and_library_default_stays():
    cfg = RunConfig(agent="lcpo", steps=8_000_000, overrides={"reservoir_size": 5000})
    assert cfg.agent_overrides() == {"reservoir_size": 5000}
    assert AGENTS["lcpo"].Hyperparameters().reservoir_size == 200_000
    # the floor follows the user's anchor batch: b = 300, s = 5 b = 1,500
    assert RunConfig(agent="lcpo", steps=10_000, overrides={"ood_batch": 300}).agent_overrides() == \
        {"ood_batch": 300, "reservoir_size": 1500}
    # an extended run keeps the reservoir of the length it started with
    assert RunConfig(agent="lcpo", steps=20_000_000).agent_overrides(8_000_000) == {"reservoir_size": 80_000}


@pytest.mark.parametrize("agent", ["ddqn", "sac", "ewc", "ogd"])
def test_replay_holds_every_sample_of_the_run(agent):
    assert RunConfig(agent=agent, steps=8_000_000).agent_overrides() == {"buffer_size": 8_000_000}
    assert RunConfig(agent=agent, steps=8_000_000, overrides={"buffer_size": 10}).agent_overrides() == \
        {"buffer_size": 10}


def test_agents_without_rule_are_untouched():
    for agent in sorted(set(AGENTS) - set(RUN_LENGTH_RULES)):
        assert RunConfig(agent=agent, steps=8_000_000).agent_overrides() == {}


def test_run_length_rejects_bad_steps():
    with pytest.raises(ValueError, match="steps must be a positive integer, got 0"):
        run_length_overrides("lcpo", {}, 0)


def test_run_builds_the_agent_with_the_resolved_reservoir(tmp_path):
    """The run builds its agent with the resolved reservoir and records it in config.json: 400 steps with an
    anchor batch of 20 give max(20 x 5, 400 // 100) = 100; without the resolution it would be the library's
    200,000."""
    from lcpo.online.run import execute

    cfg = RunConfig(agent="lcpo", steps=400, checkpoint_every=0, diagnostics_every=200,
                    overrides={"rollout_steps": 200, "ood_batch": 20})
    execute(cfg, tmp_path / "run")
    hp = json.loads((tmp_path / "run" / "config.json").read_text())["hyperparameters"]
    assert hp["reservoir_size"] == 100  # max(20 * 5, 400 // 100)


def test_paper_and_run_config_defaults():
    sac = AGENTS["sac"].Hyperparameters()
    assert (sac.actor_lr, sac.weight_decay, sac.head_reduction, sac.max_grad_norm) == (4e-4, 1e-4, "sum", 1.0)
    ddqn = AGENTS["ddqn"].Hyperparameters()
    assert (ddqn.loss, ddqn.weight_decay, ddqn.head_reduction, ddqn.max_grad_norm) == ("mse", 1e-4, "sum", 1.0)
    assert AGENTS["trpo"].Hyperparameters().critic_minibatch == 3200


def test_straggler_preset_follows_the_authors():
    lcpo = straggler_overrides("lcpo")
    assert lcpo["entropy_base"] == 0.01
    assert lcpo["ood_batch"] == lcpo["rollout_steps"] == 4608
    assert lcpo["ood_threshold"] == 24.0
    hp = resolve_hyperparameters(AGENTS["lcpo"].Hyperparameters, None,
                                 RunConfig(env="lcpo/StragglerMitigation-v0", agent="lcpo", steps=20_736_000,
                                           overrides=lcpo).agent_overrides())
    assert hp.reservoir_size == 207_360  # the authors': 1% of 4,608 x 4,500
    # a shorter rollout given to the preset shrinks the anchor batch with it
    assert straggler_overrides("lcpo", rollout_steps=500)["ood_batch"] == 500


def test_extended_run_keeps_the_reservoir_it_started_with(tmp_path):
    """400 steps give a reservoir of max(1 x 1, 400 // 100) = 4; extending to 800 and then 1,200 steps keeps 4
    (the checkpoint's size), where a fresh 800- or 1,200-step run would get 8 or 12."""
    from lcpo.online.run import execute

    def cfg(steps):
        return RunConfig(agent="lcpo", steps=steps, checkpoint_every=400, diagnostics_every=200,
                         overrides={"rollout_steps": 200, "ood_batch": 1, "ood_candidates_factor": 1})

    assert cfg(1200).agent_overrides()["reservoir_size"] == 12
    for steps in (400, 800, 1200):
        said = []
        summary = execute(cfg(steps), tmp_path / "run", resume=True, on_message=said.append)
        assert summary["steps"] == steps
        assert summary["hyperparameters"]["reservoir_size"] == 4
        # the extension says what it keeps, and what a fresh run of that length would use
        kept = [m for m in said if ": keeps " in m]
        if steps == 400:
            assert kept == []
        else:
            assert kept == [f"{tmp_path / 'run'}: keeps reservoir_size=4 from the run's first length (a fresh "
                            f"{steps:,}-step run would use reservoir_size={steps // 100}: the results differ; set "
                            "them with --set to compare)"]


def test_an_extended_population_names_the_sizes_it_keeps(tmp_path):
    """The population path says the same as execute: 2 LCPO seeds of 400 steps extended to 800."""
    from lcpo.online.population import execute_population

    def cfgs(steps):
        return [RunConfig(agent="lcpo", steps=steps, checkpoint_every=400, diagnostics_every=200, seed=s,
                          overrides={"rollout_steps": 200, "ood_batch": 1, "ood_candidates_factor": 1})
                for s in (0, 1)]

    outs = [tmp_path / "s0", tmp_path / "s1"]
    execute_population(cfgs(400), outs)
    said = []
    got = execute_population(cfgs(800), outs, resume=True, on_message=said.append)
    assert [g["hyperparameters"]["reservoir_size"] for g in got] == [4, 4]
    assert [m for m in said if ": keeps " in m] == [
        f"{o}: keeps reservoir_size=4 from the run's first length (a fresh 800-step run would use "
        "reservoir_size=8: the results differ; set them with --set to compare)" for o in outs]


def test_no_note_when_neither_size_fills():
    """A replay buffer of the whole run never fills: an interrupted 3,000-step DDQN run resumed as a 2,500-step run
    keeps buffer_size 3,000 where a fresh one would have 2,500, and the two runs are the same: nothing to say."""
    from lcpo.online.run import _kept_sizes_note

    cfg = RunConfig(agent="ddqn", steps=2500)
    assert _kept_sizes_note(cfg, {"buffer_size": 3000}) == ""
    assert "buffer_size=3,000" in _kept_sizes_note(RunConfig(agent="ddqn", steps=5000), {"buffer_size": 3000})
    assert _kept_sizes_note(RunConfig(agent="ddqn", steps=5000, overrides={"buffer_size": 3000}),
                            {"buffer_size": 3000}) == ""  # set by the user: nothing kept by default
