"""Prescient agents: train offline with random access to the whole context trace, then run frozen online.

The LCPO paper's upper reference (section 6): an agent that has seen every context interleaved, so it cannot
forget one context while learning another. A prescient agent wraps a *base* agent (A2C, TRPO, DDQN, SAC, or
any class with the agent contract):

1. **Offline training** (once, on the first :meth:`Prescient.act`, or explicitly with :meth:`Prescient.train`):
   the base agent learns for ``train_steps`` environment steps on its own copy of the environment, where every
   episode starts at a trace row drawn uniformly from ``[0, T)`` (:class:`RandomTraceStart`), so all contexts
   are interleaved. Episodes end as the environment ends them, or after ``train_episode_steps`` steps if that
   is positive (needed for continuing environments).
2. **Online evaluation**: the frozen policy acts in the run's environment through the normal online loop,
   exactly like the online agents; :meth:`Prescient.observe` stores nothing and never updates, so the run's
   summary has the same fields (with no training diagnostics).

Environment contract (the windy environments satisfy it, :mod:`lcpo.envs.wind`):

* ``env.unwrapped.wind.length`` (or ``env.unwrapped.trace_length``): the trace length ``T`` in steps;
* ``env.reset(options={"trace_index": k})`` starts the episode at trace row ``k`` (the trace then advances
  one row per step from there, wrapping at the end);
* a training copy is made with ``gymnasium.make(env.spec)`` (or given as ``train_env=``).

Hyperparameters: every field of the base agent's hyperparameters plus ``train_steps``,
``train_episode_steps`` and ``eval_deterministic`` (see :func:`prescient_hyperparameters`).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import time
from collections.abc import Callable
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from lcpo.agents.base import Agent

__all__ = [
    "PRESCIENT_FIELDS",
    "Prescient",
    "PrescientA2C",
    "PrescientDDQN",
    "PrescientSAC",
    "PrescientTRPO",
    "RandomTraceStart",
    "prescient_hyperparameters",
    "trace_length_of",
]

#: The prescient wrapper's own hyperparameters: (name, type, default, description).
PRESCIENT_FIELDS: tuple[tuple[str, type, Any, str], ...] = (
    ("train_steps", int, 1_600_000,
     "environment steps of offline training (the paper's stationary budget, Table 10)"),
    ("train_episode_steps", int, 0,
     ("cut training episodes after this many steps (0: the environment's own episodes; set it for continuing "
      "environments)")),
    ("eval_deterministic", bool, False, "act greedily online (False: sample, as the online agents do)"),
)


def trace_length_of(env: gym.Env) -> int:
    """The context trace length ``T`` (steps) of a trace-driven environment.

    Reads ``env.unwrapped.wind.length`` (windy environments) or ``env.unwrapped.trace_length``.

    Raises:
        TypeError: if the environment exposes neither (the message names the environment).
    """
    u = env.unwrapped
    wind = getattr(u, "wind", None)
    length = getattr(wind, "length", None) if wind is not None else getattr(u, "trace_length", None)
    if length is None:
        raise TypeError(f"prescient agents need random access to the context trace, but {u} exposes neither "
                        "env.unwrapped.wind.length nor env.unwrapped.trace_length (and reset(options="
                        "{'trace_index': k}))")
    return int(length)


class RandomTraceStart(gym.Wrapper):
    """Start every episode at a uniformly random trace row (prescient training).

    Each ``reset`` draws ``k ~ Uniform{0, ..., T-1}`` from ``rng`` and passes ``options={"trace_index": k}``
    (merged with any given options) to the environment. The drawn rows are kept in :attr:`starts`.

    Args:
        env: an environment satisfying the contract in the module docstring.
        rng: the generator the start rows are drawn from.

    Raises:
        TypeError: if the environment has no trace length (see :func:`trace_length_of`).
    """

    def __init__(self, env: gym.Env, rng: np.random.Generator):
        super().__init__(env)
        self.rng = rng
        self.length = trace_length_of(env)
        self.starts: list[int] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Reset at a uniformly drawn trace row (recorded in :attr:`starts`); returns ``(obs, info)``."""
        k = int(self.rng.integers(self.length))
        self.starts.append(k)
        return self.env.reset(seed=seed, options={**(options or {}), "trace_index": k})


_HP_CACHE: dict[type, type] = {}


