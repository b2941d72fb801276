"""Proximal policy optimization with the clipped surrogate (Schulman et al. 2017, "PPO-Clip", eq. 7).

Every rollout of ``rollout_steps`` transitions (200, as A2C and LCPO, so all online agents update equally
often):

1. GAE advantages and lambda-returns from the pre-update critic (:func:`lcpo.numerics.returns.gae_batch`;
   truncation bootstraps, termination does not);
2. up to ``epochs`` passes over the batch in shuffled minibatches of ``minibatch_size``; on each minibatch the
   critic takes one Adam step on the lambda-returns and the actor one Adam step on the clipped surrogate
   :func:`clipped_surrogate` (plus any extra term a subclass adds, e.g. LCPO-P's anchor cross-entropy);
3. early stop on KL: after every actor step the exact mean ``KL(pi_old || pi)`` over the whole batch is
   computed; once it exceeds ``max_kl`` no further steps are taken (the step that crossed is kept, as in
   Spinning Up and Stable-Baselines3).

The defaults follow the LCPO paper's appendix E.1 settings for the PPO core of LCPO-P (clip 0.2, up to 30
iterations, max KL 0.01) with the Table 11 networks and learning rates. With ``minibatch_size`` equal to
``rollout_steps`` (the default) each epoch is one full-batch step, so ``epochs`` is the number of iterations.

Batch-native (:class:`~lcpo.agents.batched.BatchOnPolicyAgent`, issue 26 item 1): ``PPO.population(env, seeds)``
holds N independent learners with a leading seed axis; ``PPO(env, seed)`` is the population of one. Per seed:
the advantage statistics, the minibatch shuffles (each seed's own ``buffer`` generator, drawn only while that
seed still steps), the surrogate, the gradient clips, both Adams' step counts, the KL and the early stop. The
seeds step in lockstep; a seed whose KL crossed ``max_kl`` leaves the active set (a mask, never a branch on
another seed's data) and the epochs end when no seed is active. A seed's run in a population is its solo run
bit for bit (plain MLPs; ``tests/agents/test_population_agents.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from lcpo.agents.base import OnPolicyHyperparameters
from lcpo.agents.batched import BatchOnPolicyAgent
from lcpo.agents.nets import CategoricalPolicy
from lcpo.agents.stacked import clip_grad_norm_per_seed
from lcpo.numerics.finite import OVERFLOW_HINT, check_finite

__all__ = ["PPO", "PPOHyperparameters", "clipped_surrogate", "normalize_advantages"]


def normalize_advantages(adv: torch.Tensor, mask: torch.Tensor | None = None, eps: float = 1e-8) -> torch.Tensor:
    """Standardise advantages with statistics of the steps the policy loss uses: ``(A - mean) / (std + eps)``.

    The statistics are taken along the last axis (one batch per leading index, e.g. per seed): the mean and the
    (unbiased) standard deviation over the steps with ``mask > 0`` only; forced steps (``mask = 0``, left out of
    the loss) neither shift nor scale the others, and come back as 0. A batch with fewer than two loss steps has
    no spread to estimate and is returned unchanged.

    Args:
        adv: ``(..., B)`` float advantages (``(B,)`` for one batch, ``(n, B)`` for ``n`` seeds).
        mask: optional ``(..., B)`` 0/1 weights (None: every step is used).
        eps: added to the standard deviation.

    Returns:
        ``(..., B)`` tensor of ``adv``'s dtype.

    Raises:
        ValueError: if the shapes differ.

    Example:
        >>> normalize_advantages(torch.tensor([1.0, 3.0, -100.0, -100.0]), torch.tensor([1.0, 1.0, 0.0, 0.0]))
        tensor([-0.7071,  0.7071,  0.0000,  0.0000])
    """
    if mask is None:
        mask = torch.ones_like(adv)
    if mask.shape != adv.shape:
        raise ValueError(f"normalize_advantages: shapes differ: adv {tuple(adv.shape)}, mask {tuple(mask.shape)}")
    used = mask > 0
    w = used.to(adv.dtype)
    count = w.sum(-1, keepdim=True)
    mean = (adv * w).sum(-1, keepdim=True) / count.clamp(min=1.0)
    centred = (adv - mean) * w
    std = ((centred * centred).sum(-1, keepdim=True) / (count - 1.0).clamp(min=1.0)).sqrt()
    zero = torch.zeros((), dtype=adv.dtype)
    out = torch.where(used, centred / (std + eps), zero)
    return torch.where(count >= 2.0, out, adv)


def clipped_surrogate(logp: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor, clip: float,
                      mask: torch.Tensor | None = None) -> torch.Tensor:
    """PPO's clipped surrogate loss (to minimise): ``-mean(min(r A, clip(r, 1-eps, 1+eps) A))``.

    ``r = exp(logp - logp_old)`` is the probability ratio (PPO paper eq. 7, sign flipped to a loss). For
    ``A > 0`` the gradient is zero once ``r > 1 + eps``; for ``A < 0`` once ``r < 1 - eps``. The mean is taken
    along the last axis (one loss per leading index, e.g. per seed).

    Args:
        logp: ``(..., B)`` log-probabilities of the taken actions under the current policy (differentiable).
        logp_old: ``(..., B)`` the same under the policy that collected the batch.
        adv: ``(..., B)`` advantages.
        clip: ``eps`` in (0, 1).
        mask: optional ``(..., B)`` 0/1 weights (0 for steps whose action was forced by the environment).

    Returns:
        ``(...)`` tensor (a scalar for ``(B,)`` inputs): the masked mean of the negated clipped objective.

    Raises:
        ValueError: if ``clip`` is not in (0, 1) or ``logp``, ``logp_old`` and ``adv`` differ in shape (``mask``
            is not checked).
    """
    if not 0.0 < clip < 1.0:
        raise ValueError(f"PPO clip must be in (0, 1), got {clip}")
    if logp.shape != logp_old.shape or logp.shape != adv.shape:
        raise ValueError(f"clipped_surrogate: shapes differ: logp {tuple(logp.shape)}, "
                         f"logp_old {tuple(logp_old.shape)}, adv {tuple(adv.shape)}")
    ratio = torch.exp(logp - logp_old)
    obj = torch.minimum(ratio * adv, ratio.clamp(1.0 - clip, 1.0 + clip) * adv)
    if mask is None:
        return -obj.mean(-1)
    return -(obj * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


@dataclass(frozen=True)
class PPOHyperparameters(OnPolicyHyperparameters):
    """PPO settings (networks and learning rates: paper Table 11; PPO core: paper appendix E.1).

    Attributes:
        network: ``"auto"`` (the environment's ``default_network``, else ``"mlp"``), ``"mlp"``, or a kind
            registered in :data:`lcpo.agents.nets.NETWORKS`.
        hidden: hidden layer sizes of actor and critic.
        actor_lr: Adam learning rate of the actor.
        critic_lr: Adam learning rate of the critic.
        weight_decay: Adam L2 weight decay of both networks.
        gamma: discount per step.
        gae_lambda: GAE lambda.
        rollout_steps: transitions per update (200, as A2C and LCPO).
        max_grad_norm: gradient-norm clip of each network's step.
        clip: ratio clip ``eps`` of the surrogate.
        epochs: maximum passes over the batch ("up to 30 iterations").
        minibatch_size: states per Adam step (default: the whole rollout; when smaller, each epoch visits
            the batch in a fresh random order and its last minibatch may be smaller).
        max_kl: early-stop threshold on the mean KL(pi_old || pi) over the batch (nats).
        normalize_advantages: standardise the batch's advantages (zero mean, unit std) before the epochs, with
            the statistics of the steps the loss uses (forced steps excluded; :func:`normalize_advantages`).
        entropy_coef: entropy bonus weight (0: none, as the paper's baselines).
    """

    clip: float = 0.2
    epochs: int = 30
    minibatch_size: int = 200
    max_kl: float = 0.01
    normalize_advantages: bool = True
    entropy_coef: float = 0.0


#: a subclass's extra actor-loss term: ``term(js, log_probs)`` for the active positions ``js`` ((m,) int64, positions
#: in the update's ``idx``), whose current actors give ``log_probs(x (m, B, obs_dim)) -> (m, B, D, K)``, returns
#: their ``(m,)`` loss terms (zero where a seed has none), or None for none at all.
ExtraLoss = Callable[[np.ndarray, Callable[[torch.Tensor], torch.Tensor]], "torch.Tensor | None"]


class PPO(BatchOnPolicyAgent):
    """Online PPO-Clip with a product-of-categoricals actor (see module docstring).

    Subclasses may add a per-seed loss term through :meth:`_extra_loss` and act after the policy epochs through
    :meth:`_after_update` (LCPO-P uses both).

    Raises:
        ValueError: for a clip outside (0, 1), ``epochs < 1``, ``minibatch_size < 1`` or ``max_kl <= 0``; and the
            errors of :class:`~lcpo.agents.batched.BatchOnPolicyAgent` (invalid hyperparameters, bad seeds, an
            unusable device; TypeError for unsupported spaces).

    Example:
        >>> import gymnasium as gym, lcpo.envs
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        >>> PPO(env, seed=0).learn(400).updates
        2
        >>> pop = PPO.population(env, seeds=[0, 1, 2])
        >>> pop.act_batch(np.zeros((3, 9), np.float32)).shape
        (3, 1)
    """

    name = "ppo"
    Hyperparameters = PPOHyperparameters

    def __init__(self, env, seed: int = 0, hparams=None, *, seeds=None, **overrides):
        super().__init__(env, seed, hparams, seeds=seeds, **overrides)
        hp = self.hp
        if not 0.0 < hp.clip < 1.0:
            raise ValueError(f"PPO clip must be in (0, 1), got {hp.clip}")
        if hp.epochs < 1 or hp.minibatch_size < 1:
            raise ValueError(f"PPO needs epochs >= 1 and minibatch_size >= 1, got {hp.epochs}, {hp.minibatch_size}")
        if not hp.max_kl > 0.0:
            raise ValueError(f"PPO max_kl must be positive, got {hp.max_kl}")
        self.seed_early_stops = np.zeros(self.n_seeds, dtype=np.int64)

    @property
    def early_stops(self):
        """Updates ended early by the KL threshold: an int (single agent) or the ``(N,)`` int64 array."""
        return int(self.seed_early_stops[0]) if self.n_seeds == 1 else self.seed_early_stops

    # -- hooks for variants --------------------------------------------------------------------------------
    def _extra_loss(self, idx: np.ndarray, batch: dict, diags: list[dict]) -> ExtraLoss | None:
        """Hook called once per update before the epochs: return an :data:`ExtraLoss` added to every actor step
        of the seeds it covers, or None (plain PPO). May write per-seed diagnostics into ``diags`` (one dict per
        slot of ``idx``)."""
        return None

    def _after_update(self, idx: np.ndarray, batch: dict, diags: list[dict]) -> None:
        """Hook called once per update after the epochs (plain PPO: nothing)."""

    # -- the update -----------------------------------------------------------------------------------------
    def update(self, idx: np.ndarray) -> list[dict]:
        """Up to ``epochs`` passes of minibatch steps with a per-seed early stop on KL, for the full rollout
        batches of the seed slots ``idx`` (``(n,)`` int64); one diagnostics dict per slot.

        The seeds still stepping form a working set (:meth:`_working`): the stacks themselves while every seed of
        the population steps, else (plain MLPs) compact copies of those seeds' rows, parameters and Adam state,
        written back when the set shrinks and at the end, so that a step costs what its seeds cost. With
        full-batch steps (``minibatch_size >= rollout_steps``) the forward pass that measures the KL after a
        step is also the next step's forward pass (the actor has not moved in between; its graph is kept).
        Implements PPO-Clip (Schulman et al. 2017, eq. 7) on GAE advantages (Schulman et al. 2016).

        Raises:
            ValueError: for non-finite or float32-overflowing advantages or returns, or a non-finite critic loss
                (:mod:`lcpo.numerics.finite`). A critic loss that turns non-finite after the first minibatch step
                leaves the agent partly updated (no snapshot is kept, to spare a copy of every parameter at every
                update): a run stops there, and resuming from its last checkpoint restores the agent before it.
        """
        hp = self.hp
        b = self._batch(idx)
        obs, actions, adv, mask, ret = b["obs"], b["actions"], b["adv"], b["mask"], b["ret"]
        dev = obs.device
        if hp.normalize_advantages:
            adv = normalize_advantages(adv, mask)  # per seed, statistics of the loss's (unforced) steps only
        n, T = adv.shape
        mb = min(hp.minibatch_size, T)
        full = mb == T
        idx = np.asarray(idx)
        active = np.ones(n, dtype=bool)
        w = self._working(idx)
        with torch.set_grad_enabled(full):  # full batch: also the first step's forward pass
            first = self._w_log_probs(w, obs)
        logp_old_all = first.detach()
        logp_old = CategoricalPolicy.log_prob_of(logp_old_all, actions)
        fwd = first if full else None  # log-probs with graph at the working set's current actor
        diags: list[dict] = [{} for _ in range(n)]
        extra = self._extra_loss(idx, b, diags)
        steps = np.zeros(n, dtype=np.int64)
        kl = np.zeros(n)
        value_loss = np.zeros(n)
        policy_loss = np.zeros(n)
        perm = None if full else np.zeros((n, T), dtype=np.int64)
        cur = self._active_view(np.arange(n), obs, actions, adv, mask, ret, logp_old, logp_old_all)
        for _ in range(hp.epochs):
            if not active.any():
                break
            if perm is not None:  # each still-active seed draws its own order (its solo run's draws)
                for j in np.flatnonzero(active):
                    perm[j] = self.seed_rngs[int(idx[j])]["buffer"].permutation(T)
            for start in range(0, T, mb):
                if cur is None:  # the active set shrank: a new working set of the seeds still stepping
                    self._release(w)
                    js = np.flatnonzero(active)
                    w = self._working(idx[js])
                    cur = self._active_view(js, obs, actions, adv, mask, ret, logp_old, logp_old_all)
                    fwd = None
                js, sub = cur["js"], cur
                if perm is not None:
                    cols = torch.from_numpy(perm[js, start:start + mb]).to(dev)
                    rows = torch.arange(len(js), device=dev).unsqueeze(1)
                    sub = {k: cur[k][rows, cols] for k in ("obs", "actions", "adv", "mask", "ret", "logp_old")}
                v = self._w_values(w, sub["obs"])
                closs = ((v - sub["ret"]) ** 2).mean(dim=1)
                check_finite("critic loss", closs.detach(), "at the update", OVERFLOW_HINT)
                self._w_step(w, "critic", closs)
                value_loss[js] = closs.detach().cpu().numpy()
                logp_all = fwd if fwd is not None else self._w_log_probs(w, sub["obs"])
                logp = CategoricalPolicy.log_prob_of(logp_all, sub["actions"])
                loss = clipped_surrogate(logp, sub["logp_old"], sub["adv"], hp.clip, sub["mask"])
                policy_loss[js] = loss.detach().cpu().numpy()
                if hp.entropy_coef:
                    loss = loss - hp.entropy_coef * CategoricalPolicy.entropy_of(logp_all).mean(dim=1)
                if extra is not None:
                    term = extra(js, lambda x, w=w: self._w_log_probs(w, x))
                    if term is not None:
                        loss = loss + term
                self._w_step(w, "actor", loss)
                steps[js] += 1
                with torch.set_grad_enabled(full):
                    now = self._w_log_probs(w, cur["obs"])
                fwd = now if full else None
                with torch.no_grad():
                    kl[js] = CategoricalPolicy.kl(cur["logp_old_all"], now.detach()).mean(dim=1).double().cpu().numpy()
                crossed = kl[js] > hp.max_kl
                if crossed.any():
                    active[js[crossed]] = False
                    cur = None
                    if not active.any():
                        break
        fwd = None
        self._release(w)
        stopped = ~active
        self.seed_early_stops[idx] += stopped
        with torch.no_grad():
            logp_all = self.actors.log_probs(obs, b["sel"])
            ratio = torch.exp(CategoricalPolicy.log_prob_of(logp_all, actions) - logp_old)
            clipped = ((ratio - 1.0).abs() > hp.clip).float()
            clip_frac = ((clipped * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).tolist()  # loss's steps
            entropy = CategoricalPolicy.entropy_of(logp_all).mean(dim=1).tolist()
        for j in range(n):
            diags[j].update({"train/policy_loss": float(policy_loss[j]), "train/value_loss": float(value_loss[j]),
                             "train/kl": float(kl[j]), "train/iterations": float(steps[j]),
                             "train/early_stop": float(stopped[j]), "train/clip_fraction": clip_frac[j],
                             "train/entropy": entropy[j]})
        self._after_update(idx, b, diags)
        return diags

    @staticmethod
    def _active_view(js, obs, actions, adv, mask, ret, logp_old, logp_old_all) -> dict:
        """The rows ``js`` (positions in the update's ``idx``) of the update's tensors."""
        pos = None if len(js) == obs.shape[0] else torch.from_numpy(js).to(obs.device)

        def pick(t):
            return t if pos is None else t[pos]

        return {"js": js, "obs": pick(obs), "actions": pick(actions), "adv": pick(adv), "mask": pick(mask),
                "ret": pick(ret), "logp_old": pick(logp_old), "logp_old_all": pick(logp_old_all)}

    # -- the working set: the seeds that step --------------------------------------------------------------
    def _working(self, rows: np.ndarray) -> dict:
        """The working set of the seed slots ``rows`` (sorted): the whole stacks (all N seeds), compact copies of
        their rows (plain MLPs: parameters and Adam state, :meth:`lcpo.agents.stacked.SeedAdam.subset`), or the
        whole stacks indexed by a selector (other networks, whose members' modules are views of the stacks)."""
        rows = np.asarray(rows, dtype=np.int64)
        w = {"rows": rows, "compact": False, "sel": self._sel(rows, self.n_seeds),
             "mask": self._mask_of(rows)}
        if w["sel"] is None or not (self.actors.batched and self.critics.batched):
            return w
        t = w["sel"]
        for name, stack, opt in (("actor", self.actors, self.actor_opt), ("critic", self.critics, self.critic_opt)):
            params = [torch.nn.Parameter(P.detach()[t]) for P in stack.params]  # advanced indexing copies
            w[name] = (params, opt.subset(rows, params))
        w.update(compact=True, sel=None, mask=None, index=t)
        return w

    def _release(self, w: dict) -> None:
        """Write a compact working set's parameters and Adam state back into the stacks (else nothing)."""
        if not w["compact"]:
            return
        with torch.no_grad():
            for name, stack, opt in (("actor", self.actors, self.actor_opt), ("critic", self.critics, self.critic_opt)):
                params, sub = w[name]
                for P, Q in zip(stack.params, params):
                    P.data[w["index"]] = Q.data
                opt.merge(w["rows"], sub)

    def _w_log_probs(self, w: dict, x: torch.Tensor) -> torch.Tensor:
        """``(m, B, D, K)`` log-probabilities of the working set's actors on ``x (m, B, obs_dim)``."""
        return self.actors.log_probs(x, w["sel"], w["actor"][0] if w["compact"] else None)

    def _w_values(self, w: dict, x: torch.Tensor) -> torch.Tensor:
        """``(m, B)`` values of the working set's critics on ``x (m, B, obs_dim)``."""
        return self.critics(x, w["sel"], w["critic"][0] if w["compact"] else None)

    def _w_step(self, w: dict, name: str, loss: torch.Tensor) -> None:
        """One per-seed Adam step (per-seed clip) of the working set's ``"actor"`` or ``"critic"`` on ``loss (m,)``."""
        if w["compact"]:
            params, opt = w[name]
        elif name == "actor":
            params, opt = self.actors.params, self.actor_opt
        else:
            params, opt = self.critics.params, self.critic_opt
        for p in params:
            p.grad = None
        loss.sum().backward()
        clip_grad_norm_per_seed(params, self.hp.max_grad_norm, w["sel"])
        opt.step(w["mask"])

    # -- persistence -----------------------------------------------------------------------------------
    def seed_state_dict(self, k: int) -> dict:
        """Seed slot ``k``'s state in the single PPO agent's format (the on-policy state plus the early-stop
        counter).

        Raises:
            IndexError: for a slot outside ``[0, N)``.
        """
        state = super().seed_state_dict(k)
        state["early_stops"] = int(self.seed_early_stops[k])
        return state

    def _load_seed(self, k: int, state: dict) -> None:
        """Restore seed slot ``k`` from a single PPO agent's ``state_dict`` exactly.

        Raises:
            IndexError: for a slot outside ``[0, N)``.
            ValueError: the errors of :meth:`~lcpo.agents.batched.BatchOnPolicyAgent.load_seed_state_dict`.
            KeyError: for a state without ``early_stops`` (e.g. another agent's state).
        """
        super()._load_seed(k, state)
        self.seed_early_stops[k] = int(state["early_stops"])
