"""``lcpo/StragglerMitigation-v0``: Gymnasium contract, reward, safety, discount, context, checkpointing."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import lcpo.envs  # noqa: F401  (registers the ids)
from lcpo.envs.context import get_context_spec
from lcpo.envs.straggler import StragglerMitigationEnv, TraceWorkload, constant_workload
from straggler_helpers import exp_workload


def test_registered_id_makes_default_env_and_passes_check_env():
    env = gym.make("lcpo/StragglerMitigation-v0")
    assert env.unwrapped.workload.name == "azure-llm"
    assert env.observation_space.shape == (32,) and env.action_space.n == 9
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=0)
    assert obs.dtype == np.float32 and obs.shape == (32,)
    spec = get_context_spec(env)
    assert spec.indices == (26, 29)
    for _ in range(50):
        obs, r, term, trunc, info = env.step(env.action_space.sample())
        assert not term and not trunc
        assert env.observation_space.contains(obs)
        np.testing.assert_array_equal(info["context"], obs[[26, 29]].astype(np.float64))


def test_reward_is_minus_numpy_p95_of_step_latencies_over_scale():
    env = StragglerMitigationEnv(exp_workload(100_000, 8.0, 50.0), reward_scale=1000.0)
    env.reset(seed=1)
    seen = set()
    for t in range(3000):
        _, r, _, _, info = env.step(t % 9)
        lat = env.sim.step_latencies
        n = len(lat)
        assert n >= 1 and n == info["completions"]
        seen.add(min(n, 3))
        assert info["p95_ms"] == np.percentile(lat, 95)
        mult = 3.0 if info["forced"] else 1.0
        assert r == pytest.approx(-mult * np.percentile(lat, 95) / 1000.0, rel=1e-12)
    assert {1, 2, 3} <= seen                       # steps with 1 and 2 latencies were checked


def test_step_extends_until_a_completion_and_gamma_depends_on_elapsed_time():
    # one 10 ms request every 2 s: most 500 ms windows see no completion and are extended
    env = StragglerMitigationEnv(np.array([[10.0, 2000.0]]), p_inflate=0.0)
    env.reset(seed=0)
    for _ in range(20):
        _, _, _, _, info = env.step(8)
        assert info["completions"] == 1
        assert info["elapsed_ms"] >= 500.0
        assert info["gamma"] == pytest.approx(0.81 ** (info["elapsed_ms"] / 1000.0))
    env = StragglerMitigationEnv(constant_workload(60, 28))
    env.reset(seed=0)
    g = [env.step(8)[4]["gamma"] for _ in range(200)]
    assert np.median(g) == pytest.approx(0.81 ** 0.5) and 0.81 ** 0.5 == pytest.approx(0.9, abs=0.001)


def _burst_then_idle():
    # 3000 requests of 100 ms, 1 ms apart (10x the capacity of 10 servers), then 120 s of silence, repeated
    data = np.tile([[100.0, 1.0]], (3000, 1))
    data[0, 1] = 120_000.0
    return TraceWorkload(data, "burst")


def test_safety_hysteresis_forces_never_hedge_and_triples_penalty():
    env = StragglerMitigationEnv(_burst_then_idle(), p_inflate=0.0)
    env.reset(seed=0)
    prev_unsafe = False
    unsafe_mid_queue = forced_steps = 0
    for _ in range(2000):
        obs, r, _, _, info = env.step(0)               # the agent always asks for the 3 ms timeout
        maxq = obs[:10].max()
        assert info["forced"] == prev_unsafe
        if info["forced"]:
            forced_steps += 1
            assert info["timeout_ms"] == np.inf
            assert r == pytest.approx(-3 * info["p95_ms"] / 1600.0, rel=1e-12)
        else:
            assert info["timeout_ms"] == 3.0
            assert r == -info["p95_ms"] / 1600.0
        expected = (maxq > 50) if not prev_unsafe else not (maxq <= 3)
        assert info["unsafe"] == expected and obs[31] == float(expected)
        unsafe_mid_queue += info["unsafe"] and 3 < maxq <= 50
        prev_unsafe = info["unsafe"]
    assert forced_steps > 0 and unsafe_mid_queue > 0      # stays unsafe between the thresholds


def test_observation_features_are_consistent():
    env = StragglerMitigationEnv(constant_workload(60.0, 28.0, seed=3))
    env.reset(seed=0)
    obs = None
    for _ in range(3000):
        obs, _, _, _, info = env.step(8)
    np.testing.assert_array_equal(obs[:10], env.sim.q)
    assert np.all(obs[10:20] >= 0)
    # never hedging: offered load estimate ~ 1.9 * 0.06 * 28 / 10, rate and size EMAs ~ 1 (normalized)
    assert obs[20] == pytest.approx(1.0, abs=0.35)
    assert obs[26] == pytest.approx(1.0, abs=0.1) and obs[27] == pytest.approx(1.0, abs=0.1)
    assert obs[29] == pytest.approx(1.0, abs=0.25)
    assert obs[22] >= obs[20] and obs[23] >= obs[21] * 0.999


def test_determinism_per_seed_and_state_roundtrip():
    def run(env, n, rng):
        out = []
        for _ in range(n):
            o, r, *_ = env.step(int(rng.integers(9)))
            out.append((o, r))
        return out

    wl = constant_workload(60.0, 28.0, seed=1)
    wl.chunk_ms = 20_000.0                            # many chunk boundaries in a short run
    wl._steps = 200
    a, b = StragglerMitigationEnv(wl), StragglerMitigationEnv(wl)
    a.reset(seed=5)
    b.reset(seed=5)
    ra, rb = run(a, 300, np.random.default_rng(0)), run(b, 300, np.random.default_rng(0))
    assert all(np.array_equal(x[0], y[0]) and x[1] == y[1] for x, y in zip(ra, rb))
    state = a.get_state()
    cont = run(a, 300, np.random.default_rng(1))
    c = StragglerMitigationEnv(wl)
    c.reset(seed=99)
    c.set_state(state)
    again = run(c, 300, np.random.default_rng(1))
    assert all(np.array_equal(x[0], y[0]) and x[1] == y[1] for x, y in zip(cont, again))
    d = StragglerMitigationEnv(wl)
    d.reset(seed=6)
    rd = run(d, 300, np.random.default_rng(0))
    assert not all(x[1] == y[1] for x, y in zip(ra, rd))


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="reward_scale"):
        StragglerMitigationEnv("constant-60x28", reward_scale=0.0)
    with pytest.raises(ValueError, match="safe_queue"):
        StragglerMitigationEnv("constant-60x28", safe_queue=60)
    env = StragglerMitigationEnv("constant-60x28")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        env.step(9)


def test_unseeded_reset_continues_global_time_and_seeded_reset_restarts():
    env = StragglerMitigationEnv("constant-60x28")
    env.reset(seed=0)
    for _ in range(100):
        obs, *_ = env.step(2)
    t = env.sim.now
    again, info = env.reset()
    np.testing.assert_array_equal(again, obs)
    assert env.sim.now == t and info["context"].shape == (2,)
    fresh, _ = env.reset(seed=0)
    assert env.sim.now == 0.0 and not fresh.any()
