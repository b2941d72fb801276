"""The four windy MuJoCo environments of the paper (Appendix F; spec ``windy-gym.md``).

Each environment is a Gymnasium ``v4`` MuJoCo task (the model files and classes Gymnasium 1.x still ships)
with a 2-D wind from a context trace acting on its joints, 3 lags of each wind axis appended to the
observation, its own truncation length and per-trace wind divisors, and 15 bins per action dimension:

========================================  ===============================  =====  =========  =====  ========
id                                        module                           obs    actions    steps  divisors
========================================  ===============================  =====  =========  =====  ========
``lcpo/WindyInvertedPendulum-v0``         :mod:`.inverted_pendulum`         10     1 x 15     200    1,1,8,8
``lcpo/WindyInvertedDoublePendulum-v0``   :mod:`.inverted_double_pendulum`  17     1 x 15     200    8,8,8,8
``lcpo/WindyHopper-v0``                   :mod:`.hopper`                    17     3 x 15     200    1,1,8,1
``lcpo/WindyReacher-v0``                  :mod:`.reacher`                   17     2 x 15     50     1,8,1,1
========================================  ===============================  =====  =========  =====  ========

This package's ``__init__`` holds only the :data:`ENV_INFO` table (no MuJoCo import), so listing the
environments (``lcpo envs list``) stays cheap; the environment modules import MuJoCo when made.
"""

from __future__ import annotations

from dataclasses import dataclass

from lcpo.persistence.strict_json import show

__all__ = ["WindyEnvInfo", "ENV_INFO", "WIND_LAGS"]

#: Lags of each wind axis in the observation (spec: 3).
WIND_LAGS = 3


@dataclass(frozen=True)
class WindyEnvInfo:
    """Static facts about one windy MuJoCo environment (spec table, "Common to the five").

    Attributes:
        env_id: the registered Gymnasium id.
        base_task: the Gymnasium task it extends, e.g. ``"InvertedPendulum-v4"``.
        base_obs_dim: size of the base task's observation.
        action_dims: number of action dimensions (each discretized into ``bins`` bins).
        max_episode_steps: spec truncation length (steps per episode).
        divisors: wind divisor for canonical traces 1-4 (``wind-1`` .. ``wind-4``).
        wind: one-line description of how the wind acts.
        reward: one-line description of the reward.
    """

    env_id: str
    base_task: str
    base_obs_dim: int
    action_dims: int
    max_episode_steps: int
    divisors: tuple[float, float, float, float]
    wind: str
    reward: str

    @property
    def obs_dim(self) -> int:
        """Observation size: base observation plus ``2 * WIND_LAGS`` wind lags."""
        return self.base_obs_dim + 2 * WIND_LAGS

    def divisor(self, trace_id: int) -> float:
        """The wind divisor for canonical trace ``trace_id``.

        Args:
            trace_id: 1, 2, 3 or 4.

        Raises:
            ValueError: if ``trace_id`` is not one of 1-4.
        """
        if isinstance(trace_id, bool) or trace_id not in (1, 2, 3, 4):
            raise ValueError(f"{self.env_id}: trace_id must be 1, 2, 3 or 4, got {show(trace_id)}")
        return self.divisors[int(trace_id) - 1]

    def to_dict(self) -> dict:
        """JSON-friendly description (for ``lcpo envs list``)."""
        return {
            "env_id": self.env_id, "base_task": self.base_task, "obs_dim": self.obs_dim,
            "base_obs_dim": self.base_obs_dim, "action_dims": self.action_dims, "bins": 15,
            "max_episode_steps": self.max_episode_steps, "divisors": list(self.divisors),
            "wind": self.wind, "reward": self.reward,
        }


#: env id -> :class:`WindyEnvInfo`, the single source of the per-environment constants.
ENV_INFO: dict[str, WindyEnvInfo] = {
    info.env_id: info for info in (
        WindyEnvInfo(
            "lcpo/WindyInvertedPendulum-v0", "InvertedPendulum-v4", 4, 1, 200, (1.0, 1.0, 8.0, 8.0),
            "slider control a + w_x; added hinge motor (gear 100, ctrl +-10) = w_x cos q + w_y sin q",
            "+1 per step; terminates when |hinge angle| > 0.2 or the state is not finite"),
        WindyEnvInfo(
            "lcpo/WindyInvertedDoublePendulum-v0", "InvertedDoublePendulum-v4", 11, 1, 200, (8.0, 8.0, 8.0, 8.0),
            "slider control a + w_x; added hinge motors (gear 100, ctrl +-10): w_x cos q1 + w_y sin q1 and "
            "w_x cos(q1 + q2) + w_y sin(q1 + q2)",
            "10 - 0.01 x^2 - (y - 2)^2 - 1e-3 v1^2 - 5e-3 v2^2; terminates when tip height y <= 1"),
        WindyEnvInfo(
            "lcpo/WindyHopper-v0", "Hopper-v4", 11, 3, 200, (1.0, 1.0, 8.0, 1.0),
            "thigh, leg, foot torques += w_x (cos a_j - cos a_j+1) - w_y (sin a_j - sin a_j+1), clamped to +-1",
            "Hopper-v4 reward with the control cost 1e-3 |a|^2 of the agent's own action"),
        WindyEnvInfo(
            "lcpo/WindyReacher-v0", "Reacher-v4", 11, 2, 50, (1.0, 8.0, 1.0, 1.0),
            "joint torques += -w_x sin(q) + w_y cos(q) (q: each link's absolute angle), clamped to +-1",
            "-|fingertip - target| - |a|^2 with a the agent's own torques"),
    )
}
