"""Tests of the windy MuJoCo environments (spec windy-gym.md; issue 6)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.mujoco.hopper_v4 import HopperEnv
from gymnasium.envs.mujoco.inverted_double_pendulum_v4 import InvertedDoublePendulumEnv
from gymnasium.envs.mujoco.inverted_pendulum_v4 import InvertedPendulumEnv
from gymnasium.envs.mujoco.reacher_v4 import ReacherEnv
from gymnasium.utils.env_checker import check_env

import lcpo.envs  # noqa: F401  (registers the ids)
from lcpo.contexts.trace import ContextTrace, TraceError
from lcpo.envs.context import get_context_spec
from lcpo.envs.discretize import DiscretizeActions
from lcpo.envs.mujoco import ENV_INFO
from lcpo.envs.mujoco.base import HingeMotor, add_hinge_motors
from lcpo.envs.mujoco.hopper import WindyHopperEnv, hopper_wind_torque, make_windy_hopper
from lcpo.envs.mujoco.inverted_double_pendulum import (WindyInvertedDoublePendulumEnv,
                                                       make_windy_inverted_double_pendulum)
from lcpo.envs.mujoco.inverted_pendulum import WindyInvertedPendulumEnv, make_windy_inverted_pendulum
from lcpo.envs.mujoco.reacher import WindyReacherEnv, make_windy_reacher

# (windy class, plain Gymnasium class, factory)
CASES = {
    "lcpo/WindyInvertedPendulum-v0": (WindyInvertedPendulumEnv, InvertedPendulumEnv, make_windy_inverted_pendulum),
    "lcpo/WindyInvertedDoublePendulum-v0": (WindyInvertedDoublePendulumEnv, InvertedDoublePendulumEnv,
                                            make_windy_inverted_double_pendulum),
    "lcpo/WindyHopper-v0": (WindyHopperEnv, HopperEnv, make_windy_hopper),
    "lcpo/WindyReacher-v0": (WindyReacherEnv, ReacherEnv, make_windy_reacher),
}
IDS = list(CASES)


def varying_trace(n=97, seed=0, scale=0.3):
    """A (n, 2) wind trace with distinct values in every row."""
    return np.random.default_rng(seed).uniform(-scale, scale, size=(n, 2))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


# --------------------------------------------------------------------------------------------- registry, spaces
@pytest.mark.parametrize("env_id", IDS)
def test_make_spaces_and_info_table(env_id):
    info = ENV_INFO[env_id]
    env = gym.make(env_id)
    assert env.observation_space.shape == (info.obs_dim,)
    assert env.observation_space.dtype == np.float32
    assert isinstance(env.action_space, gym.spaces.MultiDiscrete)
    assert env.action_space.nvec.tolist() == [15] * info.action_dims
    assert env.unwrapped.max_episode_steps == info.max_episode_steps
    assert info.obs_dim == (10 if "InvertedPendulum-" in env_id else 17)
    spec = get_context_spec(env)
    base = info.base_obs_dim
    assert spec.indices == tuple(range(base, base + 6))
    assert spec.groups == (tuple(range(base, base + 3)), tuple(range(base + 3, base + 6)))
    assert info.to_dict()["obs_dim"] == info.obs_dim


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("trace", [None, np.array([[0.2, -0.1]])], ids=["zero", "constant"])
def test_check_env(env_id, trace):
    windy_cls, _, factory = CASES[env_id]
    check_env(windy_cls(trace=trace), skip_render_check=True)
    check_env(factory(trace=trace), skip_render_check=True)


# --------------------------------------------------------------------------------- equals the plain task
@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("trace", [None, np.zeros((13, 2))], ids=["none", "zeros"])
def test_zero_wind_equals_plain_task(env_id, trace):
    windy_cls, plain_cls, _ = CASES[env_id]
    windy = windy_cls(trace=trace, max_episode_steps=None)
    plain = plain_cls()
    rng = np.random.default_rng(1)
    space = windy.action_space
    assert space == plain.action_space  # the wind motors are not the agent's
    ow, _ = windy.reset(seed=3)
    op, _ = plain.reset(seed=3)
    base = plain.observation_space.shape[0]
    assert np.array_equal(ow[:base], op.astype(np.float32))
    episodes = 0
    for _ in range(150):
        a = rng.uniform(space.low, space.high).astype(np.float32)
        ow, rw, tw, _, iw = windy.step(a)
        op, rp, tp, _, _ = plain.step(a)
        assert np.array_equal(windy.data.qpos, plain.data.qpos) and np.array_equal(windy.data.qvel, plain.data.qvel)
        assert np.array_equal(ow[:base], op.astype(np.float32))
        assert np.array_equal(ow[base:], np.zeros(6))
        assert rw == rp and tw == tp
        assert np.array_equal(iw["context"], [0.0, 0.0])
        assert np.all(iw["control"][space.shape[0]:] == 0)  # extra motors idle
        if tw:
            episodes += 1
            ow, _ = windy.reset()
            op, _ = plain.reset()
            assert np.array_equal(ow[:base], op.astype(np.float32))
    if env_id != "lcpo/WindyReacher-v0":
        assert episodes >= 1  # the comparison covered a termination and a reset


def test_add_hinge_motors_appends_after_task_actuators():
    xml = '<mujoco><worldbody><body><joint name="h" type="hinge"/><geom size="0.1"/></body></worldbody>' \
          '<actuator><motor name="m0" joint="h" gear="1"/></actuator></mujoco>'
    out = add_hinge_motors(xml, (HingeMotor("w", "h", 100.0, 10.0),))
    import mujoco
    model = mujoco.MjModel.from_xml_string(out)
    assert model.nu == 2 and model.actuator(1).name == "w"
    assert model.actuator_gear[1, 0] == 100.0 and model.actuator_ctrlrange[1].tolist() == [-10.0, 10.0]
    with pytest.raises(ValueError, match="no joint 'nope'"):
        add_hinge_motors(xml, (HingeMotor("w", "nope"),))
    with pytest.raises(ValueError, match="already has an actuator"):
        add_hinge_motors(xml, (HingeMotor("m0", "h"),))


# ----------------------------------------------------------------------------- the wind's effect, per env
def _run_pair(cls, wind, steps, action=None, setup=None):
    """Run the env with no wind and with constant ``wind`` from the same seed; return both final envs."""
    envs = []
    for trace in (None, np.array([wind], dtype=float)):
        env = cls(trace=trace, max_episode_steps=None)
        env.reset(seed=0)
        if setup is not None:
            setup(env)
        a = np.zeros(env.action_space.shape) if action is None else action
        for _ in range(steps):
            env.step(a)
        envs.append(env)
    return envs


def test_inverted_pendulum_wind_control_and_direction():
    env = WindyInvertedPendulumEnv(trace=np.array([[0.1, 0.05]]))
    env.reset(seed=0)
    q = env.data.qpos[1]
    _, _, _, _, info = env.step(np.array([0.5]))
    np.testing.assert_allclose(info["control"], [0.6, 0.1 * np.cos(q) + 0.05 * np.sin(q)], rtol=1e-12)
    # hinge motor torque = gear 100 x control: ~10 N m for w_x = 0.1 near upright
    assert env.data.qfrc_actuator[1] == pytest.approx(100 * info["control"][1], rel=1e-9)
    assert 9.9 < env.data.qfrc_actuator[1] < 10.1
    calm, windy = _run_pair(WindyInvertedPendulumEnv, (0.1, 0.0), 3)
    dq = windy.data.qpos[1] - calm.data.qpos[1]
    assert 0.05 < dq < 0.3  # pole tips towards +x (positive hinge angle), quickly
    assert windy.data.geom("cpole").xpos[0] > calm.data.geom("cpole").xpos[0]
    assert windy.data.qpos[0] < calm.data.qpos[0]  # the cart recoils


def test_inverted_pendulum_episode_lengths_match_spec():
    """Spec: with zero action, mean episode 24.5 steps without wind, 4.0 under a constant 0.1."""
    for trace, lo, hi in ((None, 22.0, 28.0), (np.array([[0.1, 0.1]]), 3.5, 4.5)):
        env = WindyInvertedPendulumEnv(trace=trace)
        env.reset(seed=0)
        lengths = []
        for _ in range(100):
            env.reset()
            n, done = 0, False
            while not done:
                _, _, done, _, _ = env.step(np.zeros(1))
                n += 1
            lengths.append(n)
        assert lo < np.mean(lengths) < hi


def test_inverted_double_pendulum_wind_control_and_direction():
    env = WindyInvertedDoublePendulumEnv(trace=np.array([[0.2, -0.1]]))
    env.reset(seed=0)
    q1, q2 = env.data.qpos[1:3]
    _, _, _, _, info = env.step(np.array([0.3]))
    expected = [0.5, 0.2 * np.cos(q1) - 0.1 * np.sin(q1), 0.2 * np.cos(q1 + q2) - 0.1 * np.sin(q1 + q2)]
    np.testing.assert_allclose(info["control"], expected, rtol=1e-12)
    calm, windy = _run_pair(WindyInvertedDoublePendulumEnv, (0.1, 0.0), 3)
    upper = lambda e: e.data.qpos[1] + e.data.qpos[2]  # noqa: E731
    assert 0.02 < upper(windy) - upper(calm) < 0.5
    assert windy.data.site_xpos[0, 0] > calm.data.site_xpos[0, 0] + 0.01  # the tip moves towards +x


def test_hopper_wind_torque_formula_and_direction():
    # upright pose: a1 = a2 = a3 = 0, a4 = -pi/2 -> only the foot torque changes, by w_x - w_y
    np.testing.assert_allclose(hopper_wind_torque(np.array([0.7, 0.2]), np.zeros(6)), [0, 0, 0.5], atol=1e-12)
    qpos = np.array([0.0, 1.25, 0.1, -0.2, 0.3, 0.4])
    a1 = 0.4
    a2 = a1 - 0.3
    a3 = a2 + 0.2
    a4 = a3 - 0.1 - np.pi / 2
    a = np.array([a1, a2, a3, a4])
    expected = 0.7 * (np.cos(a[:-1]) - np.cos(a[1:])) - 0.2 * (np.sin(a[:-1]) - np.sin(a[1:]))
    np.testing.assert_allclose(hopper_wind_torque(np.array([0.7, 0.2]), qpos), expected, rtol=1e-12)
    env = WindyHopperEnv(trace=np.array([[3.0, 0.0]]))
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.array([0.2, -0.3, 0.5]))
    assert info["control"][2] == 1.0  # clamped to +-1
    calm, windy = _run_pair(WindyHopperEnv, (0.5, 0.0), 2)
    assert windy.data.qvel[5] - calm.data.qvel[5] > 0.5  # positive w_x drives the foot joint positive
    assert abs(windy.data.qvel[3] - calm.data.qvel[3]) < 0.2


def test_reacher_wind_direction():
    env = WindyReacherEnv(trace=np.array([[0.3, -0.2]]))
    env.reset(seed=0)
    q0, q1 = env.data.qpos[:2]
    _, _, _, _, info = env.step(np.array([0.1, -0.1]))
    expected = [0.1 - 0.3 * np.sin(q0) - 0.2 * np.cos(q0), -0.1 - 0.3 * np.sin(q0 + q1) - 0.2 * np.cos(q0 + q1)]
    np.testing.assert_allclose(info["control"], expected, rtol=1e-12)

    def point_up(env):  # arm along +y, at rest: an x wind then swings the fingertip towards +x
        qpos = env.data.qpos.copy()
        qpos[:2] = [np.pi / 2, 0.0]
        env.set_state(qpos, np.zeros(env.model.nv))

    calm, windy = _run_pair(WindyReacherEnv, (1.0, 0.0), 4, setup=point_up)
    tip = lambda e: e.get_body_com("fingertip")  # noqa: E731
    assert 0.1 < tip(windy)[0] - tip(calm)[0] < 0.2  # ~0.16 m after 4 steps (0.04 s)
    calm, windy = _run_pair(WindyReacherEnv, (0.0, -1.0), 4, setup=point_up)
    assert abs(tip(windy)[0] - tip(calm)[0]) < 1e-3  # a y wind along the arm exerts no torque


# --------------------------------------------------------------------------- control cost is the agent's
def test_hopper_control_cost_excludes_wind():
    env = WindyHopperEnv(trace=np.array([[0.8, -0.4]]), max_episode_steps=None)
    env.reset(seed=0)
    for _ in range(5):
        _, reward, _, _, info = env.step(np.zeros(3))
        assert np.any(info["control"] != 0)
        assert reward == info["x_velocity"] + env.healthy_reward  # no control cost for a zero action
    # against the plain task run on the same total control: the difference is exactly the wind's share
    plain = HopperEnv()
    windy = WindyHopperEnv(trace=np.array([[0.8, -0.4]]), max_episode_steps=None)
    plain.reset(seed=1)
    windy.reset(seed=1)
    a = np.array([0.3, -0.2, 0.1])
    _, rw, _, _, info = windy.step(a)
    _, rp, _, _, _ = plain.step(info["control"])
    assert rw - rp == pytest.approx(1e-3 * (np.sum(info["control"] ** 2) - np.sum(a ** 2)), abs=1e-12)


def test_reacher_control_cost_from_torques_not_bins():
    env = WindyReacherEnv(trace=np.array([[1.5, -2.0]]))
    env.reset(seed=0)
    _, reward, _, _, info = env.step(np.zeros(2))
    assert np.any(info["control"] != 0)
    assert info["reward_ctrl"] == 0.0 and reward == info["reward_dist"]
    disc = make_windy_reacher(trace=np.array([[1.5, -2.0]]))
    disc.reset(seed=0)
    _, reward, _, _, info = disc.step(np.array([14, 0]))  # bins 14 and 0 are torques +1 and -1
    assert info["reward_ctrl"] == pytest.approx(-2.0)
    assert reward == pytest.approx(info["reward_dist"] - 2.0)
    assert -3.0 < reward < -2.0  # the distance term is not swamped


def test_pendulums_have_no_control_cost():
    for cls in (WindyInvertedPendulumEnv, WindyInvertedDoublePendulumEnv):
        calm, windy = cls(trace=None), cls(trace=np.array([[0.05, 0.05]]))
        calm.reset(seed=0)
        windy.reset(seed=0)
        _, rc, _, _, _ = calm.step(np.zeros(1))
        _, rw, _, _, _ = windy.step(np.zeros(1))
        if cls is WindyInvertedPendulumEnv:
            assert rc == rw == 1.0
        else:  # reward depends on the state only: recompute it from the windy state
            x, _, y = windy.data.site_xpos[0]
            v1, v2 = windy.data.qvel[1:3]
            assert rw == pytest.approx(10 - 0.01 * x ** 2 - (y - 2) ** 2 - 1e-3 * v1 ** 2 - 5e-3 * v2 ** 2)


# ------------------------------------------------------------------------------------------ wind observation
def test_wind_lags_in_observation_and_global_time():
    trace = np.arange(20, dtype=float).reshape(10, 2) / 10  # rows (0, .1), (.2, .3), ...
    env = make_windy_reacher(trace=trace, time_limit=4)
    obs, info = env.reset(seed=0)
    seen = []
    for t in range(12):
        obs, _, term, trunc, info = env.step(np.array([7, 7]))
        row = t % 10
        assert np.array_equal(info["context"], trace[row])
        seen.append(trace[row])
        last3 = np.array(([seen[0]] * 3 + seen)[-3:][::-1])  # newest first
        np.testing.assert_allclose(obs[11:], np.concatenate([last3[:, 0], last3[:, 1]]), rtol=1e-6)
        if term or trunc:
            obs, info = env.reset()  # the trace keeps running
            assert np.array_equal(info["context"], trace[row])
            np.testing.assert_allclose(obs[11:14], last3[:, 0], rtol=1e-6)


# ---------------------------------------------------------------------------------------------- truncation
@pytest.mark.parametrize("env_id", IDS)
def test_truncation_at_spec_length(env_id):
    windy_cls, _, _ = CASES[env_id]
    limit = ENV_INFO[env_id].max_episode_steps
    env = windy_cls(trace=None)
    assert env.max_episode_steps == limit
    env.reset(seed=0)
    # keep the episode alive: restore the reset state each step, so only the step counter advances
    qpos, qvel = env.data.qpos.copy(), env.data.qvel.copy()
    for t in range(1, limit + 1):
        env.set_state(qpos, qvel)
        _, _, term, trunc, _ = env.step(np.zeros(env.action_space.shape))
        assert not term
        assert trunc == (t == limit)
    env.reset()
    _, _, _, trunc, _ = env.step(np.zeros(env.action_space.shape))
    assert not trunc and env.elapsed_steps == 1


def test_no_truncation_when_continuing():
    env = make_windy_reacher(trace=varying_trace(), time_limit=None)
    env.reset(seed=0)
    for _ in range(300):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        assert not term and not trunc
    with pytest.raises(ValueError, match="max_episode_steps"):
        WindyReacherEnv(max_episode_steps=0)


def test_reacher_truncates_at_50_through_gym_make():
    env = gym.make("lcpo/WindyReacher-v0")
    env.reset(seed=0)
    flags = [env.step(env.action_space.sample())[3] for _ in range(50)]
    assert flags == [False] * 49 + [True]


# ------------------------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("env_id", IDS)
def test_get_set_state_round_trip(env_id):
    _, _, factory = CASES[env_id]
    trace = varying_trace(scale=0.05 if "Pendulum" in env_id else 0.5)

    def rollout(env, actions):
        out = []
        for a in actions:
            obs, r, term, trunc, info = env.step(a)
            out.append((obs, r, term, trunc, info["context"]))
            if term or trunc:
                obs, _ = env.reset()  # unseeded: uses the env's np_random, part of the state
                out.append((obs,))
        return out

    env = factory(trace=trace, time_limit=20)
    env.reset(seed=5)
    rng = np.random.default_rng(0)
    rollout(env, rng.integers(0, 15, size=(13, env.action_space.shape[0])))
    state = env.unwrapped.get_state()
    actions = rng.integers(0, 15, size=(60, env.action_space.shape[0]))
    first = rollout(env, actions)
    env.unwrapped.set_state(state)
    second = rollout(env, actions)
    fresh = factory(trace=trace, time_limit=20)
    fresh.reset(seed=99)
    fresh.unwrapped.set_state(state)
    third = rollout(fresh, actions)
    assert any(len(x) == 1 for x in first)  # the future included a reset
    for a, b, c in zip(first, second, third):
        for x, y, z in zip(a, b, c):
            assert np.array_equal(x, y) and np.array_equal(x, z)


def test_set_state_rejects_wrong_physics_size():
    env = WindyReacherEnv()
    env.reset(seed=0)
    state = env.get_state()
    state["physics"] = state["physics"][:-1]
    with pytest.raises(ValueError, match="physics state"):
        env.set_state(state)


# ------------------------------------------------------------------------------------- bounds, divisors
@pytest.mark.parametrize("env_id", IDS)
def test_wind_beyond_bound_is_rejected(env_id):
    _, _, factory = CASES[env_id]
    with pytest.raises(TraceError, match="exceeds the bound"):
        factory(trace=np.array([[0.0, 0.0], [0.0, -4.5]]))
    factory(trace=np.array([[0.0, 0.0], [0.0, -4.5]]), divisor=8)  # 0.5625 after the divisor: accepted


def test_divisor_table_and_trace_id():
    big = ContextTrace(np.array([[3.2, -1.6]]), "big")
    assert make_windy_inverted_pendulum(trace=big, trace_id=3).unwrapped.wind.values[0, 0] == pytest.approx(0.4)
    assert make_windy_inverted_pendulum(trace=big, trace_id=1).unwrapped.wind.values[0, 0] == pytest.approx(3.2)
    assert make_windy_inverted_double_pendulum(trace=big, trace_id=2).unwrapped.wind.values[0, 1] == \
        pytest.approx(-0.2)
    assert make_windy_hopper(trace=big, trace_id=3).unwrapped.wind.values[0, 0] == pytest.approx(0.4)
    assert make_windy_reacher(trace=big, trace_id=2).unwrapped.wind.values[0, 0] == pytest.approx(0.4)
    assert make_windy_reacher(trace=big).unwrapped.wind.values[0, 0] == pytest.approx(3.2)  # no id: 1
    assert make_windy_reacher(trace=big, trace_id=2, divisor=2).unwrapped.wind.values[0, 0] == pytest.approx(1.6)
    for env_id, (_, _, factory) in CASES.items():
        divs = [factory(trace=big, trace_id=k).unwrapped.wind.values[0, 0] for k in (1, 2, 3, 4)]
        np.testing.assert_allclose(divs, 3.2 / np.array(ENV_INFO[env_id].divisors))
    with pytest.raises(ValueError, match="trace_id"):
        make_windy_hopper(trace=big, trace_id=5)
    with pytest.raises(ValueError, match="contradicts"):
        make_windy_hopper(trace="wind-2", trace_id=3)
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="divisor"):
            make_windy_hopper(trace=big, divisor=bad)


def test_bad_actions_are_rejected():
    env = WindyHopperEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(2))
    with pytest.raises(ValueError, match="non-finite"):
        env.step(np.array([0.0, np.nan, 0.0]))
    disc = make_windy_hopper()
    disc.reset(seed=0)
    with pytest.raises(ValueError, match="out of range"):
        disc.step(np.array([0, 15, 0]))


def test_discretized_actions_use_per_dimension_bins():
    env = make_windy_inverted_pendulum()
    assert isinstance(env, DiscretizeActions)
    np.testing.assert_allclose(env.table[0], np.linspace(-3, 3, 15))
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.array([14]))
    assert info["control"][0] == pytest.approx(3.0)


def test_trace_id_alone_selects_the_canonical_trace_and_divisor():
    env = make_windy_hopper(trace_id=3)
    wind = env.unwrapped.wind
    assert wind.trace.name == "wind-3/8"
    assert np.abs(wind.values).max() <= 4.0 / 8
    assert make_windy_reacher(trace="wind-2").unwrapped.wind.trace.name == "wind-2/8"  # id inferred from the name
    from lcpo.contexts import resolve_trace

    resolved = resolve_trace("wind-3", length=1000)  # what `lcpo run --trace wind-3` passes
    assert make_windy_inverted_pendulum(trace=resolved).unwrapped.wind.trace.name == "wind-3/8"
    with pytest.raises(ValueError, match="contradicts"):
        make_windy_inverted_pendulum(trace=resolved, trace_id=1)
