"""Validation of hyperparameter overrides (``lcpo.agents.base.resolve_hyperparameters``)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from lcpo.agents import AGENTS
from lcpo.agents.base import resolve_hyperparameters
from lcpo.persistence.strict_json import show

TRPO = AGENTS["trpo"].Hyperparameters


def _as_json(hp) -> dict:
    """A dataclass instance as the JSON-like dict a config file or ``--set`` produces (tuples as lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(hp).items()}


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_every_agent_default_passes_validation(name):
    cls = AGENTS[name].Hyperparameters
    defaults = cls()
    assert resolve_hyperparameters(cls, None, _as_json(defaults)) == defaults


@pytest.mark.parametrize("overrides, fragment", [
    ({"rollout_steps": 1.5}, "hyperparameter 'rollout_steps' must be an integer, got 1.5"),
    ({"max_kl": math.inf}, "hyperparameter 'max_kl' must be a finite number, got inf"),
    ({"max_kl": -math.inf}, "hyperparameter 'max_kl' must be a finite number, got -inf"),
    ({"max_kl": math.nan}, "hyperparameter 'max_kl' must be a finite number, got nan"),
    ({"rollout_steps": math.inf}, "hyperparameter 'rollout_steps' must be a finite number, got inf"),
    ({"rollout_steps": 10 ** 400}, "hyperparameter 'rollout_steps' must be a finite number"),
    ({"gamma": 1.5}, "hyperparameter 'gamma' must be in (0, 1], got 1.5"),
    ({"gamma": 0.0}, "hyperparameter 'gamma' must be in (0, 1], got 0.0"),
    ({"gae_lambda": -0.1}, "hyperparameter 'gae_lambda' must be in [0, 1], got -0.1"),
    ({"actor_lr": 0}, "hyperparameter 'actor_lr' must be > 0, got 0"),
    ({"critic_lr": -1e-3}, "hyperparameter 'critic_lr' must be > 0"),
    ({"max_grad_norm": 0.0}, "hyperparameter 'max_grad_norm' must be > 0, got 0.0"),
    ({"damping": -0.1}, "hyperparameter 'damping' must be >= 0"),
    ({"weight_decay": -1e-4}, "hyperparameter 'weight_decay' must be >= 0"),
    ({"cg_iters": 0}, "hyperparameter 'cg_iters' must be an integer >= 1, got 0"),
    ({"rollout_steps": -5}, "hyperparameter 'rollout_steps' must be an integer >= 1, got -5"),
    ({"max_backtracks": -1}, "hyperparameter 'max_backtracks' must be an integer >= 0, got -1"),
    ({"accept_ratio": 1.5}, "hyperparameter 'accept_ratio' must be in [0, 1]"),
    ({"rollout_steps": "200"}, "hyperparameter 'rollout_steps' must be a number, got '200'"),
    ({"rollout_steps": True}, "must be a number, got true"),
    ({"network": 3}, "hyperparameter 'network' must be a string, got 3"),
])
def test_bad_scalar_values_are_rejected_naming_key_and_value(overrides, fragment):
    with pytest.raises(ValueError) as info:
        resolve_hyperparameters(TRPO, None, overrides)
    assert fragment in str(info.value)


@pytest.mark.parametrize("value", [[-1], [64, math.nan], [64, 0], [64, 1.5], [64, True], "64,64", "(32,32)", 64,
                                   [[64]]])
def test_bad_hidden_is_rejected_with_the_accepted_form(value):
    with pytest.raises(ValueError) as info:
        resolve_hyperparameters(TRPO, None, {"hidden": value})
    msg = str(info.value)
    assert "'hidden'" in msg and show(value) in msg and "--set hidden=[64,64]" in msg


def test_good_values_are_converted_to_the_field_type():
    hp = resolve_hyperparameters(TRPO, None, {"hidden": [32, 16.0], "rollout_steps": 400.0, "max_kl": 1,
                                              "gamma": 1, "gae_lambda": 0, "max_backtracks": 0})
    assert hp.hidden == (32, 16) and all(type(x) is int for x in hp.hidden)
    assert hp.rollout_steps == 400 and type(hp.rollout_steps) is int
    assert hp.max_kl == 1.0 and type(hp.max_kl) is float
    assert (hp.gamma, hp.gae_lambda, hp.max_backtracks) == (1.0, 0.0, 0)


