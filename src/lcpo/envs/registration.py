"""Registration of every ``lcpo/*`` environment id with Gymnasium, and making any environment by name.

Importing :mod:`lcpo` (or :mod:`lcpo.envs`) registers the ids. Entry points are strings, so an environment's
module (and heavy dependencies such as MuJoCo or numba) is imported only when that environment is made.

:func:`make_env` (and so ``lcpo run --env``, sweep configs' ``envs``) also takes a user's environment, named as
Gymnasium names one:

* ``"MODULE:ID"``: import ``MODULE`` (which registers ``ID`` with :func:`gymnasium.register` when imported),
  then make ``ID``: Gymnasium's own convention, ``gymnasium.make("my_pkg.envs:GravityCartPole-v0")``;
* ``"MODULE:CLASS"``: an entry point: ``CLASS`` (an environment class or a function returning an environment)
  is called with the environment arguments, as a registered entry point would be;
* any id Gymnasium already knows (``"CartPole-v1"``).

``MODULE`` is imported from the installed packages, ``PYTHONPATH`` and the current folder (the current folder
is appended to ``sys.path`` when missing, as ``python -m`` puts it first). Errors name what is missing and how
to supply it (:func:`check_env_name`).
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys

import gymnasium as gym

from lcpo.envs.arguments import rename_max_episode_steps

__all__ = ["ENV_IDS", "VECTOR_ENTRY_POINTS", "check_env_name", "make_env", "register_envs", "user_module"]

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

#: id -> vector entry point (``gymnasium.make_vec(id, num_envs=N, vectorization_mode="vector_entry_point",
#: env_kwargs=[...])``; see :mod:`lcpo.envs.vector`)
VECTOR_ENTRY_POINTS: dict[str, str] = {
    "lcpo/WindyPendulum-v0": "lcpo.envs.windy_pendulum_vector:make_windy_pendulum_vector",
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
            gym.register(id=env_id, entry_point=entry, vector_entry_point=VECTOR_ENTRY_POINTS.get(env_id),
                         disable_env_checker=True)


def user_module(name: str) -> str | None:
    """The module part of a user environment name ``"MODULE:ID"`` / ``"MODULE:CLASS"`` (None for a plain id)."""
    module, sep, rest = name.partition(":")
    return module if sep and module and rest else None


def _import_user_module(module: str, name: str):
    """Import the module of ``--env name``, with the current folder on the path; errors say how to fix it."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)  # `lcpo` is a console script: unlike `python -m`, it does not put "." on the path
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            top = module.split(".")[0]
            raise ValueError(
                f"environment {name!r}: cannot import module {module!r} (no module named {exc.name!r}). "
                f"Make it importable: run lcpo from the folder that holds {top}.py or {top}/, install its "
                f"package (pip install -e PATH), or add its folder to PYTHONPATH") from None
        raise ValueError(f"environment {name!r}: importing module {module!r} failed: {exc} (install the "
                         "missing package)") from exc
    except Exception as exc:  # a bug in the user's module: say where, keep the cause for tracebacks
        raise ValueError(f"environment {name!r}: importing module {module!r} failed: "
                         f"{type(exc).__name__}: {exc}") from exc


