"""Vector environments (issue 26, item 2): the native windy Pendulum against N single envs, bit for bit; the
VectorStream contract in every autoreset mode (Gymnasium's SyncVectorEnv and a user's own vector env); state
round trips; errors.

Gymnasium 1.4 has no checker for vector envs (``gymnasium.utils.env_checker`` covers single envs only), so the
checks below are explicit; the single envs the vector envs are compared with pass ``check_env``
(tests/envs/test_windy_pendulum.py).
"""

import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.utils import batch_space

import lcpo.envs  # noqa: F401  (registers ids)
from lcpo.envs.vector import VectorStream, make_vector_env
from lcpo.envs.windy_pendulum_vector import WindyPendulumVectorEnv

PENDULUM = "lcpo/WindyPendulum-v0"
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


def _pendulum_kwargs():
    """Per-seed kwargs: different traces (lengths 37 and 500: both wrap within 1,000 steps; None = no wind) and
    short, different time limits, so episodes end often and at different steps."""
    rng = np.random.default_rng(7)
    return [{"trace": rng.uniform(-2, 2, (37, 2)), "time_limit": 13},
            {"trace": None, "time_limit": 7},
            {"trace": rng.uniform(-4, 4, (500, 2)), "time_limit": 29}]


def _assert_states_equal(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], dict):
            _assert_states_equal(a[k], b[k])
        elif isinstance(a[k], np.ndarray):
            np.testing.assert_array_equal(a[k], b[k])
        else:
            assert a[k] == b[k], k


# ---------------------------------------------------------------------------------------------- native Pendulum
def test_native_pendulum_equals_single_envs_bitwise_across_episode_ends_and_resets():
    kws = _pendulum_kwargs()
    singles = [gym.make(PENDULUM, **kw) for kw in kws]
    venv = WindyPendulumVectorEnv(env_kwargs=kws)
    assert venv.single_action_space == singles[0].action_space  # the discretisation is folded in
    assert venv.single_observation_space == singles[0].observation_space
    seeds = [3, 4, 5]
    obs, info = venv.reset(seed=seeds)
    ref = [e.reset(seed=s) for e, s in zip(singles, seeds)]
    np.testing.assert_array_equal(obs, np.stack([o for o, _ in ref]))
    np.testing.assert_array_equal(info["context"], np.stack([i["context"] for _, i in ref]))
    rng = np.random.default_rng(0)
    ends = 0
    for t in range(1000):
        a = rng.integers(0, 15, (3, 1))
        obs, rew, term, trunc, info = venv.step(a)
        out = [e.step(a[k]) for k, e in enumerate(singles)]
        np.testing.assert_array_equal(obs, np.stack([o[0] for o in out]), err_msg=f"step {t}")
        np.testing.assert_array_equal(rew, np.array([o[1] for o in out]), err_msg=f"step {t}")
        np.testing.assert_array_equal(term, np.array([o[2] for o in out]))
        np.testing.assert_array_equal(trunc, np.array([o[3] for o in out]))
        np.testing.assert_array_equal(info["context"], np.stack([o[4]["context"] for o in out]))
        assert rew.dtype == np.float64 and obs.dtype == np.float32
        mask = term | trunc
        opts, seed = {}, None
        if t % 97 == 50:  # a forced reset of a running sub-env: seeded (trace row 0) / at a trace index
            mask[1] = True
            seed = [None, 11, None]
        if t % 211 == 100:
            mask[0] = True
            opts = {"trace_index": 21}
        if mask.any():
            ends += int((term | trunc).sum())
            obs, info = venv.reset(seed=seed, options={"reset_mask": mask, **opts})
            for k in np.flatnonzero(mask):  # unmasked sub-envs are untouched; masked ones reset as a single env
                o, i = singles[k].reset(seed=None if seed is None else seed[k], options=opts or None)
                np.testing.assert_array_equal(obs[k], o)
                np.testing.assert_array_equal(info["context"][k], i["context"])
    assert ends > 150
    for k, e in enumerate(singles):  # trace index progression, lag window, step counter, RNG
        _assert_states_equal(venv.get_state()[k], e.unwrapped.get_state())


