"""Categorical helpers: KL >= 0 by construction and precise for tiny divergences (on every CPU kernel), and
exact, finite values and gradients with zero-probability choices (``-inf`` logits), for every helper the agents
use, against analytic values."""

import math

import numpy as np
import pytest
import torch

from lcpo.numerics import categorical
from lcpo.agents.lcpo_p import anchor_cross_entropy
from lcpo.agents.sac import finite_log_probs, policy_entropy
from lcpo.agents.nets import CategoricalPolicy

NEG = -math.inf


# ------------------------------------------------------------------------------------------------- KL >= 0
def _near_pairs(n=4000, d=1, k=15, scale=1e-4, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, d, k, generator=g, dtype=torch.float64) * 2
    dz = torch.randn(n, d, k, generator=g, dtype=torch.float64) * scale
    return z, z + dz


@pytest.mark.parametrize("scale", [1e-6, 1e-5, 1e-4, 1e-3])
def test_kl_is_non_negative_and_precise_for_tiny_divergences(scale):
    z_old, z_new = _near_pairs(scale=scale)
    ref = categorical.kl(torch.log_softmax(z_old, -1), torch.log_softmax(z_new, -1))  # float64 reference
    lp_old = torch.log_softmax(z_old.float(), -1)
    lp_new = torch.log_softmax(z_new.float(), -1)
    for f in (categorical.kl, CategoricalPolicy.kl):
        k32 = f(lp_old, lp_new)
        assert k32.dtype == torch.float32
        assert bool((k32 >= 0).all()), float(k32.min())  # the textbook float32 form goes negative here
        # the float32 log-probabilities themselves differ from the float64 ones by ~1e-7: the KL of the float32
        # inputs is what is computed; it must sit within that rounding of the reference, never below 0
        err = (k32.double() - ref).abs()
        assert float(err.max()) < 2e-6 * scale + 1e-12
    assert float(categorical.kl(lp_old, lp_old).abs().max()) == 0.0  # KL(p || p) is exactly 0


def test_kl_equals_textbook_definition_away_from_zero():
    g = torch.Generator().manual_seed(1)
    lp = torch.log_softmax(torch.randn(50, 3, 7, generator=g, dtype=torch.float64), -1)
    lq = torch.log_softmax(torch.randn(50, 3, 7, generator=g, dtype=torch.float64) * 3, -1)
    textbook = (lp.exp() * (lp - lq)).sum((-1, -2))
    torch.testing.assert_close(categorical.kl(lp, lq), textbook, rtol=1e-12, atol=1e-12)
    # the branch for q >> p (d > 1) too: p tiny, q large
    lp2 = torch.log_softmax(torch.tensor([[[-90.0, 0.0, 0.0]]], dtype=torch.float64), -1)
    lq2 = torch.log_softmax(torch.tensor([[[0.0, -5.0, -5.0]]], dtype=torch.float64), -1)
    torch.testing.assert_close(categorical.kl(lp2, lq2), (lp2.exp() * (lp2 - lq2)).sum((-1, -2)))
    lp3 = torch.log_softmax(torch.tensor([[[-90.0, 0.0, 0.0]]]), -1)  # float32: p underflows-ish, no overflow
    lq3 = torch.log_softmax(torch.tensor([[[0.0, -5.0, -5.0]]]), -1)
    assert torch.isfinite(categorical.kl(lp3, lq3)).all()


def test_kl_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="shapes differ"):
        categorical.kl(torch.zeros(2, 1, 3), torch.zeros(2, 1, 4))
    with pytest.raises(ValueError, match="shapes differ"):
        categorical.cross_entropy(torch.zeros(2, 1, 3), torch.zeros(2, 1, 4))


# ---------------------------------------------------------------------------------- zero-probability choices
def _xlogx(p):
    return 0.0 if p == 0 else p * math.log(p)


def _probs(logits):
    z = np.asarray(logits, dtype=np.float64)
    e = np.where(np.isfinite(z), np.exp(z - z[np.isfinite(z)].max()), 0.0)
    return e / e.sum()


