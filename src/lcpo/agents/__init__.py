"""Agents sharing the ``act / observe / learn / save / load`` contract.

:data:`AGENTS` maps CLI names to classes. Entries are ``"module:Class"`` strings imported on first use, so each
algorithm lives in its own module, a name is listed only once its module exists, and listing the names (or
:data:`SUMMARIES`, their one-line descriptions) imports neither PyTorch nor any algorithm: ``lcpo agents list``
answers at once. ``from lcpo.agents import LCPO`` imports the class (and PyTorch) on first access.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping

_ENTRIES: dict[str, str] = {
    "a2c": "lcpo.agents.a2c:A2C",
    "lcpo": "lcpo.agents.lcpo:LCPO",
    "tabular-a2c": "lcpo.agents.tabular_a2c:TabularA2C",
    "trpo": "lcpo.agents.trpo:TRPO",
    "ppo": "lcpo.agents.ppo:PPO",
    "lcpo-p": "lcpo.agents.lcpo_p:LCPOP",
    "ddqn": "lcpo.agents.ddqn:DDQN",
    "sac": "lcpo.agents.sac:SAC",
    "prescient-a2c": "lcpo.agents.prescient:PrescientA2C",
    "prescient-trpo": "lcpo.agents.prescient:PrescientTRPO",
    "prescient-ddqn": "lcpo.agents.prescient:PrescientDDQN",
    "prescient-sac": "lcpo.agents.prescient:PrescientSAC",
    "ewc": "lcpo.agents.ewc:EWC",
    "ogd": "lcpo.agents.ogd:OGD",
    "clear": "lcpo.agents.clear:CLEAR",
    "ptdqn": "lcpo.agents.ptdqn:PTDQN",
    "bfdqn": "lcpo.agents.bfdqn:BennaFusiDQN",
    "mbcd": "lcpo.agents.mbcd:MBCD",
    "mbpo": "lcpo.agents.mbpo:MBPO",
}

#: agent name -> one-line summary (the first sentence of the class docstring, as
#: :func:`lcpo.cli.info.doc_summary` renders it; ``tests/cli/test_info_cli.py`` checks that they agree), kept
#: here so that listing agents imports no algorithm.
SUMMARIES: dict[str, str] = {
    "a2c": "Online A2C with a product-of-categoricals actor.",
    "lcpo": "Online LCPO agent.",
    "tabular-a2c": "A2C with a logit table and a value table, one row per discrete state.",
    "trpo": "Online single-path TRPO with a product-of-categoricals actor.",
    "ppo": "Online PPO-Clip with a product-of-categoricals actor.",
    "lcpo-p": "Online LCPO-P agent.",
    "ddqn": "Online Double DQN with per-dimension Q-heads and epsilon-greedy exploration.",
    "sac": "Online discrete soft actor-critic with twin factorized critics.",
    "prescient-a2c": "Prescient A2C (lcpo.agents.a2c.A2C trained offline on the whole trace).",
    "prescient-trpo": "Prescient TRPO (lcpo.agents.trpo.TRPO trained offline on the whole trace).",
    "prescient-ddqn": "Prescient Double DQN (lcpo.agents.ddqn.DDQN trained offline on the whole trace; imported on "
                      "first use).",
    "prescient-sac": "Prescient discrete SAC (lcpo.agents.sac.SAC trained offline on the whole trace; imported on "
                     "first use).",
    "ewc": "Online EWC on discrete SAC.",
    "ogd": "Sliding OGD on discrete SAC.",
    "clear": "CLEAR on the shared actor-critic networks.",
    "ptdqn": "Double DQN on the sum of a permanent and a transient Q-network.",
    "bfdqn": "Double DQN with Benna-Fusi synaptic consolidation of the online Q-network's weights after every "
             "optimizer step.",
    "mbcd": "One SAC agent and one dynamics model per detected task, switched by CUSUM change detection.",
    "mbpo": "Discrete SAC trained on real transitions and short model rollouts from real states.",
}

#: Other public names of this package, imported on first access: name -> "module:attribute".
_LAZY: dict[str, str] = {
    "Agent": "lcpo.agents.base:Agent",
    "OnPolicyAgent": "lcpo.agents.base:OnPolicyAgent",
    "A2CHyperparameters": "lcpo.agents.a2c:A2CHyperparameters",
    "LCPOHyperparameters": "lcpo.agents.lcpo:LCPOHyperparameters",
    "AgentPopulation": "lcpo.agents.population:AgentPopulation",
    "make_population": "lcpo.agents.population:make_population",
    "BATCH_NATIVE": "lcpo.agents.population:BATCH_NATIVE",
}


class AgentRegistry(Mapping):
    """Read-only mapping ``name -> agent class`` over the agents whose modules exist (imported lazily)."""

    def __init__(self, entries: dict[str, str]):
        self._entries = entries
        self._cache: dict[str, type] = {}

    def _available(self, name: str) -> bool:
        if name not in self._entries:
            return False
        module = self._entries[name].split(":")[0]
        return importlib.util.find_spec(module) is not None

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and self._available(name)

    def __getitem__(self, name: str) -> type:
        if name not in self._cache:
            if not self._available(name):
                raise KeyError(f"unknown agent {name!r}; known agents: {sorted(self)}")
            module, attr = self._entries[name].split(":")
            self._cache[name] = getattr(importlib.import_module(module), attr)
        return self._cache[name]

    def __iter__(self):
        return (n for n in self._entries if self._available(n))

    def __len__(self) -> int:
        return sum(1 for _ in self)


#: agent name (CLI ``--agent``) -> class
AGENTS = AgentRegistry(_ENTRIES)


def __getattr__(name: str):
    """``from lcpo.agents import TRPO`` etc.: classes of the registry (and :data:`_LAZY`), imported on first
    access."""
    if name in _LAZY:
        module, attr = _LAZY[name].split(":")
        return getattr(importlib.import_module(module), attr)
    for key, entry in _ENTRIES.items():
        if entry.split(":")[1] == name and key in AGENTS:
            return AGENTS[key]
    raise AttributeError(f"module 'lcpo.agents' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {e.split(":")[1] for e in _ENTRIES.values()})


__all__ = ["A2C", "A2CHyperparameters", "Agent", "OnPolicyAgent", "LCPO", "LCPOHyperparameters", "AGENTS",
           "AgentRegistry", "SUMMARIES", "AgentPopulation", "make_population", "BATCH_NATIVE"]
