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
    obs = np.random.default_rng(0).normal(size=(2, 9)).astype(np.float32)
    np.testing.assert_array_equal(twin.act_batch(obs), pop.act_batch(obs))
    with pytest.raises(ValueError, match="seeds"):
        AgentPopulation(DDQN, _env(), [0, 6], **kw).load_state_dict(pop.state_dict())
    with pytest.raises(IndexError):
        pop.seed_state_dict(2)
    with pytest.raises(ValueError, match="leading seed axis"):
        pop.act_batch(obs[:1])


def test_make_population_picks_batch_native_or_generic():
    for name in ("ddqn", *sorted(BATCH_NATIVE)):
        env = gym.make("lcpo/TrapGrid-v0") if name == "tabular-a2c" else _env()
        pop = make_population(name, env, [0, 1], **({} if name == "tabular-a2c" else {"hidden": (8,)}))
        assert pop.n_seeds == 2 and pop.seeds == [0, 1]
        assert isinstance(pop, AGENTS[name]) == (name in BATCH_NATIVE)
        assert isinstance(pop, AgentPopulation) == (name not in BATCH_NATIVE)


# -- per-seed optimizer pieces --------------------------------------------------------------------------------
def test_seed_adam_equals_torch_adam_per_seed_and_masked_seeds_stand_still():
    from lcpo.agents.stacked import SeedAdam

    g = torch.Generator().manual_seed(0)
    P = torch.nn.Parameter(torch.randn(3, 15, 7, generator=g))
    ref = [torch.nn.Parameter(P.detach()[k].clone()) for k in range(3)]
    opt = SeedAdam([P], lr=1e-3, weight_decay=1e-4)
    refs = [torch.optim.Adam([r], lr=1e-3, weight_decay=1e-4) for r in ref]
    for it in range(6):
        grads = torch.randn(3, 15, 7, generator=g)
        mask = np.array([True, it % 2 == 0, True])  # seed 1 steps on even iterations only: its own step count
        P.grad = grads.clone()
        before = P.detach()[1].clone()
        opt.step(mask)
        for k in np.flatnonzero(mask):
            ref[k].grad = grads[k].clone()
            refs[k].step()
        if not mask[1]:
            assert torch.equal(P.detach()[1], before)
    for k in range(3):
        assert torch.equal(P.detach()[k], ref[k].detach())
        assert_states_equal(opt.seed_state_dict(k), refs[k].state_dict())
    assert opt.steps.tolist() == [6, 3, 6]


def test_clip_is_per_seed():
    """One seed's huge gradient leaves another seed's clipped gradient exactly as clipping it alone would."""
    from lcpo.agents.stacked import clip_grad_norm_per_seed

    g = torch.Generator().manual_seed(1)
    P = [torch.nn.Parameter(torch.zeros(2, 5, 3)), torch.nn.Parameter(torch.zeros(2, 5))]
    grads = [torch.randn(2, 5, 3, generator=g), torch.randn(2, 5, generator=g)]
    grads[0][1] *= 1e9
    for p, gr in zip(P, grads):
        p.grad = gr.clone()
    solo = [torch.nn.Parameter(torch.zeros(5, 3)), torch.nn.Parameter(torch.zeros(5))]
    for p, gr in zip(solo, grads):
        p.grad = gr[0].clone()
    norms = clip_grad_norm_per_seed(P, 0.5)
    ref = torch.nn.utils.clip_grad_norm_(solo, 0.5)
    torch.testing.assert_close(norms[0], ref, rtol=1e-6, atol=0)
    for p, s in zip(P, solo):
        torch.testing.assert_close(p.grad[0], s.grad, rtol=1e-6, atol=0)
    total1 = torch.sqrt(sum((p.grad[1] ** 2).sum() for p in P))
    assert abs(float(total1) - 0.5) < 1e-5  # the huge seed is clipped to its own norm 0.5


# -- batch-native agents: seed k in a population is seed k alone ------------------------------------------
A2C_KW = dict(hidden=(32, 32))


def test_a2c_population_seed_equals_solo_run_bit_for_bit():
    """A2C population of seeds [0, 3, 7], 1,200 steps (6 updates): every seed's actions, rewards, update
    diagnostics and final state equal its solo run *bit for bit*. Why this holds: each seed's rows go through the
    same kernels whatever N (batched GEMMs compute every batch entry alike; the one-output critic layer is a
    row-wise dot product, since a one-column ``bmm`` takes a shape-dependent path), and Adam, the clip, GAE, the
    return normaliser and the Gumbel draws are per-seed arithmetic."""
    from lcpo.agents import A2C

    seeds = [0, 3, 7]
    pop = A2C.population(_env(), seeds, **A2C_KW)
    assert pop.n_seeds == 3 and pop.seeds == seeds
    totals, diags, acts = drive(pop, [_env() for _ in seeds], 1200, seeds)
    for k, s in enumerate(seeds):
        solo = A2C(_env(), seed=s, **A2C_KW)
        t1, d1, a1 = drive(solo, [_env()], 1200, [s])
        np.testing.assert_array_equal(a1[:, 0], acts[:, k])
        assert t1[0] == totals[k] and d1[0] == diags[k] and len(diags[k]) == 6
        assert_states_equal(solo.state_dict(), pop.seed_state_dict(k))


