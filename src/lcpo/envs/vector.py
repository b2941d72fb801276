"""Vector environments (Gymnasium's ``VectorEnv`` convention) and an adapter that hides their autoreset mode.

A population of N seeds steps one :class:`gymnasium.vector.VectorEnv` whose sub-environment ``k`` is seed
``k``'s environment (issue 26, item 2). Two pieces:

* :func:`make_vector_env` builds the vector env from one keyword dict per sub-environment (each seed's trace,
  time limit, ...): lcpo's native implementation where there is one (windy Pendulum,
  :class:`~lcpo.envs.windy_pendulum_vector.WindyPendulumVectorEnv`; the windy MuJoCo tasks,
  :class:`~lcpo.envs.mujoco.vector.WindyMujocoVectorEnv`, a ``SyncVectorEnv`` with a lean step), else Gymnasium's
  :class:`~gymnasium.vector.SyncVectorEnv` or :class:`~gymnasium.vector.AsyncVectorEnv` of
  :func:`lcpo.envs.registration.make_env` environments (lcpo ids, Gymnasium ids, a user's ``MODULE:ID``), so
  each sub-environment carries the single environment's wrappers (e.g. ``DiscretizeActions``) and its action
  space equals the single environment's. The autoreset mode is chosen explicitly: ``AutoresetMode.DISABLED``
  by default, the caller resets with ``reset(options={"reset_mask": mask})``.
* :class:`VectorStream` wraps ANY vector env (ours, or a user's in ``NEXT_STEP``, ``SAME_STEP`` or
  ``DISABLED`` mode) and gives the caller one contract: ``step`` returns the true next observation reached by
  the action (on the last step of an episode too, never the reset observation), terminated and truncated kept
  apart, and never a transition across a reset; the caller decides when to reset, with
  :meth:`VectorStream.reset_where`. Gymnasium's three modes (https://farama.org/Vector-Autoreset-Mode):

  ===========  ====================================================================================
  mode         what the vector env does after sub-env ``i`` ends at step ``t`` / what the adapter does
  ===========  ====================================================================================
  DISABLED     nothing; the caller resets it / ``reset(options={"reset_mask": mask})``
  SAME_STEP    resets it within step ``t``: ``obs[i]`` is the reset obs, the final obs is in
               ``info["final_obs"][i]`` / returns the final obs and final info, keeps the reset obs for
               :meth:`~VectorStream.reset_where`
  NEXT_STEP    step ``t + 1`` ignores ``actions[i]`` and resets it (reward 0, no flags) / resets with
               ``reset_mask`` where the vector env takes it (Gymnasium's own do, in every mode), else issues
               that no-op step itself when every sub-env awaits it, so the caller never sees it
  ===========  ====================================================================================
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv

from lcpo.envs.registration import check_env_name, make_env

__all__ = ["MODES", "NATIVE_VECTOR_ENVS", "StepInfos", "VectorStream", "make_vector_env"]

#: vectorisation modes of :func:`make_vector_env`
MODES = ("auto", "sync", "async", "native")

#: env id -> "module:class" of its native vector implementation, constructed as ``cls(env_kwargs=[...])``
NATIVE_VECTOR_ENVS: dict[str, str] = {
    "lcpo/WindyPendulum-v0": "lcpo.envs.windy_pendulum_vector:WindyPendulumVectorEnv",
    # the windy MuJoCo tasks: SyncVectorEnv subclasses with a lean DISABLED-mode step (lcpo.envs.mujoco.vector)
    "lcpo/WindyInvertedPendulum-v0": "lcpo.envs.mujoco.vector:WindyInvertedPendulumVectorEnv",
    "lcpo/WindyInvertedDoublePendulum-v0": "lcpo.envs.mujoco.vector:WindyInvertedDoublePendulumVectorEnv",
    "lcpo/WindyHopper-v0": "lcpo.envs.mujoco.vector:WindyHopperVectorEnv",
    "lcpo/WindyReacher-v0": "lcpo.envs.mujoco.vector:WindyReacherVectorEnv",
}


def _native_class(env_id: str):
    import importlib

    module, _, name = NATIVE_VECTOR_ENVS[env_id].partition(":")
    return getattr(importlib.import_module(module), name)


class _StateAccess(gym.Wrapper):
    """Outermost wrapper of an :class:`AsyncVectorEnv` sub-env made by :func:`make_vector_env`: the state of the
    sub-env and of its wrappers (a ``TimeLimit``'s step counter, ...), read and written inside the worker through
    Gymnasium's own ``AsyncVectorEnv.call`` / ``set_attr`` (``call`` sends the same arguments to every worker, so
    a per-sub-env state goes in with ``set_attr`` first). The methods return an error message instead of
    raising: an exception in a worker ends that worker."""

    _lcpo_pending_state = None

    def lcpo_checkpoint_refusal(self, name: str) -> str | None:
        """:func:`lcpo.envs.preflight.checkpoint_refusal` for the wrapped sub-env (None: it can be saved)."""
        from lcpo.envs.preflight import checkpoint_refusal
        from lcpo.envs.wrapper_state import unsaved_wrappers

        base = self.env.unwrapped
        ok = callable(getattr(base, "get_state", None)) and callable(getattr(base, "set_state", None))
        return checkpoint_refusal(name, ok, unsaved_wrappers(self.env))

    def lcpo_get_state(self) -> dict:
        """``{"env": unwrapped.get_state(), "wrappers": wrappers_state(...)}``, or ``{"error": message}``."""
        from lcpo.envs.wrapper_state import wrappers_state

        get = getattr(self.env.unwrapped, "get_state", None)
        if not callable(get):
            return {"error": f"sub-environment {_env_name(self.env)} has no get_state(); it cannot be checkpointed"}
        try:
            return {"env": get(), "wrappers": wrappers_state(self.env)}
        except TypeError as exc:  # a wrapper whose state cannot be saved
            return {"error": str(exc)}

    def lcpo_apply_pending_state(self) -> str | None:
        """Restore the ``{"env": ..., "wrappers": ...}`` put in ``_lcpo_pending_state`` by ``set_attr``;
        returns None, or the error message (no ``set_state()``, a different chain of wrappers or time limit)."""
        from lcpo.envs.wrapper_state import load_wrappers_state, wrappers_state

        pending, self._lcpo_pending_state = self._lcpo_pending_state, None
        put = getattr(self.env.unwrapped, "set_state", None)
        if not callable(put):
            return f"sub-environment {_env_name(self.env)} has no set_state()"
        if pending is None:
            return "no state was sent to this worker before lcpo_apply_pending_state"
        if pending.get("wrappers") is not None:  # before the env's own state is touched
            before = wrappers_state(self.env)
            try:
                load_wrappers_state(self.env, pending["wrappers"])
            except ValueError as exc:  # a different chain or time limit: the wrappers are put back as they were
                load_wrappers_state(self.env, before)
                return str(exc)
        put(pending["env"])
        return None


def _make_wrapped(env_id: str, kwargs: dict) -> gym.Env:
    return _StateAccess(make_env(env_id, **kwargs))


def _lcpo_async(base: Any) -> bool:
    """Whether ``base`` is an :class:`AsyncVectorEnv` made by :func:`make_vector_env` (its workers' envs are
    wrapped in :class:`_StateAccess`); a user's AsyncVectorEnv is never sent a call it cannot answer (an
    error in a worker ends the worker)."""
    fns = getattr(base, "env_fns", None)
    return (isinstance(base, AsyncVectorEnv) and bool(fns)
            and all(isinstance(f, functools.partial) and f.func is _make_wrapped for f in fns))


#: the one-line refusal of a user's AsyncVectorEnv (its workers' wrapper state cannot be reached)
_ASYNC_REFUSAL = ("vector env {name!r} is a user's AsyncVectorEnv: the state of its sub-environments' wrappers "
                  "(e.g. a TimeLimit's step counter) cannot be saved through its worker processes, so it cannot "
                  "be checkpointed; use a SyncVectorEnv (mode='sync'), lcpo's make_vector_env(..., mode='async'), "
                  "or --checkpoint-every 0 (sweeps: checkpoint_every = 0)")


def make_vector_env(env_id: str, env_kwargs: Sequence[dict], *, mode: str = "auto",
                    autoreset_mode: AutoresetMode | str = AutoresetMode.DISABLED, device=None) -> VectorEnv:
    """A vector env with one sub-environment per entry of ``env_kwargs``.

    Args:
        env_id: anything :func:`lcpo.envs.registration.make_env` takes: an lcpo id (``"lcpo/WindyPendulum-v0"``),
            a Gymnasium id (``"CartPole-v1"``), a user's ``"MODULE:ID"`` or ``"MODULE:CLASS"``.
        env_kwargs: one keyword dict per sub-environment (N >= 1), e.g. ``[{"trace": t, "time_limit": 200}, ...]``
            (each seed's trace); sub-environment ``k`` is ``make_env(env_id, **env_kwargs[k])``.
        mode: ``"auto"`` (native where lcpo has one, see :data:`NATIVE_VECTOR_ENVS`, else ``"sync"``),
            ``"sync"`` (:class:`~gymnasium.vector.SyncVectorEnv`), ``"async"``
            (:class:`~gymnasium.vector.AsyncVectorEnv`, one process per sub-env) or ``"native"``.
        autoreset_mode: the vector env's autoreset mode (default ``DISABLED``: the caller resets ended
            sub-envs with ``reset(options={"reset_mask": mask})``; :class:`VectorStream` does).
        device: None (default), or the torch device a native vector env with a torch backend steps on (the
            windy Pendulum's, :class:`~lcpo.envs.windy_pendulum_vector.WindyPendulumVectorEnv` ``device=``);
            every other vector env steps on the host whatever it is.

    Returns:
        The vector env; ``metadata["autoreset_mode"]`` says its mode. Its ``single_action_space`` equals the
        single environment's (``MultiDiscrete([15])`` for the windy Pendulum: the discretisation is kept).

    Raises:
        ValueError: an unknown ``mode`` or ``autoreset_mode``, an unknown environment id (see
            :func:`~lcpo.envs.registration.check_env_name`), ``mode="native"`` for an id without a native
            implementation, an empty ``env_kwargs`` or an entry that is not a dict.
    """
    if mode not in MODES:
        raise ValueError(f"unknown vector env mode {mode!r}; valid modes: {list(MODES)}")
    try:
        autoreset_mode = AutoresetMode(autoreset_mode)
    except ValueError:
        raise ValueError(f"unknown autoreset_mode {autoreset_mode!r}; valid: "
                         f"{[m.value for m in AutoresetMode]}") from None
    if isinstance(env_kwargs, dict) or not isinstance(env_kwargs, Sequence) or len(env_kwargs) == 0:
        raise ValueError(f"env_kwargs must be a non-empty list of dicts (one per sub-environment), got "
                         f"{type(env_kwargs).__name__} {env_kwargs!r:.80}")
    for k, kw in enumerate(env_kwargs):
        if not isinstance(kw, dict):
            raise ValueError(f"env_kwargs[{k}] must be a dict of environment arguments, got {type(kw).__name__}")
    check_env_name(env_id)
    if mode == "native" and env_id not in NATIVE_VECTOR_ENVS:
        raise ValueError(f"no native vector env for {env_id!r} (native: {sorted(NATIVE_VECTOR_ENVS)}); use "
                         "mode 'sync' or 'async'")
    if mode == "native" or (mode == "auto" and env_id in NATIVE_VECTOR_ENVS):
        extra = {} if device is None else {"device": device}
        return _native_class(env_id)(env_kwargs=[dict(kw) for kw in env_kwargs], autoreset_mode=autoreset_mode,
                                     **extra)
    if mode == "async":  # picklable factories; the wrapper gives per-worker set_state
        return AsyncVectorEnv([functools.partial(_make_wrapped, env_id, dict(kw)) for kw in env_kwargs],
                              autoreset_mode=autoreset_mode)
    fns = [functools.partial(make_env, env_id, **kw) for kw in env_kwargs]
    return SyncVectorEnv(fns, autoreset_mode=autoreset_mode)


def _mode_of(venv: VectorEnv) -> AutoresetMode:
    """The autoreset mode a vector env declares (Gymnasium's default, NEXT_STEP, when it declares none)."""
    mode = venv.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    try:
        return AutoresetMode(mode)
    except ValueError:
        raise ValueError(f"vector env {venv}: unknown metadata['autoreset_mode'] {mode!r}; valid: "
                         f"{[m.value for m in AutoresetMode]}") from None


def _takes_reset_mask(venv: VectorEnv, mode: AutoresetMode) -> bool:
    """Whether ``venv.reset(options={"reset_mask": m})`` resets only the masked sub-envs: Gymnasium's Sync and
    Async vector envs (every mode), lcpo's native envs, any env in DISABLED mode (the mode's documented way to
    reset), and envs that declare ``metadata["reset_mask"] = True``."""
    base = venv.unwrapped
    return (mode is AutoresetMode.DISABLED or isinstance(base, (SyncVectorEnv, AsyncVectorEnv))
            or bool(venv.metadata.get("reset_mask", False)))


def _flat(values, dtype, n: int) -> np.ndarray:
    """``values`` as an ``(n,)`` array of ``dtype``, without a copy where it already is one."""
    if type(values) is np.ndarray and values.dtype == dtype and values.shape == (n,):
        return values
    return np.asarray(values, dtype=dtype).reshape(n)


def _copy_infos(infos: dict) -> dict:
    """A copy of Gymnasium's batched info dict whose arrays the vector env can no longer mutate."""
    return {k: _copy_infos(v) if isinstance(v, dict) else (v.copy() if isinstance(v, np.ndarray) else v)
            for k, v in infos.items()}


def _info_at(infos: dict, i: int) -> dict:
    """Sub-env ``i``'s info from Gymnasium's batched info dict (``key`` arrays with ``_key`` masks, nested dicts)."""
    out = {}
    for key, value in infos.items():
        if key.startswith("_") and key[1:] in infos:
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        out[key] = _info_at(value, i) if isinstance(value, dict) else value[i]
    return out


class StepInfos(Sequence):
    """The N per-sub-env info dicts of one step, built on access (a read-only sequence: ``infos[k]``,
    ``len(infos)``, iteration), and the batched arrays for vectorised consumers.

    Args:
        infos: Gymnasium's batched info dict (copied by the caller).
        n: number of sub-envs.
        overrides: ``{k: info}`` for sub-envs whose info is not the batched one (SAME_STEP: the final info).

    ``infos[k]`` is a dict (the same object on every access), e.g. ``infos[k]["context"]`` ``(2,)`` float64;
    ``infos.batched("context")`` is the ``(N, ...)`` array of a key every sub-env has (KeyError otherwise).
    """

    def __init__(self, infos: dict, n: int, overrides: dict[int, dict] | None = None):
        self._infos, self._n = infos, n
        self._overrides = dict(overrides) if overrides else {}
        self._cache: dict[int, dict] = dict(self._overrides) if overrides else {}

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        i = int(i)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(f"sub-env index {i} out of range for {self._n} sub-environments")
        if i not in self._cache:
            self._cache[i] = _info_at(self._infos, i)
        return self._cache[i]

    def has(self, key: str) -> bool:
        """True if some sub-env's info has the top-level ``key`` (without building the N dicts)."""
        infos = self._infos
        if key in infos:  # (count_nonzero: a fraction of ndarray.any()'s cost on the few-element masks here)
            mask = infos.get("_" + key)
            if mask is None or np.count_nonzero(mask):
                return True
        return bool(self._overrides) and any(key in info for info in self._overrides.values())

    def batched(self, key: str) -> np.ndarray:
        """``(N, ...)`` array of ``key`` over the sub-envs, in the info values' dtype (``(N, 2)`` float64 for
        ``"context"``; the final info's value where a SAME_STEP sub-env ended, the dtype then NumPy's result type
        of the batched and the final values, so an int array takes a float final value untruncated).

        Raises:
            KeyError: a key that some sub-env's info lacks.
        """
        value, mask = self._infos.get(key), self._infos.get("_" + key)
        if not isinstance(value, np.ndarray) or value.dtype.kind == "O" or (
                mask is not None and np.count_nonzero(mask) != mask.size):
            return np.stack([np.asarray(self[i][key]) for i in range(self._n)])  # KeyError names the key
        if not self._overrides:
            return value
        finals = {i: np.asarray(info[key]) for i, info in self._overrides.items()}  # KeyError names the key
        # a dtype that holds the final infos' values too (an int array with a float final value is not truncated)
        out = value.astype(np.result_type(value.dtype, *(v.dtype for v in finals.values())), copy=True)
        for i, v in finals.items():
            out[i] = v
        return out

    def __repr__(self) -> str:
        return f"StepInfos({[self[i] for i in range(self._n)]!r})"


class VectorStream:
    """One transition contract over any vector env, whatever its autoreset mode (issue 26, item 2).

    ``reset(seeds)`` starts every sub-env; ``step(actions)`` returns, for each sub-env, the transition its action
    made: the true next observation (the final one on the last step of an episode), the reward, terminated and
    truncated apart, and the info (with ``info["context"]`` for lcpo envs). After a sub-env's episode ends the
    caller resets it with :meth:`reset_where` before the next ``step`` (which raises otherwise), so no transition
    ever crosses a reset; :meth:`reset_where` also serves forced resets of running sub-envs (a reset condition),
    and :meth:`continue_where` lets ended sub-envs go on without a reset (the reset condition ``never``).
    Observations are returned as fresh ``(N, d)`` float32 arrays (never aliases of a buffer the env mutates);
    the infos as a :class:`StepInfos` (``infos[k]`` a dict, ``infos.batched("context")`` an ``(N, 2)`` array).

    Args:
        venv: a :class:`gymnasium.vector.VectorEnv` (from :func:`make_vector_env` or the user's own) with a
            ``metadata["autoreset_mode"]`` (missing = ``NEXT_STEP``, Gymnasium's default). An unwrapped one that
            declares ``metadata["fresh_arrays"] = True`` (every ``step`` returns new arrays and a new info dict it
            never touches again, as lcpo's native windy Pendulum) is read without the defensive copies.

    Attributes:
        num_envs: N.
        single_observation_space, single_action_space: the sub-envs' spaces.
        mode: the vector env's :class:`~gymnasium.vector.AutoresetMode`.
        obs: ``(N, d)`` float32, the current observation of every sub-env (a copy is returned by the methods).

    Raises:
        ValueError: an unknown ``metadata["autoreset_mode"]``.

    Example:
        >>> from lcpo.envs.vector import VectorStream, make_vector_env
        >>> stream = VectorStream(make_vector_env("lcpo/WindyPendulum-v0", [{"time_limit": 3}] * 2))
        >>> obs = stream.reset(seeds=[0, 1])
        >>> obs.shape, obs.dtype
        ((2, 9), dtype('float32'))
        >>> for _ in range(3):
        ...     obs, rew, term, trunc, infos = stream.step(np.zeros((2, 1), dtype=np.int64))
        >>> trunc.tolist(), infos[0]["context"].shape
        ([True, True], (2,))
        >>> obs = stream.reset_where(term | trunc)
    """

    def __init__(self, venv: VectorEnv):
        self.venv = venv
        self.num_envs = int(venv.num_envs)
        self.single_observation_space = venv.single_observation_space
        self.single_action_space = venv.single_action_space
        self.mode = _mode_of(venv)
        self._mask_ok = _takes_reset_mask(venv, self.mode)
        # an unwrapped vector env that declares metadata["fresh_arrays"] (lcpo's native ones) returns new arrays
        # from every step: they are taken without the copies that guard against an env reusing its buffers
        # (a wrapper around it could reuse its own, so a wrapped env is copied whatever it declares)
        self._fresh = venv is venv.unwrapped and bool(venv.metadata.get("fresh_arrays", False))
        n = self.num_envs
        self.obs: np.ndarray | None = None
        self._ended = np.zeros(n, dtype=bool)         # episode ended, awaiting reset_where
        self._autoreset = np.zeros(n, dtype=bool)     # SAME_STEP: the venv already reset it (obs kept below)
        self._autoreset_obs: np.ndarray | None = None
        self._pending_step = np.zeros(n, dtype=bool)  # NEXT_STEP: the venv resets it at its next step
        self._last_actions = None

    # ------------------------------------------------------------------ helpers
    def _as_obs(self, obs) -> np.ndarray:
        out = np.array(obs, dtype=np.float32, copy=True)
        return out.reshape(self.num_envs, -1)

    def _seed_list(self, seeds) -> list:
        if seeds is None:
            return [None] * self.num_envs
        seeds = list(seeds)
        if len(seeds) != self.num_envs:
            raise ValueError(f"seeds has {len(seeds)} entries for {self.num_envs} sub-environments")
        return [None if s is None else int(s) for s in seeds]

    def _mask(self, mask) -> np.ndarray:
        m = np.asarray(mask)
        if m.shape != (self.num_envs,) or m.dtype != np.bool_:
            raise ValueError(f"mask must be a ({self.num_envs},) bool array, got shape {m.shape} dtype {m.dtype}")
        return m.copy()

    # ------------------------------------------------------------------ contract
    def reset(self, seeds: Sequence[int | None] | None = None, options: dict | None = None) -> np.ndarray:
        """Reset every sub-env: sub-env ``k`` with ``seeds[k]`` (None = unseeded).

        Args:
            seeds: N ints (or None entries); None = all unseeded.
            options: passed to every sub-env's reset (e.g. ``{"trace_index": k}``).

        Returns:
            ``(N, d)`` float32 observations.

        Raises:
            ValueError: ``seeds`` of the wrong length.
        """
        obs, _ = self.venv.reset(seed=self._seed_list(seeds), options=None if options is None else dict(options))
        self.obs = self._as_obs(obs)
        self._ended[:] = False
        self._autoreset[:] = False
        self._pending_step[:] = False
        self._autoreset_obs = None
        return self.obs.copy()

    def step(self, actions) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, "StepInfos"]:
        """Step every sub-env with its action.

        Args:
            actions: ``(N, ...)``, row ``k`` an element of ``single_action_space`` (``(N, 1)`` int bin indices for
                the windy Pendulum).

        Returns:
            ``(next_obs (N, d) float32, rewards (N,) float64, terminated (N,) bool, truncated (N,) bool, infos)``,
            ``infos`` a :class:`StepInfos` of N dicts; ``next_obs[k]`` is the observation reached by
            ``actions[k]``, the final one when the episode ended (SAME_STEP: ``info["final_obs"]``; ``infos[k]``
            then is the final info).

        Raises:
            RuntimeError: :meth:`reset` was never called, a sub-env whose episode ended was not reset with
                :meth:`reset_where` (names the sub-envs), or a SAME_STEP vector env ended a sub-env without
                ``info["final_obs"]`` or ``info["final_info"]``.
        """
        if self.obs is None:
            raise RuntimeError("VectorStream.step before reset(seeds)")
        if np.count_nonzero(self._ended):  # (a fraction of ndarray.any()'s cost at small N)
            raise RuntimeError(f"sub-environments {np.flatnonzero(self._ended).tolist()} ended their episode; call "
                               "reset_where(mask) before the next step (no transition crosses a reset)")
        obs, rew, term, trunc, infos = self.venv.step(actions)
        self._last_actions = actions
        n = self.num_envs
        if self._fresh:  # new arrays of this step (metadata["fresh_arrays"]): converted only where needed
            term, trunc = _flat(term, bool, n), _flat(trunc, bool, n)
            rew = _flat(rew, np.float64, n)
            ok = type(obs) is np.ndarray and obs.dtype == np.float32 and obs.ndim == 2 and obs.shape[0] == n
            next_obs = obs if ok else np.asarray(obs, dtype=np.float32).reshape(n, -1)
        else:
            term = np.array(term, dtype=bool, copy=True).reshape(n)
            trunc = np.array(trunc, dtype=bool, copy=True).reshape(n)
            rew = np.array(rew, dtype=np.float64, copy=True).reshape(n)
            next_obs = self._as_obs(obs)
            infos = _copy_infos(infos)
        ended = term | trunc
        overrides: dict[int, dict] = {}
        if self.mode is AutoresetMode.SAME_STEP and np.count_nonzero(ended):
            self._autoreset_obs = next_obs.copy() if self._autoreset_obs is None else self._autoreset_obs
            final = infos.get("final_obs")
            final_info = infos.get("final_info")
            for i in np.flatnonzero(ended):
                if final is None or final[i] is None:
                    raise RuntimeError(f"SAME_STEP vector env {self.venv}: sub-env {i} ended without "
                                       "info['final_obs']")
                if not isinstance(final_info, dict):
                    raise RuntimeError(f"SAME_STEP vector env {self.venv}: sub-env {i} ended without "
                                       "info['final_info'] (its info would be the reset's)")
                self._autoreset_obs[i] = next_obs[i]
                next_obs[i] = np.asarray(final[i], dtype=np.float32).reshape(-1)
                overrides[int(i)] = _info_at(final_info, int(i))
            self._autoreset |= ended
        elif self.mode is AutoresetMode.NEXT_STEP:
            self._pending_step |= ended
        self._ended = ended
        self.obs = next_obs
        return next_obs.copy(), rew, term, trunc, StepInfos(infos, self.num_envs, overrides)

    def reset_where(self, mask, seeds: Sequence[int | None] | None = None) -> np.ndarray:
        """Reset the masked sub-envs only (episode ends, or a forced reset of running ones); others keep going.

        Args:
            mask: ``(N,)`` bool; all False is a no-op.
            seeds: optional N seeds (entries of unmasked sub-envs are ignored); None = unseeded resets (the
                same as an autoreset).

        Returns:
            ``(N, d)`` float32: the current observation of every sub-env (the reset one where masked).

        Raises:
            ValueError: a bad mask or seeds; a reset the vector env cannot do alone: a forced reset (or a seeded
                one) in a NEXT_STEP or SAME_STEP env that does not take ``options={"reset_mask": ...}``, or,
                in such a NEXT_STEP env, resetting some ended sub-envs while others are still running.
            RuntimeError: :meth:`reset` was never called.
        """
        if self.obs is None:
            raise RuntimeError("VectorStream.reset_where before reset(seeds)")
        mask = self._mask(mask)
        seed_list = self._seed_list(seeds)
        if not mask.any():
            return self.obs.copy()
        seeded = np.array([s is not None for s in seed_list]) & mask
        need = mask.copy()
        if self.mode is AutoresetMode.SAME_STEP and self._autoreset_obs is not None:
            done = mask & self._autoreset & ~seeded  # the venv already reset these: use its reset obs
            self.obs[done] = self._autoreset_obs[done]
            self._autoreset[done] = False
            self._ended[done] = False
            need &= ~done
        if need.any():
            if self._mask_ok:
                obs, _ = self.venv.reset(seed=[s if m else None for s, m in zip(seed_list, need)],
                                         options={"reset_mask": need.copy()})
                obs = self._as_obs(obs)
                self.obs[need] = obs[need]
            elif (self.mode is AutoresetMode.NEXT_STEP and not seeded.any() and self._pending_step.all()
                  and need.all()):
                obs, *_ = self.venv.step(self._last_actions)  # the no-op reset step, hidden from the caller
                self.obs = self._as_obs(obs)
            else:
                raise ValueError(
                    f"vector env {self.venv} ({self.mode.value} mode) does not take options={{'reset_mask': ...}}, "
                    f"so sub-environments {np.flatnonzero(need).tolist()} cannot be reset alone (forced, seeded, or "
                    "while others run); use AutoresetMode.DISABLED, or declare metadata['reset_mask'] = True "
                    "after supporting it")
            self._ended[need] = False
            self._autoreset[need] = False
            self._pending_step[need] = False
        return self.obs.copy()

    def continue_where(self, mask) -> None:
        """Let the masked sub-envs whose episode ended keep stepping without a reset (the reset condition
        ``never`` on a time-limited env: the end is reported, the env goes on, as the single-env loop does;
        a single lcpo env stepped past its limit reports truncated on every further step).

        Args:
            mask: ``(N,)`` bool; entries of sub-envs that did not end are ignored.

        Raises:
            ValueError: a bad mask; a vector env not in DISABLED mode (it resets ended sub-envs itself), or an
                AsyncVectorEnv (its workers refuse to step an ended sub-env).
        """
        mask = self._mask(mask) & self._ended
        if not mask.any():
            return
        base = self.venv.unwrapped
        if self.mode is not AutoresetMode.DISABLED or isinstance(base, AsyncVectorEnv):
            raise ValueError(f"vector env {type(base).__name__} ({self.mode.value} mode) cannot step sub-environments "
                             f"{np.flatnonzero(mask).tolist()} on past their episode's end; use autoreset mode "
                             "DISABLED with mode 'sync' or 'native'")
        if isinstance(base, SyncVectorEnv):
            base._autoreset_envs[mask] = False  # Gymnasium's own end marks (it asserts on them in DISABLED mode)
        elif callable(getattr(base, "continue_where", None)):
            base.continue_where(mask)  # a user's vector env may keep marks of its own
        self._ended[mask] = False

    # ------------------------------------------------------------------ state
    def _sub_envs(self):
        base = self.venv.unwrapped
        return base.envs if isinstance(base, SyncVectorEnv) else None

    def check_checkpointable(self, name: str) -> None:
        """Refuse, before any step or file, a vector env whose checkpoints could not save every sub-env exactly
        (:func:`lcpo.envs.preflight.check_checkpointable`, per sub-env where they can be reached).

        A vector env with its own ``get_state``/``set_state`` (lcpo's native one) passes; a SyncVectorEnv's
        sub-envs are checked one by one; an AsyncVectorEnv from :func:`make_vector_env` is checked inside its
        workers (``AsyncVectorEnv.call``); a user's own AsyncVectorEnv is refused (its workers' wrapper state,
        e.g. a ``TimeLimit``'s step counter, cannot be reached).

        Args:
            name: the environment's name as configured, for the message.

        Raises:
            ValueError: one line naming the environment and what to do (for a user's AsyncVectorEnv:
                ``mode='sync'``).
        """
        from lcpo.envs.preflight import check_checkpointable

        base = self.venv.unwrapped
        if callable(getattr(base, "get_state", None)) and callable(getattr(base, "set_state", None)):
            return
        envs = self._sub_envs()
        if envs is not None:
            for env in envs:
                check_checkpointable(env, name)
        elif _lcpo_async(base):
            for refusal in base.call("lcpo_checkpoint_refusal", name):
                if refusal is not None:
                    raise ValueError(refusal)
        elif isinstance(base, AsyncVectorEnv):
            raise ValueError(_ASYNC_REFUSAL.format(name=name))
        else:
            raise ValueError(f"vector env {name!r} ({type(base).__name__}) cannot be checkpointed: it has no "
                             "get_state()/set_state() and its sub-environments cannot be reached; give it "
                             "get_state() -> list[dict] and set_state(list[dict]), or --checkpoint-every 0 "
                             "(sweeps: checkpoint_every = 0)")

    def get_state(self) -> list[dict]:
        """Per sub-env state: ``{"env": the sub-env's get_state(), "obs": (d,) float32, "ended": bool}``, plus
        ``"wrappers"`` (:func:`lcpo.envs.wrapper_state.wrappers_state`: e.g. a ``TimeLimit``'s counter) where the
        sub-envs are reached one by one: a SyncVectorEnv's directly, an AsyncVectorEnv from
        :func:`make_vector_env` (``mode="async"``) inside each worker, through Gymnasium's
        ``AsyncVectorEnv.call``; lcpo's native vector env has no wrappers.

        Returns:
            N dicts (NumPy arrays and plain values; :mod:`lcpo.persistence.checkpoint` stores them).

        Raises:
            TypeError: a sub-env without ``get_state()`` or with a wrapper whose state cannot be saved (names
                it), a user's own AsyncVectorEnv (its workers' wrappers cannot be reached: one line naming the
                fix, ``mode='sync'``), or a vector env whose sub-envs cannot be reached at all.
            RuntimeError: :meth:`reset` was never called, or a sub-env awaits an autoreset the vector env keeps
                outside its sub-envs (SAME_STEP / NEXT_STEP mode): call :meth:`reset_where` first.
        """
        if self.obs is None:
            raise RuntimeError("VectorStream.get_state before reset(seeds)")
        if (self._autoreset | self._pending_step).any():
            raise RuntimeError(f"sub-environments {np.flatnonzero(self._autoreset | self._pending_step).tolist()} "
                               "await their autoreset; call reset_where(mask) before get_state()")
        base = self.venv.unwrapped
        envs = self._sub_envs()
        wrappers = None
        if callable(getattr(base, "get_state", None)):
            states = base.get_state()
        elif envs is not None:
            states = []
            for i, env in enumerate(envs):
                get = getattr(env.unwrapped, "get_state", None)
                if not callable(get):
                    raise TypeError(f"sub-environment {i} ({_env_name(env)}) has no get_state(); it cannot be "
                                    "checkpointed")
                states.append(get())
        elif _lcpo_async(base):  # each worker reads its sub-env and wrappers (Gymnasium's AsyncVectorEnv.call)
            answers = list(base.call("lcpo_get_state"))
            for i, a in enumerate(answers):
                if "error" in a:
                    raise TypeError(f"sub-environment {i}: {a['error']}")
            states = [a["env"] for a in answers]
            wrappers = [a["wrappers"] for a in answers]
        elif isinstance(base, AsyncVectorEnv):
            raise TypeError(_ASYNC_REFUSAL.format(name=type(base).__name__))
        else:
            raise TypeError(f"vector env {type(base).__name__} has no get_state() and its sub-environments cannot "
                            "be reached; give it get_state() -> list[dict] and set_state(list[dict])")
        out = [{"env": s, "obs": self.obs[i].copy(), "ended": bool(self._ended[i])} for i, s in enumerate(states)]
        if envs is not None and not callable(getattr(base, "get_state", None)):
            from lcpo.envs.wrapper_state import wrappers_state

            wrappers = [wrappers_state(env) for env in envs]  # e.g. a TimeLimit's counter (issue 24 item 2)
        if wrappers is not None:
            for i, w in enumerate(wrappers):
                out[i]["wrappers"] = w
        return out

    def set_state(self, states: Sequence[dict]) -> None:
        """Restore :meth:`get_state` output (call :meth:`reset` once first, as when resuming a run).

        Raises:
            ValueError: a list of the wrong length, or saved wrappers that differ from the sub-env's (the chain,
                or a ``TimeLimit``'s ``max_episode_steps``; :func:`lcpo.envs.wrapper_state.load_wrappers_state`).
            TypeError: as :meth:`get_state`.
            RuntimeError: :meth:`reset` was never called.
        """
        if len(states) != self.num_envs:
            raise ValueError(f"set_state got {len(states)} states for {self.num_envs} sub-environments")
        if self.obs is None:
            raise RuntimeError("VectorStream.set_state before reset(seeds)")
        base = self.venv.unwrapped
        envs = self._sub_envs()
        env_states = [s["env"] for s in states]
        if callable(getattr(base, "set_state", None)):
            base.set_state(env_states)
        elif envs is not None:
            from lcpo.envs.wrapper_state import check_wrappers_state, load_wrappers_state

            for i, env in enumerate(envs):  # every sub-env checked before any is written: a refusal changes nothing
                if not callable(getattr(env.unwrapped, "set_state", None)):
                    raise TypeError(f"sub-environment {i} ({_env_name(env)}) has no set_state()")
                if states[i].get("wrappers") is not None:
                    try:
                        check_wrappers_state(env, states[i]["wrappers"])
                    except ValueError as exc:
                        raise ValueError(f"sub-environment {i}: {exc}") from None
            for i, (env, s) in enumerate(zip(envs, env_states)):
                env.unwrapped.set_state(s)
                if states[i].get("wrappers") is not None:
                    load_wrappers_state(env, states[i]["wrappers"])
        elif _lcpo_async(base):  # per-worker states through set_attr, applied in each worker through call
            base.set_attr("_lcpo_pending_state", [{"env": s["env"], "wrappers": s.get("wrappers")} for s in states])
            for i, err in enumerate(base.call("lcpo_apply_pending_state")):
                if err is not None:
                    raise ValueError(f"sub-environment {i}: {err}")
        elif isinstance(base, AsyncVectorEnv):
            raise TypeError(_ASYNC_REFUSAL.format(name=type(base).__name__))
        else:
            raise TypeError(f"vector env {type(base).__name__} has no set_state() and its sub-environments cannot "
                            "be reached")
        self.obs = np.stack([np.asarray(s["obs"], dtype=np.float32).reshape(-1) for s in states])
        self._ended = np.array([bool(s["ended"]) for s in states])
        self._autoreset[:] = False
        self._pending_step[:] = False
        self._autoreset_obs = None

    def close(self) -> None:
        """Close the vector env."""
        self.venv.close()


def _env_name(env: Any) -> str:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None and getattr(spec, "id", None) else type(env.unwrapped).__name__
