"""Native vector env of ``lcpo/WindyPendulum-v0``: N windy pendulums stepped in one call (issue 26, item 2).

:class:`WindyPendulumVectorEnv` is a :class:`gymnasium.vector.VectorEnv` whose sub-environment ``k`` behaves
bit for bit as ``gymnasium.make("lcpo/WindyPendulum-v0", **env_kwargs[k])`` (the
:class:`~lcpo.envs.windy_pendulum.WindyPendulumEnv` under its
:class:`~lcpo.envs.discretize.DiscretizeActions` wrapper): the same observations, rewards, truncations,
``info["context"]``, trace index progression and seeding (a seeded reset starts at trace row 0, an unseeded one
continues global time, ``options={"trace_index": k}`` starts at row ``k``), the time limit kept inside the env,
and the same :meth:`get_state` dicts (a single env's state restores into a sub-env and back).

The state lives in NumPy arrays with a leading env axis (angle, velocity, step counter, trace index, the
``(N, 2, 3)`` wind lag window); traces shared by several sub-envs are stored once. One step is one call of a
numba kernel that runs the single env's arithmetic per sub-env in the same order, with the same float32
roundings and the C library's ``cos``, ``sin`` and ``pow`` (the single env squares with Python's ``**``, i.e.
``pow``, which differs from ``x * x`` in the last bit for about 0.1% of arguments; a NumPy ``x ** 2`` would not
be bit-identical). The discretisation is folded in: actions are ``(N, 1)`` bin indices; the control cost of
each bin is computed once with the single env's own expression.

**Torch backend** (``device=``, issue 26 item 6): the same step in torch on any torch device (``"cuda"`` for a
population whose networks are on a GPU; ``"cpu"`` to test it). The dynamic state (angle, velocity, counters,
lag window) and the traces live on the device, in float64 with the same float32 roundings in the same places;
per step there is one host-to-device copy (the ``(N, 2)`` actions and autoreset flags) and one device-to-host
copy (observations, rewards and truncations packed in one ``(N, 11)`` float64 array; the observation is
rounded to float32 on the host, the contexts are its lag-0 wind columns before rounding). Resets draw the
initial states from the same per-sub-env NumPy generators on the host (a host copy of the state, pulled from the
device only when a reset or :meth:`~WindyPendulumVectorEnv.get_state` needs it). Not bitwise: torch's
``sin``/``cos`` (SLEEF on the CPU, CUDA's own on a GPU) differ from the C library's in the last bit for about
0.15% of arguments, and it squares by multiplication where the single env calls ``pow``. Measured on the CPU over
4,000 random-action steps of 8 sub-envs with mixed traces and time limits (13 to 200 steps), in each autoreset
mode: truncations, contexts and trace positions equal; the angle within 6.4e-13 rad of the kernel's (the
difference starts within an episode and ends with it: resets draw the same states); observations equal in
float32 in that run; rewards within 1.7e-13 relative. The tests (``tests/envs/test_windy_pendulum_torch.py``)
hold it to observations within ``1e-5``, angles within ``1e-9``, rewards within ``1e-9`` relative.

Autoreset modes (``metadata["autoreset_mode"]``), as :class:`~gymnasium.vector.SyncVectorEnv` does them:
``NEXT_STEP`` (Gymnasium's default, and this class's and ``gymnasium.make_vec``'s), ``SAME_STEP``
(``info["final_obs"]``, ``info["final_info"]``) and ``DISABLED`` (what :func:`lcpo.envs.vector.make_vector_env`
builds; the caller resets ended sub-envs). Every mode takes ``reset(options={"reset_mask": mask})``
(``metadata["reset_mask"]`` is True). In DISABLED mode a sub-env stepped on past its time limit behaves as the
single env does (it keeps going, truncated on every step): the reset condition ``never`` on a time-limited env
(:meth:`lcpo.envs.vector.VectorStream.continue_where`). Autoresets are unseeded resets (global time continues).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from numba import njit

from lcpo.envs.arguments import rename_max_episode_steps
from lcpo.envs.windy_pendulum import make_windy_pendulum

__all__ = ["WindyPendulumVectorEnv", "make_windy_pendulum_vector"]

_F32 = np.float32


@njit(cache=True)
def _observe(th, thdot, hist, obs, rows):  # pragma: no cover - compiled
    """Write the observation of sub-envs ``rows`` into ``obs`` (the single env's ``_observe``)."""
    lags = hist.shape[2]
    for r in range(rows.shape[0]):
        i = rows[r]
        obs[i, 0] = np.float32(math.cos(th[i]))
        obs[i, 1] = np.float32(math.sin(th[i]))
        obs[i, 2] = np.float32(thdot[i])
        for ax in range(2):
            for lag in range(lags):
                obs[i, 3 + ax * lags + lag] = np.float32(hist[i, ax, lag])


@njit(cache=True)
def _step(acts, skip, table, ctrl, winds, offset, length, index, hist, th, thdot, elapsed, limit,
          obs, rew, trunc, two):  # pragma: no cover - compiled
    """One step of every sub-env except the ``skip`` ones, the single env's ``step`` per row (see the module
    docstring).

    Returns -1, or ``i`` (a bad bin index at row i; nothing changed)."""
    n = acts.shape[0]
    bins = table.shape[0]
    lags = hist.shape[2]
    for i in range(n):
        if not skip[i] and (acts[i] < 0 or acts[i] >= bins):
            return i
    two_pi = 2 * math.pi
    for i in range(n):
        if skip[i]:
            continue
        b = acts[i]
        a = np.float64(table[b])
        t0 = th[i]
        td = thdot[i]
        k = offset[i] + index[i]
        wx = winds[k, 0]
        wy = winds[k, 1]
        index[i] += 1
        if index[i] == length[i]:
            index[i] = 0
        for lag in range(lags - 1, 0, -1):
            hist[i, 0, lag] = hist[i, 0, lag - 1]
            hist[i, 1, lag] = hist[i, 1, lag - 1]
        hist[i, 0, 0] = wx
        hist[i, 1, 0] = wy
        u = a + wx * math.cos(t0) + wy * math.sin(t0)
        u = np.float64(np.float32(min(max(u, -2.0), 2.0)))
        ang = ((t0 + math.pi) % two_pi) - math.pi
        cost = math.pow(ang, two) + 0.1 * math.pow(td, two) + ctrl[b]
        newthdot = td + (15.0 * math.sin(t0) + np.float64(np.float32(3.0 * u))) * 0.05
        newthdot = min(max(newthdot, -8.0), 8.0)
        t1 = t0 + newthdot * 0.05
        th[i] = t1
        thdot[i] = newthdot
        elapsed[i] += 1
        trunc[i] = limit[i] > 0 and elapsed[i] >= limit[i]
        rew[i] = -cost
        obs[i, 0] = np.float32(math.cos(t1))
        obs[i, 1] = np.float32(math.sin(t1))
        obs[i, 2] = np.float32(newthdot)
        for ax in range(2):
            for lag in range(lags):
                obs[i, 3 + ax * lags + lag] = np.float32(hist[i, ax, lag])
    return -1


class WindyPendulumVectorEnv(VectorEnv):
    """N windy pendulums with discretised torque, bit-identical per sub-env to ``lcpo/WindyPendulum-v0``.

    The windy Pendulum of paper Appendix F (dynamics and reward: :mod:`lcpo.envs.windy_pendulum`), vectorised per
    Gymnasium's ``VectorEnv`` API.

    Args:
        num_envs: N; may be omitted when ``env_kwargs`` is given (``gymnasium.make_vec`` passes it).
        env_kwargs: one dict per sub-env of :func:`~lcpo.envs.windy_pendulum.make_windy_pendulum` arguments
            (``trace``, ``divisor``, ``bins``, ``time_limit``, ``continuing``), e.g. each seed's trace and time
            limit; None = ``num_envs`` copies of ``kwargs``.
        autoreset_mode: ``NEXT_STEP`` (default, as Gymnasium's vector envs), ``SAME_STEP`` or ``DISABLED``.
        device: None (default): the numba kernel on the host, bit-identical to the single env; a torch device
            (``"cuda"``, ``"cpu"``, ...): the torch backend there (see the module docstring).
        **kwargs: arguments shared by every sub-env (merged under each ``env_kwargs`` entry).

    Spaces: ``single_observation_space`` ``Box(9,)`` float32 (``cos theta``, ``sin theta``, ``theta_dot`` in
    rad/s, then the wind ``w_x``, ``w_y`` at lags 0-2 in N m, as the single env) and ``single_action_space``
    ``MultiDiscrete([bins])``, equal to the single env's; batched: ``(N, 9)`` and ``(N, 1)``.

    ``step(actions)`` takes ``(N, 1)`` (or ``(N,)``) integer bin indices and returns
    ``(obs (N, 9) float32, rewards (N,) float64, terminated (N,) bool (always False), truncated (N,) bool,
    infos)`` with ``infos["context"]`` the ``(N, 2)`` float64 wind applied in N m (and Gymnasium's ``"_context"``
    mask). ``reset(seed=..., options=...)`` follows :class:`~gymnasium.vector.SyncVectorEnv`: ``seed`` None, an
    int (sub-env ``k`` gets ``seed + k``) or N values; ``options["reset_mask"]`` resets the masked sub-envs
    only; ``options["trace_index"]`` (an int, or N ints) starts at that trace row.

    Raises:
        ValueError: neither or inconsistent ``num_envs``/``env_kwargs``, an argument the single env does not
            take (names it and the sub-env), sub-envs with different ``bins``, an unknown autoreset mode,
            an unusable ``device`` (one line naming it, :func:`lcpo.online.device.resolve_device`); at ``step``:
            a bad action shape or bin index, a non-integer action.
        RuntimeError: ``step`` before ``reset``.
        lcpo.contexts.TraceError: a malformed trace (as the single env).

    Example:
        >>> import gymnasium as gym, numpy as np
        >>> import lcpo.envs
        >>> venv = gym.make_vec("lcpo/WindyPendulum-v0", num_envs=2, vectorization_mode="vector_entry_point",
        ...                     env_kwargs=[{"time_limit": 200}, {"time_limit": 50}])
        >>> obs, infos = venv.reset(seed=[0, 1])
        >>> obs, rew, term, trunc, infos = venv.step(np.array([[7], [14]]))
        >>> obs.shape, rew.dtype, infos["context"].shape
        ((2, 9), dtype('float64'), (2, 2))
    """

    #: ``fresh_arrays``: every array ``step`` returns (observations, rewards, flags, the info dict and its arrays)
    #: is new and never touched by the env again, so :class:`lcpo.envs.vector.VectorStream` need not copy them
    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP, "reset_mask": True,
                "fresh_arrays": True}

    def __init__(self, num_envs: int | None = None, env_kwargs: Sequence[dict] | None = None, *,
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
                 device=None, **kwargs):
        try:
            self.autoreset_mode = AutoresetMode(autoreset_mode)
        except ValueError:
            raise ValueError(f"unknown autoreset_mode {autoreset_mode!r}; valid: "
                             f"{[m.value for m in AutoresetMode]}") from None
        if env_kwargs is None:
            if num_envs is None or int(num_envs) < 1:
                raise ValueError(f"WindyPendulumVectorEnv needs num_envs >= 1 or env_kwargs, got num_envs={num_envs}")
            env_kwargs = [{} for _ in range(int(num_envs))]
        if isinstance(env_kwargs, dict) or len(env_kwargs) == 0:
            raise ValueError("env_kwargs must be a non-empty list of dicts, one per sub-env")
        if num_envs is not None and int(num_envs) != len(env_kwargs):
            raise ValueError(f"num_envs={num_envs} but env_kwargs has {len(env_kwargs)} entries")
        n = len(env_kwargs)
        self.num_envs = n
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = None
        tables, limits, offsets, lengths, chunks = [], [], [], [], []
        seen: list[tuple[np.ndarray, int]] = []
        total = 0
        for k, kw in enumerate(env_kwargs):
            if not isinstance(kw, dict):
                raise ValueError(f"env_kwargs[{k}] must be a dict, got {type(kw).__name__}")
            merged = {**kwargs, **kw}
            merged.pop("render_mode", None)
            rename_max_episode_steps(merged)  # as make_env: the env's own time limit, not a TimeLimit wrapper
            try:
                single = make_windy_pendulum(**merged)  # the single env interprets every argument
            except TypeError as exc:
                raise ValueError(f"env_kwargs[{k}]: {exc}") from None
            base = single.unwrapped
            tables.append(single.table[0])
            limits.append(0 if base.max_episode_steps is None else base.max_episode_steps)
            vals = base.wind.values
            for prev, off in seen:  # traces shared by sub-envs are stored once
                if prev is vals or (prev.shape == vals.shape and np.array_equal(prev, vals)):
                    offsets.append(off)
                    break
            else:
                offsets.append(total)
                seen.append((vals, total))
                chunks.append(vals)
                total += vals.shape[0]
            lengths.append(base.wind.length)
            if k == 0:
                self.single_observation_space = base.observation_space
                self.single_action_space = single.action_space
                self.context_spec = base.context_spec
                self._lags = base.wind.lags
            elif single.action_space != self.single_action_space:
                raise ValueError(f"env_kwargs[{k}]: action space {single.action_space} differs from sub-env 0's "
                                 f"{self.single_action_space} (all sub-envs need the same bins)")
        self._table = np.ascontiguousarray(tables[0], dtype=np.float32)
        # the control cost of each bin, by the single env's own expression (float32 power, then float64)
        self._ctrl = np.array([float(0.001 * (_F32(min(max(float(a), -2.0), 2.0)) ** 2)) for a in self._table])
        self._winds = np.ascontiguousarray(np.concatenate(chunks), dtype=np.float64)
        self._offset = np.asarray(offsets, dtype=np.int64)
        self._length = np.asarray(lengths, dtype=np.int64)
        self._limit = np.asarray(limits, dtype=np.int64)
        self._index = np.zeros(n, dtype=np.int64)
        self._hist = np.zeros((n, 2, self._lags), dtype=np.float64)
        self._th = np.zeros(n, dtype=np.float64)
        self._thdot = np.zeros(n, dtype=np.float64)
        self._elapsed = np.zeros(n, dtype=np.int64)
        self._rngs: list[np.random.Generator | None] = [None] * n
        self._seeds: list[int | None] = [None] * n
        self._obs = np.zeros((n, 9), dtype=np.float32)
        self._started = False
        for i in range(n):
            self._restart(i, 0)
        self.action_space = batch_space(self.single_action_space, n)
        self.observation_space = batch_space(self.single_observation_space, n)
        self._all = np.arange(n, dtype=np.int64)
        self._ones = np.ones(n, dtype=bool)
        self._action_shapes = ((n, 1), (n,))  # the shapes step accepts
        self._autoreset = np.zeros(n, dtype=bool)  # NEXT_STEP: reset at the next step instead of stepping
        self.device = None
        self._dev: dict | None = None  # the torch backend's device tensors
        self._stale = False  # the host state lags the device state (torch backend, after a step)
        if device is not None:  # torch only for the torch backend (the numba env imports no torch)
            import torch

            from lcpo.online.device import resolve_device

            self.device = resolve_device(device, "device")
            self._dev = {name: torch.from_numpy(np.array(getattr(self, name))).to(self.device) for name in
                         ("_table", "_ctrl", "_winds", "_offset", "_length", "_limit")}
            self._dev["_table"] = self._dev["_table"].double()  # a = float64(table[b]) as the kernel
            self._push()

    # ------------------------------------------------------------------ torch backend: host <-> device state
    _STATE = ("_th", "_thdot", "_elapsed", "_index", "_hist")

    def _push(self) -> None:
        """Copy the host state to the device (after resets and :meth:`set_state`; torch backend only)."""
        if self._dev is not None:
            import torch

            for name in self._STATE:
                self._dev[name] = torch.from_numpy(getattr(self, name).copy()).to(self.device)
            self._stale = False

    def _pull(self) -> None:
        """Bring the host state up to date with the device (before a reset or :meth:`get_state`)."""
        if self._dev is not None and self._stale:
            for name in self._STATE:
                getattr(self, name)[...] = self._dev[name].cpu().numpy()
            self._stale = False

    def _torch_step(self, acts: np.ndarray, skip: np.ndarray):
        """The kernel's step in torch on ``self.device`` (the same operations in the same order, float32
        roundings where the kernel has them); ``(obs (N, 9) float32, rew (N,), trunc (N,) bool, context (N, 2))``
        on the host, from one packed copy."""
        import torch

        d = self._dev
        n, lags = self.num_envs, self._lags
        two_pi = 2 * math.pi
        x = torch.from_numpy(np.stack([acts, skip.astype(np.int64)], axis=1)).to(self.device)
        b, active = x[:, 0], x[:, 1] == 0
        th, td, index, hist = d["_th"], d["_thdot"], d["_index"], d["_hist"]
        a = d["_table"][b]
        w = d["_winds"][d["_offset"] + index]  # (N, 2)
        wx, wy = w[:, 0], w[:, 1]
        nxt = index + 1
        nxt = torch.where(nxt == d["_length"], torch.zeros_like(nxt), nxt)
        new_hist = torch.cat([w[:, :, None], hist[:, :, :lags - 1]], dim=2)
        s0 = torch.sin(th)  # the kernel calls sin(t0) twice: the same value
        u = a + wx * torch.cos(th) + wy * s0
        u = torch.clamp(u, -2.0, 2.0).float().double()
        ang = torch.fmod(th + math.pi, two_pi)  # Python's float %: fmod (exact), then the sign of the divisor
        ang = torch.where((ang != 0) & (ang < 0), ang + two_pi, ang) - math.pi
        cost = ang * ang + 0.1 * (td * td) + d["_ctrl"][b]
        newthdot = td + (15.0 * s0 + (3.0 * u).float().double()) * 0.05
        newthdot = torch.clamp(newthdot, -8.0, 8.0)
        t1 = th + newthdot * 0.05
        elapsed = d["_elapsed"] + 1
        trunc = (d["_limit"] > 0) & (elapsed >= d["_limit"])
        # float64 out, rounded to the float32 observation on the host (the same round-to-nearest as the kernel)
        packed = torch.cat([torch.cos(t1)[:, None], torch.sin(t1)[:, None], newthdot[:, None],
                            new_hist.reshape(n, 2 * lags), (-cost)[:, None], trunc[:, None].double()], dim=1)
        if bool(skip.any()):  # NEXT_STEP rows that reset this step keep their state (reset on the host next)
            keep = ~active
            nxt, t1, newthdot = (torch.where(keep, old, new) for old, new in
                                 ((index, nxt), (th, t1), (td, newthdot)))
            elapsed = torch.where(keep, d["_elapsed"], elapsed)
            new_hist = torch.where(keep[:, None, None], hist, new_hist)
        d["_index"], d["_th"], d["_thdot"], d["_elapsed"], d["_hist"] = nxt, t1, newthdot, elapsed, new_hist
        self._stale = True
        host = packed.cpu().numpy()
        obs_cols = 3 + 2 * lags
        return (host[:, :obs_cols].astype(np.float32), host[:, obs_cols].copy(), host[:, obs_cols + 1] != 0.0,
                host[:, [3, 3 + lags]].copy())

    # ------------------------------------------------------------------ per-sub-env helpers
    def _restart(self, i: int, row: int) -> None:
        """WindProcess.restart for sub-env i: jump to trace row ``row`` (wrapped), fill the lag window."""
        self._index[i] = int(row) % int(self._length[i])
        self._hist[i] = self._winds[self._offset[i] + self._index[i]][:, None]

    def _rng(self, i: int) -> np.random.Generator:
        if self._rngs[i] is None:  # as gym.Env.np_random: a lazily created, randomly seeded generator
            self._rngs[i], self._seeds[i] = seeding.np_random()
        return self._rngs[i]

    def _reset_one(self, i: int, seed: int | None, trace_index) -> None:
        if seed is not None:
            self._rngs[i], self._seeds[i] = seeding.np_random(int(seed))
        if trace_index is not None:
            self._restart(i, trace_index)
        elif seed is not None:
            self._restart(i, 0)
        state = self._rng(i).uniform(low=np.array([-np.pi, -1.0]), high=np.array([np.pi, 1.0]))
        self._th[i], self._thdot[i] = float(state[0]), float(state[1])
        self._elapsed[i] = 0

    # ------------------------------------------------------------------ VectorEnv API
    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict | None = None):
        """Reset all sub-envs, or the ``options["reset_mask"]`` ones (see the class docstring).

        Returns:
            ``(obs (N, 9) float32, infos)``, ``infos["context"]`` ``(N, 2)`` float64 (``"_context"`` marks the
            sub-envs reset).

        Raises:
            ValueError: seeds or ``options["trace_index"]`` of the wrong length; a reset mask that is not an
                ``(N,)`` bool array with a True.
            RuntimeError: a ``reset_mask`` before a first full reset.
        """
        n = self.num_envs
        if seed is None:
            seeds = [None] * n
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(n)]
        else:
            seeds = list(seed)
            if len(seeds) != n:
                raise ValueError(f"seed has {len(seeds)} entries for num_envs={n}")
        options = dict(options) if options else {}
        mask = options.pop("reset_mask", None)
        if mask is None:
            mask = self._ones
        else:
            if not isinstance(mask, np.ndarray) or mask.shape != (n,) or mask.dtype != np.bool_:
                raise ValueError(f"options['reset_mask'] must be an ({n},) bool array, got {mask!r}")
            if not mask.any():
                raise ValueError("options['reset_mask'] must contain at least one True value")
        tix = options.get("trace_index")
        if tix is not None and not isinstance(tix, (int, np.integer)):
            tix = list(tix)
            if len(tix) != n:
                raise ValueError(f"options['trace_index'] has {len(tix)} entries for num_envs={n}")
        if mask is not self._ones and not self._started:  # refused before any sub-env changes
            raise RuntimeError("reset with a reset_mask before a first full reset")
        rows = np.flatnonzero(mask)
        self._pull()
        for i in rows:
            self._reset_one(int(i), seeds[i], tix[i] if isinstance(tix, list) else tix)
        self._autoreset[mask] = False
        if mask is self._ones:
            self._started = True
        _observe(self._th, self._thdot, self._hist, self._obs, rows.astype(np.int64))
        self._push()
        return self._obs.copy(), {"context": self._hist[:, :, 0].copy(), "_context": mask.copy()}

    def step(self, actions):
        """Step every sub-env with bin indices ``actions`` ((N, 1) or (N,) ints); see the class docstring.

        Raises:
            ValueError: wrong shape, non-integer values or a bin index out of range (names the sub-env).
            RuntimeError: before ``reset``.
        """
        n = self.num_envs
        acts = np.asarray(actions)
        if acts.shape not in self._action_shapes:
            raise ValueError(f"actions must have shape ({n}, 1) (bin indices), got {acts.shape}")
        if acts.dtype.kind not in "iu":
            if acts.dtype.kind == "f" and np.array_equal(acts, np.floor(acts)):
                acts = acts.astype(np.int64)
            else:
                raise ValueError(f"actions must be integer bin indices, got dtype {acts.dtype}")
        if not self._started:
            raise RuntimeError("WindyPendulumVectorEnv.step before reset()")
        acts = np.ascontiguousarray(acts.reshape(n), dtype=np.int64)
        mode = self.autoreset_mode
        skip = self._autoreset  # all False outside NEXT_STEP
        if self._dev is not None:
            bad = ~skip & ((acts < 0) | (acts >= self._table.shape[0]))
            if bad.any():
                code = int(np.flatnonzero(bad)[0])
                raise ValueError(f"sub-env {code}: bin index out of range [0, {self._table.shape[0]}): "
                                 f"{actions[code]!r}")
            obs, rew, trunc, context = self._torch_step(acts, skip)
            infos = {"context": context, "_context": self._ones.copy()}
        else:
            obs = np.empty((n, 9), dtype=np.float32)
            rew = np.empty(n, dtype=np.float64)
            trunc = np.empty(n, dtype=np.bool_)
            code = _step(acts, skip, self._table, self._ctrl, self._winds, self._offset, self._length, self._index,
                         self._hist, self._th, self._thdot, self._elapsed, self._limit, obs, rew, trunc, 2.0)
            if code != -1:
                raise ValueError(f"sub-env {code}: bin index out of range [0, {self._table.shape[0]}): "
                                 f"{actions[code]!r}")
            infos = {"context": self._hist[:, :, 0].copy(), "_context": self._ones.copy()}
        if mode is AutoresetMode.NEXT_STEP:
            if skip.any():  # this step resets them (their actions are ignored): reward 0, no flags
                rows = np.flatnonzero(skip)
                self._autoreset_rows(rows, obs, infos)
                rew[rows] = 0.0
                trunc[rows] = False
            self._autoreset = trunc.copy()
        elif mode is AutoresetMode.SAME_STEP and trunc.any():
            rows = np.flatnonzero(trunc)
            final = np.full(n, None, dtype=object)
            for i in rows:
                final[i] = obs[i].copy()
            infos["final_obs"], infos["_final_obs"] = final, trunc.copy()
            infos["final_info"] = {"context": infos["context"].copy(), "_context": trunc.copy()}
            infos["_final_info"] = trunc.copy()
            self._autoreset_rows(rows, obs, infos)
        self._obs = obs
        return obs.copy(), rew, np.zeros(n, dtype=np.bool_), trunc, infos

    def _autoreset_rows(self, rows: np.ndarray, obs: np.ndarray, infos: dict) -> None:
        """Unseeded resets of sub-envs ``rows``; their reset observations and contexts into ``obs`` / ``infos``."""
        self._pull()
        for i in rows:
            self._reset_one(int(i), None, None)
        _observe(self._th, self._thdot, self._hist, obs, rows.astype(np.int64))
        infos["context"][rows] = self._hist[rows, :, 0]
        self._push()

    # ------------------------------------------------------------------ checkpoints
    def get_state(self) -> list[dict]:
        """Per sub-env, the single env's ``get_state()`` dict: ``th`` (float, rad), ``thdot`` (float, rad/s),
        ``elapsed`` (int steps), ``wind`` (``index`` int, ``hist`` ``(2, 3)`` float64 in N m) and ``np_random``
        (bit generator state)."""
        self._pull()
        return [{"th": float(self._th[i]), "thdot": float(self._thdot[i]), "elapsed": int(self._elapsed[i]),
                 "wind": {"index": int(self._index[i]), "hist": self._hist[i].copy()},
                 "np_random": self._rng(i).bit_generator.state} for i in range(self.num_envs)]

    def set_state(self, states: Sequence[dict]) -> None:
        """Restore :meth:`get_state` output (or N single envs' ``get_state()`` dicts). A NEXT_STEP autoreset
        pending at :meth:`get_state` is not part of the state (take states after resetting ended sub-envs).

        Raises:
            ValueError: a list of the wrong length.
        """
        if len(states) != self.num_envs:
            raise ValueError(f"set_state got {len(states)} states for num_envs={self.num_envs}")
        for i, s in enumerate(states):
            self._th[i], self._thdot[i] = float(s["th"]), float(s["thdot"])
            self._elapsed[i] = int(s["elapsed"])
            self._index[i] = int(s["wind"]["index"])
            self._hist[i] = np.asarray(s["wind"]["hist"], dtype=np.float64)
            self._rng(i).bit_generator.state = s["np_random"]
        self._started = True
        self._autoreset[:] = False
        _observe(self._th, self._thdot, self._hist, self._obs, self._all)
        self._push()

    def current_observation(self) -> np.ndarray:
        """``(N, 9)`` float32: the observation of the current state (after :meth:`set_state`)."""
        return self._obs.copy()


def make_windy_pendulum_vector(num_envs: int | None = None, env_kwargs: Sequence[dict] | None = None,
                               **kwargs) -> WindyPendulumVectorEnv:
    """Vector entry point of ``lcpo/WindyPendulum-v0`` (``gymnasium.make_vec(...,
    vectorization_mode="vector_entry_point")``): :class:`WindyPendulumVectorEnv` with the same arguments.

    Raises:
        ValueError, lcpo.contexts.TraceError: as :class:`WindyPendulumVectorEnv`.
    """
    return WindyPendulumVectorEnv(num_envs=num_envs, env_kwargs=env_kwargs, **kwargs)
