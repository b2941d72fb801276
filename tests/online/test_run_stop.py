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
