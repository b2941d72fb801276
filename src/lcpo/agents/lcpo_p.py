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

Batch-native, as PPO (:class:`lcpo.agents.ppo.PPO`): ``LCPOP.population(env, seeds)`` holds N independent
learners, ``LCPOP(env, seed)`` the population of one. Per seed: the detector (and an automatic threshold's
calibration), the reservoir (drawn from the seed's own ``ood`` generator), the anchors and the penalty term,
which is zero for the seeds that found no anchors in an update (a mask: their steps are plain PPO's, exactly).

Defaults (appendix E.1): kappa 10, clip 0.2, up to 30 iterations, early stop at KL 0.01 on the recent batch;
reservoir, OOD batch and detector as LCPO (Table 11).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from lcpo.numerics import categorical
from lcpo.agents.ppo import PPO, ExtraLoss, PPOHyperparameters
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
        logp_old: ``(..., B, D, K)`` log-probabilities of the pre-update policy on the anchor states (no grad;
            ``(B, D, K)`` for one policy, ``(n, B, D, K)`` for ``n`` seeds).
        logp_new: ``(..., B, D, K)`` log-probabilities of the current policy on the same states.

    Returns:
        ``(...)`` tensor, the mean over the ``B`` states (a scalar for one policy). Its gradient w.r.t. the
        current policy is zero when ``logp_new == logp_old``. Choices with ``pi_old = 0`` add nothing
        (``0 log q = 0``, :func:`lcpo.numerics.categorical.cross_entropy`).

    Raises:
        ValueError: if the shapes differ.
    """
    if logp_old.shape != logp_new.shape:
        raise ValueError(f"anchor_cross_entropy: shapes differ: {tuple(logp_old.shape)} vs {tuple(logp_new.shape)}")
    return categorical.cross_entropy(logp_old, logp_new).mean(-1)


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
        >>> LCPOP.population(env, seeds=[0, 1], reservoir_size=1000).constrained_updates.tolist()
        [0, 0]
    """

    name = "lcpo-p"
    Hyperparameters = LCPOPHyperparameters

    def __init__(self, env, seed: int = 0, hparams=None, *, seeds=None, **overrides):
        super().__init__(env, seed, hparams, seeds=seeds, **overrides)
        hp = self.hp
        if not hp.kappa >= 0.0:
            raise ValueError(f"LCPO-P kappa must be >= 0, got {hp.kappa}")
        self.context_spec = get_context_spec(env)
        self.detectors = [make_detector(hp.detector, self.context_spec, hp.ood_threshold, rule=hp.ood_auto_rule,
                                        target_fraction=hp.ood_target_fraction, std_threshold=hp.ood_std_threshold)
                          for _ in self.seeds]
        check_ood_sizes(hp.reservoir_size, hp.ood_batch, "LCPO-P")
        self.reservoirs = [ReservoirBuffer(hp.reservoir_size, self.obs_dim, r["ood"]) for r in self.seed_rngs]
        self.seed_constrained_updates = np.zeros(self.n_seeds, dtype=np.int64)
        # this update's anchors: (positions in idx, anchor obs (c, B, obs_dim), pre-update log-probs (c, B, D, K))
        self._anchor: tuple[np.ndarray, torch.Tensor, torch.Tensor] | None = None

    # -- the single agent's view (N = 1) ---------------------------------------------------------------
    @property
    def detector(self):
        """The single agent's OOD detector (N = 1 only)."""
        self._solo("detector")
        return self.detectors[0]

    @property
    def reservoir(self) -> ReservoirBuffer:
        """The single agent's reservoir (N = 1 only)."""
        self._solo("reservoir")
        return self.reservoirs[0]

    @property
    def constrained_updates(self):
        """Updates whose actor loss held the anchor term: an int (single agent) or the ``(N,)`` int64 array."""
        return int(self.seed_constrained_updates[0]) if self.n_seeds == 1 else self.seed_constrained_updates

    # -- the hooks of PPO's update ---------------------------------------------------------------------
    def _extra_loss(self, idx: np.ndarray, batch: dict, diags: list[dict]) -> ExtraLoss | None:
        """Draw each seed's OOD anchors (Algorithm 3) and return the term ``kappa * CE(pi_old, pi)`` on them,
        per seed (zero for the seeds without anchors), or None when no seed found any."""
        hp = self.hp
        T = self.rollouts.size
        found = []
        for j, k in enumerate(idx):
            det = self.detectors[k]
            det.fit(self.rollouts.obs[k, :T])
            anchors, ood_frac = sample_ood(self.reservoirs[k], det, hp.ood_batch, hp.ood_candidates_factor)
            diags[j]["ood/fraction"] = ood_frac
            threshold = det.threshold_report  # NaN only before an automatic threshold's first calibration
            if math.isfinite(threshold):
                diags[j]["ood/threshold"] = threshold
            diags[j]["train/constrained"] = float(anchors is not None)
            if anchors is not None:
                found.append((j, anchors))
        if not found:
            return None
        con = np.array([j for j, _ in found], dtype=np.int64)
        rows = np.asarray(idx)[con]
        self.seed_constrained_updates[rows] += 1
        anchor_obs = torch.from_numpy(np.stack([a for _, a in found])).to(batch["obs"].device)
        with torch.no_grad():
            logp_anchor_old = self.actors.log_probs(anchor_obs, self._sel(rows, self.n_seeds))
        self._anchor = (con, anchor_obs, logp_anchor_old)
        kappa = hp.kappa
        where = np.full(len(idx), -1, dtype=np.int64)
        where[con] = np.arange(len(con))  # position j in idx -> row of the anchor tensors

        def term(js: np.ndarray, log_probs) -> torch.Tensor | None:
            at = where[js]
            if (at < 0).all():  # no active seed has anchors
                return None
            dev = anchor_obs.device
            have = torch.from_numpy(np.flatnonzero(at >= 0)).to(dev)
            # every active seed's actors run (the working set's rows); the rows without anchors are dropped
            a = torch.from_numpy(np.where(at >= 0, at, 0)).to(dev)
            ce = anchor_cross_entropy(logp_anchor_old[a[have]], log_probs(anchor_obs[a])[have])
            return torch.zeros(len(js), dtype=ce.dtype, device=dev).index_add(0, have, kappa * ce)

        return term

    def _after_update(self, idx: np.ndarray, batch: dict, diags: list[dict]) -> None:
        """Report each anchored seed's anchor KL reached, then add the recent states to the reservoirs
        (Algorithm 2)."""
        anchor = self._anchor
        if anchor is not None:
            con, anchor_obs, logp_anchor_old = anchor
            with torch.no_grad():
                now = self.actors.log_probs(anchor_obs, self._sel(np.asarray(idx)[con], self.n_seeds))
                kls = CategoricalPolicy.kl(logp_anchor_old, now).mean(dim=1).tolist()
            for j, v in zip(con, kls):
                diags[j]["train/kl_anchor"] = float(v)
            self._anchor = None
        T = self.rollouts.size
        for k in idx:
            self.reservoirs[k].add_batch(self.rollouts.obs[k, :T])

    # -- persistence -----------------------------------------------------------------------------------
    def seed_state_dict(self, k: int) -> dict:
        """Seed slot ``k``'s state in the single LCPO-P agent's format: PPO's, plus the reservoir, the counter
        and (automatic OOD threshold) the calibrator's state."""
        state = super().seed_state_dict(k)
        state.update({"reservoir": self.reservoirs[k].state_dict(),
                      "constrained_updates": int(self.seed_constrained_updates[k])})
        if isinstance(self.detectors[k], AutoThreshold):
            state["ood_calibration"] = self.detectors[k].state_dict()
        return state

    def _load_seed(self, k: int, state: dict) -> None:
        """Restore seed slot ``k`` from a single LCPO-P agent's ``state_dict`` exactly."""
        super()._load_seed(k, state)
        self.reservoirs[k].load_state_dict(state["reservoir"])
        self.seed_constrained_updates[k] = int(state["constrained_updates"])
        load_calibration(self.detectors[k], state)
