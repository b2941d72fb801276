"""The stacked Fisher-vector product (issue 26 item 6, a population on a GPU): ``stacked_mlp_fvp`` equals each
seed's own product, takes any subset of its rows, refuses what it cannot compute, and the constrained step solves
all rows in one conjugate gradient with it, to the per-row step's decisions."""

import numpy as np
import pytest
import torch

import lcpo.online.device as device_mod
from lcpo.agents.nets import CategoricalPolicy
from lcpo.agents.stacked import SeedStack
from lcpo.optim import autograd_fvp, flat_params, kl_constrained_step_batch, mlp_fvp
from lcpo.optim.fisher import stacked_mlp_fvp

from test_cg_numpy import _batch_problem


def _stack(R, hidden=(16, 12, 8), dims=2, bins=7, obs_dim=5, dtype=torch.float64):
    members = []
    for s in range(R):
        torch.manual_seed(10 + s)
        members.append(CategoricalPolicy(obs_dim, dims, bins, hidden).to(dtype))
    return SeedStack(members)


def test_stacked_product_equals_each_seeds_autograd_product_on_any_subset_of_rows():
    """Seeds 3, 0, 2 of a stack of 4 (three hidden layers, two action dimensions, float64), each on its own
    states: every row equals double back-propagation of that seed's KL; a subset ``r`` gives the same rows."""
    stack = _stack(4)
    rows = torch.tensor([3, 0, 2])
    g = torch.Generator().manual_seed(0)
    obs = torch.randn(3, 40, 5, generator=g, dtype=torch.float64) * 2
    n = flat_params(stack.members[0]).numel()
    V = torch.randn(3, n, generator=g, dtype=torch.float64)
    fvp = stacked_mlp_fvp(stack, rows, obs, 0.05)
    assert fvp.batched
    out = fvp(V)
    assert out.shape == (3, n) and out.dtype == torch.float64
    for i, k in enumerate(rows.tolist()):
        expected = autograd_fvp(stack.members[k], obs[i], 0.05)(V[i])
        torch.testing.assert_close(out[i], expected, rtol=1e-10, atol=1e-12)
    sub = fvp(V[[2, 0]], torch.tensor([2, 0]))
    torch.testing.assert_close(sub, out[[2, 0]], rtol=1e-12, atol=1e-14)


def test_stacked_product_equals_the_numpy_product_in_float32_on_the_papers_network():
    """The paper's (64, 64) policy, 9 inputs, 15 bins, 200 states per seed, float32: within float32 rounding of
    :func:`mlp_fvp` (the CPU's product)."""
    stack = _stack(3, hidden=(64, 64), dims=1, bins=15, obs_dim=9, dtype=torch.float32)
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(3, 200, 9, generator=g) * 2
    V = torch.randn(3, flat_params(stack.members[0]).numel(), generator=g)
    out = stacked_mlp_fvp(stack, torch.arange(3), obs, 0.1)(V)
    for k in range(3):
        ref = mlp_fvp(stack.members[k], obs[k], 0.1)(V[k])
        assert float((out[k] - ref).abs().max()) <= 1e-5 * float(ref.abs().max())


def test_stacked_product_refuses_what_it_cannot_compute_naming_it():
    stack = _stack(2)
    obs = torch.zeros(2, 4, 5, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"states must be \(m, B, 5\) with B >= 1, got \(2, 4, 6\)"):
        stacked_mlp_fvp(stack, torch.arange(2), torch.zeros(2, 4, 6, dtype=torch.float64), 0.1)
    with pytest.raises(ValueError, match=r"got \(2, 0, 5\)"):
        stacked_mlp_fvp(stack, torch.arange(2), torch.zeros(2, 0, 5, dtype=torch.float64), 0.1)
    with pytest.raises(ValueError, match=r"rows must be \(2,\), got shape \(3,\)"):
        stacked_mlp_fvp(stack, torch.arange(3), obs, 0.1)
    custom = [CategoricalPolicy(5, 1, 3, body=torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(),
                                                                      torch.nn.Linear(4, 3))) for _ in range(2)]
    with pytest.raises(TypeError, match="plain Linear/ReLU bodies"):
        stacked_mlp_fvp(SeedStack(custom), torch.arange(2), torch.zeros(2, 4, 5), 0.1)


def test_the_constrained_step_solves_all_rows_at_once_with_a_batched_product_to_the_same_decisions():
    """The same problem through per-row solves (one row per product call) and through one batched solve with
    the stacked product (all running rows per call): the same acceptance and backtracks per row, parameters
    within 1e-6 relative. Row 1 has no gradient (no step), so the running rows are 0, 2, 3: each must reach
    its own seed's product (positions mapped through the running rows)."""
    R, limit, scale = 4, 2e-3, 1e-2
    outcomes = []
    for batched in (False, True):
        stack, grad, fvp, _, loss_b, kl_b, get_flat, set_flat = _batch_problem(R)
        grad[1] = 0.0
        if batched:
            g = torch.Generator().manual_seed(3)  # _batch_problem's states, drawn again
            obs = torch.randn(R, 64, 4, generator=g)
            fvp = stacked_mlp_fvp(stack, torch.arange(R), obs, 0.1)
        widths = []

        def spy(V, rows, fvp=fvp):
            widths.append(V.shape[0])
            return fvp(V, rows)

        spy.batched = batched
        res = kl_constrained_step_batch(get_flat, set_flat, grad, spy, loss_b, (kl_b,), (limit,), scale_kl=scale,
                                        cg_iters=10, max_backtracks=10)
        outcomes.append(([(r.accepted, r.backtracks, r.skipped) for r in res], get_flat(), widths))
    assert outcomes[0][0] == outcomes[1][0] and any(acc for acc, _, _ in outcomes[1][0])
    assert outcomes[1][0][1] == (False, 10, False)  # row 1: no step, not a skip
    torch.testing.assert_close(outcomes[1][1], outcomes[0][1], rtol=1e-6, atol=1e-7)
    assert max(outcomes[0][2][:-1]) == 1  # per row: one direction per call (the last call is x^T A x for all)
    assert outcomes[1][2][0] == R - 1  # batched: every running row in one call


def test_a_population_off_the_cpu_uses_the_stacked_product_not_one_product_per_seed(monkeypatch):
    """The device code path (what a GPU runs, here on CPU tensors): LCPO's anchored steps and TRPO's steps never
    build a per-seed product, and they are taken (LCPO constrained updates > 0)."""
    import lcpo.agents.lcpo as lcpo_mod
    import lcpo.agents.trpo as trpo_mod
    from lcpo.online.population import Population

    def refuse(*args, **kwargs):
        raise AssertionError("a per-seed product was built on the device path")

    monkeypatch.setattr(device_mod, "host_kernels", lambda device: False)
    monkeypatch.setattr(lcpo_mod, "make_fvp", refuse)
    monkeypatch.setattr(trpo_mod, "make_fvp", refuse)
    pop = Population("lcpo", seeds=[0, 1, 2], trace="wind-1", trace_length=2000, hidden=[16],
                     reservoir_size=600).learn(1200)
    assert (pop.agents.seed_constrained_updates > 0).all()
    trpo = Population("trpo", seeds=[0, 1], trace="wind-1", trace_length=2000, hidden=[16],
                      rollout_steps=400).learn(800)
    assert (trpo.agents.seed_accepted_steps > 0).any()
    assert np.isfinite(np.concatenate([np.asarray(e, dtype=float).ravel() for e in trpo.episodes])).all()
