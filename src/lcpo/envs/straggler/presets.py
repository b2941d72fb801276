"""Agent hyperparameters for the straggler environment (paper's settings; spec ``shared/specs/straggler.md``,
"Hyperparameters in the paper").

The agents' defaults are the paper's Table 11 values for the windy-gym runs; this environment uses others.
They are expressed as overrides (``Agent(env, **overrides)`` or ``RunConfig(overrides=...)``), so no agent
code depends on the environment:

- discount: time-dependent, ``0.81 ** elapsed_s`` per step, read from ``info["gamma"]`` by every on-policy
  agent (the ``gamma`` hyperparameter is then unused);
- GAE ``lambda = 0.95``; Adam ``lr = 1e-3`` for the actor and the critic, weight decay ``1e-4``; gradient-norm
  clip 1;
- one update per epoch of 4,608 steps (38.4 simulated minutes);
- no return normaliser (``normalize_returns = False``): the authors' straggler agents use the fixed reward
  scale that the environment already applies (``reward_scale``), not the running one of their windy-gym agents;
- LCPO: ``c_recent = 0.1``, ``c_anchor = 1e-4``, damping 0.1, 15 CG iterations, 10 halvings (the agent's
  defaults), base entropy ``entropy_base = 0.01`` (paper Table 12 and the authors' run configuration), an anchor
  batch as large as the rollout (``ood_batch = rollout_steps``: the authors draw ``len(rollout)`` anchors), and
  the Mahalanobis OOD detector on the declared context (the two beta = 0.99 moving averages of the normalized
  arrival rate and size) with ``D^2 > 20 / 24 / 28`` (the paper's Agg / Med / Cons; default here: 24). The
  reservoir is left to the run: 1% of its steps (:mod:`lcpo.agents.run_length`; the authors: 1% of
  4,608 x 4,500 = 207,360).

The rollout of 4,608 steps and the thresholds ``D^2 > 20 / 24 / 28`` follow the authors'
``straggler_mitigate/run_config.py`` (``--master_batch 4608``, ``--lcpo_thresh -5 / -6 / -7`` tested as
``-D^2 / 4 < thresh``), which produced the paper's figures; the paper's text and Table 12 say 128 steps and
sigma = 5 / 6 / 7 (``docs/settings.md``).

Networks: the environment's ``default_network`` is ``"perm-invariant"`` (:mod:`lcpo.envs.straggler.nets`), so
nothing needs to be set while ``network = "auto"``.

Example:
    >>> from lcpo.envs.straggler.presets import straggler_overrides
    >>> straggler_overrides("lcpo", ood_threshold=20)["ood_threshold"]
    20.0
"""

from __future__ import annotations

from typing import Any

__all__ = ["OOD_THRESHOLDS", "STRAGGLER_OVERRIDES", "straggler_overrides"]

#: The paper's Mahalanobis thresholds ``D^2`` on the straggler context (aggressive, medium, conservative).
OOD_THRESHOLDS = {"agg": 20.0, "med": 24.0, "cons": 28.0}

_COMMON: dict[str, Any] = {
    "gae_lambda": 0.95,
    "actor_lr": 1e-3,
    "critic_lr": 1e-3,
    "weight_decay": 1e-4,
    "max_grad_norm": 1.0,
    "rollout_steps": 4608,
    "normalize_returns": False,
}

#: agent name -> hyperparameter overrides for ``lcpo/StragglerMitigation-v0``.
STRAGGLER_OVERRIDES: dict[str, dict[str, Any]] = {
    "a2c": dict(_COMMON),
    "lcpo": dict(_COMMON, c_recent=0.1, c_anchor=1e-4, damping=0.1, cg_iters=15, max_backtracks=10,
                 entropy_base=0.01, ood_batch=_COMMON["rollout_steps"],
                 detector="mahalanobis", ood_threshold=OOD_THRESHOLDS["med"]),
}


def straggler_overrides(agent: str, ood_threshold: float | str | None = None, **extra) -> dict[str, Any]:
    """The straggler overrides of ``agent``, optionally with another OOD threshold and extra overrides.

    Args:
        agent: ``"a2c"`` or ``"lcpo"``.
        ood_threshold: LCPO's ``D^2`` threshold: a number or ``"agg"`` / ``"med"`` / ``"cons"``
            (20 / 24 / 28); None keeps 24.
        **extra: further overrides, applied last (e.g. ``reservoir_size=2000``). For LCPO a ``rollout_steps``
            given here without an ``ood_batch`` also sets ``ood_batch`` (the anchor batch is the rollout).

    Returns:
        A new dict (safe to modify).

    Raises:
        ValueError: an agent without a preset, a threshold for an agent without an OOD detector, an unknown
            threshold name, or a non-positive/non-finite threshold.
    """
    if agent not in STRAGGLER_OVERRIDES:
        raise ValueError(f"no straggler preset for agent {agent!r}; presets exist for {sorted(STRAGGLER_OVERRIDES)}")
    out = dict(STRAGGLER_OVERRIDES[agent])
    if ood_threshold is not None:
        if "ood_threshold" not in out:
            raise ValueError(f"agent {agent!r} has no OOD detector; ood_threshold={ood_threshold!r} does not apply")
        if isinstance(ood_threshold, str):
            if ood_threshold not in OOD_THRESHOLDS:
                raise ValueError(f"unknown OOD threshold name {ood_threshold!r}; use one of {sorted(OOD_THRESHOLDS)}"
                                 " or a number")
            ood_threshold = OOD_THRESHOLDS[ood_threshold]
        v = float(ood_threshold)
        if not (v > 0 and v < float("inf")):
            raise ValueError(f"ood_threshold must be positive and finite, got {ood_threshold!r}")
        out["ood_threshold"] = v
    out.update(extra)
    if "ood_batch" in out and "rollout_steps" in extra and "ood_batch" not in extra:
        out["ood_batch"] = out["rollout_steps"]
    return out
