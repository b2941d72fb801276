"""Checks of environment arguments: a one-line ``ValueError`` naming the argument as its caller spelled it and
the bad value.

``lcpo run --env-arg KEY=VALUE`` (and ``lcpo serve --env-arg``, a sweep file's environment arguments) passes
each value as JSON when it parses as JSON, else as the string itself: ``time_limit=abc`` arrives as ``'abc'``,
``time_limit=2.5`` as ``2.5``, ``continuing=maybe`` as ``'maybe'``. The entry points check their arguments with
these functions before building anything, so such a value is refused naming the argument::

    environment argument 'time_limit' must be an integer >= 1 or null (no time limit), got 'abc'

instead of failing later under an internal name (``max_episode_steps``), in a conversion that names nothing
(``invalid literal for int() with base 10: 'abc'``), or being silently coerced (``int(2.5)``, ``bool('maybe')``).
The rules follow ``--set``'s for hyperparameters (:func:`lcpo.agents.base.resolve_hyperparameters`): booleans
are ``true``/``false`` only, integers accept an integral float (``2e2``), numbers must be finite.

Example:
    >>> integer(2e2, "time_limit", none="no time limit")
    200
    >>> integer("abc", "time_limit", none="no time limit")
    Traceback (most recent call last):
    ...
    ValueError: environment argument 'time_limit' must be an integer >= 1 or null (no time limit), got 'abc'
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lcpo.persistence.strict_json import show

__all__ = ["flag", "integer", "number", "rename_max_episode_steps"]


_INT64_MAX = 2 ** 63 - 1


def _name(name: str) -> str:
    return f"environment argument {name!r}"


def integer(value: Any, name: str, minimum: int = 1, none: str | None = None) -> int | None:
    """``value`` as an ``int >= minimum``: an integer or a float with an integral value, never a bool.

    Args:
        value: the argument as given.
        name: the argument's name, as its caller spells it (``"time_limit"``).
        minimum: the smallest value allowed.
        none: what ``None`` means, where it is allowed (``"no time limit"``); None: not allowed.

    Returns:
        The int, or None for ``None`` where allowed.

    Raises:
        ValueError: naming ``name`` and ``value`` for anything else, or for an integer beyond int64 (``10**20``).
    """
    if value is None and none is not None:
        return None
    if isinstance(value, (bool, np.bool_)):
        ok = False
    elif isinstance(value, (int, np.integer)):
        ok = value >= minimum
    elif isinstance(value, (float, np.floating)):
        ok = math.isfinite(value) and float(value).is_integer() and value >= minimum
    else:
        ok = False
    if ok and value > _INT64_MAX:  # e.g. 10**20 or 1e20
        raise ValueError(f"{_name(name)} = {show(value)} is beyond int64's range (at most 2**63 - 1)")
    if not ok:
        tail = f" or null ({none})" if none is not None else ""
        raise ValueError(f"{_name(name)} must be an integer >= {minimum}{tail}, got {show(value)}")
    return int(value)


def number(value: Any, name: str, low: float = -math.inf, high: float = math.inf, low_open: bool = False,
           high_open: bool = False, none: str | None = None) -> float | None:
    """``value`` as a finite float inside ``low .. high`` (each end closed unless ``*_open``), never a bool.

    Args:
        value: the argument as given.
        name: the argument's name, as its caller spells it (``"divisor"``).
        low, high: the range (infinite: no bound on that side).
        low_open, high_open: whether that end is excluded.
        none: what ``None`` means, where it is allowed (``"the workload's own rate"``); None: not allowed.

    Returns:
        The float, or None for ``None`` where allowed.

    Raises:
        ValueError: naming ``name`` and ``value``: not a number, not finite (an integer beyond float64
            included), or outside the range (the message states it: ``a finite number > 0``,
            ``a number in (0, 1]``).
    """
    if value is None and none is not None:
        return None
    f = None
    if not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating)):
        try:
            f = float(value)
        except OverflowError:
            f = None
    ok = f is not None and math.isfinite(f) and (f > low if low_open else f >= low) and (
        f < high if high_open else f <= high)
    if not ok:
        if math.isinf(low) and math.isinf(high):
            what = "a finite number"
        elif math.isinf(high):
            what = f"a finite number {'>' if low_open else '>='} {low:g}"
        elif math.isinf(low):
            what = f"a finite number {'<' if high_open else '<='} {high:g}"
        else:
            what = f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        tail = f" or null ({none})" if none is not None else ""
        raise ValueError(f"{_name(name)} must be {what}{tail}, got {show(value)}")
    return f


def flag(value: Any, name: str) -> bool:
    """``value`` as a bool: ``True``/``False`` only (a string such as ``'maybe'``, or 1, is not one).

    Raises:
        ValueError: naming ``name`` and ``value`` for anything else.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{_name(name)} must be true or false, got {show(value)}")
    return bool(value)


def rename_max_episode_steps(kwargs: dict, check: bool = True) -> dict:
    """Where ``kwargs`` holds ``max_episode_steps`` (Gymnasium's name, which ``gymnasium.make`` keeps for its
    ``TimeLimit`` wrapper), move it to ``time_limit``, the lcpo entry points' name for the environment's own,
    checkpointable time limit. Changes ``kwargs`` in place and returns it.

    Args:
        kwargs: environment arguments.
        check: check the value under the name ``max_episode_steps`` as an integer >= 1 or null (no time limit),
            the rule of windy Pendulum; False leaves the check to the entry point (whose own rule may refuse
            null: :func:`lcpo.envs.registration.make_env` then names the argument as the user wrote it).

    Raises:
        ValueError: naming ``max_episode_steps`` and its value, when ``check`` and it is not an integer >= 1 or
            None; or when ``time_limit`` is given too (two values for one limit).
    """
    if "max_episode_steps" in kwargs:
        if "time_limit" in kwargs:
            raise ValueError(f"environment arguments max_episode_steps={show(kwargs['max_episode_steps'])} and "
                             f"time_limit={show(kwargs['time_limit'])} name the same limit; give time_limit only")
        value = kwargs.pop("max_episode_steps")
        kwargs["time_limit"] = integer(value, "max_episode_steps", none="no time limit") if check else value
    return kwargs
