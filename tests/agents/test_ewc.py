"""Online EWC on SAC: the Fisher is the mean squared per-sample gradient, the penalty enters the actor's
gradient exactly, the running averages, persistence and resume equality through runs."""

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import torch
from cl_checks import check_resume_equality
from torch.func import functional_call

import lcpo.envs  # noqa: F401
from lcpo.agents import AGENTS
from lcpo.agents.ewc import EWC, diagonal_fisher
from lcpo.agents.sac import finite_log_probs
from lcpo.online.run import RunConfig, execute


@pytest.fixture(autouse=True)
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


SMALL = {"hidden": [16, 16], "train_every": 1, "batch_size": 32, "buffer_size": 2000, "learning_starts": 100}


def test_registry_lists_ewc():
    assert AGENTS["ewc"] is EWC


def test_fisher_of_one_parameter_model_is_mean_squared_gradient():
    # loss_b(w) = (w x_b - y_b)^2, d/dw = 2 x_b (w x_b - y_b)
    x = torch.tensor([1.0, -2.0, 0.5, 3.0])
    y = torch.tensor([0.0, 1.0, 2.0, -1.0])
    w = 0.7
    f = diagonal_fisher(lambda p, xb, yb: (p["w"] * xb - yb) ** 2, {"w": torch.tensor(w)}, x, y)
    g = 2 * x * (w * x - y)
    mean_sq = float((g ** 2).mean())
    sq_mean = float(g.mean() ** 2)
    assert float(f["w"]) == pytest.approx(mean_sq, rel=1e-6)
    assert abs(float(f["w"]) - sq_mean) > 1.0  # it is not the square of the mean gradient
    assert f["w"].shape == ()


def test_fisher_rejects_bad_batches():
    with pytest.raises(ValueError, match="batch size"):
        diagonal_fisher(lambda p, a, b: p["w"] * a * b, {"w": torch.tensor(1.0)}, torch.ones(2), torch.ones(3))
    with pytest.raises(ValueError, match="at least one batch"):
        diagonal_fisher(lambda p: p["w"], {"w": torch.tensor(1.0)})


def test_agent_fisher_equals_loop_over_samples():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    agent = EWC(env, seed=0, hidden=(8,))
    obs = torch.randn(5, 9)
    actions = torch.randint(0, 15, (5, 1))
    fisher = agent.policy_fisher(obs, actions)
    sq = {k: torch.zeros_like(p) for k, p in agent.actor.named_parameters()}
    for o, a in zip(obs, actions):
        params = {k: p.detach().clone().requires_grad_(True) for k, p in agent.actor.named_parameters()}
        logp = finite_log_probs(functional_call(agent.actor, params, (o[None],)))[0]
        nll = -logp.gather(-1, a[:, None]).sum()
        for k, g in zip(params, torch.autograd.grad(nll, list(params.values()))):
            sq[k] += g ** 2 / 5
    for k, ref in sq.items():
        torch.testing.assert_close(fisher[k], ref)


def test_penalty_gradient_enters_actor_backward():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    agent = EWC(env, seed=0, hidden=(8,), ewc_alpha=3.0)
    gen = torch.Generator().manual_seed(0)
    for k, p in agent.actor.named_parameters():
        agent.fisher[k].copy_(torch.rand(p.shape, generator=gen))
        agent.anchor[k].copy_(p.detach() + torch.randn(p.shape, generator=gen))
    obs = torch.randn(4, 9)
    loss = agent.actor(obs).square().mean()
    loss.backward()
    params = {k: p.detach().clone().requires_grad_(True) for k, p in agent.actor.named_parameters()}
    ref_loss = functional_call(agent.actor, params, (obs,)).square().mean()
    ref_loss = ref_loss + 3.0 * sum((agent.fisher[k] * (v - agent.anchor[k]) ** 2).sum() for k, v in params.items())
    ref = torch.autograd.grad(ref_loss, list(params.values()))
    for (k, p), g in zip(agent.actor.named_parameters(), ref):
        torch.testing.assert_close(p.grad, g)
    expected = 3.0 * sum(float((agent.fisher[k] * (v.detach() - agent.anchor[k]) ** 2).sum())
                         for k, v in params.items())
    assert float(agent.penalty()) == pytest.approx(expected, rel=1e-5)


