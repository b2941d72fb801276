"""Fisher(KL Hessian)-vector products for product-of-categoricals policies (TRPO appendix C; LCPO Alg. 1).

For ``KL(theta) = mean_b KL(pi_old(.|s_b) || pi_theta(.|s_b))`` evaluated at ``theta = theta_old``, the Hessian
equals the Fisher information ``F = mean_b J_b^T H_b J_b``, where ``J_b`` is the Jacobian of the logits at
state ``s_b`` and ``H_b = blockdiag_d(diag(p_bd) - p_bd p_bd^T)`` is the softmax Hessian per action dimension.

Two implementations with the same contract ``v (n,) -> (F + damping I) v (n,)``:

* :func:`autograd_fvp`: any differentiable policy, by double back-propagation of the KL (the textbook way).
* :func:`mlp_fvp`: Linear/ReLU policies, by an explicit forward-mode pass (``J v``), the softmax Hessian, and a
  manual backward pass (``J^T u``), in NumPy with no autograd graph: about three times faster, used on the
  hot path of every LCPO/TRPO update. Tests check it equals :func:`autograd_fvp` and an explicitly formed KL Hessian.

And one for many seeds at once, ``V (m, n) -> (F_k + damping I) v_k`` per row:

* :func:`stacked_mlp_fvp`: the same explicit passes as :func:`mlp_fvp`, in torch, as batched matrix products
  over the seed axis of a :class:`~lcpo.agents.stacked.SeedStack`: the product of a population off the CPU (a GPU),
  where one call for all seeds replaces one autograd product per seed (a few dozen kernels per call, whatever
  the number of seeds).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch import nn

from lcpo.agents.nets import CategoricalPolicy, is_plain_mlp

__all__ = ["flat_params", "set_flat_params", "flat_grad", "autograd_fvp", "mlp_fvp", "stacked_mlp_fvp", "make_fvp"]


def flat_params(module: nn.Module) -> torch.Tensor:
    """All parameters concatenated into one ``(n,)`` tensor (a copy)."""
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()]).clone()


def set_flat_params(module: nn.Module, flat: torch.Tensor) -> None:
    """Write a ``(n,)`` vector back into the module's parameters (in place, no autograd)."""
    params = list(module.parameters())
    total = sum(p.numel() for p in params)
    if flat.dim() != 1 or flat.numel() != total:
        raise ValueError(f"flat parameter vector has shape {tuple(flat.shape)}, the module {total} parameters")
    i = 0
    with torch.no_grad():
        for p in params:
            n = p.numel()
            p.copy_(flat[i:i + n].view_as(p))
            i += n


def flat_grad(loss: torch.Tensor, module: nn.Module, **kwargs) -> torch.Tensor:
    """``(n,)`` gradient of a scalar ``loss`` w.r.t. the module's parameters."""
    grads = torch.autograd.grad(loss, list(module.parameters()), **kwargs)
    return torch.cat([g.reshape(-1) for g in grads])


