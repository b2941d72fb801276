"""Declared termination rules (``termination_fn(obs)``) of the windy MuJoCo environments: boundaries (just inside
and just outside each limit, negative values, NaN), agreement with the Gymnasium tasks' own rules, and the
environments' own steps using the rule."""

import math

import mujoco
import numpy as np
import pytest
from gymnasium.envs.mujoco.hopper_v4 import HopperEnv
from gymnasium.envs.mujoco.inverted_double_pendulum_v4 import InvertedDoublePendulumEnv

from lcpo.envs.mujoco.hopper import WindyHopperEnv
from lcpo.envs.mujoco.inverted_double_pendulum import LINK_LENGTH, WindyInvertedDoublePendulumEnv
from lcpo.envs.mujoco.inverted_pendulum import WindyInvertedPendulumEnv
from lcpo.envs.mujoco.reacher import WindyReacherEnv
from lcpo.envs.termination import get_termination_fn, never_terminates

EPS = 1e-4
NAN = math.nan


# ------------------------------------------------------------------------------------------------- Hopper
def _hopper_obs(**entries):
    """A healthy standing Hopper observation (17 entries, float32 as a model predicts it), with overrides."""
    obs = np.zeros(17, np.float32)
    obs[0] = 1.25  # torso height z
    for i, v in entries.items():
        obs[int(i[1:])] = v
    return obs


HOPPER_CASES = [
    ({}, False),
    ({"i0": 0.7 + EPS}, False), ({"i0": 0.7}, True), ({"i0": 0.6}, True), ({"i0": -1.0}, True),  # height
    ({"i0": 50.0}, False),  # no upper height limit
    ({"i1": 0.2 - EPS}, False), ({"i1": 0.2}, True), ({"i1": 0.25}, True),  # torso angle
    ({"i1": -0.2 + EPS}, False), ({"i1": -0.2}, True), ({"i1": -0.25}, True),
    ({"i3": 99.99}, False), ({"i3": 100.0}, True), ({"i3": -99.99}, False), ({"i3": -100.0}, True),  # joint angle
    ({"i8": -150.0}, True), ({"i8": 150.0}, True), ({"i10": -99.99}, False), ({"i10": -100.0}, True),  # velocity
    ({"i0": NAN}, True), ({"i1": NAN}, True), ({"i7": NAN}, True), ({"i10": math.inf}, True),
    ({"i11": 1e6, "i16": NAN}, False),  # wind lags are not read
]


@pytest.fixture(scope="module")
def hopper():
    return WindyHopperEnv()


@pytest.mark.parametrize("entries,terminal", HOPPER_CASES, ids=[str(c[0]) for c in HOPPER_CASES])
def test_hopper_boundaries(hopper, entries, terminal):
    obs = _hopper_obs(**entries)
    assert bool(hopper.termination_fn(obs)) is terminal
    batch = np.stack([_hopper_obs(), obs, obs.astype(np.float64)])
    np.testing.assert_array_equal(hopper.termination_fn(batch), [False, terminal, terminal])


def test_hopper_rule_equals_gymnasium_is_healthy_on_raw_states():
    plain = HopperEnv()
    plain.reset(seed=0)
    rng = np.random.default_rng(0)
    rule = WindyHopperEnv().termination_fn
    seen = set()
    for _ in range(400):
        qpos = np.r_[rng.uniform(-1, 1), rng.uniform(0.5, 0.9), rng.uniform(-0.3, 0.3), rng.uniform(-1, 1, 3)]
        qvel = rng.uniform(-130, 130, 6) * (rng.random(6) < 0.1)
        plain.set_state(qpos, qvel)
        healthy = plain.is_healthy
        seen.add(healthy)
        assert bool(rule(np.r_[qpos[1:], qvel])) is (not healthy)
    assert seen == {True, False}


def test_hopper_without_termination_never_terminates():
    env = WindyHopperEnv(terminate_when_unhealthy=False)
    assert not env.termination_fn(np.stack([_hopper_obs(i0=0.1), _hopper_obs(i8=-150.0)])).any()


# --------------------------------------------------------------------------------------- InvertedPendulum
def _ip_obs(**entries):
    obs = np.zeros(10, np.float32)
    for i, v in entries.items():
        obs[int(i[1:])] = v
    return obs


IP_CASES = [
    ({}, False), ({"i1": 0.2}, False), ({"i1": 0.2 + EPS}, True), ({"i1": 0.25}, True),
    ({"i1": -0.2}, False), ({"i1": -0.2 - EPS}, True), ({"i1": -0.25}, True),
    ({"i0": -150.0, "i2": 50.0, "i3": -50.0}, False),  # cart position and velocities have no limit
    ({"i0": NAN}, True), ({"i1": NAN}, True), ({"i3": math.inf}, True), ({"i2": -math.inf}, True),
    ({"i4": NAN, "i9": 1e9}, False),  # wind lags are not read
]