def prescient_hyperparameters(base_cls: type) -> type:
    """The frozen hyperparameter dataclass of a prescient ``base_cls``: its fields plus :data:`PRESCIENT_FIELDS`.

    Raises:
        ValueError: if the base agent already has a field of the same name as a prescient field.
    """
    if base_cls in _HP_CACHE:
        return _HP_CACHE[base_cls]
    base_hp = base_cls.Hyperparameters
    fields = [(f.name, f.type, dataclasses.field(default=f.default) if f.default_factory is dataclasses.MISSING
               else dataclasses.field(default_factory=f.default_factory)) for f in dataclasses.fields(base_hp)]
    clash = {f[0] for f in fields} & {p[0] for p in PRESCIENT_FIELDS}
    if clash:
        raise ValueError(f"{base_cls.__name__} hyperparameters clash with prescient fields {sorted(clash)}")
    fields += [(name, typ, dataclasses.field(default=default)) for name, typ, default, _ in PRESCIENT_FIELDS]
    cls = dataclasses.make_dataclass(f"Prescient{base_hp.__name__}", fields, frozen=True)
    cls.__module__ = __name__
    # docstring: the base's (its Attributes section lists every base field) followed by the prescient fields
    base_doc = inspect.getdoc(base_hp) or f"{base_hp.__qualname__}."
    if "\nAttributes:" not in base_doc:
        base_doc += "\n\nAttributes:"
    extra = "\n".join(f"    {name}: {doc}." for name, _, _, doc in PRESCIENT_FIELDS)
    cls.__doc__ = f"Prescient {base_cls.__name__}: {base_doc}\n{extra}\n"
    _HP_CACHE[base_cls] = cls
    return cls


class _HyperparametersOf:
    """Class attribute resolved on access: the prescient hyperparameters of the class's base agent (lazy, so
    a base module is imported only when its prescient agent is used)."""

    def __get__(self, instance, owner):
        return prescient_hyperparameters(owner.base_class())


