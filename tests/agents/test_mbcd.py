"""MBCD: CUSUM detection delay and false-alarm behaviour against Siegmund's approximations, task creation on an
abrupt dynamics change and return to a known task, the cap on models, persistence and resume equality."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from cl_checks import check_resume_equality, check_save_load_actions

import lcpo.envs  # noqa: F401
from lcpo.agents import AGENTS
from lcpo.agents.mbcd import MBCD
from lcpo.agents.models import CUSUM, cusum_run_length


@pytest.fixture(autouse=True)
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


SMALL = {"hidden": [16, 16], "train_every": 1, "batch_size": 32, "buffer_size": 4000, "learning_starts": 100,
         "model_train_every": 200, "model_train_steps": 50, "model_batch_size": 64, "model_hidden": [32],
         "model_members": 3, "calibration_steps": 50}


class SwitchingLinear(gym.Env):
    """2-D linear dynamics ``s' = M_c s + 0.3 u(a) + 0.01 noise`` whose matrix ``M_c`` switches at fixed steps
    (``schedule``: list of (first step, context)); reward ``-|s|^2``; never terminates."""

    MATS = (np.array([[0.9, 0.2], [-0.2, 0.9]]), np.array([[0.5, -0.6], [0.6, 0.5]]))

    def __init__(self, schedule):
        self.schedule = schedule
        self.observation_space = gym.spaces.Box(-10, 10, (2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self.t = 0
        self.s = np.zeros(2)

    def context(self):
        return [c for start, c in self.schedule if start <= self.t][-1]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.s = self.np_random.normal(size=2)
        return self.s.astype(np.float32), {}

    def step(self, action):
        u = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])[int(action)]
        self.s = np.clip(self.MATS[self.context()] @ self.s + 0.3 * u + 0.01 * self.np_random.normal(size=2), -5, 5)
        self.t += 1
        return self.s.astype(np.float32), -float(self.s @ self.s), False, False, {}


def test_registry_lists_mbcd():
    assert AGENTS["mbcd"] is MBCD


def test_cusum_detects_a_known_shift_within_the_expected_delay():
    """k = 0.5, h = 15, shift 2 sd: Siegmund's mean delay is 10.6 samples; the empirical mean over 2000 shifts
    matches it within 10% and the longest delay stays below 3x."""
    k, h, delta = 0.5, 15.0, 2.0
    expected = cusum_run_length(k, h, delta)
    assert expected == pytest.approx(10.56, abs=0.05)
    rng = np.random.default_rng(0)
    delays = []
    for _ in range(2000):
        c = CUSUM(k, h)
        for z in rng.normal(size=500):  # in control first: no alarm expected
            assert not c.update(z)
        n = 1
        while not c.update(rng.normal() + delta):
            n += 1
        delays.append(n)
    assert np.mean(delays) == pytest.approx(expected, rel=0.1)
    assert max(delays) < 3 * expected


def test_cusum_silent_on_stationary_noise():
    """In control, Siegmund's mean run length to a false alarm is about 2e7 samples: none in 10^5."""
    assert cusum_run_length(0.5, 15.0) > 1e7
    c = CUSUM(0.5, 15.0)
    alarms = sum(c.update(z) for z in np.random.default_rng(0).normal(size=100_000))
    assert alarms == 0
    with pytest.raises(ValueError, match="finite"):
        c.update(float("nan"))
    with pytest.raises(ValueError, match="threshold h"):
        CUSUM(0.5, 0.0)


@pytest.mark.slow
def test_new_task_on_a_dynamics_change_and_return_to_the_known_one():
    """Dynamics 0 until step 1500, 1 until 3000, 0 again: one alarm right after each change (within 50 steps),
    a second task at the first, the first task again (recognised by its model) at the second."""
    env = SwitchingLinear([(0, 0), (1500, 1), (3000, 0)])
    agent = MBCD(env, seed=0, **SMALL)
    alarms, on_alarm = [], agent._on_alarm

    def record():
        on_alarm()
        alarms.append((env.t, agent.active))

    agent._on_alarm = record
    agent.learn(4500, reset_condition="never")
    assert len(alarms) == 2
    (t1, task1), (t2, task2) = alarms
    assert 1500 < t1 <= 1550 and task1 == 1
    assert 3000 < t2 <= 3050 and task2 == 0
    assert len(agent.tasks) == 2 and agent.active == 0 and agent.switches == 2


def test_model_cap():
    env = SwitchingLinear([(0, 0)])
    agent = MBCD(env, seed=0, **{**SMALL, "max_models": 2})
    agent.learn(400, reset_condition="never")
    for _ in range(3):  # forced alarms: a new task, then (capped) the best-scoring existing one
        agent._on_alarm()
    assert len(agent.tasks) == 2


def test_save_load_identical_actions(tmp_path):
    agent, twin = check_save_load_actions(tmp_path, MBCD, SMALL)
    assert twin.active == agent.active and len(twin.tasks) == len(agent.tasks)
    assert all(m.fits == n.fits for m, n in zip(agent.models, twin.models))
    np.testing.assert_array_equal(agent.calib, twin.calib)


def test_interrupted_and_resumed_run_equals_uninterrupted(tmp_path):
    check_resume_equality(tmp_path, "mbcd", {**SMALL, "train_every": 2})


def test_bad_hyperparameters_are_named():
    with pytest.raises(ValueError, match="max_models"):
        MBCD(SwitchingLinear([(0, 0)]), max_models=0)
    with pytest.raises(ValueError, match="threshold h"):
        MBCD(SwitchingLinear([(0, 0)]), cusum_h=-1.0)
