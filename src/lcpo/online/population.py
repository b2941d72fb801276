"""A population: N independent runs of one agent, stepped together in one process (issue 26).

Seed ``k`` of a population gives the run seed ``k`` gives alone: the same environment (sub-environment ``k`` of
one vector environment, :mod:`lcpo.envs.vector`), the same agent (seed ``k`` of an agent population,
:mod:`lcpo.agents.population`), the same online loop (:class:`PopulationLoop` applies
:class:`lcpo.online.loop.OnlineLoop`'s rules to every seed at once: its own reset condition, a forced reset is a
truncation, ``next_obs`` is the real observation reached, episode rows and the 200-step windows of a continuing
task), and the same run folder (:func:`execute_population` writes each seed's folder in the format of
:func:`lcpo.online.run.execute`, so ``lcpo report``, the results store and ``lcpo resume <seed folder>`` treat it
as any other run). Whether seed ``k`` is also *bitwise* the solo run depends on the agent population: the
generic path (N single agents) is; a batch-native agent states its own tolerance (docs/population.md).

Persistence: a population checkpoints as one unit without a second copy of any state (docs/population.md,
"Persistence"). Every ``checkpoint_every`` steps each seed folder gets its new generation in the single-run format
(``<seed folder>/checkpoint/step-...``, written and renamed into place, not yet pointed to); then the
population's commit pointer ``<population folder>/population.json`` (:func:`population_folder`) is replaced
atomically, naming every seed's generation and its SHA-256: the commit point; then each seed folder's own
``checkpoint/latest.json`` is pointed to its generation. A kill at any instant leaves ``population.json`` naming
the previous or the new population state, never a mix. A resume takes, per seed, the later of the generation the
pointer names and the folder's own checkpoint (:func:`pointer_verdict`), so it is exact after a kill between the
commit and the seed pointers, and a seed folder resumed on its own weighs the same two
(:func:`pointer_for_folder`).

Example:
    >>> from lcpo.online.population import Population
    >>> pop = Population("a2c", "lcpo/WindyPendulum-v0", seeds=[0, 1, 2], trace="wind-3", trace_length=2000,
    ...                  hidden=[16])
    >>> pop.learn(400).steps           # 400 steps of each seed, 1,200 environment steps in all
    400
    >>> [len(rows) for rows in pop.episodes]   # Pendulum episodes are 200 steps long
    [2, 2, 2]
    >>> len(pop.lifelong_return())
    3
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from lcpo.online.episodes import EpisodeRows
from lcpo.online.loop import SEGMENT_STEPS, NeverReset, ResetOnEnd, Transition, parse_reset, restored_rows

__all__ = ["Population", "PopulationLoop", "execute_population", "names_vector_env", "pointer_for_folder",
           "pointer_verdict", "population_folder", "read_population_pointer", "refuse_unresumed", "user_vector_env",
           "SHARED_KEYS"]

#: Run-configuration keys every member of one population must share (the agent population is built once for
#: all seeds, and the seeds step in lockstep); the others (seed, trace, env_kwargs, reset, warm-up, diagnostics,
#: TensorBoard, probes) may differ per seed.
SHARED_KEYS = ("env", "agent", "overrides", "steps", "checkpoint_every")


# -- what a population is made of: a vector stream and an agent population ---------------------------------


def _make_stream(env_id: str, env_kwargs: list[dict], device=None):
    """``(stream, seed_envs, user)``: the vector stream over one sub-environment per seed, the sub-environments
    themselves where they exist as objects (a ``SyncVectorEnv``'s; ``None`` for a native vector environment or a
    user's), and whether it is the user's own vector environment (:func:`user_vector_env`). ``device``: the
    torch device of a native vector env's torch backend (None: its host kernel)."""
    from gymnasium.vector import SyncVectorEnv

    from lcpo.envs.vector import VectorStream, make_vector_env

    user = user_vector_env(env_id, env_kwargs)
    venv = user if user is not None else make_vector_env(env_id, env_kwargs, device=device)
    base = venv.unwrapped
    envs = list(base.envs) if isinstance(base, SyncVectorEnv) and user is None else None
    return VectorStream(venv), envs, user is not None


def names_vector_env(env_id: str) -> bool:
    """Whether ``env_id`` names a user's vector environment (see :func:`user_vector_env`), without making it.

    Raises:
        ValueError: an unknown environment name (:func:`lcpo.envs.registration.check_env_name`).
    """
    import gymnasium as gym
    from gymnasium.vector import VectorEnv

    from lcpo.envs.registration import _resolve

    kind, target = _resolve(env_id)
    if kind == "entry":
        return isinstance(target, type) and issubclass(target, VectorEnv)
    spec = gym.spec(target)
    return spec.entry_point is None and spec.vector_entry_point is not None


def user_vector_env(env_id: str, env_kwargs: Sequence[dict]):
    """The user's own vector environment named by ``env_id``, made once for the whole population, or None when
    ``env_id`` names a single environment (which :func:`lcpo.envs.vector.make_vector_env` vectorises).

    A vector environment is: ``MODULE:CLASS`` where ``CLASS`` is a :class:`gymnasium.vector.VectorEnv`
    subclass, or a registered id whose only entry point is a vector entry point. It is made with the (shared)
    environment arguments, plus ``num_envs=N`` where it takes that argument and it was not given; its
    ``num_envs`` must be N, one sub-environment per seed.

    Raises:
        ValueError: an unknown environment name (as :func:`names_vector_env`), per-seed environment arguments
            that differ (one vector env takes one set), or ``num_envs`` other than the number of seeds.
    """
    import inspect

    import gymnasium as gym

    from lcpo.envs.registration import _resolve

    if not names_vector_env(env_id):
        return None
    kind, target = _resolve(env_id)
    n = len(env_kwargs)
    if kind == "entry":
        make = target
    else:
        def make(**kw):
            return gym.make_vec(target, vectorization_mode="vector_entry_point", **kw)
    first = dict(env_kwargs[0])
    if any(dict(kw) != first for kw in env_kwargs[1:]):
        raise ValueError(f"environment {env_id!r} is a vector env, made once for all seeds: its environment "
                         "arguments must be the same for every seed")
    kw = dict(first)
    try:
        takes_n = "num_envs" in inspect.signature(make).parameters or kind == "id"
    except (TypeError, ValueError):
        takes_n = False
    if takes_n and "num_envs" not in kw:
        kw["num_envs"] = n
    venv = make(**kw)
    if int(venv.num_envs) != n:
        raise ValueError(f"environment {env_id!r} is a vector env of {venv.num_envs} sub-environments: pass "
                         f"{venv.num_envs} seeds (one per sub-environment), got {n}")
    return venv


class _Template:
    """A single environment's face of a user's vector env (spaces, context declaration) for the agents."""

    def __init__(self, venv):
        import gymnasium as gym

        class Face(gym.Env):
            metadata = dict(getattr(venv, "metadata", {}))

        face = Face()
        face.observation_space = venv.single_observation_space
        face.action_space = venv.single_action_space
        spec = getattr(venv.unwrapped, "context_spec", None)
        if spec is not None:
            face.context_spec = spec
        self.env = face


def _make_agents(agent: str, env_id: str, env_kwargs: dict, seeds: list[int], device: str, batch: bool,
                 overrides: dict, template=None):
    """The agent population over a template environment (made with seed 0's arguments; an agent reads it for
    its spaces and context declaration): batch-native where :data:`lcpo.agents.population.BATCH_NATIVE` lists
    the agent and ``batch`` is True, else the generic :class:`lcpo.agents.population.AgentPopulation` (N
    single agents).

    Raises:
        ValueError: ``device`` other than ``"cpu"`` for an agent that is not batch-native.
    """
    from lcpo.agents import AGENTS
    from lcpo.agents.population import BATCH_NATIVE, AgentPopulation, make_population
    from lcpo.envs.registration import make_env

    native = batch and agent in BATCH_NATIVE
    _check_device_agent(agent, device, batch)
    if template is None:
        template = make_env(env_id, **env_kwargs)
    if native:
        kw = dict(overrides) if device == "cpu" else {**overrides, "device": device}
        return make_population(agent, template, seeds, **kw)
    return AgentPopulation(AGENTS[agent], template, seeds, **overrides)


def _check_seeds(seeds) -> list[int]:
    """``seeds`` as a list of Python ints; a one-line ValueError naming ``seeds`` for a string (``"12"`` is not
    seeds 1 and 2; ``lcpo run --seed 0-3`` takes ranges, the library takes ``range(4)``), a bool, a float or any
    other non-integer entry, or a negative one."""
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Iterable):
        raise ValueError(f"seeds must be a sequence of integers (e.g. [0, 1] or range(4)), got {seeds!r}")
    out = []
    for k, v in enumerate(seeds):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"seeds[{k}] must be an integer >= 0, got {v!r}")
        out.append(int(v))
    return out


