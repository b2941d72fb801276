"""Non-finite and overflowing numbers, caught where they arise and named (issue 24 item 6).

The networks train in float32 (largest finite value about ``3.4e38``); rewards, returns and advantages are
computed in float64 and cast to float32 for the update. A reward that is finite in float64 but beyond float32
(``1e39``) or a return that sums to beyond it becomes ``inf`` in the cast, then ``NaN`` in the gradients, and
a run would act on with a NaN policy until some later check names the wrong quantity. The checks here stop it
at the first step or update where the value appears, naming the value and the step:

* :func:`check_reward`: one reward at the environment boundary (the online loop and every agent's
  ``observe``): finite and ``|r| <= F32_MAX``. A scalar comparison per step. :func:`check_transition` adds
  the next observation's finiteness (the agents' ``observe``).
* :func:`to_float32`: a batch (advantages, returns, targets) cast to float32 for an update, refused if any entry
  is non-finite or overflows. One ``np.isfinite`` over the batch per update.
* :func:`check_finite`: a float32 batch or scalar computed in float32 (the replay agents' TD targets, the
  critics' losses before their gradients reach the weights), refused if any entry overflowed to inf or is NaN.
  One ``isfinite`` per update.

The return normaliser checks its own float64 statistics (:meth:`lcpo.numerics.normalize.ReturnNormalizer.update`).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["F32_MAX", "OVERFLOW_HINT", "check_finite", "check_reward", "check_transition", "reward_error",
           "to_float32"]

#: The largest finite float32 (``3.4028235e38``): the bound of every value a network trains on.
F32_MAX = float(np.finfo(np.float32).max)

#: What the messages of overflowing returns, advantages and targets suggest.
OVERFLOW_HINT = "rescale the rewards or enable normalize_returns"


def reward_error(reward: float, where: str) -> ValueError:
    """The error for a reward :func:`check_reward` refuses (``where``: e.g. ``"at step 12"``)."""
    if not math.isfinite(reward):
        return ValueError(f"non-finite reward {reward} {where}")
    return ValueError(f"reward {reward:.6g} {where} is beyond the float32 range the agents train in (|r| <= "
                      f"{F32_MAX:.4g}): rescale the environment's rewards")


def check_reward(reward: float, where: str) -> None:
    """Refuse a NaN, infinite or float32-overflowing reward.

    Args:
        reward: one reward (float, int or NumPy scalar).
        where: how the message places it, e.g. ``"at step 12"`` or ``"at agent step 12"``.

    Raises:
        ValueError: ``non-finite reward nan at step 12``, or, for a finite reward with ``|r| > F32_MAX``,
            ``reward 1e+39 at step 12 is beyond the float32 range ...``.
    """
    if not -F32_MAX <= reward <= F32_MAX:  # False for NaN too
        raise reward_error(float(reward), where)


def check_transition(reward: float, next_obs, where: str) -> None:
    """Refuse a transition an agent must not learn from: a reward :func:`check_reward` refuses, or a next
    observation with a NaN or infinite entry (every agent's ``observe``).

    Args:
        reward: the transition's reward (float, int or NumPy scalar).
        next_obs: ``(obs_dim,)`` array-like, the observation reached.
        where: how the message places it, e.g. ``"at agent step 12"``.

    Raises:
        ValueError: as :func:`check_reward`, or ``non-finite next_obs [0.0, nan] at agent step 12``.
    """
    if not -F32_MAX <= reward <= F32_MAX:  # False for NaN too
        raise reward_error(float(reward), where)
    if not np.isfinite(next_obs).all():
        raise ValueError(f"non-finite next_obs {np.asarray(next_obs).tolist()} {where}")


def to_float32(name: str, values: np.ndarray, first_step: int, hint: str = "") -> np.ndarray:
    """Cast a batch of per-step values to float32, refusing any that is non-finite or overflows.

    Args:
        name: what the values are (``"advantages"``, ``"returns"``), for the message.
        values: ``(N,)`` (or ``(E, L)``) float64 values, one per step of the batch in time order.
        first_step: the agent step of ``values`` entry 0 (entry ``i`` of a 1-D batch is step
            ``first_step + i``), for the message.
        hint: appended to the message (e.g. how to fix it).

    Returns:
        ``values`` as a float32 array of the same shape.

    Raises:
        ValueError: naming ``name``, the step and the float64 value of the first bad entry.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.asarray(values).astype(np.float32)
    if not np.isfinite(out).all():
        flat = np.asarray(values, dtype=np.float64).reshape(-1)
        i = int(np.flatnonzero(~np.isfinite(out.reshape(-1)))[0])
        what = "is non-finite" if not math.isfinite(flat[i]) else f"overflows float32 (|x| > {F32_MAX:.4g})"
        step = f"agent step {first_step + i}" if np.ndim(values) == 1 else f"entry {i} of the batch"
        raise ValueError(f"{name} {flat[i]:.6g} at {step} {what}" + (f": {hint}" if hint else ""))
    return out


def check_finite(name: str, values, where: str, hint: str = "") -> None:
    """Refuse a float32 batch (NumPy array or torch tensor) holding an inf or a NaN.

    Args:
        name: what the values are (``"TD targets"``), for the message.
        values: any shape; a CPU torch tensor is read without a copy (one on another device is copied to the
            host).
        where: how the message places it, e.g. ``"at the update at agent step 1200"``.
        hint: appended to the message.

    Raises:
        ValueError: naming ``name``, ``where`` and the first bad value.
    """
    arr = values.detach().cpu().numpy() if hasattr(values, "detach") else np.asarray(values)
    ok = np.isfinite(arr)
    if not ok.all():
        bad = float(arr.reshape(-1)[np.flatnonzero(~ok.reshape(-1))[0]])
        raise ValueError(f"{name} {where}: {bad} (a float32 overflow, or NaN)" + (f"; {hint}" if hint else ""))
