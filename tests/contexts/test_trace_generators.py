"""Statistics, determinism and validation of lcpo.contexts.generators."""

from __future__ import annotations

import numpy as np
import pytest

from lcpo.contexts import ContextTrace, TraceError, generators as gen


def test_ou_stationary_moments_and_autocorrelation():
    theta, mu, sigma = 0.05, np.array([1.5, -2.0]), np.array([0.3, 0.1])
    x = gen.ornstein_uhlenbeck(400_000, 2, theta=theta, mu=mu, sigma=sigma, seed=7)
    assert x.shape == (400_000, 2) and x.dtype == np.float64
    expected_std = sigma / np.sqrt(2 * theta)  # exact stationary law of the OU process
    np.testing.assert_allclose(x.std(axis=0), expected_std, rtol=0.03)
    mean_se = expected_std * np.sqrt(2 / (theta * 400_000))  # standard error of a long OU time average
    assert np.all(np.abs(x.mean(axis=0) - mu) < 4 * mean_se)
    for k in range(2):
        c = x[:, k] - x[:, k].mean()
        for lag in (1, 10):
            rho = (c[lag:] * c[:-lag]).mean() / c.var()
            assert rho == pytest.approx(np.exp(-theta * lag), abs=0.02)


def test_ou_exact_transition_matches_recursion():
    """The lfilter path equals the explicit recursion x[t+1] = mu + a (x[t] - mu) + s eps[t]."""
    theta, mu, sigma, x0 = 0.2, 0.5, 0.7, 3.0
    x = gen.ornstein_uhlenbeck(50, 1, theta=theta, mu=mu, sigma=sigma, x0=x0, seed=3)
    eps = np.random.default_rng(3).standard_normal((50, 1))[:, 0]
    a = np.exp(-theta)
    s = sigma * np.sqrt((1 - a**2) / (2 * theta))
    ref = np.empty(50)
    ref[0] = x0
    for t in range(1, 50):
        ref[t] = mu + a * (ref[t - 1] - mu) + s * eps[t]
    np.testing.assert_allclose(x[:, 0], ref, rtol=1e-12, atol=1e-12)


def test_ou_theta_zero_is_random_walk():
    x = gen.ornstein_uhlenbeck(100_000, 1, theta=0.0, sigma=0.2, x0=1.0, seed=0)
    assert x[0, 0] == 1.0
    assert np.diff(x[:, 0]).std() == pytest.approx(0.2, rel=0.02)


def test_ou_zero_sigma_decays_exponentially():
    x = gen.ornstein_uhlenbeck(20, 1, theta=0.5, mu=1.0, sigma=0.0, x0=3.0, seed=0)
    np.testing.assert_allclose(x[:, 0], 1.0 + 2.0 * np.exp(-0.5 * np.arange(20)))


def test_seeded_determinism():
    a = gen.ornstein_uhlenbeck(1000, 2, seed=11)
    b = gen.ornstein_uhlenbeck(1000, 2, seed=11)
    c = gen.ornstein_uhlenbeck(1000, 2, seed=12)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    rng = np.random.default_rng(11)
    first = gen.signal_plus_noise(10, np.zeros(10), noise_std=1.0, seed=rng)
    second = gen.signal_plus_noise(10, np.zeros(10), noise_std=1.0, seed=rng)
    assert not np.array_equal(first, second)  # a Generator continues its stream
    np.testing.assert_array_equal(first, gen.signal_plus_noise(10, np.zeros(10), 1.0, seed=11))
    np.testing.assert_array_equal(gen.piecewise_constant(50, [10], [0, 1], 0.5, seed=np.random.SeedSequence(4)),
                                  gen.piecewise_constant(50, [10], [0, 1], 0.5, seed=np.random.SeedSequence(4)))


@pytest.mark.parametrize("seed", [None, 1.5, "3", True])
def test_bad_seeds(seed):
    with pytest.raises(TypeError, match="seed"):
        gen.ornstein_uhlenbeck(10, seed=seed)
    with pytest.raises(ValueError, match="-1"):
        gen.as_generator(-1)