def _check_device_agent(agent: str, device: str, batch: bool, what: str = "device") -> None:
    """Refuse a device other than the CPU for an agent that is not batch-native (or ``batch=False``).

    ``what`` names the setting in the error: ``"device"`` (the library argument) or ``"--device"`` (the CLI).

    Raises:
        ValueError: one line naming the device, the agent and the batch-native agents.
    """
    from lcpo.agents.population import BATCH_NATIVE

    if device != "cpu" and not (batch and agent in BATCH_NATIVE):
        why = ("with --no-batch" if what.startswith("--") else "with batch=False") if agent in BATCH_NATIVE \
            else "here"
        raise ValueError(f"{what} {device}: agent {agent!r} is not batch-native {why} (its networks stay on the "
                         f"CPU); batch-native agents: {', '.join(sorted(BATCH_NATIVE)) or 'none yet'}")


# -- the online loop of N seeds -----------------------------------------------------------------------------


def _check_finite(what: str, values: np.ndarray, step: int, seeds: Sequence[int]) -> None:
    if np.isfinite(values).all():
        return
    bad = ~np.isfinite(values.reshape(values.shape[0], -1)).all(axis=1)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"non-finite {what} {np.asarray(values[k]).tolist()} of seed {seeds[k]} at step {step}")


class PopulationLoop:
    """The online loop (:class:`lcpo.online.loop.OnlineLoop`) of N seeds stepped in lockstep.

    Per seed it keeps what ``OnlineLoop`` keeps for one: the reset condition and its counter, the running
    episode (return, length, context sum) and the episode rows; every step it acts for all seeds at once, steps
    the vector stream, applies each seed's reset condition (a forced reset marks that seed's transition
    ``truncated``; under ``never`` the environment's own truncation is cleared), hands the batch to the agent
    population, records the episodes that ended and resets exactly those sub-environments.

    Args:
        stream: a :class:`lcpo.envs.vector.VectorStream` (``reset(seeds)``, ``step(actions)``,
            ``reset_where(mask)``, ``get_state()``/``set_state()``) over N sub-environments.
        agents: an agent population (``act_batch``, ``observe_batch``; :mod:`lcpo.agents.population`).
        reset_conditions: one ``end | every:N | never`` string per seed.
        seeds: the N run seeds (the first reset of sub-environment ``k`` is seeded with ``seeds[k]``).
        on_episode: ``(k, row)`` for each finished episode (or 200-step window) of seed index ``k``.
        on_update: ``(k, step, diagnostics)`` whenever seed ``k``'s agent updated.
        segment_steps: steps per recorded row of a continuing (``never``) seed.

    Raises:
        ValueError: no seeds, seeds and conditions of different lengths, a malformed condition,
            ``segment_steps`` < 1, or (while running, :meth:`run`) a non-finite observation or reward (naming the
            seed and step).
    """

    def __init__(self, stream, agents, reset_conditions: Sequence[str], seeds: Sequence[int],
                 on_episode: Callable | None = None, on_update: Callable | None = None,
                 segment_steps: int = SEGMENT_STEPS):
        if not seeds:
            raise ValueError("a population needs at least one seed, got none")
        if len(reset_conditions) != len(seeds):
            raise ValueError(f"need one reset condition per seed, got {len(reset_conditions)} for {len(seeds)} "
                             "seeds")
        if int(segment_steps) < 1:
            raise ValueError(f"segment_steps must be >= 1, got {segment_steps}")
        for c in reset_conditions:
            if not isinstance(c, str):
                raise ValueError(f"a population's reset condition is a string (end | every:N | never), got {c!r}")
        self.stream, self.agents = stream, agents
        self.seeds = [int(s) for s in seeds]
        self.n = len(self.seeds)
        self.conds = [parse_reset(c) for c in reset_conditions]
        self.never = np.array([isinstance(c, NeverReset) for c in self.conds])
        # conditions that can force a reset (ResetOnEnd and NeverReset never do)
        self._counted = [k for k, c in enumerate(self.conds) if not isinstance(c, (ResetOnEnd, NeverReset))]
        hooks = [getattr(c, "on_reset", None) for c in self.conds]
        self._reset_hooks = hooks if any(h is not None for h in hooks) else None
        self.segment_steps = int(segment_steps)
        self.on_episode, self.on_update = on_episode, on_update
        self.steps = 0
        self.episodes: list[EpisodeRows] = [EpisodeRows() for _ in range(self.n)]
        self.obs: np.ndarray | None = None
        self._ep_return = np.zeros(self.n)
        # the step at which each seed's running episode (or 200-step window) began: its length is
        # steps - _ep_start, so no per-step counter update
        self._ep_start = np.zeros(self.n, dtype=np.int64)
        self._ctx_sum: np.ndarray | None = None  # (N, c) float64, valid where _has_ctx
        self._has_ctx = np.zeros(self.n, dtype=bool)
        self._ctx_all = False  # _has_ctx.all(), kept as a Python bool (read every step)

    def _after_reset(self, mask: np.ndarray) -> None:
        self._ep_return[mask] = 0.0
        self._ep_start[mask] = self.steps
        self._has_ctx[mask] = False
        self._ctx_all = self._ctx_all and not np.count_nonzero(mask)
        if self._reset_hooks:
            for k in np.flatnonzero(mask):
                hook = self._reset_hooks[k]
                if hook is not None:
                    hook()

    def _add_context(self, infos) -> None:
        arr = None
        batched = getattr(infos, "batched", None)  # VectorStream's StepInfos: the (N, c) array without N dicts
        if batched is not None:
            try:
                arr = batched("context")
            except KeyError:
                arr = None
            else:
                if type(arr) is not np.ndarray or arr.dtype.char != "d" or arr.ndim != 2 or arr.shape[0] != self.n:
                    arr = np.asarray(arr, dtype=np.float64).reshape(self.n, -1)
                if self._ctx_all and self._ctx_sum.shape == arr.shape:  # every seed mid-episode: one add
                    self._ctx_sum += arr
                    return
        if arr is None:
            ctx = [i.get("context") if i else None for i in infos]
            if all(c is not None for c in ctx):
                arr = np.asarray(ctx, dtype=np.float64).reshape(self.n, -1)
        if arr is not None:
            if self._ctx_sum is None or self._ctx_sum.shape != arr.shape:
                self._ctx_sum = arr.copy()
            elif self._ctx_all:
                self._ctx_sum += arr
                return
            else:  # a fresh episode starts from its first context itself (as OnlineLoop does), keeping -0.0
                np.copyto(self._ctx_sum, np.where(self._has_ctx[:, None], self._ctx_sum + arr, arr))
            self._has_ctx[:] = True
            self._ctx_all = True
            return
        for k, c in enumerate(ctx):  # some seeds report no context this step
            if c is None:
                continue
            c = np.asarray(c, dtype=np.float64).ravel()
            if self._ctx_sum is None:
                self._ctx_sum = np.zeros((self.n, c.size))
            self._ctx_sum[k] = self._ctx_sum[k] + c if self._has_ctx[k] else c
            self._has_ctx[k] = True
        self._ctx_all = bool(self._has_ctx.all())

    def _carry_on(self, mask: np.ndarray) -> None:
        """Keep stepping the masked sub-environments past their own truncation (``never``), as
        :class:`~lcpo.online.loop.OnlineLoop` does with a single environment
        (:meth:`lcpo.envs.vector.VectorStream.continue_where`).

        Raises:
            ValueError: the vector environment cannot (it resets its sub-environments itself); the message says
                to make the environment continuing.
        """
        try:
            self.stream.continue_where(mask)
        except ValueError as exc:
            raise ValueError(f"reset condition 'never': {exc}; or make the environment continuing (e.g. "
                             "--env-arg time_limit=null)") from None

    def _record(self, k: int) -> None:
        n = self.steps - int(self._ep_start[k])
        ctx = () if not self._has_ctx[k] else tuple(float(c) for c in self._ctx_sum[k] / n)
        row = (len(self.episodes[k]), self.steps, float(self._ep_return[k]), n) + ctx
        self.episodes[k].append(row)
        if self.on_episode is not None:
            self.on_episode(k, row)

    def run(self, until_step: int) -> None:
        """Step every seed until the (shared) step count reaches ``until_step``.

        Raises:
            ValueError: a non-finite observation (of ``step`` or ``reset``) or reward, naming the seed and step;
                or a ``never`` seed whose vector environment cannot step on past its episode's end
                (:meth:`lcpo.envs.vector.VectorStream.continue_where`).
        """
        if self.obs is None:
            obs = self.stream.reset(self.seeds)
            _check_finite("observation returned by reset()", np.asarray(obs), self.steps, self.seeds)
            self.obs = obs
            self._after_reset(np.ones(self.n, dtype=bool))
        stream, agents, conds, seeds = self.stream, self.agents, self.conds, self.seeds
        any_never = bool(self.never.any())
        check = not getattr(agents, "validates_transitions", False)  # else observe_batch checks them (once)
        mutates = any_never or bool(self._counted)  # the loop may set or clear a truncated flag (own copy)
        while self.steps < until_step:
            obs = self.obs
            actions = agents.act_batch(obs)
            next_obs, rewards, terminated, truncated, infos = stream.step(actions)
            rewards = np.asarray(rewards, dtype=np.float64)
            if check:
                _check_finite("reward", rewards, self.steps, seeds)
                _check_finite("observation", np.asarray(next_obs), self.steps, seeds)
            terminated = np.asarray(terminated, dtype=bool)  # read only
            truncated = np.array(truncated, dtype=bool) if mutates else np.asarray(truncated, dtype=bool)
            if any_never:
                carry_on = self.never & truncated & ~terminated
                if np.count_nonzero(carry_on):  # the environment's own time limit: a continuing stream goes on
                    self._carry_on(carry_on)
                truncated[self.never] = False
            for k in self._counted:
                if not (terminated[k] or truncated[k]):
                    tr = Transition(obs[k], actions[k], float(rewards[k]), next_obs[k], False, False, infos[k])
                    if conds[k](None, tr, None):
                        truncated[k] = True
            self.steps += 1
            self._ep_return += rewards
            self._add_context(infos)
            diags = agents.observe_batch(obs, actions, rewards, next_obs, terminated, truncated, infos)
            if self.on_update is not None:
                for k, d in enumerate(diags):
                    if d:
                        self.on_update(k, self.steps, d)
            done = terminated | truncated
            if np.count_nonzero(done):  # (count_nonzero: a fraction of ndarray.any()'s cost at small N)
                for k in np.flatnonzero(done):
                    self._record(k)
                self.obs = stream.reset_where(done)
                _check_finite("observation returned by reset()", np.asarray(self.obs), self.steps, seeds)
                self._after_reset(done)
            else:
                self.obs = next_obs
            if not any_never:
                continue
            window = self.never & ~done & (self._ep_start <= self.steps - self.segment_steps)
            if np.count_nonzero(window):
                for k in np.flatnonzero(window):
                    self._record(k)
                self._ep_return[window] = 0.0
                self._ep_start[window] = self.steps
                self._has_ctx[window] = False
                self._ctx_all = False

    def seed_states(self, episodes: bool = True) -> list[dict]:
        """Every seed's loop state in :meth:`lcpo.online.loop.OnlineLoop.state_dict`'s format (so a seed folder
        resumes alone): counters, current observation (``obs``: a copy of the seed's row, ``(d,)`` float32 as the
        stream returns it), partial episode (``ctx_sum``: ``(c,)`` float64 context sum, or None), episode rows
        (or with ``episodes=False`` only their number, as ``OnlineLoop.state_dict``), the reset condition's
        counter and, under ``"env"``, its sub-environment's own ``get_state()``.

        Raises:
            TypeError, RuntimeError: as :meth:`lcpo.envs.vector.VectorStream.get_state` (an environment that
                cannot be saved; a sub-environment awaiting its autoreset, or no reset yet).
        """
        env_states = self.stream.get_state()
        return [{
            "steps": self.steps, "obs": None if self.obs is None else np.array(self.obs[k], copy=True),
            "ep_return": float(self._ep_return[k]), "ep_length": self.steps - int(self._ep_start[k]),
            "ctx_sum": self._ctx_sum[k].copy() if self._has_ctx[k] else None,
            **({"episodes": np.array(self.episodes[k])} if episodes else {"episode_count": len(self.episodes[k])}),
            "reset_count": getattr(self.conds[k], "_count", 0),
            "env": env_states[k]["env"],
            "wrappers": env_states[k].get("wrappers"),  # None for lcpo's native vector env (it has none)
        } for k in range(self.n)]

    def state_dict(self) -> dict:
        """``{"seeds": seed_states()}``."""
        return {"seeds": self.seed_states()}

    def load_seed_states(self, states: Sequence[dict], episodes: Sequence[EpisodeRows | None] | None = None) -> None:
        """Restore one :meth:`seed_states` entry (or a solo ``OnlineLoop.state_dict``) per seed, all at one step.

        Args:
            states: one state per seed.
            episodes: per seed, the rows of a state saved with ``episodes=False`` (see
                :func:`lcpo.online.loop.restored_rows`), else None.

        Raises:
            ValueError: the states are at different steps, or there is not one per seed; a state without rows and
                none given (or another number); or as :meth:`lcpo.envs.vector.VectorStream.set_state` (which also
                raises TypeError).
        """
        if len(states) != self.n:
            raise ValueError(f"need {self.n} seed states, got {len(states)}")
        steps = {int(s["steps"]) for s in states}
        if len(steps) != 1:
            raise ValueError(f"seed states at different steps {sorted(steps)} cannot be one population")
        given = [None] * self.n if episodes is None else list(episodes)
        rows = [restored_rows(s, e, f"seed {self.seeds[k]}'s state") for k, (s, e) in enumerate(zip(states, given))]
        self.stream.reset(self.seeds)  # as OnlineLoop.load_state_dict: one seeded reset, then the saved state
        self.stream.set_state([{"env": s["env"], "obs": np.asarray(s["obs"], dtype=np.float32), "ended": False,
                                "wrappers": s.get("wrappers")} for s in states])
        self.steps = steps.pop()
        self.obs = np.stack([np.asarray(s["obs"], dtype=np.float32) for s in states])  # the stream's dtype
        self._ep_return = np.array([float(s["ep_return"]) for s in states])
        self._ep_start = self.steps - np.array([int(s["ep_length"]) for s in states], dtype=np.int64)
        self._has_ctx = np.array([s["ctx_sum"] is not None for s in states])
        self._ctx_all = bool(self._has_ctx.all())
        if self._has_ctx.any():
            width = next(np.asarray(s["ctx_sum"]).size for s in states if s["ctx_sum"] is not None)
            self._ctx_sum = np.zeros((self.n, width))
            for k, s in enumerate(states):
                if s["ctx_sum"] is not None:
                    self._ctx_sum[k] = np.asarray(s["ctx_sum"], dtype=np.float64).ravel()
        else:
            self._ctx_sum = None
        self.episodes = rows
        for c, s in zip(self.conds, states):
            if hasattr(c, "_count"):
                c._count = int(s["reset_count"])

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output."""
        self.load_seed_states(state["seeds"])


# -- the library class --------------------------------------------------------------------------------------


class Population:
    """N independent learners of one agent on N copies of one environment, trained together in one process.

    Seed ``k`` learns as ``AGENTS[agent](env_k, seed=seeds[k], **overrides)`` would alone under
    :class:`lcpo.online.loop.OnlineLoop` (see the module docstring for which agents are bitwise equal). Use
    :func:`execute_population` for runs with folders, checkpoints and summaries.

    Args:
        agent: agent name (``lcpo``, ``a2c``, ...; ``lcpo agents list``).
        env: environment id (an lcpo id, a Gymnasium id, or ``MODULE:ID`` / ``MODULE:CLASS``).
        seeds: the run seeds, one learner each (distinct).
        trace: context trace name or file (as :class:`lcpo.online.run.RunConfig.trace`), the same for every seed.
        trace_length: fit the trace to this many steps.
        env_kwargs: extra environment arguments: one dict for all seeds, or one dict per seed.
        reset: reset condition (``end | every:N | never``), one for all seeds or one per seed; None (the
            default, for all or for one seed) takes what the environment declares, as ``lcpo run`` does:
            ``"never"`` for a continuing task such as the straggler environment, else ``"end"``.
        device: ``"cpu"`` (default) or a torch device string such as ``"cuda"``, ``"cuda:1"``: batch-native
            agents' networks, optimizer state and update tensors live there, and the native windy Pendulum vector
            env steps there in torch (docs/population.md, "Device"); checked by
            :func:`lcpo.online.device.resolve_device`.
        batch: False: the generic path (N single agents) even for a batch-native agent.
        **overrides: agent hyperparameters.

    Attributes:
        seeds: the run seeds.
        agents: the agent population (``act_batch``, ``observe_batch``, ``seed_state_dict(k)``).
        loop: the :class:`PopulationLoop`.

    Raises:
        ValueError: no seeds, repeated seeds, a seed that is not an integer >= 0 (or ``seeds`` a string), a list of
            the wrong length, a malformed reset condition, an unknown agent or environment, an unusable device or a
            device other than the CPU for an agent that is not batch-native.
    """

    def __init__(self, agent: str, env: str = "lcpo/WindyPendulum-v0", seeds: Sequence[int] = (0,), *,
                 trace: str | None = None, trace_length: int | None = None,
                 env_kwargs: Mapping | Sequence[Mapping] | None = None, reset: str | Sequence[str] | None = None,
                 device: str = "cpu", batch: bool = True, **overrides):
        from lcpo.envs.preflight import run_env_kwargs

        seeds = _check_seeds(seeds)
        n = len(seeds)
        if not n or len(set(seeds)) != n:
            raise ValueError(f"a population needs distinct seeds, got {seeds}")
        kwargs = _per_seed(env_kwargs or {}, n, "env_kwargs", Mapping)
        resets = _per_seed(reset, n, "reset", (str, type(None)))
        traces = [run_env_kwargs(env, trace, trace_length, kw) for kw in kwargs]
        self._init(agent, env, seeds, traces, resets, device, batch, dict(overrides))

    @classmethod
    def _from_configs(cls, configs: Sequence, device: str = "cpu", batch: bool = True,
                      overrides: dict | None = None) -> "Population":
        from lcpo.envs.preflight import run_env_kwargs

        self = cls.__new__(cls)
        c0 = configs[0]
        self._init(c0.agent, c0.env, [c.seed for c in configs],
                   [run_env_kwargs(c.env, c.trace, c.trace_length, c.env_kwargs) for c in configs],
                   [c.reset for c in configs], device, batch,
                   dict(c0.agent_overrides() if overrides is None else overrides))
        return self

    def _init(self, agent, env_id, seeds, env_kwargs, resets, device, batch, overrides) -> None:
        from lcpo.agents import AGENTS
        from lcpo.online.device import host_kernels, resolve_device

        if agent not in AGENTS:
            raise ValueError(f"unknown agent {agent!r}; known agents: {sorted(AGENTS)}")
        dev = resolve_device(device, "device")  # before any work: a one-line error naming the device
        _check_device_agent(agent, str(dev), batch)
        self.agent_name, self.env_id, self.seeds, self.device = agent, env_id, list(seeds), str(dev)
        # off the CPU, the native windy Pendulum steps in torch on the same device (one copy each way per step)
        self.stream, self.seed_envs, user = _make_stream(env_id, env_kwargs, None if host_kernels(dev) else dev)
        # a user's own vector env: the agents see a single environment's face of it, as do the run folders
        self.template = _Template(self.stream.venv).env if user else None
        self.agents = _make_agents(agent, env_id, env_kwargs[0], self.seeds, self.device, batch, overrides,
                                   self.template)
        self.batch_native = not hasattr(self.agents, "members")  # the generic path holds its single agents
        if any(r is None for r in resets):  # the environment's own kind decides, as `lcpo run` does
            from lcpo.envs.task import default_reset

            envs = self.seed_envs if self.seed_envs is not None else [self.template or self.stream.venv] * len(resets)
            resets = [default_reset(envs[k]) if r is None else r for k, r in enumerate(resets)]
        self.loop = PopulationLoop(self.stream, self.agents, resets, self.seeds)
        self._described: dict = {}  # seed_env's environments for descriptions (a native vector env)

    @property
    def n_seeds(self) -> int:
        """N, the number of seeds."""
        return len(self.seeds)

    @property
    def steps(self) -> int:
        """Steps done by each seed (``n_seeds * steps`` environment steps in all)."""
        return self.loop.steps

    @property
    def episodes(self) -> list[EpisodeRows]:
        """Per seed, the episode rows (:data:`lcpo.online.loop.EPISODE_COLUMNS` + context means)."""
        return self.loop.episodes

    def learn(self, total_steps: int, callback: Callable | None = None, threads: int | None = 1) -> "Population":
        """Run every seed ``total_steps`` more steps; returns ``self``.

        Args:
            total_steps: steps per seed (>= 0).
            callback: optional ``(k, step, diagnostics)`` after each update of seed index ``k``.
            threads: torch/BLAS threads while learning (:func:`lcpo.online.threads.limit_threads`).

        Raises:
            ValueError: a negative or non-integer ``total_steps``, or as :meth:`PopulationLoop.run` (e.g. a
                non-finite observation or reward, naming the seed and step).
            RuntimeError: the population was closed (:meth:`close`).
        """
        from lcpo.online.threads import limit_threads

        if isinstance(total_steps, bool) or not float(total_steps).is_integer() or total_steps < 0:
            raise ValueError(f"total_steps must be a non-negative integer, got {total_steps!r}")
        if getattr(self, "_closed", False):
            raise RuntimeError("this Population is closed (its vector env is shut): make a new one to learn more")
        self.loop.on_update = callback
        with limit_threads(threads):
            self.loop.run(self.loop.steps + int(total_steps))
        return self

    def lifelong_return(self, warmup_steps: int = 0) -> list[float]:
        """Per seed, the lifelong return (:func:`lcpo.persistence.runlog.lifelong_return`; NaN before any
        episode ends after the warm-up)."""
        from lcpo.persistence.runlog import lifelong_return

        return [lifelong_return(rows, warmup_steps) for rows in self.loop.episodes]

    def seed_state(self, k: int) -> dict:
        """Seed index ``k`` as a solo run's checkpoint holds it: ``{"agent": ..., "loop": ...}`` (the single
        agent's ``state_dict`` and ``OnlineLoop.state_dict`` formats)."""
        return {"agent": self.agents.seed_state_dict(k), "loop": self.loop.seed_states()[k]}

    def state_dict(self) -> dict:
        """Every seed's :meth:`seed_state` (``{"seeds": [...]}``)."""
        loops = self.loop.seed_states()
        return {"seeds": [{"agent": self.agents.seed_state_dict(k), "loop": loops[k]} for k in range(self.n_seeds)]}

    def load_seed_states(self, states: Sequence[dict], episodes: Sequence[EpisodeRows | None] | None = None) -> None:
        """Restore one ``{"agent", "loop"}`` per seed (from :meth:`seed_state` or a solo run's checkpoint).

        Args:
            states: one ``{"agent", "loop"}`` per seed.
            episodes: per seed, the episode rows of a loop state saved without them (a run folder's checkpoint:
                see :meth:`PopulationLoop.load_seed_states`), else None.

        Raises:
            ValueError: as :meth:`PopulationLoop.load_seed_states`.
        """
        for k, s in enumerate(states):
            self.agents.load_seed_state_dict(k, s["agent"])
        self.loop.load_seed_states([s["loop"] for s in states], episodes)

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output."""
        self.load_seed_states(state["seeds"])

    def hyperparameters(self, k: int) -> dict:
        """Seed ``k``'s resolved hyperparameters (the ``hyperparameters`` entry of its config.json)."""
        members = getattr(self.agents, "members", None)
        hp = members[k].hp if members is not None else self.agents.hp
        return dataclasses.asdict(hp)

    def seed_env(self, k: int, config=None):
        """An environment object for seed ``k``'s metadata (context spec, trace, run metrics): its
        sub-environment, or (native vector environment) one made from ``config`` for its description, made once
        per distinct environment description (seeds that differ only in seed share it; a 20M-step trace is
        checked and copied once, not once per seed and call) and closed by :meth:`close_seed_envs`.

        Raises:
            ValueError: a native vector environment and no ``config``."""
        if self.seed_envs is not None:
            return self.seed_envs[k]
        if self.template is not None:
            return self.template
        import json

        from lcpo.online.run import make_run_env

        if config is None:
            raise ValueError("a native vector environment has no sub-environment objects; pass the seed's config")
        key = (config.env, config.trace, config.trace_length,
               json.dumps(config.env_kwargs or {}, sort_keys=True, default=repr))
        if key not in self._described:
            self._described[key] = make_run_env(config)
        return self._described[key]

    def close_seed_envs(self) -> None:
        """Close the environments :meth:`seed_env` made for descriptions (the vector env is closed apart)."""
        described, self._described = self._described, {}
        for env in described.values():
            env.close()

    def close(self) -> None:
        """Close the population's vector env (an ``AsyncVectorEnv``'s worker processes are reaped) and the
        environments made for descriptions. Idempotent; the population cannot learn afterwards.

        Example:
            >>> from lcpo.online.population import Population
            >>> with Population("a2c", seeds=[0, 1], trace="wind-3", trace_length=600, hidden=[16]) as pop:
            ...     pop.learn(200).steps
            200
        """
        self.close_seed_envs()
        if not getattr(self, "_closed", False):
            self._closed = True
            self.stream.close()

    def __enter__(self) -> "Population":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _per_seed(value, n: int, what: str, kind) -> list:
    if isinstance(value, kind):
        return [value] * n
    value = list(value)
    if len(value) != n:
        raise ValueError(f"{what}: need one entry per seed ({n}), got {len(value)}")
    return value


