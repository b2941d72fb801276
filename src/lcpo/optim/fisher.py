"""Fisher(KL Hessian)-vector products for product-of-categoricals policies (TRPO appendix C; LCPO Alg. 1).

For ``KL(theta) = mean_b KL(pi_old(.|s_b) || pi_theta(.|s_b))`` evaluated at ``theta = theta_old``, the Hessian
equals the Fisher information ``F = mean_b J_b^T H_b J_b``, where ``J_b`` is the Jacobian of the logits at
state ``s_b`` and ``H_b = blockdiag_d(diag(p_bd) - p_bd p_bd^T)`` is the softmax Hessian per action dimension.

Two implementations with the same contract ``v (n,) -> (F + damping I) v (n,)``:

* :func:`autograd_fvp`: any differentiable policy, by double back-propagation of the KL (the textbook way).
* :func:`mlp_fvp`: Linear/ReLU policies, by an explicit forward-mode pass (``J v``), the softmax Hessian, and a
  manual backward pass (``J^T u``), with no autograd graph: a few times faster, used on the hot path of every
  LCPO/TRPO update. Tests check it equals :func:`autograd_fvp` and an explicitly formed KL Hessian.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from lcpo.nets import CategoricalPolicy, is_plain_mlp

__all__ = ["flat_params", "set_flat_params", "flat_grad", "autograd_fvp", "mlp_fvp", "make_fvp"]


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
    per-dimension softmax Hessian ``diag(p) - p p^T``, ``J^T u`` by a manual backward pass.

    Args:
        policy: Linear/ReLU policy (raises ``TypeError`` otherwise; use :func:`autograd_fvp`).
        obs: ``(B, obs_dim)`` float32 states (the anchor states for LCPO).
        damping: added ``damping * v`` (0.1 in the paper).

    Returns:
        ``v (n,) -> (F + damping I) v (n,)``, parameters in ``policy.parameters()`` order.
    """
    if not is_plain_mlp(policy):
        raise TypeError("mlp_fvp needs a CategoricalPolicy whose body is Linear/ReLU layers")
    linears = [m for m in policy.body if isinstance(m, nn.Linear)]
    with torch.no_grad():
        inputs, masks = [], []
        x = obs
        for i, lin in enumerate(linears):
            inputs.append(x)
            z = torch.addmm(lin.bias, x, lin.weight.t())
            if i < len(linears) - 1:
                m = z > 0
                masks.append(m.to(z.dtype))
                x = z * masks[-1]
            else:
                x = z
        B = obs.shape[0]
        p = torch.softmax(x.view(B, policy.dims, policy.bins), dim=-1)
        weights = [lin.weight.detach() for lin in linears]
        sizes = [(lin.weight.numel(), lin.bias.numel()) for lin in linears]
        shapes = [lin.weight.shape for lin in linears]

    def fvp(v: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            parts = []
            i = 0
            for (nw, nb), shp in zip(sizes, shapes):
                parts.append((v[i:i + nw].view(shp), v[i + nw:i + nw + nb]))
                i += nw + nb
            dz = None
            for k, ((dW, db), W) in enumerate(zip(parts, weights)):
                out = torch.addmm(db, inputs[k], dW.t())
                if dz is not None:
                    out.addmm_(dz, W.t())
                dz = out * masks[k] if k < len(weights) - 1 else out
            dz = dz.view(B, policy.dims, policy.bins)
            u = p * (dz - (p * dz).sum(-1, keepdim=True))
            g = u.reshape(B, -1) / B
            grads = []
            for k in range(len(weights) - 1, -1, -1):
                grads.append(g.sum(0))
                grads.append((g.t() @ inputs[k]).reshape(-1))
                if k > 0:
                    g = (g @ weights[k]) * masks[k - 1]
            grads.reverse()  # now [W0, b0, W1, b1, ...]
            out = torch.cat(grads)
            return out.add_(v, alpha=damping)

    return fvp


def make_fvp(policy: nn.Module, obs: torch.Tensor, damping: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """The fastest available Fisher-vector product for ``policy`` on ``obs`` (see module docstring)."""
    if is_plain_mlp(policy):
        return mlp_fvp(policy, obs, damping)
    return autograd_fvp(policy, obs, damping)
