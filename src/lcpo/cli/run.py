"""``lcpo run``: one or more online runs of an agent on an environment, with a lifelong-return summary."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lcpo.agents import AGENTS
from lcpo.cli.argtypes import nonneg_int, parse_seeds, positive_int, seed_word
from lcpo.cli.catalog import DEFAULT_TRACE

__all__ = ["add_parser", "add_resume_parser", "cmd_resume", "cmd_run", "find_run_folders", "parse_assignments",
           "DEFAULT_STEPS"]

#: Steps of the bundled default run (`lcpo run` with no arguments): about a minute on one core (README).
DEFAULT_STEPS = 1_000_000


def parse_assignments(items: list[str] | None, what: str) -> dict:
    """Parse ``KEY=VALUE`` strings; values are JSON when they parse as JSON, else strings.

    Raises:
        ValueError: for an item without ``=`` (names the item), or a JSON value whose object repeats a key
            (``{"a": 1, "a": 2}``: names the item and the key; JSON alone would keep the last value silently).
    """
    from lcpo.persistence.strict_json import DuplicateKeyError, loads_strict

    out = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"{what} {item!r} is not of the form KEY=VALUE")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = loads_strict(v)
        except DuplicateKeyError as exc:
            raise ValueError(f"{what} {item!r}: the JSON value repeats a key ({exc})") from None
        except json.JSONDecodeError:
            out[k.strip()] = v
        except RecursionError:  # json's parser recurses once per nesting level
            raise ValueError(f"{what} {k.strip()!r}: the JSON value is nested too deeply") from None
    return out


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``run`` command."""
    p = subparsers.add_parser(
        "run", help="run agents online on an environment driven by a context trace",
        description="Run one or more agents online (each interaction experienced once) and report their "
                    "lifelong return (mean episodic return over the run; for a continuing environment, the mean "
                    "return per 200-step window). With no arguments: LCPO on the windy Pendulum over the bundled "
                    f"real wind trace ({DEFAULT_TRACE}), {DEFAULT_STEPS:,} steps.")
    p.add_argument("--env", default="lcpo/WindyPendulum-v0", metavar="ENV",
                   help="environment: an lcpo id (see `lcpo envs list`), a Gymnasium id, or your own as "
                        "MODULE:ID (MODULE registers ID when imported, as in gymnasium.make) or MODULE:CLASS "
                        "(an environment class or factory); MODULE is imported from the current folder or the "
                        "installed packages (docs/bring-your-own.md)")
    p.add_argument("--trace", default=None,
                   help="trace name (see `lcpo traces list`) or .npy/.csv file (default: the bundled "
                        f"{DEFAULT_TRACE} for wind environments, the environment's own default otherwise; your "
                        "own environment receives it as trace=ContextTrace)")
    p.add_argument("--trace-length", type=positive_int, default=None,
                   help="fit the trace to this many steps: a trace name is generated (ndbc-46002: resampled) at "
                        "that length, so the whole trace is compressed into it; a .npy/.csv file is cut to its "
                        "first N steps or repeated. For the windy environments, and your own given --trace; "
                        "refused where it would be ignored (the straggler workloads, your own without --trace)")
    p.add_argument("--agent", nargs="+", default=["lcpo"], metavar="NAME",
                   help=f"agent(s) to run one after the other: {', '.join(sorted(AGENTS))}")
    p.add_argument("--steps", type=positive_int, default=DEFAULT_STEPS, help="environment steps per run")
    p.add_argument("--seed", type=seed_word, nargs="+", default=["0"], metavar="SEED",
                   help="seed(s): integers and ranges, e.g. 0-15, 0 1 2 or 0-3 8; several seeds of an agent are "
                        "trained as one population in one process (docs/population.md), unless --no-batch")
    p.add_argument("--out", type=Path, default=Path("runs"),
                   help="output folder; each run goes to OUT/<agent>-s<seed> (default: runs)")
    p.add_argument("--reset", default=None,
                   help="reset condition: end | every:N | never (default: what the environment declares: 'end' "
                        "for an episodic task, 'never' for a continuing one such as the straggler environment)")
    p.add_argument("--warmup", type=nonneg_int, default=0,
                   help="steps excluded from the lifelong return (must be smaller than --steps)")
    p.add_argument("--set", dest="overrides", action="append", metavar="KEY=VALUE",
                   help="agent hyperparameter override, VALUE in JSON, e.g. gamma=0.9 or hidden=[64,64] "
                        "(repeatable; see `lcpo agents show NAME`). With several agents each gets only the keys "
                        "it knows; a key that no selected agent knows is an error")
    p.add_argument("--env-arg", dest="env_kwargs", action="append", metavar="KEY=VALUE",
                   help="environment argument (repeatable), e.g. continuing=true")
    p.add_argument("--checkpoint-every", type=nonneg_int, default=50_000, help="steps between checkpoints (0: none)")
    p.add_argument("--resume", action="store_true",
                   help="continue each run its folder holds: an interrupted run from its last checkpoint; a "
                        "finished run asked for more --steps is extended from its final checkpoint, and with the "
                        "same configuration its summary is shown; any other change of configuration is refused, "
                        "naming each differing setting (nothing in the folder is changed); a folder without a "
                        "checkpoint starts afresh (with a message). One process per run folder: a second one "
                        "is refused while the first runs")
    p.add_argument("--tensorboard", action="store_true", help="write TensorBoard logs to OUT/<run>/tb")
    _add_population_options(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_run)
    return p