# one action dimension with three choices; the old policy gives choice 2 probability 0
OLD = [0.3, -0.4, NEG]
NEW_CASES = {
    "new finite": [0.1, 0.2, -1.0],        # new policy puts mass where the old has none
    "new also -inf": [0.5, -0.2, NEG],      # both zero at choice 2
    "new zero elsewhere": [0.5, NEG, 0.7],  # new gives 0 where old > 0: KL = +inf (exact)
}


def _analytic(old, new):
    p, q = _probs(old), _probs(new)
    h = -sum(_xlogx(x) for x in p)
    if any(pi > 0 and qi == 0 for pi, qi in zip(p, q)):
        kl = ce = math.inf
    else:
        kl = sum(pi * math.log(pi / qi) for pi, qi in zip(p, q) if pi > 0)
        ce = -sum(pi * math.log(qi) for pi, qi in zip(p, q) if pi > 0)
    return p, q, h, kl, ce


ENTROPY_FNS = {
    "categorical.entropy": categorical.entropy,
    "CategoricalPolicy.entropy_of": CategoricalPolicy.entropy_of,
    "sac.policy_entropy(log_softmax)": policy_entropy,
    "sac.policy_entropy(finite_log_probs)": "sac-finite",
}


@pytest.mark.parametrize("name", list(ENTROPY_FNS))
@pytest.mark.parametrize("logits", [OLD, [NEG, 1.0, NEG], [0.0, 0.0, 0.0]], ids=["one-zero", "two-zero", "none"])
def test_entropy_with_minus_inf_logits_exact_value_and_gradient(name, logits):
    z = torch.tensor([[logits]], dtype=torch.float64, requires_grad=True)
    if ENTROPY_FNS[name] == "sac-finite":
        h = policy_entropy(finite_log_probs(z))
    else:
        h = ENTROPY_FNS[name](torch.log_softmax(z, -1))
    p = _probs(logits)
    h_ref = -sum(_xlogx(x) for x in p)
    assert float(h.detach()) == pytest.approx(h_ref, abs=1e-12)
    (g,) = torch.autograd.grad(h.sum(), z)
    # dH/dz_k = -p_k (log p_k + H); 0 for a zero-probability choice
    g_ref = [0.0 if pk == 0 else -pk * (math.log(pk) + h_ref) for pk in p]
    assert torch.isfinite(g).all()
    np.testing.assert_allclose(g[0, 0].numpy(), g_ref, atol=1e-12)


KL_FNS = {"categorical.kl": categorical.kl, "CategoricalPolicy.kl": CategoricalPolicy.kl}


@pytest.mark.parametrize("name", list(KL_FNS))
@pytest.mark.parametrize("case", list(NEW_CASES))
def test_kl_with_minus_inf_logits_exact_value_and_gradient(name, case):
    new = NEW_CASES[case]
    p, q, _, kl_ref, _ = _analytic(OLD, new)
    lp_old = torch.log_softmax(torch.tensor([[OLD]], dtype=torch.float64), -1)
    z = torch.tensor([[new]], dtype=torch.float64, requires_grad=True)
    kl = KL_FNS[name](lp_old, torch.log_softmax(z, -1))
    if math.isinf(kl_ref):
        assert float(kl.detach()) == math.inf
    else:
        assert float(kl.detach()) == pytest.approx(kl_ref, abs=1e-12)
    (g,) = torch.autograd.grad(kl.sum(), z)
    assert torch.isfinite(g).all()
    np.testing.assert_allclose(g[0, 0].numpy(), q - p, atol=1e-12)  # d KL / d z_new = q - p


