"""The torch device of a population (issue 26 item 6): checked once, up front, with a one-line error.

A batch-native population (:data:`lcpo.agents.population.BATCH_NATIVE`) keeps its stacked networks, their
per-seed Adam moments, the update's batch tensors, the constrained step's vectors and LCPO's temperatures on one
torch device; the native windy Pendulum vector env can step in torch on the same device
(:class:`lcpo.envs.windy_pendulum_vector.WindyPendulumVectorEnv`, ``device=``). The CPU is the default and
keeps the host kernels that make it fast and bit-identical to a single run (the NumPy acting mirror, the NumPy
Fisher-vector product, the numba env); any other device uses torch throughout (:func:`host_kernels`).

Example:
    >>> resolve_device("cpu")
    device(type='cpu')
    >>> resolve_device("meta")
    Traceback (most recent call last):
    ...
    ValueError: --device 'meta': the meta device holds no data and cannot train; use cpu, or cuda on a machine with a GPU
"""

from __future__ import annotations

import torch

__all__ = ["resolve_device", "host_kernels", "device_label"]


def resolve_device(value: str | torch.device | None = None, what: str = "--device") -> torch.device:
    """The torch device named by ``value``, checked to exist and to be usable here.

    Args:
        value: ``None`` or ``"cpu"`` (the default), ``"cuda"``, ``"cuda:N"``, or any torch device string
            (``"mps"``, ``"xpu:0"``), or a ``torch.device``.
        what: how the value is named in errors (the CLI option or the argument).

    Returns:
        ``torch.device("cpu")`` for the CPU (``"cpu:0"`` included), else the device as given.

    Raises:
        ValueError: one line naming ``value``: not a torch device string; the ``meta`` device (no data);
            ``cuda`` where ``torch.cuda.is_available()`` is False; ``cuda:N`` beyond the GPUs present; another
            backend that is not available.
    """
    if value is None:
        return torch.device("cpu")
    try:
        dev = torch.device(value)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"{what} {value!r}: not a torch device; expected cpu, cuda, cuda:N or another torch "
                         "device string (mps, xpu:0, ...)") from None
    if dev.type == "cpu":
        return torch.device("cpu")
    if dev.type == "meta":
        raise ValueError(f"{what} {value!r}: the meta device holds no data and cannot train; use cpu, or cuda on "
                         "a machine with a GPU")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{what} {value!r}: no CUDA GPU here (torch.cuda.is_available() is False); use "
                             f"{what} cpu")
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise ValueError(f"{what} {value!r}: this machine has {count} CUDA device(s) (cuda:0 to cuda:{count - 1})")
        return dev
    backend = getattr(torch, dev.type, None)
    available = getattr(backend, "is_available", None)
    if not callable(available) or not available():
        raise ValueError(f"{what} {value!r}: torch has no available {dev.type!r} backend here; use {what} cpu")
    return dev


def host_kernels(device: torch.device) -> bool:
    """Whether the CPU-only fast paths apply on ``device`` (the NumPy acting mirror, the NumPy Fisher-vector
    product, the numba env kernel): True exactly for the CPU. Everything else runs its torch form there.

    Args:
        device: a device returned by :func:`resolve_device`.
    """
    return device.type == "cpu"


def device_label(device: torch.device) -> str:
    """The device as recorded in summaries and printed by the CLI (``"cpu"``, ``"cuda"``, ``"cuda:1"``)."""
    return str(device)
