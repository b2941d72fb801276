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

Batch-native (:class:`~lcpo.agents.batched.BatchOnPolicyAgent`): ``LCPO.population(env, seeds)`` holds N
independent learners; ``LCPO(env, seed)`` is the population of one. Per seed: detector and threshold calibration,
reservoir, anchors, temperature and its Adam, the actor's Adam (stepping only on updates without anchors). Seeds
with anchors take the constrained step together (:func:`lcpo.optim.constrained.kl_constrained_step_batch`: CG
with per-seed scalars, each seed's solve to its own convergence, a line search until the last seed accepts); the
Fisher-vector products are each seed's own (:func:`lcpo.optim.fisher.make_fvp` on its module; for plain MLPs the
solve runs in NumPy on :func:`lcpo.optim.fisher.mlp_fvp`'s NumPy product). The policy gradient comes from a forward
pass on the recent batch alone; the anchors join the forward pass in the line search, where their KL is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from lcpo.numerics import categorical
from lcpo.agents.base import OnPolicyHyperparameters
from lcpo.agents.batched import BatchOnPolicyAgent
from lcpo.agents.stacked import SeedAdam
from lcpo.envs.context import get_context_spec
from lcpo.memory.reservoir import ReservoirBuffer
from lcpo.agents.nets import CategoricalPolicy
from lcpo.ood.calibration import AutoThreshold, load_calibration
from lcpo.ood.detectors import make_detector
from lcpo.ood.sampler import check_ood_sizes, sample_ood
from lcpo.optim.fisher import make_fvp

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


class LCPO(BatchOnPolicyAgent):
    """Online LCPO agent (see module docstring).

    Requires an environment that declares its context (``env.unwrapped.context_spec``).

    Raises:
        AttributeError: if the environment declares no context (:class:`~lcpo.envs.context.MissingContextError`,
            also a ValueError); ValueError for an unknown detector or automatic-threshold rule, an
            ``ood_threshold`` that is neither a positive number nor ``"auto"``/``"env"``, invalid automatic
            settings (:func:`lcpo.ood.detectors.make_detector`), an ``entropy_target`` outside ``[0, 1)``, a
            ``reservoir_size`` below ``ood_batch`` (no anchor batch could ever be found;
            :func:`lcpo.ood.check_ood_sizes`) or a reservoir larger than this machine's memory
            (:class:`~lcpo.memory.reservoir.ReservoirBuffer`); and the errors of
            :class:`~lcpo.agents.batched.BatchOnPolicyAgent` (invalid hyperparameters, bad seeds, an unusable
            device; TypeError for unsupported spaces).

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

    def __init__(self, env, seed: int = 0, hparams=None, *, seeds=None, **overrides):
        super().__init__(env, seed, hparams, seeds=seeds, **overrides)
        hp = self.hp
        self.context_spec = get_context_spec(env)
        self.detectors = [make_detector(hp.detector, self.context_spec, hp.ood_threshold, rule=hp.ood_auto_rule,
                                        target_fraction=hp.ood_target_fraction, std_threshold=hp.ood_std_threshold)
                          for _ in self.seeds]
        check_ood_sizes(hp.reservoir_size, hp.ood_batch, "LCPO")
        self.reservoirs = [ReservoirBuffer(hp.reservoir_size, self.obs_dim, r["buffer"]) for r in self.seed_rngs]
        self.log_alphas = torch.nn.Parameter(torch.zeros(self.n_seeds, 1, device=self.device))
        self.alpha_opt = SeedAdam([self.log_alphas], lr=hp.entropy_lr)
        # rejects a fraction >= 1 (ln K is unreachable), warns above 0.95 (lcpo.numerics.categorical.entropy_target_nats)
        self.target_entropy = categorical.entropy_target_nats(hp.entropy_target, self.action_bins,
                                                              self.action_dims, "LCPO")
        self.seed_constrained_updates = np.zeros(self.n_seeds, dtype=np.int64)
        self.seed_accepted_steps = np.zeros(self.n_seeds, dtype=np.int64)

    # -- the single agent's view (N = 1) ---------------------------------------------------------------
    @property
    def detector(self):
        """The single agent's OOD detector (N = 1 only).

        Raises:
            AttributeError: for a population of more than one seed.
        """
        self._solo("detector")
        return self.detectors[0]

    @property
    def reservoir(self) -> ReservoirBuffer:
        """The single agent's reservoir (N = 1 only).

        Raises:
            AttributeError: for a population of more than one seed.
        """
        self._solo("reservoir")
        return self.reservoirs[0]

    @property
    def log_alpha(self) -> torch.Tensor:
        """The single agent's log-temperature ``(1,)`` (a view of the stacked ``(N, 1)``; N = 1 only).

        Raises:
            AttributeError: for a population of more than one seed.
        """
        self._solo("log_alpha")
        return self.log_alphas[0]

    @property
    def constrained_updates(self):
        """Updates that took the constrained step: an int (single agent) or ``(N,)`` int64 array."""
        return int(self.seed_constrained_updates[0]) if self.n_seeds == 1 else self.seed_constrained_updates

    @property
    def accepted_steps(self):
        """Constrained steps the line search accepted: an int (single agent) or ``(N,)`` int64 array."""
        return int(self.seed_accepted_steps[0]) if self.n_seeds == 1 else self.seed_accepted_steps

    def seed_alpha(self, k: int) -> float:
        """Seed slot ``k``'s entropy temperature (0 if automatic tuning is off).

        Raises:
            IndexError: for ``k`` outside ``[-N, N)`` while automatic tuning is on.
        """
        return self.hp.entropy_base * math.exp(self.log_alphas[k, 0].item()) if self.hp.auto_entropy else 0.0

    @property
    def alpha(self) -> float:
        """Current entropy temperature of the single agent (0 if automatic tuning is off; N = 1 only).

        Raises:
            AttributeError: for a population of more than one seed.
        """
        self._solo("alpha")
        return self.seed_alpha(0)

    # -- the update ------------------------------------------------------------------------------------
    def update(self, idx: np.ndarray) -> list[dict]:
        """One LCPO update (paper Algorithms 1-3; module docstring) on the full rollout batches of the seed slots
        ``idx`` (``(n,)`` int64); one diagnostics dict per slot of ``idx``.

        Raises:
            ValueError: for non-finite or float32-overflowing advantages or returns, a non-finite critic loss
                (:mod:`lcpo.numerics.finite`), or a non-finite context value or candidate distance of an automatic
                OOD threshold (:meth:`lcpo.ood.calibration.AutoThreshold.fit`, ``calibrate``).
        """
        hp = self.hp
        b = self._batch(idx)
        n = len(idx)
        obs, actions, adv, mask = b["obs"], b["actions"], b["adv"], b["mask"]
        value_loss = self._critic_step(b)
        diags = [{"train/value_loss": float(value_loss[j])} for j in range(n)]
        T = self.rollouts.size
        anchors: list = []
        for j, k in enumerate(idx):
            recent_np = self.rollouts.obs[k, :T]
            det = self.detectors[k]
            det.fit(recent_np)
            a, ood_frac = sample_ood(self.reservoirs[k], det, hp.ood_batch, hp.ood_candidates_factor)
            anchors.append(a)
            diags[j]["ood/fraction"] = ood_frac
            threshold = det.threshold_report  # NaN only before an automatic threshold's first calibration
            if math.isfinite(threshold):
                diags[j]["ood/threshold"] = threshold
        alphas = torch.tensor([self.seed_alpha(k) for k in idx], dtype=torch.float64, device=self.device)
        msum = mask.sum(dim=1).clamp(min=1.0)
        with torch.no_grad():
            logp_old_all = self.actors.log_probs(obs, b["sel"])
            logp_old = CategoricalPolicy.log_prob_of(logp_old_all, actions)

        con = [j for j in range(n) if anchors[j] is not None]
        plain = [j for j in range(n) if anchors[j] is None]
        if plain:
            self._plain_step(plain, idx, b, logp_old, msum, alphas, diags)
        if con:
            self._constrained_step(con, idx, b, logp_old, logp_old_all, msum, alphas, anchors, diags)

        for k in idx:
            self.reservoirs[k].add_batch(self.rollouts.obs[k, :T])

        # temperature step on the batch's entropy under the policy that collected it (before this update)
        entropy = CategoricalPolicy.entropy_of(logp_old_all).mean(dim=1).tolist()
        if hp.auto_entropy:
            diff = torch.tensor([e - self.target_entropy for e in entropy], dtype=torch.float32, device=self.device)
            rows = self._dev(torch.from_numpy(np.asarray(idx, dtype=np.int64)))
            alpha_loss = (self.log_alphas[rows, 0] * diff).sum()
            self.alpha_opt.zero_grad()
            alpha_loss.backward()
            self.alpha_opt.step(self._mask_of(idx))
        for j, k in enumerate(idx):
            diags[j].update({"train/entropy": float(entropy[j]), "train/alpha": self.seed_alpha(k)})
        return diags

    def _rows_of(self, idx, js):
        return self._dev(torch.from_numpy(np.asarray([idx[j] for j in js], dtype=np.int64)))

    def _sub(self, js, n):
        return None if len(js) == n else torch.tensor(js, dtype=torch.int64, device=self.device)

    def _plain_step(self, js, idx, b, logp_old, msum, alphas, diags) -> None:
        """The plain A2C-like step (no anchors) of the slots ``idx[js]``: one per-seed Adam step of the actor."""
        n = len(idx)
        sub = self._sub(js, n)
        sel = None if len(js) == self.n_seeds else self._rows_of(idx, js)

        def pick(t):
            return t if sub is None else t[sub]

        logp_all = self.actors.log_probs(pick(b["obs"]), sel)
        ratio = torch.exp(CategoricalPolicy.log_prob_of(logp_all, pick(b["actions"])) - pick(logp_old))
        ent = CategoricalPolicy.entropy_of(logp_all).mean(dim=1)
        loss = -(pick(b["adv"]) * ratio * pick(b["mask"])).sum(dim=1) / pick(msum) - pick(alphas).float() * ent
        self._actor_step(loss, {"sel": sel, "idx": np.asarray([idx[j] for j in js])})
        for j, v in zip(js, loss.detach().tolist()):
            diags[j].update({"train/constrained": 0.0, "train/policy_loss": v, "train/skipped_update": 0.0})

    def _constrained_step(self, js, idx, b, logp_old, logp_old_all, msum, alphas, anchors, diags) -> None:
        """The KL-constrained step (paper Algorithm 1) of the slots ``idx[js]``, taken together."""
        hp = self.hp
        n = len(idx)
        sub = self._sub(js, n)
        seeds = [int(idx[j]) for j in js]
        sel = None if len(js) == self.n_seeds else torch.tensor(seeds, dtype=torch.int64, device=self.device)

        def pick(t):
            return t if sub is None else t[sub]

        obs, actions, adv, mask = pick(b["obs"]), pick(b["actions"]), pick(b["adv"]), pick(b["mask"])
        lo, lo_all, ms, al = pick(logp_old), pick(logp_old_all), pick(msum), pick(alphas).float()
        T = obs.shape[1]
        anchor_obs = self._dev(torch.from_numpy(np.stack([anchors[j] for j in js])))
        eval_obs = torch.cat([obs, anchor_obs], dim=1)
        last = {}

        def surrogate_of(logp_all: torch.Tensor) -> torch.Tensor:
            ratio = torch.exp(CategoricalPolicy.log_prob_of(logp_all, actions) - lo)
            ent = CategoricalPolicy.entropy_of(logp_all).mean(dim=1)
            return -(adv * ratio * mask).sum(dim=1) / ms - al * ent

        def surrogate() -> torch.Tensor:
            logp_eval = self.actors.log_probs(eval_obs, sel)
            last["logp_eval"] = logp_eval  # reused by the KL functions, evaluated next at the same parameters
            return surrogate_of(logp_eval[:, :T])

        with torch.no_grad():
            logp_anchor_old = self.actors.log_probs(anchor_obs, sel)

        def kl_anchor() -> torch.Tensor:
            return CategoricalPolicy.kl(logp_anchor_old, last["logp_eval"][:, T:]).mean(dim=1)

        def kl_recent() -> torch.Tensor:
            return CategoricalPolicy.kl(lo_all, last["logp_eval"][:, :T]).mean(dim=1)

        # the gradient needs only the recent batch: the anchors' rows join the forward pass in the line search
        # (the batched products give each row the same values whatever the number of rows)
        loss = surrogate_of(self.actors.log_probs(obs, sel))
        loss_old = loss.detach().tolist()
        results = self._constrained_actor_step(seeds, loss, surrogate, (kl_recent, kl_anchor),
                                               (hp.c_recent, hp.c_anchor), hp.c_anchor, anchor_obs, make_fvp,
                                               hp.damping, hp.cg_iters, hp.max_backtracks, hp.accept_ratio)
        for j, k, res, lv in zip(js, seeds, results, loss_old):
            self.seed_constrained_updates[k] += 1
            self.seed_accepted_steps[k] += int(res.accepted)
            diags[j].update({"train/constrained": 1.0, "train/line_search_ok": float(res.accepted),
                             "train/backtracks": float(res.backtracks), "train/kl_anchor": res.kls[1],
                             "train/kl_recent": res.kls[0], "train/policy_loss": lv,
                             "train/skipped_update": float(res.skipped)})

    # -- persistence ---------------------------------------------------------------------------------
    def seed_state_dict(self, k: int) -> dict:
        """Seed slot ``k``'s state in the single LCPO agent's format: the on-policy state plus reservoir,
        temperature, its optimizer, LCPO's counters and (for an automatic OOD threshold) the calibrator's state.

        Raises:
            IndexError: for a slot outside ``[0, N)``.
        """
        state = super().seed_state_dict(k)
        state.update({"reservoir": self.reservoirs[k].state_dict(),
                      "log_alpha": self.log_alphas[k].detach().cpu().clone(),
                      "alpha_opt": self.alpha_opt.seed_state_dict(k),
                      "constrained_updates": int(self.seed_constrained_updates[k]),
                      "accepted_steps": int(self.seed_accepted_steps[k])})
        if isinstance(self.detectors[k], AutoThreshold):
            state["ood_calibration"] = self.detectors[k].state_dict()
        return state

    def _load_seed(self, k: int, state: dict) -> None:
        """Restore seed slot ``k`` from a single LCPO agent's ``state_dict`` exactly.

        Raises:
            IndexError: for a slot outside ``[0, N)``.
            ValueError: the errors of :meth:`~lcpo.agents.batched.BatchOnPolicyAgent.load_seed_state_dict`, or an
                OOD calibration that does not fit this agent's threshold
                (:func:`lcpo.ood.calibration.load_calibration`).
            KeyError: for a state without one of LCPO's entries (e.g. another agent's state).
        """
        super()._load_seed(k, state)
        self.reservoirs[k].load_state_dict(state["reservoir"])
        with torch.no_grad():
            self.log_alphas[k].copy_(state["log_alpha"])
        self.alpha_opt.load_seed_state_dict(k, state["alpha_opt"])
        self.seed_constrained_updates[k] = int(state["constrained_updates"])
        self.seed_accepted_steps[k] = int(state["accepted_steps"])
        load_calibration(self.detectors[k], state)
