"""Soft actor-critic for discrete, factorized actions (Haarnoja et al. 2018; discrete form after
Christodoulou 2019), on the episode-aware replay buffer.

Policy: a product of per-dimension categoricals ``pi(a | s) = prod_d pi_d(a_d | s)`` (the same actor network as
A2C/LCPO). Critics: twin factorized Q-functions ``Q_i(s, a) = mean_d Q_i,d(s, a_d)`` (``head_reduction="sum"``
sums), each with a Polyak-averaged target copy. With a factorized Q and a product policy every expectation over
actions is exact and costs ``D K`` (no sampled actions):

* soft value: ``V(s') = reduce_d sum_k pi_d(k|s') Qmin_d(s', k) + alpha H(pi(.|s'))`` with
  ``Qmin_d = min(Q1_target,d, Q2_target,d)`` elementwise (the clipped double-Q trick per bin; exact for one
  dimension) and ``H = sum_d H_d`` the joint entropy;
* critic target: ``y = r + gamma (1 - terminated) V(s')`` (truncation bootstraps), MSE for both critics;
* actor loss: ``E_s[ -alpha H(pi(.|s)) - reduce_d sum_k pi_d(k|s) Qmin_d(s, k) ]`` with the online critics;
* temperature: ``alpha = exp(log_alpha)``, one Adam step per update on ``log_alpha * (H - H_target)``
  (mean entropy over the minibatch), so alpha rises when the entropy is below the target and falls when above;
  ``H_target = entropy_target * ln(K) * D`` (0.1 ln 15 per dimension, paper Table 11).

Log-probabilities come from ``log_softmax`` (never ``log(softmax)``) and are clamped below at the most negative
finite float, so a probability that underflows to exactly 0 (or a ``-inf`` logit) gives a finite log-probability
and a zero ``p log p`` term instead of NaN.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from lcpo.numerics import categorical
from lcpo.agents.offpolicy import (
    OffPolicyAgent,
    factorized_q,
    make_head_net,
    polyak_update,
    reduce_heads,
)
from lcpo.agents.nets import make_fast_policy
from lcpo.numerics.finite import OVERFLOW_HINT, check_finite

__all__ = ["SAC", "SACHyperparameters", "finite_log_probs", "policy_entropy"]


def finite_log_probs(logits: torch.Tensor) -> torch.Tensor:
    """Per-dimension log-probabilities ``log_softmax(logits)`` clamped to finite values.

    Args:
        logits: ``(B, D, K)`` floating logits (``-inf`` allowed for impossible bins, at least one finite per row).

    Returns:
        ``(B, D, K)`` log-probabilities, every entry finite (at least ``torch.finfo(dtype).min``).
    """
    return torch.log_softmax(logits, dim=-1).clamp(min=torch.finfo(logits.dtype).min)


def policy_entropy(logp: torch.Tensor) -> torch.Tensor:
    """``(B,)`` entropy (nats) of a product of categoricals, summed over dimensions, from ``logp (B, D, K)``.

    Terms with probability 0 contribute exactly 0, values and gradients, whether ``logp`` is ``-inf`` there or
    clamped by :func:`finite_log_probs` (:func:`lcpo.numerics.categorical.entropy`).
    """
    return categorical.entropy(logp)


@dataclass(frozen=True)
class SACHyperparameters:
    """Discrete SAC settings.

    Attributes:
        network: ``"auto"`` (the environment's ``default_network``, else ``"mlp"``), ``"mlp"``, or a kind
            registered in :data:`lcpo.agents.nets.NETWORKS`.
        hidden: hidden layer sizes of the actor and of each critic (ReLU MLPs).
        actor_lr: Adam learning rate of the actor (4e-4, paper Table 11 and the authors' run configuration).
        critic_lr: Adam learning rate of the twin critics.
        alpha_lr: Adam learning rate of ``log_alpha``.
        weight_decay: Adam L2 weight decay of actor and critics (1e-4, as the authors' agents).
        gamma: discount per step (overridden per step by an environment's ``info["gamma"]``).
        batch_size: transitions per gradient step.
        tau: Polyak step of the target critics after each gradient step.
        buffer_size: replay capacity in transitions (oldest evicted first); a run (``lcpo run``, a sweep) sets
            it to the run's length when not set ("all samples", paper Table 11; :mod:`lcpo.agents.run_length`).
        learning_starts: transitions stored before the first update.
        train_every: environment steps between update rounds (200: one round per 200-step epoch, the
            paper's cadence; 1 updates every step, far more sample-efficient and ~200x the update compute).
        gradient_steps: gradient steps per update round.
        auto_entropy: tune the temperature automatically (else it stays at ``alpha_init``).
        alpha_init: initial temperature.
        entropy_target: target entropy per action dimension, as a fraction of ``ln(bins)`` (0.1, Table 11), in
            ``[0, 1)``: 1 (the uniform policy's entropy) is unreachable and refused; above 0.95 a warning.
        head_reduction: ``"mean"`` or ``"sum"`` of the per-dimension Q-values into the joint Q (``"sum"``, as
            the authors' agents).
        max_grad_norm: gradient-norm clip of actor and critics (1, as the authors' agents).
        normalize_returns: divide minibatch rewards by the running spread of the discounted return,
            ``sqrt(Var[G] + 1)`` (:class:`lcpo.numerics.normalize.ReturnNormalizer`; on, as in the authors' implementation).
    """

    network: str = "auto"
    hidden: tuple[int, ...] = (64, 64)
    actor_lr: float = 4e-4
    critic_lr: float = 1e-3
    alpha_lr: float = 1e-3
    weight_decay: float = 1e-4
    gamma: float = 0.99
    batch_size: int = 512
    tau: float = 0.01
    buffer_size: int = 1_000_000
    learning_starts: int = 1_000
    train_every: int = 200
    gradient_steps: int = 1
    auto_entropy: bool = True
    alpha_init: float = 0.1
    entropy_target: float = 0.1
    head_reduction: str = "sum"
    max_grad_norm: float = 1.0
    normalize_returns: bool = True


class SAC(OffPolicyAgent):
    """Online discrete soft actor-critic with twin factorized critics (see module docstring).

    Args:
        env: environment with a Discrete or MultiDiscrete action space and a 1-D Box observation space.
        seed: run seed (network initialisation, action sampling, replay sampling).
        hparams: a :class:`SACHyperparameters` (defaults if None).
        **overrides: hyperparameter fields to override.

    Raises:
        ValueError: for unknown or invalid hyperparameters (named), e.g. ``entropy_target >= 1``; TypeError for
            unsupported spaces.

    Warns:
        UserWarning: for ``entropy_target > 0.95`` (see :func:`lcpo.numerics.categorical.entropy_target_nats`).

    Example:
        >>> import gymnasium as gym, lcpo.envs
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        >>> agent = SAC(env, seed=0, learning_starts=100, buffer_size=1000).learn(400)
        >>> len(agent.episodes), agent.updates
        (2, 2)
    """

    name = "sac"
    Hyperparameters = SACHyperparameters

    def __init__(self, env: gym.Env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        reduce_heads(torch.zeros(1, 1), hp.head_reduction)  # validates the name
        if not (math.isfinite(hp.alpha_init) and hp.alpha_init > 0):
            raise ValueError(f"alpha_init must be a finite number > 0, got {hp.alpha_init}")
        D, K = self.action_dims, self.action_bins
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.actor = make_head_net(env, self.obs_dim, D, K, hp.hidden, hp.network)
            self.q1 = make_head_net(env, self.obs_dim, D, K, hp.hidden, hp.network)
            self.q2 = make_head_net(env, self.obs_dim, D, K, hp.hidden, hp.network)
        self.q1_target = copy.deepcopy(self.q1).requires_grad_(False)
        self.q2_target = copy.deepcopy(self.q2).requires_grad_(False)
        self._actor_params = list(self.actor.parameters())
        self._critic_params = [*self.q1.parameters(), *self.q2.parameters()]
        self._critic_target_params = [*self.q1_target.parameters(), *self.q2_target.parameters()]
        self.actor_opt = torch.optim.Adam(self._actor_params, lr=hp.actor_lr, weight_decay=hp.weight_decay,
                                          fused=True)
        self.critic_opt = torch.optim.Adam(self._critic_params, lr=hp.critic_lr, weight_decay=hp.weight_decay,
                                           fused=True)
        self.log_alpha = torch.full((1,), math.log(hp.alpha_init), requires_grad=True)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=hp.alpha_lr)
        # rejects a fraction >= 1 (ln K is unreachable), warns above 0.95 (lcpo.numerics.categorical.entropy_target_nats)
        self.target_entropy = categorical.entropy_target_nats(hp.entropy_target, K, D, type(self).__name__)
        self.fast_actor = make_fast_policy(self.actor)
        self._noise = np.zeros((0, D * K), dtype=np.float32)
        self._noise_i = 0

    @property
    def alpha(self) -> float:
        """Current entropy temperature ``exp(log_alpha)``."""
        return math.exp(self.log_alpha.item())

    # -- acting (hot path) -----------------------------------------------------------------------------
    def act(self, obs: np.ndarray, deterministic: bool = False):
        """Sample an action for one observation ``(obs_dim,)`` (Gumbel-max with pre-drawn noise), or the most
        probable one if ``deterministic``.

        Returns:
            ``(D,)`` int64 bin indices (an int64 scalar for a ``Discrete`` action space).
        """
        if deterministic:
            a = self.fast_actor.greedy(obs)
        else:
            if self._noise_i >= self._noise.shape[0]:
                self._noise = self.rngs["act"].gumbel(size=(256, self.action_dims * self.action_bins)).astype(
                    np.float32)
                self._noise_i = 0
            a = self.fast_actor.sample(obs, self._noise[self._noise_i])
            self._noise_i += 1
        return a[0] if self.scalar_action else a

    def _sync_fast(self) -> None:
        self.fast_actor.sync()

    # -- learning --------------------------------------------------------------------------------------
    def soft_value(self, logp: torch.Tensor, q_min: torch.Tensor, alpha: float) -> torch.Tensor:
        """``(B,)`` soft state value ``reduce_d sum_k pi_d Qmin_d + alpha H`` from ``logp, q_min (B, D, K)``."""
        expected_q = reduce_heads((logp.exp() * q_min).sum(-1), self.hp.head_reduction)
        return expected_q + alpha * policy_entropy(logp)

    def targets(self, batch: dict[str, torch.Tensor], alpha: float | None = None) -> torch.Tensor:
        """``(B,)`` soft Bellman targets ``r + gamma (1 - terminated) V(s')`` of a minibatch from
        :meth:`sample_batch`, with ``V`` from the current policy and the elementwise minimum of the target
        critics (no gradient). ``alpha`` defaults to the current temperature.

        Raises:
            ValueError: if a target is inf or NaN (float32 overflow), naming the step.
        """
        alpha = self.alpha if alpha is None else alpha
        with torch.no_grad():
            nxt = batch["next_obs"]
            logp_next = finite_log_probs(self.actor(nxt))
            q_next = torch.minimum(self.q1_target(nxt), self.q2_target(nxt))
            y = batch["rewards"] + batch["gamma"] * batch["not_terminated"] * self.soft_value(logp_next, q_next,
                                                                                              alpha)
        check_finite("TD targets", y, f"at the update at agent step {self.steps}", OVERFLOW_HINT)
        return y

    def update(self, batch: dict[str, torch.Tensor]) -> dict:
        """One critic step, one actor step, one temperature step, then Polyak steps; returns diagnostics."""
        hp = self.hp
        alpha = self.alpha
        obs, actions = batch["obs"], batch["actions"]
        y = self.targets(batch, alpha)
        q1_all, q2_all = self.q1(obs), self.q2(obs)
        q1_sa = factorized_q(q1_all, actions, hp.head_reduction)
        q2_sa = factorized_q(q2_all, actions, hp.head_reduction)
        critic_loss = torch.nn.functional.mse_loss(q1_sa, y) + torch.nn.functional.mse_loss(q2_sa, y)
        check_finite("critic loss", critic_loss.detach(), f"at the update at agent step {self.steps}", OVERFLOW_HINT)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        torch.nn.utils.clip_grad_norm_(self._critic_params, hp.max_grad_norm, foreach=True)
        self.critic_opt.step()

        q_min = torch.minimum(q1_all, q2_all).detach()
        logp = finite_log_probs(self.actor(obs))
        soft_v = self.soft_value(logp, q_min, alpha)
        actor_loss = -soft_v.mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        torch.nn.utils.clip_grad_norm_(self._actor_params, hp.max_grad_norm, foreach=True)
        self.actor_opt.step()

        entropy = float(policy_entropy(logp.detach()).mean())
        if hp.auto_entropy:
            self.temperature_step(entropy)
        polyak_update(self._critic_target_params, self._critic_params, hp.tau)
        return {"train/critic_loss": critic_loss.item(), "train/actor_loss": actor_loss.item(),
                "train/q_mean": q1_sa.mean().item(), "train/entropy": entropy, "train/alpha": self.alpha}

    def temperature_step(self, entropy: float) -> None:
        """One Adam step on ``log_alpha * (entropy - target_entropy)`` (Haarnoja et al. 2018b, eq. 18, in
        log-space): alpha rises when ``entropy`` (nats, summed over dimensions) is below the target, falls when
        above.

        Raises:
            ValueError: on a non-finite entropy.
        """
        if not math.isfinite(entropy):
            raise ValueError(f"entropy must be finite, got {entropy}")
        loss = self.log_alpha * (entropy - self.target_entropy)
        self.alpha_opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        self.alpha_opt.step()

    # -- persistence -----------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Actor, twin critics and their targets, optimizers, temperature, replay buffer (with per-sample
        discounts), RNG states, the pre-drawn noise block and counters."""
        return {
            "actor": self.actor.state_dict(), "q1": self.q1.state_dict(), "q2": self.q2.state_dict(),
            "q1_target": self.q1_target.state_dict(), "q2_target": self.q2_target.state_dict(),
            "actor_opt": self.actor_opt.state_dict(), "critic_opt": self.critic_opt.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(), "alpha_opt": self.alpha_opt.state_dict(),
            "noise": self._noise.copy(), "noise_i": int(self._noise_i), **self._base_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly.

        Raises:
            ValueError: on a replay buffer of another configuration; KeyError/RuntimeError on missing or
                mis-shaped network entries.
        """
        for name in ("actor", "q1", "q2", "q1_target", "q2_target", "actor_opt", "critic_opt", "alpha_opt"):
            getattr(self, name).load_state_dict(state[name])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self._noise = np.asarray(state["noise"], dtype=np.float32)
        self._noise_i = int(state["noise_i"])
        self._load_base_state(state)
        self._sync_fast()