def test_native_unseeded_reset_continues_global_time_and_seeded_restarts_the_trace():
    trace = np.arange(20, dtype=np.float64).reshape(10, 2) / 10
    venv = WindyPendulumVectorEnv(env_kwargs=[{"trace": trace, "time_limit": 3}] * 2)
    venv.reset(seed=0)
    for _ in range(3):
        venv.step(np.zeros((2, 1), dtype=np.int64))
    venv.reset(seed=[None, 5], options={"reset_mask": np.array([True, True])})
    assert [s["wind"]["index"] for s in venv.get_state()] == [3, 0]
    venv.reset(options={"reset_mask": np.array([True, False]), "trace_index": 7})
    assert [s["wind"]["index"] for s in venv.get_state()] == [7, 0]
    venv.reset(options={"trace_index": [2, 13]})  # per sub-env rows (wrapped at the trace length, 10)
    assert [s["wind"]["index"] for s in venv.get_state()] == [2, 3]
    assert WindyPendulumVectorEnv(num_envs=1, max_episode_steps=9)._limit.tolist() == [9]  # as make_env


def test_native_state_round_trip_mid_episode_is_exact():
    kws = _pendulum_kwargs()
    a_env = WindyPendulumVectorEnv(env_kwargs=kws)
    a_env.reset(seed=[1, 2, 3])
    rng = np.random.default_rng(1)

    def run(env, steps, rng):
        rows = []
        for _ in range(steps):
            out = env.step(rng.integers(0, 15, (3, 1)))
            rows.append(out[:4] + (out[4]["context"],))
            if (out[2] | out[3]).any():
                rows.append(env.reset(options={"reset_mask": out[2] | out[3]}))
        return rows

    run(a_env, 105, rng)  # mid-episode for every sub-env (105 is no multiple of 13, 7 or 29)
    state = a_env.get_state()
    rng_b = np.random.default_rng(99)
    rng_a = np.random.default_rng(99)
    ref = run(a_env, 300, rng_a)
    b_env = WindyPendulumVectorEnv(env_kwargs=kws)
    b_env.reset(seed=[7, 8, 9])
    b_env.step(np.zeros((3, 1), dtype=np.int64))
    b_env.set_state(state)
    got = run(b_env, 300, rng_b)
    assert len(got) == len(ref)
    for x, y in zip(got, ref):
        for p, q in zip(x, y):
            if isinstance(p, dict):
                np.testing.assert_array_equal(p["context"], q["context"])
            else:
                np.testing.assert_array_equal(p, q)
    # a single env's state restores into a sub-env and continues as that single env
    single = gym.make(PENDULUM, **kws[2])
    single.reset(seed=4)
    for _ in range(17):
        single.step(np.array([3]))
    c_env = WindyPendulumVectorEnv(env_kwargs=[kws[2]])
    c_env.reset(seed=0)
    c_env.set_state([single.unwrapped.get_state()])
    for t in range(40):
        o1, r1, _, tr1, _ = single.step(np.array([t % 15]))
        o2, r2, _, tr2, _ = c_env.step(np.array([[t % 15]]))
        np.testing.assert_array_equal(o2[0], o1)
        assert r2[0] == r1 and tr2[0] == tr1
        if tr1:
            single.reset()
            c_env.reset(options={"reset_mask": np.array([True])})


def test_native_is_the_vector_entry_point_with_per_env_kwargs():
    kws = _pendulum_kwargs()
    venv = gym.make_vec(PENDULUM, num_envs=3, vectorization_mode="vector_entry_point", env_kwargs=kws)
    assert isinstance(venv, WindyPendulumVectorEnv)
    assert venv.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP  # Gymnasium's default, as make_vec's sync
    assert venv.single_action_space == gym.make(PENDULUM).action_space
    assert venv.action_space == batch_space(venv.single_action_space, 3)
    assert [s["elapsed"] for s in venv.get_state()] == [0, 0, 0]
    shared = gym.make_vec(PENDULUM, num_envs=3, trace=np.full((50, 2), 0.5), time_limit=50)  # shared kwargs
    assert isinstance(shared, WindyPendulumVectorEnv) and shared.num_envs == 3
    assert shared._winds.shape == (50, 2)  # one copy of a trace that the sub-envs share


