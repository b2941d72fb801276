"""``lcpo/WindyPendulum-v0``: Gymnasium's Pendulum-v1 with an exogenous wind torque (paper Appendix F).

Dynamics (spec ``windy-gym.md``, "Pendulum"): with theta = 0 upright and ``a`` the agent's torque,
``u = a + w_x cos(theta) + w_y sin(theta)`` is clipped to +-2 N m and drives Pendulum-v1's Euler step
(g = 10, m = l = 1, dt = 0.05 s, |theta_dot| <= 8 rad/s). The reward is Pendulum-v1's cost with the control
term of the agent's own torque only: ``r = -(angle(theta)^2 + 0.1 theta_dot^2 + 0.001 clip(a)^2)`` (equal to
Pendulum-v1's reward on ``clip(u)`` plus the spec's correction ``0.001 (clip(u)^2 - clip(a)^2)``).
Arithmetic follows Pendulum-v1 step for step, including its float32 roundings, so that with an all-zero
trace the transitions equal Pendulum-v1's bit for bit.

Observation (float32, 9): ``[cos theta, sin theta, theta_dot, w_x(t), w_x(t-1), w_x(t-2), w_y(t), w_y(t-1),
w_y(t-2)]``, where ``t`` is the wind applied during the step just taken; entries 3-8 are the declared context.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

from lcpo.envs.arguments import flag, integer, number
from lcpo.envs.discretize import DiscretizeActions
from lcpo.envs.task import declare_continuing
from lcpo.envs.termination import never_terminates
from lcpo.envs.wind import WindProcess
from lcpo.persistence.strict_json import show

__all__ = ["WindyPendulumEnv", "make_windy_pendulum"]

_F32 = np.float32
_MAX_TORQUE = 2.0
_MAX_SPEED = 8.0
_DT = 0.05
_G = 10.0


def _f32(x: float) -> float:
    """Round a Python float to float32 precision (as NumPy does for float32 arithmetic)."""
    return float(_F32(x))


class WindyPendulumEnv(gym.Env):
    """Pendulum swing-up under a wind torque read from a context trace.

    Args:
        trace: wind trace, ``(T, 2)`` in N m (None = no wind; a name, path, array or ``ContextTrace``).
        divisor: divide the trace by this (spec table: 1 for the Pendulum on all four traces).
        max_episode_steps: truncate after this many steps (200 in the paper); ``None`` makes the task
            continuing (never truncated or terminated).
        render_mode: None only (Gymnasium's argument; this environment does not render).

    The action space is ``Box(-2, 2, (1,), float32)``; the registered id wraps it in
    :class:`~lcpo.envs.discretize.DiscretizeActions` (15 bins).

    Raises:
        lcpo.contexts.TraceError: a malformed trace or a wind beyond +-4 N m.
        ValueError: a ``divisor`` that is not a finite positive number, a ``max_episode_steps`` that is not an
            integer >= 1 or None (each named with its value, :mod:`lcpo.envs.arguments`), a ``render_mode``
            other than None; at ``step``, an action
            that is not finite or not of shape (1,).
    """

    metadata = {"render_modes": [], "continuing": False}
    #: no terminal states (Pendulum-v1 never terminates): the declared rule of :mod:`lcpo.envs.termination`
    termination_fn = staticmethod(never_terminates)

    def __init__(self, trace=None, divisor: float = 1.0, max_episode_steps: int | None = 200,
                 render_mode: str | None = None):
        max_episode_steps = integer(max_episode_steps, "max_episode_steps", none="no time limit")
        if render_mode is not None:  # was stored and ignored: render_mode='human' drew nothing, without a word
            raise ValueError(f"WindyPendulumEnv does not render; got render_mode={show(render_mode)}")
        self.wind = WindProcess(trace, divisor=number(divisor, "divisor", low=0.0, low_open=True))
        self.max_episode_steps = max_episode_steps
        declare_continuing(self, self.max_episode_steps is None)  # lcpo.envs.task
        self.action_space = gym.spaces.Box(-_MAX_TORQUE, _MAX_TORQUE, shape=(1,), dtype=np.float32)
        high = np.array([1.0, 1.0, _MAX_SPEED] + [4.0] * 6, dtype=np.float32)
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)
        self.context_spec = self.wind.context_spec(3, units="N m")
        self.render_mode = render_mode
        self._th = 0.0
        self._thdot = 0.0
        self._elapsed = 0
        self._obs = np.zeros(9, dtype=np.float32)

    def _observe(self) -> np.ndarray:
        obs = np.empty(9, dtype=np.float32)
        obs[0] = math.cos(self._th)
        obs[1] = math.sin(self._th)
        obs[2] = self._thdot
        obs[3:] = self.wind.observation()
        return obs

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode at a uniform random state (theta in [-pi, pi], theta_dot in [-1, 1]).

        The wind trace index is global time: an unseeded reset continues it; a seeded reset starts a fresh run
        at trace row 0; ``options={"trace_index": k}`` starts at row ``k``.
        """
        super().reset(seed=seed)
        self.wind.on_reset(seed, options)
        state = self.np_random.uniform(low=np.array([-np.pi, -1.0]), high=np.array([np.pi, 1.0]))
        self._th, self._thdot = float(state[0]), float(state[1])
        self._elapsed = 0
        return self._observe(), {"context": self.wind.current.copy()}

    def step(self, action):
        """Apply torque ``action`` ((1,) float, N m) plus this step's wind; returns the Gymnasium 5-tuple with
        ``info["context"]`` the wind ``(2,)`` applied. Raises ``ValueError`` on a non-finite action."""
        a = np.asarray(action, dtype=np.float32).reshape(-1)
        if a.shape != (1,) or not math.isfinite(a[0]):
            raise ValueError(f"WindyPendulum action must be a finite (1,) torque, got {action!r}")
        th, thdot = self._th, self._thdot
        wx, wy = self.wind.advance()
        a_c = min(max(float(a[0]), -_MAX_TORQUE), _MAX_TORQUE)
        u = float(a[0]) + wx * math.cos(th) + wy * math.sin(th)
        u = _f32(min(max(u, -_MAX_TORQUE), _MAX_TORQUE))
        ang = ((th + math.pi) % (2 * math.pi)) - math.pi
        # Pendulum-v1 computes the control cost (with NumPy's float32 power) and 3u in float32; so do we.
        cost = ang ** 2 + 0.1 * thdot ** 2 + float(0.001 * (_F32(a_c) ** 2))
        newthdot = thdot + (3 * _G / 2 * math.sin(th) + _f32(3.0 * u)) * _DT
        newthdot = min(max(newthdot, -_MAX_SPEED), _MAX_SPEED)
        self._th = th + newthdot * _DT
        self._thdot = newthdot
        self._elapsed += 1
        truncated = self.max_episode_steps is not None and self._elapsed >= self.max_episode_steps
        return self._observe(), -cost, False, truncated, {"context": self.wind.current.copy()}

    def get_state(self) -> dict:
        """Checkpointable state: pendulum state, step counter, wind process and ``np_random`` state."""
        return {"th": self._th, "thdot": self._thdot, "elapsed": self._elapsed, "wind": self.wind.get_state(),
                "np_random": self.np_random.bit_generator.state}

    def set_state(self, state: dict) -> None:
        """Restore :meth:`get_state` output."""
        self._th, self._thdot = float(state["th"]), float(state["thdot"])
        self._elapsed = int(state["elapsed"])
        self.wind.set_state(state["wind"])
        self.np_random.bit_generator.state = state["np_random"]

    def current_observation(self) -> np.ndarray:
        """The observation of the current state (used when resuming a run without a reset)."""
        return self._observe()


def make_windy_pendulum(trace=None, divisor: float = 1.0, bins: int = 15, time_limit: int | None = 200,
                        continuing: bool = False, render_mode: str | None = None) -> gym.Env:
    """Entry point of ``lcpo/WindyPendulum-v0``: the windy Pendulum with 15-bin discrete torque.

    Args:
        trace: wind trace (see :class:`WindyPendulumEnv`).
        divisor: trace divisor.
        bins: torque bins (action is ``MultiDiscrete([bins])``).
        time_limit: truncation length (200; the environment's own ``max_episode_steps``: ``gymnasium.make``
            reserves that name for its ``TimeLimit`` wrapper, which is not checkpointable); ignored when
            ``continuing``.
        continuing: if True, no time limit (a continuing task; never truncated or terminated).

    Raises:
        ValueError: a bad argument, named as given here with its value (``environment argument 'time_limit'
            must be an integer >= 1 or null (no time limit), got 'abc'``; :mod:`lcpo.envs.arguments`): a
            ``divisor`` that is not a finite positive number, ``bins`` not an integer >= 2, ``time_limit`` not an
            integer >= 1 or None, ``continuing`` not a bool.
        lcpo.contexts.TraceError: a malformed trace or a wind beyond +-4 N m.
    """
    divisor = number(divisor, "divisor", low=0.0, low_open=True)
    bins = integer(bins, "bins", minimum=2)
    time_limit = integer(time_limit, "time_limit", none="no time limit")
    env = WindyPendulumEnv(trace, divisor=divisor, max_episode_steps=None if flag(continuing, "continuing")
                           else time_limit, render_mode=render_mode)
    return DiscretizeActions(env, bins)
