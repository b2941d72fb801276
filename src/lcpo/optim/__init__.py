"""Shared optimisation math: conjugate gradient, Fisher-vector products, the KL-constrained step."""

from lcpo.optim.cg import (NotPositiveDefiniteError, conjugate_gradient, conjugate_gradient_batch,
                           conjugate_gradient_numpy)
from lcpo.optim.constrained import StepResult, kl_constrained_step, kl_constrained_step_batch
from lcpo.optim.fisher import autograd_fvp, flat_grad, flat_params, make_fvp, mlp_fvp, set_flat_params

__all__ = ["conjugate_gradient", "conjugate_gradient_batch", "conjugate_gradient_numpy", "NotPositiveDefiniteError",
           "StepResult", "kl_constrained_step", "kl_constrained_step_batch", "autograd_fvp",
           "flat_grad", "flat_params", "make_fvp", "mlp_fvp", "set_flat_params"]
