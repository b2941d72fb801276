"""Forgetting as lost return on fixed reference contexts, without task labels (issue 27 item 2).

The continual-learning measure (Chaudhry et al. 2018, "Riemannian Walk", Section 4; Continual World, Wolczyk et
al. 2021, Section 3.2; Lopez-Paz & Ranzato 2017 for backward transfer) evaluates frozen snapshots of the learner
on a fixed set of tasks: ``R[t, k]`` is the return of snapshot ``t`` on task ``k``, and the forgetting of task
``k`` at ``t`` is ``F_k(t) = max_{t' <= t} R[t', k] - R[t, k]``. Our environments have no tasks, only a context
trace, so the tasks are replaced by **reference contexts** made from the trace alone:

* :func:`reference_contexts`: the trace's context regimes, a k-means quantisation of the trace's rows (SciPy's
  ``kmeans2``, the best of 10 k-means++ starts from a FIXED generator seed, on a fixed stride of the rows), regimes named by the
  norm of their centre (regime 0 the calmest). It reads the trace and nothing else, so every agent and seed run
  on one trace meets the same references.
* each regime is evaluated ``"constant"`` (default: the context held at the regime's centre for the whole
  episode; the cleanest "task": one condition, no transitions, and the centre is what the regime's rows have
  in common) or ``"window"`` (the trace replayed from the window of ``episode_steps`` rows that holds the most
  rows of the regime, the earliest such: the regime as it really occurred, noise included).

:func:`evaluate_snapshots` runs each frozen snapshot (:mod:`lcpo.experiments.snapshots`) on each reference for
``episodes`` episodes. The episodes are seeded: episode ``e`` of regime ``k`` resets its environment with a seed
drawn from ``SeedSequence([seed, k, e])``, and a policy samples its actions by Gumbel-max with noise from
``default_rng([seed, k, e])``, the same noise for every snapshot, agent and seed (common random numbers: a
change of ``R`` across snapshots is a change of the policy, not of the draw). Same inputs, same ``R`` bit for
bit. The acting rule is the agent's own: a policy (A2C, TRPO, PPO, LCPO, SAC, ...) samples, as it did while it
learned and was scored; a Q-learner (DDQN, PT-DQN, ...) acts greedily, its learned policy without the
exploration schedule.

Metrics (:func:`forgetting_matrix`, :func:`backward_transfer`): ``F[t, k]`` as above (>= 0, 0 while the return
on a regime is at its best so far) and its mean over regimes ``F(t)``. Backward transfer, adapted without task
labels: GEM's ``BWT = 1/(T-1) sum_i (R[T, i] - R[i, i])`` compares the final model with the one just after
task ``i`` was learned; here "just after regime ``k`` was learned" is the snapshot that ends the last
snapshot interval in which ``k`` was the active regime (the trace rows the run consumed between two snapshots,
by majority), and the mean runs over the regimes that were active in some interval before the last one.
Negative BWT is forgetting, positive is transfer.

The snapshots of the committed paper-budget runs (issue 16) were never kept in this compact form; their drift
probes are git-ignored and one run's are lost. Their forgetting needs the reruns of issue 27 item 6.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lcpo.experiments.stats import MeanCI, percent

__all__ = ["ReferenceContexts", "reference_contexts", "run_trace", "evaluate_snapshots", "forgetting_matrix",
           "backward_transfer", "active_regimes", "seed_interval", "forgetting_study", "write_forgetting",
           "forgetting_section", "forgetting_comparisons", "FORGETTING_MEASURES", "append_forgetting_section", "MODES",
           "MAX_REGIMES", "NO_ACTING_NETWORK", "NoContextTrace"]

#: Ways a regime is presented to a snapshot.
MODES = ("constant", "window")


@dataclass(frozen=True)
class ReferenceContexts:
    """The reference contexts of one trace.

    Attributes:
        trace_name: the trace's name.
        trace_length: rows of the trace.
        centres: ``(k, d)`` float64 regime centres (trace units), ordered by norm.
        labels: ``(T,)`` int64 regime of every trace row (nearest centre).
        mode: ``"constant"`` or ``"window"``.
        windows: ``(k, L, d)`` float64 replayed windows (``"window"`` mode), else None.
        window_starts: ``(k,)`` int64 first row of each window (``"window"`` mode), else None.
        seed: the k-means seed.
    """

    trace_name: str
    trace_length: int
    centres: np.ndarray
    labels: np.ndarray
    mode: str
    windows: np.ndarray | None
    window_starts: np.ndarray | None
    seed: int

    @property
    def regimes(self) -> int:
        """Number of regimes ``k``."""
        return int(self.centres.shape[0])

    def context(self, k: int) -> np.ndarray:
        """``(L, d)`` float64 context rows of regime ``k`` as the environment replays them (``(1, d)`` held
        constant)."""
        return self.centres[k][None, :] if self.windows is None else self.windows[k]


#: Most regimes :func:`reference_contexts` makes: each one adds an evaluation episode per snapshot and episode of
#: every run (32 snapshots x 64 regimes x 10 episodes: 20,480 episodes, 8-17 min per run at docs/forgetting.md's measured rate).
MAX_REGIMES = 64


def reference_contexts(trace, regimes: int = 6, mode: str = "constant", episode_steps: int = 200,
                       seed: int = 0, max_points: int = 20_000, restarts: int = 10) -> ReferenceContexts:
    """The trace's context regimes and their reference contexts (see the module docstring).

    Args:
        trace: a :class:`lcpo.contexts.ContextTrace` (or ``(T, d)`` array).
        regimes: number of k-means clusters, 1 to :data:`MAX_REGIMES` and at most the k-means sample's rows
            (fewer are returned if the trace has fewer distinct rows, or a cluster is empty).
        mode: ``"constant"`` or ``"window"``.
        episode_steps: window length (``"window"`` mode).
        seed: k-means generator seed (fixed: the references must not depend on the run).
        max_points: k-means runs on every ``ceil(T / max_points)``-th row.
        restarts: k-means runs (k-means++ starts drawn in turn from one generator seeded by ``seed``); the one
            with the lowest within-cluster sum of squares is kept.

    Returns:
        A :class:`ReferenceContexts`.

    Raises:
        ValueError: for ``regimes`` outside 1 to :data:`MAX_REGIMES` or above the rows k-means sees, an unknown
            ``mode``, ``episode_steps < 1``, or a window longer than the trace.
    """
    from scipy.cluster.vq import kmeans2

    from lcpo.contexts.trace import ContextTrace

    tr = trace if isinstance(trace, ContextTrace) else ContextTrace(np.asarray(trace, dtype=np.float64), "array")
    if isinstance(regimes, bool) or int(regimes) != regimes or regimes < 1:
        raise ValueError(f"regimes must be an integer >= 1, got {regimes!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if episode_steps < 1:
        raise ValueError(f"episode_steps must be >= 1, got {episode_steps!r}")
    values = np.asarray(tr.values, dtype=np.float64)
    T = values.shape[0]
    if mode == "window" and episode_steps > T:
        raise ValueError(f"window mode: episode_steps {episode_steps} exceed trace {tr.name!r}'s {T} rows")
    x = values[:: max(1, math.ceil(T / max_points))]
    if regimes > MAX_REGIMES or regimes > len(x):
        raise ValueError(f"regimes {regimes}: more than " + (
            f"the {MAX_REGIMES} allowed (each regime adds snapshots x episodes evaluation episodes per run)"
            if regimes > MAX_REGIMES else f"the {len(x)} rows of trace {tr.name!r}" + (
                f" that k-means samples (of {T})" if len(x) < T else "")))
    k = int(min(regimes, len(np.unique(x.round(9), axis=0))))
    if k > 1:
        rng, best = np.random.default_rng(seed), None
        for _ in range(restarts):  # Lloyd from k-means++ starts drawn in turn from one seeded generator
            c, lab = kmeans2(x, k, iter=50, minit="++", seed=rng)
            inertia = float(((x - c[lab]) ** 2).sum())
            if best is None or inertia < best[0]:
                best = (inertia, c)
        centres = best[1]
    else:
        centres = x.mean(0, keepdims=True)
    labels = _nearest(values, centres)
    used = np.unique(labels)  # drop empty clusters
    centres = centres[used]
    norms = np.linalg.norm(centres, axis=1)
    order = np.lexsort(tuple(centres.T[::-1]) + (norms,))  # by norm, ties by the coordinates
    centres = centres[order]
    labels = _nearest(values, centres)
    windows = starts = None
    if mode == "window":
        starts = np.empty(len(centres), np.int64)
        for r in range(len(centres)):
            c = np.concatenate([[0], np.cumsum(labels == r)])
            counts = c[episode_steps:] - c[:-episode_steps]  # rows of regime r in [s, s + L)
            starts[r] = int(np.argmax(counts))
        windows = np.stack([values[s:s + episode_steps] for s in starts])
    return ReferenceContexts(tr.name, T, centres, labels, mode, windows, starts, int(seed))


def _nearest(values: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """``(T,)`` int64 index of the nearest centre of each row (chunked, so a 20M-row trace stays small)."""
    out = np.empty(values.shape[0], np.int64)
    for i in range(0, values.shape[0], 1 << 16):
        v = values[i:i + (1 << 16)]
        out[i:i + len(v)] = ((v[:, None, :] - centres[None]) ** 2).sum(-1).argmin(1)
    return out


def _run_config(run_dir: Path):
    from lcpo.online.run import RunConfig

    path = run_dir / "config.json"
    try:
        return RunConfig.from_dict(json.loads(path.read_text())["run"])
    except (OSError, KeyError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a run configuration ({exc})") from None


class NoContextTrace(ValueError):
    """The run's environment is not driven by a :class:`~lcpo.contexts.ContextTrace` (:func:`run_trace`)."""