class Prescient(Agent):
    """Generic prescient agent over a base agent class (see module docstring).

    Use a named subclass (:class:`PrescientA2C`, ...) or :meth:`Prescient.of` for any other base agent.

    Args:
        env: the run's environment (the online evaluation happens here).
        seed: run seed: seeds the base agent and the trace-start draws.
        hparams: a ``Hyperparameters`` instance (defaults if None).
        train_env: the environment to train on (default ``gymnasium.make(env.spec)``, else a deep copy).
        **overrides: hyperparameter fields (base agent's and prescient ones).

    Raises:
        TypeError: if the environment does not satisfy the trace-access contract; ValueError for bad
            hyperparameters (``train_steps < 0`` or above 2**53, ``train_episode_steps < 0``, unknown fields).

    Example:
        >>> import gymnasium as gym, lcpo.envs
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="wind-3")
        >>> agent = PrescientA2C(env, seed=0, train_steps=400)
        >>> agent.learn(200).trained, agent.base.steps
        (True, 400)
    """

    name: ClassVar[str] = "prescient"
    #: the base agent: a class, or ``"module:Class"`` imported on first use
    base_agent: ClassVar[type | str | None] = None
    Hyperparameters = _HyperparametersOf()

    @classmethod
    def base_class(cls) -> type:
        """The base agent class (importing it if given as ``"module:Class"``).

        Raises:
            TypeError: on the generic class itself (no base agent).
            ImportError: if the base agent's module does not exist (yet).
        """
        base = cls.base_agent
        if base is None:
            raise TypeError("Prescient is generic: use PrescientA2C/TRPO/DDQN/SAC or Prescient.of(BaseAgent)")
        if isinstance(base, str):
            module, attr = base.split(":")
            base = getattr(importlib.import_module(module), attr)
        return base

    @classmethod
    def of(cls, base: type) -> type:
        """A prescient agent class over ``base`` (any class with the agent contract), named ``prescient-<name>``."""
        return type(f"Prescient{base.__name__}", (cls,), {"base_agent": base, "name": f"prescient-{base.name}",
                                                          "__module__": __name__})

    def __init__(self, env: gym.Env, seed: int = 0, hparams=None, train_env: gym.Env | None = None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        if hp.train_steps < 0 or hp.train_episode_steps < 0:
            raise ValueError(f"train_steps and train_episode_steps must be >= 0, got {hp.train_steps}, "
                             f"{hp.train_episode_steps}")
        if hp.train_steps > 2**53:  # as a run's own step counts (lcpo.online.run.MAX_STEPS): exact integers
            raise ValueError(f"train_steps must be at most 2**53 = {2**53:,}, got {hp.train_steps:,}")
        base_cls = self.base_class()
        base_kwargs = {f.name: getattr(hp, f.name) for f in dataclasses.fields(base_cls.Hyperparameters)}
        if train_env is None:
            train_env = gym.make(env.spec) if env.spec is not None else copy.deepcopy(env)
        # trace starts: the 5th child of the run seed, independent of the 4 streams the agents spawn
        # (the base agent spawns its own from the same seed)
        self.rngs["starts"] = np.random.Generator(np.random.PCG64(np.random.SeedSequence(self.seed, spawn_key=(4,))))
        self.train_env = RandomTraceStart(train_env, self.rngs["starts"])
        self.base: Agent = base_cls(self.train_env, seed=self.seed, **base_kwargs)
        self.trained = False
        #: wall-clock seconds this process spent in offline training (float)
        self.train_wall_s = 0.0
        self.steps = 0

    def train(self, should_stop: Callable[[], bool] | None = None, poll_steps: int = 250) -> Prescient:
        """Offline training of the base agent for ``train_steps`` (idempotent; returns ``self``).

        With ``should_stop``, training goes in chunks of ``poll_steps`` environment steps and asks it after each;
        once it says True, training pauses with ``trained`` still False and :attr:`train_steps_done` the steps
        taken. A later call continues it in memory, and the result is the uninterrupted training's bit for bit
        (the base agent's stream simply continues). A paused agent has no checkpoint (:meth:`state_dict` refuses):
        its training environment's state is not part of it, so a run stopped here starts the training afresh.

        Args:
            should_stop: asked every ``poll_steps`` training steps (a run's SIGINT/SIGTERM request); None: train
                to the end in one call.
            poll_steps: training steps between two looks at ``should_stop`` (>= 1).

        Raises:
            ValueError: for ``poll_steps < 1``.
        """
        if isinstance(poll_steps, bool) or not isinstance(poll_steps, (int, np.integer)) or poll_steps < 1:
            raise ValueError(f"poll_steps must be an integer >= 1, got {poll_steps!r}")
        if self.trained:
            return self
        n = self.hp.train_episode_steps
        total = int(self.hp.train_steps)
        start = time.perf_counter()
        try:
            while True:
                # counted from the base agent's own steps, so that an exception inside a chunk (a Ctrl-C in a
                # notebook) leaves the count right and a later call continues to exactly ``train_steps``
                left = total - self.train_steps_done
                k = left if should_stop is None else min(int(poll_steps), left)
                # the first call sets the reset condition; later ones (None) keep the running one
                first = self.train_steps_done == 0
                self.base.learn(k, reset_condition=(f"every:{n}" if n else None) if first else None)
                if self.train_steps_done >= total:
                    self.trained = True
                    return self
                if should_stop is not None and should_stop():
                    return self
        finally:
            self.train_wall_s += time.perf_counter() - start

    @property
    def train_steps_done(self) -> int:
        """Offline training steps taken so far: ``train_steps`` once trained, fewer while paused or cut short."""
        return int(self.hp.train_steps) if self.trained else int(self.base.steps)

    @property
    def train_starts(self) -> np.ndarray:
        """``(episodes,)`` int64 trace rows the training episodes started at (this process's training only)."""
        return np.asarray(self.train_env.starts, dtype=np.int64)

    def act(self, obs: np.ndarray, deterministic: bool = False):
        """The frozen base policy's action (trains first if not yet trained).

        Args:
            obs: ``(obs_dim,)`` observation.
            deterministic: act greedily (also when ``eval_deterministic`` is set).
        """
        if not self.trained:
            self.train()
        if deterministic or self.hp.eval_deterministic:
            return self.base.act(obs, deterministic=True)
        return self.base.act(obs)

    def observe(self, transition) -> None:
        """Count the step; store nothing and never update (the policy is frozen). Returns None."""
        self.steps += 1

    def state_dict(self) -> dict:
        """The base agent's state, the training flag, the trace-start generator state and the step counter.

        Raises:
            RuntimeError: while offline training stands part-way (paused by :meth:`train`'s ``should_stop``, or cut
                short by an exception such as a Ctrl-C): that state could not be resumed exactly.
        """
        if not self.trained and self.train_steps_done:
            raise RuntimeError(f"{self.name}: offline training stopped at step {self.train_steps_done:,} of "
                               f"{self.hp.train_steps:,} has no checkpoint (finish it with train() first)")
        return {"base": self.base.state_dict(), "trained": self.trained, "steps": self.steps,
                "rngs": {k: g.bit_generator.state for k, g in self.rngs.items()}}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly."""
        self.base.load_state_dict(state["base"])
        self.trained = bool(state["trained"])
        self.steps = int(state["steps"])
        for k, s in state["rngs"].items():
            self.rngs[k].bit_generator.state = s


class PrescientA2C(Prescient):
    """Prescient A2C (:class:`lcpo.agents.a2c.A2C` trained offline on the whole trace)."""

    name = "prescient-a2c"
    base_agent = "lcpo.agents.a2c:A2C"


class PrescientTRPO(Prescient):
    """Prescient TRPO (:class:`lcpo.agents.trpo.TRPO` trained offline on the whole trace)."""

    name = "prescient-trpo"
    base_agent = "lcpo.agents.trpo:TRPO"


class PrescientDDQN(Prescient):
    """Prescient Double DQN (``lcpo.agents.ddqn.DDQN`` trained offline on the whole trace; imported on first use)."""

    name = "prescient-ddqn"
    base_agent = "lcpo.agents.ddqn:DDQN"


class PrescientSAC(Prescient):
    """Prescient discrete SAC (``lcpo.agents.sac.SAC`` trained offline on the whole trace; imported on first use)."""

    name = "prescient-sac"
    base_agent = "lcpo.agents.sac:SAC"
