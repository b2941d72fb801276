"""The ensemble dynamics model shared by MBPO and MBCD fits a known linear system (MBPO's model check); the
CUSUM checks are in test_mbcd.py."""

import numpy as np
import pytest
import torch

from lcpo.agents.models import EnsembleDynamics, one_hot_actions


@pytest.fixture(autouse=True)
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _linear_system(rng, n):
    A = np.array([[0.9, 0.2, 0.0], [-0.1, 0.8, 0.3], [0.0, -0.2, 0.95]])
    B = np.array([[1.0, 0.0], [0.5, -1.0], [0.0, 2.0]])
    c = np.array([1.0, -2.0, 0.5, 3.0, -1.0])
    o, a = rng.normal(size=(n, 3)), rng.normal(size=(n, 2))
    return A, B, c, o, a, o @ A.T + a @ B.T, o @ c[:3] + a @ c[3:]


def test_linear_ensemble_recovers_a_known_linear_system():
    rng = np.random.default_rng(0)
    _, _, _, o, a, nxt, r = _linear_system(rng, 2000)
    model = EnsembleDynamics(3, 2, members=3, hidden=(), lr=1e-2, seed=0)
    model.fit(o, a, r, nxt, steps=2000, batch_size=128, rng=rng)
    _, _, _, ot, at, nt, rt = _linear_system(rng, 100)
    pred = model.predict(ot, at).numpy()  # (E, B, 4): [next_obs - obs, reward]
    assert pred.shape == (3, 100, 4)
    np.testing.assert_allclose(pred[..., :3] + ot, np.broadcast_to(nt, (3, 100, 3)), atol=2e-3)
    np.testing.assert_allclose(pred[..., 3], np.broadcast_to(rt, (3, 100)), atol=2e-3)
    assert float(model.residual_var.max()) < 1e-5
    # sampling adds only the small residual noise (sd < 0.01 here): samples equal the system's next states
    s_next, s_r = model.sample(ot, at, rng)
    np.testing.assert_allclose(s_next, nt, atol=0.05)
    np.testing.assert_allclose(s_r, rt, atol=0.05)


def test_mlp_ensemble_fits_a_linear_system_and_surprise_flags_another():
    rng = np.random.default_rng(1)
    _, _, _, o, a, nxt, r = _linear_system(rng, 3000)
    model = EnsembleDynamics(3, 2, members=4, hidden=(64, 64), lr=3e-3, seed=0)
    model.fit(o, a, r, nxt, steps=1500, batch_size=128, rng=rng)
    _, _, _, ot, at, nt, rt = _linear_system(rng, 500)
    err = np.abs(model.predict(ot, at).numpy().mean(0)[:, :3] + ot - nt).mean()
    assert err < 0.05 * np.abs(nt - ot).mean()
    z_same = model.surprise(ot, at, rt, nt)
    z_other = model.surprise(ot, at, rt + 1.0, nt + 0.5)  # another system: every transition shifted
    assert z_other.mean() > 100 * max(z_same.mean(), 1.0)


def test_one_hot_actions():
    np.testing.assert_array_equal(one_hot_actions(np.array([[0, 2], [1, 0]]), 3),
                                  [[1, 0, 0, 0, 0, 1], [0, 1, 0, 1, 0, 0]])
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        one_hot_actions(np.array([[3]]), 3)