def _add_population_options(p) -> None:
    p.add_argument("--no-batch", action="store_true",
                   help="run the seeds one at a time, one process-step per seed (the runs are the same; a "
                        "population is faster)")
    p.add_argument("--device", default="cpu", metavar="DEVICE",
                   help="torch device of a population: cpu (default), cuda, cuda:N or another torch device "
                        "string; batch-native agents' networks, optimizer state and update tensors live there, "
                        "and the native windy Pendulum env steps there in torch (docs/population.md, Device)")


def _check_device(args) -> None:
    """Check ``--device`` before any work (:func:`lcpo.online.device.resolve_device`: an unknown device, ``meta``,
    ``cuda`` without a GPU are one-line errors naming the value) and refuse a device other than the CPU with
    ``--no-batch``; ``args.device`` becomes the canonical name (``cpu``, ``cuda``, ``cuda:1``)."""
    from lcpo.online.device import resolve_device

    dev = str(resolve_device(args.device, "--device"))
    if dev != "cpu" and args.no_batch:
        raise ValueError(f"--device {dev} needs a population: drop --no-batch (single runs stay on the CPU)")
    args.device = dev


def cmd_run(args) -> int:
    """Execute ``lcpo run``; prints the lifelong return of every run (side by side for several agents)."""
    from lcpo.online.run import RunConfig, resume_plan

    from lcpo.persistence.outputs import check_output_dir

    check_output_dir(args.out)  # before any work: a one-line error naming the path (created by each run)
    from lcpo.experiments.store import check_folder_for

    check_folder_for(args.out, "run")  # not into a sweep folder, whose report would leave these runs out
    overrides = parse_assignments(args.overrides, "--set")
    env_kwargs = parse_assignments(args.env_kwargs, "--env-arg")
    twice = sorted({a for a in args.agent if args.agent.count(a) > 1})
    if twice:  # both runs would write OUT/<agent>-s<seed>
        raise ValueError(f"--agent {twice[0]!r} is given twice ({' '.join(args.agent)}): each agent runs once per seed")
    if len(args.agent) > 1:
        _check_known(args.agent, overrides)
    if args.warmup >= args.steps:
        raise ValueError(f"--warmup {args.warmup} must be smaller than --steps {args.steps}: no episode could end "
                         "after the warm-up, and the lifelong return would be n/a")
    _check_trace_length(args)
    if args.reset is not None:
        from lcpo.online.loop import parse_reset

        try:
            parse_reset(args.reset)
        except ValueError as exc:
            raise ValueError(f"--reset: {exc}") from None
    _check_device(args)
    if args.device != "cpu":  # every agent before the first run starts
        from lcpo.online.population import _check_device_agent

        for agent in args.agent:
            _check_device_agent(agent, args.device, not args.no_batch, "--device")
    args.seed = parse_seeds(args.seed)  # the words as typed: a repeat across them is named in the user's terms
    from lcpo.online.population import names_vector_env

    vector = names_vector_env(args.env)
    if vector and args.no_batch:
        raise ValueError(f"--env {args.env} is a vector env (one sub-environment per seed): it runs as a population; "
                         "drop --no-batch")
    # a user's vector env runs as a population of len(--seed) seeds (the single-run checks do not apply)
    reset = (args.reset or "end") if vector else _preflight(args, env_kwargs)
    planned = []  # every configuration is validated before the first run starts
    for agent in args.agent:
        for seed in args.seed:
            cfg = RunConfig(env=args.env, trace=args.trace, trace_length=args.trace_length, agent=agent,
                            steps=args.steps, seed=seed, overrides=overrides if len(args.agent) == 1 else
                            _applicable(agent, overrides), env_kwargs=env_kwargs, warmup_steps=args.warmup,
                            reset=reset, checkpoint_every=args.checkpoint_every,
                            tensorboard=args.tensorboard)
            out = args.out / f"{agent}-s{seed}"
            plan = resume_plan(cfg, out, resume=args.resume)  # a refused resume stops everything before any run
            planned.append((agent, seed, cfg, out, plan))
    return _execute_all([(cfg, out, plan) for _, _, cfg, out, plan in planned], args.resume, not args.no_progress,
                        batch=not args.no_batch, device=args.device, vector=vector)


