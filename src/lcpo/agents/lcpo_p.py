"""LCPO-P: LCPO's local constraint as a PPO penalty (Hamadanian et al., ICLR 2025, appendix E.1).

PPO (:class:`lcpo.agents.ppo.PPO`) whose actor loss gains an anchor term on out-of-distribution states:

    loss(theta) = L_clip(theta) + kappa * CE(pi_old, pi_theta)[anchors],
    CE(pi_old, pi_theta)[anchors] = -mean_s sum_d sum_a pi_old(a | s)_d log pi_theta(a | s)_d,

where ``pi_old`` is the policy before this update and the anchors are drawn exactly as LCPO draws them: a
detector fitted on the recent batch's contexts (:mod:`lcpo.ood.detectors`) labels reservoir states, and the OOD
sampler (:func:`lcpo.ood.sample_ood`, paper Algorithm 3) returns ``ood_batch`` OOD states or nothing. The
cross-entropy equals ``KL(pi_old || pi_theta) + H(pi_old)``: its gradient vanishes at ``theta_old`` and grows as
the policy drifts on the anchors, so it pulls the policy back only where it moved. Without anchors the update
is plain PPO. After the update the recent states enter the reservoir (paper Algorithm 2).

Defaults (appendix E.1): kappa 10, clip 0.2, up to 30 iterations, early stop at KL 0.01 on the recent batch;
reservoir, OOD batch and detector as LCPO (Table 11).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from lcpo.numerics import categorical
from lcpo.agents.ppo import PPO, PPOHyperparameters
from lcpo.envs.context import get_context_spec
from lcpo.memory.reservoir import ReservoirBuffer
from lcpo.agents.nets import CategoricalPolicy
from lcpo.ood.calibration import AutoThreshold, load_calibration
from lcpo.ood.detectors import make_detector
from lcpo.ood.sampler import check_ood_sizes, sample_ood

__all__ = ["LCPOP", "LCPOPHyperparameters", "anchor_cross_entropy"]


def anchor_cross_entropy(logp_old: torch.Tensor, logp_new: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy ``-sum_d sum_a pi_old log pi_new`` over states (nats; LCPO-P's anchor term).

    Args:
        logp_old: ``(B, D, K)`` log-probabilities of the pre-update policy on the anchor states (no grad).
        logp_new: ``(B, D, K)`` log-probabilities of the current policy on the same states.

    Returns:
        Scalar tensor. Its gradient w.r.t. the current policy is zero when ``logp_new == logp_old``. Choices
        with ``pi_old = 0`` add nothing (``0 log q = 0``, :func:`lcpo.numerics.categorical.cross_entropy`).

    Raises:
        ValueError: if the shapes differ.
    """
    if logp_old.shape != logp_new.shape:
        raise ValueError(f"anchor_cross_entropy: shapes differ: {tuple(logp_old.shape)} vs {tuple(logp_new.shape)}")
    return categorical.cross_entropy(logp_old, logp_new).mean()


_LCPOP_ATTRIBUTES = """
        kappa: weight of the anchor cross-entropy (appendix E.1).
        reservoir_size: reservoir capacity in states (paper: 1% of the run's samples). A run (``lcpo run``,
            a sweep) sets it to ``max(ood_batch * ood_candidates_factor, steps // 100)`` when not set
            (:mod:`lcpo.agents.run_length`); 200,000 (1% of 20M) for an agent built without a run length.
        ood_batch: anchor batch size ``b``.
        ood_candidates_factor: candidates drawn per anchor (``s = factor * b``).
        detector: ``"l2"`` (main runs), ``"mahalanobis"`` or ``"mahalanobis-full"``.
        ood_threshold: a positive number (sigma^2 for L2 in squared trace units, D^2 for Mahalanobis),
            ``"auto"`` (calibrated during the run, as LCPO's) or ``"env"`` (default: the environment's declared
            threshold for the detector, else ``"auto"``).
        ood_auto_rule: the automatic threshold's rule, ``"quantile"`` or ``"standardized"`` (L2 only).
        ood_target_fraction: the quantile rule's target OOD fraction ``q`` in (0, 1).
        ood_std_threshold: the standardized rule's ``tau`` (squared running-std units).
"""


