"""Conjugate gradient and Fisher-vector products against direct linear algebra."""

import numpy as np
import pytest
import torch

from lcpo.nets import CategoricalPolicy
from lcpo.optim import autograd_fvp, conjugate_gradient, flat_params, mlp_fvp, set_flat_params


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
