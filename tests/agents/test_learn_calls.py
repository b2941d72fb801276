"""`Agent.learn` called again continues the same stream: a new callback is honoured, a new reset condition
changes the running loop (step count, episode rows and environment state carry on)."""

import gymnasium as gym
import pytest

import lcpo.envs  # noqa: F401 - registers the lcpo/* environments
from lcpo.agents import AGENTS
from lcpo.contexts import resolve_trace


def _agent(name="a2c"):
    env = gym.make("lcpo/WindyPendulum-v0", trace=resolve_trace("wind-3", length=3000))
    return AGENTS[name](env, seed=2, rollout_steps=100, hidden=(16, 16))


def test_second_call_uses_its_own_callback():
    agent = _agent()
    first, second = [], []
    agent.learn(300, callback=lambda step, diag: first.append(step))
    agent.learn(300, callback=lambda step, diag: second.append(step))
    assert first == [100, 200, 300] and second == [400, 500, 600]
    agent.learn(100)  # no callback for this call
    assert second == [400, 500, 600] and agent.updates == 7


def test_second_call_with_a_reset_condition_keeps_rows_steps_and_environment():
    agent, ref = _agent(), _agent()
    agent.learn(450)
    ref.learn(450)
    rows_before = list(agent.episodes)
    assert [r[1] for r in rows_before] == [200, 400]
    agent.learn(300, reset_condition="every:50")
    rows = agent.episodes
    assert rows[:2] == rows_before  # kept, not restarted
    assert agent._loop.steps == 750 and agent.steps == 750
    # the open episode (started at 400) is cut by the new condition 50 steps after the switch, then every 50
    assert [r[1] for r in rows[2:]] == list(range(500, 751, 50))
    assert [r[3] for r in rows[2:]] == [100, 50, 50, 50, 50, 50]
    assert [r[0] for r in rows] == list(range(len(rows)))
    # the environment went on from where it was (global trace time 750), not reseeded to trace row 0
    ref.learn(300)  # the same stream without the switch
    assert ref.episodes[:2] == rows_before
    wind = agent.env.unwrapped.get_state()["wind"]["index"]
    assert wind == ref.env.unwrapped.get_state()["wind"]["index"] and wind >= 750
    # switching back to the default keeps going too
    agent.learn(200, reset_condition="end")
    assert agent._loop.steps == 950 and agent.episodes[: len(rows)] == rows


def test_negative_steps_are_refused():
    with pytest.raises(ValueError, match="total_steps must be a non-negative integer, got -5"):
        _agent().learn(-5)


@pytest.mark.parametrize("name", ["a2c", "lcpo", "prescient-a2c"])
def test_an_agent_dropped_after_learn_is_freed_without_a_garbage_collection(name):
    """Between calls the loop holds neither the agent nor the call's callback, so an agent and its loop's episode
    rows go as soon as the caller drops them (a prescient agent's offline-training loop kept a study worker's
    rows until the next full collection)."""
    import gc
    import weakref

    gc.collect()
    gc.disable()
    try:
        agent = _agent(name) if name != "prescient-a2c" else AGENTS[name](
            gym.make("lcpo/WindyPendulum-v0", trace=resolve_trace("wind-3", length=3000)), seed=2,
            rollout_steps=100, hidden=(16, 16), train_steps=300, train_episode_steps=100)
        seen = []
        agent.learn(250, callback=lambda step, diag: seen.append(agent.steps))  # the callback closes over it
        if name == "prescient-a2c":
            assert agent.trained and len(agent.base.episodes) == 3  # its offline training's own loop
        loop = weakref.ref(agent._loop)
        assert loop().agent is None and loop().on_update is None
        ref = weakref.ref(agent)
        del agent
        assert ref() is None and loop() is None
    finally:
        gc.enable()


def test_a_refused_reset_condition_leaves_no_callback_on_the_loop():
    import gc
    import weakref

    gc.collect()
    gc.disable()
    try:
        agent = _agent()
        agent.learn(100)
        with pytest.raises(ValueError):
            agent.learn(100, reset_condition="bogus", callback=lambda step, diag: agent.steps)
        assert agent._loop.on_update is None and agent._loop.agent is None
        ref = weakref.ref(agent)
        del agent
        assert ref() is None
    finally:
        gc.enable()


@pytest.mark.parametrize("where", ["callback", "reset_condition"])
def test_learn_inside_its_own_learn_is_refused_and_the_outer_call_goes_on(where):
    """A `learn` from inside the running one (its callback or its reset condition) is refused with one line, and
    the outer call keeps its callback, its step count and its stream: the same as a run that never tried."""
    agent, ref = _agent(), _agent()
    errors, seen = [], []

    def inner():
        try:
            agent.learn(50)
        except RuntimeError as e:
            errors.append(str(e))

    def callback(step, diag):
        seen.append(step)
        if step == 100:
            inner()

    def reset(a, transition, env):
        if a.steps == 150 and not errors:
            inner()
        return transition.terminated or transition.truncated

    if where == "callback":
        agent.learn(300, callback=callback)
        ref.learn(300)
    else:
        agent.learn(300, reset_condition=reset, callback=callback)
        ref.learn(300, reset_condition=lambda a, t, e: t.terminated or t.truncated)
    assert len(errors) == 1 and "\n" not in errors[0]
    assert errors[0].startswith("learn(50) called while this agent's learn is running (at step")
    assert seen == [100, 200, 300] and agent.steps == 300 and agent.updates == 3
    assert list(agent.episodes) == list(ref.episodes)
    assert agent._loop.agent is None and agent._loop.on_update is None
    agent.learn(100)  # and it goes on afterwards
    assert agent.steps == 400
