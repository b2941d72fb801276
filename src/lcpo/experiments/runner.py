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

Backends: ``local`` (``concurrent.futures.ProcessPoolExecutor``, spawn start method, one run per worker
process, default one worker per core) and ``dask`` (``dask.distributed``: an existing scheduler at
``address``, or a ``LocalCluster`` bound to 127.0.0.1; tasks are submitted with ``retries=2`` so Dask
re-runs a task whose worker died or that raised, and the re-run resumes from the run's checkpoint).
"""

from __future__ import annotations

import concurrent.futures as cf
import fcntl
import fnmatch
import importlib
import json
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lcpo.experiments.config import DEFAULT_EXECUTOR, RunSpec

__all__ = ["BACKENDS", "RunFailed", "RunOutcome", "run_dir", "run_one", "run_sweep", "select_runs",
           "write_json_atomic"]

BACKENDS = ("local", "dask")


class RunFailed(RuntimeError):
    """A run raised; the message holds the run id, the error and the remote traceback."""


@dataclass(frozen=True)
class RunOutcome:
    """What happened to one spec in one sweep invocation.

    Attributes:
        run_id: the spec's id.
        status: ``"done"`` (finished now), ``"skipped"`` (finished before), ``"failed"``, or ``"deselected"``
            (unfinished and matched by none of the sweep's ``only`` patterns: not started).
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


def run_one(config: dict[str, Any], out_dir: str, executor: str = DEFAULT_EXECUTOR) -> dict[str, Any]:
    """Run one spec in the current process (the task a worker executes).

    Takes the run folder's lock (waiting while another process or thread holds it: never two copies of one
    run in one folder), imports ``executor`` (a module with ``RunConfig.from_dict`` and ``execute(config,
    out_dir, resume, progress)``), removes a stale ``error.json``, and calls ``execute(..., resume=True)``: a
    finished run returns its summary at once, an interrupted one resumes from its checkpoint.

    Args:
        config: the resolved run config (``RunConfig.to_dict`` form).
        out_dir: the run folder.
        executor: module path, default ``lcpo.online.run``.

    Returns:
        The run's summary dict.

    Raises:
        RunFailed: if the executor raised; ``out_dir/error.json`` then holds the error and traceback.
    """
    from lcpo.persistence.runlock import RunLock

    _limit_threads()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with RunLock(out, wait=True):
        (out / "error.json").unlink(missing_ok=True)
        try:
            module = importlib.import_module(executor)
            run_config = module.RunConfig.from_dict(config)
            summary = module.execute(run_config, out, resume=True, progress=False)
            return dict(summary)
        except Exception as exc:  # noqa: BLE001 - recorded in error.json and re-raised as RunFailed
            tb = traceback.format_exc()
            write_json_atomic(out / "error.json", {
                "error": f"{type(exc).__name__}: {exc}", "traceback": tb, "config": config,
                "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": os.uname().nodename, "pid": os.getpid(),
            })
            raise RunFailed(f"{out.name}: {type(exc).__name__}: {exc}\n{tb}") from None


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
    return (run_dir(runs_dir, run_id) / "summary.json").is_file()


class _Progress:
    """tqdm bar over all specs with done/running/failed counts; tqdm's rate gives the ETA."""

    def __init__(self, total: int, skipped: int, workers: int, enabled: bool):
        from tqdm.auto import tqdm

        self.workers = max(1, workers)
        self.done = skipped
        self.failed = 0
        self.pending = total - skipped
        self.bar = tqdm(total=total, initial=skipped, unit="run", desc="sweep", disable=not enabled,
                        dynamic_ncols=True, smoothing=0.1)
        self._post()

    def _post(self) -> None:
        running = min(self.workers, self.pending)
        self.bar.set_postfix_str(f"done={self.done} running={running} failed={self.failed}", refresh=True)

    def update(self, ok: bool) -> None:
        self.pending -= 1
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


def _run_local(todo: Sequence[RunSpec], runs_dir: Path, executor: str, workers: int,
               on_result: Callable[[RunSpec, Any, BaseException | None], None]) -> None:
    ctx = multiprocessing.get_context("spawn")
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
    try:
        futures = {}
        for spec in todo:
            fut = pool.submit(run_one, dict(spec.config), str(run_dir(runs_dir, spec.run_id)), executor)
            futures[fut] = spec
        for fut in cf.as_completed(futures):
            spec = futures[fut]
            summary = None
            try:
                summary = fut.result()
                exc = None
            except Exception as err:  # noqa: BLE001 - a failed run must not stop the sweep
                exc = err
                if isinstance(err, cf.process.BrokenProcessPool):
                    exc = RunFailed(f"{spec.run_id}: a worker process died ({err}); run the sweep again "
                                    "to resume")
            on_result(spec, summary, exc)
    except BaseException:
        # Ctrl-C or an error in the sweep itself: do not start queued runs; running ones stop with the
        # process group (or finish), and a re-run resumes them from their checkpoints.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _run_dask(todo: Sequence[RunSpec], runs_dir: Path, executor: str, workers: int, address: str | None,
              on_result: Callable[[RunSpec, Any, BaseException | None], None],
              on_slots: Callable[[int], None] = lambda n: None) -> None:
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = None
    if address is None:
        cluster = LocalCluster(host="127.0.0.1", n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    else:
        client = Client(address)
    try:
        on_slots(sum(client.nthreads().values()) or workers)  # for the "running" count of the progress bar
        futures = {}
        for rank, spec in enumerate(todo):
            # priority: Dask starts higher first (the local pool is FIFO), so the sweep's / --only's order holds
            fut = client.submit(run_one, dict(spec.config), str(run_dir(runs_dir, spec.run_id)), executor,
                                retries=2, pure=False, priority=len(todo) - rank)
            futures[fut] = spec
        for fut in as_completed(list(futures)):
            spec = futures[fut]
            summary = None
            try:
                summary = fut.result()
                exc = None
            except Exception as err:  # noqa: BLE001 - KilledWorker, RunFailed: record, continue
                exc = err
            on_result(spec, summary, exc)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


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
              only: Sequence[str] | None = None) -> list[RunOutcome]:
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

    Returns:
        One :class:`RunOutcome` per spec, in spec order.

    Raises:
        ValueError: for an unknown backend, a non-positive ``workers``, ``address`` without the dask backend,
            duplicate run ids, or an ``only`` pattern that matches no run id.
        lcpo.persistence.runlock.RunFolderBusy: (a RuntimeError) if another sweep holds the folder's lock.
    """
    specs = list(specs)
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    if address is not None and backend != "dask":
        raise ValueError(f"address={address!r} needs backend='dask'")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    ids = [s.run_id for s in specs]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate run ids in specs")
    order = specs if only is None else select_runs(specs, only)
    from lcpo.persistence.outputs import check_output_dir

    runs_dir = check_output_dir(runs_dir, "sweep folder", create=True)
    lock = _lock(runs_dir)
    try:
        write_json_atomic(runs_dir / "sweep.json", {
            "name": name, "executor": executor,
            "specs": [{"run_id": s.run_id, "config": dict(s.config)} for s in specs],
        })
        outcomes: dict[str, RunOutcome] = {}
        for spec in specs:
            if _is_finished(runs_dir, spec.run_id):
                outcomes[spec.run_id] = RunOutcome(spec.run_id, "skipped")
        todo = [spec for spec in order if spec.run_id not in outcomes]
        selected = {spec.run_id for spec in todo}
        for spec in specs:
            if spec.run_id not in outcomes and spec.run_id not in selected:
                outcomes[spec.run_id] = RunOutcome(spec.run_id, "deselected")
        n_workers = workers or _default_workers()
        # the bar covers the selection: its finished runs (skipped) and the ones to run
        shown = len(todo) + sum(outcomes.get(spec.run_id, RunOutcome("", "")).status == "skipped" for spec in order)
        bar = _Progress(shown, shown - len(todo), n_workers, progress)

        def on_result(spec: RunSpec, summary: Any, exc: BaseException | None) -> None:
            if exc is None:
                wall = float((summary or {}).get("wall_time_s") or 0.0)
                outcomes[spec.run_id] = RunOutcome(spec.run_id, "done", wall)
            else:
                msg = str(exc).split("\n", 1)[0] or type(exc).__name__
                outcomes[spec.run_id] = RunOutcome(spec.run_id, "failed", 0.0, msg)
                err_file = run_dir(runs_dir, spec.run_id) / "error.json"
                if not err_file.exists():  # the worker died before it could record the error
                    write_json_atomic(err_file, {"error": f"{type(exc).__name__}: {exc}", "traceback": "",
                                                 "config": dict(spec.config)})
                bar.bar.write(f"run failed: {msg}", file=sys.stderr)
            bar.update(exc is None)

        try:
            if todo:
                if backend == "local":
                    _run_local(todo, runs_dir, executor, n_workers, on_result)
                else:
                    def on_slots(n: int) -> None:
                        bar.workers = max(1, n)

                    _run_dask(todo, runs_dir, executor, n_workers, address, on_result, on_slots)
        finally:
            bar.close()
        if write_store:
            from lcpo.experiments.store import write_store as _write_store
            _write_store(runs_dir, [s.run_id for s in specs])
        return [outcomes[s.run_id] for s in specs]
    finally:
        lock.close()


