"""The wind context process shared by the windy environments (paper Appendix F, spec "Common to the five").

A :class:`WindProcess` reads a ``(T, 2)`` wind trace in global time: each environment step consumes one row
(the wind applied during that step), the index continues across episode resets and wraps at the trace end.
A *seeded* reset starts a fresh run at row 0 (so equal seeds give equal episodes, as Gymnasium expects);
``reset(options={"trace_index": k})`` starts at row ``k`` (prescient training).
The observation carries the last ``lags`` winds of each axis:
``[w_x(t), w_x(t-1), w_x(t-2), w_y(t), w_y(t-1), w_y(t-2)]`` where ``t`` is the wind just applied.
"""

from __future__ import annotations

import numpy as np

from lcpo.contexts.trace import ContextTrace, TraceError
from lcpo.envs.context import ContextSpec

__all__ = ["WindProcess", "WIND_BOUND", "as_wind_trace"]

#: Absolute bound on a wind value after the environment's divisor (spec: traces stay within +-4).
WIND_BOUND = 4.0


def as_wind_trace(trace, length: int | None = None, seed: int = 0) -> ContextTrace:
    """Resolve ``trace`` (None, name, path, ndarray or ContextTrace) to a 2-axis :class:`ContextTrace`.

    ``None`` means the all-zero trace (a windless environment).

    Raises:
        TraceError: unknown name, malformed file, or a trace whose second dimension is not 2.
    """
    if trace is None:
        trace = ContextTrace(np.zeros((1, 2)), "zero", {"generator": "zero"})
    elif not isinstance(trace, ContextTrace):
        if isinstance(trace, np.ndarray):
            trace = ContextTrace(trace, "array")
        else:
            from lcpo.contexts import resolve_trace  # lazy: keeps env import light

            trace = resolve_trace(trace, length=length, seed=seed)
    if trace.dim != 2:
        raise TraceError(f"trace {trace.name!r}: a wind trace needs 2 columns (x, y), got shape {trace.values.shape}")
    return trace


class WindProcess:
    """Global-time reader of a wind trace with a lag window.

    Args:
        trace: anything :func:`as_wind_trace` accepts.
        divisor: the environment's per-trace wind divisor (spec table: 1 or 8); values are divided by it.
        lags: number of past winds per axis in the observation (3 in the paper).
        bound: reject a trace whose scaled values exceed this magnitude.

    Raises:
        TraceError: if a scaled wind value exceeds ``bound`` (message names the trace, row and value).
    """

    def __init__(self, trace=None, divisor: float = 1.0, lags: int = 3, bound: float = WIND_BOUND):
        base = as_wind_trace(trace)
        self.divisor = float(divisor)
        self.trace = base.scaled(divisor)
        vals = self.trace.values
        if vals.max() > bound or vals.min() < -bound:  # no (T, 2) temporaries: the array may be 20M rows
            row = int(np.argwhere(np.abs(vals) > bound)[0, 0])
            raise TraceError(
                f"trace {self.trace.name!r}: wind {vals[row].tolist()} at row {row} exceeds the bound +-{bound} "
                f"(after divisor {divisor}); rescale the trace or pass a larger divisor")
        self.values = np.ascontiguousarray(vals, dtype=np.float64)
        self.length = vals.shape[0]
        self.lags = int(lags)
        self.index = 0  # global time: the row applied at the next step
        self._hist = np.zeros((2, self.lags), dtype=np.float64)  # [axis, lag]; lag 0 = newest
        self.restart(0)

    def restart(self, index: int = 0) -> None:
        """Jump to trace row ``index`` (wrapped) and refill the lag window with that row.

        Environments call this on a seeded ``reset`` (a fresh run starts at the trace's beginning) and on
        ``reset(options={"trace_index": k})`` (prescient training starts episodes at random trace points).
        """
        self.index = int(index) % self.length
        self._hist[:] = self.values[self.index][:, None]
        self.current = self.values[self.index].copy()

    def on_reset(self, seed, options) -> None:
        """Apply the reset rules: ``options["trace_index"]`` if given, else row 0 on a seeded reset, else
        nothing (global time continues across unseeded resets)."""
        if options and "trace_index" in options:
            self.restart(options["trace_index"])
        elif seed is not None:
            self.restart(0)

    def advance(self) -> np.ndarray:
        """Consume one trace row: returns the wind ``(2,)`` (float64) applied during this step."""
        w = self.values[self.index]
        self.index += 1
        if self.index == self.length:
            self.index = 0
        h = self._hist
        h[:, 1:] = h[:, :-1]
        h[:, 0] = w
        self.current = w
        return w

    def observation(self) -> np.ndarray:
        """``(2 * lags,)`` float64 view of the lag window: x lags (newest first), then y lags."""
        return self._hist.reshape(-1)

    def context_spec(self, base_dim: int, units: str = "trace units") -> ContextSpec:
        """The :class:`ContextSpec` for an observation ``[base (base_dim), wind lags (2 * lags)]``."""
        L = self.lags
        xs = tuple(range(base_dim, base_dim + L))
        ys = tuple(range(base_dim + L, base_dim + 2 * L))
        names = tuple(f"wind_x[t-{k}]" if k else "wind_x[t]" for k in range(L)) + tuple(
            f"wind_y[t-{k}]" if k else "wind_y[t]" for k in range(L))
        # the paper's main L2 threshold, sigma^2 = 1 in trace units (spec "OOD detection"); others: "auto"
        return ContextSpec(xs + ys, names, (xs, ys), units=units, bound=WIND_BOUND, scale=1.0 / self.divisor,
                           ood_thresholds={"l2": 1.0})

    def get_state(self) -> dict:
        """Checkpointable state (index and lag window)."""
        return {"index": int(self.index), "hist": self._hist.copy()}

    def set_state(self, state: dict) -> None:
        """Restore :meth:`get_state` output."""
        self.index = int(state["index"])
        self._hist[:] = np.asarray(state["hist"], dtype=np.float64)
        self.current = self._hist[:, 0].copy()
