"""Termination rules declared by the environments: ``termination_fn(obs) -> bool array``.

An environment that can terminate states its rule once, as a method ``termination_fn`` of the (unwrapped)
environment that maps observations to "this state is terminal", and its own ``step`` computes ``terminated``
with that same method, so the real environment and anything that imagines transitions (MBPO's model rollouts,
:class:`lcpo.agents.mbpo.MBPO`) share one source of truth. An environment that never terminates declares
:func:`never_terminates`.

Contract of ``termination_fn``:

* input: observations ``(..., obs_dim)`` in the environment's observation layout (any float dtype; only the
  entries the rule needs are read, e.g. not the wind lags);
* output: ``(...)`` bool, True where the state reached is terminal; a non-finite entry the rule reads counts as
  terminal (a state the simulator cannot continue from).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["never_terminates", "get_termination_fn"]


def never_terminates(obs) -> np.ndarray:
    """The rule of an environment without terminal states: ``(..., obs_dim) -> (...)`` all False.

    Example:
        >>> never_terminates(np.zeros((3, 9))).tolist()
        [False, False, False]
    """
    return np.zeros(np.shape(obs)[:-1], dtype=bool)


def get_termination_fn(env) -> Callable[[np.ndarray], np.ndarray] | None:
    """The termination rule an environment declares (``env.unwrapped.termination_fn``), or None if it declares
    none.

    Args:
        env: a Gymnasium environment, possibly wrapped.
    """
    fn = getattr(getattr(env, "unwrapped", env), "termination_fn", None)
    return fn if callable(fn) else None