def population_groups(planned: list, batch: bool = True) -> list[list]:
    """Group ``(RunConfig, out, ResumePlan)`` entries into populations: runs whose configurations differ only in
    ``seed`` form one group (in first-appearance order); with ``batch=False`` every run is a group of its own."""
    if not batch:
        return [[p] for p in planned]
    groups: dict[str, list] = {}
    for entry in planned:
        key = json.dumps({k: v for k, v in entry[0].to_dict().items() if k != "seed"}, sort_keys=True)
        groups.setdefault(key, []).append(entry)
    return list(groups.values())


def _execute_all(planned: list, resume: bool, progress: bool, batch: bool = True, device: str = "cpu",
                 vector: bool = False) -> int:
    """Execute the ``(RunConfig, out, ResumePlan)`` entries (runs that differ only in seed as one population,
    :func:`lcpo.online.population.execute_population`, unless ``batch`` is False; always for a user's vector
    env, ``vector``), then print the side-by-side summary (stdout).

    Returns:
        0, or ``128 + signal number`` when SIGINT or SIGTERM stopped the runs (the sweep's handling,
        :class:`lcpo.experiments.runner._Stop`; a second signal stops at once, keeping periodic checkpoints): the
        running runs checkpointed where they stood (runs with ``checkpoint_every = 0`` keep nothing), the runs
        not started yet did not start, and one line says how to resume.
    """
    from lcpo.experiments.runner import _Stop

    said: set[str] = set()

    def say(msg: str) -> None:
        """Print a message line once (stderr): the seeds of one folder share their notes (an unreadable
        population checkpoint beside them is named once, not once per seed)."""
        if msg not in said:
            said.add(msg)
            print(msg, file=sys.stderr)

    # the sweep's SIGINT/SIGTERM handling in one process: the first signal is a stop request that the runs see at
    # their next poll (they checkpoint where they stand), the second stops at once (KeyboardInterrupt)
    signals = _Stop()
    signals.on_force.append(_interrupt_now)

    def stop() -> bool:
        signals.announce(say, who="lcpo")  # from the run loop, never from the handler (stderr may be mid-write)
        return signals.requested

    signals.install()
    try:
        results = _execute_groups(planned, resume, progress, batch, device, vector, say, stop)
    finally:
        signals.restore()
    if signals.signum is not None:
        import signal

        from lcpo.persistence.checkpoint import RunCheckpoints

        outs = sorted({str(out.parent) for _, out, _ in planned})
        # the runs that started and did not finish, and of them those with no checkpoint at all (stopped before
        # their first, e.g. during a prescient agent's offline training, or run with --checkpoint-every 0)
        done = {str(out) for _, _, out in results}
        started = [out for _, out, _ in planned if str(out) not in done and (out / "config.json").is_file()
                   and not (out / "summary.json").is_file()]
        bare = sum(RunCheckpoints(out / "checkpoint").latest() is None for out in started)
        if not bare:
            kept = "the runs keep their checkpoints"
        elif bare == len(started) == 1:
            kept = "the run stopped before its first checkpoint (it starts afresh, to the same result)"
        elif bare == len(started):
            kept = "the runs stopped before their first checkpoints (they start afresh, to the same results)"
        else:
            kept = (f"the runs keep their checkpoints ({bare} stopped before their first: they start afresh, to the "
                    "same results)")
        them = "it" if len(planned) == 1 else "them"
        say(f"lcpo: stopped by {signal.Signals(signals.signum).name}; {kept}: `lcpo resume {' '.join(outs)}` "
            f"continues {them}")
        return 128 + int(signals.signum)
    print(_results_table(results))
    return 0


