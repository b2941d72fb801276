"""``lcpo/WindyInvertedDoublePendulum-v0``: Gymnasium InvertedDoublePendulum-v4 in a 2-D wind (Appendix F).

Wind (spec ``windy-gym.md``): the slider control is ``a + w_x`` (clipped to +-1, gear 500), and two added
hinge motors (gear 100, ctrl +-10, the InvertedPendulum's motor; the spec leaves their gear open) apply
``w_x cos q1 + w_y sin q1`` on the first hinge and ``w_x cos(q1 + q2) + w_y sin(q1 + q2)`` on the second,
with the angles before the step. A positive ``w_x`` tips the upper link (absolute angle ``q1 + q2``) and the
tip towards +x. Reward ``10 - 0.01 x^2 - (y - 2)^2 - 1e-3 v1^2 - 5e-3 v2^2`` (no control
cost); terminates when the tip height ``y <= 1``. Observation: the task's 11 entries then the 6 wind lags (17).
"""

from __future__ import annotations

import numpy as np
from gymnasium.envs.mujoco.inverted_double_pendulum_v4 import InvertedDoublePendulumEnv

from lcpo.envs.mujoco.base import HingeMotor, WindyMujocoEnv, env_info, make_windy

__all__ = ["WindyInvertedDoublePendulumEnv", "make_windy_inverted_double_pendulum"]


class WindyInvertedDoublePendulumEnv(WindyMujocoEnv, InvertedDoublePendulumEnv):
    """InvertedDoublePendulum-v4 with wind on the cart and wind-driven motors on both hinges.

    See :class:`~lcpo.envs.mujoco.base.WindyMujocoEnv` for the arguments, spaces and state.
    """

    info = env_info("lcpo/WindyInvertedDoublePendulum-v0")
    extra_motors = (HingeMotor("wind_hinge", "hinge", gear=100.0, ctrl_limit=10.0),
                    HingeMotor("wind_hinge2", "hinge2", gear=100.0, ctrl_limit=10.0))

    def total_control(self, action, wind, qpos):
        """``[a + w_x, w_x cos q1 + w_y sin q1, w_x cos(q1 + q2) + w_y sin(q1 + q2)]``."""
        wx, wy = wind
        q1 = qpos[1]
        q12 = q1 + qpos[2]
        return np.array([action[0] + wx, wx * np.cos(q1) + wy * np.sin(q1), wx * np.cos(q12) + wy * np.sin(q12)])


def make_windy_inverted_double_pendulum(trace=None, trace_id: int | None = None, divisor: float | None = None,
                                        bins: int = 15, time_limit: int | None = 200, **kwargs):
    """Make ``lcpo/WindyInvertedDoublePendulum-v0`` (discretized); see :func:`~lcpo.envs.mujoco.base.make_windy`.

    Divisors for traces 1-4: 8, 8, 8, 8. Truncation: 200 steps.
    """
    return make_windy(WindyInvertedDoublePendulumEnv, trace, trace_id, divisor, bins, time_limit,
                      **kwargs)
