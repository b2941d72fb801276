"""Proximal policy optimization with the clipped surrogate (Schulman et al. 2017, "PPO-Clip", eq. 7).

Every rollout of ``rollout_steps`` transitions (200, as A2C and LCPO, so all online agents update equally
often):

1. GAE advantages and lambda-returns from the pre-update critic (:func:`lcpo.numerics.returns.gae_batch`;
   truncation bootstraps, termination does not);
2. up to ``epochs`` passes over the batch in shuffled minibatches of ``minibatch_size``; on each minibatch the
   critic takes one Adam step on the lambda-returns and the actor one Adam step on the clipped surrogate
   :func:`clipped_surrogate` (plus any extra term a subclass adds, e.g. LCPO-P's anchor cross-entropy);
3. early stop on KL: after every actor step the exact mean ``KL(pi_old || pi)`` over the whole batch is
   computed; once it exceeds ``max_kl`` no further steps are taken (the step that crossed is kept, as in
   Spinning Up and Stable-Baselines3).

The defaults follow the LCPO paper's appendix E.1 settings for the PPO core of LCPO-P (clip 0.2, up to 30
iterations, max KL 0.01) with the Table 11 networks and learning rates. With ``minibatch_size`` equal to
``rollout_steps`` (the default) each epoch is one full-batch step, so ``epochs`` is the number of iterations.

Batch-native (:class:`~lcpo.agents.batched.BatchOnPolicyAgent`, issue 26 item 1): ``PPO.population(env, seeds)``
holds N independent learners with a leading seed axis; ``PPO(env, seed)`` is the population of one. Per seed:
the advantage statistics, the minibatch shuffles (each seed's own ``buffer`` generator, drawn only while that
seed still steps), the surrogate, the gradient clips, both Adams' step counts, the KL and the early stop. The
seeds step in lockstep; a seed whose KL crossed ``max_kl`` leaves the active set (a mask, never a branch on
another seed's data) and the epochs end when no seed is active. A seed's run in a population is its solo run
bit for bit (plain MLPs; ``tests/agents/test_population_agents.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from lcpo.agents.base import OnPolicyHyperparameters
from lcpo.agents.batched import BatchOnPolicyAgent
from lcpo.agents.nets import CategoricalPolicy

__all__ = ["PPO", "PPOHyperparameters", "clipped_surrogate", "normalize_advantages"]


def normalize_advantages(adv: torch.Tensor, mask: torch.Tensor | None = None, eps: float = 1e-8) -> torch.Tensor:
    """Standardise advantages with statistics of the steps the policy loss uses: ``(A - mean) / (std + eps)``.

    The statistics are taken along the last axis (one batch per leading index, e.g. per seed): the mean and the
    (unbiased) standard deviation over the steps with ``mask > 0`` only; forced steps (``mask = 0``, left out of
    the loss) neither shift nor scale the others, and come back as 0. A batch with fewer than two loss steps has
    no spread to estimate and is returned unchanged.

    Args:
        adv: ``(..., B)`` float advantages (``(B,)`` for one batch, ``(n, B)`` for ``n`` seeds).
        mask: optional ``(..., B)`` 0/1 weights (None: every step is used).
        eps: added to the standard deviation.

    Returns:
        ``(..., B)`` tensor of ``adv``'s dtype.

    Raises:
        ValueError: if the shapes differ.

    Example:
        >>> normalize_advantages(torch.tensor([1.0, 3.0, -100.0, -100.0]), torch.tensor([1.0, 1.0, 0.0, 0.0]))
        tensor([-0.7071,  0.7071,  0.0000,  0.0000])
    """
    if mask is None:
        mask = torch.ones_like(adv)
    if mask.shape != adv.shape:
        raise ValueError(f"normalize_advantages: shapes differ: adv {tuple(adv.shape)}, mask {tuple(mask.shape)}")
    used = mask > 0
    w = used.to(adv.dtype)
    count = w.sum(-1, keepdim=True)
    mean = (adv * w).sum(-1, keepdim=True) / count.clamp(min=1.0)
    centred = (adv - mean) * w
    std = ((centred * centred).sum(-1, keepdim=True) / (count - 1.0).clamp(min=1.0)).sqrt()
    zero = torch.zeros((), dtype=adv.dtype)
    out = torch.where(used, centred / (std + eps), zero)
    return torch.where(count >= 2.0, out, adv)


def clipped_surrogate(logp: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor, clip: float,
                      mask: torch.Tensor | None = None) -> torch.Tensor:
    """PPO's clipped surrogate loss (to minimise): ``-mean(min(r A, clip(r, 1-eps, 1+eps) A))``.

    ``r = exp(logp - logp_old)`` is the probability ratio (PPO paper eq. 7, sign flipped to a loss). For
    ``A > 0`` the gradient is zero once ``r > 1 + eps``; for ``A < 0`` once ``r < 1 - eps``. The mean is taken
    along the last axis (one loss per leading index, e.g. per seed).

    Args:
        logp: ``(..., B)`` log-probabilities of the taken actions under the current policy (differentiable).
        logp_old: ``(..., B)`` the same under the policy that collected the batch.
        adv: ``(..., B)`` advantages.
        clip: ``eps`` in (0, 1).
        mask: optional ``(..., B)`` 0/1 weights (0 for steps whose action was forced by the environment).

    Returns:
        ``(...)`` tensor (a scalar for ``(B,)`` inputs): the masked mean of the negated clipped objective.

    Raises:
        ValueError: if ``clip`` is not in (0, 1) or the shapes differ.
    """
    if not 0.0 < clip < 1.0:
        raise ValueError(f"PPO clip must be in (0, 1), got {clip}")
    if logp.shape != logp_old.shape or logp.shape != adv.shape:
        raise ValueError(f"clipped_surrogate: shapes differ: logp {tuple(logp.shape)}, "
                         f"logp_old {tuple(logp_old.shape)}, adv {tuple(adv.shape)}")
    ratio = torch.exp(logp - logp_old)
    obj = torch.minimum(ratio * adv, ratio.clamp(1.0 - clip, 1.0 + clip) * adv)
    if mask is None:
        return -obj.mean(-1)
    return -(obj * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


@dataclass(frozen=True)
class PPOHyperparameters(OnPolicyHyperparameters):
    """PPO settings (networks and learning rates: paper Table 11; PPO core: paper appendix E.1).

    Attributes:
        network: ``"auto"`` (the environment's ``default_network``, else ``"mlp"``), ``"mlp"``, or a kind
            registered in :data:`lcpo.agents.nets.NETWORKS`.
        hidden: hidden layer sizes of actor and critic.
        actor_lr: Adam learning rate of the actor.
        critic_lr: Adam learning rate of the critic.
        weight_decay: Adam L2 weight decay of both networks.
        gamma: discount per step.
        gae_lambda: GAE lambda.
        rollout_steps: transitions per update (200, as A2C and LCPO).
        max_grad_norm: gradient-norm clip of each network's step.
        clip: ratio clip ``eps`` of the surrogate.
        epochs: maximum passes over the batch ("up to 30 iterations").
        minibatch_size: states per Adam step (default: the whole rollout; when smaller, each epoch visits
            the batch in a fresh random order and its last minibatch may be smaller).
        max_kl: early-stop threshold on the mean KL(pi_old || pi) over the batch (nats).
        normalize_advantages: standardise the batch's advantages (zero mean, unit std) before the epochs, with
            the statistics of the steps the loss uses (forced steps excluded; :func:`normalize_advantages`).
        entropy_coef: entropy bonus weight (0: none, as the paper's baselines).
    """

    clip: float = 0.2
    epochs: int = 30
    minibatch_size: int = 200
    max_kl: float = 0.01
    normalize_advantages: bool = True
    entropy_coef: float = 0.0


#: a subclass's extra actor-loss term: ``term(js)`` for the active positions ``js`` ((m,) int64, positions in the
#: update's ``idx``) returns their ``(m,)`` loss terms (zero where a seed has none), or None for none at all.
ExtraLoss = Callable[[np.ndarray], "torch.Tensor | None"]


class PPO(BatchOnPolicyAgent):
    """Online PPO-Clip with a product-of-categoricals actor (see module docstring).

    Subclasses may add a per-seed loss term through :meth:`_extra_loss` and act after the policy epochs through
    :meth:`_after_update` (LCPO-P uses both).

    Raises:
        ValueError: for a clip outside (0, 1), ``epochs < 1``, ``minibatch_size < 1`` or ``max_kl <= 0``.

    Example:
        >>> import gymnasium as gym, lcpo.envs
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        >>> PPO(env, seed=0).learn(400).updates
        2
        >>> pop = PPO.population(env, seeds=[0, 1, 2])
        >>> pop.act_batch(np.zeros((3, 9), np.float32)).shape
        (3, 1)
    """

    name = "ppo"
    Hyperparameters = PPOHyperparameters

    def __init__(self, env, seed: int = 0, hparams=None, *, seeds=None, **overrides):
        super().__init__(env, seed, hparams, seeds=seeds, **overrides)
        hp = self.hp
        if not 0.0 < hp.clip < 1.0:
            raise ValueError(f"PPO clip must be in (0, 1), got {hp.clip}")
        if hp.epochs < 1 or hp.minibatch_size < 1:
            raise ValueError(f"PPO needs epochs >= 1 and minibatch_size >= 1, got {hp.epochs}, {hp.minibatch_size}")
        if not hp.max_kl > 0.0:
            raise ValueError(f"PPO max_kl must be positive, got {hp.max_kl}")
        self.seed_early_stops = np.zeros(self.n_seeds, dtype=np.int64)

    @property
    def early_stops(self):
        """Updates ended early by the KL threshold: an int (single agent) or the ``(N,)`` int64 array."""
        return int(self.seed_early_stops[0]) if self.n_seeds == 1 else self.seed_early_stops

    # -- hooks for variants --------------------------------------------------------------------------------
    def _extra_loss(self, idx: np.ndarray, batch: dict, diags: list[dict]) -> ExtraLoss | None:
        """Hook called once per update before the epochs: return an :data:`ExtraLoss` added to every actor step
        of the seeds it covers, or None (plain PPO). May write per-seed diagnostics into ``diags`` (one dict per
        slot of ``idx``)."""
        return None

    def _after_update(self, idx: np.ndarray, batch: dict, diags: list[dict]) -> None:
        """Hook called once per update after the epochs (plain PPO: nothing)."""

    # -- the update -----------------------------------------------------------------------------------------
    def update(self, idx: np.ndarray) -> list[dict]:
        """Up to ``epochs`` passes of minibatch steps with a per-seed early stop on KL, for the full rollout
        batches of the seed slots ``idx`` (``(n,)`` int64); one diagnostics dict per slot."""
        hp = self.hp
        b = self._batch(idx)
        obs, actions, adv, mask, ret = b["obs"], b["actions"], b["adv"], b["mask"], b["ret"]
        if hp.normalize_advantages:
            adv = normalize_advantages(adv, mask)  # per seed, statistics of the loss's (unforced) steps only
        n, T = adv.shape
        with torch.no_grad():
            logp_old_all = self.actors.log_probs(obs, b["sel"])
            logp_old = CategoricalPolicy.log_prob_of(logp_old_all, actions)
        diags: list[dict] = [{} for _ in range(n)]
        extra = self._extra_loss(idx, b, diags)
        mb = min(hp.minibatch_size, T)
        active = np.ones(n, dtype=bool)
        steps = np.zeros(n, dtype=np.int64)
        kl = np.zeros(n)
        value_loss = np.zeros(n)
        policy_loss = np.zeros(n)
        perm = np.zeros((n, T), dtype=np.int64) if mb < T else None
        cur = None  # the active set's tensors, rebuilt when a seed stops
        for _ in range(hp.epochs):
            if not active.any():
                break
            if perm is not None:  # each still-active seed draws its own order (its solo run's draws)
                for j in np.flatnonzero(active):
                    perm[j] = self.seed_rngs[int(idx[j])]["buffer"].permutation(T)
            for start in range(0, T, mb):
                if cur is None:
                    cur = self._active_view(np.flatnonzero(active), idx, obs, actions, adv, mask, ret, logp_old,
                                            logp_old_all)
                js, sub = cur["js"], cur
                if perm is not None:
                    cols = torch.from_numpy(perm[js, start:start + mb])
                    rows = torch.arange(len(js)).unsqueeze(1)
                    sub = {k: cur[k][rows, cols] for k in ("obs", "actions", "adv", "mask", "ret", "logp_old")}
                value_loss[js] = self._critic_step({"obs": sub["obs"], "ret": sub["ret"], "sel": cur["sel"],
                                                    "idx": cur["rows"]})
                logp_all = self.actors.log_probs(sub["obs"], cur["sel"])
                logp = CategoricalPolicy.log_prob_of(logp_all, sub["actions"])
                loss = clipped_surrogate(logp, sub["logp_old"], sub["adv"], hp.clip, sub["mask"])
                policy_loss[js] = loss.detach().numpy()
                if hp.entropy_coef:
                    loss = loss - hp.entropy_coef * CategoricalPolicy.entropy_of(logp_all).mean(dim=1)
                if extra is not None:
                    term = extra(js)
                    if term is not None:
                        loss = loss + term
                self._actor_step(loss, {"sel": cur["sel"], "idx": cur["rows"]})
                steps[js] += 1
                with torch.no_grad():
                    now = CategoricalPolicy.kl(cur["logp_old_all"], self.actors.log_probs(cur["obs"], cur["sel"]))
                    kl[js] = now.mean(dim=1).double().numpy()
                crossed = kl[js] > hp.max_kl
                if crossed.any():
                    active[js[crossed]] = False
                    cur = None
                    if not active.any():
                        break
        stopped = ~active
        self.seed_early_stops[idx] += stopped
        with torch.no_grad():
            logp_all = self.actors.log_probs(obs, b["sel"])
            ratio = torch.exp(CategoricalPolicy.log_prob_of(logp_all, actions) - logp_old)
            clipped = ((ratio - 1.0).abs() > hp.clip).float()
            clip_frac = ((clipped * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).tolist()  # loss's steps
            entropy = CategoricalPolicy.entropy_of(logp_all).mean(dim=1).tolist()
        for j in range(n):
            diags[j].update({"train/policy_loss": float(policy_loss[j]), "train/value_loss": float(value_loss[j]),
                             "train/kl": float(kl[j]), "train/iterations": float(steps[j]),
                             "train/early_stop": float(stopped[j]), "train/clip_fraction": clip_frac[j],
                             "train/entropy": entropy[j]})
        self._after_update(idx, b, diags)
        return diags

    def _active_view(self, js, idx, obs, actions, adv, mask, ret, logp_old, logp_old_all) -> dict:
        """The rows ``js`` (positions in ``idx``) of the update's tensors, their seed slots and stack selector."""
        n = len(idx)
        rows = np.asarray(idx)[js]
        pos = None if len(js) == n else torch.from_numpy(js)

        def pick(t):
            return t if pos is None else t[pos]

        return {"js": js, "rows": rows, "sel": self._sel(rows, self.n_seeds), "obs": pick(obs),
                "actions": pick(actions), "adv": pick(adv), "mask": pick(mask), "ret": pick(ret),
                "logp_old": pick(logp_old), "logp_old_all": pick(logp_old_all)}

    # -- persistence -----------------------------------------------------------------------------------
    def seed_state_dict(self, k: int) -> dict:
        """Seed slot ``k``'s state in the single PPO agent's format (the on-policy state plus the early-stop
        counter)."""
        state = super().seed_state_dict(k)
        state["early_stops"] = int(self.seed_early_stops[k])
        return state

    def load_seed_state_dict(self, k: int, state: dict) -> None:
        """Restore seed slot ``k`` from a single PPO agent's ``state_dict`` exactly."""
        super().load_seed_state_dict(k, state)
        self.seed_early_stops[k] = int(state["early_stops"])
