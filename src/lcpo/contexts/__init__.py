"""Context traces: the exogenous, time-varying input that drives an environment (paper Section 2, Figure 7).

A trace is a ``(T, d)`` float array plus a name and metadata (:class:`ContextTrace`); index ``t`` is the context
at global environment step ``t``. This package validates traces, reads and writes them (:func:`load_trace`,
:func:`save_trace`), generates synthetic ones (:mod:`lcpo.contexts.generators`), and names the canonical ones
(:data:`TRACE_NAMES`, :func:`resolve_trace`; see :mod:`lcpo.contexts.canonical`).
"""

from lcpo.contexts import generators
from lcpo.contexts.canonical import DEFAULT_LENGTH, DEFAULT_TRACE, PAPER_LENGTHS, TRACE_NAMES, make_trace, resolve_trace
from lcpo.contexts.io import load_trace, save_trace
from lcpo.contexts.trace import ContextTrace, TraceError

__all__ = [
    "ContextTrace",
    "TraceError",
    "save_trace",
    "load_trace",
    "generators",
    "TRACE_NAMES",
    "DEFAULT_TRACE",
    "DEFAULT_LENGTH",
    "PAPER_LENGTHS",
    "make_trace",
    "resolve_trace",
]
