"""``lcpo/WindyReacher-v0``: Gymnasium Reacher-v4 in a 2-D wind (paper Appendix F).

Wind (spec ``windy-gym.md``): joint torques ``tau0 = a0 - w_x sin q0 + w_y cos q0`` and
``tau1 = a1 - w_x sin(q0 + q1) + w_y cos(q0 + q1)`` (angles before the step), clamped to the actuators'
+-1: the torque a force ``(w_x, w_y)`` at a unit lever along each link would exert, so a positive ``w_x``
drives the fingertip towards +x. Reward ``-|fingertip - target| - |a|^2`` with ``a`` the agent's own
torques (the public reference squared bin indices 0..14, which swamps the distance term). Observation: the
task's 11 entries then the 6 wind lags (17). Truncation: 50 steps.
"""

from __future__ import annotations

import numpy as np
from gymnasium.envs.mujoco.reacher_v4 import ReacherEnv

from lcpo.envs.mujoco.base import WindyMujocoEnv, env_info, make_windy

__all__ = ["WindyReacherEnv", "make_windy_reacher"]


class WindyReacherEnv(WindyMujocoEnv, ReacherEnv):
    """Reacher-v4 with wind torques on both joints; control cost from the agent's torques only.

    See :class:`~lcpo.envs.mujoco.base.WindyMujocoEnv` for the arguments, spaces and state.
    """

    info = env_info("lcpo/WindyReacher-v0")

    def total_control(self, action, wind, qpos):
        """``a + [-w_x sin q0 + w_y cos q0, -w_x sin(q0 + q1) + w_y cos(q0 + q1)]``."""
        wx, wy = wind
        angles = np.array([qpos[0], qpos[0] + qpos[1]])
        return action - wx * np.sin(angles) + wy * np.cos(angles)

    def agent_reward(self, reward, action, ctrl, info):
        """``reward_dist - |a|^2``; also sets ``info["reward_ctrl"] = -|a|^2`` (agent's torques)."""
        reward_ctrl = -np.square(action).sum()
        info["reward_ctrl"] = reward_ctrl
        return info["reward_dist"] + reward_ctrl


def make_windy_reacher(trace=None, trace_id: int | None = None, divisor: float | None = None, bins: int = 15,
                       time_limit: int | None = 50, **kwargs):
    """Make ``lcpo/WindyReacher-v0`` (discretized actions); see :func:`~lcpo.envs.mujoco.base.make_windy`.

    Divisors for traces 1-4: 1, 8, 1, 1. Truncation: 50 steps.
    """
    return make_windy(WindyReacherEnv, trace, trace_id, divisor, bins, time_limit, **kwargs)
