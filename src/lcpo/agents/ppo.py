"""Proximal policy optimization with the clipped surrogate (Schulman et al. 2017, "PPO-Clip", eq. 7).

Every rollout of ``rollout_steps`` transitions (200, as A2C and LCPO, so all online agents update equally
often):

1. GAE advantages and lambda-returns from the pre-update critic (:func:`lcpo.numerics.returns.gae`; truncation
   bootstraps, termination does not);
2. up to ``epochs`` passes over the batch in shuffled minibatches of ``minibatch_size``; on each minibatch the
   actor takes one Adam step on the clipped surrogate :func:`clipped_surrogate` (plus any extra term a
   subclass adds, e.g. LCPO-P's anchor cross-entropy) and the critic one Adam step on the lambda-returns;
3. early stop on KL: after every actor step the exact mean ``KL(pi_old || pi)`` over the whole batch is
   computed; once it exceeds ``max_kl`` no further steps are taken (the step that crossed is kept, as in
   Spinning Up and Stable-Baselines3).

The defaults follow the LCPO paper's appendix E.1 settings for the PPO core of LCPO-P (clip 0.2, up to 30
iterations, max KL 0.01) with the Table 11 networks and learning rates. With ``minibatch_size`` equal to
``rollout_steps`` (the default) each epoch is one full-batch step, so ``epochs`` is the number of iterations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from lcpo.agents.base import OnPolicyAgent, OnPolicyHyperparameters
from lcpo.agents.nets import CategoricalPolicy

__all__ = ["PPO", "PPOHyperparameters", "clipped_surrogate", "normalize_advantages"]


def normalize_advantages(adv: torch.Tensor, mask: torch.Tensor | None = None, eps: float = 1e-8) -> torch.Tensor:
    """Standardise advantages with statistics of the steps the policy loss uses: ``(A - mean) / (std + eps)``.

    The mean and the (unbiased) standard deviation are taken over the steps with ``mask > 0`` only; forced steps
    (``mask = 0``, left out of the loss) neither shift nor scale the others, and come back as 0. With fewer than
    two loss steps there is no spread to estimate and the advantages are returned unchanged.

    Args:
        adv: ``(B,)`` float advantages.
        mask: optional ``(B,)`` 0/1 weights (None: every step is used).
        eps: added to the standard deviation.

    Returns:
        ``(B,)`` tensor of ``adv``'s dtype.

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
    n = int(used.sum())
    if n < 2:
        return adv
    a = adv[used]
    return torch.where(used, (adv - a.mean()) / (a.std() + eps), torch.zeros((), dtype=adv.dtype))


