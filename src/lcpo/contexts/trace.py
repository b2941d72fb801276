"""The context trace type: a ``(T, d)`` float array with a name and metadata.

A trace is global time for an environment: index ``t`` is the context applied at environment step ``t``,
continuing across episode resets and wrapping at the end (ARCHITECTURE.md, "Context trace").
"""

from __future__ import annotations

import copy
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["ContextTrace", "TraceError"]


class TraceError(ValueError):
    """A trace (array or file) is malformed: wrong shape, dtype, non-finite values, unknown name."""


@dataclass(frozen=True, eq=False)
class ContextTrace:
    """A context trace.

    Attributes:
        values: ``(T, d)`` float64 array, finite, ``T >= 1``, ``d >= 1``; read-only.
        name: short identifier (e.g. ``"wind-1"``) used in run names and plots.
        metadata: JSON-serialisable facts (generator, parameters, seed, units, source).

    Raises:
        TraceError: if ``values`` is not 2-D, is empty, is not real-valued, or holds NaN/inf (the message
            names the trace and the first bad row).
    """

    values: np.ndarray
    name: str = "trace"
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        arr = np.asarray(self.values)
        if arr.dtype.kind not in "fiu":
            raise TraceError(f"trace {self.name!r}: values must be real numbers, got dtype {arr.dtype}")
        if arr.ndim == 1:
            raise TraceError(f"trace {self.name!r}: expected a (T, d) array, got shape {arr.shape}; "
                             "use values[:, None] for a one-dimensional context")
        if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
            raise TraceError(f"trace {self.name!r}: expected a non-empty (T, d) array, got shape {arr.shape}")
        arr = np.array(arr, dtype=np.float64, copy=True)
        bad = ~np.isfinite(arr)
        if bad.any():
            row = int(np.argwhere(bad)[0, 0])
            raise TraceError(f"trace {self.name!r}: non-finite value {arr[row].tolist()} at row {row}")
        arr.setflags(write=False)
        object.__setattr__(self, "values", arr)

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def __deepcopy__(self, memo: dict) -> "ContextTrace":
        """A deep copy that shares the ``values`` array while it is read-only and copies every other field.

        A read-only ``values`` cannot be written through, so sharing it is indistinguishable from copying it,
        and a copy is what Gymnasium makes of an environment's constructor arguments: every wrapper of
        ``gym.make`` keeps a deep copy of the environment's spec, whose kwargs hold the trace. Duplicating the
        array there cost 8 * T * d bytes per wrapper and environment: 13 arrays of 320 MB for a population of 5
        windy InvertedPendulum seeds on a 20M-step trace (peak resident memory 4.3 GB against 1.2 GB now;
        ``benchmarks/trace_copies.py``). An array someone made writable again is copied, as before.

        Args:
            memo: :func:`copy.deepcopy`'s memo dict.

        Returns:
            A new trace of the same class; its ``values`` is this trace's array (no bytes copied) when that is
            read-only, else a read-only copy; its other fields (``name``, ``metadata``, a subclass's own) are
            deep copies.
        """
        new = object.__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            if key == "values":
                if value.flags.writeable:
                    value = value.copy()
                    value.setflags(write=False)
            else:
                value = copy.deepcopy(value, memo)
            object.__setattr__(new, key, value)
        return new

    def __setstate__(self, state: dict) -> None:
        """Unpickling: the fields as pickled, ``values`` read-only again (NumPy unpickles arrays writable)."""
        for key, value in state.items():
            object.__setattr__(self, key, value)
        values = self.__dict__.get("values")
        if isinstance(values, np.ndarray):
            values.setflags(write=False)

    @property
    def dim(self) -> int:
        """Context dimension ``d``."""
        return int(self.values.shape[1])

    def scaled(self, divisor: float) -> "ContextTrace":
        """Return the trace divided by ``divisor`` (the per-environment wind divisors of the spec table).

        The divided array is made once per read-only ``values`` array and divisor and shared by every caller
        while any of them holds it: each seed's environment of a population divides the same trace (its deep
        copies share ``values``, :meth:`__deepcopy__`), and a private array each cost 8 * T * d bytes, 1.6 GB for
        5 seeds on a 20M-step trace (``benchmarks/trace_copies.py --divisor 8``). The division is elementwise
        IEEE float64, so a shared result is bit-identical to a fresh one. A trace whose ``values`` was made
        writable again gets a private array (its values may change).

        Args:
            divisor: a finite, non-zero number; 1 returns this trace itself.

        Returns:
            A :class:`ContextTrace` named ``"<name>/<divisor>"`` whose metadata adds ``divisor``; its ``values``
            is ``values / divisor``, float64, shape ``(T, d)``, read-only.

        Raises:
            TraceError: a ``divisor`` that is not a finite non-zero number, or one so small that a divided value
                overflows (the message names the trace and the divisor).
        """
        try:
            divisor = float(divisor)
        except (TypeError, ValueError):
            raise TraceError(f"trace {self.name!r}: invalid divisor {divisor!r}") from None
        if not np.isfinite(divisor) or divisor == 0:
            raise TraceError(f"trace {self.name!r}: invalid divisor {divisor}")
        if divisor == 1:
            return self
        values = _shared_quotient(self.values, divisor)
        if not (np.isfinite(values.min()) and np.isfinite(values.max())):
            raise TraceError(f"trace {self.name!r}: divisor {divisor:g} overflows a divided value to infinity")
        new = object.__new__(ContextTrace)
        object.__setattr__(new, "values", values)  # finite float64 (T, d), read-only: already valid
        object.__setattr__(new, "name", f"{self.name}/{divisor:g}")
        object.__setattr__(new, "metadata", dict(self.metadata, divisor=divisor))
        return new


#: ``(id(values), divisor) -> (weak reference to values, weak reference to values / divisor)``; entries whose
#: arrays are gone are dropped on the next lookup. Weak references only: the cache keeps no array alive.
_QUOTIENTS: dict[tuple[int, float], tuple[weakref.ref, weakref.ref]] = {}
_QUOTIENTS_LOCK = threading.Lock()


def _shared_quotient(values: np.ndarray, divisor: float) -> np.ndarray:
    """``values / divisor`` as a read-only array, the same array for the same read-only ``values`` and divisor.

    Args:
        values: a trace's float64 ``(T, d)`` array.
        divisor: finite, non-zero.

    Returns:
        A read-only float64 ``(T, d)`` array; shared with earlier callers when ``values`` is read-only and their
        result is still alive, else new (a writable ``values`` is never cached: it may change).
    """
    if values.flags.writeable:
        with np.errstate(over="ignore"):  # an overflow is the caller's one-line error
            out = values / divisor
        out.setflags(write=False)
        return out
    key = (id(values), divisor)
    with _QUOTIENTS_LOCK:
        for k in [k for k, (base, quot) in _QUOTIENTS.items() if base() is None or quot() is None]:
            del _QUOTIENTS[k]
        hit = _QUOTIENTS.get(key)
        if hit is not None and hit[0]() is values:
            quot = hit[1]()
            if quot is not None:
                return quot
        with np.errstate(over="ignore"):
            out = values / divisor
        out.setflags(write=False)
        _QUOTIENTS[key] = (weakref.ref(values), weakref.ref(out))
        return out
