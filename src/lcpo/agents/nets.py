"""Policy and value networks, and the NumPy mirror of the policy used on the per-step hot path.

The paper's networks (Table 11): MLP (64, 64) ReLU; the actor outputs one softmax per action dimension
(a product of categoricals over ``bins`` choices each); the critic outputs one value.

Acting happens once per environment step, so it must not build an autograd graph nor allocate: after every
update the agent copies the actor's weights into a :class:`NumpyPolicy`, which samples with preallocated
buffers and pre-drawn Gumbel noise (Gumbel-max sampling: ``argmax(logits + G)`` is a draw from
``softmax(logits)``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from lcpo.numerics import categorical

__all__ = ["mlp", "CategoricalPolicy", "ValueNet", "NumpyPolicy", "TorchPolicy", "make_fast_policy",
           "make_actor_critic", "make_body", "NETWORKS", "is_plain_mlp", "action_shape_of"]


def action_shape_of(space) -> tuple[int, int]:
    """``(dims, bins)`` of a Discrete or MultiDiscrete action space (equal bins per dimension).

    Raises:
        TypeError: for other spaces, or a MultiDiscrete with unequal bins per dimension.
    """
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        if space.start != 0:
            raise TypeError(f"Discrete action spaces must start at 0, got start={space.start}")
        return 1, int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec).reshape(-1)
        if not np.all(nvec == nvec[0]):
            raise TypeError(f"MultiDiscrete with unequal bins per dimension is not supported: {nvec}")
        return int(nvec.shape[0]), int(nvec[0])
    raise TypeError(f"lcpo agents need a Discrete or MultiDiscrete action space (use DiscretizeActions), got {space}")


def mlp(sizes: Sequence[int]) -> nn.Sequential:
    """``Linear -> ReLU -> ... -> Linear`` with the given layer sizes (no activation after the last)."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class CategoricalPolicy(nn.Module):
    """Product-of-categoricals policy: ``pi(a | s) = prod_d softmax(logits(s)[d])[a_d]``.

    Args:
        obs_dim: observation size.
        dims: number of action dimensions ``D``.
        bins: choices per dimension ``K``.
        hidden: hidden layer sizes ((64, 64) in the paper).
        body: optional custom network ``(B, obs_dim) -> (B, D * K)`` replacing the MLP (e.g. the
            permutation-invariant network of the straggler environment).

    Shapes:
        ``forward(obs (B, obs_dim) float32) -> logits (B, D, K)``.
    """

    def __init__(self, obs_dim: int, dims: int, bins: int, hidden: Sequence[int] = (64, 64),
                 body: nn.Module | None = None):
        super().__init__()
        self.obs_dim, self.dims, self.bins = int(obs_dim), int(dims), int(bins)
        self.body = body if body is not None else mlp([self.obs_dim, *hidden, self.dims * self.bins])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, obs_dim)`` float32 observations -> ``(B, D, K)`` logits."""
        return self.body(obs).view(-1, self.dims, self.bins)

    def log_probs(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, D, K)`` log-probabilities of every choice (``-inf`` where a logit is ``-inf``)."""
        return categorical.log_probs(self.forward(obs))

    @staticmethod
    def log_prob_of(logp_all: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``(B,)`` log-probability of ``actions (B, D)`` int64 under ``logp_all (B, D, K)``
        (:func:`lcpo.numerics.categorical.log_prob_of`)."""
        return categorical.log_prob_of(logp_all, actions)

    @staticmethod
    def entropy_of(logp_all: torch.Tensor) -> torch.Tensor:
        """``(B,)`` entropy (nats), summed over action dimensions; ``0 log 0 = 0``
        (:func:`lcpo.numerics.categorical.entropy`)."""
        return categorical.entropy(logp_all)

    @staticmethod
    def kl(logp_old: torch.Tensor, logp_new: torch.Tensor) -> torch.Tensor:
        """``(B,)`` KL(pi_old || pi_new), summed over action dimensions (nats); ``>= 0`` by construction, exact
        with zero-probability choices (:func:`lcpo.numerics.categorical.kl`)."""
        return categorical.kl(logp_old, logp_new)


class ValueNet(nn.Module):
    """State-value network ``V(s)``: ``(B, obs_dim) -> (B,)`` (an MLP, or a custom ``body`` ending in 1 output)."""

    def __init__(self, obs_dim: int, hidden: Sequence[int] = (64, 64), body: nn.Module | None = None):
        super().__init__()
        self.body = body if body is not None else mlp([int(obs_dim), *hidden, 1])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, obs_dim)`` float32 observations -> ``(B,)`` values."""
        return self.body(obs).squeeze(-1)


class NumpyPolicy:
    """Allocation-free NumPy forward pass and sampler mirroring a :class:`CategoricalPolicy`.

    Call :meth:`sync` after every parameter change. :meth:`sample` costs a few microseconds.

    Args:
        policy: the torch policy to mirror (its ``body`` must be Linear/ReLU layers).
    """

    def __init__(self, policy: CategoricalPolicy):
        self.dims, self.bins = policy.dims, policy.bins
        self._linears = [m for m in policy.body if isinstance(m, nn.Linear)]
        self.weights = [np.zeros((m.in_features, m.out_features), dtype=np.float32) for m in self._linears]
        self.biases = [np.zeros(m.out_features, dtype=np.float32) for m in self._linears]
        self._acts = [np.zeros(m.out_features, dtype=np.float32) for m in self._linears]
        self._x = np.zeros(policy.obs_dim, dtype=np.float32)
        self._scratch = np.zeros(self.dims * self.bins, dtype=np.float32)
        self.sync()

    def sync(self) -> None:
        """Copy the torch weights into the NumPy arrays (in place)."""
        with torch.no_grad():
            for lin, w, b in zip(self._linears, self.weights, self.biases):
                w[...] = lin.weight.detach().cpu().numpy().T
                b[...] = lin.bias.detach().cpu().numpy()

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """``(D, K)`` logits of one observation (a view of an internal buffer: copy it to keep it)."""
        x = self._x
        x[...] = obs
        last = len(self.weights) - 1
        for i, (w, b, out) in enumerate(zip(self.weights, self.biases, self._acts)):
            np.dot(x, w, out=out)
            out += b
            if i < last:
                np.maximum(out, 0.0, out=out)
            x = out
        return x.reshape(self.dims, self.bins)

    def sample(self, obs: np.ndarray, gumbel: np.ndarray) -> np.ndarray:
        """Draw an action ``(D,)`` int64 via Gumbel-max with pre-drawn noise ``gumbel (D * K,)`` float32."""
        logits = self.logits(obs)
        s = self._scratch
        np.add(logits.reshape(-1), gumbel, out=s)
        return s.reshape(self.dims, self.bins).argmax(axis=1)

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """Most probable action ``(D,)`` int64."""
        return self.logits(obs).argmax(axis=1)


class TorchPolicy:
    """Fallback of :class:`NumpyPolicy` for policies that are not plain MLPs: torch inference per step.

    Same interface (``sync``, ``logits``, ``sample``, ``greedy``); slower (tens of microseconds per call).
    """

    def __init__(self, policy: CategoricalPolicy):
        self.policy, self.dims, self.bins = policy, policy.dims, policy.bins

    def sync(self) -> None:
        """Nothing to copy: the torch module is used directly."""

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """``(D, K)`` logits of one observation ``(obs_dim,)``."""
        with torch.inference_mode():
            x = torch.as_tensor(obs, dtype=torch.float32, device=next(self.policy.parameters()).device)
            return self.policy(x.reshape(1, -1))[0].cpu().numpy()

    def sample(self, obs: np.ndarray, gumbel: np.ndarray) -> np.ndarray:
        """Gumbel-max draw ``(D,)`` int64 with pre-drawn noise ``gumbel (D * K,)``."""
        return (self.logits(obs) + gumbel.reshape(self.dims, self.bins)).argmax(axis=1)

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """Most probable action ``(D,)`` int64."""
        return self.logits(obs).argmax(axis=1)


def is_plain_mlp(policy: nn.Module) -> bool:
    """True if ``policy`` is a :class:`CategoricalPolicy` whose body alternates Linear and ReLU layers."""
    body = getattr(policy, "body", None)
    if not isinstance(policy, CategoricalPolicy) or not isinstance(body, nn.Sequential) or len(body) == 0:
        return False
    kinds = [type(m) for m in body]
    return all(k is (nn.Linear if i % 2 == 0 else nn.ReLU) for i, k in enumerate(kinds)) and kinds[-1] is nn.Linear


def make_fast_policy(policy: CategoricalPolicy):
    """The per-step acting path of a policy: a body's own ``fast_policy(policy)`` mirror if it offers one (e.g. the
    straggler network's NumPy copy), :class:`NumpyPolicy` for plain MLPs, else :class:`TorchPolicy`."""
    own = getattr(getattr(policy, "body", None), "fast_policy", None)
    if callable(own):
        return own(policy)
    return NumpyPolicy(policy) if is_plain_mlp(policy) else TorchPolicy(policy)


#: network kind -> ``"module:factory"``; a factory is ``(env, obs_dim, out_dim, hidden) -> nn.Module`` mapping
#: ``(B, obs_dim)`` observations to ``(B, out_dim)`` outputs (logits, a value, or Q-values).
NETWORKS: dict[str, str] = {
    "perm-invariant": "lcpo.envs.straggler.nets:perm_invariant_body",
}


def make_body(env, obs_dim: int, out_dim: int, hidden: Sequence[int] = (64, 64), kind: str = "auto") -> nn.Module:
    """A network ``(B, obs_dim) -> (B, out_dim)`` of the requested kind.

    Args:
        env: the environment (its ``unwrapped.default_network`` attribute picks the kind when ``kind="auto"``).
        obs_dim: observation size.
        out_dim: output size (``dims * bins`` logits or Q-values, or 1 for a value).
        hidden: hidden sizes of an MLP.
        kind: ``"auto"``, ``"mlp"`` or a key of :data:`NETWORKS`.

    Raises:
        ValueError: for an unknown network kind (names the known ones).
    """
    if kind == "auto":
        kind = getattr(getattr(env, "unwrapped", env), "default_network", "mlp")
    if kind == "mlp":
        return mlp([int(obs_dim), *hidden, int(out_dim)])
    if kind not in NETWORKS:
        raise ValueError(f"unknown network kind {kind!r}; known: ['auto', 'mlp', {', '.join(map(repr, NETWORKS))}]")
    import importlib

    module, attr = NETWORKS[kind].split(":")
    return getattr(importlib.import_module(module), attr)(env, int(obs_dim), int(out_dim), tuple(hidden))


def make_actor_critic(env, obs_dim: int, dims: int, bins: int, hidden: Sequence[int] = (64, 64),
                      kind: str = "auto") -> tuple[CategoricalPolicy, ValueNet]:
    """Actor (product of categoricals) and critic for an environment, with bodies from :func:`make_body`.

    Raises:
        ValueError: for an unknown network kind.
    """
    actor = CategoricalPolicy(obs_dim, dims, bins, hidden, body=make_body(env, obs_dim, dims * bins, hidden, kind))
    critic = ValueNet(obs_dim, hidden, body=make_body(env, obs_dim, 1, hidden, kind))
    return actor, critic
