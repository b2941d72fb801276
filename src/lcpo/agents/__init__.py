"""Agents sharing the ``act / observe / learn / save / load`` contract.

:data:`AGENTS` maps CLI names to classes. Entries are ``"module:Class"`` strings imported on first use, so each
algorithm lives in its own module and a name is listed only once its module exists.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping

from lcpo.agents.a2c import A2C, A2CHyperparameters
from lcpo.agents.base import Agent, OnPolicyAgent
from lcpo.agents.lcpo import LCPO, LCPOHyperparameters

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
    """``from lcpo.agents import TRPO`` etc.: classes of the registry, imported on first access."""
    for key, entry in _ENTRIES.items():
        if entry.split(":")[1] == name and key in AGENTS:
            return AGENTS[key]
    raise AttributeError(f"module 'lcpo.agents' has no attribute {name!r}")

__all__ = ["A2C", "A2CHyperparameters", "Agent", "OnPolicyAgent", "LCPO", "LCPOHyperparameters", "AGENTS",
           "AgentRegistry"]
