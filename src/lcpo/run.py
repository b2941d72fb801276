"""One online run from a resolved configuration: the unit the CLI and the sweep runner execute.

A run folder holds ``config.json`` (the resolved configuration, agent hyperparameters included),
``episodes.csv`` (one row per episode), ``diagnostics.csv`` (training diagnostics, window means),
``checkpoint/`` (periodic: agent, environment, loop and log state) and, written last and atomically,
``summary.json``. A run resumed from its last checkpoint ends with the same summary (apart from wall time
and throughput) as a run that was never interrupted.
"""

from __future__ import annotations

import dataclasses
import json
import math
import platform
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from lcpo.agents import AGENTS
from lcpo.checkpoint import atomic_write_json, load_state, save_state
from lcpo.envs.registration import make_env
from lcpo.envs.task import return_unit
from lcpo.loop import OnlineLoop, parse_reset
from lcpo.runlog import RunLog, lifelong_return
from lcpo.threads import limit_threads

__all__ = ["RunConfig", "execute", "make_run_env", "AGENTS"]


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
        probe_every: steps between policy snapshots for the forgetting measurement (:mod:`lcpo.forgetting`;
            0: none, the default; left out of :meth:`to_dict` when 0 so older run ids are unchanged).
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


def _run_with_checkpoints(loop: OnlineLoop, target: int, config: RunConfig, checkpoint) -> None:
    """Step ``loop`` to ``target``, checkpointing at every multiple of ``config.checkpoint_every`` (and at an
    early stop) before the end of the run."""
    every = config.checkpoint_every
    while loop.steps < target:
        nxt = target if not every else min(target, (loop.steps // every + 1) * every)
        loop.run(nxt)
        if every and (loop.steps % every == 0 or loop.steps == target) and loop.steps < config.steps:
            checkpoint()


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


def execute(config: RunConfig, out_dir: str | Path, resume: bool = True, progress: bool = False,
            threads: int | None = 1, stop_at: int | None = None,
            on_progress: Callable[[int, float], None] | None = None) -> dict:
    """Run one online run into ``out_dir`` and return its summary.

    Args:
        config: the run configuration.
        out_dir: run folder (created).
        resume: if ``summary.json`` exists return it without running; if a checkpoint exists continue from it.
        progress: show a tqdm progress bar (steps/s and recent episodic return).
        threads: ``torch.set_num_threads`` for this process (1 = one core per run; None leaves it).
        stop_at: stop (after checkpointing) once this many steps are done, without writing the summary
            (used by tests to emulate an interruption).
        on_progress: optional ``(steps_done, recent_return)`` callback after every episode.

    Returns:
        The summary dict (also written to ``summary.json``): ``lifelong_return``, ``episodes``, ``steps``,
        ``wall_time_s``, ``steps_per_s``, ``constrained_fraction``, ``line_search_accept_fraction``,
        ``ood_fraction``, ``versions``, ``config``, ``hyperparameters``.

    Raises:
        ValueError: bad configuration, unknown env/trace/agent, or non-finite observations/rewards.
    """
    out = Path(out_dir)
    summary_path = out / "summary.json"
    if resume and summary_path.exists():
        return json.loads(summary_path.read_text())
    out.mkdir(parents=True, exist_ok=True)
    env = make_run_env(config)
    agent = AGENTS[config.agent](env, seed=config.seed, **config.overrides)
    log = RunLog(out, _context_names(env), every=config.diagnostics_every, tensorboard=config.tensorboard)
    on_update = log.on_update
    probe = None
    if config.probe_every:
        from lcpo.forgetting import PolicyProbe

        probe = PolicyProbe(out, config.probe_every, seed=config.seed)

        def on_update(step, diag):
            log.on_update(step, diag)
            probe.on_update(step, agent)
    loop = OnlineLoop(env, agent, config.reset, seed=config.seed, on_update=on_update,
                      on_episode=log.on_episode)
    atomic_write_json(out / "config.json", {"run": config.to_dict(),
                                            "hyperparameters": dataclasses.asdict(agent.hp),
                                            "context_spec": getattr(env.unwrapped, "context_spec", None)
                                            and env.unwrapped.context_spec.to_dict(),
                                            "versions": _versions()})
    ckpt = out / "checkpoint" / "state"
    wall_before = 0.0
    if resume and ckpt.with_name("state.json").exists():
        state = load_state(ckpt)
        if state["config"] != json.loads(json.dumps(config.to_dict())):
            raise ValueError(f"checkpoint in {out} was made with a different configuration; "
                             "use another folder or delete it")
        agent.load_state_dict(state["agent"])
        loop.load_state_dict(state["loop"])
        log.load_state_dict(state["log"])
        wall_before = float(state["wall_time_s"])
        if probe is not None:
            probe.resume_from(loop.steps)

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

    def checkpoint():
        save_state(ckpt, {"config": config.to_dict(), "agent": agent.state_dict(), "loop": loop.state_dict(),
                          "log": log.state_dict(), "wall_time_s": wall_before + time.perf_counter() - start})
        log.write(loop.episodes)

    try:
        with limit_threads(threads):  # one core per run (see lcpo.threads)
            _run_with_checkpoints(loop, target, config, checkpoint)
    finally:

        if bar is not None:
            bar.update(loop.steps - last[0])
            bar.close()
    if loop.steps < config.steps:
        log.close()
        return {"interrupted_at": loop.steps}
    wall = wall_before + time.perf_counter() - start
    log.write(loop.episodes, final=True)
    log.close()
    lr = lifelong_return(loop.episodes, config.warmup_steps)
    summary = {
        "lifelong_return": None if math.isnan(lr) else lr,
        "episodes": len(loop.episodes),
        "steps": loop.steps,
        "wall_time_s": wall,
        "steps_per_s": loop.steps / wall if wall > 0 else None,
        "updates": log.updates,
        "constrained_fraction": log.mean("train/constrained"),
        "line_search_accept_fraction": (log.totals.get("train/line_search_ok", 0.0)
                                        / max(1.0, log.totals.get("train/constrained", 0.0))),
        "ood_fraction": log.mean("ood/fraction"),
        "env_metrics": _env_metrics(env),
        "trace": _trace_info(env),
        "return_unit": return_unit(config.reset),
        "versions": _versions(),
        "config": config.to_dict(),
        "hyperparameters": dataclasses.asdict(agent.hp),
    }
    atomic_write_json(summary_path, summary)
    return json.loads(summary_path.read_text())  # the JSON form: the same object a resumed call returns
