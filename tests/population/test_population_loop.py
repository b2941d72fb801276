"""The population's online loop at the vector-env level: each seed's transitions are exactly those of the solo
OnlineLoop, whatever ends its episodes (issue 26 items 2 and 5): an episode ending exactly at a reset-condition
boundary, terminated and truncated on the same step, the true final observation, a continuing seed carrying on
past its environment's time limit, a forced reset marked truncated."""

import numpy as np
import pytest

from lcpo.envs.registration import make_env
from lcpo.envs.vector import VectorStream, make_vector_env
from lcpo.online.loop import OnlineLoop
from lcpo.online.population import PopulationLoop

ENV = "population_toys:EdgeEnv"

# per seed: environment arguments and reset condition
CASES = {
    "ends at the every:5 boundary": ({"terminate_at": 5}, "every:5"),
    "terminated and truncated together": ({"terminate_at": 4, "time_limit": 4}, "end"),
    "never: carries on past the time limit": ({"time_limit": 6}, "never"),
    "forced every:3": ({}, "every:3"),
    "time limit": ({"time_limit": 7}, "end"),
}


class Recorder:
    def __init__(self):
        self.transitions = []

    def act(self, obs):
        return 1

    def observe(self, tr):
        self.transitions.append(tr)


class PopRecorder:
    def __init__(self, n):
        self.transitions = [[] for _ in range(n)]

    def act_batch(self, obs):
        return np.ones(obs.shape[0], dtype=np.int64)

    def observe_batch(self, obs, actions, rewards, next_obs, terminated, truncated, infos):
        for k in range(obs.shape[0]):
            self.transitions[k].append((obs[k].copy(), int(actions[k]), float(rewards[k]), next_obs[k].copy(),
                                        bool(terminated[k]), bool(truncated[k])))
        return [None] * obs.shape[0]


def _run_population(steps, seeds=(3, 5, 7, 9, 11), segment_steps=10):
    kwargs, resets = zip(*CASES.values())
    stream = VectorStream(make_vector_env(ENV, [dict(k) for k in kwargs]))
    agents = PopRecorder(len(seeds))
    loop = PopulationLoop(stream, agents, list(resets), list(seeds), segment_steps=segment_steps)
    loop.run(steps)
    return loop, agents


def _run_solo(kwargs, reset, seed, steps, segment_steps=10):
    agent = Recorder()
    loop = OnlineLoop(make_env(ENV, **kwargs), agent, reset, seed=seed, segment_steps=segment_steps)
    loop.run(steps)
    return loop, [(t.obs, int(t.action), t.reward, t.next_obs, t.terminated, t.truncated) for t in agent.transitions]


def test_each_seed_sees_exactly_its_solo_transitions_and_episodes():
    loop, agents = _run_population(60)
    for k, (kwargs, reset) in enumerate(CASES.values()):
        solo, trs = _run_solo(kwargs, reset, loop.seeds[k], 60)
        got = agents.transitions[k]
        assert len(got) == len(trs) == 60
        for a, b in zip(got, trs):
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[3], b[3])
            assert a[1:3] == b[1:3] and a[4:] == b[4:]
        assert loop.episodes[k] == solo.episodes, list(CASES)[k]


def test_edge_cases_analytically():
    loop, agents = _run_population(60)
    names = list(CASES)
    for k, name in enumerate(names):
        trs = agents.transitions[k]
        for a, b in zip(trs, trs[1:]):
            if a[4] or a[5]:  # the episode ended: the next step starts from the reset observation
                assert b[0][0] == 0 and b[0][1] == a[0][1] + 1, name
            else:  # no transition across a reset: next_obs is the following step's obs
                np.testing.assert_array_equal(a[3], b[0])
            assert a[3][0] == a[0][0] + 1 or (a[0][0] == 0 and a[3][0] == 1), name  # the true next obs
    boundary = agents.transitions[names.index("ends at the every:5 boundary")]
    # the environment ends the episode on the step the condition would: terminated, not truncated
    assert [(i, t[4], t[5]) for i, t in enumerate(boundary) if t[4] or t[5]] == [(i, True, False)
                                                                              for i in range(4, 60, 5)]
    assert [t[3][0] for t in boundary if t[4]] == [5.0] * 12  # the true final observation, never the reset one
    both = agents.transitions[names.index("terminated and truncated together")]
    assert [(t[4], t[5]) for t in both if t[4] or t[5]] == [(True, True)] * 15
    never = agents.transitions[names.index("never: carries on past the time limit")]
    assert not any(t[4] or t[5] for t in never) and [t[3][0] for t in never] == list(range(1, 61))
    assert [r[3] for r in loop.episodes[names.index("never: carries on past the time limit")]] == [10] * 6
    forced = agents.transitions[names.index("forced every:3")]
    assert [(t[4], t[5]) for t in forced[2::3]] == [(False, True)] * 20
    assert [r[3] for r in loop.episodes[names.index("time limit")]] == [7] * 8


