"""Tests for TabularA2C: one row of logits and one value per (cell, context) of the trap grid world."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import lcpo.envs  # noqa: F401  (registers the ids)
from lcpo.agents import AGENTS
from lcpo.agents.tabular_a2c import TabularA2C
from lcpo.envs.gridworld import DECISION, DOWN, LEFT, START, TRAP, UP, TrapGridEnv
from lcpo.online.loop import Transition


def _env(trace=(0,)):
    return gym.make("lcpo/TrapGrid-v0", trace=list(trace))


def _obs(cell, trap=False):
    return TrapGridEnv.observation_of(cell, trap)


def test_registered_and_contract_types():
    assert AGENTS["tabular-a2c"] is TabularA2C
    agent = TabularA2C(_env(), seed=0)
    assert agent.actor.body.table.shape == (18, 4) and agent.critic.body.table.shape == (18, 1)
    a = agent.act(_obs(START))
    assert isinstance(a, np.integer) and 0 <= a < 4
    assert agent.hp.gamma == 0.9 and agent.hp.gae_lambda == 0.8


def test_one_update_equals_the_hand_computed_sgd_step():
    agent = TabularA2C(_env(), seed=0, rollout_steps=2, actor_lr=2.0, critic_lr=1.0)
    t0 = Transition(_obs(START), np.int64(LEFT), -1.0, _obs(DECISION), False, False, None)
    t1 = Transition(_obs(DECISION), np.int64(UP), -1.0, _obs(TRAP), False, True, None)
    assert agent.observe(t0) is None
    diag = agent.observe(t1)
    assert diag is not None and agent.updates == 1
    # V = 0 everywhere: delta_t = r_t; A_1 = -1 (the truncation cuts), A_0 = -1 + 0.9 * 0.8 * A_1 = -1.72
    adv = {START: -1.72, DECISION: -1.0}
    values = agent.critic.body.table.detach().numpy()[:, 0]
    logits = agent.actor.body.table.detach().numpy()
    for cell, action in ((START, LEFT), (DECISION, UP)):
        # critic: loss mean((V - G)^2) over 2 samples -> dV = -lr * (V - G) = G
        assert values[cell] == pytest.approx(adv[cell], abs=1e-6)
        # actor: loss -mean(A log pi) -> d logits = lr * A / 2 * (onehot(a) - 1/4)
        expected = 2.0 * adv[cell] / 2 * (np.eye(4)[action] - 0.25)
        np.testing.assert_allclose(logits[cell], expected, atol=1e-6)
    untouched = [s for s in range(18) if s not in (START, DECISION)]
    assert not logits[untouched].any() and not values[untouched].any()


def test_rows_of_an_unseen_context_never_change():
    env = _env(trace=(1,))  # trap always on: the no-trap rows (0..8) are never visited
    agent = TabularA2C(env, seed=3)
    agent.actor.body.table.data[:9] = torch.randn(9, 4, generator=torch.Generator().manual_seed(0))
    agent.critic.body.table.data[:9] = 1.5
    before_pi, before_v = agent.actor.body.table[:9].detach().clone(), agent.critic.body.table[:9].detach().clone()
    agent.fast_actor.sync()
    agent.learn(2000)
    assert agent.updates == 10
    assert torch.equal(agent.actor.body.table[:9], before_pi) and torch.equal(agent.critic.body.table[:9], before_v)
    assert not torch.equal(agent.actor.body.table[9:], torch.zeros(9, 4))


def test_learns_the_optimal_no_trap_route():
    agent = TabularA2C(_env(), seed=1).learn(100 * 200)
    returns = [r[2] for r in agent.episodes[-100:]]
    assert np.mean(returns) > -3.25  # optimum -3
    p = torch.softmax(agent.actor.body.table[DECISION], -1)
    assert p[UP] > 0.95


def test_same_seed_same_run_and_save_load_round_trip(tmp_path):
    a = TabularA2C(_env(), seed=7).learn(1000)
    b = TabularA2C(_env(), seed=7).learn(1000)
    assert a.episodes == b.episodes and torch.equal(a.actor.body.table, b.actor.body.table)
    a.save(tmp_path / "agent")
    c = TabularA2C.load(tmp_path / "agent", _env())
    assert torch.equal(c.actor.body.table, a.actor.body.table)
    assert torch.equal(c.critic.body.table, a.critic.body.table)
    assert c.updates == a.updates and c.steps == a.steps
    obs = _obs(START)
    assert [a.act(obs) for _ in range(50)] == [c.act(obs) for _ in range(50)]
    state = a.state_dict()
    assert set(state) >= {"actor", "critic", "actor_opt", "critic_opt", "rollout", "rngs", "updates", "steps"}


def test_greedy_action_and_probabilities_follow_the_table():
    agent = TabularA2C(_env(), seed=0)
    agent.actor.body.table.data[DECISION + 9, LEFT] = 5.0
    agent.fast_actor.sync()
    assert agent.act(_obs(DECISION, True), deterministic=True) == LEFT
    logp = agent.actor.log_probs(torch.from_numpy(_obs(DECISION, True)[None]))
    assert math.isclose(float(logp[0, 0, LEFT].detach().exp()), math.exp(5) / (math.exp(5) + 3), rel_tol=1e-6)


def test_needs_an_environment_with_discrete_states():
    with pytest.raises(TypeError, match=r"discrete states .* as lcpo/TrapGrid-v0 declares\), "
                                        r"got lcpo/ContinuingChain-v0$"):
        TabularA2C(gym.make("lcpo/ContinuingChain-v0"), seed=0)


@pytest.mark.parametrize("kw,match", [({"actor_lr": 0.0}, "actor_lr"), ({"critic_lr": math.nan}, "critic_lr"),
                                      ({"hidden": (8,)}, "hidden"), ({"rollout_steps": 0}, "rollout_steps")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        TabularA2C(_env(), seed=0, **kw)


def test_out_of_range_state_index_raises():
    agent = TabularA2C(_env(), seed=0)
    agent.actor.body.index = lambda obs: np.full(len(obs), 18)
    with pytest.raises(ValueError, match="18"):
        agent.actor.log_probs(torch.from_numpy(_obs(DOWN)[None]))
