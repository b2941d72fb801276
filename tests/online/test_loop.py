"""The online loop: transitions, reset conditions (issue 3 item 1), bad input."""

import gymnasium as gym
import numpy as np
import pytest

import lcpo.envs  # noqa: F401
from lcpo.online.loop import NeverReset, OnlineLoop, ResetAfterSteps, parse_reset


class Recorder:
    """Agent stub that records transitions and acts with a constant action."""

    def __init__(self, action):
        self.action, self.transitions = action, []

    def act(self, obs):
        return self.action

    def observe(self, tr):
        self.transitions.append(tr)


def _chain(**kw):
    return gym.make("lcpo/ContinuingChain-v0", **kw)


def test_reset_after_n_marks_truncated_and_keeps_real_next_obs():
    env = _chain(n_states=7)
    agent = Recorder(0)
    loop = OnlineLoop(env, agent, ResetAfterSteps(10), seed=0)
    loop.run(35)
    trs = agent.transitions
    for i, tr in enumerate(trs):
        assert tr.truncated == ((i + 1) % 10 == 0)
        assert not tr.terminated
        # the chain is a deterministic cycle: next state = state + 1 (mod 7), also on the 10th step
        assert int(np.argmax(tr.next_obs)) == (int(np.argmax(tr.obs)) + 1) % 7
    # the step after a truncation starts from the reset state, not from the last next_obs
    assert [len(e) for e in [loop.episodes]] == [3] and all(r[3] == 10 for r in loop.episodes)


def test_callable_condition_sees_real_transition_and_causes_truncation():
    seen = []

    def cond(agent, tr, env):
        seen.append(tr)
        return int(np.argmax(tr.next_obs)) == 3

    agent = Recorder(0)
    OnlineLoop(_chain(n_states=5), agent, cond, seed=0).run(20)
    assert all(not t.truncated for t in seen)  # the condition sees the environment's flags
    cut = [t for t in agent.transitions if t.truncated]
    assert cut and all(int(np.argmax(t.next_obs)) == 3 for t in cut)


def test_never_reset_runs_one_stream_and_records_segments():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")  # has a 200-step time limit
    agent = Recorder(np.array([7]))
    loop = OnlineLoop(env, agent, "never", seed=0, segment_steps=100)
    loop.run(1000)
    assert not any(t.truncated or t.terminated for t in agent.transitions)
    # one stream: each next_obs is the following step's obs
    for a, b in zip(agent.transitions, agent.transitions[1:]):
        np.testing.assert_array_equal(a.next_obs, b.obs)
    assert len(loop.episodes) == 10 and all(r[3] == 100 for r in loop.episodes)


def test_parse_reset():
    assert isinstance(parse_reset("every:5"), ResetAfterSteps) and parse_reset("every:5").n == 5
    assert isinstance(parse_reset("never"), NeverReset)
    for bad in ("every:x", "sometimes", "every:0"):
        with pytest.raises(ValueError, match="reset"):
            parse_reset(bad)


class BadEnv(gym.Env):
    """Emits a NaN observation or reward at step 3."""

    def __init__(self, what):
        self.what = what
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, a):
        self.t += 1
        obs = np.zeros(2, np.float32)
        r = 0.0
        if self.t == 3:
            if self.what == "obs":
                obs[1] = np.inf
            else:
                r = float("nan")
        return obs, r, False, False, {}


@pytest.mark.parametrize("what, match", [("obs", "non-finite observation"), ("reward", "non-finite reward")])
def test_non_finite_observation_or_reward_raises(what, match):
    with pytest.raises(ValueError, match=match):
        OnlineLoop(BadEnv(what), Recorder(0)).run(10)


@pytest.mark.parametrize("what, match", [("obs", "non-finite next_obs"), ("reward", "non-finite reward")])
def test_validating_agent_rejects_bad_input_inside_the_loop(what, match):
    """An agent that validates transitions itself (the loop then skips its own check) still raises."""
    from lcpo.agents import A2C

    env = BadEnv(what)
    agent = A2C(env, seed=0)
    assert agent.validates_transitions
    with pytest.raises(ValueError, match=match):
        OnlineLoop(env, agent).run(10)
