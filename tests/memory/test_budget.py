"""A preallocated memory larger than the machine is refused up front, in one line naming its setting."""

import numpy as np
import pytest

import lcpo.memory.budget as budget
from lcpo.memory.replay import ReplayBuffer
from lcpo.memory.reservoir import ReservoirBuffer


def test_physical_memory_is_positive_here():
    total = budget.physical_memory()
    assert total is None or total > 2**26


def test_a_reservoir_larger_than_memory_is_refused_naming_reservoir_size(monkeypatch):
    monkeypatch.setattr(budget, "physical_memory", lambda: 1_000_000)
    with pytest.raises(ValueError, match=r"reservoir of 100,000 states x 9 would take .* lower reservoir_size") as e:
        ReservoirBuffer(100_000, 9, np.random.default_rng(0))  # 3.6 MB of float32 > 1 MB
    assert "\n" not in str(e.value)
    assert len(ReservoirBuffer(20_000, 9, np.random.default_rng(0)).data) == 20_000  # 720 kB fits


def test_a_replay_buffer_larger_than_memory_is_refused_naming_buffer_size(monkeypatch):
    # per transition: obs and next_obs 2 x 3 float32, an int64 action, a float64 reward, 2 flags, an int64 episode
    per = 2 * 3 * 4 + 8 + 8 + 2 + 8
    monkeypatch.setattr(budget, "physical_memory", lambda: 1000 * per)
    with pytest.raises(ValueError, match="replay buffer of 1,001 transitions .* lower buffer_size"):
        ReplayBuffer(capacity=1001, obs_shape=(3,))
    assert ReplayBuffer(capacity=1000, obs_shape=(3,)).capacity == 1000  # exactly the machine's memory fits


def test_the_cli_names_the_setting_for_an_impossible_run_length(tmp_path, capsys):
    from lcpo.cli.main import main

    rc = main(["run", "--agent", "lcpo", "--steps", "1e30", "--out", str(tmp_path / "runs"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("lcpo: error: a reservoir of") and "reservoir_size" in err
    assert not (tmp_path / "runs").exists()
