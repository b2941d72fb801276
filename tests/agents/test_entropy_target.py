"""Entropy targets of automatically tuned temperatures: a fraction >= 1 of ln|A| (unreachable: the temperature
would grow without bound) is refused by every agent that has one, a fraction above 0.95 warns, and the target in
nats is fraction * ln(bins) * dims."""

import dataclasses
import math
import warnings

import gymnasium as gym
import pytest

import lcpo.envs  # noqa: F401
from lcpo.agents import AGENTS
from lcpo.numerics.categorical import ENTROPY_TARGET_WARN, entropy_target_nats

#: every registered agent with an entropy target (SAC, LCPO and the SAC-based baselines, prescient SAC)
WITH_TARGET = sorted(n for n, c in AGENTS.items()
                     if "entropy_target" in {f.name for f in dataclasses.fields(c.Hyperparameters)})


def test_the_kind_is_covered():
    assert {"sac", "lcpo", "ewc", "ogd", "mbpo", "mbcd", "prescient-sac"} <= set(WITH_TARGET)


def _env(bins=15):
    return gym.make("lcpo/WindyPendulum-v0", trace="zero", bins=bins)


@pytest.mark.parametrize("name", WITH_TARGET)
@pytest.mark.parametrize("fraction", [1.0, 1])
def test_target_of_ln_bins_is_refused(name, fraction):
    with pytest.raises(ValueError, match=r"entropy_target must be a fraction in \[0, 1\).*got 1"):
        AGENTS[name](_env(), seed=0, entropy_target=fraction)


@pytest.mark.parametrize("name", WITH_TARGET)
def test_target_above_one_and_negative_are_refused(name):
    for bad in (1.5, -0.1):
        with pytest.raises(ValueError, match="entropy_target"):
            AGENTS[name](_env(), seed=0, entropy_target=bad)


@pytest.mark.parametrize("name", WITH_TARGET)
def test_target_near_ln_bins_warns_on_small_action_sets(name):
    with pytest.warns(UserWarning, match=r"entropy_target=0\.97 is within 3\.0% of the maximum entropy ln\(2\)"):
        AGENTS[name](_env(bins=2), seed=0, entropy_target=0.97)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # at the rule's limit and at the default: no warning
        AGENTS[name](_env(bins=2), seed=0, entropy_target=ENTROPY_TARGET_WARN)
        AGENTS[name](_env(bins=2), seed=0)


def test_target_in_nats():
    assert entropy_target_nats(0.1, 15, 3) == pytest.approx(0.1 * math.log(15) * 3)
    assert entropy_target_nats(0.0, 2, 1) == 0.0
    with pytest.warns(UserWarning, match="only 0.0347 nats"):
        assert entropy_target_nats(0.95 + 1e-9, 2, 1) == pytest.approx(0.95 * math.log(2))
    for bad in (1.0, 1.0 + 1e-12, math.nan, math.inf, -1e-9, True):
        with pytest.raises(ValueError, match="entropy_target"):
            entropy_target_nats(bad, 15, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        entropy_target_nats(0.99, 1, 1)  # a single choice: every policy is uniform, nothing to warn about


def test_agents_use_the_target():
    env = _env()
    assert AGENTS["sac"](env, seed=0, entropy_target=0.5).target_entropy == pytest.approx(0.5 * math.log(15))
    assert AGENTS["lcpo"](env, seed=0, entropy_target=0.5).target_entropy == pytest.approx(0.5 * math.log(15))
