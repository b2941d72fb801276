"""The context trace type: a ``(T, d)`` float array with a name and metadata.

A trace is global time for an environment: index ``t`` is the context applied at environment step ``t``,
continuing across episode resets and wrapping at the end (ARCHITECTURE.md, "Context trace").
"""

from __future__ import annotations

import copy
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
        """A deep copy that shares the read-only ``values`` array and copies the rest (name, metadata).

        ``values`` cannot be written through (its write flag is off), so sharing it is indistinguishable from
        copying it, and a copy is what Gymnasium makes of an environment's constructor arguments: every wrapper
        of ``gym.make`` keeps a deep copy of the environment's spec, whose kwargs hold the trace. Duplicating
        the array there cost 8 * T * d bytes per wrapper and environment: 4.8 GB for a population of 5 windy
        MuJoCo seeds on a 20M-step trace (three wrappers each; measured with tracemalloc,
        ``benchmarks/trace_copies.py``).

        Args:
            memo: :func:`copy.deepcopy`'s memo dict.

        Returns:
            A new :class:`ContextTrace` whose ``values`` is this trace's array (same object, no bytes copied).
        """
        new = object.__new__(type(self))
        memo[id(self)] = new
        object.__setattr__(new, "values", self.values)
        object.__setattr__(new, "name", self.name)
        object.__setattr__(new, "metadata", copy.deepcopy(self.metadata, memo))
        return new

    @property
    def dim(self) -> int:
        """Context dimension ``d``."""
        return int(self.values.shape[1])

    def scaled(self, divisor: float) -> "ContextTrace":
        """Return the trace divided by ``divisor`` (the per-environment wind divisors of the spec)."""
        if not np.isfinite(divisor) or divisor == 0:
            raise TraceError(f"trace {self.name!r}: invalid divisor {divisor}")
        if divisor == 1:
            return self
        meta = dict(self.metadata, divisor=float(divisor))
        return ContextTrace(self.values / divisor, f"{self.name}/{divisor:g}", meta)