def test_a2c_changing_one_seeds_env_leaves_the_others_bit_identical():
    from lcpo.agents import A2C

    seeds = [0, 1, 2]
    base = A2C.population(_env(), seeds, **A2C_KW)
    drive(base, [_env() for _ in seeds], 800, seeds)
    other = A2C.population(_env(), seeds, **A2C_KW)
    _, _, _ = drive(other, [_env(), _env(scale=0.5), _env()], 800, seeds)  # seed 1 in half the wind
    for k in (0, 2):
        assert_states_equal(base.seed_state_dict(k), other.seed_state_dict(k))
    assert not torch.equal(base.actors.params[0][1], other.actors.params[0][1])


def test_a2c_one_seeds_huge_gradient_does_not_change_another_seeds_step():
    """Seed 1 gets rewards of 1e9 (no return normaliser): its gradient norm is huge and clipped; seed 0's
    parameters after the update equal its solo run's exactly (a global clip over the stack would shrink seed 0's
    step through Adam's eps)."""
    from lcpo.agents import A2C

    kw = dict(A2C_KW, normalize_returns=False, rollout_steps=50)
    env = _env()
    pop = A2C.population(env, [0, 1], **kw)
    solo = A2C(env, seed=0, **kw)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(50, 2, 9)).astype(np.float32)
    for t in range(50):
        a = pop.act_batch(obs[t])
        assert np.array_equal(solo.act(obs[t][0]), a[0])
        r = np.array([-1.0, 1e9 * (t % 2 - 0.5)])
        out = pop.observe_batch(obs[t], a, r, obs[t], np.zeros(2, bool), np.zeros(2, bool), [{}, {}])
        from lcpo.online.loop import Transition

        d0 = solo.observe(Transition(obs[t][0], a[0], -1.0, obs[t][0], False, False, {}))
    assert out[0] == d0 and out[1]["train/value_loss"] > 1e12
    for P, (name, p) in zip(pop.actors.params, solo.actor.named_parameters()):
        assert torch.equal(P.detach()[0], p.detach()), name


def test_a2c_solo_state_loads_into_a_slot_mid_rollout_and_continues_as_the_solo_run():
    """A solo run's state after 290 steps (mid-rollout) loaded into slot 1 of a fresh population: slot 1 then
    updates at other steps than slots 0 and 2 (per-seed fill pointers, updates of a subset of seeds) and
    continues exactly as the solo run."""
    from lcpo.agents import A2C

    solo = A2C(_env(), seed=5, **A2C_KW)
    env_solo = _env()
    drive(solo, [env_solo], 290, [5])
    pop = A2C.population(_env(), [0, 5, 2], **A2C_KW)
    pop.load_seed_state_dict(1, solo.state_dict())
    assert_states_equal(pop.seed_state_dict(1), solo.state_dict())
    # continue both on identical observation streams (fresh envs, seeded alike)
    e1, e2 = _env(), _env()
    totals, diags, acts = drive(pop, [_env(), e1, _env()], 500, [0, 11, 2])
    t1, d1, a1 = drive(solo, [e2], 500, [11])
    np.testing.assert_array_equal(a1[:, 0], acts[:, 1])
    assert d1[0] == diags[1] and len(diags[1]) == 2 and len(diags[0]) == 2
    assert_states_equal(solo.state_dict(), pop.seed_state_dict(1))
    twin = A2C.population(_env(), [0, 5, 2], **A2C_KW)
    twin.load_state_dict(pop.state_dict())
    assert_states_equal(twin.state_dict(), pop.state_dict())


