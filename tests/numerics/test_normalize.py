"""The return normaliser: moments, accumulator, and how agents apply it (lcpo.numerics.normalize)."""

import math

import gymnasium as gym
import numpy as np
import pytest

import lcpo.envs  # noqa: F401
from lcpo.agents import A2C, DDQN
from lcpo.online.loop import Transition
from lcpo.numerics.normalize import ReturnNormalizer


def test_merged_moments_equal_the_moments_of_all_values():
    rng = np.random.default_rng(0)
    chunks = [rng.normal(3.0, 2.0, size=n) for n in (7, 200, 1, 55)]
    norm = ReturnNormalizer()
    for c in chunks:
        norm.update(c)
    allv = np.concatenate(chunks)
    # the prior (count 1e-4, mean 0, var 1) weighs 1e-4 / 263 of the result
    assert norm.count == pytest.approx(allv.size + 1e-4)
    assert norm.mean == pytest.approx(allv.mean(), rel=1e-5)
    assert norm.var == pytest.approx(allv.var(), rel=1e-5)
    assert norm.scale == pytest.approx(math.sqrt(allv.var() + 1.0), rel=1e-5)


def test_scale_is_at_least_one_and_one_plus_variance_under_the_root():
    norm = ReturnNormalizer()
    norm.update(np.full(1000, 5.0))  # no spread: the divisor stays ~1, rewards are never blown up
    assert 1.0 <= norm.scale < 1.001
    norm.update(np.array([-100.0, 100.0] * 500))
    assert norm.scale == pytest.approx(math.sqrt(norm.var + 1.0))
    assert norm.scale > 50


def test_accumulator_discounts_and_resets_after_episode_ends():
    norm = ReturnNormalizer()
    r = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    ends = np.array([False, True, False, False, False])
    gammas = np.array([0.5, 0.5, 0.9, 0.1, 0.9])
    g = norm.accumulate(r, ends, gammas)
    # G0 = 1; G1 = 0.5*1 + 2 = 2.5 (end: reset); G2 = 3; G3 = 0.1*3 + 4 = 4.3; G4 = 0.9*4.3 + 5 = 8.87
    np.testing.assert_allclose(g, [1.0, 2.5, 3.0, 4.3, 8.87])
    assert norm.ret == pytest.approx(8.87)  # carried into the next batch
    g2 = norm.accumulate(np.array([1.0]), np.array([False]), np.array([0.5]))
    assert g2[0] == pytest.approx(0.5 * 8.87 + 1.0)


def test_per_step_push_and_flush_equal_the_batch_form():
    rng = np.random.default_rng(1)
    r = rng.normal(size=300)
    ends = rng.random(300) < 0.05
    gam = np.full(300, 0.97)
    a, b = ReturnNormalizer(), ReturnNormalizer()
    a.update(a.accumulate(r, ends, gam))
    for ri, e, gi in zip(r, ends, gam):
        b.push(float(ri), bool(e), float(gi))
    b.flush()
    assert (a.mean, a.count, a.ret) == pytest.approx((b.mean, b.count, b.ret))
    assert a.var == pytest.approx(b.var, rel=1e-9)


def test_state_round_trip_and_bad_input():
    a = ReturnNormalizer()
    a.update(np.arange(10.0))
    a.push(3.0, False, 0.9)
    b = ReturnNormalizer()
    b.load_state_dict(a.state_dict())
    assert b.state_dict() == a.state_dict()
    with pytest.raises(ValueError, match="non-finite"):
        a.update(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="'pending'"):
        b.load_state_dict({"mean": 0.0, "var": 1.0, "count": 1.0, "ret": 0.0})


def _rollout_of(agent, env, rewards, ends):
    obs = np.zeros(env.observation_space.shape, np.float32)
    for r, e in zip(rewards, ends):
        agent.rollout.add(obs, np.zeros(agent.action_dims, np.int64), r, obs, False, e, agent.hp.gamma)


def test_on_policy_update_divides_rewards_by_the_scale_including_this_rollout():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    rewards = np.linspace(-16.0, 0.0, 20)
    ends = np.zeros(20, bool)
    ends[9] = True
    agent = A2C(env, seed=0, rollout_steps=20, gamma=0.9)
    _rollout_of(agent, env, rewards, ends)
    scaled = agent.batch_rewards()
    g = np.zeros(20)
    acc = 0.0
    for t in range(20):  # the accumulator by hand
        acc = 0.9 * acc + rewards[t]
        g[t] = acc
        if ends[t]:
            acc = 0.0
    np.testing.assert_allclose(scaled, rewards / math.sqrt(g.var() + 1.0), rtol=1e-5)
    raw = A2C(env, seed=0, rollout_steps=20, gamma=0.9, normalize_returns=False)
    _rollout_of(raw, env, rewards, ends)
    np.testing.assert_array_equal(raw.batch_rewards(), rewards)


def test_off_policy_minibatch_rewards_are_scaled_and_stored_raw():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    agent = DDQN(env, seed=0, learning_starts=50, train_every=50, batch_size=8, hidden=(8,))
    o = np.zeros(env.observation_space.shape, np.float32)
    a = np.zeros(agent.action_dims, np.int64)
    rewards = -np.arange(50.0)
    for r in rewards:
        agent.observe(Transition(o, a, float(r), o, False, False, None))
    g = np.zeros(50)
    acc = 0.0
    for t in range(50):
        acc = 0.99 * acc + rewards[t]
        g[t] = acc
    assert agent.reward_scale == pytest.approx(math.sqrt(g.var() + 1.0), rel=1e-5)
    batch = agent.get_batch(np.arange(50))
    np.testing.assert_allclose(batch["rewards"].numpy(), rewards / agent.reward_scale, rtol=1e-5)
    np.testing.assert_array_equal(agent.replay.get(np.arange(50))["rewards"], rewards)  # raw in the buffer
    off = DDQN(env, seed=0, learning_starts=50, train_every=50, batch_size=8, hidden=(8,), normalize_returns=False)
    assert off.reward_scale == 1.0
