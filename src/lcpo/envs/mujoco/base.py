"""What the four windy MuJoCo environments share (spec ``windy-gym.md``, "Common to the five").

:class:`WindyMujocoEnv` is a mixin placed before a Gymnasium ``v4`` MuJoCo task class in the bases, e.g.
``class WindyHopperEnv(WindyMujocoEnv, HopperEnv)``. It owns

* the :class:`~lcpo.envs.wind.WindProcess` (global-time wind trace, advanced once per step, continuing
  across resets) and the 6 wind lags appended to the observation;
* the model edit that adds hinge motors for the wind (:func:`add_hinge_motors`);
* the agent's action space (only the task's own actuators, never the wind motors);
* the step: wind -> total control (subclass :meth:`~WindyMujocoEnv.total_control`) -> the Gymnasium task's
  own ``step`` on the total control -> reward with the agent's own control cost
  (subclass :meth:`~WindyMujocoEnv.agent_reward`) -> termination by the environment's declared rule
  (:meth:`~WindyMujocoEnv.termination_fn`, :mod:`lcpo.envs.termination`) -> truncation after
  ``max_episode_steps``;
* ``info["context"]`` (the wind applied this step), ``context_spec`` and ``get_state``/``set_state``.

:func:`make_windy` resolves the trace id and divisor and wraps the environment in
:class:`~lcpo.envs.discretize.DiscretizeActions`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium.utils import EzPickle

from lcpo.contexts.trace import ContextTrace
from lcpo.envs.arguments import flag, integer, number
from lcpo.envs.discretize import DiscretizeActions
from lcpo.envs.mujoco import ENV_INFO, WIND_LAGS, WindyEnvInfo
from lcpo.envs.termination import never_terminates
from lcpo.envs.task import declare_continuing
from lcpo.envs.wind import WindProcess

__all__ = ["SPEC_LENGTH", "HingeMotor", "add_hinge_motors", "WindyMujocoEnv", "make_windy", "env_info"]

# MjData fields the Gymnasium tasks read *before* simulating a step. After ``mj_step`` they hold the values of
# the last sub-step's forward pass (e.g. Reacher's pre-step fingertip distance uses ``xpos``), which a fresh
# ``mj_forward`` would not reproduce; ``get_state`` keeps them so a restored env continues bit for bit.
_DERIVED_FIELDS = ("xpos", "xquat", "xmat", "site_xpos", "site_xmat", "qfrc_constraint", "cacc", "cfrc_int",
                   "cfrc_ext")
_PHYSICS_STATE = mujoco.mjtState.mjSTATE_INTEGRATION

#: Default of ``max_episode_steps``: the spec's truncation length of the environment (200; Reacher 50).
SPEC_LENGTH = "spec"


@dataclass(frozen=True)
class HingeMotor:
    """An extra motor on a hinge joint, driven only by the wind.

    Attributes:
        name: actuator name in the model.
        joint: name of the hinge joint it drives.
        gear: torque per unit control (N m); the spec's InvertedPendulum motor has gear 100.
        ctrl_limit: control range ``[-ctrl_limit, ctrl_limit]`` (spec: +-10).
    """

    name: str
    joint: str
    gear: float = 100.0
    ctrl_limit: float = 10.0


def add_hinge_motors(xml: str, motors: tuple[HingeMotor, ...]) -> str:
    """Add motors to a MuJoCo model XML after its existing actuators.

    The new actuators come last, so the task's own actuators keep their indices ``0 .. nu - 1``.

    Args:
        xml: MJCF model text.
        motors: the motors to add.

    Returns:
        The edited MJCF text.

    Raises:
        ValueError: if a motor names a joint the model lacks or repeats an existing actuator name.
    """
    root = ET.fromstring(xml)
    joints = {j.get("name") for j in root.iter("joint")}
    actuators = root.find("actuator")
    if actuators is None:
        actuators = ET.SubElement(root, "actuator")
    names = {a.get("name") for a in actuators}
    for m in motors:
        if m.joint not in joints:
            raise ValueError(f"hinge motor {m.name!r}: the model has no joint {m.joint!r} (joints: {sorted(joints)})")
        if m.name in names:
            raise ValueError(f"hinge motor {m.name!r}: the model already has an actuator of that name")
        names.add(m.name)
        ET.SubElement(actuators, "motor", {
            "name": m.name, "joint": m.joint, "gear": repr(float(m.gear)), "ctrllimited": "true",
            "ctrlrange": f"{-float(m.ctrl_limit)!r} {float(m.ctrl_limit)!r}"})
    return ET.tostring(root, encoding="unicode")


class WindyMujocoEnv:
    """Mixin turning a Gymnasium MuJoCo task into its windy version (paper Appendix F).

    Subclasses set :attr:`info` and :attr:`extra_motors` and implement :meth:`total_control`; they override
    :meth:`agent_reward` when the task's reward has a control cost. Place the mixin first in the bases.

    Observation: ``float32`` vector ``[base obs (float32 of the task's float64), w_x(t), w_x(t-1), w_x(t-2),
    w_y(t), w_y(t-1), w_y(t-2)]`` where ``t`` is the wind applied during the step just taken.
    Action: a ``Box`` over the task's own actuators only (the wind motors are not the agent's).

    Args:
        trace: the wind trace (None = no wind; ndarray ``(T, 2)``, :class:`~lcpo.contexts.trace.ContextTrace`,
            or a trace name/path, see :class:`~lcpo.envs.wind.WindProcess`).
        divisor: the wind is ``trace / divisor``.
        max_episode_steps: truncate after this many steps (``None``: never truncate, a continuing task);
            default :data:`SPEC_LENGTH`, the spec's length for this environment (``info.max_episode_steps``).
        **kwargs: passed to the Gymnasium task (e.g. ``render_mode``).

    Raises:
        ValueError: if ``max_episode_steps`` is not a positive int or None.
        lcpo.contexts.trace.TraceError: if the scaled wind exceeds +-4 (:data:`lcpo.envs.wind.WIND_BOUND`).
    """

    #: static facts (obs size, truncation, divisors); set by each subclass.
    info: WindyEnvInfo
    #: wind-only hinge motors added to the model (after the task's own actuators).
    extra_motors: tuple[HingeMotor, ...] = ()

    def __init__(self, trace=None, divisor: float = 1.0, max_episode_steps=SPEC_LENGTH, **kwargs):
        if isinstance(max_episode_steps, str) and max_episode_steps == SPEC_LENGTH:
            max_episode_steps = self.info.max_episode_steps
        if max_episode_steps is not None and (
                isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, (int, np.integer))
                or max_episode_steps < 1):
            raise ValueError(f"max_episode_steps must be a positive int or None, got {max_episode_steps!r}")
        self.wind = WindProcess(trace, divisor, lags=WIND_LAGS)
        self.max_episode_steps = None if max_episode_steps is None else int(max_episode_steps)
        self.elapsed_steps = 0
        super().__init__(**kwargs)  # the Gymnasium task; builds the model through _initialize_simulation
        EzPickle.__init__(self, trace=trace, divisor=divisor, max_episode_steps=max_episode_steps, **kwargs)

        n_agent = self.model.nu - len(self.extra_motors)
        ranges = self.model.actuator_ctrlrange
        self._ctrl_low = ranges[:, 0].copy()
        self._ctrl_high = ranges[:, 1].copy()
        self.action_space = gym.spaces.Box(ranges[:n_agent, 0].astype(np.float32),
                                           ranges[:n_agent, 1].astype(np.float32), dtype=np.float32)
        base_dim = self.observation_space.shape[0]
        if base_dim != self.info.base_obs_dim:
            raise RuntimeError(f"{self.info.env_id}: base observation has {base_dim} entries, "
                               f"ENV_INFO says {self.info.base_obs_dim}")
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (base_dim + 2 * WIND_LAGS,), dtype=np.float32)
        self.context_spec = self.wind.context_spec(base_dim)
        declare_continuing(self, self.max_episode_steps is None)  # no time limit: continuing (lcpo.envs.task)

    # ----------------------------------------------------------------- model
    def _initialize_simulation(self):
        """Load the task's model with :attr:`extra_motors` added (see :func:`add_hinge_motors`)."""
        if not self.extra_motors:
            return super()._initialize_simulation()
        with open(self.fullpath, encoding="utf-8") as f:
            xml = add_hinge_motors(f.read(), self.extra_motors)
        model = mujoco.MjModel.from_xml_string(xml)
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, self.width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, self.height)
        return model, mujoco.MjData(model)

    # ------------------------------------------------------- subclass hooks
    def total_control(self, action: np.ndarray, wind: np.ndarray, qpos: np.ndarray) -> np.ndarray:
        """The control of every actuator (agent's and wind motors) for this step, before clipping.

        Args:
            action: ``(n_agent,)`` float64, the agent's continuous action.
            wind: ``(2,)`` float64 ``(w_x, w_y)`` applied during this step.
            qpos: ``(nq,)`` joint positions before the step (the previous observation's angles).

        Returns:
            ``(model.nu,)`` float64 control; it is then clipped to each actuator's ``ctrlrange``.
        """
        raise NotImplementedError

    def agent_reward(self, reward: float, action: np.ndarray, ctrl: np.ndarray, info: dict) -> float:
        """The reward with the control cost of the agent's own ``action`` only.

        The Gymnasium task's ``step`` ran on the total control ``ctrl``; tasks without a control cost keep its
        ``reward`` (the default).

        Args:
            reward: the task's reward for the total control.
            action: ``(n_agent,)`` the agent's action in its own float dtype (float32 from the discretizer).
            ctrl: ``(nu,)`` float64 total control applied (after clipping).
            info: the task's info dict (may be updated in place).
        """
        return reward

    def termination_fn(self, obs) -> np.ndarray:
        """The termination rule: observations ``(..., obs_dim)`` -> ``(...)`` bool (:mod:`lcpo.envs.termination`).

        :meth:`step` computes ``terminated`` with it, and MBPO's model rollouts use it. The default never
        terminates (Reacher); the tasks with terminal states override it with the Gymnasium task's rule.
        """
        return never_terminates(obs)

    def termination_input(self, base_obs: np.ndarray) -> np.ndarray:
        """What :meth:`step` passes to :meth:`termination_fn`: the task's ``float64`` base observation of the
        state reached (subclasses whose observation clips entries the rule reads pass them unclipped)."""
        return base_obs

    # ----------------------------------------------------------- Gymnasium
    def step(self, action):
        """One step: advance the wind, apply agent action plus wind, run the task's dynamics and reward.

        Args:
            action: ``(n_agent,)`` continuous action (the discretized env passes the bin values).

        Returns:
            ``(obs (obs_dim,) float32, reward float, terminated bool, truncated bool, info)``; ``info`` has
            ``"context"`` (the wind ``(2,)`` float64 applied this step), ``"control"`` (the ``(nu,)`` clipped
            total control) and the task's own entries.

        Raises:
            ValueError: if ``action`` has the wrong shape or is not finite.
        """
        given = np.asarray(action).reshape(-1)
        if given.dtype.kind != "f":
            given = given.astype(np.float64)
        a = given if given.dtype == np.float64 else given.astype(np.float64)
        if a.shape != self.action_space.shape:
            raise ValueError(f"{self.info.env_id}: expected an action of shape {self.action_space.shape}, "
                             f"got {action!r}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{self.info.env_id}: non-finite action {action!r}")
        wind = self.wind.advance().copy()
        ctrl = np.minimum(np.maximum(self.total_control(a, wind, self.data.qpos), self._ctrl_low), self._ctrl_high)
        base_obs, reward, _, _, info = super().step(ctrl)
        # the environment's declared rule (also used by model rollouts), not the task's own flag
        terminated = bool(self.termination_fn(self.termination_input(base_obs)))
        # the control cost is computed in the action's own float dtype, as the Gymnasium task does
        reward = float(self.agent_reward(reward, given, ctrl, info))
        self.elapsed_steps += 1
        truncated = self.max_episode_steps is not None and self.elapsed_steps >= self.max_episode_steps
        info["context"] = wind
        info["control"] = ctrl
        return self._observe(base_obs), reward, bool(terminated), bool(truncated), info

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Reset the task. The wind trace is global time: an unseeded reset continues it, a seeded reset starts a
        fresh run at trace row 0, ``options={"trace_index": k}`` starts at row ``k`` (prescient training).

        Args:
            seed: seeds ``np_random`` (the task's initial-state noise), as in Gymnasium.
            options: ``trace_index`` (see above); the rest is passed to the task.

        Returns:
            ``(obs (obs_dim,) float32, info)`` with ``info["context"]`` the last wind applied.
        """
        self.wind.on_reset(seed, options)
        base_obs, info = super().reset(seed=seed, options=options)
        self.elapsed_steps = 0
        info["context"] = self.wind.current.copy()
        return self._observe(base_obs), info

    def _observe(self, base_obs: np.ndarray) -> np.ndarray:
        return np.concatenate([base_obs, self.wind.observation()]).astype(np.float32)

    # --------------------------------------------------------- checkpoints
    def get_state(self) -> dict:
        """Checkpointable state (ARCHITECTURE "Environments"): NumPy arrays and plain values only.

        Returns:
            dict with ``"physics"`` (MuJoCo integration state: time, qpos, qvel, act, warm start, ctrl, ...),
            ``"derived"`` (MjData fields read before the next simulation step), ``"wind"``
            (:meth:`WindProcess.get_state`), ``"elapsed_steps"`` and ``"np_random"`` (bit generator state).
        """
        physics = np.empty(mujoco.mj_stateSize(self.model, _PHYSICS_STATE))
        mujoco.mj_getState(self.model, self.data, physics, _PHYSICS_STATE)
        return {
            "physics": physics,
            "derived": {name: getattr(self.data, name).copy() for name in _DERIVED_FIELDS},
            "wind": self.wind.get_state(),
            "elapsed_steps": int(self.elapsed_steps),
            "np_random": self.np_random.bit_generator.state,
        }

    def set_state(self, state, qvel=None) -> None:
        """Restore :meth:`get_state` output, or (with ``qvel``) set MuJoCo joint positions and velocities.

        ``set_state(qpos, qvel)`` is the Gymnasium ``MujocoEnv`` method the tasks use when resetting, so both
        forms are served: a ``dict`` alone restores a checkpoint.

        Args:
            state: a :meth:`get_state` dict, or ``(nq,)`` qpos when ``qvel`` is given.
            qvel: ``(nv,)`` joint velocities (MujocoEnv form only).

        Raises:
            ValueError: if the checkpoint's physics state has the wrong size.
        """
        if qvel is not None or not isinstance(state, dict):
            return super().set_state(state, qvel)
        physics = np.asarray(state["physics"], dtype=np.float64)
        size = mujoco.mj_stateSize(self.model, _PHYSICS_STATE)
        if physics.shape != (size,):
            raise ValueError(f"{self.info.env_id}: physics state of shape {physics.shape}, expected ({size},)")
        mujoco.mj_setState(self.model, self.data, physics, _PHYSICS_STATE)
        mujoco.mj_forward(self.model, self.data)
        mujoco.mj_setState(self.model, self.data, physics, _PHYSICS_STATE)  # forward may touch the warm start
        for name, value in state["derived"].items():
            getattr(self.data, name)[...] = value
        self.wind.set_state(state["wind"])
        self.elapsed_steps = int(state["elapsed_steps"])
        self.np_random.bit_generator.state = state["np_random"]


_TRACE_NAME = re.compile(r"wind-([1-4])")


def make_windy(env_cls: type, trace=None, trace_id: int | None = None, divisor: float | None = None,
               bins: int = 15, time_limit: int | None = 200, continuing: bool = False,
               **kwargs) -> DiscretizeActions:
    """Build a windy MuJoCo environment with discretized actions.

    Args:
        env_cls: a :class:`WindyMujocoEnv` subclass.
        trace: the wind trace; ``None`` with a ``trace_id`` means the canonical trace ``f"wind-{trace_id}"``,
            ``None`` without one means no wind.
        trace_id: canonical trace number 1-4: selects the spec's divisor for this environment. Inferred from a
            trace (name string or :class:`~lcpo.contexts.trace.ContextTrace`) named ``"wind-1"`` .. ``"wind-4"``,
            as :func:`lcpo.contexts.resolve_trace` names the canonical traces.
        divisor: explicit wind divisor (overrides the table); default: the table's for ``trace_id``, else 1.
        bins: bins per action dimension (15 in the paper).
        time_limit: truncation length, the environment's ``max_episode_steps`` (``None``: continuing).
            Named differently because ``gymnasium.make`` keeps ``max_episode_steps`` for its own ``TimeLimit``
            wrapper, whose counter is not checkpointable.
        continuing: no time limit at all (same as ``time_limit=None``).
        **kwargs: passed to ``env_cls`` (e.g. ``render_mode``).

    Returns:
        ``DiscretizeActions(env_cls(...), bins)``.

    Raises:
        ValueError: unknown ``trace_id``, a ``trace_id`` contradicting the trace's name, a bad divisor, ``bins``
            not an integer >= 2, ``time_limit`` not an integer >= 1 or None, ``continuing`` not a bool (each named
            as given here, with its value: :mod:`lcpo.envs.arguments`).
        lcpo.contexts.trace.TraceError: if the scaled wind exceeds +-4.
    """
    info = env_cls.info
    bins = integer(bins, "bins", minimum=2)
    time_limit = integer(time_limit, "time_limit", none="no time limit")
    continuing = flag(continuing, "continuing")
    name = trace if isinstance(trace, str) else trace.name if isinstance(trace, ContextTrace) else None
    if name is not None:
        match = _TRACE_NAME.fullmatch(name)
        if match:
            named = int(match.group(1))
            if trace_id is not None and trace_id != named:
                raise ValueError(f"{info.env_id}: trace_id={trace_id!r} contradicts trace {name!r}")
            trace_id = named
    if trace_id is not None:
        default_divisor = info.divisor(trace_id)
        if trace is None:
            trace = f"wind-{trace_id}"
    else:
        default_divisor = 1.0
    if divisor is None:
        divisor = default_divisor
    divisor = number(divisor, "divisor", low=0.0, low_open=True)  # finite, > 0; named as given, one line
    env = env_cls(trace=trace, divisor=float(divisor), max_episode_steps=None if continuing else time_limit,
                  **kwargs)
    return DiscretizeActions(env, bins)


def env_info(env_id: str) -> WindyEnvInfo:
    """The :class:`WindyEnvInfo` of a windy MuJoCo id (raises ``KeyError`` naming the known ids)."""
    try:
        return ENV_INFO[env_id]
    except KeyError:
        raise KeyError(f"unknown windy MuJoCo id {env_id!r}; known: {sorted(ENV_INFO)}") from None
