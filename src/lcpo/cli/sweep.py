"""``lcpo sweep CONFIG --out RUNS_DIR``: run a sweep described by a TOML file (see docs/experiments.md)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence

from lcpo.cli.argtypes import positive_int

__all__ = ["add_parser", "build_parser", "main", "run"]

#: Seeds per population task when --population is not given.
DEFAULT_POPULATION = 16

_DESCRIPTION = """Run every run of a sweep config (env x trace x agent x seed x hyperparameter grid).
Finished runs (summary.json present) are skipped; interrupted ones resume from their checkpoints; a failed run
is recorded in its folder's error.json and does not stop the sweep. Writes RUNS_DIR/results.parquet and
RUNS_DIR/episodes.parquet at the end; then `lcpo report RUNS_DIR --out DIR`. --only runs a part of the sweep,
in the order of its patterns (e.g. the long runs first), without changing the config."""


def _configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("config", help="sweep config file (.toml), e.g. configs/smoke.toml")
    parser.add_argument("--out", default=None,
                        help="sweep folder (default: the config's `out` key, else runs/<config name>)")
    parser.add_argument("--backend", choices=("local", "dask"), default="local",
                        help="local: a process pool on this machine (default); dask: Dask distributed")
    parser.add_argument("--address", default=None,
                        help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (with --backend dask); "
                             "default: start a LocalCluster on 127.0.0.1")
    parser.add_argument("--workers", type=positive_int, default=None,
                        help="worker processes for the local pool or the LocalCluster (default: one per core)")
    parser.add_argument("--executor", default="lcpo.online.run",
                        help="module providing RunConfig and execute(config, out_dir, resume, progress) "
                             "(default: lcpo.online.run)")
    parser.add_argument("--only", action="append", metavar="GLOB", default=None,
                        help="start only the unfinished runs whose id matches this shell glob (repeatable; runs "
                             "start in the order of the patterns, so list the ones to finish first first), "
                             "e.g. --only '*wind-1_ppo_s0-*' --only '*wind-1_*_s1-*' (end a seed with '-': "
                             "s1* also matches s10-s19); ids: --dry-run")
    parser.add_argument("--dry-run", action="store_true",
                        help="validate and list the runs (with --only, the selected ones in their start order, "
                             "finished ones included: a sweep skips them), run nothing")
    parser.add_argument("--population", type=positive_int, default=DEFAULT_POPULATION, metavar="N",
                        help="runs that differ only in seed train together as one population of at most N seeds "
                             "(one process; folders equal the runs alone, docs/population.md)")
    parser.add_argument("--no-batch", action="store_true", help="every seed in its own task (--population 1)")
    parser.add_argument("--device", default="cpu", metavar="DEVICE",
                        help="torch device of every population: cpu (default), cuda, cuda:N or another torch "
                             "device string (batch-native agents; docs/population.md, Device); not part of a "
                             "run's configuration: a sweep started on a GPU resumes on the CPU")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)
    return parser


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``sweep`` command to an ``argparse`` subparsers object; returns its parser."""
    return _configure(subparsers.add_parser("sweep", help="run a sweep of runs from a TOML config",
                                            description=_DESCRIPTION))


