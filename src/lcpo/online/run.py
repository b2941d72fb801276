"""One online run from a resolved configuration: the unit the CLI and the sweep runner execute.

A run folder holds ``config.json`` (the resolved configuration, agent hyperparameters included),
``episodes.csv`` (one row per episode), ``diagnostics.csv`` (training diagnostics, window means),
``checkpoint/`` (agent, environment, loop and log state, committed atomically every ``checkpoint_every`` steps
and at the end: :class:`lcpo.persistence.checkpoint.RunCheckpoints`), ``.lock`` (one writer per folder:
:class:`lcpo.persistence.runlock.RunLock`) and, written last and atomically, ``summary.json``. A run resumed from its last
checkpoint ends with the same summary (apart from wall time, throughput and ``resumed_from``) as a run that was
never interrupted.

Resume rules (:func:`resume_plan`; docs/experiments.md, "Resume rules"):

* a finished run (``summary.json``) with the same configuration is returned as it is;
* a finished run asked for more ``steps`` (and nothing else changed) is extended from its final checkpoint;
* an interrupted run continues from its last checkpoint; its ``steps`` may change (to no fewer than the
  checkpoint's step);
* any other change of configuration is refused, naming each differing key with its old and new value;
* a folder without a checkpoint starts afresh from step 0 (with a message when it held a run's files);
* a refused resume changes nothing in the folder.
"""

from __future__ import annotations

import dataclasses
import json
import math
import platform
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from lcpo.agents import AGENTS
from lcpo.persistence.checkpoint import CheckpointError, RunCheckpoints, atomic_write_json
from lcpo.envs.registration import make_env
from lcpo.envs.task import return_unit
from lcpo.online.loop import OnlineLoop, parse_reset
from lcpo.persistence.runlock import RunLock
from lcpo.persistence.runlog import RunLog, lifelong_return, scored_episodes
from lcpo.online.threads import limit_threads

__all__ = ["RunConfig", "ResumePlan", "config_changes", "execute", "make_run_env", "resume_plan", "AGENTS"]