# -- runs with folders: execute_population ------------------------------------------------------------------


def population_folder(out_dirs: Sequence[str | Path], agent: str) -> Path:
    """Default folder of a population's own checkpoint: ``<common parent of the seed folders>/.population-
    <agent>-<8 hex digits>``, the digits a hash of the seed folders' paths relative to that parent (the same seed
    folders, the same population folder, also after the parent is moved or copied).

    Raises:
        ValueError: for no folders.
    """
    if not out_dirs:
        raise ValueError("population_folder needs at least one seed folder")
    resolved = [Path(p).resolve() for p in out_dirs]
    parent = Path(os.path.commonpath([p.parent for p in resolved]))
    names = "\n".join(sorted(str(p.relative_to(parent)) for p in resolved))
    digest = hashlib.sha256(names.encode()).hexdigest()[:8]
    return parent / f".population-{agent}-{digest}"


def _member_key(out: Path, pop_dir: Path) -> str:
    """How the population checkpoint names a seed folder: its path relative to the population folder's parent."""
    return os.path.relpath(Path(out).resolve(), Path(pop_dir).resolve().parent)


def _check_members(configs: Sequence, out_dirs: Sequence) -> None:
    if not configs:
        raise ValueError("execute_population needs at least one run configuration")
    if len(configs) != len(out_dirs):
        raise ValueError(f"execute_population: {len(configs)} configurations but {len(out_dirs)} run folders")
    resolved = [str(Path(p).resolve()) for p in out_dirs]
    if len(set(resolved)) != len(resolved):
        raise ValueError(f"execute_population: run folders repeat: {[str(p) for p in out_dirs]}")
    seeds = [c.seed for c in configs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"execute_population: seeds repeat: {seeds} (each seed runs once)")
    first = configs[0].to_dict()
    for c in configs[1:]:
        d = c.to_dict()
        for key in SHARED_KEYS:
            if d[key] != first[key]:
                raise ValueError(f"runs of one population must share {key}: seed {configs[0].seed} has "
                                 f"{json.dumps(first[key])}, seed {c.seed} has {json.dumps(d[key])}")