@pytest.mark.parametrize("mode", ["native", "sync"])
def test_stream_continue_where_steps_past_the_time_limit_as_a_single_env(mode):
    kws = _pendulum_kwargs()
    stream = VectorStream(make_vector_env(PENDULUM, kws, mode=mode))
    singles = [gym.make(PENDULUM, **kw) for kw in kws]
    first = np.stack([e.reset(seed=k)[0] for k, e in enumerate(singles)])
    np.testing.assert_array_equal(stream.reset([0, 1, 2]), first)
    rng = np.random.default_rng(5)
    for t in range(40):
        a = rng.integers(0, 15, (3, 1))
        obs, rew, _, trunc, _ = stream.step(a)
        out = [e.step(a[k]) for k, e in enumerate(singles)]  # never reset: truncated on every step past the limit
        np.testing.assert_array_equal(obs, np.stack([o[0] for o in out]))
        np.testing.assert_array_equal(rew, [o[1] for o in out])
        np.testing.assert_array_equal(trunc, [o[3] for o in out])
        stream.continue_where(trunc)
    assert trunc[1] and trunc[0]  # past the limits 7 and 13: truncated at every step


def test_stream_continue_where_needs_disabled_mode():
    stream = VectorStream(SyncVectorEnv([lambda: Countdown(None, 1)], autoreset_mode=AutoresetMode.SAME_STEP))
    stream.reset([0])
    _, _, _, trunc, _ = stream.step(np.zeros(1, dtype=np.int64))
    with pytest.raises(ValueError, match="cannot step sub-environments \\[0\\] on past"):
        stream.continue_where(trunc)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.value)
def test_native_autoresets_as_gymnasiums_sync_vector_env(mode):
    """Raw Gymnasium outputs, no resets by the caller: the native env's autoreset equals SyncVectorEnv's over
    the single envs (NEXT_STEP: the reset step; SAME_STEP: final_obs / final_info and the reset obs)."""
    kws = _pendulum_kwargs()
    native = WindyPendulumVectorEnv(env_kwargs=kws, autoreset_mode=mode)
    sync = SyncVectorEnv([lambda kw=kw: gym.make(PENDULUM, **kw) for kw in kws], autoreset_mode=mode)
    np.testing.assert_array_equal(native.reset(seed=[0, 1, 2])[0], sync.reset(seed=[0, 1, 2])[0])
    rng = np.random.default_rng(2)
    finals = 0
    for t in range(300):
        a = rng.integers(0, 15, (3, 1))
        out_n, out_s = native.step(a), sync.step(a)
        for p, q in zip(out_n[:4], out_s[:4]):
            np.testing.assert_array_equal(p, q, err_msg=f"step {t}")
        i_n, i_s = out_n[4], out_s[4]
        np.testing.assert_array_equal(i_n["context"], i_s["context"])
        if "final_obs" in i_s:
            finals += 1
            np.testing.assert_array_equal(i_n["_final_obs"], i_s["_final_obs"])
            for k in np.flatnonzero(i_s["_final_obs"]):
                np.testing.assert_array_equal(i_n["final_obs"][k], i_s["final_obs"][k])
                np.testing.assert_array_equal(i_n["final_info"]["context"][k], i_s["final_info"]["context"][k])
        else:
            assert "final_obs" not in i_n
    assert finals > 20 if mode is AutoresetMode.SAME_STEP else finals == 0
    for x, y in zip(native.get_state(), [e.unwrapped.get_state() for e in sync.envs]):
        _assert_states_equal(x, y)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_stream_over_native_is_the_same_in_each_autoreset_mode(mode):
    kws = _pendulum_kwargs()
    streams = [VectorStream(WindyPendulumVectorEnv(env_kwargs=kws, autoreset_mode=m))
               for m in (mode, AutoresetMode.DISABLED)]
    np.testing.assert_array_equal(*[s.reset([4, 5, 6]) for s in streams])
    rng = np.random.default_rng(8)
    for t in range(200):
        a = rng.integers(0, 15, (3, 1))
        out = [s.step(a) for s in streams]
        for p, q in zip(out[0][:4], out[1][:4]):
            np.testing.assert_array_equal(p, q)
        np.testing.assert_array_equal(out[0][4].batched("context"), out[1][4].batched("context"))
        mask = out[0][2] | out[0][3]
        mask[0] |= t % 50 == 25  # a forced reset of a running sub-env too
        np.testing.assert_array_equal(*[s.reset_where(mask) for s in streams])


