"""Registration of every ``lcpo/*`` environment id with Gymnasium.

Importing :mod:`lcpo` (or :mod:`lcpo.envs`) registers the ids. Entry points are strings, so an environment's
module (and heavy dependencies such as MuJoCo or numba) is imported only when that environment is made.
"""

from __future__ import annotations

import difflib

import gymnasium as gym

__all__ = ["ENV_IDS", "register_envs", "make_env"]

#: id -> entry point ("module:callable"). Each callable returns the fully wrapped environment.
ENV_IDS: dict[str, str] = {
    "lcpo/WindyPendulum-v0": "lcpo.envs.windy_pendulum:make_windy_pendulum",
    "lcpo/WindyInvertedPendulum-v0": "lcpo.envs.mujoco.inverted_pendulum:make_windy_inverted_pendulum",
    "lcpo/WindyInvertedDoublePendulum-v0":
        "lcpo.envs.mujoco.inverted_double_pendulum:make_windy_inverted_double_pendulum",
    "lcpo/WindyHopper-v0": "lcpo.envs.mujoco.hopper:make_windy_hopper",
    "lcpo/WindyReacher-v0": "lcpo.envs.mujoco.reacher:make_windy_reacher",
    "lcpo/TrapGrid-v0": "lcpo.envs.gridworld:make_trap_grid",
    "lcpo/StragglerMitigation-v0": "lcpo.envs.straggler.env:make_straggler_env",
    "lcpo/ContinuingChain-v0": "lcpo.envs.chain:make_continuing_chain",
}


def register_envs() -> None:
    """Register all ids in :data:`ENV_IDS` (idempotent).

    Time limits are handled inside each environment (``time_limit`` argument of the entry points, ``None``
    for a continuing task) so that they are part of the environment's checkpointable state; Gymnasium's
    ``TimeLimit`` wrapper is therefore not used (``gymnasium.make(..., max_episode_steps=N)`` still adds one;
    :func:`make_env` translates ``max_episode_steps`` into ``time_limit`` instead).
    """
    for env_id, entry in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry, disable_env_checker=True)


def make_env(env_id: str, **kwargs) -> gym.Env:
    """``gymnasium.make`` with a clear error for unknown ids.

    Args:
        env_id: a registered id, e.g. ``"lcpo/WindyPendulum-v0"``.
        **kwargs: passed to the environment (e.g. ``trace=...``).

    Raises:
        ValueError: for an unknown id; the message lists the closest known ids.
    """
    register_envs()
    if "max_episode_steps" in kwargs and env_id in ENV_IDS:
        kwargs["time_limit"] = kwargs.pop("max_episode_steps")
    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(dict.fromkeys([*ENV_IDS, *gym.registry])), n=3)
        hint = f"did you mean one of {close}? " if close else ""
        raise ValueError(f"unknown environment id {env_id!r}; {hint}registered lcpo ids: {sorted(ENV_IDS)}")
    try:
        return gym.make(env_id, **kwargs)
    except TypeError:
        bad, valid = _unknown_kwargs(env_id, kwargs)
        if not bad:
            raise
        raise ValueError(f"unknown environment argument(s) {bad} for {env_id}; valid keyword arguments: "
                         f"{valid}") from None


def _unknown_kwargs(env_id: str, kwargs: dict) -> tuple[list[str], list[str]]:
    """``(unknown, valid)`` keyword names of ``env_id``'s entry point (both empty if it takes ``**kwargs`` or
    is not an lcpo id), for an error message that does not dump the arguments' values."""
    import importlib
    import inspect

    entry = ENV_IDS.get(env_id)
    if entry is None:
        return [], []
    module, _, name = entry.partition(":")
    params = inspect.signature(getattr(importlib.import_module(module), name)).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return [], []
    valid = sorted(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    return sorted(set(kwargs) - set(valid)), valid
