"""Start-up cost of PyTorch's optimizers: no ``torch._dynamo`` import for eager-mode training (issue 24 item 9).

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
* each ``torch.optim`` optimizer's ``step`` (PyTorch's ``_use_grad`` wrapper: grad mode set to the
  optimizer's ``differentiable`` flag around the update, between two ``graph_break()`` calls) runs the same
  update in the same grad mode without the graph breaks, and runs PyTorch's wrapper itself under compilation.

Eager results are unchanged (the same update functions run on the same arguments in the same grad mode; tested
bit for bit); under ``torch.compile`` the behaviour is PyTorch's own.
"""

from __future__ import annotations

import importlib
import sys

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
    count = _patch_steps(torch)
    candidates = [vars(torch.optim.Optimizer).get(n) for n in
                  ("add_param_group", "zero_grad", "state_dict", "load_state_dict")]
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("torch.optim."):
            candidates += [v for v in vars(module).values() if callable(v) and hasattr(v, "__wrapped__")]
    for c in candidates:
        for inner in _inner_wrappers(c, inner_code):
            cells = dict(zip(inner_code.co_freevars, inner.__closure__))
            fn = cells["fn"].cell_contents
            recursive = cells["recursive"].cell_contents if "recursive" in cells else True
            if getattr(fn, "__dynamo_disable", None) is None:
                fn.__dynamo_disable = _shim(fn, recursive)
                count += 1
    return count


def _eager_step(step):
    """``Optimizer.step`` without ``torch._dynamo.graph_break()`` (a no-op outside compilation) in eager mode:
    PyTorch's ``_use_grad_for_differentiable`` wrapper, whose ``import torch._dynamo`` is the cost, minus that
    import; under compilation the original wrapper runs."""
    import functools

    import torch

    impl, is_compiling = step.__wrapped__, torch.compiler.is_compiling

    @functools.wraps(impl)
    def eager_or_original(self, *args, **kwargs):
        if is_compiling():
            return step(self, *args, **kwargs)
        prev = torch.is_grad_enabled()
        try:
            torch.set_grad_enabled(self.defaults["differentiable"])
            return impl(self, *args, **kwargs)
        finally:
            torch.set_grad_enabled(prev)

    eager_or_original.__lcpo_original__ = step
    return eager_or_original


def _patch_steps(torch) -> int:
    """Give every ``torch.optim`` optimizer class whose ``step`` is PyTorch's ``_use_grad`` wrapper the eager
    version (before any instance exists: ``Optimizer.__init__`` then adds its profiling hook around it)."""
    count = 0
    for cls in vars(torch.optim).values():
        step = vars(cls).get("step") if isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer) else None
        code = getattr(step, "__code__", None)
        if code is not None and code.co_name == "_use_grad" and hasattr(step, "__wrapped__"):
            cls.step = _eager_step(step)
            count += 1
    return count


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
            real = importlib.import_module("torch._dynamo").disable(fn, recursive, wrapping=False)
            fn.__dynamo_disable = real
            return real(*args, **kwargs)
        return fn(*args, **kwargs)

    return eager_or_disabled