def test_native_errors_name_the_bad_value():
    venv = WindyPendulumVectorEnv(env_kwargs=[{"time_limit": 2}] * 2)
    with pytest.raises(RuntimeError, match="before reset"):
        venv.step(np.zeros((2, 1), dtype=np.int64))
    venv.reset(seed=0)
    with pytest.raises(ValueError, match="sub-env 1: bin index out of range"):
        venv.step(np.array([[0], [15]]))
    with pytest.raises(ValueError, match=r"shape \(2, 1\)"):
        venv.step(np.zeros((3, 1), dtype=np.int64))
    with pytest.raises(ValueError, match="integer bin indices"):
        venv.step(np.full((2, 1), 0.5))
    with pytest.raises(ValueError, match="env_kwargs\\[1\\].*wind_speed"):
        WindyPendulumVectorEnv(env_kwargs=[{}, {"wind_speed": 3}])
    with pytest.raises(ValueError, match="same bins"):
        WindyPendulumVectorEnv(env_kwargs=[{}, {"bins": 5}])
    with pytest.raises(ValueError, match="unknown autoreset_mode 'Sometimes'"):
        WindyPendulumVectorEnv(num_envs=2, autoreset_mode="Sometimes")


# ---------------------------------------------------------------------------------------------- make_vector_env
def test_make_vector_env_modes_agree_and_keep_the_discretisation():
    kws = _pendulum_kwargs()
    native = make_vector_env(PENDULUM, kws)
    sync = make_vector_env(PENDULUM, kws, mode="sync")
    assert isinstance(native, WindyPendulumVectorEnv) and isinstance(sync, SyncVectorEnv)
    assert sync.metadata["autoreset_mode"] is AutoresetMode.DISABLED
    assert native.single_action_space == sync.single_action_space == gym.make(PENDULUM).action_space
    streams = [VectorStream(native), VectorStream(sync)]
    obs = [s.reset(seeds=[0, 1, 2]) for s in streams]
    np.testing.assert_array_equal(obs[0], obs[1])
    rng = np.random.default_rng(3)
    for _ in range(300):
        a = rng.integers(0, 15, (3, 1))
        out = [s.step(a) for s in streams]
        for p, q in zip(out[0][:4], out[1][:4]):
            np.testing.assert_array_equal(p, q)
        for i0, i1 in zip(out[0][4], out[1][4]):
            np.testing.assert_array_equal(i0["context"], i1["context"])
        ended = out[0][2] | out[0][3]
        if ended.any():
            np.testing.assert_array_equal(*[s.reset_where(ended) for s in streams])
    for a, b in zip(*[s.get_state() for s in streams]):
        # a SyncVectorEnv's sub-envs also carry their wrappers' state (OrderEnforcing, PassiveEnvChecker)
        _assert_states_equal({k: v for k, v in a.items() if k != "wrappers"},
                             {k: v for k, v in b.items() if k != "wrappers"})