def test_a2c_population_of_one_is_todays_single_agent():
    """``A2C(env, seed)`` is the population of one (same state format as before the seed axis: the keys and
    shapes of today's ``OnPolicyAgent`` state), and its updates equal the pre-seed-axis A2C (``nn.Module`` actor
    and critic, ``torch.optim.Adam``, ``clip_grad_norm_``, rebuilt here on :class:`OnPolicyAgent`) fed the same
    transitions, within 1e-6 relative per update (not bitwise: batched GEMMs and the row-wise value head round
    differently from ``addmm``)."""
    from lcpo.agents import A2C
    from lcpo.agents.base import OnPolicyAgent
    from lcpo.agents.nets import CategoricalPolicy
    from lcpo.online.loop import Transition

    class OldA2C(OnPolicyAgent):
        name = "a2c"
        Hyperparameters = A2C.Hyperparameters

        def update(self):
            b = self._batch()
            value_loss = self._critic_step(b["obs"], b["ret"])
            logp_all = self.actor.log_probs(b["obs"])
            logp = CategoricalPolicy.log_prob_of(logp_all, b["actions"])
            m = b["mask"]
            pg = -(b["adv"] * logp * m).sum() / m.sum().clamp(min=1.0)
            self.actor_opt.zero_grad(set_to_none=True)
            pg.backward()
            torch.nn.utils.clip_grad_norm_(self.actor.parameters(), self.hp.max_grad_norm)
            self.actor_opt.step()
            return {"train/policy_loss": pg.item(), "train/value_loss": value_loss}

    env = _env()
    new, old = A2C(env, seed=4, **A2C_KW), OldA2C(env, seed=4, **A2C_KW)
    same_pop = A2C.population(env, [4], **A2C_KW)
    e = _env()
    obs, _ = e.reset(seed=4)
    for t in range(1000):
        a = new.act(obs)
        assert np.array_equal(a, same_pop.act_batch(obs[None])[0])
        nxt, r, term, trunc, info = e.step(a)
        tr = Transition(obs, a, float(r), nxt, term, trunc, info)
        d_new, d_old = new.observe(tr), old.observe(tr)
        same_pop.observe_batch(obs[None], a[None], [r], nxt[None], [term], [trunc], [info])
        if d_new is not None:
            for (name, p), q in zip(old.actor.named_parameters(), new.actor.parameters()):
                torch.testing.assert_close(q, p, rtol=1e-6, atol=1e-7, msg=name)
            for p, q in zip(old.critic.parameters(), new.critic.parameters()):
                torch.testing.assert_close(q, p, rtol=1e-6, atol=1e-7)
            assert abs(d_new["train/policy_loss"] - d_old["train/policy_loss"]) <= 1e-5 * (1 + abs(d_old["train/policy_loss"]))
        obs = e.reset()[0] if term or trunc else nxt
    s_new, s_old = _flat(new.state_dict()), _flat(old.state_dict())
    assert s_new.keys() == s_old.keys()
    for k in s_new:
        if isinstance(s_new[k], np.ndarray) and k != "/noise":  # the old agent never acted: no noise block
            assert s_new[k].shape == s_old[k].shape, k
    assert_states_equal(new.state_dict(), same_pop.seed_state_dict(0))
    # a checkpoint of the pre-seed-axis agent (torch.optim.Adam state, nn.Module weights) loads into a slot and
    # is written back unchanged
    twin = A2C.population(env, [9, 4], **A2C_KW)
    twin.load_seed_state_dict(1, old.state_dict())
    back = twin.seed_state_dict(1)
    for key in ("actor", "critic", "rollout", "return_norm", "updates", "steps", "noise_i"):
        assert_states_equal({key: back[key]}, {key: old.state_dict()[key]})
    for key in ("actor_opt", "critic_opt"):
        assert_states_equal(back[key]["state"], old.state_dict()[key]["state"])


def test_tabular_a2c_population_equals_solo_runs():
    """The tabular agent's tables are not MLPs: each seed's module runs on its own batch (gradients moved into
    the stack by hooks); seeds still equal their solo runs bit for bit."""
    from lcpo.agents.tabular_a2c import TabularA2C

    seeds = [1, 2]
    pop = TabularA2C.population(gym.make("lcpo/TrapGrid-v0"), seeds)
    totals, diags, acts = drive(pop, [gym.make("lcpo/TrapGrid-v0") for _ in seeds], 600, seeds)
    for k, s in enumerate(seeds):
        solo = TabularA2C(gym.make("lcpo/TrapGrid-v0"), seed=s)
        t1, d1, a1 = drive(solo, [gym.make("lcpo/TrapGrid-v0")], 600, [s])
        np.testing.assert_array_equal(a1[:, 0], acts[:, k])
        assert d1[0] == diags[k] and diags[k]
        assert_states_equal(solo.state_dict(), pop.seed_state_dict(k))


# -- LCPO ----------------------------------------------------------------------------------------------------
LCPO_KW = dict(hidden=(32, 32), reservoir_size=2000)


def test_lcpo_population_seed_equals_solo_run_bit_for_bit():
    """LCPO population of seeds [0, 3, 7] on the windy Pendulum, 3,000 steps (15 updates, 11 of them constrained
    per seed): each seed's actions, rewards, diagnostics (anchors or not, line-search acceptance, backtracks,
    KLs) and final state (reservoir, detector, temperature, both Adams) equal its solo run bit for bit. Why: as
    for A2C, plus the constrained step's conjugate gradient and line search keep per-seed scalars (row-wise dot
    products) and each seed's Fisher-vector product is its own ``make_fvp`` on its own module."""
    from lcpo.agents import LCPO

    seeds = [0, 3, 7]
    pop = LCPO.population(_env(), seeds, **LCPO_KW)
    totals, diags, acts = drive(pop, [_env() for _ in seeds], 3000, seeds)
    assert (pop.constrained_updates > 0).all()
    for k, s in enumerate(seeds):
        solo = LCPO(_env(), seed=s, **LCPO_KW)
        t1, d1, a1 = drive(solo, [_env()], 3000, [s])
        np.testing.assert_array_equal(a1[:, 0], acts[:, k])
        assert t1[0] == totals[k] and d1[0] == diags[k]
        assert_states_equal(solo.state_dict(), pop.seed_state_dict(k))


