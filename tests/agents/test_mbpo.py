"""MBPO: the model cadence, the mixed real/model minibatch, persistence and resume equality through runs (the model
fitting a known linear system is in test_models.py)."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from cl_checks import check_resume_equality, check_save_load_actions

import lcpo.envs  # noqa: F401
from lcpo.agents import AGENTS
from lcpo.agents.mbpo import MBPO


@pytest.fixture(autouse=True)
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


SMALL = {"hidden": [16, 16], "train_every": 1, "batch_size": 40, "buffer_size": 2000, "learning_starts": 100,
         "model_train_every": 100, "model_train_steps": 20, "model_batch_size": 64, "model_hidden": [32],
         "model_members": 3, "rollout_batch": 50, "rollout_length": 2, "model_retain": 3, "real_ratio": 0.25}


def _env():
    return gym.make("lcpo/WindyPendulum-v0", trace="wind-3")


def test_registry_lists_mbpo():
    assert AGENTS["mbpo"] is MBPO


def test_model_rounds_fill_the_model_buffer_and_batches_mix():
    agent = MBPO(_env(), seed=0, **SMALL).learn(450)
    assert agent.model.fits == 4  # steps 100, 200, 300, 400
    # 4 rounds x 50 states x 2 steps, capacity 50 * 2 * 3 = 300
    assert agent.model_replay.total_added == 400 and agent.model_replay.size == 300
    batch = agent.sample_batch(40)
    assert batch["obs"].shape == (40, 9)
    # model transitions never terminate and use gamma; 10 of 40 are real
    assert torch.all(batch["not_terminated"][10:] == 1) and torch.all(batch["gamma"][10:] == agent.hp.gamma)
    real_obs = {tuple(o) for o in agent.replay.get(agent.replay.stored_indices())["obs"].tolist()}
    assert all(tuple(o) in real_obs for o in batch["obs"][:10].tolist())
    # first rollout steps start from real states; second steps from model states (none of them real)
    m = agent.model_replay.get(agent.model_replay.stored_indices())
    from_real = np.array([tuple(o) in real_obs for o in m["obs"].tolist()])
    assert from_real.sum() == 150


def test_all_real_before_the_first_model_round():
    agent = MBPO(_env(), seed=0, **SMALL).learn(99)
    assert agent.model_replay.size == 0
    real_obs = {tuple(o) for o in agent.replay.get(agent.replay.stored_indices())["obs"].tolist()}
    assert all(tuple(o) in real_obs for o in agent.sample_batch(40)["obs"].tolist())


def test_save_load_identical_actions(tmp_path):
    agent, twin = check_save_load_actions(tmp_path, MBPO, SMALL)
    assert twin.model.fits == agent.model.fits and twin.model_replay.total_added == agent.model_replay.total_added
    agent.model_round()
    twin.model_round()
    b1, b2 = agent.sample_batch(40), twin.sample_batch(40)
    for k in b1:
        assert torch.equal(b1[k], b2[k])
    agent.update(b1)
    twin.update(b2)
    for p, q in zip([*agent.actor.parameters(), *agent.model.net.parameters()],
                    [*twin.actor.parameters(), *twin.model.net.parameters()]):
        assert torch.equal(p, q)


def test_interrupted_and_resumed_run_equals_uninterrupted(tmp_path):
    check_resume_equality(tmp_path, "mbpo", {**SMALL, "train_every": 2})


def test_bad_hyperparameters_are_named():
    with pytest.raises(ValueError, match="real_ratio"):
        MBPO(_env(), real_ratio=1.5)
    with pytest.raises(ValueError, match="rollout_length"):
        MBPO(_env(), rollout_length=0)
