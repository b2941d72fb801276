"""Populations of independent learners: N seeds of one agent stepped together in one process (issue 26).

The population contract (every population, batch-native or generic, offers it):

- ``n_seeds: int`` and ``seeds: list[int]``;
- ``act_batch(obs (N, obs_dim) float32) -> (N, *action_shape)`` (``(N, D)`` int64 bins, ``(N,)`` for a
  ``Discrete`` action space): one action per seed, no autograd;
- ``observe_batch(obs, actions, rewards (N,), next_obs (N, obs_dim), terminated (N,) bool, truncated (N,) bool,
  infos: list of N dicts) -> list[dict | None]``: seed ``k``'s transition, exactly what a single agent's
  ``observe`` receives (``next_obs`` the true next observation, never a reset observation; ``info["gamma"]`` and
  ``info["forced"]`` honoured per seed); entry ``k`` is seed ``k``'s update diagnostics, or None where it did not
  update;
- ``seed_state_dict(k)`` / ``load_seed_state_dict(k, state)``: seed ``k``'s state in exactly the single agent's
  :meth:`~lcpo.agents.base.Agent.state_dict` format (a solo run's checkpoint loads into slot ``k`` and back);
- ``state_dict()`` / ``load_state_dict(state)``: the whole population (``{"seeds": [...], "members": [...]}``,
  one single-agent state per seed).

Two kinds of population implement it:

- **batch-native** agents (:data:`BATCH_NATIVE`): one implementation with a leading seed axis on every tensor;
  ``Cls.population(env, seeds, **overrides)`` builds one, and ``Cls(env, seed)`` is the population of one;
- every other agent joins through :class:`AgentPopulation`, which holds N ordinary single agents and loops.

:func:`make_population` picks the right one by CLI name.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lcpo.online.loop import Transition

__all__ = ["BATCH_NATIVE", "AgentPopulation", "make_population", "check_seeds"]

#: CLI names of the agents whose population is batch-native (``Cls.population``); the others use
#: :class:`AgentPopulation`.
BATCH_NATIVE: frozenset[str] = frozenset({"a2c", "tabular-a2c", "lcpo", "trpo", "ppo", "lcpo-p"})


def check_seeds(seeds: Sequence[int]) -> list[int]:
    """Validate a population's seeds: a non-empty sequence of distinct non-negative integers.

    Returns:
        The seeds as a list of Python ints.

    Raises:
        ValueError: for an empty sequence, a non-integer or negative seed, or a repeated seed (naming it).
    """
    out: list[int] = []
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or int(s) < 0:
            raise ValueError(f"population seeds must be non-negative integers, got {s!r}")
        if int(s) in out:
            raise ValueError(f"population seed {int(s)} is repeated in {list(seeds)!r}")
        out.append(int(s))
    if not out:
        raise ValueError("a population needs at least one seed, got none")
    return out


class AgentPopulation:
    """The generic population: N ordinary single agents of one class, stepped in a Python loop.

    Seed ``k``'s learner is ``agent_cls(env, seed=seeds[k], **overrides)``, so its run is the solo run of that
    seed exactly (bit for bit): nothing is shared between members but the template environment, which an agent
    reads only for its spaces and context declaration (a population is stepped by its runtime, never through a
    member's :meth:`~lcpo.agents.base.Agent.learn`).

    Args:
        agent_cls: an agent class with the agent contract (``act``, ``observe``, ``state_dict``, ...).
        env: one single (non-vector) template environment: spaces and ``env.unwrapped.context_spec``.
        seeds: the members' run seeds (distinct non-negative integers).
        **overrides: hyperparameter overrides, the same for every member.

    Raises:
        ValueError: for bad seeds (:func:`check_seeds`) or bad hyperparameters (from the agent class).

    Example:
        >>> import gymnasium as gym, numpy as np, lcpo.envs
        >>> from lcpo.agents.ddqn import DDQN
        >>> env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
        >>> pop = AgentPopulation(DDQN, env, [0, 1])
        >>> pop.act_batch(np.zeros((2, env.observation_space.shape[0]), np.float32)).shape
        (2, 1)
    """

    def __init__(self, agent_cls: type, env, seeds: Sequence[int], **overrides):
        self.seeds = check_seeds(seeds)
        self.n_seeds = len(self.seeds)
        self.agent_cls = agent_cls
        self.name = getattr(agent_cls, "name", agent_cls.__name__)
        self.members = [agent_cls(env, seed=s, **overrides) for s in self.seeds]
        self.hp = self.members[0].hp

    def _check_rows(self, name: str, x, trailing: tuple | None = None) -> np.ndarray:
        arr = np.asarray(x)
        if arr.ndim == 0 or arr.shape[0] != self.n_seeds or (trailing is not None and arr.shape[1:] != trailing):
            want = (self.n_seeds, *(trailing or ()))
            raise ValueError(f"{name} must have a leading seed axis of {self.n_seeds}, shape {want}, got {arr.shape}")
        return arr

    def act_batch(self, obs: np.ndarray) -> np.ndarray:
        """One action per seed: ``obs (N, obs_dim)`` float32 -> ``(N, *action_shape)`` (each member's ``act``).

        Raises:
            ValueError: if ``obs`` has no leading axis of ``N``.
        """
        obs = self._check_rows("obs", obs)
        return np.stack([np.asarray(m.act(obs[k])) for k, m in enumerate(self.members)])

    def observe_batch(self, obs, actions, rewards, next_obs, terminated, truncated, infos) -> list[dict | None]:
        """Give seed ``k`` its transition (``observe``); returns each member's diagnostics or None.

        Args:
            obs: ``(N, obs_dim)`` observations the actions were chosen from.
            actions: ``(N, *action_shape)`` the actions taken.
            rewards: ``(N,)`` float rewards.
            next_obs: ``(N, obs_dim)`` the true next observations (never reset observations).
            terminated: ``(N,)`` bool.
            truncated: ``(N,)`` bool.
            infos: N info dicts (or None), one per seed.

        Raises:
            ValueError: for arrays without a leading axis of ``N``, or ``infos`` of another length; a member's
                own error (e.g. a non-finite reward) propagates.
        """
        obs, actions = self._check_rows("obs", obs), self._check_rows("actions", actions)
        rewards, next_obs = self._check_rows("rewards", rewards, ()), self._check_rows("next_obs", next_obs)
        terminated = self._check_rows("terminated", terminated, ())
        truncated = self._check_rows("truncated", truncated, ())
        if len(infos) != self.n_seeds:
            raise ValueError(f"infos must hold {self.n_seeds} dicts (one per seed), got {len(infos)}")
        out = []
        for k, m in enumerate(self.members):
            a = actions[k]
            a = a.item() if a.ndim == 0 else a
            r = float(rewards[k])
            if not getattr(m, "validates_transitions", False):
                if not np.isfinite(r):
                    raise ValueError(f"non-finite reward {r} for seed {self.seeds[k]}")
                if not np.isfinite(next_obs[k]).all():
                    raise ValueError(f"non-finite next_obs {next_obs[k].tolist()} for seed {self.seeds[k]}")
            out.append(m.observe(Transition(obs[k], a, r, next_obs[k], bool(terminated[k]), bool(truncated[k]),
                                            infos[k])))
        return out

    def _check_k(self, k: int) -> int:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= int(k) < self.n_seeds:
            raise IndexError(f"seed slot {k!r} out of range for a population of {self.n_seeds}")
        return int(k)

    def seed_state_dict(self, k: int) -> dict:
        """Seed slot ``k``'s state, in the single agent's ``state_dict`` format.

        Raises:
            IndexError: for a slot outside ``[0, N)``.
        """
        return self.members[self._check_k(k)].state_dict()

    def load_seed_state_dict(self, k: int, state: dict) -> None:
        """Restore seed slot ``k`` from a single agent's ``state_dict`` (e.g. a solo run's checkpoint).

        Raises:
            IndexError: for a slot outside ``[0, N)``; the member's own errors for a malformed state.
        """
        self.members[self._check_k(k)].load_state_dict(state)

    def state_dict(self) -> dict:
        """The whole population: ``{"seeds": [...], "members": [state of seed slot k, ...]}``."""
        return {"seeds": list(self.seeds), "members": [self.seed_state_dict(k) for k in range(self.n_seeds)]}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output.

        Raises:
            ValueError: if the state's seeds differ from this population's (naming both).
        """
        _check_population_state(state, self.seeds)
        for k, s in enumerate(state["members"]):
            self.load_seed_state_dict(k, s)


def _check_population_state(state: dict, seeds: list[int]) -> None:
    if not isinstance(state, dict) or "seeds" not in state or "members" not in state:
        raise ValueError("population state must hold 'seeds' and 'members'")
    if [int(s) for s in state["seeds"]] != seeds:
        raise ValueError(f"population state holds seeds {list(state['seeds'])}, this population {seeds}")
    if len(state["members"]) != len(seeds):
        raise ValueError(f"population state holds {len(state['members'])} members for {len(seeds)} seeds")


def make_population(name: str, env, seeds: Sequence[int], **overrides):
    """A population of the agent ``name`` (a key of :data:`lcpo.agents.AGENTS`): batch-native where
    :data:`BATCH_NATIVE` lists it, else :class:`AgentPopulation`.

    Args:
        name: CLI agent name, e.g. ``"a2c"``.
        env: one single template environment.
        seeds: run seeds of the members.
        **overrides: hyperparameter overrides.

    Raises:
        KeyError: for an unknown agent name; ValueError for bad seeds or hyperparameters.
    """
    from lcpo.agents import AGENTS

    cls = AGENTS[name]
    if name in BATCH_NATIVE:
        return cls.population(env, seeds, **overrides)
    return AgentPopulation(cls, env, seeds, **overrides)
