"""Diagnostics windows of RunLog: per-key means over the updates that reported each key."""

import pandas as pd
import pytest

from lcpo.persistence.runlog import RunLog


def test_a_key_reported_by_some_updates_is_averaged_over_those_only(tmp_path):
    log = RunLog(tmp_path, every=1000)
    # four updates in one window; the anchor KL only on the two constrained ones
    log.on_update(200, {"train/constrained": 1.0, "train/kl_anchor": 4e-5})
    log.on_update(400, {"train/constrained": 0.0})
    log.on_update(600, {"train/constrained": 1.0, "train/kl_anchor": 2e-5})
    log.on_update(800, {"train/constrained": 0.0})
    log.on_update(1200, {"train/constrained": 0.0})  # next window
    log.write([], final=True, last_step=1200)
    d = pd.read_csv(tmp_path / "diagnostics.csv")
    assert d["updates"].tolist() == [4, 1]
    assert d.loc[0, "train/kl_anchor"] == pytest.approx(3e-5)  # not (4e-5 + 2e-5) / 4
    assert d.loc[0, "train/constrained"] == pytest.approx(0.5)
    assert pd.isna(d.loc[1, "train/kl_anchor"])
    assert log.mean("train/kl_anchor") == pytest.approx(3e-5)
    assert log.mean("train/constrained") == pytest.approx(0.4)
    assert log.mean("never/reported") == 0.0


def test_state_round_trip_keeps_per_key_counts(tmp_path):
    a = RunLog(tmp_path / "a", every=1000)
    a.on_update(200, {"x": 1.0, "y": 2.0})
    a.on_update(400, {"x": 3.0})
    b = RunLog(tmp_path / "b", every=1000)
    b.load_state_dict(a.state_dict())
    for log in (a, b):
        log.on_update(600, {"y": 4.0})
        log.write([], final=True, last_step=600)
    assert (tmp_path / "a" / "diagnostics.csv").read_text() == (tmp_path / "b" / "diagnostics.csv").read_text()
    assert pd.read_csv(tmp_path / "a" / "diagnostics.csv")[["x", "y"]].iloc[0].tolist() == [2.0, 3.0]