@dataclass(frozen=True)
class LCPOPHyperparameters(PPOHyperparameters):
    # the docstring (set below) is PPO's attribute list followed by LCPO-P's own fields (for `lcpo agents show`)
    kappa: float = 10.0
    reservoir_size: int = 200_000
    ood_batch: int = 200
    ood_candidates_factor: int = 5
    detector: str = "l2"
    ood_threshold: float | str = "env"
    ood_auto_rule: str = "quantile"
    ood_target_fraction: float = 0.5
    ood_std_threshold: float = 1.0


LCPOPHyperparameters.__doc__ = (PPOHyperparameters.__doc__.rstrip().replace(
    "PPO settings", "LCPO-P settings (PPO's fields, then LCPO-P's; appendix E.1, Table 11)", 1)
    + _LCPOP_ATTRIBUTES + "    ")


class LCPOP(PPO):
    """Online LCPO-P agent (see module docstring).

    Requires an environment that declares its context (``env.unwrapped.context_spec``).

    Raises:
        AttributeError: if the environment declares no context; ValueError for an unknown detector, a
            negative kappa, or a ``reservoir_size`` below ``ood_batch`` (:func:`lcpo.ood.check_ood_sizes`).

    Example:
        >>> import gymnasium as gym, lcpo.envs
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        >>> LCPOP(env, seed=0, reservoir_size=1000).learn(400).updates
        2
    """

    name = "lcpo-p"
    Hyperparameters = LCPOPHyperparameters

    def __init__(self, env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        if not hp.kappa >= 0.0:
            raise ValueError(f"LCPO-P kappa must be >= 0, got {hp.kappa}")
        self.context_spec = get_context_spec(env)
        self.detector = make_detector(hp.detector, self.context_spec, hp.ood_threshold, rule=hp.ood_auto_rule,
                                      target_fraction=hp.ood_target_fraction, std_threshold=hp.ood_std_threshold)
        check_ood_sizes(hp.reservoir_size, hp.ood_batch, "LCPO-P")
        self.reservoir = ReservoirBuffer(hp.reservoir_size, self.obs_dim, self.rngs["ood"])
        self.constrained_updates = 0
        self._anchor: tuple[torch.Tensor, torch.Tensor] | None = None  # (anchor obs, pre-update log-probs)

    def _extra_loss(self, batch: dict, diag: dict) -> Callable[[], torch.Tensor] | None:
        """Draw OOD anchors (Algorithm 3) and return ``kappa * CE(pi_old, pi)`` on them, or None."""
        hp = self.hp
        self.detector.fit(self.rollout.obs[: self.rollout.ptr])
        anchors, ood_frac = sample_ood(self.reservoir, self.detector, hp.ood_batch, hp.ood_candidates_factor)
        diag["ood/fraction"] = ood_frac
        threshold = self.detector.threshold_report  # NaN only before an automatic threshold's first calibration
        if math.isfinite(threshold):
            diag["ood/threshold"] = threshold
        diag["train/constrained"] = float(anchors is not None)
        if anchors is None:
            return None
        self.constrained_updates += 1
        anchor_obs = torch.from_numpy(anchors)
        with torch.no_grad():
            logp_anchor_old = self.actor.log_probs(anchor_obs)
        self._anchor = (anchor_obs, logp_anchor_old)
        kappa = hp.kappa

        def term() -> torch.Tensor:
            return kappa * anchor_cross_entropy(logp_anchor_old, self.actor.log_probs(anchor_obs))

        return term

    def _after_update(self, batch: dict, diag: dict) -> None:
        """Report the anchor KL reached, then add the recent states to the reservoir (Algorithm 2)."""
        anchor = self._anchor
        if anchor is not None:
            with torch.no_grad():
                diag["train/kl_anchor"] = float(CategoricalPolicy.kl(anchor[1], self.actor.log_probs(anchor[0])).mean())
            self._anchor = None
        self.reservoir.add_batch(self.rollout.obs[: self.rollout.ptr])

    def state_dict(self) -> dict:
        """:meth:`PPO.state_dict` plus the reservoir, counters and (automatic OOD threshold) the calibrator."""
        state = super().state_dict()
        state.update({"reservoir": self.reservoir.state_dict(), "constrained_updates": self.constrained_updates})
        if isinstance(self.detector, AutoThreshold):
            state["ood_calibration"] = self.detector.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly."""
        super().load_state_dict(state)
        self.reservoir.load_state_dict(state["reservoir"])
        self.constrained_updates = int(state["constrained_updates"])
        load_calibration(self.detector, state)
