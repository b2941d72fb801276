"""Hyperparameters whose paper value depends on the length of the run (issue 27, "The paper's settings").

The paper sizes two memories by the run, not by a constant (``docs/settings.md``):

- LCPO's and LCPO-P's **reservoir** holds 1% of the run's samples (paper Table 11: 200K states on the 20M-step
  traces, 80K on the 8M-step ones; the authors' run configurations pass ``ood_subsample 100``, i.e.
  ``rollout * epochs // 100``; their straggler runs: 1% of 4,608 x 4,500 = 207,360);
- the **replay buffer** of DDQN, SAC and the SAC-based continual baselines (EWC, OGD) holds every sample of the
  run (paper Table 11 "all samples"; the authors' agents allocate ``epochs * steps_per_epoch`` transitions, their
  ``off_policy_buffer_size`` flag is never read by the windy-gym agents).

An agent built without a run length (``LCPO(env)``) keeps its dataclass's numeric default (reservoir 200,000;
buffer 1,000,000). A run (``lcpo run``, a sweep, :class:`lcpo.online.run.RunConfig`) knows its length and fills
these fields with :func:`run_length_overrides` wherever the user did not set them. The resolved values are what
the run's ``config.json`` and ``summary.json`` record under ``hyperparameters``.

This module imports no learning code (the CLI's help stays fast).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["RESERVOIR_DIVISOR", "RUN_LENGTH_RULES", "run_length_overrides"]

#: the reservoir keeps 1 in RESERVOIR_DIVISOR samples of the run (capacity ``steps // 100``; paper Table 11: "1% of samples").
RESERVOIR_DIVISOR = 100

#: agent name -> {field: rule}. ``"reservoir"``: ``max(ood_batch * ood_candidates_factor, steps // 100)`` (never
#: below the candidates one anchor draw asks for); ``"all"``: ``steps`` (every transition of the run).
RUN_LENGTH_RULES: dict[str, dict[str, str]] = {
    "lcpo": {"reservoir_size": "reservoir"},
    "lcpo-p": {"reservoir_size": "reservoir"},
    "ddqn": {"buffer_size": "all"},
    "sac": {"buffer_size": "all"},
    "ewc": {"buffer_size": "all"},
    "ogd": {"buffer_size": "all"},
}


def _field(agent: str, name: str, overrides: Mapping[str, Any]) -> Any:
    if name in overrides:
        return overrides[name]
    from lcpo.agents import AGENTS  # the class (and PyTorch) only when a rule needs another field's default

    return getattr(AGENTS[agent].Hyperparameters(), name)


def run_length_overrides(agent: str, overrides: Mapping[str, Any] | None, steps: int) -> dict[str, Any]:
    """``overrides`` plus the run-length-dependent fields of ``agent`` that the user did not set.

    Args:
        agent: agent name (a key of :data:`lcpo.agents.AGENTS`).
        overrides: the user's hyperparameter overrides (never modified); None for none.
        steps: environment steps of the run (> 0).

    Returns:
        A new dict: ``overrides`` unchanged, plus for each rule of :data:`RUN_LENGTH_RULES` whose field is not in
        ``overrides``: ``reservoir_size = max(ood_batch * ood_candidates_factor, steps // 100)`` (LCPO, LCPO-P;
        ``ood_batch`` and the factor as overridden, else their defaults) or ``buffer_size = steps`` (DDQN, SAC,
        EWC, OGD). Agents without a rule get ``overrides`` back as a copy.

    Raises:
        ValueError: ``steps`` not a positive integer.

    Example:
        >>> run_length_overrides("lcpo", {}, 8_000_000)
        {'reservoir_size': 80000}
        >>> run_length_overrides("sac", {"buffer_size": 5000}, 8_000_000)
        {'buffer_size': 5000}
        >>> run_length_overrides("a2c", {"actor_lr": 1e-3}, 8_000_000)
        {'actor_lr': 0.001}
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    out = dict(overrides or {})
    for name, rule in RUN_LENGTH_RULES.get(agent, {}).items():
        if name in out:
            continue
        if rule == "reservoir":
            floor = int(_field(agent, "ood_batch", out)) * int(_field(agent, "ood_candidates_factor", out))
            out[name] = max(floor, steps // RESERVOIR_DIVISOR)
        elif rule == "all":
            out[name] = steps
        else:  # pragma: no cover - the table above is fixed
            raise AssertionError(rule)
    return out
