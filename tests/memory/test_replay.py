"""Tests for the episode-aware replay buffer (issue 3, item 3)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from lcpo.persistence.checkpoint import load_state, save_state
from lcpo.envs.chain import ContinuingChainEnv
from lcpo.online.loop import OnlineLoop
from lcpo.memory import ReplayBuffer
from lcpo.numerics.targets import nstep_returns


def _fill(buf: ReplayBuffer, lengths, ends, start_index: int = 0) -> int:
    """Add episodes with obs = [global index, episode, step], next_obs = [.., step + 1] (true last obs kept)."""
    g = start_index
    for ep, (length, end) in enumerate(zip(lengths, ends)):
        for step in range(length):
            last = step == length - 1
            buf.add([g, ep, step], g % 2, float(g) + 0.5, [g + 1, ep, step + 1],
                    terminated=last and end == "terminated", truncated=last and end == "truncated")
            g += 1
    return g


def test_continuing_run_has_constant_memory_and_holds_newest_samples():
    """10^5 steps with one reset and a buffer of 10^4: memory constant, exactly the newest 10^4 samples kept."""
    steps, cap = 100_000, 10_000
    env = ContinuingChainEnv(n_states=5)  # never terminates, never truncates
    buf = ReplayBuffer(cap, obs_shape=(5,), action_shape=(), seed=0)
    arrays_before = {k: id(v) for k, v in buf._data.items()}
    nbytes = buf.nbytes
    rng = np.random.default_rng(1)
    actions = rng.integers(2, size=steps)
    obs, _ = env.reset(seed=0)
    tracemalloc.start()
    mem0 = tracemalloc.get_traced_memory()[0]
    for t in range(steps):
        next_obs, r, term, trunc, _ = env.step(int(actions[t]))
        assert not (term or trunc)
        buf.add(obs, actions[t], r, next_obs, term, trunc)
        obs = next_obs
        if t == cap:  # memory is already at its final size once the ring is full
            mem_full = tracemalloc.get_traced_memory()[0]
    mem_end = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert buf.nbytes == nbytes
    assert {k: id(v) for k, v in buf._data.items()} == arrays_before
    assert mem_end - mem_full < 64 * 1024, (mem0, mem_full, mem_end)
    assert len(buf) == cap and buf.total_added == steps
    idx = buf.stored_indices()
    np.testing.assert_array_equal(idx, np.arange(steps - cap, steps))
    data = buf.get(idx)
    np.testing.assert_array_equal(data["actions"], actions[steps - cap:])
    np.testing.assert_array_equal(data["obs"].argmax(1), idx % 5)
    np.testing.assert_array_equal(data["next_obs"].argmax(1), (idx + 1) % 5)
    spans = buf.episode_spans()  # one endless, open episode
    assert spans["episode"].tolist() == [0] and spans["length"].tolist() == [cap]
    assert spans["start"].tolist() == [steps - cap] and not spans["closed"][0]
    # A window near the newest sample stops there (the episode is still open).
    w = buf.get_windows([steps - 2], n=5)
    assert w["length"].tolist() == [2] and w["mask"][0].tolist() == [True, True, False, False, False]


@pytest.mark.parametrize("ends", [("truncated", "terminated", "truncated"), ("terminated", "truncated", "terminated")])
def test_windows_never_cross_an_episode_end(ends):
    """Episodes of lengths 1, 2 and 5: windows stay in one episode, stop at its end, bootstrap correctly."""
    lengths = (1, 2, 5)
    gamma, n = 0.9, 3
    buf = ReplayBuffer(100, obs_shape=(3,), seed=3)
    total = _fill(buf, lengths, ends)
    w = buf.sample_windows(4000, n)
    assert set(w["indices"].tolist()) == set(range(total))  # every start was drawn
    ep_of = np.repeat(np.arange(3), lengths)
    step_of = np.concatenate([np.arange(k) for k in lengths])

    def value(o):  # an arbitrary state-value function that tells states apart
        return 100.0 * o[..., 1] + 7.0 * o[..., 2] + 1.0

    boot = value(w["next_obs"][np.arange(4000), w["length"] - 1])
    got = nstep_returns(w["rewards"], boot, w["terminated"], w["truncated"], w["mask"], gamma)
    for b in range(4000):
        g0 = int(w["indices"][b])
        ep, step = ep_of[g0], step_of[g0]
        L = min(n, lengths[ep] - step)
        assert w["length"][b] == L
        valid_obs = w["obs"][b, :L]
        assert np.all(valid_obs[:, 1] == ep)  # one episode
        np.testing.assert_array_equal(valid_obs[:, 0], np.arange(g0, g0 + L))
        assert np.all(w["obs"][b, L:] == 0) and not w["mask"][b, L:].any()
        hits_end = step + L == lengths[ep]
        # Reference return from the raw episode, written independently of the buffer.
        ref = sum(gamma**k * (g0 + k + 0.5) for k in range(L))
        if hits_end and ends[ep] == "terminated":
            assert w["terminated"][b, L - 1] and not w["truncated"][b, L - 1]
        else:
            if hits_end:
                assert w["truncated"][b, L - 1]
                # the true last observation of the episode, not the next episode's first one
                np.testing.assert_array_equal(w["next_obs"][b, L - 1], [g0 + L, ep, lengths[ep]])
            ref += gamma**L * (100.0 * ep + 7.0 * (step + L) + 1.0)
        assert got[b] == pytest.approx(ref, rel=1e-12)


def test_eviction_order_removes_exactly_the_oldest_samples():
    """After capacity + k insertions the first k samples are gone, also an episode start whose tail remains."""
    cap, k = 8, 5
    buf = ReplayBuffer(cap, obs_shape=(3,), seed=0)
    total = _fill(buf, (3, 4, 6), ("terminated", "truncated", "terminated"))
    assert total == cap + k
    np.testing.assert_array_equal(buf.stored_indices(), np.arange(k, cap + k))
    np.testing.assert_array_equal(np.sort(buf.get(buf.stored_indices())["obs"][:, 0]), np.arange(k, cap + k))
    for gone in range(k):
        with pytest.raises(IndexError, match=str(gone)):
            buf.get([gone])
    spans = buf.episode_spans()
    # episode 0 (samples 0-2) is gone; episode 1 (3-6) lost its start 3, 4 but keeps 5, 6.
    assert spans["episode"].tolist() == [1, 2]
    assert spans["start"].tolist() == [5, 7] and spans["length"].tolist() == [2, 6]
    assert spans["truncated"].tolist() == [True, False] and spans["terminated"].tolist() == [False, True]
    w = buf.get_windows([5, 6, 7, 11], n=4)
    assert w["length"].tolist() == [2, 1, 4, 2]
    np.testing.assert_array_equal(w["obs"][0, :2, 0], [5, 6])
    np.testing.assert_array_equal(w["next_obs"][0, 1], [7, 1, 4])  # true last obs of the truncated episode
    assert w["truncated"][0].tolist() == [False, True, False, False]
    starts = buf.sample_windows(2000, 3)["indices"]
    assert set(starts.tolist()) == set(range(k, cap + k))


def test_add_batch_matches_single_adds_including_overflow():
    """A batch longer than the capacity keeps its newest samples and counts episodes like single adds."""
    rng = np.random.default_rng(0)
    T, cap = 37, 10
    obs = rng.normal(size=(T, 2)).astype(np.float32)
    nxt = rng.normal(size=(T, 2)).astype(np.float32)
    act = rng.integers(3, size=T)
    rew = rng.normal(size=T)
    term = rng.random(T) < 0.1
    trunc = rng.random(T) < 0.1
    logp = -rng.random(T)
    a = ReplayBuffer(cap, (2,), store_logp=True, seed=5)
    b = ReplayBuffer(cap, (2,), store_logp=True, seed=5)
    for t in range(T):
        a.add(obs[t], act[t], rew[t], nxt[t], term[t], trunc[t], logp=logp[t])
    b.add_batch(obs[:4], act[:4], rew[:4], nxt[:4], term[:4], trunc[:4], logp[:4])
    b.add_batch(obs[4:], act[4:], rew[4:], nxt[4:], term[4:], trunc[4:], logp[4:])
    assert a.current_episode == b.current_episode == int((term | trunc).sum())
    for key in a._data:
        np.testing.assert_array_equal(a._data[key], b._data[key])
    np.testing.assert_array_equal(b.get(b.stored_indices())["logp"], logp[-cap:])


class _RandomReplayAgent:
    """Minimal agent for the online loop: uniform random actions, every transition into a replay buffer."""

    def __init__(self, buffer: ReplayBuffer, seed: int = 0):
        self.buffer, self.rng = buffer, np.random.default_rng(seed)

    def act(self, obs):
        return int(self.rng.integers(2))

    def observe(self, tr):
        self.buffer.add(tr.obs, tr.action, tr.reward, tr.next_obs, tr.terminated, tr.truncated)


def test_online_loop_reset_every_10_stores_real_last_states_and_windows_stop_at_cuts():
    """ResetAfterSteps(10) on a task that never ends: each 10th step is truncated with its real next_obs."""
    n_states = 7  # 10 % 7 = 3: the state reached on the 10th step differs from the reset state 0
    buf = ReplayBuffer(1000, obs_shape=(n_states,), seed=0)
    OnlineLoop(ContinuingChainEnv(n_states=n_states), _RandomReplayAgent(buf), "every:10").run(95)
    data = buf.get(buf.stored_indices())
    assert np.flatnonzero(data["truncated"]).tolist() == list(range(9, 95, 10))
    assert not data["terminated"].any()
    np.testing.assert_array_equal(data["next_obs"][9::10].argmax(1), 3)  # not the reset state
    np.testing.assert_array_equal(data["obs"][10::10].argmax(1), 0)  # the next episode starts from reset
    np.testing.assert_array_equal(data["episode"], np.arange(95) // 10)
    w = buf.get_windows([8, 9, 10, 90], n=4)
    assert w["length"].tolist() == [2, 1, 4, 4]
    assert w["next_obs"][0, 1].argmax() == 3 and w["truncated"][0].tolist() == [False, True, False, False]
    w = buf.get_windows([93], n=4)  # the open last episode: the window stops at the newest sample
    assert w["length"].tolist() == [2] and not w["truncated"].any()


def test_state_dict_resume_is_bit_exact(tmp_path):
    rng = np.random.default_rng(2)
    a = ReplayBuffer(16, (3,), action_shape=(2,), store_logp=True, seed=7)
    for t in range(23):
        a.add(rng.normal(size=3), rng.integers(5, size=2), rng.normal(), rng.normal(size=3),
              t % 7 == 6, t % 5 == 4, logp=-rng.random())
    a.sample(3)
    save_state(tmp_path / "buffer", a.state_dict())  # through the project's checkpoint files
    state = load_state(tmp_path / "buffer")
    b = ReplayBuffer(16, (3,), action_shape=(2,), store_logp=True, seed=999)
    b.load_state_dict(state)
    for _ in range(3):
        wa, wb = a.sample_windows(8, 4), b.sample_windows(8, 4)
        for key in wa:
            np.testing.assert_array_equal(wa[key], wb[key])
        step = (rng.normal(size=3), rng.integers(5, size=2), 1.0, rng.normal(size=3), False, True)
        a.add(*step, logp=-0.5)
        b.add(*step, logp=-0.5)
    assert a.current_episode == b.current_episode and a.total_added == b.total_added
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(17, (3,), action_shape=(2,), store_logp=True).load_state_dict(state)
    with pytest.raises(ValueError, match="store_logp"):
        ReplayBuffer(16, (3,), action_shape=(2,)).load_state_dict(state)


def test_bad_input_raises_clear_errors():
    buf = ReplayBuffer(4, (2,))
    with pytest.raises(ValueError, match="empty"):
        buf.sample(1)
    with pytest.raises(ValueError, match="obs"):
        buf.add([0.0, 1.0, 2.0], 0, 1.0, [0.0, 1.0], False, False)
    with pytest.raises(ValueError, match="non-finite"):
        buf.add([0.0, 1.0], 0, float("nan"), [0.0, 1.0], False, False)
    with pytest.raises(ValueError, match="non-finite"):
        buf.add([0.0, np.inf], 0, 1.0, [0.0, 1.0], False, False)
    with pytest.raises(ValueError, match="store_logp=False"):
        buf.add([0.0, 1.0], 0, 1.0, [0.0, 1.0], False, False, logp=-1.0)
    with pytest.raises(ValueError, match="pass logp"):
        ReplayBuffer(4, (2,), store_logp=True).add([0.0, 1.0], 0, 1.0, [0.0, 1.0], False, False)
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(0, (2,))
    buf.add([0.0, 1.0], 0, 1.0, [0.0, 1.0], False, False)
    with pytest.raises(ValueError, match="n must"):
        buf.sample_windows(2, 0)
    with pytest.raises(ValueError, match="batch_size"):
        buf.sample(0)


def _snapshot(buf: ReplayBuffer) -> dict:
    s = buf.state_dict()
    return {"arrays": {k: v.copy() for k, v in s["arrays"].items()}, "total": s["total_added"],
            "episode": s["current_episode"], "rng": s["rng"]}


def _same_snapshot(a: dict, b: dict) -> None:
    assert a["total"] == b["total"] and a["episode"] == b["episode"] and a["rng"] == b["rng"]
    for k in a["arrays"]:
        np.testing.assert_array_equal(a["arrays"][k], b["arrays"][k])


@pytest.mark.parametrize("bad, match", [
    (dict(terminated=np.array([True, False])), "terminated must be one bool, got array"),
    (dict(action=None), "action None cannot be stored as int64"),
])
def test_a_refused_transition_leaves_a_full_buffer_as_it_was(bad, match):
    """A full buffer (its next write overwrites the oldest sample) refuses a malformed transition in one line
    naming the value, before writing anything (the logp and obs slots were overwritten first)."""
    buf = ReplayBuffer(4, obs_shape=(2,), store_logp=True, seed=0)
    for i in range(6):
        buf.add(np.full(2, i, np.float32), 1, 0.5, np.full(2, i + 1, np.float32), False, False, logp=-0.1 * i)
    before = _snapshot(buf)
    args = dict(obs=np.zeros(2, np.float32), action=0, reward=1.0, next_obs=np.ones(2, np.float32),
                terminated=False, truncated=False, logp=-9.0)
    args.update(bad)
    with pytest.raises(ValueError, match=match) as info:
        buf.add(**args)
    assert "\n" not in str(info.value)
    _same_snapshot(_snapshot(buf), before)
    with pytest.raises(ValueError, match="actions .*cannot be stored as int64"):
        buf.add_batch(np.zeros((1, 2), np.float32), np.array([None]), np.ones(1), np.ones((1, 2), np.float32),
                      np.zeros(1, bool), np.zeros(1, bool), logp=np.zeros(1))
    _same_snapshot(_snapshot(buf), before)


def test_a_state_with_another_generator_is_refused_before_anything_changes():
    buf = ReplayBuffer(4, obs_shape=(2,), seed=0)
    buf.add(np.zeros(2, np.float32), 1, 0.5, np.ones(2, np.float32), False, False)
    other = ReplayBuffer(4, obs_shape=(2,), seed=1)
    for i in range(3):
        other.add(np.full(2, i, np.float32), 0, 1.0, np.full(2, i, np.float32), True, False)
    state = other.state_dict()
    state["rng"] = np.random.MT19937(0).state
    before = _snapshot(buf)
    with pytest.raises(ValueError, match="rng is not a PCG64 state"):
        buf.load_state_dict(state)
    _same_snapshot(_snapshot(buf), before)
