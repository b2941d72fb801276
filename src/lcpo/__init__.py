"""lcpo: online reinforcement learning in non-stationary, context-driven environments.

Locally Constrained Policy Optimization (Hamadanian et al., ICLR 2025) and its baselines, the windy
environments, context traces, and the online loop that scores agents by their lifelong return.

Subpackages (``docs/architecture.md``): ``contexts``, ``envs``, ``online`` (the loop and one run), ``agents``,
``memory``, ``ood``, ``optim``, ``numerics`` (returns, targets, categorical math, the return normaliser),
``persistence`` (atomic writes, checkpoints, run locks, run logs), ``experiments`` and ``cli``.

The modules that sat at the package root before the layout of issue 24 (``lcpo.loop``, ``lcpo.run``,
``lcpo.checkpoint``, ...) still import under their old names: :data:`MOVED` maps each old name to its new home, and
importing the old name gives the very same module object.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

__version__ = "0.1.0"

#: Old module name -> new module name (issue 24's layout); ``import lcpo.loop`` keeps working.
MOVED = {
    "lcpo.atomic": "lcpo.persistence.atomic",
    "lcpo.checkpoint": "lcpo.persistence.checkpoint",
    "lcpo.runlock": "lcpo.persistence.runlock",
    "lcpo.runlog": "lcpo.persistence.runlog",
    "lcpo.categorical": "lcpo.numerics.categorical",
    "lcpo.returns": "lcpo.numerics.returns",
    "lcpo.targets": "lcpo.numerics.targets",
    "lcpo.normalize": "lcpo.numerics.normalize",
    "lcpo.run": "lcpo.online.run",
    "lcpo.loop": "lcpo.online.loop",
    "lcpo.threads": "lcpo.online.threads",
    "lcpo.nets": "lcpo.agents.nets",
    "lcpo.forgetting": "lcpo.experiments.drift",  # it held the drift measure (issue 27 renamed it)
    "lcpo.catalog": "lcpo.cli.catalog",
    "lcpo.gridworld_experiment": "lcpo.experiments.gridworld",
}


class _MovedModuleLoader(importlib.abc.Loader):
    """Loads an old module name as the module at its new name (the same object, registered under both)."""

    def __init__(self, target: str) -> None:
        self._target = target

    def create_module(self, spec):
        return importlib.import_module(self._target)

    def exec_module(self, module) -> None:  # the target module is already executed
        pass


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the names of :data:`MOVED` (and nothing else)."""

    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedModuleLoader(new))


if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedModuleFinder())