def execute_population(configs: Sequence, out_dirs: Sequence[str | Path], *, resume: bool = True,
                       progress: bool = False, threads: int | None = 1, stop_at: int | None = None,
                       on_progress: Callable[[int, float], None] | None = None,
                       on_message: Callable[[str], None] | None = None, batch: bool = True, device: str = "cpu",
                       population_dir: str | Path | None = None,
                       should_stop: Callable[[], bool] | None = None) -> list[dict]:
    """Run N runs that differ only in seed (and per-seed settings) as one population; one summary per run.

    The entry point for grouping seeds (the CLI's ``lcpo run --seed 0-15``, and for a sweep: pass the
    :class:`lcpo.online.run.RunConfig` s of one cell that differ only in ``seed``, with their run folders). Each
    folder ends as :func:`lcpo.online.run.execute` leaves it (config.json, episodes.csv, diagnostics.csv,
    probes/, tb/, checkpoint/, summary.json), and each summary has the keys of ``execute``'s plus
    ``population``: ``{"size", "seeds", "steps_per_s" (environment steps of all seeds per second of the online
    phase), "batch_native", "device"}``. Runs already finished with the same configuration are returned as they
    are; the others resume per the rules of :func:`lcpo.online.run.resume_plan`, from the later of the
    population's checkpoint and their folder's own.

    Args:
        configs: the runs' configurations (share :data:`SHARED_KEYS`; distinct seeds).
        out_dirs: one run folder per configuration.
        resume: as for ``execute``.
        progress: a tqdm bar over the environment steps of all seeds (total steps/s).
        threads: torch/BLAS threads (1: one core).
        stop_at: stop (after checkpointing) at this step of every seed, without summaries (tests).
        on_progress: optional ``(steps_done_per_seed, mean recent return over seeds)`` callback.
        on_message: optional callback receiving one-line notes (as ``execute``'s).
        batch: False: run the seeds one at a time with ``execute`` (exactly today's runs).
        device: ``"cpu"`` or a torch device for a batch-native agent's networks (``"cuda"``: measured on an H200,
            docs/benchmarks.md "Populations on a device").
        population_dir: folder of the population's checkpoint (default :func:`population_folder`).
        should_stop: a stop request (a sweep's SIGINT/SIGTERM), asked every
            :data:`lcpo.online.run.STOP_POLL_STEPS` population steps; once True the population checkpoints where it
            stands (when ``checkpoint_every`` is set, as :func:`lcpo.online.run.execute`) and every run returns
            ``{"interrupted_at": step}``.

    Returns:
        The summaries, in the order of ``configs`` (``{"interrupted_at": step}`` for runs stopped by
        ``stop_at``).

    Raises:
        ValueError: configurations that cannot form one population (naming the key), everything ``execute``
            raises, or resumable runs whose checkpoints are at different steps (resume them one by one).
        CheckpointError: a missing, corrupt or mismatched checkpoint file (named).
        RunFolderBusy: another process is writing one of the folders.
    """
    from lcpo.online.run import _make_folder, _remove_failed, execute
    from lcpo.persistence.runlock import RunLock

    configs, out_dirs = list(configs), [Path(p) for p in out_dirs]
    _check_members(configs, out_dirs)
    if not batch:
        return [execute(c, o, resume=resume, progress=progress, threads=threads, stop_at=stop_at,
                        on_progress=on_progress, on_message=on_message) for c, o in zip(configs, out_dirs)]
    pop_dir = Path(population_dir) if population_dir is not None else population_folder(out_dirs, configs[0].agent)
    created: list[list[Path]] = []
    locks: list[RunLock] = []
    try:
        for folder in [*out_dirs, pop_dir]:
            made = _make_folder(folder)
            created.append(made)
            lock = RunLock(folder)
            try:
                lock.acquire()
            except BaseException:
                for p in reversed(made):
                    try:
                        p.rmdir()
                    except OSError:
                        break
                created.pop()
                raise
            locks.append(lock)
        return _execute_locked(configs, out_dirs, pop_dir, resume, progress, threads, stop_at, on_progress,
                               on_message, device, should_stop)
    except BaseException:
        if len(locks) == len(out_dirs) + 1:  # the population folder goes first, so that emptied parents can go
            _remove_if_spent(pop_dir)
            locks.pop().release()
        for folder, made in reversed(list(zip(out_dirs, created))):  # the last made first: parents last
            if made and not _holds_generation(folder):  # else the population's pointer may name it: resumable
                _remove_failed(folder, made)
        raise
    finally:
        if len(locks) == len(out_dirs) + 1:
            _remove_if_spent(pop_dir)  # only while holding its lock
        for lock in reversed(locks):
            lock.release()


