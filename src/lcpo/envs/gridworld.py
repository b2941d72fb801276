"""``lcpo/TrapGrid-v0``: the paper's illustrative 3 x 3 trap grid world (Figure 1; spec ``windy-gym.md``).

Layout, ``(row, col)`` from the top left (cell index ``3 * row + col``)::

    . . E        E = exit (0, 2), terminal
    . T #        T = trap (1, 1), costly in trap mode; # = wall (1, 2)
    . D S        S = start (2, 2); D = the decision cell (2, 1)

Moves ``0 = Left, 1 = Up, 2 = Right, 3 = Down``; a move off the grid or into the wall leaves the agent where it
is. Reward: -1 per step, 0 for the step that reaches the exit (which ends the episode), and -10 (instead of -1)
for a step that enters the trap while the trap is on. Episodes are truncated after ``time_limit`` steps (20).
Optimal returns from the start: -3 without the trap (Left, Up through the centre, Up, Right) and -5 with it
(around the left column); :meth:`TrapGridEnv.optimal_values` proves both by value iteration.

Context: ``z = 1`` (trap on) or ``0`` (off), read from a *schedule trace* ``(T,)`` / ``(T, 1)`` of 0/1 values
(a :class:`~lcpo.contexts.ContextTrace` or an array). With ``trace_unit="episode"`` (default, the paper's
setting) there is one value per episode: episode ``k`` of the run uses row ``k``. With ``trace_unit="step"``
there is one value per environment step, read in global time (the index advances once per step and continues
across resets), so the trap may switch on or off in the middle of an episode. In both units a seeded reset
starts a fresh run at row 0, ``reset(options={"trace_index": k})`` jumps to row ``k``, and the index wraps at
the trace end. ``trace=None`` means the trap is always off.

Observation (float32, 10): the one-hot position (9 entries), then ``z`` for the *next* move (entry 9, the
declared context). ``info["context"]`` is ``(1,)`` float64: the ``z`` applied during the step just taken (on
``reset``: the ``z`` of the first move).

Example:
    >>> env = TrapGridEnv(trace=[0, 1])
    >>> obs, info = env.reset(seed=0)
    >>> [env.step(a)[1] for a in (LEFT, UP, UP, RIGHT)]
    [-1.0, -1.0, -1.0, 0.0]
    >>> obs, info = env.reset()          # the second episode has the trap on
    >>> float(obs[9]), env.step(LEFT)[1], env.step(UP)[1]
    (1.0, -1.0, -10.0)
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np

from lcpo.persistence.strict_json import show
from lcpo.contexts.trace import ContextTrace, TraceError
from lcpo.envs.arguments import integer
from lcpo.envs.context import ContextSpec

__all__ = ["TrapGridEnv", "make_trap_grid", "LEFT", "UP", "RIGHT", "DOWN", "START", "EXIT", "WALL", "TRAP",
           "DECISION", "N_CELLS", "cell_index"]

#: Actions.
LEFT, UP, RIGHT, DOWN = 0, 1, 2, 3
_MOVES = ((0, -1), (-1, 0), (0, 1), (1, 0))
_SIDE = 3
#: Number of cells (the one-hot part of the observation).
N_CELLS = _SIDE * _SIDE


def cell_index(row: int, col: int) -> int:
    """Cell index ``3 * row + col`` of ``(row, col)`` (the position of the 1 in the one-hot observation)."""
    return _SIDE * row + col


START, EXIT, WALL, TRAP, DECISION = cell_index(2, 2), cell_index(0, 2), cell_index(1, 2), cell_index(1, 1), \
    cell_index(2, 1)
_STEP_REWARD, _EXIT_REWARD, _TRAP_REWARD = -1.0, 0.0, -10.0


def _as_schedule(trace) -> ContextTrace:
    """Validate a trap schedule: None (always off), a ``(T,)``/``(T, 1)`` array of 0/1, a ContextTrace, or a
    ``.npy``/``.csv`` path (:func:`lcpo.contexts.resolve_trace`)."""
    if trace is None:
        return ContextTrace(np.zeros((1, 1)), "no-trap", {"generator": "constant", "value": 0})
    if isinstance(trace, (str, os.PathLike)):
        from lcpo.contexts import resolve_trace  # lazy: keeps env import light

        trace = resolve_trace(trace)
    if not isinstance(trace, ContextTrace):
        arr = np.asarray(trace)
        if arr.ndim == 1:
            arr = arr[:, None]
        trace = ContextTrace(arr, "schedule")
    if trace.dim != 1:
        raise TraceError(f"trace {trace.name!r}: a trap schedule has one column, got shape {trace.values.shape}")
    bad = (trace.values != 0.0) & (trace.values != 1.0)
    if bad.any():
        row = int(np.argwhere(bad)[0, 0])
        raise TraceError(f"trace {trace.name!r}: trap schedule values must be 0 or 1, got "
                         f"{float(trace.values[row, 0])!r} at row {row}")
    return trace


class TrapGridEnv(gym.Env):
    """The 3 x 3 trap grid world (see the module docstring for layout, rewards and the context schedule).

    Args:
        trace: trap schedule (None: never a trap; a ``(T,)``/``(T, 1)`` 0/1 array, a ``ContextTrace``, or the
            path of a ``.npy``/``.csv`` file holding one).
        trace_unit: ``"episode"`` (one schedule row per episode) or ``"step"`` (one row per step, global time).
        max_episode_steps: truncate after this many steps (20 in the paper).
        render_mode: only ``None`` is supported.

    Raises:
        lcpo.contexts.TraceError: a schedule that is not one column of 0/1 values (names the row and value).
        ValueError: an unknown ``trace_unit``, ``max_episode_steps < 1``, a render mode, or an invalid action.
    """

    metadata = {"render_modes": [], "continuing": False}

    def __init__(self, trace=None, trace_unit: str = "episode", max_episode_steps: int = 20,
                 render_mode: str | None = None):
        if trace_unit not in ("episode", "step"):
            raise ValueError(f"trace_unit must be 'episode' or 'step', got {show(trace_unit)}")
        if isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, (int, np.integer)) \
                or max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be an integer >= 1, got {show(max_episode_steps)}")
        if render_mode is not None:
            raise ValueError(f"TrapGridEnv does not render; got render_mode={show(render_mode)}")
        self.trace = _as_schedule(trace)
        self.schedule = np.ascontiguousarray(self.trace.values[:, 0])
        self.trace_unit = trace_unit
        self.max_episode_steps = int(max_episode_steps)
        self.render_mode = None
        self.observation_space = gym.spaces.Box(0.0, 1.0, (N_CELLS + 1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(4)
        self.context_spec = ContextSpec((N_CELLS,), ("trap",), units="0 = off, 1 = on", bound=1.0,
                                        ood_thresholds={"l2": 0.5})  # the spec's Figure 1 setting
        #: number of (cell, context) pairs: the row count of a tabular agent (:meth:`tabular_index`).
        self.n_tabular_states = 2 * N_CELLS
        self._pos = START
        self._elapsed = 0
        self._index = 0  # schedule row of the next move (step unit) or of the current episode (episode unit)
        self._z = 0.0
        self._episodes = 0  # episodes started since the last seeded reset (episode unit: index of the next)

    # -- dynamics (the single source of truth, also used by value iteration) ------------------------------
    @staticmethod
    def transition(cell: int, action: int, trap: bool) -> tuple[int, float, bool]:
        """Deterministic model: ``(next_cell, reward, terminated)`` of ``action`` from ``cell``.

        Raises:
            ValueError: for a cell outside ``[0, 9)``, the wall or the exit, or an action outside ``[0, 4)``.
        """
        if not 0 <= cell < N_CELLS or cell in (WALL, EXIT):
            raise ValueError(f"cell must be a non-terminal, non-wall cell index in [0, 9), got {show(cell)}")
        if not 0 <= action < 4:
            raise ValueError(f"action must be 0 (Left), 1 (Up), 2 (Right) or 3 (Down), got {show(action)}")
        r, c = divmod(cell, _SIDE)
        dr, dc = _MOVES[action]
        nr, nc = r + dr, c + dc
        nxt = cell_index(nr, nc) if 0 <= nr < _SIDE and 0 <= nc < _SIDE else cell
        if nxt == WALL:
            nxt = cell
        if nxt == EXIT:
            return nxt, _EXIT_REWARD, True
        if trap and nxt == TRAP:
            return nxt, _TRAP_REWARD, False
        return nxt, _STEP_REWARD, False

    @classmethod
    def optimal_values(cls, trap: bool, horizon: int = 20, gamma: float = 1.0) -> np.ndarray:
        """Optimal values by finite-horizon value iteration on :meth:`transition`.

        Args:
            trap: trap mode.
            horizon: steps left (the time limit, 20).
            gamma: discount in [0, 1] (1: the undiscounted return the paper plots).

        Returns:
            ``(9,)`` float64: the optimal expected return of each cell with ``horizon`` steps left (0 at the
            exit, NaN at the wall).

        Raises:
            ValueError: for ``horizon < 0`` or gamma outside [0, 1].
        """
        if horizon < 0 or not 0.0 <= gamma <= 1.0:
            raise ValueError(f"need horizon >= 0 and gamma in [0, 1], got horizon={horizon}, gamma={gamma}")
        cells = [s for s in range(N_CELLS) if s not in (WALL, EXIT)]
        v = np.zeros(N_CELLS)
        for _ in range(horizon):
            new = np.zeros(N_CELLS)
            for s in cells:
                q = []
                for a in range(4):
                    nxt, rew, term = cls.transition(s, a, trap)
                    q.append(rew + (0.0 if term else gamma * v[nxt]))
                new[s] = max(q)
            v = new
        v[WALL] = np.nan
        return v

    # -- observation, context ----------------------------------------------------------------------------
    def _obs(self) -> np.ndarray:
        obs = np.zeros(N_CELLS + 1, dtype=np.float32)
        obs[self._pos] = 1.0
        obs[N_CELLS] = self._z
        return obs

    def _advance_step_unit(self) -> None:
        self._index = (self._index + 1) % self.schedule.shape[0]
        self._z = float(self.schedule[self._index])

    @staticmethod
    def tabular_index(obs: np.ndarray) -> np.ndarray:
        """Row of a tabular agent for each observation: ``cell + 9 * z``.

        Args:
            obs: ``(obs_dim,)`` or ``(B, obs_dim)`` observations of this environment.

        Returns:
            int64 array of shape ``()`` or ``(B,)`` with values in ``[0, 18)``.

        Raises:
            ValueError: if ``obs`` does not have 10 entries per observation.
        """
        obs = np.asarray(obs)
        if obs.shape[-1] != N_CELLS + 1:
            raise ValueError(f"TrapGrid observations have {N_CELLS + 1} entries, got shape {obs.shape}")
        return obs[..., :N_CELLS].argmax(axis=-1) + N_CELLS * (obs[..., N_CELLS] > 0.5).astype(np.int64)

    @staticmethod
    def observation_of(cell: int, trap: bool) -> np.ndarray:
        """The ``(10,)`` float32 observation of ``cell`` with context ``trap`` (e.g. to probe a policy)."""
        obs = np.zeros(N_CELLS + 1, dtype=np.float32)
        obs[int(cell)] = 1.0
        obs[N_CELLS] = float(bool(trap))
        return obs

    # -- Gymnasium API -----------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode at the start cell (2, 2).

        Schedule rules: ``options={"trace_index": k}`` jumps to row ``k``; else a seeded reset starts the
        schedule at row 0; else the schedule continues (episode unit: the next row; step unit: unchanged).

        Returns:
            ``(obs (10,) float32, {"context": (1,) float64})``.
        """
        super().reset(seed=seed)
        n = self.schedule.shape[0]
        if options and "trace_index" in options:
            k = options["trace_index"]
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
                raise ValueError(f"options['trace_index'] must be an integer, got {show(k)}")
            self._index, self._episodes = int(k) % n, int(k) % n
        elif seed is not None:
            self._index, self._episodes = 0, 0
        if self.trace_unit == "episode":
            self._index = self._episodes % n
            self._episodes = self._index + 1
        self._z = float(self.schedule[self._index])
        self._pos, self._elapsed = START, 0
        return self._obs(), {"context": np.array([self._z])}

    def step(self, action):
        """Move; see the module docstring for rewards, termination and truncation.

        Returns:
            ``(obs, reward, terminated, truncated, {"context": (1,) float64})``.

        Raises:
            ValueError: if ``action`` is not in ``Discrete(4)``.
        """
        if not self.action_space.contains(action):
            raise ValueError(f"action must be 0 (Left), 1 (Up), 2 (Right) or 3 (Down), got {show(action)}")
        z = self._z
        self._pos, reward, terminated = self.transition(self._pos, int(action), z > 0.5)
        self._elapsed += 1
        if self.trace_unit == "step":
            self._advance_step_unit()
        truncated = not terminated and self._elapsed >= self.max_episode_steps
        return self._obs(), reward, terminated, truncated, {"context": np.array([z])}

    # -- checkpointing -----------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """Checkpointable state: position, steps in the episode, schedule index and counters, ``np_random``."""
        return {"pos": self._pos, "elapsed": self._elapsed, "index": self._index, "episodes": self._episodes,
                "z": self._z, "np_random": self.np_random.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state` output.

        Raises:
            ValueError: on a missing key or an out-of-range value.
        """
        try:
            pos, elapsed, index = int(state["pos"]), int(state["elapsed"]), int(state["index"])
            episodes, z, rng = int(state["episodes"]), float(state["z"]), state["np_random"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed TrapGridEnv state: missing or bad {exc}") from exc
        if not 0 <= pos < N_CELLS or pos == WALL or elapsed < 0 or not 0 <= index < self.schedule.shape[0] \
                or z not in (0.0, 1.0):
            raise ValueError(f"TrapGridEnv state out of range: pos={pos}, elapsed={elapsed}, index={index}, z={z}")
        self._pos, self._elapsed, self._index, self._episodes, self._z = pos, elapsed, index, episodes, z
        self.np_random.bit_generator.state = rng

    def current_observation(self) -> np.ndarray:
        """The observation of the current state (used when resuming a run without a reset)."""
        return self._obs()


def make_trap_grid(trace=None, trace_unit: str = "episode", time_limit: int = 20,
                   render_mode: str | None = None) -> TrapGridEnv:
    """Entry point of ``lcpo/TrapGrid-v0``.

    Args:
        trace: trap schedule (see :class:`TrapGridEnv`).
        trace_unit: ``"episode"`` or ``"step"``.
        time_limit: truncation length (20; the environment's own ``max_episode_steps``: ``gymnasium.make``
            reserves that name for its ``TimeLimit`` wrapper, which is not checkpointable).
        render_mode: only None.

    Raises:
        ValueError: ``time_limit`` not an integer >= 1 (named with its value, :mod:`lcpo.envs.arguments`), or
            as :class:`TrapGridEnv` (``trace_unit``, the trace, ``render_mode``).
    """
    return TrapGridEnv(trace, trace_unit=trace_unit, max_episode_steps=integer(time_limit, "time_limit"),
                       render_mode=render_mode)
