"""lcpo/WindyPendulum-v0: Gymnasium contract, exact Pendulum-v1 reproduction, wind model, global trace time."""

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import lcpo.envs  # noqa: F401  (registers ids)
from lcpo.contexts import ContextTrace, TraceError
from lcpo.envs import get_context_spec, make_env
from lcpo.envs.windy_pendulum import WindyPendulumEnv


def test_check_env_passes_wrapped_and_unwrapped():
    check_env(WindyPendulumEnv(np.zeros((10, 2))), skip_render_check=True)
    check_env(gym.make("lcpo/WindyPendulum-v0", trace="zero").unwrapped, skip_render_check=True)
    check_env(make_env("lcpo/WindyPendulum-v0", trace="wind-1"), skip_render_check=True)


def test_zero_trace_reproduces_pendulum_v1_exactly():
    env = gym.make("lcpo/WindyPendulum-v0", trace=np.zeros((7, 2)))
    ref = gym.make("Pendulum-v1")
    bins = env.unwrapped  # the Box env; the wrapper maps bins to torques
    table = env.get_wrapper_attr("table")
    rng = np.random.default_rng(0)
    for ep in range(5):
        o1, _ = env.reset(seed=ep)
        o2, _ = ref.reset(seed=ep)
        np.testing.assert_array_equal(o1[:3], o2)
        for t in range(200):
            a = rng.integers(15, size=1)
            o1, r1, te1, tr1, _ = env.step(a)
            o2, r2, te2, tr2, _ = ref.step(table[0, a])
            np.testing.assert_array_equal(o1[:3], o2)
            assert r1 == r2 and te1 == te2 and tr1 == tr2
    assert bins.observation_space.shape == (9,)


def test_wind_torque_direction_and_reward_correction():
    # theta = 0 (upright): u = a + w_x, so a +1 wind with zero torque equals a +1 torque without wind
    windy = WindyPendulumEnv(np.array([[1.0, 0.0]]))
    calm = WindyPendulumEnv(np.zeros((1, 2)))
    for e in (windy, calm):
        e.reset(seed=0)
        e._th, e._thdot = 0.0, 0.0
    o_w, r_w, *_ = windy.step(np.array([0.0], np.float32))
    o_c, r_c, *_ = calm.step(np.array([1.0], np.float32))
    np.testing.assert_allclose(o_w[:3], o_c[:3])
    # the control cost is the agent's own: zero action costs nothing even under wind
    assert r_w == pytest.approx(0.0, abs=1e-12)
    assert r_c == pytest.approx(-0.001, rel=1e-6)
    # theta = pi/2: u = a + w_y sin(theta) = a + w_y
    w = WindyPendulumEnv(np.array([[0.0, -1.5]]))
    w.reset(seed=0)
    w._th, w._thdot = math.pi / 2, 0.0
    w.step(np.array([0.0], np.float32))
    expected_thdot = (15.0 * 1.0 + 3.0 * -1.5) * 0.05
    assert w._thdot == pytest.approx(expected_thdot, rel=1e-6)


def test_trace_index_is_global_time_and_wraps():
    trace = np.stack([np.arange(5.0) / 4, -np.arange(5.0) / 4], axis=1)
    env = WindyPendulumEnv(trace, max_episode_steps=3)
    env.reset(seed=0)
    seen = []
    for _ in range(4):
        for _ in range(3):
            obs, _, _, trunc, info = env.step(np.array([0.0], np.float32))
            seen.append(info["context"][0])
            assert obs[3] == np.float32(info["context"][0]) and obs[6] == np.float32(info["context"][1])
        assert trunc
        env.reset()
    np.testing.assert_allclose(seen, [(i % 5) / 4 for i in range(12)])
    # lags: [w_x(t), w_x(t-1), w_x(t-2)]
    np.testing.assert_allclose(obs[3:6], [seen[-1], seen[-2], seen[-3]], rtol=1e-6)


def test_context_spec_declared():
    env = make_env("lcpo/WindyPendulum-v0", trace="zero")
    spec = get_context_spec(env)
    assert spec.indices == (3, 4, 5, 6, 7, 8) and spec.groups == ((3, 4, 5), (6, 7, 8))
    _, info = env.reset(seed=0)
    assert info["context"].shape == (2,)


def test_wind_beyond_bound_rejected():
    with pytest.raises(TraceError, match=r"exceeds the bound"):
        WindyPendulumEnv(np.array([[0.0, 0.0], [4.5, 0.0]]))
    # a divisor brings it back in range
    WindyPendulumEnv(np.array([[0.0, 0.0], [4.5, 0.0]]), divisor=8)


def test_bad_traces_and_names():
    with pytest.raises(TraceError, match="2 columns"):
        WindyPendulumEnv(np.zeros((5, 3)))
    with pytest.raises(TraceError, match="non-finite"):
        WindyPendulumEnv(np.array([[0.0, np.nan]]))
    with pytest.raises(TraceError, match="unknown trace"):
        make_env("lcpo/WindyPendulum-v0", trace="no-such-trace")
    with pytest.raises(ValueError, match="unknown environment id"):
        make_env("lcpo/WindyPendulm-v0")
    env = WindyPendulumEnv(None)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="finite"):
        env.step(np.array([np.nan], np.float32))


def test_continuing_option_never_truncates():
    env = make_env("lcpo/WindyPendulum-v0", trace="zero", continuing=True)
    env.reset(seed=0)
    for _ in range(1000):
        _, _, term, trunc, _ = env.step(np.array([7]))
        assert not term and not trunc


def test_state_round_trip_gives_identical_futures():
    trace = ContextTrace(np.random.default_rng(0).uniform(-2, 2, (50, 2)), "rand")
    a, b = WindyPendulumEnv(trace), WindyPendulumEnv(trace)
    a.reset(seed=3)
    for _ in range(17):
        a.step(np.array([0.5], np.float32))
    b.reset(seed=99)
    b.set_state(a.get_state())
    for _ in range(300):
        oa, ra, _, ta, _ = a.step(np.array([-1.0], np.float32))
        ob, rb, _, tb, _ = b.step(np.array([-1.0], np.float32))
        np.testing.assert_array_equal(oa, ob)
        assert ra == rb and ta == tb
        if ta:
            np.testing.assert_array_equal(a.reset()[0], b.reset()[0])
