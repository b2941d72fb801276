"""The trap grid world experiment of the paper's Figure 1: forgetting in A2C, none in tabular A2C and LCPO.

Schedule (spec ``windy-gym.md``, "Grid world"): no trap for 4,000 epochs, trap for 12,000, no trap for 4,000;
one epoch is one 200-step rollout (one agent update). ``scale`` multiplies the three phase lengths uniformly
(e.g. ``scale=0.1``: 400 / 1,200 / 400 epochs). The schedule is fed to ``lcpo/TrapGrid-v0`` as a per-step
trace (``trace_unit="step"``), so the phases start exactly at epoch boundaries; an episode in progress at a
switch sees the trap appear or disappear at that step.

Agents and their settings (:data:`AGENT_OVERRIDES`): A2C and LCPO with (32, 32) networks, gamma 0.9 and
lambda 0.8 (spec); LCPO with ``c_anchor = 1e-5`` and the L2 detector with threshold 0.5 on the context entry
(squared distance of z to the recent batch's mean z: a trap state is OOD in a no-trap batch and vice versa);
its reservoir keeps 1 % of the run's states (paper), at least 2,000. Tabular A2C uses its own defaults
(:class:`~lcpo.agents.tabular_a2c.TabularA2CHyperparameters`). Further overrides, the same at every scale,
make the experiment work in a scaled-down run (``docs/gridworld.md`` explains each):

* ``actor_lr = 4e-3``, ``critic_lr = 1e-2`` (A2C, LCPO): ten times the Table 11 rates, so that the first
  phase converges in about 100 epochs instead of a few thousand;
* exploration: ``entropy_coef = 0.3`` (A2C) and ``entropy_base = 0.3`` (LCPO's automatic temperature starts
  there). Without it, a network policy that has converged in the no-trap phase stays deterministic in the trap
  phase and settles on bumping into walls: with gamma 0.9 that is worth -10, better than the trap's -10.9, and
  the detour around the trap (-3.4 from the decision cell) is never found;
* ``damping = 0.01`` (LCPO): the natural-gradient step of norm ``sqrt(2 c_anchor / damping)`` at most is
  0.014 with the default damping 0.1, too small to learn the trap behaviour within a scaled trap phase;
* ``normalize_returns = False`` (A2C, LCPO): the settings above were validated on raw rewards (the figure
  predates the return normaliser; its rewards are already of order 1).

Recorded per epoch (after the epoch's update), per agent and seed: the mean return of the episodes that ended
in the epoch, and the total-variation distances to the optimal action at the decision cell (2, 1):
``tv_no_trap = 1 - pi(Up | no trap)`` and ``tv_trap = 1 - pi(Left | trap)`` (for a distribution and a point
mass on action ``a``, the total-variation distance is ``1 - pi(a)``).
"""

from __future__ import annotations

import io
import math
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from lcpo.persistence.atomic import atomic_write_bytes

__all__ = ["PAPER_PHASES", "AGENT_OVERRIDES", "EPOCH_STEPS", "GRID_AGENTS", "phases", "schedule",
           "decision_probs", "run_one", "run_experiment", "Acceptance", "acceptance", "plot_gridworld",
           "COLUMNS", "default_workers"]

#: (trap on?, epochs) of the paper's three phases.
PAPER_PHASES: tuple[tuple[int, int], ...] = ((0, 4000), (1, 12000), (0, 4000))
#: environment steps per epoch (one rollout, one update).
EPOCH_STEPS = 200
#: agents of the figure, in plotting order.
GRID_AGENTS: tuple[str, ...] = ("a2c", "tabular-a2c", "lcpo")
#: hyperparameter overrides per agent (spec "Grid world"; see the module docstring).
AGENT_OVERRIDES: dict[str, dict] = {
    "a2c": {"hidden": (32, 32), "gamma": 0.9, "gae_lambda": 0.8, "actor_lr": 4e-3, "critic_lr": 1e-2,
            "entropy_coef": 0.3, "normalize_returns": False},
    "tabular-a2c": {},
    "lcpo": {"hidden": (32, 32), "gamma": 0.9, "gae_lambda": 0.8, "actor_lr": 4e-3, "critic_lr": 1e-2,
             "c_anchor": 1e-5, "detector": "l2", "ood_threshold": 0.5, "entropy_base": 0.3, "damping": 0.01,
             "normalize_returns": False},
}
#: columns of the per-epoch table.
COLUMNS = ("agent", "seed", "epoch", "trap", "return", "tv_no_trap", "tv_trap")


