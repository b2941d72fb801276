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

    rc = main(["run", "--agent", "lcpo", "--steps", "1e15", "--out", str(tmp_path / "runs"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("lcpo run: error: a reservoir of") and "reservoir_size" in err
    assert not (tmp_path / "runs").exists()
    # a run length beyond 2**53 is refused first (RunConfig.MAX_STEPS), a reservoir beyond int64 before any
    # memory check; each names its setting
    rc = main(["run", "--agent", "lcpo", "--steps", "1e30", "--out", str(tmp_path / "runs"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("lcpo run: error: steps must be at most 2**53") and err.endswith("got 1e+30\n")
    rc = main(["run", "--agent", "lcpo", "--steps", "1000", "--set", "reservoir_size=1e30", "--out",
               str(tmp_path / "runs"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("lcpo run: error: hyperparameter 'reservoir_size' = ") and "int64" in err
    assert not (tmp_path / "runs").exists() and err.count("\n") == 1


def test_buffers_held_together_are_checked_together_and_a_dropped_one_frees_its_share(monkeypatch):
    """64 seeds whose reservoir fits once need not fit together: the seed that overflows is refused, naming the
    memory the others hold; a buffer that is gone no longer counts."""
    monkeypatch.setattr(budget, "_reserved", type(budget._reserved)())
    monkeypatch.setattr(budget, "physical_memory", lambda: 10 * 36_000)  # ten reservoirs of 1,000 x 9 float32
    held = [ReservoirBuffer(1000, 9, np.random.default_rng(k)) for k in range(10)]
    assert budget.reserved_bytes() == (360_000, 10)
    with pytest.raises(ValueError, match=r"reservoir of 1,000 states x 9 .* 10 other buffer\(s\) of this process "
                                         r"\(a population's other seeds\) already hold 351.6 kiB: more than this machine.s 351.6 kiB .*--population") as e:
        ReservoirBuffer(1000, 9, np.random.default_rng(10))
    assert "\n" not in str(e.value)
    held.pop()
    assert budget.reserved_bytes() == (324_000, 9)
    assert len(ReservoirBuffer(1000, 9, np.random.default_rng(11)).data) == 1000  # the freed share is usable
    with pytest.raises(ValueError, match=r"replay buffer of 10 transitions .* other buffer\(s\)"):
        held.append(ReservoirBuffer(1000, 9, np.random.default_rng(12)))
        ReplayBuffer(capacity=10, obs_shape=(3,))


def test_a_buffer_held_only_by_a_reference_cycle_is_collected_before_refusing(monkeypatch):
    monkeypatch.setattr(budget, "_reserved", type(budget._reserved)())
    monkeypatch.setattr(budget, "physical_memory", lambda: 36_000)

    class Holder:
        pass

    h = Holder()
    h.me, h.buffer = h, ReservoirBuffer(1000, 9, np.random.default_rng(0))  # a cycle: freed only by the collector
    del h
    assert len(ReservoirBuffer(1000, 9, np.random.default_rng(1)).data) == 1000


def test_a_population_too_large_together_is_refused_before_any_seed_runs(tmp_path, capsys, monkeypatch):
    """`lcpo run --seed 0-63`: each seed's reservoir fits, the 64 do not; one line, nothing written."""
    from lcpo.cli.main import main

    monkeypatch.setattr(budget, "_reserved", type(budget._reserved)())
    per_seed = 2000 * 9 * 4  # reservoir_size 2,000 of the 9-entry windy-Pendulum observation (float32)
    monkeypatch.setattr(budget, "physical_memory", lambda: 40 * per_seed)
    rc = main(["run", "--agent", "lcpo", "--seed", "0-63", "--steps", "400", "--set", "reservoir_size=2000",
               "--trace", "wind-3", "--trace-length", "1000", "--out", str(tmp_path / "runs"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("lcpo run: error: a reservoir of 2,000 states x 9") and err.count("\n") == 1
    assert "40 other buffer(s)" in err and "--population" in err, err
    assert not any((tmp_path / "runs").glob("*/summary.json"))
