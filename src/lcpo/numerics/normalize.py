"""Reward scaling by the running spread of the discounted return (the "return normaliser").

Rewards whose scale is large (windy Pendulum's are around -1 to -16 per step, so returns reach -1,000 per
episode) make critic targets and advantages large, and a fixed learning rate then takes steps that are too big
or too noisy. The authors' public implementation divides every reward that enters an update by
``sqrt(Var[G] + 1)``, where ``G`` is the agent's own discounted return accumulator
``G_t = gamma_t * G_{t-1} + r_t`` (reset to 0 after every episode end) and ``Var[G]`` is its running variance
over everything seen so far, the reward scaling of Stable-Baselines3's ``VecNormalize`` (Engstrom et al. 2020,
"Implementation Matters in Deep Policy Gradients", reward scaling). Only the scale is changed, never the sign or
the mean, so an optimal policy is unchanged; the ``+ 1`` keeps the divisor ``>= 1`` (rewards are only shrunk,
never blown up when the returns barely vary).

Our rule, the same for every agent that enables it (``normalize_returns``):

- the accumulator advances once per environment step, in the order the steps happened;
- the running moments are merged with a batch of new accumulator values (Chan et al.'s parallel algorithm)
  *before* the update that uses them: on-policy agents merge the rollout's values then learn from it; replay
  agents merge the values of the steps since their last update, then scale the sampled rewards;
- the divisor in use is :attr:`ReturnNormalizer.scale` at update time; stored rewards stay raw.

The reference's off-policy agents instead feed their TD targets (already in scaled units) into the statistics;
we use the return accumulator for them too so that every agent is scaled by the same rule (docs/agents.md).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ReturnNormalizer"]


class ReturnNormalizer:
    """Running mean/variance of the discounted return accumulator and the reward divisor it implies.

    State (float64 scalars): ``mean``, ``var`` (initialised to 0 and 1), ``count`` (initialised to ``1e-4`` so
    the first merge is well defined), the accumulator ``ret`` and, for per-step use, ``pending`` values not yet
    merged.

    Example:
        >>> n = ReturnNormalizer()
        >>> g = n.accumulate(np.array([1.0, 1.0, 1.0]), np.array([False, False, True]), np.full(3, 0.5))
        >>> g.tolist()                    # 1, 0.5 * 1 + 1, 0.5 * 1.5 + 1; reset after the episode end
        [1.0, 1.5, 1.75]
        >>> n.ret
        0.0
    """

    def __init__(self) -> None:
        self.mean = 0.0
        self.var = 1.0
        self.count = 1e-4
        self.ret = 0.0
        self._pending: list[float] = []

    @property
    def scale(self) -> float:
        """The reward divisor ``sqrt(var + 1)`` (``>= 1``; float)."""
        return math.sqrt(self.var + 1.0)

    def update(self, values: np.ndarray) -> None:
        """Merge a batch of accumulator values ``(N,)`` into the running moments (parallel algorithm).

        The moments are float64 and checked after the merge: values so large that the variance overflows
        float64 (returns beyond about ``1e154``) are refused with the state unchanged, rather than making
        :attr:`scale` infinite and every later reward 0.

        Raises:
            ValueError: if a value is NaN or infinite, or the merged moments overflow (naming the value).
        """
        v = np.asarray(values, dtype=np.float64).reshape(-1)
        if v.size == 0:
            return
        if not np.isfinite(v).all():
            bad = v[~np.isfinite(v)][0]
            raise ValueError(f"return normaliser got a non-finite return value {bad}")
        with np.errstate(over="ignore", invalid="ignore"):
            b_mean, b_var, b_n = float(v.mean()), float(v.var()), float(v.size)
        total = self.count + b_n
        delta = b_mean - self.mean
        m2 = self.var * self.count + b_var * b_n + delta * delta * self.count * b_n / total
        mean, var = self.mean + delta * b_n / total, m2 / total
        if not (math.isfinite(mean) and math.isfinite(var) and math.isfinite(var + 1.0)):
            big = float(v[np.argmax(np.abs(v))])
            raise ValueError(f"return normaliser: a discounted return of {big:.6g} overflows the float64 variance "
                             "of the returns; rescale the environment's rewards")
        self.mean, self.var, self.count = mean, var, total

    def accumulate(self, rewards: np.ndarray, ends: np.ndarray, gammas: np.ndarray) -> np.ndarray:
        """Advance the accumulator over consecutive steps and return its value after each.

        Args:
            rewards: ``(N,)`` raw rewards, in the order the steps happened.
            ends: ``(N,)`` bool, True where an episode ended at that step (terminated or truncated); the
                accumulator is reset to 0 after it.
            gammas: ``(N,)`` per-step discounts.

        Returns:
            ``(N,)`` float64 accumulator values ``G_t = gamma_t * G_{t-1} + r_t`` (before any reset).
        """
        r = np.asarray(rewards, dtype=np.float64)
        out = np.empty(r.shape[0], dtype=np.float64)
        g = self.ret
        for i, (ri, end, gi) in enumerate(zip(r.tolist(), np.asarray(ends).tolist(), np.asarray(gammas).tolist())):
            g = g * gi + ri
            out[i] = g
            if end:
                g = 0.0
        self.ret = g
        return out

    def push(self, reward: float, end: bool, gamma: float) -> None:
        """Advance the accumulator by one step and keep its value for the next :meth:`flush` (replay agents)."""
        g = self.ret * gamma + reward
        self._pending.append(g)
        self.ret = 0.0 if end else g

    def flush(self) -> None:
        """Merge the values kept by :meth:`push` since the last flush into the moments."""
        if self._pending:
            self.update(np.asarray(self._pending))
            self._pending.clear()

    def state_dict(self) -> dict:
        """JSON-able state for an exact resume."""
        return {"mean": self.mean, "var": self.var, "count": self.count, "ret": self.ret,
                "pending": list(self._pending)}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output.

        Raises:
            ValueError: if a field is missing (naming it).
        """
        for k in ("mean", "var", "count", "ret", "pending"):
            if k not in state:
                raise ValueError(f"return normaliser state lacks {k!r}")
        self.mean, self.var = float(state["mean"]), float(state["var"])
        self.count, self.ret = float(state["count"]), float(state["ret"])
        self._pending = [float(x) for x in state["pending"]]
