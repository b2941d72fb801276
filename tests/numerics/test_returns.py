"""GAE against hand-computed values (episode cuts, termination vs truncation, batch end)."""

import numpy as np
import pytest

from lcpo.numerics.returns import gae


def test_gae_hand_computed_with_truncation_termination_and_batch_end():
    # 5 steps: step 1 truncated (bootstrap V(next)=5 but cut accumulation), step 3 terminated, step 4 is the
    # batch end (bootstraps next value 2, nothing after it).
    r = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    v = np.array([0.5, 1.0, 1.5, 2.0, 2.5])
    nv = np.array([1.0, 5.0, 2.0, 9.0, 2.0])
    term = np.array([0, 0, 0, 1, 0], bool)
    trunc = np.array([0, 1, 0, 0, 0], bool)
    g, lam = 0.9, 0.8
    d = [1 + 0.9 * 1.0 - 0.5, 2 + 0.9 * 5.0 - 1.0, 3 + 0.9 * 2.0 - 1.5, 4 + 0 - 2.0, 5 + 0.9 * 2.0 - 2.5]
    a4 = d[4]
    a3 = d[3]                       # terminated: no bootstrap, no accumulation from step 4
    a2 = d[2] + g * lam * a3
    a1 = d[1]                       # truncated: bootstrap from V(next)=5, but no accumulation from step 2
    a0 = d[0] + g * lam * a1
    adv, ret = gae(r, v, nv, term, trunc, g, lam)
    np.testing.assert_allclose(adv, [a0, a1, a2, a3, a4], rtol=1e-12)
    np.testing.assert_allclose(ret, adv + v, rtol=1e-12)


def test_termination_wins_when_both_flags_set():
    adv, _ = gae([1.0], [0.0], [100.0], [True], [True], 0.99, 0.95)
    assert adv[0] == pytest.approx(1.0)
    adv, _ = gae([1.0], [0.0], [100.0], [False], [True], 0.99, 0.95)
    assert adv[0] == pytest.approx(1.0 + 99.0)


def test_lambda_one_gives_discounted_return_with_bootstrap():
    r = np.ones(4)
    adv, ret = gae(r, np.zeros(4), np.array([0, 0, 0, 10.0]), np.zeros(4, bool), np.zeros(4, bool), 0.5, 1.0)
    expected = [1 + 0.5 + 0.25 + 0.125 + 0.0625 * 10, 1 + 0.5 + 0.25 + 0.125 * 10, 1 + 0.5 + 0.25 * 10, 1 + 5.0]
    np.testing.assert_allclose(ret, expected)


def test_per_step_gamma_array():
    adv, _ = gae([1.0, 1.0], [0.0, 0.0], [0.0, 4.0], [False, False], [False, False], np.array([0.5, 0.25]), 1.0)
    np.testing.assert_allclose(adv, [1 + 0.5 * 1 * (1 + 0.25 * 4), 1 + 0.25 * 4])


@pytest.mark.parametrize("bad, match", [
    (dict(rewards=[np.nan, 1.0]), "rewards"),
    (dict(values=[0.0]), "values"),
    (dict(terminated=[False]), "terminated"),
    (dict(gamma=1.5), "gamma"),
])
def test_gae_rejects_bad_input(bad, match):
    args = dict(rewards=[1.0, 1.0], values=[0.0, 0.0], next_values=[0.0, 0.0], terminated=[False, False],
                truncated=[False, False], gamma=0.9, lam=0.9)
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        gae(**args)
