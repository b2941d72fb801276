"""Compact frozen snapshots of a run's acting network, for the forgetting measure (:mod:`~.forgetting`).

Every run keeps them (:class:`SnapshotRecorder`, made by :func:`lcpo.online.run.execute`): about
:data:`SNAPSHOTS_PER_RUN` snapshots of the network that chooses the actions (``actor`` for the policy-gradient
agents and SAC, ``q`` for the value-based ones, ``base.actor`` / ``base.q`` for a prescient agent), nothing else
(no critic, no optimizer, no buffer), in one file ``<run>/snapshots.npz``:

* ``steps`` ``(n,)`` int64: the environment step of each snapshot (the first update at or after each multiple of
  ``every``, and the run's last step);
* ``every`` int64: steps between snapshots, fixed when the run starts (``ceil(steps / SNAPSHOTS_PER_RUN)``) and
  kept when the run is resumed or extended (an extended run gets more snapshots);
* ``module`` str: the attribute path of the snapshotted network (``actor``, ``q``, ``base.actor``, ...);
* ``p.<name>`` ``(n, *shape)`` float16: the network's state dict, one row per snapshot.

Float16 halves the file (the paper's (64, 64) Pendulum actor: 5,775 weights, 11.6 KB per snapshot, about 380 KB
for a run's 33 snapshots; float32 would be 760 KB). Its rounding (relative 2^-11 ~ 4.9e-4 per weight) moves a
logit by about 1e-3 of its size: it can flip a sampled action where two Gumbel-perturbed logits tie within that,
which changes an evaluated return the way a different noise draw would (docs/forgetting.md gives the measured
effect). The recorder stores what it snapshotted, rounded; the evaluation reads it as float32.

The file is written atomically (:func:`lcpo.persistence.atomic.atomic_write`) before every checkpoint commit and
at the run's end, so it never lags the checkpoint; on resume the snapshots past the checkpoint's step (written
by the interrupted process before it died) are dropped and taken again, identically.

The default cost is small: one state-dict copy per snapshot and one file write per checkpoint.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np

__all__ = ["SNAPSHOTS_PER_RUN", "SNAPSHOT_FILE", "SNAPSHOT_DTYPE", "SnapshotRecorder", "acting_module",
           "load_run_snapshots", "Snapshots"]

#: Snapshots per run (at evenly spaced steps), plus the final one.
SNAPSHOTS_PER_RUN = 32
#: The file name, inside the run folder.
SNAPSHOT_FILE = "snapshots.npz"
#: Storage dtype of the weights.
SNAPSHOT_DTYPE = np.float16


def acting_module(agent):
    """The network that chooses the agent's actions, and its acting rule.

    Args:
        agent: an lcpo agent.

    Returns:
        ``(path, module, rule)``: the attribute path (``"actor"``, ``"q"``, ``"base.actor"``...), the
        ``torch.nn.Module`` mapping ``(B, obs_dim)`` float32 observations to ``(B, D * K)`` or ``(B, D, K)``
        outputs, and ``"sample"`` (a policy: act by sampling its softmax) or ``"greedy"`` (Q-values: act by the
        argmax per action dimension); None for an agent without one such network (MBCD's per-task SAC
        collection).
    """
    from torch import nn

    for prefix, holder in (("", agent), ("base.", getattr(agent, "base", None))):
        if holder is None:
            continue
        if isinstance(getattr(holder, "tasks", None), list):
            return None
        actor = getattr(holder, "actor", None)
        if isinstance(actor, nn.Module):  # a prescient agent set to act greedily (eval_deterministic) does
            greedy = bool(prefix and getattr(getattr(agent, "hp", None), "eval_deterministic", False))
            return prefix + "actor", actor, "greedy" if greedy else "sample"
        q = getattr(holder, "q", None)
        if isinstance(q, nn.Module):
            return prefix + "q", q, "greedy"
    return None


class Snapshots:
    """A run's snapshots as read from ``snapshots.npz``.

    Attributes:
        steps: ``(n,)`` int64 snapshot steps, increasing.
        every: steps between snapshots.
        module: attribute path of the network.
        params: name -> ``(n, *shape)`` float16 arrays.
        rule: the acting rule, ``"sample"`` or ``"greedy"`` (:func:`acting_module`).
    """

    def __init__(self, steps: np.ndarray, every: int, module: str, params: dict[str, np.ndarray],
                 rule: str = "sample"):
        self.steps, self.every, self.module, self.params = np.asarray(steps, np.int64), int(every), module, params
        self.rule = rule

    def __len__(self) -> int:
        return int(self.steps.shape[0])

    def state_dict(self, i: int) -> dict:
        """The ``i``-th snapshot as a torch state dict (float32 tensors)."""
        import torch

        return {k: torch.from_numpy(np.ascontiguousarray(v[i], dtype=np.float32)) for k, v in self.params.items()}

    def keep_until(self, step: int) -> "Snapshots":
        """The snapshots taken at or before ``step``."""
        m = self.steps <= int(step)
        return Snapshots(self.steps[m], self.every, self.module, {k: v[m] for k, v in self.params.items()},
                         self.rule)


def load_run_snapshots(run_dir: str | Path) -> Snapshots | None:
    """Read ``<run_dir>/snapshots.npz``; None if the run has none.

    Raises:
        ValueError: if the file is unreadable or malformed (naming it).
    """
    path = Path(run_dir) / SNAPSHOT_FILE
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            steps, every, module, rule = z["steps"], int(z["every"]), str(z["module"]), str(z["rule"])
            params = {k[2:]: z[k] for k in z.files if k.startswith("p.")}
    except (OSError, KeyError, ValueError) as exc:
        raise ValueError(f"{path}: not a snapshot file ({exc})") from None
    if steps.ndim != 1 or any(v.shape[:1] != steps.shape for v in params.values()) or not params:
        raise ValueError(f"{path}: malformed snapshot file (steps {steps.shape}, "
                         f"params {[v.shape for v in params.values()]})")
    return Snapshots(steps, every, module, params, rule)


class SnapshotRecorder:
    """Takes the snapshots of one run (see the module docstring).

    Args:
        out_dir: the run folder.
        agent: the run's agent (its :func:`acting_module` is snapshotted).
        steps: the run's total steps (sets ``every`` for a fresh run).

    Use :meth:`create`, which returns None for an agent without a single acting network.
    """

    def __init__(self, out_dir: str | Path, agent, steps: int):
        found = acting_module(agent)
        if found is None:
            raise ValueError(f"agent {type(agent).__name__} has no single acting network to snapshot")
        self.path = Path(out_dir) / SNAPSHOT_FILE
        self.module_path, self.module, self.rule = found
        self.every = max(1, math.ceil(int(steps) / SNAPSHOTS_PER_RUN))
        self.steps: list[int] = []
        self.params: dict[str, list[np.ndarray]] = {}
        self.last_index = 0

    @classmethod
    def create(cls, out_dir: str | Path, agent, steps: int) -> "SnapshotRecorder | None":
        """A recorder, or None if the agent has no single acting network (:func:`acting_module`)."""
        return None if acting_module(agent) is None else cls(out_dir, agent, steps)

    def resume_from(self, step: int) -> None:
        """Continue a run from its checkpoint at ``step``: reload the file's snapshots up to ``step`` (and its
        ``every``) and go on from the last of them, as the run never stopped would (a checkpoint between an update
        and the next multiple of ``every`` leaves that multiple to the next update); a run without a file keeps
        the fresh schedule."""
        old = load_run_snapshots(self.path.parent)
        if old is None:
            self.last_index = int(step) // self.every
            return
        old = old.keep_until(step)
        self.every = old.every
        self.steps = [int(s) for s in old.steps]
        self.params = {k: [v[i] for i in range(len(old))] for k, v in old.params.items()}
        # the multiple of `every` the last update reached: the last snapshot's (each new one takes a snapshot)
        self.last_index = self.steps[-1] // self.every if self.steps else 0

    def take(self, step: int) -> None:
        """Snapshot the acting network now, at ``step`` (nothing if one was already taken at this step)."""
        if self.steps and self.steps[-1] == int(step):
            return
        self.steps.append(int(step))
        for name, t in self.module.state_dict().items():
            self.params.setdefault(name, []).append(t.detach().cpu().numpy().astype(SNAPSHOT_DTYPE))

    def on_update(self, step: int) -> None:
        """After an update at ``step``: snapshot if ``step`` reached a new multiple of ``every``."""
        k = int(step) // self.every
        if k > self.last_index:
            self.last_index = k
            self.take(step)

    def write(self) -> None:
        """Write the snapshots taken so far, atomically (nothing before the first)."""
        if not self.steps:
            return
        from lcpo.persistence.atomic import atomic_write_bytes

        buf = io.BytesIO()
        np.savez(buf, steps=np.asarray(self.steps, np.int64), every=np.int64(self.every),
                 module=np.str_(self.module_path), rule=np.str_(self.rule),
                 **{f"p.{k}": np.stack(v) for k, v in self.params.items()})
        atomic_write_bytes(self.path, buf.getvalue())