def _holds_generation(folder: Path) -> bool:
    """Whether run folder ``folder`` holds a checkpoint generation (pointed to or not yet; not a temporary folder
    of an unfinished write)."""
    try:
        return any(p.is_dir() and p.name.startswith("step-") for p in (folder / "checkpoint").iterdir())
    except OSError:
        return False


def _remove_if_spent(pop_dir: Path) -> None:
    """Remove the population folder once it holds nothing but its lock file (the run finished, or failed
    before its first checkpoint); called by the lock's holder only."""
    from lcpo.persistence.runlock import LOCK_NAME

    try:
        if pop_dir.is_dir() and {p.name for p in pop_dir.iterdir()} <= {LOCK_NAME}:
            (pop_dir / LOCK_NAME).unlink(missing_ok=True)
            pop_dir.rmdir()
    except OSError:
        pass


def _probe_view(agents, k: int):
    """What :class:`lcpo.experiments.drift.PolicyProbe` and the forgetting snapshots
    (:class:`lcpo.experiments.snapshots.SnapshotRecorder`) read of seed ``k`` (``actor``, ``rollout``): the
    generic path's single agent, or a batch-native population's per-seed modules and rollout views."""
    members = getattr(agents, "members", None)
    if members is not None:
        return members[k]
    from types import SimpleNamespace

    actors, rollouts = getattr(agents, "actors", None), getattr(agents, "rollouts", None)
    if actors is None or rollouts is None:
        return SimpleNamespace()  # nothing to probe (PolicyProbe.supports is False)
    return SimpleNamespace(actor=actors.members[k], rollout=rollouts.seed(k))