def test_piecewise_constant_levels_and_noise():
    levels = np.array([[1.0, -1.0], [2.0, 0.0], [-3.0, 5.0]])
    x = gen.piecewise_constant(100, [30, 70], levels, noise_std=0.0, seed=0)
    np.testing.assert_array_equal(x[:30], np.tile(levels[0], (30, 1)))
    np.testing.assert_array_equal(x[30:70], np.tile(levels[1], (40, 1)))
    np.testing.assert_array_equal(x[70:], np.tile(levels[2], (30, 1)))
    noisy = gen.piecewise_constant(300_000, [100_000], [0.0, 4.0], noise_std=0.5, seed=1)
    assert noisy.shape == (300_000, 1)
    assert noisy[:100_000].mean() == pytest.approx(0.0, abs=0.01)
    assert noisy[100_000:].mean() == pytest.approx(4.0, abs=0.01)
    assert noisy[100_000:].std() == pytest.approx(0.5, rel=0.01)


@pytest.mark.parametrize("cps, levels, match", [
    ([0, 5], [1, 2, 3], "strictly increasing"),
    ([5, 5], [1, 2, 3], "strictly increasing"),
    ([5, 10], [1, 2, 3], "strictly increasing"),
    ([5], [1, 2, 3], r"levels must have shape \(2,\)"),
    ([2.5], [1, 2], "integers"),
    ([5], [1, np.nan], "finite"),
])
def test_piecewise_constant_errors(cps, levels, match):
    with pytest.raises(TraceError, match=match):
        gen.piecewise_constant(10, cps, levels)


def test_signal_plus_noise():
    x = gen.signal_plus_noise(1000, lambda t: np.stack([np.sin(t / 10), t / 1000], axis=1), seed=0)
    np.testing.assert_allclose(x[:, 0], np.sin(np.arange(1000) / 10))
    np.testing.assert_allclose(x[:, 1], np.arange(1000) / 1000)
    noisy = gen.signal_plus_noise(200_000, np.full(200_000, 2.0), noise_std=[0.25], seed=5)
    assert noisy.std() == pytest.approx(0.25, rel=0.01)
    assert noisy.mean() == pytest.approx(2.0, abs=0.005)
    with pytest.raises(TraceError, match=r"shape \(5,\)"):
        gen.signal_plus_noise(5, np.zeros(4))
    with pytest.raises(TraceError, match="row 2"):
        gen.signal_plus_noise(4, np.array([0, 0, np.inf, 0]))


def test_clip():
    x = np.array([[-5.0, 0.5], [3.0, 9.0]])
    np.testing.assert_array_equal(gen.clip(x, 4.0), [[-4, 0.5], [3, 4]])
    np.testing.assert_array_equal(gen.clip(x, (-1.0, 1.0)), [[-1, 0.5], [1, 1]])
    clipped = gen.clip(ContextTrace(x, "w"), 2.0)
    assert isinstance(clipped, ContextTrace) and clipped.name == "w"
    assert clipped.metadata["clip"] == [-2.0, 2.0]
    assert np.abs(clipped.values).max() == 2.0
    for bad in (0.0, (1.0, -1.0), np.inf, (0, 1, 2)):
        with pytest.raises(TraceError, match="bound"):
            gen.clip(x, bad)


@pytest.mark.parametrize("kwargs, match", [
    ({"length": 0}, "length must be a positive integer"),
    ({"length": 2.0}, "length must be a positive integer"),
    ({"length": 5, "dim": 0}, "dim must be a positive integer"),
    ({"length": 5, "theta": -1.0}, "theta must be >= 0"),
    ({"length": 5, "sigma": [1.0, 2.0]}, r"sigma must be a scalar or have shape \(1,\)"),
    ({"length": 5, "mu": np.nan}, "mu must be finite"),
])
def test_ou_errors(kwargs, match):
    with pytest.raises(TraceError, match=match):
        gen.ornstein_uhlenbeck(**kwargs)
