"""The batch-native on-policy machinery: one implementation with a leading seed axis (issue 26 item 1).

:class:`BatchOnPolicyAgent` is what :class:`~lcpo.agents.base.OnPolicyAgent` is for a single learner, for N
independent learners at once: stacked actor and critic (:class:`~lcpo.agents.stacked.SeedStack`), per-seed Adam
(:class:`~lcpo.agents.stacked.SeedAdam`), per-seed gradient clipping, per-seed rollout batches
(:class:`~lcpo.memory.rollout.SeedRollout`), per-seed return normalisers, per-seed random generators (seed ``k``'s
spawned exactly as a solo run of that seed spawns them) and per-seed Gumbel noise blocks. The single agent
``Cls(env, seed)`` is the population of one of the same code; ``Cls.population(env, seeds)`` builds N.

What keeps the seeds independent: nothing is reduced across the seed axis. Losses are per seed and summed only
to call ``backward`` once (the gradient of a sum of independent terms is each term's own gradient); norms, clip
coefficients, Adam bias corrections, normaliser moments and random streams are per seed.

Exactness (measured in ``tests/agents/test_population_agents.py``): with plain MLPs a seed's run in a population
is bit-identical to its solo run (batched products give each row the same result whatever the batch; the
Gumbel draws, the normaliser and GAE are per-seed scalar arithmetic).
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch

from lcpo.numerics.finite import F32_MAX, OVERFLOW_HINT, check_finite, check_transition, reward_error, to_float32
from lcpo.agents.base import Agent, spawn_rngs
from lcpo.agents.nets import make_actor_critic
from lcpo.agents.stacked import SeedAdam, SeedStack, StackedActing, clip_grad_norm_per_seed
from lcpo.memory.rollout import SeedRollout
from lcpo.numerics.normalize import ReturnNormalizer
from lcpo.online.loop import Transition
from lcpo.online.threads import limit_threads

__all__ = ["BatchOnPolicyAgent"]


class _LazyRows(Sequence):
    """``n`` items built on access by ``build(i)`` (not kept: each access builds anew)."""

    def __init__(self, n: int, build):
        self._n, self._build = n, build

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self._build(i)


def _discounts_and_masks(infos, n: int, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """Per seed, the step's discount (``info["gamma"]``, else ``gamma``) and whether its action counts in the
    policy loss (not ``info["forced"]``), as ``(n,)`` float64 and ``(n,)`` bool arrays.

    Read as whole arrays where every sub-env's info has the key (a VectorStream's ``StepInfos.batched``: the
    straggler environment reports both on every step), else from the N dicts one by one; the values are the same
    either way.
    """
    batched = getattr(infos, "batched", None)
    if batched is not None and infos.has("gamma") and infos.has("forced"):
        try:
            gammas, forced = np.asarray(batched("gamma")), np.asarray(batched("forced"))
        except KeyError:  # some sub-env lacks a key: one by one below
            pass
        else:  # only plain float discounts and bool flags, one per sub-env; anything else one by one below
            if (gammas.dtype.kind == "f" and gammas.shape == (n,) and forced.dtype == np.bool_
                    and forced.shape == (n,)):
                return gammas.astype(np.float64), ~forced
    gammas = np.full(n, gamma, dtype=np.float64)
    masks = np.ones(n, dtype=bool)
    for k, info in enumerate(infos):
        if info:
            gammas[k] = info.get("gamma", gamma)
            masks[k] = not info.get("forced", False)
    return gammas, masks


class BatchOnPolicyAgent(Agent):
    """N independent on-policy learners with a leading seed axis (see module docstring).

    Subclasses implement :meth:`update` for the seeds whose rollout is full, and may extend
    :meth:`seed_state_dict` / :meth:`load_seed_state_dict`.

    Args:
        env: one single template environment (spaces and context declaration; also what :meth:`learn` steps
            when N = 1).
        seed: the run seed of a single agent (ignored when ``seeds`` is given).
        hparams: a ``Hyperparameters`` instance (defaults if None).
        seeds: the run seeds of a population (use :meth:`population`); None: the single agent ``[seed]``.
        device: the torch device of the stacked networks, their Adam state and the update's tensors (``"cpu"``,
            the default; ``"cuda"``, ``"cuda:N"`` or another torch device string, checked by
            :func:`lcpo.online.device.resolve_device`). Not a hyperparameter: it changes where, not what, is
            computed; the rollout batches, GAE, the return normalisers (and LCPO's reservoir and OOD detector)
            stay in host NumPy arrays, copied to the device once per update. Networks are initialised on the CPU
            under each seed's torch RNG, so the initial weights do not depend on the device.
        **overrides: hyperparameter fields to override (the same for every seed).

    Raises:
        ValueError: for unknown or invalid hyperparameters, bad seeds or an unusable device (one line naming
            it); TypeError for unsupported spaces.
    """

    validates_transitions = True

    def __init__(self, env: gym.Env, seed: int = 0, hparams=None, *, seeds: Sequence[int] | None = None,
                 device: str | torch.device | None = None, **overrides):
        from lcpo.agents.population import check_seeds
        from lcpo.online.device import resolve_device

        self.device = resolve_device(device, "device")
        self._is_population = seeds is not None
        seeds = check_seeds([seed] if seeds is None else seeds)
        super().__init__(env, seeds[0], hparams, **overrides)
        hp = self.hp
        if hp.rollout_steps < 1:
            raise ValueError(f"rollout_steps must be >= 1, got {hp.rollout_steps!r}")
        self.seeds = seeds
        self.n_seeds = n = len(seeds)
        self.seed_rngs = [self.rngs] + [spawn_rngs(s) for s in seeds[1:]]
        actors, critics = [], []
        for s in seeds:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(s)
                a, c = self.build_networks()
            actors.append(a)
            critics.append(c)
        self.actors, self.critics = SeedStack(actors, self.device), SeedStack(critics, self.device)
        self.actor_opt, self.critic_opt = self.build_optimizers()
        self._acting = StackedActing(self.actors)
        self.rollouts = SeedRollout(n, hp.rollout_steps, self.obs_dim, self.action_dims)
        self.return_norms = [ReturnNormalizer() for _ in seeds]
        self._noise_rows = max(hp.rollout_steps, 256)
        self._noise = np.zeros((n, self._noise_rows, self.action_dims * self.action_bins), dtype=np.float32)
        self._noise_len = np.zeros(n, dtype=np.int64)
        self._noise_i = np.zeros(n, dtype=np.int64)
        self._rows = np.arange(n)
        self._obs_shape = (n, self.obs_dim)  # what act_batch takes
        self.seed_updates = np.zeros(n, dtype=np.int64)
        self.seed_steps = np.zeros(n, dtype=np.int64)
        # observe_batch's per-step discounts and policy masks where no info overrides them (read only)
        self._default_gammas = np.full(n, hp.gamma, dtype=np.float64)
        self._default_masks = np.ones(n, dtype=bool)
        self._default_gammas.flags.writeable = self._default_masks.flags.writeable = False

    @classmethod
    def population(cls, env: gym.Env, seeds: Sequence[int], **overrides) -> "BatchOnPolicyAgent":
        """N = ``len(seeds)`` independent learners of this agent in one object (the population contract of
        :mod:`lcpo.agents.population`).

        Args:
            env: one single (non-vector) template environment.
            seeds: distinct non-negative run seeds; slot ``k`` is the solo run of ``seeds[k]``.
            **overrides: hyperparameter overrides, the same for every seed (and ``device``, see the class).

        Raises:
            ValueError: for bad seeds or hyperparameters.
        """
        return cls(env, seeds=list(seeds), **overrides)

    # -- networks and optimizers (per seed, stacked) -------------------------------------------------------
    def build_networks(self):
        """One seed's ``(actor, critic)`` (called under that seed's torch RNG; stacked afterwards)."""
        return make_actor_critic(self.env, self.obs_dim, self.action_dims, self.action_bins, self.hp.hidden,
                                 self.hp.network)

    def build_optimizers(self):
        """``(actor_opt, critic_opt)``: per-seed Adam over the stacked parameters."""
        hp = self.hp
        return (SeedAdam(self.actors.params, hp.actor_lr, hp.weight_decay),
                SeedAdam(self.critics.params, hp.critic_lr, hp.weight_decay))

    # -- the single agent's view (N = 1) -------------------------------------------------------------------
    def _solo(self, what: str):
        if self.n_seeds != 1:
            raise AttributeError(f"{what} is a single agent's attribute; this population holds {self.n_seeds} "
                                 f"seeds (use the per-seed form, e.g. actors.members[k])")

    @property
    def actor(self):
        """The single agent's actor (seed 0's module; its parameters are views of the stack). N = 1 only.

        Raises:
            AttributeError: for a population of more than one seed (use ``actors.members[k]``).
        """
        self._solo("actor")
        return self.actors.members[0]

    @property
    def critic(self):
        """The single agent's critic (N = 1 only).

        Raises:
            AttributeError: for a population of more than one seed (use ``critics.members[k]``).
        """
        self._solo("critic")
        return self.critics.members[0]

    @property
    def rollout(self):
        """The single agent's rollout batch, a :class:`~lcpo.memory.rollout.RolloutBuffer` of views (N = 1).

        Raises:
            AttributeError: for a population of more than one seed (use ``rollouts.seed(k)``).
        """
        self._solo("rollout")
        return self.rollouts.seed(0)

    @property
    def return_norm(self) -> ReturnNormalizer:
        """The single agent's return normaliser (N = 1 only).

        Raises:
            AttributeError: for a population of more than one seed (use ``return_norms[k]``).
        """
        self._solo("return_norm")
        return self.return_norms[0]

    @property
    def fast_actor(self):
        """The acting path (:class:`~lcpo.agents.stacked.StackedActing`); call ``sync()`` after editing weights.
        Assigning a single-observation fast policy (N = 1) makes the agent act through it.

        Raises:
            AttributeError: on assignment, for a population of more than one seed.
        """
        return self._acting

    @fast_actor.setter
    def fast_actor(self, policy) -> None:
        self._solo("fast_actor")
        self._acting = policy if isinstance(policy, StackedActing) else StackedActing(self.actors, fast=[policy])

    @property
    def updates(self):
        """Updates done: an int for a single agent, the ``(N,)`` int64 array for a population."""
        return int(self.seed_updates[0]) if self.n_seeds == 1 else self.seed_updates

    @property
    def steps(self):
        """Transitions observed: an int for a single agent, the ``(N,)`` int64 array for a population."""
        return int(self.seed_steps[0]) if self.n_seeds == 1 else self.seed_steps

    # -- acting (hot path) ---------------------------------------------------------------------------------
    def _refill_noise(self, k: int) -> None:
        self._noise[k] = self.seed_rngs[k]["act"].gumbel(size=self._noise[k].shape).astype(np.float32)
        self._noise_len[k] = self._noise_rows
        self._noise_i[k] = 0

    def act_batch(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """One action per seed from ``obs (N, obs_dim)`` float32 (no autograd).

        Returns:
            ``(N, D)`` int64 bin indices (``(N,)`` for a ``Discrete`` action space).

        Raises:
            ValueError: if ``obs`` is not ``(N, obs_dim)``.
        """
        obs = np.asarray(obs, dtype=np.float32)
        if obs.shape != self._obs_shape:
            raise ValueError(f"obs must have shape ({self.n_seeds}, {self.obs_dim}), got {obs.shape}")
        acting = self._acting
        if deterministic:
            a = acting.greedy(obs)
        elif self.n_seeds == 1:  # one seed: basic indexing (the single agent's hot path)
            i = int(self._noise_i[0])
            if i >= self._noise_len[0]:
                self._refill_noise(0)
                i = 0
            a = acting.sample(obs, self._noise[0, i][None])
            self._noise_i[0] = i + 1
        else:
            out = self._noise_i >= self._noise_len
            if out.any():
                for k in np.flatnonzero(out):
                    self._refill_noise(int(k))
            g = self._noise[self._rows, self._noise_i]
            a = acting.sample(obs, g)
            self._noise_i += 1
        return a[:, 0] if self.scalar_action else a

    def act(self, obs: np.ndarray, deterministic: bool = False):
        """The single agent's action for one observation ``(obs_dim,)`` float32 (N = 1: :meth:`act_batch` of one).

        Returns:
            ``(D,)`` int64 bin indices (an int64 scalar for a ``Discrete`` action space).

        Raises:
            AttributeError: for a population of more than one seed.
            ValueError: if ``obs`` does not hold ``obs_dim`` values.
        """
        self._solo("act")
        return self.act_batch(np.asarray(obs, dtype=np.float32).reshape(1, -1), deterministic)[0]

    # -- observing and updating -------------------------------------------------------------------------
    def observe_batch(self, obs, actions, rewards, next_obs, terminated, truncated, infos) -> list[dict | None]:
        """Store one transition per seed; update the seeds whose rollout batch is full.

        Args:
            obs: ``(N, obs_dim)`` float32 observations the actions were chosen from.
            actions: ``(N, D)`` int64 (or ``(N,)`` for a ``Discrete`` space) the actions taken.
            rewards: ``(N,)`` float rewards (stored as float64).
            next_obs: ``(N, obs_dim)`` float32 the true next observations (never reset observations).
            terminated, truncated: ``(N,)`` bool.
            infos: N info dicts (or None); ``info["gamma"]`` (per-step discount) and ``info["forced"]`` (action
                overridden by the env: masked out of the policy loss) are honoured per seed.

        Returns:
            N entries: seed ``k``'s update diagnostics (namespaced keys), or None where it did not update.

        Raises:
            ValueError: on a non-finite reward or next observation, or a reward beyond the float32 range
                (:func:`lcpo.numerics.finite.reward_error`; naming the value and the seed), or arrays of the wrong
                shape.
        """
        n = self.n_seeds
        has = getattr(infos, "has", None)  # VectorStream's StepInfos: the N dicts are built only when needed
        if n == 1 and len(infos) == 1:
            # one seed: the single agent's scalar path (the same values stored, without the (1, ...) arrays)
            nxt = next_obs if type(next_obs) is np.ndarray else np.asarray(next_obs)
            rew = rewards if type(rewards) is np.ndarray else np.asarray(rewards)
            if nxt.shape == (1, self.obs_dim) and rew.size == 1:
                info = infos[0] if has is None or has("gamma") or has("forced") else None
                return [self._observe_one(np.asarray(obs)[0], np.asarray(actions)[0], rew.item(), nxt[0],
                                          bool(np.asarray(terminated).item()), bool(np.asarray(truncated).item()),
                                          info)]
        per_seed_info = has is None or has("gamma") or has("forced")
        rewards = np.asarray(rewards, dtype=np.float64).reshape(-1)
        next_obs = np.asarray(next_obs, dtype=np.float32)
        if rewards.shape != (n,) or next_obs.shape != (n, self.obs_dim) or len(infos) != n:
            raise ValueError(f"observe_batch needs {n} rewards, next_obs ({n}, {self.obs_dim}) and {n} infos; got "
                             f"{rewards.shape}, {next_obs.shape}, {len(infos)}")
        # (count_nonzero: a fraction of the cost of ndarray.all()/any() at these sizes)
        if np.count_nonzero(np.abs(rewards) <= F32_MAX) != n:  # NaN, inf, or beyond float32 (lcpo.numerics.finite)
            k = int(np.flatnonzero(~(np.abs(rewards) <= F32_MAX))[0])
            raise reward_error(float(rewards[k]), f"at agent step {int(self.seed_steps[k])}" + self._which(k))
        if np.count_nonzero(np.isfinite(next_obs)) != next_obs.size:
            k = int(np.flatnonzero(~np.isfinite(next_obs).all(axis=1))[0])
            raise ValueError(f"non-finite next_obs {next_obs[k].tolist()} at agent step {int(self.seed_steps[k])}"
                             + self._which(k))
        gamma = self.hp.gamma
        if per_seed_info:
            gammas, masks = _discounts_and_masks(infos, n, gamma)
        else:  # every seed the default discount and no forced action: constant arrays (add_batch copies them)
            gammas, masks = self._default_gammas, self._default_masks
        actions = np.asarray(actions).reshape(n, self.action_dims)
        self.rollouts.add_batch(obs, actions, rewards, next_obs, terminated, truncated, gammas, masks)
        self.seed_steps += 1
        full = self.rollouts.full
        if np.count_nonzero(full):
            return self._update_full(np.flatnonzero(full))
        return [None] * n

    def _update_full(self, idx: np.ndarray) -> list[dict | None]:
        """Update the seed slots ``idx`` (their rollouts are full); the per-seed diagnostics list of all N."""
        out: list[dict | None] = [None] * self.n_seeds
        with limit_threads(self.threads):  # also when driven through act/observe by a live system
            diags = self.update(idx)
        self.rollouts.reset(idx)
        self._acting.sync()
        self.seed_updates[idx] += 1
        for j, k in enumerate(idx):
            d = diags[j]
            if d is not None and self.hp.normalize_returns:
                d["train/reward_scale"] = self.return_norms[k].scale
            out[k] = d
        return out

    def _which(self, k: int) -> str:
        return "" if self.n_seeds == 1 else f" (seed {self.seeds[k]}, slot {k})"

    def observe(self, tr: Transition) -> dict | None:
        """The single agent's ``observe``: store a transition, update when the rollout batch is full (N = 1).

        Raises:
            AttributeError: for a population of more than one seed.
            ValueError: on a non-finite reward or next observation, or a reward beyond the float32 range
                (:func:`lcpo.numerics.finite.check_transition`; naming the value).
        """
        self._solo("observe")
        return self._observe_one(tr.obs, tr.action, tr.reward, tr.next_obs, tr.terminated, tr.truncated, tr.info)

    def _observe_one(self, obs, action, reward, next_obs, terminated, truncated, info) -> dict | None:
        """:meth:`observe` of one transition given by its fields (N = 1; also :meth:`observe_batch`'s N = 1)."""
        reward = float(reward)
        check_transition(reward, next_obs, f"at agent step {self.steps}")
        gamma, mask = self.hp.gamma, True
        if info:
            gamma = info.get("gamma", gamma)
            mask = not info.get("forced", False)
        # the same storage as observe_batch, without building the (1, ...) arrays (the single agent's hot path)
        b, p = self.rollouts, int(self.rollouts.ptr[0])
        if p >= b.size:
            raise OverflowError("rollout buffer is full; call reset() after the update")
        b.obs[0, p] = obs
        b.actions[0, p] = action
        b.rewards[0, p] = reward
        b.next_obs[0, p] = next_obs
        b.terminated[0, p] = terminated
        b.truncated[0, p] = truncated
        b.gammas[0, p] = gamma
        b.policy_mask[0, p] = mask
        b.ptr[0] = p + 1
        self.seed_steps[0] += 1
        if p + 1 >= b.size:
            return self._update_full(np.zeros(1, dtype=np.int64))[0]
        return None

    def update(self, idx: np.ndarray) -> list[dict]:  # pragma: no cover - abstract
        """Learn from the full rollout batches of the seed slots ``idx`` (``(n,)`` int64); returns one diagnostics
        dict per slot of ``idx``.

        Raises:
            NotImplementedError: always here; subclasses implement it.
        """
        raise NotImplementedError

    # -- shared update pieces --------------------------------------------------------------------------
    def _sel(self, idx: np.ndarray, n: int):
        """None when ``idx`` covers all ``n`` seeds (the stacked tensors are used whole), else an int64 tensor
        on the agent's device."""
        return None if len(idx) == n else self._dev(torch.from_numpy(np.asarray(idx, dtype=np.int64)))

    def _dev(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` on the agent's device (the same tensor on the CPU)."""
        return t.to(self.device)

    def seed_batch_rewards(self, idx: np.ndarray) -> np.ndarray:
        """The rollouts' rewards ``(n, T)`` float64 of the seed slots ``idx`` (``(n,)`` int64) as the update uses
        them: raw, or divided by each seed's return-normaliser scale after merging that rollout's accumulator
        values.

        Call once per update (it advances the normalisers' state).
        """
        b = self.rollouts
        T = b.size
        out = b.rewards[idx, :T].copy()
        if not self.hp.normalize_returns:
            return out
        for j, k in enumerate(idx):
            norm = self.return_norms[k]
            ends = b.terminated[k, :T] | b.truncated[k, :T]
            norm.update(norm.accumulate(out[j], ends, b.gammas[k, :T]))
            out[j] = out[j] / norm.scale
        return out

    def batch_rewards(self) -> np.ndarray:
        """The single agent's :meth:`seed_batch_rewards` ``(ptr,)`` float64 of its (possibly partial) rollout (N = 1).

        Raises:
            AttributeError: for a population of more than one seed.
        """
        self._solo("batch_rewards")
        b, n = self.rollouts, int(self.rollouts.ptr[0])
        rewards = b.rewards[0, :n].copy()
        if not self.hp.normalize_returns:
            return rewards
        norm = self.return_norms[0]
        norm.update(norm.accumulate(rewards, b.terminated[0, :n] | b.truncated[0, :n], b.gammas[0, :n]))
        return rewards / norm.scale

    def _batch(self, idx: np.ndarray) -> dict:
        """Tensors of the full rollout batches of the seed slots ``idx`` (``(n, T, ...)``) and their GAE advantages
        and lambda-returns (``(n, T)``, rewards scaled by :meth:`seed_batch_rewards`)."""
        from lcpo.numerics.returns import gae_batch

        b = self.rollouts
        T = b.size
        sel = self._sel(idx, self.n_seeds)
        rewards = self.seed_batch_rewards(idx)
        if sel is None:
            obs_np, next_np = b.obs, b.next_obs
            act_np, mask_np = b.actions, b.policy_mask
            term, trunc, gammas = b.terminated, b.truncated, b.gammas
        else:
            obs_np, next_np = b.obs[idx], b.next_obs[idx]
            act_np, mask_np = b.actions[idx], b.policy_mask[idx]
            term, trunc, gammas = b.terminated[idx], b.truncated[idx], b.gammas[idx]
        obs, next_obs = self._dev(torch.from_numpy(obs_np)), self._dev(torch.from_numpy(next_np))
        with torch.no_grad():  # V(s) and V(s') at once
            both = self.critics(torch.cat([obs, next_obs], dim=1), sel).double().cpu().numpy()
        v, nv = both[:, :T], both[:, T:]
        adv, ret = gae_batch(rewards, v, nv, term, trunc, gammas, self.hp.gae_lambda)
        return {
            "sel": sel, "idx": np.asarray(idx), "obs": obs, "actions": self._dev(torch.from_numpy(act_np)),
            "adv": self._dev(torch.from_numpy(to_float32("advantages", adv, 0, OVERFLOW_HINT))),
            "ret": self._dev(torch.from_numpy(to_float32("returns", ret, 0, OVERFLOW_HINT))),
            "mask": self._dev(torch.from_numpy(mask_np.astype(np.float32))),
        }

    def _mask_of(self, idx: np.ndarray) -> np.ndarray | None:
        if len(idx) == self.n_seeds:
            return None
        m = np.zeros(self.n_seeds, bool)
        m[idx] = True
        return m

    def _critic_step(self, b: dict) -> np.ndarray:
        """One per-seed Adam step of the critics on the lambda-returns (per-seed clip); ``(n,)`` float losses."""
        v = self.critics(b["obs"], b["sel"])
        loss = ((v - b["ret"]) ** 2).mean(dim=1)
        check_finite("critic loss", loss.detach(), "at the update", OVERFLOW_HINT)
        self.critic_opt.zero_grad()
        loss.sum().backward()
        clip_grad_norm_per_seed(self.critics.params, self.hp.max_grad_norm, b["sel"])
        self.critic_opt.step(self._mask_of(b["idx"]))
        return loss.detach().cpu().numpy().astype(np.float64)

    def _actor_step(self, loss: torch.Tensor, b: dict) -> None:
        """One per-seed Adam step of the actors on ``loss (n,)`` (per-seed clip)."""
        self.actor_opt.zero_grad()
        loss.sum().backward()
        clip_grad_norm_per_seed(self.actors.params, self.hp.max_grad_norm, b["sel"])
        self.actor_opt.step(self._mask_of(b["idx"]))

    def _constrained_actor_step(self, seeds: list[int], loss: torch.Tensor, surrogate, kl_fns, kl_limits,
                                scale_kl: float, fvp_states: Sequence[torch.Tensor] | torch.Tensor, make_fvp, damping: float,
                                cg_iters: int, max_backtracks: int, accept_ratio: float) -> list:
        """The KL-constrained step (paper Algorithm 1; TRPO appendix C) of the actors of the seed slots ``seeds``,
        taken together by :func:`lcpo.optim.constrained.kl_constrained_step_batch`.

        Args:
            seeds: the seed slots that step (their rows of the stacked actor move).
            loss: ``(m,)`` their surrogate losses at the current parameters (with a graph: the gradient is taken).
            surrogate: ``() -> (m,)`` the surrogates at the current parameters.
            kl_fns: each ``() -> (m,)`` mean KLs, called right after ``surrogate``.
            kl_limits, scale_kl, cg_iters, max_backtracks, accept_ratio: as the single step's.
            fvp_states: per slot, the ``(B, obs_dim)`` states of its Fisher (anchors for LCPO, the batch for TRPO):
                a sequence of m such tensors, or one ``(m, B, obs_dim)`` tensor (no copy on the stacked path).
            make_fvp: ``(module, states, damping) -> fvp`` (:func:`lcpo.optim.fisher.make_fvp`; each seed's own
                product on its own module). When its products carry a NumPy form (``fvp.numpy``: plain MLPs),
                each seed's conjugate gradient runs in NumPy and its product is built when its solve starts (one
                seed's activations held at a time); otherwise all products are built and the torch solve is used.
                Off the CPU (a GPU: :func:`lcpo.online.device.host_kernels` False) a plain-MLP stack whose seeds'
                states share one shape uses :func:`lcpo.optim.fisher.stacked_mlp_fvp` instead (all seeds in one
                product, one conjugate gradient for all); ``make_fvp`` is not called then.
            damping: Fisher damping.

        Returns:
            One :class:`~lcpo.optim.constrained.StepResult` per slot of ``seeds``.
        """
        params = self.actors.params
        m = len(seeds)
        rows = torch.tensor(seeds, dtype=torch.int64, device=self.device)
        for p in params:
            p.grad = None
        loss.sum().backward()
        grad = torch.cat([(p.grad[rows] if p.grad is not None else torch.zeros_like(p[rows])).reshape(m, -1)
                          for p in params], dim=1)
        for p in params:
            p.grad = None
        from lcpo.online.device import host_kernels  # looked up per call (tests force the device path)

        if (not host_kernels(self.device) and self.actors.batched and self.actors.kind == "policy"
                and (isinstance(fvp_states, torch.Tensor) or len({tuple(s.shape) for s in fvp_states}) == 1)):
            # off the CPU (a GPU): one stacked product for all the seeds, a few dozen kernels per call whatever m
            # (one autograd product per seed would launch m times as many), and one conjugate gradient for all
            from lcpo.optim.fisher import stacked_mlp_fvp

            states = fvp_states if isinstance(fvp_states, torch.Tensor) else torch.stack(list(fvp_states))
            return self._constrained_solve(
                stacked_mlp_fvp(self.actors, rows, states, damping), None, rows, grad,
                surrogate, kl_fns, kl_limits, scale_kl, cg_iters, max_backtracks, accept_ratio, loss)
        built = {0: make_fvp(self.actors.members[seeds[0]], fvp_states[0], damping)}

        def product(i: int):
            """Slot ``i``'s product, built when first asked for."""
            f = built.pop(i, None)
            return f if f is not None else make_fvp(self.actors.members[seeds[i]], fvp_states[i], damping)

        if callable(getattr(built[0], "numpy", None)):
            # NumPy products (plain MLPs, lcpo.optim.fisher.mlp_fvp): each seed's CG runs in NumPy, its product
            # built when its solve starts and dropped after it, so one seed's activations are held at a time
            row_matvecs, fvp = _LazyRows(m, lambda i: product(i).numpy), None
        else:
            fvps = [product(i) for i in range(m)]
            row_matvecs = None

            def fvp(V: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
                return torch.stack([fvps[i](V[j]) for j, i in enumerate(r.tolist())])

        return self._constrained_solve(fvp, row_matvecs, rows, grad, surrogate, kl_fns, kl_limits, scale_kl,
                                       cg_iters, max_backtracks, accept_ratio, loss)

    def _constrained_solve(self, fvp, row_matvecs, rows, grad, surrogate, kl_fns, kl_limits, scale_kl, cg_iters,
                           max_backtracks, accept_ratio, loss):
        """:func:`~lcpo.optim.constrained.kl_constrained_step_batch` on the actor rows ``rows`` ``(m,)`` int64,
        their gradient ``grad`` ``(m, n)`` and products (``fvp`` or ``row_matvecs``)."""
        from lcpo.optim.constrained import kl_constrained_step_batch

        params = self.actors.params
        m = rows.shape[0]

        def get_flat() -> torch.Tensor:
            return torch.cat([p.detach()[rows].reshape(m, -1) for p in params], dim=1)

        def set_flat(flat: torch.Tensor) -> None:
            i = 0
            with torch.no_grad():
                for p in params:
                    size = p[0].numel()
                    p.data[rows] = flat[:, i:i + size].reshape(m, *p.shape[1:])
                    i += size

        return kl_constrained_step_batch(get_flat, set_flat, grad, fvp, surrogate, kl_fns, kl_limits,
                                         scale_kl=scale_kl, cg_iters=cg_iters, max_backtracks=max_backtracks,
                                         accept_ratio=accept_ratio, loss_old=loss.detach().tolist(),
                                         row_matvecs=row_matvecs)

    # -- persistence ---------------------------------------------------------------------------------
    def _check_k(self, k) -> int:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= int(k) < self.n_seeds:
            raise IndexError(f"seed slot {k!r} out of range for a population of {self.n_seeds}")
        return int(k)

    def seed_state_dict(self, k: int) -> dict:
        """Seed slot ``k``'s state in exactly the single agent's ``state_dict`` format: networks, optimizers,
        rollout batch, RNG states, noise block, counters, return normaliser (copies, not views).

        Raises:
            IndexError: for a slot outside ``[0, N)``.
        """
        k = self._check_k(k)
        nl = int(self._noise_len[k])
        return {
            # CPU tensors whatever the device: a checkpoint written on a GPU resumes on the CPU
            "actor": {n: t.cpu().clone() for n, t in self.actors.members[k].state_dict().items()},
            "critic": {n: t.cpu().clone() for n, t in self.critics.members[k].state_dict().items()},
            "actor_opt": self.actor_opt.seed_state_dict(k), "critic_opt": self.critic_opt.seed_state_dict(k),
            "rollout": self.rollouts.seed(k).state_dict(),
            "rngs": {name: g.bit_generator.state for name, g in self.seed_rngs[k].items()},
            "noise": self._noise[k, :nl].copy(), "noise_i": int(self._noise_i[k]),
            "updates": int(self.seed_updates[k]), "steps": int(self.seed_steps[k]),
            "return_norm": self.return_norms[k].state_dict(),
        }

    def load_seed_state_dict(self, k: int, state: dict) -> None:
        """Restore seed slot ``k`` from a single agent's ``state_dict`` (a solo run's, or :meth:`seed_state_dict`).

        All or nothing: where the state is refused, seed ``k`` is left exactly as it was (its state is saved
        first and restored before the error propagates); the other seeds are never touched.

        Raises:
            IndexError: for a slot outside ``[0, N)``.
            ValueError: a state without ``return_norm`` (an older lcpo), a noise block of another size, or the
                agent's own checks (another optimizer setting, an OOD calibration that does not fit this agent).
            KeyError: a state without one of the agent's entries (e.g. another agent's state).
            RuntimeError: network weights of other shapes (``torch.nn.Module.load_state_dict``).
        """
        k = self._check_k(k)
        before = self.seed_state_dict(k)
        try:
            self._load_seed(k, state)
        except BaseException:
            self._load_seed(k, before)
            raise

    def _load_seed(self, k: int, state: dict) -> None:
        """The fields of :meth:`load_seed_state_dict` (subclasses extend it; no rollback here)."""
        if "return_norm" not in state:
            raise ValueError("checkpoint state lacks 'return_norm' (written by an older lcpo); start the run afresh")
        self.actors.members[k].load_state_dict(state["actor"])
        self.critics.members[k].load_state_dict(state["critic"])
        self.actor_opt.load_seed_state_dict(k, state["actor_opt"])
        self.critic_opt.load_seed_state_dict(k, state["critic_opt"])
        self.rollouts.seed(k).load_state_dict(state["rollout"])
        for name, s in state["rngs"].items():
            self.seed_rngs[k][name].bit_generator.state = s
        noise = np.asarray(state["noise"], dtype=np.float32)
        if noise.shape[0] not in (0, self._noise_rows):
            raise ValueError(f"noise block of {noise.shape[0]} rows, expected 0 or {self._noise_rows}")
        self._noise[k, : noise.shape[0]] = noise
        self._noise_len[k] = noise.shape[0]
        self._noise_i[k] = int(state["noise_i"])
        self.seed_updates[k], self.seed_steps[k] = int(state["updates"]), int(state["steps"])
        self.return_norms[k].load_state_dict(state["return_norm"])
        self._acting.sync()

    def state_dict(self) -> dict:
        """A single agent: its state (today's format, :meth:`seed_state_dict` of slot 0). A population (built by
        :meth:`population`): ``{"seeds": [...], "members": [seed_state_dict(k), ...]}``."""
        if not self._is_population:
            return self.seed_state_dict(0)
        return {"seeds": list(self.seeds), "members": [self.seed_state_dict(k) for k in range(self.n_seeds)]}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly; all or nothing (a refused member leaves every seed as it was).

        Raises:
            ValueError: for a population state of other seeds, or the errors of :meth:`load_seed_state_dict`.
        """
        if not self._is_population:
            self.load_seed_state_dict(0, state)
            return
        from lcpo.agents.population import _check_population_state

        _check_population_state(state, self.seeds)
        saved = []  # (slot, its state before): a refused member rolls itself and the earlier ones back
        try:
            for k, s in enumerate(state["members"]):
                saved.append((k, self.seed_state_dict(k)))
                self._load_seed(k, s)
        except BaseException:
            for k, before in saved:
                self._load_seed(k, before)
            raise

    def learn(self, total_steps: int, reset_condition=None, callback=None):
        """The single agent's online loop (:meth:`lcpo.agents.base.Agent.learn`); a population is stepped by the
        population runtime instead.

        Raises:
            AttributeError: for a population of more than one seed.
        """
        self._solo("learn")
        return super().learn(total_steps, reset_condition, callback)