def _interrupt_now() -> None:
    """A second SIGINT/SIGTERM (from the handler): stop at once; each run keeps its last periodic checkpoint."""
    raise KeyboardInterrupt


def _execute_groups(planned, resume, progress, batch, device, vector, say, stop) -> list:
    """The groups of :func:`_execute_all` one after the other, until ``stop()`` says a signal came; the
    ``(RunConfig, summary, out)`` of every finished run."""
    from lcpo.online.run import execute

    results = []
    for group in population_groups(planned, batch):
        if stop():
            break
        fresh = [cfg for cfg, _, plan in group if plan.action == "fresh"]
        if fresh:  # once per population: its seeds share the settings
            _announce_offline_training(fresh[0], len(fresh))
        if len(group) == 1 and device == "cpu" and not vector:
            cfg, out, _ = group[0]
            summaries = [execute(cfg, out, resume=resume, progress=progress, on_message=say, should_stop=stop)]
        else:
            from lcpo.online.population import execute_population

            try:
                summaries = execute_population([g[0] for g in group], [g[1] for g in group], resume=resume,
                                               progress=progress, on_message=say, device=device, should_stop=stop)
            except ValueError as exc:
                # seeds extended or resumed on their own before stand at different steps: as `lcpo sweep`
                # does (lcpo.experiments.runner.run_group), continue them one by one (the runs are the same)
                if not resume or vector or device != "cpu" or "checkpoints are at different steps" not in str(exc):
                    raise
                say(f"{group[0][0].agent}: the checkpoints of these seeds are at different steps; continuing them "
                    f"one by one, not as one population (the runs are the same)")
                summaries = [execute(cfg, out, resume=resume, progress=progress, on_message=say, should_stop=stop)
                             for cfg, out, _ in group]
        for (cfg, out, _), summary in zip(group, summaries):
            if "interrupted_at" in summary:
                say(f"{cfg.agent} seed {cfg.seed}: stopped at step {summary['interrupted_at']:,} -> {out}")
                continue
            results.append((cfg, summary, out))
            print(f"{cfg.agent} seed {cfg.seed}: lifelong return {_fmt(summary['lifelong_return'])} over "
                  f"{_scored(summary, cfg.warmup_steps)}, {summary['steps_per_s']:.0f} steps/s -> {out}",
                  file=sys.stderr)
        # the populations that ran now (a seed that went on alone records the one it left, with "alone_from")
        # (a run trained alone records {"size": 1, ...}: no population figures to print)
        pops = [s["population"] for s in summaries if s.get("population") and "alone_from" not in s["population"]
                and s["population"].get("size", 1) > 1]
        if all(plan.action == "done" for _, _, plan in group):
            pops = []  # nothing ran: the recorded populations' figures are in each run's summary.json
        if pops and len(group) > 1:
            p = pops[-1]
            print(f"{group[0][0].agent}: population of {p['size']} seeds, {p['steps_per_s']:.0f} environment "
                  f"steps/s in all ({'batch-native' if p['batch_native'] else 'generic path'}, {p['device']})",
                  file=sys.stderr)
    return results


def _fraction(value) -> str:
    """A summary fraction for the table: two decimals, ``-`` where the agent has none (A2C's constrained steps)."""
    return "-" if value is None else f"{value:.2f}"


