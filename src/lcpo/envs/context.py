"""Context declaration: which observation entries are the exogenous context z_t.

Every ``lcpo`` environment appends its context to the observation and declares where it is with a
:class:`ContextSpec` stored as ``env.unwrapped.context_spec``. OOD detectors read only these entries, so
they work on any environment without knowing its layout (ARCHITECTURE.md, "Environment").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["ContextSpec", "MissingContextError", "get_context_spec"]


class MissingContextError(ValueError, AttributeError):
    """An environment declares no context (``env.unwrapped.context_spec`` is missing or None).

    A ``ValueError`` (bad input, reported by the CLI in one line) and, for code written before it existed, an
    ``AttributeError``.
    """


@dataclass(frozen=True)
class ContextSpec:
    """Where the context lives inside an observation vector.

    Attributes:
        indices: observation indices (ints, ascending order not required) that hold context values. The
            Mahalanobis detector uses all of them, in this order.
        names: one name per index, e.g. ``("wind_x[t]", "wind_x[t-1]", ...)``.
        groups: partition of ``indices`` into physical axes; each group holds the lags of one axis
            (e.g. ``((3, 4, 5), (6, 7, 8))`` for the 3 lags of wind x and wind y). The L2 detector averages
            each group into one value, giving a ``(len(groups),)`` summary per sample (spec: "average each
            sample's 3 x-lags and 3 y-lags into a 2-D wind").
        units: unit of the context values, e.g. ``"N m (trace units)"``.
        bound: the absolute bound the environment enforces on raw context values (``inf`` if none).
        scale: observed context = trace value x ``scale`` (``1 / divisor`` for a trace divided by the
            environment, e.g. 1/8 on InvertedDoublePendulum). Detector thresholds are given in trace units and
            rescaled with it, so the same threshold means the same wind on every environment (spec: "scale
            them with the trace, or LCPO silently finds no OOD samples").
        ood_thresholds: OOD thresholds the environment declares, per detector name (``{"l2": 1.0}``: sigma^2
            in trace units; ``{"mahalanobis": 24.0}``: ``D^2``), e.g. the paper's hand-tuned values. Agents
            whose ``ood_threshold`` is ``"env"`` (the default) use the declared one for their detector and
            calibrate it automatically (``"auto"``, :mod:`lcpo.ood.calibration`) when none is declared. A
            mapping is accepted and stored as sorted ``(name, value)`` pairs.

    Raises:
        ValueError: if ``names`` and ``indices`` differ in length, an index repeats, the groups do not
            partition ``indices``, or a declared OOD threshold is not positive and finite.
    """

    indices: tuple[int, ...]
    names: tuple[str, ...]
    groups: tuple[tuple[int, ...], ...] = field(default=())
    units: str = ""
    bound: float = float("inf")
    scale: float = 1.0
    ood_thresholds: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        idx = tuple(int(i) for i in self.indices)
        object.__setattr__(self, "indices", idx)
        if len(self.names) != len(idx):
            raise ValueError(f"ContextSpec: {len(self.names)} names for {len(idx)} indices")
        if len(set(idx)) != len(idx):
            raise ValueError(f"ContextSpec: repeated index in {idx}")
        groups = tuple(tuple(int(i) for i in g) for g in self.groups) or tuple((i,) for i in idx)
        flat = [i for g in groups for i in g]
        if sorted(flat) != sorted(idx):
            raise ValueError(f"ContextSpec: groups {groups} do not partition indices {idx}")
        object.__setattr__(self, "groups", groups)
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"ContextSpec: scale must be positive and finite, got {self.scale}")
        items = self.ood_thresholds.items() if isinstance(self.ood_thresholds, dict) else self.ood_thresholds
        thresholds = tuple(sorted((str(k), float(v)) for k, v in items))
        for k, v in thresholds:
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"ContextSpec: declared OOD threshold {k}={v} must be positive and finite")
        object.__setattr__(self, "ood_thresholds", thresholds)

    @property
    def dim(self) -> int:
        """Number of context entries in the observation."""
        return len(self.indices)

    def declared_threshold(self, detector: str) -> float | None:
        """The OOD threshold declared for ``detector`` (e.g. ``"l2"``), or None if the environment declares none."""
        return dict(self.ood_thresholds).get(detector)

    def select(self, obs: np.ndarray) -> np.ndarray:
        """Context entries of observations.

        Args:
            obs: ``(..., obs_dim)`` observations.

        Returns:
            ``(..., dim)`` array of the context entries, in ``indices`` order.
        """
        return np.asarray(obs)[..., list(self.indices)]

    def summary(self, obs: np.ndarray) -> np.ndarray:
        """Per-axis mean of each group's entries (one value per physical context axis).

        Args:
            obs: ``(..., obs_dim)`` observations.

        Returns:
            ``(..., len(groups))`` array.
        """
        obs = np.asarray(obs)
        return np.stack([obs[..., list(g)].mean(axis=-1) for g in self.groups], axis=-1)

    def to_dict(self) -> dict:
        """JSON-friendly description (for ``lcpo envs list`` and run metadata)."""
        return {
            "indices": list(self.indices),
            "names": list(self.names),
            "groups": [list(g) for g in self.groups],
            "units": self.units,
            "bound": self.bound,
            "scale": self.scale,
            "ood_thresholds": dict(self.ood_thresholds),
        }


def get_context_spec(env) -> ContextSpec:
    """Return the :class:`ContextSpec` an environment declares.

    Args:
        env: a Gymnasium environment, possibly wrapped.

    Raises:
        MissingContextError: (a ``ValueError`` and an ``AttributeError``) if the environment declares no context;
            the message names the environment and says how to declare it.
    """
    spec = getattr(getattr(env, "unwrapped", env), "context_spec", None)
    if spec is None:
        raise MissingContextError(
            f"environment {getattr(env, 'spec', None) and env.spec.id or env!r} declares no context_spec; "
            "lcpo detectors need to know which observation entries are context: in the environment's __init__ "
            "set self.context_spec = lcpo.envs.ContextSpec(indices=..., names=...) and return the current "
            "context in info['context'] (docs/bring-your-own.md)"
        )
    return spec
