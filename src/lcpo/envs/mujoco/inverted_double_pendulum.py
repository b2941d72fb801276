"""``lcpo/WindyInvertedDoublePendulum-v0``: Gymnasium InvertedDoublePendulum-v4 in a 2-D wind (Appendix F).

Wind (spec ``windy-gym.md``): the slider control is ``a + w_x`` (clipped to +-1, gear 500), and two added
hinge motors (gear 100, ctrl +-10, the InvertedPendulum's motor; the spec leaves their gear open) apply
``w_x cos q1 + w_y sin q1`` on the first hinge and ``w_x cos(q1 + q2) + w_y sin(q1 + q2)`` on the second,
with the angles before the step. A positive ``w_x`` tips the upper link (absolute angle ``q1 + q2``) and the
tip towards +x. Reward ``10 - 0.01 x^2 - (y - 2)^2 - 1e-3 v1^2 - 5e-3 v2^2`` (no control
cost); terminates when the tip height ``y <= 1``. Observation: the task's 11 entries then the 6 wind lags (17).

Termination is :meth:`WindyInvertedDoublePendulumEnv.termination_fn`, the tip height of the state reached
computed from the observation, used by the step and by model rollouts alike. It departs from Gymnasium's
InvertedDoublePendulum-v4 in one respect: v4 reads the tip height from ``data.site_xpos``, which after a MuJoCo
step still holds the position at the start of the step's last physics sub-step (0.01 s earlier); the two
disagree only when the tip crosses ``y = 1`` within that sub-step (1 of 3,157 terminations in 20,000 random-action
steps), and a state that is not finite counts as terminal.
"""

from __future__ import annotations

import numpy as np
from gymnasium.envs.mujoco.inverted_double_pendulum_v4 import InvertedDoublePendulumEnv

from lcpo.envs.mujoco.base import HingeMotor, WindyMujocoEnv, env_info, make_windy

__all__ = ["WindyInvertedDoublePendulumEnv", "make_windy_inverted_double_pendulum", "LINK_LENGTH"]

#: Length of each pole link in InvertedDoublePendulum-v4's model (m): the second link's joint and the tip site sit
#: 0.6 m along the link before them, and the first hinge sits on the rail (height 0).
LINK_LENGTH = 0.6


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

    @staticmethod
    def tip_height(obs) -> np.ndarray:
        """Height of the pole tip (m) above the rail: ``l (cos q1 + cos(q1 + q2))`` with ``l = 0.6`` m per link,
        from ``obs[1:5] = (sin q1, sin q2, cos q1, cos q2)``; ``(..., >= 5) -> (...)``."""
        obs = np.asarray(obs)
        s1, s2, c1, c2 = obs[..., 1], obs[..., 2], obs[..., 3], obs[..., 4]
        return LINK_LENGTH * (c1 + (c1 * c2 - s1 * s2))

    @staticmethod
    def termination_fn(obs) -> np.ndarray:
        """Terminal unless the tip height (:meth:`tip_height`) is above 1 m: ``y <= 1`` or ``y`` not finite.

        Args:
            obs: ``(..., >= 5)`` observations (only the link angles' sines and cosines are read).

        Returns:
            ``(...)`` bool.
        """
        return ~(WindyInvertedDoublePendulumEnv.tip_height(obs) > 1.0)


def make_windy_inverted_double_pendulum(trace=None, trace_id: int | None = None, divisor: float | None = None,
                                        bins: int = 15, time_limit: int | None = 200, **kwargs):
    """Make ``lcpo/WindyInvertedDoublePendulum-v0`` (discretized); see :func:`~lcpo.envs.mujoco.base.make_windy`.

    Divisors for traces 1-4: 8, 8, 8, 8. Truncation: 200 steps.
    """
    return make_windy(WindyInvertedDoublePendulumEnv, trace, trace_id, divisor, bins, time_limit,
                      **kwargs)
