"""Sliding orthogonal gradient descent (OGD) on discrete SAC: a task-free continual-learning baseline.

OGD (Farajtabar et al. 2020, Algorithm 1) keeps the gradient directions of past data and moves the parameters
only orthogonally to their span, so that (to first order) the outputs on past data do not change. The LCPO paper
(Hamadanian et al., ICLR 2025, appendix D) uses a task-free, *sliding* version: the directions of the last ``N``
episodes are kept, and each new episode's directions push out the oldest episode's.

Here, on discrete SAC:

* at the end of every episode (``terminated`` or ``truncated``), ``directions_per_episode`` evenly spaced stored
  steps ``(s, a)`` of that episode each give one direction: the gradient of ``log pi(a | s)`` with respect to
  the actor's parameters (the OGD-GTL variant: the gradient of the output for the label seen), normalised to unit
  length (zero gradients are skipped);
* the directions of the last ``ogd_episodes`` episodes (a sliding window) span the protected subspace; its
  orthonormal basis is rebuilt from the stored unit directions by a rank-revealing (column-pivoted) QR in float64
  each time the window changes (:class:`SlidingBasis`), so the basis never accumulates round-off and dependent
  directions are dropped instead of producing spurious columns;
* every actor update is projected: the optimizer's displacement ``delta = theta_new - theta_old`` (the actual
  Adam step, after SAC's gradient clipping) is replaced by ``delta - Q Q^T delta``.

Only the actor (the policy) is protected; the twin critics train as in plain SAC. Projecting the optimizer's
displacement rather than the raw gradient keeps the *update* orthogonal to the stored directions also with Adam
(whose per-coordinate scaling would otherwise rotate a projected gradient back into the protected span).

Settings: ``ogd_episodes = 10`` and ``directions_per_episode = 4`` are documented defaults (the paper sweeps the
memory size, Table 11); the protected subspace then has at most 40 dimensions.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import scipy.linalg
import torch

from lcpo.agents.base import require_ints
from lcpo.agents.sac import SAC, SACHyperparameters, finite_log_probs
from lcpo.online.loop import Transition

__all__ = ["OGD", "OGDHyperparameters", "SlidingBasis"]


class SlidingBasis:
    """Orthonormal basis of the span of the directions of the last ``window`` insertions.

    Each :meth:`add` inserts one group of directions (one episode's); once more than ``window`` groups are held
    the oldest group is dropped. After every change the basis ``Q (dim, r)`` is recomputed from the held unit
    directions by column-pivoted QR (float64), keeping the columns whose ``|R_ii|`` exceeds ``rtol * |R_00|``;
    ``Q^T Q = I`` to machine precision whatever was inserted before.

    Args:
        dim: length of each direction (number of parameters), >= 1.
        window: number of most recent groups kept, >= 1.
        rtol: relative rank tolerance of the pivoted QR.

    Raises:
        ValueError: on a non-positive ``dim``/``window`` or a negative ``rtol``.

    Example:
        >>> b = SlidingBasis(3, window=1)
        >>> b.add(np.array([[1.0, 0.0, 0.0]]))
        >>> b.project(np.array([2.0, 3.0, 4.0])).tolist()
        [0.0, 3.0, 4.0]
    """

    def __init__(self, dim: int, window: int, rtol: float = 1e-10):
        if int(dim) < 1 or int(window) < 1:
            raise ValueError(f"dim and window must be >= 1, got dim={dim}, window={window}")
        if not rtol >= 0:
            raise ValueError(f"rtol must be >= 0, got {rtol}")
        self.dim, self.window, self.rtol = int(dim), int(window), float(rtol)
        self.groups: deque[np.ndarray] = deque()
        self.basis = np.zeros((self.dim, 0))

    @property
    def directions(self) -> np.ndarray:
        """``(m, dim) float64`` the held unit directions, oldest first."""
        return np.concatenate(list(self.groups)) if self.groups else np.zeros((0, self.dim))

    def add(self, directions: np.ndarray) -> None:
        """Insert one group of directions ``(k, dim)`` (normalised here; all-zero rows are skipped) and drop the
        oldest group if more than ``window`` are held.

        Raises:
            ValueError: on a wrong shape or non-finite entries.
        """
        d = np.asarray(directions, dtype=np.float64)
        if d.ndim != 2 or d.shape[1] != self.dim:
            raise ValueError(f"directions must have shape (k, {self.dim}), got {d.shape}")
        if not np.isfinite(d).all():
            raise ValueError("directions hold non-finite values")
        norms = np.linalg.norm(d, axis=1)
        keep = norms > 0
        self.groups.append(d[keep] / norms[keep, None])
        while len(self.groups) > self.window:
            self.groups.popleft()
        self._rebuild()

    def _rebuild(self) -> None:
        d = self.directions
        if d.shape[0] == 0:
            self.basis = np.zeros((self.dim, 0))
            return
        q, r, _ = scipy.linalg.qr(d.T, mode="economic", pivoting=True)
        diag = np.abs(np.diag(r))
        rank = int(np.sum(diag > self.rtol * diag[0])) if diag[0] > 0 else 0
        q = q[:, :rank]
        # One more Gram-Schmidt-style pass (QR of Q) so that Q^T Q = I to machine precision.
        self.basis = np.linalg.qr(q)[0] if rank else q

    def project(self, v: np.ndarray) -> np.ndarray:
        """``v - Q (Q^T v)``: the component of ``v (dim,)`` orthogonal to every held direction (float64)."""
        v = np.asarray(v, dtype=np.float64)
        if v.shape != (self.dim,):
            raise ValueError(f"vector must have shape ({self.dim},), got {v.shape}")
        if self.basis.shape[1] == 0:
            return v.copy()
        v = v - self.basis @ (self.basis.T @ v)
        return v - self.basis @ (self.basis.T @ v)  # twice: "twice is enough" (Kahan/Parlett)

    def state_dict(self) -> dict:
        """The held groups (list of ``(k, dim)`` float64 arrays, oldest first)."""
        return {"groups": [g.copy() for g in self.groups]}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output (and rebuild the basis).

        Raises:
            ValueError: on mis-shaped groups.
        """
        groups = [np.asarray(g, dtype=np.float64) for g in state["groups"]]
        for g in groups:
            if g.ndim != 2 or g.shape[1] != self.dim:
                raise ValueError(f"OGD state group has shape {g.shape}, expected (k, {self.dim})")
        self.groups = deque(groups[-self.window:])
        self._rebuild()


@dataclass(frozen=True)
class OGDHyperparameters(SACHyperparameters):
    """Sliding OGD on discrete SAC: every :class:`~lcpo.agents.sac.SACHyperparameters` field, plus:

    Attributes:
        ogd_episodes: episodes whose directions are kept (the sliding window ``N``).
        directions_per_episode: gradient directions stored per episode (evenly spaced steps).
    """

    ogd_episodes: int = 10
    directions_per_episode: int = 4


class OGD(SAC):
    """Sliding OGD on discrete SAC (see module docstring).

    Args:
        env: environment with a Discrete or MultiDiscrete action space and a 1-D Box observation space.
        seed: run seed.
        hparams: an :class:`OGDHyperparameters` (defaults if None).
        **overrides: hyperparameter fields to override.

    Raises:
        ValueError: for invalid hyperparameters (named).

    Example:
        >>> import gymnasium as gym, lcpo.envs
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        >>> agent = OGD(env, seed=0, learning_starts=100, buffer_size=1000, batch_size=32).learn(400)
        >>> agent.basis.basis.shape[1]  # 2 episodes x 4 directions
        8
    """

    name = "ogd"
    Hyperparameters = OGDHyperparameters

    def __init__(self, env: gym.Env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        require_ints(hp, ("ogd_episodes", "directions_per_episode"))
        self.n_params = sum(p.numel() for p in self._actor_params)
        self.basis = SlidingBasis(self.n_params, hp.ogd_episodes)
        self._before: torch.Tensor | None = None
        self.actor_opt.register_step_pre_hook(self._remember_params)
        self.actor_opt.register_step_post_hook(self._project_step)

    # -- the projection of each actor step ---------------------------------------------------------------
    def _flat_params(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self._actor_params])

    def _remember_params(self, *_) -> None:
        self._before = self._flat_params()

    def _project_step(self, *_) -> None:
        if self.basis.basis.shape[1] == 0 or self._before is None:
            return
        delta = (self._flat_params() - self._before).double().numpy()
        new = self._before + torch.from_numpy(self.basis.project(delta)).to(self._before.dtype)
        torch.nn.utils.vector_to_parameters(new, self._actor_params)
        self._before = None

    # -- directions ---------------------------------------------------------------------------------------
    def log_prob_gradients(self, obs: torch.Tensor, actions: torch.Tensor) -> np.ndarray:
        """``(B, n_params) float64``: the gradient of ``log pi(a_b | s_b)`` for each of ``obs (B, obs_dim)``,
        ``actions (B, D) int64`` (flattened in ``actor.parameters()`` order)."""
        from torch.func import functional_call, grad, vmap

        params = {k: p.detach() for k, p in self.actor.named_parameters()}

        def logp(pr, o, a):
            lp = finite_log_probs(functional_call(self.actor, pr, (o.unsqueeze(0),)))[0]
            return lp.gather(-1, a.unsqueeze(-1)).sum()

        g = vmap(grad(logp), in_dims=(None, 0, 0))(params, obs, actions)
        return torch.cat([g[k].reshape(obs.shape[0], -1) for k in params], dim=1).double().numpy()

    def observe(self, tr: Transition) -> dict | None:
        """Store and learn as SAC; at an episode end add that episode's directions to the sliding basis."""
        diag = super().observe(tr)
        if tr.terminated or tr.truncated:
            spans = self.replay.episode_spans()
            start, length = int(spans["start"][-1]), int(spans["length"][-1])
            k = min(self.hp.directions_per_episode, length)
            idx = start + np.round(np.linspace(0, length - 1, k)).astype(np.int64)
            b = self.get_batch(idx)
            self.basis.add(self.log_prob_gradients(b["obs"], b["actions"]))
        return diag

    def update(self, batch: dict[str, torch.Tensor]) -> dict:
        """One SAC update whose actor step is projected off the stored directions; adds ``train/ogd_rank``."""
        diag = super().update(batch)
        diag["train/ogd_rank"] = float(self.basis.basis.shape[1])
        return diag

    # -- persistence -----------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """SAC's state plus the stored directions."""
        return {**super().state_dict(), "ogd": self.basis.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly."""
        super().load_state_dict(state)
        self.basis.load_state_dict(state["ogd"])
