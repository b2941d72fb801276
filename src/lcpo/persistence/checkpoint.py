"""Checkpoint files: tensors in a ``.pt`` file, everything else in JSON; verified pairs and atomic run checkpoints.

Atomic writes live in :mod:`lcpo.persistence.atomic` (re-exported here). Checkpoints never pickle code: a nested state dict
is split into its tensors and NumPy arrays, saved with ``torch.save`` and loaded with
``torch.load(weights_only=True)``, and the rest (ints, floats, strings, lists, RNG states), saved as JSON. NumPy
arrays come back as NumPy arrays of the same dtype.

**A pair is verified** (:func:`save_state` / :func:`load_state`): the ``.pt`` file holds a generation id (an
int64 scalar ``__generation__``) and the ``.json`` file holds the same id, the ``.pt`` file's SHA-256 and its
size. A ``.pt`` from another save, a truncated or corrupt one, a ``.pt`` that is not a plain tensor file (a
crafted pickle is refused by ``weights_only=True`` and never runs) or a malformed ``.json`` is refused with a
:class:`CheckpointError` naming the file.

**A run checkpoint is one atomic commit** (:class:`RunCheckpoints`, the ``checkpoint/`` folder of a run)::

    checkpoint/latest.json                  the commit pointer: step, generation folder, SHA-256 of its state.json,
                                            the run configuration
    checkpoint/step-000000000800-<token>/   one generation: state.pt + state.json (a verified pair, generation
                                            id = the step)

A commit writes the new generation into a hidden temporary folder (files fsynced), renames it into place,
fsyncs, then replaces ``latest.json`` atomically (temporary file, fsync, rename, fsync of the folder): that
rename is the commit point. Only then are older generations deleted. A crash at any point therefore leaves
``latest.json`` naming either the previous complete generation or the new complete one, never a mix; leftovers
of an interrupted commit are deleted by the next commit. Reading follows the chain pointer -> state.json
(SHA-256 in the pointer) -> state.pt (SHA-256 and generation in state.json) and refuses any broken link.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lcpo.persistence.atomic import (atomic_write_bytes, atomic_write_json, atomic_write_text, fsync_dir,
                                     json_default)

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_write_json", "save_state", "load_state",
           "CheckpointError", "CommittedCheckpoint", "RunCheckpoints", "check_generator_state"]


class CheckpointError(ValueError):
    """A checkpoint file is missing, truncated, corrupt, unsafe, or does not match the other files of its
    checkpoint; the message names the file."""


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


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _pair(path: str | Path) -> tuple[Path, Path]:
    path = Path(path)
    return path.with_name(path.name + ".pt"), path.with_name(path.name + ".json")


def save_state(path: str | Path, state: dict, generation: int | None = None) -> None:
    """Save a nested state dict as ``path.pt`` (tensors) + ``path.json`` (the rest), a verified pair.

    Each file is written atomically; ``.pt`` first, then ``.json`` (which holds the ``.pt`` file's SHA-256, size
    and the generation id), so a crash between the two leaves a pair that :func:`load_state` refuses.

    Args:
        path: file stem; ``.pt`` and ``.json`` are appended.
        state: nested dicts/lists of tensors, NumPy arrays, and JSON values.
        generation: id stored in both files (int64; e.g. a run's step); default a random 62-bit id.

    Raises:
        TypeError: for a value that is neither (e.g. an object array or a custom class).
        ValueError: for a ``generation`` outside int64 (torch's message).
        OSError: if a file cannot be written (:func:`lcpo.persistence.atomic.atomic_write`).
    """
    pt, js = _pair(path)
    tensors: dict[str, torch.Tensor] = {}
    skeleton = _split(state, tensors, "state")
    gen = secrets.randbits(62) if generation is None else int(generation)
    tensors["__generation__"] = torch.tensor(gen, dtype=torch.int64)
    buf = io.BytesIO()
    torch.save(tensors, buf)
    data = buf.getvalue()
    header = {"format": 2, "generation": gen, "pt_sha256": _sha256(data), "pt_bytes": len(data)}
    # both files' content is built before either is written: a value JSON refuses leaves an existing pair intact
    text = json.dumps({"__checkpoint__": header, "state": skeleton}, indent=2, sort_keys=True,
                      default=json_default) + "\n"
    atomic_write_bytes(pt, data)
    atomic_write_text(js, text)


def check_generator_state(rng: np.random.Generator, state: Any, what: str) -> None:
    """Check that ``state`` is a ``bit_generator.state`` that ``rng`` would take, on a scratch generator of the
    same kind, so a caller can refuse a saved state before it changes anything.

    Raises:
        ValueError: naming ``what`` and the generator kind, for the state of another bit generator or a
            malformed one (NumPy's reason in parentheses).
    """
    try:
        type(rng.bit_generator)().state = state
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"{what}'s rng is not a {type(rng.bit_generator).__name__} state ({exc})") from None


def _load_tensors(pt: Path, data: bytes) -> dict:
    """``torch.load(weights_only=True)`` of ``data`` (the bytes of ``pt``), errors as :class:`CheckpointError`."""
    try:
        # map_location: a checkpoint always loads onto the CPU (saved from the CPU; the agent copies to its device)
        tensors = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as exc:
        if "weights only" in str(exc).lower():
            raise CheckpointError(f"refused to load {pt}: it is not a plain tensor file (it holds pickled Python "
                                  "objects, which could run code); it was not loaded") from None
        raise CheckpointError(f"checkpoint file {pt} is truncated or corrupt ({_first_line(exc)})") from None
    except (RuntimeError, EOFError, ValueError, OSError, KeyError, IndexError) as exc:
        raise CheckpointError(f"checkpoint file {pt} is truncated or corrupt ({_first_line(exc)})") from None
    if not isinstance(tensors, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                for k, v in tensors.items()):
        raise CheckpointError(f"checkpoint file {pt} is not an lcpo checkpoint (expected a dict of tensors)")
    return tensors


def load_state(path: str | Path, generation: int | None = None) -> dict:
    """Load a state saved by :func:`save_state` (``torch.load(weights_only=True)``: no code is unpickled).

    Files written before pairs were verified (no ``__checkpoint__`` header in the ``.json``) load unverified.

    Args:
        path: file stem (``path.pt`` + ``path.json``).
        generation: if given, the generation id both files must hold.

    Raises:
        CheckpointError: (a ``ValueError``) naming the file: missing, malformed JSON, a ``.pt`` whose SHA-256,
            size or generation differs from the ``.json``'s record (truncated, corrupt or from another save),
            a ``.pt`` that is not a plain tensor file (refused, never unpickled), or a ``.json`` that does not
            fit the ``.pt``.
    """
    pt, js = _pair(path)
    for f in (pt, js):
        if not f.is_file():
            raise CheckpointError(f"checkpoint file {f} is missing")
    try:
        doc = json.loads(js.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"checkpoint file {js} is truncated or corrupt (not valid JSON: {exc})") from None
    if not isinstance(doc, dict):
        raise CheckpointError(f"checkpoint file {js} is corrupt (expected a JSON object)")
    data = pt.read_bytes()
    header = doc.get("__checkpoint__")
    if header is not None:
        try:
            gen, sha, size = int(header["generation"]), str(header["pt_sha256"]), int(header["pt_bytes"])
            skeleton = doc["state"]
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"checkpoint file {js} is corrupt (malformed __checkpoint__ header)") from None
        if len(data) != size or _sha256(data) != sha:
            raise CheckpointError(f"checkpoint file {pt} does not match {js.name} (its content hash differs: "
                                  "truncated, corrupt, or from another save)")
        if generation is not None and gen != int(generation):
            raise CheckpointError(f"checkpoint file {js} is generation {gen}, expected {int(generation)}")
    else:
        skeleton = doc
    tensors = _load_tensors(pt, data)
    stored = tensors.pop("__generation__", None)
    if header is not None and (stored is None or stored.numel() != 1 or int(stored) != gen):
        raise CheckpointError(f"checkpoint file {pt} holds generation "
                              f"{None if stored is None else stored.tolist()}, but {js.name} says {gen}")
    try:
        return _join(skeleton, tensors)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"checkpoint file {js} does not fit {pt.name} ({_first_line(exc)})") from None


@dataclass(frozen=True)
class CommittedCheckpoint:
    """What a run's ``checkpoint/latest.json`` points to.

    Attributes:
        step: environment steps done when the checkpoint was taken.
        folder: the generation folder holding ``state.pt`` / ``state.json``.
        config: the run configuration it was taken under (``RunConfig.to_dict`` form).
        state_sha256: SHA-256 of the generation's ``state.json`` recorded by the pointer (None for legacy).
        legacy: True for a checkpoint written before commits were atomic (``checkpoint/state.{pt,json}``,
            read unverified).
    """

    step: int
    folder: Path
    config: dict
    state_sha256: str | None = None
    legacy: bool = False


class RunCheckpoints:
    """The checkpoints of one run: commit a new one atomically, read the committed one (module docstring).

    Only the run folder's single writer (:class:`lcpo.persistence.runlock.RunLock`) may :meth:`commit`.

    Args:
        folder: the run's ``checkpoint`` folder (created by the first commit).
    """

    POINTER = "latest.json"

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    @property
    def pointer(self) -> Path:
        """The commit pointer ``latest.json``."""
        return self.folder / self.POINTER

    def latest(self) -> CommittedCheckpoint | None:
        """The committed checkpoint, or None if none was ever committed (reads only ``latest.json``; a
        pre-commit ``state.json`` is read for its configuration).

        Raises:
            CheckpointError: for a malformed ``latest.json`` or pre-commit ``state.json``, or a missing generation
                folder (naming it).
        """
        p = self.pointer
        if not p.is_file():
            legacy = self.folder / "state.json"
            if legacy.is_file() and (self.folder / "state.pt").is_file():
                try:
                    doc = json.loads(legacy.read_text())
                    return CommittedCheckpoint(int(doc["loop"]["steps"]), self.folder, dict(doc["config"]), None, True)
                except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    raise CheckpointError(f"checkpoint file {legacy} is truncated or corrupt ({_first_line(exc)})") \
                        from None
            return None
        try:
            doc = json.loads(p.read_bytes().decode("utf-8"))
            step, name, config = int(doc["step"]), str(doc["folder"]), dict(doc["config"])
            sha = str(doc["files"]["state.json"]["sha256"])
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"checkpoint file {p} is truncated or corrupt ({_first_line(exc)})") from None
        if doc.get("format") != 2 or "/" in name or name.startswith("."):
            raise CheckpointError(f"checkpoint file {p} is not an lcpo checkpoint pointer "
                                  f"(format {doc.get('format')!r})")
        folder = self.folder / name
        if not folder.is_dir():
            raise CheckpointError(f"checkpoint folder {folder} named by {p} is missing")
        return CommittedCheckpoint(step, folder, config, sha)

    def load(self) -> tuple[int, dict]:
        """Read and verify the committed checkpoint.

        Returns:
            ``(step, state)``.

        Raises:
            FileNotFoundError: if no checkpoint was committed.
            CheckpointError: for any missing, corrupt or mismatched file (see :func:`load_state`).
        """
        info = self.latest()
        if info is None:
            raise FileNotFoundError(f"no checkpoint in {self.folder}")
        if info.legacy:
            return info.step, load_state(info.folder / "state")
        js = info.folder / "state.json"
        if not js.is_file():
            raise CheckpointError(f"checkpoint file {js} is missing")
        if _sha256(js.read_bytes()) != info.state_sha256:
            raise CheckpointError(f"checkpoint file {js} does not match {self.pointer} (its content hash differs: "
                                  "truncated, corrupt, or from another checkpoint)")
        state = load_state(info.folder / "state", generation=info.step)
        return info.step, state

    def commit(self, step: int, state: dict, config: dict) -> None:
        """Write ``state`` as the checkpoint of step ``step``, atomically (module docstring), then delete the
        previous generations and the leftovers of interrupted commits.

        Args:
            step: environment steps done (the generation id).
            state: the run state (see :func:`save_state`).
            config: the run configuration (JSON), stored in the pointer.

        Raises:
            TypeError, ValueError, OSError: those of :meth:`write_generation` and :meth:`point_to`.
        """
        try:  # the pointer's config is checked before anything is written: a refused commit leaves no folder
            json.dumps(config, default=json_default)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"checkpoint config is not JSON: {exc}") from None
        name, sha = self.write_generation(step, state)
        self.point_to(step, name, sha, config)

    def write_generation(self, step: int, state: dict) -> tuple[str, str]:
        """First half of :meth:`commit`: write ``state`` as a new, complete generation folder that nothing points
        to yet (a crash leaves the committed checkpoint as it was; the next commit deletes the leftover).

        Returns:
            ``(folder name, SHA-256 of its state.json)``, for :meth:`point_to`.

        Raises:
            TypeError: for a value :func:`save_state` cannot store, or a ``step`` that is not a number.
            ValueError: for a ``step`` outside int64, or a string that ``int()`` refuses.
            OSError: if the folder or a file cannot be written.
        """
        step = int(step)
        if not -(2**63) <= step < 2**63:
            raise ValueError(f"checkpoint step {step} is outside int64")
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"step-{step:012d}-{secrets.token_hex(4)}"
        tmp = self.folder / f".tmp-{name}"
        tmp.mkdir()
        try:
            save_state(tmp / "state", state, generation=step)
            fsync_dir(tmp)
        except BaseException:  # a refused state leaves no folder behind
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        os.rename(tmp, self.folder / name)
        fsync_dir(self.folder)
        return name, _sha256((self.folder / name / "state.json").read_bytes())

    def point_to(self, step: int, name: str, sha: str, config: dict) -> None:
        """Second half of :meth:`commit`: replace ``latest.json`` atomically with a pointer to the generation
        ``name`` of :meth:`write_generation` (the commit point), then delete every other generation.

        Raises:
            TypeError: for a ``config`` that is not JSON-serialisable
                (:func:`lcpo.persistence.atomic.json_default`).
            OSError: if the pointer cannot be written or an old generation cannot be deleted.
        """
        atomic_write_json(self.pointer, {"format": 2, "step": int(step), "folder": name, "config": config,
                                         "files": {"state.json": {"sha256": sha}}})
        self._collect_garbage(keep=name)

    def load_generation(self, step: int, name: str, sha: str) -> dict:
        """Read and verify generation ``name`` (written by :meth:`write_generation` for ``step``, its state.json
        hashing to ``sha``), whether or not ``latest.json`` points to it.

        Raises:
            CheckpointError: a missing, corrupt or mismatched file (named).
        """
        js = self.folder / name / "state.json"
        if "/" in name or name.startswith(".") or not js.is_file():
            raise CheckpointError(f"checkpoint file {js} is missing")
        if _sha256(js.read_bytes()) != sha:
            raise CheckpointError(f"checkpoint file {js} does not match its population pointer (its content hash "
                                  "differs)")
        return load_state(self.folder / name / "state", generation=step)

    def _collect_garbage(self, keep: str) -> None:
        for p in self.folder.iterdir():
            if p.name == keep:
                continue
            if p.is_dir() and (p.name.startswith("step-") or p.name.startswith(".tmp-step-")):
                shutil.rmtree(p)
            elif p.name in ("state.pt", "state.json") or (p.name.startswith(".") and p.name.endswith(".tmp")):
                p.unlink()
