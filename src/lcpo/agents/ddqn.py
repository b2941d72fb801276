"""Double DQN (van Hasselt, Guez & Silver 2016) on the episode-aware replay buffer, for factorized actions.

Q-function: one head of ``K`` Q-values per action dimension, ``Q_d(s, k)``, combined into the joint
``Q(s, a) = mean_d Q_d(s, a_d)`` (``head_reduction="sum"`` sums instead; the mean keeps Q on the scale of returns
whatever the number of dimensions). Because the joint Q is a sum of per-dimension terms, its greedy joint action is
the per-dimension argmax, so acting and the max in the target stay exact and cost ``D K`` instead of ``K^D``.

Target (Double DQN, van Hasselt et al. 2016, eq. 4, per sample):
``y = r + gamma * (1 - terminated) * reduce_d Q_target,d(s', argmax_k Q_online,d(s', k))``:
the online network picks the greedy action, the target network evaluates it; ``terminated`` stops bootstrapping,
``truncated`` does not (the value of the real last state ``s'`` is bootstrapped). ``gamma`` is per sample
(``info["gamma"]`` when the environment reports one). Loss: Huber (or MSE) between ``Q(s, a)`` and ``y``;
Adam; gradient-norm clip; Polyak-averaged target network after every gradient step.

Exploration: epsilon-greedy on the whole joint action. ``epsilon = 1`` for the first ``random_epochs`` epochs
(``epoch_steps`` steps each: the paper's 1,000 epochs of 200 steps), then linear from 1 to ``epsilon_final`` over
``decay_epochs`` epochs (5,000), then ``epsilon_final`` (paper Table 11 settings restated in issue 5).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from lcpo.agents.offpolicy import (
    OffPolicyAgent,
    factorized_q,
    make_head_net,
    polyak_update,
    reduce_heads,
)
from lcpo.agents.nets import make_fast_policy
from lcpo.numerics.finite import OVERFLOW_HINT, check_finite

__all__ = ["DDQN", "DDQNHyperparameters", "double_dqn_target"]


def double_dqn_target(q_online_next: torch.Tensor, q_target_next: torch.Tensor, rewards: torch.Tensor,
                      not_terminated: torch.Tensor, gamma, reduction: str = "mean") -> torch.Tensor:
    """Double DQN targets for factorized Q tables (van Hasselt et al. 2016, eq. 4).

    Args:
        q_online_next: ``(B, D, K)`` online Q-values at the next states (they pick the greedy bins).
        q_target_next: ``(B, D, K)`` target-network Q-values at the next states (they value the picked bins).
        rewards: ``(B,)`` rewards.
        not_terminated: ``(B,)`` 0.0 where the next state is terminal, 1.0 otherwise (also after a truncation).
        gamma: scalar or ``(B,)`` per-sample discounts in [0, 1].
        reduction: how per-dimension values combine (``"mean"`` or ``"sum"``).

    Returns:
        ``(B,)`` targets ``r + gamma * not_terminated * reduce_d q_target_next[d, argmax_k q_online_next[d, k]]``.

    Raises:
        ValueError: on mismatched shapes or an unknown reduction.
    """
    if q_online_next.shape != q_target_next.shape or q_online_next.ndim != 3:
        raise ValueError(f"online and target Q tables must both be (B, D, K); got {tuple(q_online_next.shape)} "
                         f"and {tuple(q_target_next.shape)}")
    B = q_online_next.shape[0]
    if rewards.shape != (B,) or not_terminated.shape != (B,):
        raise ValueError(f"rewards and not_terminated must be ({B},); got {tuple(rewards.shape)} and "
                         f"{tuple(not_terminated.shape)}")
    greedy = q_online_next.argmax(-1)
    value = reduce_heads(q_target_next.gather(-1, greedy.unsqueeze(-1)).squeeze(-1), reduction)
    return rewards + gamma * not_terminated * value


@dataclass(frozen=True)
class DDQNHyperparameters:
    """Double DQN settings (issue 5 / paper Table 11 where it states them).

    Attributes:
        network: ``"auto"`` (the environment's ``default_network``, else ``"mlp"``), ``"mlp"``, or a kind
            registered in :data:`lcpo.agents.nets.NETWORKS`.
        hidden: hidden layer sizes of the Q-network (ReLU MLP).
        lr: Adam learning rate.
        weight_decay: Adam L2 weight decay (1e-4, as the authors' agents).
        gamma: discount per step (overridden per step by an environment's ``info["gamma"]``).
        batch_size: transitions per gradient step.
        tau: Polyak step of the target network after each gradient step.
        buffer_size: replay capacity in transitions (oldest evicted first); a run (``lcpo run``, a sweep) sets
            it to the run's length when not set ("all samples", paper Table 11; :mod:`lcpo.agents.run_length`).
        learning_starts: transitions stored before the first update.
        train_every: environment steps between update rounds (200: one round per 200-step epoch, the
            paper's cadence; 1 updates every step, far more sample-efficient and ~200x the update compute).
        gradient_steps: gradient steps per update round.
        epoch_steps: steps per epoch (the unit of the exploration schedule).
        random_epochs: epochs of uniformly random actions (epsilon 1) at the start.
        decay_epochs: epochs over which epsilon then falls linearly from 1 to ``epsilon_final``.
        epsilon_final: epsilon after the decay.
        head_reduction: ``"mean"`` or ``"sum"`` of the per-dimension Q-values into the joint Q (``"sum"``, as
            the authors' agents).
        loss: ``"huber"`` (smooth L1, delta 1) or ``"mse"`` (``"mse"``, as the authors' agents).
        max_grad_norm: gradient-norm clip (1, as the authors' agents).
        normalize_returns: divide minibatch rewards by the running spread of the discounted return,
            ``sqrt(Var[G] + 1)`` (:class:`lcpo.numerics.normalize.ReturnNormalizer`; on, as in the authors' implementation).
    """

    network: str = "auto"
    hidden: tuple[int, ...] = (64, 64)
    lr: float = 1e-3
    weight_decay: float = 1e-4
    gamma: float = 0.99
    batch_size: int = 512
    tau: float = 0.01
    buffer_size: int = 1_000_000
    learning_starts: int = 1_000
    train_every: int = 200
    gradient_steps: int = 1
    epoch_steps: int = 200
    random_epochs: int = 1_000
    decay_epochs: int = 5_000
    epsilon_final: float = 0.0
    head_reduction: str = "sum"
    loss: str = "mse"
    max_grad_norm: float = 1.0
    normalize_returns: bool = True


class DDQN(OffPolicyAgent):
    """Online Double DQN with per-dimension Q-heads and epsilon-greedy exploration (see module docstring).

    Args:
        env: environment with a Discrete or MultiDiscrete action space and a 1-D Box observation space.
        seed: run seed (network initialisation, exploration, replay sampling).
        hparams: a :class:`DDQNHyperparameters` (defaults if None).
        **overrides: hyperparameter fields to override.

    Raises:
        ValueError: for unknown or invalid hyperparameters (named); TypeError for unsupported spaces.

    Example:
        >>> import gymnasium as gym, lcpo.envs
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        >>> agent = DDQN(env, seed=0, learning_starts=100, buffer_size=1000).learn(400)
        >>> len(agent.episodes), agent.updates
        (2, 2)
    """

    name = "ddqn"
    Hyperparameters = DDQNHyperparameters

    def __init__(self, env: gym.Env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        if hp.loss not in ("huber", "mse"):
            raise ValueError(f"unknown DDQN loss {hp.loss!r}; use 'huber' or 'mse'")
        reduce_heads(torch.zeros(1, 1), hp.head_reduction)  # validates the name
        if not 0.0 <= hp.epsilon_final <= 1.0:
            raise ValueError(f"epsilon_final must lie in [0, 1], got {hp.epsilon_final}")
        for name in ("epoch_steps", "random_epochs", "decay_epochs"):
            v = getattr(hp, name)
            if not isinstance(v, int) or v < (1 if name == "epoch_steps" else 0):
                raise ValueError(f"hyperparameter {name} must be a non-negative integer (epoch_steps >= 1), got {v!r}")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.q = make_head_net(env, self.obs_dim, self.action_dims, self.action_bins, hp.hidden, hp.network)
        self.q_target = copy.deepcopy(self.q).requires_grad_(False)
        self._q_params = list(self.q.parameters())
        self._q_target_params = list(self.q_target.parameters())
        self.opt = torch.optim.Adam(self._q_params, lr=hp.lr, weight_decay=hp.weight_decay, fused=True)
        self.fast_q = make_fast_policy(self.q)

    # -- acting (hot path) -----------------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        """Exploration rate at the current step count (see module docstring)."""
        hp = self.hp
        t = self.steps - hp.random_epochs * hp.epoch_steps
        if t < 0:
            return 1.0
        span = hp.decay_epochs * hp.epoch_steps
        frac = 1.0 if span == 0 else min(1.0, t / span)
        return 1.0 + (hp.epsilon_final - 1.0) * frac

    def act(self, obs: np.ndarray, deterministic: bool = False):
        """Epsilon-greedy action for one observation ``(obs_dim,)`` (greedy if ``deterministic``).

        Returns:
            ``(D,)`` int64 bin indices (an int64 scalar for a ``Discrete`` action space).
        """
        rng = self.rngs["act"]
        if not deterministic and rng.random() < self.epsilon:
            a = rng.integers(self.action_bins, size=self.action_dims)
        else:
            a = self.fast_q.greedy(obs)
        return a[0] if self.scalar_action else a

    def _sync_fast(self) -> None:
        self.fast_q.sync()

    # -- learning --------------------------------------------------------------------------------------
    def targets(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(B,)`` Double DQN targets of a minibatch from :meth:`sample_batch` (no gradient).

        Raises:
            ValueError: if a target is inf or NaN (float32 overflow), naming the step.
        """
        with torch.no_grad():
            nxt = batch["next_obs"]
            y = double_dqn_target(self.q(nxt), self.q_target(nxt), batch["rewards"], batch["not_terminated"],
                                  batch["gamma"], self.hp.head_reduction)
        check_finite("TD targets", y, f"at the update at agent step {self.steps}", OVERFLOW_HINT)
        return y

    def update(self, batch: dict[str, torch.Tensor]) -> dict:
        """One gradient step on the TD loss, then a Polyak step of the target network; returns diagnostics."""
        hp = self.hp
        y = self.targets(batch)
        q_sa = factorized_q(self.q(batch["obs"]), batch["actions"], hp.head_reduction)
        return self._q_step(q_sa, y, self._q_params)

    def _q_step(self, q_sa: torch.Tensor, y: torch.Tensor, target_sources) -> dict:
        """Huber (or MSE) loss of ``q_sa (B,)`` against the targets ``y (B,)``, one clipped Adam step on the
        trained Q parameters, then a Polyak step of the target network toward ``target_sources`` (the online
        parameters in target order); returns the update's diagnostics."""
        hp = self.hp
        if hp.loss == "huber":
            loss = torch.nn.functional.smooth_l1_loss(q_sa, y)
        else:
            loss = torch.nn.functional.mse_loss(q_sa, y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self._q_params, hp.max_grad_norm, foreach=True)
        self.opt.step()
        polyak_update(self._q_target_params, target_sources, hp.tau)
        return {"train/q_loss": loss.item(), "train/q_mean": q_sa.mean().item(), "train/epsilon": self.epsilon}

    # -- persistence -----------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Online and target networks, optimizer, replay buffer (with per-sample discounts), RNG states and
        counters (the step count drives the epsilon schedule)."""
        return {"q": self.q.state_dict(), "q_target": self.q_target.state_dict(), "opt": self.opt.state_dict(),
                **self._base_state()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly.

        Raises:
            ValueError: on a replay buffer of another configuration; KeyError/RuntimeError on missing or
                mis-shaped network entries.
        """
        self.q.load_state_dict(state["q"])
        self.q_target.load_state_dict(state["q_target"])
        self.opt.load_state_dict(state["opt"])
        self._load_base_state(state)
        self._sync_fast()