#: The population's commit pointer, in its folder.
POINTER = "population.json"


def read_population_pointer(pop_dir: str | Path) -> dict | None:
    """The population folder's commit pointer ``population.json`` (``{"format", "step", "members": [{"folder",
    "generation", "sha256", "config"}]}``), or None if there is none.

    Raises:
        CheckpointError: a truncated or malformed pointer (naming the file).
    """
    from lcpo.persistence.checkpoint import CheckpointError

    path = Path(pop_dir) / POINTER
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(text.decode("utf-8"))
        if doc.get("format") != 1:
            raise ValueError(f"format {doc.get('format')!r}")
        if not isinstance(doc["step"], int) or isinstance(doc["step"], bool) or doc["step"] < 0:
            raise ValueError(f"step {doc['step']!r}")
        if not isinstance(doc["members"], list):
            raise ValueError(f"members {doc['members']!r}")
        for m in doc["members"]:
            if not (isinstance(m["folder"], str) and isinstance(m["generation"], str)
                    and isinstance(m["sha256"], str) and isinstance(m["config"], dict)):
                raise ValueError(f"member {m!r}")
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"population checkpoint pointer {path} is truncated or corrupt ({exc}); delete it to "
                              "resume each seed from its own folder's checkpoint") from None
    return doc


def _same_run(recorded: Mapping, cfg) -> bool:
    """Whether a recorded configuration (a checkpoint's or a pointer's) is run ``cfg``'s, ``steps`` aside (more
    steps extend a run)."""
    from lcpo.online.run import config_changes

    return not [c for c in config_changes(recorded, cfg.to_dict()) if c[0] != "steps"]


def _start_state(cfg, out: Path, plan, member: dict | None, pop_step: int, pop_dir: Path):
    """``(step, state, source, note)`` seed ``cfg`` starts from: its folder's committed checkpoint, or the
    generation the population pointer names for it (``member``, at ``pop_step``), whichever is later; or
    ``(0, None, None, note)``. ``note`` is a one-line message when the pointer is ahead of the folder but its
    generation is gone and the folder's own state is taken (else ""): the seed went on alone since (a solo commit
    collects the population's generation), or the folder holds no run at all (deleted: a fresh start).

    Raises:
        CheckpointError: the pointer in ``pop_dir`` is ahead for this very configuration and its generation is
            gone while the folder holds a run's files but no checkpoint (a run folder copied or restored without
            its ``checkpoint/``): starting it again would silently discard those steps, so no run folder is
            changed and the message says how to go on.
    """
    from lcpo.persistence.checkpoint import CheckpointError, RunCheckpoints

    store = RunCheckpoints(out / "checkpoint")
    best = (0, None, None, "")
    if plan.action in ("resume", "extend"):
        step, state = store.load()
        if step != plan.step or not _same_run(state.get("config", {}), cfg):
            raise CheckpointError(f"checkpoint in {store.folder} does not match its pointer {store.pointer}")
        best = (step, state, "folder", "")
    verdict = pointer_verdict(cfg, out, best[0], member, pop_step)
    if verdict == "own":
        return best
    if verdict == "population":
        return (pop_step, store.load_generation(pop_step, member["generation"], member["sha256"]), "population", "")
    if verdict == "too_few_steps":  # as execute's rule for a folder's own checkpoint past the requested steps
        raise ValueError(f"cannot resume {out}: its population checkpoint {pop_dir / POINTER} is at step "
                         f"{pop_step:,}, past the requested {cfg.steps:,} steps; pass --steps {pop_step:,} or more")
    gone = f"the population checkpoint {pop_dir / POINTER} (step {pop_step:,}) names {member['generation']}, gone"
    if verdict == "went_on_alone":  # the folder's own, later history: the seed went on alone from an earlier step
        return (*best[:3], f"{out}: {gone} from its folder (the seed went on alone since); resuming from the "
                           f"folder's own checkpoint at step {best[0]:,}")
    if verdict == "deleted":  # no run here: a fresh start
        return (*best[:3], f"{out}: {gone}, and the folder holds no run; starting afresh from step 0")
    raise CheckpointError(f"{gone} from {store.folder}, while {out} holds a run's files but no checkpoint: restore "
                          f"its checkpoint folder, or delete {pop_dir} to start the run afresh")


def refuse_unresumed(cfg, out: Path, member: dict | None, pop_step: int, pop_dir: Path | None) -> None:
    """For a run started without ``resume``: refuse folder ``out`` when a population pointer names a generation
    of this configuration in it (its first population checkpoint was committed, its own pointer not yet written:
    :func:`lcpo.online.run.resume_plan` sees no run there), as ``resume_plan`` refuses a folder holding a run;
    a fresh start would delete those steps.

    Raises:
        ValueError: naming the folder, the pointer and its step.
    """
    if (member is not None and _same_run(member["config"], cfg)
            and (Path(out) / "checkpoint" / member["generation"]).is_dir()):  # whatever the steps asked for
        raise ValueError(f"{out} already holds a run (the population checkpoint {Path(pop_dir) / POINTER} names "
                         f"its generation at step {pop_step:,}); pass --resume to continue or extend it, or choose "
                         "another --out")


def pointer_verdict(cfg, out: Path, own_step: int, member: dict | None, pop_step: int) -> str:
    """What a population pointer at ``pop_step`` naming ``member`` (or None) means for seed folder ``out``, whose
    own committed checkpoint is at ``own_step`` (0: none), run as ``cfg`` (a :class:`lcpo.online.run.RunConfig`);
    one decision for the resume (:func:`_start_state`) and the dry run
    (:func:`lcpo.experiments.runner.resume_preview`). Reads only which files exist.

    Returns:
        ``"own"``: the pointer does not apply (no member, not ahead, another configuration); ``"too_few_steps"``:
        it is past ``cfg.steps`` (refused); ``"population"``: its generation is there (start from it);
        ``"went_on_alone"``: gone, and the folder has its own earlier checkpoint (start from that, with a note);
        ``"deleted"``: gone, and the folder holds no run (start afresh, with a note); ``"lost"``: gone while the
        folder holds a run's files but no checkpoint (refused: lost files).
    """
    from lcpo.online.run import _RUN_OUTPUTS

    if member is None or not pop_step > own_step:
        return "own"
    if not _same_run(member["config"], cfg):
        return "own"  # another configuration's pointer: not this run's history
    if pop_step > cfg.steps:
        return "too_few_steps"
    if (Path(out) / "checkpoint" / member["generation"]).is_dir():
        return "population"
    if own_step:
        return "went_on_alone"
    return "lost" if any((Path(out) / name).exists() for name in _RUN_OUTPUTS) else "deleted"


