"""Locally Constrained Policy Optimization (LCPO; Hamadanian et al., ICLR 2025, Algorithms 1-3).

Every rollout of ``rollout_steps`` transitions:

1. the critic takes one Adam step on the GAE lambda-returns (as in A2C);
2. a detector fitted on the rollout's contexts labels reservoir samples OOD; the OOD sampler (Algorithm 3)
   draws ``5 b`` candidates and returns ``b`` OOD anchor states, or nothing (the threshold: the
   environment's declared one, a number, or calibrated during the run, :mod:`lcpo.ood.calibration`);
3. with anchors, the policy takes the constrained step of Algorithm 1
   (:func:`lcpo.optim.kl_constrained_step`): the natural-gradient direction of the surrogate
   ``-mean(A_t pi(a_t|s_t) / pi_old(a_t|s_t)) - alpha H`` under the Fisher of the anchor states (conjugate
   gradient, damping), scaled to ``c_anchor``, then a line search that accepts only if
   ``KL_anchor <= c_anchor``, ``KL_recent <= c_recent`` and the surrogate improves (else no change); if the
   anchors' Fisher-vector product is not positive definite or not finite, the policy step is skipped
   (parameters unchanged, ``train/skipped_update = 1``) and the run goes on;
   without anchors, a plain A2C step;
4. the rollout's states enter the reservoir (Algorithm 2);
5. the entropy temperature ``alpha = base * exp(theta_e)`` is tuned toward the target entropy
   ``0.1 ln(bins)`` per action dimension (log-alpha Adam step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lcpo.numerics import categorical
from lcpo.agents.base import OnPolicyAgent, OnPolicyHyperparameters
from lcpo.envs.context import get_context_spec
from lcpo.memory.reservoir import ReservoirBuffer
from lcpo.agents.nets import CategoricalPolicy
from lcpo.ood.calibration import AutoThreshold, load_calibration
from lcpo.ood.detectors import make_detector
from lcpo.ood.sampler import check_ood_sizes, sample_ood
from lcpo.optim.constrained import kl_constrained_step
from lcpo.optim.fisher import flat_grad, make_fvp

__all__ = ["LCPO", "LCPOHyperparameters"]


@dataclass(frozen=True)
class LCPOHyperparameters(OnPolicyHyperparameters):
    """LCPO settings (paper Table 11 defaults; spec ``windy-gym.md``).

    Attributes:
        network: ``"auto"`` (the environment's ``default_network``, else ``"mlp"``), ``"mlp"``, or a kind
            registered in :data:`lcpo.agents.nets.NETWORKS` (e.g. ``"perm-invariant"``).
        hidden: hidden layer sizes of actor and critic.
        actor_lr: Adam learning rate of the actor (used by the plain A2C step when no anchors are found).
        critic_lr: Adam learning rate of the critic.
        weight_decay: Adam L2 weight decay.
        gamma: discount per step.
        gae_lambda: GAE lambda.
        rollout_steps: transitions per update (the recent batch).
        max_grad_norm: gradient-norm clip (critic and the plain A2C step).
        c_anchor: KL limit on the OOD anchor states (nats).
        c_recent: KL limit on the recent batch (nats).
        damping: Fisher damping added in conjugate gradient.
        cg_iters: conjugate-gradient iterations.
        max_backtracks: line-search halvings.
        accept_ratio: minimal actual/expected surrogate improvement in the line search.
        reservoir_size: reservoir capacity in states (paper: 1% of the run's samples). A run (``lcpo run``,
            a sweep) sets it to ``max(ood_batch * ood_candidates_factor, steps // 100)`` when not set
            (:mod:`lcpo.agents.run_length`); 200,000 (1% of 20M) for an agent built without a run length.
        ood_batch: anchor batch size ``b``.
        ood_candidates_factor: candidates drawn per anchor (``s = factor * b``).
        detector: ``"l2"`` (main runs), ``"mahalanobis"`` or ``"mahalanobis-full"`` (handicapped).
        ood_threshold: a positive number: sigma^2 for L2 (squared trace units), D^2 for Mahalanobis;
            ``"auto"``: calibrated during the run by the rule ``ood_auto_rule`` (``lcpo.ood.calibration``;
            docs/lcpo.md, "Automatic OOD threshold"); ``"env"`` (default): the threshold the environment
            declares for the detector (``context_spec.ood_thresholds``; windy envs: L2 sigma^2 = 1, straggler:
            Mahalanobis D^2 = 24), else ``"auto"``.
        ood_auto_rule: the automatic threshold's rule: ``"quantile"`` (both detectors) or ``"standardized"``
            (L2 only).
        ood_target_fraction: the quantile rule's target OOD fraction ``q`` in (0, 1): the threshold is the
            running geometric mean of the per-update distance that ``q`` of the reservoir candidates exceed.
        ood_std_threshold: the standardized rule's ``tau``: OOD if the squared L2 distance, in units of each
            context axis's running standard deviation, exceeds it.
        auto_entropy: tune the entropy temperature automatically.
        entropy_base: alpha = entropy_base * exp(theta_e).
        entropy_target: target entropy per action dimension, as a fraction of ln(bins) (0.1), in ``[0, 1)``:
            1 (the uniform policy's entropy) is unreachable and refused; above 0.95 a warning.
        entropy_lr: Adam learning rate of theta_e.
    """

    c_anchor: float = 1e-4
    c_recent: float = 0.1
    damping: float = 0.1
    cg_iters: int = 15
    max_backtracks: int = 10
    accept_ratio: float = 0.1
    reservoir_size: int = 200_000
    ood_batch: int = 200
    ood_candidates_factor: int = 5
    detector: str = "l2"
    ood_threshold: float | str = "env"
    ood_auto_rule: str = "quantile"
    ood_target_fraction: float = 0.5
    ood_std_threshold: float = 1.0
    auto_entropy: bool = True
    entropy_base: float = 0.03
    entropy_target: float = 0.1
    entropy_lr: float = 1e-3


class LCPO(OnPolicyAgent):
    """Online LCPO agent (see module docstring).

    Requires an environment that declares its context (``env.unwrapped.context_spec``).

    Raises:
        AttributeError: if the environment declares no context; ValueError for an unknown detector, an
            ``entropy_target >= 1``, or a ``reservoir_size`` below ``ood_batch`` (no anchor batch could ever be
            found; :func:`lcpo.ood.check_ood_sizes`).

    Warns:
        UserWarning: for ``entropy_target > 0.95`` (see :func:`lcpo.numerics.categorical.entropy_target_nats`).

    Example:
        >>> import gymnasium as gym, lcpo.envs
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        >>> agent = LCPO(env, seed=0, reservoir_size=1000).learn(400)
        >>> agent.updates
        2
    """

    name = "lcpo"
    Hyperparameters = LCPOHyperparameters

    def __init__(self, env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        self.context_spec = get_context_spec(env)
        self.detector = make_detector(hp.detector, self.context_spec, hp.ood_threshold, rule=hp.ood_auto_rule,
                                      target_fraction=hp.ood_target_fraction, std_threshold=hp.ood_std_threshold)
        check_ood_sizes(hp.reservoir_size, hp.ood_batch, "LCPO")
        self.reservoir = ReservoirBuffer(hp.reservoir_size, self.obs_dim, self.rngs["buffer"])
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=hp.entropy_lr)
        # rejects a fraction >= 1 (ln K is unreachable), warns above 0.95 (lcpo.numerics.categorical.entropy_target_nats)
        self.target_entropy = categorical.entropy_target_nats(hp.entropy_target, self.action_bins,
                                                              self.action_dims, "LCPO")
        self.constrained_updates = 0
        self.accepted_steps = 0

    @property
    def alpha(self) -> float:
        """Current entropy temperature (0 if automatic tuning is off)."""
        return self.hp.entropy_base * math.exp(self.log_alpha.item()) if self.hp.auto_entropy else 0.0

    def update(self) -> dict:
        """One LCPO update on the full rollout batch; returns diagnostics (namespaced keys)."""
        hp = self.hp
        b = self._batch()
        obs, actions, adv, mask = b["obs"], b["actions"], b["adv"], b["mask"]
        diag = {"train/value_loss": self._critic_step(obs, b["ret"])}

        recent_np = self.rollout.obs[: self.rollout.ptr]
        self.detector.fit(recent_np)
        anchors, ood_frac = sample_ood(self.reservoir, self.detector, hp.ood_batch, hp.ood_candidates_factor)
        diag["ood/fraction"] = ood_frac
        threshold = self.detector.threshold_report  # NaN only before an automatic threshold's first calibration
        if math.isfinite(threshold):
            diag["ood/threshold"] = threshold
        alpha = self.alpha
        msum = mask.sum().clamp(min=1.0)

        with torch.no_grad():
            logp_old_all = self.actor.log_probs(obs)
            logp_old = CategoricalPolicy.log_prob_of(logp_old_all, actions)

        n = obs.shape[0]
        # states the policy is evaluated on: the recent batch, then (when found) the OOD anchors, in one forward
        eval_obs = obs if anchors is None else torch.cat([obs, torch.from_numpy(anchors)])
        last = {}

        def surrogate() -> torch.Tensor:
            logp_eval = self.actor.log_probs(eval_obs)
            logp_all = logp_eval[:n]
            last["logp_eval"] = logp_eval  # reused by the KL functions, evaluated next at the same parameters
            ratio = torch.exp(CategoricalPolicy.log_prob_of(logp_all, actions) - logp_old)
            ent = CategoricalPolicy.entropy_of(logp_all).mean()
            return -(adv * ratio * mask).sum() / msum - alpha * ent

        if anchors is not None:
            anchor_obs = eval_obs[n:]
            with torch.no_grad():
                logp_anchor_old = self.actor.log_probs(anchor_obs)

            def kl_anchor() -> torch.Tensor:
                return CategoricalPolicy.kl(logp_anchor_old, last["logp_eval"][n:]).mean()

            def kl_recent() -> torch.Tensor:
                return CategoricalPolicy.kl(logp_old_all, last["logp_eval"][:n]).mean()

            loss = surrogate()
            grad = flat_grad(loss, self.actor)
            fvp = make_fvp(self.actor, anchor_obs, hp.damping)
            res = kl_constrained_step(self.actor, grad, fvp, surrogate, (kl_recent, kl_anchor),
                                      (hp.c_recent, hp.c_anchor), scale_kl=hp.c_anchor, cg_iters=hp.cg_iters,
                                      max_backtracks=hp.max_backtracks, accept_ratio=hp.accept_ratio,
                                      loss_old=loss.item())
            self.constrained_updates += 1
            self.accepted_steps += int(res.accepted)
            diag.update({"train/constrained": 1.0, "train/line_search_ok": float(res.accepted),
                         "train/backtracks": float(res.backtracks), "train/kl_anchor": res.kls[1],
                         "train/kl_recent": res.kls[0], "train/policy_loss": loss.item(),
                         "train/skipped_update": float(res.skipped)})
        else:
            loss = surrogate()
            self.actor_opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.actor.parameters(), hp.max_grad_norm)
            self.actor_opt.step()
            diag.update({"train/constrained": 0.0, "train/policy_loss": loss.item(), "train/skipped_update": 0.0})

        self.reservoir.add_batch(recent_np)

        # temperature step on the batch's entropy under the policy that collected it (before this update)
        entropy = float(CategoricalPolicy.entropy_of(logp_old_all).mean())
        if hp.auto_entropy:
            alpha_loss = self.log_alpha * (entropy - self.target_entropy)
            self.alpha_opt.zero_grad(set_to_none=True)
            alpha_loss.sum().backward()
            self.alpha_opt.step()
        diag.update({"train/entropy": entropy, "train/alpha": self.alpha})
        return diag

    def state_dict(self) -> dict:
        """The on-policy state plus reservoir, temperature, its optimizer, LCPO's counters and (for an automatic
        OOD threshold) the calibrator's state."""
        state = super().state_dict()
        state.update({"reservoir": self.reservoir.state_dict(), "log_alpha": self.log_alpha.detach().clone(),
                      "alpha_opt": self.alpha_opt.state_dict(), "constrained_updates": self.constrained_updates,
                      "accepted_steps": self.accepted_steps})
        if isinstance(self.detector, AutoThreshold):
            state["ood_calibration"] = self.detector.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly."""
        super().load_state_dict(state)
        self.reservoir.load_state_dict(state["reservoir"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.alpha_opt.load_state_dict(state["alpha_opt"])
        self.constrained_updates = int(state["constrained_updates"])
        self.accepted_steps = int(state["accepted_steps"])
        load_calibration(self.detector, state)
