"""The agent contract and the machinery every on-policy agent shares.

Contract (docs/architecture.md, "Agents"): ``Agent(env, seed=0, **overrides)``; ``act(obs)``;
``observe(transition) -> dict | None``; ``learn(total_steps, reset_condition=None, callback=None)``;
``state_dict()`` / ``load_state_dict()``; ``save(path)`` / ``Agent.load(path, env)``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
import math
from pathlib import Path
from typing import ClassVar

import gymnasium as gym
import numpy as np
import torch

from lcpo.persistence.strict_json import show
from lcpo.persistence.checkpoint import atomic_write_json, load_state, save_state
from lcpo.online.loop import OnlineLoop, Transition
from lcpo.online.threads import limit_threads
from lcpo.memory.rollout import RolloutBuffer
from lcpo.agents.nets import action_shape_of, make_actor_critic, make_fast_policy
from lcpo.numerics.finite import OVERFLOW_HINT, check_finite, check_transition, to_float32
from lcpo.numerics.normalize import ReturnNormalizer

__all__ = ["Agent", "OnPolicyAgent", "OnPolicyHyperparameters", "require_ints", "resolve_hyperparameters",
           "spawn_rngs"]


#: The largest entry of a list-of-sizes hyperparameter (``hidden``): a sanity bound, far above any MLP width used
#: here, below which torch builds the layer (``hidden=[1e20]`` failed inside torch with a C++ stack trace).
_MAX_SIZE = 65_536

_INT64_MAX = 2 ** 63 - 1

#: Sanity ranges of float hyperparameters whose meaning is the same in every agent, by field name:
#: ``(low, low_inclusive, high, high_inclusive)``; ``None`` leaves that side open. Names ending in ``lr``
#: (learning rates) must be > 0. Agents check their own specific constraints (e.g. ``g1``) themselves.
_FLOAT_RANGES: dict[str, tuple] = {
    "gamma": (0.0, False, 1.0, True),
    **{k: (0.0, True, 1.0, True) for k in (
        "gae_lambda", "transient_decay", "tau", "real_ratio", "epsilon_final", "ewc_beta", "accept_ratio",
        "entropy_target")},
    **{k: (0.0, False, None, False) for k in (
        "max_grad_norm", "alpha_init", "entropy_base", "rho_bar", "c_bar", "ood_threshold", "ood_std_threshold")},
    "ood_target_fraction": (0.0, False, 1.0, False),
    **{k: (0.0, True, None, False) for k in (
        "weight_decay", "damping", "entropy_coef", "ewc_alpha", "policy_cloning", "value_cloning",
        "c_anchor", "c_recent", "cusum_k")},
}
#: Integer fields are counts (steps, sizes, epochs, ...) and must be >= 1, except these (and any whose
#: default is 0), for which 0 is meaningful and the minimum is 0.
_ZERO_OK_COUNTS = frozenset({"train_steps", "train_episode_steps", "max_backtracks", "random_epochs",
                             "decay_epochs", "replay_windows"})
#: Fields whose range the agents using them check themselves, with their own messages (PPO/TRPO ``clip``,
#: ``max_kl``, ``epochs``; LCPO-P ``kappa``; MBCD ``cusum_h``; Prescient ``train_steps``): only type,
#: finiteness and integrality are checked here.
_SELF_CHECKED = frozenset({"clip", "max_kl", "epochs", "kappa", "cusum_h", "train_steps", "train_episode_steps"})
#: Fields that take a number or one of a few words (their default is a word): LCPO's ``ood_threshold`` is a
#: positive number, ``"auto"`` (calibrated, :mod:`lcpo.ood.calibration`) or ``"env"`` (the declared one).
_NUMBER_OR_WORDS: dict[str, tuple[str, ...]] = {"ood_threshold": ("auto", "env")}


def _interval_text(low, low_inc, high, high_inc) -> str:
    if high is None:
        return f"{'>=' if low_inc else '>'} {low:g}"
    return f"in {'[' if low_inc else '('}{low:g}, {high:g}{']' if high_inc else ')'}"


def _check_hyperparameter(name: str, value, default):
    """Type-check, convert and range-check one hyperparameter override against its field's default.

    Args:
        name: the field name (selects the sanity rule of :data:`_FLOAT_RANGES` / the count rule).
        value: the override (JSON-like: bool, int, float, str, list).
        default: the field's default, whose type is the field's type.

    Returns:
        The value converted to the field's type (lists to tuples, integral floats to ints, ints to floats).

    Raises:
        ValueError: naming ``name`` and ``value`` for a wrong type, a non-finite or non-integral number, a
            malformed tuple, or a value outside the field's sanity range.
    """
    if name in _NUMBER_OR_WORDS:
        words = _NUMBER_OR_WORDS[name]
        if isinstance(value, str):
            if value not in words:
                raise ValueError(f"hyperparameter {name!r} must be a positive number or one of "
                                 f"{', '.join(map(repr, words))}, got {show(value)}")
            return value
        default = 1.0  # a number: checked as a float field below (finite, in its sanity range)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"hyperparameter {name!r} must be a bool (true/false), got {show(value)}")
        return value
    if isinstance(default, tuple):
        if default and all(isinstance(x, int) and not isinstance(x, bool) for x in default):
            ok = isinstance(value, (list, tuple)) and all(  # [] is allowed: no hidden layer, a linear policy
                isinstance(x, (int, float)) and not isinstance(x, bool) and 1 <= x <= _MAX_SIZE
                and float(x).is_integer() for x in value)  # (a NaN fails the comparison)
            if not ok:
                example = json.dumps(list(default)).replace(" ", "")
                raise ValueError(f"hyperparameter {name!r} must be a JSON list of positive integers "
                                 f"(at most {_MAX_SIZE:,}), e.g. "
                                 f"--set {name}={example}; got {show(value)}")
            return tuple(int(x) for x in value)
        return tuple(value) if isinstance(value, list) else value
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ValueError(f"hyperparameter {name!r} must be a string, got {show(value)}")
        return value
    if not isinstance(default, (int, float)):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"hyperparameter {name!r} must be a number, got {show(value)}")
    try:
        as_float = float(value)
    except OverflowError:  # an integer beyond float64
        as_float = math.inf if value > 0 else -math.inf
    allow_inf = isinstance(default, float) and math.isinf(default)
    if math.isnan(as_float) or (math.isinf(as_float) and not (allow_inf and as_float > 0)):
        raise ValueError(f"hyperparameter {name!r} must be a finite number, got {show(value)}")
    if isinstance(default, int):
        if not as_float.is_integer():
            raise ValueError(f"hyperparameter {name!r} must be an integer, got {show(value)}")
        if abs(value) > _INT64_MAX:  # counts and sizes: numpy and torch hold them as int64
            raise ValueError(f"hyperparameter {name!r} = {show(value)} is beyond int64's range (at most 2**63 - 1)")
        value = int(value)
        minimum = 0 if (default == 0 or name in _ZERO_OK_COUNTS) else 1
        if value < minimum and name not in _SELF_CHECKED:
            raise ValueError(f"hyperparameter {name!r} must be an integer >= {minimum}, got {show(value)}")
        return value
    given, value = value, as_float
    rule = (0.0, False, None, False) if name.endswith("lr") else _FLOAT_RANGES.get(name)
    if rule is not None and name not in _SELF_CHECKED:
        low, low_inc, high, high_inc = rule
        if (value < low or (value == low and not low_inc)
                or (high is not None and (value > high or (value == high and not high_inc)))):
            raise ValueError(f"hyperparameter {name!r} must be {_interval_text(*rule)}, got {show(given)}")
    return value


def resolve_hyperparameters(cls, base=None, overrides: dict | None = None):
    """Build a frozen hyperparameter dataclass from ``base`` (or defaults) and validated ``overrides``.

    Each override is checked against its field's default: bools must be bools; numbers must be finite
    (``+inf`` only where the default is ``inf``, e.g. a disabled gradient clip); integer fields accept only
    integral values and are counts (``>= 1``, or ``>= 0`` where 0 is meaningful); tuple-of-int fields (e.g.
    ``hidden``) must be lists of positive integers (converted to tuples so JSON round trips work); fields with
    a universal meaning obey a sanity range (:data:`_FLOAT_RANGES`: ``gamma`` in (0, 1], lambda-like weights
    and fractions in [0, 1], learning rates > 0, ...).

    Raises:
        ValueError: for an unknown field (the message names it and lists the valid ones) or a bad value (the
            message names the field, the value and what is accepted).
    """
    hp = base if base is not None else cls()
    if not overrides:
        return hp
    fields = {f.name: f for f in dataclasses.fields(cls)}
    defaults = cls()
    clean = {}
    for k, v in overrides.items():
        if k not in fields:
            raise ValueError(f"unknown hyperparameter {k!r} for {cls.__qualname__}; valid: {sorted(fields)}")
        clean[k] = _check_hyperparameter(k, v, getattr(defaults, k))
    return dataclasses.replace(hp, **clean)


@dataclass(frozen=True)
class OnPolicyHyperparameters:
    """Settings every on-policy agent shares (paper Table 11 defaults); each agent's dataclass extends it.

    Attributes:
        hidden: hidden layer sizes of actor and critic (ReLU MLPs).
        actor_lr: Adam learning rate of the actor.
        critic_lr: Adam learning rate of the critic.
        weight_decay: Adam L2 weight decay of both networks.
        gamma: discount per step (overridden per step by an environment's ``info["gamma"]``).
        gae_lambda: GAE lambda.
        rollout_steps: transitions per update.
        max_grad_norm: gradient-norm clip of each network's step.
        network: ``"auto"`` (the environment's ``default_network``, else ``"mlp"``), ``"mlp"``, or a kind
            registered in :data:`lcpo.agents.nets.NETWORKS` (e.g. ``"perm-invariant"``).
        normalize_returns: divide the rewards entering each update by the running spread of the discounted
            return, ``sqrt(Var[G] + 1)`` (:class:`lcpo.numerics.normalize.ReturnNormalizer`; on, as in the authors'
            implementation; the straggler presets turn it off, as the authors' straggler agents do).
    """

    hidden: tuple[int, ...] = (64, 64)
    actor_lr: float = 4e-4
    critic_lr: float = 1e-3
    weight_decay: float = 1e-4
    gamma: float = 0.99
    gae_lambda: float = 0.9
    rollout_steps: int = 200
    max_grad_norm: float = 0.5
    network: str = "auto"
    normalize_returns: bool = True


def require_ints(hp, names, minimum: int = 1) -> None:
    """Refuse the hyperparameters ``names`` of ``hp`` that are not integers >= ``minimum``.

    An agent's own range rules, checked in its ``__init__`` (they also hold for a dataclass passed as
    ``hparams=``, which :func:`resolve_hyperparameters` does not re-check).

    Args:
        hp: a hyperparameter dataclass instance.
        names: field names, checked in order.
        minimum: the smallest allowed value.

    Raises:
        ValueError: ``hyperparameter NAME must be an integer >= MINIMUM, got VALUE`` for the first bad field.
    """
    for name in names:
        v = getattr(hp, name)
        if not isinstance(v, int) or v < minimum:
            raise ValueError(f"hyperparameter {name} must be an integer >= {minimum}, got {show(v)}")


def spawn_rngs(seed: int) -> dict[str, np.random.Generator]:
    """A run seed's independent generators ``act``, ``buffer``, ``ood``, ``extra`` (``SeedSequence(seed).spawn(4)``,
    PCG64), the same for a solo run and for that seed's slot in a population."""
    seq = np.random.SeedSequence(int(seed))
    return {k: np.random.Generator(np.random.PCG64(s)) for k, s in zip(("act", "buffer", "ood", "extra"), seq.spawn(4))}


class Agent:
    """Base class: spaces, seeding, the ``learn`` convenience, and persistence.

    Subclasses define ``Hyperparameters`` (a frozen dataclass), ``act``, ``observe``, ``state_dict`` and
    ``load_state_dict``.

    Args:
        env: the environment the agent acts in (used for its spaces and context declaration, and by ``learn``).
        seed: run seed; spawns the agent's independent random generators and seeds network initialisation.
        hparams: a ``Hyperparameters`` instance (defaults if None).
        **overrides: hyperparameter fields to override.

    Raises:
        ValueError: for unknown hyperparameters; TypeError for unsupported spaces;
            :class:`lcpo.envs.preflight.VectorEnvError` for a Gymnasium vector env (populations take those).
    """

    name: ClassVar[str] = "agent"
    Hyperparameters: ClassVar[type]
    #: torch/BLAS threads while :meth:`learn` runs (1: fastest for these small networks; None: leave as is)
    threads: ClassVar[int | None] = 1
    #: True if :meth:`observe` rejects non-finite rewards and observations itself (the loop then skips its check)
    validates_transitions: ClassVar[bool] = False

    def __init__(self, env: gym.Env, seed: int = 0, hparams=None, **overrides):
        from lcpo.envs.preflight import refuse_vector_env

        refuse_vector_env(env, f"the environment given to {type(self).__name__}")
        self.env = env
        self.seed = int(seed)
        self.hp = resolve_hyperparameters(self.Hyperparameters, hparams, overrides)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise TypeError(f"{type(self).__name__} needs a 1-D Box observation space, got {space}")
        self.obs_dim = int(space.shape[0])
        self.action_dims, self.action_bins = action_shape_of(env.action_space)
        self.scalar_action = isinstance(env.action_space, gym.spaces.Discrete)
        self.rngs = spawn_rngs(self.seed)
        self._loop: OnlineLoop | None = None

    # -- the online loop -------------------------------------------------------------------------------
    def learn(self, total_steps: int, reset_condition=None, callback=None) -> "Agent":
        """Run the online loop for ``total_steps`` more environment steps; returns ``self``.

        The first call starts one stream of experience (the environment is reset with the agent's seed); later
        calls continue it: the step count, the episode rows and the environment's state carry on, and the
        environment is never reseeded.

        Args:
            total_steps: number of environment steps (each experienced once), >= 0.
            reset_condition: ``"end"`` (default), ``"every:N"``, ``"never"``, a ``ResetAfterSteps``-like object
                or a callable ``(agent, transition, env) -> bool`` (see :mod:`lcpo.online.loop`). On a later call, a
                condition given replaces the running one from this call on (a step count of ``every:N`` counts
                from the switch); None keeps the running one.
            callback: optional ``(step, diagnostics) -> None`` called after every update of this call (each
                call's own callback; None: no callback during this call).

        Raises:
            ValueError: for a negative or non-integer ``total_steps`` or a malformed reset condition.
            RuntimeError: when called while this agent's ``learn`` is running (from its callback or its reset
                condition): one stream cannot run inside itself, and the inner call would end the outer call's
                callback; nothing changes.
        """
        if isinstance(total_steps, bool) or not float(total_steps).is_integer() or total_steps < 0:
            raise ValueError(f"total_steps must be a non-negative integer, got {total_steps!r}")
        if self._loop is not None and self._loop.agent is not None:
            raise RuntimeError(f"learn({total_steps!r}) called while this agent's learn is running (at step "
                               f"{self._loop.steps}, from its callback or reset condition): return from it and "
                               "call learn again")
        if self._loop is None:
            self._loop = OnlineLoop(self.env, None, reset_condition, seed=self.seed)
        elif reset_condition is not None:
            from lcpo.online.loop import NeverReset, parse_reset

            cond = parse_reset(reset_condition)  # a malformed one raises here, before the loop holds anything
            self._loop.reset_condition = cond
            self._loop.never = isinstance(cond, NeverReset)
        loop = self._loop
        try:
            loop.agent, loop.on_update = self, callback
            with limit_threads(self.threads):
                loop.run(loop.steps + int(total_steps))
        finally:
            # between calls the loop holds neither this agent nor the call's callback: no agent <-> loop reference
            # cycle, so an agent its caller drops frees its episode rows at once instead of at the interpreter's
            # next full garbage collection (a prescient agent's offline-training loop kept a population's rows)
            loop.agent = None
            loop.on_update = None
        return self

    @property
    def episodes(self) -> "EpisodeRows":
        """Per-episode rows recorded by :meth:`learn` (see :data:`lcpo.online.loop.EPISODE_COLUMNS`): an
        :class:`lcpo.online.episodes.EpisodeRows`, read as a list of tuples (empty before the first ``learn``)."""
        from lcpo.online.episodes import EpisodeRows

        return EpisodeRows() if self._loop is None else self._loop.episodes

    # -- persistence -----------------------------------------------------------------------------------
    def state_dict(self) -> dict:  # pragma: no cover - abstract
        """Everything needed for an exact resume: tensors, NumPy arrays and JSON values only."""
        raise NotImplementedError

    def load_state_dict(self, state: dict) -> None:  # pragma: no cover - abstract
        """Restore :meth:`state_dict` output exactly."""
        raise NotImplementedError

    def save(self, path: str | Path) -> None:
        """Save to ``path`` (a folder): ``agent.pt`` + ``agent.json`` (state) and ``meta.json``.

        Raises:
            RuntimeError: a state that cannot be saved (e.g. a prescient agent's offline training stopped part-way,
                :meth:`lcpo.agents.prescient.Prescient.state_dict`); nothing is written, no folder made.
        """
        path = Path(path)
        state = self.state_dict()  # first: a refusal leaves no folder behind
        path.mkdir(parents=True, exist_ok=True)
        save_state(path / "agent", state)
        atomic_write_json(path / "meta.json", {"agent": self.name, "class": type(self).__qualname__,
                                               "seed": self.seed, "hyperparameters": dataclasses.asdict(self.hp)})

    @classmethod
    def load(cls, path: str | Path, env: gym.Env) -> "Agent":
        """Rebuild an agent saved with :meth:`save` for ``env`` (weights loaded with ``weights_only=True``).

        Raises:
            FileNotFoundError: missing files; ValueError: the folder holds a different agent type.
        """
        path = Path(path)
        meta = json.loads((path / "meta.json").read_text())
        if meta["agent"] != cls.name:
            raise ValueError(f"{path} holds a {meta['agent']!r} agent, not {cls.name!r}")
        agent = cls(env, seed=meta["seed"], **meta["hyperparameters"])
        agent.load_state_dict(load_state(path / "agent"))
        return agent


class OnPolicyAgent(Agent):
    """Shared machinery of A2C-family agents: actor/critic networks, rollout batch, Gumbel-noise sampling.

    Subclasses implement :meth:`update` (called when the rollout batch is full) and may extend
    ``state_dict``/``load_state_dict``.
    """

    validates_transitions = True

    def __init__(self, env: gym.Env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        hp = self.hp
        if hp.rollout_steps < 1:
            raise ValueError(f"rollout_steps must be >= 1, got {hp.rollout_steps!r}")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.actor, self.critic = self.build_networks()
        self.actor_opt, self.critic_opt = self.build_optimizers()
        self.fast_actor = make_fast_policy(self.actor)
        self.rollout = RolloutBuffer(hp.rollout_steps, self.obs_dim, self.action_dims)
        self.return_norm = ReturnNormalizer()
        self._noise = np.zeros((0, self.action_dims * self.action_bins), dtype=np.float32)
        self._noise_i = 0
        self.updates = 0
        self.steps = 0

    def build_networks(self):
        """``(actor, critic)``: a :class:`~lcpo.agents.nets.CategoricalPolicy` and a :class:`~lcpo.agents.nets.ValueNet` of the
        kind ``hp.network`` (called under a seeded torch RNG; override for other function classes)."""
        return make_actor_critic(self.env, self.obs_dim, self.action_dims, self.action_bins, self.hp.hidden,
                                 self.hp.network)

    def build_optimizers(self):
        """``(actor_opt, critic_opt)``: Adam with the hyperparameters' learning rates and weight decay."""
        hp = self.hp
        return (torch.optim.Adam(self.actor.parameters(), lr=hp.actor_lr, weight_decay=hp.weight_decay),
                torch.optim.Adam(self.critic.parameters(), lr=hp.critic_lr, weight_decay=hp.weight_decay))

    # -- acting (hot path) -----------------------------------------------------------------------------
    def _refill_noise(self) -> None:
        n = max(self.hp.rollout_steps, 256)
        self._noise = self.rngs["act"].gumbel(size=(n, self.action_dims * self.action_bins)).astype(np.float32)
        self._noise_i = 0

    def act(self, obs: np.ndarray, deterministic: bool = False):
        """Sample an action for one observation ``(obs_dim,)``.

        Returns:
            ``(D,)`` int64 bin indices (an int64 scalar for a ``Discrete`` action space).
        """
        if deterministic:
            a = self.fast_actor.greedy(obs)
        else:
            if self._noise_i >= self._noise.shape[0]:
                self._refill_noise()
            a = self.fast_actor.sample(obs, self._noise[self._noise_i])
            self._noise_i += 1
        return a[0] if self.scalar_action else a

    def observe(self, tr: Transition) -> dict | None:
        """Store a transition; update when the rollout batch is full.

        Raises:
            ValueError: on a reward that is non-finite or beyond float32, or a non-finite next observation
                (naming the value and the step).
        """
        check_transition(tr.reward, tr.next_obs, f"at agent step {self.steps}")
        info = tr.info
        gamma = self.hp.gamma
        mask = True
        if info:
            gamma = info.get("gamma", gamma)
            mask = not info.get("forced", False)
        self.rollout.add(tr.obs, tr.action, tr.reward, tr.next_obs, tr.terminated, tr.truncated, gamma, mask)
        self.steps += 1
        if self.rollout.full:
            with limit_threads(self.threads):  # also when driven through act/observe by a live system
                diag = self.update()
            self.rollout.reset()
            self.fast_actor.sync()
            self.updates += 1
            if diag is not None and self.hp.normalize_returns:
                diag["train/reward_scale"] = self.return_norm.scale
            return diag
        return None

    def update(self) -> dict:  # pragma: no cover - abstract
        """Learn from the full rollout batch; return diagnostics (namespaced keys)."""
        raise NotImplementedError

    # -- shared update pieces --------------------------------------------------------------------------
    def batch_rewards(self) -> np.ndarray:
        """The rollout's rewards ``(N,)`` float64 as the update uses them: raw, or divided by the return
        normaliser's scale after merging this rollout's return-accumulator values (``normalize_returns``).

        Call once per update (it advances the normaliser's state).
        """
        b = self.rollout
        n = b.ptr
        rewards = b.rewards[:n]
        if not self.hp.normalize_returns:
            return rewards
        norm = self.return_norm
        norm.update(norm.accumulate(rewards, b.terminated[:n] | b.truncated[:n], b.gammas[:n]))
        return rewards / norm.scale

    def _batch(self):
        """Tensors of the full rollout batch and its GAE advantages / lambda-returns (rewards scaled by
        :meth:`batch_rewards`)."""
        from lcpo.numerics.returns import gae

        b = self.rollout
        n = b.ptr
        rewards = self.batch_rewards()
        obs = torch.from_numpy(b.obs[:n])
        next_obs = torch.from_numpy(b.next_obs[:n])
        with torch.no_grad():
            both = self.critic(torch.cat([obs, next_obs])).double().numpy()  # one forward for V(s) and V(s')
        v, nv = both[:n], both[n:]
        adv, ret = gae(rewards, v, nv, b.terminated[:n], b.truncated[:n], b.gammas[:n], self.hp.gae_lambda)
        first, hint = self.steps - n, OVERFLOW_HINT
        return {
            "obs": obs, "actions": torch.from_numpy(b.actions[:n]),
            "adv": torch.from_numpy(to_float32("advantages", adv, first, hint)),
            "ret": torch.from_numpy(to_float32("returns", ret, first, hint)),
            "mask": torch.from_numpy(b.policy_mask[:n].astype(np.float32)),
        }

    def _critic_step(self, obs: torch.Tensor, ret: torch.Tensor) -> float:
        loss = torch.nn.functional.mse_loss(self.critic(obs), ret)
        check_finite("critic loss", loss.detach(), f"at the update at agent step {self.steps}", OVERFLOW_HINT)
        self.critic_opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.critic.parameters(), self.hp.max_grad_norm)
        self.critic_opt.step()
        return loss.item()

    def _noise_state(self) -> dict:
        return {"noise": self._noise.copy(), "noise_i": int(self._noise_i)}

    def state_dict(self) -> dict:
        """Networks, optimizers, rollout batch, RNG states, noise block and counters."""
        return {
            "actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
            "actor_opt": self.actor_opt.state_dict(), "critic_opt": self.critic_opt.state_dict(),
            "rollout": self.rollout.state_dict(),
            "rngs": {k: g.bit_generator.state for k, g in self.rngs.items()},
            **self._noise_state(), "updates": self.updates, "steps": self.steps,
            "return_norm": self.return_norm.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly."""
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        self.rollout.load_state_dict(state["rollout"])
        for k, s in state["rngs"].items():
            self.rngs[k].bit_generator.state = s
        self._noise = np.asarray(state["noise"], dtype=np.float32)
        self._noise_i = int(state["noise_i"])
        self.updates, self.steps = int(state["updates"]), int(state["steps"])
        if "return_norm" not in state:
            raise ValueError("checkpoint state lacks 'return_norm' (written by an older lcpo); start the run afresh")
        self.return_norm.load_state_dict(state["return_norm"])
        self.fast_actor.sync()
