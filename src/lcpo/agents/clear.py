"""CLEAR: continual learning with experience and replay (Rolnick et al. 2019), a rehearsal baseline.

CLEAR trains an actor-critic with V-trace (Espeholt et al. 2018) on a mixture of new, on-policy experience and
experience replayed from an episode-aware buffer, and adds *behavioural cloning* terms on the replayed data that
keep the policy and the value function close to what they were when the data was collected (LCPO paper,
Hamadanian et al., ICLR 2025, appendix D).

One update per rollout of ``rollout_steps`` transitions (the :class:`~lcpo.agents.base.OnPolicyAgent` cadence):

1. The rollout is cut at episode ends into windows; its behaviour quantities under the current (behaviour)
   networks are recorded: per-dimension log-probabilities ``log mu(. | s)`` ``(D, K)``, the log-probability of the
   action taken and the value ``V_mu(s)``.
2. ``replay_windows`` windows of up to ``replay_window`` steps are drawn uniformly from the replay buffer
   (:meth:`lcpo.memory.replay.ReplayBuffer.sample_windows`; never across an episode end). Then the rollout is
   added to the buffer with its behaviour quantities (so replay is always of earlier rollouts).
3. On every window (new and replayed) :func:`lcpo.numerics.targets.vtrace` with ``log_rho = log pi(a|s) - log mu(a|s)``
   gives value targets ``v_s`` and advantages ``A`` (for the new data ``log_rho = 0`` exactly: V-trace is then the
   n-step return to the window's end). With ``N`` the valid steps of both parts and ``N_r`` of the replayed part:

   * actor:  ``-(1/N) sum A_t log pi(a_t|s_t)  +  policy_cloning * (1/N_r) sum_replay KL(mu(.|s_t) || pi(.|s_t))
     - entropy_coef * mean entropy``;
   * critic: ``(1/N) sum (V(s_t) - v_s,t)^2  +  value_cloning * (1/N_r) sum_replay (V(s_t) - V_mu(s_t))^2``.

   Each network takes one Adam step (gradient-norm clip ``max_grad_norm``).

Forced steps (``info["forced"]``) are left out of the new data's policy-gradient term as in A2C; replayed steps
are all used. ``gae_lambda`` is not used (V-trace's trace clip ``c_bar`` plays its role).

Settings: 50% new / 50% replayed transitions per update (CLEAR's recommended ratio: 10 windows of 20 steps next
to a 200-step rollout), cloning weights ``policy_cloning = 0.01``, ``value_cloning = 0.005`` (Rolnick et al.
2019, Sec. 4; paper Table 11 lists CLEAR's settings), ``rho_bar = c_bar = 1`` (IMPALA), replay capacity 100,000
transitions (oldest evicted first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from lcpo.agents.base import OnPolicyAgent, OnPolicyHyperparameters, require_ints
from lcpo.memory.replay import ReplayBuffer
from lcpo.agents.nets import CategoricalPolicy
from lcpo.numerics.finite import OVERFLOW_HINT, check_finite, to_float32
from lcpo.numerics.targets import vtrace

__all__ = ["CLEAR", "CLEARHyperparameters", "split_episodes"]


def split_episodes(terminated: np.ndarray, truncated: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row and column of every step of a contiguous segment when it is cut into one window per episode.

    Args:
        terminated: ``(n,)`` bool flags of a contiguous stream segment.
        truncated: ``(n,)`` bool flags.

    Returns:
        ``(row, col)``: two ``(n,)`` int64 arrays; step ``t`` goes to window ``row[t]`` at position ``col[t]``
        (a new window starts after every step with either flag set). ``row.max() + 1`` windows, each at most
        ``col.max() + 1`` long.

    Raises:
        ValueError: on mismatched or non-1-D shapes, or an empty segment.

    Example:
        >>> r, c = split_episodes(np.array([0, 1, 0, 0], bool), np.array([0, 0, 0, 0], bool))
        >>> r.tolist(), c.tolist()
        ([0, 0, 1, 1], [0, 1, 0, 1])
    """
    term, trunc = np.asarray(terminated, bool), np.asarray(truncated, bool)
    if term.ndim != 1 or term.shape != trunc.shape or term.size == 0:
        raise ValueError(f"terminated and truncated must be equal non-empty 1-D arrays, got {term.shape}, "
                         f"{trunc.shape}")
    done = term | trunc
    row = np.r_[0, np.cumsum(done[:-1])].astype(np.int64)
    first = np.r_[0, np.flatnonzero(done[:-1]) + 1]
    col = np.arange(term.size, dtype=np.int64) - first[row]
    return row, col