def test_state_dict_resumes_the_same_stream():
    full, agents_full = _run_population(60)
    half, _ = _run_population(27)
    state = half.state_dict()
    kwargs, resets = zip(*CASES.values())
    stream = VectorStream(make_vector_env(ENV, [dict(k) for k in kwargs]))
    agents = PopRecorder(len(CASES))
    again = PopulationLoop(stream, agents, list(resets), half.seeds, segment_steps=10)
    again.load_state_dict(state)
    again.run(60)
    assert again.episodes == full.episodes
    for k in range(len(CASES)):
        for a, b in zip(agents.transitions[k], agents_full.transitions[k][27:]):
            np.testing.assert_array_equal(a[0], b[0])
            assert a[1:3] == b[1:3] and a[4:] == b[4:]


def test_non_finite_reward_names_the_seed():
    class Bad(PopRecorder):
        pass

    stream = VectorStream(make_vector_env("lcpo/ContinuingChain-v0", [{}, {}]))
    loop = PopulationLoop(stream, Bad(2), ["end", "end"], [0, 1])
    real = stream.step

    def step(actions):
        out = list(real(actions))
        out[1] = out[1].copy()
        out[1][1] = np.nan
        return tuple(out)

    stream.step = step
    with pytest.raises(ValueError, match="non-finite reward nan of seed 1 at step 0"):
        loop.run(3)


def test_a_users_vector_env_is_taken_as_the_population():
    """`--env population_toys:EdgeVectorEnv` (a VectorEnv in NEXT_STEP mode, one sub-env per seed): each seed
    learns exactly as its solo run on the single environment."""
    from lcpo.agents.a2c import A2C
    from lcpo.online.population import Population

    pop = Population("a2c", "population_toys:EdgeVectorEnv", seeds=[4, 6], env_kwargs={"time_limit": 5},
                     hidden=[8], rollout_steps=20)
    assert pop.stream.venv.num_envs == 2 and pop.seed_envs is None
    pop.learn(100)
    for k, seed in enumerate((4, 6)):
        solo = A2C(make_env(ENV, time_limit=5), seed=seed, hidden=[8], rollout_steps=20).learn(100)
        assert pop.episodes[k] == solo.episodes and len(solo.episodes) == 20
    with pytest.raises(ValueError, match="vector env of 3 sub-environments: pass 3 seeds"):
        Population("a2c", "population_toys:EdgeVectorEnv", seeds=[0, 1], env_kwargs={"num_envs": 3})


def test_benchmark_script_measures_every_path(load_benchmark):
    """benchmarks/population.py runs (tiny sizes; its figures are measured, never asserted)."""
    bench = load_benchmark("population")
    assert bench.solo_rate("a2c", 20, 10, 1) > 0
    assert bench.population_rate("a2c", 2, 20, 10, 1, True, "cpu") > 0
    assert bench.population_rate("ddqn", 2, 20, 10, 1, False, "cpu") > 0
    m = bench.memory(2, 1000, 10, True, "cpu")
    assert m["reservoir_bytes_mib"] == round(2 * 1000 * 9 * 4 / 2**20, 1) and m["checkpoint_mib"] > 0


def test_a_population_without_seeds_is_refused_in_one_line():
    stream = VectorStream(make_vector_env("lcpo/ContinuingChain-v0", [{}]))
    with pytest.raises(ValueError, match="^a population needs at least one seed, got none$"):
        PopulationLoop(stream, PopRecorder(0), [], [])


def test_loaded_observations_are_float32_whatever_the_saved_dtype():
    """A saved state whose observations were read back as float64 (a JSON list) resumes with the float32
    observations the stream gives, so the agents see the same dtype before and after a resume."""
    half, _ = _run_population(27)
    state = half.state_dict()
    for s in state["seeds"]:
        s["obs"] = np.asarray(s["obs"], dtype=np.float64).tolist()
    kwargs, resets = zip(*CASES.values())
    again = PopulationLoop(VectorStream(make_vector_env(ENV, [dict(k) for k in kwargs])), PopRecorder(len(CASES)),
                           list(resets), half.seeds, segment_steps=10)
    again.load_state_dict(state)
    assert again.obs.dtype == np.float32
    np.testing.assert_array_equal(again.obs, half.obs)


def test_population_reset_defaults_to_what_the_environment_declares():
    """With no ``reset``, a continuing environment (the straggler load balancer) runs with ``never`` and scores
    200-step windows (not NaN, as ``end`` would on a task that never ends); an episodic one with ``end``; an
    explicit value still wins, per seed."""
    from lcpo.online.population import Population

    with Population("a2c", "lcpo/StragglerMitigation-v0", seeds=[0, 1], rollout_steps=300) as pop:
        pop.learn(1000)
        assert all(np.isfinite(pop.lifelong_return())) and len(pop.episodes[0]) == 5
    with Population("a2c", "lcpo/StragglerMitigation-v0", seeds=[0, 1], reset=[None, "end"],
                    rollout_steps=300) as pop:
        pop.learn(1000)
        assert len(pop.episodes[0]) == 5 and len(pop.episodes[1]) == 0
    with Population("a2c", seeds=[0], trace="zero", rollout_steps=50, hidden=(8,)) as pop:
        pop.learn(400)
        assert len(pop.episodes[0]) == 2  # Pendulum's 200-step episodes end: "end"
