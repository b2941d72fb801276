"""Atomic file writes and checkpoint files: tensors in a ``.pt`` file, everything else in JSON.

Atomic writes live in :mod:`lcpo.atomic` (re-exported here). Checkpoints never pickle code: a nested state dict is split into its tensors and NumPy arrays, saved with
``torch.save`` and loaded with ``torch.load(weights_only=True)``, and the rest (ints, floats, strings,
lists, RNG states), saved as JSON. NumPy arrays come back as NumPy arrays of the same dtype.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lcpo.atomic import atomic_write_bytes, atomic_write_json, atomic_write_text

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_write_json", "save_state", "load_state"]

_TENSOR = "__tensor__"
_NDARRAY = "__ndarray__"
_ITEMS = "__items__"  # a dict with int keys (e.g. optimizer state), kept as [key, value] pairs


def _split(obj: Any, tensors: dict, prefix: str) -> Any:
    if isinstance(obj, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = obj.detach().cpu().clone()
        return {_TENSOR: key}
    if isinstance(obj, np.ndarray):
        key = f"t{len(tensors)}"
        if obj.dtype == object:
            raise TypeError(f"cannot checkpoint an object array at {prefix}")
        tensors[key] = torch.from_numpy(np.ascontiguousarray(obj).copy())
        return {_NDARRAY: key, "dtype": str(obj.dtype), "shape": list(obj.shape)}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj):
            return {k: _split(v, tensors, f"{prefix}.{k}") for k, v in obj.items()}
        if not all(isinstance(k, (str, int)) for k in obj):
            raise TypeError(f"cannot checkpoint dict keys other than str/int at {prefix}")
        return {_ITEMS: [[k, _split(v, tensors, f"{prefix}.{k}")] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return [_split(v, tensors, f"{prefix}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot checkpoint value of type {type(obj).__name__} at {prefix}")


def _join(obj: Any, tensors: dict) -> Any:
    if isinstance(obj, dict):
        if _TENSOR in obj:
            return tensors[obj[_TENSOR]]
        if _NDARRAY in obj:
            arr = tensors[obj[_NDARRAY]].numpy()
            return arr.astype(np.dtype(obj["dtype"]), copy=False).reshape(obj["shape"])
        if _ITEMS in obj:
            return {k: _join(v, tensors) for k, v in obj[_ITEMS]}
        return {k: _join(v, tensors) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_join(v, tensors) for v in obj]
    return obj


def save_state(path: str | Path, state: dict) -> None:
    """Save a nested state dict as ``path.pt`` (tensors) + ``path.json`` (the rest), both atomically.

    Args:
        path: file stem; ``.pt`` and ``.json`` are appended.
        state: nested dicts/lists of tensors, NumPy arrays, and JSON values.

    Raises:
        TypeError: for a value that is neither (e.g. an object array or a custom class).
    """
    path = Path(path)
    tensors: dict[str, torch.Tensor] = {}
    skeleton = _split(state, tensors, "state")
    buf = io.BytesIO()
    torch.save(tensors, buf)
    atomic_write_bytes(path.with_name(path.name + ".pt"), buf.getvalue())
    atomic_write_json(path.with_name(path.name + ".json"), skeleton)


def load_state(path: str | Path) -> dict:
    """Load a state saved by :func:`save_state` (``torch.load(weights_only=True)``: no code is unpickled).

    Raises:
        FileNotFoundError: if either file is missing (the message names it).
    """
    path = Path(path)
    pt, js = path.with_name(path.name + ".pt"), path.with_name(path.name + ".json")
    for f in (pt, js):
        if not f.exists():
            raise FileNotFoundError(f"checkpoint file {f} is missing")
    tensors = torch.load(pt, weights_only=True)
    skeleton = json.loads(js.read_text())
    return _join(skeleton, tensors)
