"""Benna-Fusi DQN: Double DQN whose every weight is coupled to a chain of hidden variables at geometric time
scales (Benna & Fusi 2016, "Computational principles of synaptic memory consolidation"; used for continual RL by
Kaplanis, Shanahan & Clopath 2018); LCPO paper appendix D, Table 11 (chain depth 13).

Each weight ``w = u_1`` is the first of ``N`` (``depth``) variables ``u_1 .. u_N`` forming a chain of "beakers":
variable ``k`` has capacity ``C_k = 2^(k-1)`` and is joined to ``k + 1`` by a tube of conductance
``g_k = g_1 2^-(k-1)`` (so time scales ``C_k / g_k`` grow by 4 per level); the last one leaks to zero through
``g_N = g_1 2^-(N-1)`` (``leak=True``). After every optimizer step (which moves ``u_1``) one explicit Euler step
of unit length is applied to every chain, all variables updated from their old values::

    u_k <- u_k + ( g_{k-1} (u_{k-1} - u_k) - g_k (u_k - u_{k+1}) ) / C_k,     g_0 = 0,  u_{N+1} = 0

(Benna & Fusi 2016, eq. 1, discretized). Without the leak, ``sum_k C_k u_k`` is conserved by the chain step.
Hidden variables start equal to the initial weights. Everything else is Double DQN
(:class:`lcpo.agents.ddqn.DDQN`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import gymnasium as gym
import torch

from lcpo.agents.ddqn import DDQN, DDQNHyperparameters

__all__ = ["BennaFusiChain", "BennaFusiDQN", "BennaFusiHyperparameters"]


class BennaFusiChain:
    """Benna-Fusi hidden-variable chains for a list of parameters (see module docstring).

    Args:
        params: the parameters ``u_1`` (updated in place by :meth:`step`).
        depth: chain length ``N >= 2`` (including the visible weight).
        g1: conductance ``g_1`` between ``u_1`` and ``u_2`` in (0, 0.5] (the explicit step is stable for these).
        leak: whether ``u_N`` leaks to zero.

    Attributes:
        hidden: ``(N - 1, P)`` float32 tensor of ``u_2 .. u_N`` for the ``P`` parameters flattened.
        capacities: ``(N,)`` float32 ``C_k``; conductances: ``(N,)`` float32 ``g_1 .. g_N`` (``g_N = 0``
            without leak).

    Raises:
        ValueError: on a depth < 2 or a conductance outside (0, 0.5].
    """

    def __init__(self, params: list[torch.Tensor], depth: int, g1: float, leak: bool = True):
        if not isinstance(depth, int) or depth < 2:
            raise ValueError(f"Benna-Fusi chain depth must be an integer >= 2, got {depth!r}")
        if not (math.isfinite(g1) and 0.0 < g1 <= 0.5):
            raise ValueError(f"Benna-Fusi conductance g1 must lie in (0, 0.5], got {g1}")
        self.params = list(params)
        k = torch.arange(depth, dtype=torch.float64)
        self.capacities = (2.0 ** k).float()
        g = g1 * 2.0 ** (-k)
        if not leak:
            g[-1] = 0.0
        self.conductances = g.float()
        with torch.no_grad():
            flat = self._flat()
        self.hidden = flat.unsqueeze(0).repeat(depth - 1, 1)
        self._g = self.conductances[:, None]
        self._c = self.capacities[:, None]

    def _flat(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.params])

    @torch.no_grad()
    def step(self) -> None:
        """One unit Euler step of every chain; writes the new ``u_1`` back into the parameters."""
        u = torch.cat([self._flat().unsqueeze(0), self.hidden])  # (N, P)
        nxt = torch.cat([u[1:], torch.zeros_like(u[:1])])  # u_{k+1}, with u_{N+1} = 0
        out_flow = self._g * (u - nxt)  # flow from k to k + 1
        in_flow = torch.cat([torch.zeros_like(out_flow[:1]), out_flow[:-1]])
        u = u + (in_flow - out_flow) / self._c
        self.hidden.copy_(u[1:])
        torch._foreach_copy_(self.params, [v.view_as(p) for v, p in
                                           zip(u[0].split([p.numel() for p in self.params]), self.params)])


@dataclass(frozen=True)
class BennaFusiHyperparameters(DDQNHyperparameters):
    """Double DQN settings plus the chain's.

    Attributes:
        depth: variables per chain, the weight included (13, Table 11).
        g1: conductance between a weight and its first hidden variable (time scale ``C_2 / g_1 = 200`` steps,
            one epoch, for the default 0.01).
        leak: the deepest variable leaks to zero (Benna & Fusi 2016).
    """

    depth: int = 13
    g1: float = 0.01
    leak: bool = True


class BennaFusiDQN(DDQN):
    """Double DQN with Benna-Fusi synaptic consolidation of the online Q-network's weights after every
    optimizer step (see module docstring).

    Attributes:
        chain: the :class:`BennaFusiChain` of the online Q-network's parameters.

    Raises:
        ValueError: for invalid hyperparameters (named); TypeError for unsupported spaces.
    """

    name = "bfdqn"
    Hyperparameters = BennaFusiHyperparameters

    def __init__(self, env: gym.Env, seed: int = 0, hparams=None, **overrides):
        super().__init__(env, seed, hparams, **overrides)
        self.chain = BennaFusiChain(self._q_params, self.hp.depth, self.hp.g1, self.hp.leak)
        self.opt.register_step_post_hook(lambda *_: self.chain.step())

    def state_dict(self) -> dict:
        """Double DQN's state plus the hidden variables."""
        return {**super().state_dict(), "chain_hidden": self.chain.hidden.clone()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly.

        Raises:
            ValueError: on hidden variables of another shape; as :meth:`DDQN.load_state_dict` otherwise.
        """
        h = state["chain_hidden"]
        if tuple(h.shape) != tuple(self.chain.hidden.shape):
            raise ValueError(f"state 'chain_hidden' has shape {tuple(h.shape)}, expected "
                             f"{tuple(self.chain.hidden.shape)}")
        super().load_state_dict(state)
        self.chain.hidden.copy_(h)
