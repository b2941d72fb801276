"""The permutation-invariant network of the straggler environment (paper Section 6 / Appendix; spec
``shared/specs/straggler.md``, "Hyperparameters in the paper").

The servers are interchangeable, so the policy and the critic should not depend on which server holds which
queue. The network is a Deep-Sets model over the servers:

- ``phi``: an MLP ``2 -> 32 -> 16 -> 1`` (ReLU) applied to each server's pair (queue length at step end,
  time-averaged queue length during the step), observation entries ``j`` and ``N + j``;
- the ``N`` outputs of ``phi`` are averaged over the servers (one value);
- ``rho``: an MLP ``13 -> 32 -> 16 -> out_dim`` (ReLU) on that average concatenated with the 12 other
  observation entries (``2N .. 2N+11``: rates, sizes, load, EMAs, unsafe flag).

Queue scaling: queue lengths are counts from 0 to thousands under overload (the safety rule trips at 50). They
enter ``phi`` as ``log1p(q)`` (``log(1 + q)``: 0 stays 0, 1 -> 0.69, 3 -> 1.39, 50 -> 3.93, 10^4 -> 9.2), which
keeps the typical 0-5 range well resolved and bounds the inputs when the system overloads. The other 12
entries are already normalized by the environment (about 1 in typical operation) and enter ``rho`` unchanged.

Exact invariance: before ``phi`` the servers are sorted by (queue, average queue) with a stable sort, so a
permutation of the servers gives bit-identical ``phi`` inputs in the same positions and therefore
bit-identical outputs (not only equal up to floating-point summation order). Sorting is piecewise a
permutation of the inputs, so gradients with respect to the weights are unchanged by it.

Registered in :data:`lcpo.agents.nets.NETWORKS` as ``"perm-invariant"``; the environment sets
``default_network = "perm-invariant"``, so A2C, TRPO, LCPO, DDQN and SAC use it when their ``network``
hyperparameter is ``"auto"``.

Acting: :class:`NumpyPermInvariantPolicy` is an allocation-light NumPy mirror of a policy with this body for the
per-step hot path (about 10x faster than torch inference on one observation), with the interface of
:class:`lcpo.agents.nets.NumpyPolicy` (``sync``, ``logits``, ``sample``, ``greedy``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from lcpo.agents.nets import mlp

__all__ = ["N_OTHER_FEATURES", "NumpyPermInvariantPolicy", "NumpyPermInvariantStack", "PermInvariantNet",
           "perm_invariant_body"]

#: Observation entries after the ``2 N`` per-server entries (spec: 12).
N_OTHER_FEATURES = 12


class PermInvariantNet(nn.Module):
    """Deep-Sets network ``rho([mean_j phi(log1p q_j, log1p qbar_j), other features])``.

    Args:
        n_servers: ``N``; the input has ``2 N + 12`` entries (queues ``0..N-1``, average queues ``N..2N-1``,
            then the 12 other features).
        out_dim: output size (``9`` logits for the straggler actor, ``1`` for a critic, ``9`` Q-values).
        phi_hidden: hidden sizes of ``phi`` (paper: ``(32, 16)``; ``phi`` outputs 1 value).
        rho_hidden: hidden sizes of ``rho`` (paper: ``(32, 16)``).

    Shapes:
        ``forward(obs (B, 2N + 12) float32) -> (B, out_dim) float32``.

    Raises:
        ValueError: ``n_servers < 1`` or ``out_dim < 1``; in ``forward``, an input whose last dimension is not
            ``2 N + 12`` or that is not 2-D.
    """

    def __init__(self, n_servers: int, out_dim: int, phi_hidden: Sequence[int] = (32, 16),
                 rho_hidden: Sequence[int] = (32, 16)):
        super().__init__()
        if int(n_servers) < 1:
            raise ValueError(f"n_servers must be >= 1, got {n_servers!r}")
        if int(out_dim) < 1:
            raise ValueError(f"out_dim must be >= 1, got {out_dim!r}")
        self.n_servers, self.out_dim = int(n_servers), int(out_dim)
        self.obs_dim = 2 * self.n_servers + N_OTHER_FEATURES
        self.phi = mlp([2, *phi_hidden, 1])
        self.rho = mlp([1 + N_OTHER_FEATURES, *rho_hidden, self.out_dim])

    def server_features(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, N, 2)`` per-server inputs of ``phi``: ``log1p`` of (queue, average queue), servers sorted by
        (queue, average queue) ascending (stable), which makes the network exactly permutation invariant."""
        n = self.n_servers
        q = torch.log1p(obs[:, :n])
        qbar = torch.log1p(obs[:, n:2 * n])
        # lexicographic sort: by the secondary key first, then a stable sort by the primary key
        idx = torch.sort(qbar, dim=1, stable=True).indices
        q_by_qbar = torch.gather(q, 1, idx)
        idx = torch.gather(idx, 1, torch.sort(q_by_qbar, dim=1, stable=True).indices)
        return torch.stack((torch.gather(q, 1, idx), torch.gather(qbar, 1, idx)), dim=-1)

    def fast_policy(self, policy) -> NumpyPermInvariantPolicy:
        """The NumPy acting mirror of ``policy`` (a ``CategoricalPolicy`` with this module as its body), for
        a ``make_fast_policy`` that asks the body for one."""
        return NumpyPermInvariantPolicy(policy)

    def fast_policy_stack(self, policies: Sequence) -> NumpyPermInvariantStack:
        """The NumPy acting mirror of a population's ``policies`` (one per seed, each a ``CategoricalPolicy``
        whose body is a ``PermInvariantNet`` of this one's sizes), for :class:`lcpo.agents.stacked.StackedActing`,
        which asks the body for one."""
        return NumpyPermInvariantStack(policies)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, 32)`` straggler observations -> ``(B, out_dim)``; raises ``ValueError`` on another shape."""
        if obs.dim() != 2 or obs.shape[1] != self.obs_dim:
            raise ValueError(f"PermInvariantNet for {self.n_servers} servers expects observations of shape "
                             f"(B, {self.obs_dim}), got {tuple(obs.shape)}")
        pooled = self.phi(self.server_features(obs)).mean(dim=1)  # (B, 1)
        return self.rho(torch.cat((pooled, obs[:, 2 * self.n_servers:]), dim=1))


class NumpyPermInvariantStack:
    """The acting mirror of :class:`NumpyPermInvariantPolicy` for a population: ``N`` policies (one per seed) with
    :class:`PermInvariantNet` bodies of the same sizes, all ``N`` observations of a step in one pass.

    Each layer is one ``np.matmul`` over the seed axis (``(N, servers, in + 1) @ (N, in + 1, out)`` for ``phi``,
    ``(N, 1, in + 1) @ (N, in + 1, out)`` for ``rho``) where the single mirror makes one call per seed; the
    servers are sorted per seed by the same stable ``lexsort``. Row ``k``'s logits do not depend on ``N`` or on the
    other rows (every product and sum is per seed-slice), so seed ``k`` acts the same alone (a stack of one, as a
    batch-native agent's single run acts) as in any population, bit for bit. Against
    :class:`NumpyPermInvariantPolicy` (one call per seed) the logits agree to float32 rounding; on the development
    machine they are bit-identical (2,000 random batches with tied queues), which depends on the BLAS kernels.

    Args:
        policies: ``N >= 1`` ``lcpo.agents.nets.CategoricalPolicy`` objects whose bodies are
            :class:`PermInvariantNet` with equal sizes.

    Raises:
        ValueError: no policies, or bodies of different sizes (naming both).
        TypeError: a body that is not a :class:`PermInvariantNet`.

    Shapes: ``logits(obs (N, 2S + 12) float32) -> (N, D, K)`` float32, ``sample(obs, gumbel (N, D * K)) -> (N, D)``
    int64, ``greedy(obs) -> (N, D)`` int64 (``S`` servers, ``D`` action dimensions of ``K`` bins). Call
    :meth:`sync` after every parameter change.
    """

    def __init__(self, policies: Sequence):
        policies = list(policies)
        if not policies:
            raise ValueError("NumpyPermInvariantStack needs at least one policy")
        self.singles = [NumpyPermInvariantPolicy(p) for p in policies]  # raise TypeError for another body
        first = self.singles[0]

        def layout(single: NumpyPermInvariantPolicy) -> tuple:
            return (single.n, [w.shape for w in single._phi_w], single._phi_last.shape,
                    [w.shape for w in single._rho_w], single.dims, single.bins)

        for k, single in enumerate(self.singles[1:], 1):
            if layout(single) != layout(first):
                raise ValueError(f"NumpyPermInvariantStack: policy {k}'s network (servers, phi, phi's last layer, rho, "
                                 f"action dims, bins: {layout(single)}) differs from policy 0's {layout(first)}")
        m, n = len(policies), first.n
        self.n_seeds, self.n = m, n
        self.dims, self.bins = first.dims, first.bins
        self._phi_w = [np.zeros((m, *w.shape), np.float32) for w in first._phi_w]
        self._phi_h = [np.ones((m, n, w.shape[1] + 1), np.float32) for w in first._phi_w]
        self._phi_last = np.zeros((m, first._phi_last.shape[0], 1), np.float32)
        self._pooled = np.ones((m, 1, first._pooled.shape[0]), np.float32)
        self._rho_w = [np.zeros((m, *w.shape), np.float32) for w in first._rho_w]
        self._rho_h = [np.ones((m, 1, w.shape[1] + 1), np.float32) for w in first._rho_w]
        self._pairs = np.ones((m, n, 3), np.float32)
        self._x = np.ones((m, 1, first._x.shape[0]), np.float32)
        self._noisy = np.zeros((m, self.dims * self.bins), np.float32)
        self._rows = np.arange(m)[:, None]
        self.sync()

    def sync(self) -> None:
        """Copy every seed's torch weights into the stacked NumPy arrays (in place)."""
        for k, single in enumerate(self.singles):
            single.sync()
            for w, own in zip(self._phi_w + self._rho_w, single._phi_w + single._rho_w):
                w[k] = own
            self._phi_last[k, :, 0] = single._phi_last

    def _forward(self, obs: np.ndarray) -> np.ndarray:
        """``(N, D * K)`` float32 logits of ``obs (N, 2S + 12)`` in an internal buffer (overwritten by the next
        call)."""
        n, m = self.n, self.n_seeds
        obs = np.asarray(obs, np.float32)
        if obs.shape != (m, 2 * n + N_OTHER_FEATURES):
            raise ValueError(f"NumpyPermInvariantStack of {m} policies expects observations of shape "
                             f"({m}, {2 * n + N_OTHER_FEATURES}), got {obs.shape}")
        pairs = self._pairs
        np.log1p(obs[:, :n], out=pairs[:, :, 0])
        np.log1p(obs[:, n:2 * n], out=pairs[:, :, 1])
        h = pairs[self._rows, np.lexsort((pairs[:, :, 1], pairs[:, :, 0]), axis=-1)]  # per seed, sorted servers
        for w, out in zip(self._phi_w, self._phi_h):
            v = out[:, :, :-1]
            np.matmul(h, w, out=v)
            np.maximum(v, 0.0, out=v)
            h = out
        np.add.reduce(h[:, :, :-1], axis=1, out=self._pooled[:, 0, :-1])
        x = self._x
        x[:, 0, 0] = np.matmul(self._pooled, self._phi_last)[:, 0, 0]
        x[:, 0, 1:-1] = obs[:, 2 * n:]
        h, last = x, len(self._rho_w) - 1
        for i, (w, out) in enumerate(zip(self._rho_w, self._rho_h)):
            v = out[:, :, :-1]
            np.matmul(h, w, out=v)
            if i < last:
                np.maximum(v, 0.0, out=v)
            h = out
        return h[:, 0, :-1]

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """``(N, D, K)`` float32 logits of ``obs (N, 2S + 12)`` (a new array); ValueError on another shape."""
        return self._forward(obs).reshape(self.n_seeds, self.dims, self.bins).copy()

    def sample(self, obs: np.ndarray, gumbel: np.ndarray) -> np.ndarray:
        """Gumbel-max draws ``(N, D)`` int64 with pre-drawn noise ``gumbel (N, D * K)`` float32 (noise of another
        float dtype is added in its precision and rounded to float32 once, as :class:`NumpyPermInvariantPolicy`
        adds it)."""
        # added as the single mirror adds (in the noise's precision, rounded to float32 once): the same draws
        noisy = np.add(self._forward(obs), np.asarray(gumbel).reshape(self.n_seeds, -1), out=self._noisy)
        return noisy.reshape(self.n_seeds, self.dims, self.bins).argmax(axis=2)

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """Most probable actions ``(N, D)`` int64 of ``obs (N, 2S + 12)``."""
        return self._forward(obs).reshape(self.n_seeds, self.dims, self.bins).argmax(axis=2)


def perm_invariant_body(env, obs_dim: int, out_dim: int, hidden: Sequence[int] = (64, 64)) -> PermInvariantNet:
    """Factory of :data:`lcpo.agents.nets.NETWORKS` ``"perm-invariant"``: the paper's sizes for the straggler env.

    Args:
        env: the straggler environment (``env.unwrapped.n_servers`` gives ``N``; without it ``N`` is
            inferred as ``(obs_dim - 12) / 2``).
        obs_dim: observation size, ``2 N + 12``.
        out_dim: output size.
        hidden: ignored (the MLP hidden sizes of the agents do not apply; the paper fixes ``phi`` and ``rho``
            at ``(32, 16)``; build :class:`PermInvariantNet` directly for other sizes).

    Raises:
        ValueError: ``obs_dim`` is not ``2 N + 12`` for the environment's ``N`` (or for any ``N >= 1``).
    """
    n = getattr(getattr(env, "unwrapped", env), "n_servers", None)
    if n is None:
        if obs_dim < 2 + N_OTHER_FEATURES or (obs_dim - N_OTHER_FEATURES) % 2:
            raise ValueError(f"perm-invariant network: obs_dim {obs_dim} is not 2 N + {N_OTHER_FEATURES}")
        n = (obs_dim - N_OTHER_FEATURES) // 2
    if obs_dim != 2 * int(n) + N_OTHER_FEATURES:
        raise ValueError(f"perm-invariant network: obs_dim {obs_dim} does not match 2 N + {N_OTHER_FEATURES} "
                         f"for N = {n} servers")
    return PermInvariantNet(int(n), out_dim)


def _linears(seq: nn.Sequential) -> list[nn.Linear]:
    return [m for m in seq if isinstance(m, nn.Linear)]


class NumpyPermInvariantPolicy:
    """NumPy forward pass and Gumbel-max sampler mirroring a ``CategoricalPolicy`` whose body is a
    :class:`PermInvariantNet` (same interface as :class:`lcpo.agents.nets.NumpyPolicy`).

    The per-step hot path of every straggler agent, so it makes as few NumPy calls as it can, into buffers
    allocated once (only the sort of the servers allocates per call): each linear layer is one ``matmul`` on inputs carrying a constant 1 column (the bias is the
    weight matrix's last row) plus one in-place ReLU, and ``phi``'s last layer (to 1 value, no ReLU) is moved
    after the mean over the servers, ``mean_j(h_j) @ w + b``, which is the same affine map of the same mean.
    Logits agree with the torch policy to float32 rounding (not bit for bit); a permutation of the servers
    gives bit-identical logits (the servers are sorted first, as in :meth:`PermInvariantNet.server_features`).
    Call :meth:`sync` after every parameter change.

    Args:
        policy: a :class:`lcpo.agents.nets.CategoricalPolicy` with a :class:`PermInvariantNet` body.

    Raises:
        TypeError: the policy's body is not a :class:`PermInvariantNet`.
    """

    def __init__(self, policy):
        body = getattr(policy, "body", None)
        if not isinstance(body, PermInvariantNet):
            raise TypeError(f"NumpyPermInvariantPolicy needs a PermInvariantNet body, got {type(body).__name__}")
        self.policy, self.body = policy, body
        self.dims, self.bins = policy.dims, policy.bins
        n = self.n = body.n_servers
        self._phi, self._rho = _linears(body.phi), _linears(body.rho)
        # weights with the bias as a last row, (in + 1, out); activations with a trailing constant-1 column
        self._phi_w = [np.zeros((m.in_features + 1, m.out_features), np.float32) for m in self._phi[:-1]]
        self._phi_h = [np.ones((n, m.out_features + 1), np.float32) for m in self._phi[:-1]]
        self._phi_last = np.zeros(self._phi[-1].in_features + 1, np.float32)  # (w / N, b) of phi's last layer
        self._pooled = np.ones(self._phi[-1].in_features + 1, np.float32)     # (sum_j h_j, 1)
        self._rho_w = [np.zeros((m.in_features + 1, m.out_features), np.float32) for m in self._rho]
        self._rho_h = [np.ones(m.out_features + 1, np.float32) for m in self._rho]
        self._pairs = np.ones((n, 3), np.float32)
        self._x = np.ones(2 + N_OTHER_FEATURES, np.float32)
        self._noisy = np.zeros(self.dims * self.bins, np.float32)
        self.sync()

    def sync(self) -> None:
        """Copy the torch weights into the NumPy arrays (in place)."""
        with torch.no_grad():
            for lin, w in zip(self._phi[:-1] + self._rho, self._phi_w + self._rho_w):
                w[:-1] = lin.weight.detach().cpu().numpy().T
                w[-1] = lin.bias.detach().cpu().numpy()
            last = self._phi[-1]
            self._phi_last[:-1] = last.weight.detach().cpu().numpy()[0] / np.float32(self.n)
            self._phi_last[-1] = last.bias.detach().cpu().numpy()[0]

    def _forward(self, obs: np.ndarray) -> np.ndarray:
        """``(D * K,)`` float32 logits in an internal buffer (overwritten by the next call)."""
        n = self.n
        obs = np.asarray(obs, np.float32)
        pairs = self._pairs
        np.log1p(obs[:n], out=pairs[:, 0])
        np.log1p(obs[n:2 * n], out=pairs[:, 1])
        h = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]  # servers in (queue, average queue) order
        for w, out in zip(self._phi_w, self._phi_h):
            v = out[:, :-1]
            np.matmul(h, w, out=v)
            np.maximum(v, 0.0, out=v)
            h = out
        np.add.reduce(h[:, :-1], axis=0, out=self._pooled[:-1])
        x = self._x
        x[0] = self._pooled @ self._phi_last
        x[1:-1] = obs[2 * n:]
        h, last = x, len(self._rho_w) - 1
        for i, (w, out) in enumerate(zip(self._rho_w, self._rho_h)):
            v = out[:-1]
            np.matmul(h, w, out=v)
            if i < last:
                np.maximum(v, 0.0, out=v)
            h = out
        return h[:-1]

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """``(D, K)`` float32 logits of one observation ``(2N + 12,)`` (a new array)."""
        return self._forward(obs).reshape(self.dims, self.bins).copy()

    def sample(self, obs: np.ndarray, gumbel: np.ndarray) -> np.ndarray:
        """Draw an action ``(D,)`` int64 via Gumbel-max with pre-drawn noise ``gumbel (D * K,)`` float32."""
        noisy = np.add(self._forward(obs), gumbel.reshape(-1), out=self._noisy)
        return noisy.reshape(self.dims, self.bins).argmax(axis=1)

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """Most probable action ``(D,)`` int64."""
        return self._forward(obs).reshape(self.dims, self.bins).argmax(axis=1)
