"""A stop request inside a run (issue 24 item 1, the part a sweep worker relies on): ``execute(should_stop=...)``
checkpoints where the run stands, returns without a summary, and the resumed run equals an uninterrupted one."""

from __future__ import annotations

import pandas as pd

from lcpo.online.run import STOP_POLL_STEPS, RunConfig, execute
from lcpo.persistence.checkpoint import RunCheckpoints


def _cfg(**kw):
    base = dict(trace="wind-3", trace_length=2000, agent="a2c", steps=700, seed=2, checkpoint_every=300,
                diagnostics_every=200)
    return RunConfig(**(base | kw))


def test_a_stop_request_checkpoints_between_checkpoints_and_the_resumed_run_is_the_uninterrupted_one(tmp_path):
    full = execute(_cfg(), tmp_path / "full")
    asked = []

    def should_stop():  # asked at least every STOP_POLL_STEPS steps; says stop at its third question
        asked.append(1)
        return len(asked) >= 3

    out = tmp_path / "cut"
    stopped = execute(_cfg(), out, should_stop=should_stop)["interrupted_at"]
    assert 300 < stopped <= 300 + STOP_POLL_STEPS and stopped % 300  # between two periodic checkpoints ...
    assert RunCheckpoints(out / "checkpoint").latest().step == stopped  # ... and saved there
    assert not (out / "summary.json").exists()
    resumed = execute(_cfg(), out)
    assert resumed["resumed_from"] == [stopped]
    assert resumed["lifelong_return"] == full["lifelong_return"] and resumed["episodes"] == full["episodes"]
    for name in ("episodes.csv", "diagnostics.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(out / name), pd.read_csv(tmp_path / "full" / name))


def test_without_checkpoints_a_stopped_run_leaves_no_checkpoint(tmp_path):
    out = tmp_path / "r"
    assert execute(_cfg(checkpoint_every=0), out, should_stop=lambda: True) == {"interrupted_at": STOP_POLL_STEPS}
    assert RunCheckpoints(out / "checkpoint").latest() is None


def test_a_stop_request_during_a_prescient_agents_offline_training_is_seen_there(tmp_path):
    """SIGINT/SIGTERM during the offline training (minutes at the default 1.6M steps) stops the run there, not
    after the training: no checkpoint, nothing online, and the resumed run is the uninterrupted one. Its summary
    keeps the training's seconds apart from the online steps' (``offline_train_s``, ``steps_per_s``)."""
    cfg = _cfg(agent="prescient-a2c", overrides={"train_steps": 3000}, steps=400)
    full = execute(cfg, tmp_path / "full")
    assert full["offline_train_s"] > 0
    assert full["steps_per_s"] > 400 / full["wall_time_s"]  # the online phase only
    asked = []

    def should_stop():
        asked.append(1)
        return len(asked) >= 2

    out = tmp_path / "cut"
    said = []
    assert execute(cfg, out, should_stop=should_stop, on_message=said.append) == {"interrupted_at": 0}
    assert said[-1] == (f"{out}: stopped during the offline training of prescient-a2c at its step 500 of 3,000 "
                        "(before the first online step; no checkpoint: the resume trains afresh, to the same result)")
    assert len(asked) == 2  # asked during the training, every STOP_POLL_STEPS training steps
    assert RunCheckpoints(out / "checkpoint").latest() is None and not (out / "summary.json").exists()
    assert (out / "config.json").is_file()  # `lcpo resume` finds it
    resumed = execute(cfg, out, resume=True)
    assert resumed["lifelong_return"] == full["lifelong_return"] and resumed["episodes"] == full["episodes"]
    pd.testing.assert_frame_equal(pd.read_csv(out / "episodes.csv"), pd.read_csv(tmp_path / "full" / "episodes.csv"))
    # the store keeps the training's seconds apart too (results.parquet's offline_train_s column)
    from lcpo.experiments.store import collect

    runs, _ = collect(tmp_path, episodes=False)
    assert sorted(runs["offline_train_s"]) == sorted([full["offline_train_s"], resumed["offline_train_s"]])


def test_a_population_of_prescient_agents_stops_during_their_offline_training(tmp_path):
    from lcpo.online.population import execute_population

    cfgs = [_cfg(agent="prescient-a2c", overrides={"train_steps": 2000}, steps=400, seed=s) for s in (0, 1)]
    outs = [tmp_path / f"s{s}" for s in (0, 1)]
    asked = []
    said = []
    got = execute_population(cfgs, outs, should_stop=lambda: asked.append(1) or len(asked) >= 10,
                             on_message=said.append)
    assert said[-1] == ("prescient-a2c: stopped during the offline training of seed 1 at its step 750 (before the "
                        "first online step; no checkpoint: the resume trains afresh, to the same result)")
    # seed 0 trains its 2,000 steps (7 looks: none after its last chunk), seed 1 is paused at its third
    assert got == [{"interrupted_at": 0}] * 2 and len(asked) == 10
    assert all(RunCheckpoints(o / "checkpoint").latest() is None for o in outs)
    done = execute_population(cfgs, outs, resume=True)
    solo = execute(cfgs[1], tmp_path / "solo")
    assert done[1]["lifelong_return"] == solo["lifelong_return"] and done[1]["offline_train_s"] > 0
