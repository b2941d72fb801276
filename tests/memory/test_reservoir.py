"""Reservoir buffer (Algorithm R): uniform inclusion probability k/n, first k kept, constant memory."""

import numpy as np
import pytest

from lcpo.memory.reservoir import ReservoirBuffer


def test_first_k_items_all_kept():
    buf = ReservoirBuffer(10, 1, np.random.default_rng(0))
    buf.add_batch(np.arange(10, dtype=np.float32)[:, None])
    assert sorted(buf.data[:, 0].tolist()) == list(range(10))
    assert len(buf) == 10


@pytest.mark.parametrize("batch", [1, 7, 50])
def test_inclusion_frequency_is_k_over_n(batch):
    n, k, trials = 50, 10, 4000
    counts = np.zeros(n)
    for t in range(trials):
        buf = ReservoirBuffer(k, 1, np.random.default_rng(t))
        items = np.arange(n, dtype=np.float32)[:, None]
        for i in range(0, n, batch):
            buf.add_batch(items[i:i + batch])
        assert len(np.unique(buf.data[:, 0])) == k  # no duplicates: slots hold distinct items
        counts[buf.data[:, 0].astype(int)] += 1
    freq = counts / trials
    # binomial std of a frequency with p = 0.2 over 4000 trials is 0.0063; allow 4.5 sigma per item
    assert np.abs(freq - k / n).max() < 0.03
    assert abs(freq.mean() - k / n) < 1e-12  # exactly k items held in every trial


def test_memory_is_constant_and_state_round_trip():
    buf = ReservoirBuffer(100, 3, np.random.default_rng(1))
    nbytes = buf.data.nbytes
    for _ in range(50):
        buf.add_batch(np.random.default_rng(2).normal(size=(200, 3)).astype(np.float32))
    assert buf.data.nbytes == nbytes and buf.seen == 10_000
    other = ReservoirBuffer(100, 3, np.random.default_rng(99))
    other.load_state_dict(buf.state_dict())
    x = np.ones((300, 3), np.float32)
    buf.add_batch(x)
    other.add_batch(x)
    np.testing.assert_array_equal(buf.data, other.data)


def test_rejects_wrong_shape():
    buf = ReservoirBuffer(5, 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"\(B, 3\)"):
        buf.add_batch(np.zeros((4, 2)))


def test_refused_states_and_batches_leave_the_reservoir_and_its_rng():
    """Too many rows for the capacity, another bit generator's state, or observations with no numeric form:
    refused in one line before the counters, the data or the generator change."""
    buf = ReservoirBuffer(3, 2, np.random.default_rng(0))
    buf.add_batch(np.arange(10, dtype=np.float32).reshape(5, 2))

    def snap():
        return buf.data.copy(), buf.seen, buf.rng.bit_generator.state

    before = snap()
    bad_rows = {"data": np.zeros((99, 2), np.float32), "seen": 99, "rng": buf.rng.bit_generator.state}
    bad_rng = {"data": np.zeros((3, 2), np.float32), "seen": 7, "rng": np.random.MT19937(0).state}
    for state, match in ((bad_rows, r"shape \(99, 2\), expected \(3, 2\)"), (bad_rng, "not a PCG64 state")):
        with pytest.raises(ValueError, match=match):
            buf.load_state_dict(state)
    with pytest.raises(ValueError, match="dtype <U1 cannot be stored as float32"):
        buf.add_batch(np.array([["a", "b"]]))
    after = snap()
    np.testing.assert_array_equal(after[0], before[0])
    assert after[1:] == before[1:]
    empty = ReservoirBuffer(3, 2, np.random.default_rng(1))
    empty.load_state_dict(ReservoirBuffer(3, 2, np.random.default_rng(2)).state_dict())  # 0 rows still load
    assert len(empty) == 0


def test_negative_sizes_are_refused_naming_them():
    with pytest.raises(ValueError, match="^reservoir obs_dim must be >= 1, got -1$"):
        ReservoirBuffer(4, -1, np.random.default_rng(0))
    buf = ReservoirBuffer(4, 2, np.random.default_rng(0))
    for _ in range(2):  # empty, then filled: the same message
        with pytest.raises(ValueError, match="^reservoir sample count must be >= 0, got -1$"):
            buf.sample_indices(-1)
        buf.add_batch(np.ones((3, 2)))