@dataclass(frozen=True)
class CLEARHyperparameters(OnPolicyHyperparameters):
    """CLEAR settings (see the module docstring for the losses); the on-policy fields as in A2C, plus:

    Attributes:
        buffer_size: replay capacity in transitions (oldest evicted first).
        replay_windows: replayed windows per update (0 disables replay: V-trace actor-critic).
        replay_window: maximum length of a replayed window (steps).
        policy_cloning: weight of ``KL(mu || pi)`` on replayed states.
        value_cloning: weight of ``(V - V_mu)^2`` on replayed states.
        rho_bar: V-trace importance-weight clip.
        c_bar: V-trace trace clip.
        entropy_coef: entropy bonus weight (0, as the paper's A2C).
    """

    buffer_size: int = 100_000
    replay_windows: int = 10
    replay_window: int = 20
    policy_cloning: float = 0.01
    value_cloning: float = 0.005
    rho_bar: float = 1.0
    c_bar: float = 1.0
    entropy_coef: float = 0.0


class CLEAR(OnPolicyAgent):
    """CLEAR on the shared actor-critic networks (see module docstring).

    Args:
        env: environment with a Discrete or MultiDiscrete action space and a 1-D Box observation space.
        seed: run seed.
        hparams: a :class:`CLEARHyperparameters` (defaults if None).
        **overrides: hyperparameter fields to override.

    Raises:
        ValueError: for invalid hyperparameters (named).

    Example:
        >>> import gymnasium as gym, lcpo.envs
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        >>> agent = CLEAR(env, seed=0).learn(600)
        >>> agent.updates, agent.replay.size
        (3, 600)
    """

    name = "clear"
    Hyperparameters = CLEARHyperparameters

    def __init__(self, env: gym.Env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        require_ints(hp, ("buffer_size", "replay_window"))
        require_ints(hp, ("replay_windows",), minimum=0)
        for name in ("policy_cloning", "value_cloning", "entropy_coef"):
            v = getattr(hp, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"hyperparameter {name} must be a finite number >= 0, got {v}")
        for name in ("rho_bar", "c_bar"):
            v = getattr(hp, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"hyperparameter {name} must be a finite number > 0, got {v}")
        if not 0.0 <= hp.gamma <= 1.0:
            raise ValueError(f"hyperparameter gamma must lie in [0, 1], got {hp.gamma}")
        C, D, K = hp.buffer_size, self.action_dims, self.action_bins
        self.replay = ReplayBuffer(C, (self.obs_dim,), (D,), store_logp=True, seed=self.rngs["buffer"])
        self._gammas = np.zeros(C, dtype=np.float64)
        self._values = np.zeros(C, dtype=np.float32)
        self._logp_all = np.zeros((C, D, K), dtype=np.float32)

    # -- windows -------------------------------------------------------------------------------------------
    def rollout_windows(self) -> dict[str, np.ndarray]:
        """The current rollout cut at episode ends into padded windows, with its behaviour quantities.

        Returns:
            dict of ``(E, L, ...)`` arrays: ``obs``, ``actions``, ``rewards``, ``next_obs``, ``terminated``,
            ``truncated``, ``mask`` (valid steps), ``gamma``, ``policy_mask`` (not forced), ``logp_all``
            ``(E, L, D, K)`` and ``logp`` (behaviour log-probabilities), ``values`` (behaviour ``V(s)``), and
            the flat ``(n, ...)`` originals under ``flat_*`` keys for storing.
        """
        b = self.rollout
        n = b.ptr
        obs = torch.from_numpy(b.obs[:n])
        with torch.no_grad():
            logp_all = self.actor.log_probs(obs)
            values = self.critic(obs)
        actions = torch.from_numpy(b.actions[:n])
        flat = {"obs": b.obs[:n], "actions": b.actions[:n], "rewards": b.rewards[:n], "next_obs": b.next_obs[:n],
                "terminated": b.terminated[:n], "truncated": b.truncated[:n], "gamma": b.gammas[:n],
                "policy_mask": b.policy_mask[:n], "logp_all": logp_all.numpy(),
                "logp": CategoricalPolicy.log_prob_of(logp_all, actions).double().numpy(),
                "values": values.numpy(), "mask": np.ones(n, dtype=bool)}
        row, col = split_episodes(flat["terminated"], flat["truncated"])
        E, L = int(row[-1]) + 1, int(col.max()) + 1
        out = {}
        for k, v in flat.items():
            pad = np.zeros((E, L, *v.shape[1:]), dtype=v.dtype)
            pad[row, col] = v
            out[k] = pad
        out.update({f"flat_{k}": v for k, v in flat.items()})
        return out

    def replay_batch(self) -> dict[str, np.ndarray] | None:
        """``replay_windows`` windows drawn uniformly from the buffer with their stored behaviour quantities
        (keys as :meth:`rollout_windows`, ``policy_mask`` all true), or None when replay is off or empty."""
        hp = self.hp
        if hp.replay_windows == 0 or self.replay.size == 0:
            return None
        w = self.replay.sample_windows(hp.replay_windows, hp.replay_window)
        idx = w["indices"][:, None] + np.arange(hp.replay_window)[None, :]
        slots = np.where(w["mask"], idx, w["indices"][:, None]) % self.replay.capacity
        m = w["mask"]
        return {"obs": w["obs"], "actions": w["actions"], "rewards": w["rewards"], "next_obs": w["next_obs"],
                "terminated": w["terminated"], "truncated": w["truncated"], "mask": m,
                "gamma": np.where(m, self._gammas[slots], 0.0), "policy_mask": m.copy(),
                "logp": w["logp"], "logp_all": np.where(m[..., None, None], self._logp_all[slots], 0.0),
                "values": np.where(m, self._values[slots], 0.0).astype(np.float32)}

    def _store(self, new: dict[str, np.ndarray]) -> None:
        n = new["flat_obs"].shape[0]
        slots = (self.replay.total_added + np.arange(n)) % self.replay.capacity
        self._gammas[slots] = new["flat_gamma"]
        self._values[slots] = new["flat_values"]
        self._logp_all[slots] = new["flat_logp_all"]
        self.replay.add_batch(new["flat_obs"], new["flat_actions"], new["flat_rewards"], new["flat_next_obs"],
                              new["flat_terminated"], new["flat_truncated"], logp=new["flat_logp"])

    # -- losses --------------------------------------------------------------------------------------------
    def losses(self, new: dict[str, np.ndarray], replay: dict[str, np.ndarray] | None) -> dict[str, torch.Tensor]:
        """CLEAR's loss terms on new windows (on-policy: ``log_rho = 0``) and replayed ones (or None).

        Args:
            new: windows as from :meth:`rollout_windows`.
            replay: windows as from :meth:`replay_batch`, or None.

        Returns:
            dict of scalar tensors: ``actor`` and ``critic`` (the two losses, with gradients), ``policy``
            (the V-trace policy-gradient term), ``value`` (the V-trace value MSE), ``policy_cloning`` (mean
            KL(mu || pi) on replay, 0 without replay), ``value_cloning`` (mean ``(V - V_mu)^2`` on replay),
            ``entropy`` (mean over valid steps).
        """
        hp = self.hp
        # stored rewards stay raw; both parts are divided by the scale current at this update
        reward_scale = self.return_norm.scale if hp.normalize_returns else 1.0
        pg_sum, v_sum, ent_sum, count = 0.0, 0.0, 0.0, 0.0
        zero = torch.zeros(())
        kl, vc = zero, zero
        for part, on_policy in ((new, True), (replay, False)):
            if part is None:
                continue
            m_np = part["mask"]
            E, L = m_np.shape
            obs = torch.from_numpy(part["obs"]).reshape(E * L, -1)
            logp_all = self.actor.log_probs(obs)
            logp = CategoricalPolicy.log_prob_of(logp_all, torch.from_numpy(part["actions"]).reshape(E * L, -1))
            v = self.critic(obs)
            with torch.no_grad():
                nv = self.critic(torch.from_numpy(part["next_obs"]).reshape(E * L, -1)).reshape(E, L).double()
            if on_policy:
                log_rhos = np.zeros((E, L))
            else:
                log_rhos = logp.detach().double().reshape(E, L).numpy() - part["logp"]
            vs, adv = vtrace(part["rewards"] / reward_scale, v.detach().double().reshape(E, L).numpy(), nv.numpy(), log_rhos,
                             part["terminated"], part["truncated"], m_np, part["gamma"], hp.rho_bar, hp.c_bar)
            m = torch.from_numpy(m_np.reshape(-1).astype(np.float32))
            pm = torch.from_numpy((m_np & part["policy_mask"]).reshape(-1).astype(np.float32))
            adv_t = torch.from_numpy(to_float32("V-trace advantages", adv, 0, OVERFLOW_HINT).reshape(-1))
            vs_t = torch.from_numpy(to_float32("V-trace targets", vs, 0, OVERFLOW_HINT).reshape(-1))
            # a replayed action the current policy gives probability 0 (log pi = -inf) has rho = 0, so V-trace's
            # advantage is 0 and so is its policy-gradient term rho A log pi; masked before the product (no NaN)
            pg_on = (pm > 0) & torch.isfinite(logp)
            pg_sum = pg_sum + torch.where(pg_on, adv_t * torch.where(pg_on, logp, 0.0), 0.0).sum()
            v_sum = v_sum + ((v - vs_t).square() * m).sum()
            ent_sum = ent_sum + (CategoricalPolicy.entropy_of(logp_all) * m).sum()
            count += float(m_np.sum())
            if not on_policy:
                n_r = max(float(m_np.sum()), 1.0)
                mu = torch.from_numpy(part["logp_all"]).reshape(E * L, *logp_all.shape[1:])
                kl = torch.where(m > 0, CategoricalPolicy.kl(mu, logp_all), 0.0).sum() / n_r  # padding: 0
                vc = ((v - torch.from_numpy(part["values"]).reshape(-1)).square() * m).sum() / n_r
        count = max(count, 1.0)
        policy, value, entropy = -pg_sum / count, v_sum / count, ent_sum / count
        return {"actor": policy + hp.policy_cloning * kl - hp.entropy_coef * entropy,
                "critic": value + hp.value_cloning * vc, "policy": policy, "value": value,
                "policy_cloning": kl, "value_cloning": vc, "entropy": entropy}

    def update(self) -> dict:
        """Record the rollout's behaviour quantities, draw replay windows, compute :meth:`losses` and check them,
        store the rollout, then one actor and one critic Adam step; returns diagnostics.

        Raises:
            ValueError: ``V-trace value loss at the update at agent step N: inf ...`` (likewise ``critic loss``,
                ``actor loss``) when a loss is NaN or overflows float32, before any weight changes
                (:func:`lcpo.numerics.finite.check_finite`); V-trace targets or advantages beyond float32 are
                named by :func:`lcpo.numerics.finite.to_float32` in :meth:`losses`.
        """
        hp = self.hp
        self.batch_rewards()  # merges this rollout's return statistics into the normaliser (if enabled)
        new = self.rollout_windows()
        replay = self.replay_batch()
        loss = self.losses(new, replay)
        # finite float32 targets can still square to inf (|V - v_s| > 1.8e19): stop before the step, named
        where = f"at the update at agent step {self.steps}"
        for key, name in (("value", "V-trace value loss"), ("critic", "critic loss"), ("actor", "actor loss")):
            check_finite(name, loss[key].detach(), where, OVERFLOW_HINT)
        self._store(new)  # after the checks: a refused update leaves the replay buffer as it was
        self.actor_opt.zero_grad(set_to_none=True)
        self.critic_opt.zero_grad(set_to_none=True)
        (loss["actor"] + loss["critic"]).backward()  # disjoint parameters: each network gets its own loss
        torch.nn.utils.clip_grad_norm_(self.actor.parameters(), hp.max_grad_norm)
        torch.nn.utils.clip_grad_norm_(self.critic.parameters(), hp.max_grad_norm)
        self.actor_opt.step()
        self.critic_opt.step()
        return {"train/policy_loss": loss["policy"].item(), "train/value_loss": loss["value"].item(),
                "train/policy_cloning": loss["policy_cloning"].item(),
                "train/value_cloning": loss["value_cloning"].item(),
                "train/entropy": loss["entropy"].item(), "train/replay_size": float(self.replay.size)}

    # -- persistence -----------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The on-policy state plus the replay buffer and its behaviour quantities."""
        n = self.replay.size
        return {**super().state_dict(), "replay": self.replay.state_dict(), "gammas": self._gammas[:n].copy(),
                "values": self._values[:n].copy(), "logp_all": self._logp_all[:n].copy()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly.

        Raises:
            ValueError: on a replay state of another configuration or mis-shaped side arrays (named).
        """
        super().load_state_dict(state)
        self.replay.load_state_dict(state["replay"])
        n = self.replay.size
        for name, arr in (("gammas", self._gammas), ("values", self._values), ("logp_all", self._logp_all)):
            src = np.asarray(state[name], dtype=arr.dtype)
            if src.shape != (n, *arr.shape[1:]):
                raise ValueError(f"state {name!r} has shape {src.shape}, expected {(n, *arr.shape[1:])}")
            arr[:] = 0
            arr[:n] = src
