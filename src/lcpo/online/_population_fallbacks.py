"""Temporary stand-ins for lcpo.envs.vector and lcpo.agents.population (deleted once those land)."""

from __future__ import annotations

import numpy as np

from lcpo.online.loop import Transition

BATCH_NATIVE: frozenset[str] = frozenset()


class _EnvList:
    def __init__(self, envs):
        self.envs = envs
        self.num_envs = len(envs)


def make_vector_env(env_id, env_kwargs, *, mode="auto"):
    from lcpo.envs.registration import make_env

    return _EnvList([make_env(env_id, **kw) for kw in env_kwargs])


class VectorStream:
    def __init__(self, venv):
        self.venv = venv
        self.envs = venv.envs
        self._obs = None

    def reset(self, seeds):
        self._obs = np.stack([e.reset(seed=int(s))[0] for e, s in zip(self.envs, seeds)])
        return self._obs.copy()

    def step(self, actions):
        out = [e.step(a) for e, a in zip(self.envs, actions)]
        nxt = np.stack([o[0] for o in out])
        self._obs = nxt
        return (nxt.copy(), np.array([float(o[1]) for o in out]), np.array([bool(o[2]) for o in out]),
                np.array([bool(o[3]) for o in out]), [o[4] for o in out])

    def reset_where(self, mask):
        obs = self._obs.copy()
        for k in np.flatnonzero(mask):
            obs[k] = self.envs[k].reset()[0]
        self._obs = obs
        return obs.copy()

    def get_state(self):
        return [e.unwrapped.get_state() for e in self.envs]

    def set_state(self, states):
        for e, s in zip(self.envs, states):
            e.unwrapped.set_state(s)


class AgentPopulation:
    def __init__(self, agent_cls, env, seeds, **overrides):
        envs = env if isinstance(env, list) else [env] * len(seeds)
        self.seeds = list(seeds)
        self.n_seeds = len(self.seeds)
        self.agents = [agent_cls(e, seed=s, **overrides) for e, s in zip(envs, self.seeds)]

    def act_batch(self, obs):
        return np.stack([np.asarray(a.act(obs[k])) for k, a in enumerate(self.agents)])

    def observe_batch(self, obs, actions, rewards, next_obs, terminated, truncated, infos):
        return [a.observe(Transition(obs[k], actions[k], float(rewards[k]), next_obs[k], bool(terminated[k]),
                                     bool(truncated[k]), infos[k])) for k, a in enumerate(self.agents)]

    def seed_state_dict(self, k):
        return self.agents[k].state_dict()

    def load_seed_state_dict(self, k, d):
        self.agents[k].load_state_dict(d)


def make_population(name, env, seeds, **overrides):
    raise NotImplementedError
