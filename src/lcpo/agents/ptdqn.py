"""PT-DQN: permanent and transient value functions (Anand & Precup 2023, "Prediction and Control in Continual
Reinforcement Learning"), on the Double DQN machinery; LCPO paper appendix D.

The action value is the sum of two factorized Q-networks of the same shape (:class:`PTQNetwork`)::

    Q(s, a) = Q_P(s, a) + Q_T(s, a)        (per dimension and bin: (B, D, K) tables add)

* the **transient** network ``Q_T`` learns fast: every gradient step is a Double DQN step (targets from a
  Polyak-averaged copy of the whole sum, :class:`lcpo.agents.ddqn.DDQN`) on the combined ``Q`` with only
  ``Q_T``'s weights trained;
* every ``permanent_every`` environment steps (``K``) the **permanent** network ``Q_P`` is updated slowly by
  distillation toward the combined value: ``permanent_steps`` gradient steps (Adam, ``permanent_lr``) on
  ``mean_{s,d,k} (Q_P,d(s, k) - Q_d(s, k))^2`` over replayed states ``s`` (``Q`` held fixed, all bins), after
  which the transient weights decay toward zero, ``theta_T <- transient_decay * theta_T`` (Anand & Precup's
  transient reset with decay ``lambda``; ``0`` resets it).

Exploration, replay and the remaining settings are those of Double DQN (paper Table 11, issue 5).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from lcpo.agents.base import require_ints
from lcpo.agents.ddqn import DDQN, DDQNHyperparameters
from lcpo.agents.offpolicy import factorized_q, make_head_net
from lcpo.online.loop import Transition
from lcpo.agents.nets import make_fast_policy

__all__ = ["PTDQN", "PTDQNHyperparameters", "PTQNetwork"]


class PTQNetwork(torch.nn.Module):
    """The sum of a permanent and a transient Q-network.

    Args:
        permanent: a network ``(B, obs_dim) -> (B, D, K)``.
        transient: a network of the same output shape.

    Shapes:
        ``forward(obs (B, obs_dim) float32) -> (B, D, K)`` = ``permanent(obs) + transient(obs)``.
    """

    def __init__(self, permanent: torch.nn.Module, transient: torch.nn.Module):
        super().__init__()
        self.permanent, self.transient = permanent, transient
        self.obs_dim, self.dims, self.bins = transient.obs_dim, transient.dims, transient.bins

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values ``Q_P(s, .) + Q_T(s, .)`` (Anand & Precup 2023, Sec. 3): ``obs`` ``(B, obs_dim)`` float32 ->
        ``(B, D, K)`` float32, the shape of each network's output."""
        return self.permanent(obs) + self.transient(obs)


class _SumFastQ:
    """Acting mirror of a :class:`PTQNetwork`: the per-step mirrors of both networks, Q-values added."""

    def __init__(self, net: PTQNetwork):
        self.p, self.t = make_fast_policy(net.permanent), make_fast_policy(net.transient)

    def sync(self) -> None:
        self.p.sync()
        self.t.sync()

    def logits(self, obs: np.ndarray) -> np.ndarray:
        return self.p.logits(obs) + self.t.logits(obs)

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        return self.logits(obs).argmax(axis=1)


@dataclass(frozen=True)
class PTDQNHyperparameters(DDQNHyperparameters):
    """Double DQN settings plus the permanent/transient ones.

    Attributes:
        permanent_every: environment steps ``K`` between permanent updates (one epoch of 200 steps).
        permanent_steps: distillation gradient steps per permanent update.
        permanent_lr: Adam learning rate of the permanent network (slower than the transient ``lr``).
        transient_decay: factor ``lambda`` in [0, 1] applied to the transient weights after each permanent
            update (0 resets the transient network to zero output).
    """

    permanent_every: int = 200
    permanent_steps: int = 10
    permanent_lr: float = 1e-4
    transient_decay: float = 0.55


