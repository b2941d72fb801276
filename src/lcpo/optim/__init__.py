"""Shared optimisation math: conjugate gradient, Fisher-vector products, the KL-constrained step."""

from lcpo.optim.cg import NotPositiveDefiniteError, conjugate_gradient
from lcpo.optim.constrained import StepResult, kl_constrained_step
from lcpo.optim.fisher import autograd_fvp, flat_grad, flat_params, make_fvp, mlp_fvp, set_flat_params

__all__ = ["conjugate_gradient", "NotPositiveDefiniteError", "StepResult", "kl_constrained_step", "autograd_fvp",
           "flat_grad", "flat_params", "make_fvp", "mlp_fvp", "set_flat_params"]
