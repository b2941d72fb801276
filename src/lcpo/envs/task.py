"""Episodic or continuing: the kind of task an environment is, declared by the environment itself.

An environment says what it is in one place, its Gymnasium ``metadata``:

* ``metadata["continuing"] = False``: an **episodic** task. Episodes end (termination or the environment's own
  time limit), the loop resets after each, and the lifelong return is the mean episodic return.
* ``metadata["continuing"] = True``: a **continuing** task. The environment never ends the stream by itself
  (no time limit; a real termination, if one can happen, still resets). The loop never resets it
  (:class:`lcpo.online.loop.NeverReset`) and records one row per window of :data:`lcpo.online.loop.SEGMENT_STEPS` steps, so
  the lifelong return is the mean return per window.

An environment whose kind depends on a constructor argument (the windy environments' ``continuing=True`` or
``time_limit=None``) sets it per instance with :func:`declare_continuing`. An environment that declares
nothing (a plain Gymnasium environment, or a user's own) is treated as episodic, and the CLI says so in one
line (:data:`UNDECLARED_NOTICE`). The CLI's default ``--reset`` and a sweep's default ``reset`` come from
:func:`default_reset` (paper Section 2: the non-episodic setting is a property of the problem, not of the
learner).

Example:
    >>> import gymnasium as gym
    >>> class Queue(gym.Env):
    ...     metadata = {"render_modes": [], "continuing": True}
    >>> is_continuing(Queue()), default_reset(Queue())
    (True, 'never')
"""

from __future__ import annotations

from lcpo.persistence.strict_json import show

__all__ = ["CONTINUING_KEY", "UNDECLARED_NOTICE", "declare_continuing", "declared_continuing", "default_reset",
           "is_continuing", "return_unit"]

#: The metadata key an environment declares its kind under (a bool).
CONTINUING_KEY = "continuing"

#: The one-line notice printed for an environment that declares neither kind (``{env}`` is its id).
UNDECLARED_NOTICE = ("lcpo: note: {env} does not declare whether it is episodic or continuing "
                     "(metadata['continuing']); treating it as episodic (--reset end)")


def declare_continuing(env, continuing: bool) -> None:
    """Declare an environment instance episodic (``False``) or continuing (``True``).

    Copies the class's ``metadata`` into the instance with ``metadata["continuing"]`` set, so instances of one
    class made with different arguments (a time limit or none) each say what they are.

    Args:
        env: an unwrapped Gymnasium environment (typically ``self`` in ``__init__``).
        continuing: the kind of this instance.

    Raises:
        ValueError: if ``continuing`` is not a bool.
    """
    if not isinstance(continuing, bool):
        raise ValueError(f"continuing must be true or false, got {show(continuing)}")
    env.metadata = {**type(env).metadata, **getattr(env, "metadata", {}), CONTINUING_KEY: continuing}


def declared_continuing(env) -> bool | None:
    """What an environment declares: ``True`` (continuing), ``False`` (episodic) or ``None`` (nothing).

    Args:
        env: a Gymnasium environment, possibly wrapped (the declaration is read from ``env.unwrapped``).

    Raises:
        ValueError: if ``metadata["continuing"]`` is present but not a bool (names the value).
    """
    metadata = getattr(getattr(env, "unwrapped", env), "metadata", None) or {}
    value = metadata.get(CONTINUING_KEY)
    if value is None or isinstance(value, bool):
        return value
    raise ValueError(f"{_name(env)}: metadata['{CONTINUING_KEY}'] must be True or False, got {value!r}")


def is_continuing(env) -> bool:
    """True if the environment declares itself continuing; an undeclared environment counts as episodic."""
    return bool(declared_continuing(env))


def default_reset(env) -> str:
    """The reset condition that fits the environment's kind: ``"never"`` if continuing, else ``"end"``."""
    return "never" if is_continuing(env) else "end"


def return_unit(reset: str, segment_steps: int | None = None) -> str:
    """What one row of a run's ``episodes.csv`` (and so the lifelong return's average) is, for a reset condition.

    Args:
        reset: ``"end"``, ``"every:N"`` or ``"never"``.
        segment_steps: window length of a continuing run (default :data:`lcpo.online.loop.SEGMENT_STEPS`).

    Returns:
        ``"episode"``, or ``"<segment_steps>-step window"`` for ``"never"``.
    """
    if reset != "never":
        return "episode"
    if segment_steps is None:
        from lcpo.online.loop import SEGMENT_STEPS

        segment_steps = SEGMENT_STEPS
    return f"{int(segment_steps)}-step window"


def _name(env) -> str:
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) or type(getattr(env, "unwrapped", env)).__name__
