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
        arr = np.asarray(arr, dtype=np.float64)
        bad = ~np.isfinite(arr)
        if bad.any():
            row = int(np.argwhere(bad)[0, 0])
            raise TraceError(f"trace {self.name!r}: non-finite value {arr[row].tolist()} at row {row}")
        object.__setattr__(self, "values", _immutable(arr))

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def __deepcopy__(self, memo: dict) -> "ContextTrace":
        """A deep copy that shares the ``values`` array while it is read-only and copies every other field.

        A read-only ``values`` cannot be written through, so sharing it is indistinguishable from copying it,
        and a copy is what Gymnasium makes of an environment's constructor arguments: every wrapper of
        ``gym.make`` keeps a deep copy of the environment's spec, whose kwargs hold the trace. Duplicating the
        array there cost 8 * T * d bytes per wrapper and environment: 13 arrays of 320 MB for a population of 5
        windy InvertedPendulum seeds on a 20M-step trace (peak resident memory 4.3 GB against 1.2 GB now;
        ``benchmarks/trace_copies.py``). An array that is not immutable (one a caller swapped in) is copied.

        Args:
            memo: :func:`copy.deepcopy`'s memo dict.

        Returns:
            A new trace of the same class; its ``values`` is this trace's array (no bytes copied) when that is
            immutable (as every trace's own is), else an immutable copy; its other fields (``name``,
            ``metadata``, a subclass's own) are
            deep copies.
        """
        new = object.__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            if key == "values":
                if not _is_immutable(value):
                    value = _immutable(value)
            else:
                value = copy.deepcopy(value, memo)
            object.__setattr__(new, key, value)
        return new

    def __setstate__(self, state: dict) -> None:
        """Unpickling: the fields as pickled, ``values`` immutable again (NumPy unpickles arrays writable)."""
        for key, value in state.items():
            object.__setattr__(self, key, value)
        values = self.__dict__.get("values")
        if isinstance(values, np.ndarray):
            object.__setattr__(self, "values", _immutable(values))

    @property
    def dim(self) -> int:
        """Context dimension ``d``."""
        return int(self.values.shape[1])

    def scaled(self, divisor: float) -> "ContextTrace":
        """Return the trace divided by ``divisor`` (the per-environment wind divisors of the spec table).

        The divided array is made once per immutable ``values`` array and divisor and shared by every caller
        while any of them holds it: each seed's environment of a population divides the same trace (its deep
        copies share ``values``, :meth:`__deepcopy__`), and a private array each cost 8 * T * d bytes, 1.6 GB for
        5 seeds on a 20M-step trace (``benchmarks/trace_copies.py --env lcpo/WindyInvertedDoublePendulum-v0``).
        The division is elementwise IEEE float64, so a shared result is bit-identical to a fresh one. Both arrays
        are immutable (backed by ``bytes``: NumPy refuses to make them writable), so a cached quotient cannot go
        stale; a trace whose ``values`` a caller swapped for a mutable array gets a private quotient.

        Args:
            divisor: a finite, non-zero number; 1 returns this trace itself.

        Returns:
            A :class:`ContextTrace` named ``"<name>/<divisor>"`` whose metadata adds ``divisor``; its ``values``
            is ``values / divisor``, float64, shape ``(T, d)``, immutable.

        Raises:
            TraceError: a ``divisor`` that is not a finite non-zero number, or one so small that a divided value
                overflows (the message names the trace and the divisor).
        """
        try:
            if isinstance(divisor, (str, bytes)):
                raise TypeError
            divisor = float(divisor)
        except (TypeError, ValueError, OverflowError):
            raise TraceError(f"trace {self.name!r}: invalid divisor {divisor!r}") from None
        if not np.isfinite(divisor) or divisor == 0:
            raise TraceError(f"trace {self.name!r}: invalid divisor {divisor}")
        if divisor == 1:
            return self
        values = _shared_quotient(self.values, divisor)
        if not (np.isfinite(values.min()) and np.isfinite(values.max())):
            raise TraceError(f"trace {self.name!r}: divisor {divisor:g} overflows a divided value to infinity")
        new = object.__new__(ContextTrace)
        object.__setattr__(new, "values", values)  # finite float64 (T, d), immutable: already valid
        object.__setattr__(new, "name", f"{self.name}/{divisor:g}")
        object.__setattr__(new, "metadata", dict(self.metadata, divisor=divisor))
        return new


#: ``(id(values), divisor) -> (weak reference to values, weak reference to values / divisor)``; entries whose
#: arrays are gone are dropped on the next lookup. Weak references only: the cache keeps no array alive.
_QUOTIENTS: dict[tuple[int, float], tuple[weakref.ref, weakref.ref]] = {}
_QUOTIENTS_LOCK = threading.RLock()


def _is_immutable(a: np.ndarray) -> bool:
    """Whether ``a``'s bytes can never change: a read-only array over a ``bytes`` object (NumPy refuses to make
    such an array writable again, unlike a read-only array that owns its data)."""
    if a.flags.writeable:
        return False
    base = a.base
    while isinstance(base, np.ndarray):  # a reshaped view's base is the 1-D array over the bytes
        if base.flags.writeable:
            return False
        base = base.base
    return isinstance(base, bytes)


def _immutable(a: np.ndarray) -> np.ndarray:
    """An immutable C-ordered float64 copy of ``a`` (same shape), backed by ``bytes``."""
    a = np.asarray(a, dtype=np.float64)
    return np.frombuffer(a.tobytes(order="C"), dtype=np.float64).reshape(a.shape)


def _shared_quotient(values: np.ndarray, divisor: float) -> np.ndarray:
    """``values / divisor`` as an immutable array, the same array for the same immutable ``values`` and divisor.

    Args:
        values: a trace's float64 ``(T, d)`` array.
        divisor: finite, non-zero.

    Returns:
        An immutable float64 ``(T, d)`` array; shared with earlier callers when ``values`` is immutable and their
        result is still alive, else new (a mutable ``values`` is never cached: it may change).
    """
    if not _is_immutable(values):
        with np.errstate(over="ignore"):  # an overflow is the caller's one-line error
            return _immutable(values / divisor)
    key = (id(values), divisor)
    with _QUOTIENTS_LOCK:  # re-entrant: a finalizer run by a collection in here may call scaled() itself
        for k, (base, quot) in list(_QUOTIENTS.items()):
            if base() is None or quot() is None:
                _QUOTIENTS.pop(k, None)
        hit = _QUOTIENTS.get(key)
        if hit is not None and hit[0]() is values:
            quot = hit[1]()
            if quot is not None:
                return quot
        with np.errstate(over="ignore"):
            out = _immutable(values / divisor)
        _QUOTIENTS[key] = (weakref.ref(values), weakref.ref(out))
        return out