def clipped_surrogate(logp: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor, clip: float,
                      mask: torch.Tensor | None = None) -> torch.Tensor:
    """PPO's clipped surrogate loss (to minimise): ``-mean(min(r A, clip(r, 1-eps, 1+eps) A))``.

    ``r = exp(logp - logp_old)`` is the probability ratio (PPO paper eq. 7, sign flipped to a loss). For
    ``A > 0`` the gradient is zero once ``r > 1 + eps``; for ``A < 0`` once ``r < 1 - eps``.

    Args:
        logp: ``(B,)`` log-probabilities of the taken actions under the current policy (differentiable).
        logp_old: ``(B,)`` the same under the policy that collected the batch.
        adv: ``(B,)`` advantages.
        clip: ``eps`` in (0, 1).
        mask: optional ``(B,)`` 0/1 weights (0 for steps whose action was forced by the environment).

    Returns:
        Scalar tensor: the masked mean of the negated clipped objective.

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
        return -obj.mean()
    return -(obj * mask).sum() / mask.sum().clamp(min=1.0)


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


class PPO(OnPolicyAgent):
    """Online PPO-Clip with a product-of-categoricals actor (see module docstring).

    Subclasses may add a loss term through :meth:`_extra_loss` and act after the policy epochs through
    :meth:`_after_update` (LCPO-P uses both).

    Raises:
        ValueError: for a clip outside (0, 1), ``epochs < 1``, ``minibatch_size < 1`` or ``max_kl <= 0``.

    Example:
        >>> import gymnasium as gym, lcpo.envs
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        >>> PPO(env, seed=0).learn(400).updates
        2
    """

    name = "ppo"
    Hyperparameters = PPOHyperparameters

    def __init__(self, env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        if not 0.0 < hp.clip < 1.0:
            raise ValueError(f"PPO clip must be in (0, 1), got {hp.clip}")
        if hp.epochs < 1 or hp.minibatch_size < 1:
            raise ValueError(f"PPO needs epochs >= 1 and minibatch_size >= 1, got {hp.epochs}, {hp.minibatch_size}")
        if not hp.max_kl > 0.0:
            raise ValueError(f"PPO max_kl must be positive, got {hp.max_kl}")
        self.early_stops = 0

    # -- hooks for variants --------------------------------------------------------------------------------
    def _extra_loss(self, batch: dict, diag: dict) -> Callable[[], torch.Tensor] | None:
        """Hook called once per update before the epochs: return a callable giving a scalar loss term added
        to every actor step, or None (plain PPO). May write diagnostics into ``diag``."""
        return None

    def _after_update(self, batch: dict, diag: dict) -> None:
        """Hook called once per update after the epochs (plain PPO: nothing)."""

    # -- the update -----------------------------------------------------------------------------------------
    def update(self) -> dict:
        """Up to ``epochs`` passes of minibatch steps with early stop on KL; returns diagnostics."""
        hp = self.hp
        b = self._batch()
        obs, actions, adv, mask, ret = b["obs"], b["actions"], b["adv"], b["mask"], b["ret"]
        if hp.normalize_advantages:
            adv = normalize_advantages(adv, mask)  # statistics of the loss's (unforced) steps only
        n = obs.shape[0]
        with torch.no_grad():
            logp_old_all = self.actor.log_probs(obs)
            logp_old = CategoricalPolicy.log_prob_of(logp_old_all, actions)
        diag: dict = {}
        extra = self._extra_loss(b, diag)
        mb = min(hp.minibatch_size, n)
        steps, kl, stopped = 0, 0.0, False
        value_loss = policy_loss = 0.0
        for _ in range(hp.epochs):
            perm = torch.from_numpy(self.rngs["buffer"].permutation(n)) if mb < n else None
            for start in range(0, n, mb):
                idx = slice(None) if perm is None else perm[start:start + mb]
                value_loss = self._critic_step(obs[idx], ret[idx])
                logp_all = self.actor.log_probs(obs[idx])
                logp = CategoricalPolicy.log_prob_of(logp_all, actions[idx])
                loss = clipped_surrogate(logp, logp_old[idx], adv[idx], hp.clip, mask[idx])
                policy_loss = loss.item()
                if hp.entropy_coef:
                    loss = loss - hp.entropy_coef * CategoricalPolicy.entropy_of(logp_all).mean()
                if extra is not None:
                    loss = loss + extra()
                self.actor_opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.actor.parameters(), hp.max_grad_norm)
                self.actor_opt.step()
                steps += 1
                with torch.no_grad():
                    kl = float(CategoricalPolicy.kl(logp_old_all, self.actor.log_probs(obs)).mean())
                if kl > hp.max_kl:
                    stopped = True
                    break
            if stopped:
                break
        self.early_stops += int(stopped)
        with torch.no_grad():
            logp_all = self.actor.log_probs(obs)
            ratio = torch.exp(CategoricalPolicy.log_prob_of(logp_all, actions) - logp_old)
            clipped = ((ratio - 1.0).abs() > hp.clip).float()
            clip_frac = float((clipped * mask).sum() / mask.sum().clamp(min=1.0))  # over the loss's steps
            entropy = float(CategoricalPolicy.entropy_of(logp_all).mean())
        diag.update({"train/policy_loss": policy_loss, "train/value_loss": value_loss, "train/kl": kl,
                     "train/iterations": float(steps), "train/early_stop": float(stopped),
                     "train/clip_fraction": clip_frac, "train/entropy": entropy})
        self._after_update(b, diag)
        return diag

    def state_dict(self) -> dict:
        """:meth:`OnPolicyAgent.state_dict` plus the early-stop counter."""
        state = super().state_dict()
        state["early_stops"] = self.early_stops
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly."""
        super().load_state_dict(state)
        self.early_stops = int(state["early_stops"])
