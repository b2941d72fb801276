"""Run a sweep's specs on a local process pool or on Dask distributed, skipping and resuming runs.

Layout of a sweep folder (``RUNS_DIR``)::

    RUNS_DIR/sweep.json          manifest: sweep name, executor, the list of specs (run id + resolved config)
    RUNS_DIR/runs/<run_id>/      one folder per run, written by the executor (config.json, episodes.csv,
                                 diagnostics.csv, checkpoint/, summary.json written atomically and last)
    RUNS_DIR/runs/<run_id>/error.json   written (atomically) when the run raised: message + traceback
    RUNS_DIR/results.parquet, RUNS_DIR/episodes.parquet   the store (:mod:`lcpo.experiments.store`)

A run whose ``summary.json`` exists is finished and never started again; any other run is started with
``resume=True`` so the executor continues from its last checkpoint. A failed run is recorded and does not stop
the sweep; running the sweep again retries it. One sweep process per ``RUNS_DIR`` at a time (a lock file
enforces it), and one writer per run folder: a task holds its run folder's lock
(:class:`lcpo.persistence.runlock.RunLock`) while it runs, and a second copy of the same task (Dask re-running a task whose
first copy is still alive) waits for that lock, then finds the run finished (or resumes it from its checkpoint).

Backends: ``local`` (worker processes of this module, spawn start method, one run at a time per worker,
default one worker per core) and ``dask`` (``dask.distributed``: an existing scheduler at ``address``, or a
``LocalCluster`` bound to 127.0.0.1; a task whose worker died is rescheduled by Dask (its ``allowed-failures``),
and one that raised an error that may be transient (:attr:`RunFailed.retryable`: the file system, memory, a busy
folder) is tried twice more (``retries=2``); either re-run resumes from the run's checkpoint. A refusal or a
diverged run is not retried: it would fail the same way).

Stopping (docs/experiments.md, "Stopping a sweep"): the first SIGINT (Ctrl-C) or SIGTERM, sent to the sweep
process alone or to its whole process group, stops the sweep: no new run starts, each running run writes a
checkpoint where it stands and stops (within :data:`lcpo.online.run.STOP_POLL_STEPS` steps), every worker
exits and is reaped, and :func:`run_sweep` raises :class:`SweepInterrupted` (``lcpo sweep`` prints one line
saying how to resume and exits with 128 + the signal number). A second signal kills the workers at once
(their runs resume from their last periodic checkpoint). Local workers ignore SIGINT (a Ctrl-C reaches the
whole group; the sweep process decides), take SIGTERM as a stop request, and stop by themselves when the sweep
process is gone, so none outlives it.
"""

from __future__ import annotations

import fcntl
import fnmatch
import gc
import importlib
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lcpo.experiments.config import DEFAULT_EXECUTOR, RunSpec

__all__ = ["BACKENDS", "RunFailed", "RunOutcome", "SweepInterrupted", "run_dir", "run_one", "run_sweep",
           "select_runs", "write_json_atomic"]

BACKENDS = ("local", "dask")


class RunFailed(RuntimeError):
    """A run raised; the message holds the run id, the error and the remote traceback.

    Attributes:
        retryable: whether another attempt could end otherwise (:func:`_retryable`: the run's error was an
            ``OSError`` other than a missing path or a permission, a ``MemoryError`` or torch's
            ``OutOfMemoryError``, or :class:`lcpo.persistence.runlock.RunFolderBusy`); a refusal, a diverged
            run or a bug raises the same again, so the Dask backend does not retry it. Not kept across pickling
            (read in the process that raised it).
    """

    retryable: bool = False


def _retryable(exc: BaseException) -> bool:
    """Whether a run's error may be transient: the file system (an ``OSError`` such as a full disk or a lost
    mount, but not a missing or misplaced path or a permission: ``FileNotFoundError``, ``NotADirectoryError``,
    ``IsADirectoryError``, ``PermissionError`` fail the same way again), memory (``MemoryError``, torch's
    ``OutOfMemoryError`` on a GPU shared with other jobs), or a run folder another process still holds
    (``RunFolderBusy``). Everything else (a refused configuration or resume, ``CheckpointError``, non-finite
    values, a bug) is deterministic: the same inputs raise it again."""
    from lcpo.persistence.runlock import RunFolderBusy

    if isinstance(exc, (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)):
        return False
    return isinstance(exc, (OSError, MemoryError, RunFolderBusy)) or type(exc).__name__ == "OutOfMemoryError"


def _run_failed(message: str, exc: BaseException) -> RunFailed:
    """A :class:`RunFailed` for ``exc``, its ``retryable`` set."""
    err = RunFailed(message)
    err.retryable = _retryable(exc)
    return err


class SweepInterrupted(KeyboardInterrupt):
    """A sweep stopped by SIGINT or SIGTERM (:func:`run_sweep`).

    Attributes:
        signum: the first signal received (``signal.SIGINT`` or ``signal.SIGTERM``).
        forced: a second signal came, and the workers were killed without a final checkpoint.
        outcomes: one :class:`RunOutcome` per spec, in spec order; runs that were stopped have status
            ``"interrupted"``, those never started ``"pending"``.
    """

    def __init__(self, signum: int, forced: bool, outcomes: list):
        self.signum, self.forced, self.outcomes = int(signum), bool(forced), list(outcomes)
        super().__init__(f"sweep stopped by {signal.Signals(signum).name}")


@dataclass(frozen=True)
class RunOutcome:
    """What happened to one spec in one sweep invocation.

    Attributes:
        run_id: the spec's id.
        status: ``"done"`` (finished now), ``"skipped"`` (finished before), ``"failed"``, ``"deselected"``
            (unfinished and matched by none of the sweep's ``only`` patterns: not started), and for a sweep
            stopped by a signal (:class:`SweepInterrupted`) ``"interrupted"`` (stopped at a checkpoint) or
            ``"pending"`` (not started).
        wall_time_s: the run's ``wall_time_s`` from its summary (0 for skipped, failed and deselected runs).
        error: the error message for a failed run, else ``None``.
    """

    run_id: str
    status: str
    wall_time_s: float = 0.0
    error: str | None = None