def test_lcpo_seeds_with_and_without_anchors_in_one_update_stay_independent():
    """Seed 1 runs in a wind-free copy of the trace (never OOD: plain steps) while seeds 0 and 2 take constrained
    steps in the same updates; seeds 0 and 2 equal the population where every seed has the wind, bit for bit,
    and seed 1 equals its own solo run in the calm trace (the actor's Adam stepped only on its plain updates)."""
    from lcpo.agents import LCPO

    seeds = [0, 1, 2]
    windy = LCPO.population(_env(), seeds, **LCPO_KW)
    drive(windy, [_env() for _ in seeds], 1600, seeds)
    mixed = LCPO.population(_env(), seeds, **LCPO_KW)
    _, diags, _ = drive(mixed, [_env(), _env(scale=0.0 + 1e-12), _env()], 1600, seeds)
    assert any(d["train/constrained"] == 1.0 for d in diags[0]) and not any(d["train/constrained"] for d in diags[1])
    for k in (0, 2):
        assert_states_equal(windy.seed_state_dict(k), mixed.seed_state_dict(k))
    solo = LCPO(_env(), seed=1, **LCPO_KW)
    _, d1, _ = drive(solo, [_env(scale=0.0 + 1e-12)], 1600, [1])
    assert d1[0] == diags[1]
    assert_states_equal(solo.state_dict(), mixed.seed_state_dict(1))
    assert mixed.alpha_opt.steps.tolist() == [8, 8, 8] and mixed.actor_opt.steps[1] == 8
    assert mixed.actor_opt.steps[0] == 8 - mixed.constrained_updates[0]


def test_batched_cg_equals_per_row_solves_and_a_failed_row_leaves_the_others():
    """Conjugate gradient with per-row scalars: each row equals the direct solve of its own SPD system; a row
    whose matrix is negative definite is marked failed and the other rows are unaffected (bit-identical to the
    batch without it); a row that converges early is frozen."""
    from lcpo.optim.cg import conjugate_gradient, conjugate_gradient_batch

    g = torch.Generator().manual_seed(0)
    n = 6
    mats = []
    for _ in range(3):
        M = torch.randn(n, n, generator=g, dtype=torch.float64)
        mats.append(M @ M.T + n * torch.eye(n, dtype=torch.float64))
    mats.append(-mats[0])                       # not positive definite
    mats.append(torch.eye(n, dtype=torch.float64))  # converges after one iteration
    b = torch.randn(5, n, generator=g, dtype=torch.float64)
    A = torch.stack(mats)

    def mv(V, rows):
        return torch.einsum("rij,rj->ri", A[rows], V)

    x, ok = conjugate_gradient_batch(mv, b, iters=n)
    assert ok.tolist() == [True, True, True, False, True]
    for k in (0, 1, 2, 4):
        torch.testing.assert_close(x[k], torch.linalg.solve(A[k], b[k]), rtol=1e-8, atol=1e-10)
        torch.testing.assert_close(x[k], conjugate_gradient(lambda v, k=k: A[k] @ v, b[k], iters=n),
                                   rtol=1e-10, atol=1e-12)
    keep = torch.tensor([0, 1, 2, 4])
    x2, ok2 = conjugate_gradient_batch(lambda V, rows: mv(V, keep[rows]), b[keep], iters=n)
    assert torch.equal(x2, x[keep]) and ok2.all()


