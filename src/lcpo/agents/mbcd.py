"""MBCD: model-based change detection (Alegre, Bazzan & da Silva 2021, "Minimum-delay adaptation in
non-stationary reinforcement learning via online high-confidence change-point detection"); LCPO paper appendix D.

Each detected task ``i`` owns a discrete SAC agent (:class:`lcpo.agents.sac.SAC`, its own replay buffer, a
fresh policy) and an ensemble dynamics model (:class:`lcpo.agents.models.EnsembleDynamics`) fitted on that
buffer every ``model_train_every`` steps of the task (``model_train_steps`` Adam steps). Only the active task acts
and learns. Change detection runs on the active model's surprise ``z_t`` of every new transition
(:meth:`EnsembleDynamics.surprise`, a standardized squared prediction error):

1. after each fit, the first ``calibration_steps`` surprises give the in-control mean and standard deviation of
   ``z`` for that model (no detection meanwhile, and none before a task's first fit);
2. then ``(z_t - mean) / sd`` feeds a one-sided CUSUM (:class:`lcpo.agents.models.CUSUM`, ``cusum_k``,
   ``cusum_h``);
3. on an alarm, the transitions since the statistic last left 0 (Page's change-point estimate; at most
   ``window``) are scored by every other calibrated model (mean standardized
   surprise); the best one becomes active if its score is below ``cusum_k`` (a known task came back); otherwise a
   new task (new SAC policy, new model) starts, unless ``max_models`` (7) exist, in which case the best-scoring
   model (the current one included) is chosen.

The CUSUM on a standardized error, rather than the paper's log-likelihood ratio between models, is this
implementation's simplification; it needs no model of the unknown new task.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from lcpo.agents.base import Agent, require_ints
from lcpo.agents.models import CUSUM, EnsembleDynamics, one_hot_actions
from lcpo.agents.sac import SAC, SACHyperparameters
from lcpo.online.loop import Transition

__all__ = ["MBCD", "MBCDHyperparameters"]

_SAC_FIELDS = tuple(f.name for f in dataclasses.fields(SACHyperparameters))


@dataclass(frozen=True)
class MBCDHyperparameters(SACHyperparameters):
    """Discrete SAC settings (for every task's agent; ``buffer_size`` per task) plus change detection.

    Attributes:
        max_models: most tasks (models and policies) ever created (7).
        model_members: ensemble size.
        model_hidden: hidden sizes of each member (SiLU MLP).
        model_lr: Adam learning rate of the models.
        model_train_every: steps of a task between fits of its model.
        model_train_steps: Adam steps per fit.
        model_batch_size: samples per member and step.
        calibration_steps: surprises after a fit that set the in-control mean and sd.
        cusum_k: CUSUM reference value (standard deviations).
        cusum_h: CUSUM threshold.
        window: most recent transitions scored by the other models on an alarm.
    """

    buffer_size: int = 100_000
    max_models: int = 7
    model_members: int = 5
    model_hidden: tuple[int, ...] = (200, 200)
    model_lr: float = 1e-3
    model_train_every: int = 1_000
    model_train_steps: int = 200
    model_batch_size: int = 256
    calibration_steps: int = 200
    cusum_k: float = 1.0
    cusum_h: float = 50.0
    window: int = 50


class MBCD(Agent):
    """One SAC agent and one dynamics model per detected task, switched by CUSUM change detection (see module
    docstring).

    Attributes:
        tasks: the SAC agents; models: their dynamics models; active: index of the acting one;
        switches: number of alarms that changed the active task.

    Raises:
        ValueError: for invalid hyperparameters (named); TypeError for unsupported spaces.
    """

    validates_transitions = True  # observe() checks reward and next_obs (through the active SAC agent)

    name = "mbcd"
    Hyperparameters = MBCDHyperparameters

    def __init__(self, env: gym.Env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        require_ints(hp, ("max_models", "model_train_every", "model_train_steps", "model_batch_size", "window"))
        require_ints(hp, ("calibration_steps",), minimum=2)
        self.cusum = CUSUM(hp.cusum_k, hp.cusum_h)  # validates k and h
        self._sac_hp = SACHyperparameters(**{k: getattr(hp, k) for k in _SAC_FIELDS})
        self.tasks: list[SAC] = []
        self.models: list[EnsembleDynamics] = []
        self.calib = np.zeros((0, 2))  # per model: in-control mean and sd of the surprise (nan: not calibrated)
        self._calib_buf: list[float] = []
        W = hp.window
        self._recent = {"obs": np.zeros((W, self.obs_dim), np.float32),
                        "actions": np.zeros((W, self.action_dims), np.int64),
                        "rewards": np.zeros(W), "next_obs": np.zeros((W, self.obs_dim), np.float32)}
        self._recent_n = 0
        self._run = 0  # steps since the CUSUM statistic was last 0 (the estimated change point)
        self.active = 0
        self.steps = 0
        self.switches = 0
        self._new_task()

    def _new_task(self) -> int:
        hp, i = self.hp, len(self.tasks)
        self.tasks.append(SAC(self.env, seed=self.seed + 1000 * i, hparams=self._sac_hp))
        self.models.append(EnsembleDynamics(self.obs_dim, self.action_dims * self.action_bins, hp.model_members,
                                            hp.model_hidden, hp.model_lr, seed=self.seed + 1000 * i + 2))
        self.calib = np.concatenate([self.calib, np.full((1, 2), np.nan)])
        return i

    # -- acting ------------------------------------------------------------------------------------------
    def act(self, obs: np.ndarray, deterministic: bool = False):
        """The active task's SAC action for one observation ``(obs_dim,)``.

        Returns:
            ``(D,)`` int64 bin indices (an int64 scalar for a ``Discrete`` action space).
        """
        return self.tasks[self.active].act(obs, deterministic)

    # -- change detection --------------------------------------------------------------------------------
    def _window(self, n: int) -> dict[str, np.ndarray]:
        """The last ``min(n, window)`` transitions (oldest first)."""
        W = self.hp.window
        n = min(n, self._recent_n, W)
        idx = (self._recent_n - n + np.arange(n)) % W
        return {k: v[idx] for k, v in self._recent.items()}

    def _score(self, j: int, w: dict[str, np.ndarray]) -> float:
        """Mean standardized surprise of the window under model ``j`` (inf if ``j`` is not calibrated)."""
        mean, sd = self.calib[j]
        if not np.isfinite(mean):
            return math.inf
        z = self.models[j].surprise(w["obs"], one_hot_actions(w["actions"], self.action_bins), w["rewards"],
                                    w["next_obs"])
        return float(((z - mean) / sd).mean())

    def _on_alarm(self) -> None:
        w = self._window(self._run)
        scores = np.array([self._score(j, w) for j in range(len(self.models))])
        others = scores.copy()
        others[self.active] = np.inf
        best = int(np.argmin(others))
        if others[best] < self.hp.cusum_k:
            new = best
        elif len(self.tasks) < self.hp.max_models:
            new = self._new_task()
        else:
            new = int(np.argmin(scores))
        if new != self.active:
            self.switches += 1
        self.active = new
        self.cusum.reset()

    def _fit(self, i: int) -> float:
        task = self.tasks[i]
        real = task.replay.get(task.replay.stored_indices())
        loss = self.models[i].fit(real["obs"], one_hot_actions(real["actions"], self.action_bins),
                                  real["rewards"], real["next_obs"], self.hp.model_train_steps,
                                  self.hp.model_batch_size, self.rngs["extra"])
        self.calib[i] = np.nan
        self._calib_buf = []
        self.cusum.reset()
        return loss

    def observe(self, tr: Transition) -> dict | None:
        """Give the transition to the active task's SAC agent, run change detection on it, and fit the active
        model on its cadence.

        Returns:
            the SAC agent's diagnostics plus ``train/task``, ``train/tasks``, ``train/cusum`` when it updated (or
            the model was fitted), else None.

        Raises:
            ValueError: on a non-finite reward or observation (as :meth:`SAC.observe`).
        """
        hp, a = self.hp, self.active
        task, model = self.tasks[a], self.models[a]
        diag = task.observe(tr)  # validates and stores
        self.steps += 1
        action = np.asarray(tr.action, dtype=np.int64).reshape(1, self.action_dims)
        i = self._recent_n % hp.window
        self._recent["obs"][i], self._recent["actions"][i] = tr.obs, action[0]
        self._recent["rewards"][i], self._recent["next_obs"][i] = tr.reward, tr.next_obs
        self._recent_n += 1
        if model.fits:
            z = float(model.surprise(np.asarray(tr.obs, np.float32)[None], one_hot_actions(action, self.action_bins),
                                     np.array([tr.reward]), np.asarray(tr.next_obs, np.float32)[None])[0])
            if not np.isfinite(self.calib[a, 0]):
                self._calib_buf.append(z)
                if len(self._calib_buf) >= hp.calibration_steps:
                    c = np.array(self._calib_buf)
                    self.calib[a] = (c.mean(), max(c.std(), 1e-3))
                    self._calib_buf = []
            elif self.cusum.update((z - self.calib[a, 0]) / self.calib[a, 1]):
                self._run += 1
                self._on_alarm()
                self._run = 0
            else:
                self._run = self._run + 1 if self.cusum.stat > 0 else 0
        if task.steps >= hp.learning_starts and task.steps % hp.model_train_every == 0:
            diag = {**(diag or {}), "train/model_loss": self._fit(a)}
        if diag is None:
            return None
        return {**diag, "train/task": float(self.active), "train/tasks": float(len(self.tasks)),
                "train/cusum": self.cusum.stat}

    # -- persistence -------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Every task's SAC state and model, calibration, CUSUM, the recent window, RNG states and counters."""
        return {"tasks": [t.state_dict() for t in self.tasks], "models": [m.state_dict() for m in self.models],
                "calib": self.calib.copy(), "calib_buf": list(self._calib_buf), "cusum": self.cusum.stat,
                "recent": {k: v.copy() for k, v in self._recent.items()}, "recent_n": self._recent_n,
                "run": self._run,
                "rngs": {k: g.bit_generator.state for k, g in self.rngs.items()}, "active": self.active,
                "steps": self.steps, "switches": self.switches}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly (creating the saved number of tasks).

        Raises:
            ValueError: on more tasks than ``max_models`` or mismatched lengths; KeyError on missing entries.
        """
        n = len(state["tasks"])
        if not 1 <= n <= self.hp.max_models or len(state["models"]) != n:
            raise ValueError(f"state holds {n} tasks and {len(state['models'])} models; expected equal counts "
                             f"in [1, {self.hp.max_models}]")
        self.tasks, self.models, self.calib = [], [], np.zeros((0, 2))
        for _ in range(n):
            self._new_task()
        for t, s in zip(self.tasks, state["tasks"]):
            t.load_state_dict(s)
        for m, s in zip(self.models, state["models"]):
            m.load_state_dict(s)
        self.calib = np.asarray(state["calib"], dtype=np.float64).reshape(n, 2)
        self._calib_buf = [float(x) for x in state["calib_buf"]]
        self.cusum.stat = float(state["cusum"])
        for k, v in state["recent"].items():
            self._recent[k][...] = v
        self._recent_n, self._run = int(state["recent_n"]), int(state["run"])
        for k, s in state["rngs"].items():
            self.rngs[k].bit_generator.state = s
        self.active, self.steps, self.switches = int(state["active"]), int(state["steps"]), int(state["switches"])