#: The largest step count a run may be given (2**53: every step count stays an exact integer in float64 and int64).
MAX_STEPS = 2**53


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one online run.

    Attributes:
        env: registered environment id.
        trace: context trace: a registered name (``lcpo traces list``) or a ``.npy``/``.csv`` path; ``None``
            means the bundled real wind trace for wind environments and the environment's own default otherwise.
        trace_length: resample/cut the trace to this many steps (None: the trace's default length).
        agent: agent name (``lcpo``, ``a2c``, ...; see :data:`AGENTS`).
        steps: environment steps of the run.
        seed: run seed (environment resets, agent initialisation and sampling).
        overrides: agent hyperparameter overrides (validated against the agent's dataclass).
        env_kwargs: extra environment arguments (e.g. ``{"continuing": true}``).
        warmup_steps: episodes ending within the first ``warmup_steps`` steps are excluded from the score.
        reset: reset condition: ``end``, ``every:N`` or ``never``.
        checkpoint_every: steps between checkpoints (0 disables checkpoints).
        tensorboard: also write TensorBoard event files.
        diagnostics_every: steps per row of ``diagnostics.csv``.
        probe_every: steps between policy probes for the drift diagnostic (:mod:`lcpo.experiments.drift`;
            0: none, the default; left out of :meth:`to_dict` when 0 so older run ids are unchanged).

    Raises:
        ValueError: an unknown agent, a step count (``steps``, ``checkpoint_every``, ...) that is not an integer
            in ``[0, MAX_STEPS]`` (``steps >= 1``), a warm-up not shorter than the run, a malformed reset
            condition or invalid hyperparameter overrides; the message names the field and value.
    """

    env: str = "lcpo/WindyPendulum-v0"
    trace: str | None = None
    trace_length: int | None = None
    agent: str = "lcpo"
    steps: int = 200_000
    seed: int = 0
    overrides: Mapping[str, Any] = field(default_factory=dict)
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    warmup_steps: int = 0
    reset: str = "end"
    checkpoint_every: int = 50_000
    tensorboard: bool = False
    diagnostics_every: int = 10_000
    probe_every: int = 0

    def __post_init__(self) -> None:
        if self.agent not in AGENTS:
            raise ValueError(f"unknown agent {self.agent!r}; known agents: {sorted(AGENTS)}")
        for name in ("steps", "checkpoint_every", "warmup_steps", "diagnostics_every", "probe_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
            if v > MAX_STEPS:
                shown = f"{v:,}" if v < 10**21 else f"{float(v):.6g}"
                raise ValueError(f"{name} must be at most 2**53 = {MAX_STEPS:,} (step counts stay exact integers "
                                 f"in float64 and int64; centuries at a million steps/s), got {shown}")
        if self.trace_length is not None and not isinstance(self.trace_length, bool) and isinstance(
                self.trace_length, int) and self.trace_length > MAX_STEPS:
            raise ValueError(f"trace_length must be at most 2**53 = {MAX_STEPS:,}, got {self.trace_length:,}")
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.diagnostics_every < 1:
            raise ValueError(f"diagnostics_every must be >= 1, got {self.diagnostics_every}")
        if self.warmup_steps >= self.steps:
            raise ValueError(f"warmup_steps ({self.warmup_steps}) must be smaller than steps ({self.steps}): no "
                             "episode could end after the warm-up, and the lifelong return would be n/a")
        if not isinstance(self.reset, str):
            raise ValueError(f"reset must be a string (end | every:N | never), got {self.reset!r}")
        parse_reset(self.reset)
        object.__setattr__(self, "overrides", dict(self.overrides))
        object.__setattr__(self, "env_kwargs", dict(self.env_kwargs))
        from lcpo.agents.base import resolve_hyperparameters

        resolve_hyperparameters(AGENTS[self.agent].Hyperparameters, None, self.overrides)

    def agent_overrides(self, steps: int | None = None) -> dict:
        """The hyperparameter overrides the agent of this run is built with: :attr:`overrides` plus the
        run-length-dependent defaults the user did not set (LCPO's reservoir 1% of the run, DDQN/SAC replay
        of every sample; :func:`lcpo.agents.run_length.run_length_overrides`, ``docs/settings.md``).

        Args:
            steps: the run length the defaults follow (None: :attr:`steps`). :func:`execute` passes a resumed
                or extended run's stored length and then lays the sizes its ``config.json`` records over the
                result, so its memories keep the size of its checkpoint.

        Example:
            >>> RunConfig(agent="lcpo", steps=8_000_000).agent_overrides()
            {'reservoir_size': 80000}
        """
        from lcpo.agents.run_length import run_length_overrides

        return run_length_overrides(self.agent, self.overrides, self.steps if steps is None else int(steps))

    def to_dict(self) -> dict:
        """Plain-JSON form (``probe_every`` only when set)."""
        d = dataclasses.asdict(self)
        if not d["probe_every"]:
            del d["probe_every"]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunConfig":
        """Build from a mapping.

        Raises:
            ValueError: for an unknown key (the message names it) or an invalid value.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(d) - names)
        if bad:
            raise ValueError(f"unknown run config key(s) {bad}; valid keys: {sorted(names)}")
        return cls(**d)


def make_run_env(config: RunConfig):
    """Create the configured environment, passing the trace as :func:`lcpo.envs.preflight.run_env_kwargs`
    says (resolved for the windy and the user's environments)."""
    from lcpo.envs.preflight import run_env_kwargs

    return make_env(config.env, **run_env_kwargs(config.env, config.trace, config.trace_length, config.env_kwargs))


#: Steps between two looks at a run's ``should_stop`` (:func:`execute`): a stop request is seen within this many
#: steps (well under a second for the bundled environments and agents), and each look costs one function call.
STOP_POLL_STEPS = 250


def train_offline(agents, should_stop: Callable[[], bool] | None = None) -> tuple[bool, float]:
    """Train the agents that learn offline before their first online step (prescient agents,
    :class:`lcpo.agents.prescient.Prescient`) and are not trained yet, one after the other, asking ``should_stop``
    every :data:`STOP_POLL_STEPS` training steps, so that a run's SIGINT/SIGTERM is seen during the training too
    (it takes minutes: 1.6M steps by default) and not only once it ends. Other agents are left alone.

    Args:
        agents: a sequence of agents (a population's members, or one agent in a list).
        should_stop: the run's stop request, or None.

    Returns:
        ``(finished, seconds)``: False when ``should_stop`` paused a training (that agent has no checkpoint until
        it finishes: :meth:`~lcpo.agents.prescient.Prescient.train`), and the wall-clock seconds spent training.
    """
    from lcpo.agents.prescient import Prescient

    seconds = 0.0  # exactly 0 when nothing trains (other agents, a resumed prescient agent)
    for agent in agents:
        if isinstance(agent, Prescient) and not agent.trained:
            start = time.perf_counter()
            agent.train(should_stop=should_stop, poll_steps=STOP_POLL_STEPS)
            seconds += time.perf_counter() - start
            if not agent.trained:
                return False, seconds
    return True, seconds


def _run_with_checkpoints(loop: OnlineLoop, target: int, config: RunConfig, checkpoint,
                          should_stop: Callable[[], bool] | None = None) -> bool:
    """Step ``loop`` to ``target``, checkpointing at every multiple of ``config.checkpoint_every`` and at
    ``target`` (an early stop, or the run's end: a finished run keeps its final checkpoint, from which it can
    be extended). With ``should_stop``, it is asked every :data:`STOP_POLL_STEPS` steps; once it says True the
    run is checkpointed where it stands (a resume from any step is exact) and stops.

    Returns:
        True if ``should_stop`` stopped the run before ``target``.
    """
    every = config.checkpoint_every
    while loop.steps < target:
        nxt = target if not every else min(target, (loop.steps // every + 1) * every)
        if should_stop is not None:
            nxt = min(nxt, loop.steps + STOP_POLL_STEPS)
        loop.run(nxt)
        due = bool(every) and (loop.steps % every == 0 or loop.steps == target)
        if due:
            checkpoint()
        if should_stop is not None and loop.steps < target and should_stop():
            if every and not due:
                checkpoint()
            return True
    return False


_UNSET = "(unset)"


def _plain(x: Any) -> Any:
    return json.loads(json.dumps(x))


def config_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """The settings that differ between two run configurations (:meth:`RunConfig.to_dict` forms).

    A key missing from one side takes :class:`RunConfig`'s default; the entries of ``overrides`` and
    ``env_kwargs`` are compared one by one (``overrides.c_anchor``), a missing entry showing as ``(unset)``.

    Returns:
        ``[(key, old_value, new_value), ...]`` sorted by key (empty if the configurations are the same).

    Example:
        >>> config_changes({"steps": 1000, "overrides": {}}, {"steps": 5000, "overrides": {"c_anchor": 0.5}})
        [('overrides.c_anchor', '(unset)', 0.5), ('steps', 1000, 5000)]
    """
    defaults = _plain(RunConfig(agent="a2c").to_dict() | {"agent": None, "probe_every": 0})
    old, new = _plain(dict(old)), _plain(dict(new))
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, defaults.get(key)), new.get(key, defaults.get(key))
        if key in ("overrides", "env_kwargs") and isinstance(a or {}, dict) and isinstance(b or {}, dict):
            a, b = a or {}, b or {}
            out += [(f"{key}.{k}", a.get(k, _UNSET), b.get(k, _UNSET)) for k in sorted(set(a) | set(b))
                    if a.get(k, _UNSET) != b.get(k, _UNSET)]
        elif a != b:
            out.append((key, a, b))
    return out


def _changes_text(changes: list[tuple[str, Any, Any]]) -> str:
    def fmt(v):
        return v if v == _UNSET else json.dumps(v)

    return "; ".join(f"{k}: {fmt(a)} -> {fmt(b)}" for k, a, b in changes)


#: The note of a run that starts in a new or empty folder (`lcpo run --resume` says it; a sweep, where every new
#: run would, leaves it out).
NOTHING_TO_RESUME = "nothing to resume; starting from step 0"


@dataclass(frozen=True)
class ResumePlan:
    """What :func:`execute` will do with a run folder.

    Attributes:
        action: ``"fresh"`` (start at step 0), ``"resume"`` (continue an interrupted run from its checkpoint),
            ``"extend"`` (continue a finished run from its final checkpoint to more steps) or ``"done"``
            (finished with this configuration: nothing to run).
        step: the step the run continues from (0 for ``fresh``; the finished step count for ``done``).
        message: what to tell the user ("" when there is nothing to say: a fresh run in a new folder).
        summary: the existing summary for ``done``, else None.
    """

    action: str
    step: int = 0
    message: str = ""
    summary: dict | None = None


#: Files and folders of a run (besides ``checkpoint/`` and ``summary.json``) that a fresh start replaces.
_RUN_OUTPUTS = ("config.json", "episodes.csv", "diagnostics.csv", "tb", "probes", "snapshots.npz")


def _remove_outputs(out: Path) -> None:
    """Remove the :data:`_RUN_OUTPUTS` of ``out``: the leftovers of a run that stopped before its first
    checkpoint, replaced by a fresh start (:func:`execute`, every seed of a population)."""
    for name in _RUN_OUTPUTS:
        p = out / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def _write_config(out: Path, config: RunConfig, hyperparameters: dict, env) -> None:
    """Write ``out/config.json``: the run's configuration, its resolved hyperparameters, the environment's
    context spec (None if it declares none) and the package versions (:func:`execute`, every seed of a
    population)."""
    spec = getattr(env.unwrapped, "context_spec", None)
    atomic_write_json(out / "config.json", {"run": config.to_dict(), "hyperparameters": hyperparameters,
                                            "context_spec": spec and spec.to_dict(), "versions": _versions()})


def _read_summary(path: Path) -> dict | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        summary = json.loads(text)
        if not isinstance(summary.get("config"), dict) or not isinstance(summary.get("steps"), int):
            raise ValueError("no config or steps")
    except (ValueError, AttributeError) as exc:
        raise CheckpointError(f"run summary {path} is truncated or corrupt ({exc}); delete it to resume the run "
                              "from its checkpoint") from None
    return summary


def resume_plan(config: RunConfig, out_dir: str | Path, resume: bool = True,
                elsewhere: str = "use another --out") -> ResumePlan:
    """Decide what :func:`execute` does with ``out_dir`` (the resume rules of the module docstring); reads
    only ``summary.json`` and the checkpoint pointer, and changes nothing.

    Args:
        config: the requested configuration.
        out_dir: the run folder (need not exist).
        resume: False: the folder must not hold a run (a summary or a checkpoint).
        elsewhere: how a refusal tells the caller to run somewhere else (``lcpo run``'s ``--out``; ``lcpo resume``,
            which has none, says its own).

    Returns:
        A :class:`ResumePlan`.

    Raises:
        ValueError: the resume is refused: the folder holds a run and ``resume`` is False; the configuration
            differs in anything but ``steps`` (the message names each differing key, old -> new); fewer steps
            than already done; a finished run without a final checkpoint asked for more steps.
        CheckpointError: a corrupt ``summary.json`` or checkpoint pointer (naming the file).
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"run folder {out} is an existing file, not a folder")
    summary = _read_summary(out / "summary.json") if out.is_dir() else None
    info = RunCheckpoints(out / "checkpoint").latest() if out.is_dir() else None
    new = config.to_dict()
    if not resume:
        if summary is not None or info is not None:
            raise ValueError(f"{out} already holds a run; pass --resume to continue or extend it, or choose "
                             "another --out")
        return ResumePlan("fresh")

    def refuse_changes(changes):
        other = [c for c in changes if c[0] != "steps"]
        if other:
            raise ValueError(f"cannot resume {out}: it holds a run with a different configuration ("
                             f"{_changes_text(other)}); only steps may change (more steps extend a run); "
                             f"{elsewhere}, or delete the folder to start afresh")

    if summary is not None:
        done = int(summary["steps"])
        changes = config_changes(summary["config"], new)
        if not changes:
            return ResumePlan("done", done, f"{out}: finished ({done:,} steps); nothing to run", summary)
        refuse_changes(changes)
        if config.steps < done:
            raise ValueError(f"cannot resume {out}: it finished {done:,} steps and a run cannot be shortened "
                             f"(--steps {config.steps:,}); {elsewhere}")
        if info is None or info.step != done:
            raise ValueError(f"cannot extend {out} to {config.steps:,} steps: it has no checkpoint of its final "
                             f"step {done:,} (run with checkpoint_every=0, or by an older lcpo); run it again in "
                             "another folder")
        return ResumePlan("extend", done, f"{out}: extending the finished run from step {done:,} to "
                                          f"{config.steps:,}")
    if info is not None:
        refuse_changes(config_changes(info.config, new))
        if config.steps < info.step:
            raise ValueError(f"cannot resume {out}: its checkpoint is at step {info.step:,}, past the requested "
                             f"{config.steps:,} steps; pass --steps {info.step:,} or more")
        return ResumePlan("resume", info.step, f"{out}: resuming from the checkpoint at step {info.step:,}"
                          + (" (an older lcpo's checkpoint, read unverified)" if info.legacy else ""))
    if out.is_dir() and any((out / name).exists() for name in _RUN_OUTPUTS):
        return ResumePlan("fresh", 0, f"{out}: no checkpoint to resume from (the run stopped before its first "
                                      "checkpoint); starting afresh from step 0")
    return ResumePlan("fresh", 0, f"{out}: {NOTHING_TO_RESUME}")


def _make_folder(out: Path) -> list[Path]:
    """Create ``out`` (and missing parents); returns the folders created, outermost first.

    Raises:
        ValueError: if ``out`` or a parent is an existing file, or the folder cannot be created (naming it).
    """
    missing = []
    p = out
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    if p.exists() and not p.is_dir():
        raise ValueError(f"run folder {out}: {p} is an existing file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"cannot create run folder {out}: {exc.strerror or exc}") from None
    return missing[::-1]


def _remove_failed(out: Path, created: list[Path]) -> None:
    """After a failed first attempt in folders this call created: remove them if no checkpoint was committed
    (nothing resumable was produced), so a failure leaves no empty run folder."""
    try:
        if (out / "summary.json").exists() or RunCheckpoints(out / "checkpoint").latest() is not None:
            return
    except CheckpointError:
        return
    shutil.rmtree(out, ignore_errors=True)
    for p in reversed(created[:-1]):
        try:
            p.rmdir()
        except OSError:
            break


def _versions() -> dict:
    import gymnasium

    import lcpo

    return {"lcpo": lcpo.__version__, "python": platform.python_version(), "torch": torch.__version__,
            "numpy": np.__version__, "gymnasium": gymnasium.__version__}


def _env_metrics(env) -> dict:
    """Environment-specific run metrics (``env.unwrapped.run_metrics() -> dict``), e.g. the straggler
    environment's p95 latency over 5-minute buckets; empty if the environment defines none."""
    fn = getattr(env.unwrapped, "run_metrics", None)
    return dict(fn()) if callable(fn) else {}


def _trace_info(env) -> dict | None:
    """The trace the environment runs on: ``{"name", "length", "unit"}`` from ``env.unwrapped.wind.trace`` (windy
    environments), ``.trace`` (a :class:`~lcpo.contexts.ContextTrace`: grid world, users' environments) or
    ``.workload`` (straggler: requests); None if the environment exposes none."""
    base = env.unwrapped
    for holder, attr in ((getattr(base, "wind", None), "trace"), (base, "trace")):
        trace = getattr(holder, attr, None) if holder is not None else None
        if trace is not None and hasattr(trace, "name") and hasattr(trace, "values"):
            return {"name": str(trace.name), "length": len(trace), "unit": "steps"}
    workload = getattr(base, "workload", None)
    if workload is not None and hasattr(workload, "name"):
        n = getattr(workload, "metadata", {}).get("num_requests")
        return {"name": str(workload.name), "length": None if n is None else int(n), "unit": "requests"}
    return None


def _context_names(env) -> tuple[str, ...]:
    spec = getattr(env.unwrapped, "context_spec", None)
    if spec is None:
        return ()
    names = []
    for g in spec.groups:
        first = spec.names[spec.indices.index(g[0])]
        names.append(first.split("[")[0])
    return tuple(names)


def run_summary(config: RunConfig, episodes: list, log: RunLog, *, steps: int, wall: float, resumed_from: list,
                env_metrics: dict, trace: dict | None, code: dict, hyperparameters: dict,
                wall_share: float | None = None, offline_train_s: float = 0.0, **extra) -> dict:
    """A finished run's ``summary.json`` object: one definition for :func:`execute` and for every seed of
    :func:`lcpo.online.population.execute_population`, so the two write the same keys.

    Args:
        config: the run's configuration. episodes: its episode rows. log: its run log (update diagnostics).
        steps: environment steps done. wall: wall time in seconds (all sessions). wall_share: the run's share
            of the processes' wall time, float seconds (``wall_share_s``: each session's wall time divided by the
            number of seeds it ran with; ``wall`` when None). resumed_from: steps it resumed at. env_metrics, trace, code, hyperparameters: as recorded. extra: further keys
            (``population``: the population's record, or ``{"size": 1, "seeds": [seed]}`` for a run alone).
        offline_train_s: seconds of ``wall`` spent in a prescient agent's offline training (0 for the others; a
            population's whole training time, its members one after the other, as ``wall`` is the population's):
            recorded as ``offline_train_s``; ``steps_per_s`` counts the online phase only (``wall`` less these).
    """
    online = wall - offline_train_s
    lr = lifelong_return(episodes, config.warmup_steps)
    return {
        "lifelong_return": None if math.isnan(lr) else lr,
        "episodes": len(episodes),
        "scored_episodes": scored_episodes(episodes, config.warmup_steps),
        "steps": steps,
        "wall_time_s": wall,
        "wall_share_s": wall if wall_share is None else wall_share,
        "steps_per_s": steps / online if online > 0 else None,
        "offline_train_s": offline_train_s,
        "updates": log.updates,
        # None where the agent never takes a constrained step or samples OOD states (A2C, PPO, DDQN...): a
        # fraction of nothing, not 0
        "constrained_fraction": log.mean("train/constrained") if "train/constrained" in log.totals else None,
        "line_search_accept_fraction": (log.totals.get("train/line_search_ok", 0.0)
                                        / max(1.0, log.totals["train/constrained"])
                                        if "train/constrained" in log.totals else None),
        "ood_fraction": log.mean("ood/fraction") if "ood/fraction" in log.totals else None,
        "resumed_from": resumed_from,
        "env_metrics": env_metrics,
        "trace": trace,
        "return_unit": return_unit(config.reset),
        "versions": _versions(),
        "code": code,
        "config": config.to_dict(),
        "hyperparameters": hyperparameters,
        **extra,
    }


def execute(config: RunConfig, out_dir: str | Path, resume: bool = True, progress: bool = False,
            threads: int | None = 1, stop_at: int | None = None,
            on_progress: Callable[[int, float], None] | None = None,
            on_message: Callable[[str], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> dict:
    """Run one online run into ``out_dir`` and return its summary.

    The folder is locked for the whole call (:class:`lcpo.persistence.runlock.RunLock`: a second writer is refused with
    :class:`lcpo.persistence.runlock.RunFolderBusy`). What happens to an existing run follows :func:`resume_plan`;
    a seed folder of a population resumes from the later of its own checkpoint and the generation a population
    pointer beside it names (:func:`lcpo.online.population.pointer_for_folder`, under
    :func:`lcpo.online.population.pointer_verdict`'s rules, as the population itself would). A call that fails in
    a folder it created, before any checkpoint was committed, removes that folder.

    Args:
        config: the run configuration.
        out_dir: run folder (created).
        resume: continue or extend the run the folder holds (:func:`resume_plan`); False refuses a folder that
            holds a run.
        progress: show a tqdm progress bar (steps/s and recent episodic return).
        threads: ``torch.set_num_threads`` for this process (1 = one core per run; None leaves it).
        stop_at: stop (after checkpointing) once this many steps are done, without writing the summary
            (used by tests to emulate an interruption).
        on_progress: optional ``(steps_done, recent_return)`` callback after every episode.
        on_message: optional callback receiving one-line notes (resumed from step k, extended, started afresh,
            already finished).
        should_stop: optional callable asked every :data:`STOP_POLL_STEPS` steps (a sweep worker's stop flag,
            set by SIGINT/SIGTERM): once it returns True the run writes a checkpoint where it stands (unless
            ``checkpoint_every`` is 0) and returns ``{"interrupted_at": steps}`` without a summary; resuming it
            later gives the uninterrupted run's results. A prescient agent's offline training, before the first
            step, asks it too (:func:`train_offline`): stopped there, the run returns ``{"interrupted_at": 0}``
            with no checkpoint, and its resume trains afresh.

    Returns:
        The summary dict (also written to ``summary.json``): ``lifelong_return``, ``episodes``,
        ``scored_episodes`` (how many of them end after the warm-up, i.e. enter the lifelong return), ``steps``,
        ``wall_time_s``, ``wall_share_s`` (this run's share of its processes' wall time: equal to
        ``wall_time_s`` for a run that always ran alone, the population's time divided by its size for the sessions
        it ran in one), ``steps_per_s`` (online steps per second of the online phase), ``offline_train_s`` (the
        seconds of ``wall_time_s`` a prescient agent spent training offline, 0 for the others),
        ``constrained_fraction``, ``line_search_accept_fraction``, ``ood_fraction`` (these three None for an
        agent that never reports constrained steps / OOD sampling),
        ``resumed_from`` (the steps this run was resumed or extended from, ``[]`` if it ran
        in one go), ``trace`` (the trace the environment ran on: ``{"name", "length", "unit"}``, e.g.
        ``ndbc-46002``, 575501 steps, for the default run; None if the environment exposes none),
        ``return_unit`` (what the lifelong return averages: ``"episode"``, or ``"200-step window"`` for a
        continuing run), ``versions``, ``code`` (:func:`lcpo.persistence.provenance.code_provenance` at the start
        of the invocation that finished the run: ``commit``, ``dirty``, ``source``), ``config``,
        ``hyperparameters``; for a run that went on alone after a population
        (:func:`lcpo.online.population.execute_population`), ``population``: that population's ``size``,
        ``seeds``, ``batch_native`` and ``device``, and ``alone_from``, the step it went on alone from (issue 27
        item 5: which population a run ran in). With ``stop_at`` before the end:
        ``{"interrupted_at": steps}``.

    Raises:
        ValueError: bad configuration, unknown env/trace/agent, non-finite observations/rewards, a refused
            resume (:func:`resume_plan`), ``out_dir`` naming a file, or checkpoints (``checkpoint_every``) of an
            environment they could not save (no ``get_state``/``set_state``, or a wrapper with unsaved state,
            named: :func:`lcpo.envs.preflight.check_checkpointable`), refused before the first step.
        CheckpointError: (a ValueError) a missing, corrupt, unsafe or mismatched checkpoint file (named).
        RunFolderBusy: another process is writing the folder.
    """
    out = Path(out_dir)
    created = _make_folder(out)
    lock = RunLock(out)
    try:
        lock.acquire()
    except BaseException:
        for p in reversed(created):  # only if still empty: another writer may have created it at the same time
            try:
                p.rmdir()
            except OSError:
                break
        raise
    try:
        return _execute_locked(config, out, resume, progress, threads, stop_at, on_progress, on_message,
                               should_stop)
    except BaseException:
        if created:
            _remove_failed(out, created)
        raise
    finally:
        lock.release()


def _recorded_run_length_fields(out: Path, config: RunConfig) -> dict:
    """The run-length-dependent hyperparameters (:mod:`lcpo.agents.run_length`) that the run in ``out`` was
    built with, as its ``config.json`` records them, for the fields the user did not set: a resumed or extended
    run keeps the memory sizes of its checkpoint, however often it was extended. Empty when not recorded."""
    from lcpo.agents.run_length import RUN_LENGTH_RULES

    try:
        recorded = json.loads((out / "config.json").read_text()).get("hyperparameters", {})
    except (OSError, ValueError, AttributeError):
        return {}
    names = set(RUN_LENGTH_RULES.get(config.agent, {})) - set(config.overrides)
    return {k: recorded[k] for k in names if isinstance(recorded.get(k), int) and not isinstance(recorded[k], bool)}


def _kept_sizes_note(config: RunConfig, overrides: dict) -> str:
    """For a run resumed or extended to ``config.steps``: the run-length-dependent sizes it keeps from its first
    length that differ from what a fresh run of ``config.steps`` would get, where that changes the run (one of the
    two sizes fills before ``config.steps``); an empty string when none does."""
    fresh = config.agent_overrides()
    # a memory at least as large as the run never fills: two such sizes give the same run
    diff = [(k, v, fresh[k]) for k, v in sorted(overrides.items())
            if k in fresh and k not in config.overrides and fresh[k] != v and min(v, fresh[k]) < config.steps]
    if not diff:
        return ""
    kept = ", ".join(f"{k}={v:,}" for k, v, _ in diff)
    would = ", ".join(f"{k}={f:,}" for k, _, f in diff)
    return (f"keeps {kept} from the run's first length (a fresh {config.steps:,}-step run would use {would}: "
            f"the results differ; set them with --set to compare)")


def _execute_locked(config: RunConfig, out: Path, resume: bool, progress: bool, threads: int | None,
                    stop_at: int | None, on_progress, on_message, should_stop=None) -> dict:
    summary_path = out / "summary.json"
    plan = resume_plan(config, out, resume)
    say = on_message or (lambda msg: None)
    if plan.action == "done":
        say(plan.message)
        return plan.summary
    from lcpo.persistence.provenance import code_provenance

    code = code_provenance()  # the code this invocation runs on (one git call; summary.json "code")
    store = RunCheckpoints(out / "checkpoint")
    env = make_run_env(config)
    if config.checkpoint_every:  # refused here, not at the first checkpoint: no step taken, no file written
        from lcpo.envs.preflight import check_checkpointable

        check_checkpointable(env, config.env)
    # the folder's own checkpoint, or a population's later generation in it that the population's pointer
    # beside the folder names (a kill between that commit and the folder's own pointer): the later of the two
    from lcpo.online.population import POINTER, _start_state, pointer_for_folder, refuse_unresumed

    member, pop_step, pop_dir = pointer_for_folder(config, out, say if resume else None)
    if not resume:
        refuse_unresumed(config, out, member, pop_step, pop_dir)
        member, pop_step, pop_dir = None, 0, None
    step0, state, source, note = _start_state(config, out, plan, member, pop_step, pop_dir)
    length = config.steps
    if state is not None:  # an extended run keeps the memories it started with
        length = int(state.get("config", {}).get("steps", config.steps))
    overrides = config.agent_overrides(length)
    kept = ""
    if state is not None:
        overrides.update(_recorded_run_length_fields(out, config))
        kept = _kept_sizes_note(config, overrides)
    agent = AGENTS[config.agent](env, seed=config.seed, **overrides)
    log = RunLog(out, _context_names(env), every=config.diagnostics_every, tensorboard=False)
    from lcpo.experiments.snapshots import SnapshotRecorder

    snaps = SnapshotRecorder.create(out, agent, config.steps)  # frozen acting-network snapshots (forgetting)
    probe = None
    if config.probe_every:
        from lcpo.experiments.drift import PolicyProbe

        probe = PolicyProbe(out, config.probe_every, seed=config.seed)

    def on_update(step, diag):
        log.on_update(step, diag)
        if snaps is not None:
            snaps.on_update(step)
        if probe is not None:
            probe.on_update(step, agent)
    loop = OnlineLoop(env, agent, config.reset, seed=config.seed, on_update=on_update,
                      on_episode=log.on_episode)
    wall_before = share_before = offline_before = 0.0
    resumed_from: list[int] = []
    population = None  # the population this run last ran in, when it goes on alone after one
    if state is not None:
        agent.load_state_dict(state["agent"])
        # the rows come back from episodes.csv, up to the checkpoint's marker (older checkpoints hold them)
        loop.load_state_dict(state["loop"], episodes=log.restore_episodes(state["log"]))
        log.load_state_dict(state["log"])
        wall_before = float(state["wall_time_s"])
        # a seed going on alone after a population: only its share of the population's time is its own
        share_before = float(state.get("wall_share_s", wall_before))
        offline_before = float(state.get("offline_train_s", 0.0))
        resumed_from = [int(k) for k in state.get("resumed_from", [])] + [int(loop.steps)]
        if state.get("population") is not None:  # provenance (issue 27 item 5): which population it ran in
            population = {"alone_from": int(loop.steps), **state["population"]}
        if probe is not None:
            probe.resume_from(loop.steps)
        if snaps is not None:
            snaps.resume_from(loop.steps)
    # every check passed: from here on the folder is written
    if state is None:
        _remove_outputs(out)  # leftovers of a run that stopped before its first checkpoint
    summary_path.unlink(missing_ok=True)  # an extended run is unfinished until its new summary
    if config.tensorboard:  # events past the checkpoint, written by an interrupted process, are purged
        log.open_tensorboard(purge_step=None if state is None else loop.steps + 1)
    _write_config(out, config, dataclasses.asdict(agent.hp), env)
    if state is not None:
        log.write(loop.episodes)  # episodes.csv / diagnostics.csv as of the checkpoint (cut at its marker)
    if note:
        say(note)
    elif source == "population":
        say(f"{out}: resuming from the population checkpoint {pop_dir / POINTER} at step {step0:,}")
    elif plan.message:
        say(plan.message)
    if kept:
        say(f"{out}: {kept}")

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=config.steps, initial=loop.steps, unit="step", dynamic_ncols=True,
                   desc=f"{config.agent} {config.env.split('/')[-1]}")
    recent: list[float] = []
    last = [loop.steps]

    def on_episode(row):
        log.on_episode(row)
        recent.append(row[2])
        if len(recent) > 20:
            recent.pop(0)
        if bar is not None:
            bar.update(row[1] - last[0])
            last[0] = row[1]
            bar.set_postfix(ret=f"{np.mean(recent):.1f}", refresh=False)
        if on_progress is not None:
            on_progress(row[1], float(np.mean(recent)))

    loop.on_episode = on_episode
    start = time.perf_counter()
    target = config.steps if stop_at is None else min(config.steps, stop_at)
    # a prescient agent's offline training, before its first step: a stop request pauses it (no checkpoint; the
    # resume trains afresh, the same training bit for bit); its time is kept apart from the online steps'
    with limit_threads(threads):
        trained, train_s = train_offline([agent], should_stop)
    offline_s = offline_before + train_s
    if not trained:
        if bar is not None:
            bar.close()
        log.close()
        say(f"{out}: stopped during the offline training of {config.agent} at its step "
            f"{agent.train_steps_done:,} of {agent.hp.train_steps:,} (before the first online step; no checkpoint: "
            "the resume trains afresh, to the same result)")
        return {"interrupted_at": loop.steps}

    def checkpoint():
        if snaps is not None:
            if loop.steps == config.steps:
                snaps.take(loop.steps)  # the final policy
            snaps.write()  # before the commit: never behind the committed checkpoint
        elapsed = time.perf_counter() - start
        # the new episode rows are appended and fsynced first; the checkpoint records where the file ends (rows
        # appended by a process stopped before its commit lie after that marker, and the resume cuts them off)
        log.write(loop.episodes)
        store.commit(loop.steps, {"config": config.to_dict(), "agent": agent.state_dict(),
                                  "loop": loop.state_dict(episodes=False), "log": log.state_dict(),
                                  "wall_time_s": wall_before + elapsed, "wall_share_s": share_before + elapsed,
                                  "resumed_from": resumed_from,
                                  **({"offline_train_s": offline_s} if offline_s else {}),
                                  **({"population": population} if population is not None else {})},
                     config=config.to_dict())

    try:
        with limit_threads(threads):  # one core per run (see lcpo.online.threads)
            _run_with_checkpoints(loop, target, config, checkpoint, should_stop)
    finally:
        if bar is not None:
            bar.update(loop.steps - last[0])
            bar.close()
        log.close()
    if loop.steps < config.steps:
        return {"interrupted_at": loop.steps}
    wall = wall_before + time.perf_counter() - start
    if snaps is not None and not config.checkpoint_every:
        snaps.take(loop.steps)
        snaps.write()
    log.write(loop.episodes, final=True, last_step=loop.steps)
    summary = run_summary(config, loop.episodes, log, steps=loop.steps, wall=wall,
                          wall_share=share_before + wall - wall_before, resumed_from=resumed_from,
                          env_metrics=_env_metrics(env), trace=_trace_info(env), code=code,
                          hyperparameters=dataclasses.asdict(agent.hp), offline_train_s=offline_s,
                          # provenance (issue 27 item 5): a run that trained alone says so, {"size": 1, "seeds": [s]}
                          population=population if population is not None else {"size": 1, "seeds": [config.seed]})
    atomic_write_json(summary_path, summary)
    return json.loads(summary_path.read_text())  # the JSON form: the same object a resumed call returns
