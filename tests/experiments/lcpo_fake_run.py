"""A fast, deterministic stand-in for ``lcpo.online.run`` (same ``RunConfig``/``execute``/``AGENTS`` contract).

Each "episode" is ``episode_length`` steps (200, or N for ``reset = "every:N"``); its return is a seeded
function of (seed, agent, episode index, overrides), so results are known exactly and identical whether a run
was interrupted or not. ``env_kwargs["delay"]`` seconds are slept per episode so tests can interrupt runs (and ``env_kwargs["stop_delay"]``
seconds before the checkpoint of a stopped run).
Every call of ``execute`` appends its starting step to ``calls.log`` in the run folder and writes its process id
to ``pid``. A ``should_stop`` callable (the sweep's stop request) is asked after every episode: once it says
True the run checkpoints, appends the step to ``stops.log`` and returns ``{"interrupted_at": step}``.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

AGENTS = {"lcpo": object, "a2c": object, "prescient-a2c": object, "fail": object}
_HPARAMS = {"lcpo": {"bonus", "reservoir_size", "ood_threshold"}, "a2c": {"bonus"}, "prescient-a2c": {"bonus"},
            "fail": set()}
_BASE = {"lcpo": -100.0, "a2c": -150.0, "prescient-a2c": -90.0, "fail": 0.0}


@dataclass(frozen=True)
class RunConfig:
    env: str = "lcpo/WindyPendulum-v0"
    trace: str = "ndbc-46002"
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

    def to_dict(self) -> dict:
        d = asdict(self)
        d["overrides"] = dict(self.overrides)
        d["env_kwargs"] = dict(self.env_kwargs)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunConfig:
        names = {f.name for f in fields(cls)}
        for key in d:
            if key not in names:
                raise ValueError(f"unknown RunConfig key {key!r}")
        if d.get("agent", "lcpo") not in AGENTS:
            raise ValueError(f"unknown agent {d['agent']!r}")
        for key in d.get("overrides", {}) or {}:
            if key not in _HPARAMS[d.get("agent", "lcpo")]:
                raise ValueError(f"unknown hyperparameter {key!r} for agent {d.get('agent')!r}")
        return cls(**dict(d))


def _atomic_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, sort_keys=True))
    os.replace(tmp, path)


def episode_return(config: RunConfig, episode: int) -> float:
    """The exact return of episode ``episode`` of a run."""
    agent_code = sorted(AGENTS).index(config.agent)
    rng = np.random.default_rng([config.seed, agent_code, episode])
    bonus = float(config.overrides.get("bonus", 0.0)) + 0.01 * float(config.overrides.get("reservoir_size", 0))
    return _BASE[config.agent] + bonus + 10.0 * float(rng.standard_normal())


def execute(config: RunConfig, out_dir, resume: bool = True, progress: bool = False, should_stop=None) -> dict:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if (out / "summary.json").is_file():
        return json.loads((out / "summary.json").read_text())
    ckpt = out / "checkpoint" / "state.json"
    state = {"step": 0, "episodes": []}
    if resume and ckpt.is_file():
        state = json.loads(ckpt.read_text())
    with (out / "calls.log").open("a") as fh:
        fh.write(f"{state['step']}\n")
    (out / "pid").write_text(str(os.getpid()))
    if config.env_kwargs.get("import_torch"):
        import torch  # noqa: F401 - a process that imported torch takes seconds to exit on a busy machine
    if config.agent == "fail":
        if config.env_kwargs.get("os_error"):  # a failure that may be transient (a full disk, a lost mount)
            raise OSError(28, "fake full disk for testing")
        raise RuntimeError("fake failure for testing")
    _atomic_json(out / "config.json", config.to_dict())
    length = int(config.reset.split(":")[1]) if config.reset.startswith("every:") else 200
    delay = float(config.env_kwargs.get("delay", 0.0))
    t0 = time.perf_counter()
    step = state["step"]
    last_ckpt = step
    while step < config.steps:
        n = min(length, config.steps - step)
        step += n
        k = len(state["episodes"])
        state["episodes"].append({"episode": k, "step": step, "return": episode_return(config, k), "length": n,
                                  "context_mean_x": math.sin(step / 1000.0), "context_mean_y": math.cos(step / 1000.0)})
        state["step"] = step
        if delay:
            time.sleep(delay)
        if step - last_ckpt >= config.checkpoint_every:
            ckpt.parent.mkdir(exist_ok=True)
            _atomic_json(ckpt, state)
            last_ckpt = step
        if should_stop is not None and step < config.steps and should_stop():
            time.sleep(float(config.env_kwargs.get("stop_delay", 0.0)))  # a slow final checkpoint
            ckpt.parent.mkdir(exist_ok=True)
            _atomic_json(ckpt, state)
            with (out / "stops.log").open("a") as fh:
                fh.write(f"{step}\n")
            return {"interrupted_at": step}
    eps = state["episodes"]
    lines = ["episode,step,return,length,context_mean_x,context_mean_y"]
    lines += [f"{e['episode']},{e['step']},{e['return']!r},{e['length']},{e['context_mean_x']!r},{e['context_mean_y']!r}"
              for e in eps]
    (out / "episodes.csv").write_text("\n".join(lines) + "\n")
    (out / "diagnostics.csv").write_text("step,train/kl_anchor,ood/fraction\n"
                                         + "".join(f"{e['step']},0.0001,0.5\n" for e in eps))
    scored = [e["return"] for e in eps if e["step"] > config.warmup_steps]
    wall = time.perf_counter() - t0
    summary = {"lifelong_return": float(np.mean(scored)), "episodes": len(eps), "steps": step,
               "wall_time_s": wall, "steps_per_s": step / max(wall, 1e-9), "constrained_fraction": 0.5,
               "ood_fraction": 0.25, "versions": {"fake": "1"}, "config": config.to_dict()}
    _atomic_json(out / "summary.json", summary)
    return summary