def run_trace(config):
    """The :class:`~lcpo.contexts.ContextTrace` a run's environment was made with.

    Raises:
        NoContextTrace: (a ValueError) if the run's environment is not driven by a context trace (a straggler
            workload, a grid-world schedule): reference contexts need one.
        lcpo.contexts.TraceError: (a ValueError) the trace cannot be made (a trace file moved or deleted since).
    """
    from lcpo.contexts.trace import ContextTrace
    from lcpo.envs.preflight import run_env_kwargs

    trace = run_env_kwargs(config.env, config.trace, config.trace_length, config.env_kwargs).get("trace")
    if not isinstance(trace, ContextTrace):
        raise NoContextTrace(f"run on {config.env} (trace {config.trace!r}) has no context trace to take reference "
                         "contexts from; the forgetting measure needs an environment driven by a ContextTrace "
                         "(the windy environments, or a user's environment given trace=)")
    return trace


def _reference_env(config, context: np.ndarray, base_kwargs: dict):
    """The run's environment on one reference context; ``base_kwargs`` is the run's
    :func:`~lcpo.envs.preflight.run_env_kwargs`, resolved once per run by the caller (resolving it builds the
    run's whole trace, 8M-20M steps: once per episode it was most of an evaluation's time)."""
    from lcpo.contexts.trace import ContextTrace
    from lcpo.envs.registration import make_env

    kwargs = dict(base_kwargs)
    kwargs["trace"] = ContextTrace(context, "reference")
    return make_env(config.env, **kwargs)


def _episode_seed(seed: int, k: int, e: int) -> int:
    return int(np.random.SeedSequence([seed, k, e]).generate_state(1)[0] & 0x7FFFFFFF)


