"""Episode-aware replay buffer with n-step windows (off-policy and rehearsal baselines).

The buffer stores one stream of experience, in time order, as transitions
``(obs, action, reward, next_obs, terminated, truncated[, logp])`` in preallocated ring arrays. Capacity is
counted in *samples* and the oldest sample is evicted first, so memory is bounded even when a continuing task
runs one endless episode. Every step keeps its own real ``next_obs`` (also the last step of an episode, which
is the true final observation, never the next episode's reset observation), so no dummy states are stored.

Episodes are the spans between resets: a step with ``terminated`` or ``truncated`` set ends its episode and the
next stored step starts a new one. An episode whose first samples were evicted keeps its remaining samples,
which stay sampleable with correct windows (a window only ever looks forward in time).

Every stored sample has a *global index* ``g`` (0 for the first sample ever added, counting up by one per
step); it lives in ring slot ``g % capacity``. The buffer holds global indices ``[total_added - size,
total_added)``.

Example:
    >>> import numpy as np
    >>> buf = ReplayBuffer(capacity=4, obs_shape=(1,), action_shape=(), seed=0)
    >>> for t in range(6):
    ...     buf.add([t], 0, 1.0, [t + 1], terminated=False, truncated=(t == 2))
    >>> buf.stored_indices().tolist()
    [2, 3, 4, 5]
    >>> w = buf.get_windows([2, 3], n=3)
    >>> w["length"].tolist(), w["truncated"][0].tolist()
    ([1, 3], [True, False, False])
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

import numpy as np

from lcpo.memory.budget import require_fits
from lcpo.persistence.checkpoint import check_generator_state

__all__ = ["ReplayBuffer"]


class ReplayBuffer:
    """Ring-array replay buffer for one stream of transitions, grouped into episodes.

    Args:
        capacity: maximum number of stored samples (transitions), >= 1.
        obs_shape: shape of one observation, e.g. ``(8,)``.
        action_shape: shape of one action: ``()`` for ``Discrete``, ``(d,)`` for ``MultiDiscrete``/``Box``.
        obs_dtype: dtype of stored observations (default ``float32``, the env boundary contract).
        action_dtype: dtype of stored actions (default ``int64``).
        store_logp: if true, every ``add`` must pass ``logp``, the behaviour policy's log-probability of the
            action taken (finite float64; for a product of categoricals, the sum over dimensions). Needed for
            V-trace, Retrace and other importance-weighted targets.
        seed: an int, ``numpy.random.SeedSequence``, ``numpy.random.Generator`` or ``None``; the buffer's own
            generator for sampling (no global random state).

    Stored arrays (ring slots, ``C = capacity``): ``obs (C, *obs_shape)``, ``actions (C, *action_shape)``,
    ``rewards (C,) float64``, ``next_obs (C, *obs_shape)``, ``terminated (C,) bool``, ``truncated (C,) bool``,
    ``episode (C,) int64`` (episode id: the number of episode ends seen before the sample), and
    ``logp (C,) float64`` when stored.

    Raises:
        ValueError: on a capacity that is not an integer >= 1, a malformed shape, or a buffer larger than this
            machine's memory (:func:`lcpo.memory.budget.require_fits`).
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...] = (),
        obs_dtype: Any = np.float32,
        action_dtype: Any = np.int64,
        store_logp: bool = False,
        seed: int | np.random.SeedSequence | np.random.Generator | None = None,
    ) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ValueError(f"capacity must be an integer >= 1, got {capacity!r}")
        self.capacity = int(capacity)
        self.obs_shape = _as_shape(obs_shape, "obs_shape")
        self.action_shape = _as_shape(action_shape, "action_shape")
        self.obs_dtype = np.dtype(obs_dtype)
        self.action_dtype = np.dtype(action_dtype)
        self.store_logp = bool(store_logp)
        self._rng = np.random.default_rng(seed)
        C = self.capacity
        fields = {"obs": (self.obs_shape, self.obs_dtype), "actions": (self.action_shape, self.action_dtype),
                  "rewards": ((), np.dtype(np.float64)), "next_obs": (self.obs_shape, self.obs_dtype),
                  "terminated": ((), np.dtype(bool)), "truncated": ((), np.dtype(bool)),
                  "episode": ((), np.dtype(np.int64))}
        if self.store_logp:
            fields["logp"] = ((), np.dtype(np.float64))
        per_sample = sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in fields.values())
        require_fits(C * per_sample, f"a replay buffer of {C:,} transitions",
                     "buffer_size (every sample of the run by default) or --steps", owner=self)
        self._data: dict[str, np.ndarray] = {k: np.zeros((C, *shape), dtype=dtype)
                                             for k, (shape, dtype) in fields.items()}
        self._total = 0  # samples ever added (= global index of the next sample)
        self._episode = 0  # id of the episode the next sample belongs to

    # ------------------------------------------------------------------ bookkeeping
    @property
    def size(self) -> int:
        """Number of samples currently stored (``min(total_added, capacity)``)."""
        return min(self._total, self.capacity)

    def __len__(self) -> int:
        return self.size

    @property
    def total_added(self) -> int:
        """Number of samples ever added (the global index the next sample will get)."""
        return self._total

    @property
    def nbytes(self) -> int:
        """Bytes held by the ring arrays (constant for the buffer's lifetime)."""
        return int(sum(a.nbytes for a in self._data.values()))

    @property
    def current_episode(self) -> int:
        """Id of the episode the next added sample will belong to (= number of episode ends seen)."""
        return self._episode

    def stored_indices(self) -> np.ndarray:
        """Global indices of the stored samples, oldest first: ``(size,) int64``."""
        return np.arange(self._total - self.size, self._total, dtype=np.int64)

    def episode_spans(self) -> dict[str, np.ndarray]:
        """The stored part of every episode that still has samples in the buffer, oldest first.

        Returns:
            dict of ``(E,)`` arrays: ``episode`` (int64 id), ``start`` (int64 global index of the oldest stored
            sample of the episode; later than the episode's real start if that was evicted), ``length``
            (int64 stored samples), ``terminated`` and ``truncated`` (bool flags of the episode's last stored
            step; both false for the open episode), ``closed`` (bool: the episode has ended).
        """
        idx = self.stored_indices()
        if idx.size == 0:
            empty_i = np.zeros(0, dtype=np.int64)
            empty_b = np.zeros(0, dtype=bool)
            return {"episode": empty_i, "start": empty_i, "length": empty_i, "terminated": empty_b,
                    "truncated": empty_b, "closed": empty_b}
        slots = idx % self.capacity
        ep = self._data["episode"][slots]
        first = np.flatnonzero(np.r_[True, ep[1:] != ep[:-1]])
        last = np.r_[first[1:] - 1, idx.size - 1]
        term = self._data["terminated"][slots[last]]
        trunc = self._data["truncated"][slots[last]]
        return {"episode": ep[first], "start": idx[first], "length": (last - first + 1).astype(np.int64),
                "terminated": term, "truncated": trunc, "closed": term | trunc}

    # ------------------------------------------------------------------ adding
    def add(self, obs, action, reward, next_obs, terminated, truncated, logp=None) -> None:
        """Store one transition (the next step of the stream).

        Args:
            obs: observation ``obs_shape`` (stored as ``obs_dtype``).
            action: action ``action_shape`` (stored as ``action_dtype``).
            reward: finite scalar reward (stored as float64).
            next_obs: the real observation reached by the action, ``obs_shape`` (at an episode end: the true
                final observation, never the reset observation).
            terminated: true if ``next_obs`` is a terminal state (ends the episode, no bootstrap).
            truncated: true if the episode was cut after this step (time limit, reset condition): ends the
                episode, targets still bootstrap from ``next_obs``.
            logp: behaviour log-probability of ``action`` (required iff ``store_logp``).

        Raises:
            ValueError: on a wrong shape, a non-finite reward/observation/logp, or ``logp`` given/missing
                against ``store_logp``.
        """
        d = self._data
        obs_a = np.asarray(obs)
        next_a = np.asarray(next_obs)
        if obs_a.shape != self.obs_shape or next_a.shape != self.obs_shape:
            raise ValueError(f"obs and next_obs must have shape {self.obs_shape}, got {obs_a.shape} and {next_a.shape}")
        act_a = np.asarray(action)
        if act_a.shape != self.action_shape:
            raise ValueError(f"action must have shape {self.action_shape}, got {act_a.shape}")
        r = float(reward)
        if not math.isfinite(r):
            raise ValueError(f"reward is non-finite: {reward!r}")
        if obs_a.dtype.kind == "f" and not (np.isfinite(obs_a).all() and np.isfinite(next_a).all()):
            raise ValueError(f"obs or next_obs holds non-finite values: obs={obs_a}, next_obs={next_a}")
        if self.store_logp:
            if logp is None:
                raise ValueError("this buffer stores behaviour log-probabilities (store_logp=True): pass logp")
            lp = float(logp)
            if not math.isfinite(lp):
                raise ValueError(f"logp is non-finite: {logp!r}")
        elif logp is not None:
            raise ValueError("logp given but the buffer was built with store_logp=False")
        term, trunc = _flag("terminated", terminated), _flag("truncated", truncated)
        # every value converted before the first write: a refused transition leaves the buffer as it was
        obs_w, next_w = _cast("obs", obs_a, d["obs"].dtype), _cast("next_obs", next_a, d["next_obs"].dtype)
        act_w = _cast("action", act_a, d["actions"].dtype)
        i = self._total % self.capacity
        if self.store_logp:
            d["logp"][i] = lp
        d["obs"][i] = obs_w
        d["actions"][i] = act_w
        d["rewards"][i] = r
        d["next_obs"][i] = next_w
        d["terminated"][i] = term
        d["truncated"][i] = trunc
        d["episode"][i] = self._episode
        self._total += 1
        if term or trunc:
            self._episode += 1

    def add_batch(self, obs, actions, rewards, next_obs, terminated, truncated, logp=None) -> None:
        """Store ``k`` consecutive transitions of the stream, in time order (not ``k`` parallel envs).

        If ``k > capacity`` only the newest ``capacity`` are kept; global indices and episode ids still count
        all ``k``.

        Args:
            obs: ``(k, *obs_shape)``.
            actions: ``(k, *action_shape)``.
            rewards: ``(k,)`` finite (stored as float64).
            next_obs: ``(k, *obs_shape)``, the real states reached.
            terminated: ``(k,)`` bool.
            truncated: ``(k,)`` bool.
            logp: ``(k,)`` behaviour log-probabilities (required iff ``store_logp``).

        Raises:
            ValueError: on inconsistent shapes, non-finite values, or ``logp`` given/missing against
                ``store_logp``.
        """
        obs = np.asarray(obs)
        if obs.ndim != 1 + len(self.obs_shape) or obs.shape[1:] != self.obs_shape:
            raise ValueError(f"obs must have shape (k, *{self.obs_shape}), got {obs.shape}")
        k = obs.shape[0]
        actions = np.asarray(actions)
        if actions.shape != (k, *self.action_shape):
            raise ValueError(f"actions must have shape {(k, *self.action_shape)}, got {actions.shape}")
        next_obs = np.asarray(next_obs)
        if next_obs.shape != obs.shape:
            raise ValueError(f"next_obs must have shape {obs.shape}, got {next_obs.shape}")
        rewards = np.asarray(rewards, dtype=np.float64)
        term = np.asarray(terminated)
        trunc = np.asarray(truncated)
        for name, arr in (("rewards", rewards), ("terminated", term), ("truncated", trunc)):
            if arr.shape != (k,):
                raise ValueError(f"{name} must have shape ({k},), got {arr.shape}")
        if not np.all(np.isfinite(rewards)):
            raise ValueError(f"rewards hold non-finite values: {rewards[~np.isfinite(rewards)][:5]}")
        if np.issubdtype(obs.dtype, np.inexact):
            for name, arr in (("obs", obs), ("next_obs", next_obs)):
                if not np.all(np.isfinite(arr)):
                    raise ValueError(f"{name} holds non-finite values")
        if self.store_logp:
            if logp is None:
                raise ValueError("this buffer stores behaviour log-probabilities (store_logp=True): pass logp")
            logp = np.asarray(logp, dtype=np.float64)
            if logp.shape != (k,):
                raise ValueError(f"logp must have shape ({k},), got {logp.shape}")
            if not np.all(np.isfinite(logp)):
                raise ValueError(f"logp holds non-finite values: {logp[~np.isfinite(logp)][:5]}")
        elif logp is not None:
            raise ValueError("logp given but the buffer was built with store_logp=False")
        if k == 0:
            return
        term = term.astype(bool)
        trunc = trunc.astype(bool)
        # every array converted before the first write: a refused batch leaves the buffer as it was
        d = self._data
        obs, next_obs = _cast("obs", obs, d["obs"].dtype), _cast("next_obs", next_obs, d["next_obs"].dtype)
        actions = _cast("actions", actions, d["actions"].dtype)
        done = term | trunc
        episode = self._episode + np.r_[0, np.cumsum(done[:-1])].astype(np.int64)
        # Only the newest `capacity` of this batch can survive.
        keep = slice(max(0, k - self.capacity), k)
        slots = (self._total + np.arange(k, dtype=np.int64)[keep]) % self.capacity
        d = self._data
        d["obs"][slots] = obs[keep]
        d["actions"][slots] = actions[keep]
        d["rewards"][slots] = rewards[keep]
        d["next_obs"][slots] = next_obs[keep]
        d["terminated"][slots] = term[keep]
        d["truncated"][slots] = trunc[keep]
        d["episode"][slots] = episode[keep]
        if self.store_logp:
            d["logp"][slots] = logp[keep]
        self._total += k
        self._episode += int(done.sum())

    # ------------------------------------------------------------------ reading
    def _check_indices(self, indices) -> np.ndarray:
        idx = np.asarray(indices)
        if idx.size == 0:
            idx = idx.astype(np.int64)
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"indices must be a 1-D integer array of global indices, got {idx.dtype} {idx.shape}")
        lo = self._total - self.size
        bad = (idx < lo) | (idx >= self._total)
        if np.any(bad):
            raise IndexError(f"global indices {idx[bad][:5].tolist()} are not stored (stored: [{lo}, {self._total}))")
        return idx.astype(np.int64)

    def get(self, indices) -> dict[str, np.ndarray]:
        """Single transitions by global index.

        Args:
            indices: ``(B,)`` global indices of stored samples.

        Returns:
            dict of copies: ``obs (B, *obs_shape)``, ``actions (B, *action_shape)``, ``rewards (B,) float64``,
            ``next_obs (B, *obs_shape)``, ``terminated (B,) bool``, ``truncated (B,) bool``,
            ``episode (B,) int64``, ``indices (B,) int64``, and ``logp (B,) float64`` when stored.

        Raises:
            IndexError: if an index is not stored (evicted or not yet added).
        """
        idx = self._check_indices(indices)
        slots = idx % self.capacity
        out = {name: arr[slots] for name, arr in self._data.items()}
        out["indices"] = idx
        return out

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """Uniformly sampled single transitions (with replacement).

        Args:
            batch_size: number of transitions ``B`` (>= 1).

        Returns:
            the dict of :meth:`get` for ``B`` uniformly drawn stored samples.

        Raises:
            ValueError: if the buffer is empty or ``batch_size < 1``.
        """
        return self.get(self._draw(batch_size))

    def _draw(self, batch_size: int) -> np.ndarray:
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        return self._total - self.size + self._rng.integers(self.size, size=int(batch_size), dtype=np.int64)

    def sample_windows(self, batch_size: int, n: int) -> dict[str, np.ndarray]:
        """Uniformly sampled n-step windows: start ``t`` drawn uniformly over stored samples (with replacement).

        See :meth:`get_windows` for the window rule and the returned arrays.

        Raises:
            ValueError: if the buffer is empty, ``batch_size < 1`` or ``n < 1``.
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"window length n must be an integer >= 1, got {n!r}")
        return self.get_windows(self._draw(batch_size), n)

    def get_windows(self, starts, n: int) -> dict[str, np.ndarray]:
        """n-step windows starting at given global indices.

        A window starting at ``t`` holds steps ``t, t+1, ...`` up to ``t + n - 1``, stopping early after the
        first step that ends the episode (``terminated`` or ``truncated``) or at the newest stored sample (the
        open episode), so a window never spans two episodes and never runs past the newest sample. Windows are
        padded to ``n``: padded entries are zero / false and ``mask`` is false there. The bootstrap state of a
        window is ``next_obs[b, length[b] - 1]``, the real state reached by its last step (use it unless
        ``terminated[b, length[b] - 1]``).

        Args:
            starts: ``(B,)`` global indices of stored samples.
            n: window length (>= 1).

        Returns:
            dict: ``obs (B, n, *obs_shape)``, ``actions (B, n, *action_shape)``, ``rewards (B, n) float64``,
            ``next_obs (B, n, *obs_shape)``, ``terminated (B, n) bool``, ``truncated (B, n) bool``,
            ``episode (B, n) int64``, ``logp (B, n) float64`` (when stored), ``mask (B, n) bool`` (valid steps,
            a prefix of each row), ``length (B,) int64`` (``mask.sum(1)``, >= 1), ``indices (B,) int64`` (the
            starts).

        Raises:
            IndexError: if a start is not stored.
            ValueError: if ``n < 1``.
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"window length n must be an integer >= 1, got {n!r}")
        starts = self._check_indices(starts)
        idx = starts[:, None] + np.arange(int(n), dtype=np.int64)[None, :]
        in_range = idx < self._total
        slots = np.minimum(idx, self._total - 1) % self.capacity
        d = self._data
        done = d["terminated"][slots] | d["truncated"][slots]
        ended_before = (np.cumsum(done, axis=1) - done) > 0
        mask = in_range & ~ended_before
        out: dict[str, np.ndarray] = {}
        for name, arr in d.items():
            v = arr[slots]
            v[~mask] = 0
            out[name] = v
        out["mask"] = mask
        out["length"] = mask.sum(axis=1).astype(np.int64)
        out["indices"] = starts
        return out

    # ------------------------------------------------------------------ state
    def _config(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "obs_shape": list(self.obs_shape),
                "action_shape": list(self.action_shape), "obs_dtype": self.obs_dtype.str,
                "action_dtype": self.action_dtype.str, "store_logp": self.store_logp}

    def state_dict(self) -> dict[str, Any]:
        """Everything needed for a bit-exact resume: NumPy arrays, ints, strings and the RNG state.

        Returns:
            dict with ``config`` (capacity, shapes, dtype names, store_logp), ``total_added``,
            ``current_episode``, ``rng`` (the generator's ``bit_generator.state``) and ``arrays`` (copies of the
            filled ring slots ``[:size]`` of every stored array).
        """
        return {
            "config": self._config(),
            "total_added": self._total,
            "current_episode": self._episode,
            "rng": self._rng.bit_generator.state,
            "arrays": {name: arr[: self.size].copy() for name, arr in self._data.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict` into a buffer built with the same configuration.

        Args:
            state: a dict from :meth:`state_dict`.

        Raises:
            ValueError: if the configuration differs (the differing field is named), a key is missing, an
                array has the wrong shape/dtype, or ``rng`` is the state of another bit generator
                (:func:`lcpo.persistence.checkpoint.check_generator_state`); the buffer is left as it was.
        """
        try:
            cfg = state["config"]
            total = int(state["total_added"])
            episode = int(state["current_episode"])
            rng_state = state["rng"]
            arrays = state["arrays"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed replay buffer state: missing {exc}") from exc
        for key, value in self._config().items():
            theirs = cfg.get(key)
            if key.endswith("shape") and theirs is not None:
                theirs = [int(x) for x in theirs]
            if theirs != value:
                raise ValueError(f"replay buffer state has {key}={theirs!r}, this buffer has {key}={value!r}")
        if total < 0 or episode < 0:
            raise ValueError(f"malformed replay buffer state: total_added={total}, current_episode={episode}")
        check_generator_state(self._rng, rng_state, "replay buffer state")  # before anything changes
        size = min(total, self.capacity)
        for name, arr in self._data.items():
            if name not in arrays:
                raise ValueError(f"replay buffer state lacks array {name!r}")
            src = np.asarray(arrays[name])
            if src.shape != (size, *arr.shape[1:]) or src.dtype != arr.dtype:
                raise ValueError(f"replay buffer array {name!r} has shape {src.shape} dtype {src.dtype}, "
                                 f"expected {(size, *arr.shape[1:])} {arr.dtype}")
        for name, arr in self._data.items():
            arr[:size] = arrays[name]
            arr[size:] = 0
        self._total = total
        self._episode = episode
        self._rng.bit_generator.state = rng_state


def _cast(name: str, value, dtype) -> np.ndarray:
    """``value`` as an array of ``dtype``; a value that has no such form is refused in one line naming it."""
    try:
        return np.asarray(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        shown = value.item() if isinstance(value, np.ndarray) and value.ndim == 0 else value
        raise ValueError(f"{name} {reprlib.repr(shown)} cannot be stored as {np.dtype(dtype)} "
                         f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None


def _flag(name: str, value) -> bool:
    """One transition's ``terminated``/``truncated`` flag as a bool; an array of several values is refused."""
    if np.ndim(value) != 0:
        raise ValueError(f"{name} must be one bool, got {reprlib.repr(value)}")
    return bool(value)


def _as_shape(shape, name: str) -> tuple[int, ...]:
    try:
        out = tuple(int(s) for s in shape)
    except TypeError as exc:
        raise ValueError(f"{name} must be a tuple of ints, got {shape!r}") from exc
    if any(s < 1 for s in out):
        raise ValueError(f"{name} must hold positive sizes, got {shape!r}")
    return out