def _results_table(results: list) -> str:
    """The side-by-side table of ``(RunConfig, summary, out)`` results: agent, seed, lifelong return, episodes,
    steps/s, constrained fraction; with ``env`` and ``trace`` columns when the runs differ in them (a sweep
    folder given to ``lcpo resume``), and a ``run`` column (the folder's name) when rows would still look alike
    (runs that differ only in hyperparameters)."""
    def trace_of(cfg, summary):
        return cfg.trace or (summary.get("trace") or {}).get("name") or "default"

    keys = [("env", lambda c, s, o: c.env), ("trace", lambda c, s, o: trace_of(c, s))]
    shown = [(name, fn) for name, fn in keys if len({fn(*r) for r in results}) > 1]
    ids = [tuple(fn(*r) for _, fn in shown) + (r[0].agent, r[0].seed) for r in results]
    if len(set(ids)) < len(ids):
        shown.append(("run", lambda c, s, o: o.name))
    cols = [(name, [str(fn(*r)) for r in results]) for name, fn in shown]
    widths = [max([len(name)] + [len(v) for v in values]) for name, values in cols]
    w = max([10] + [len(c.agent) for c, *_ in results])
    lead = "".join(f"{name:<{wd}} " for (name, _), wd in zip(cols, widths))
    # what the lifelong return averages: episodes, or (continuing runs) fixed windows of steps
    units = {s.get("return_unit", "episode") for _, s, _ in results}
    count = "episodes" if units == {"episode"} else "windows" if "episode" not in units else "episodes/windows"
    cw = max(9, len(count))
    lines = [f"{lead}{'agent':<{w}} {'seed':>4} {'lifelong return':>16} {count:>{cw}} {'steps/s':>9} "
             f"{'constrained':>11}"]
    for i, (cfg, s, _) in enumerate(results):
        lead = "".join(f"{values[i]:<{wd}} " for (_, values), wd in zip(cols, widths))
        lines.append(f"{lead}{cfg.agent:<{w}} {cfg.seed:>4} {_fmt(s['lifelong_return']):>16} {s['episodes']:>{cw}} "
                     f"{s['steps_per_s']:>9.0f} {_fraction(s.get('constrained_fraction')):>11}")
    return "\n".join(lines)


def add_resume_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``resume`` command."""
    p = subparsers.add_parser(
        "resume", help="continue or extend runs from their folders, without repeating their options",
        description="Continue the run(s) a folder holds with the configuration recorded in each run's "
                    "config.json: an interrupted run from its last checkpoint; with --steps, a run (finished or "
                    "not) is extended to that many steps. FOLDER is a run folder (it holds config.json), or a "
                    "folder of run folders such as an `lcpo run --out` folder (one subfolder per agent and seed) "
                    "or a sweep folder (its runs/ subfolders). Finished runs without --steps are only reported. "
                    "Same rules as `lcpo run --resume`.")
    p.add_argument("folder", type=Path, help="a run folder, or a folder holding run folders")
    p.add_argument("--steps", type=positive_int, default=None,
                   help="extend each run to this many environment steps (default: the recorded steps)")
    _add_population_options(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_resume)
    return p


def find_run_folders(folder: Path) -> list[Path]:
    """Run folders under ``folder``: itself if it holds ``config.json``, else its subfolders (and those of its
    ``runs/``) that hold one, sorted by path.

    Raises:
        FileNotFoundError: ``folder`` does not exist, or holds no run folder (the message names it).
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise FileNotFoundError(f"{folder}: a file, not a folder (give the run or sweep folder)")
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder")
    if (folder / "config.json").is_file():
        return [folder]
    found = sorted({p.parent for pattern in ("*/config.json", "runs/*/config.json") for p in folder.glob(pattern)})
    if not found:
        raise FileNotFoundError(f"{folder} holds no run (no config.json in it, its subfolders or runs/)")
    return found


def _recorded_config(run: Path):
    """The :class:`~lcpo.online.run.RunConfig` recorded in ``run/config.json``.

    Raises:
        ValueError: unreadable JSON or a file without a valid ``run`` entry (names the file).
    """
    from lcpo.online.run import RunConfig

    path = run / "config.json"
    try:
        data = json.loads(path.read_text())
        return RunConfig.from_dict(data["run"])
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); cannot resume this run") from None
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path} has no valid 'run' entry ({exc!r}); cannot resume this run") from None


#: What lcpo resume's refusals suggest instead of another --out (it has none).
_RESUME_ELSEWHERE = ("lcpo resume continues a folder in place: train longer (a larger --steps), or start a new run "
                     "with lcpo run --out DIR")


def cmd_resume(args) -> int:
    """Execute ``lcpo resume``: continue every run under ``args.folder`` with its recorded configuration."""
    import dataclasses

    from lcpo.online.run import resume_plan

    _check_device(args)
    planned = []
    for run in find_run_folders(args.folder):  # every run is checked before the first one starts
        cfg = _recorded_config(run)
        if args.steps is not None:
            if cfg.warmup_steps >= args.steps:
                raise ValueError(f"--steps {args.steps} must exceed the warm-up of {run} ({cfg.warmup_steps:,})")
            cfg = dataclasses.replace(cfg, steps=args.steps)
        planned.append((cfg, run, resume_plan(cfg, run, resume=True, elsewhere=_RESUME_ELSEWHERE)))
    return _execute_all(planned, True, not args.no_progress, batch=not args.no_batch, device=args.device)