def build_parser() -> argparse.ArgumentParser:
    """A standalone parser (``python -m lcpo.cli.sweep``)."""
    return _configure(argparse.ArgumentParser(prog="lcpo sweep", description=_DESCRIPTION))


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``sweep`` command; returns the exit status (1 if any run failed, 2 on a bad config or
    ``--out``, 128 + the signal number when SIGINT or SIGTERM stopped it, after one line saying how to resume)."""
    from pathlib import Path

    from lcpo.experiments.config import ConfigError, expand, load_config
    from lcpo.experiments.runner import SweepInterrupted, run_sweep, select_runs

    try:
        cfg = load_config(args.config, executor=args.executor)  # its errors name the file
        notices: list[str] = []
        try:
            specs = expand(cfg, executor=args.executor, notices=notices)
        except ConfigError as exc:  # a run the grid resolves to is refused: named with the file too
            raise ConfigError(f"{args.config}: {exc}") from None
    except ConfigError as exc:
        print(f"lcpo sweep: error: {exc}", file=sys.stderr)
        return 2
    for notice in dict.fromkeys(notices):
        print(notice, file=sys.stderr)
    out = Path(args.out or cfg.out or Path("runs") / cfg.name)
    from lcpo.persistence.outputs import OutputError, check_output_dir

    from lcpo.experiments.store import check_folder_for

    try:
        check_output_dir(out)  # before any run: one line naming the path, nothing written
        check_folder_for(out, "sweep")  # not into a folder of `lcpo run` runs, which the report would leave out
    except (OutputError, ValueError) as exc:
        print(f"lcpo sweep: error: {exc}", file=sys.stderr)
        return 2
    if args.only is not None:
        try:
            chosen = select_runs(specs, args.only)
        except ValueError as exc:
            print(f"lcpo sweep: error: {exc}", file=sys.stderr)
            return 2
    if args.dry_run:
        listed = specs if args.only is None else chosen
        try:  # a malformed summary of a finished run: one line, before the listing
            tasks = _tasks_line(listed, out, 1 if args.no_batch else args.population)
        except ValueError as exc:
            print(f"lcpo sweep: error: {exc}", file=sys.stderr)
            return 2
        for spec in listed:
            print(spec.run_id)
        sel = "" if args.only is None else f"{len(chosen)} of "
        print(f"{sel}{len(specs)} runs -> {out}", file=sys.stderr)
        print(tasks, file=sys.stderr)
        for line in _resume_lines(listed, out, 1 if args.no_batch else args.population, args.device):
            print(line, file=sys.stderr)
        return 0
    if args.address is not None and args.backend != "dask":
        print("lcpo sweep: error: --address needs --backend dask", file=sys.stderr)
        return 2
    if args.workers is not None and args.workers < 1:
        print(f"lcpo sweep: error: --workers must be >= 1, got {args.workers}", file=sys.stderr)
        return 2
    from lcpo.online.device import resolve_device

    try:
        device = str(resolve_device(args.device, "--device"))  # before any run: one line naming the value
    except ValueError as exc:
        print(f"lcpo sweep: error: {exc}", file=sys.stderr)
        return 2
    if device != "cpu" and args.no_batch:
        print(f"lcpo sweep: error: --device {device} needs populations: drop --no-batch", file=sys.stderr)
        return 2
    try:
        outcomes = run_sweep(specs, out, backend=args.backend, address=args.address, workers=args.workers,
                             executor=args.executor, name=cfg.name, progress=not args.no_progress, only=args.only,
                             population=1 if args.no_batch else args.population, device=device)
    except SweepInterrupted as stopped:
        print(_stopped_line(stopped, args, out), file=sys.stderr)
        return 128 + stopped.signum
    except ValueError as exc:  # refused before any run started (a malformed summary of a finished run, ...)
        print(f"lcpo sweep: error: {exc}", file=sys.stderr)
        return 2
    counts = Counter(o.status for o in outcomes)
    print(f"{len(outcomes)} runs in {out}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    failures: dict[str, list[str]] = {}  # one line per distinct error (a population task's runs share theirs)
    for o in outcomes:
        if o.status == "failed":
            failures.setdefault(o.error, []).append(o.run_id)
    for error, ids in failures.items():
        kept = [i for i in ids if (out / "runs" / i / "error.json").is_file()]  # none for a task refused unwritten
        named = ",".join(kept[:3]) + (",..." if len(kept) > 3 else "")
        where = "" if not kept else (f"; see {out / 'runs' / kept[0] / 'error.json'}" if len(kept) == 1 else
                                     f"; see error.json in {out / 'runs'}/{{{named}}}")
        print(f"  failed: {error}  ({len(ids)} run{'s' if len(ids) > 1 else ''}{where})", file=sys.stderr)
    print(f"results: {out / 'results.parquet'}; report: lcpo report {out} --out {out / 'report'}")
    return 1 if counts.get("failed") else 0


def _tasks_line(listed, out, population: int) -> str:
    """The dry run's line on how the runs would start: the unfinished ones grouped into population tasks
    (runs that differ only in seed, at most ``population`` each; :func:`lcpo.experiments.runner.group_seeds`)."""
    from lcpo.experiments.runner import _is_finished, group_seeds

    todo = [s for s in listed if not _is_finished(out, s.run_id)]
    groups = group_seeds(todo, population)
    sizes = Counter(len(g) for g in groups)
    shape = ", ".join(f"{n} of {size} seed{'s' if size != 1 else ''}" for size, n in sorted(sizes.items(),
                                                                                           reverse=True))
    return (f"to start: {len(todo)} run(s) ({len(listed) - len(todo)} finished, skipped) as {len(groups)} "
            f"task(s){': ' + shape if shape else ''} (runs that differ only in seed train as one population of "
            f"at most {population}: --population N, --no-batch)")


def _resume_lines(listed, out, population: int, device: str = "cpu") -> list[str]:
    """The dry run's lines on where the unfinished runs would start and what the sweep would refuse
    (:func:`lcpo.experiments.runner.resume_preview`, read from the checkpoint pointers; nothing changes)."""
    from lcpo.experiments.runner import _is_finished, resume_preview

    if not any(not _is_finished(out, s.run_id) and (out / "runs" / s.run_id).exists() for s in listed):
        todo = sum(not _is_finished(out, s.run_id) for s in listed)
        return [f"resume: {todo} from step 0 (no run folder yet)"] if todo else []
    starts, failing, lines = resume_preview(listed, out, population, device)
    parts = [f"{n} from step {step:,}" for step, n in starts.items()]
    if failing:
        parts.append(f"{failing} refused (below)")
    return [f"resume: {', '.join(parts)} (checkpoints of the run folders and populations)", *lines] if parts else lines


def _stopped_line(stopped, args: argparse.Namespace, out) -> str:
    """The one line a stopped sweep ends with: what stopped, and the command that resumes it."""
    import shlex
    import signal

    from lcpo.experiments.runner import run_dir
    from lcpo.online.population import _holds_generation

    counts = Counter(o.status for o in stopped.outcomes)
    # a run stopped while it was still starting (imports, its trace, its agent) has no checkpoint to show for it;
    # known for lcpo's own executor, whose checkpoints are step- generations (another executor keeps its own)
    early = 0
    if args.executor == "lcpo.online.run" and not stopped.forced:
        early = sum(o.status == "interrupted" and not _holds_generation(run_dir(out, o.run_id))
                    for o in stopped.outcomes)
    held = counts.get("interrupted", 0) - early
    how = ("killed at once (second signal): they resume from their last checkpoints" if stopped.forced
           else "checkpointed where they stood")
    if early:
        how = (f"{how} ({held} with a checkpoint, {early} stopped before their first: they start afresh)" if held
               else "stopped before their first checkpoint: they start afresh")
    again = ["lcpo", "sweep", args.config, "--out", str(out)]
    for flag, value in (("--backend", args.backend if args.backend != "local" else None),
                        ("--address", args.address), ("--workers", args.workers),
                        ("--executor", args.executor if args.executor != "lcpo.online.run" else None)):
        if value is not None:
            again += [flag, str(value)]
    for pattern in args.only or ():
        again += ["--only", pattern]
    # how the seeds were grouped and where they trained: with other groups, a stopped population's seeds would
    # join seeds at other steps and continue one by one (lcpo.experiments.runner.run_group)
    if args.no_batch:
        again.append("--no-batch")
    elif args.population != DEFAULT_POPULATION:
        again += ["--population", str(args.population)]
    if args.device != "cpu":
        again += ["--device", args.device]
    return (f"lcpo sweep: stopped by {signal.Signals(stopped.signum).name}: {counts.get('interrupted', 0)} running "
            f"run(s) {how}, {counts.get('pending', 0)} not started, {counts.get('done', 0) + counts.get('skipped', 0)} "
            f"finished; to resume: {shlex.join(again)}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``python -m lcpo.cli.sweep CONFIG --out RUNS_DIR ...``."""
    args = build_parser().parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
