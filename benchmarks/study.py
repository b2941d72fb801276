"""Issue 27 item 6: harvest and report ANY study sweep folder (the windy gym cells, 4 traces, 3-25 seeds).

The runs are ordinary sweeps (configs/study-*.toml); this script turns a sweep folder into committable compact
files and a report, and works on a partial sweep (cells without finished runs are listed as "not run yet")::

    python benchmarks/study.py harvest --out docs/results/study   # per finished run: episodes_binned.csv.gz and
        [--no-drift]                                              # the drift file (benchmarks/paper_budget.py)
    python benchmarks/study.py report --out docs/results/study    # DIR/report.md and its figures
        [--no-forgetting] [--regimes 6] [--episodes 10] [--episode-steps 200] [--allow-mixed-code]

It shares benchmarks/paper_budget.py's code (harvest, the paper's quoted values, the straggler score both ways)
and the library's statistics (:mod:`lcpo.experiments.report`, :mod:`lcpo.experiments.stats`,
:mod:`lcpo.experiments.forgetting`, :mod:`lcpo.experiments.settings`); nothing is copied.

``report.md`` holds, in order:

1. the sweep's status: specs in ``sweep.json``, finished, failed, not run yet, per cell;
2. per (environment, trace) cell a table: every agent's lifelong return, mean and 95% Student-t interval over its
   finished seeds (``k of n seeds`` when the cell is partial), the paper's value where the paper gives one
   (:data:`PAPER_VALUES`, with its source), our rank and the paper's rank, and LCPO against it: Welch's t-test,
   Holm's correction over every (cell, baseline) pair of the report with at least 2 seeds a side
   (:func:`lcpo.experiments.report.comparison_table`); the best prescient agent of the cell (selected by its mean,
   so optimistic);
3. which differences are significant, in words, and LCPO's rank per cell;
4. across cells (Agarwal et al. 2021): the paper's Figure 3a CDF of min-max normalized returns, IQM with a
   stratified-bootstrap interval, probability of improvement, performance profiles; a cell where a single agent
   finished has no min-max scale and is left out (named);
5. forgetting as lost return per agent with Student-t intervals over seeds (:mod:`lcpo.experiments.forgetting`:
   frozen snapshots on the trace's reference context regimes; cached in ``DIR/forgetting_cache``);
6. the straggler score both ways (after the paper's 3.5M-sample learning period and over the whole run) when the
   folder holds straggler runs;
7. the settings of the agents in the study next to the paper's and the authors' (docs/settings.md), and the runs
   of this folder that ran with a setting that has changed since;
8. per cell: wall time (the finished seeds' shares: a population's once), steps per second, the population size and the commit(s) the seeds
   ran on; a cell whose seeds ran on different code is refused unless ``--allow-mixed-code`` (then named).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paper_budget as pb  # noqa: E402  (shared code: harvest, the paper's values, straggler scores)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results" / "study"
STRAGGLER_ENV = "lcpo/StragglerMitigation-v0"

#: The paper's lifelong returns, by (env, trace) -> agent -> value, and where each number comes from. Only the
#: windy Pendulum traces 1 and 3 are transcribed in this repository (benchmarks/paper_budget.py ``PAPER``, checked
#: against the paper by issue 27's audit: Table 6 for trace 3); the paper's rows for traces 2 and 4 and for the
#: MuJoCo environments are not, and were not available to the session that wrote this (no copy of the paper's
#: tables in the code, the docs or the authors' repository), so those cells show no paper value.
PAPER_VALUES: dict[tuple[str, str], dict[str, float]] = {
    ("lcpo/WindyPendulum-v0", trace): dict(values) for trace, values in pb.PAPER.items()}
# the paper's prescient SAC (its best prescient agent, -187 / -203) is the row of our prescient SAC, which this
# study runs (configs/study-pendulum-extra.toml); pb.PAPER lists only prescient TRPO, the one the older report ran
for _trace, (_name, _value) in pb.PAPER_BEST_PRESCIENT.items():
    assert _name == "prescient SAC", _name
    PAPER_VALUES[("lcpo/WindyPendulum-v0", _trace)].setdefault("prescient-sac", _value)
#: the source line of each quoted cell
PAPER_SOURCES = {("lcpo/WindyPendulum-v0", "wind-1"): "paper Tables 5/6, trace 1 (benchmarks/paper_budget.py PAPER)",
                 ("lcpo/WindyPendulum-v0", "wind-3"): "paper Table 6, trace 3 (benchmarks/paper_budget.py PAPER)"}
#: the paper's best prescient agent per quoted cell
PAPER_BEST_PRESCIENT = {("lcpo/WindyPendulum-v0", t): v for t, v in pb.PAPER_BEST_PRESCIENT.items()}
#: family-wise error rate (Holm) and interval level
ALPHA = 0.05
CONFIDENCE = 1 - ALPHA


# -- loading ------------------------------------------------------------------------------------------------
def load(folders: Path | list[Path]) -> pd.DataFrame:
    """The per-run table of one or more sweep folders (:func:`lcpo.experiments.store.collect`, without the
    episode table): one row per spec of each folder's ``sweep.json`` (``status``: done / failed / running /
    interrupted / missing) and per run folder present that the manifest does not list (a second sweep into the
    same folder rewrites ``sweep.json``), plus ``population`` (the population size the run's summary records; 1 for a solo run) and
    ``run_dir``. An agent with one set of overrides in the whole table (a straggler preset) is named by the agent
    alone in ``scheme``.

    Raises:
        FileNotFoundError: a folder is not a sweep folder (named).
        ValueError: a folder given twice, or a run id in two folders (a copy of a sweep folder, the same config
            run into two): its seeds would count twice (names the run and both folders).
    """
    from lcpo.experiments.store import collect, runs_root

    frames = []
    where: dict[str, Path] = {}  # run id -> the folder it was found in
    given: set[Path] = set()
    for folder in [folders] if isinstance(folders, (str, Path)) else folders:
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no such sweep folder")
        if folder.resolve() in given:
            raise ValueError(f"{folder} is given twice (--out and --include name one folder): its seeds would "
                             "count twice")
        given.add(folder.resolve())
        manifest = folder / "sweep.json"
        ids = [s["run_id"] for s in json.loads(manifest.read_text())["specs"]] if manifest.is_file() else []
        root = runs_root(folder)
        known = set(ids)
        ids += [p.name for p in sorted(root.iterdir()) if p.is_dir() and p.name not in known
                and any((p / f).is_file() for f in ("summary.json", "config.json", "error.json"))]
        for rid in ids:
            if rid in where:
                raise ValueError(f"run {rid} is in {where[rid]} and in {folder}: its seed would count twice; give "
                                 "each run's folder once")
            where[rid] = folder
        runs, _ = collect(folder, run_ids=ids, episodes=False)
        if runs.empty:
            continue
        pops = []
        for rid in runs["run_id"]:
            f = root / rid / "summary.json"
            summary = json.loads(f.read_text()) if f.is_file() else {}
            pops.append((summary.get("population") or {}).get("size", 1) if f.is_file() else None)
        frames.append(runs.assign(population=pops, run_dir=[root / r for r in runs["run_id"]]))
    if not frames:
        return pd.DataFrame()
    runs = pd.concat(frames, ignore_index=True)
    per_agent = runs.groupby("agent")["scheme"].nunique()
    single = set(per_agent[per_agent == 1].index)
    runs["scheme"] = [a if a in single else s for a, s in zip(runs["agent"], runs["scheme"])]
    return runs


def _ci(values) -> str:
    """``mean [low, high]`` (95% Student-t over seeds), ``mean (1 seed)`` or ``n/a``."""
    return pb._ci_text(list(values))


def _p(x: float) -> str:
    """A p-value: 3 decimals, or 2 significant digits below 0.001."""
    from lcpo.experiments.report import _p as fmt

    return fmt(x)


def _shown(path: Path) -> str:
    """A folder as the report names it: relative to the repository root when inside it, else its name."""
    try:
        return Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return Path(path).name


def _short(env: str) -> str:
    return env.split("/")[-1]


# -- per-cell tables ------------------------------------------------------------------------------------------
def cell_tables(runs: pd.DataFrame, comp: pd.DataFrame) -> list[str]:
    """Per (env, trace): every agent's row (see the module docstring, item 2), with "not run yet" rows."""
    from lcpo.experiments.report import interval_text

    lines = []
    for (env, trace), cell in runs.groupby(["env", "trace"], sort=False):
        key = (env, trace)
        paper = PAPER_VALUES.get(key, {})
        done = cell[cell["status"] == "done"]
        steps = int(cell["steps"].max())
        lines += [f"### {_short(env)}, trace `{trace}` ({steps:,} steps, "
                  f"{int(cell['warmup_steps'].max()):,}-step warm-up excluded)", ""]
        lines.append(f"Paper values: {PAPER_SOURCES[key]}." if key in PAPER_SOURCES else
                     "Paper values: not quoted. This project has the paper's values for windy Pendulum traces 1 "
                     "and 3 only (benchmarks/paper_budget.py PAPER); the specs it was built from restate no other "
                     "results, and no stored source held the paper's row for this cell, so none is guessed.")
        lines += ["", "| agent | seeds finished | lifelong return, mean [95% t CI] | paper | rank (ours) | "
                      "rank (paper) | LCPO vs this: Welch p / Holm p |", "|---|---|---|---|---|---|---|"]
        means = done.groupby("scheme")["lifelong_return"].mean().sort_values(ascending=False)
        online = [s for s in means.index if not s.startswith("prescient")]
        # a rank needs a second finished online agent: alone in its cell an agent is first of one, no rank
        ours_rank = {s: i + 1 for i, s in enumerate(online)} if len(online) >= 2 else {}
        in_paper = [s for s in online if s in paper]
        paper_rank = ({s: i + 1 for i, s in enumerate(sorted(in_paper, key=lambda s: -paper[s]))}
                      if len(in_paper) >= 2 else {})
        ct = comp[(comp["env"] == env) & (comp["trace"] == trace)].set_index("baseline") if len(comp) else comp
        order = list(means.index) + [s for s in dict.fromkeys(cell["scheme"]) if s not in means.index]
        for scheme in order:
            g = cell[cell["scheme"] == scheme]
            d = g[g["status"] == "done"]
            n_done, n_all = len(d), len(g)
            seeds = f"{n_done} of {n_all}" if n_done < n_all else f"{n_all}"
            if n_done == 0:
                lines.append(f"| {scheme.upper()} | 0 of {n_all} | {_pending(g)} | {paper.get(scheme, '—')} | — | — "
                             "| — |")
                continue
            test = "—"
            if scheme in ct.index:
                r = ct.loc[scheme]
                test = (str(r["verdict"]) if not np.isfinite(r["p"]) else
                        f"{_p(r['p'])} / {_p(r['p_holm'])}: " + (("**LCPO higher**" if r["diff"] > 0 else
                                                                    "**LCPO lower**") if r["significant"]
                                                                   else "not significant"))
            lines.append(f"| {scheme.upper()} | {seeds} | {_ci(d['lifelong_return'])} | {paper.get(scheme, '—')} | "
                         f"{ours_rank.get(scheme, '—')} | {paper_rank.get(scheme, '—')} | {test} |")
        pres = [s for s in means.index if s.startswith("prescient")]
        if pres:
            best = pres[0]
            lines += ["", f"Best prescient agent here: {best.upper()} ({interval_text(means[best])}), the highest "
                          f"mean of {len(pres)} prescient agent(s) ({', '.join(p.upper() for p in pres)}): chosen "
                          "by its mean, so its value is optimistic (a maximum over noisy means)."]
        if key in PAPER_BEST_PRESCIENT:
            name, value = PAPER_BEST_PRESCIENT[key]
            lines += ["", f"The paper's best prescient agent on this trace is {name} ({value})."]
        lines.append("")
    return lines


def significance_text(comp: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """Which LCPO-baseline differences survive Holm's correction, which do not, and LCPO's rank per cell."""
    tested = comp[comp["p"].notna()] if len(comp) else comp
    sig = tested[tested["significant"]] if len(tested) else tested
    lines = ["## Which differences are significant", ""]
    if not len(tested):
        return lines + ["No LCPO-baseline pair has at least 2 finished seeds a side yet: nothing is tested, and no "
                        "difference is claimed.", ""]
    said = "; ".join(f"LCPO {'above' if r.diff > 0 else 'below'} {r.baseline.upper()} on {_short(r.env)} "
                     f"`{r.trace}` (difference {r.diff:+.3g}, Holm p {r.p_holm:.3g})" for r in sig.itertuples())
    k = len(tested) - len(sig)
    rest = (f"The other {k} difference{'s are' if k != 1 else ' is'} not significant: whatever the order of the "
            f"means, these seeds do not separate {'them' if k != 1 else 'it'}, and no lead is claimed for "
            f"{'them' if k != 1 else 'it'}." if k else "Every tested difference is significant.")
    lines += [(f"Welch's t-test (two-sided) of LCPO's seeds against each online baseline's in each cell, Holm's "
               f"step-down correction over all {len(tested)} tested pairs of this report (family-wise error "
               f"{ALPHA}). Significant after the correction: {said or 'none'}. {rest}"), ""]
    untested = comp[comp["p"].isna()] if len(comp) else comp
    if len(untested):
        lines += ["Not tested (a side with 1 finished seed, or both sides constant over their seeds): "
                  + ", ".join(f"{_short(r.env)} `{r.trace}` {r.baseline.upper()}" for r in untested.itertuples())
                  + ".", ""]
    from lcpo.experiments.report import interval_text, lifelong_table, rank_table

    ranks = rank_table(lifelong_table(runs))
    lc = ranks[ranks["scheme"] == "lcpo"]
    if len(lc):
        lines += ["LCPO's rank among the online agents (by mean; a rank is not a significant difference):", "",
                  "| env | trace | rank | lifelong return [95% t CI] |", "|---|---|---|---|"]
        for r in lc.itertuples():
            ci = interval_text(r.mean, r.ci_low, r.ci_high) + ("" if np.isfinite(r.ci_low) else " (1 seed)")
            lines.append(f"| {_short(r.env)} | {r.trace} | {r.rank} of {r.of} | {ci} |")
        lines.append("")
    return lines


# -- across cells ---------------------------------------------------------------------------------------------
def _pending(g: pd.DataFrame) -> str:
    """What the runs of a cell without a finished one are doing: ``not run yet``, or their states (``1 running,
    2 interrupted``, ``3 failed``) from the store's ``status``."""
    counts = g["status"].value_counts()
    states = [f"{int(counts[k])} {k}" for k in ("running", "interrupted", "failed") if counts.get(k)]
    return ", ".join(states) + (f", {int(counts['missing'])} not run yet" if states and counts.get("missing")
                                else "") if states else "not run yet"


def across_section(runs: pd.DataFrame, folder: Path) -> list[str]:
    """The paper's Figure 3a CDF, IQM, probability of improvement and performance profiles across the cells."""
    import matplotlib

    matplotlib.use("Agg")
    from lcpo.experiments.report import (MIN_SCHEMES_FOR_CDF, _plot_cdf, _profile_figure, across_cells,
                                         lifelong_table, normalized_table)

    done = runs[runs["status"] == "done"]
    if not len(done):
        return []
    # aggregates compare agents over one task set: the largest block of agents x cells in which every agent
    # finished, LCPO in (lcpo.experiments.report.aggregate_block, the rule `lcpo report` applies)
    from lcpo.experiments.report import _cell_name, _row_keys

    agg = across_cells(done.copy(), lifelong_table(done), seed=0)
    block = set(agg["rows"])
    all_online = sorted({s for s in done["scheme"] if not s.startswith("prescient")})
    in_block = sorted(set(agg["iqm"]["scheme"]) if len(agg["iqm"]) else set())
    keys = _row_keys(done)  # the library's row names (env/trace and any other varying config column)
    keep = [_cell_name(tuple(r)) in block for r in runs[keys].itertuples(index=False)]
    runs = runs[keep]
    runs = runs[runs["scheme"].isin(agg["field"])]  # the library's field: block agents, prescient in every cell
    parts = [f"{s.upper()} (finished in {n} of the cells)" for s, n in agg["left_out_schemes"].items()]
    parts += [f"{_short(r.split('/')[0])} `{r.split('/')[1]}` (no {', '.join(m.upper() for m in missing)})"
              for r, missing in agg["left_out_rows"].items()]
    left_out = ("" if not parts else
                " Left out: " + "; ".join(parts) + ". An agent scored over fewer cells, or a cell scored against a "
                "field without one of the agents, would not be comparable with the rest (one task set for all, "
                "Agarwal et al. 2021); P(LCPO > X) below still uses every cell the two agents share.")
    cells = len(block)
    lines = ["## Across cells (paper Figure 3a; Agarwal et al. 2021)", ""]
    if not cells:
        return lines + ["No cell has two online agents finished yet: nothing to normalize or aggregate.", ""]
    table = lifelong_table(runs)
    norm = normalized_table(table)
    norm.to_csv(folder / "normalized_return.csv", index=False)
    online = [s for s in dict.fromkeys(norm["scheme"]) if not s.startswith("prescient")]
    online = sorted(online, key=lambda s: (s != "lcpo", s))
    few = len(agg["field"]) < MIN_SCHEMES_FOR_CDF  # two means on the scale: one at 0, the other at 1 everywhere
    lines += [(f"One task set: {cells} cell(s) x {len(in_block)} online agents "
              f"({', '.join(a.upper() for a in in_block)}), the largest block in which every agent finished in "
              f"every cell (of {len(all_online)} online agents; `lcpo.experiments.report.aggregate_block`)."
              f"{left_out} Each run's lifelong return is "
              "min-max normalized by its cell's "
              "lowest and highest agent mean (these agents, and prescient agents that finished in every one of "
              "these cells): 0 = the worst agent mean of the cell, "
              "1 = the best. "
              + ("" if few else "IQM: the mean of the middle half of an agent's normalized runs pooled over the "
                 "cells, 95% stratified-bootstrap interval (seeds resampled within cells, 2,000 resamples, generator "
                 "seed 0; about 85% actual coverage at 3 seeds, 93% at 10: `lcpo.experiments.stats.iqm_ci`). ")
              + "P(LCPO > X): per cell the share of (LCPO seed, X seed) pairs LCPO wins, averaged over the common "
              "cells, " + ("95% stratified-bootstrap interval (seeds resampled within cells, 2,000 resamples, "
                           "generator seed 0)" if few else "same bootstrap")
              + ". These aggregates describe; the per-cell tests above are the claims."), ""]
    if len(online) >= MIN_SCHEMES_FOR_CDF:
        _plot_cdf(norm[norm["scheme"].isin(online)], online, folder / "normalized_return_cdf.png")
        lines += ["![normalized return CDF (paper Figure 3a)](normalized_return_cdf.png)", ""]
    else:
        lines += [f"No CDF: {len(online)} online agent(s); min-max normalization of fewer than "
                  f"{MIN_SCHEMES_FOR_CDF} puts one at 0 and the other at 1 in every cell.", ""]
    if few and len(agg["iqm"]):
        lines += [f"No IQM or performance profiles: {len(agg['field'])} agent(s) set the 0-1 scale, so min-max "
                  "normalization puts one mean at 0 and the other at 1 in every cell (`lcpo report` applies the "
                  "same rule). P(LCPO > X) reads the returns themselves.", ""]
    if len(agg["iqm"]) and not few:
        lines += ["| agent | cells | runs | IQM of normalized return [95% CI] |", "|---|---|---|---|"]
        for r in agg["iqm"].itertuples():
            ci = f"{r.iqm:.2f}" + (f" [{r.ci_low:.2f}, {r.ci_high:.2f}]" if np.isfinite(r.ci_low) else
                                   " (1 seed per cell: no interval)")
            lines.append(f"| {r.scheme.upper()} | {r.cells} | {r.runs} | {ci} |")
        agg["iqm"].to_csv(folder / "iqm.csv", index=False)
    if len(agg["poi"]):
        lines += ["", "| X | common cells | P(LCPO > X) [95% CI] |", "|---|---|---|"]
        for r in agg["poi"].itertuples():
            ci = f" [{r.ci_low:.2f}, {r.ci_high:.2f}]" if np.isfinite(r.ci_low) else ""
            lines.append(f"| {r.baseline.upper()} | {r.cells} | {r.poi:.2f}{ci} |")
        agg["poi"].to_csv(folder / "probability_of_improvement.csv", index=False)
    if agg["profiles"] and not few:
        _profile_figure(agg["profiles"], folder / "performance_profile.png", CONFIDENCE)
        lines += ["", "![performance profiles](performance_profile.png)"]
    return lines + [""]


# -- forgetting, settings, provenance ------------------------------------------------------------------------
def forgetting_lines(folders: list[Path], out: Path, regimes: int, episodes: int, episode_steps: int) -> list[str]:
    """Forgetting as lost return (:func:`lcpo.experiments.forgetting.forgetting_study` of each folder, cached in
    ``out/forgetting_cache``, merged), its CSVs and heat maps written into ``out``."""
    from lcpo.experiments.forgetting import _find_runs, forgetting_section, forgetting_study

    if not any(_find_runs(Path(f))[0] for f in folders):
        n = sum(len(_find_runs(Path(f))[1]) for f in folders)
        return ["## Forgetting: lost return on reference contexts", "",
                f"Not measured yet: none of the {n} finished run(s) keeps snapshots (`snapshots.npz`).", ""]
    studies = [forgetting_study(f, regimes=regimes, episodes=episodes, episode_steps=episode_steps,
                                confidence=CONFIDENCE, cache_dir=out / "forgetting_cache") for f in folders]
    merged = dict(studies[0])
    for extra in studies[1:]:
        for k in ("matrix", "summary", "per_run"):
            merged[k] = pd.concat([merged[k], extra[k]], ignore_index=True)
        for k in ("refs", "traces"):
            merged[k] = {**merged[k], **extra[k]}
        merged["without"] = sorted([*merged["without"], *extra["without"]])
        merged["without_reasons"] = {**merged["without_reasons"], **extra["without_reasons"]}
        merged["seconds"] += extra["seconds"]
        merged["computed_seconds"] += extra["computed_seconds"]
        merged["cached"] += extra["cached"]
        merged["evaluations"] += extra["evaluations"]
    return forgetting_section(merged, out)


def settings_lines(runs: pd.DataFrame, folders: list[Path], out: Path) -> list[str]:
    """The settings tables (ours, the paper's Tables 11-12, the authors' run configurations) of the agents in
    the study, and the finished runs of ``folders`` whose recorded settings differ from today's (paths relative
    to ``out``)."""
    from lcpo.experiments.settings import settings_markdown, stale_runs_markdown

    agents = set(runs["agent"])
    straggler = bool((runs["env"] == STRAGGLER_ENV).any())
    windy = bool((runs["env"] != STRAGGLER_ENV).any())

    def only(spec) -> bool:
        is_straggler = "straggler" in spec.title
        if (is_straggler and not straggler) or (not is_straggler and not windy):
            return False
        if spec.agent.startswith("prescient"):
            return any(a.startswith("prescient") for a in agents)
        return spec.agent in agents

    return (["## Settings: ours, the paper's, the authors'", "",
             "Every hyperparameter of every agent in this study next to the paper's Tables 11-12 and the authors' "
             "run configurations (`lcpo.experiments.settings`; docs/settings.md has every agent). Where the two "
             "disagree the run configuration is followed (it produced the figures); every row marked `differs` "
             "says why.", ""]
            + settings_markdown(3, only=only).splitlines()
            + ["### Runs of this folder that ran with a setting that has changed", "",
               stale_runs_markdown([Path(f) / "runs" for f in folders if (Path(f) / "runs").is_dir()],
                                   out).strip(), ""])


def runs_lines(runs: pd.DataFrame, code: dict) -> list[str]:
    """Status and cost per cell: seeds finished of planned, wall time, steps/s, population size, commits."""
    from lcpo.experiments.report import _code_text, process_wall_time

    lines = ["## Runs per cell: status, wall time, code", "", _code_text(code), "",
             "| env | trace | agent | finished / planned | failed | wall time (each finished seed's share) | steps/s per seed "
             "(mean) | population | commit |", "|---|---|---|---|---|---|---|---|---|"]
    for (env, trace, scheme), g in runs.groupby(["env", "trace", "scheme"], sort=False):
        d = g[g["status"] == "done"]
        commits = sorted({(str(c)[:7] if isinstance(c, str) and c else "unknown")
                          + ("+dirty" if bool(dd) else "") for c, dd in zip(d["code_commit"],
                                                                            d["code_dirty"].fillna(False))})
        wall = d["wall_time_s"].sum()  # seed-hours: a population's wall time once per seed
        wall_once = process_wall_time(d) if len(d) else 0.0  # each seed's share: a population's time once
        pops = sorted({int(p) for p in d["population"].dropna()})
        lines.append(f"| {_short(env)} | {trace} | {scheme} | {len(d)} / {len(g)} | "
                     f"{int((g['status'] == 'failed').sum())} | "
                     + ((f"{wall_once / 3600:.2f} h" + (f" ({wall / 3600:.2f} h summed over seeds)"
                                                         if not math.isclose(wall, wall_once) else ""))
                        if len(d) else _pending(g)) + " | "
                     + (f"{d['steps_per_s'].mean():,.0f}" if len(d) else "—") + " | "
                     + (", ".join(map(str, pops)) or "—") + f" | {', '.join(commits) or '—'} |")
    return lines + [""]


# -- the report -----------------------------------------------------------------------------------------------
def report(folder: Path, *, include: list[Path] = (), allow_mixed_code: bool = False, forgetting: bool = True,
           regimes: int = 6, episodes: int = 10, episode_steps: int = 200) -> Path:
    """Write ``folder/report.md`` (and its figures and CSVs beside it) from a sweep folder, finished or not.

    Args:
        folder: the sweep folder (``sweep.json`` and ``runs/``); the report is written here.
        include: further sweep folders whose runs join the same tables (e.g. configs/study-pendulum-extra.toml's
            folder beside configs/study-pendulum.toml's: two sweeps cannot share a folder at the same time).
        allow_mixed_code: pool the seeds of a cell that ran on different commits (the report names the cells);
            without it such a cell raises :class:`lcpo.persistence.provenance.MixedCodeError` before anything is
            written.
        forgetting: evaluate the runs' snapshots for the forgetting section (cached; about 45 s per 20M-step run
            the first time, docs/forgetting.md).
        regimes, episodes, episode_steps: the forgetting measurement's settings
            (:func:`lcpo.experiments.forgetting.forgetting_study`).

    Returns:
        The path of ``report.md``.

    Raises:
        FileNotFoundError: ``folder`` is not a sweep folder. MixedCodeError: see ``allow_mixed_code``.
    """
    from lcpo.experiments.report import check_code, comparison_table
    from lcpo.persistence.atomic import atomic_write_text

    folder = Path(folder)
    folders = [folder, *map(Path, include)]
    runs = load(folders)
    if runs.empty:
        raise FileNotFoundError(f"{folder}: no runs (no sweep.json specs and no run folders)")
    code = check_code(runs, allow_mixed_code)  # before anything is written
    comp = comparison_table(runs, confidence=CONFIDENCE)
    manifest = folder / "sweep.json"
    name = json.loads(manifest.read_text()).get("name", folder.name) if manifest.is_file() else folder.name
    status = runs["status"].value_counts().to_dict()
    n_cells = runs.groupby(["env", "trace", "scheme"]).ngroups
    done_cells = runs[runs["status"] == "done"].groupby(["env", "trace", "scheme"]).ngroups
    lines = [f"# Study report: {name}", "",
             f"Written by `python benchmarks/study.py report --out {_shown(folder)}"
             + "".join(f" --include {_shown(Path(f))}" for f in include) + "` from the sweep folders' run "
             "folders. Lifelong return: the mean episodic return of the episodes ending after the warm-up; 95% "
             "intervals are Student-t intervals of the mean over seeds (`lcpo.experiments.stats.t_interval`, "
             "coverage simulated at about 95% for 3, 5 and 10 seeds); differences are tested with Welch's t-test "
             "and Holm's correction, and only those that survive it are called significant. Our canonical traces "
             "are reconstructions of the paper's (docs/traces.md): compare ranks and gaps, not absolute values.", "",
             f"**Status**: {len(runs)} runs in the sweep: {status.get('done', 0)} finished, "
             f"{status.get('failed', 0)} failed, "
             + "".join(f"{status[k]} {k}, " for k in ("running", "interrupted") if status.get(k))
             + f"{status.get('missing', 0)} not run yet; "
             f"{done_cells} of {n_cells} (env, trace, agent) cells have at least one finished seed.", ""]
    windy = runs[runs["env"] != STRAGGLER_ENV]
    lines += ["## Lifelong return per cell (paper Tables 5-8)", ""] + cell_tables(runs, comp)
    lines += significance_text(comp, runs)
    lines += across_section(windy if len(windy) else runs, folder)
    if forgetting:
        lines += forgetting_lines(folders, folder, regimes, episodes, episode_steps)
    else:
        why = ("Not evaluated in this report (`--no-forgetting`)." if len(windy) else
               "Not evaluated: every run here is a straggler run, whose environment is driven by a request "
               "workload rather than a context trace, so there are no reference context regimes to hold fixed "
               "(`lcpo forgetting` refuses such a run: `lcpo.experiments.forgetting.NoContextTrace`). Forgetting "
               "as lost return is measured on the windy environments only.")
        lines += ["## Forgetting: lost return on reference contexts", "", why, ""]
    for f in folders:
        if (f / "runs").is_dir() and (runs[runs["run_dir"].map(lambda r: Path(r).parent.parent == f)]["env"]
                                      == STRAGGLER_ENV).any():
            lines += pb.straggler_scores_section(f)
    lines += settings_lines(runs, folders, folder)
    lines += runs_lines(runs, code)
    comp.to_csv(folder / "comparisons.csv", index=False)
    path = folder / "report.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=("harvest", "report"))
    p.add_argument("--out", type=Path, default=OUT, help="the sweep folder (default: %(default)s)")
    p.add_argument("--include", type=Path, action="append", default=[],
                   help="report: another sweep folder whose runs join the tables (repeatable)")
    p.add_argument("--force", action="store_true", help="harvest: rewrite existing compact files")
    p.add_argument("--no-drift", action="store_true",
                   help="harvest: skip the drift diagnostic (about 2 min of CPU per 8M-step run); a later harvest "
                        "without this flag writes it")
    p.add_argument("--allow-mixed-code", action="store_true",
                   help="report: pool seeds of one cell that ran on different commits (the report says so)")
    p.add_argument("--no-forgetting", action="store_true", help="report: leave out the forgetting evaluation")
    p.add_argument("--regimes", type=int, default=6, help="forgetting: reference context regimes per trace")
    p.add_argument("--episodes", type=int, default=10, help="forgetting: episodes per snapshot and regime")
    p.add_argument("--episode-steps", type=int, default=200, help="forgetting: steps per evaluation episode")
    a = p.parse_args(argv)
    for f in [a.out, *a.include]:
        if not f.is_dir():
            raise SystemExit(f"{f}: no such sweep folder")
    for flag in ("regimes", "episodes", "episode_steps"):
        if getattr(a, flag) < 1:
            raise SystemExit(f"--{flag.replace('_', '-')} must be >= 1, got {getattr(a, flag)}")
    if a.command == "harvest":
        pb.harvest([a.out, *a.include], a.force, drift=not a.no_drift)
    else:
        try:
            path = report(a.out, include=a.include, allow_mixed_code=a.allow_mixed_code,
                          forgetting=not a.no_forgetting, regimes=a.regimes, episodes=a.episodes,
                          episode_steps=a.episode_steps)
        except (FileNotFoundError, ValueError) as exc:  # a refused folder or cell (MixedCodeError): one line
            raise SystemExit(f"study.py report: error: {exc}") from None
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
