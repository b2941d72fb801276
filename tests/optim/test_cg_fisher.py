"""Conjugate gradient and Fisher-vector products against direct linear algebra."""

import numpy as np
import pytest
import torch

from lcpo.agents.nets import CategoricalPolicy
from lcpo.optim import (NotPositiveDefiniteError, autograd_fvp, conjugate_gradient, flat_grad, flat_params,
                        kl_constrained_step, mlp_fvp, set_flat_params)


@pytest.mark.parametrize("n", [3, 10, 25])
def test_cg_equals_direct_solve_on_random_spd(n):
    rng = np.random.default_rng(n)
    m = rng.normal(size=(n, n))
    A = m @ m.T + 0.5 * np.eye(n)
    b = rng.normal(size=n)
    At = torch.tensor(A)
    x = conjugate_gradient(lambda v: At @ v, torch.tensor(b), iters=n + 5, residual_tol=1e-28)
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(A, b), rtol=1e-7, atol=1e-9)


def test_cg_rejects_non_spd():
    A = torch.tensor([[1.0, 0.0], [0.0, -1.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match="positive definite"):
        conjugate_gradient(lambda v: A @ v, torch.tensor([0.0, 1.0], dtype=torch.float64), iters=5)


@pytest.mark.parametrize("matvec", [lambda v: -v, lambda v: 0.0 * v, lambda v: torch.full_like(v, float("nan")),
                                    lambda v: torch.full_like(v, float("inf"))],
                         ids=["negative", "zero", "nan", "inf"])
def test_cg_raises_a_named_error_on_unusable_curvature(matvec):
    with pytest.raises(NotPositiveDefiniteError, match="p\\^T A p"):
        conjugate_gradient(matvec, torch.tensor([1.0, 2.0, 3.0]), iters=5)
    assert issubclass(NotPositiveDefiniteError, ValueError)


def _tiny_problem():
    torch.manual_seed(0)
    policy = CategoricalPolicy(3, 1, 4, hidden=(5,))
    obs = torch.randn(16, 3)
    actions = torch.randint(0, 4, (16, 1))
    adv = torch.randn(16)
    with torch.no_grad():
        logp_old_all = policy.log_probs(obs)
        logp_old = CategoricalPolicy.log_prob_of(logp_old_all, actions)

    def loss_fn():
        logp = CategoricalPolicy.log_prob_of(policy.log_probs(obs), actions)
        return -(adv * torch.exp(logp - logp_old)).mean()

    def kl_fn():
        return CategoricalPolicy.kl(logp_old_all, policy.log_probs(obs)).mean()

    grad = flat_grad(loss_fn(), policy)
    return policy, grad, loss_fn, kl_fn, obs


@pytest.mark.parametrize("kind", ["nan", "negative", "nan-after-solve", "indefinite"])
def test_constrained_step_skips_on_unusable_fisher_and_leaves_parameters_bit_identical(kind):
    policy, grad, loss_fn, kl_fn, obs = _tiny_problem()
    good = autograd_fvp(policy, obs, 0.1)
    calls = []

    def fvp(v):
        calls.append(1)
        if kind == "nan":
            return torch.full_like(v, float("nan"))
        if kind == "negative":
            return -good(v)
        if kind == "nan-after-solve":  # CG succeeds, the curvature of its solution is NaN
            return good(v) if len(calls) <= 3 else torch.full_like(v, float("nan"))
        d = torch.ones_like(v)
        d[::2] = -1.0  # indefinite diagonal: some curvature negative
        return d * v

    before = flat_params(policy)
    res = kl_constrained_step(policy, grad, fvp, loss_fn, (kl_fn,), (0.01,), scale_kl=0.01, cg_iters=3)
    assert res.skipped and not res.accepted and res.kls == (0.0,)
    assert torch.equal(flat_params(policy), before)
    # with the true Fisher the same step is taken and not skipped
    ok = kl_constrained_step(policy, grad, good, loss_fn, (kl_fn,), (0.01,), scale_kl=0.01)
    assert not ok.skipped and ok.accepted


def test_constrained_step_with_zero_gradient_is_no_step_not_a_skip():
    policy, grad, loss_fn, kl_fn, obs = _tiny_problem()
    res = kl_constrained_step(policy, torch.zeros_like(grad), autograd_fvp(policy, obs, 0.1), loss_fn, (kl_fn,),
                              (0.01,), scale_kl=0.01)
    assert not res.accepted and not res.skipped


def _explicit_kl_hessian(policy, obs):
    theta0 = flat_params(policy).double()
    with torch.no_grad():
        logp_old = policy.double().log_probs(obs.double())

    def kl_of(theta):
        # functional forward pass of the MLP at parameters theta
        i, x = 0, obs.double()
        lins = [m for m in policy.body if isinstance(m, torch.nn.Linear)]
        for k, lin in enumerate(lins):
            nw, nb = lin.weight.numel(), lin.bias.numel()
            W = theta[i:i + nw].view_as(lin.weight)
            b = theta[i + nw:i + nw + nb]
            i += nw + nb
            x = x @ W.T + b
            if k < len(lins) - 1:
                x = torch.relu(x)
        logp = torch.log_softmax(x.view(-1, policy.dims, policy.bins), -1)
        return CategoricalPolicy.kl(logp_old, logp).mean()

    return torch.autograd.functional.hessian(kl_of, theta0)


def test_fisher_vector_products_equal_explicit_kl_hessian():
    torch.manual_seed(0)
    policy = CategoricalPolicy(3, 2, 4, hidden=(5,)).double()
    obs = torch.randn(7, 3, dtype=torch.float64)
    H = _explicit_kl_hessian(policy, obs)
    n = H.shape[0]
    v = torch.randn(n, dtype=torch.float64)
    damping = 0.1
    expected = H @ v + damping * v
    torch.testing.assert_close(autograd_fvp(policy, obs, damping)(v), expected, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(mlp_fvp(policy, obs, damping)(v), expected, rtol=1e-9, atol=1e-12)
    # the Hessian of a KL at its minimum is positive semi-definite
    assert torch.linalg.eigvalsh(H).min() > -1e-10


def test_mlp_fvp_matches_autograd_on_paper_sized_network():
    torch.manual_seed(1)
    policy = CategoricalPolicy(9, 3, 15)
    obs = torch.randn(50, 9)
    v = torch.randn(flat_params(policy).numel())
    torch.testing.assert_close(mlp_fvp(policy, obs, 0.1)(v), autograd_fvp(policy, obs, 0.1)(v), rtol=1e-4, atol=1e-6)


def test_flat_params_round_trip():
    policy = CategoricalPolicy(4, 1, 3)
    theta = flat_params(policy)
    set_flat_params(policy, theta * 2)
    torch.testing.assert_close(flat_params(policy), theta * 2)
    with pytest.raises(ValueError):
        set_flat_params(policy, theta[:-1])
