"""A2C and LCPO on the straggler environment: end-to-end runs through ``lcpo.online.run.execute`` (continuing task),
run metrics in the summary, resume equality, and masking of forced steps out of the policy loss."""

import math

import numpy as np
import pytest
import torch

from lcpo.agents import A2C, LCPO
from lcpo.envs.straggler import TIMEOUTS_MS, StragglerMitigationEnv
from lcpo.envs.straggler.nets import PermInvariantNet
from lcpo.envs.straggler.presets import (
    OOD_THRESHOLDS,
    STRAGGLER_OVERRIDES,
    straggler_overrides,
)
from lcpo.online.loop import Transition
from lcpo.online.run import RunConfig, execute
from summaries import comparable

ENV = "lcpo/StragglerMitigation-v0"


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Small networks on a shared 2-core machine: intra-op threads only add contention."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _overrides(agent, **kw):
    small = {"rollout_steps": 500}
    if agent == "lcpo":
        small["reservoir_size"] = 2000
    return straggler_overrides(agent, **{**small, **kw})


def _cfg(agent, steps=3000, workload="synthetic-noisy", **kw):
    return RunConfig(env=ENV, trace=None, agent=agent, steps=steps, seed=2, reset="never", checkpoint_every=1000,
                     env_kwargs={"workload": workload}, overrides=_overrides(agent), **kw)


def test_run_config_trace_names_the_workload():
    """``lcpo run --trace`` and sweep files pass ``trace=``: the environment takes it as its workload."""
    from lcpo.online.run import make_run_env

    env = make_run_env(RunConfig(env=ENV, trace="constant-20x80", agent="a2c", steps=10))
    assert env.unwrapped.workload.name == "constant-20x80"
    assert StragglerMitigationEnv().workload.name == "azure-llm"
    with pytest.raises(ValueError, match="workload once"):
        StragglerMitigationEnv(workload="azure-llm", trace="synthetic-ramp")


@pytest.mark.parametrize("agent", ["a2c", "lcpo"])
def test_continuing_run_reports_tail_latency_metrics(tmp_path, agent):
    s = execute(_cfg(agent), tmp_path / agent)
    assert s["steps"] == 3000 and s["updates"] == 6
    assert s["episodes"] == 3000 // 200  # continuing task: one row per 200-step segment
    m = s["env_metrics"]
    assert set(m) == {"bucketed_p95_ms", "mean_step_p95_ms", "buckets", "forced_fraction", "completions"}
    # 3,000 steps of >= 500 ms: 1,500 s or a little more = 5 or 6 five-minute buckets
    assert m["buckets"] in (5, 6)
    for key in ("bucketed_p95_ms", "mean_step_p95_ms"):
        assert math.isfinite(m[key]) and 20.0 < m[key] < 20_000.0
    assert 0.0 <= m["forced_fraction"] < 1.0
    # ~50 req/s for ~1,500 s
    assert 50_000 < m["completions"] < 100_000
    hp = s["hyperparameters"]
    assert hp["gae_lambda"] == 0.95 and hp["actor_lr"] == hp["critic_lr"] == 1e-3 and hp["max_grad_norm"] == 1.0
    if agent == "lcpo":
        assert hp["detector"] == "mahalanobis" and hp["ood_threshold"] == 24.0
        assert 0.0 <= s["ood_fraction"] <= 1.0


@pytest.mark.parametrize("agent", ["a2c", "lcpo"])
def test_interrupted_run_resumes_to_the_same_summary(tmp_path, agent):
    """The cut (step 1,700) is mid-rollout and between two folds of the request log into the metric."""
    cfg = RunConfig(env=ENV, trace="azure-llm", agent=agent, steps=3000, seed=2, reset="never",
                    checkpoint_every=1000, overrides=_overrides(agent))
    full = execute(cfg, tmp_path / "full")
    part = execute(cfg, tmp_path / "part", stop_at=1700)
    assert part == {"interrupted_at": 1700}
    resumed = execute(cfg, tmp_path / "part")
    assert comparable(resumed, "resumed_from") == comparable(full, "resumed_from")
    assert resumed["env_metrics"]["bucketed_p95_ms"] == full["env_metrics"]["bucketed_p95_ms"]
    assert (tmp_path / "part" / "episodes.csv").read_text() == (tmp_path / "full" / "episodes.csv").read_text()


def _transitions(n, seed=0):
    """Real transitions of a random policy with frequent safety overrides (unsafe above 1 queued copy)."""
    env = StragglerMitigationEnv("synthetic-noisy", unsafe_queue=1, safe_queue=0)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a = np.int64(rng.integers(0, 9))
        nobs, r, te, tr, info = env.step(a)
        out.append(Transition(obs, a, r, nobs, te, tr, info))
        obs = nobs
    return env, out