def _check_trace_length(args) -> None:
    """Refuse a ``--trace-length`` that the run would ignore (never a silently different trace).

    Raises:
        ValueError: ``--trace-length`` given for an environment whose trace it does not fit
            (:func:`lcpo.envs.preflight.trace_length_applies`), naming both and what to do instead.
    """
    from lcpo.envs.preflight import trace_length_applies

    if args.trace_length is None or trace_length_applies(args.env, args.trace):
        return
    if args.env.startswith("lcpo/"):
        raise ValueError(f"--trace-length {args.trace_length} has no effect on {args.env}: its --trace (a workload "
                         "name or file) is used as it is; bound the run with --steps instead")
    raise ValueError(f"--trace-length {args.trace_length} has no effect without --trace: environment {args.env} "
                     "picks its own trace; pass --trace NAME_OR_FILE as well (your environment then receives "
                     "trace=ContextTrace fitted to the length)")


def _preflight(args, env_kwargs: dict) -> str:
    """Make the environment once before any run: the reset condition (``--reset``, else the one the environment
    declares), and checks that it suits the runs (context for LCPO, get_state/set_state for checkpoints), with
    one-line notices on stderr.

    Raises:
        ValueError: see :func:`lcpo.envs.preflight.check_env` and :func:`lcpo.envs.registration.make_env`.
    """
    from lcpo.contexts import TraceError
    from lcpo.envs.preflight import check_env, inspect_env

    try:
        facts = inspect_env(args.env, env_kwargs, args.trace, args.trace_length)
    except TraceError as exc:  # name the flag: the message alone reads like a config file's error
        raise TraceError(f"--trace: {exc}") from None
    reset = args.reset if args.reset is not None else facts.default_reset
    for notice in check_env(facts, reset, args.checkpoint_every, args.agent):
        print(notice, file=sys.stderr)
    return reset


def _check_known(agents: list[str], overrides: dict) -> None:
    """Raise ValueError naming every override key that none of ``agents`` knows (unknown agents are skipped;
    :class:`lcpo.online.run.RunConfig` reports them)."""
    import dataclasses

    known = set()
    for agent in agents:
        if agent in AGENTS:
            known |= {f.name for f in dataclasses.fields(AGENTS[agent].Hyperparameters)}
    bad = sorted(set(overrides) - known)
    if bad:
        raise ValueError(f"--set key(s) {bad} unknown to every selected agent ({', '.join(agents)}); "
                         "see `lcpo agents show NAME`")


def _announce_offline_training(cfg, seeds: int = 1) -> None:
    """Tell the user (stderr), once for ``seeds`` seeds of one population, that a prescient agent first trains
    offline for ``train_steps`` steps per seed, during which the progress bar does not move."""
    from lcpo.agents.base import resolve_hyperparameters
    from lcpo.agents.prescient import Prescient

    cls = AGENTS[cfg.agent]
    if not (isinstance(cls, type) and issubclass(cls, Prescient)):
        return
    n = resolve_hyperparameters(cls.Hyperparameters, None, cfg.overrides).train_steps
    if 0 < n <= 2**53:  # beyond, the agent refuses it (one line) before any training
        each = f" for each of {seeds} seeds, one after the other," if seeds > 1 else ""
        print(f"{cfg.agent}: training offline for {n:,} steps{each} over the whole trace first "
              "(set train_steps to change)", file=sys.stderr)


def _applicable(agent: str, overrides: dict) -> dict:
    """Overrides that the agent's hyperparameter dataclass knows (for multi-agent runs)."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(AGENTS[agent].Hyperparameters)}
    return {k: v for k, v in overrides.items() if k in names}


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _scored(summary: dict, warmup_steps: int) -> str:
    """What the lifelong return of ``summary`` averages, in words: ``"12 episodes"``, or with a warm-up
    ``"3 of 12 episodes (those ending after the 1,000-step warm-up)"`` (``"none of ..."`` when it is n/a)."""
    unit = summary.get("return_unit", "episode")
    total = summary["episodes"]
    scored = summary.get("scored_episodes")  # absent from summaries of older lcpo versions
    if warmup_steps == 0 or scored is None:
        return f"{total} {unit}s"
    return (f"{scored if scored else 'none'} of {total} {unit}s (those ending after the {warmup_steps:,}-step "
            "warm-up)")