def test_batched_constrained_step_matches_the_single_step_per_row():
    """Four policies stepped together by ``kl_constrained_step_batch`` give each row's single
    ``kl_constrained_step`` outcome (acceptance, backtracks; parameters within 1e-6 relative: row-wise sums and
    ``torch.dot`` round differently): rows that accept after different numbers of halvings, a row with a zero
    gradient (no step), and a row whose KL is measured far away and needs six halvings."""
    from lcpo.agents.nets import CategoricalPolicy
    from lcpo.agents.stacked import SeedStack
    from lcpo.optim.constrained import kl_constrained_step, kl_constrained_step_batch
    from lcpo.optim.fisher import flat_grad, flat_params, make_fvp

    def make(s):
        torch.manual_seed(s)
        return CategoricalPolicy(4, 1, 5, (8,))

    R = 4
    g = torch.Generator().manual_seed(3)
    obs = torch.randn(R, 64, 4, generator=g)
    acts = torch.randint(0, 5, (R, 64, 1), generator=g)
    adv = torch.randn(R, 64, generator=g) * torch.tensor([[1.0], [30.0], [0.0], [1.0]])
    kl_obs = obs.clone()
    kl_obs[3] *= 1000.0  # row 3's KL is measured far away: it needs more halvings than the others
    limit, scale = 2e-3, 1e-2
    singles = []
    for k in range(R):
        pol = make(k)
        with torch.no_grad():
            lo, lk = pol.log_probs(obs[k]), pol.log_probs(kl_obs[k])
        lpo = CategoricalPolicy.log_prob_of(lo, acts[k])

        def loss_fn(pol=pol, k=k, lpo=lpo):
            lp = CategoricalPolicy.log_prob_of(pol.log_probs(obs[k]), acts[k])
            return -(adv[k] * torch.exp(lp - lpo)).mean()

        def kl_fn(pol=pol, k=k, lk=lk):
            return CategoricalPolicy.kl(lk, pol.log_probs(kl_obs[k])).mean()

        grad = flat_grad(loss_fn(), pol)
        res = kl_constrained_step(pol, grad, make_fvp(pol, obs[k], 0.1), loss_fn, (kl_fn,), (limit,),
                                  scale_kl=scale, cg_iters=10, max_backtracks=10)
        singles.append((res, flat_params(pol)))
    stack = SeedStack([make(k) for k in range(R)])
    with torch.no_grad():
        lo, lk = stack.log_probs(obs), stack.log_probs(kl_obs)
    lpo = CategoricalPolicy.log_prob_of(lo, acts)

    def loss_b():
        lp = CategoricalPolicy.log_prob_of(stack.log_probs(obs), acts)
        return -(adv * torch.exp(lp - lpo)).mean(dim=1)

    def kl_b():
        return CategoricalPolicy.kl(lk, stack.log_probs(kl_obs)).mean(dim=1)

    loss_b().sum().backward()
    grad = torch.cat([p.grad.reshape(R, -1) for p in stack.params], dim=1)
    fvps = [make_fvp(stack.members[k], obs[k], 0.1) for k in range(R)]

    def fvp(V, rows):
        return torch.stack([fvps[r](v) for v, r in zip(V, rows.tolist())])

    def get_flat():
        return torch.cat([p.detach().reshape(R, -1) for p in stack.params], dim=1).clone()

    def set_flat(flat):
        i = 0
        with torch.no_grad():
            for p in stack.params:
                m = p[0].numel()
                p.data.copy_(flat[:, i:i + m].reshape(p.shape))
                i += m

    before = get_flat()
    results = kl_constrained_step_batch(get_flat, set_flat, grad, fvp, loss_b, (kl_b,), (limit,), scale_kl=scale,
                                        cg_iters=10, max_backtracks=10)
    flat = get_flat()
    for k in range(R):
        res, params = singles[k]
        assert (results[k].accepted, results[k].backtracks) == (res.accepted, res.backtracks), k
        torch.testing.assert_close(flat[k], params, rtol=1e-6, atol=1e-7)
    # rows 0 and 1 accept at the first halving and freeze; the search goes on for row 3 alone
    assert [(r.accepted, r.backtracks) for r in results] == [(True, 1), (True, 1), (False, 10), (True, 6)]
    assert torch.equal(flat[2], before[2])  # zero gradient: no step


# -- TRPO ----------------------------------------------------------------------------------------------------
def test_trpo_population_seed_equals_solo_run_bit_for_bit():
    """TRPO population of seeds [0, 4, 9] (800-step batches, two critic epochs of 200-state minibatches, each
    seed its own shuffle), 2,400 steps (3 constrained updates per seed): actions, diagnostics and final state
    equal each solo run bit for bit (the reasons of the A2C and LCPO tests)."""
    from lcpo.agents import TRPO

    kw = dict(hidden=(32, 32), rollout_steps=800, critic_epochs=2)
    seeds = [0, 4, 9]
    pop = TRPO.population(_env(), seeds, **kw)
    totals, diags, acts = drive(pop, [_env() for _ in seeds], 2400, seeds)
    assert [len(d) for d in diags] == [3, 3, 3] and (pop.accepted_steps > 0).all()
    for k, s in enumerate(seeds):
        solo = TRPO(_env(), seed=s, **kw)
        t1, d1, a1 = drive(solo, [_env()], 2400, [s])
        np.testing.assert_array_equal(a1[:, 0], acts[:, k])
        assert t1[0] == totals[k] and d1[0] == diags[k]
        assert_states_equal(solo.state_dict(), pop.seed_state_dict(k))
    other = TRPO.population(_env(), seeds, **kw)
    drive(other, [_env(), _env(scale=0.5), _env()], 2400, seeds)
    for k in (0, 2):
        assert_states_equal(pop.seed_state_dict(k), other.seed_state_dict(k))


# -- PPO and LCPO-P --------------------------------------------------------------------------------------------
PPO_KW = dict(hidden=(32, 32))


@pytest.mark.parametrize("kw", [dict(epochs=12, actor_lr=2e-3), dict(minibatch_size=64, epochs=4, actor_lr=3e-3)],
                         ids=["full-batch", "minibatches"])