def _registered_by(module: str) -> list[str]:
    """Ids in Gymnasium's registry whose entry point lives in ``module``."""
    out = []
    for spec in gym.registry.values():
        entry = spec.entry_point
        where = entry.split(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", None)
        if where == module:
            out.append(spec.id)
    return sorted(out)


def _resolve(name: str):
    """``("id", registered id)`` or ``("entry", callable)`` for an environment name.

    Raises:
        ValueError: unknown id, missing module, or a ``MODULE:X`` whose ``X`` is neither registered by
            ``MODULE`` nor an attribute of it (the message says how to add it).
    """
    register_envs()
    if name in gym.registry:
        return "id", name
    module = user_module(name)
    if module is None:
        close = difflib.get_close_matches(name, list(dict.fromkeys([*ENV_IDS, *gym.registry])), n=3)
        hint = f"did you mean one of {close}? " if close else ""
        raise ValueError(f"unknown environment id {name!r}; {hint}registered lcpo ids: {sorted(ENV_IDS)}; "
                         "your own environment: MODULE:ID (a module that registers ID) or MODULE:CLASS")
    target = name.split(":", 1)[1]
    mod = _import_user_module(module, name)
    if target in gym.registry:
        return "id", target
    obj = getattr(mod, target, None)
    if obj is not None:
        if not callable(obj):
            raise ValueError(f"environment {name!r}: {module}.{target} is a {type(obj).__name__}, not an "
                             "environment class or a function that returns an environment")
        return "entry", obj
    ids = _registered_by(module)
    attrs = [a for a in dir(mod) if isinstance(getattr(mod, a, None), type)
             and issubclass(getattr(mod, a), gym.Env) and getattr(mod, a).__module__ == mod.__name__]
    close = difflib.get_close_matches(target, ids + attrs, n=3)
    hint = f" Did you mean {', '.join(repr(f'{module}:{c}') for c in close)}?" if close else ""
    raise ValueError(
        f"environment {name!r}: module {module!r} registers no environment id {target!r} and has no attribute "
        f"{target!r} (ids it registers: {ids or 'none'}; environment classes in it: {attrs or 'none'}).{hint} "
        f"Register the id when the module is imported, gymnasium.register(id={target!r}, "
        f"entry_point='{module}:YourEnv'), or name the class: {module}:YourEnv")


def check_env_name(name: str) -> None:
    """Check that an environment name can be made (imports a user's module), without making it.

    Args:
        name: an lcpo or Gymnasium id, ``"MODULE:ID"`` or ``"MODULE:CLASS"`` (see the module docstring).

    Raises:
        ValueError: unknown id (with close matches), a module that cannot be imported (and how to make it
            importable), or an id/attribute the module does not define (and how to register it).
    """
    _resolve(name)


def make_env(env_id: str, **kwargs) -> gym.Env:
    """``gymnasium.make`` for lcpo ids, Gymnasium ids and user environments, with clear errors.

    Args:
        env_id: a registered id (``"lcpo/WindyPendulum-v0"``, ``"CartPole-v1"``), ``"MODULE:ID"`` or
            ``"MODULE:CLASS"`` (see the module docstring).
        **kwargs: passed to the environment (e.g. ``trace=...``).

    Raises:
        ValueError: see :func:`check_env_name`; an environment argument the entry point does not take (names
            it and the valid ones); a ``MODULE:CLASS`` that returns something other than a ``gymnasium.Env``;
            for an lcpo id, a bad argument value (names the argument as given, e.g. ``time_limit`` or
            ``max_episode_steps``, and the value: :mod:`lcpo.envs.arguments`).
    """
    kind, target = _resolve(env_id)
    renamed = target in ENV_IDS and "max_episode_steps" in kwargs
    if target in ENV_IDS:
        rename_max_episode_steps(kwargs, check=False)  # the entry point checks it, by its own rule (null or not)
    try:
        if kind == "id":
            return gym.make(target, **kwargs)
        spec = gym.envs.registration.EnvSpec(id=env_id, entry_point=target)
        env = gym.make(spec, **kwargs)
    except ValueError as exc:
        if renamed and "'time_limit'" in str(exc):  # the user wrote max_episode_steps: name it so
            raise ValueError(str(exc).replace("'time_limit'", "'max_episode_steps'")) from None
        raise
    except TypeError as exc:
        bad, valid = _unknown_kwargs(target if kind == "id" else None, kwargs, None if kind == "id" else target)
        if renamed:  # an entry point without a time limit: name the argument as the user wrote it
            bad = ["max_episode_steps" if b == "time_limit" else b for b in bad]
        if not bad:
            _refuse_vector_entry(env_id, kind, target, kwargs, exc)
            raise
        raise ValueError(f"unknown environment argument(s) {bad} for {env_id}; valid keyword arguments: "
                         f"{valid}") from None
    if not isinstance(env.unwrapped, gym.Env):
        raise ValueError(f"environment {env_id!r}: {target!r} returned a {type(env.unwrapped).__name__}, not a "
                         "gymnasium.Env")
    return env


def _refuse_vector_entry(env_id: str, kind: str, target, kwargs: dict, exc: TypeError) -> None:
    """Where ``gymnasium.make`` refused what an entry point returned (not a ``gymnasium.Env``), raise
    :class:`~lcpo.envs.preflight.VectorEnvError` if it was a vector env (error path only: a function entry
    point is called once more to see what it returns)."""
    if "gymnasium.Env" not in str(exc):
        return
    from lcpo.envs.preflight import VectorEnvError, vector_env_message

    try:
        entry = target if kind == "entry" else gym.spec(target).entry_point
        if isinstance(entry, str):
            entry = gym.envs.registration.load_env_creator(entry)
        if isinstance(entry, type):
            made, cls = None, entry
        else:
            made = entry(**kwargs)
            cls = type(made)
            getattr(made, "close", lambda: None)()
    except Exception:  # noqa: BLE001 - only a better message is at stake; gymnasium's error stands
        return
    if issubclass(cls, gym.vector.VectorEnv):
        raise VectorEnvError(vector_env_message(f"environment {env_id!r}", cls.__name__,
                                                getattr(made, "num_envs", None))) from None


def _unknown_kwargs(env_id: str | None, kwargs: dict, entry=None) -> tuple[list[str], list[str]]:
    """``(unknown, valid)`` keyword names of an entry point (an id's, or ``entry`` itself; both empty if it
    takes ``**kwargs`` or cannot be inspected), for an error message that does not dump the arguments'
    values."""
    import inspect

    if entry is None:
        spec = gym.registry.get(env_id) if env_id is not None else None
        entry = ENV_IDS.get(env_id) or (spec.entry_point if spec is not None else None)
        if isinstance(entry, str):
            module, _, name = entry.partition(":")
            entry = getattr(importlib.import_module(module), name)
    if entry is None:
        return [], []
    try:
        params = inspect.signature(entry).parameters.values()
    except (TypeError, ValueError):
        return [], []
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return [], []
    valid = sorted(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                   and p.name != "self")
    return sorted(set(kwargs) - set(valid)), valid