def test_zero_count_allowed_where_the_default_is_zero_or_zero_is_meaningful():
    cls = AGENTS["prescient-a2c"].Hyperparameters
    hp = resolve_hyperparameters(cls, None, {"train_steps": 0, "train_episode_steps": 0})
    assert (hp.train_steps, hp.train_episode_steps) == (0, 0)
    ddqn = AGENTS["ddqn"].Hyperparameters
    assert resolve_hyperparameters(ddqn, None, {"random_epochs": 0, "decay_epochs": 0}).random_epochs == 0
    with pytest.raises(ValueError, match="'batch_size' must be an integer >= 1, got 0"):
        resolve_hyperparameters(ddqn, None, {"batch_size": 0})


def test_self_checked_fields_still_get_type_finiteness_and_integrality_checks():
    ppo = AGENTS["ppo"].Hyperparameters
    with pytest.raises(ValueError, match="'clip' must be a finite number, got nan"):
        resolve_hyperparameters(ppo, None, {"clip": math.nan})
    with pytest.raises(ValueError, match="'epochs' must be an integer, got 1.5"):
        resolve_hyperparameters(ppo, None, {"epochs": 1.5})


@pytest.mark.parametrize("agent, overrides, fragment", [
    ("ppo", {"clip": 1.5}, "clip must be in"),
    ("ppo", {"max_kl": 0.0}, "max_kl must be positive"),
    ("trpo", {"max_kl": -1.0}, "max_kl must be positive"),
    ("lcpo-p", {"kappa": -1.0}, "kappa must be >= 0"),
    ("prescient-a2c", {"train_steps": -1}, "train_steps and train_episode_steps must be >= 0"),
])
def test_self_checked_ranges_are_enforced_by_the_agent(agent, overrides, fragment):
    from lcpo.envs import make_env

    env = make_env("lcpo/WindyPendulum-v0", trace="zero")
    with pytest.raises(ValueError, match=fragment):
        AGENTS[agent](env, seed=0, **overrides)


@pytest.mark.parametrize("agent, field, minimum", [
    ("clear", "replay_window", 1), ("clear", "replay_windows", 0), ("ogd", "directions_per_episode", 1),
    ("ptdqn", "permanent_steps", 1), ("ddqn", "learning_starts", 1), ("sac", "gradient_steps", 1),
    ("ewc", "fisher_every", 1), ("mbpo", "rollout_length", 1), ("mbcd", "window", 1),
    ("mbcd", "calibration_steps", 2),
])
def test_integer_ranges_of_a_hyperparameter_dataclass_are_enforced_by_the_agent(agent, field, minimum):
    """A dataclass passed as ``hparams=`` is not re-checked by ``resolve_hyperparameters``; the agent's own
    rule (``lcpo.agents.base.require_ints``) names the field, its minimum and the value."""
    from lcpo.envs import make_env

    cls = AGENTS[agent]
    hp = dataclasses.replace(cls.Hyperparameters(), **{field: minimum - 1})
    with pytest.raises(ValueError, match=f"^hyperparameter {field} must be an integer >= {minimum}, "
                                         f"got {minimum - 1}$"):
        cls(make_env("lcpo/WindyPendulum-v0", trace="zero"), seed=0, hparams=hp)


def test_infinite_allowed_only_where_the_default_is_infinite():
    tab = AGENTS["tabular-a2c"].Hyperparameters
    assert math.isinf(tab().max_grad_norm)
    assert resolve_hyperparameters(tab, None, {"max_grad_norm": math.inf}).max_grad_norm == math.inf
    assert resolve_hyperparameters(tab, None, {"max_grad_norm": 2}).max_grad_norm == 2.0
    with pytest.raises(ValueError, match="'max_grad_norm' must be a finite number, got nan"):
        resolve_hyperparameters(tab, None, {"max_grad_norm": math.nan})
    with pytest.raises(ValueError, match="'max_grad_norm' must be a finite number, got inf"):
        resolve_hyperparameters(TRPO, None, {"max_grad_norm": math.inf})


def test_unknown_key_is_named():
    with pytest.raises(ValueError, match="unknown hyperparameter 'nosuch'"):
        resolve_hyperparameters(TRPO, None, {"nosuch": 1})


def test_agent_constructor_rejects_bad_override():
    from lcpo.envs import make_env

    env = make_env("lcpo/TrapGrid-v0")
    with pytest.raises(ValueError, match="'hidden'.*--set hidden=\\[64,64\\]"):
        AGENTS["a2c"](env, seed=0, hidden=[-1])