def test_ppo_population_seed_equals_solo_run_bit_for_bit(kw):
    """PPO population of seeds [0, 3, 7], 600 steps (3 updates): each seed's actions, rewards, diagnostics
    (iterations, early stop, KL, clip fraction) and final state equal its solo run bit for bit, with full-batch
    epochs (a larger learning rate, so that seeds stop on KL after different numbers of iterations in the same
    update: the per-seed early stop is a mask) and with 64-state minibatches (each seed shuffles with its own
    ``buffer`` generator, only while it still steps). Why: the reasons of the A2C test; the advantage statistics,
    surrogate, KL and stop test are per-seed arithmetic, and the seeds still stepping run as compact copies of
    their rows (the same kernels per row, the same Adam arithmetic) written back when a seed stops."""
    from lcpo.agents import PPO

    kw = dict(PPO_KW, **kw)
    seeds = [0, 3, 7]
    pop = PPO.population(_env(), seeds, **kw)
    totals, diags, acts = drive(pop, [_env() for _ in seeds], 600, seeds)
    iters = np.array([[d["train/iterations"] for d in ds] for ds in diags])  # (seeds, updates)
    assert iters.shape == (3, 3) and pop.early_stops.sum() >= 2
    assert any(len(set(col)) > 1 for col in iters.T)  # seeds stopped at different iterations in one update
    for k, s in enumerate(seeds):
        solo = PPO(_env(), seed=s, **kw)
        t1, d1, a1 = drive(solo, [_env()], 600, [s])
        np.testing.assert_array_equal(a1[:, 0], acts[:, k])
        assert t1[0] == totals[k] and d1[0] == diags[k]
        assert_states_equal(solo.state_dict(), pop.seed_state_dict(k))


def test_ppo_changing_one_seeds_env_leaves_the_others_bit_identical():
    from lcpo.agents import PPO

    kw = dict(PPO_KW, minibatch_size=100, epochs=4)
    seeds = [0, 1, 2]
    base = PPO.population(_env(), seeds, **kw)
    drive(base, [_env() for _ in seeds], 600, seeds)
    other = PPO.population(_env(), seeds, **kw)
    drive(other, [_env(), _env(scale=0.5), _env()], 600, seeds)  # seed 1 in half the wind
    for k in (0, 2):
        assert_states_equal(base.seed_state_dict(k), other.seed_state_dict(k))
    assert not torch.equal(base.actors.params[0][1], other.actors.params[0][1])


def test_ppo_one_seeds_huge_gradient_and_early_stop_leave_another_seeds_update():
    """Seed 1 sees rewards of 1e6 (no return normaliser: its gradients are huge and clipped) and observations
    1,000 times larger (one Adam step moves its logits far: its KL crosses ``max_kl`` at the first step); seed 0
    runs all its epochs, and its parameters, both Adams' step counts and its diagnostics equal its solo run's
    exactly."""
    from lcpo.agents import PPO
    from lcpo.online.loop import Transition

    kw = dict(PPO_KW, normalize_returns=False, normalize_advantages=False, rollout_steps=50, epochs=5)
    env = _env()
    pop = PPO.population(env, [0, 1], **kw)
    solo = PPO(env, seed=0, **kw)
    obs = np.random.default_rng(0).normal(size=(50, 2, 9)).astype(np.float32)
    obs[:, 1] *= 1000.0
    for t in range(50):
        a = pop.act_batch(obs[t])
        assert np.array_equal(solo.act(obs[t][0]), a[0])
        r = np.array([-1.0 + 0.1 * (t % 3), 1e6 * (t % 2 - 0.5)])
        out = pop.observe_batch(obs[t], a, r, obs[t], np.zeros(2, bool), np.zeros(2, bool), [{}, {}])
        d0 = solo.observe(Transition(obs[t][0], a[0], float(r[0]), obs[t][0], False, False, {}))
    assert out[0] == d0 and out[1]["train/iterations"] == 1.0 and out[1]["train/early_stop"] == 1.0
    assert d0["train/iterations"] == 5.0 and d0["train/early_stop"] == 0.0
    assert pop.actor_opt.steps.tolist() == [5, 1] and pop.critic_opt.steps.tolist() == [5, 1]
    assert_states_equal(solo.state_dict(), pop.seed_state_dict(0))


def test_ppo_solo_state_loads_into_a_slot_mid_rollout_and_continues_as_the_solo_run():
    """A solo PPO run's state after 290 steps (mid-rollout, minibatches) loaded into slot 1: that slot updates at
    other steps than slots 0 and 2 and continues exactly as the solo run; the population state round-trips."""
    from lcpo.agents import PPO

    kw = dict(PPO_KW, minibatch_size=64, epochs=3)
    solo = PPO(_env(), seed=5, **kw)
    drive(solo, [_env()], 290, [5])
    pop = PPO.population(_env(), [0, 5, 2], **kw)
    pop.load_seed_state_dict(1, solo.state_dict())
    assert_states_equal(pop.seed_state_dict(1), solo.state_dict())
    totals, diags, acts = drive(pop, [_env(), _env(), _env()], 500, [0, 11, 2])
    t1, d1, a1 = drive(solo, [_env()], 500, [11])
    np.testing.assert_array_equal(a1[:, 0], acts[:, 1])
    assert d1[0] == diags[1] and len(diags[1]) == 2 and len(diags[0]) == 2
    assert_states_equal(solo.state_dict(), pop.seed_state_dict(1))
    twin = PPO.population(_env(), [0, 5, 2], **kw)
    twin.load_state_dict(pop.state_dict())
    assert_states_equal(twin.state_dict(), pop.state_dict())


