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

Batch-native (:class:`~lcpo.agents.batched.BatchOnPolicyAgent`): ``TRPO.population(env, seeds)`` holds N
independent learners (per-seed critic minibatch shuffles, per-seed constrained steps taken together by
:func:`lcpo.optim.constrained.kl_constrained_step_batch`); ``TRPO(env, seed)`` is the population of one. One forward
pass gives the old log-probabilities and the gradient; each line-search candidate's surrogate and KL share one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lcpo.agents.base import OnPolicyHyperparameters
from lcpo.agents.batched import BatchOnPolicyAgent
from lcpo.agents.nets import CategoricalPolicy
from lcpo.optim.fisher import make_fvp

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


def _same_bits(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """True if the contiguous tensors of ``a`` and ``b`` are equal bit for bit (``-0.0`` differs from ``0.0``, a NaN
    equals the same NaN): same shapes, dtypes and bytes."""
    return len(a) == len(b) and all(
        x.shape == y.shape and x.dtype == y.dtype and torch.equal(x.contiguous().view(torch.uint8),
                                                                  y.contiguous().view(torch.uint8))
        for x, y in zip(a, b))


class TRPO(BatchOnPolicyAgent):
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

    def __init__(self, env, seed: int = 0, hparams=None, *, seeds=None, **overrides):
        super().__init__(env, seed, hparams, seeds=seeds, **overrides)
        hp = self.hp
        if not hp.max_kl > 0.0:
            raise ValueError(f"TRPO max_kl must be positive, got {hp.max_kl}")
        if hp.critic_minibatch < 1 or hp.critic_epochs < 1:
            raise ValueError(f"TRPO needs critic_minibatch >= 1 and critic_epochs >= 1, "
                             f"got {hp.critic_minibatch}, {hp.critic_epochs}")
        self.seed_accepted_steps = np.zeros(self.n_seeds, dtype=np.int64)

    @property
    def accepted_steps(self):
        """Constrained steps the line search accepted: an int (single agent) or ``(N,)`` array."""
        return int(self.seed_accepted_steps[0]) if self.n_seeds == 1 else self.seed_accepted_steps

    def _fit_critic(self, b: dict) -> np.ndarray:
        """Adam steps on the lambda-returns in shuffled minibatches (each seed its own shuffle, from its
        ``buffer`` generator); returns each seed's last minibatch loss ``(n,)``."""
        hp = self.hp
        obs, ret, idx = b["obs"], b["ret"], b["idx"]
        n, T = ret.shape
        rows = torch.arange(n, device=self.device).unsqueeze(1)
        loss = np.zeros(n)
        for _ in range(hp.critic_epochs):
            perm = self._dev(torch.from_numpy(np.stack([self.seed_rngs[k]["buffer"].permutation(T) for k in idx])))
            for start in range(0, T, hp.critic_minibatch):
                mb = perm[:, start:start + hp.critic_minibatch]
                loss = self._critic_step({"obs": obs[rows, mb], "ret": ret[rows, mb], "sel": b["sel"], "idx": idx})
        return loss

    def update(self, idx: np.ndarray) -> list[dict]:
        """One TRPO update on the full batches of the seed slots ``idx``; per-seed diagnostics."""
        hp = self.hp
        b = self._batch(idx)
        obs, actions, adv, mask, sel = b["obs"], b["actions"], b["adv"], b["mask"], b["sel"]
        value_loss = self._fit_critic(b)
        msum = mask.sum(dim=1).clamp(min=1.0)
        # one forward pass gives the old log-probabilities (detached) and the gradient's graph: the same values
        logp_all = self.actors.log_probs(obs, sel)
        logp_old_all = logp_all.detach()
        logp_old = CategoricalPolicy.log_prob_of(logp_old_all, actions)
        last = {}

        def surrogate_of(logp_all: torch.Tensor) -> torch.Tensor:
            logp = CategoricalPolicy.log_prob_of(logp_all, actions)
            return -(adv * torch.exp(logp - logp_old) * mask).sum(dim=1) / msum

        def surrogate() -> torch.Tensor:
            last["logp_all"] = self.actors.log_probs(obs, sel)  # read by kl_batch, called next at these parameters
            last["params"] = self._actor_rows(sel)  # where it was evaluated (the entropy below may reuse it)
            return surrogate_of(last["logp_all"])

        def kl_batch() -> torch.Tensor:
            return CategoricalPolicy.kl(logp_old_all, last["logp_all"]).mean(dim=1)

        loss = surrogate_of(logp_all)
        seeds = [int(k) for k in idx]
        results = self._constrained_actor_step(seeds, loss, surrogate, (kl_batch,), (hp.max_kl,), hp.max_kl,
                                               obs, make_fvp, hp.damping, hp.cg_iters, hp.max_backtracks,
                                               hp.accept_ratio)
        with torch.no_grad():
            # the line search's last forward pass is at the final parameters unless a seed that never accepted was
            # restored after it: then the policy after the step is evaluated anew (the same values either way)
            reuse = "params" in last and _same_bits(last["params"], self._actor_rows(sel))
            logp_new = last["logp_all"] if reuse else self.actors.log_probs(obs, sel)
            entropy = CategoricalPolicy.entropy_of(logp_new).mean(dim=1).tolist()
        diags = []
        for j, (k, res, lv) in enumerate(zip(seeds, results, loss.detach().tolist())):
            self.seed_accepted_steps[k] += int(res.accepted)
            # every TRPO update is a constrained step: "train/constrained" makes the run summary's
            # line_search_accept_fraction (accepted / constrained) the fraction of accepted steps
            diags.append({"train/value_loss": float(value_loss[j]), "train/policy_loss": lv,
                          "train/constrained": 1.0, "train/line_search_ok": float(res.accepted),
                          "train/backtracks": float(res.backtracks), "train/kl": res.kls[0],
                          "train/improvement": res.improvement, "train/entropy": float(entropy[j]),
                          "train/skipped_update": float(res.skipped)})
        return diags

    def _actor_rows(self, sel) -> list[torch.Tensor]:
        """Copies of the stacked actor parameters of the seed rows ``sel`` (None: all), ``(n, *shape)`` each."""
        with torch.no_grad():
            return [p.detach().clone() if sel is None else p.detach()[sel] for p in self.actors.params]

    def seed_state_dict(self, k: int) -> dict:
        """Seed slot ``k``'s state in the single TRPO agent's format (the on-policy state plus the accepted-step
        counter)."""
        state = super().seed_state_dict(k)
        state["accepted_steps"] = int(self.seed_accepted_steps[k])
        return state

    def _load_seed(self, k: int, state: dict) -> None:
        """Restore seed slot ``k`` from a single TRPO agent's ``state_dict`` exactly."""
        super()._load_seed(k, state)
        self.seed_accepted_steps[k] = int(state["accepted_steps"])