def test_kl_ignores_actions_the_old_policy_never_takes():
    # old (1/2, 1/2, 0), new (1/4, 1/4, 1/2): KL = 2 * 1/2 ln(2) = ln 2, whatever the new policy does at choice 2
    lp_old = torch.log(torch.tensor([[[0.5, 0.5, 0.0]]], dtype=torch.float64))
    lq = torch.log(torch.tensor([[[0.25, 0.25, 0.5]]], dtype=torch.float64))
    assert float(categorical.kl(lp_old, lq)) == pytest.approx(math.log(2), abs=1e-12)
    # old with mass where new is 0 is infinite; two-dimensional products add
    lq0 = torch.log(torch.tensor([[[1.0, 0.0, 0.0]]], dtype=torch.float64))
    assert float(categorical.kl(lp_old, lq0)) == math.inf
    both = categorical.kl(torch.cat([lp_old, lp_old], 1), torch.cat([lq, lp_old], 1))
    assert float(both) == pytest.approx(math.log(2), abs=1e-12)


CE_FNS = {"categorical.cross_entropy": lambda a, b: categorical.cross_entropy(a, b),
          "lcpo_p.anchor_cross_entropy": anchor_cross_entropy}


@pytest.mark.parametrize("name", list(CE_FNS))
@pytest.mark.parametrize("case", list(NEW_CASES))
def test_cross_entropy_with_minus_inf_logits_exact_value_and_gradient(name, case):
    new = NEW_CASES[case]
    p, q, _, _, ce_ref = _analytic(OLD, new)
    lp_old = torch.log_softmax(torch.tensor([[OLD]], dtype=torch.float64), -1)
    z = torch.tensor([[new]], dtype=torch.float64, requires_grad=True)
    ce = CE_FNS[name](lp_old, torch.log_softmax(z, -1))
    if math.isinf(ce_ref):
        assert float(ce.detach().sum()) == math.inf
    else:
        assert float(ce.detach().sum()) == pytest.approx(ce_ref, abs=1e-12)
    (g,) = torch.autograd.grad(ce.sum(), z)
    assert torch.isfinite(g).all()
    np.testing.assert_allclose(g[0, 0].numpy(), q - p, atol=1e-12)  # d CE / d z_new = q - p


@pytest.mark.parametrize("f", [categorical.log_prob_of, CategoricalPolicy.log_prob_of])
def test_log_prob_of_is_exact_with_minus_inf_logits(f):
    z = torch.tensor([[OLD, [NEG, 2.0, 1.0]]], dtype=torch.float64, requires_grad=True)  # (1, 2, 3)
    logp = torch.log_softmax(z, -1)
    p0, p1 = _probs(OLD), _probs([NEG, 2.0, 1.0])
    possible = f(logp, torch.tensor([[0, 1]]))
    assert float(possible.detach()) == pytest.approx(math.log(p0[0]) + math.log(p1[1]), abs=1e-12)
    (g,) = torch.autograd.grad(possible.sum(), z)
    # d log pi(a) / d z = onehot(a) - p per dimension: finite, 0 at the zero-probability choices
    np.testing.assert_allclose(g[0].numpy(), [np.eye(3)[0] - p0, np.eye(3)[1] - p1], atol=1e-12)
    impossible = f(logp.detach(), torch.tensor([[2, 1]]))  # choice 2 of dimension 0 has probability 0
    assert float(impossible) == -math.inf


def test_policy_log_probs_keep_minus_inf():
    policy = CategoricalPolicy(2, 1, 3, hidden=(4,))
    with torch.no_grad():
        policy.body[-1].bias.copy_(torch.tensor([0.0, 0.0, NEG]))
    logp = policy.log_probs(torch.zeros(5, 2))
    assert torch.isinf(logp[:, 0, 2]).all() and torch.isfinite(logp[:, 0, :2]).all()
    assert torch.isfinite(CategoricalPolicy.entropy_of(logp)).all()
    torch.testing.assert_close(logp.exp().sum(-1), torch.ones(5, 1))


def test_finite_log_probs_clamp_but_keep_probabilities():
    lp = finite_log_probs(torch.tensor([[OLD]]))
    assert torch.isfinite(lp).all() and float(lp.exp()[0, 0, 2]) == 0.0