def test_make_vector_env_async_matches_native_and_restores_state():
    kws = [{"time_limit": 5, "trace": np.linspace(-1, 1, 40).reshape(20, 2)}, {"time_limit": 7}]
    a, b = VectorStream(make_vector_env(PENDULUM, kws, mode="async")), VectorStream(make_vector_env(PENDULUM, kws))
    try:
        assert isinstance(a.venv, AsyncVectorEnv)
        np.testing.assert_array_equal(a.reset([1, 2]), b.reset([1, 2]))
        rng = np.random.default_rng(0)
        for t in range(30):
            act = rng.integers(0, 15, (2, 1))
            ra, rb = a.step(act), b.step(act)
            for p, q in zip(ra[:4], rb[:4]):
                np.testing.assert_array_equal(p, q)
            ended = ra[2] | ra[3]
            if ended.any():
                np.testing.assert_array_equal(a.reset_where(ended), b.reset_where(ended))
        sb = b.get_state()
        for _ in range(3):
            a.step(np.zeros((2, 1), dtype=np.int64))
        a.set_state(sb)  # per-sub-env states into the worker processes
        for x, y in zip(a.get_state(), sb):
            # the async sub-envs also carry their wrappers' state; the native env has no wrappers
            assert [w["wrapper"] for w in x["wrappers"]] == ["gymnasium.wrappers.common.OrderEnforcing",
                                                             "lcpo.envs.discretize.DiscretizeActions"]
            assert "wrappers" not in y
            _assert_states_equal({k: v for k, v in x.items() if k != "wrappers"}, y)
    finally:
        a.close()