def autograd_fvp(policy: CategoricalPolicy, obs: torch.Tensor, damping: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """Fisher-vector product by double back-propagation of the mean KL on ``obs (B, obs_dim)``.

    Returns:
        ``v (n,) -> (F + damping I) v``, with ``F`` the Hessian of the mean KL at the current parameters.
    """
    with torch.no_grad():
        logp_old = policy.log_probs(obs)
    kl = CategoricalPolicy.kl(logp_old, policy.log_probs(obs)).mean()
    g = flat_grad(kl, policy, create_graph=True)

    def fvp(v: torch.Tensor) -> torch.Tensor:
        hv = flat_grad(torch.dot(g, v), policy, retain_graph=True)
        return hv + damping * v

    return fvp


def mlp_fvp(policy: CategoricalPolicy, obs: torch.Tensor, damping: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """Fisher-vector product for a Linear/ReLU :class:`CategoricalPolicy`, without autograd.

    ``F v = (1/B) J^T H (J v)``: ``J v`` by forward-mode differentiation through the layers, ``H`` the
    per-dimension softmax Hessian ``diag(p) - p p^T``, ``J^T u`` by a manual backward pass. The products run
    in NumPy (in the policy's dtype), whose per-call overhead is a fraction of torch's at these sizes; activations,
    masks and probabilities are computed once per set of states, and every product reuses the same buffers: each
    bias is folded into its layer's GEMM (``[x | 1] [V^T; v_b]``), the weight and bias gradients are written
    straight into the output (about 67 GFLOP/s on one core of the development machine for the paper's (64, 64)
    policy on 200 states, against 50 before these changes; ``benchmarks/population_agents.py --fvp``).

    Args:
        policy: Linear/ReLU policy (raises ``TypeError`` otherwise; use :func:`autograd_fvp`).
        obs: ``(B, obs_dim)`` float32 states (the anchor states for LCPO).
        damping: added ``damping * v`` (0.1 in the paper).

    Returns:
        ``v (n,) -> (F + damping I) v (n,)`` (in ``v``'s dtype), parameters in ``policy.parameters()`` order. The
        function's attribute ``numpy`` is the same product on NumPy vectors (``(n,) -> (n,)`` new array, in the
        policy's dtype, bit-identical to the torch form): the batched constrained step's per-seed conjugate
        gradient calls it without any torch operation (:func:`lcpo.optim.cg.conjugate_gradient_numpy`). Not
        reentrant (its buffers are its own): one thread calls one product at a time.

    Raises:
        TypeError: for a policy that is not a Linear/ReLU :class:`CategoricalPolicy`.
    """
    if not is_plain_mlp(policy):
        raise TypeError("mlp_fvp needs a CategoricalPolicy whose body is Linear/ReLU layers")
    linears = [m for m in policy.body if isinstance(m, nn.Linear)]
    with torch.no_grad():
        weights = [lin.weight.detach().numpy().copy() for lin in linears]
        biases = [lin.bias.detach().numpy().copy() for lin in linears]
        dt = weights[0].dtype  # float32 normally; float64 policies (tests) keep their precision
        x = obs.detach().numpy().astype(dt)
    B = x.shape[0]
    last = len(weights) - 1
    # per layer k: [x_k | 1] (Fortran order, so that x_k alone is a contiguous block for the backward GEMM),
    # the ReLU mask, W_k^T, the (in + 1, out) block [V_k^T; v_b] of the direction, and the forward buffers
    inputs, masks, weights_t, blocks, outs, carries = [], [], [], [], [], []
    for k, (W, b) in enumerate(zip(weights, biases)):
        n_out, n_in = W.shape
        xa = np.empty((B, n_in + 1), dtype=dt, order="F")
        xa[:, :n_in] = x
        xa[:, n_in] = 1
        inputs.append(xa)
        weights_t.append(np.ascontiguousarray(W.T))
        blocks.append(np.empty((n_in + 1, n_out), dtype=dt))
        outs.append(np.empty((B, n_out), dtype=dt))
        carries.append(np.empty((B, n_out), dtype=dt))
        z = x @ W.T + b
        if k < last:
            m = (z > 0).astype(dt)
            masks.append(m)
            x = z * m
        else:
            x = z
    D, K = policy.dims, policy.bins
    z = x.reshape(B, D, K)
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    slices, i = [], 0
    for W, b in zip(weights, biases):
        slices.append((slice(i, i + W.size), W.shape, slice(i + W.size, i + W.size + b.size)))
        i += W.size + b.size
    n = i
    p_scaled = p * dt.type(1.0 / B)  # the 1/B of the mean folded into the softmax Hessian's outer factor
    damp = dt.type(damping)
    width = max(W.shape[1] for W in weights)
    back = [np.empty(B * width, dtype=dt), np.empty(B * width, dtype=dt)]  # alternating backward buffers
    pz = np.empty((B, D, K), dtype=dt)
    pz_sum = np.empty((B, D, 1), dtype=dt)
    ones_k = np.ones((K, 1), dtype=dt)
    ones_b = np.ones(B, dtype=dt)
    damped = np.empty(n, dtype=dt)

    def fvp_np(vn: np.ndarray) -> np.ndarray:
        if vn.dtype != dt:
            vn = vn.astype(dt)
        out = np.empty(n, dtype=dt)
        # forward mode: dz_k = mask_k * ([x_k | 1] [V_k^T; v_b] + dz_{k-1} W_k^T), the logits' J v at the end
        dz = None
        for k, (sw, shp, sb) in enumerate(slices):
            blk, o = blocks[k], outs[k]
            blk[:shp[1]] = vn[sw].reshape(shp).T
            blk[shp[1]] = vn[sb]
            np.matmul(inputs[k], blk, out=o)
            if dz is not None:
                c = carries[k]
                np.matmul(dz, weights_t[k], out=c)
                o += c
            if k < last:
                np.multiply(o, masks[k], out=o)
            dz = o
        # softmax Hessian per action dimension: (diag(p) - p p^T) dz = p * (dz - <p, dz>), times 1/B
        dz = dz.reshape(B, D, K)
        np.multiply(p, dz, out=pz)
        np.matmul(pz, ones_k, out=pz_sum)
        np.subtract(dz, pz_sum, out=pz)
        np.multiply(pz, p_scaled, out=pz)
        # backward: J^T u layer by layer, weight and bias gradients straight into the output vector
        g = pz.reshape(B, D * K)
        for k in range(last, -1, -1):
            sw, shp, sb = slices[k]
            np.dot(g.T, inputs[k][:, :shp[1]], out=out[sw].reshape(shp))
            np.dot(ones_b, g, out=out[sb])
            if k > 0:
                nxt = back[k % 2][:B * shp[1]].reshape(B, shp[1])
                np.matmul(g, weights[k], out=nxt)
                np.multiply(nxt, masks[k - 1], out=nxt)
                g = nxt
        np.multiply(vn, damp, out=damped)
        out += damped
        return out

    def fvp(v: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(fvp_np(v.detach().numpy())).to(v.dtype)

    fvp.numpy = fvp_np
    return fvp


def stacked_mlp_fvp(stack, rows: torch.Tensor, obs: torch.Tensor,
                    damping: float) -> Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]:
    """Fisher-vector products of ``m`` seeds of a stacked Linear/ReLU policy at once, on the stack's device.

    Seed ``rows[i]``'s product is :func:`mlp_fvp`'s on its own states ``obs[i]``: ``F_i v = (1/B) J_i^T H_i J_i v``
    with ``J_i`` the Jacobian of its logits w.r.t. its parameters and ``H_i`` the per-dimension softmax Hessian
    ``diag(p) - p p^T`` (TRPO appendix C; the Fisher of LCPO Algorithm 1), plus ``damping * v``. ``J v`` runs as
    a forward-mode pass and ``J^T u`` as a manual backward pass, both as batched matrix products (``bmm``) over
    the seed axis; activations, ReLU masks and probabilities are computed once, here. No autograd graph is kept.

    Args:
        stack: a :class:`~lcpo.agents.stacked.SeedStack` of :class:`~lcpo.agents.nets.CategoricalPolicy` with
            plain Linear/ReLU bodies (``stack.batched``), parameters ``(N, *shape)`` float32.
        rows: ``(m,)`` int64 seed indices into the stack, on its device.
        obs: ``(m, B, obs_dim)`` float32 states, seed ``rows[i]``'s at ``obs[i]`` (LCPO's anchors, TRPO's batch).
        damping: added ``damping * v`` (0.1 in the paper).

    Returns:
        ``fvp(V, r=None) -> (F + damping I) V``: ``V`` ``(len(r), n)`` directions in the stack's flat parameter
        order (``torch.cat`` of each parameter's row, in ``stack.params`` order), ``r`` ``(len(r),)`` int64
        positions in ``rows`` that the rows of ``V`` belong to (None: all ``m``, in order); the result has
        ``V``'s shape and dtype. Each row of the result depends on its own seed and direction only (the
        function's attribute ``batched`` is True: a caller may solve all seeds together).

    Raises:
        TypeError: a stack that is not a batched policy stack, or whose parameters are not all its linear layers'.
        ValueError: ``rows`` not ``(m,)`` or ``obs`` not ``(m, B, obs_dim)`` with ``B >= 1``.
    """
    if not (getattr(stack, "batched", False) and getattr(stack, "kind", None) == "policy"):
        raise TypeError("stacked_mlp_fvp needs a SeedStack of CategoricalPolicy with plain Linear/ReLU bodies")
    layers = list(stack.layers)
    if sorted(i for pair in layers for i in pair) != list(range(len(stack.params))):
        raise TypeError("stacked_mlp_fvp: the stack has parameters outside its linear layers")
    obs_dim = stack.params[layers[0][0]].shape[2]
    if obs.dim() != 3 or obs.shape[1] < 1 or obs.shape[2] != obs_dim:
        raise ValueError(f"stacked_mlp_fvp: states must be (m, B, {obs_dim}) with B >= 1, got {tuple(obs.shape)}")
    m, B = obs.shape[0], obs.shape[1]
    if rows.dim() != 1 or rows.shape[0] != m:
        raise ValueError(f"stacked_mlp_fvp: rows must be ({m},), got shape {tuple(rows.shape)}")
    member = stack.members[0]
    D, K = member.dims, member.bins
    last = len(layers) - 1
    with torch.no_grad():
        Ws = [stack.params[wi][rows] for wi, _ in layers]
        xs, masks, h = [], [], obs
        for k, (wi, bi) in enumerate(layers):
            xs.append(h)
            z = torch.baddbmm(stack.params[bi][rows].unsqueeze(1), h, Ws[k].transpose(1, 2))
            if k < last:
                masks.append((z > 0).to(z.dtype))
                h = z * masks[-1]
            else:
                h = z
        p = torch.softmax(h.view(m, B, D, K), dim=-1)
        p_scaled = p / B  # the 1/B of the mean folded into the softmax Hessian's outer factor
    offsets, i = [], 0
    for P in stack.params:
        offsets.append((i, i + P[0].numel(), P.shape[1:]))
        i += P[0].numel()

    def fvp(V: torch.Tensor, r: torch.Tensor | None = None) -> torch.Tensor:
        with torch.no_grad():
            if r is None:
                x_r, m_r, W_r, p_r, ps_r = xs, masks, Ws, p, p_scaled
            else:
                x_r, m_r, W_r = [x[r] for x in xs], [mk[r] for mk in masks], [W[r] for W in Ws]
                p_r, ps_r = p[r], p_scaled[r]
            n = V.shape[0]
            v = V.to(p.dtype)
            dz = None
            for k, (wi, bi) in enumerate(layers):  # forward mode: the logits' J v
                a, b, shape = offsets[wi]
                dW = v[:, a:b].view(n, *shape)
                a, b, _ = offsets[bi]
                o = torch.baddbmm(v[:, a:b].unsqueeze(1), x_r[k], dW.transpose(1, 2))
                if dz is not None:
                    o = torch.baddbmm(o, dz, W_r[k].transpose(1, 2))
                if k < last:
                    o = o * m_r[k]
                dz = o
            dz = dz.view(n, B, D, K)
            g = ((dz - (p_r * dz).sum(-1, keepdim=True)) * ps_r).view(n, B, D * K)  # (diag p - p p^T) J v / B
            out: list = [None] * len(offsets)
            for k in range(last, -1, -1):  # backward: J^T u, layer by layer
                wi, bi = layers[k]
                out[wi] = torch.bmm(g.transpose(1, 2), x_r[k])
                out[bi] = g.sum(dim=1)
                if k > 0:
                    g = torch.bmm(g, W_r[k]) * m_r[k - 1]
            res = torch.cat([o.reshape(n, -1) for o in out], dim=1)
            return (res + damping * v).to(V.dtype)

    fvp.batched = True
    return fvp


def make_fvp(policy: nn.Module, obs: torch.Tensor, damping: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """The fastest available Fisher-vector product for ``policy`` on ``obs`` (see module docstring): the NumPy
    product for a plain MLP on the CPU, autograd's anywhere else (a network on a GPU: no host copies)."""
    from lcpo.online.device import host_kernels

    if is_plain_mlp(policy) and host_kernels(obs.device):
        return mlp_fvp(policy, obs, damping)
    return autograd_fvp(policy, obs, damping)
