"""MBPO: model-based policy optimization (Janner, Fu, Zhang & Levine 2019, "When to trust your model", Alg. 2),
on discrete SAC; LCPO paper appendix D.

Every ``model_train_every`` environment steps (once ``learning_starts`` transitions are stored) the ensemble
dynamics model (:class:`lcpo.agents.models.EnsembleDynamics`, inputs ``[obs, one-hot action]``) is fitted on the
real replay buffer (``model_train_steps`` Adam steps), and ``rollout_batch`` states drawn uniformly from the real
buffer are rolled out ``rollout_length`` steps with the current policy (sampled actions) through the model (a
random member per state, plus its residual noise), each predicted transition stored in a second replay buffer
(the model buffer, ``rollout_batch * rollout_length * model_retain`` transitions, the oldest evicted first).
A model transition is terminal when the environment's own termination rule says the predicted next state is
(``env.unwrapped.termination_fn``, :mod:`lcpo.envs.termination`: the rule the real environment's step uses,
e.g. WindyHopper's health limits), and a rollout continues only from non-terminal predicted states; an
environment that declares no rule is treated as never terminating, with a warning. Model transitions use the
discount ``gamma``. Every SAC gradient step (:class:`lcpo.agents.sac.SAC`) uses a minibatch of which a fraction
``real_ratio`` comes from the real buffer and the rest from the model buffer (all real while the model buffer is
empty).
"""

from __future__ import annotations

from dataclasses import dataclass

import warnings

import gymnasium as gym
import numpy as np
import torch

from lcpo.agents.base import require_ints
from lcpo.agents.models import EnsembleDynamics, one_hot_actions
from lcpo.agents.sac import SAC, SACHyperparameters
from lcpo.envs.termination import get_termination_fn, never_terminates
from lcpo.online.loop import Transition
from lcpo.memory.replay import ReplayBuffer

__all__ = ["MBPO", "MBPOHyperparameters"]


@dataclass(frozen=True)
class MBPOHyperparameters(SACHyperparameters):
    """Discrete SAC settings plus the model's (MBPO defaults of Janner et al. 2019 where they fit one CPU core).

    Attributes:
        model_members: ensemble size.
        model_hidden: hidden sizes of each member (SiLU MLP).
        model_lr: Adam learning rate of the model.
        model_train_every: environment steps between model fits and rollout rounds (250, MBPO).
        model_train_steps: Adam steps per model fit.
        model_batch_size: samples per member and model step.
        rollout_batch: real states rolled out per round.
        rollout_length: model steps per rollout (1 for the short horizon of MBPO's easier tasks).
        model_retain: rounds of rollouts kept in the model buffer.
        real_ratio: fraction of each SAC minibatch drawn from the real buffer (0.05, MBPO).
    """

    buffer_size: int = 200_000
    model_members: int = 5
    model_hidden: tuple[int, ...] = (200, 200)
    model_lr: float = 1e-3
    model_train_every: int = 250
    model_train_steps: int = 200
    model_batch_size: int = 256
    rollout_batch: int = 1_000
    rollout_length: int = 1
    model_retain: int = 20
    real_ratio: float = 0.05


