"""What a run must know about its environment before it starts, and the arguments it makes it with.

``lcpo run`` and ``lcpo sweep`` make each environment once before any run starts (:func:`inspect_env`) to
learn what the environment declares:

* its kind, episodic or continuing (:mod:`lcpo.envs.task`), which sets the default reset condition;
* its context (``env.unwrapped.context_spec``, :class:`lcpo.envs.context.ContextSpec`), which LCPO's OOD
  detection needs;
* whether it can be checkpointed (``env.unwrapped.get_state()`` / ``set_state(state)``, and wrappers whose state
  lcpo saves: :mod:`lcpo.envs.wrapper_state`), which checkpoints and ``--resume`` need.

:func:`check_env` turns what is missing into an error that names it and says how to add it (or a one-line
notice where the run can go on). A library run (:func:`lcpo.online.run.execute`, a population) refuses an
environment its checkpoints could not save the same way, from the object it made (:func:`check_checkpointable`),
before its first step. :func:`run_env_kwargs` is how a run passes its trace to an environment
(:func:`lcpo.online.run.make_run_env`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from lcpo.envs.task import UNDECLARED_NOTICE, declared_continuing, return_unit
from lcpo.persistence.strict_json import show

__all__ = ["EnvFacts", "VectorEnvError", "check_checkpointable", "check_env", "checkpoint_refusal", "inspect_env",
           "refuse_vector_env", "run_env_kwargs", "trace_length_applies"]

_GUIDE = "docs/bring-your-own.md"


class VectorEnvError(TypeError, ValueError):
    """A Gymnasium vector env was given where one environment is needed (a ``TypeError``, and a ``ValueError``
    so that the command line reports it as bad input, in one line)."""


def refuse_vector_env(env: Any, what: str = "the environment") -> None:
    """Refuse a Gymnasium vector env (:class:`gymnasium.vector.VectorEnv`, or a wrapper of one) up front.

    A single run (``lcpo run --env``, ``Agent(env)``, :class:`lcpo.online.loop.OnlineLoop`) steps one
    environment: one observation ``(obs_dim,)`` in, one action out. A vector env batches ``num_envs`` of them
    and would fail later, deep in the loop; it belongs to a population of independent learners instead.

    Args:
        env: the object given as an environment.
        what: how the message names it (e.g. ``"environment 'my_module:MyVec'"``).

    Raises:
        VectorEnvError: if ``env`` is a vector env; the one-line message says so and where vector envs go.
    """
    import gymnasium as gym

    if isinstance(env, gym.vector.VectorEnv) or isinstance(getattr(env, "unwrapped", None), gym.vector.VectorEnv):
        raise VectorEnvError(vector_env_message(what, type(env).__name__, getattr(env, "num_envs", None)))


def vector_env_message(what: str, kind: str, num_envs: int | None = None) -> str:
    """The one-line refusal of a vector env ``kind`` (its class name) given as ``what``."""
    n = f", num_envs={num_envs}" if num_envs else ""
    return (f"{what} is a Gymnasium vector env ({kind}{n}); a single run takes one gymnasium.Env. Vector envs "
            "are for populations of independent learners, one per seed (`lcpo run --seed 0-N`, "
            "docs/population.md), named as MODULE:CLASS of a gymnasium.vector.VectorEnv subclass or an id "
            "registered with vector_entry_point (a function that returns a vector env is taken for a single "
            "environment); or give one environment here (gymnasium.make(id), not gymnasium.make_vec(id))")


def run_env_kwargs(env: str, trace: str | None, trace_length: int | None,
                   env_kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The keyword arguments a run makes environment ``env`` with.

    * the windy ``lcpo/Windy*`` environments get a resolved :class:`~lcpo.contexts.ContextTrace`
      (default: the bundled ``ndbc-46002``), cut or repeated to ``trace_length``;
    * the other ``lcpo/*`` environments get the ``trace`` text as it is (a straggler workload name or file, a
      grid-world schedule), when given;
    * a user's environment (anything else) gets ``trace=`` a resolved :class:`~lcpo.contexts.ContextTrace`
      (a registered name or a ``.npy``/``.csv`` file, fitted to ``trace_length``) when ``trace`` is given, and
      no ``trace`` argument otherwise (its own default applies).

    Raises:
        lcpo.contexts.TraceError: an unknown trace name or a bad trace file.
        ValueError: ``env_kwargs`` holds ``trace`` where the run's own trace would replace it (a windy
            environment, or ``trace`` given too): ``--env-arg trace=wind-2`` was silently replaced by the default
            trace; the trace is given as ``--trace`` (``trace`` in a config).
    """
    kwargs = dict(env_kwargs or {})
    if "trace" in kwargs and (trace is not None or trace_length_applies(env, trace)):
        raise ValueError(f"environment argument 'trace' ({show(kwargs['trace'])}) would be replaced by the run's "
                         f"trace ({trace if trace is not None else 'the default'}): give it as --trace (traces = "
                         "[...] in a sweep file), not as an environment argument")
    if trace_length_applies(env, trace):
        from lcpo.contexts import DEFAULT_TRACE, resolve_trace

        kwargs["trace"] = resolve_trace(trace or DEFAULT_TRACE, length=trace_length)
    elif trace is not None:
        kwargs["trace"] = trace
    return kwargs


