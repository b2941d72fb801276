"""Machinery shared by the replay-based (off-policy) agents: Double DQN and discrete SAC.

Cadence (one stream, each interaction seen once): :meth:`OffPolicyAgent.observe` stores every transition in an
episode-aware :class:`lcpo.memory.replay.ReplayBuffer`; once ``learning_starts`` transitions are stored, every
``train_every`` steps it runs ``gradient_steps`` updates, each on a uniformly drawn minibatch of ``batch_size``
transitions, and moves the target networks toward the online ones by Polyak averaging
(``theta_target <- (1 - tau) theta_target + tau theta``).

Per-sample discounts: an environment may report a time-dependent discount in ``info["gamma"]``; it is stored per
transition next to the buffer (ring slot ``global index % capacity``) and used in that transition's target.
Forced actions (``info["forced"]``, the straggler environment's safety override) are kept as ordinary samples:
in a forced state the outcome does not depend on the action chosen, so ``Q(s, a) = r + gamma V(s')`` holds for
every ``a`` and the stored transition is a correct sample for any action label.

Both agents output ``(B, D, K)`` tables (Q-values or logits) per observation: one head of ``K`` bins per action
dimension (a factorized, per-dimension action space; paper appendix F discretizes each dimension into 15 bins).
"""

from __future__ import annotations


import gymnasium as gym
import numpy as np
import torch

from lcpo.agents.base import Agent, require_ints
from lcpo.online.loop import Transition
from lcpo.memory.replay import ReplayBuffer
from lcpo.agents.nets import CategoricalPolicy, make_body
from lcpo.numerics.finite import check_transition
from lcpo.numerics.normalize import ReturnNormalizer

__all__ = ["OffPolicyAgent", "factorized_q", "make_head_net", "polyak_update", "reduce_heads"]


def make_head_net(env, obs_dim: int, dims: int, bins: int, hidden, kind: str) -> CategoricalPolicy:
    """A network ``(B, obs_dim) -> (B, dims, bins)`` built with :func:`lcpo.agents.nets.make_body`.

    The returned module is a :class:`lcpo.agents.nets.CategoricalPolicy` (a container of a body reshaped to
    ``(B, D, K)``), so plain MLPs get the allocation-free NumPy mirror of :func:`lcpo.agents.nets.make_fast_policy`;
    for a Q-network its "logits" are Q-values.

    Raises:
        ValueError: for an unknown network kind.
    """
    body = make_body(env, obs_dim, dims * bins, hidden, kind)
    return CategoricalPolicy(obs_dim, dims, bins, hidden, body=body)


def reduce_heads(per_dim: torch.Tensor, reduction: str) -> torch.Tensor:
    """Combine per-dimension values ``(..., D)`` into joint ones ``(...)``: ``"mean"`` or ``"sum"`` over D.

    Raises:
        ValueError: for another reduction name.
    """
    if reduction == "mean":
        return per_dim.mean(-1)
    if reduction == "sum":
        return per_dim.sum(-1)
    raise ValueError(f"unknown head reduction {reduction!r}; use 'mean' or 'sum'")