def phases(scale: float = 1.0) -> list[tuple[int, int]]:
    """The three ``(trap, epochs)`` phases scaled by ``scale`` (each at least one epoch).

    Raises:
        ValueError: if ``scale`` is not a finite number in (0, 1].
    """
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) \
            or not 0 < scale <= 1:
        raise ValueError(f"scale must be a number in (0, 1], got {scale!r}")
    return [(trap, max(1, round(n * scale))) for trap, n in PAPER_PHASES]


def schedule(scale: float = 1.0) -> np.ndarray:
    """Per-epoch trap flags ``(n_epochs,)`` int64 (0 = no trap) of the scaled schedule."""
    return np.concatenate([np.full(n, trap, dtype=np.int64) for trap, n in phases(scale)])


def decision_probs(agent) -> tuple[float, float]:
    """``(pi(Up | decision cell, no trap), pi(Left | decision cell, trap))`` of an agent's policy.

    Args:
        agent: an agent with a :class:`~lcpo.agents.nets.CategoricalPolicy` ``actor`` (A2C, TabularA2C, LCPO).
    """
    from lcpo.envs.gridworld import DECISION, LEFT, UP, TrapGridEnv

    obs = np.stack([TrapGridEnv.observation_of(DECISION, False), TrapGridEnv.observation_of(DECISION, True)])
    with torch.no_grad():
        p = agent.actor.log_probs(torch.from_numpy(obs)).exp()[:, 0, :].numpy()
    return float(p[0, UP]), float(p[1, LEFT])