def run_dir(runs_dir: str | Path, run_id: str) -> Path:
    """The folder of run ``run_id`` inside sweep folder ``runs_dir``."""
    return Path(runs_dir) / "runs" / run_id


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` by writing a sibling temporary file, fsyncing it, then renaming."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True, default=str)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _limit_threads() -> None:
    """One run per core: keep BLAS/OpenMP/torch to one thread in this worker process."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        if torch.get_num_threads() != 1:
            torch.set_num_threads(1)


def run_one(config: dict[str, Any], out_dir: str, executor: str = DEFAULT_EXECUTOR,
            should_stop: Callable[[], bool] | None = None, stop_event: str | None = None,
            on_message: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run one spec in the current process (the task a worker executes).

    Takes the run folder's lock (waiting while another process or thread holds it: never two copies of one
    run in one folder), imports ``executor`` (a module with ``RunConfig.from_dict`` and ``execute(config,
    out_dir, resume, progress)``), removes a stale ``error.json``, and calls ``execute(..., resume=True)``: a
    finished run returns its summary at once, an interrupted one resumes from its checkpoint.

    Args:
        config: the resolved run config (``RunConfig.to_dict`` form).
        out_dir: the run folder.
        executor: module path, default ``lcpo.online.run``.
        should_stop: a stop request, polled by the run (passed to the executor's ``execute`` when it takes a
            ``should_stop`` argument; see :func:`lcpo.online.run.execute`).
        stop_event: the name of a ``dask.distributed.Event`` that stops the run once set (the Dask backend; asked
            at most once a second); a run whose event is set before it starts is not started.
        on_message: receives the run's one-line notes (resumed from step N, started afresh, ...), passed to the
            executor's ``execute`` when it takes ``on_message``; default: :func:`_default_notes`.

    Returns:
        The run's summary dict; ``{"interrupted_at": step}`` for a run stopped by a stop request, and
        ``{"not_started": True}`` for one whose stop request came before it started.

    Raises:
        RunFailed: if the executor raised; ``out_dir/error.json`` then holds the error and traceback.
    """
    from lcpo.persistence.runlock import RunLock

    _limit_threads()
    if stop_event is not None:
        should_stop = _dask_stop_check(stop_event)
        if should_stop():
            return {"not_started": True}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with RunLock(out, wait=True):
        (out / "error.json").unlink(missing_ok=True)
        try:
            module = importlib.import_module(executor)
            run_config = module.RunConfig.from_dict(config)
            extra = {"should_stop": should_stop} if should_stop is not None and _takes(module.execute,
                                                                                     "should_stop") else {}
            if _takes(module.execute, "on_message"):
                extra["on_message"] = on_message or _default_notes(stop_event)
            summary = module.execute(run_config, out, resume=True, progress=False, **extra)
            return dict(summary)
        except Exception as exc:  # noqa: BLE001 - recorded in error.json and re-raised as RunFailed
            tb = traceback.format_exc()
            write_json_atomic(out / "error.json", {
                "error": f"{type(exc).__name__}: {exc}", "traceback": tb, "config": config,
                "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": os.uname().nodename, "pid": os.getpid(),
            })
            raise _run_failed(f"{out.name}: {type(exc).__name__}: {exc}\n{tb}", exc) from None


def group_seeds(specs: Sequence[RunSpec], max_size: int) -> list[list[RunSpec]]:
    """Group runs that differ only in ``seed`` into population tasks (issue 26): at most ``max_size`` runs per
    group, groups in the order of their first run, runs in their given order within a group.

    Args:
        specs: the runs to start.
        max_size: the largest population (memory: 64 LCPO seeds with 200k-state reservoirs take about 1 GiB,
            docs/benchmarks.md); 1 keeps every run alone.

    Returns:
        A list of groups (each a non-empty list of specs).

    Raises:
        ValueError: ``max_size`` below 1.
    """
    if max_size < 1:
        raise ValueError(f"population size limit must be >= 1, got {max_size}")
    groups: dict[str, list[list[RunSpec]]] = {}
    order: list[list[RunSpec]] = []
    for spec in specs:
        key = json.dumps({k: v for k, v in dict(spec.config).items() if k != "seed"}, sort_keys=True, default=str)
        chain = groups.setdefault(key, [])
        if not chain or len(chain[-1]) >= max_size:
            chain.append([])
            order.append(chain[-1])
        chain[-1].append(spec)
    return order


def run_group(configs: Sequence[dict[str, Any]], out_dirs: Sequence[str], executor: str = DEFAULT_EXECUTOR,
              should_stop: Callable[[], bool] | None = None, stop_event: str | None = None,
              device: str = "cpu", on_message: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Run a group of runs that differ only in seed (the task a worker executes for :func:`group_seeds`).

    One run, or an executor other than ``lcpo.online.run``: each run through :func:`run_one`, one after the
    other. Otherwise the runs train as one population (:func:`lcpo.online.population.execute_population`,
    which takes every run folder's lock); runs whose checkpoints stand at different steps (resumed before on
    their own) cannot form one population and run one by one instead. ``device`` (``lcpo sweep --device``) is
    the population's torch device (:func:`lcpo.online.population.execute_population`); off the CPU even a single
    run trains as a population of one. ``on_message`` receives the runs' one-line notes (where each resumed
    from, or that it started afresh); by default they go to the sweep's standard error (:func:`_default_notes`).

    Returns:
        One summary per run, in order (``{"interrupted_at": step}`` / ``{"not_started": True}`` as
        :func:`run_one`'s).

    Raises:
        RunFailed: the population (or a run) raised; each run folder's ``error.json`` holds the error.
    """
    if stop_event is not None:
        should_stop = _dask_stop_check(stop_event)
        if should_stop():
            return [{"not_started": True} for _ in configs]
    on_message = on_message or _default_notes(stop_event)
    if (len(configs) == 1 and device == "cpu") or executor != DEFAULT_EXECUTOR:
        return [run_one(c, o, executor, should_stop=should_stop, on_message=on_message)
                for c, o in zip(configs, out_dirs)]
    _limit_threads()
    from lcpo.online.population import execute_population
    from lcpo.online.run import RunConfig

    outs = [Path(o) for o in out_dirs]
    for out in outs:
        (out / "error.json").unlink(missing_ok=True)
    try:
        run_configs = [RunConfig.from_dict(c) for c in configs]
        return [dict(s) for s in execute_population(run_configs, outs, resume=True, should_stop=should_stop,
                                                    device=device, on_message=on_message)]
    except ValueError as exc:
        if "checkpoints are at different steps" not in str(exc):
            _record_group_error(configs, outs, exc)
        return [run_one(c, o, executor, should_stop=should_stop, on_message=on_message)
                for c, o in zip(configs, out_dirs)]
    except Exception as exc:  # noqa: BLE001 - recorded in each error.json and re-raised as RunFailed
        _record_group_error(configs, outs, exc)


#: How a Dask task (:func:`_dask_group`) hands back a failure that another attempt would repeat.
_FAILED = "__lcpo_failed__"


def _dask_group(*args, **kwargs) -> list[dict[str, Any]] | dict[str, str]:
    """:func:`run_group` as a Dask task: a failure that another attempt would repeat (not
    :attr:`RunFailed.retryable`) is returned as ``{_FAILED: message}``, not raised, so that the task's Dask
    ``retries`` re-run only transient failures (a worker's death is rescheduled by Dask's ``allowed-failures``,
    not by ``retries``)."""
    try:
        return run_group(*args, **kwargs)
    except RunFailed as exc:
        if exc.retryable:
            raise
        return {_FAILED: str(exc)}


def _notes_topic(stop_event: str) -> str:
    """The Dask event topic of one sweep's notes (unique per sweep, as its stop event's name)."""
    return f"{stop_event}-notes"


def _default_notes(stop_event: str | None) -> Callable[[str], None]:
    """Where a task's notes go when its caller gives no ``on_message``: the standard error of this process, as
    ``lcpo sweep: NOTE``; in a Dask task (``stop_event`` set) an event of the sweep's own topic
    (:func:`_notes_topic`, ``Worker.log_event``), which the sweep's client writes once, above its progress bar
    (:func:`_run_dask`); outside a worker, standard error."""
    if stop_event is not None:
        try:
            from distributed import get_worker

            worker = get_worker()
        except (ImportError, ValueError):
            worker = None
        if worker is not None:
            topic = _notes_topic(stop_event)
            return _quiet_fresh(lambda msg: worker.log_event(topic, msg))
    return _quiet_fresh(lambda msg: print(f"lcpo sweep: {msg}", file=sys.stderr, flush=True))


def _quiet_fresh(write: Callable[[str], None]) -> Callable[[str], None]:
    """``write``, less the note of a run starting in a new folder (every new run of a sweep would print one)."""

    def quiet(msg: str) -> None:
        from lcpo.online.run import NOTHING_TO_RESUME  # imported by the run that sends a note (torch: not earlier)

        if not msg.endswith(NOTHING_TO_RESUME):
            write(msg)

    return quiet


def _record_group_error(configs, outs, exc: BaseException) -> None:
    """Record a population task's error in the ``error.json`` of each of its run folders that exists (a task
    refused before it wrote anything creates no folder for it: the sweep reports the failure), then raise it as
    :class:`RunFailed`."""
    tb = traceback.format_exc()
    for config, out in zip(configs, outs):
        if not out.is_dir():
            continue
        write_json_atomic(out / "error.json", {
            "error": f"{type(exc).__name__}: {exc}", "traceback": tb, "config": config,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": os.uname().nodename, "pid": os.getpid(),
            "population": [o.name for o in outs]})
    raise _run_failed(f"{outs[0].name} (population of {len(outs)}): {type(exc).__name__}: {exc}\n{tb}",
                      exc) from None


def _takes(fn: Callable, name: str) -> bool:
    """Whether ``fn`` accepts keyword argument ``name`` (or any keyword)."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _dask_stop_check(name: str) -> Callable[[], bool]:
    """A ``should_stop`` for a Dask task: is the ``dask.distributed.Event`` ``name`` set (asked of the scheduler
    at most once a second; once set, always True)."""
    from dask.distributed import Event

    event = Event(name)
    state = {"next": 0.0, "set": False}

    def should_stop() -> bool:
        now = time.monotonic()
        if not state["set"] and now >= state["next"]:
            state["next"] = now + 1.0
            try:
                state["set"] = bool(event.is_set())
            except Exception:  # noqa: BLE001 - scheduler unreachable: it is going away, so stop
                state["set"] = True
        return state["set"]

    return should_stop


def select_runs(specs: Sequence[RunSpec], patterns: Sequence[str]) -> list[RunSpec]:
    """The specs whose run id matches one of the glob ``patterns``, in the patterns' order of priority.

    A spec goes with the first pattern it matches; specs of the same pattern keep the sweep's order. So
    ``["*wind-1_ppo_s0-*", "*wind-1*"]`` starts trace ``wind-1``'s PPO seed 0 first, then the rest of that trace.
    Patterns are shell-style (``fnmatch``: ``*``, ``?``, ``[...]``), case-sensitive, matched against the whole run
    id (list the ids with ``lcpo sweep CONFIG --dry-run``).

    Args:
        specs: the expanded sweep.
        patterns: one or more glob patterns.

    Returns:
        The selected specs, each once.

    Raises:
        ValueError: ``patterns`` is empty, or a pattern matches no run id (the error names it, so a typo never
            silently selects nothing).
    """
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    if not patterns:
        raise ValueError("no --only pattern given")
    ranked: list[list[RunSpec]] = [[] for _ in patterns]
    hits = [0] * len(patterns)
    for spec in specs:
        first = None
        for i, pat in enumerate(patterns):
            if fnmatch.fnmatchcase(spec.run_id, pat):
                hits[i] += 1
                if first is None:
                    first = i
        if first is not None:
            ranked[first].append(spec)
    unmatched = [pat for pat, n in zip(patterns, hits) if n == 0]
    if unmatched:
        raise ValueError(f"--only pattern(s) {', '.join(map(repr, unmatched))} match no run of this sweep "
                         "(list the run ids with --dry-run; patterns are shell globs on the whole id, "
                         "e.g. '*wind-1_lcpo_s0-*': end a seed with '-', or s1 also matches s10-s19)")
    return [spec for group in ranked for spec in group]


def _is_finished(runs_dir: Path, run_id: str) -> bool:
    """Whether the run has a ``summary.json``, which must be readable (else a finished run would be skipped
    here and refused by the store after every other run ran).

    Raises:
        ValueError: one line naming the malformed summary and the two ways out.
    """
    path = run_dir(runs_dir, run_id) / "summary.json"
    if not path.is_file():
        return False
    from lcpo.experiments.store import read_summary

    try:
        read_summary(path)
    except ValueError as exc:
        raise ValueError(f"{exc}; repair it, or delete it to run that run again (from its checkpoint, if it "
                         "kept one)") from None
    return True


def resume_preview(specs: Sequence[RunSpec], runs_dir: str | Path, population: int,
                   device: str = "cpu") -> tuple[dict[int, int], int, list[str]]:
    """Where the unfinished runs of ``specs`` would start if the sweep ran now with ``population`` (``lcpo sweep
    --dry-run``), from the checkpoint pointers alone: each run folder's ``checkpoint/latest.json``
    (:meth:`lcpo.persistence.checkpoint.RunCheckpoints.latest`) and, per population task as :func:`group_seeds`
    forms it, the population pointer (:func:`lcpo.online.population.read_population_pointer`), under the rules of
    :func:`lcpo.online.population.execute_population` (the later of the two where the pointer's generation is
    there). Nothing is loaded beyond the pointers, nothing is changed.

    Args:
        specs: the runs (finished ones are left out).
        runs_dir: the sweep folder.
        population: the largest population task (1: every run alone).
        device: the sweep's ``--device`` (off the CPU a single run is a population of one too).

    Returns:
        ``(starts, failing, lines)``: runs per starting step; runs whose task the sweep would refuse (a malformed
        pointer or checkpoint, or a population pointer whose generation is gone from a folder that holds a run's
        files but no checkpoint, or one past the runs' steps: :func:`lcpo.online.population.pointer_verdict`, the
        resume's own decision); one line per such cause, one per task whose starts differ (run one by one), and
        one per population pointer of another grouping that is ahead of runs this grouping starts lower.
    """
    from lcpo.online.population import (POINTER, _member_key, pointer_verdict, population_folder,
                                        read_population_pointer)
    from lcpo.online.run import RunConfig
    from lcpo.persistence.checkpoint import CheckpointError, RunCheckpoints

    runs_dir = Path(runs_dir)
    todo = [s for s in specs if not _is_finished(runs_dir, s.run_id)]
    starts: dict[int, int] = {}
    failing, lines = 0, []
    ours: set[Path] = set()
    start_of: dict[Path, int] = {}

    for group in group_seeds(todo, population):
        outs = [run_dir(runs_dir, s.run_id) for s in group]
        own: dict[Path, int] = {}
        bad = []
        for o in outs:
            try:
                info = RunCheckpoints(o / "checkpoint").latest() if (o / "checkpoint").is_dir() else None
            except CheckpointError as exc:
                bad.append(f"  {o.name}: {exc}")
                continue
            own[o] = info.step if info is not None else 0
        batched = len(group) > 1 or device != "cpu"
        if bad:
            lines += bad
            n = len(group) if batched else len(bad)
            failing += n
            lines[-1] += f": the sweep would fail {'that task' if batched else 'that run'}"
            if batched:
                continue
        if not batched:  # alone: the later of its own checkpoint and a population's generation beside it
            for spec, o in zip(group, outs):
                if o not in own:
                    continue
                step, line = _alone_start(spec, o, own[o])
                if line:
                    lines.append(line)
                    failing += 1
                    del own[o]
                else:
                    own[o] = step
        if batched:
            pop_dir = population_folder(outs, group[0].config["agent"])
            ours.add(pop_dir.resolve())
            try:
                pointer = read_population_pointer(pop_dir)
            except CheckpointError as exc:
                lines.append(f"  {exc}: the sweep would fail that task ({len(group)} runs)")
                failing += len(group)
                continue
            members = {m["folder"]: m for m in pointer["members"]} if pointer else {}
            folder_own = dict(own)
            verdicts = {o: pointer_verdict(RunConfig.from_dict(spec.config), o, own[o],
                                           members.get(_member_key(o, pop_dir)), pointer["step"] if pointer else 0)
                        for spec, o in zip(group, outs)}
            for o, verdict in verdicts.items():
                if verdict == "population":
                    own[o] = int(pointer["step"])
            refused = [o for o, v in verdicts.items() if v == "lost"]
            short = [o for o, v in verdicts.items() if v == "too_few_steps"]
            if refused:
                lines.append(f"  population checkpoint {pop_dir / POINTER} (step {pointer['step']:,}) names "
                             f"generations gone from {len(refused)} run folder(s) that hold a run's files but no "
                             f"checkpoint, e.g. {refused[0].name}: the sweep would refuse that task; restore their "
                             f"checkpoint/ folders, or delete {pop_dir.name} to start them afresh")
            if short:
                lines.append(f"  population checkpoint {pop_dir / POINTER} is at step {pointer['step']:,}, past "
                             f"the {short[0].name} run's steps: the sweep would refuse that task")
            if refused or short:
                failing += len(group)
                continue
            if len(set(own.values())) > 1:  # run_group then runs them one by one, each as a run alone
                alone = {o: _alone_start(spec, o, folder_own[o]) for spec, o in zip(group, outs)}
                lines.append(f"  {len(group)} runs of one task start at different steps ("
                             + ", ".join(f"{o.name} {st:,}" for o, (st, _) in list(alone.items())[:3])
                             + (", ..." if len(own) > 3 else "") + "): the sweep runs them one by one")
                own = {o: st for o, (st, line) in alone.items() if not line}
                for o, (_, line) in alone.items():
                    if line:
                        lines.append(line)
                        failing += 1
        for o, step in own.items():
            starts[step] = starts.get(step, 0) + 1
            start_of[o.resolve()] = step
    # pointers of other groupings (another --population, --only or --no-batch) ahead of runs started lower here
    for pointer_file in sorted((runs_dir / "runs").glob(f".population-*/{POINTER}")):
        pop_dir = pointer_file.parent
        if pop_dir.resolve() in ours:
            continue
        try:
            pointer = read_population_pointer(pop_dir)
        except CheckpointError:
            continue  # not this grouping's: the sweep does not read it
        ahead = [(pop_dir.parent / m["folder"]).resolve() for m in pointer["members"]]
        ahead = [f for f, m in zip(ahead, pointer["members"])
                 if f in start_of and start_of[f] < pointer["step"] and (f / "checkpoint" / m["generation"]).is_dir()]
        if ahead:  # a fact, no advice: which grouping would rebuild that pointer depends on what else finished
            lines.append(f"  population checkpoint {pop_dir.name} (step {pointer['step']:,}, "
                         f"{len(pointer['members'])} seeds) is ahead of {len(ahead)} run(s) that this sweep starts "
                         f"from their own checkpoints, e.g. {ahead[0].name} from step {start_of[ahead[0]]:,}: those "
                         "steps are computed again")
    return dict(sorted(starts.items(), reverse=True)), failing, lines


def _alone_start(spec: RunSpec, out: Path, own_step: int) -> tuple[int, str]:
    """Where run ``spec`` in ``out`` starts when run alone, its own checkpoint at ``own_step``: ``(step, "")``, or
    ``(own_step, line)`` when the resume would refuse it (:func:`lcpo.online.population.pointer_for_folder` and
    :func:`lcpo.online.population.pointer_verdict`, the rules :func:`lcpo.online.run.execute` applies)."""
    from lcpo.online.population import POINTER, pointer_for_folder, pointer_verdict
    from lcpo.online.run import RunConfig

    cfg = RunConfig.from_dict(spec.config)
    member, step, pop_dir = pointer_for_folder(cfg, out)
    verdict = pointer_verdict(cfg, out, own_step, member, step)
    if verdict == "population":
        return step, ""
    if verdict == "lost":
        return own_step, (f"  population checkpoint {pop_dir / POINTER} (step {step:,}) names a generation gone "
                          f"from {out.name}, which holds a run's files but no checkpoint: the sweep would fail "
                          "that run")
    if verdict == "too_few_steps":
        return own_step, (f"  population checkpoint {pop_dir / POINTER} is at step {step:,}, past the {out.name} "
                          "run's steps: the sweep would fail that run")
    return own_step, ""


def _changed_settings(spec: RunSpec, runs_dir: Path) -> list[tuple[str, Any, Any]]:
    """``[(key, sweep's value, run's value), ...]`` where the configuration a finished run's ``summary.json``
    records differs from the sweep's spec (e.g. ``steps`` after ``lcpo resume RUNS_DIR --steps N``); keys on one
    side only are not compared (defaults an executor leaves out)."""
    try:
        ran = json.loads((run_dir(runs_dir, spec.run_id) / "summary.json").read_text()).get("config")
    except (OSError, ValueError, AttributeError):
        return []  # unreadable: the store reports it
    if not isinstance(ran, dict):
        return []
    want = json.loads(json.dumps(dict(spec.config), default=str))
    return [(k, want[k], ran[k]) for k in sorted(set(want) & set(ran)) if want[k] != ran[k]]


def _changed_warning(changed: list[tuple[str, list]], runs_dir: Path) -> str:
    """One line about finished runs whose settings no longer match the sweep config."""
    kinds = sorted({", ".join(f"{k} {json.dumps(a)} -> {json.dumps(b)}" for k, a, b in diffs) for _, diffs in changed})
    shown = "; ".join(kinds[:3]) + (f"; and {len(kinds) - 3} more" if len(kinds) > 3 else "")
    return (f"lcpo sweep: warning: {len(changed)} finished run(s) in {runs_dir} ran with other settings than this "
            f"config ({shown}; e.g. {changed[0][0]}), changed after the sweep ran them (`lcpo resume --steps`); "
            "they are skipped and kept as they ran, and results.parquet records the settings each one ran with. "
            "To run this config as it is, use another --out")


class _Progress:
    """tqdm bar over all specs (unit: run) with done/running/failed counts; tqdm's rate gives the ETA.

    ``running`` counts runs, not tasks: a population task of 5 seeds is 5 running runs. Where the executor says
    when a task starts (:meth:`started`, the local workers) the count is exact; else (Dask) it is estimated as
    one run per worker slot."""

    def __init__(self, total: int, skipped: int, workers: int, enabled: bool):
        from tqdm.auto import tqdm

        self.workers = max(1, workers)
        self.done = skipped
        self.failed = 0
        self.pending = total - skipped
        self.running: int | None = None  # None: not reported by the executor, estimated
        self.bar = tqdm(total=total, initial=skipped, unit="run", desc="sweep", disable=not enabled,
                        dynamic_ncols=True, smoothing=0.1)
        self._post()

    def counts(self) -> tuple[int, int, int]:
        """``(done, running, failed)`` runs, as the bar shows them."""
        running = self.running if self.running is not None else min(self.workers, self.pending)
        return self.done, running, self.failed

    def _post(self) -> None:
        done, running, failed = self.counts()
        self.bar.set_postfix_str(f"done={done} running={running} failed={failed}", refresh=True)

    def started(self, runs: int) -> None:
        """A task of ``runs`` runs (int; a population's seeds) started on a worker."""
        self.running = (self.running or 0) + runs
        self._post()

    def update(self, ok: bool) -> None:
        self.pending -= 1
        if self.running:
            self.running -= 1
        if ok:
            self.done += 1
        else:
            self.failed += 1
        self.bar.update(1)
        self._post()

    def close(self) -> None:
        self.bar.close()


def _default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


class _Stop:
    """The sweep process's SIGINT/SIGTERM handling: the first signal asks the workers to stop (no new run
    starts; running runs checkpoint and return), the second kills them at once."""

    def __init__(self):
        self.count = 0
        self.signum: int | None = None
        self.announced = 0
        self.on_request: list[Callable[[], None]] = []  # called (from the handler) on the first signal
        self.on_force: list[Callable[[], None]] = []  # called on the second
        self._old: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.count >= 1

    @property
    def forced(self) -> bool:
        return self.count >= 2

    def handler(self, signum, frame) -> None:
        self.count += 1
        if self.signum is None:
            self.signum = signum
        for fn in (self.on_request if self.count == 1 else self.on_force if self.count == 2 else ()):
            fn()

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach the main thread only; a sweep run from a thread stops with its caller
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self.handler)

    def restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()

    def announce(self, write: Callable[[str], None], who: str = "lcpo sweep") -> None:
        """One line on stderr per signal, written from the main loop (not from the handler), headed ``who``."""
        if self.count > self.announced:
            self.announced = self.count
            name = signal.Signals(self.signum).name
            if self.count == 1:
                write(f"{who}: {name}: stopping; no new run starts, the running runs stop where they stand (with a "
                      "checkpoint, once they have taken a step) (a second Ctrl-C or SIGTERM stops at once)")
            elif self.count == 2:
                write(f"{who}: second signal: stopping the workers now")


def _local_worker(conn, stop_flag, parent_pid: int) -> None:
    """A local worker process: runs the tasks the sweep process sends over ``conn`` one at a time.

    SIGINT is ignored (the sweep process decides what a Ctrl-C to the group means); SIGTERM, the sweep
    process's shared ``stop_flag`` or the sweep process's death stop the current run at its next poll
    (it checkpoints first) and end the worker, which then leaves with :func:`_exit_now`.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    term = [False]

    def on_term(signum, frame):
        term[0] = True

    signal.signal(signal.SIGTERM, on_term)

    def should_stop() -> bool:
        return term[0] or stop_flag.value != 0 or os.getppid() != parent_pid

    @_quiet_fresh
    def note(msg: str) -> None:  # a run's one-line note, written by the sweep process above its progress bar
        try:
            conn.send(("note", msg))
        except OSError:
            pass  # the sweep process is gone: the run stops at its next poll

    try:
        while not should_stop():
            if not conn.poll(0.2):
                continue
            task = conn.recv()
            if task is None:
                break
            configs, out_dirs, executor, device = task
            try:
                conn.send(("ok", run_group(configs, out_dirs, executor, should_stop=should_stop, device=device,
                                           on_message=note)))
            except Exception as exc:  # noqa: BLE001 - sent to the sweep process, which records it
                msg = (str(exc) if isinstance(exc, RunFailed)
                       else f"{Path(out_dirs[0]).name}: {type(exc).__name__}: {exc}")
                conn.send(("error", msg))
            # free the finished task's objects before the next one: a run may leave reference cycles (the frames
            # kept by the first DDQN or SAC population's imports and just-in-time compilation reach back to its
            # locals; docs/benchmarks.md), which keep their episode rows (hundreds of MB per seed on a 20M-step
            # run) until a full collection, and a worker may not reach one for hours
            gc.collect()
    except (EOFError, OSError):
        pass  # the sweep process is gone
    finally:
        conn.close()
    _exit_now()  # every result is on disk: skip the interpreter's teardown (seconds once torch is imported)


def _stop_resource_tracker() -> None:
    """Stop (and reap) multiprocessing's resource tracker once every worker has exited, so that this process
    leaves no child behind; it restarts by itself if multiprocessing needs it again."""
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker, "_resource_tracker", None)
    stop = getattr(tracker, "_stop", None)
    if callable(stop) and not multiprocessing.active_children():
        try:
            stop()
        except Exception:  # noqa: BLE001 - private API: at worst the tracker exits with this process
            pass


@dataclass
class _Worker:
    proc: Any
    conn: Any
    spec: list[RunSpec] | None = None  # the group of runs (a population task) it is running


def _run_local(todo: Sequence[list[RunSpec]], runs_dir: Path, executor: str, workers: int,
               on_result: Callable[[RunSpec, Any, BaseException | None], None], stop: _Stop,
               write: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr), device: str = "cpu",
               on_start: Callable[[list[RunSpec]], None] = lambda group: None) -> None:
    """Run ``todo`` (groups of runs, :func:`group_seeds`) on ``workers`` spawned worker processes
    (:func:`_local_worker`), one group each at a time, in order; a worker that dies fails its runs and is
    replaced. ``on_start(group)`` is called when a group is handed to a worker. Stops as :class:`_Stop` says;
    returns once every worker has exited and been reaped."""
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("spawn")
    flag = ctx.RawValue("b", 0)  # shared memory, no lock: the workers only read it
    pending = deque(todo)
    pool: list[_Worker] = []

    def request() -> None:
        flag.value = 1

    def force() -> None:
        flag.value = 1
        for w in pool:
            if w.proc.is_alive():
                w.proc.kill()

    stop.on_request.append(request)
    stop.on_force.append(force)

    def start_worker() -> None:
        parent_conn, child_conn = ctx.Pipe()
        proc = ctx.Process(target=_local_worker, args=(child_conn, flag, os.getpid()), name="lcpo-sweep-worker")
        # the child inherits an ignored SIGINT from its start (Python keeps it ignored), so a Ctrl-C to the
        # group while it starts up prints no traceback. Meanwhile this process blocks the two signals: Linux
        # keeps a blocked signal pending even while it is ignored, and delivers it to the handler restored below
        old = None
        if stop._old:
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            proc.start()
        finally:
            if old is not None:
                signal.signal(signal.SIGINT, old)
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        child_conn.close()
        pool.append(_Worker(proc, parent_conn))

    def finish(w: _Worker, summaries: Any, exc: BaseException | None) -> None:
        group, w.spec = w.spec, None
        for i, spec in enumerate(group):
            on_result(spec, summaries[i] if isinstance(summaries, list) else summaries, exc)

    try:
        for _ in range(min(workers, len(pending))):
            start_worker()
        while True:
            if not stop.requested:
                for w in pool:
                    if w.spec is None and pending and w.proc.is_alive():
                        group = pending.popleft()
                        try:
                            w.conn.send(([dict(sp.config) for sp in group],
                                         [str(run_dir(runs_dir, sp.run_id)) for sp in group], executor, device))
                            w.spec = group
                            on_start(group)
                        except OSError:
                            pending.appendleft(group)  # the worker died meanwhile: replaced below
            busy = [w for w in pool if w.spec is not None]
            stop.announce(write)
            if not busy and (stop.requested or not pending):
                break
            wait([w.conn for w in busy] + [w.proc.sentinel for w in pool], timeout=0.5)
            for w in list(pool):
                while w.spec is not None and w.conn.poll():
                    try:
                        kind, payload = w.conn.recv()
                    except (EOFError, OSError):
                        break
                    if kind == "note":  # a run's one-line note (resumed from step N, started afresh)
                        write(f"lcpo sweep: {payload}")
                    elif kind == "ok":
                        finish(w, payload, None)
                    elif kind == "error":
                        finish(w, None, RunFailed(payload))
                if not w.proc.is_alive():
                    w.proc.join()
                    pool.remove(w)
                    w.conn.close()
                    if w.spec is not None:
                        if stop.requested:
                            finish(w, {"interrupted_at": None}, None)
                        else:
                            finish(w, None, RunFailed(f"{w.spec[0].run_id}: its worker process died (exit code "
                                                      f"{w.proc.exitcode}); run the sweep again to resume it"))
                    if pending and not stop.requested and len(pool) < workers:
                        start_worker()
    except BaseException:
        flag.value = 1  # an error in the sweep process itself: the workers checkpoint and stop
        raise
    finally:
        for w in pool:
            try:
                if w.spec is None and w.proc.is_alive():
                    w.conn.send(None)
            except OSError:
                pass
        deadline = time.monotonic() + (2.0 if stop.forced else 60.0)
        for w in pool:
            w.proc.join(max(0.0, deadline - time.monotonic()))
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join()
            w.conn.close()
        stop.on_request.remove(request)
        stop.on_force.remove(force)
        _stop_resource_tracker()


def _run_dask(todo: Sequence[list[RunSpec]], runs_dir: Path, executor: str, workers: int, address: str | None,
              on_result: Callable[[RunSpec, Any, BaseException | None], None], stop: _Stop,
              on_slots: Callable[[int], None] = lambda n: None,
              write: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr), device: str = "cpu") -> None:
    """Run ``todo`` as Dask tasks (``device``: the populations' torch device, see :func:`run_group`). A stop
    request sets a ``dask.distributed.Event`` that every task polls
    (:func:`run_one`): queued tasks return without starting, running ones checkpoint and return. The
    ``LocalCluster`` this starts (no ``address``) has workers that exit at once when it closes
    (:func:`_fast_exit_plugin`), so its nannies do not have to kill them."""
    import uuid

    from dask.distributed import Client, Event, LocalCluster, wait

    cluster = None
    if address is None:
        cluster = LocalCluster(host="127.0.0.1", n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
        client.register_plugin(_fast_exit_plugin())
    else:
        client = Client(address)
    event_name = f"lcpo-sweep-stop-{uuid.uuid4().hex}"
    client.subscribe_topic(_notes_topic(event_name), lambda event: write(f"lcpo sweep: {event[1]}"))
    try:
        event = Event(event_name, client=client)
        on_slots(sum(client.nthreads().values()) or workers)  # for the "running" count of the progress bar
        futures = {}
        for rank, group in enumerate(todo):
            # priority: Dask starts higher first, so the sweep's / --only's order holds
            fut = client.submit(_dask_group, [dict(sp.config) for sp in group],
                                [str(run_dir(runs_dir, sp.run_id)) for sp in group], executor,
                                stop_event=event_name, device=device, retries=2, pure=False,
                                priority=len(todo) - rank)
            futures[fut] = group
        remaining = set(futures)
        event_set = False
        while remaining:
            stop.announce(write)
            if stop.forced:
                break
            if stop.requested and not event_set:
                event.set()
                event_set = True
            try:
                done, _ = wait(list(remaining), timeout=0.5, return_when="FIRST_COMPLETED")
            except TimeoutError:
                continue
            for fut in done:
                remaining.discard(fut)
                group = futures[fut]
                summaries = None
                try:
                    summaries = fut.result()
                    exc = None
                except Exception as err:  # noqa: BLE001 - KilledWorker, RunFailed: record, continue
                    exc = err
                if isinstance(summaries, dict) and _FAILED in summaries:  # not retried: it would fail again
                    exc, summaries = RunFailed(summaries[_FAILED]), None
                for i, spec in enumerate(group):
                    on_result(spec, summaries[i] if summaries is not None else None, exc)
        if stop.forced:
            client.cancel(list(remaining))
            for fut in remaining:
                for spec in futures[fut]:
                    on_result(spec, {"interrupted_at": None}, None)
    finally:
        _close_dask(client, cluster)


def _fast_exit_plugin():
    """A Dask worker plugin for the LocalCluster a sweep starts: when the worker process ends, it flushes its
    output and logs and leaves with ``os._exit(0)``, skipping the interpreter's teardown (several seconds after
    torch was imported, on a busy machine), which otherwise outlasts the nanny's 4-second wait and ends every
    sweep with "Worker process still alive after 4.0 seconds, killing". Every result is on disk (atomically
    written, fsynced) before a task returns, so nothing is lost."""
    from dask.distributed import WorkerPlugin

    class FastExit(WorkerPlugin):
        name = "lcpo-fast-exit"

        def setup(self, worker) -> None:
            import atexit

            atexit.register(_exit_now)

    return FastExit()


def _exit_now() -> None:
    """Flush stdout, stderr and the logs, then end the process with ``os._exit(0)`` (no interpreter teardown)."""
    import logging

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream: nothing to flush
            pass
    logging.shutdown()
    os._exit(0)


def _close_dask(client, cluster) -> None:
    """Close the Dask client, then the LocalCluster this sweep started (its workers exit at once:
    :func:`_fast_exit_plugin`)."""
    try:
        client.close()
    finally:
        if cluster is not None:
            cluster.close()
            _stop_resource_tracker()


def _lock(runs_dir: Path):
    fh = open(runs_dir / ".sweep.lock", "w")  # noqa: SIM115 - held for the sweep's lifetime
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        from lcpo.persistence.runlock import RunFolderBusy  # a RuntimeError that `lcpo` prints as a one-line error

        raise RunFolderBusy(f"another sweep is running in {runs_dir} (lock {runs_dir / '.sweep.lock'} held); "
                            "wait for it to finish, or use another --out") from None
    return fh


def run_sweep(specs: Iterable[RunSpec], runs_dir: str | Path, *, backend: str = "local",
              address: str | None = None, workers: int | None = None, executor: str = DEFAULT_EXECUTOR,
              name: str = "sweep", progress: bool = True, write_store: bool = True,
              only: Sequence[str] | None = None, population: int = 16, device: str = "cpu") -> list[RunOutcome]:
    """Run every unfinished spec (or those ``only`` selects) into ``runs_dir/runs/<run_id>`` and (re)build the
    results store.

    Args:
        specs: the expanded sweep (:func:`lcpo.experiments.config.expand`).
        runs_dir: sweep folder; created if missing.
        backend: ``"local"`` or ``"dask"``.
        address: Dask scheduler address (``tcp://host:8786``); ``None`` starts a ``LocalCluster`` on
            127.0.0.1. Only with ``backend="dask"``.
        workers: worker processes for the local pool or the LocalCluster; default one per available core.
        executor: module with ``RunConfig`` and ``execute`` (default ``lcpo.online.run``).
        name: sweep name, stored in the manifest.
        progress: show a progress bar (stderr).
        write_store: write ``results.parquet`` / ``episodes.parquet`` at the end.
        only: glob patterns on run ids (:func:`select_runs`): start only the unfinished runs they match, in the
            patterns' order of priority. The manifest (``sweep.json``) and the store still cover every spec, so
            a selective sweep leaves the folder's record of the whole sweep intact.
        population: the largest population task: runs that differ only in seed train together in one process
            (:func:`group_seeds`, :func:`lcpo.online.population.execute_population`; their folders equal the runs'
            alone, docs/population.md); 1 runs every seed alone, as does any ``executor`` but the default.
        device: the populations' torch device (``"cpu"``, ``"cuda"``, ``"cuda:N"``; docs/population.md,
            "Device"), checked before any run (:func:`lcpo.online.device.resolve_device`); not part of a run's
            configuration, so a sweep started on a GPU resumes on the CPU.

    Returns:
        One :class:`RunOutcome` per spec, in spec order.

    Raises:
        ValueError: for an unknown backend, a non-positive ``workers``, ``address`` without the dask backend,
            duplicate run ids, an ``only`` pattern that matches no run id, or a ``runs_dir`` that holds
            ``lcpo run`` output folders and no manifest (:func:`lcpo.experiments.store.check_folder_for`), or
            a finished run whose ``summary.json`` is malformed (named; checked before anything runs).
        lcpo.persistence.runlock.RunFolderBusy: (a RuntimeError) if another sweep holds the folder's lock.
        SweepInterrupted: (a KeyboardInterrupt) the sweep was stopped by SIGINT or SIGTERM (see the module
            docstring); every worker has exited, the store is written (unless a second signal came), and its
            ``outcomes`` say which runs were stopped and which never started.
    """
    specs = list(specs)
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    if address is not None and backend != "dask":
        raise ValueError(f"address={address!r} needs backend='dask'")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if isinstance(population, bool) or not isinstance(population, int) or population < 1:
        raise ValueError(f"population must be an integer >= 1, got {population!r}")
    if device != "cpu":
        from lcpo.online.device import resolve_device

        from lcpo.agents.population import BATCH_NATIVE

        device = str(resolve_device(device, "device"))
        others = sorted({str(s.config.get("agent")) for s in specs} - set(BATCH_NATIVE))
        if others:
            raise ValueError(f"device {device}: agents {others} are not batch-native (their networks stay on the "
                             f"CPU); run them on the CPU (device='cpu', the CLI's default without --device); "
                             f"batch-native: {sorted(BATCH_NATIVE)}")
    ids = [s.run_id for s in specs]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate run ids in specs")
    order = specs if only is None else select_runs(specs, only)
    from lcpo.experiments.store import check_folder_for
    from lcpo.persistence.outputs import check_output_dir

    check_folder_for(runs_dir, "sweep")
    runs_dir = check_output_dir(runs_dir, "sweep folder", create=True)
    for spec in specs:  # every finished run's summary readable before anything runs (ValueError naming it)
        _is_finished(runs_dir, spec.run_id)
    lock = _lock(runs_dir)
    try:
        write_json_atomic(runs_dir / "sweep.json", {
            "name": name, "executor": executor,
            "specs": [{"run_id": s.run_id, "config": dict(s.config)} for s in specs],
        })
        outcomes: dict[str, RunOutcome] = {}
        changed = []
        for spec in specs:
            if _is_finished(runs_dir, spec.run_id):
                outcomes[spec.run_id] = RunOutcome(spec.run_id, "skipped")
                diffs = _changed_settings(spec, runs_dir)
                if diffs:
                    changed.append((spec.run_id, diffs))
        if changed:
            print(_changed_warning(changed, runs_dir), file=sys.stderr)
        todo = [spec for spec in order if spec.run_id not in outcomes]
        selected = {spec.run_id for spec in todo}
        for spec in specs:
            if spec.run_id not in outcomes and spec.run_id not in selected:
                outcomes[spec.run_id] = RunOutcome(spec.run_id, "deselected")
        n_workers = workers or _default_workers()
        # the bar covers the selection: its finished runs (skipped) and the ones to run
        shown = len(todo) + sum(outcomes.get(spec.run_id, RunOutcome("", "")).status == "skipped" for spec in order)
        bar = _Progress(shown, shown - len(todo), n_workers, progress)

        last_failure: list[str | None] = [None]

        def on_result(spec: RunSpec, summary: Any, exc: BaseException | None) -> None:
            if exc is None and summary is not None and ("interrupted_at" in summary or "not_started" in summary):
                status = "pending" if "not_started" in summary else "interrupted"
                outcomes[spec.run_id] = RunOutcome(spec.run_id, status)
                if bar.running:
                    bar.running -= 1
                return
            if exc is None:
                wall = float((summary or {}).get("wall_time_s") or 0.0)
                outcomes[spec.run_id] = RunOutcome(spec.run_id, "done", wall)
            else:
                msg = str(exc).split("\n", 1)[0] or type(exc).__name__
                outcomes[spec.run_id] = RunOutcome(spec.run_id, "failed", 0.0, msg)
                err_file = run_dir(runs_dir, spec.run_id) / "error.json"
                if err_file.parent.is_dir() and not err_file.exists():  # the worker died before recording it
                    write_json_atomic(err_file, {"error": f"{type(exc).__name__}: {exc}", "traceback": "",
                                                 "config": dict(spec.config)})
                if msg != last_failure[0]:  # a population task's runs fail with one message: say it once
                    bar.bar.write(f"run failed: {msg}", file=sys.stderr)
                last_failure[0] = msg
            bar.update(exc is None)

        stop = _Stop()

        def write(msg: str) -> None:
            bar.bar.write(msg, file=sys.stderr)

        stop.install()
        try:
            if todo:
                # populations need lcpo's own executor (execute_population); another executor runs seeds alone
                tasks = group_seeds(todo, population if executor == DEFAULT_EXECUTOR else 1)
                if backend == "local":
                    _run_local(tasks, runs_dir, executor, n_workers, on_result, stop, write, device,
                               on_start=lambda group: bar.started(len(group)))
                else:
                    def on_slots(n: int) -> None:
                        bar.workers = max(1, n)

                    _run_dask(tasks, runs_dir, executor, n_workers, address, on_result, stop, on_slots, write,
                              device)
        finally:
            stop.restore()
            bar.close()
        for spec in todo:
            outcomes.setdefault(spec.run_id, RunOutcome(spec.run_id, "pending"))
        result = [outcomes[s.run_id] for s in specs]
        if write_store and not stop.forced:
            from lcpo.experiments.store import write_store as _write_store
            _write_store(runs_dir, [s.run_id for s in specs])
        if stop.requested:
            raise SweepInterrupted(stop.signum, stop.forced, result)
        return result
    finally:
        lock.close()