class PTDQN(DDQN):
    """Double DQN on the sum of a permanent and a transient Q-network (see module docstring).

    Attributes:
        q: the :class:`PTQNetwork` (``q.permanent``, ``q.transient``); ``q_target`` its Polyak copy.

    Raises:
        ValueError: for invalid hyperparameters (named); TypeError for unsupported spaces.
    """

    name = "ptdqn"
    Hyperparameters = PTDQNHyperparameters

    def __init__(self, env: gym.Env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        require_ints(hp, ("permanent_every", "permanent_steps"))
        if not 0.0 <= hp.transient_decay <= 1.0:
            raise ValueError(f"transient_decay must lie in [0, 1], got {hp.transient_decay}")
        if not (math.isfinite(hp.permanent_lr) and hp.permanent_lr > 0):
            raise ValueError(f"permanent_lr must be a finite number > 0, got {hp.permanent_lr}")
        transient = self.q  # built and seeded by DDQN
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed + 1)
            permanent = make_head_net(env, self.obs_dim, self.action_dims, self.action_bins, hp.hidden, hp.network)
        self.q = PTQNetwork(permanent, transient)
        self.q_target = copy.deepcopy(self.q).requires_grad_(False)
        self._q_params = list(transient.parameters())
        self._perm_params = list(permanent.parameters())
        self._all_params = list(self.q.parameters())
        self._q_target_params = list(self.q_target.parameters())
        self.opt = torch.optim.Adam(self._q_params, lr=hp.lr, weight_decay=hp.weight_decay, fused=True)
        self.perm_opt = torch.optim.Adam(self._perm_params, lr=hp.permanent_lr, fused=True)
        self.fast_q = _SumFastQ(self.q)
        self.permanent_updates = 0

    @property
    def permanent(self) -> torch.nn.Module:
        """The permanent network ``(B, obs_dim) -> (B, D, K)``."""
        return self.q.permanent

    @property
    def transient(self) -> torch.nn.Module:
        """The transient network ``(B, obs_dim) -> (B, D, K)``."""
        return self.q.transient

    def update(self, batch: dict[str, torch.Tensor]) -> dict:
        """One Double DQN step on the combined Q that trains only the transient weights, then a Polyak step of
        the combined target network; returns diagnostics."""
        hp = self.hp
        y = self.targets(batch)
        with torch.no_grad():
            q_p = self.q.permanent(batch["obs"])
        q_sa = factorized_q(q_p + self.q.transient(batch["obs"]), batch["actions"], hp.head_reduction)
        return self._q_step(q_sa, y, self._all_params)

    def consolidate(self) -> dict:
        """The permanent update: ``permanent_steps`` distillation steps of ``Q_P`` toward the (fixed) combined
        ``Q`` on replayed minibatches, then ``theta_T <- transient_decay * theta_T``.

        Returns:
            ``{"train/permanent_loss": last distillation loss}``.
        """
        hp = self.hp
        loss = torch.zeros(())
        frozen = PTQNetwork(copy.deepcopy(self.q.permanent), self.q.transient)  # Q before this update
        for _ in range(hp.permanent_steps):
            obs = self.sample_batch(hp.batch_size)["obs"]
            with torch.no_grad():
                target = frozen(obs)
            loss = torch.nn.functional.mse_loss(self.q.permanent(obs), target)
            self.perm_opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self._perm_params, hp.max_grad_norm, foreach=True)
            self.perm_opt.step()
        with torch.no_grad():
            torch._foreach_mul_(self._q_params, float(hp.transient_decay))
        self.permanent_updates += 1
        self._sync_fast()
        return {"train/permanent_loss": loss.item()}

    def observe(self, tr: Transition) -> dict | None:
        """Store and train as Double DQN; every ``permanent_every`` steps (once learning has started) run
        :meth:`consolidate`.

        Raises:
            ValueError: as :meth:`lcpo.agents.offpolicy.OffPolicyAgent.observe`.
        """
        diag = super().observe(tr)
        hp = self.hp
        if self.steps >= hp.learning_starts and self.steps % hp.permanent_every == 0:
            diag = {**(diag or {}), **self.consolidate()}
        return diag

    def state_dict(self) -> dict:
        """Double DQN's state (both networks inside ``q``) plus the permanent optimizer and counter."""
        return {**super().state_dict(), "perm_opt": self.perm_opt.state_dict(),
                "permanent_updates": self.permanent_updates}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly.

        Raises:
            KeyError/RuntimeError: on missing or mis-shaped entries; ValueError: on a mismatched replay buffer.
        """
        self.perm_opt.load_state_dict(state["perm_opt"])
        self.permanent_updates = int(state["permanent_updates"])
        super().load_state_dict(state)
