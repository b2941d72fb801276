"""Prescient agents: uniform episode starts over the trace, a frozen online phase, hyperparameters, errors."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch
from scipy import stats

import lcpo.envs  # noqa: F401
from lcpo.agents import AGENTS, LCPO
from lcpo.agents.prescient import (
    Prescient,
    PrescientA2C,
    PrescientDDQN,
    PrescientSAC,
    PrescientTRPO,
    RandomTraceStart,
)
from lcpo.contexts.trace import ContextTrace
from lcpo.envs.registration import make_env
from lcpo.optim import flat_params
from lcpo.online.threads import limit_threads

T = 50


@pytest.fixture(autouse=True)
def _one_thread():
    with limit_threads(1):  # torch and BLAS: updates are also called directly, outside learn()
        yield


def _ramp_env(time_limit=200):
    """Windy Pendulum whose wind x at row k is k / T: the applied context identifies the trace row."""
    vals = np.zeros((T, 2))
    vals[:, 0] = np.arange(T) / T
    return make_env("lcpo/WindyPendulum-v0", trace=ContextTrace(vals, "ramp"), max_episode_steps=time_limit)


def test_random_trace_start_applies_uniform_rows():
    env = RandomTraceStart(_ramp_env(), np.random.default_rng(0))
    rows = []
    for i in range(400):
        obs, info = env.reset(seed=0 if i == 0 else None)
        rows.append(round(info["context"][0] * T))
        assert obs[3] == pytest.approx(info["context"][0])  # the observation's newest wind lag is that row
        _, _, _, _, info = env.step(np.array([7]))
        assert round(info["context"][0] * T) == rows[-1]  # the first step applies the start row
    assert rows == env.starts


def test_prescient_training_draws_episode_starts_uniformly_over_the_trace():
    """4,000 training episodes of 4 steps over a 50-row trace: chi-square against the uniform distribution."""
    agent = PrescientA2C(_ramp_env(), seed=3, train_steps=16_000, train_episode_steps=4)
    agent.train()
    starts = agent.train_starts
    # 4,000 episodes, plus the loop's reset after the last one
    assert starts.size == 4_001 and starts.min() >= 0 and starts.max() < T
    counts = np.bincount(starts, minlength=T)
    assert stats.chisquare(counts).pvalue > 1e-3
    # a non-uniform draw (e.g. global time continuing across resets: rows 0, 4, 8, ...) would fail the test
    assert stats.chisquare(np.bincount((np.arange(4_000) * 4) % T, minlength=T)).pvalue < 1e-6
    # training episodes: 4 steps each, and the base agent learned (one A2C update per 200 steps)
    assert [r[3] for r in agent.base.episodes] == [4] * 4_000 and agent.base.updates == 80


def test_online_phase_is_frozen():
    env = make_env("lcpo/WindyPendulum-v0", trace="wind-3")
    agent = PrescientA2C(env, seed=0, train_steps=1000)
    assert not agent.trained
    agent.learn(600)
    assert agent.trained and agent.base.steps == 1000 and agent.base.updates == 5
    params = flat_params(agent.base.actor)
    agent.learn(1000)
    assert agent.base.steps == 1000 and agent.base.updates == 5 and agent.steps == 1600
    assert torch.equal(flat_params(agent.base.actor), params)
    assert len(agent.episodes) == 8 and agent.base.rollout.ptr == 0  # observe() stores nothing


def test_hyperparameters_are_the_base_fields_plus_prescient_ones():
    for cls, base in ((PrescientA2C, "A2C"), (PrescientTRPO, "TRPO"), (PrescientDDQN, "DDQN"),
                      (PrescientSAC, "SAC")):
        names = {f.name for f in dataclasses.fields(cls.Hyperparameters)}
        base_names = {f.name for f in dataclasses.fields(cls.base_class().Hyperparameters)}
        assert names == base_names | {"train_steps", "train_episode_steps", "eval_deterministic"}
        assert cls.base_class().__name__ == base
    assert PrescientTRPO.Hyperparameters().rollout_steps == 3200
    env = make_env("lcpo/WindyPendulum-v0", trace="zero")
    with pytest.raises(ValueError, match="unknown hyperparameter 'trian_steps'"):
        PrescientA2C(env, trian_steps=5)
    with pytest.raises(ValueError, match="train_steps and train_episode_steps must be >= 0"):
        PrescientA2C(env, train_steps=-1)
    with pytest.raises(TypeError, match="Prescient is generic"):
        Prescient(env)


def test_generic_wrapper_over_any_agent():
    cls = Prescient.of(LCPO)
    assert cls.name == "prescient-lcpo"
    agent = cls(make_env("lcpo/WindyPendulum-v0", trace="wind-1"), seed=0, train_steps=400, reservoir_size=500)
    agent.learn(200)
    assert isinstance(agent.base, LCPO) and agent.base.updates == 2 and agent.steps == 200


def _tensors(state, prefix=""):
    """Every tensor of a nested state dict, by dotted key (copies)."""
    out = {}
    for k, v in state.items():
        if isinstance(v, dict):
            out.update(_tensors(v, f"{prefix}{k}."))
        elif isinstance(v, torch.Tensor):
            out[f"{prefix}{k}"] = v.detach().clone()
    return out


@pytest.mark.parametrize("cls", [PrescientDDQN, PrescientSAC])
def test_off_policy_bases_train_and_freeze(cls):
    agent = cls(make_env("lcpo/WindyPendulum-v0", trace="wind-1"), seed=0, train_steps=400, learning_starts=100,
                batch_size=32)
    fresh = _tensors(agent.base.state_dict())
    agent.learn(100)
    trained = _tensors(agent.base.state_dict())
    assert any(not torch.equal(fresh[k], trained[k]) for k in fresh)  # training changed the networks
    agent.learn(300)
    after = _tensors(agent.base.state_dict())
    assert all(torch.equal(trained[k], after[k]) for k in trained)  # the online phase did not
    assert agent.trained and agent.base.steps == 400 and agent.steps == 400
    assert cls.name in AGENTS and AGENTS[cls.name] is cls


def test_environment_without_trace_access_is_refused():
    env = gym.make("lcpo/ContinuingChain-v0", n_states=5)
    with pytest.raises(TypeError, match="random access to the context trace"):
        PrescientA2C(env)


def test_training_paused_by_a_stop_request_and_continued_is_the_uninterrupted_training():
    """Chunked training (a stop request asked every 37 steps, episodes cut at 30 steps) that pauses twice and
    continues equals one uninterrupted call, bit for bit; a paused agent refuses a checkpoint."""
    def make():
        return PrescientA2C(make_env("lcpo/WindyPendulum-v0", trace="wind-3"), seed=1, train_steps=1000,
                            train_episode_steps=30)

    whole = make().train()
    asked = []
    paused = make()
    paused.train(should_stop=lambda: asked.append(1) or len(asked) in (3, 9), poll_steps=37)
    assert not paused.trained and paused.train_steps_done == 3 * 37
    with pytest.raises(RuntimeError, match="stopped at step 111 of 1,000"):
        paused.state_dict()
    paused.train(should_stop=lambda: asked.append(1) or len(asked) in (3, 9), poll_steps=37)
    assert not paused.trained and paused.train_steps_done == 9 * 37
    paused.train()  # to the end, no stop request
    assert paused.trained and paused.train_steps_done == 1000 and paused.train_wall_s > 0
    assert torch.equal(flat_params(paused.base.actor), flat_params(whole.base.actor))
    assert torch.equal(flat_params(paused.base.critic), flat_params(whole.base.critic))
    assert paused.base.episodes == whole.base.episodes and list(paused.train_starts) == list(whole.train_starts)
    assert [r[3] for r in whole.base.episodes][:3] == [30, 30, 30]  # the reset condition held across the chunks
    with pytest.raises(ValueError, match="poll_steps must be an integer >= 1, got 0"):
        make().train(poll_steps=0)
    assert make().train(should_stop=lambda: True, poll_steps=np.int64(100)).train_steps_done == 100


def test_training_cut_short_by_an_exception_keeps_its_count_and_refuses_a_checkpoint(tmp_path):
    """A Ctrl-C inside a chunk (here an exception from the environment at its 130th step) leaves the count at
    the steps taken: no checkpoint of that state, and a later train() stops at train_steps, not beyond."""
    env = make_env("lcpo/WindyPendulum-v0", trace="wind-3")
    agent = PrescientA2C(env, seed=0, train_steps=600)
    calls = [0]
    step = agent.train_env.step

    def failing(action):
        calls[0] += 1
        if calls[0] == 130:
            raise KeyboardInterrupt
        return step(action)

    agent.train_env.step = failing
    with pytest.raises(KeyboardInterrupt):
        agent.train(should_stop=lambda: False, poll_steps=100)
    assert not agent.trained and agent.train_steps_done == 129
    with pytest.raises(RuntimeError, match="stopped at step 129 of 600"):
        agent.state_dict()
    with pytest.raises(RuntimeError, match="stopped at step 129 of 600"):
        agent.save(tmp_path / "saved")
    assert not (tmp_path / "saved").exists()
    agent.train()
    assert agent.trained and agent.base.steps == 600 and agent.train_steps_done == 600


@pytest.mark.parametrize("bad, match", [({"train_steps": -1}, ">= 0, got -1"),
                                        ({"train_steps": 2**53 + 1}, "train_steps must be at most 2\\*\\*53")])
def test_training_lengths_out_of_range_are_refused_naming_the_value(bad, match):
    with pytest.raises(ValueError, match=match):
        PrescientA2C(_ramp_env(), seed=0, **bad)
