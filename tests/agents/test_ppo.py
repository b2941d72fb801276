"""PPO: the clipped surrogate's gradient (analytic), early stop on KL, minibatch epochs."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import lcpo.envs  # noqa: F401
from lcpo.agents.ppo import PPO, clipped_surrogate, normalize_advantages
from lcpo.online.loop import Transition
from lcpo.online.threads import limit_threads


@pytest.fixture(autouse=True)
def _one_thread():
    with limit_threads(1):  # torch and BLAS: updates are also called directly, outside learn()
        yield


def _grad(ratio, adv, clip=0.2):
    logp_old = torch.tensor([-1.0], dtype=torch.float64)
    logp = (logp_old + np.log(ratio)).clone().requires_grad_(True)
    clipped_surrogate(logp, logp_old, torch.tensor([adv], dtype=torch.float64), clip).backward()
    return float(logp.grad[0])


@pytest.mark.parametrize("ratio, adv, flat", [
    (1.5, 1.0, True),    # above 1 + eps with A > 0: no incentive to move further
    (1.5, -1.0, False),  # above 1 + eps with A < 0: still pushed down (the pessimistic, unclipped term)
    (0.5, -1.0, True),   # below 1 - eps with A < 0: no incentive to move further
    (0.5, 1.0, False),   # below 1 - eps with A > 0: still pushed up
    (1.1, 1.0, False),   # inside the clip range: the plain ratio objective
    (0.9, -1.0, False),
])
def test_clip_zeroes_the_gradient_exactly_for_the_right_sign(ratio, adv, flat):
    g = _grad(ratio, adv)
    if flat:
        assert g == 0.0
    else:
        # d(-r A)/d logp = -r A
        assert g == pytest.approx(-ratio * adv, rel=1e-12)


def test_clipped_surrogate_masks_and_validates():
    logp_old = torch.zeros(3)
    logp = torch.log(torch.tensor([1.0, 2.0, 1.1]))
    adv = torch.tensor([1.0, 1.0, 2.0])
    # masked mean over entries 0 and 2: -(1 * 1 + 1.1 * 2) / 2
    assert float(clipped_surrogate(logp, logp_old, adv, 0.2, torch.tensor([1.0, 0.0, 1.0]))) == pytest.approx(-1.6)
    with pytest.raises(ValueError, match="clip must be in"):
        clipped_surrogate(logp, logp_old, adv, 1.5)
    with pytest.raises(ValueError, match="shapes differ"):
        clipped_surrogate(logp, logp_old[:2], adv, 0.2)


def _update(**kw):
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    agent = PPO(env, seed=1, **kw)
    obs, _ = env.reset(seed=1)
    rng = np.random.default_rng(1)
    while agent.rollout.ptr < agent.rollout.size - 1:
        a = agent.act(obs)
        nobs, r, te, tr, _ = env.step(a)
        agent.rollout.add(obs, a, r + 50.0 * rng.normal(), nobs, te, tr, agent.hp.gamma)
        obs = env.reset()[0] if te or tr else nobs
    return agent.observe(Transition(obs, agent.act(obs), -1.0, obs, False, False))


def test_early_stop_on_kl():
    tight = _update(max_kl=1e-9, actor_lr=1e-2)
    assert tight["train/early_stop"] == 1.0 and tight["train/iterations"] == 1.0
    assert tight["train/kl"] > 1e-9
    mid = _update(max_kl=1e-3, actor_lr=1e-2)
    assert mid["train/early_stop"] == 1.0 and 1.0 <= mid["train/iterations"] < 30.0
    loose = _update(max_kl=1e9, actor_lr=1e-2)
    assert loose["train/early_stop"] == 0.0 and loose["train/iterations"] == 30.0
    assert loose["train/kl"] > mid["train/kl"]


def test_minibatch_epochs_count_steps():
    d = _update(max_kl=1e9, epochs=3, minibatch_size=64)  # 200 states: minibatches of 64, 64, 64, 8
    assert d["train/iterations"] == 3 * 4


def test_bad_settings_are_named():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    with pytest.raises(ValueError, match="clip must be in"):
        PPO(env, clip=0.0)
    with pytest.raises(ValueError, match="max_kl must be positive"):
        PPO(env, max_kl=-1.0)
    with pytest.raises(ValueError, match="epochs >= 1"):
        PPO(env, epochs=0)


# ------------------------------------------------------------- advantage statistics use the loss's steps only
def test_normalize_advantages_uses_only_unmasked_steps():
    out = normalize_advantages(torch.tensor([1.0, 3.0, -100.0, -100.0]), torch.tensor([1.0, 1.0, 0.0, 0.0]))
    np.testing.assert_allclose(out[:2].numpy(), [-1 / np.sqrt(2), 1 / np.sqrt(2)], rtol=1e-6)
    assert out[2:].tolist() == [0.0, 0.0]
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        adv = torch.randn(40, generator=g) * 5 + 3
        mask = (torch.rand(40, generator=g) < 0.6).float()
        sub = adv[mask > 0]
        ref = (sub - sub.mean()) / (sub.std() + 1e-8)
        out = normalize_advantages(adv, mask)
        torch.testing.assert_close(out[mask > 0], ref)
        assert float(out[mask > 0].mean()) == pytest.approx(0.0, abs=1e-5)
        assert float(out[mask > 0].std()) == pytest.approx(1.0, abs=1e-5)
        wild = torch.where(mask > 0, adv, torch.full_like(adv, 1e6))  # masked values change nothing
        assert torch.equal(normalize_advantages(wild, mask), out)
    a = torch.randn(10, generator=g)
    torch.testing.assert_close(normalize_advantages(a), (a - a.mean()) / (a.std() + 1e-8))  # no mask: all
    one = torch.tensor([2.0, 5.0, 7.0])
    assert torch.equal(normalize_advantages(one, torch.tensor([0.0, 1.0, 0.0])), one)  # < 2 steps: unchanged
    with pytest.raises(ValueError, match="shapes differ"):
        normalize_advantages(one, torch.ones(2))


@pytest.mark.parametrize("cls_name", ["ppo", "lcpo-p"])
def test_update_ignores_the_advantages_of_forced_steps(cls_name, monkeypatch):
    """PPO and LCPO-P: with forced (masked) steps, the update is the same whatever their advantages are, and an
    unmasked step's advantage does change it."""
    from lcpo.agents import AGENTS

    def run(forced_adv=None, bump_unmasked=False):
        env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        agent = AGENTS[cls_name](env, seed=1, epochs=3, **({"reservoir_size": 500} if cls_name == "lcpo-p" else {}))
        obs, _ = env.reset(seed=1)
        rng = np.random.default_rng(1)
        while agent.rollout.ptr < agent.rollout.size - 1:
            a = agent.act(obs)
            nobs, r, te, tr, _ = env.step(a)
            forced = agent.rollout.ptr % 3 == 0
            agent.rollout.add(obs, a, r + 5.0 * rng.normal(), nobs, te, tr, agent.hp.gamma, not forced)
            obs = env.reset()[0] if te or tr else nobs
        batch_fn = agent._batch

        def patched(idx):  # the batch of the seed slots idx: (1, T) tensors for the single agent
            b = batch_fn(idx)
            if forced_adv is not None:
                b["adv"] = torch.where(b["mask"] > 0, b["adv"], torch.full_like(b["adv"], forced_adv))
            if bump_unmasked:
                b["adv"] = b["adv"].clone()
                b["adv"][0, 1] += 3.0
            return b

        monkeypatch.setattr(agent, "_batch", patched)
        agent.observe(Transition(obs, agent.act(obs), -1.0, obs, False, False, {"forced": True}))
        assert agent.updates == 1
        return torch.cat([p.detach().reshape(-1) for p in agent.actor.parameters()])

    base = run()
    assert torch.equal(run(forced_adv=-100.0), base)
    assert torch.equal(run(forced_adv=1e4), base)
    assert not torch.equal(run(bump_unmasked=True), base)
