"""Benna-Fusi DQN: a chain's dynamics against the analytic update, conservation, coupling to the optimizer,
persistence and resume equality through runs."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from cl_checks import check_resume_equality, check_save_load_actions

import lcpo.envs  # noqa: F401
from lcpo.agents import AGENTS
from lcpo.agents.bfdqn import BennaFusiChain, BennaFusiDQN


@pytest.fixture(autouse=True)
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


SMALL = {"hidden": [16, 16], "train_every": 1, "batch_size": 32, "buffer_size": 2000, "learning_starts": 100, "random_epochs": 1,
         "decay_epochs": 2, "depth": 5, "g1": 0.1}


def _env():
    return gym.make("lcpo/WindyPendulum-v0", trace="wind-3")


def test_registry_lists_bfdqn():
    assert AGENTS["bfdqn"] is BennaFusiDQN


def test_chain_step_matches_hand_computed_update():
    """Depth 3, g1 = 0.5: C = (1, 2, 4), g = (0.5, 0.25, 0.125); u = (1, 0, 0) then (0.5, 0.25, 0) by hand:
    u1 += -0.5 (1 - 0) = -0.5; u2 += (0.5 (1 - 0) - 0.25 (0 - 0)) / 2 = 0.25; u3 += (0 - 0.125 * 0) / 4 = 0.
    Second step from (0.5, 0.25, 0): u1 = 0.5 - 0.5 * 0.25 = 0.375;
    u2 = 0.25 + (0.5 * 0.25 - 0.25 * 0.25) / 2 = 0.28125; u3 = 0 + (0.25 * 0.25 - 0.125 * 0) / 4 = 0.015625."""
    w = torch.zeros(1)
    chain = BennaFusiChain([w], depth=3, g1=0.5)
    torch.testing.assert_close(chain.capacities, torch.tensor([1.0, 2.0, 4.0]))
    torch.testing.assert_close(chain.conductances, torch.tensor([0.5, 0.25, 0.125]))
    w.fill_(1.0)  # an "optimizer step" moved the weight away from its (zero) hidden variables
    chain.step()
    torch.testing.assert_close(w, torch.tensor([0.5]))
    torch.testing.assert_close(chain.hidden[:, 0], torch.tensor([0.25, 0.0]))
    chain.step()
    torch.testing.assert_close(w, torch.tensor([0.375]))
    torch.testing.assert_close(chain.hidden[:, 0], torch.tensor([0.28125, 0.015625]))


def test_chain_conserves_capacity_weighted_sum_without_leak_and_equilibrates():
    rng = np.random.default_rng(0)
    params = [torch.zeros(3, 4), torch.zeros(5)]
    chain = BennaFusiChain(params, depth=6, g1=0.25, leak=False)
    for p in params:
        p.copy_(torch.from_numpy(rng.normal(size=p.shape).astype(np.float32)))
    u0 = torch.cat([torch.cat([p.reshape(-1) for p in params])[None], chain.hidden]).double()
    total = (chain.capacities.double()[:, None] * u0).sum(0)
    for _ in range(20_000):
        chain.step()
    u = torch.cat([torch.cat([p.reshape(-1) for p in params])[None], chain.hidden]).double()
    torch.testing.assert_close((chain.capacities.double()[:, None] * u).sum(0), total, atol=1e-3, rtol=0)
    # equilibrium: every variable at the capacity-weighted mean
    torch.testing.assert_close(u, (total / chain.capacities.double().sum()).expand_as(u), atol=1e-3, rtol=0)


def test_chain_runs_after_every_optimizer_step():
    """After an update, ``u_1 = v - g1 (v - h_2)`` for the post-Adam weight ``v``, and ``h_2`` moved by
    ``(g1 (v - h_2) - g2 (h_2 - h_3)) / 2``: solve the first for ``v`` and check the second."""
    agent = BennaFusiDQN(_env(), seed=0, **SMALL).learn(300)
    assert agent.updates == 201
    old = [p.detach().clone() for p in agent.q.parameters()]
    h = agent.chain.hidden.clone().double()
    agent.update(agent.sample_batch(32))
    u1 = torch.cat([p.detach().reshape(-1) for p in agent.q.parameters()]).double()
    g1, g2 = 0.1, 0.05
    v = (u1 - g1 * h[0]) / (1 - g1)
    assert (v - torch.cat([p.reshape(-1) for p in old]).double()).abs().max() > 1e-6  # Adam moved the weights
    expected_h2 = h[0] + (g1 * (v - h[0]) - g2 * (h[0] - h[1])) / 2
    torch.testing.assert_close(agent.chain.hidden[0].double(), expected_h2, atol=1e-6, rtol=0)


def test_save_load_identical_actions(tmp_path):
    agent, twin = check_save_load_actions(tmp_path, BennaFusiDQN, SMALL)
    assert torch.equal(agent.chain.hidden, twin.chain.hidden)
    b1, b2 = agent.sample_batch(8), twin.sample_batch(8)
    agent.update(b1)
    twin.update(b2)
    assert torch.equal(agent.chain.hidden, twin.chain.hidden)
    for p, q in zip(agent.q.parameters(), twin.q.parameters()):
        assert torch.equal(p, q)


def test_interrupted_and_resumed_run_equals_uninterrupted(tmp_path):
    check_resume_equality(tmp_path, "bfdqn", {**SMALL, "train_every": 2})


def test_bad_hyperparameters_are_named():
    with pytest.raises(ValueError, match="depth"):
        BennaFusiDQN(_env(), depth=1)
    with pytest.raises(ValueError, match="g1"):
        BennaFusiDQN(_env(), g1=0.9)
