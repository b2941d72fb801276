"""The NumPy path of the batched constrained step (issue 26, LCPO speed): conjugate gradient on NumPy vectors,
``mlp_fvp``'s NumPy product with its reused buffers, and ``kl_constrained_step_batch(row_matvecs=...)``."""

import numpy as np
import pytest
import torch

from lcpo.agents.nets import CategoricalPolicy
from lcpo.agents.stacked import SeedStack
from lcpo.optim import autograd_fvp, conjugate_gradient, flat_params, kl_constrained_step_batch, mlp_fvp
from lcpo.optim.cg import conjugate_gradient_numpy


def _spd(n, seed):
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, n))
    return m @ m.T + 0.5 * np.eye(n), rng.normal(size=n)


@pytest.mark.parametrize("n", [3, 10, 25])
def test_numpy_cg_equals_direct_solve_and_the_torch_cg(n):
    A, b = _spd(n, n)
    x, ok = conjugate_gradient_numpy(lambda v: A @ v, b, iters=n + 5, residual_tol=1e-28)
    assert ok and x.dtype == np.float64
    np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=1e-7, atol=1e-9)
    At = torch.tensor(A)
    x_torch = conjugate_gradient(lambda v: At @ v, torch.tensor(b), iters=n + 5, residual_tol=1e-28)
    np.testing.assert_allclose(x, x_torch.numpy(), rtol=1e-9, atol=1e-12)


def test_numpy_cg_stops_at_convergence():
    """The identity is solved by the first step: the residual is then zero and no second product is made."""
    calls = []

    def identity(v):
        calls.append(1)
        return v.copy()

    b = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    x, ok = conjugate_gradient_numpy(identity, b, iters=15)
    assert ok and len(calls) == 1
    np.testing.assert_array_equal(x, b)


@pytest.mark.parametrize("matvec", [lambda v: -v, lambda v: 0.0 * v, lambda v: np.full_like(v, np.nan),
                                    lambda v: np.full_like(v, np.inf)], ids=["negative", "zero", "nan", "inf"])
def test_numpy_cg_reports_unusable_curvature_instead_of_raising(matvec):
    _, ok = conjugate_gradient_numpy(matvec, np.array([1.0, 2.0, 3.0], dtype=np.float32), iters=5)
    assert ok is False


def test_numpy_cg_rejects_bad_arguments_naming_them():
    with pytest.raises(ValueError, match=r"1-D right-hand side, got shape \(2, 2\)"):
        conjugate_gradient_numpy(lambda v: v, np.eye(2))
    with pytest.raises(ValueError, match="iters must be >= 1, got 0"):
        conjugate_gradient_numpy(lambda v: v, np.ones(2), iters=0)


def test_mlp_fvp_numpy_form_equals_the_torch_form_and_its_buffers_keep_no_state():
    """``.numpy`` is the torch form bit for bit; products of other vectors in between (the reused buffers) leave
    a product unchanged bit for bit, and each call returns a new array."""
    torch.manual_seed(2)
    policy = CategoricalPolicy(9, 2, 15, hidden=(64, 64))
    obs = torch.randn(200, 9) * 2
    fvp = mlp_fvp(policy, obs, 0.1)
    g = torch.Generator().manual_seed(0)
    v1, v2 = (torch.randn(flat_params(policy).numel(), generator=g) for _ in range(2))
    first = fvp.numpy(v1.numpy())
    np.testing.assert_array_equal(fvp(v1).numpy(), first)
    other = fvp.numpy(v2.numpy())
    again = fvp.numpy(v1.numpy())
    np.testing.assert_array_equal(again, first)
    assert again is not first and not np.shares_memory(other, again)


def test_mlp_fvp_equals_autograd_on_a_deeper_float64_network():
    """Three hidden layers, two action dimensions, float64: the forward-mode/backward product with the folded
    biases equals double back-propagation of the KL to rounding."""
    torch.manual_seed(3)
    policy = CategoricalPolicy(5, 2, 7, hidden=(16, 12, 8)).double()
    obs = torch.randn(40, 5, dtype=torch.float64)
    v = torch.randn(flat_params(policy).numel(), dtype=torch.float64)
    torch.testing.assert_close(mlp_fvp(policy, obs, 0.05)(v), autograd_fvp(policy, obs, 0.05)(v),
                               rtol=1e-10, atol=1e-12)


