"""``lcpo/ContinuingChain-v0``: a tiny continuing task with a known value function (tests and docs).

The state cycles deterministically ``0 -> 1 -> ... -> n_states - 1 -> 0 -> ...``; the two actions do not
change anything and every step pays ``reward``. The task never terminates. It is truncated only when
``max_episode_steps`` is given (a time limit, not part of the task). Because the future is the same from every
state, the true value under any policy and discount ``gamma < 1`` is ``reward / (1 - gamma)`` at every state
(``1 / (1 - gamma)`` for the default reward of 1), also at the state where a time limit cuts the episode: a
learner that treats that cut as a termination is biased there.

The environment has no exogenous context, so it declares none (``context_spec`` is ``None`` and
:func:`lcpo.envs.get_context_spec` raises for it) and ``info`` carries no ``"context"`` entry.

Example:
    >>> env = ContinuingChainEnv(n_states=3)
    >>> obs, info = env.reset(seed=0)
    >>> obs.tolist(), env.step(1)[:4]
    ([1.0, 0.0, 0.0], (array([0., 1., 0.], dtype=float32), 1.0, False, False))
    >>> env.value_function(0.9).round(6).tolist()
    [10.0, 10.0, 10.0]
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from lcpo.persistence.strict_json import show
from lcpo.envs.arguments import integer, number
from lcpo.envs.task import declare_continuing
from lcpo.envs.termination import never_terminates

__all__ = ["ContinuingChainEnv", "make_continuing_chain"]


class ContinuingChainEnv(gym.Env):
    """Deterministic cycle over ``n_states`` states, constant reward, never terminates.

    Observation: ``Box(0, 1, (n_states,), float32)``, the one-hot encoding of the current state.
    Action: ``Discrete(2)``; both actions have the same effect (the reward and the next state do not depend on it).
    Reward: ``reward`` every step. ``terminated`` is always false; ``truncated`` is true on the
    ``max_episode_steps``-th step of an episode when a limit is given.

    Args:
        n_states: number of states in the cycle (>= 1).
        reward: the reward of every step (finite).
        max_episode_steps: steps per episode before truncation, or ``None`` (default) for a continuing task.
        render_mode: only ``None`` is supported.

    Raises:
        ValueError: on ``n_states < 1``, a non-finite reward, ``max_episode_steps < 1`` or a render mode.
    """

    metadata = {"render_modes": [], "continuing": True}
    #: no terminal states: the declared rule of :mod:`lcpo.envs.termination`
    termination_fn = staticmethod(never_terminates)

    def __init__(self, n_states: int = 5, reward: float = 1.0, max_episode_steps: int | None = None,
                 render_mode: str | None = None) -> None:
        n_states = integer(n_states, "n_states")  # an integral float too, as every env integer; <= int64
        reward = number(reward, "reward")  # finite, named (not float()'s "could not convert string")
        if max_episode_steps is not None and (
                isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, (int, np.integer))
                or max_episode_steps < 1):
            raise ValueError(f"max_episode_steps must be None or an integer >= 1, got {show(max_episode_steps)}")
        if render_mode is not None:
            raise ValueError(f"ContinuingChainEnv does not render; got render_mode={show(render_mode)}")
        self.n_states = int(n_states)
        self.reward = float(reward)
        self.max_episode_steps = None if max_episode_steps is None else int(max_episode_steps)
        declare_continuing(self, self.max_episode_steps is None)  # lcpo.envs.task
        self.render_mode = None
        self.context_spec = None  # no exogenous context
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.n_states,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._state = 0
        self._elapsed = 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.n_states, dtype=np.float32)
        obs[self._state] = 1.0
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode in state 0, or in ``options["state"]``.

        Args:
            seed: seeds ``np_random`` (unused by the dynamics, kept for the Gymnasium contract).
            options: optional ``{"state": int}`` start state in ``[0, n_states)``.

        Returns:
            ``(obs, info)`` with ``info = {"state": int}``.

        Raises:
            ValueError: on a start state outside ``[0, n_states)``.
        """
        super().reset(seed=seed)
        start = 0 if not options or "state" not in options else options["state"]
        if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or not 0 <= start < self.n_states:
            raise ValueError(f"options['state'] must be an integer in [0, {self.n_states}), got {show(start)}")
        self._state = int(start)
        self._elapsed = 0
        return self._obs(), {"state": self._state}

    def step(self, action):
        """Advance the cycle by one state and pay ``reward``.

        Args:
            action: 0 or 1 (no effect).

        Returns:
            ``(obs, reward, terminated=False, truncated, info)`` with ``info = {"state": int}``.

        Raises:
            ValueError: if ``action`` is not in the action space.
        """
        if not self.action_space.contains(action):
            raise ValueError(f"action must be 0 or 1, got {show(action)}")
        self._state = (self._state + 1) % self.n_states
        self._elapsed += 1
        truncated = self.max_episode_steps is not None and self._elapsed >= self.max_episode_steps
        return self._obs(), self.reward, False, bool(truncated), {"state": self._state}

    def value_function(self, gamma: float) -> np.ndarray:
        """True state values ``reward / (1 - gamma)`` (any policy; time limits are not part of the task).

        Args:
            gamma: discount in [0, 1).

        Returns:
            ``(n_states,)`` float64.

        Raises:
            ValueError: if gamma is outside [0, 1).
        """
        if not 0.0 <= gamma < 1.0:
            raise ValueError(f"gamma must lie in [0, 1) for a finite value of a continuing task, got {gamma}")
        return np.full(self.n_states, self.reward / (1.0 - gamma))

    def get_state(self) -> dict[str, Any]:
        """Checkpointable state: current state, steps in the episode, ``np_random`` state."""
        return {"state": self._state, "elapsed": self._elapsed,
                "np_random": self.np_random.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a state from :meth:`get_state`.

        Raises:
            ValueError: on a missing key or a state outside ``[0, n_states)``.
        """
        try:
            s, elapsed, rng = int(state["state"]), int(state["elapsed"]), state["np_random"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed ContinuingChainEnv state: missing {exc}") from exc
        if not 0 <= s < self.n_states or elapsed < 0:
            raise ValueError(f"ContinuingChainEnv state out of range: state={s}, elapsed={elapsed}")
        self._state, self._elapsed = s, elapsed
        self.np_random.bit_generator.state = rng


def make_continuing_chain(time_limit: int | None = None, **kwargs) -> ContinuingChainEnv:
    """Entry point of ``lcpo/ContinuingChain-v0``; keyword arguments go to :class:`ContinuingChainEnv`.

    ``time_limit`` is the environment's own ``max_episode_steps`` (``gymnasium.make`` keeps that name for
    its ``TimeLimit`` wrapper, whose counter is not part of the environment's checkpointable state).

    Raises:
        ValueError: ``time_limit`` not an integer >= 1 or None (named with its value,
            :mod:`lcpo.envs.arguments`), or as :class:`ContinuingChainEnv`.
    """
    time_limit = integer(time_limit, "time_limit", none="continuing, the default")
    if time_limit is not None:
        kwargs["max_episode_steps"] = time_limit
    return ContinuingChainEnv(**kwargs)
