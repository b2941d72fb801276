"""Populations of agents (issue 26 items 1 and 3): the generic population and the batch-native agents.

Every test steps N single ``lcpo/WindyPendulum-v0`` envs in a Python loop (the population runtime and the vector
envs are tested elsewhere), so a population's seed ``k`` and the solo run of that seed see the same env stream.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import lcpo.envs  # noqa: F401  (registers lcpo/* ids)
from lcpo.agents import AGENTS
from lcpo.agents.population import BATCH_NATIVE, AgentPopulation, check_seeds, make_population
from lcpo.contexts import resolve_trace

TRACE_LEN = 5_000


def _env(trace="wind-3", scale: float = 1.0):
    tr = resolve_trace(trace, length=TRACE_LEN)
    values = tr.values * scale if scale != 1.0 else tr
    return gym.make("lcpo/WindyPendulum-v0", trace=values, time_limit=200)


def drive(pop, envs, steps: int, seeds):
    """Step ``pop`` (population contract) on ``envs`` (one single env per seed) for ``steps`` steps.

    Returns ``(per-seed reward sums (N,) float64, per-seed list of update diagnostics, per-seed actions
    (steps, N, ...))``. Each env is reset with its seed at the start and whenever an episode ends.
    """
    n = len(envs)
    obs = np.stack([e.reset(seed=s)[0] for e, s in zip(envs, seeds)]).astype(np.float32)
    totals = np.zeros(n)
    diags = [[] for _ in range(n)]
    acts = []
    for _ in range(steps):
        a = pop.act_batch(obs)
        acts.append(np.array(a))
        out = [e.step(a[k] if a.ndim > 1 else int(a[k])) for k, e in enumerate(envs)]
        nxt = np.stack([o[0] for o in out]).astype(np.float32)
        rew = np.array([o[1] for o in out], dtype=np.float64)
        term = np.array([o[2] for o in out])
        trunc = np.array([o[3] for o in out])
        res = pop.observe_batch(obs, a, rew, nxt, term, trunc, [o[4] for o in out])
        totals += rew
        for k, d in enumerate(res):
            if d is not None:
                diags[k].append(d)
        obs = nxt.copy()
        for k in np.flatnonzero(term | trunc):
            obs[k] = envs[k].reset()[0]
    return totals, diags, np.stack(acts)


def _flat(state: dict) -> dict:
    """Flatten a nested state dict into ``path -> numpy array / value`` for exact comparison."""
    out = {}

    def walk(prefix, x):
        if isinstance(x, dict):
            for k, v in x.items():
                walk(f"{prefix}/{k}", v)
        elif isinstance(x, (list, tuple)) and not (x and isinstance(x[0], (int, float))):
            for i, v in enumerate(x):
                walk(f"{prefix}/{i}", v)
        elif isinstance(x, torch.Tensor):
            out[prefix] = x.detach().cpu().numpy().copy()
        else:
            out[prefix] = np.asarray(x).copy() if isinstance(x, np.ndarray) else x
    walk("", state)
    return out


def assert_states_equal(a: dict, b: dict):
    fa, fb = _flat(a), _flat(b)
    assert fa.keys() == fb.keys()
    for k in fa:
        if isinstance(fa[k], np.ndarray):
            np.testing.assert_array_equal(fa[k], fb[k], err_msg=k)
        else:
            assert fa[k] == fb[k], k


# -- the generic population --------------------------------------------------------------------------------
def test_check_seeds_rejects_bad_seeds():
    assert check_seeds([3, 1]) == [3, 1]
    for bad in ([], [1, 1], [-1], [1.5], [True]):
        with pytest.raises(ValueError):
            check_seeds(bad)


def test_generic_population_equals_solo_runs_and_round_trips():
    """AgentPopulation of DDQN seeds [0, 5]: each member's run is its solo run bit for bit (actions and state);
    the per-seed state loads into a fresh population's slot and gives identical actions."""
    from lcpo.agents.ddqn import DDQN

    kw = dict(hidden=(16,), learning_starts=50, buffer_size=500)
    seeds = [0, 5]
    pop = AgentPopulation(DDQN, _env(), seeds, **kw)
    totals, _, acts = drive(pop, [_env() for _ in seeds], 300, seeds)
    for k, s in enumerate(seeds):
        solo = AgentPopulation(DDQN, _env(), [s], **kw)
        t1, _, a1 = drive(solo, [_env()], 300, [s])
        np.testing.assert_array_equal(a1[:, 0], acts[:, k])
        assert t1[0] == totals[k]
        assert_states_equal(solo.seed_state_dict(0), pop.seed_state_dict(k))
    twin = AgentPopulation(DDQN, _env(), seeds, **kw)
    twin.load_state_dict(pop.state_dict())
    obs = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
    np.testing.assert_array_equal(twin.act_batch(obs), pop.act_batch(obs))
    with pytest.raises(ValueError, match="seeds"):
        AgentPopulation(DDQN, _env(), [0, 6], **kw).load_state_dict(pop.state_dict())
    with pytest.raises(IndexError):
        pop.seed_state_dict(2)
    with pytest.raises(ValueError, match="leading seed axis"):
        pop.act_batch(obs[:1])


def test_make_population_picks_batch_native_or_generic():
    env = _env()
    for name in ("ddqn", *sorted(BATCH_NATIVE)):
        pop = make_population(name, env, [0, 1], hidden=(8,))
        assert pop.n_seeds == 2 and pop.seeds == [0, 1]
        assert isinstance(pop, AGENTS[name]) == (name in BATCH_NATIVE)
        assert isinstance(pop, AgentPopulation) == (name not in BATCH_NATIVE)