def pointer_for_folder(cfg, out: str | Path, say: Callable[[str], None] | None = None
                       ) -> tuple[dict | None, int, Path | None]:
    """The population pointer that a run of ``cfg`` in folder ``out`` alone (``lcpo resume FOLDER``, ``--no-batch``,
    a sweep's one-by-one fallback) must weigh against its folder's own checkpoint: among the default population
    folders beside it (``out.parent/.population-*``, :func:`population_folder` of seed folders that share a
    parent), the pointers that name ``out`` under ``cfg``'s configuration (all but ``steps`` equal), the one at
    the highest step. A population killed after its commit but before it pointed every seed folder to its new
    generation leaves that generation reachable only from here. Reads only the pointer files; a population with a
    ``population_dir`` elsewhere is not found.

    Args:
        cfg: the run's :class:`lcpo.online.run.RunConfig`.
        out: the run folder.
        say: receives one line per unreadable pointer it skips (another population's, named with the folder that
            holds the seed folders, so the seeds beside it give the same line; default: ignored).

    Returns:
        ``(member, step, pop_dir)``: the pointer's entry for ``out``, its step and its folder, for
        :func:`pointer_verdict`; ``(None, 0, None)`` where none names the folder.
    """
    from lcpo.persistence.checkpoint import CheckpointError

    out = Path(out)
    best: tuple[dict | None, int, Path | None] = (None, 0, None)
    if not out.parent.is_dir():
        return best
    for path in sorted(out.parent.glob(f".population-*/{POINTER}")):
        pop_dir = path.parent
        try:
            pointer = read_population_pointer(pop_dir)
        except CheckpointError as exc:
            if say is not None:
                say(f"{out.parent}: skipping an unreadable population checkpoint ({exc})")
            continue
        if pointer is None:
            continue
        key = _member_key(out, pop_dir)
        for m in pointer["members"]:
            if (m["folder"] == key and pointer["step"] > best[1]
                    and _same_run(m["config"], cfg)):
                best = (m, int(pointer["step"]), pop_dir)
    return best


def _wall_shares(states: list[dict]) -> list[float]:
    """Each resumed seed's ``wall_share_s`` so far (float seconds): its checkpoint's record, or for a checkpoint
    written before that record existed, ``wall_time_s / n`` when the ``n`` states record one shared wall time
    (they were one population's), else the state's own ``wall_time_s`` (solo checkpoints joined here)."""
    walls = [float(s["wall_time_s"]) for s in states]
    shared = len(set(walls)) == 1
    return [float(s["wall_share_s"]) if "wall_share_s" in s else (w / len(states) if shared else w)
            for s, w in zip(states, walls)]


def _execute_locked(*args, **kwargs) -> list[dict]:
    """:func:`_execute_population_locked`, then the population's vector env closed whatever happened (an
    AsyncVectorEnv's worker processes reaped)."""
    made: list = []
    try:
        return _execute_population_locked(*args, made=made, **kwargs)
    finally:
        for pop in made:
            # its loop's callbacks are closures over ``pop`` (on_update, on_episode below): a reference cycle that
            # kept every seed's episode rows (about 420 MB resident a seed at the end of a 20M-step windy
            # InvertedPendulum run) alive until the interpreter's next full collection, which a sweep worker
            # running its next population may not reach for hours (found in the MuJoCo study's workers, 2026-12-05)
            pop.loop.on_update = pop.loop.on_episode = None
            pop.close()


