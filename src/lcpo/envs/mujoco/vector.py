"""N windy MuJoCo environments as one vector env: Gymnasium's ``SyncVectorEnv`` with a leaner step.

:class:`WindyMujocoVectorEnv` *is* a :class:`gymnasium.vector.SyncVectorEnv` over the same N sub-environments
``make_env(env_id, **env_kwargs[k])`` builds (``OrderEnforcing(DiscretizeActions(<windy task>))``), so every
consumer of a ``SyncVectorEnv`` (:class:`lcpo.envs.vector.VectorStream`'s per-sub-env checkpoints with their
wrappers, a population's seed environments, ``continue_where``) works unchanged, and a checkpoint written
through one resumes through the other. Only in ``DISABLED`` autoreset mode (the mode
:func:`lcpo.envs.vector.make_vector_env` gives a population) do ``step`` and a masked ``reset`` take a shorter
path: the bin indices of all sub-environments are checked and looked up in one NumPy operation, each windy
task's own ``step`` (``reset``) is called directly (not through the two wrappers and Gymnasium's per-action
space iteration), and the info dict is batched key by key instead of by ``SyncVectorEnv._add_info``'s generic
merge. The task's ``step`` is the single environment's, so each sub-environment is bit-identical to
``make_env(env_id, **env_kwargs[k])`` stepped alone (``tests/envs/mujoco/test_mujoco_vector.py``). The other
autoreset modes and full resets are ``SyncVectorEnv``'s own.

It is the ids' native vector env for :func:`lcpo.envs.vector.make_vector_env` (``mode="auto"`` or ``"native"``),
not their Gymnasium ``vector_entry_point``: ``gymnasium.make_vec(id, ...)`` keeps building Gymnasium's own vector
envs (with its ``wrappers`` and ``vector_kwargs``).

Speed: ``python benchmarks/vector_env.py --env lcpo/WindyInvertedPendulum-v0`` (figures in ``docs/benchmarks.md``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers.common import OrderEnforcing

from lcpo.envs.arguments import integer
from lcpo.envs.discretize import DiscretizeActions
from lcpo.envs.mujoco.base import WindyMujocoEnv

__all__ = ["WindyMujocoVectorEnv", "WindyInvertedPendulumVectorEnv", "WindyInvertedDoublePendulumVectorEnv",
           "WindyHopperVectorEnv", "WindyReacherVectorEnv"]


class WindyMujocoVectorEnv(SyncVectorEnv):
    """A ``SyncVectorEnv`` of N windy MuJoCo sub-environments of one id, stepped without the per-step wrapper
    dispatch (see the module docstring). Subclasses fix :attr:`env_id`; one per windy MuJoCo id below.

    Args:
        num_envs: N; may be omitted when ``env_kwargs`` is given (``gymnasium.make_vec`` passes it).
        env_kwargs: one dict per sub-env of the id's factory arguments (``trace``, ``divisor``, ``bins``,
            ``time_limit``, ``continuing``, ...), e.g. each seed's trace; None = ``num_envs`` copies of ``kwargs``.
        autoreset_mode: ``NEXT_STEP`` (default, as Gymnasium's vector envs), ``SAME_STEP`` or ``DISABLED``; only
            ``DISABLED`` takes the lean step, the others are ``SyncVectorEnv``'s.
        device: accepted for :func:`lcpo.envs.vector.make_vector_env`'s interface and ignored: MuJoCo steps on
            the host.
        **kwargs: arguments shared by every sub-env (merged under each ``env_kwargs`` entry).

    Spaces: as ``SyncVectorEnv``'s: ``single_action_space`` ``MultiDiscrete([bins] * d)`` (the single env's),
    ``single_observation_space`` ``Box(obs_dim,)`` float32; batched ``(N, d)`` int bin indices in, ``(N,
    obs_dim)`` float32 observations, ``(N,)`` float64 rewards, ``(N,)`` bool terminated and truncated out, and
    infos with ``"context"`` ``(N, 2)`` float64 (the wind applied, as in the single env's ``info``),
    ``"control"`` ``(N, nu)`` float64 and the task's own entries, each with Gymnasium's ``"_key"`` mask.

    Raises:
        ValueError: neither or inconsistent ``num_envs``/``env_kwargs``, an entry that is not a dict, an unknown
            autoreset mode, an argument a sub-env refuses (named with its ``env_kwargs[k]``); at ``step`` (lean
            path): actions of the wrong shape or dtype, a non-integral, non-finite or out-of-range bin index
            (names the sub-env and the value). Actions are ``(N, d)`` (or ``(N,)`` when d = 1) integers, bools,
            or floats with integral values.
        RuntimeError: sub-envs with different action spaces (e.g. ``bins``; Gymnasium's own check, naming both);
            a lean ``step`` of a sub-env that ended and was not reset (``DISABLED`` mode, as Gymnasium asserts), or
            before the first ``reset``.
        lcpo.contexts.TraceError: a malformed trace (as the single env).
    """

    #: the registered id of the sub-environments (set by each subclass)
    env_id: str = ""

    def __init__(self, num_envs: int | None = None, env_kwargs: Sequence[dict] | None = None, *,
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP, device=None, **kwargs):
        try:
            autoreset_mode = AutoresetMode(autoreset_mode)
        except ValueError:
            raise ValueError(f"unknown autoreset_mode {autoreset_mode!r}; valid: "
                             f"{[m.value for m in AutoresetMode]}") from None
        name = type(self).__name__
        if num_envs is not None:
            num_envs = integer(num_envs, "num_envs", minimum=1)
        if env_kwargs is None:
            if num_envs is None:
                raise ValueError(f"{name} needs num_envs >= 1 or env_kwargs")
            env_kwargs = [{} for _ in range(num_envs)]
        if isinstance(env_kwargs, dict) or not isinstance(env_kwargs, Sequence) or len(env_kwargs) == 0:
            raise ValueError(f"{name}: env_kwargs must be a non-empty list of dicts, one per sub-env, got "
                             f"{type(env_kwargs).__name__}")
        if num_envs is not None and int(num_envs) != len(env_kwargs):
            raise ValueError(f"{name}: num_envs={num_envs} but env_kwargs has {len(env_kwargs)} entries")
        for k, kw in enumerate(env_kwargs):
            if not isinstance(kw, dict):
                raise ValueError(f"{name}: env_kwargs[{k}] must be a dict, got {type(kw).__name__}")
        fns = [functools.partial(_make_sub_env, self.env_id, k, {**kwargs, **kw}) for k, kw in enumerate(env_kwargs)]
        super().__init__(fns, autoreset_mode=autoreset_mode)
        # the lean step needs every sub-env to be exactly OrderEnforcing(DiscretizeActions(windy task)); a chain
        # with more wrappers (e.g. env_kwargs {"disable_env_checker": False} adds a PassiveEnvChecker) keeps
        # Gymnasium's step
        self._tasks: list[WindyMujocoEnv] | None = []
        for env in self.envs:
            inner = env.env if type(env) is OrderEnforcing else None
            task = inner.env if type(inner) is DiscretizeActions else None
            if not isinstance(task, WindyMujocoEnv):
                self._tasks = None
                break
            self._tasks.append(task)
        first = self.envs[0].env if self._tasks is not None else None
        self._table = first.table if first is not None else None  # (d, bins) in the action Box's dtype
        self._rows = np.arange(self._table.shape[0]) if first is not None else None
        self._bins = int(first.bins) if first is not None else 0
        self._started = False
        self._all = np.arange(self.num_envs)
        # every lean step returns new arrays and a new info dict (Gymnasium's step copies too: copy=True)
        self.metadata["fresh_arrays"] = True

    def reset(self, *, seed=None, options=None):
        """``SyncVectorEnv.reset``: ``seed`` None, an int (sub-env ``k`` gets ``seed + k``) or N values;
        ``options["reset_mask"]`` resets the masked sub-envs only (taken out of ``options``, as Gymnasium does);
        the other options, e.g. ``{"trace_index": k}``, go to each reset sub-env. A masked reset in ``DISABLED``
        mode after a first full reset calls the windy tasks' ``reset`` directly (the lean path; the same calls
        in the same order as Gymnasium's).

        Returns:
            ``(obs (N, obs_dim) float32, infos)`` with ``infos["context"]`` ``(N, 2)`` float64 (``"_context"``
            marks the sub-envs reset).

        Raises:
            ValueError: seeds of the wrong length; a reset mask of the wrong shape or without a True.
            TypeError: a reset mask that is not a bool ndarray.
        """
        lean = (self._tasks is not None and self._started and options is not None and "reset_mask" in options
                and self.autoreset_mode is AutoresetMode.DISABLED)
        if not lean:
            out = super().reset(seed=seed, options=options)
            self._started = True  # (Gymnasium's masked reset succeeds only once every sub-env was reset)
            return out
        n = self.num_envs
        if seed is None:
            seed = [None] * n
        elif isinstance(seed, (int, np.integer)):
            seed = [int(seed) + i for i in range(n)]
        if len(seed) != n:
            raise ValueError(f"seed has {len(seed)} entries for num_envs={n}")
        mask = options.pop("reset_mask")
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_:
            raise TypeError(f"options['reset_mask'] must be a bool numpy array, got {type(mask).__name__}"
                            + (f" of dtype {mask.dtype}" if isinstance(mask, np.ndarray) else ""))
        if mask.shape != (n,):
            raise ValueError(f"options['reset_mask'] must have shape ({n},), got {mask.shape}")
        rows = np.flatnonzero(mask)
        if rows.size == 0:
            raise ValueError("options['reset_mask'] must contain at least one True value")
        self._terminations[mask] = False
        self._truncations[mask] = False
        self._autoreset_envs[mask] = False
        infos = []
        for i in rows:
            self._env_obs[i], info = self._tasks[i].reset(seed=seed[i], options=options)
            infos.append(info)
        obs = np.stack(self._env_obs).astype(self.single_observation_space.dtype, copy=False)
        return obs, self._batch_infos(infos, rows)

    def _bin_indices(self, actions) -> np.ndarray:
        """``(N, d)`` int64 bin indices from ``actions`` (``(N, d)``, or ``(N,)`` when d = 1), checked."""
        n, d = self.num_envs, self._rows.shape[0]
        acts = np.asarray(actions)
        if acts.shape != (n, d) and not (d == 1 and acts.shape == (n,)):
            raise ValueError(f"actions must have shape ({n}, {d}) (bin indices), got {acts.shape}")
        kind = acts.dtype.kind
        if kind not in "iubf":
            raise ValueError(f"actions must be integer bin indices, got dtype {acts.dtype}")
        acts = acts.reshape(n, d)
        if kind == "f":
            bad = ~np.isfinite(acts) | (acts != np.floor(acts))
            if bad.any():
                k = int(np.flatnonzero(bad.any(axis=1))[0])
                raise ValueError(f"sub-env {k}: bin indices must be integers, got {acts[k].tolist()}")
        bad = (acts < 0) | (acts >= self._bins)  # on the values as given (before a cast could wrap them)
        if bad.any():
            k = int(np.flatnonzero(bad.any(axis=1))[0])
            raise ValueError(f"sub-env {k}: bin index out of range [0, {self._bins}): {acts[k].tolist()}")
        return acts if kind in "iu" else acts.astype(np.int64)

    def step(self, actions):
        """Step every sub-env with its bin indices (see the class docstring for shapes and the lean path).

        Returns:
            ``(obs (N, obs_dim) float32, rewards (N,) float64, terminated (N,) bool, truncated (N,) bool,
            infos)``, every array new.
        """
        if self._tasks is None or self.autoreset_mode is not AutoresetMode.DISABLED:
            return super().step(actions)
        if not self._started:
            raise RuntimeError(f"{type(self).__name__}.step before reset()")
        if self._autoreset_envs.any():
            raise RuntimeError(f"sub-envs {np.flatnonzero(self._autoreset_envs).tolist()} ended their episode; "
                               "reset them (options={'reset_mask': ...}) before the next step (DISABLED mode)")
        values = self._table[self._rows, self._bin_indices(actions)]  # (N, d): DiscretizeActions.action per row
        n = self.num_envs
        obs = np.empty((n,) + self.single_observation_space.shape, dtype=self.single_observation_space.dtype)
        rew = np.empty(n, dtype=np.float64)
        term = np.empty(n, dtype=np.bool_)
        trunc = np.empty(n, dtype=np.bool_)
        infos = []
        for i, task in enumerate(self._tasks):
            o, rew[i], term[i], trunc[i], info = task.step(values[i])
            obs[i] = o
            self._env_obs[i] = o
            infos.append(info)
        self._rewards[:] = rew
        self._terminations[:] = term
        self._truncations[:] = trunc
        self._autoreset_envs = term | trunc
        return obs, rew, term, trunc, self._batch_infos(infos, self._all)

    def _batch_infos(self, infos: list[dict], rows: np.ndarray) -> dict:
        """The info dicts of sub-envs ``rows`` as Gymnasium's batched dict (``key`` ``(N, ...)`` array, zero
        where a sub-env has no value, plus the ``_key`` mask), as ``SyncVectorEnv._add_info`` builds it: a key
        every one of them has with a NumPy array or a number is filled at once (dtype: the first value's, as
        ``_add_info`` picks it); anything else goes through ``_add_info``."""
        out: dict = {}
        first = infos[0]
        keys = first.keys()
        n = self.num_envs
        if all(info.keys() == keys for info in infos):
            mask = np.zeros(n, dtype=np.bool_)
            mask[rows] = True
            whole = rows.size == n
            rest = []
            for key in keys:
                value = first[key]
                if isinstance(value, np.ndarray):
                    dtype = value.dtype
                elif type(value) in (int, float, bool) or isinstance(value, np.number):
                    dtype = type(value)
                else:
                    rest.append(key)
                    continue
                if key == "final_obs":
                    rest.append(key)
                    continue
                values = np.array([info[key] for info in infos], dtype=dtype)
                if not whole:
                    full = np.zeros((n,) + values.shape[1:], dtype=dtype)
                    full[rows] = values
                    values = full
                out[key] = values
                out["_" + key] = mask.copy()
            if not rest:
                return out
            infos = [{key: info[key] for key in rest} for info in infos]
        for i, info in zip(rows, infos):
            out = self._add_info(out, info, int(i))
        return out


def _make_sub_env(env_id: str, k: int, kwargs: dict):
    """Sub-env ``k``: ``make_env(env_id, **kwargs)``, its argument errors prefixed with ``env_kwargs[k]``."""
    from lcpo.envs.registration import make_env

    try:
        return make_env(env_id, **kwargs)
    except (ValueError, TypeError) as exc:
        try:
            error = type(exc)(f"env_kwargs[{k}]: {exc}")
        except Exception:  # an exception class with another constructor: keep it as raised
            raise exc from None
        raise error from None


class WindyInvertedPendulumVectorEnv(WindyMujocoVectorEnv):
    """N ``lcpo/WindyInvertedPendulum-v0`` (see :class:`WindyMujocoVectorEnv`)."""

    env_id = "lcpo/WindyInvertedPendulum-v0"


class WindyInvertedDoublePendulumVectorEnv(WindyMujocoVectorEnv):
    """N ``lcpo/WindyInvertedDoublePendulum-v0`` (see :class:`WindyMujocoVectorEnv`)."""

    env_id = "lcpo/WindyInvertedDoublePendulum-v0"


class WindyHopperVectorEnv(WindyMujocoVectorEnv):
    """N ``lcpo/WindyHopper-v0`` (see :class:`WindyMujocoVectorEnv`)."""

    env_id = "lcpo/WindyHopper-v0"


class WindyReacherVectorEnv(WindyMujocoVectorEnv):
    """N ``lcpo/WindyReacher-v0`` (see :class:`WindyMujocoVectorEnv`)."""

    env_id = "lcpo/WindyReacher-v0"

