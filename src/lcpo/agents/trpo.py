"""Trust region policy optimization, single-path (Schulman et al. 2015, section 5.1 and appendix C).

Every rollout of ``rollout_steps`` transitions (3,200 in the paper, Table 11):

1. GAE advantages and lambda-returns from the pre-update critic (:func:`lcpo.numerics.returns.gae`);
2. the critic regresses the lambda-returns with Adam, ``critic_epochs`` passes in shuffled minibatches of
   ``critic_minibatch`` states (defaults: one pass of 200-state minibatches, i.e. the same number of critic
   steps per sample as A2C);
3. the actor takes one KL-constrained step (:func:`lcpo.optim.kl_constrained_step`, the step LCPO uses): the
   natural-gradient direction of the surrogate ``-mean(A_t pi(a_t|s_t) / pi_old(a_t|s_t))`` under the damped
   Fisher of the batch itself (conjugate gradient), scaled so the quadratic KL model equals ``max_kl``, then a
   backtracking line search that accepts the first candidate with ``KL_batch <= max_kl`` and an improved
   surrogate (else the parameters stay bit-identical). If the batch's Fisher-vector product is not positive
   definite or not finite, the actor's step is skipped (parameters unchanged, ``train/skipped_update = 1``)
   and the run goes on.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lcpo.agents.base import OnPolicyAgent, OnPolicyHyperparameters
from lcpo.agents.nets import CategoricalPolicy
from lcpo.optim.constrained import kl_constrained_step
from lcpo.optim.fisher import flat_grad, make_fvp

__all__ = ["TRPO", "TRPOHyperparameters"]


@dataclass(frozen=True)
class TRPOHyperparameters(OnPolicyHyperparameters):
    """TRPO settings (paper Table 11 defaults; spec ``windy-gym.md``).

    Attributes:
        network: ``"auto"`` (the environment's ``default_network``, else ``"mlp"``), ``"mlp"``, or a kind
            registered in :data:`lcpo.agents.nets.NETWORKS`.
        hidden: hidden layer sizes of actor and critic.
        actor_lr: unused by TRPO's step (kept so the actor optimizer of the shared base exists).
        critic_lr: Adam learning rate of the critic.
        weight_decay: Adam L2 weight decay.
        gamma: discount per step.
        gae_lambda: GAE lambda.
        rollout_steps: transitions per update (3,200).
        max_grad_norm: gradient-norm clip of the critic steps.
        max_kl: trust-region size: KL limit on the batch and the KL the full step is scaled to (nats).
        damping: Fisher damping added in conjugate gradient.
        cg_iters: conjugate-gradient iterations.
        max_backtracks: line-search halvings.
        accept_ratio: minimal actual/expected surrogate improvement in the line search.
        critic_minibatch: states per critic Adam step (3,200: one step on the whole batch, as the authors'
            TRPO).
        critic_epochs: passes of the critic over each batch.
    """

    rollout_steps: int = 3200
    max_kl: float = 0.01
    damping: float = 0.1
    cg_iters: int = 15
    max_backtracks: int = 10
    accept_ratio: float = 0.1
    critic_minibatch: int = 3200
    critic_epochs: int = 1


class TRPO(OnPolicyAgent):
    """Online single-path TRPO with a product-of-categoricals actor (see module docstring).

    Raises:
        ValueError: for ``max_kl <= 0``, ``critic_minibatch < 1`` or ``critic_epochs < 1``.

    Example:
        >>> import gymnasium as gym, lcpo.envs
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        >>> TRPO(env, seed=0, rollout_steps=400).learn(800).updates
        2
    """

    name = "trpo"
    Hyperparameters = TRPOHyperparameters

    def __init__(self, env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        if not hp.max_kl > 0.0:
            raise ValueError(f"TRPO max_kl must be positive, got {hp.max_kl}")
        if hp.critic_minibatch < 1 or hp.critic_epochs < 1:
            raise ValueError(f"TRPO needs critic_minibatch >= 1 and critic_epochs >= 1, "
                             f"got {hp.critic_minibatch}, {hp.critic_epochs}")
        self.accepted_steps = 0

    def _fit_critic(self, obs: torch.Tensor, ret: torch.Tensor) -> float:
        """Adam steps on the lambda-returns in shuffled minibatches; returns the last minibatch's loss."""
        hp = self.hp
        n = obs.shape[0]
        loss = 0.0
        for _ in range(hp.critic_epochs):
            perm = torch.from_numpy(self.rngs["buffer"].permutation(n))
            for start in range(0, n, hp.critic_minibatch):
                idx = perm[start:start + hp.critic_minibatch]
                loss = self._critic_step(obs[idx], ret[idx])
        return loss

    def update(self) -> dict:
        """One TRPO update on the full batch; returns diagnostics (namespaced keys)."""
        hp = self.hp
        b = self._batch()
        obs, actions, adv, mask = b["obs"], b["actions"], b["adv"], b["mask"]
        diag = {"train/value_loss": self._fit_critic(obs, b["ret"])}
        msum = mask.sum().clamp(min=1.0)
        with torch.no_grad():
            logp_old_all = self.actor.log_probs(obs)
            logp_old = CategoricalPolicy.log_prob_of(logp_old_all, actions)

        def surrogate() -> torch.Tensor:
            logp = CategoricalPolicy.log_prob_of(self.actor.log_probs(obs), actions)
            return -(adv * torch.exp(logp - logp_old) * mask).sum() / msum

        def kl_batch() -> torch.Tensor:
            return CategoricalPolicy.kl(logp_old_all, self.actor.log_probs(obs)).mean()

        loss = surrogate()
        grad = flat_grad(loss, self.actor)
        fvp = make_fvp(self.actor, obs, hp.damping)
        res = kl_constrained_step(self.actor, grad, fvp, surrogate, (kl_batch,), (hp.max_kl,),
                                  scale_kl=hp.max_kl, cg_iters=hp.cg_iters, max_backtracks=hp.max_backtracks,
                                  accept_ratio=hp.accept_ratio)
        self.accepted_steps += int(res.accepted)
        with torch.no_grad():
            entropy = float(CategoricalPolicy.entropy_of(self.actor.log_probs(obs)).mean())
        # every TRPO update is a constrained step: "train/constrained" makes the run summary's
        # line_search_accept_fraction (accepted / constrained) the fraction of accepted steps
        diag.update({"train/policy_loss": loss.item(), "train/constrained": 1.0,
                     "train/line_search_ok": float(res.accepted),
                     "train/backtracks": float(res.backtracks), "train/kl": res.kls[0],
                     "train/improvement": res.improvement, "train/entropy": entropy,
                     "train/skipped_update": float(res.skipped)})
        return diag

    def state_dict(self) -> dict:
        """:meth:`OnPolicyAgent.state_dict` plus the accepted-step counter."""
        state = super().state_dict()
        state["accepted_steps"] = self.accepted_steps
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly."""
        super().load_state_dict(state)
        self.accepted_steps = int(state["accepted_steps"])
