"""LCPO and TRPO (every agent whose policy step solves with conjugate gradient) survive a Fisher-vector product
that is not positive definite or is NaN: the policy step is skipped (actor bit-identical), the skip is recorded
in the diagnostics, and the run goes on."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from test_a2c_lcpo import _fill_rollout, _lcpo_with_anchors

import lcpo.agents.lcpo as lcpo_module
import lcpo.agents.trpo as trpo_module
import lcpo.envs  # noqa: F401
from lcpo.agents.trpo import TRPO
from lcpo.online.loop import Transition
from lcpo.optim import flat_params

BAD_FVPS = {
    "nan": lambda good: (lambda v: torch.full_like(v, float("nan"))),
    "negative": lambda good: (lambda v: -good(v)),
    "inf": lambda good: (lambda v: good(v) * float("inf")),
}


def _lcpo():
    agent, env = _lcpo_with_anchors()
    return agent, env, lcpo_module


def _trpo():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    return TRPO(env, seed=0, rollout_steps=200), env, trpo_module


@pytest.mark.parametrize("kind", list(BAD_FVPS))
@pytest.mark.parametrize("make", [_lcpo, _trpo], ids=["lcpo", "trpo"])
def test_unusable_fisher_skips_the_update_and_the_run_goes_on(make, kind, monkeypatch):
    agent, env, module = make()
    real_make_fvp = module.make_fvp
    monkeypatch.setattr(module, "make_fvp", lambda *a, **k: BAD_FVPS[kind](real_make_fvp(*a, **k)))
    _fill_rollout(agent, env)
    before = flat_params(agent.actor)
    critic_before = flat_params(agent.critic)
    o = np.asarray(agent.rollout.obs[agent.rollout.ptr - 1])
    diag = agent.observe(Transition(o, agent.act(o), -1.0, o, False, False))  # must not raise
    assert agent.updates == 1
    assert diag["train/constrained"] == 1.0  # LCPO found anchors: the CG path ran
    assert diag["train/skipped_update"] == 1.0 and diag["train/line_search_ok"] == 0.0
    assert torch.equal(flat_params(agent.actor), before)  # the policy step was skipped
    assert not torch.equal(flat_params(agent.critic), critic_before)  # the rest of the update happened
    assert all(np.isfinite(v) for v in diag.values())
    # the run goes on, and with a usable Fisher the next update steps again
    monkeypatch.setattr(module, "make_fvp", real_make_fvp)
    agent.learn(200)
    assert agent.updates == 2
    assert not torch.equal(flat_params(agent.actor), before)


@pytest.mark.parametrize("make", [_lcpo, _trpo], ids=["lcpo", "trpo"])
def test_usable_fisher_is_not_a_skip(make):
    agent, env, _ = make()
    _fill_rollout(agent, env)
    o = np.asarray(agent.rollout.obs[agent.rollout.ptr - 1])
    diag = agent.observe(Transition(o, agent.act(o), -1.0, o, False, False))
    assert diag["train/skipped_update"] == 0.0