def test_make_vector_env_takes_a_users_module_id(tmp_path, monkeypatch):
    (tmp_path / "my_vec_envs.py").write_text(
        "import gymnasium as gym\n"
        "gym.register(id='MyVecCartPole-v0', entry_point='gymnasium.envs.classic_control:CartPoleEnv')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    venv = make_vector_env("my_vec_envs:MyVecCartPole-v0", [{}, {}])
    try:
        assert isinstance(venv, SyncVectorEnv) and venv.num_envs == 2
        assert VectorStream(venv).reset([0, 1]).shape == (2, 4)
    finally:
        sys.modules.pop("my_vec_envs", None)


def test_make_vector_env_errors_name_the_bad_value():
    with pytest.raises(ValueError, match="unknown vector env mode 'fast'"):
        make_vector_env(PENDULUM, [{}], mode="fast")
    with pytest.raises(ValueError, match="unknown environment id 'lcpo/WindyPendulm-v0'"):
        make_vector_env("lcpo/WindyPendulm-v0", [{}])
    with pytest.raises(ValueError, match="no native vector env for 'CartPole-v1'"):
        make_vector_env("CartPole-v1", [{}], mode="native")
    with pytest.raises(ValueError, match="non-empty list of dicts"):
        make_vector_env(PENDULUM, [])
    with pytest.raises(ValueError, match=r"env_kwargs\[1\] must be a dict"):
        make_vector_env(PENDULUM, [{}, "wind-1"])
    with pytest.raises(ValueError, match="unknown autoreset_mode 'Sometimes'"):
        make_vector_env(PENDULUM, [{}], autoreset_mode="Sometimes")
    same = make_vector_env(PENDULUM, [{}], autoreset_mode="SameStep")
    assert isinstance(same, WindyPendulumVectorEnv) and same.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP


def test_stream_get_state_names_a_sub_env_without_get_state():
    stream = VectorStream(make_vector_env("CartPole-v1", [{}, {}]))
    stream.reset([0, 1])
    with pytest.raises(TypeError, match="sub-environment 0 \\(CartPole-v1\\) has no get_state"):
        stream.get_state()


# ---------------------------------------------------------------------------------------------- VectorStream
class Countdown(gym.Env):
    """obs = [episode number, t]; terminated at ``term_at``, truncated at ``trunc_at`` (both can coincide);
    reward 10 t + action; info["context"] = obs as float64."""

    def __init__(self, term_at=None, trunc_at=None):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self.term_at, self.trunc_at = term_at, trunc_at
        self.episode, self.t = -1, 0

    def _obs(self):
        return np.array([self.episode, self.t], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return self._obs(), {"context": self._obs().astype(np.float64)}

    def step(self, action):
        self.t += 1
        term, trunc = self.t == self.term_at, self.t == self.trunc_at
        return self._obs(), 10.0 * self.t + int(action), term, trunc, {"context": self._obs().astype(np.float64)}

    def get_state(self):
        return {"episode": self.episode, "t": self.t}

    def set_state(self, state):
        self.episode, self.t = state["episode"], state["t"]


class UserCountdownVector(VectorEnv):
    """A user's own vector env that autoresets in ``mode`` itself (Gymnasium's semantics) and, outside DISABLED
    mode, ignores ``options["reset_mask"]`` (resets everything), as a naive implementation would."""

    def __init__(self, specs, mode):
        self.envs = [Countdown(*s) for s in specs]
        self.num_envs = len(self.envs)
        self.metadata = {"autoreset_mode": mode}
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.mode = mode
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self.calls = 0

    def reset(self, *, seed=None, options=None):
        mask = (options or {}).get("reset_mask") if self.mode is AutoresetMode.DISABLED else None
        rows = range(self.num_envs) if mask is None else np.flatnonzero(mask)
        for i in rows:
            self.envs[i].reset()
            self._autoreset[i] = False
        return np.stack([e._obs() for e in self.envs]), {}

    def step(self, actions):
        self.calls += 1
        obs, rew, term, trunc = [], [], [], []
        final = np.full(self.num_envs, None, dtype=object)
        final_ctx = np.zeros((self.num_envs, 2))
        for i, (e, a) in enumerate(zip(self.envs, actions)):
            if self.mode is AutoresetMode.NEXT_STEP and self._autoreset[i]:
                o, _ = e.reset()
                r, te, tr = 0.0, False, False
            else:
                o, r, te, tr, _ = e.step(a)
                if self.mode is AutoresetMode.SAME_STEP and (te or tr):
                    final[i], final_ctx[i] = o, o
                    o, _ = e.reset()
            obs.append(o), rew.append(r), term.append(te), trunc.append(tr)
        term, trunc = np.array(term), np.array(trunc)
        self._autoreset = term | trunc
        infos = {"context": np.stack(obs).astype(np.float64), "_context": np.ones(self.num_envs, bool)}
        if self.mode is AutoresetMode.SAME_STEP and self._autoreset.any():
            infos["final_obs"], infos["_final_obs"] = final, self._autoreset.copy()
            infos["final_info"] = {"context": final_ctx, "_context": self._autoreset.copy()}
            infos["_final_info"] = self._autoreset.copy()
        return np.stack(obs), np.array(rew), term, trunc, infos


SPECS = [(3, 3), (None, 4), (5, None)]  # sub-env 0 terminated and truncated on the same step


def _drive(stream, steps=30, force_at=None):
    """Step with actions ``t % 3``, reset ended sub-envs (and sub-env 2 at step ``force_at``, running), check that
    every transition stays inside one episode, return the transitions."""
    obs = stream.reset(seeds=[0, 1, 2])
    assert np.array_equal(obs[:, 1], np.zeros(3))
    rows = []
    for t in range(steps):
        act = np.full(3, t % 3)
        nxt, rew, term, trunc, infos = stream.step(act)
        # no transition across a reset: same episode, one step further (the true final obs on the last step)
        np.testing.assert_array_equal(nxt[:, 0], obs[:, 0])
        np.testing.assert_array_equal(nxt[:, 1], obs[:, 1] + 1)
        np.testing.assert_array_equal(rew, 10.0 * nxt[:, 1] + t % 3)
        for i in range(3):
            np.testing.assert_array_equal(infos[i]["context"], nxt[i])  # the step's info, not the reset's
        assert len(infos) == 3
        np.testing.assert_array_equal(infos.batched("context"), nxt)  # the vectorised view agrees
        rows.append((nxt.copy(), rew, term, trunc))
        mask = term | trunc
        if force_at is not None and t == force_at:
            assert not mask[2]
            mask[2] = True
        before = nxt.copy()
        obs = stream.reset_where(mask)
        np.testing.assert_array_equal(obs[~mask], before[~mask])  # the others keep going
        np.testing.assert_array_equal(obs[mask, 1], 0)
        assert (obs[mask, 0] == before[mask, 0] + 1).all()
    return rows


def _reference(steps=30, force_at=None):
    envs = [Countdown(*s) for s in SPECS]
    for e in envs:
        e.reset()
    rows = []
    for t in range(steps):
        out = [e.step(t % 3) for e in envs]
        rows.append((np.stack([o[0] for o in out]), np.array([o[1] for o in out]),
                     np.array([o[2] for o in out]), np.array([o[3] for o in out])))
        for i, o in enumerate(out):
            if o[2] or o[3] or (force_at == t and i == 2):
                envs[i].reset()
    return rows


def _assert_rows_equal(got, ref):
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        for p, q in zip(g, r):
            np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_stream_over_sync_vector_env_in_each_autoreset_mode(mode):
    venv = SyncVectorEnv([lambda s=s: Countdown(*s) for s in SPECS], autoreset_mode=mode)
    stream = VectorStream(venv)
    rows = _drive(stream, force_at=11)
    ref = _reference(force_at=11)
    _assert_rows_equal(rows, ref)
    assert rows[2][2][0] and rows[2][3][0]  # terminated and truncated on the same step, both kept
    assert rows[3][2].sum() + rows[3][3].sum() == 1  # sub-env 1 truncated at its 4th step only


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_stream_over_a_users_vector_env_in_each_autoreset_mode(mode):
    if mode is AutoresetMode.NEXT_STEP:
        venv = UserCountdownVector(SPECS, mode)
        stream = VectorStream(venv)
        stream.reset([0, 1, 2])
        for t in range(2):
            stream.step(np.zeros(3, dtype=np.int64))
        _, _, term, trunc, _ = stream.step(np.zeros(3, dtype=np.int64))  # sub-env 0 ends alone
        with pytest.raises(ValueError, match="cannot be reset alone"):
            stream.reset_where(term | trunc)  # it takes no reset_mask and the others are running
        # all sub-envs end together: the adapter issues the no-op reset step itself
        venv = UserCountdownVector([(None, 4)] * 3, mode)
        stream = VectorStream(venv)
        obs = stream.reset([0, 1, 2])
        for t in range(12):
            nxt, rew, term, trunc, _ = stream.step(np.full(3, t % 3))
            np.testing.assert_array_equal(nxt[:, 1], obs[:, 1] + 1)  # never the no-op step (t back to 0)
            assert (rew > 0).all()
            obs = stream.reset_where(term | trunc)
        assert venv.calls == 12 + 3  # three hidden reset steps
        return
    venv = UserCountdownVector(SPECS, mode)
    stream = VectorStream(venv)
    _assert_rows_equal(_drive(stream), _reference())
    if mode is AutoresetMode.SAME_STEP:  # ends reset from the kept autoreset obs; a forced reset cannot be done
        with pytest.raises(ValueError, match="cannot be reset alone"):
            stream.reset_where(np.array([False, False, True]))
    else:
        _assert_rows_equal(_drive(VectorStream(UserCountdownVector(SPECS, mode)), force_at=11),
                           _reference(force_at=11))


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_stream_state_round_trip_in_each_mode(mode):
    make = lambda: VectorStream(SyncVectorEnv([lambda s=s: Countdown(*s) for s in SPECS], autoreset_mode=mode))
    a = make()
    a.reset([0, 1, 2])
    for t in range(7):
        _, _, term, trunc, _ = a.step(np.zeros(3, dtype=np.int64))
        a.reset_where(term | trunc)
    state = a.get_state()
    b = make()
    b.reset([5, 6, 7])
    b.set_state(state)
    np.testing.assert_array_equal(b.obs, a.obs)
    for t in range(9):
        ra, rb = a.step(np.ones(3, dtype=np.int64)), b.step(np.ones(3, dtype=np.int64))
        for p, q in zip(ra[:4], rb[:4]):
            np.testing.assert_array_equal(p, q)
        np.testing.assert_array_equal(a.reset_where(ra[2] | ra[3]), b.reset_where(rb[2] | rb[3]))


def test_stream_requires_reset_where_after_an_end_and_copies_observations():
    venv = SyncVectorEnv([lambda s=s: Countdown(*s) for s in SPECS], autoreset_mode=AutoresetMode.NEXT_STEP,
                         copy=False)  # the vector env hands out its own buffer
    stream = VectorStream(venv)
    obs = stream.reset([0, 1, 2])
    first, *_ = stream.step(np.zeros(3, dtype=np.int64))
    keep = first.copy()
    second, *_ = stream.step(np.zeros(3, dtype=np.int64))
    np.testing.assert_array_equal(first, keep)  # not overwritten by the next step
    assert not np.shares_memory(second, venv._observations) and not np.shares_memory(second, stream.obs)
    second[:] = -1
    assert (stream.obs >= 0).all()
    _, _, term, trunc, _ = stream.step(np.zeros(3, dtype=np.int64))
    assert term[0] and trunc[0]
    with pytest.raises(RuntimeError, match=r"sub-environments \[0\] ended their episode; call reset_where"):
        stream.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match=r"\(3,\) bool array"):
        stream.reset_where(np.array([1, 0, 0]))
    assert obs.dtype == np.float32


def test_stream_takes_a_fresh_arrays_env_without_copies_but_copies_it_wrapped():
    """An unwrapped vector env declaring ``metadata["fresh_arrays"]`` (the native windy Pendulum) is taken without
    the defensive copies, and the caller still gets arrays that alias nothing the stream or env keeps; the same
    env behind a wrapper (which could reuse its own buffers) is copied as any other."""
    from gymnasium.vector import VectorWrapper

    venv = WindyPendulumVectorEnv(env_kwargs=[{"trace": "wind-3"}] * 2, autoreset_mode=AutoresetMode.DISABLED)
    assert venv.metadata["fresh_arrays"] is True
    stream = VectorStream(venv)
    assert stream._fresh
    stream.reset([0, 1])
    nxt, rew, term, trunc, infos = stream.step(np.array([[3], [9]]))
    assert not np.shares_memory(nxt, stream.obs) and not np.shares_memory(nxt, venv._obs)
    ctx = infos.batched("context")
    assert ctx.shape == (2, 2) and not np.shares_memory(ctx, venv._hist)
    nxt[:] = 7.0  # the caller's copy: the stream's current observation is untouched
    assert not (stream.obs == 7.0).all()
    wrapped = VectorStream(VectorWrapper(WindyPendulumVectorEnv(env_kwargs=[{"trace": "wind-3"}] * 2,
                                                                autoreset_mode=AutoresetMode.DISABLED)))
    assert not wrapped._fresh
    wrapped.reset([0, 1])
    w_nxt, w_rew, _, _, w_infos = wrapped.step(np.array([[3], [9]]))
    np.testing.assert_array_equal(w_nxt, stream.obs)  # the same transition either way
    np.testing.assert_array_equal(w_rew, rew)
    np.testing.assert_array_equal(w_infos.batched("context"), ctx)


def test_native_reset_mask_before_a_full_reset_is_refused_and_changes_nothing():
    """A reset with a reset_mask before the first full reset raises; the masked sub-env's state and random
    generator are as they were (the check came after the sub-env was reset once)."""
    trace = np.arange(20, dtype=np.float64).reshape(10, 2) / 10
    venv = WindyPendulumVectorEnv(env_kwargs=[{"trace": trace}] * 2)
    before = venv.get_state()
    with pytest.raises(RuntimeError, match="before a first full reset"):
        venv.reset(seed=[3, None], options={"reset_mask": np.array([True, False]), "trace_index": 4})
    for a, b in zip(venv.get_state(), before):
        _assert_states_equal(a, b)