def _execute_population_locked(configs, out_dirs, pop_dir, resume, progress, threads, stop_at, on_progress,
                               on_message, device, should_stop=None, *, made: list) -> list[dict]:
    from lcpo.online.run import (STOP_POLL_STEPS, _context_names, _env_metrics, _kept_sizes_note,
                                 _recorded_run_length_fields, _remove_outputs, _trace_info, _write_config,
                                 resume_plan, run_summary, train_offline)
    from lcpo.online.threads import limit_threads
    from lcpo.persistence.checkpoint import RunCheckpoints, atomic_write_json
    from lcpo.persistence.runlog import RunLog

    say = on_message or (lambda msg: None)
    from lcpo.persistence.provenance import code_provenance

    code = code_provenance()  # the code this invocation runs on (summary.json "code", as execute's)
    plans = [resume_plan(c, o, resume) for c, o in zip(configs, out_dirs)]  # a refusal stops all, changes nothing
    results: list[dict | None] = [None] * len(configs)
    for i, p in enumerate(plans):
        if p.action == "done":
            say(p.message)
            results[i] = p.summary
    active = [i for i, p in enumerate(plans) if p.action != "done"]
    if not active:
        return results
    from lcpo.persistence.checkpoint import CheckpointError

    try:
        pointer = read_population_pointer(pop_dir)
    except CheckpointError:  # a fresh start replaces an unreadable pointer; a resume needs it
        if resume:
            raise
        pointer = None
    members = {m["folder"]: m for m in pointer["members"]} if pointer else {}
    pop_step = int(pointer["step"]) if pointer else 0
    if not resume:  # a generation a pointer names is a run, as resume_plan refuses one (this grouping's or not)
        for i in active:
            refuse_unresumed(configs[i], out_dirs[i], members.get(_member_key(out_dirs[i], pop_dir)), pop_step,
                             pop_dir)
            refuse_unresumed(configs[i], out_dirs[i], *pointer_for_folder(configs[i], out_dirs[i]))
        members, pop_step = {}, 0
    starts = [_start_state(configs[i], out_dirs[i], plans[i], members.get(_member_key(out_dirs[i], pop_dir)),
                           pop_step, pop_dir) for i in active]
    steps0 = sorted({s for s, _, _, _ in starts})
    if len(steps0) > 1:
        at = ", ".join(f"{out_dirs[i]} at step {s:,}" for i, (s, _, _, _) in zip(active, starts))
        raise ValueError(f"cannot continue these runs as one population: their checkpoints are at different steps "
                         f"({at}); resume them one by one (`lcpo resume FOLDER`, or --no-batch)")
    cfgs = [configs[i] for i in active]
    outs = [out_dirs[i] for i in active]
    # the agent's overrides as execute builds them: the run-length defaults (LCPO's reservoir 1% of the run,
    # replay of every sample); a resumed or extended population keeps the sizes its checkpoint was built with
    length = int(starts[0][1]["config"].get("steps", cfgs[0].steps)) if steps0[0] > 0 else cfgs[0].steps
    overrides = cfgs[0].agent_overrides(length)
    kept = ""
    if steps0[0] > 0:
        overrides.update(_recorded_run_length_fields(outs[0], cfgs[0]))
        kept = _kept_sizes_note(cfgs[0], overrides)
    pop = Population._from_configs(cfgs, device=device, overrides=overrides)
    made.append(pop)  # closed by _execute_locked
    if cfgs[0].checkpoint_every and pop.seed_envs is not None:  # as execute: refused before the first step
        from lcpo.envs.preflight import check_checkpointable

        for j, cfg in enumerate(cfgs):  # the sub-environments whose wrappers a checkpoint saves
            check_checkpointable(pop.seed_envs[j], cfg.env)
    elif cfgs[0].checkpoint_every:  # a native or a user's vector env: it, or its workers, answer for the state
        pop.stream.check_checkpointable(cfgs[0].env)
    n = len(cfgs)
    logs, probes, snaps = [], [], []
    from lcpo.experiments.snapshots import SnapshotRecorder

    for j, cfg in enumerate(cfgs):  # frozen acting-network snapshots per seed (forgetting), as execute's
        snaps.append(SnapshotRecorder.create(outs[j], _probe_view(pop.agents, j), cfg.steps))
    for j, cfg in enumerate(cfgs):
        env_j = pop.seed_env(j, cfg)
        logs.append(RunLog(outs[j], _context_names(env_j), every=cfg.diagnostics_every, tensorboard=False))
        probe = None
        if cfg.probe_every:
            from lcpo.experiments.drift import PolicyProbe

            probe = PolicyProbe(outs[j], cfg.probe_every, seed=cfg.seed)
        probes.append(probe)
    wall_before = offline_before = 0.0
    share_before = [0.0] * n  # each seed's share of the wall time of the processes it ran in (wall_share_s)
    resumed_from: list[list[int]] = [[] for _ in range(n)]
    step0 = steps0[0]
    if step0 > 0:
        states = [s for _, s, _, _ in starts]
        # each seed's rows come back from its episodes.csv, up to its checkpoint's marker (older ones hold them)
        pop.load_seed_states(states, [logs[j].restore_episodes(s["log"]) for j, s in enumerate(states)])
        wall_before = max(float(s["wall_time_s"]) for s in states)
        offline_before = max(float(s.get("offline_train_s", 0.0)) for s in states)
        share_before = _wall_shares(states)
        for j, s in enumerate(states):
            resumed_from[j] = [int(k) for k in s.get("resumed_from", [])] + [step0]
            if probes[j] is not None:
                probes[j].resume_from(step0)
            if snaps[j] is not None:
                snaps[j].resume_from(step0)
            logs[j].load_state_dict(s["log"])
    # every check passed: from here on the folders are written
    if step0 == 0:  # a fresh start: a pointer left from earlier runs of these folders no longer applies
        (pop_dir / POINTER).unlink(missing_ok=True)
    for j, (cfg, out) in enumerate(zip(cfgs, outs)):
        if step0 == 0:
            _remove_outputs(out)
        (out / "summary.json").unlink(missing_ok=True)
        if cfg.tensorboard:
            logs[j].open_tensorboard(purge_step=None if step0 == 0 else step0 + 1)
        _write_config(out, cfg, pop.hyperparameters(j), pop.seed_env(j, cfg))
        if step0 > 0:
            logs[j].write(pop.episodes[j])  # episodes.csv / diagnostics.csv as of the checkpoint (cut at its marker)
        if starts[j][3]:
            say(starts[j][3])
        elif starts[j][2] == "population":
            say(f"{out}: resuming from the population checkpoint at step {step0:,}")
        elif plans[active[j]].message:
            say(plans[active[j]].message)
        if kept:
            say(f"{out}: {kept}")

    def on_update(j, step, diag):
        logs[j].on_update(step, diag)
        if snaps[j] is not None:
            snaps[j].on_update(step)
        if probes[j] is not None:
            probes[j].on_update(step, _probe_view(pop.agents, j))

    recent: list[list[float]] = [[] for _ in range(n)]

    def on_episode(j, row):
        logs[j].on_episode(row)
        recent[j].append(row[2])
        if len(recent[j]) > 20:
            recent[j].pop(0)

    pop.loop.on_update, pop.loop.on_episode = on_update, on_episode
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n * cfgs[0].steps, initial=n * pop.steps, unit="step", unit_scale=True,
                   dynamic_ncols=True, desc=f"{cfgs[0].agent} x{n} {cfgs[0].env.split('/')[-1]}")
    start = time.perf_counter()
    target = cfgs[0].steps if stop_at is None else min(cfgs[0].steps, stop_at)
    every = cfgs[0].checkpoint_every
    # prescient members' offline training, before the first step, one after the other: a stop request pauses it
    # (no checkpoint; the resume trains afresh, bit for bit the same); its time is kept apart from the online steps'
    with limit_threads(threads):
        trained, train_s = train_offline(getattr(pop.agents, "members", [pop.agents]), should_stop)
    offline_s = offline_before + train_s
    if not trained:
        if bar is not None:
            bar.close()
        for log in logs:
            log.close()
        paused = [(c.seed, a) for c, a in zip(cfgs, getattr(pop.agents, "members", [pop.agents]))
                  if getattr(a, "train_steps_done", 0) and not a.trained]
        where = f" of seed {paused[0][0]} at its step {paused[0][1].train_steps_done:,}" if paused else ""
        say(f"{cfgs[0].agent}: stopped during the offline training{where} (before the first online step; no "
            "checkpoint: the resume trains afresh, to the same result)")
        for i in active:
            results[i] = {"interrupted_at": pop.steps}
        return results
    stores = [RunCheckpoints(out / "checkpoint") for out in outs]
    # each seed's checkpoint names its population, so that a seed that goes on alone still records it
    membership = {"size": n, "seeds": [c.seed for c in cfgs], "batch_native": bool(pop.batch_native),
                  "device": pop.device}

    def checkpoint():
        """One atomic commit of the whole population, with no second copy of any state: (1) every seed folder
        gets its new episode rows appended to its ``episodes.csv`` and its new generation (which records where that
        file ends), not yet pointed to; (2) ``population.json`` names them all (the commit point); (3) every seed
        folder's ``latest.json`` is pointed to its generation."""
        wall = wall_before + time.perf_counter() - start
        for j, rec in enumerate(snaps):
            if rec is not None:
                if pop.steps == cfgs[j].steps:
                    rec.take(pop.steps)  # the final policy
                rec.write()  # before the commit: never behind the committed checkpoint
        loops = pop.loop.seed_states(episodes=False)
        gens = []
        for j, cfg in enumerate(cfgs):  # one seed's state in memory at a time
            logs[j].write(pop.episodes[j])  # before its generation, which records where the file ends
            state = {"config": cfg.to_dict(), "agent": pop.agents.seed_state_dict(j), "loop": loops[j],
                     "log": logs[j].state_dict(), "wall_time_s": wall,
                     "wall_share_s": share_before[j] + (wall - wall_before) / n, "resumed_from": resumed_from[j],
                     "population": membership, **({"offline_train_s": offline_s} if offline_s else {})}
            gens.append(stores[j].write_generation(pop.steps, state))
            del state
        atomic_write_json(pop_dir / POINTER, {
            "format": 1, "step": pop.steps,
            "members": [{"folder": _member_key(o, pop_dir), "generation": name, "sha256": sha,
                         "config": cfg.to_dict()} for o, cfg, (name, sha) in zip(outs, cfgs, gens)]})
        for j, (name, sha) in enumerate(gens):
            stores[j].point_to(pop.steps, name, sha, cfgs[j].to_dict())

    chunk = 1000 if (bar is not None or on_progress is not None) else None
    if should_stop is not None:
        chunk = min(chunk or STOP_POLL_STEPS, STOP_POLL_STEPS)
    try:
        with limit_threads(threads):
            while pop.steps < target:
                if should_stop is not None and should_stop():
                    if every and pop.steps > step0 and pop.steps % every:
                        checkpoint()  # where it stands: the resume continues from here
                    break
                nxt = target if not every else min(target, (pop.steps // every + 1) * every)
                if chunk:
                    nxt = min(nxt, pop.steps + chunk)
                before = pop.steps
                pop.loop.run(nxt)
                if bar is not None:
                    bar.update(n * (pop.steps - before))
                    means = [np.mean(r) for r in recent if r]
                    if means:
                        bar.set_postfix(ret=f"{np.mean(means):.1f}", refresh=False)
                if on_progress is not None:
                    means = [np.mean(r) for r in recent if r]
                    on_progress(pop.steps, float(np.mean(means)) if means else math.nan)
                if every and (pop.steps % every == 0 or pop.steps == target):
                    checkpoint()
    finally:
        if bar is not None:
            bar.close()
        for log in logs:
            log.close()
    if pop.steps < cfgs[0].steps:
        for j, i in enumerate(active):
            results[i] = {"interrupted_at": pop.steps}
        return results
    wall = wall_before + time.perf_counter() - start
    if not every:
        for rec in snaps:
            if rec is not None:
                rec.take(pop.steps)
                rec.write()
    online = wall - offline_s  # the population's online phase (prescient members' offline training excluded)
    population = {**membership, "steps_per_s": n * pop.steps / online if online > 0 else None}
    for j, (cfg, out) in enumerate(zip(cfgs, outs)):
        log = logs[j]
        log.write(pop.episodes[j], final=True, last_step=pop.steps)
        env_j = pop.seed_env(j, cfg)
        summary = run_summary(cfg, pop.episodes[j], log, steps=pop.steps, wall=wall,
                              wall_share=share_before[j] + (wall - wall_before) / n, resumed_from=resumed_from[j],
                              env_metrics=_env_metrics(env_j) if pop.seed_envs is not None else {},
                              trace=_trace_info(env_j), code=code, hyperparameters=pop.hyperparameters(j),
                              offline_train_s=offline_s, population=population)
        atomic_write_json(out / "summary.json", summary)
        results[active[j]] = json.loads((out / "summary.json").read_text())
    # every seed folder now holds its final checkpoint and summary: the population's pointer has done its work
    (pop_dir / POINTER).unlink(missing_ok=True)
    return results
