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


class InPlaceEnv(gym.Env):
    """A user env that returns one observation array, mutated in place by every reset and step (issue 24
    item 4): ``obs[0]`` is the step within the episode, so every transition has ``next_obs[0] = obs[0] + 1``."""

    metadata = {"continuing": False}

    def __init__(self):
        self.observation_space = gym.spaces.Box(-1e3, 1e3, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.buf = np.zeros(3, np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.buf[:] = 0.0
        return self.buf, {}

    def step(self, a):
        self.buf[0] += 1.0
        self.buf[1] = float(a)
        return self.buf, 1.0, False, bool(self.buf[0] >= 30), {}


def test_observations_of_an_in_place_env_are_copied_at_the_boundary():
    env = InPlaceEnv()
    agent = Recorder(1)
    OnlineLoop(env, agent, seed=0).run(70)
    trs = agent.transitions
    assert [tr.next_obs[0] - tr.obs[0] for tr in trs] == [1.0] * 70
    # no transition holds the env's buffer, nor shares one array with another
    assert all(tr.obs is not env.buf and tr.next_obs is not env.buf for tr in trs)
    assert all(trs[i].next_obs is not trs[i + 1].next_obs for i in range(69))


@pytest.mark.parametrize("name", ["a2c", "ppo", "trpo", "ddqn", "sac"])
def test_agents_store_distinct_observations_from_an_in_place_env(name):
    """On-policy (rollout batch) and replay agents store obs_t and next_obs_t as they were, not both as the
    env's buffer at the time of storing."""
    from lcpo.agents import AGENTS

    env = InPlaceEnv()
    agent = AGENTS[name](env, seed=0)
    agent.learn(150)
    if hasattr(agent, "rollout"):
        n = agent.rollout.ptr
        obs, nxt = agent.rollout.obs[:n], agent.rollout.next_obs[:n]
    else:
        got = agent.replay.get(np.arange(agent.replay.total_added))
        obs, nxt = got["obs"], got["next_obs"]
    assert len(obs) > 100
    np.testing.assert_array_equal(nxt[:, 0] - obs[:, 0], 1.0)


class _LateContext(gym.Env):
    """Reports info["context"] only from step 30 on; episodes of 10 steps."""

    observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.t, self.k = 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.k = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        self.k += 1
        info = {"context": np.array([0.5])} if self.t > 30 else {}
        return np.zeros(1, np.float32), 1.0, False, self.k >= 10, info


def test_episodes_without_a_context_get_nan_means_beside_those_with_one(tmp_path):
    from lcpo.persistence.runlog import RunLog

    loop = OnlineLoop(_LateContext(), Recorder(0))
    loop.run(60)
    rows = np.asarray(loop.episodes)
    assert rows.shape == (6, 5) and np.isnan(rows[:3, 4]).all() and (rows[3:, 4] == 0.5).all()
    log = RunLog(tmp_path, ("wind",))
    log.write(loop.episodes)
    assert (tmp_path / "episodes.csv").read_text().splitlines()[1] == "0,10,10.0,10,nan"
