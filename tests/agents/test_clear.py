"""CLEAR: episode splitting, reduction to V-trace actor-critic on on-policy data without cloning, zero cloning
losses while the policy is unchanged, persistence and resume equality through runs."""

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import torch
from cl_checks import check_resume_equality

import lcpo.envs  # noqa: F401
from lcpo.agents import AGENTS
from lcpo.agents.clear import CLEAR, split_episodes
from lcpo.online.loop import Transition
from lcpo.agents.nets import CategoricalPolicy
from lcpo.online.run import RunConfig, execute


@pytest.fixture(autouse=True)
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_registry_lists_clear():
    assert AGENTS["clear"] is CLEAR


def test_split_episodes():
    term = np.array([0, 0, 1, 0, 0, 0, 0], bool)
    trunc = np.array([0, 0, 0, 0, 1, 0, 0], bool)
    row, col = split_episodes(term, trunc)
    assert row.tolist() == [0, 0, 0, 1, 1, 2, 2] and col.tolist() == [0, 1, 2, 0, 1, 0, 1]
    with pytest.raises(ValueError, match="1-D"):
        split_episodes(np.zeros(3, bool), np.zeros(2, bool))


def _fill(agent, n, seed=0):
    """``n`` transitions of a contiguous stream with a termination at step 5, a truncation at 12, a per-step
    discount of 0.5 at step 8 (no update runs while ``n < rollout_steps``)."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n + 1, agent.obs_dim)).astype(np.float32)
    actions = rng.integers(0, agent.action_bins, size=(n, agent.action_dims))
    rewards = rng.normal(size=n)
    term = np.zeros(n, bool)
    trunc = np.zeros(n, bool)
    term[5], trunc[12] = True, True
    gam = np.full(n, agent.hp.gamma)
    gam[8] = 0.5
    for t in range(n):
        info = {"gamma": 0.5} if t == 8 else {}
        agent.observe(Transition(obs[t], actions[t], float(rewards[t]), obs[t + 1], bool(term[t]), bool(trunc[t]),
                                 info))
    return obs, actions, rewards, term, trunc, gam


def test_on_policy_without_cloning_is_vtrace_actor_critic():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    n = 19
    agent = CLEAR(env, seed=0, rollout_steps=20, gamma=0.9, policy_cloning=0.0, value_cloning=0.0, hidden=(8,),
                  normalize_returns=False)
    obs, actions, rewards, term, trunc, gam = _fill(agent, n)
    assert agent.updates == 0
    loss = agent.losses(agent.rollout_windows(), None)
    agent.actor.zero_grad()
    agent.critic.zero_grad()
    (loss["actor"] + loss["critic"]).backward()
    grads = [p.grad.clone() for p in [*agent.actor.parameters(), *agent.critic.parameters()]]
    # hand-built V-trace A2C: on-policy V-trace = n-step return to the end of each episode's part of the rollout
    with torch.no_grad():
        v = agent.critic(torch.from_numpy(obs[:n])).double().numpy()
        nv = agent.critic(torch.from_numpy(obs[1:])).double().numpy()
    g = np.zeros(n)
    for t in range(n - 1, -1, -1):
        if term[t]:
            g[t] = rewards[t]
        elif trunc[t] or t == n - 1:
            g[t] = rewards[t] + gam[t] * nv[t]
        else:
            g[t] = rewards[t] + gam[t] * g[t + 1]
    adv = torch.tensor(g - v, dtype=torch.float32)
    ret = torch.tensor(g, dtype=torch.float32)
    o = torch.from_numpy(obs[:n])
    logp = CategoricalPolicy.log_prob_of(agent.actor.log_probs(o), torch.from_numpy(actions))
    ref_actor = -(adv * logp).mean()
    ref_critic = torch.nn.functional.mse_loss(agent.critic(o), ret)
    torch.testing.assert_close(loss["actor"], ref_actor)
    torch.testing.assert_close(loss["critic"], ref_critic)
    agent.actor.zero_grad()
    agent.critic.zero_grad()
    (ref_actor + ref_critic).backward()
    for a, b in zip(grads, [p.grad for p in [*agent.actor.parameters(), *agent.critic.parameters()]]):
        torch.testing.assert_close(a, b)


def test_replay_of_unchanged_policy_has_zero_cloning_loss_and_unit_ratios():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    agent = CLEAR(env, seed=0, rollout_steps=20, replay_windows=6, replay_window=4, hidden=(8,))
    _fill(agent, 19)
    new = agent.rollout_windows()
    agent._store(new)
    replay = agent.replay_batch()
    assert replay["mask"].shape == (6, 4)
    with torch.no_grad():
        cur = CategoricalPolicy.log_prob_of(agent.actor.log_probs(torch.from_numpy(replay["obs"]).reshape(24, -1)),
                                            torch.from_numpy(replay["actions"]).reshape(24, -1)).reshape(6, 4)
    np.testing.assert_allclose(np.where(replay["mask"], cur.double().numpy() - replay["logp"], 0.0), 0.0,
                               atol=1e-6)
    loss = agent.losses(new, replay)
    assert abs(loss["policy_cloning"].item()) < 1e-6 and loss["value_cloning"].item() < 1e-10
    # after the actor moves, the KL to the behaviour policy is positive and enters the actor loss with its weight
    with torch.no_grad():
        for p in agent.actor.parameters():
            p.add_(0.3)
    loss = agent.losses(new, replay)
    assert loss["policy_cloning"].item() > 1e-4
    torch.testing.assert_close(loss["actor"], loss["policy"] + 0.01 * loss["policy_cloning"])
    torch.testing.assert_close(loss["critic"], loss["value"] + 0.005 * loss["value_cloning"])


def test_save_load_gives_identical_actions_and_continuation(tmp_path):
    env = gym.make("lcpo/WindyPendulum-v0", trace="wind-3")
    agent = CLEAR(env, seed=3, hidden=(16, 16)).learn(700)
    agent.save(tmp_path / "a")
    twin = CLEAR.load(tmp_path / "a", gym.make("lcpo/WindyPendulum-v0", trace="wind-3"))
    assert twin.replay.total_added == 600 and twin.rollout.ptr == 100
    obs = np.random.default_rng(0).normal(size=(300, 9)).astype(np.float32)
    for o in obs:
        np.testing.assert_array_equal(agent.act(o), twin.act(o))
    for t in range(100):  # complete the rollout with identical transitions: both update
        a1, a2 = agent.act(obs[t]), twin.act(obs[t])
        np.testing.assert_array_equal(a1, a2)
        d1 = agent.observe(Transition(obs[t], a1, float(t % 3), obs[t + 1], False, t == 50, {}))
        d2 = twin.observe(Transition(obs[t], a2, float(t % 3), obs[t + 1], False, t == 50, {}))
    assert agent.updates == twin.updates == 4 and d1 == d2
    for p, q in zip([*agent.actor.parameters(), *agent.critic.parameters()],
                    [*twin.actor.parameters(), *twin.critic.parameters()]):
        assert torch.equal(p, q)


def test_interrupted_and_resumed_run_equals_uninterrupted(tmp_path):
    check_resume_equality(tmp_path, "clear", {"hidden": [16, 16], "buffer_size": 1000}, steps=3000, stop_at=1500, checkpoint_every=500)
    diag = pd.read_csv(tmp_path / "full" / "diagnostics.csv")
    assert diag["train/policy_cloning"].max() > 0


def test_bad_hyperparameters_are_named():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    with pytest.raises(ValueError, match="policy_cloning"):
        CLEAR(env, policy_cloning=-1.0)
    with pytest.raises(ValueError, match="replay_window"):
        CLEAR(env, replay_window=0)
    with pytest.raises(ValueError, match="rho_bar"):
        CLEAR(env, rho_bar=0.0)


@pytest.mark.slow
def test_runs_50k_steps_on_windy_pendulum(tmp_path):
    cfg = RunConfig(trace="wind-1", agent="clear", steps=50_000, seed=0, checkpoint_every=0)
    summary = execute(cfg, tmp_path / "run")
    assert summary["steps"] == 50_000 and np.isfinite(summary["lifelong_return"])


def test_replay_windows_zero_disables_replay():
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    agent = CLEAR(env, seed=0, replay_windows=0, hidden=(8,))
    assert agent.hp.replay_windows == 0
    diags = []
    agent.learn(600, callback=lambda step, d: diags.append(d))
    assert agent.updates == 3 and len(diags) == 3
    assert agent.replay.size == 600 and agent.replay_batch() is None  # stored, never replayed
    assert all(d["train/policy_cloning"] == 0.0 and d["train/value_cloning"] == 0.0 for d in diags)
    # the update is the on-policy V-trace actor-critic: the losses without a replay part
    _fill(agent, 199)
    new = agent.rollout_windows()
    off, on = agent.losses(new, None), agent.losses(new, agent.replay_batch())
    for k in off:
        torch.testing.assert_close(off[k], on[k])
    with pytest.raises(ValueError, match="replay_windows"):
        CLEAR(env, replay_windows=-1)