def trace_length_applies(env: str, trace: str | None) -> bool:
    """Whether :func:`run_env_kwargs` fits the trace of environment ``env`` to a ``trace_length``.

    True for the windy ``lcpo/Windy*`` environments and for a user's environment given a ``trace``; False for
    the other ``lcpo/*`` environments (their ``trace`` is a workload name or file, used as it is) and for a
    user's environment without a ``trace`` (it picks its own), where a ``trace_length`` would be ignored.
    """
    return env.startswith("lcpo/Windy") or (trace is not None and not env.startswith("lcpo/"))


#: What a tabular agent (``tabular-a2c``) asks of an environment, as its refusals say it.
TABULAR_NEED = ("needs an environment with discrete states (n_tabular_states and tabular_index(obs), as "
                "lcpo/TrapGrid-v0 declares)")


def declares_tabular(base: Any) -> bool:
    """Whether the unwrapped environment ``base`` declares discrete states (:data:`TABULAR_NEED`)."""
    return getattr(base, "n_tabular_states", None) is not None and callable(getattr(base, "tabular_index", None))


@dataclass(frozen=True)
class EnvFacts:
    """What an environment declares (made once with its run's arguments).

    Attributes:
        env: the environment name as given.
        continuing: the declared kind (``metadata["continuing"]``), ``None`` if undeclared (treated as episodic).
        context: names of the declared context entries, ``None`` if the environment declares no context.
        checkpointable: ``env.unwrapped`` has both ``get_state`` and ``set_state``.
        unsaved_wrappers: wrappers around the environment whose state a checkpoint cannot save
            (:func:`lcpo.envs.wrapper_state.unsaved_wrappers`); checkpoints are refused while there are any.
        notices: one-line notices for the user (e.g. an undeclared kind).
        tabular: ``env.unwrapped`` declares discrete states (``n_tabular_states`` and ``tabular_index``), as the
            tabular agents need (``lcpo/TrapGrid-v0``).
    """

    env: str
    continuing: bool | None
    context: tuple[str, ...] | None
    checkpointable: bool
    notices: tuple[str, ...] = field(default=())
    unsaved_wrappers: tuple[str, ...] = field(default=())
    tabular: bool = False

    @property
    def default_reset(self) -> str:
        """``"never"`` for a continuing environment, else ``"end"``."""
        return "never" if self.continuing else "end"


def inspect_env(env: str, env_kwargs: Mapping[str, Any] | None = None, trace: str | None = None,
                trace_length: int | None = None) -> EnvFacts:
    """Make an environment as a run would (:func:`run_env_kwargs`), read its declarations, close it.

    Raises:
        ValueError: the environment cannot be made (see :func:`lcpo.envs.registration.make_env`), or its
            ``metadata["continuing"]`` is not a bool.
    """
    from lcpo.envs.registration import make_env
    from lcpo.envs.wrapper_state import unsaved_wrappers

    made = make_env(env, **run_env_kwargs(env, trace, trace_length, env_kwargs))
    try:
        base = made.unwrapped
        continuing = declared_continuing(made)
        spec = getattr(base, "context_spec", None)
        context = None if spec is None else tuple(spec.names)
        checkpointable = callable(getattr(base, "get_state", None)) and callable(getattr(base, "set_state", None))
        unsaved = tuple(unsaved_wrappers(made))
        tabular = declares_tabular(base)
    finally:
        made.close()
    notices = () if continuing is not None else (UNDECLARED_NOTICE.format(env=env),)
    return EnvFacts(env, continuing, context, checkpointable, notices, unsaved, tabular)