LCPOP_KW = dict(hidden=(32, 32), reservoir_size=2000, minibatch_size=100, epochs=4)


def test_lcpo_p_population_seed_equals_solo_and_seeds_without_anchors_stay_plain_ppo():
    """LCPO-P population of seeds [0, 1, 2], 1,200 steps on the windy Pendulum: seeds 0 and 2 take anchored
    updates (the penalty term) while seed 1, in a wind-free copy of the trace, never finds anchors, in the same
    updates. Every seed equals its solo run bit for bit (actions, rewards, diagnostics incl. ``train/kl_anchor``,
    state incl. reservoir and detector): the anchored seeds are not disturbed by a plain one and the plain seed's
    penalty is absent (exactly zero), not a small number."""
    from lcpo.agents import LCPOP

    seeds = [0, 1, 2]
    mixed = LCPOP.population(_env(), seeds, **LCPOP_KW)
    envs = [_env(), _env(scale=0.0 + 1e-12), _env()]
    totals, diags, acts = drive(mixed, envs, 1200, seeds)
    assert mixed.constrained_updates[0] > 0 and mixed.constrained_updates[2] > 0
    assert mixed.constrained_updates[1] == 0 and not any("train/kl_anchor" in d for d in diags[1])
    assert any(d0["train/constrained"] and not d1["train/constrained"] for d0, d1 in zip(diags[0], diags[1]))
    for k, s in enumerate(seeds):
        solo = LCPOP(_env(), seed=s, **LCPOP_KW)
        t1, d1, a1 = drive(solo, [_env(scale=0.0 + 1e-12) if k == 1 else _env()], 1200, [s])
        np.testing.assert_array_equal(a1[:, 0], acts[:, k])
        assert t1[0] == totals[k] and d1[0] == diags[k]
        assert_states_equal(solo.state_dict(), mixed.seed_state_dict(k))


def test_ppo_population_of_one_is_the_pre_seed_axis_ppo():
    """``PPO(env, seed)`` against the PPO before the seed axis (``nn.Module`` actor and critic, ``torch.optim.Adam``,
    ``clip_grad_norm_``, ``torch.log_softmax``, rebuilt here on :class:`OnPolicyAgent`) fed the same transitions,
    resynchronised to the new agent's state after every update so that each update is compared from the same
    start: the same number of iterations and the same early-stop decision every update, and each parameter tensor
    within 1e-6 relative (``||new - old|| / ||old||``) after each update of up to 30 Adam steps (not bitwise:
    batched GEMMs, ``logsumexp`` and the row-wise reductions round differently; element-wise, the largest gap
    measured was 1.8e-7 on weights of scale 0.19 with ``ATEN_CPU_CAPABILITY=avx2``, 2026-12-02)."""
    from lcpo.agents import PPO
    from lcpo.agents.base import OnPolicyAgent
    from lcpo.agents.nets import CategoricalPolicy
    from lcpo.agents.ppo import clipped_surrogate
    from lcpo.online.loop import Transition

    class OldPPO(OnPolicyAgent):
        name = "ppo"
        Hyperparameters = PPO.Hyperparameters

        def __init__(self, env, seed=0, **kw):
            super().__init__(env, seed, **kw)
            self.early_stops = 0

        def update(self):
            hp = self.hp
            b = self._batch()
            obs, actions, adv, mask, ret = b["obs"], b["actions"], b["adv"], b["mask"], b["ret"]
            a = adv[mask > 0]
            adv = torch.where(mask > 0, (adv - a.mean()) / (a.std() + 1e-8), torch.zeros(()))
            with torch.no_grad():
                logp_old_all = self.actor.log_probs(obs)
                logp_old = CategoricalPolicy.log_prob_of(logp_old_all, actions)
            steps, stopped = 0, False
            for _ in range(hp.epochs):
                self._critic_step(obs, ret)
                logp = CategoricalPolicy.log_prob_of(self.actor.log_probs(obs), actions)
                loss = clipped_surrogate(logp, logp_old, adv, hp.clip, mask)
                self.actor_opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.actor.parameters(), hp.max_grad_norm)
                self.actor_opt.step()
                steps += 1
                with torch.no_grad():
                    kl = float(CategoricalPolicy.kl(logp_old_all, self.actor.log_probs(obs)).mean())
                if kl > hp.max_kl:
                    stopped = True
                    break
            self.early_stops += int(stopped)
            return {"train/iterations": float(steps), "train/early_stop": float(stopped), "train/kl": kl}

        def load_state_dict(self, state):
            super().load_state_dict(state)
            self.early_stops = int(state["early_stops"])

    env = _env()
    new, old = PPO(env, seed=4, **PPO_KW), OldPPO(env, seed=4, **PPO_KW)
    e = _env()
    obs, _ = e.reset(seed=4)
    compared = 0
    for t in range(800):
        a = new.act(obs)
        nxt, r, term, trunc, info = e.step(a)
        tr = Transition(obs, a, float(r), nxt, term, trunc, info)
        d_new, d_old = new.observe(tr), old.observe(tr)
        if d_new is not None:
            assert (d_new["train/iterations"], d_new["train/early_stop"]) == \
                (d_old["train/iterations"], d_old["train/early_stop"]), t
            assert d_new["train/kl"] == pytest.approx(d_old["train/kl"], rel=1e-3)
            for net in ("actor", "critic"):
                for (name, p), q in zip(getattr(old, net).named_parameters(), getattr(new, net).parameters()):
                    rel = float(torch.linalg.vector_norm(q - p) / torch.linalg.vector_norm(p))
                    assert rel <= 1e-6, (net, name, t, rel)
            old.load_state_dict(new.state_dict())  # the next update starts from the same state
            compared += 1
        obs = e.reset()[0] if term or trunc else nxt
    assert compared == 4 and new.early_stops > 0


