"""Measured cost of a study sweep (issue 27 item 6): short populations of each (env, agent) of a config, timed in
CPU seconds, extrapolated to the config's core-hours.

For every config given, the sweep is expanded (:func:`lcpo.experiments.config.expand`) and its cells (runs that
differ only in seed) are grouped by what sets their speed: environment, agent, hyperparameter overrides,
environment arguments and reset rule (the trace changes the wind, not the work). For each such group one short
population is run through :func:`lcpo.online.population.execute_population`, the function the sweep calls for a
population task, with the group's first cell's seeds (N = the config's seed count for that agent) for
``--steps`` steps per seed, into a temporary folder:

- the run's length-dependent hyperparameters are those of the FULL run (LCPO's reservoir 1% of the full run,
  DDQN/SAC replay of every sample of it: :meth:`lcpo.online.run.RunConfig.agent_overrides`);
- the trace is compressed to the measurement (``trace_length = steps``), so the measured window meets the whole
  trace's range of contexts and LCPO's anchored (constrained) updates run as often as in a full run (its
  ``constrained_fraction`` is printed: 0.82-0.86 in the committed paper-budget runs);
- checkpoints, diagnostics, probes and snapshots as the config asks (``checkpoint_every`` capped at the
  measurement, so one checkpoint is written and timed: an overestimate of at most one checkpoint per
  ``--steps``);
- prescient agents: the offline training is timed apart (``Prescient.train`` wrapped) on ``--train-steps`` steps
  per seed; their cost is ``N x train_steps / training rate + N x steps / acting rate``.

Figures: environment steps per CPU-second of the population process (``time.process_time``, one torch and BLAS
thread, so what one core gives, robust to other jobs taking the core away), and per wall-second, both STEADY:
between the population's progress marks at a quarter of the steps and at the end (startup, JIT compilation and
the final checkpoint left out; the whole call's rate is printed too). Core-hours
of a config = sum over its cells of ``seeds x steps / rate``. Wall time on C cores with the sweep's 2 workers per
2 cores, i.e. C populations at once: ``core-hours / C`` (an ideal packing; the largest single population task
bounds it from below: both are printed).

Usage::

    python benchmarks/study_cost.py configs/study-pendulum-extra.toml configs/study-mujoco.toml \\
        [--steps 20000] [--train-steps 20000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
#: what sets a population's speed: the config keys that form a measurement group
SPEED_KEYS = ("env", "agent", "overrides", "env_kwargs", "reset")


def cells_of(config_path: str | Path) -> list[dict]:
    """The cells of a sweep config: one dict per (env, trace, agent, overrides, ...) with its seeds.

    Returns:
        ``[{"config": first seed's run config dict, "seeds": [seeds], "steps": steps per run, "group": speed
        key (JSON text)}]`` in the sweep's order.

    Raises:
        ConfigError: the config is invalid (named key).
    """
    from lcpo.experiments.config import expand, load_config

    specs = expand(load_config(config_path))
    cells: OrderedDict[str, dict] = OrderedDict()
    for s in specs:
        c = dict(s.config)
        key = json.dumps({k: v for k, v in c.items() if k != "seed"}, sort_keys=True, default=str)
        cell = cells.setdefault(key, {"config": c, "seeds": [], "steps": int(c["steps"]),
                                      "group": json.dumps({k: c.get(k) for k in SPEED_KEYS}, sort_keys=True)})
        cell["seeds"].append(int(c["seed"]))
    return list(cells.values())


def measure(cell: dict, steps: int, train_steps: int, workdir: Path) -> dict:
    """Run one short population of ``cell``'s seeds and time it.

    Args:
        cell: an entry of :func:`cells_of`.
        steps: environment steps per seed of the measurement.
        train_steps: prescient agents' offline training steps per seed of the measurement.
        workdir: a scratch folder (the run folders go below it).

    Returns:
        ``{"seeds", "steps", "cpu_s", "wall_s", "steps_per_cpu_s", "steps_per_wall_s" (the steady rates: from a
        quarter of the steps to the end, startup and offline training left out), "whole_steps_per_cpu_s",
        "whole_steps_per_wall_s" (the whole call, offline training left out), "train_cpu_s",
        "train_steps_per_cpu_s" (prescient only, else None), "constrained_fraction"}``.
    """
    from lcpo.online.population import execute_population
    from lcpo.online.run import RunConfig

    full = RunConfig.from_dict(cell["config"])
    overrides = dict(full.agent_overrides())
    prescient = full.agent.startswith("prescient")
    if prescient:
        overrides["train_steps"] = train_steps
    configs = []
    for seed in cell["seeds"]:
        d = dict(cell["config"], seed=seed, steps=steps, warmup_steps=0, overrides=overrides,
                 checkpoint_every=min(int(cell["config"].get("checkpoint_every") or steps), steps))
        if d["env"] != "lcpo/StragglerMitigation-v0":  # a workload is not resampled; a wind trace is
            d["trace_length"] = steps
        for k in ("diagnostics_every", "probe_every"):
            if d.get(k):
                d[k] = min(int(d[k]), max(1, steps // 4))
        configs.append(RunConfig.from_dict(d))
    outs = [workdir / f"s{seed}" for seed in cell["seeds"]]
    train_cpu = [0.0]
    restore = None
    if prescient:
        from lcpo.agents import prescient as pmod

        original = pmod.Prescient.train

        def timed_train(self):
            t0 = time.process_time()
            try:
                return original(self)
            finally:
                train_cpu[0] += time.process_time() - t0

        pmod.Prescient.train = timed_train
        restore = (pmod.Prescient, original)
    marks: list[tuple[float, float, int]] = []  # (CPU s, wall s, steps per seed) every 1,000 steps per seed

    def on_progress(done: int, _mean_return: float) -> None:
        marks.append((time.process_time(), time.perf_counter(), int(done)))

    try:
        c0, w0 = time.process_time(), time.perf_counter()
        summaries = execute_population(configs, outs, resume=False, threads=1, on_progress=on_progress)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    finally:
        if restore is not None:
            restore[0].train = restore[1]
    n = len(configs)
    act_cpu = cpu - train_cpu[0]
    # the steady rate: from the first progress mark at or past a quarter of the steps to the last one (startup:
    # imports, the env's JIT compilation, agent construction, a prescient agent's offline training, and the final
    # checkpoint and summary are outside it)
    window = [m for m in marks if m[2] >= steps // 4]
    if len(window) >= 2 and window[-1][0] > window[0][0]:
        steady_cpu = n * (window[-1][2] - window[0][2]) / (window[-1][0] - window[0][0])
        steady_wall = n * (window[-1][2] - window[0][2]) / (window[-1][1] - window[0][1])
    else:
        steady_cpu, steady_wall = n * steps / act_cpu, n * steps / wall
    fractions = [s.get("constrained_fraction") for s in summaries if s.get("constrained_fraction") is not None]
    return {"seeds": n, "steps": steps, "cpu_s": cpu, "wall_s": wall,
            "steps_per_cpu_s": steady_cpu, "steps_per_wall_s": steady_wall,
            "whole_steps_per_cpu_s": n * steps / act_cpu, "whole_steps_per_wall_s": n * steps / wall,
            "train_cpu_s": train_cpu[0] if prescient else None,
            "train_steps_per_cpu_s": n * train_steps / train_cpu[0] if prescient and train_cpu[0] > 0 else None,
            "full_train_steps": int(RunConfig.from_dict(cell["config"]).overrides.get("train_steps", 1_600_000))
            if prescient else 0,
            "constrained_fraction": sum(fractions) / len(fractions) if fractions else None}


def cell_core_hours(cell: dict, m: dict) -> float:
    """Core-hours of one cell at the measured rates: ``seeds x (steps / rate + train_steps / training rate)``."""
    n = len(cell["seeds"])
    hours = n * cell["steps"] / m["steps_per_cpu_s"] / 3600
    if m["train_steps_per_cpu_s"]:
        hours += n * m["full_train_steps"] / m["train_steps_per_cpu_s"] / 3600
    return hours


def study_cost(config_paths: list[str], steps: int, train_steps: int, log=print) -> dict:
    """Measure every speed group of every config and extrapolate (see the module docstring).

    Returns:
        ``{"configs": {path: {"runs", "env_steps", "core_hours", "largest_task_h", "cells": [...]}},
        "groups": {group: measurement}, "load": load average before and after, "steps", "train_steps"}``.
    """
    measured: dict[str, dict] = {}
    out: dict = {"configs": {}, "groups": measured, "steps": steps, "train_steps": train_steps,
                 "load_before": os.getloadavg()}
    for path in config_paths:
        cells = cells_of(path)
        for cell in cells:
            if cell["group"] in measured:
                continue
            with tempfile.TemporaryDirectory(prefix="study-cost-") as tmp:
                m = measure(cell, steps, train_steps, Path(tmp))
            g = json.loads(cell["group"])
            m["label"] = f"{g['env'].split('/')[-1]} {g['agent']} N={m['seeds']}"
            measured[cell["group"]] = m
            extra = (f", offline training {m['train_steps_per_cpu_s']:,.0f} steps/CPU-s"
                     if m["train_steps_per_cpu_s"] else "")
            cf = m["constrained_fraction"]
            log(f"{m['label']}: steady {m['steps_per_cpu_s']:,.0f} steps/CPU-s, {m['steps_per_wall_s']:,.0f} "
                f"steps/wall-s; whole call {m['whole_steps_per_cpu_s']:,.0f} steps/CPU-s "
                f"({m['cpu_s']:.1f} CPU-s, {m['wall_s']:.1f} s wall{extra}"
                + (f", constrained fraction {cf:.2f}" if cf is not None else "") + ")")
        rows = []
        for cell in cells:
            m = measured[cell["group"]]
            rows.append({"cell": f"{cell['config']['env'].split('/')[-1]} {cell['config']['trace']} "
                                 f"{cell['config']['agent']}", "seeds": len(cell["seeds"]), "steps": cell["steps"],
                         "core_hours": cell_core_hours(cell, m), "label": m["label"]})
        out["configs"][str(path)] = {
            "runs": sum(r["seeds"] for r in rows), "env_steps": sum(r["seeds"] * r["steps"] for r in rows),
            "core_hours": sum(r["core_hours"] for r in rows),
            "largest_task_h": max(r["core_hours"] for r in rows), "cells": rows}
    out["load_after"] = os.getloadavg()
    return out


def markdown(result: dict) -> str:
    """The README table: config, runs, env steps, measured rate(s), core-hours, wall on 2 and 16 cores."""
    lines = ["| config | runs | env steps | measured steps per CPU-s (per group) | core-hours | wall, 2 cores | "
             "wall, 16 cores |", "|---|---|---|---|---|---|---|"]
    for path, c in result["configs"].items():
        groups = sorted({r["label"] for r in c["cells"]})
        by_label = {m["label"]: m for m in result["groups"].values()}
        rates = "; ".join(f"{g}: {by_label[g]['steps_per_cpu_s']:,.0f}" for g in groups)
        h = c["core_hours"]
        lines.append(f"| `{Path(path).name}` | {c['runs']} | {c['env_steps'] / 1e9:.2f}G | {rates} | {h:,.0f} | "
                     f"{max(h / 2, c['largest_task_h']) / 24:.1f} days | {max(h / 16, c['largest_task_h']):.0f} h |")
    return "\n".join(lines)


def groups_markdown(result: dict) -> str:
    """Per measured group: steady and whole-call rates, wall rate, offline training rate, constrained fraction."""
    lines = ["| group | steady steps per CPU-s | whole call, steps per CPU-s | steady steps per wall-s | offline "
             "training, steps per CPU-s | constrained fraction |", "|---|---|---|---|---|---|"]
    for m in result["groups"].values():
        tr = f"{m['train_steps_per_cpu_s']:,.0f}" if m.get("train_steps_per_cpu_s") else "—"
        cf = f"{m['constrained_fraction']:.2f}" if m.get("constrained_fraction") is not None else "—"
        lines.append(f"| {m['label']} | {m['steps_per_cpu_s']:,.0f} | {m['whole_steps_per_cpu_s']:,.0f} | "
                     f"{m['steps_per_wall_s']:,.0f} | {tr} | {cf} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("configs", nargs="*", help="sweep config files (TOML)")
    p.add_argument("--from-json", type=Path, default=None,
                   help="print the tables of an earlier --json file instead of measuring")
    p.add_argument("--steps", type=int, default=20_000, help="measured steps per seed (default: %(default)s)")
    p.add_argument("--train-steps", type=int, default=20_000,
                   help="prescient agents: measured offline training steps per seed (default: %(default)s)")
    p.add_argument("--json", type=Path, default=None, help="write the measurements here")
    a = p.parse_args(argv)
    if a.from_json is not None:
        result = json.loads(a.from_json.read_text())
        print(groups_markdown(result) + "\n\n" + markdown(result))
        return 0
    if not a.configs:
        raise SystemExit("give one or more sweep configs (or --from-json FILE)")
    if a.steps < 1000 or a.train_steps < 1000:
        raise SystemExit(f"--steps and --train-steps must be >= 1000, got {a.steps}, {a.train_steps}")
    import torch

    torch.set_num_threads(1)
    result = study_cost(a.configs, a.steps, a.train_steps, log=lambda s: print(s, flush=True))
    print(f"\nload average before {result['load_before']}, after {result['load_after']}\n")
    print(groups_markdown(result) + "\n\n" + markdown(result))
    if a.json:
        a.json.write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
