"""Gymnasium environments whose dynamics are driven by an exogenous context trace."""

from lcpo.envs.context import ContextSpec, get_context_spec
from lcpo.envs.discretize import DiscretizeActions
from lcpo.envs.registration import ENV_IDS, make_env, register_envs

register_envs()

__all__ = ["ContextSpec", "get_context_spec", "DiscretizeActions", "ENV_IDS", "make_env", "register_envs"]