def evaluate_snapshots(run_dir: str | Path, refs: ReferenceContexts, episodes: int = 10, episode_steps: int = 200,
                       seed: int = 0, rule: str | None = None, snapshots: Sequence[int] | None = None) -> dict:
    """``R[t, k]``: the return of every snapshot of a run on every reference context (module docstring).

    Args:
        run_dir: a run folder with ``config.json`` and ``snapshots.npz``.
        refs: the reference contexts of the run's trace (:func:`reference_contexts`).
        episodes: episodes per snapshot and regime (``K``).
        episode_steps: steps per episode at most (episodes also end where the environment ends them).
        seed: evaluation seed (environment resets and action noise; shared by every snapshot and run).
        rule: ``"sample"``, ``"greedy"``, or None for the agent's own rule (stored with the snapshots).
        snapshots: indices of the snapshots to evaluate (None: all).

    Returns:
        ``{"steps": (n,) int64, "R": (n, k) float64 mean undiscounted episodic return, "R_episodes":
        (n, k, episodes) float64, "rule": str, "module": str, "seconds": float}``.

    Raises:
        ValueError: if the run has no snapshots, bad ``episodes``/``episode_steps``/``rule``, or its environment
            has no context trace.
    """
    import time

    import torch

    from lcpo.agents import AGENTS
    from lcpo.agents.nets import action_shape_of
    from lcpo.envs.preflight import run_env_kwargs
    from lcpo.experiments.snapshots import load_run_snapshots
    from lcpo.online.threads import limit_threads

    run_dir = Path(run_dir)
    if episodes < 1 or episode_steps < 1:
        raise ValueError(f"episodes and episode_steps must be >= 1, got {episodes!r}, {episode_steps!r}")
    snaps = load_run_snapshots(run_dir)
    if snaps is None or len(snaps) == 0:
        raise ValueError(f"{run_dir}: no snapshots.npz (runs made before issue 27, or an agent without a single "
                         "acting network, keep none)")
    rule = rule or snaps.rule
    if rule not in ("sample", "greedy"):
        raise ValueError(f"rule must be 'sample' or 'greedy', got {rule!r}")
    config = _run_config(run_dir)
    idx = list(range(len(snaps))) if snapshots is None else [int(i) for i in snapshots]
    start = time.perf_counter()
    with limit_threads(1):
        base_kwargs = run_env_kwargs(config.env, config.trace, config.trace_length, config.env_kwargs)
        env0 = _reference_env(config, refs.context(0), base_kwargs)
        agent = AGENTS[config.agent](env0, seed=config.seed, **config.overrides)
        module = agent
        for part in snaps.module.split("."):
            module = getattr(module, part)
        dims, bins = action_shape_of(env0.action_space)
        scalar = not hasattr(env0.action_space, "nvec")
        R = np.zeros((len(idx), refs.regimes, episodes))
        for k in range(refs.regimes):
            envs = [env0 if (k == 0 and e == 0) else _reference_env(config, refs.context(k), base_kwargs)
                    for e in range(episodes)]
            noise = np.stack([np.random.default_rng([seed, k, e]).gumbel(size=(episode_steps, dims, bins))
                              for e in range(episodes)]).astype(np.float32)  # (E, L, D, K)
            for row, i in enumerate(idx):
                module.load_state_dict(snaps.state_dict(i))
                R[row, k] = _episodes(module, envs, noise, seed, k, rule, dims, bins, scalar, torch)
    return {"steps": snaps.steps[idx].copy(), "R": R.mean(-1), "R_episodes": R, "rule": rule,
            "module": snaps.module, "seconds": time.perf_counter() - start}


def _episodes(module, envs, noise, seed, k, rule, dims, bins, scalar, torch) -> np.ndarray:
    """``(E,)`` undiscounted returns of one snapshot on ``E`` environments of one regime, acting in a batch."""
    E, L = noise.shape[0], noise.shape[1]
    obs = np.stack([env.reset(seed=_episode_seed(seed, k, e))[0] for e, env in enumerate(envs)]).astype(np.float32)
    ret = np.zeros(E)
    alive = np.ones(E, bool)
    with torch.inference_mode():
        for t in range(L):
            out = module(torch.from_numpy(obs)).reshape(E, dims, bins).numpy()
            if rule == "sample":
                out = out + noise[:, t]
            act = out.argmax(-1)  # (E, D)
            for e in np.flatnonzero(alive):
                o, r, term, trunc, _ = envs[e].step(act[e, 0] if scalar else act[e])
                ret[e] += r
                obs[e] = o
                if term or trunc:
                    alive[e] = False
            if not alive.any():
                break
    return ret


def forgetting_matrix(R: np.ndarray) -> np.ndarray:
    """``F[t, k] = max_{t' <= t} R[t', k] - R[t, k]`` (Chaudhry et al. 2018, eq. 9, with snapshots for tasks).

    Args:
        R: ``(n, k)`` returns of ``n`` snapshots (in step order) on ``k`` reference contexts.

    Returns:
        ``(n, k)`` float64, >= 0; row 0 is zero.

    Raises:
        ValueError: if ``R`` is not 2-D or holds NaN.

    >>> forgetting_matrix(np.array([[1.0, 5.0], [3.0, 4.0], [2.0, 6.0]])).tolist()
    [[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]]
    """
    R = np.asarray(R, dtype=np.float64)
    if R.ndim != 2 or np.isnan(R).any():
        raise ValueError(f"R must be a (snapshots, regimes) array without NaN, got shape {R.shape}")
    return np.maximum.accumulate(R, axis=0) - R


