"""The windy MuJoCo vector env (:mod:`lcpo.envs.mujoco.vector`): its lean step and masked reset against
Gymnasium's ``SyncVectorEnv`` of the same sub-envs, bit for bit (observations, rewards, flags, infos with their
dtypes), checkpoints that move between the two, the other autoreset modes, and its errors."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import lcpo.envs  # noqa: F401  (registers the ids)
from lcpo.envs.mujoco.vector import WindyInvertedPendulumVectorEnv, WindyMujocoVectorEnv
from lcpo.envs.vector import VectorStream, make_vector_env

IDS = ["lcpo/WindyInvertedPendulum-v0", "lcpo/WindyInvertedDoublePendulum-v0", "lcpo/WindyHopper-v0",
       "lcpo/WindyReacher-v0"]
IP = "lcpo/WindyInvertedPendulum-v0"


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Gymnasium's "v4 is out of date"
        yield


def _kwargs():
    """Three sub-envs: different traces (one wraps within the test), time limits and divisors, so episodes end at
    different steps, by termination and by truncation."""
    rng = np.random.default_rng(3)
    return [{"trace": "wind-1"}, {"trace": rng.uniform(-0.5, 0.5, (41, 2)), "time_limit": 17},
            {"trace": "wind-3", "time_limit": 9, "divisor": 4.0}]


def _assert_infos_equal(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _assert_step_equal(ra, rb):
    for x, y in zip(ra[:4], rb[:4]):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)
    _assert_infos_equal(ra[4], rb[4])


@pytest.mark.parametrize("env_id", IDS)
def test_lean_step_and_masked_reset_equal_sync_vector_env_bitwise(env_id):
    lean = make_vector_env(env_id, _kwargs())  # "auto": the id's vector env, DISABLED autoreset
    sync = make_vector_env(env_id, _kwargs(), mode="sync")
    assert type(lean) is not SyncVectorEnv and isinstance(lean, WindyMujocoVectorEnv)
    assert type(sync) is SyncVectorEnv
    oa, ia = lean.reset(seed=[4, 5, 6])
    ob, ib = sync.reset(seed=[4, 5, 6])
    np.testing.assert_array_equal(oa, ob)
    _assert_infos_equal(ia, ib)
    rng = np.random.default_rng(0)
    d = lean.single_action_space.shape[0]
    ends = resets = 0
    for t in range(150):
        act = rng.integers(0, 15, (3, d))
        ra, rb = lean.step(act), sync.step(act)
        _assert_step_equal(ra, rb)
        ended = ra[2] | ra[3]
        ends += int(ended.sum())
        mask = ended.copy()
        if t % 31 == 30:  # a forced, seeded reset of a running sub-env, and a trace_index start
            mask[1] = True
        if mask.any():
            seeds = [t if t % 31 == 30 and i == 1 else None for i in range(3)]
            options = {"reset_mask": mask}
            if t % 62 == 61:
                options["trace_index"] = 7
            oa, ia = lean.reset(seed=seeds, options=dict(options, reset_mask=mask.copy()))
            ob, ib = sync.reset(seed=seeds, options=dict(options, reset_mask=mask.copy()))
            np.testing.assert_array_equal(oa, ob)
            assert oa.dtype == np.float32
            _assert_infos_equal(ia, ib)
            resets += 1
    assert ends > 3 and resets > 3  # the comparison crossed episode ends and resets
    for a, b in zip(lean.envs, sync.envs):
        assert a.unwrapped.wind.index == b.unwrapped.wind.index
        assert a.unwrapped.elapsed_steps == b.unwrapped.elapsed_steps


def test_lean_path_is_taken_and_returns_fresh_arrays():
    venv = make_vector_env(IP, [{}, {}])
    venv.reset(seed=0)
    calls = []
    original = SyncVectorEnv.step
    SyncVectorEnv.step = lambda self, a: calls.append(a) or original(self, a)
    try:
        obs, rew, _, _, infos = venv.step(np.array([[7], [7]]))
        obs2, *_ = venv.step(np.array([[7], [7]]))
    finally:
        SyncVectorEnv.step = original
    assert calls == []  # DISABLED mode: the lean step, not Gymnasium's
    assert venv.metadata["fresh_arrays"] is True
    assert not np.shares_memory(obs, obs2)
    assert obs.shape == (2, 10) and obs.dtype == np.float32 and rew.dtype == np.float64
    assert infos["context"].shape == (2, 2) and infos["_context"].all()


def test_stream_checkpoint_moves_between_lean_and_sync():
    """VectorStream's per-sub-env states (with the wrappers') are the same for both: a checkpoint of one resumes
    in the other and both go on identically."""
    kw = _kwargs()
    src = VectorStream(make_vector_env(IP, kw))
    src.reset([1, 2, 3])
    rng = np.random.default_rng(1)
    for _ in range(25):
        _, _, term, trunc, _ = src.step(rng.integers(0, 15, (3, 1)))
        if (term | trunc).any():
            src.reset_where(term | trunc)
    states = src.get_state()
    assert all("wrappers" in s for s in states)  # saved as a SyncVectorEnv's sub-envs are
    dst = VectorStream(make_vector_env(IP, kw, mode="sync"))
    dst.reset([9, 9, 9])
    dst.set_state(states)
    for _ in range(40):
        act = rng.integers(0, 15, (3, 1))
        ra, rb = src.step(act), dst.step(act)
        for x, y in zip(ra[:4], rb[:4]):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(ra[4].batched("context"), rb[4].batched("context"))
        ended = ra[2] | ra[3]
        if ended.any():
            np.testing.assert_array_equal(src.reset_where(ended), dst.reset_where(ended))


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.value)
def test_other_autoreset_modes_are_sync_vector_envs(mode):
    a = WindyInvertedPendulumVectorEnv(env_kwargs=_kwargs(), autoreset_mode=mode)
    b = SyncVectorEnv([lambda kw=kw: gym.make(IP, **kw) for kw in _kwargs()], autoreset_mode=mode)
    np.testing.assert_array_equal(a.reset(seed=0)[0], b.reset(seed=0)[0])
    rng = np.random.default_rng(2)
    for _ in range(60):
        act = rng.integers(0, 15, (3, 1))
        ra, rb = a.step(act), b.step(act)
        for x, y in zip(ra[:4], rb[:4]):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(ra[4]["context"], rb[4]["context"])


def test_lean_masked_reset_path_is_taken():
    venv = make_vector_env(IP, [{}, {}, {}])
    venv.reset(seed=0)
    calls = []
    original = SyncVectorEnv.reset
    SyncVectorEnv.reset = lambda self, **kw: calls.append(kw) or original(self, **kw)
    try:
        obs, infos = venv.reset(options={"reset_mask": np.array([False, True, False])})
    finally:
        SyncVectorEnv.reset = original
    assert calls == []
    assert obs.dtype == np.float32 and obs.shape == (3, 10)
    assert infos["_context"].tolist() == [False, True, False]


def test_population_uses_it_and_gymnasium_make_vec_is_unchanged():
    # not the ids' Gymnasium vector entry point: make_vec keeps its own vector envs, wrappers and vector_kwargs
    venv = gym.make_vec(IP, num_envs=2, vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED},
                        wrappers=[gym.wrappers.RecordEpisodeStatistics])
    assert type(venv) is SyncVectorEnv
    venv.close()
    venv = make_vector_env(IP, [{"time_limit": 5}, {"time_limit": 50}], mode="native")
    assert isinstance(venv, WindyInvertedPendulumVectorEnv) and venv.num_envs == 2
    assert [e.unwrapped.max_episode_steps for e in venv.envs] == [5, 50]
    from lcpo.online.population import Population

    pop = Population("a2c", IP, seeds=[0, 1], trace="wind-1", trace_length=500)
    assert isinstance(pop.stream.venv, WindyInvertedPendulumVectorEnv)
    assert pop.seed_envs is not None and len(pop.seed_envs) == 2  # its sub-envs: checkpoints and run metrics
    pop.learn(30)
    assert pop.steps == 30


def test_errors_name_the_bad_value():
    venv = make_vector_env(IP, [{}, {}])
    with pytest.raises(RuntimeError, match="before reset"):
        venv.step(np.array([[1], [2]]))
    venv.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(2, 1\).*\(3, 1\)"):
        venv.step(np.zeros((3, 1), dtype=np.int64))
    with pytest.raises(ValueError, match="sub-env 1: bin index out of range \\[0, 15\\): \\[15\\]"):
        venv.step(np.array([[0], [15]]))
    with pytest.raises(ValueError, match="sub-env 0: bin index out of range"):
        venv.step(np.array([[-1], [3]]))
    with pytest.raises(ValueError, match=r"^sub-env 0: bin indices must be integers, got \[0.5\]$"):
        venv.step(np.array([[0.5], [1.0]]))
    with pytest.raises(ValueError, match=r"^sub-env 1: bin indices must be integers, got \[nan\]$"):
        venv.step(np.array([[1.0], [np.nan]]))
    with pytest.raises(ValueError, match=r"^sub-env 1: bin index out of range \[0, 15\): \[1e\+20\]$"):
        venv.step(np.array([[1.0], [1e20]]))  # the value as given, not a wrapped int64 cast
    with pytest.raises(ValueError, match="^actions must be integer bin indices, got dtype <U1$"):
        venv.step(np.array([["1"], ["2"]]))
    obs, *_ = venv.step(np.array([[3.0], [4.0]]))  # integral floats are bin indices
    assert obs.shape == (2, 10)
    venv.reset(seed=1)
    obs, *_ = venv.step(np.array([[True], [False]]))  # and bools, as Gymnasium's path takes them
    assert obs.shape == (2, 10)
    venv.reset(seed=2)
    ended = False
    for _ in range(300):  # run sub-env 0 into an end, then step it again without a reset
        _, _, term, trunc, _ = venv.step(np.array([[14], [7]]))
        if term[0] or trunc[0]:
            ended = True
            break
    assert ended
    with pytest.raises(RuntimeError, match=r"sub-envs \[0.*ended their episode"):
        venv.step(np.array([[7], [7]]))
    with pytest.raises(TypeError, match="^options\\['reset_mask'\\] must be a bool numpy array, got list$"):
        venv.reset(options={"reset_mask": [True, False]})
    with pytest.raises(TypeError, match="got ndarray of dtype int8$"):
        venv.reset(options={"reset_mask": np.array([1, 0], dtype=np.int8)})
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        venv.reset(options={"reset_mask": np.ones(3, dtype=bool)})
    with pytest.raises(ValueError, match="at least one True"):
        venv.reset(options={"reset_mask": np.zeros(2, dtype=bool)})
    with pytest.raises(ValueError, match="seed has 3 entries"):
        venv.reset(seed=[1, 2, 3], options={"reset_mask": np.ones(2, dtype=bool)})
    with pytest.raises(RuntimeError, match=r"action_space=MultiDiscrete\(\[5\]\)"):
        WindyInvertedPendulumVectorEnv(env_kwargs=[{"bins": 15}, {"bins": 5}])
    with pytest.raises(ValueError, match="num_envs. must be an integer >= 1, got 2.7"):
        WindyInvertedPendulumVectorEnv(num_envs=2.7)
    with pytest.raises(ValueError, match=r"^env_kwargs\[1\]: environment argument 'time_limit' must be an integer >= 1 .*got 0$"):
        WindyInvertedPendulumVectorEnv(env_kwargs=[{}, {"time_limit": 0}])
    with pytest.raises(ValueError, match="num_envs=3 but env_kwargs has 2"):
        WindyInvertedPendulumVectorEnv(num_envs=3, env_kwargs=[{}, {}])
    with pytest.raises(ValueError, match="env_kwargs\\[1\\] must be a dict"):
        WindyInvertedPendulumVectorEnv(env_kwargs=[{}, 3])
    with pytest.raises(ValueError, match="unknown autoreset_mode 'Sometimes'"):
        WindyInvertedPendulumVectorEnv(num_envs=1, autoreset_mode="Sometimes")
