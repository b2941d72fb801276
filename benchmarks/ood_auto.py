"""Issue 15: the automatic OOD threshold (``ood_threshold="auto"``) against hand-picked thresholds and A2C.

Three commands:

    python benchmarks/ood_auto.py run --scale full [--out docs/results/ood-auto] [--workers N]
    python benchmarks/ood_auto.py table [--out docs/results/ood-auto ...] [--markdown FILE]
    python benchmarks/ood_auto.py offline [--steps 1000000]

``run`` executes a sweep (finished runs are skipped, unfinished ones resume from their last checkpoint, so the
command can be repeated until everything is done). ``--scale full`` is the issue's acceptance benchmark:

- windy Pendulum, traces wind-1 .. wind-4 compressed to 1M steps, 1M steps, seeds 0-2: A2C, LCPO with the
  paper's hand-picked L2 thresholds sigma^2 = 0.25, 1, 4 (Table 7), LCPO ``auto`` with each rule
  (``quantile``, the default, and ``standardized``); 72 runs, 2.7 CPU-hours;
- windy InvertedDoublePendulum (MuJoCo; its traces are divided by 8, a change of units the L2 thresholds
  follow through ``context_spec.scale`` and ``auto`` needs no help for), the same traces, 1M steps, seeds 0-1,
  A2C, the three hand-picked thresholds and ``auto`` with the default rule only (the rules are compared on the
  Pendulum); 40 runs, about 3.7 CPU-hours;
- the straggler environment on the Azure LLM workload, 1M steps, seeds 0-1, with the paper's straggler
  hyperparameters: A2C, LCPO with the paper's Mahalanobis thresholds ``D^2`` = 20, 24, 28 (Agg / Med / Cons) and
  LCPO ``auto`` (quantile); 10 runs, 0.4 CPU-hours. Issue 16's 10M-step straggler study
  (``docs/results/paper-budget/straggler``) also holds ``auto`` runs; ``table --out`` can pool that folder too,
  but its rows then mix budgets, so the default reads this sweep only.

122 runs, about 7 CPU-hours in all, measured on the 2-core development machine with two runs at once (steps per
second per run: windy Pendulum LCPO 7.4k, A2C 9.7k; InvertedDoublePendulum 3.0k; straggler LCPO 6.4k, A2C 8.5k):
3.5 hours there with ``--workers 2``, under an hour with ``--workers 16``. The default output folder
is committed (each finished run's summary.json, config.json and diagnostics.csv, a few kB; the sweep's working
files are git-ignored): ``scripts/commit_finished_runs.sh MESSAGE docs/results/ood-auto`` after a session, and
the next session's ``run`` skips what is there.

In every run the reservoir holds 1% of the run's steps (the paper's rule) and the lifelong return drops the
first 30% of the run (the paper's 6M of 20M). ``--scale reduced`` is what a 2-core session can afford: windy
Pendulum, wind-1, wind-3 and wind-4 compressed to 500k steps, 500k steps, seeds 0-1, and the straggler on the
Azure workload for 1M steps, seeds 0-1, with ``D^2 = 24`` only (about 40 CPU-minutes in all).

``table`` prints, per environment and trace, the mean lifelong return of every scheme with its 95% bootstrap
interval across seeds (:func:`lcpo.experiments.stats.mean_ci`), the acceptance checks (the automatic threshold
within the interval of the best hand-picked one, or above it; not below A2C's mean), and the OOD diagnostics
(fraction of updates with an anchor batch, mean OOD fraction of the candidates, mean ``ood/threshold``).

``offline`` needs no learning: the OOD decisions on the windy environments depend only on the wind (the
context entries of the observations), so it replays each trace's contexts through the reservoir and the OOD
sampler exactly as LCPO does (200-step batches, 1% reservoir, 1,000 candidates) and prints, per rule, the
fraction of updates that would find an anchor batch and the mean OOD fraction. Seconds per trace.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
PENDULUM = "lcpo/WindyPendulum-v0"
MUJOCO = "lcpo/WindyInvertedDoublePendulum-v0"
STRAGGLER = "lcpo/StragglerMitigation-v0"
WARMUP_FRACTION = 0.3
#: where ``run`` writes and ``table`` reads by default; finished runs' compact files are committed there
#: (``scripts/commit_finished_runs.sh MESSAGE docs/results/ood-auto``) so a later session's ``run`` skips them
RESULTS = ROOT / "docs" / "results" / "ood-auto"
#: issue 16's straggler study, which includes LCPO ``auto``: the full-scale straggler evidence (read by ``table``)
STRAGGLER_RUNS = ROOT / "docs" / "results" / "paper-budget" / "straggler"
#: the paper's hand-picked L2 thresholds (sigma^2, trace units; Table 7) and straggler D^2 (Agg / Med / Cons)
L2_FIXED = (0.25, 1.0, 4.0)
MAHALANOBIS_FIXED = (20.0, 24.0, 28.0)
AUTO_RULES = ("quantile", "standardized")


def _windy_group(name: str, env: str, traces: list[str], steps: int, seeds: int, rules=AUTO_RULES) -> dict:
    """Two sweep tables: A2C and LCPO at the fixed L2 thresholds; LCPO auto with each of ``rules``."""
    common = {"envs": [env], "traces": traces, "trace_length": steps, "steps": steps, "seeds": seeds,
              "warmup_steps": int(WARMUP_FRACTION * steps), "checkpoint_every": max(steps // 4, 1),
              "diagnostics_every": max(steps // 20, 200)}
    reservoir = max(steps // 100, 1000)
    return {
        f"{name}-fixed": dict(common, name=f"{name}-fixed", agents=["a2c", "lcpo"],
                              overrides={"lcpo": {"ood_threshold": list(L2_FIXED), "reservoir_size": reservoir}}),
        f"{name}-auto": dict(common, name=f"{name}-auto", agents=["lcpo"],
                             overrides={"lcpo": {"ood_threshold": "auto", "ood_auto_rule": list(rules),
                                                 "reservoir_size": reservoir}}),
    }


def _straggler_group(steps: int, seeds: int, fixed=MAHALANOBIS_FIXED) -> dict:
    """A2C and LCPO (Mahalanobis: the paper's D^2 and auto) with the paper's straggler settings, Azure workload."""
    from lcpo.envs.straggler.presets import straggler_overrides

    common = {"envs": [STRAGGLER], "traces": ["azure-llm"], "steps": steps, "seeds": seeds, "reset": "never",
              "warmup_steps": int(WARMUP_FRACTION * steps), "checkpoint_every": max(steps // 10, 1),
              "diagnostics_every": 46080}
    lcpo = {k: v for k, v in straggler_overrides("lcpo").items() if k != "ood_threshold"}
    lcpo["reservoir_size"] = max(steps // 100, lcpo["ood_batch"])  # 1%, never below the anchor batch
    return {"straggler": dict(common, name="straggler", agents=["a2c", "lcpo"], overrides={
        "a2c": straggler_overrides("a2c"),
        "lcpo": dict(lcpo, ood_threshold=[*fixed, "auto"])})}


def sweep_tables(scale: str) -> dict[str, dict]:
    """The sweep tables (as a TOML file would hold them) of a scale, by sub-sweep name."""
    if scale == "reduced":
        return {**_windy_group("pendulum", PENDULUM, ["wind-1", "wind-3", "wind-4"], 500_000, 2),
                **_straggler_group(1_000_000, 2, fixed=(24.0,))}
    if scale == "full":
        traces = ["wind-1", "wind-2", "wind-3", "wind-4"]
        return {**_windy_group("pendulum", PENDULUM, traces, 1_000_000, 3),
                **_straggler_group(1_000_000, 2),
                **_windy_group("mujoco", MUJOCO, traces, 1_000_000, 2, rules=("quantile",))}
    raise ValueError(f"unknown scale {scale!r}; choose 'reduced' or 'full'")


def planned_specs(scale: str) -> list:
    """The runs of a scale (:class:`lcpo.experiments.config.RunSpec`), in the order ``run`` executes them.

    Environment by environment; within one, seed by seed, and trace by trace within a seed, every scheme
    together: a sweep cut short by the end of a sitting leaves complete comparisons (every scheme on a trace),
    not all of the hand-picked runs and none of ``auto``.
    """
    from lcpo.experiments.config import expand, parse_config

    specs = []
    for name, table in sweep_tables(scale).items():
        specs += expand(parse_config(table, source=f"ood_auto.py:{name}"))
    envs = list(dict.fromkeys(s.config["env"] for s in specs))
    return sorted(specs, key=lambda s: (envs.index(s.config["env"]), s.config["seed"], s.config["trace"]))


def cmd_run(args) -> int:
    from lcpo.experiments.runner import run_sweep

    specs = planned_specs(args.scale)
    print(f"{len(specs)} runs into {args.out}", file=sys.stderr)
    outcomes = run_sweep(specs, args.out, workers=args.workers, name=f"ood-auto-{args.scale}")
    failed = [o for o in outcomes if o.status == "failed"]
    for o in failed:
        print(f"failed: {o.run_id}: {o.error}", file=sys.stderr)
    return 1 if failed else 0


def scheme_name(row) -> str:
    """Short scheme name of a store row: ``a2c``, ``sigma2=1``, ``D2=24``, ``auto-quantile``, ..."""
    if row["agent"] != "lcpo":
        return str(row["agent"])
    th = row.get("hp/ood_threshold")
    if th is None or (isinstance(th, float) and math.isnan(th)):
        return "lcpo (env default)"
    th = str(th).strip('"')
    if th == "auto":
        rule = row.get("hp/ood_auto_rule")
        rule = "quantile" if rule is None or (isinstance(rule, float) and math.isnan(rule)) else str(rule)
        return f"auto-{rule}"
    prefix = "D2" if str(row.get("hp/detector")) .startswith("mahalanobis") else "sigma2"
    return f"{prefix}={float(th):g}"


def results_table(folders, confidence: float = 0.95) -> pd.DataFrame:
    """Per (env, trace, scheme): n, mean lifelong return, interval, and the mean OOD diagnostics.

    Args:
        folders: one sweep folder or several (their finished runs are pooled; folders that do not exist are
            skipped).
    """
    from lcpo.experiments.stats import mean_ci
    from lcpo.experiments.store import load_store

    folders = [Path(folders)] if isinstance(folders, (str, Path)) else [Path(f) for f in folders]
    parts = [load_store(f, write=False)[0] for f in folders if f.is_dir()]
    if not parts:
        return pd.DataFrame()
    runs = pd.concat(parts, ignore_index=True)
    runs = runs[(runs["status"] == "done") & np.isfinite(runs["lifelong_return"].astype(float))].copy()
    runs["name"] = [scheme_name(r) for r in runs.to_dict("records")]
    recs = []
    for (env, trace, name), g in runs.groupby(["env", "trace", "name"], sort=True):
        ci = mean_ci(g["lifelong_return"].to_numpy(dtype=float), confidence=confidence, seed=0, single_seed="nan")
        thr = g["diag/ood/threshold"].mean() if "diag/ood/threshold" in g else float("nan")
        recs.append({"env": env, "trace": trace, "scheme": name, "n": ci.n, "mean": ci.mean, "low": ci.low,
                     "high": ci.high, "constrained": g["constrained_fraction"].mean(),
                     "ood_fraction": g["ood_fraction"].mean(), "threshold": thr})
    return pd.DataFrame(recs)


def _fmt_cell(r) -> str:
    if r is None:
        return ""
    if math.isnan(r["low"]):
        return f"{r['mean']:.1f} (n={r['n']})"
    return f"{r['mean']:.1f} [{r['low']:.1f}, {r['high']:.1f}]"


def markdown(table: pd.DataFrame) -> str:
    """The results as Markdown: lifelong returns with intervals, acceptance checks, OOD diagnostics."""
    lines = []
    for env, et in table.groupby("env", sort=False):
        schemes = list(dict.fromkeys(["a2c"] + sorted(s for s in et["scheme"] if s.startswith(("sigma2", "D2")))
                                     + sorted(s for s in et["scheme"] if s.startswith("auto"))))
        schemes = [s for s in schemes if s in set(et["scheme"])]
        lines += [f"### {env}", "", "| " + " | ".join(["trace", *schemes, "best fixed"]
                                                      + [f"{s}: within best / >= A2C" for s in schemes
                                                         if s.startswith("auto")]) + " |",
                  "|---" * (len(schemes) + 2 + sum(s.startswith("auto") for s in schemes)) + "|"]
        diag = []
        passes = {s: [0, 0] for s in schemes if s.startswith("auto")}
        for trace, tt in et.groupby("trace", sort=True):
            rows = {r["scheme"]: r for r in tt.to_dict("records")}
            fixed = [rows[s] for s in schemes if s in rows and s.startswith(("sigma2", "D2"))]
            best = max(fixed, key=lambda r: r["mean"]) if fixed else None
            cells = [_fmt_cell(rows.get(s)) for s in schemes]
            checks = []
            for s in passes:
                a = rows.get(s)
                if a is None or best is None:
                    checks.append("")
                    continue
                lo = best["low"] if not math.isnan(best["low"]) else best["mean"]
                within = a["mean"] >= lo
                above = "a2c" not in rows or a["mean"] >= rows["a2c"]["mean"]
                passes[s][0] += within
                passes[s][1] += above
                checks.append(f"{'yes' if within else 'no'} / {'yes' if above else 'no'}")
            lines.append("| " + " | ".join([trace, *cells, best["scheme"] if best else "", *checks]) + " |")
            for s in schemes:
                r = rows.get(s)
                if r is not None and s != "a2c":
                    diag.append(f"| {trace} | {s} | {r['constrained']:.2f} | {r['ood_fraction']:.2f} | "
                                f"{r['threshold']:.3g} |")
        ntr = et["trace"].nunique()
        lines += [""] + [f"- {s}: within the best fixed threshold's interval (or above) on {p[0]} of {ntr} traces; "
                         f"mean not below A2C's on {p[1]} of {ntr}." for s, p in passes.items()]
        lines += ["", "| trace | scheme | updates with anchors | OOD fraction | mean ood/threshold |",
                  "|---|---|---|---|---|", *diag, ""]
    return "\n".join(lines)


def cmd_table(args) -> int:
    table = results_table(args.out)
    if table.empty:
        print(f"{', '.join(map(str, args.out))}: no finished runs", file=sys.stderr)
        return 1
    md = markdown(table)
    print(md)
    if args.markdown:
        Path(args.markdown).write_text(md + "\n")
    return 0


def context_observations(trace_values: np.ndarray, lags: int = 3) -> np.ndarray:
    """``(T, 2 lags)`` float32 context entries of the windy observations (x lags newest first, then y)."""
    v = np.asarray(trace_values, dtype=np.float64)
    pad = np.concatenate([np.repeat(v[:1], lags, axis=0), v])
    T = v.shape[0]
    out = np.empty((T, 2 * lags), np.float32)
    for k in range(lags):
        out[:, k] = pad[lags - k: lags - k + T, 0]
        out[:, lags + k] = pad[lags - k: lags - k + T, 1]
    return out


def offline_stats(obs: np.ndarray, spec, detector: str, threshold, batch: int = 200, reservoir: int | None = None,
                  seed: int = 0, **auto) -> dict:
    """Replay context observations through the reservoir and the OOD sampler as LCPO does (no learning).

    Returns:
        ``constrained`` (fraction of updates after the first with an anchor batch), ``ood_fraction`` (mean),
        ``threshold`` (median of ``threshold_report`` over the updates).
    """
    from lcpo.memory.reservoir import ReservoirBuffer
    from lcpo.ood import make_detector, sample_ood

    det = make_detector(detector, spec, threshold, **auto)
    res = ReservoirBuffer(reservoir or max(obs.shape[0] // 100, 1000), obs.shape[1], np.random.default_rng(seed))
    cons, frac, thr = [], [], []
    for u in range(obs.shape[0] // batch):
        recent = obs[batch * u: batch * (u + 1)]
        det.fit(recent)
        anchors, f = sample_ood(res, det, 200, 5)
        if u:
            cons.append(anchors is not None)
            frac.append(f)
            thr.append(det.threshold_report)
        res.add_batch(recent)
    return {"constrained": float(np.mean(cons)), "ood_fraction": float(np.mean(frac)),
            "threshold": float(np.median(thr))}


def cmd_offline(args) -> int:
    from lcpo.contexts import resolve_trace
    from lcpo.envs.context import ContextSpec

    spec = ContextSpec(tuple(range(6)), tuple(f"c{i}" for i in range(6)), ((0, 1, 2), (3, 4, 5)))
    rules = [("sigma2=0.25", "l2", 0.25, {}), ("sigma2=1", "l2", 1.0, {}), ("sigma2=4", "l2", 4.0, {}),
             ("D2=24", "mahalanobis", 24.0, {})]
    rules += [(f"auto-quantile q={q:g}", "l2", "auto", {"target_fraction": q}) for q in (0.25, 0.5, 0.75)]
    rules += [(f"auto-standardized tau={t:g}", "l2", "auto", {"rule": "standardized", "std_threshold": t})
              for t in (0.5, 1.0, 2.0)]
    rules += [("auto-quantile (Mahalanobis) q=0.5", "mahalanobis", "auto", {"target_fraction": 0.5})]
    print(f"{args.steps:,} steps per trace; reservoir 1% of them; 200-step batches; 1,000 candidates per update\n")
    print("| trace | rule | updates with anchors | OOD fraction | median threshold (sigma^2 or D^2) |")
    print("|---|---|---|---|---|")
    for trace in args.traces:
        obs = context_observations(resolve_trace(trace, length=args.steps).values)
        for label, det, th, kw in rules:
            st = offline_stats(obs, spec, det, th, **kw)
            print(f"| {trace} | {label} | {st['constrained']:.2f} | {st['ood_fraction']:.2f} | "
                  f"{st['threshold']:.3g} |", flush=True)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the sweep (finished runs are skipped)")
    r.add_argument("--scale", choices=("reduced", "full"), default="full")
    r.add_argument("--out", default=str(RESULTS))
    r.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    t = sub.add_parser("table", help="the results table with 95%% intervals and the acceptance checks")
    t.add_argument("--out", nargs="+", default=[str(RESULTS)],
                   help="sweep folders whose finished runs are pooled (default: %(default)s)")
    t.add_argument("--markdown", help="also write the table to this file")
    o = sub.add_parser("offline", help="OOD statistics of each rule on the wind traces (no learning)")
    o.add_argument("--steps", type=int, default=1_000_000)
    o.add_argument("--traces", nargs="+", default=["wind-1", "wind-2", "wind-3", "wind-4"])
    args = p.parse_args(argv)
    return {"run": cmd_run, "table": cmd_table, "offline": cmd_offline}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
