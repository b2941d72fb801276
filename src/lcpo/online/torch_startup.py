"""Start-up cost of PyTorch's optimizers: no ``torch._dynamo`` import for eager-mode training (issue 24 item 10).

PyTorch imports ``torch._dynamo``, its compiler, the first time an optimizer is used in eager mode: creating
one (``Optimizer.add_param_group``), ``zero_grad``, ``state_dict`` and ``load_state_dict`` and the functional
optimizers are wrapped in ``torch._disable_dynamo``, which imports it on the first call to exclude the function
from ``torch.compile`` graphs, and every ``Optimizer.step`` calls ``torch._dynamo.graph_break()``, a no-op
outside compilation. That import costs as much again as ``import torch`` (1-2 s on an idle core, 6 s on a
loaded one), for every ``lcpo run``, ``resume`` and sweep worker; this project never compiles.

:func:`defer_dynamo_import` removes that cost and nothing else:

* each of those wrapped functions gets the "disabled" version the wrapper would build on its first call: a
  shim that calls the function directly, as ``torch._dynamo.disable`` does outside compilation, and only while
  ``torch.compiler.is_compiling()`` builds and uses the real disabled function;
* ``torch._dynamo`` is registered as a deferred module whose ``graph_break()`` does nothing (as the real one
  does outside compilation) and whose every other attribute (``torch.compile`` reaches for several) imports
  the real module, which then replaces it everywhere.

Eager results are unchanged (the same functions run on the same arguments); under ``torch.compile`` the
behaviour is PyTorch's own, after the import it would have done anyway.
"""

from __future__ import annotations

import importlib
import sys
import types

__all__ = ["defer_dynamo_import"]

_done = False


def defer_dynamo_import() -> int:
    """Pre-set the dynamo-disabled versions of ``torch.optim``'s wrapped functions (idempotent, ~0.1 ms).

    Returns:
        the number of functions given a shim (0 where ``torch._dynamo`` is already imported, on a second call,
        or on a PyTorch whose wrappers look different, in which case nothing is changed).
    """
    global _done
    if _done or "torch._dynamo" in sys.modules:
        return 0
    _done = True
    import torch
    import torch._compile
    import torch.optim

    probe = torch._compile._disable_dynamo(lambda: None)
    inner_code = getattr(probe, "__code__", None)
    if inner_code is None or "fn" not in inner_code.co_freevars:
        return 0
    _install_deferred_dynamo(torch)
    candidates = [vars(torch.optim.Optimizer).get(n) for n in
                  ("add_param_group", "zero_grad", "state_dict", "load_state_dict")]
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("torch.optim."):
            candidates += [v for v in vars(module).values() if callable(v) and hasattr(v, "__wrapped__")]
    count = 0
    for c in candidates:
        for inner in _inner_wrappers(c, inner_code):
            cells = dict(zip(inner_code.co_freevars, inner.__closure__))
            fn = cells["fn"].cell_contents
            recursive = cells["recursive"].cell_contents if "recursive" in cells else True
            if getattr(fn, "__dynamo_disable", None) is None:
                fn.__dynamo_disable = _shim(fn, recursive)
                count += 1
    return count


class _DeferredDynamo(types.ModuleType):
    """Stands in for ``torch._dynamo`` until something other than ``graph_break`` is asked of it."""

    def __init__(self) -> None:
        super().__init__("torch._dynamo", "torch._dynamo, imported on first use (lcpo.online.torch_startup)")

    @staticmethod
    def graph_break(msg: str = "") -> None:
        """``torch._dynamo.graph_break``: a no-op outside compilation (the real one once it is imported)."""
        real = sys.modules.get("torch._dynamo")
        if real is not None and not isinstance(real, _DeferredDynamo):
            real.graph_break(msg)

    def __getattr__(self, name: str):
        return getattr(_real_dynamo(), name)


def _install_deferred_dynamo(torch) -> None:
    deferred = _DeferredDynamo()
    sys.modules["torch._dynamo"] = deferred
    torch._dynamo = deferred


def _real_dynamo():
    """Import the real ``torch._dynamo`` (once), replacing the deferred stand-in in ``sys.modules`` and on
    ``torch``."""
    current = sys.modules.get("torch._dynamo")
    if current is not None and not isinstance(current, _DeferredDynamo):
        return current
    import torch

    sys.modules.pop("torch._dynamo", None)
    if isinstance(vars(torch).get("_dynamo"), _DeferredDynamo):
        delattr(torch, "_dynamo")
    return importlib.import_module("torch._dynamo")


def _inner_wrappers(c, inner_code) -> list:
    """The ``_disable_dynamo`` wrappers that ``c`` is, or holds in its closure (``_disable_dynamo_if_unsupported``)."""
    if getattr(c, "__code__", None) is inner_code:
        return [c]
    return [cell.cell_contents for cell in (getattr(c, "__closure__", None) or ())
            if getattr(_contents(cell), "__code__", None) is inner_code]


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _shim(fn, recursive: bool):
    import torch

    is_compiling = torch.compiler.is_compiling

    def eager_or_disabled(*args, **kwargs):
        if is_compiling():
            real = _real_dynamo().disable(fn, recursive, wrapping=False)
            fn.__dynamo_disable = real
            return real(*args, **kwargs)
        return fn(*args, **kwargs)

    return eager_or_disabled
