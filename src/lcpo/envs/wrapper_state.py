"""The state of the wrappers around an environment, saved with the environment's own state in a checkpoint.

``env.unwrapped.get_state()`` holds what the environment itself knows; the wrappers that ``gymnasium.make``
adds (or a user's registration asks for) may hold more. The one that changes what a run sees is
``TimeLimit`` (``gymnasium.register(..., max_episode_steps=N)``): its step counter decides when an episode is
truncated, and a resumed run that lost it plays one episode of up to ``2N - 1`` steps (issue 24). So a
checkpoint saves the state of every wrapper in the chain that has one:

========================  =============================================================================
wrapper                   saved
========================  =============================================================================
``TimeLimit``             ``_elapsed_steps`` (and ``_max_episode_steps``, checked on resume)
``OrderEnforcing``        ``_has_reset``
``PassiveEnvChecker``     which one-time checks already ran (so a resumed run does not warn again)
stateless wrappers        nothing: ``ClipAction``, ``RescaleAction``, ``TransformObservation``, ...,
                          lcpo's :class:`~lcpo.envs.discretize.DiscretizeActions`
a wrapper with            its own ``get_state() -> dict`` / ``set_state(dict)`` (defined on the wrapper's
``get_state``/``set_state``  class)
anything else             refused: :func:`unsaved_wrappers` names it, and ``lcpo run`` / ``lcpo sweep``
                          refuse to checkpoint such an environment before any run starts, the library's
                          ``execute`` / ``execute_population`` before the run's first step
                          (:func:`lcpo.envs.preflight.check_checkpointable`)
========================  =============================================================================

Wrappers are matched by class (``module.QualName``), so a subclass of a known wrapper that adds state of its
own is not silently taken for its parent: it must define ``get_state``/``set_state`` itself.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

__all__ = ["STATELESS_WRAPPERS", "check_wrappers_state", "load_wrappers_state", "unsaved_wrappers", "wrapper_chain", "wrapper_name",
           "wrappers_state"]

_GW = "gymnasium.wrappers"

#: Wrappers without state of their own (functions of the current action, observation or reward), by class.
STATELESS_WRAPPERS = frozenset({
    "lcpo.envs.discretize.DiscretizeActions",
    *(f"{_GW}.transform_action.{n}" for n in ("ClipAction", "RescaleAction", "TransformAction",
                                                "DiscretizeAction")),
    *(f"{_GW}.transform_observation.{n}" for n in ("TransformObservation", "FilterObservation",
                                                     "FlattenObservation", "GrayscaleObservation",
                                                     "ResizeObservation", "ReshapeObservation",
                                                     "RescaleObservation", "DtypeObservation",
                                                     "DiscretizeObservation")),
    *(f"{_GW}.transform_reward.{n}" for n in ("TransformReward", "ClipReward")),
})

#: Wrappers whose state lcpo saves: class -> the attributes that hold it.
_SAVED_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    f"{_GW}.common.TimeLimit": ("_max_episode_steps", "_elapsed_steps"),
    f"{_GW}.common.OrderEnforcing": ("_has_reset",),
    f"{_GW}.common.PassiveEnvChecker": ("checked_reset", "checked_step", "checked_render", "checked_data_reuse"),
}


def wrapper_name(wrapper: Any) -> str:
    """``module.QualName`` of a wrapper's class, e.g. ``gymnasium.wrappers.common.TimeLimit``."""
    cls = type(wrapper)
    return f"{cls.__module__}.{cls.__qualname__}"


def wrapper_chain(env: Any) -> list[gym.Wrapper]:
    """The wrappers around ``env.unwrapped``, outermost first (empty for a bare environment)."""
    chain = []
    while isinstance(env, gym.Wrapper):
        chain.append(env)
        env = env.env
    return chain


def _own_state_methods(wrapper: gym.Wrapper) -> bool:
    cls = type(wrapper)
    return callable(getattr(cls, "get_state", None)) and callable(getattr(cls, "set_state", None))


def unsaved_wrappers(env: Any) -> list[str]:
    """Names of the wrappers around ``env`` whose state a checkpoint cannot save (see the module docstring).

    Returns:
        ``module.QualName`` of each such wrapper, outermost first; empty when the whole chain can be saved.
    """
    return [wrapper_name(w) for w in wrapper_chain(env)
            if not _own_state_methods(w) and wrapper_name(w) not in _SAVED_ATTRIBUTES
            and wrapper_name(w) not in STATELESS_WRAPPERS]


def wrappers_state(env: Any) -> list[dict[str, Any]]:
    """The state of every wrapper around ``env``, outermost first.

    Returns:
        ``[{"wrapper": name, "state": dict}, ...]``, one entry per wrapper (``{}`` for a stateless one); plain
        JSON values (ints, bools, None) for the wrappers lcpo knows.

    Raises:
        TypeError: a wrapper whose state cannot be saved (naming it and what to do).
    """
    out = []
    for w in wrapper_chain(env):
        name = wrapper_name(w)
        if _own_state_methods(w):
            state = dict(w.get_state())
        elif name in _SAVED_ATTRIBUTES:
            state = {a: getattr(w, a) for a in _SAVED_ATTRIBUTES[name] if hasattr(w, a)}
        elif name in STATELESS_WRAPPERS:
            state = {}
        else:
            raise TypeError(_refusal(env, [name]))
        out.append({"wrapper": name, "state": state})
    return out


def _refusal(env: Any, names: list[str]) -> str:
    from lcpo.envs.preflight import checkpoint_refusal

    spec = getattr(env, "spec", None)
    return checkpoint_refusal(getattr(spec, "id", None) or str(env), True, names)


def check_wrappers_state(env: Any, states: list[dict[str, Any]]) -> None:
    """Check that :func:`wrappers_state` output fits the wrappers around ``env``, changing nothing.

    Callers restoring several things (an env's own state and its wrappers', N sub-envs) call it for all of them
    before writing any, so a refused restore leaves everything as it was.

    Raises:
        ValueError: the chain of wrappers differs from the saved one (naming both), or a ``TimeLimit`` with a
            different ``max_episode_steps`` (naming both values).
    """
    chain = wrapper_chain(env)
    names = [wrapper_name(w) for w in chain]
    saved = [s["wrapper"] for s in states]
    if names != saved:
        raise ValueError(f"cannot resume: the environment's wrappers {names} differ from the checkpoint's {saved}")
    for w, entry in zip(chain, states):
        state = entry["state"]
        if _own_state_methods(w):
            continue
        if "_max_episode_steps" in state and state["_max_episode_steps"] != w._max_episode_steps:
            raise ValueError(f"cannot resume: the environment's TimeLimit has max_episode_steps="
                             f"{w._max_episode_steps}, the checkpoint's {state['_max_episode_steps']}")


def load_wrappers_state(env: Any, states: list[dict[str, Any]]) -> None:
    """Restore :func:`wrappers_state` output into the wrappers around ``env``; all of it is checked
    (:func:`check_wrappers_state`) before any wrapper is written, so a refused restore changes nothing.

    Raises:
        ValueError: the chain of wrappers differs from the saved one (naming both), or a ``TimeLimit`` with a
            different ``max_episode_steps`` (naming both values).
    """
    check_wrappers_state(env, states)
    for w, entry in zip(wrapper_chain(env), states):
        state = entry["state"]
        if _own_state_methods(w):
            w.set_state(state)
            continue
        for attr, value in state.items():
            if attr != "_max_episode_steps":
                setattr(w, attr, value)
        if state.get("checked_data_reuse"):
            w._previous_data = None
