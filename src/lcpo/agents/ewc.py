"""Online elastic weight consolidation (EWC) on discrete SAC: a task-free continual-learning baseline.

Online EWC (Schwarz et al. 2018, "Progress & Compress: A scalable framework for continual learning", ICML,
section "online EWC"; Kirkpatrick et al. 2017) as used by the LCPO paper (Hamadanian et al., ICLR 2025,
appendix D): without task boundaries, every ``fisher_every``-th update is a consolidation, after which the agent
keeps a decayed running *sum* of the diagonal Fisher information ``F`` and a running average ``theta*`` of the
parameters, and penalises the actor's drift from ``theta*``:

* after every ``fisher_every``-th update, with ``gamma = ewc_beta``:
  ``F <- gamma F + F_batch`` (Schwarz et al.'s online-EWC rule ``F*_i = gamma F*_{i-1} + F_i``: old Fishers are
  down-weighted by ``gamma`` and the new one enters with weight 1) and
  ``theta* <- gamma theta* + (1 - gamma) theta`` (``F`` starts at 0, ``theta*`` at the initial parameters);
* ``F_batch`` is the *empirical* diagonal Fisher of the policy on ``fisher_samples`` replayed transitions: the
  mean over samples of the squared per-sample gradient of ``log pi(a_i | s_i)`` (stored actions), computed with
  ``torch.func.vmap`` over ``torch.func.grad`` (:func:`diagonal_fisher`), never the square of the mean gradient;
* the actor loss of SAC gains ``ewc_alpha * sum_i F_i (theta_i - theta*_i)^2``.

Where this departs from Schwarz et al., and why:

* their penalty is ``(lambda / 2) ||theta - theta*||^2_{gamma F}``; the constant ``gamma / 2`` is absorbed into
  ``ewc_alpha`` (``ewc_alpha = lambda gamma / 2``);
* their anchor ``theta*`` is the parameters at the last consolidation. With a consolidation after every update
  (no task boundaries) that anchor is the previous update's parameters, so the penalty would only shorten each
  step and never pull the policy back toward what it was; the anchor here is a running average of the
  parameters over the Fisher's horizon instead, as in the LCPO authors' implementation (which also averages
  the Fisher, ``F <- gamma F + (1 - gamma) F_batch``: ``1 - gamma`` times the published ``F``; their
  ``ewc_alpha`` values correspond to ``(1 - gamma)`` times ours).

Only the actor (the policy, whose forgetting the paper studies) is penalised; the twin critics train as in plain
SAC and keep tracking the current returns. The penalty's gradient ``2 alpha F (theta - theta*)`` is added to each
actor parameter's gradient during the actor's backward pass (a tensor hook), so it is part of the gradient that
SAC clips, exactly as if it were a term of the actor loss.

Settings: the paper sweeps the penalty weight and the averaging weight per environment (Table 11); the defaults
here (``ewc_alpha = 0.01``, ``ewc_beta = 0.99``, Fisher on 64 samples every update; with ``F`` near its steady
state ``F_batch / (1 - gamma)`` this is the penalty strength of ``ewc_alpha = 1`` on an averaged Fisher) are
documented starting points, not the paper's tuned values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import torch
from torch.func import functional_call, grad, vmap

from lcpo.agents.base import require_ints
from lcpo.agents.sac import SAC, SACHyperparameters, finite_log_probs

__all__ = ["EWC", "EWCHyperparameters", "diagonal_fisher"]


def diagonal_fisher(loss_fn: Callable, params: dict[str, torch.Tensor],
                    *batch: torch.Tensor) -> dict[str, torch.Tensor]:
    """Diagonal empirical Fisher: the mean over samples of the squared per-sample gradients.

    ``F_j = (1/B) sum_b (d loss_fn(params, x_b) / d params_j)^2`` (Kirkpatrick et al. 2017, eq. 3 diagonal), with
    per-sample gradients from ``vmap(grad(loss_fn))`` (one vectorised pass, no Python loop over samples).

    Args:
        loss_fn: ``(params, *sample) -> scalar tensor`` for ONE sample (each ``sample`` tensor without the batch
            dimension); typically a negative log-likelihood.
        params: name -> tensor of the parameters (detached from any optimiser; they are not modified).
        *batch: tensors with a leading batch dimension ``B >= 1`` (the same ``B`` for all).

    Returns:
        name -> tensor of the same shape and dtype as ``params[name]``: the diagonal Fisher estimate (>= 0).

    Raises:
        ValueError: if no batch tensor is given, the batch sizes differ or are 0, or a gradient is non-finite.

    Example:
        >>> w = {"w": torch.tensor(2.0)}
        >>> f = diagonal_fisher(lambda p, x: p["w"] * x, w, torch.tensor([1.0, 3.0]))
        >>> float(f["w"])  # mean of 1^2 and 3^2, not ((1 + 3) / 2)^2 = 4
        5.0
    """
    if not batch:
        raise ValueError("diagonal_fisher needs at least one batch tensor")
    sizes = {int(t.shape[0]) for t in batch}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError(f"batch tensors must share a batch size >= 1, got sizes {[int(t.shape[0]) for t in batch]}")
    detached = {k: v.detach() for k, v in params.items()}
    grads = vmap(grad(loss_fn), in_dims=(None, *([0] * len(batch))))(detached, *batch)
    out = {}
    for k, g in grads.items():
        if not torch.isfinite(g).all():
            raise ValueError(f"non-finite per-sample gradient for parameter {k!r}")
        out[k] = g.square().mean(0)
    return out


@dataclass(frozen=True)
class EWCHyperparameters(SACHyperparameters):
    """Online EWC on discrete SAC: every :class:`~lcpo.agents.sac.SACHyperparameters` field, plus:

    Attributes:
        ewc_alpha: penalty weight ``alpha`` of ``alpha * sum_i F_i (theta_i - theta*_i)^2`` (>= 0; 0 is SAC).
        ewc_beta: decay ``gamma`` in [0, 1) of online EWC: ``F <- gamma F + F_batch`` (Schwarz et al. 2018) and
            ``theta* <- gamma theta* + (1 - gamma) theta``.
        fisher_samples: replayed transitions per Fisher estimate (the first ones of the update's minibatch).
        fisher_every: updates between Fisher/anchor updates.
    """

    ewc_alpha: float = 0.01
    ewc_beta: float = 0.99
    fisher_samples: int = 64
    fisher_every: int = 1


class EWC(SAC):
    """Online EWC on discrete SAC (see module docstring).

    Args:
        env: environment with a Discrete or MultiDiscrete action space and a 1-D Box observation space.
        seed: run seed.
        hparams: an :class:`EWCHyperparameters` (defaults if None).
        **overrides: hyperparameter fields to override.

    Raises:
        ValueError: for invalid hyperparameters (named).

    Example:
        >>> import gymnasium as gym, lcpo.envs
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        >>> agent = EWC(env, seed=0, learning_starts=100, buffer_size=1000, batch_size=32,
        ...           train_every=1).learn(300)
        >>> agent.updates, all(float(f.sum()) > 0 for f in agent.fisher.values())
        (201, True)
    """

    name = "ewc"
    Hyperparameters = EWCHyperparameters

    def __init__(self, env: gym.Env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        if not (math.isfinite(hp.ewc_alpha) and hp.ewc_alpha >= 0):
            raise ValueError(f"ewc_alpha must be a finite number >= 0, got {hp.ewc_alpha}")
        if not 0.0 <= hp.ewc_beta < 1.0:
            raise ValueError(f"ewc_beta must lie in [0, 1), got {hp.ewc_beta}")
        require_ints(hp, ("fisher_samples", "fisher_every"))
        named = dict(self.actor.named_parameters())
        self.fisher = {k: torch.zeros_like(p, requires_grad=False) for k, p in named.items()}
        self.anchor = {k: p.detach().clone() for k, p in named.items()}
        for k, p in named.items():
            p.register_hook(self._penalty_hook(k, p))

    def _penalty_hook(self, key: str, param: torch.Tensor):
        def hook(g: torch.Tensor) -> torch.Tensor:
            return g + (2.0 * self.hp.ewc_alpha) * self.fisher[key] * (param.detach() - self.anchor[key])
        return hook

    def penalty(self) -> torch.Tensor:
        """``ewc_alpha * sum_i F_i (theta_i - theta*_i)^2`` over the actor's parameters (scalar, no gradient)."""
        with torch.no_grad():
            total = sum((self.fisher[k] * (p - self.anchor[k]).square()).sum()
                        for k, p in self.actor.named_parameters())
        return self.hp.ewc_alpha * total

    def _nll(self, params: dict[str, torch.Tensor], obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        logp = finite_log_probs(functional_call(self.actor, params, (obs.unsqueeze(0),)))[0]  # (D, K)
        return -logp.gather(-1, action.unsqueeze(-1)).sum()

    def policy_fisher(self, obs: torch.Tensor, actions: torch.Tensor) -> dict[str, torch.Tensor]:
        """Empirical diagonal Fisher of the actor on ``obs (B, obs_dim) float32``, ``actions (B, D) int64``:
        the mean squared per-sample gradient of ``log pi(a_b | s_b)`` (see :func:`diagonal_fisher`)."""
        return diagonal_fisher(self._nll, dict(self.actor.named_parameters()), obs, actions)

    def update(self, batch: dict[str, torch.Tensor]) -> dict:
        """One SAC update with the EWC penalty in the actor's gradient, then (every ``fisher_every`` updates)
        the consolidation ``F <- gamma F + F_batch``, ``theta* <- gamma theta* + (1 - gamma) theta`` (module
        docstring); returns SAC's diagnostics plus ``train/ewc_penalty``."""
        hp = self.hp
        diag = super().update(batch)
        if (self.updates + 1) % hp.fisher_every == 0:
            n = min(hp.fisher_samples, batch["obs"].shape[0])
            f_new = self.policy_fisher(batch["obs"][:n], batch["actions"][:n])
            gamma = hp.ewc_beta
            with torch.no_grad():
                for k, p in self.actor.named_parameters():
                    self.fisher[k].mul_(gamma).add_(f_new[k])  # F*_i = gamma F*_{i-1} + F_i (Schwarz et al.)
                    self.anchor[k].lerp_(p, 1.0 - gamma)
        diag["train/ewc_penalty"] = float(self.penalty())
        return diag

    # -- persistence -----------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """SAC's state plus the running Fisher and anchor parameters."""
        return {**super().state_dict(), "fisher": {k: v.clone() for k, v in self.fisher.items()},
                "anchor": {k: v.clone() for k, v in self.anchor.items()}}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly.

        Raises:
            KeyError: missing Fisher/anchor entries; ValueError: mis-shaped ones (named).
        """
        super().load_state_dict(state)
        for name in ("fisher", "anchor"):
            mine = getattr(self, name)
            for k, v in mine.items():
                src = torch.as_tensor(state[name][k])
                if src.shape != v.shape:
                    raise ValueError(f"state {name}[{k!r}] has shape {tuple(src.shape)}, expected {tuple(v.shape)}")
                v.copy_(src)