def _policies(R):
    out = []
    for s in range(R):
        torch.manual_seed(s)
        out.append(CategoricalPolicy(4, 1, 5, (8,)))
    return out


def _batch_problem(R, bad_row=None):
    """R policies stacked, their surrogates and KLs, and per-row products (row ``bad_row``'s returns NaN)."""
    g = torch.Generator().manual_seed(3)
    obs = torch.randn(R, 64, 4, generator=g)
    acts = torch.randint(0, 5, (R, 64, 1), generator=g)
    adv = torch.randn(R, 64, generator=g)
    stack = SeedStack(_policies(R))
    with torch.no_grad():
        lo = stack.log_probs(obs)
    lpo = CategoricalPolicy.log_prob_of(lo, acts)

    def loss_b():
        lp = CategoricalPolicy.log_prob_of(stack.log_probs(obs), acts)
        return -(adv * torch.exp(lp - lpo)).mean(dim=1)

    def kl_b():
        return CategoricalPolicy.kl(lo, stack.log_probs(obs)).mean(dim=1)

    loss_b().sum().backward()
    grad = torch.cat([p.grad.reshape(R, -1) for p in stack.params], dim=1)
    for p in stack.params:
        p.grad = None
    fvps = [mlp_fvp(stack.members[k], obs[k], 0.1) for k in range(R)]
    nan = lambda v: np.full_like(v, np.nan)  # noqa: E731
    row_np = [nan if k == bad_row else f.numpy for k, f in enumerate(fvps)]

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

    return stack, grad, fvp, row_np, loss_b, kl_b, get_flat, set_flat


def test_batched_step_with_numpy_products_matches_the_torch_products():
    """The same constrained step through the per-row NumPy CG and through the torch batch CG: the same
    acceptance and backtracks per row, parameters within 1e-6 relative (the dot products round differently)."""
    R, limit, scale = 4, 2e-3, 1e-2
    outcomes = []
    for numpy_path in (False, True):
        stack, grad, fvp, row_np, loss_b, kl_b, get_flat, set_flat = _batch_problem(R)
        res = kl_constrained_step_batch(get_flat, set_flat, grad, None if numpy_path else fvp, loss_b, (kl_b,),
                                        (limit,), scale_kl=scale, cg_iters=10, max_backtracks=10,
                                        row_matvecs=row_np if numpy_path else None)
        outcomes.append(([(r.accepted, r.backtracks, r.skipped) for r in res], get_flat()))
    assert outcomes[0][0] == outcomes[1][0]
    assert any(acc for acc, _, _ in outcomes[1][0])
    torch.testing.assert_close(outcomes[1][1], outcomes[0][1], rtol=1e-6, atol=1e-7)


def test_batched_step_numpy_row_with_unusable_curvature_is_skipped_alone():
    """Row 1's NumPy product returns NaN: that row is skipped (parameters bit-identical), the other rows' outcome
    and parameters equal the same step with row 1 healthy, bit for bit (each row's solve is its own)."""
    R = 3
    runs = []
    for bad in (None, 1):
        stack, grad, _, row_np, loss_b, kl_b, get_flat, set_flat = _batch_problem(R, bad_row=bad)
        before = get_flat()
        res = kl_constrained_step_batch(get_flat, set_flat, grad, None, loss_b, (kl_b,), (2e-3,), scale_kl=1e-2,
                                        cg_iters=10, max_backtracks=10, row_matvecs=row_np)
        runs.append((res, before, get_flat()))
    (good, _, p_good), (res, before, p_bad) = runs
    assert res[1].skipped and not res[1].accepted and torch.equal(p_bad[1], before[1])
    for k in (0, 2):
        assert (res[k].accepted, res[k].backtracks) == (good[k].accepted, good[k].backtracks)
        assert torch.equal(p_bad[k], p_good[k])


def test_batched_step_needs_one_numpy_product_per_row():
    stack, grad, _, row_np, loss_b, kl_b, get_flat, set_flat = _batch_problem(2)
    with pytest.raises(ValueError, match="1 row products for 2 rows"):
        kl_constrained_step_batch(get_flat, set_flat, grad, None, loss_b, (kl_b,), (2e-3,), scale_kl=1e-2,
                                  row_matvecs=row_np[:1])
