"""Agents sharing the ``act / observe / learn / save / load`` contract."""

from lcpo.agents.a2c import A2C, A2CHyperparameters
from lcpo.agents.base import Agent, OnPolicyAgent
from lcpo.agents.lcpo import LCPO, LCPOHyperparameters

#: agent name (CLI ``--agent``) -> class
AGENTS: dict[str, type] = {"a2c": A2C, "lcpo": LCPO}

__all__ = ["A2C", "A2CHyperparameters", "Agent", "OnPolicyAgent", "LCPO", "LCPOHyperparameters", "AGENTS"]
