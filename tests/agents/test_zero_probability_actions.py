"""Every agent with a categorical actor learns with zero-probability actions (an action-masking actor whose logits
are ``-inf`` for some bins): losses, diagnostics and parameters stay finite, and masked bins are never taken."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import lcpo.envs  # noqa: F401
from lcpo.agents import A2C, CLEAR, LCPO, LCPOP, PPO, SAC, TRPO
from lcpo.agents.nets import make_fast_policy

MASKED_BINS = (0, 3, 14)  # of 15 torques: impossible actions


class MaskedBody(nn.Module):
    """``body(x) + mask``: an action-masking actor (mask 0 or -inf per logit)."""

    def __init__(self, body: nn.Module, out: int):
        super().__init__()
        self.body = body
        mask = torch.zeros(out)
        mask[list(MASKED_BINS)] = -math.inf
        self.register_buffer("mask", mask)

    def forward(self, x):
        return self.body(x) + self.mask


def _mask_actor(agent):
    actor = agent.actor
    actor.body = MaskedBody(actor.body, actor.dims * actor.bins)
    agent.fast_actor = make_fast_policy(actor)  # torch inference through the mask
    return agent


def _lcpo_reservoir(agent):
    # past states under a strong wind: OOD anchors for the recent zero-wind batches
    rng = np.random.default_rng(0)
    past = np.zeros((2000, 9), np.float32)
    th = rng.uniform(-np.pi, np.pi, 2000)
    past[:, 0], past[:, 1], past[:, 2] = np.cos(th), np.sin(th), rng.uniform(-8, 8, 2000)
    past[:, 3:] = 3.0
    agent.reservoir.add_batch(past)
    return agent


CASES = {
    "a2c": (A2C, {"entropy_coef": 0.01}),
    "ppo": (PPO, {"entropy_coef": 0.01, "epochs": 3}),
    "trpo": (TRPO, {"rollout_steps": 200}),
    "lcpo": (LCPO, {"reservoir_size": 2000}),
    "lcpo-p": (LCPOP, {"reservoir_size": 2000, "epochs": 3}),
    "clear": (CLEAR, {"replay_windows": 4, "entropy_coef": 0.01}),
    "sac": (SAC, {"learning_starts": 100, "buffer_size": 1000, "batch_size": 32, "train_every": 50,
                  "hidden": [16, 16]}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_agent_learns_finitely_with_minus_inf_logits(name):
    cls, kw = CASES[name]
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    agent = _mask_actor(cls(env, seed=0, **kw))
    if name in ("lcpo", "lcpo-p"):
        _lcpo_reservoir(agent)
    diags = []
    agent.learn(600, callback=lambda step, d: diags.append(d))
    assert diags, "no update ran"
    for d in diags:
        bad = {k: v for k, v in d.items() if not math.isfinite(v)}
        assert not bad, bad
    for p in agent.actor.parameters():
        assert torch.isfinite(p).all()
    if name == "lcpo":
        assert agent.constrained_updates > 0  # the KL-constrained path (autograd FVP through the mask) ran
    if name == "lcpo-p":
        assert agent.constrained_updates > 0
    # the masked bins are never taken
    taken = np.array([agent.act(np.zeros(9, np.float32)) for _ in range(300)]).reshape(-1)
    assert not set(taken.tolist()) & set(MASKED_BINS)
    with torch.no_grad():
        logp = agent.actor.log_probs(torch.zeros(3, 9))
    assert torch.isinf(logp[..., list(MASKED_BINS)]).all()