def _overrides(agent: str, n_epochs: int, extra: dict | None) -> dict:
    ov = dict(AGENT_OVERRIDES.get(agent, {}))
    if agent == "lcpo":
        ov["reservoir_size"] = max(2000, n_epochs * EPOCH_STEPS // 100)
    ov.update(extra or {})
    return ov


def run_one(agent: str, seed: int, scale: float = 1.0, overrides: dict | None = None) -> pd.DataFrame:
    """Run one agent on the scaled schedule with one seed.

    Args:
        agent: a name in :data:`lcpo.agents.AGENTS` (``a2c``, ``tabular-a2c``, ``lcpo``, ...).
        seed: run seed (agent and environment).
        scale: phase-length multiplier (see :func:`phases`).
        overrides: extra hyperparameter overrides (applied after :data:`AGENT_OVERRIDES`).

    Returns:
        One row per epoch with :data:`COLUMNS` (``return`` is NaN for an epoch in which no episode ended).

    Raises:
        ValueError: unknown agent or hyperparameter, bad scale.
    """
    from lcpo.agents import AGENTS
    from lcpo.envs.registration import make_env

    flags = schedule(scale)
    env = make_env("lcpo/TrapGrid-v0", trace=np.repeat(flags, EPOCH_STEPS).astype(np.float64),
                   trace_unit="step")
    ag = AGENTS[agent](env, seed=seed, **_overrides(agent, len(flags), overrides))
    if ag.hp.rollout_steps != EPOCH_STEPS:
        raise ValueError(f"the grid experiment needs rollout_steps={EPOCH_STEPS} (one update per epoch), "
                         f"got {ag.hp.rollout_steps}")
    rows = []
    seen = 0
    for epoch, trap in enumerate(flags):
        ag.learn(EPOCH_STEPS)
        eps = ag.episodes
        rets = [r[2] for r in eps[seen:]]
        seen = len(eps)
        p_up, p_left = decision_probs(ag)
        rows.append((agent, seed, epoch, int(trap), float(np.mean(rets)) if rets else math.nan,
                     1.0 - p_up, 1.0 - p_left))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _run_task(args) -> pd.DataFrame:
    torch.set_num_threads(1)
    return run_one(*args)


def run_experiment(scale: float = 1.0, seeds: int = 4, agents: Sequence[str] = GRID_AGENTS, workers: int = 1,
                   overrides: dict[str, dict] | None = None, progress: Callable | None = None) -> pd.DataFrame:
    """Run every agent with seeds ``0 .. seeds - 1`` on the scaled schedule.

    Args:
        scale: phase-length multiplier.
        seeds: number of seeds (>= 1).
        agents: agent names.
        workers: worker processes (1: run in this process).
        overrides: per-agent extra hyperparameter overrides, e.g. ``{"lcpo": {"c_anchor": 1e-4}}``.
        progress: optional callable wrapping the iterator of finished runs (e.g. ``tqdm`` with ``total``).

    Returns:
        All runs' rows (:data:`COLUMNS`), sorted by agent order, seed and epoch.

    Raises:
        ValueError: for ``seeds < 1``, ``workers < 1``, an unknown agent, or overrides for an agent not run.
    """
    from lcpo.agents import AGENTS

    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"seeds must be an integer >= 1, got {seeds!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    for a in agents:
        if a not in AGENTS:
            raise ValueError(f"unknown agent {a!r}; known agents: {sorted(AGENTS)}")
    overrides = overrides or {}
    for a in overrides:
        if a not in agents:
            raise ValueError(f"overrides given for agent {a!r}, which is not run (agents: {list(agents)})")
    phases(scale)
    tasks = [(a, s, scale, overrides.get(a)) for a in agents for s in range(seeds)]
    wrap = progress or (lambda it, total: it)
    if workers == 1:
        frames = list(wrap((_run_task(t) for t in tasks), total=len(tasks)))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            frames = list(wrap(pool.map(_run_task, tasks), total=len(tasks)))
    df = pd.concat(frames, ignore_index=True)
    order = {a: i for i, a in enumerate(agents)}
    df = df.sort_values(["agent", "seed", "epoch"], key=lambda c: c.map(order) if c.name == "agent" else c)
    return df.reset_index(drop=True)


@dataclass(frozen=True)
class Acceptance:
    """Measured acceptance numbers of issue 4 (seed means; ``w`` = a window of 5 % of the first phase).

    Attributes:
        seeds: number of seeds measured.
        a2c_tv_no_trap_before: A2C's no-trap distance over the last ``w`` epochs before the trap.
        a2c_tv_no_trap_trap_end: A2C's no-trap distance over the last ``w`` epochs of the trap phase.
        a2c_min_return_after: A2C's lowest epoch return in the first ``w`` epochs after the switch back.
        tabular_tv_no_trap_change: tabular A2C's largest change of its no-trap distance during the trap phase.
        lcpo_tv_no_trap_max: LCPO's largest no-trap distance during the trap phase.
        a2c_tv_no_trap_max: A2C's largest no-trap distance during the trap phase.
        lcpo_worst_return_after: LCPO's lowest epoch return after the switch back, skipping ``settle`` epochs
            (fewer if the last phase is shorter).
        settle: epochs skipped after the switch back before LCPO's return is judged ("a few epochs").
    """

    seeds: int
    a2c_tv_no_trap_before: float
    a2c_tv_no_trap_trap_end: float
    a2c_min_return_after: float
    tabular_tv_no_trap_change: float
    lcpo_tv_no_trap_max: float
    a2c_tv_no_trap_max: float
    lcpo_worst_return_after: float
    settle: int

    def checks(self) -> dict[str, bool]:
        """The issue's acceptance criteria, each True if met."""
        return {
            "a2c_forgets": self.a2c_tv_no_trap_trap_end > self.a2c_tv_no_trap_before + 0.1,
            "a2c_return_drops_below_-4": self.a2c_min_return_after < -4.0,
            "tabular_does_not_change": self.tabular_tv_no_trap_change < 1e-6,
            "lcpo_far_below_a2c": self.lcpo_tv_no_trap_max < 0.5 * self.a2c_tv_no_trap_max,
            "lcpo_return_within_0.5": self.lcpo_worst_return_after >= -3.5,
        }


def acceptance(df: pd.DataFrame, settle: int = 5) -> Acceptance:
    """Measure the acceptance numbers from :func:`run_experiment` output holding a2c, tabular-a2c and lcpo.

    Raises:
        ValueError: if an agent is missing or the table does not follow one schedule.
    """
    missing = [a for a in GRID_AGENTS if a not in set(df["agent"])]
    if missing:
        raise ValueError(f"acceptance needs runs of {list(GRID_AGENTS)}; missing {missing}")
    mean = df.groupby(["agent", "epoch"])[["return", "tv_no_trap", "tv_trap", "trap"]].mean()
    trap = mean.loc["a2c", "trap"].to_numpy()
    starts = np.flatnonzero(np.diff(trap) != 0) + 1
    if len(starts) != 2:
        raise ValueError(f"expected a no-trap / trap / no-trap schedule, found switches at epochs {starts.tolist()}")
    s2, s3 = int(starts[0]), int(starts[1])
    w = max(1, round(0.05 * s2))

    def col(agent, name):
        return mean.loc[agent, name].to_numpy()

    a2c_tv, tab_tv, lcpo_tv = col("a2c", "tv_no_trap"), col("tabular-a2c", "tv_no_trap"), col("lcpo", "tv_no_trap")
    return Acceptance(
        seeds=int(df["seed"].nunique()),
        a2c_tv_no_trap_before=float(a2c_tv[s2 - w:s2].mean()),
        a2c_tv_no_trap_trap_end=float(a2c_tv[s3 - w:s3].mean()),
        a2c_min_return_after=float(np.nanmin(col("a2c", "return")[s3:s3 + w])),
        tabular_tv_no_trap_change=float(np.abs(tab_tv[s2:s3] - tab_tv[s2 - 1]).max()),
        lcpo_tv_no_trap_max=float(lcpo_tv[s2:s3].max()),
        a2c_tv_no_trap_max=float(a2c_tv[s2:s3].max()),
        lcpo_worst_return_after=float(np.nanmin(col("lcpo", "return")[min(s3 + settle, len(trap) - 1):])),
        settle=int(settle),
    )


_LABELS = {"a2c": "A2C", "tabular-a2c": "Tabular A2C", "lcpo": "LCPO"}


def plot_gridworld(df: pd.DataFrame, path: str | Path, smooth: int | None = None) -> Path:
    """Write the paper's three-panel figure (PNG) from :func:`run_experiment` output.

    Panels: episodic return, ``1 - pi(Up | no trap)`` and ``1 - pi(Left | trap)`` at the decision cell, over
    epochs; lines are seed means (smoothed by a centred moving average of ``smooth`` epochs, default 1 % of
    the run), bands the seed min-max; trap-mode epochs are shaded.

    Returns:
        The written path (written atomically).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = int(df["epoch"].max()) + 1
    smooth = smooth or max(1, n // 100)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4), constrained_layout=True)
    panels = (("return", "Episodic return"), ("tv_no_trap", "TV distance, no trap: 1 - pi(Up)"),
              ("tv_trap", "TV distance, trap: 1 - pi(Left)"))
    trap = df[df["agent"] == df["agent"].iloc[0]].groupby("epoch")["trap"].first().to_numpy()
    edges = np.flatnonzero(np.diff(np.r_[0, trap, 0]))
    for ax, (col, title) in zip(axes, panels):
        for lo, hi in zip(edges[::2], edges[1::2]):
            ax.axvspan(lo, hi, color="0.85", zorder=0, label="trap on" if lo == edges[0] else None)
        for agent, g in df.groupby("agent", sort=False):
            wide = g.pivot(index="epoch", columns="seed", values=col)
            wide = wide.rolling(smooth, center=True, min_periods=1).mean()
            m = wide.mean(axis=1)
            line, = ax.plot(m.index, m.to_numpy(), label=_LABELS.get(agent, agent), lw=1.5)
            ax.fill_between(m.index, wide.min(axis=1), wide.max(axis=1), color=line.get_color(), alpha=0.2, lw=0)
        ax.set_title(title)
        ax.set_xlabel(f"epoch ({EPOCH_STEPS} steps)")
        if col == "return":
            ax.axhline(-3, color="k", ls=":", lw=0.8)
            ax.axhline(-5, color="k", ls="--", lw=0.8)
        else:
            ax.set_ylim(-0.02, 1.02)
    axes[0].legend(loc="lower left", fontsize=8)
    fig.suptitle(f"Trap grid world ({df['seed'].nunique()} seeds; dotted -3 / dashed -5: optimal returns)")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    atomic_write_bytes(path, buffer.getvalue())  # a reader never sees half a PNG
    plt.close(fig)
    return path


def default_workers() -> int:
    """Worker processes to use by default: the CPU count available to this process, at most 4."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        n = os.cpu_count() or 1
    return max(1, min(4, n))
