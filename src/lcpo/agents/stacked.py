"""Networks and optimizers with a leading seed axis: N independent copies of one network (issue 26 item 1).

A population of N learners keeps every parameter as one tensor of shape ``(N, *shape)`` (:class:`SeedStack`):
a plain MLP runs as batched matrix products (``torch.baddbmm``, one GEMM per layer for all seeds; the idea of
mbrl-lib's ``EnsembleLinearLayer``), any other network (the straggler's permutation-invariant body, the
tabular agent's tables, a body replaced after construction) as each seed's own module on its own batch, whose
gradients a hook moves into the stacked ``.grad``. Seed ``k``'s ordinary ``nn.Module``
(:attr:`SeedStack.members`) holds *views* of row ``k`` of the stacked tensors, so it always shows that seed's
current weights, its ``state_dict()`` is the single agent's format, and ``load_state_dict`` writes into the stack.

Optimizers keep the seeds apart: :class:`SeedAdam` has per-seed step counts (bias corrections), per-seed
moments and an optional per-seed mask (seeds that do not step are left exactly as they are);
:func:`clip_grad_norm_per_seed` clips each seed's gradient by that seed's own norm. For seeds that share a step
count, :class:`SeedAdam` applies ``torch.optim.Adam``'s own arithmetic (single-tensor path, same operations in the
same order with the same Python scalars), so a seed's update equals the one ``torch.optim.Adam`` would make.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from lcpo.agents.nets import CategoricalPolicy, ValueNet, is_plain_mlp

__all__ = ["SeedStack", "SeedAdam", "SeedSGD", "clip_grad_norm_per_seed", "StackedActing"]


def _set_param(module: nn.Module, name: str, value: nn.Parameter) -> None:
    *path, leaf = name.split(".")
    owner = module
    for p in path:
        owner = getattr(owner, p)
    setattr(owner, leaf, value)


class SeedStack:
    """N copies of one network with parameters stacked on a leading seed axis.

    Args:
        members: N modules of identical structure (seed ``k``'s freshly initialised network at index ``k``);
            a :class:`~lcpo.agents.nets.CategoricalPolicy` or :class:`~lcpo.agents.nets.ValueNet` (or any module
            mapping ``(B, obs_dim)`` to an output). After construction their parameters are views of the stack.
        device: the torch device of the stacked parameters (default: the CPU); the members are built on the CPU
            (their seeded initialisation does not depend on the device) and their weights copied there.

    Attributes:
        params: list of ``nn.Parameter`` of shape ``(N, *shape)`` float32, in ``named_parameters`` order, on
            ``device``.
        device: the ``torch.device`` they live on.
        names: the parameter names (the single module's ``state_dict`` keys).
        members: the N per-seed modules (views of the stack).

    Shapes:
        ``forward(x (n, B, obs_dim), idx=None) -> (n, B, *out)`` where ``n = N`` (or ``len(idx)`` for the seeds
        ``idx``): ``(n, B, D, K)`` logits for a policy, ``(n, B)`` values for a value network.

    Raises:
        ValueError: if the members differ in parameter names or shapes.
    """

    def __init__(self, members: Sequence[nn.Module], device: torch.device | str | None = None):
        members = list(members)
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self.members = members
        self.names = [n for n, _ in members[0].named_parameters()]
        for m in members[1:]:
            if [(n, p.shape) for n, p in m.named_parameters()] != [(n, p.shape) for n, p in
                                                                  members[0].named_parameters()]:
                raise ValueError("SeedStack members must share parameter names and shapes")
        self.n = len(members)
        self.params: list[nn.Parameter] = []
        for name in self.names:
            stacked = torch.stack([m.get_parameter(name).detach() for m in members]).to(self.device).contiguous()
            P = nn.Parameter(stacked)
            self.params.append(P)
            for k, m in enumerate(members):
                view = nn.Parameter(P.data[k])
                view.register_post_accumulate_grad_hook(_grad_to_stack(P, k))
                _set_param(m, name, view)
        t = members[0]
        self.kind = "policy" if isinstance(t, CategoricalPolicy) else "value" if isinstance(t, ValueNet) else "other"
        body = getattr(t, "body", None)
        self.plain = self.kind != "other" and isinstance(body, nn.Sequential) and _plain_body(body)
        self._bodies = [getattr(m, "body", None) for m in members]
        if self.plain:
            self.layers = [(self.names.index(f"body.{i}.weight"), self.names.index(f"body.{i}.bias"))
                           for i, m in enumerate(body) if isinstance(m, nn.Linear)]

    @property
    def batched(self) -> bool:
        """True if the forward pass runs as batched products (plain MLPs whose bodies were not replaced)."""
        return self.plain and all(getattr(m, "body", None) is b for m, b in zip(self.members, self._bodies))

    def parameters(self) -> list[nn.Parameter]:
        """The stacked parameters ``(N, *shape)`` float32 (the list :attr:`params`)."""
        return self.params

    def _rows(self, idx):
        return self.params if idx is None else [P[idx] for P in self.params]

    def forward(self, x: torch.Tensor, idx=None, params: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        """Forward pass of every seed (or the seeds ``idx``, a ``(n,)`` int64 tensor) on its own batch.

        Args:
            x: ``(n, B, obs_dim)`` float32, seed ``i``'s inputs at ``x[i]``.
            idx: None (all N seeds) or the seed indices the rows of ``x`` belong to.
            params: optional stacked parameters ``(n, *shape)`` to use instead of the stack's own rows (e.g. a
                compact copy of some seeds' rows, stepped apart and written back; batched stacks only).

        Returns:
            ``(n, B, D, K)`` float32 logits (policy), ``(n, B)`` float32 values (value network), or the stacked
            outputs.

        Raises:
            ValueError: if ``params`` is given for a stack that is not batched.
        """
        n, B = x.shape[0], x.shape[1]
        if not self.batched:
            if params is not None:
                raise ValueError("SeedStack.forward: params= needs a batched (plain MLP) stack")
            seeds = range(self.n) if idx is None else idx.tolist()
            return torch.stack([self.members[k](x[j]) for j, k in enumerate(seeds)])
        params = self._rows(idx) if params is None else params
        h = x
        last = len(self.layers) - 1
        for i, (wi, bi) in enumerate(self.layers):
            W = params[wi]
            if W.shape[1] == 1:  # one output (a value): a row-wise dot product, whose rows do not depend on n
                h = (h * W[:, None, 0, :]).sum(-1, keepdim=True) + params[bi].unsqueeze(1)
            else:
                h = torch.baddbmm(params[bi].unsqueeze(1), h, W.transpose(1, 2))
            if i < last:
                h = torch.relu_(h)  # in place: the product is a fresh tensor its backward does not need
        if self.kind == "policy":
            t = self.members[0]
            return h.view(n, B, t.dims, t.bins)
        return h.squeeze(-1)

    __call__ = forward

    def log_probs(self, x: torch.Tensor, idx=None, params: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        """``(n, B, D, K)`` log-probabilities of a policy stack: ``z - logsumexp(z)`` over the ``K`` bins of the
        logits ``z``.

        The same values as :func:`lcpo.numerics.categorical.log_probs` (``log_softmax``) up to float32 rounding, and
        the same exact ``-inf`` for a ``-inf`` logit (finite gradients); spelled with ``logsumexp`` because
        ``torch.log_softmax``'s CPU kernel over a last axis of 15 bins is several times slower (forward and
        backward) at the thousands of rows of a population's batch (issue 26; PPO at N = 16).

        Args:
            x, idx, params: as :meth:`forward` (``x`` ``(n, B, obs_dim)`` float32).

        Returns:
            ``(n, B, D, K)`` float32 log-probabilities.

        Raises:
            ValueError: as :meth:`forward` (``params`` for a stack that is not batched).
        """
        z = self.forward(x, idx, params)
        return z - torch.logsumexp(z, dim=-1, keepdim=True)


def _grad_to_stack(P: nn.Parameter, k: int):
    """A post-accumulate-grad hook of seed ``k``'s view parameter: move its gradient into row ``k`` of ``P.grad``
    (the path of networks that are not batched: each seed's module runs on its own batch)."""

    def hook(view: torch.Tensor) -> None:
        if P.grad is None:
            P.grad = torch.zeros_like(P)
        P.grad[k] += view.grad
        view.grad = None

    return hook


def _plain_body(body: nn.Sequential) -> bool:
    kinds = [type(m) for m in body]
    return (len(kinds) > 0 and kinds[-1] is nn.Linear
            and all(k is (nn.Linear if i % 2 == 0 else nn.ReLU) for i, k in enumerate(kinds)))


def clip_grad_norm_per_seed(params: Sequence[torch.Tensor], max_norm: float, idx=None) -> torch.Tensor:
    """Clip each seed's gradient to global norm ``max_norm`` over that seed's parameters only.

    The per-seed form of ``torch.nn.utils.clip_grad_norm_``: seed ``k``'s norm is the 2-norm of the norms of its
    rows ``p.grad[k]``; its gradients are scaled by ``min(1, max_norm / (norm + 1e-6))``. Seeds never share a norm.

    Args:
        params: stacked parameters ``(N, *shape)`` with ``.grad`` set (None grads count as zero).
        max_norm: the clip (``inf``: no clipping, the norms are still returned).
        idx: None, or a ``(n,)`` int64 tensor: clip only these seeds (the other rows are left as they are).

    Returns:
        ``(N,)`` (or ``(n,)``) float32 pre-clip gradient norms.
    """
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.zeros(params[0].shape[0] if idx is None else len(idx), device=params[0].device)
    rows = [g if idx is None else g[idx] for g in grads]
    norms = torch.stack([torch.linalg.vector_norm(g.reshape(g.shape[0], -1), 2, dim=1) for g in rows], dim=1)
    total = torch.linalg.vector_norm(norms, 2, dim=1)
    if max_norm != float("inf"):
        coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for g, r in zip(grads, rows):
            scaled = r * coef.view(-1, *([1] * (r.dim() - 1)))
            if idx is None:
                g.copy_(scaled)
            else:
                g[idx] = scaled
    return total


class SeedAdam:
    """Adam (Kingma & Ba 2015, with ``torch.optim.Adam``'s L2 weight decay) over stacked parameters, per seed.

    Per-seed state: moments ``exp_avg``, ``exp_avg_sq`` (the parameters' shapes) and the step count ``steps``
    ``(N,)`` int64. :meth:`step` advances only the seeds in ``mask`` (default all), each with its own bias
    correction; seeds with equal step counts are updated together with ``torch.optim.Adam``'s own operations.

    Args:
        params: stacked parameters ``(N, *shape)``.
        lr: learning rate (> 0).
        weight_decay: L2 weight decay added to the gradient (``torch.optim.Adam``'s ``weight_decay``).
        betas: moment decay rates.
        eps: denominator term.
    """

    def __init__(self, params: Sequence[nn.Parameter], lr: float, weight_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params = list(params)
        self.n = self.params[0].shape[0]
        self.lr, self.weight_decay, self.betas, self.eps = float(lr), float(weight_decay), betas, float(eps)
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.steps = np.zeros(self.n, dtype=np.int64)

    def zero_grad(self) -> None:
        """Drop the gradients (``set_to_none``)."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, mask: np.ndarray | None = None) -> None:
        """One Adam step of the seeds in ``mask`` (``(N,)`` bool; None: all); the others are untouched.

        All stepping seeds are updated in one pass whatever their step counts: with equal counts the bias
        corrections are ``torch.optim.Adam``'s Python scalars; with unequal counts (PPO's per-seed early stop, LCPO's
        actor stepping only without anchors) each seed's scalars, computed the same way in double precision, are
        a float32 column broadcast over its rows, which is the value the kernels use for a Python scalar (cast to
        the tensor's dtype) in the same operations (``addcdiv_``'s ``param + (value * m) / denom`` spelled out), so
        each seed's update is still bit for bit ``torch.optim.Adam``'s.
        """
        active = np.ones(self.n, bool) if mask is None else np.asarray(mask, bool)
        if not active.any():
            return
        beta1, beta2 = self.betas
        whole = bool(active.all())
        dev = self.params[0].device
        idx = None if whole else torch.from_numpy(np.flatnonzero(active)).to(dev)
        counts = self.steps[active] + 1
        uniform = bool((counts == counts[0]).all())
        if uniform:
            step = int(counts[0])
            neg_step_size = -(self.lr / (1 - beta1 ** step))
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        else:
            neg_step_size = torch.tensor([-(self.lr / (1 - beta1 ** int(c))) for c in counts],
                                         dtype=self.params[0].dtype, device=dev)
            bias_correction2_sqrt = torch.tensor([(1 - beta2 ** int(c)) ** 0.5 for c in counts],
                                                 dtype=self.params[0].dtype, device=dev)
        for P, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq):
            if P.grad is None:
                continue
            if whole:
                param, grad, exp_avg, exp_avg_sq = P.data, P.grad, m, v
            else:
                param, grad, exp_avg, exp_avg_sq = P.data[idx], P.grad[idx], m[idx], v[idx]
            if self.weight_decay != 0:
                grad = grad.add(param, alpha=self.weight_decay)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            if uniform:
                denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(self.eps)
                param.addcdiv_(exp_avg, denom, value=neg_step_size)
            else:
                col = (-1,) + (1,) * (param.dim() - 1)
                denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt.view(col)).add_(self.eps)
                param.add_((exp_avg * neg_step_size.view(col)).div_(denom))
            if not whole:
                P.data[idx], m[idx], v[idx] = param, exp_avg, exp_avg_sq
        self.steps[active] += 1

    # -- a compact copy of some seeds -----------------------------------------------------------------------
    def subset(self, rows: np.ndarray, params: Sequence[nn.Parameter]) -> "SeedAdam":
        """A :class:`SeedAdam` over ``params`` (compact ``(len(rows), *shape)`` copies of the rows ``rows`` of this
        optimizer's parameters) holding copies of those seeds' moments and step counts; :meth:`merge` writes it
        back. Stepping the copy is stepping those seeds here (the same arithmetic, without indexing every step).

        Args:
            rows: ``(m,)`` int64 seed indices.
            params: the compact parameters, in this optimizer's parameter order.
        """
        rows = np.asarray(rows, dtype=np.int64)
        t = torch.from_numpy(rows).to(self.params[0].device)
        sub = SeedAdam.__new__(SeedAdam)
        sub.params, sub.n = list(params), len(rows)
        sub.lr, sub.weight_decay, sub.betas, sub.eps = self.lr, self.weight_decay, self.betas, self.eps
        sub.exp_avg = [m[t] for m in self.exp_avg]  # advanced indexing copies
        sub.exp_avg_sq = [v[t] for v in self.exp_avg_sq]
        sub.steps = self.steps[rows].copy()
        return sub

    @torch.no_grad()
    def merge(self, rows: np.ndarray, sub: "SeedAdam") -> None:
        """Write the moments and step counts of a :meth:`subset` copy back into the rows ``rows`` (``(m,)`` int64
        seed indices, those the copy was made of)."""
        rows = np.asarray(rows, dtype=np.int64)
        t = torch.from_numpy(rows).to(self.params[0].device)
        for m, v, ms, vs in zip(self.exp_avg, self.exp_avg_sq, sub.exp_avg, sub.exp_avg_sq):
            m[t], v[t] = ms, vs
        self.steps[rows] = sub.steps

    # -- one seed in torch.optim.Adam's state_dict format ------------------------------------------------
    def seed_state_dict(self, k: int) -> dict:
        """Seed ``k``'s state exactly as ``torch.optim.Adam(module.parameters()).state_dict()`` writes it."""
        state = {}
        if self.steps[k] > 0:
            for i, (m, v) in enumerate(zip(self.exp_avg, self.exp_avg_sq)):
                state[i] = {"step": torch.tensor(float(self.steps[k])), "exp_avg": m[k].cpu().clone(),
                            "exp_avg_sq": v[k].cpu().clone()}  # CPU tensors: a checkpoint resumes anywhere
        group = {"lr": self.lr, "betas": tuple(self.betas), "eps": self.eps, "weight_decay": self.weight_decay,
                 "amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
                 "differentiable": False, "fused": None, "decoupled_weight_decay": False,
                 "params": list(range(len(self.params)))}
        return {"state": state, "param_groups": [group]}

    @torch.no_grad()
    def load_seed_state_dict(self, k: int, state: dict) -> None:
        """Restore seed ``k`` from a ``torch.optim.Adam`` state dict (or :meth:`seed_state_dict` output).

        Raises:
            ValueError: if the state has another number of parameters, unequal steps across parameters, or a
                learning rate / weight decay other than this optimizer's (naming them).
        """
        group = state["param_groups"][0]
        if len(group["params"]) != len(self.params):
            raise ValueError(f"optimizer state has {len(group['params'])} parameters, expected {len(self.params)}")
        if float(group["lr"]) != self.lr or float(group["weight_decay"]) != self.weight_decay:
            raise ValueError(f"optimizer state has lr={group['lr']}, weight_decay={group['weight_decay']}; this "
                             f"optimizer lr={self.lr}, weight_decay={self.weight_decay}")
        entries = state["state"]
        found = [entries.get(i, entries.get(str(i))) for i in range(len(self.params))]
        steps = {0 if e is None else int(float(e["step"])) for e in found}
        if len(steps) != 1:  # checked before seed k's rows change: a refused state leaves them as they were
            raise ValueError(f"optimizer state holds unequal step counts {sorted(steps)} across parameters")
        for e, m, v in zip(found, self.exp_avg, self.exp_avg_sq):
            if e is None:
                m[k].zero_()
                v[k].zero_()
            else:
                m[k].copy_(e["exp_avg"])
                v[k].copy_(e["exp_avg_sq"])
        self.steps[k] = steps.pop()


class SeedSGD:
    """Plain SGD (``torch.optim.SGD`` without momentum or weight decay) over stacked parameters, per seed.

    Args:
        params: stacked parameters ``(N, *shape)``.
        lr: learning rate.
    """

    def __init__(self, params: Sequence[nn.Parameter], lr: float):
        self.params, self.lr = list(params), float(lr)
        self.n = self.params[0].shape[0]

    def zero_grad(self) -> None:
        """Drop the gradients (``set_to_none``)."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, mask: np.ndarray | None = None) -> None:
        """``p -= lr * grad`` for the seeds in ``mask`` (``(N,)`` bool; None: all)."""
        if mask is None or np.all(mask):
            idx = None
        else:
            idx = torch.from_numpy(np.flatnonzero(mask)).to(self.params[0].device)
        for P in self.params:
            if P.grad is None:
                continue
            if idx is None:
                P.data.add_(P.grad, alpha=-self.lr)
            else:
                P.data[idx] = P.data[idx].add(P.grad[idx], alpha=-self.lr)

    def seed_state_dict(self, k: int) -> dict:
        """Seed ``k``'s state in ``torch.optim.SGD``'s ``state_dict`` format (no per-parameter state)."""
        group = {"lr": self.lr, "momentum": 0, "dampening": 0, "weight_decay": 0, "nesterov": False,
                 "maximize": False, "foreach": None, "differentiable": False, "fused": None,
                 "params": list(range(len(self.params)))}
        return {"state": {}, "param_groups": [group]}

    def load_seed_state_dict(self, k: int, state: dict) -> None:
        """Check a ``torch.optim.SGD`` state dict (SGD without momentum keeps no state).

        Raises:
            ValueError: for another number of parameters or another learning rate.
        """
        group = state["param_groups"][0]
        if len(group["params"]) != len(self.params) or float(group["lr"]) != self.lr:
            raise ValueError(f"SGD state (lr={group['lr']}, {len(group['params'])} parameters) does not match "
                             f"this optimizer (lr={self.lr}, {len(self.params)} parameters)")


class StackedActing:
    """Allocation-light NumPy acting of a policy stack: one batched product per layer for all N seeds.

    For plain MLPs the weights are copied (transposed) into ``(N, in, out)`` float32 arrays by :meth:`sync`
    and ``logits(obs (N, obs_dim)) -> (N, D, K)`` runs ``np.matmul`` per layer; a body that offers a population
    mirror (``body.fast_policy_stack(members)``, e.g. the straggler network's
    :class:`lcpo.envs.straggler.nets.NumpyPermInvariantStack`) acts through it, all N seeds in one call; other
    policies act through each seed's own fast path (:func:`lcpo.agents.nets.make_fast_policy` of its member
    module), in a loop.

    On a device other than the CPU (:func:`lcpo.online.device.host_kernels` False) a plain MLP acts on the
    device instead, through the stack's own forward pass: per call, one host-to-device copy of the observations
    (with the Gumbel noise packed beside them) and one device-to-host copy of the ``(N, D)`` actions; nothing is
    mirrored on the host (:meth:`sync` does nothing). Its logits equal the NumPy mirror's up to float32 rounding
    of the products (not bitwise), so its Gumbel-max draws match except where two bins are within that rounding.

    Args:
        stack: a :class:`SeedStack` of policies.
        fast: optional per-seed single-observation fast paths (``sync``, ``logits``, ``sample``, ``greedy``, as
            :class:`lcpo.agents.nets.NumpyPolicy`) to act through instead.
    """

    def __init__(self, stack: SeedStack, fast: Sequence | None = None):
        from lcpo.agents.nets import make_fast_policy
        from lcpo.online.device import host_kernels

        self.stack = stack
        t = stack.members[0]
        self.dims, self.bins = t.dims, t.bins
        plain = (fast is None and stack.batched and is_plain_mlp(t)
                 and not callable(getattr(t.body, "fast_policy", None)))
        self.on_device = plain and not host_kernels(stack.device)  # act in torch on the stack's device
        self.group = None  # a population mirror that acts for all N seeds at once (a body's fast_policy_stack)
        self.plain = plain and not self.on_device
        if self.on_device:
            return
        if fast is not None:
            self.fast = list(fast)
        if self.plain:
            self.weights = [np.zeros((stack.n, stack.params[w].shape[2], stack.params[w].shape[1]), np.float32)
                            for w, _ in stack.layers]
            self.biases = [np.zeros((stack.n, 1, stack.params[b].shape[1]), np.float32) for _, b in stack.layers]
        elif fast is None:
            group = getattr(t.body, "fast_policy_stack", None)  # a body's own population mirror, if it has one
            if callable(group):
                self.group = group(stack.members)
            else:
                self.fast = [make_fast_policy(m) for m in stack.members]
        self.sync()

    def sync(self) -> None:
        """Copy the current weights of every seed (call after every update; nothing to do on a device)."""
        if self.on_device:
            return
        if self.group is not None:
            self.group.sync()
            return
        if not self.plain:
            for f in self.fast:
                f.sync()
            return
        with torch.no_grad():
            for (wi, bi), w, b in zip(self.stack.layers, self.weights, self.biases):
                w[...] = self.stack.params[wi].detach().numpy().transpose(0, 2, 1)
                b[:, 0, :] = self.stack.params[bi].detach().numpy()

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """``(N, D, K)`` float32 logits of ``obs (N, obs_dim)``, seed ``k``'s policy on row ``k``."""
        n = obs.shape[0]
        if self.on_device:
            return self._device_logits(np.asarray(obs, dtype=np.float32)).cpu().numpy()
        if self.group is not None:
            return self.group.logits(obs)
        if not self.plain:
            return np.stack([f.logits(obs[k]).reshape(self.dims, self.bins) for k, f in enumerate(self.fast)])
        x = np.asarray(obs, dtype=np.float32).reshape(n, 1, -1)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = np.matmul(x, w)
            x += b
            if i < last:
                np.maximum(x, 0.0, out=x)
        return x.reshape(n, self.dims, self.bins)

    def sample(self, obs: np.ndarray, gumbel: np.ndarray) -> np.ndarray:
        """Gumbel-max draws ``(N, D)`` int64 for ``obs (N, obs_dim)`` float32 with pre-drawn noise
        ``gumbel (N, D * K)`` float32."""
        if self.on_device:  # one copy in (observations and noise side by side), one copy out
            n, d = obs.shape[0], obs.shape[1]
            both = torch.from_numpy(np.concatenate([np.asarray(obs, np.float32).reshape(n, d),
                                                    np.asarray(gumbel, np.float32).reshape(n, -1)], axis=1))
            x = both.to(self.stack.device)
            with torch.no_grad():
                lg = self.stack.forward(x[:, None, :d])[:, 0]
                return (lg + x[:, d:].view(lg.shape)).argmax(dim=2).cpu().numpy()
        if self.group is not None:
            return self.group.sample(obs, gumbel)
        if not self.plain:
            return np.stack([f.sample(obs[k], gumbel[k]) for k, f in enumerate(self.fast)])
        lg = self.logits(obs)
        return (lg + gumbel.reshape(lg.shape)).argmax(axis=2)

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """Most probable actions ``(N, D)`` int64 for ``obs (N, obs_dim)`` float32."""
        if self.on_device:
            return self._device_logits(np.asarray(obs, dtype=np.float32)).argmax(dim=2).cpu().numpy()
        return self.logits(obs).argmax(axis=2)

    def _device_logits(self, obs: np.ndarray) -> torch.Tensor:
        """``(N, D, K)`` logits on the stack's device of host observations ``obs (N, obs_dim)`` float32."""
        x = torch.from_numpy(np.ascontiguousarray(obs)).to(self.stack.device)
        with torch.no_grad():
            return self.stack.forward(x[:, None, :])[:, 0]