@pytest.mark.parametrize("agent_cls", [A2C, LCPO])
def test_forced_steps_are_masked_out_of_the_policy_loss(agent_cls):
    """Actions recorded on forced steps must not influence the actor: changing them leaves the networks
    bit-identical after two updates, while changing one unforced action does change the actor."""
    env, trs = _transitions(800)
    forced = np.array([t.info["forced"] for t in trs])
    assert 0.2 < forced.mean() < 0.8

    def train(transitions):
        agent = agent_cls(env, seed=0, **_overrides(agent_cls.name, rollout_steps=400))
        masks = []
        for i, t in enumerate(transitions):
            if i % 400 == 399:
                masks.append(agent.rollout.policy_mask[:399].copy())
            agent.observe(t)
        assert agent.updates == 2
        return agent, np.concatenate(masks)

    a, masks = train(trs)
    np.testing.assert_array_equal(masks, ~forced[np.arange(800) % 400 != 399])
    b, _ = train([t._replace(action=np.int64((t.action + 4) % 9)) if t.info["forced"] else t for t in trs])
    for pa, pb in zip(a.actor.parameters(), b.actor.parameters()):
        assert torch.equal(pa, pb)
    j = int(np.flatnonzero(~forced)[5])
    c, _ = train([t._replace(action=np.int64((t.action + 4) % 9)) if i == j else t for i, t in enumerate(trs)])
    assert any(not torch.equal(pa, pc) for pa, pc in zip(a.actor.parameters(), c.actor.parameters()))
    # the time-dependent discount reached the rollout: 0.81 ** (elapsed s)
    agent = agent_cls(env, seed=0, **_overrides(agent_cls.name, rollout_steps=400))
    for t in trs[:10]:
        agent.observe(t)
    expected = [0.81 ** (t.info["elapsed_ms"] / 1000.0) for t in trs[:10]]
    np.testing.assert_allclose(agent.rollout.gammas[:10], expected, rtol=1e-12)


def test_presets_are_valid_overrides_and_reject_bad_thresholds():
    env = StragglerMitigationEnv("constant-60x28")
    for name, cls in (("a2c", A2C), ("lcpo", LCPO)):
        agent = cls(env, seed=0, **STRAGGLER_OVERRIDES[name])
        assert agent.hp.rollout_steps == 4608 and agent.hp.gae_lambda == 0.95
        assert isinstance(agent.actor.body, PermInvariantNet)
    assert straggler_overrides("lcpo", "agg")["ood_threshold"] == OOD_THRESHOLDS["agg"] == 20.0
    assert straggler_overrides("lcpo", 28)["ood_threshold"] == 28.0
    with pytest.raises(ValueError, match="'sac'"):
        straggler_overrides("sac")
    with pytest.raises(ValueError, match="no OOD detector"):
        straggler_overrides("a2c", 20)
    with pytest.raises(ValueError, match="'huge'"):
        straggler_overrides("lcpo", "huge")
    with pytest.raises(ValueError, match="nan"):
        straggler_overrides("lcpo", float("nan"))
    # the presets do not share state
    straggler_overrides("lcpo")["c_recent"] = 5.0
    assert STRAGGLER_OVERRIDES["lcpo"]["c_recent"] == 0.1


def test_discrete_actions_reach_the_environment_as_timeouts():
    env = StragglerMitigationEnv("constant-60x28")
    agent = A2C(env, seed=0, **_overrides("a2c"))
    obs, _ = env.reset(seed=0)
    seen = set()
    for _ in range(300):
        a = agent.act(obs)
        assert np.ndim(a) == 0 and 0 <= int(a) < 9
        obs, _, _, _, info = env.step(a)
        if not info["forced"]:
            assert info["timeout_ms"] == TIMEOUTS_MS[int(a)]
        seen.add(int(a))
    assert len(seen) > 3  # an untrained policy explores


def _greedy_mean_step_p95(policy, steps=3000, seed=5):
    env = StragglerMitigationEnv("constant-60x28", workload_seed=seed)
    obs, _ = env.reset(seed=seed)
    for _ in range(steps):
        obs = env.step(policy(obs))[0]
    return env.run_metrics()["mean_step_p95_ms"]


@pytest.mark.slow
@pytest.mark.parametrize("agent_cls", [A2C, LCPO])
def test_agents_learn_to_hedge_on_a_stationary_workload(agent_cls):
    """60 req/s, 28 ms sizes: hedging at 3-30 ms halves the tail (spec golden table: 86 vs 190 ms). After
    40,000 online steps (80 updates of 500 steps) the greedy policy beats "never hedge" by a wide margin
    (measured: ~90-100 ms against ~186 ms)."""
    env = StragglerMitigationEnv("constant-60x28")
    agent = agent_cls(env, seed=0, **_overrides(agent_cls.name, rollout_steps=500))
    agent.learn(40_000, reset_condition="never")
    never = _greedy_mean_step_p95(lambda obs: 8)
    learned = _greedy_mean_step_p95(lambda obs: agent.act(obs, deterministic=True))
    assert 150.0 < never < 230.0
    assert learned < 0.75 * never