class MBPO(SAC):
    """Discrete SAC trained on real transitions and short model rollouts from real states (see module docstring).

    Attributes:
        model: the :class:`~lcpo.agents.models.EnsembleDynamics`; model_replay: the model buffer.

    Raises:
        ValueError: for invalid hyperparameters (named); TypeError for unsupported spaces.

    Warns:
        UserWarning: if the environment declares no termination rule (``termination_fn``): model transitions
            are then stored as non-terminal.
    """

    name = "mbpo"
    Hyperparameters = MBPOHyperparameters

    def __init__(self, env: gym.Env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        require_ints(hp, ("model_train_every", "model_train_steps", "model_batch_size", "rollout_batch",
                          "rollout_length", "model_retain"))
        if not 0.0 <= hp.real_ratio <= 1.0:
            raise ValueError(f"real_ratio must lie in [0, 1], got {hp.real_ratio}")
        self.model = EnsembleDynamics(self.obs_dim, self.action_dims * self.action_bins, hp.model_members,
                                      hp.model_hidden, hp.model_lr, seed=self.seed + 2)
        cap = hp.rollout_batch * hp.rollout_length * hp.model_retain
        self.model_replay = ReplayBuffer(cap, (self.obs_dim,), (self.action_dims,), seed=self.rngs["extra"])
        self.termination_fn = get_termination_fn(env)
        if self.termination_fn is None:
            warnings.warn(f"MBPO: environment {getattr(getattr(env, 'spec', None), 'id', None) or env!r} declares no "
                          "termination_fn(obs) (lcpo.envs.termination); model transitions will never be terminal",
                          UserWarning, stacklevel=2)
            self.termination_fn = never_terminates

    # -- the model ---------------------------------------------------------------------------------------
    def _sample_actions(self, obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits = self.actor(torch.from_numpy(obs)).numpy()
        g = self.rngs["extra"].gumbel(size=logits.shape)
        return (logits + g).argmax(-1)

    def model_terminated(self, next_obs: np.ndarray) -> np.ndarray:
        """``(B,)`` bool: which predicted next states ``(B, obs_dim)`` are terminal by the environment's rule.

        Raises:
            TypeError: if the environment's ``termination_fn`` does not return ``B`` flags.
        """
        term = np.asarray(self.termination_fn(next_obs))
        if term.shape != (next_obs.shape[0],):
            raise TypeError(f"the environment's termination_fn returned shape {term.shape} for observations of "
                            f"shape {next_obs.shape}; expected ({next_obs.shape[0]},) bools")
        return term.astype(bool)

    def model_round(self) -> dict:
        """Fit the model on the real buffer, then roll ``rollout_batch`` real states out for up to
        ``rollout_length`` model steps; each predicted transition is stored with ``terminated`` from the
        environment's rule (:meth:`model_terminated`), and only non-terminal states are rolled further.

        Returns:
            diagnostics ``train/model_loss`` (standardized MSE), ``train/model_buffer`` (stored transitions) and
            ``train/model_terminal_fraction`` (fraction of this round's model transitions that were terminal).
        """
        hp, rng = self.hp, self.rngs["extra"]
        real = self.replay.get(self.replay.stored_indices())
        K = self.action_bins
        loss = self.model.fit(real["obs"], one_hot_actions(real["actions"], K), real["rewards"],
                              real["next_obs"], hp.model_train_steps, hp.model_batch_size, rng)
        obs = self.replay.sample(hp.rollout_batch)["obs"]
        stored = terminal = 0
        for _ in range(hp.rollout_length):
            actions = self._sample_actions(obs)
            nxt, rew = self.model.sample(obs, one_hot_actions(actions, K), rng)
            if not (np.isfinite(nxt).all() and np.isfinite(rew).all()):
                break  # a diverging model never enters the buffer
            n = obs.shape[0]
            term = self.model_terminated(nxt)
            self.model_replay.add_batch(obs, actions, rew, nxt, term, np.zeros(n, bool))
            stored, terminal = stored + n, terminal + int(term.sum())
            obs = nxt[~term]
            if obs.shape[0] == 0:
                break
        return {"train/model_loss": loss, "train/model_buffer": float(self.model_replay.size),
                "train/model_terminal_fraction": terminal / stored if stored else 0.0}

    def observe(self, tr: Transition) -> dict | None:
        """Store and train as SAC; on the model cadence first run :meth:`model_round`.

        Raises:
            ValueError: as :meth:`lcpo.agents.offpolicy.OffPolicyAgent.observe`.
        """
        hp = self.hp
        diag = super().observe(tr)
        if self.steps >= hp.learning_starts and self.steps % hp.model_train_every == 0:
            diag = {**(diag or {}), **self.model_round()}
        return diag

    def sample_batch(self, batch_size: int) -> dict[str, torch.Tensor]:
        """A SAC minibatch: ``round(real_ratio * batch_size)`` real transitions (all while the model buffer is
        empty), the rest model transitions; the tensors of :meth:`get_batch`."""
        n_real = batch_size if self.model_replay.size == 0 else round(self.hp.real_ratio * batch_size)
        real = self._tensors(self.replay.sample(n_real)) if n_real else None
        if n_real == batch_size:
            return real
        m = self.model_replay.sample(batch_size - n_real)
        fake = {"obs": torch.from_numpy(m["obs"]), "actions": torch.from_numpy(m["actions"]),
                "rewards": torch.from_numpy((m["rewards"] / self.reward_scale).astype(np.float32)),
                "next_obs": torch.from_numpy(m["next_obs"]),
                "not_terminated": torch.from_numpy((~m["terminated"]).astype(np.float32)),
                "gamma": torch.full((m["obs"].shape[0],), float(self.hp.gamma))}
        if real is None:
            return fake
        return {k: torch.cat([real[k], fake[k]]) for k in real}

    # -- persistence -------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """SAC's state plus the model and the model buffer."""
        return {**super().state_dict(), "model": self.model.state_dict(),
                "model_replay": self.model_replay.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly.

        Raises:
            ValueError: on buffers of another configuration; KeyError/RuntimeError on missing entries.
        """
        self.model.load_state_dict(state["model"])
        self.model_replay.load_state_dict(state["model_replay"])
        super().load_state_dict(state)
