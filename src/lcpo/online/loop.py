"""The online loop: one stream of experience, each interaction seen once (ARCHITECTURE.md, "Online loop").

The loop steps the environment with the agent's action, hands every
:class:`Transition` to the agent, and decides when to reset through a *reset condition*:

* :class:`ResetOnEnd` (default): reset when the environment ends the episode (terminated or truncated).
* :class:`ResetAfterSteps` ``(n)``: also reset after ``n`` steps; the ``n``-th step is marked ``truncated``.
* :class:`NeverReset`: a continuing task; one ``reset()`` at the start, then only a real termination resets.
  The environment's own time-limit truncation is ignored (and cleared from the transition), since the stream
  goes on; make the environment itself continuing where it has an option for it.
* any callable ``(agent, transition, env) -> bool``: reset when it returns True.

A reset caused by a condition is a truncation, never a termination. The condition sees the real transition,
and ``next_obs`` is always the real observation reached, never the reset observation.

Observations are copied as they cross the boundary (``reset`` and ``step``): an environment may return the
same array every step, mutated in place, and the :class:`Transition` an agent observes still holds the two
distinct observations ``obs_t`` and ``next_obs_t``, owned by the loop.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from lcpo.numerics.finite import F32_MAX, reward_error
from lcpo.online.episodes import EpisodeRows

__all__ = ["Transition", "ResetOnEnd", "ResetAfterSteps", "NeverReset", "parse_reset", "OnlineLoop",
           "EPISODE_COLUMNS", "SEGMENT_STEPS", "restored_rows"]

#: Steps per recorded row of a continuing run (:class:`NeverReset`): its lifelong return is the mean return of
#: these windows.
SEGMENT_STEPS = 200


class Transition(NamedTuple):
    """One interaction.

    Attributes:
        obs: ``(obs_dim,)`` observation the action was chosen from.
        action: the action taken (``(D,)`` int64 bins, or an int for Discrete spaces).
        reward: float reward.
        next_obs: ``(obs_dim,)`` the real observation reached, also on the last step of an episode.
        terminated: True if ``next_obs`` is a terminal state (no bootstrapping past it).
        truncated: True if the episode was cut after this step (time limit or reset condition).
        info: the environment's info dict for this step (context, time-dependent discount, forced actions).
    """

    obs: np.ndarray
    action: Any
    reward: float
    next_obs: np.ndarray
    terminated: bool
    truncated: bool
    info: dict | None = None


class ResetOnEnd:
    """Reset when the environment says the episode ended (the default)."""

    spec = "end"

    def __call__(self, agent, transition: Transition, env) -> bool:
        return False


class ResetAfterSteps:
    """Reset after every ``n`` steps of an episode (and whenever the environment ends it).

    Raises:
        ValueError: if ``n < 1``.
    """

    def __init__(self, n: int):
        if int(n) < 1:
            raise ValueError(f"ResetAfterSteps needs n >= 1, got {n}")
        self.n = int(n)
        self.spec = f"every:{self.n}"
        self._count = 0

    def __call__(self, agent, transition: Transition, env) -> bool:
        self._count += 1
        if self._count >= self.n:
            self._count = 0
            return True
        return False

    def on_reset(self) -> None:
        """Called by the loop after every reset (whatever caused it)."""
        self._count = 0


class NeverReset:
    """Continuing task: never reset, except after a real termination."""

    spec = "never"

    def __call__(self, agent, transition: Transition, env) -> bool:
        return False


def parse_reset(spec: str | Callable | None):
    """Reset condition from a CLI string ``end | every:N | never``, a callable, or None (= ``end``).

    Raises:
        ValueError: for a malformed string (the message quotes it).
    """
    if spec is None or spec == "end":
        return ResetOnEnd()
    if callable(spec):
        return spec
    if spec == "never":
        return NeverReset()
    if isinstance(spec, str) and spec.startswith("every:"):
        try:
            return ResetAfterSteps(int(spec.split(":", 1)[1]))
        except ValueError as e:
            raise ValueError(f"bad reset condition {spec!r}: {e}") from None
    raise ValueError(f"bad reset condition {spec!r}; use 'end', 'every:N' or 'never'")


#: Columns of the per-episode record: episode index, global step at the episode's end, return, length, then
#: the mean of each context axis over the episode.
EPISODE_COLUMNS = ("episode", "step", "return", "length")


def _check_obs(obs: np.ndarray, where: str) -> None:
    if not np.isfinite(obs).all():
        raise ValueError(f"non-finite observation {np.asarray(obs).tolist()} {where}")


def _own(obs):
    """A copy of an observation array the environment returned (it may reuse one buffer, mutated in place by
    every ``step``, so a kept reference would change under the agent: ``obs_t`` would become ``next_obs_t``).
    Scalars pass through."""
    return obs.copy() if isinstance(obs, np.ndarray) else obs


def restored_rows(state: dict, episodes: EpisodeRows | None = None, what: str = "the loop state") -> EpisodeRows:
    """The episode rows a loop state resumes with: its own ``"episodes"``, or ``episodes`` given beside a state
    saved without them (``"episode_count"``), checked against that count.

    Raises:
        ValueError: neither is there, or ``episodes`` has another number of rows than the state counted (naming
            both counts and ``what``).
    """
    if "episodes" in state:
        return EpisodeRows(state["episodes"] if isinstance(state["episodes"], np.ndarray)
                           else [tuple(r) for r in state["episodes"]])
    if episodes is None:
        raise ValueError(f"{what} holds no episode rows (saved with episodes=False): pass them as episodes=")
    if len(episodes) != int(state["episode_count"]):
        raise ValueError(f"{what} counted {int(state['episode_count']):,} episode rows, but {len(episodes):,} were "
                         "given")
    return episodes


class OnlineLoop:
    """Runs an agent online on an environment and records per-episode metrics.

    Args:
        env: a Gymnasium environment (``lcpo`` environments can be checkpointed through
            ``env.unwrapped.get_state()/set_state()``).
        agent: anything with ``act(obs)`` and ``observe(transition) -> dict | None``.
        reset_condition: see the module docstring (object, callable or string).
        seed: seed of the first ``env.reset``.
        on_episode: called with each finished episode's row (tuple, :data:`EPISODE_COLUMNS` + context means).
        on_update: called with ``(step, diagnostics dict)`` whenever the agent updated.
        segment_steps: for a continuing task (:class:`NeverReset`), the stream has no episodes; a row is
            recorded every ``segment_steps`` steps instead, holding that segment's return (so the lifelong
            return of a continuing run is the mean return per segment).

    Raises:
        ValueError: on a non-finite observation, or a reward that is non-finite or beyond float32 (naming the
            value and step).
        lcpo.envs.preflight.VectorEnvError: if ``env`` is a Gymnasium vector env (one stream takes one env).
    """

    def __init__(self, env, agent, reset_condition=None, seed: int = 0,
                 on_episode: Callable | None = None, on_update: Callable | None = None,
                 segment_steps: int = SEGMENT_STEPS):
        from lcpo.envs.preflight import refuse_vector_env

        refuse_vector_env(env, "the environment given to the online loop")
        self.env, self.agent = env, agent
        self.reset_condition = parse_reset(reset_condition)
        self.never = isinstance(self.reset_condition, NeverReset)
        self.seed = int(seed)
        if int(segment_steps) < 1:
            raise ValueError(f"segment_steps must be >= 1, got {segment_steps}")
        self.segment_steps = int(segment_steps)
        self.on_episode, self.on_update = on_episode, on_update
        self.steps = 0
        self.episodes = EpisodeRows()
        self.obs = None
        self._ep_return = 0.0
        self._ep_length = 0
        self._ctx_sum = None

    def _reset(self, seed=None) -> None:
        obs, info = self.env.reset(seed=seed)
        obs = _own(obs)
        _check_obs(obs, "returned by reset()")
        self.obs = obs
        self._ep_return, self._ep_length = 0.0, 0
        self._ctx_sum = None
        hook = getattr(self.reset_condition, "on_reset", None)
        if hook is not None:
            hook()

    def run(self, until_step: int) -> None:
        """Step until the global step count reaches ``until_step``."""
        if self.obs is None:
            self._reset(seed=self.seed)
        env, agent, cond = self.env, self.agent, self.reset_condition
        # agents that validate every transition themselves (reward and next_obs finite) spare the loop the check
        check = not getattr(agent, "validates_transitions", False)
        obs = self.obs
        while self.steps < until_step:
            action = agent.act(obs)
            next_obs, reward, terminated, truncated, info = env.step(action)
            next_obs = _own(next_obs)  # kept as the next step's obs: never a reference to an env buffer
            if check:
                if not -F32_MAX <= reward <= F32_MAX:  # NaN, inf, or beyond float32 (lcpo.numerics.finite)
                    raise reward_error(reward, f"at step {self.steps}")
                _check_obs(next_obs, f"at step {self.steps}")
            if self.never:
                truncated = False
            tr = Transition(obs, action, float(reward), next_obs, bool(terminated), bool(truncated), info)
            if not (terminated or truncated) and cond(agent, tr, env):
                tr = tr._replace(truncated=True)
            self.steps += 1
            self._ep_return += tr.reward
            self._ep_length += 1
            ctx = info.get("context") if info else None
            if ctx is not None:
                if self._ctx_sum is None:
                    self._ctx_sum = np.array(ctx, dtype=np.float64)
                else:
                    np.add(self._ctx_sum, ctx, out=self._ctx_sum)
            diag = agent.observe(tr)
            if diag and self.on_update is not None:
                self.on_update(self.steps, diag)
            if tr.terminated or tr.truncated:
                self._record_episode()
                self._reset()
                obs = self.obs
            else:
                obs = next_obs
                self.obs = obs
                if self.never and self._ep_length >= self.segment_steps:
                    self._record_episode()
                    self._ep_return, self._ep_length, self._ctx_sum = 0.0, 0, None

    def _record_episode(self) -> None:
        ctx_mean = () if self._ctx_sum is None else tuple(float(c) for c in self._ctx_sum / self._ep_length)
        row = (len(self.episodes), self.steps, self._ep_return, self._ep_length) + ctx_mean
        self.episodes.append(row)
        if self.on_episode is not None:
            self.on_episode(row)

    def state_dict(self, episodes: bool = True) -> dict:
        """Loop counters, the current observation and partial episode, the environment's state and the state
        of its wrappers (:mod:`lcpo.envs.wrapper_state`: e.g. a ``TimeLimit``'s step counter).

        Args:
            episodes: include the episode rows (``"episodes"``: a float64 ``(n, width)`` array, see
                :class:`lcpo.online.episodes.EpisodeRows`). False records only their number (``"episode_count"``):
                a run folder's checkpoint, whose rows live in its append-only ``episodes.csv``
                (:class:`lcpo.persistence.runlog.RunLog`), so a checkpoint's size does not grow with the run.

        Raises:
            TypeError: the environment has no ``get_state()``, or a wrapper whose state cannot be saved (named).
        """
        from lcpo.envs.wrapper_state import wrappers_state

        get_state = getattr(self.env.unwrapped, "get_state", None)
        if get_state is None:
            raise TypeError(f"environment {self.env} cannot be checkpointed: it has no get_state()")
        wrappers = wrappers_state(self.env)
        return {
            "steps": self.steps, "obs": None if self.obs is None else np.asarray(self.obs).copy(),
            "ep_return": self._ep_return, "ep_length": self._ep_length,
            "ctx_sum": None if self._ctx_sum is None else self._ctx_sum.copy(),
            **({"episodes": np.array(self.episodes)} if episodes else {"episode_count": len(self.episodes)}),
            "reset_count": getattr(self.reset_condition, "_count", 0),
            "env": get_state(),
            "wrappers": wrappers,
        }

    def load_state_dict(self, state: dict, episodes: EpisodeRows | None = None) -> None:
        """Restore :meth:`state_dict` output (resets the environment once, then overwrites its state and its
        wrappers' state; a checkpoint of an older lcpo has no wrapper state, and the wrappers keep the reset's).

        Args:
            state: :meth:`state_dict` output (older checkpoints hold the rows as a list of lists: accepted).
            episodes: the rows, for a state saved with ``episodes=False`` (e.g. read back from ``episodes.csv``
                by :meth:`lcpo.persistence.runlog.RunLog.restore_episodes`).

        Raises:
            ValueError: the environment's wrappers differ from the checkpoint's (see
                :func:`lcpo.envs.wrapper_state.load_wrappers_state`); or the state holds no rows and ``episodes``
                is missing or holds another number of rows than the state counted.
        """
        from lcpo.envs.wrapper_state import check_wrappers_state, load_wrappers_state

        rows = restored_rows(state, episodes)
        if state.get("wrappers") is not None:  # checked before the env is reset or written: a refusal changes nothing
            check_wrappers_state(self.env, state["wrappers"])
        self.env.reset(seed=self.seed)
        self.env.unwrapped.set_state(state["env"])
        if state.get("wrappers") is not None:
            load_wrappers_state(self.env, state["wrappers"])
        self.steps = int(state["steps"])
        self.obs = state["obs"]
        self._ep_return, self._ep_length = float(state["ep_return"]), int(state["ep_length"])
        self._ctx_sum = state["ctx_sum"]
        self.episodes = rows
        if hasattr(self.reset_condition, "_count"):
            self.reset_condition._count = int(state["reset_count"])
