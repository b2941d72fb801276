"""``lcpo/WindyInvertedPendulum-v0``: Gymnasium InvertedPendulum-v4 in a 2-D wind (paper Appendix F).

Wind (spec ``windy-gym.md``): the slider control is ``a + w_x`` (clipped to the slider's +-3), and an added
hinge motor (gear 100, ctrl +-10) applies ``w_x cos q + w_y sin q`` with ``q`` the hinge angle before the
step. A positive ``w_x`` tips the pole towards +x (the hinge angle grows; MuJoCo's y-axis hinge leans the pole
to +x for positive angles) and, since the hinge motor's reaction outweighs the extra slider force, the cart
recoils towards -x. The wind is strong: with zero action an episode lasts ~25 steps without wind and 4 steps
under a constant wind of 0.1 (spec: 24.5 and 4.0). Reward +1 per step (no control cost); terminates when ``|q| > 0.2`` or the state is not finite. Observation:
``[x, q, x_dot, q_dot, w_x(t), w_x(t-1), w_x(t-2), w_y(t), w_y(t-1), w_y(t-2)]`` (10, float32).
"""

from __future__ import annotations

import numpy as np
from gymnasium.envs.mujoco.inverted_pendulum_v4 import InvertedPendulumEnv

from lcpo.envs.mujoco.base import HingeMotor, WindyMujocoEnv, env_info, make_windy

__all__ = ["WindyInvertedPendulumEnv", "make_windy_inverted_pendulum"]


class WindyInvertedPendulumEnv(WindyMujocoEnv, InvertedPendulumEnv):
    """InvertedPendulum-v4 with wind on the cart and a wind-driven hinge motor.

    See :class:`~lcpo.envs.mujoco.base.WindyMujocoEnv` for the arguments, spaces and state.
    """

    info = env_info("lcpo/WindyInvertedPendulum-v0")
    extra_motors = (HingeMotor("wind_hinge", "hinge", gear=100.0, ctrl_limit=10.0),)

    def total_control(self, action, wind, qpos):
        """``[a + w_x, w_x cos q + w_y sin q]`` with ``q = qpos[1]`` (the hinge angle)."""
        wx, wy = wind
        q = qpos[1]
        return np.array([action[0] + wx, wx * np.cos(q) + wy * np.sin(q)])

    @staticmethod
    def termination_fn(obs) -> np.ndarray:
        """InvertedPendulum-v4's rule: terminal when the hinge angle ``|q| = |obs[1]| > 0.2`` rad or an entry of the
        task's observation ``obs[:4]`` (``x, q, x_dot, q_dot``) is not finite.

        Args:
            obs: ``(..., >= 4)`` observations (the wind lags are not read).

        Returns:
            ``(...)`` bool.
        """
        obs = np.asarray(obs)
        base = obs[..., :4]
        return ~np.all(np.isfinite(base), axis=-1) | (np.abs(obs[..., 1]) > 0.2)


def make_windy_inverted_pendulum(trace=None, trace_id: int | None = None, divisor: float | None = None,
                                 bins: int = 15, time_limit: int | None = 200, **kwargs):
    """Make ``lcpo/WindyInvertedPendulum-v0`` (discretized actions); see :func:`~lcpo.envs.mujoco.base.make_windy`.

    Divisors for traces 1-4: 1, 1, 8, 8. Truncation: 200 steps.
    """
    return make_windy(WindyInvertedPendulumEnv, trace, trace_id, divisor, bins, time_limit, **kwargs)