@pytest.mark.parametrize("entries,terminal", IP_CASES, ids=[str(c[0]) for c in IP_CASES])
def test_inverted_pendulum_boundaries(entries, terminal):
    obs = _ip_obs(**entries)
    assert bool(WindyInvertedPendulumEnv.termination_fn(obs)) is terminal
    np.testing.assert_array_equal(WindyInvertedPendulumEnv.termination_fn(np.stack([_ip_obs(), obs])),
                                  [False, terminal])


# -------------------------------------------------------------------------------- InvertedDoublePendulum
def _idp_obs(q1, q2, **entries):
    obs = np.zeros(17)
    obs[1:5] = np.sin(q1), np.sin(q2), np.cos(q1), np.cos(q2)
    for i, v in entries.items():
        obs[int(i[1:])] = v
    return obs


def test_tip_height_equals_mujoco_kinematics():
    env = InvertedDoublePendulumEnv()
    data = mujoco.MjData(env.model)
    rng = np.random.default_rng(0)
    for _ in range(200):
        data.qpos[:] = rng.uniform(-np.pi, np.pi, 3)
        mujoco.mj_kinematics(env.model, data)
        obs = np.r_[data.qpos[:1], np.sin(data.qpos[1:]), np.cos(data.qpos[1:]), np.zeros(12)]
        assert WindyInvertedDoublePendulumEnv.tip_height(obs) == pytest.approx(data.site_xpos[0, 2], abs=1e-12)
    assert LINK_LENGTH == env.model.site_pos[0, 2]


def _c2_for_height(y):
    # q1 = 0: y = l (1 + cos q2)
    return y / LINK_LENGTH - 1.0


IDP_CASES = [
    (dict(q1=0.0, q2=0.0), False),  # upright, y = 1.2
    (dict(q1=0.0, q2=math.acos(_c2_for_height(1.0 + 1e-6))), False),
    (dict(q1=0.0, q2=math.acos(_c2_for_height(1.0 - 1e-6))), True),
    (dict(q1=0.0, q2=-math.acos(_c2_for_height(1.0 - 1e-6))), True),  # negative angles
    (dict(q1=-0.3, q2=0.1), False), (dict(q1=-1.2, q2=-0.5), True),
    (dict(q1=math.pi, q2=0.0), True),  # hanging down: y = -1.2
    (dict(q1=0.0, q2=0.0, i0=-150.0, i5=-150.0, i10=150.0), False),  # cart position and velocities: no limit
    (dict(q1=0.0, q2=0.0, i1=NAN), True), (dict(q1=0.0, q2=0.0, i4=NAN), True),
    (dict(q1=0.0, q2=0.0, i11=NAN), False),  # wind lags are not read
]


@pytest.mark.parametrize("case,terminal", IDP_CASES, ids=[str(c[0]) for c in IDP_CASES])
def test_inverted_double_pendulum_boundaries(case, terminal):
    obs = _idp_obs(**case)
    assert bool(WindyInvertedDoublePendulumEnv.termination_fn(obs)) is terminal
    batch = np.stack([_idp_obs(0.0, 0.0), obs])
    np.testing.assert_array_equal(WindyInvertedDoublePendulumEnv.termination_fn(batch), [False, terminal])


# ------------------------------------------------------------------------------ the real step uses the rule
@pytest.mark.parametrize("cls", [WindyHopperEnv, WindyInvertedPendulumEnv, WindyInvertedDoublePendulumEnv,
                                 WindyReacherEnv])
def test_step_terminates_exactly_by_the_declared_rule(cls):
    env = cls(trace=np.array([[0.3, -0.2], [-0.1, 0.4], [0.0, 0.0]]), max_episode_steps=None)
    assert get_termination_fn(env) == env.termination_fn
    rng = np.random.default_rng(0)
    env.reset(seed=1)
    terms = 0
    for _ in range(300):
        obs, _, terminated, _, _ = env.step(rng.uniform(env.action_space.low, env.action_space.high))
        assert terminated is bool(env.termination_fn(env.termination_input(env.unwrapped._get_obs()))
                                  if cls is not WindyHopperEnv
                                  else env.termination_fn(np.r_[env.data.qpos[1:], env.data.qvel]))
        if cls is not WindyHopperEnv:  # the returned (float32) observation gives the same answer
            assert bool(env.termination_fn(obs)) is terminated
        if terminated:
            terms += 1
            env.reset()
    assert (terms > 0) is (cls is not WindyReacherEnv)


def test_never_terminates():
    assert never_terminates(np.full((4, 3), NAN)).tolist() == [False] * 4
    assert never_terminates(np.zeros(3)).shape == ()
