"""Tabular advantage actor-critic: the paper's forgetting-free reference in the grid world (Figure 1).

The policy is a table of logits with one row per discrete state, and the critic a table of values; in the trap
grid world a state is a (cell, context) pair, so the behaviour learned with the trap off lives in rows that
the trap phase never touches: tabular A2C cannot forget. The update is :class:`~lcpo.agents.a2c.A2C`'s, verbatim
(GAE lambda-returns, one critic step on their squared error, one actor step on ``-mean(A_t log pi(a_t | s_t))``),
taken with plain SGD so that a row no batch visits stays exactly as it is (Adam's momentum would keep moving
it for a few updates, and weight decay would shrink it).

The environment tells the agent its discrete states: ``env.unwrapped.n_tabular_states`` (int) and
``env.unwrapped.tabular_index(obs (B, obs_dim)) -> (B,) int64`` (see
:meth:`lcpo.envs.gridworld.TrapGridEnv.tabular_index`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from lcpo.agents.a2c import A2C
from lcpo.agents.nets import CategoricalPolicy, ValueNet

__all__ = ["TabularA2C", "TabularA2CHyperparameters", "TableBody", "TablePolicy"]


@dataclass(frozen=True)
class TabularA2CHyperparameters:
    """Tabular A2C settings (defaults: the grid world's, spec ``windy-gym.md``, "Grid world").

    Attributes:
        actor_lr: SGD learning rate of the logit table.
        critic_lr: SGD learning rate of the value table.
        gamma: discount per step.
        gae_lambda: GAE lambda.
        rollout_steps: transitions per update (one 200-step rollout = one epoch).
        max_grad_norm: gradient-norm clip of each table (``inf``: no clipping).
        entropy_coef: entropy bonus weight (0, as in the paper's A2C).
        init_value: initial value of every table entry of the critic.
        normalize_returns: divide rewards by the return normaliser's scale (off: this agent exists for the
            grid world, whose Figure 1 settings were validated on raw rewards; see :mod:`lcpo.numerics.normalize`).
    """

    actor_lr: float = 2.0
    critic_lr: float = 1.0
    gamma: float = 0.9
    gae_lambda: float = 0.8
    rollout_steps: int = 200
    max_grad_norm: float = math.inf
    entropy_coef: float = 0.0
    init_value: float = 0.0
    normalize_returns: bool = False


class TableBody(nn.Module):
    """A lookup table ``(B, obs_dim) -> (B, out_dim)``: the row of each observation's discrete state.

    Args:
        index: ``(B, obs_dim) float32 ndarray -> (B,) int64`` state index of each observation.
        n_states: number of rows.
        out_dim: entries per row.
        init: initial value of every entry.
    """

    def __init__(self, index, n_states: int, out_dim: int, init: float = 0.0):
        super().__init__()
        self.index = index
        self.table = nn.Parameter(torch.full((int(n_states), int(out_dim)), float(init)))

    def fast_policy(self, policy: "CategoricalPolicy") -> "TablePolicy":
        """The per-step acting path for a policy with this body (see :func:`lcpo.agents.nets.make_fast_policy`)."""
        return TablePolicy(policy)

    def rows(self, obs: np.ndarray) -> np.ndarray:
        """``(B,)`` int64 row of each observation ``(B, obs_dim)``.

        Raises:
            ValueError: if an index falls outside the table.
        """
        idx = np.asarray(self.index(np.asarray(obs)), dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.table.shape[0]):
            raise ValueError(f"tabular state index out of range [0, {self.table.shape[0]}): {idx.tolist()}")
        return idx

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, out_dim)`` rows of the table for observations ``(B, obs_dim)`` (differentiable in the table)."""
        rows = torch.from_numpy(self.rows(obs.detach().reshape(-1, obs.shape[-1]).cpu().numpy()))
        return self.table[rows.to(self.table.device)]


class TablePolicy:
    """Allocation-light per-step sampler over a :class:`TableBody` policy (the ``fast_actor`` interface).

    Same interface as :class:`lcpo.agents.nets.NumpyPolicy`: ``sync``, ``logits``, ``sample``, ``greedy``.
    """

    def __init__(self, policy: CategoricalPolicy):
        self.policy, self.dims, self.bins = policy, policy.dims, policy.bins
        self.table = np.zeros(tuple(policy.body.table.shape), dtype=np.float32)
        self._scratch = np.zeros(self.dims * self.bins, dtype=np.float32)
        self.sync()

    def sync(self) -> None:
        """Copy the torch table into the NumPy mirror (in place)."""
        with torch.no_grad():
            self.table[...] = self.policy.body.table.detach().cpu().numpy()

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """``(D, K)`` logits of one observation (a view of the table: copy it to keep it)."""
        return self.table[int(self.policy.body.rows(obs[None])[0])].reshape(self.dims, self.bins)

    def sample(self, obs: np.ndarray, gumbel: np.ndarray) -> np.ndarray:
        """Draw an action ``(D,)`` int64 via Gumbel-max with pre-drawn noise ``gumbel (D * K,)`` float32."""
        np.add(self.logits(obs).reshape(-1), gumbel, out=self._scratch)
        return self._scratch.reshape(self.dims, self.bins).argmax(axis=1)

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """Most probable action ``(D,)`` int64."""
        return self.logits(obs).argmax(axis=1)


class TabularA2C(A2C):
    """A2C with a logit table and a value table, one row per discrete state (see module docstring).

    Args:
        env: an environment whose ``unwrapped`` declares ``n_tabular_states`` and ``tabular_index(obs)``.
        seed: run seed (action sampling; the tables start at zero logits, i.e. a uniform policy).
        hparams, **overrides: see :class:`TabularA2CHyperparameters`.

    Raises:
        TypeError: if the environment does not declare its discrete states, or for unsupported spaces.
        ValueError: for unknown or invalid hyperparameters.

    Example:
        >>> import gymnasium as gym, lcpo.envs
        >>> agent = TabularA2C(gym.make("lcpo/TrapGrid-v0"), seed=0).learn(2000)
        >>> agent.updates, agent.actor.body.table.shape
        (10, torch.Size([18, 4]))
    """

    name = "tabular-a2c"
    Hyperparameters = TabularA2CHyperparameters

    def build_networks(self):
        """A logit table and a value table over the environment's discrete states.

        Raises:
            TypeError: if the environment does not declare its discrete states.
            ValueError: for non-positive learning rates.
        """
        hp = self.hp
        for name in ("actor_lr", "critic_lr"):
            v = getattr(hp, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be positive and finite, got {v!r}")
        from lcpo.envs.preflight import TABULAR_NEED, declares_tabular

        base = self.env.unwrapped
        if not declares_tabular(base):
            spec = getattr(self.env, "spec", None) or getattr(base, "spec", None)
            name = spec.id if spec is not None else type(base).__name__
            raise TypeError(f"TabularA2C {TABULAR_NEED}, got {name}")
        n_states, index = base.n_tabular_states, base.tabular_index
        out = self.action_dims * self.action_bins
        actor = CategoricalPolicy(self.obs_dim, self.action_dims, self.action_bins,
                                  body=TableBody(index, n_states, out))
        critic = ValueNet(self.obs_dim, body=TableBody(index, n_states, 1, hp.init_value))
        return actor, critic

    def build_optimizers(self):
        """Plain SGD: rows that no batch visits stay exactly as they are (Adam's moments would move them)."""
        from lcpo.agents.stacked import SeedSGD

        return (SeedSGD(self.actors.params, lr=self.hp.actor_lr), SeedSGD(self.critics.params, lr=self.hp.critic_lr))