def active_regimes(steps: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The regime active in each snapshot interval: the majority regime of the trace rows the run consumed
    between the previous snapshot and this one (rows ``step mod T``: one row per step, wrapping; the first
    interval starts at step 0).

    Args:
        steps: ``(n,)`` increasing snapshot steps.
        labels: ``(T,)`` regime of every trace row (:attr:`ReferenceContexts.labels`).

    Returns:
        ``(n,)`` int64.
    """
    steps = np.asarray(steps, np.int64)
    T, k = labels.shape[0], int(labels.max()) + 1
    out = np.empty(steps.shape[0], np.int64)
    prev = 0
    for i, s in enumerate(steps):
        a, b = prev, max(int(s), prev + 1)
        full, rest = divmod(b - a, T)
        counts = full * np.bincount(labels, minlength=k)
        rows = (a + np.arange(rest)) % T
        counts += np.bincount(labels[rows], minlength=k)
        out[i] = int(np.argmax(counts))
        prev = int(s)
    return out


def backward_transfer(R: np.ndarray, active: np.ndarray) -> float:
    """Backward transfer without task labels (module docstring; GEM, Lopez-Paz & Ranzato 2017, eq. 2).

    ``BWT = mean_k (R[n-1, k] - R[i_k, k])`` over the regimes ``k`` active in some snapshot interval before the
    last, ``i_k`` the last such interval's snapshot.

    Args:
        R: ``(n, k)`` returns.
        active: ``(n,)`` active regime of each snapshot interval (:func:`active_regimes`).

    Returns:
        The BWT (return units); NaN if no regime was active before the last snapshot.

    Regime 0 was learned by snapshot 0 (5.0) and ends at 2.0; regime 1 by snapshot 1 (6.0) and ends at 6.0:

    >>> backward_transfer(np.array([[5.0, 0.0], [1.0, 6.0], [2.0, 6.0]]), np.array([0, 1, 1]))
    -1.5
    """
    R = np.asarray(R, dtype=np.float64)
    active = np.asarray(active)
    if R.ndim != 2 or active.shape != R.shape[:1]:
        raise ValueError(f"R (n, k) and active (n,) must agree, got {R.shape} and {active.shape}")
    last = R.shape[0] - 1
    diffs = []
    for k in range(R.shape[1]):
        seen = np.flatnonzero(active[:last] == k)
        if seen.size:
            diffs.append(R[last, k] - R[seen[-1], k])
    return float(np.mean(diffs)) if diffs else float("nan")


def seed_interval(values: Sequence[float] | np.ndarray, confidence: float = 0.95) -> MeanCI:
    """Mean over seeds with a Student-t interval: ``mean +- t_{(1+c)/2, n-1} s / sqrt(n)``.

    The one place this module computes an interval (switch it to the project's Student-t function of
    :mod:`lcpo.experiments.stats` once that exists). NaN values are left out; the interval is NaN below 2 values.

    >>> r = seed_interval([1.0, 2.0, 3.0]); round(r.low, 4), round(r.high, 4)
    (-0.4841, 4.4841)
    """
    from scipy import stats

    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return MeanCI(float("nan"), float("nan"), float("nan"), 0)
    m = float(x.mean())
    if x.size < 2:
        return MeanCI(m, float("nan"), float("nan"), 1)
    half = float(stats.t.ppf((1 + confidence) / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return MeanCI(m, m - half, m + half, int(x.size))


#: Agents that keep no snapshots: no single network chooses their actions (:func:`acting_module` is None).
NO_ACTING_NETWORK = ("mbcd",)


def _no_snapshot_reason(run: Path) -> str:
    """Why finished run folder ``run`` has no ``snapshots.npz``, from its configuration."""
    agent = str(_run_config(run).agent)
    if agent in NO_ACTING_NETWORK:
        return f"{agent} keeps no snapshots: no single network chooses its actions"
    return ("no snapshots.npz in the run folder: made before runs kept snapshots, or the file was removed "
            "(`lcpo run` writes it for every agent with one acting network)")


def _find_runs(runs_dir: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """(finished run folders with snapshots, ``(run folder, reason)`` of the finished ones without), sorted:
    ``runs_dir`` itself if it is a run folder, else the run folders of :func:`lcpo.experiments.store.runs_root`
    (a sweep's ``runs/``, or the ``AGENT-sSEED/`` folders of ``lcpo run --out``), as ``lcpo report`` reads them.
    Every summary.json is read, so a malformed one is refused here as by ``lcpo report``.

    Raises:
        FileNotFoundError: if ``runs_dir`` is none of these.
        ValueError: a malformed ``summary.json`` (named).
    """
    from lcpo.experiments.store import read_summary, runs_root

    if (runs_dir / "summary.json").is_file():
        finished = [runs_dir]
    else:
        finished = sorted(p for p in runs_root(runs_dir).iterdir()
                          if (p / "summary.json").is_file() and (p / "config.json").is_file())
    for p in finished:
        read_summary(p / "summary.json")
    with_snaps = [p for p in finished if (p / "snapshots.npz").is_file()]
    return with_snaps, [(p, _no_snapshot_reason(p)) for p in finished if p not in with_snaps]


def _evaluate_cached(run: Path, refs: ReferenceContexts, episodes: int, episode_steps: int, seed: int,
                     rule: str | None, cache_dir: Path | None) -> dict:
    """:func:`evaluate_snapshots`, reusing ``cache_dir/<run>.npz`` when it was made from the same snapshot file,
    run configuration, references and settings (a SHA-256 of all of them); the result is the same bit for bit.
    The result carries ``"cached": bool``: True where it was read from the cache (its ``"seconds"`` are then those
    of the evaluation that made the entry)."""
    if cache_dir is None:
        return evaluate_snapshots(run, refs, episodes, episode_steps, seed, rule) | {"cached": False}
    import hashlib

    h = hashlib.sha256()
    for part in ((run / "snapshots.npz").read_bytes(), (run / "config.json").read_bytes(), refs.centres.tobytes(),
                 b"" if refs.windows is None else refs.windows.tobytes(),
                 json.dumps([refs.mode, episodes, episode_steps, seed, rule]).encode()):
        h.update(hashlib.sha256(part).digest())
    key = h.hexdigest()
    path = Path(cache_dir) / f"{run.name}.npz"
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as z:
                if str(z["key"]) == key:
                    return {"steps": z["steps"], "R": z["R_episodes"].mean(-1), "R_episodes": z["R_episodes"],
                            "rule": str(z["rule"]), "module": str(z["module"]), "seconds": float(z["seconds"]),
                            "cached": True}
        except (OSError, KeyError, ValueError):
            pass  # an unreadable cache entry is recomputed
    res = evaluate_snapshots(run, refs, episodes, episode_steps, seed, rule)
    import io

    from lcpo.persistence.atomic import atomic_write_bytes

    buf = io.BytesIO()
    np.savez(buf, key=np.str_(key), steps=res["steps"], R_episodes=res["R_episodes"], rule=np.str_(res["rule"]),
             module=np.str_(res["module"]), seconds=np.float64(res["seconds"]))
    atomic_write_bytes(path, buf.getvalue())
    return res | {"cached": False}


def forgetting_study(runs_dir: str | Path, *, regimes: int = 6, mode: str = "constant", episodes: int = 10,
                     episode_steps: int = 200, seed: int = 0, rule: str | None = None, confidence: float = 0.95,
                     on_run=None, cache_dir: str | Path | None = None) -> dict:
    """Evaluate every finished run with snapshots under ``runs_dir`` and summarise per agent.

    Runs are grouped into cells by (environment, trace, trace length, environment arguments); the reference
    contexts are made once per trace (:func:`reference_contexts`, k-means seed 0) and shared by the cell's runs.

    Args:
        runs_dir: a sweep folder, a folder of ``lcpo run`` outputs, or one run folder.
        regimes, mode, episode_steps: see :func:`reference_contexts`.
        episodes, seed, rule: see :func:`evaluate_snapshots`.
        confidence: interval level across seeds (:func:`seed_interval`).
        on_run: optional callback ``(run_dir, seconds, cached)`` after each run: ``cached`` (bool) True where
            its ``R`` came from ``cache_dir`` (``seconds`` are then those of the evaluation that made the entry).
        cache_dir: keep each run's ``R`` in ``cache_dir/<run>.npz`` and reuse it while the snapshots, the run's
            configuration, the references and the settings are unchanged (None: no cache).

    Returns:
        ``{"matrix": DataFrame (cell, run, scheme, seed, snapshot, step, regime, active, R, F),
        "summary": DataFrame (cell, scheme, n, final_F, final_F_low, final_F_high, mean_F, ..., bwt, ...,
        final_R, ...), "per_run": DataFrame (cell, scheme, seed, final_F, mean_F, bwt, final_R: one row per run,
        the values the summary's intervals are taken over), "refs": {cell: ReferenceContexts}, "traces": {cell: ContextTrace}, "without": [runs
        left out], "without_reasons": {run folder name: why it is left out}, "seconds": float (evaluation seconds of every run, cached ones at the cost recorded
        when they were first evaluated), "computed_seconds": float (the evaluations this call ran), "cached": int
        (runs read from ``cache_dir``), "evaluations": int (snapshot x regime x episode)}``.

    Raises:
        FileNotFoundError: if ``runs_dir`` does not exist.
        ValueError: a malformed ``summary.json`` or run configuration (named), or options that
            :func:`reference_contexts` refuses for one of the traces (checked for every trace before any run is
            evaluated).
    """
    import pandas as pd

    from lcpo.experiments.store import scheme_label

    runs_dir = Path(runs_dir)
    if not runs_dir.exists():
        raise FileNotFoundError(f"{runs_dir}: no such folder")
    with_snaps, without = _find_runs(runs_dir)
    without = list(without)
    refs_of: dict[tuple, ReferenceContexts] = {}
    cells: dict[str, ReferenceContexts] = {}
    traces: dict[str, object] = {}
    rows, per_run = [], []
    seconds, computed, cached, evaluations = 0.0, 0.0, 0, 0
    found = []
    for run in with_snaps:
        cfg = _run_config(run)
        try:
            trace = run_trace(cfg)
        except NoContextTrace:
            without.append((run, f"no context trace: {cfg.env} (trace {cfg.trace!r}) is not driven by one"))
            continue
        except ValueError as exc:  # the trace cannot be made now (a trace file moved): its own reason
            without.append((run, f"its trace cannot be made: {str(exc).splitlines()[0]}"))
            continue
        label = f"{cfg.env.split('/')[-1]} {trace.name}"
        if cfg.env_kwargs:
            label += " " + json.dumps(dict(cfg.env_kwargs), sort_keys=True, separators=(",", ":"))
        found.append((run, cfg, trace, label))
    # a trace name at two lengths is two traces (a file cut to its first N rows, a trace generated at N steps):
    # their references differ, so their runs are two cells, named with the length
    lengths: dict[str, set[int]] = {}
    for _, _, trace, label in found:
        lengths.setdefault(label, set()).add(len(trace))
        tkey = (trace.name, len(trace))
        if tkey not in refs_of:  # every trace's references before any evaluation: bad options fail at once
            refs_of[tkey] = reference_contexts(trace, regimes, mode, episode_steps, seed=0)
    for run, cfg, trace, label in found:
        refs = refs_of[(trace.name, len(trace))]
        cell = label + (f" ({len(trace):,} rows)" if len(lengths[label]) > 1 else "")
        cells[cell], traces[cell] = refs, trace
        res = _evaluate_cached(run, refs, episodes, episode_steps, seed, rule,
                               None if cache_dir is None else Path(cache_dir))
        seconds += res["seconds"]
        cached += res["cached"]
        computed += 0.0 if res["cached"] else res["seconds"]
        evaluations += res["R_episodes"].size
        if on_run is not None:
            on_run(run, res["seconds"], res["cached"])
        R, F = res["R"], forgetting_matrix(res["R"])
        act = active_regimes(res["steps"], refs.labels)
        scheme = scheme_label(cfg.agent, cfg.overrides)
        for i, s in enumerate(res["steps"]):
            for k in range(refs.regimes):
                rows.append((cell, run.name, scheme, cfg.seed, i, int(s), k, act[i] == k, R[i, k], F[i, k]))
        per_run.append({"cell": cell, "scheme": scheme, "seed": cfg.seed, "final_F": F[-1].mean(),
                        "mean_F": F.mean(), "bwt": backward_transfer(R, act), "final_R": R[-1].mean()})
    matrix = pd.DataFrame(rows, columns=["cell", "run", "scheme", "seed", "snapshot", "step", "regime", "active",
                                         "R", "F"])
    out = []
    per = pd.DataFrame(per_run, columns=["cell", "scheme", "seed", "final_F", "mean_F", "bwt", "final_R"])
    for (cell, scheme), g in per.groupby(["cell", "scheme"], sort=True):
        row = {"cell": cell, "scheme": scheme, "n": len(g)}
        for col in ("final_F", "mean_F", "bwt", "final_R"):
            ci = seed_interval(g[col].to_numpy(), confidence)
            row |= {col: ci.mean, f"{col}_low": ci.low, f"{col}_high": ci.high}
        out.append(row)
    cols = ["cell", "scheme", "n"] + [f"{c}{s}" for c in ("final_F", "mean_F", "bwt", "final_R")
                                      for s in ("", "_low", "_high")]
    return {"matrix": matrix, "summary": pd.DataFrame(out, columns=cols), "per_run": per, "refs": cells,
            "traces": traces,
            "without": sorted(r for r, _ in without), "without_reasons": {r.name: why for r, why in without},
            "seconds": seconds, "computed_seconds": computed, "cached": cached,
            "evaluations": evaluations,
            "settings": {"regimes": regimes, "mode": mode, "episodes": episodes, "episode_steps": episode_steps,
                         "seed": seed, "rule": rule or "the agent's own", "confidence": confidence}}


def _heatmap_figure(study: dict, cell: str, path: Path) -> None:
    """Per scheme of a cell: the seed-mean ``R[t, k]`` as a heat map; below them ``F(t)`` per scheme with its
    interval over seeds; at the bottom the cell's context trace shaded by regime."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = study["matrix"][study["matrix"]["cell"] == cell]
    refs, trace = study["refs"][cell], study["traces"][cell]
    schemes = sorted(m["scheme"].unique())
    fig, axes = plt.subplots(len(schemes) + 2, 1, figsize=(9, 1.6 * len(schemes) + 4.0), sharex=True,
                             squeeze=False)
    axes = axes[:, 0]
    f_ax, axes = axes[-2], np.concatenate([axes[:-2], axes[-1:]])
    vmin, vmax = float(m["R"].min()), float(m["R"].max())
    last_step = int(m["step"].max())
    mesh = None
    for ax, scheme in zip(axes, schemes):
        g = m[m["scheme"] == scheme].groupby(["step", "regime"])["R"].mean().unstack("regime").sort_index()
        steps = g.index.to_numpy()
        edges = np.concatenate([[0], steps])
        mesh = ax.pcolormesh(edges, np.arange(refs.regimes + 1) - 0.5, g.to_numpy().T, vmin=vmin, vmax=vmax,
                             cmap="viridis", shading="flat")
        n = m[m["scheme"] == scheme]["seed"].nunique()
        ax.set_ylabel(f"{scheme}\n({n} seed{'s' * (n != 1)})\nregime")
        ax.set_yticks(range(refs.regimes))
    conf = study["settings"]["confidence"]
    for scheme in schemes:  # F(t): mean over regimes, per seed; then mean and interval over seeds at each snapshot
        per_seed = m[m["scheme"] == scheme].groupby(["snapshot", "seed"]).agg(step=("step", "first"),
                                                                               F=("F", "mean")).reset_index()
        rows = [(g["step"].mean(), seed_interval(g["F"].to_numpy(), conf)) for _, g in per_seed.groupby("snapshot")]
        x = np.array([r[0] for r in rows])
        (line,) = f_ax.plot(x, [r[1].mean for r in rows], lw=1.2, label=scheme)
        f_ax.fill_between(x, [r[1].low for r in rows], [r[1].high for r in rows], color=line.get_color(), alpha=0.2,
                          lw=0)
    f_ax.set_ylabel("F(t), mean over\nregimes")
    f_ax.axhline(0, color="k", lw=0.5)
    f_ax.legend(fontsize=7, loc="upper left", ncol=min(5, len(schemes)))  # up to 10 schemes in two rows, all shown
    f_ax.set_title(f"forgetting F(t) = mean_k max_(t'<=t) R[t', k] - R[t, k]; band: {percent(conf)}% t "
                   "interval over seeds", fontsize=8)
    fig.colorbar(mesh, ax=list(axes) + [f_ax], label="return R[t, k]", fraction=0.03, pad=0.01)  # x aligned
    ax = axes[-1]
    n_pts = min(4000, last_step)
    steps = np.linspace(0, last_step - 1, n_pts).astype(np.int64)
    rows = steps % trace.values.shape[0]
    for j in range(trace.values.shape[1]):
        ax.plot(steps, trace.values[rows, j], lw=0.6, label=f"context[{j}]")
    lab = refs.labels[rows]
    ymin, ymax = ax.get_ylim()
    cmap = plt.get_cmap("tab10")
    for k in range(refs.regimes):
        ax.fill_between(steps, ymin, ymax, where=lab == k, color=cmap(k % 10), alpha=0.15, step="mid",
                        label=f"regime {k}")
    ax.set_ylim(ymin, ymax)
    ax.set_xlabel("environment step")
    ax.set_ylabel(f"trace {trace.name}")
    ax.legend(fontsize=6, ncol=min(8, refs.regimes + trace.values.shape[1]), loc="upper center",
              bbox_to_anchor=(0.5, -0.3), frameon=False)
    axes[0].set_title(f"{cell}: return of frozen snapshots on reference contexts ({refs.mode})")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _fmt_ci(mean: float, low: float, high: float) -> str:
    from lcpo.experiments.report import interval_text

    return interval_text(mean, low, high)


#: the forgetting measures :func:`forgetting_comparisons` tests (per-run columns of ``study["per_run"]``)
FORGETTING_MEASURES = ("final_F", "mean_F", "bwt")


def forgetting_comparisons(per_run: pd.DataFrame, reference: str = "lcpo",
                           measures: Sequence[str] = FORGETTING_MEASURES) -> pd.DataFrame:
    """Welch's t-test of ``reference``'s forgetting against every other scheme's, per cell and measure, with
    Holm's correction over all the tests of the table (family-wise error; Holm 1979, valid under any dependence
    between the measures).

    Args:
        per_run: ``study["per_run"]`` of :func:`forgetting_study`: one row per run with ``cell``, ``scheme``,
            ``seed`` and the measures (float64; F and BWT in return units).
        reference: the agent compared with every other (``"lcpo"``): every scheme of that agent, with or without
            hyperparameter overrides (``lcpo``, ``lcpo[hidden=[16]]``), is a reference, as in ``lcpo report``'s
            comparisons; other schemes of the same agent are not its baselines.
        measures: columns to test (``final_F``, ``mean_F``: lower is less forgetting; ``bwt``: higher is less).

    Prescient schemes (``prescient*``: frozen online, references) are not compared, nor a measure undefined (NaN)
    for every run of one side.

    Returns:
        DataFrame with one row per (cell, baseline, measure) where both sides have at least 2 runs: ``cell``,
        ``baseline``, ``measure``, ``n_ref``, ``n_base``, ``mean_ref``, ``mean_base``, ``diff`` (reference minus
        baseline), ``p`` (Welch, two-sided; NaN when both samples are constant: not tested), ``p_holm`` (NaN for
        the untested rows, which are left out of the family), ``reference`` (the reference's scheme). Empty when
        nothing can be tested.

    Raises:
        ValueError: a measure that is not a column of ``per_run`` (named), or non-finite values (from
            :func:`lcpo.experiments.stats.welch_test`, naming the cell).
    """
    import pandas as pd

    from lcpo.experiments.stats import holm, welch_test

    cols = ["cell", "baseline", "measure", "n_ref", "n_base", "mean_ref", "mean_base", "diff", "p", "p_holm",
            "reference"]

    def of_reference(scheme) -> bool:
        return str(scheme).split("[")[0] == reference

    for m in measures:
        if m not in per_run.columns:
            raise ValueError(f"unknown forgetting measure {m!r}; per_run has {list(per_run.columns)}")
    rows = []
    for (cell, rscheme), ref in per_run[per_run["scheme"].map(of_reference)].groupby(["cell", "scheme"], sort=True):
        if len(ref) < 2:
            continue
        g = per_run[per_run["cell"] == cell]
        for base, b in g[~g["scheme"].map(of_reference)].groupby("scheme", sort=True):
            if len(b) < 2 or str(base).startswith("prescient"):
                continue  # a prescient agent acts frozen online: a reference, not a baseline of these tests
            for m in measures:
                x, y = ref[m].to_numpy(np.float64), b[m].to_numpy(np.float64)
                if not (np.isfinite(x).any() and np.isfinite(y).any()):
                    continue  # undefined for one side (BWT of a run with a single snapshot): nothing to test
                try:
                    p = welch_test(x, y, cell=f"{cell} {rscheme} vs {base} {m}").p
                except ValueError as exc:
                    if "constant" not in str(exc):
                        raise
                    p = float("nan")
                rows.append([cell, base, m, len(x), len(y), x.mean(), y.mean(), x.mean() - y.mean(), p, np.nan,
                             rscheme])
    out = pd.DataFrame(rows, columns=cols)
    tested = out["p"].notna().to_numpy()
    if tested.any():
        out.loc[tested, "p_holm"] = holm(out.loc[tested, "p"].to_numpy())
    return out


def forgetting_section(study: dict, out_dir: str | Path, heading: str = "##") -> list[str]:
    """Write the study's CSVs and heat maps into ``out_dir``; return its Markdown section (lines).

    Args:
        study: the result of :func:`forgetting_study`.
        out_dir: folder for the files (created).
        heading: Markdown heading level of the section.

    Returns:
        The section's lines (summary table, LCPO against each baseline (:func:`forgetting_comparisons`), final
        ``F_k`` per regime, regime centres, figure links, and a note on runs left out).

    Files: ``forgetting_matrix.csv`` (every R[t, k] and F[t, k]), ``forgetting_summary.csv`` (per cell and
    scheme), ``forgetting_<cell>.png`` (heat maps above the context trace).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    st = study["settings"]
    pct = percent(st["confidence"])
    md = [f"{heading} Forgetting: lost return on reference contexts", "",
          (f"Every run's frozen actor snapshots (`snapshots.npz`) evaluated on the trace's {st['regimes']} context "
           f"regimes (k-means of the trace, seed 0; mode `{st['mode']}`), {st['episodes']} seeded episode{'s' if st['episodes'] != 1 else ''} of at "
           f"most {st['episode_steps']} steps per snapshot and regime (evaluation seed {st['seed']}, acting rule: "
           f"{st['rule']}). F(t) = mean over regimes of max_{{t'<=t}} R[t', k] - R[t, k] (Chaudhry et al. 2018): "
           "0 = every regime at its best so far. Final F at the last snapshot, mean F over all snapshots; "
           "BWT = mean over regimes of R[last, k] - R[end of k's last active interval, k] (negative: forgetting). "
           f"Intervals: {pct}% Student-t over seeds (F is never negative, but a t interval of few or skewed seeds "
           f"can reach below 0: shown as computed, not clipped). Cost: {study['evaluations']:,} episodes in "
           f"{study['seconds']:.1f} s (when first evaluated; see docs/forgetting.md)."), ""]
    if study["matrix"].empty:
        md += ["No finished run under this folder keeps snapshots.", ""]
    else:
        study["matrix"].to_csv(out_dir / "forgetting_matrix.csv", index=False, float_format="%.6g")
        study["summary"].to_csv(out_dir / "forgetting_summary.csv", index=False, float_format="%.6g")
        md += ["| cell | scheme | seeds | final F | mean F | BWT | final R (mean over regimes) |",
               "|---|---|---|---|---|---|---|"]
        for r in study["summary"].itertuples():
            md.append(f"| {r.cell} | {r.scheme} | {r.n} | {_fmt_ci(r.final_F, r.final_F_low, r.final_F_high)} | "
                      f"{_fmt_ci(r.mean_F, r.mean_F_low, r.mean_F_high)} | {_fmt_ci(r.bwt, r.bwt_low, r.bwt_high)}"
                      f" | {_fmt_ci(r.final_R, r.final_R_low, r.final_R_high)} |")
        md += _comparison_lines(study.get("per_run"), st["confidence"])
        m = study["matrix"]
        last = m[m["snapshot"] == m.groupby("run")["snapshot"].transform("max")]
        md += ["", f"Final F_k per regime (mean over seeds, {pct}% Student-t interval):", "",
               "| cell | scheme | " + " | ".join(f"regime {k}" for k in range(int(m["regime"].max()) + 1)) + " |",
               "|---|---|" + "---|" * (int(m["regime"].max()) + 1)]
        for (cell, scheme), g in last.groupby(["cell", "scheme"], sort=True):
            cis = [seed_interval(g[g["regime"] == k]["F"].to_numpy(), st["confidence"])
                   for k in range(int(m["regime"].max()) + 1)]
            md.append(f"| {cell} | {scheme} | " + " | ".join(_fmt_ci(c.mean, c.low, c.high) for c in cis) + " |")
        md += ["", "CSV: [forgetting_summary.csv](forgetting_summary.csv), "
                   "[forgetting_matrix.csv](forgetting_matrix.csv)", ""]
        for cell, refs in study["refs"].items():
            name = "forgetting_" + "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in cell) + ".png"
            _heatmap_figure(study, cell, out_dir / name)
            centres = ", ".join(f"{k}: ({', '.join(f'{v:.2f}' for v in c)})" for k, c in enumerate(refs.centres))
            md += [f"Regime centres of `{cell}` (trace units): {centres}.", "", f"![{cell}]({name})", ""]
    if study["without"]:
        reasons = study.get("without_reasons") or {}
        by_reason: dict[str, list[str]] = {}
        for run in study["without"]:
            by_reason.setdefault(reasons.get(Path(run).name, "no snapshots"), []).append(Path(run).name)
        md += [f"{len(study['without'])} finished run(s) are left out:", ""]
        md += [f"- {why} ({len(names)}): {', '.join(names[:6])}" + (f", and {len(names) - 6} more" if len(names) > 6
                                                                     else "") for why, names in by_reason.items()]
        md += [""]
    return md


_MEASURE_TEXT = {"final_F": ("final F", "lower"), "mean_F": ("mean F", "lower"), "bwt": ("BWT", "higher")}


def _comparison_lines(per_run, confidence: float) -> list[str]:
    """The Markdown table of :func:`forgetting_comparisons` (LCPO against each baseline), or nothing."""
    if per_run is None or per_run.empty:
        return []
    cmp = forgetting_comparisons(per_run)
    if cmp.empty:
        return []
    alpha = 1.0 - confidence
    md = ["", f"LCPO against each baseline (Welch's t-test over seeds, two-sided; Holm's correction over the "
              f"{int(cmp['p'].notna().sum())} tests of this table, family-wise error {alpha:g}). Less forgetting is "
              "a lower F and a higher BWT:", "",
          "| cell | baseline | measure | LCPO | baseline | difference | Welch p / Holm p |", "|---|---|---|---|---|---|---|"]
    for r in cmp.itertuples():
        name, better = _MEASURE_TEXT.get(r.measure, (r.measure, "lower"))
        if not np.isfinite(r.p):
            verdict = "not tested (no variance)"
        else:
            verdict = f"{r.p:.3g} / {r.p_holm:.3g}"
            if r.p_holm <= alpha:
                less = (r.diff < 0) == (better == "lower")
                verdict += ": **LCPO forgets less**" if less else ": **LCPO forgets more**"
            else:
                verdict += ": not significant"
        base = r.baseline if r.reference == "lcpo" else f"{r.baseline} (against {r.reference})"
        md.append(f"| {r.cell} | {base} | {name} | {r.mean_ref:.3g} | {r.mean_base:.3g} | {r.diff:+.3g} | "
                  f"{verdict} |")
    return md


def write_forgetting(runs_dir: str | Path, out_dir: str | Path, **kwargs) -> Path:
    """Evaluate ``runs_dir`` (:func:`forgetting_study`, cached in ``out_dir/cache``) and write
    ``out_dir/forgetting.md`` with its CSVs and figures (``lcpo forgetting RUNS_DIR --out DIR``).

    Args:
        runs_dir: a sweep folder, a folder of ``lcpo run`` outputs, or one run folder.
        out_dir: output folder (created).
        **kwargs: options of :func:`forgetting_study`.

    Returns:
        The path of ``forgetting.md``.

    Raises:
        FileNotFoundError: if ``runs_dir`` holds no runs; ValueError: bad options or run files (named).
    """
    study = forgetting_study(runs_dir, **({"cache_dir": Path(out_dir) / "cache"} | kwargs))
    md = forgetting_section(study, out_dir, heading="#")  # one title: the section's own
    path = Path(out_dir) / "forgetting.md"
    path.write_text("\n".join(md) + "\n")
    return path


def append_forgetting_section(report_path: str | Path, runs_dir: str | Path, **kwargs) -> bool:
    """Append the forgetting section to a written report (``lcpo report``'s one call), its files beside it
    (evaluations cached in ``forgetting_cache/`` there).

    Args:
        report_path: the written ``report.md``.
        runs_dir: the folder the report was made from.
        **kwargs: options of :func:`forgetting_study`.

    Returns:
        Whether it appended (nothing is appended when no finished run under ``runs_dir`` keeps snapshots).
    """
    report_path = Path(report_path)
    with_snaps, _ = _find_runs(Path(runs_dir))
    if not with_snaps:
        return False
    study = forgetting_study(runs_dir, **({"cache_dir": report_path.parent / "forgetting_cache"} | kwargs))
    if study["matrix"].empty:
        return False
    lines = forgetting_section(study, report_path.parent)
    with report_path.open("a") as fh:
        fh.write("\n" + "\n".join(lines) + "\n")
    return True