def test_online_ewc_fisher_and_anchor_over_two_updates_by_hand():
    """Schwarz et al. 2018 (online EWC): F <- gamma F + F_new, so after two consolidations F = gamma F_1 + F_2
    (not the averaged (1 - gamma) gamma F_1 + (1 - gamma) F_2); the anchor is the running average
    gamma theta* + (1 - gamma) theta."""
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    gamma = 0.9
    agent = EWC(env, seed=0, ewc_beta=gamma, **SMALL)
    agent.learn(99)  # no update yet
    a0 = {k: v.clone() for k, v in agent.anchor.items()}
    assert all(float(v.abs().sum()) == 0.0 for v in agent.fisher.values())
    batch_rng = np.random.Generator(np.random.PCG64())
    batch_rng.bit_generator.state = agent.replay.state_dict()["rng"]

    def update_once():
        """One more step and its update; returns (F_new at the updated parameters, the updated parameters)."""
        agent.learn(1)
        idx = agent.replay.total_added - agent.replay.size + batch_rng.integers(agent.replay.size, size=32)
        b = agent.get_batch(idx)
        return agent.policy_fisher(b["obs"], b["actions"]), {k: p.detach().clone()
                                                              for k, p in agent.actor.named_parameters()}

    f1, th1 = update_once()
    assert agent.updates == 1
    for k in f1:
        torch.testing.assert_close(agent.fisher[k], f1[k], rtol=0, atol=0)  # gamma * 0 + F_1
        torch.testing.assert_close(agent.anchor[k], gamma * a0[k] + (1 - gamma) * th1[k])
    f2, th2 = update_once()
    assert agent.updates == 2
    for k in f1:
        assert float(f1[k].abs().sum()) > 0 and float(f2[k].abs().sum()) > 0
        torch.testing.assert_close(agent.fisher[k], gamma * f1[k] + f2[k])
        torch.testing.assert_close(agent.anchor[k], gamma * (gamma * a0[k] + (1 - gamma) * th1[k])
                                   + (1 - gamma) * th2[k])
        # not the averaged rule, which would be (1 - gamma) times smaller in steady state
        assert not torch.allclose(agent.fisher[k], gamma * (1 - gamma) * f1[k] + (1 - gamma) * f2[k])
    expected = agent.hp.ewc_alpha * sum(float((agent.fisher[k] * (p.detach() - agent.anchor[k]) ** 2).sum())
                                        for k, p in agent.actor.named_parameters())
    assert float(agent.penalty()) == pytest.approx(expected, rel=1e-5)


def test_save_load_gives_identical_actions_and_continuation(tmp_path):
    env = gym.make("lcpo/WindyPendulum-v0", trace="wind-3")
    agent = EWC(env, seed=3, **SMALL).learn(500)
    agent.save(tmp_path / "a")
    twin = EWC.load(tmp_path / "a", gym.make("lcpo/WindyPendulum-v0", trace="wind-3"))
    for k in agent.fisher:
        assert torch.equal(agent.fisher[k], twin.fisher[k]) and torch.equal(agent.anchor[k], twin.anchor[k])
    obs = np.random.default_rng(0).normal(size=(300, 9)).astype(np.float32)
    for o in obs:
        np.testing.assert_array_equal(agent.act(o), twin.act(o))
    agent.update(agent.sample_batch(8))
    twin.update(twin.sample_batch(8))
    for p, q in zip(agent.actor.parameters(), twin.actor.parameters()):
        assert torch.equal(p, q)


def test_interrupted_and_resumed_run_equals_uninterrupted(tmp_path):
    check_resume_equality(tmp_path, "ewc", {**SMALL, "train_every": 2}, steps=2000, stop_at=1000, checkpoint_every=500)
    diag = pd.read_csv(tmp_path / "full" / "diagnostics.csv")
    assert "train/ewc_penalty" in diag.columns and diag["train/ewc_penalty"].notna().any()


def test_bad_hyperparameters_are_named():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    with pytest.raises(ValueError, match="ewc_beta"):
        EWC(env, ewc_beta=1.0)
    with pytest.raises(ValueError, match="ewc_alpha"):
        EWC(env, ewc_alpha=-1.0)
    with pytest.raises(ValueError, match="fisher_samples"):
        EWC(env, fisher_samples=0)


@pytest.mark.slow
def test_runs_50k_steps_on_windy_pendulum(tmp_path):
    cfg = RunConfig(trace="wind-1", agent="ewc", steps=50_000, seed=0, checkpoint_every=0)
    summary = execute(cfg, tmp_path / "run")
    assert summary["steps"] == 50_000 and np.isfinite(summary["lifelong_return"])
