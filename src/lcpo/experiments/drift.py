"""Policy drift, a diagnostic: how far the policy moves on states of contexts it is not currently seeing.

This is not forgetting. Forgetting is lost return on old conditions, measured by re-evaluating frozen snapshots
on fixed reference contexts (:mod:`lcpo.experiments.forgetting`). Drift is the quantity LCPO's anchor constraint
bounds (paper Section 4, ``KL(pi_old || pi_new) <= c_anchor`` on OOD states), so it shows whether the constraint
acts; it does not show whether the return on old contexts fell. Its limits: the probe states are each run's
own visited states and the regimes are re-fitted per run, so two runs' tables describe different states and
regimes; KL is inflated for near-deterministic policies; a drift can be an improvement (transfer) as well as a
loss; the "inactive" regimes include ones not yet visited.

During a run (:class:`PolicyProbe`, enabled by ``RunConfig.probe_every``): at the first update at or after every
multiple of ``probe_every`` steps, the actor's parameters and ``per_snapshot`` observations drawn from the
rollout just learned from are written to ``<run>/probes/k<index>.npz`` (large: git-ignored in the committed
results; the forgetting measure uses the compact ``snapshots.npz`` of :mod:`lcpo.experiments.snapshots`).
Only agents with an on-policy actor (``actor`` and ``rollout`` attributes: A2C, TRPO, PPO, LCPO, LCPO-P, CLEAR)
are probed.

After the run (:func:`drift_table`): the probe set is every recorded observation (states the agent really
visited, spread evenly over the run); its context entries are clustered into ``regimes`` groups (k-means, so a
"regime" is a region of context space, whatever the units); for every snapshot ``i`` and regime ``k`` the table
holds the mean, over the probe states of regime ``k``, of ``KL(pi_{i - lag}(.|s) || pi_i(.|s))``: how much the
policy changed on that regime over the last ``lag`` snapshots, and whether the regime was the one active then
(the regime of most observations recorded at snapshot ``i``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["PolicyProbe", "drift_table", "load_snapshots"]


class PolicyProbe:
    """Records actor snapshots and visited observations during a run (see the module docstring).

    Args:
        out_dir: the run folder; snapshots go to ``out_dir/probes``.
        every: steps between snapshots (>= 1).
        per_snapshot: observations kept per snapshot (drawn without replacement from the last rollout).
        seed: seed of the draw (each snapshot's draw is seeded by ``(seed, index)``, so a resumed run records
            the same states).

    Raises:
        ValueError: if ``every`` or ``per_snapshot`` is < 1.
    """

    def __init__(self, out_dir: str | Path, every: int, per_snapshot: int = 32, seed: int = 0):
        if every < 1 or per_snapshot < 1:
            raise ValueError(f"probe every and per_snapshot must be >= 1, got {every!r}, {per_snapshot!r}")
        self.dir = Path(out_dir) / "probes"
        self.every, self.per_snapshot, self.seed = int(every), int(per_snapshot), int(seed)
        self.last_index = 0

    @staticmethod
    def supports(agent) -> bool:
        """True for agents with an on-policy ``actor`` and ``rollout`` (the ones this probe can record)."""
        return hasattr(agent, "actor") and hasattr(agent, "rollout")

    def resume_from(self, steps: int) -> None:
        """Continue after a checkpoint taken at ``steps``, from the last snapshot on disk recorded at or before it,
        as the run never stopped would (a checkpoint between an update and the next multiple of ``every`` leaves
        that multiple to the next update; a snapshot the interrupted process recorded after the checkpoint is
        recorded again, the same)."""
        self.last_index = 0
        for f in self.dir.glob("k*.npz"):
            with np.load(f) as z:
                if int(z["step"]) <= int(steps):
                    self.last_index = max(self.last_index, int(f.stem[1:]))

    def on_update(self, step: int, agent) -> None:
        """Record a snapshot if ``step`` reached a new multiple of ``every``."""
        k = int(step) // self.every
        if k <= self.last_index or not self.supports(agent):
            return
        self.last_index = k
        obs = agent.rollout.obs[: agent.rollout.size]
        rng = np.random.default_rng([self.seed, k])
        pick = rng.choice(obs.shape[0], size=min(self.per_snapshot, obs.shape[0]), replace=False)
        params = {f"p.{name}": t.detach().cpu().numpy().copy() for name, t in agent.actor.state_dict().items()}
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f".k{k:05d}.tmp.npz"
        np.savez(tmp, step=np.int64(step), obs=obs[np.sort(pick)].copy(), **params)
        tmp.replace(self.dir / f"k{k:05d}.npz")


def load_snapshots(run_dir: str | Path) -> list[dict]:
    """The snapshots of a run, in step order: dicts with ``step`` (int), ``obs`` ``(n, obs_dim)`` float32 and
    ``params`` (actor state dict of NumPy arrays). Empty if the run recorded none."""
    out = []
    for f in sorted((Path(run_dir) / "probes").glob("k*.npz")):
        with np.load(f) as z:
            out.append({"step": int(z["step"]), "obs": z["obs"],
                        "params": {k[2:]: z[k] for k in z.files if k.startswith("p.")}})
    return out


def _kmeans(x: np.ndarray, k: int, seed: int, iters: int = 50) -> np.ndarray:
    """Labels ``(n,)`` of a plain k-means (Lloyd; k-means++ start) on standardised ``x`` ``(n, d)``."""
    from scipy.cluster.vq import kmeans2

    sd = x.std(0)
    z = (x - x.mean(0)) / np.where(sd > 0, sd, 1.0)
    _, labels = kmeans2(z, k, iter=iters, minit="++", seed=seed)
    return labels


def drift_table(run_dir: str | Path, actor, context_indices, regimes: int = 4, lag: int = 1,
                     seed: int = 0):
    """Per-snapshot, per-regime policy drift ``KL(pi_{i-lag} || pi_i)`` on the run's probe states.

    Args:
        run_dir: a run folder with ``probes/`` (see :class:`PolicyProbe`).
        actor: a :class:`lcpo.agents.nets.CategoricalPolicy` of the run's architecture (its weights are replaced).
        context_indices: observation entries holding the context (clustered into regimes).
        regimes: number of context regimes (k-means clusters; fewer if there are fewer distinct contexts).
        lag: snapshots between the two policies compared (>= 1).
        seed: k-means seed.

    Returns:
        A ``pandas.DataFrame`` with columns ``step``, ``regime``, ``kl`` (mean nats per action dimension over the
        regime's probe states), ``w1`` (mean Wasserstein-1 distance between the two action distributions over the
        ordered bins, in bins, per action dimension: how far the expected action moved, which KL does not see for
        discretized continuous actions, where a move to a neighbouring bin costs as much KL as one across the
        range), ``active`` (bool), ``n_states``; empty if fewer than ``lag + 1`` snapshots.

    Raises:
        ValueError: if ``lag`` < 1 or the run has no context entries.
    """
    import pandas as pd
    import torch

    from lcpo.numerics import categorical

    if lag < 1:
        raise ValueError(f"lag must be >= 1, got {lag!r}")
    idx = list(context_indices)
    if not idx:
        raise ValueError("drift_table needs the environment's context entries (context_indices is empty)")
    snaps = load_snapshots(run_dir)
    cols = ["step", "regime", "kl", "w1", "active", "n_states"]
    if len(snaps) <= lag:
        return pd.DataFrame(columns=cols)
    probe = np.concatenate([s["obs"] for s in snaps]).astype(np.float32)
    owner = np.concatenate([np.full(s["obs"].shape[0], i) for i, s in enumerate(snaps)])
    n_distinct = len(np.unique(probe[:, idx].round(6), axis=0))
    k = max(1, min(regimes, n_distinct))
    labels = _kmeans(probe[:, idx].astype(np.float64), k, seed) if k > 1 else np.zeros(len(probe), int)
    # name regimes by their mean context norm, so regime 0 is the calmest whatever k-means' order
    order = np.argsort([np.linalg.norm(probe[labels == r][:, idx].mean(0)) if (labels == r).any() else np.inf
                        for r in range(k)])
    labels = np.argsort(order)[labels]
    x = torch.from_numpy(probe)
    logps = []
    with torch.no_grad():
        for s in snaps:
            actor.load_state_dict({n: torch.from_numpy(np.asarray(v)) for n, v in s["params"].items()})
            logps.append(actor.log_probs(x).double())
    rows = []
    for i in range(lag, len(snaps)):
        p_old, p_new = logps[i - lag], logps[i]
        # (n,) nats per action dimension; >= 0 by construction, exact with zero-probability actions
        kl = (categorical.kl(p_old, p_new) / p_old.shape[-2]).numpy()
        # (n,) Wasserstein-1 distance over the ordered bins (in bins), mean over action dimensions
        w1 = (p_old.exp().cumsum(-1) - p_new.exp().cumsum(-1)).abs().sum(-1).mean(-1).numpy()
        counts = np.bincount(labels[owner == i], minlength=k)
        active = int(np.argmax(counts))
        for r in range(k):
            m = labels == r
            rows.append((snaps[i]["step"], r, float(kl[m].mean()) if m.any() else float("nan"),
                         float(w1[m].mean()) if m.any() else float("nan"), r == active, int(m.sum())))
    return pd.DataFrame(rows, columns=cols)


#: The name of :func:`drift_table` before issue 27 (it measured drift, never forgetting); kept for old scripts.
forgetting_table = drift_table
