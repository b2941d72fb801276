"""``lcpo/WindyHopper-v0``: Gymnasium Hopper-v4 in a 2-D wind (paper Appendix F).

Wind (spec ``windy-gym.md``): with the angles before the step, ``a1`` = foot joint angle, ``a2 = a1 - leg``,
``a3 = a2 - thigh``, ``a4 = a3 - torso - pi/2``, the wind adds
``w_x (cos a_j - cos a_{j+1}) - w_y (sin a_j - sin a_{j+1})`` to torque ``j`` for ``j = 1, 2, 3`` in the
actuator order of Hopper-v4 (thigh, leg, foot), and the totals are clamped to the actuators' +-1. Near the
upright reset pose (all angles ~0) only the foot torque changes, by ``w_x - w_y``. The reward is Hopper-v4's
with the control cost of the agent's own action, ``forward + healthy - 1e-3 |a|^2`` (equal to the spec's
``reward(a + wind) + 1e-3 (|a + wind|^2 - |a|^2)``). Observation: the task's 11 entries then the 6 wind
lags (17). Truncation: 200 steps. Termination: Hopper-v4's "unhealthy" rule, declared once as
:meth:`WindyHopperEnv.termination_fn` (used by the environment's step and by model rollouts).
"""

from __future__ import annotations

import numpy as np
from gymnasium.envs.mujoco.hopper_v4 import HopperEnv

from lcpo.envs.mujoco.base import WindyMujocoEnv, env_info, make_windy

__all__ = ["WindyHopperEnv", "make_windy_hopper", "hopper_wind_torque"]


def hopper_wind_torque(wind: np.ndarray, qpos: np.ndarray) -> np.ndarray:
    """The wind's torque on the thigh, leg and foot joints (spec ``windy-gym.md``, Hopper).

    Args:
        wind: ``(2,)`` ``(w_x, w_y)``.
        qpos: ``(6,)`` Hopper joint positions ``[rootx, rootz, torso, thigh, leg, foot]`` (rad for angles).

    Returns:
        ``(3,)`` float64 torques added to the (thigh, leg, foot) controls.
    """
    wx, wy = wind
    torso, thigh, leg, foot = qpos[2], qpos[3], qpos[4], qpos[5]
    a1 = foot
    a2 = a1 - leg
    a3 = a2 - thigh
    a4 = a3 - torso - np.pi / 2
    a = np.array([a1, a2, a3, a4])
    c, s = np.cos(a), np.sin(a)
    return wx * (c[:-1] - c[1:]) - wy * (s[:-1] - s[1:])


class WindyHopperEnv(WindyMujocoEnv, HopperEnv):
    """Hopper-v4 with wind torques on its three joints; control cost of the agent's action only.

    See :class:`~lcpo.envs.mujoco.base.WindyMujocoEnv` for the arguments, spaces and state.
    """

    info = env_info("lcpo/WindyHopper-v0")

    def total_control(self, action, wind, qpos):
        """``a + hopper_wind_torque(wind, qpos)`` (clamped to +-1 by the caller)."""
        return action + hopper_wind_torque(wind, qpos)

    def agent_reward(self, reward, action, ctrl, info):
        """``forward_reward + healthy_reward - ctrl_cost_weight * |a|^2`` with ``a`` the agent's action."""
        return (self._forward_reward_weight * info["x_velocity"] + self.healthy_reward) - self.control_cost(action)

    def termination_fn(self, obs) -> np.ndarray:
        """Hopper-v4's rule (``terminated = not is_healthy``): terminal unless the torso height ``z = obs[0]`` is in
        ``healthy_z_range`` (0.7, inf), the torso angle ``obs[1]`` in ``healthy_angle_range`` (-0.2, 0.2), and
        every entry of ``obs[1:11]`` (the joint angles and the velocities) in ``healthy_state_range``
        (-100, 100), all bounds exclusive; NaN is terminal; never terminal if the task was made with
        ``terminate_when_unhealthy=False``.

        Args:
            obs: ``(..., >= 11)`` observations (the task's 11 entries first; the wind lags are not read).

        Returns:
            ``(...)`` bool.
        """
        obs = np.asarray(obs)
        if not self._terminate_when_unhealthy:
            return np.zeros(obs.shape[:-1], dtype=bool)
        z, angle, state = obs[..., 0], obs[..., 1], obs[..., 1:11]
        (lo_s, hi_s), (lo_z, hi_z), (lo_a, hi_a) = (self._healthy_state_range, self._healthy_z_range,
                                                    self._healthy_angle_range)
        healthy = (np.all((lo_s < state) & (state < hi_s), axis=-1) & (lo_z < z) & (z < hi_z)
                   & (lo_a < angle) & (angle < hi_a))
        return ~healthy

    def termination_input(self, base_obs):
        """The observation layout with the velocities unclipped (Hopper-v4 clips them to +-10 in the observation
        but checks the health rule on the raw state, so the real step passes ``[qpos[1:], qvel]``)."""
        return np.concatenate([self.data.qpos[1:], self.data.qvel])


def make_windy_hopper(trace=None, trace_id: int | None = None, divisor: float | None = None, bins: int = 15,
                      time_limit: int | None = 200, **kwargs):
    """Make ``lcpo/WindyHopper-v0`` (discretized actions); see :func:`~lcpo.envs.mujoco.base.make_windy`.

    Divisors for traces 1-4: 1, 1, 8, 1. Truncation: 200 steps.
    """
    return make_windy(WindyHopperEnv, trace, trace_id, divisor, bins, time_limit, **kwargs)