def test_seed_adam_refuses_unequal_step_counts_and_leaves_the_seed_as_it_was():
    """A state whose parameters hold different step counts is refused before seed k's moments change."""
    from lcpo.agents.stacked import SeedAdam

    g = torch.Generator().manual_seed(1)
    P, Q = (torch.nn.Parameter(torch.randn(2, 4, 3, generator=g)) for _ in range(2))
    opt = SeedAdam([P, Q], lr=1e-3, weight_decay=0.0)
    P.grad, Q.grad = torch.randn(2, 4, 3, generator=g), torch.randn(2, 4, 3, generator=g)
    opt.step(None)
    saved = [t.clone() for t in opt.exp_avg + opt.exp_avg_sq]
    ref_p, ref_q = torch.nn.Parameter(torch.zeros(4, 3)), torch.nn.Parameter(torch.zeros(4, 3))
    ref = torch.optim.Adam([ref_p, ref_q], lr=1e-3)
    ref_p.grad, ref_q.grad = torch.ones(4, 3), torch.ones(4, 3)
    ref.step()
    ref_p.grad = torch.ones(4, 3)
    ref.param_groups[0]["params"] = [ref_p]  # a second step on one parameter only: steps 2 and 1
    ref.step()
    ref.param_groups[0]["params"] = [ref_p, ref_q]
    with pytest.raises(ValueError, match=r"unequal step counts \[1, 2\]"):
        opt.load_seed_state_dict(1, ref.state_dict())
    for a, b in zip(opt.exp_avg + opt.exp_avg_sq, saved):
        assert torch.equal(a, b)
    assert opt.steps.tolist() == [1, 1]


def test_a_refused_seed_state_leaves_the_population_as_it_was():
    """All or nothing: an LCPO state with a fixed OOD threshold loaded into an agent that calibrates it (refused
    by the last check, after the networks, optimizers, rollout, RNGs and reservoir), and an A2C state loaded into
    PPO (no ``early_stops``), leave every seed exactly as it was; a population state whose last member is refused
    rolls the members loaded before it back too."""
    from lcpo.agents import A2C, LCPO, PPO

    fixed = LCPO(_env(), seed=3, **LCPO_KW)
    drive(fixed, [_env()], 250, [3])
    auto = LCPO.population(_env(), [0, 1], ood_threshold="auto", **LCPO_KW)
    drive(auto, [_env(), _env()], 250, [0, 1])
    before = auto.state_dict()
    with pytest.raises(ValueError, match="fixed OOD threshold"):
        auto.load_seed_state_dict(1, fixed.state_dict())
    assert_states_equal(auto.state_dict(), before)
    a2c = A2C(_env(), seed=4, **PPO_KW)
    drive(a2c, [_env()], 250, [4])
    ppo = PPO.population(_env(), [0, 1], **PPO_KW)
    drive(ppo, [_env(), _env()], 250, [0, 1])
    before = ppo.state_dict()
    with pytest.raises(KeyError, match="early_stops"):
        ppo.load_seed_state_dict(0, a2c.state_dict())
    assert_states_equal(ppo.state_dict(), before)
    other = PPO.population(_env(), [0, 1], **PPO_KW)
    drive(other, [_env(), _env()], 300, [7, 8])
    mixed = other.state_dict()
    mixed["members"][1] = a2c.state_dict()  # member 0 loads, member 1 is refused
    with pytest.raises(KeyError, match="early_stops"):
        ppo.load_state_dict(mixed)
    assert_states_equal(ppo.state_dict(), before)
