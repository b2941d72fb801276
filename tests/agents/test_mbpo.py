"""MBPO: the model cadence, the mixed real/model minibatch, persistence and resume equality through runs (the model
fitting a known linear system is in test_models.py)."""

import math

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


# ---------------------------------------------------------------- model rollouts terminate by the env's rule
def _hopper_like(n, rng):
    obs = np.zeros((n, 17), np.float32)
    obs[:, 0] = 1.25
    obs[:, 5:11] = rng.uniform(-5, 5, (n, 6))
    return obs


def _terminal_cases(env_id):
    """``(next_obs (8, obs_dim), expected terminal (8,))`` predicted by a fake model: just inside / just outside
    each limit of the environment's rule, negative values."""
    rng = np.random.default_rng(0)
    if env_id == "lcpo/WindyHopper-v0":
        nxt = _hopper_like(8, rng)
        nxt[1, 0] = 0.6          # torso too low
        nxt[2, 1] = 0.25         # torso angle
        nxt[3, 1] = -0.25
        nxt[4, 8] = -150.0       # a state entry out of (-100, 100)
        nxt[5, 0] = 0.7001       # just inside
        nxt[6, 1] = -0.1999
        nxt[7, 9] = 99.9
        return nxt, np.array([0, 1, 1, 1, 1, 0, 0, 0], bool)
    if env_id == "lcpo/WindyInvertedPendulum-v0":
        nxt = np.zeros((8, 10), np.float32)
        nxt[:, 1] = [0.0, 0.25, -0.25, 0.2, -0.2, 0.2001, -0.2001, 0.1]
        nxt[7, 0] = -150.0  # the cart position has no limit
        return nxt, np.array([0, 1, 1, 0, 0, 1, 1, 0], bool)
    q = np.array([[0.0, 0.0], [math.pi, 0.0], [-1.2, -0.5], [-0.3, 0.1], [0.0, 1.0], [0.0, -1.0], [0.5, 0.5],
                  [-0.5, -0.5]])
    nxt = np.zeros((8, 17), np.float32)
    nxt[:, 1:3], nxt[:, 3:5] = np.sin(q), np.cos(q)
    y = 0.6 * (np.cos(q[:, 0]) + np.cos(q.sum(1)))
    return nxt, ~(y > 1.0)


@pytest.mark.parametrize("env_id", ["lcpo/WindyHopper-v0", "lcpo/WindyInvertedPendulum-v0",
                                    "lcpo/WindyInvertedDoublePendulum-v0"])
def test_model_rollouts_terminate_by_the_environment_rule(env_id, monkeypatch):
    env = gym.make(env_id)
    agent = MBPO(env, seed=0, **{**SMALL, "rollout_batch": 8, "rollout_length": 3})
    obs_dim = env.observation_space.shape[0]
    rng = np.random.default_rng(1)
    start = np.zeros((20, obs_dim), np.float32)
    if env_id == "lcpo/WindyHopper-v0":
        start = _hopper_like(20, rng)
    agent.replay.add_batch(start, np.zeros((20, agent.action_dims), np.int64), np.zeros(20), start,
                           np.zeros(20, bool), np.zeros(20, bool))
    nxt, expected = _terminal_cases(env_id)
    assert expected.any() and not expected.all()
    calls = []

    def fake_sample(obs, act, rng):
        calls.append(obs.shape[0])
        return nxt[: obs.shape[0]].copy(), np.ones(obs.shape[0])

    monkeypatch.setattr(agent.model, "fit", lambda *a, **k: 0.0)
    monkeypatch.setattr(agent.model, "sample", fake_sample)
    diag = agent.model_round()
    m = agent.model_replay.get(agent.model_replay.stored_indices())
    np.testing.assert_array_equal(m["terminated"][:8], expected)  # first model step: the rule, state by state
    np.testing.assert_array_equal(m["terminated"], env.unwrapped.termination_fn(m["next_obs"]))
    # rollouts go on only from non-terminal predicted states
    assert calls[0] == 8 and calls[1] == int((~expected).sum())
    assert diag["train/model_terminal_fraction"] == pytest.approx(m["terminated"].mean())
    batch = agent.sample_batch(40)
    fake = batch["not_terminated"][round(agent.hp.real_ratio * 40):]
    assert fake.min() == 0.0  # terminal model transitions do not bootstrap


def test_environment_without_a_rule_warns():
    class NoRule(gym.Wrapper):
        @property
        def unwrapped(self):
            return self  # hides the pendulum's declared rule

    with pytest.warns(UserWarning, match="declares no termination_fn"):
        agent = MBPO(NoRule(_env()), seed=0, **SMALL)
    assert not agent.model_terminated(np.zeros((3, 9), np.float32)).any()
