"""Advantage actor-critic (A2C), the online baseline LCPO is built on (Mnih et al. 2016; paper Table 11).

One update per rollout of ``rollout_steps`` transitions: the critic takes one Adam step on the GAE
lambda-returns; the actor one Adam step on ``-mean(A_t log pi(a_t | s_t))`` (plus an optional entropy bonus;
the paper's A2C has none). Truncated steps bootstrap from the real last state, terminated ones do not
(:func:`lcpo.numerics.returns.gae`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lcpo.agents.base import OnPolicyAgent, OnPolicyHyperparameters
from lcpo.agents.nets import CategoricalPolicy

__all__ = ["A2C", "A2CHyperparameters"]


@dataclass(frozen=True)
class A2CHyperparameters(OnPolicyHyperparameters):
    """A2C settings (paper Table 11 defaults).

    Attributes:
        network: ``"auto"`` (the environment's ``default_network``, else ``"mlp"``), ``"mlp"``, or a kind
            registered in :data:`lcpo.agents.nets.NETWORKS` (e.g. ``"perm-invariant"``).
        hidden: hidden layer sizes of actor and critic (ReLU MLPs).
        actor_lr: Adam learning rate of the actor.
        critic_lr: Adam learning rate of the critic.
        weight_decay: Adam L2 weight decay of both networks.
        gamma: discount per step (overridden per step by an environment's ``info["gamma"]``).
        gae_lambda: GAE lambda.
        rollout_steps: transitions per update.
        max_grad_norm: gradient-norm clip of each network.
        entropy_coef: entropy bonus weight (0: the paper's A2C has no entropy bonus).
    """

    entropy_coef: float = 0.0


class A2C(OnPolicyAgent):
    """Online A2C with a product-of-categoricals actor (see module docstring).

    Example:
        >>> import gymnasium as gym, lcpo.envs
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        >>> agent = A2C(env, seed=0).learn(400)
        >>> len(agent.episodes)
        2
    """

    name = "a2c"
    Hyperparameters = A2CHyperparameters

    def update(self) -> dict:
        """One critic and one actor step on the rollout batch; returns diagnostics."""
        b = self._batch()
        value_loss = self._critic_step(b["obs"], b["ret"])
        logp_all = self.actor.log_probs(b["obs"])
        logp = CategoricalPolicy.log_prob_of(logp_all, b["actions"])
        entropy = CategoricalPolicy.entropy_of(logp_all).mean()
        m = b["mask"]
        pg = -(b["adv"] * logp * m).sum() / m.sum().clamp(min=1.0)
        loss = pg - self.hp.entropy_coef * entropy
        self.actor_opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.actor.parameters(), self.hp.max_grad_norm)
        self.actor_opt.step()
        return {"train/policy_loss": pg.item(), "train/value_loss": value_loss, "train/entropy": entropy.item()}
