"""Stationary sanity check (paper Table 10): zero-wind Pendulum with discretized actions.

Each agent trains online on ``lcpo/WindyPendulum-v0`` with trace ``zero`` (no wind, so the task is stationary
Pendulum-v1 with 15 torque bins and 6 always-zero context entries) for ``--steps`` steps (paper: 1.6M), then its
frozen policy is evaluated on ``--eval-episodes`` fresh episodes (paper: 1,000) of the same environment. Paper
figures (mean evaluation return): A2C about -165, TRPO about -166, DDQN about -149, SAC about -146.

Evaluation acts greedily by default (``--eval-mode greedy``: most probable bin, or the greedy Q bin for DDQN);
``--eval-mode sample`` samples stochastic policies (DDQN then acts epsilon-greedily at its final epsilon).

DDQN's exploration schedule is in epochs (1,000 random + 5,000 decaying epochs of 200 steps = 1.2M steps); with
``--ddqn-schedule scaled`` (the default) both epoch counts are scaled by ``steps / 1.6M`` so a reduced budget keeps
the paper's proportions (a 100k-step run would otherwise act uniformly at random throughout). ``paper`` keeps them.

Every (agent, seed) run writes ``OUT/AGENT-sSEED/result.json`` (and the trained agent under ``agent/``); runs whose
result exists are skipped, so an interrupted sweep resumes run by run. Runs go in ``--jobs`` parallel processes,
each with one torch thread.

``--set AGENT.KEY=VALUE`` overrides one agent's hyperparameter (repeatable; values parsed as JSON), e.g.
``--set sac.train_every=1`` for per-step updates instead of the paper's one update per 200-step epoch.

Usage (the paper-budget table in docs/agents.md; about 9 minutes on 2 cores)::

    python benchmarks/stationary_pendulum.py --agents ddqn sac a2c trpo --steps 1600000 --seeds 0 1 2 \
        --eval-episodes 1000 --jobs 2 --ddqn-schedule paper --out runs/table10

Prints a Markdown table (agent, seeds, mean evaluation return +- standard error over seeds, per-seed means,
training steps/s, paper figure) and writes it to ``OUT/table.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

PAPER = {"a2c": -165.0, "trpo": -166.0, "ddqn": -149.0, "sac": -146.0}
PAPER_STEPS = 1_600_000
ENV_ID = "lcpo/WindyPendulum-v0"


def agent_overrides(name: str, steps: int, ddqn_schedule: str) -> dict:
    """Hyperparameter overrides of one agent for a ``steps``-step run (only DDQN's schedule when scaled)."""
    if name != "ddqn" or ddqn_schedule == "paper":
        return {}
    from lcpo.agents.ddqn import DDQNHyperparameters

    hp = DDQNHyperparameters()
    f = steps / PAPER_STEPS
    return {"random_epochs": max(0, round(hp.random_epochs * f)), "decay_epochs": max(1, round(hp.decay_epochs * f))}


def evaluate(agent, episodes: int, seed: int, mode: str) -> np.ndarray:
    """Returns ``(episodes,)`` float64 of the frozen agent on fresh zero-wind episodes (no learning)."""
    import gymnasium as gym

    env = gym.make(ENV_ID, trace="zero")
    det = mode == "greedy"
    out = np.zeros(episodes)
    obs, _ = env.reset(seed=seed)
    for i in range(episodes):
        ret, done = 0.0, False
        while not done:
            obs, r, term, trunc, _ = env.step(agent.act(obs, deterministic=det))
            ret += r
            done = term or trunc
        out[i] = ret
        obs, _ = env.reset()
    return out


def parse_sets(items: list[str]) -> dict[str, dict]:
    """Parses ``--set AGENT.KEY=VALUE`` items into ``{agent: {key: value}}`` (values as JSON, else strings).

    Raises:
        SystemExit: (through ``argparse``) never; a ``ValueError`` names a malformed item.
    """
    out: dict[str, dict] = {}
    for item in items:
        head, sep, raw = item.partition("=")
        agent, dot, key = head.partition(".")
        if not sep or not dot or not agent or not key:
            raise ValueError(f"--set {item!r}: expected AGENT.KEY=VALUE, e.g. sac.train_every=200")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out.setdefault(agent, {})[key] = value
    return out


def settings_of(result: dict) -> dict:
    """The settings that make a stored ``result.json`` reusable: steps, evaluation and hyperparameter overrides."""
    return {"steps": result.get("steps"), "eval_episodes": result.get("eval_episodes"),
            "eval_mode": result.get("eval_mode"), "overrides": json.loads(json.dumps(result.get("overrides", {})))}


def stale_results(jobs: list[tuple]) -> list[str]:
    """Stored results under the jobs' folders whose settings differ from the jobs' (one line each)."""
    out = []
    for name, seed, steps, eval_episodes, eval_mode, ddqn_schedule, folder, extra in jobs:
        path = Path(folder) / f"{name}-s{seed}" / "result.json"
        if not path.exists():
            continue
        want = settings_of({"steps": steps, "eval_episodes": eval_episodes, "eval_mode": eval_mode,
                            "overrides": {**agent_overrides(name, steps, ddqn_schedule), **(extra or {})}})
        have = settings_of(json.loads(path.read_text()))
        diff = {k: (have[k], want[k]) for k in want if have[k] != want[k]}
        if diff:
            out.append(f"{path}: " + ", ".join(f"{k} stored {a!r}, asked {b!r}" for k, (a, b) in diff.items()))
    return out


def run_one(name: str, seed: int, steps: int, eval_episodes: int, eval_mode: str, ddqn_schedule: str,
            out: str, extra: dict | None = None) -> dict:
    """Train one agent on zero-wind Pendulum, evaluate it, write ``result.json``; returns the result."""
    import gymnasium as gym
    import torch

    import lcpo.envs  # noqa: F401
    from lcpo.agents import AGENTS

    torch.set_num_threads(1)
    folder = Path(out) / f"{name}-s{seed}"
    res_path = folder / "result.json"
    overrides = {**agent_overrides(name, steps, ddqn_schedule), **(extra or {})}
    if res_path.exists():
        stored = json.loads(res_path.read_text())
        if settings_of(stored) != settings_of({"steps": steps, "eval_episodes": eval_episodes,
                                               "eval_mode": eval_mode, "overrides": overrides}):
            raise ValueError(f"{res_path} was made with other settings; use another --out")
        return stored
    folder.mkdir(parents=True, exist_ok=True)
    agent = AGENTS[name](gym.make(ENV_ID, trace="zero"), seed=seed, **overrides)
    t0 = time.perf_counter()
    chunk = max(1, steps // 20)
    done = 0
    while done < steps:
        n = min(chunk, steps - done)
        agent.learn(n)
        done += n
        recent = [e[2] for e in agent.episodes[-25:]]
        shown = f"{np.mean(recent):.1f}" if recent else "n/a"
        print(f"[{name} s{seed}] {done}/{steps} steps, recent return {shown}, "
              f"{done / (time.perf_counter() - t0):.0f} steps/s", file=sys.stderr, flush=True)
    train_s = time.perf_counter() - t0
    rets = evaluate(agent, eval_episodes, 1_000_000 + seed, eval_mode)
    train_returns = [e[2] for e in agent.episodes]
    result = {"agent": name, "seed": seed, "steps": steps, "eval_episodes": eval_episodes, "eval_mode": eval_mode,
              "eval_mean": float(rets.mean()), "eval_std": float(rets.std()),
              "train_lifelong_return": float(np.mean(train_returns)),
              "train_last_10pct_return": float(np.mean(train_returns[-max(1, len(train_returns) // 10):])),
              "train_steps_per_s": steps / train_s, "overrides": overrides}
    agent.save(folder / "agent")
    res_path.write_text(json.dumps(result, indent=2) + "\n")
    return result


def table(results: list[dict]) -> str:
    """Markdown table over agents (mean +- standard error of the per-seed evaluation means)."""
    lines = ["| agent | seeds | steps | eval return (mean +- s.e.) | per seed | train steps/s | paper |",
             "|---|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["agent"] for r in results):
        rs = [r for r in results if r["agent"] == name]
        m = np.array([r["eval_mean"] for r in rs])
        se = f"{m.std(ddof=1) / np.sqrt(len(m)):.1f}" if len(m) > 1 else "n/a (1 seed)"
        per = ", ".join(f"{x:.1f}" for x in m)
        sps = np.mean([r["train_steps_per_s"] for r in rs])
        lines.append(f"| {name} | {len(rs)} | {rs[0]['steps']:,} | {m.mean():.1f} +- {se} | {per} | {sps:.0f} | "
                     f"{PAPER.get(name, float('nan')):.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", nargs="+", default=["a2c", "trpo", "ddqn", "sac"])
    p.add_argument("--steps", type=int, default=PAPER_STEPS)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--eval-episodes", type=int, default=1000)
    p.add_argument("--eval-mode", choices=["greedy", "sample"], default="greedy")
    p.add_argument("--ddqn-schedule", choices=["scaled", "paper"], default="scaled")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default="runs/stationary-pendulum")
    p.add_argument("--set", action="append", default=[], metavar="AGENT.KEY=VALUE",
                   help="hyperparameter override of one agent (repeatable), e.g. --set sac.train_every=200")
    args = p.parse_args(argv)
    try:
        sets = parse_sets(args.set)
    except ValueError as exc:
        p.error(str(exc))
    import lcpo.envs  # noqa: F401
    from lcpo.agents import AGENTS

    unknown = [a for a in args.agents if a not in AGENTS]
    if unknown:
        p.error(f"unknown agent(s) {unknown}; known: {sorted(AGENTS)}")
    if args.steps < 1 or args.eval_episodes < 1 or args.jobs < 1:
        p.error("--steps, --eval-episodes and --jobs must be >= 1")
    bad_seeds = [x for x in args.seeds if x < 0]
    if bad_seeds:
        p.error(f"--seeds must be >= 0, got {bad_seeds}")
    from lcpo.agents.base import resolve_hyperparameters

    for agent, values in sets.items():
        if agent not in args.agents:
            p.error(f"--set {agent}.*: agent {agent!r} is not among --agents {args.agents}")
        try:
            resolve_hyperparameters(AGENTS[agent].Hyperparameters,
                                    overrides={**agent_overrides(agent, args.steps, args.ddqn_schedule), **values})
        except ValueError as exc:
            p.error(f"--set {agent}.*: {exc}")
    jobs = [(a, s, args.steps, args.eval_episodes, args.eval_mode, args.ddqn_schedule, args.out, sets.get(a))
            for a in args.agents for s in args.seeds]
    stale = stale_results(jobs)
    if stale:
        p.error("stored results in --out were made with other settings (use another --out or delete them):\n  "
                + "\n  ".join(stale))
    if args.jobs == 1:
        results = [run_one(*j) for j in jobs]
    else:
        with ProcessPoolExecutor(args.jobs) as ex:
            results = list(ex.map(run_one, *zip(*jobs)))
    md = table(results)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "table.md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
