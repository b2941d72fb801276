"""Advantage actor-critic (A2C), the online baseline LCPO is built on (Mnih et al. 2016; paper Table 11).

One update per rollout of ``rollout_steps`` transitions: the critic takes one Adam step on the GAE
lambda-returns; the actor one Adam step on ``-mean(A_t log pi(a_t | s_t))`` (plus an optional entropy bonus;
the paper's A2C has none). Truncated steps bootstrap from the real last state, terminated ones do not
(:func:`lcpo.numerics.returns.gae`).

Batch-native (:class:`~lcpo.agents.batched.BatchOnPolicyAgent`): ``A2C.population(env, seeds)`` holds N independent
learners with a leading seed axis; ``A2C(env, seed)`` is the population of one. Each seed's losses, gradient clip
and Adam step are its own; a seed's run in a population is its solo run bit for bit (plain MLPs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lcpo.agents.base import OnPolicyHyperparameters
from lcpo.agents.batched import BatchOnPolicyAgent
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


class A2C(BatchOnPolicyAgent):
    """Online A2C with a product-of-categoricals actor (see module docstring).

    Example:
        >>> import gymnasium as gym, numpy as np, lcpo.envs
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        >>> agent = A2C(env, seed=0).learn(400)
        >>> len(agent.episodes)
        2
        >>> pop = A2C.population(env, seeds=[0, 1, 2])
        >>> pop.act_batch(np.zeros((3, 9), np.float32)).shape
        (3, 1)
    """

    name = "a2c"
    Hyperparameters = A2CHyperparameters

    def update(self, idx: np.ndarray) -> list[dict]:
        """One critic and one actor step on the rollout batches of the seed slots ``idx``; per-seed diagnostics."""
        b = self._batch(idx)
        value_loss = self._critic_step(b)
        logp_all = self.actors.log_probs(b["obs"], b["sel"])
        logp = CategoricalPolicy.log_prob_of(logp_all, b["actions"])
        entropy = CategoricalPolicy.entropy_of(logp_all).mean(dim=1)
        m = b["mask"]
        pg = -(b["adv"] * logp * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)
        loss = pg - self.hp.entropy_coef * entropy
        self._actor_step(loss, b)
        pg, ent = pg.detach().tolist(), entropy.detach().tolist()
        return [{"train/policy_loss": pg[j], "train/value_loss": float(value_loss[j]), "train/entropy": ent[j]}
                for j in range(len(idx))]
