"""PT-DQN: the combined Q is the sum of the two networks, the permanent update (distillation, transient decay),
persistence and resume equality through runs."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from cl_checks import check_resume_equality, check_save_load_actions

import lcpo.envs  # noqa: F401
from lcpo.agents import AGENTS
from lcpo.agents.ptdqn import PTDQN
from lcpo.online.loop import Transition


@pytest.fixture(autouse=True)
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


SMALL = {"hidden": [16, 16], "train_every": 1, "batch_size": 32, "buffer_size": 2000, "learning_starts": 100, "random_epochs": 1,
         "decay_epochs": 2, "permanent_every": 100}


def _env():
    return gym.make("lcpo/WindyPendulum-v0", trace="wind-3")


def test_registry_lists_ptdqn():
    assert AGENTS["ptdqn"] is PTDQN


def test_combined_q_is_permanent_plus_transient():
    agent = PTDQN(_env(), seed=0, **SMALL).learn(450)
    assert agent.permanent_updates == 4  # steps 100, 200, 300, 400
    obs = torch.from_numpy(np.random.default_rng(1).normal(size=(64, agent.obs_dim)).astype(np.float32))
    with torch.no_grad():
        q, qp, qt = agent.q(obs), agent.permanent(obs), agent.transient(obs)
    torch.testing.assert_close(q, qp + qt, rtol=0, atol=0)
    assert qp.abs().mean() > 1e-3 and qt.abs().mean() > 1e-3  # both networks contribute
    # the acting path uses the same sum
    for o in obs[:10].numpy():
        with torch.no_grad():
            q_o = agent.q(torch.from_numpy(o)[None])[0].numpy()
        np.testing.assert_allclose(agent.fast_q.logits(o), q_o, atol=1e-5)
        np.testing.assert_array_equal(agent.act(o, deterministic=True), q_o.argmax(-1))


def test_transient_training_leaves_permanent_untouched():
    agent = PTDQN(_env(), seed=0, **{**SMALL, "permanent_every": 10_000}).learn(300)
    fresh = PTDQN(_env(), seed=0, **{**SMALL, "permanent_every": 10_000})
    for p, q in zip(agent.permanent.parameters(), fresh.permanent.parameters()):
        assert torch.equal(p, q)
    assert any(not torch.equal(p, q) for p, q in zip(agent.transient.parameters(), fresh.transient.parameters()))


@pytest.mark.parametrize("decay", [0.0, 0.55])
def test_consolidation_distills_and_decays_transient(decay):
    agent = PTDQN(_env(), seed=0, **{**SMALL, "permanent_every": 10_000, "transient_decay": decay,
                                     "permanent_steps": 200, "permanent_lr": 3e-3}).learn(300)
    before = [p.detach().clone() for p in agent.transient.parameters()]
    obs = agent.sample_batch(256)["obs"]
    with torch.no_grad():
        q_before = agent.q(obs)
        gap_before = (agent.permanent(obs) - q_before).pow(2).mean().item()
    agent.consolidate()
    for p, b in zip(agent.transient.parameters(), before):
        torch.testing.assert_close(p, decay * b, rtol=0, atol=0)
    with torch.no_grad():
        gap_after = (agent.permanent(obs) - q_before).pow(2).mean().item()
    assert gap_after < 0.2 * gap_before  # the permanent network moved toward the combined Q


def test_save_load_identical_actions(tmp_path):
    agent, twin = check_save_load_actions(tmp_path, PTDQN, SMALL)
    assert twin.permanent_updates == agent.permanent_updates > 0
    for p, q in zip(agent.q.parameters(), twin.q.parameters()):
        assert torch.equal(p, q)


def test_interrupted_and_resumed_run_equals_uninterrupted(tmp_path):
    check_resume_equality(tmp_path, "ptdqn", {**SMALL, "train_every": 2})


def test_bad_hyperparameters_are_named():
    with pytest.raises(ValueError, match="transient_decay"):
        PTDQN(_env(), transient_decay=1.5)
    with pytest.raises(ValueError, match="permanent_every"):
        PTDQN(_env(), permanent_every=0)
    with pytest.raises(ValueError, match="non-finite reward"):
        PTDQN(_env()).observe(Transition(np.zeros(9, np.float32), np.zeros(1, int), float("nan"),
                                         np.zeros(9, np.float32), False, False))