def checkpoint_refusal(env: str, checkpointable: bool, unsaved: Sequence[str]) -> str | None:
    """Why runs of ``env`` cannot be checkpointed, as the one-line message every refusal uses, or None.

    Args:
        env: the environment name as given (``"my_env:with_statistics"``), for the message.
        checkpointable: ``env.unwrapped`` has ``get_state`` and ``set_state``.
        unsaved: the wrappers whose state a checkpoint cannot save (:func:`lcpo.envs.wrapper_state.unsaved_wrappers`).

    Returns:
        The message (naming what is missing, or the wrappers, and how to fix it), or None when nothing is.
    """
    if not checkpointable:
        return (f"environment {env!r} cannot be checkpointed: it has no get_state()/set_state(). Checkpoints and "
                "--resume save the environment's state with them: add get_state() -> dict (its dynamics state, "
                f"step counters, trace position, np_random state) and set_state(dict) (see {_GUIDE}), or run with "
                "--checkpoint-every 0 (sweeps: checkpoint_every = 0)")
    if unsaved:
        return (f"environment {env!r} cannot be checkpointed: its wrapper(s) {', '.join(unsaved)} hold state that "
                "a checkpoint would not save, so a resumed run would differ from an uninterrupted one. Give the "
                "wrapper get_state() -> dict and set_state(dict), apply it inside the environment, or run with "
                f"--checkpoint-every 0 (sweeps: checkpoint_every = 0) (see {_GUIDE})")
    return None


def check_checkpointable(env: Any, name: str) -> None:
    """Refuse, before a run takes a step or writes a file, an environment object that its checkpoints could
    not save: no ``get_state``/``set_state``, or a wrapper whose state is lost (:mod:`lcpo.envs.wrapper_state`).
    The library's :func:`lcpo.online.run.execute` and :func:`lcpo.online.population.execute_population` call
    it when checkpoints are on; the CLI and sweeps refuse the same earlier, from :func:`inspect_env`.

    Args:
        env: the environment as made for the run (wrappers included).
        name: its name as configured, for the message.

    Raises:
        ValueError: the one-line message of :func:`checkpoint_refusal`.
    """
    from lcpo.envs.wrapper_state import unsaved_wrappers

    base = env.unwrapped
    checkpointable = callable(getattr(base, "get_state", None)) and callable(getattr(base, "set_state", None))
    refusal = checkpoint_refusal(name, checkpointable, unsaved_wrappers(env))
    if refusal is not None:
        raise ValueError(refusal)


def check_env(facts: EnvFacts, reset: str, checkpoint_every: int, agents=()) -> list[str]:
    """Check that runs with ``reset`` and ``checkpoint_every`` can use this environment.

    Args:
        facts: from :func:`inspect_env`.
        reset: the run's reset condition.
        checkpoint_every: the run's checkpoint interval (0: no checkpoints).
        agents: agent names of the runs (``lcpo``/``lcpo-p`` need a declared context).

    Returns:
        One-line notices to show (nothing wrong, but worth saying).

    Raises:
        ValueError: checkpoints requested from an environment without ``get_state``/``set_state`` or with a
            wrapper whose state cannot be saved (:mod:`lcpo.envs.wrapper_state`, named), an agent
            that detects OOD contexts on an environment that declares no context, or a tabular agent on an
            environment without discrete states; the message says how to add what is missing.
    """
    notices = list(facts.notices)
    tabular = [a for a in agents if a.startswith("tabular")]
    if tabular and not facts.tabular:  # refused before any run, not after the other agents' runs
        raise ValueError(f"agent {tabular[0]} {TABULAR_NEED}, got {facts.env}")
    if facts.context is None:
        needing = [a for a in agents if a in ("lcpo", "lcpo-p")]
        how = (f"declare it in the environment's __init__: self.context_spec = lcpo.envs.ContextSpec(indices=..., "
               f"names=...) (which observation entries hold the context), and return the current context in "
               f"info['context'] (see {_GUIDE})")
        if needing:
            who = f"agent {needing[0]} detects" if len(needing) == 1 else f"agents {', '.join(needing)} detect"
            raise ValueError(f"environment {facts.env!r} declares no context (env.unwrapped.context_spec), and "
                             f"{who} out-of-distribution contexts from it: {how}")
        if not facts.env.startswith("lcpo/"):
            notices.append(f"lcpo: note: {facts.env} declares no context (context_spec); the runs go on, but "
                           "LCPO needs one")
    refusal = checkpoint_refusal(facts.env, facts.checkpointable, facts.unsaved_wrappers) if checkpoint_every \
        else None
    if refusal is not None:
        raise ValueError(refusal)
    if facts.continuing and reset == "end":
        notices.append(f"lcpo: note: {facts.env} is a continuing task: with reset 'end' no episode ever ends and "
                       "the lifelong return is n/a; its default is 'never' (rows of "
                       f"{return_unit('never')}s)")
    return notices