def factorized_q(q_all: torch.Tensor, actions: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Joint Q-value of a factorized Q table: ``Q(s, a) = reduce_d Q_d(s, a_d)``.

    Args:
        q_all: ``(B, D, K)`` per-dimension Q-values.
        actions: ``(B, D)`` int64 bin indices.
        reduction: ``"mean"`` (the default; keeps Q on the scale of returns whatever D) or ``"sum"``.

    Returns:
        ``(B,)`` joint Q-values.

    Raises:
        ValueError: on mismatched shapes or an unknown reduction.
    """
    if q_all.ndim != 3 or actions.shape != q_all.shape[:2]:
        raise ValueError(f"q_all must be (B, D, K) and actions (B, D); got {tuple(q_all.shape)} and "
                         f"{tuple(actions.shape)}")
    return reduce_heads(q_all.gather(-1, actions.unsqueeze(-1)).squeeze(-1), reduction)


@torch.no_grad()
def polyak_update(target: list[torch.Tensor], online: list[torch.Tensor], tau: float) -> None:
    """In place ``target <- (1 - tau) * target + tau * online`` for matching lists of tensors.

    Args:
        target: parameters of the target network (e.g. ``list(q_target.parameters())``; cache the list, it is
            the per-update hot path).
        online: the online network's parameters, same shapes and order.
        tau: step in [0, 1] (1 copies the online network).

    Raises:
        ValueError: if ``tau`` is outside [0, 1] or the lists differ in length.
    """
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"Polyak tau must lie in [0, 1], got {tau}")
    if len(target) != len(online):
        raise ValueError(f"target and online parameter lists differ in length: {len(target)} != {len(online)}")
    torch._foreach_lerp_(target, online, float(tau))


class OffPolicyAgent(Agent):
    """Replay buffer, per-sample discounts, the update cadence and the shared parts of the state dict.

    Subclasses set ``Hyperparameters`` (with at least ``buffer_size``, ``batch_size``, ``learning_starts``,
    ``train_every``, ``gradient_steps``, ``gamma``) and implement :meth:`update` (one gradient step on a
    minibatch, returning diagnostics), :meth:`act`, :meth:`_sync_fast` (refresh the acting mirror) and extend
    :meth:`state_dict` / :meth:`load_state_dict`.

    Raises:
        ValueError: on non-positive sizes or a discount outside [0, 1].
    """

    validates_transitions = True  # observe() checks reward and next_obs

    def __init__(self, env: gym.Env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        require_ints(hp, ("buffer_size", "batch_size", "train_every", "gradient_steps", "learning_starts"))
        if not 0.0 <= hp.gamma <= 1.0:
            raise ValueError(f"hyperparameter gamma must lie in [0, 1], got {hp.gamma}")
        if not 0.0 <= hp.tau <= 1.0:
            raise ValueError(f"hyperparameter tau must lie in [0, 1], got {hp.tau}")
        self.replay = ReplayBuffer(hp.buffer_size, (self.obs_dim,), (self.action_dims,), seed=self.rngs["buffer"])
        self._gammas = np.zeros(hp.buffer_size, dtype=np.float64)
        self.return_norm = ReturnNormalizer()
        self.steps = 0
        self.updates = 0

    @property
    def reward_scale(self) -> float:
        """The divisor of every reward in a training minibatch: the return normaliser's scale with
        ``normalize_returns`` (stored rewards stay raw), else 1."""
        return self.return_norm.scale if self.hp.normalize_returns else 1.0

    # -- storing and the update cadence ----------------------------------------------------------------
    def observe(self, tr: Transition) -> dict | None:
        """Store a transition; on the update cadence run ``gradient_steps`` updates.

        Returns:
            the diagnostics of the last update (namespaced keys) when updates ran, else None.

        Raises:
            ValueError: on a reward that is non-finite or beyond float32, a non-finite observation, or a discount
                outside [0, 1] (naming the value and the step).
        """
        check_transition(tr.reward, tr.next_obs, f"at agent step {self.steps}")
        gamma = self.hp.gamma
        if tr.info:
            gamma = float(tr.info.get("gamma", gamma))
            if not 0.0 <= gamma <= 1.0:
                raise ValueError(f"info['gamma'] must lie in [0, 1], got {gamma} at agent step {self.steps}")
        action = np.asarray(tr.action, dtype=np.int64).reshape(self.action_dims)
        self._gammas[self.replay.total_added % self.replay.capacity] = gamma
        self.replay.add(tr.obs, action, tr.reward, tr.next_obs, tr.terminated, tr.truncated)
        self.steps += 1
        hp = self.hp
        if hp.normalize_returns:
            self.return_norm.push(tr.reward, tr.terminated or tr.truncated, gamma)
        if self.steps < hp.learning_starts or self.steps % hp.train_every:
            return None
        self.return_norm.flush()  # the statistics of every step so far, before the updates that use them
        diag = None
        for _ in range(hp.gradient_steps):
            diag = self.update(self.sample_batch(hp.batch_size))
            self.updates += 1
        self._sync_fast()
        diag = dict(diag or {})
        diag["train/updates"] = float(self.updates)
        if hp.normalize_returns:
            diag["train/reward_scale"] = self.return_norm.scale
        return diag

    def sample_batch(self, batch_size: int) -> dict[str, torch.Tensor]:
        """A minibatch of ``batch_size`` transitions drawn uniformly (with replacement) from the replay buffer.

        Returns:
            the tensors of :meth:`get_batch`.
        """
        return self._tensors(self.replay.sample(batch_size))

    def get_batch(self, indices) -> dict[str, torch.Tensor]:
        """The stored transitions with the given global indices, as tensors.

        Args:
            indices: ``(B,)`` global indices of stored samples (see :class:`lcpo.memory.replay.ReplayBuffer`).

        Returns:
            dict: ``obs (B, obs_dim) float32``, ``actions (B, D) int64``, ``rewards (B,) float32`` (divided by
            :attr:`reward_scale`),
            ``next_obs (B, obs_dim) float32``, ``not_terminated (B,) float32`` (0 after a termination, 1 after a
            truncation or a plain step: truncation bootstraps), ``gamma (B,) float32`` (per-sample discount).

        Raises:
            IndexError: if an index is not stored.
        """
        return self._tensors(self.replay.get(indices))

    def _tensors(self, b: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        return {
            "obs": torch.from_numpy(b["obs"]),
            "actions": torch.from_numpy(b["actions"]),
            "rewards": torch.from_numpy((b["rewards"] / self.reward_scale).astype(np.float32)),
            "next_obs": torch.from_numpy(b["next_obs"]),
            "not_terminated": torch.from_numpy((~b["terminated"]).astype(np.float32)),
            "gamma": torch.from_numpy(self._gammas[b["indices"] % self.replay.capacity].astype(np.float32)),
        }

    def update(self, batch: dict[str, torch.Tensor]) -> dict:  # pragma: no cover - abstract
        """One gradient step on a replay ``batch`` (tensors keyed like ``ReplayBuffer.sample``); returns
        diagnostics."""
        raise NotImplementedError

    def _sync_fast(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- persistence -----------------------------------------------------------------------------------
    def _base_state(self) -> dict:
        n = self.replay.size
        return {"replay": self.replay.state_dict(), "gammas": self._gammas[:n].copy(),
                "rngs": {k: g.bit_generator.state for k, g in self.rngs.items()},
                "steps": self.steps, "updates": self.updates, "return_norm": self.return_norm.state_dict()}

    def _load_base_state(self, state: dict) -> None:
        self.replay.load_state_dict(state["replay"])
        g = np.asarray(state["gammas"], dtype=np.float64)
        if g.shape != (self.replay.size,):
            raise ValueError(f"state 'gammas' has shape {g.shape}, expected ({self.replay.size},)")
        self._gammas[:] = 0.0
        self._gammas[: g.shape[0]] = g
        for k, s in state["rngs"].items():
            self.rngs[k].bit_generator.state = s
        self.steps, self.updates = int(state["steps"]), int(state["updates"])
        if "return_norm" not in state:
            raise ValueError("checkpoint state lacks 'return_norm' (written by an older lcpo); start the run afresh")
        self.return_norm.load_state_dict(state["return_norm"])
