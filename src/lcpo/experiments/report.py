"""The sweep report: the paper's tables and figures from a results store.

Written into the output folder (``lcpo report RUNS_DIR --out DIR``):

- ``report.md``: the index: sweep size and status, compute time, the tables below in Markdown, LCPO's rank on
  every (env, trace), failures, links to the figures.
- ``lifelong_return.csv``: long table (one row per row key x scheme): n seeds, mean lifelong return, Student-t
  interval at the report's confidence (95% by default) (:func:`lcpo.experiments.stats.t_interval`; none for a one-seed cell).
  In ``report.md`` one table per environment like paper Tables 5-8: rows = traces, columns = online schemes
  plus a *best prescient* column (when ``prescient-*`` agents are present); a baseline's value carries
  :data:`MARK_BELOW_LCPO` / :data:`MARK_ABOVE_LCPO` when LCPO is significantly above / below it (below); the
  best online scheme of a row is bold only when its interval lies above every other online scheme's interval
  and every online scheme of the row has at least :data:`MIN_SEEDS_FOR_MARK` seeds. The seeds per cell are
  stated (``n``).
- ``comparisons.csv``: :func:`comparison_table`, LCPO against each online baseline per row: Welch's t-test,
  Holm-adjusted over every pair of the report, and the verdict.
- ``iqm.csv``, ``probability_of_improvement.csv``, ``performance_profile.png``: :func:`across_cells`, the
  aggregates of Agarwal et al. (2021) over rows of min-max normalized runs, with stratified-bootstrap intervals. The IQM and the profiles need
  :data:`MIN_SCHEMES_FOR_CDF` online schemes or more (with two, min-max normalization puts their means at 0 and 1
  in every row); with fewer ``iqm.csv`` holds its header only and the report says why.
- Provenance: the commits the runs recorded (:func:`check_code`); a cell whose seeds ran on different commits
  is refused (:class:`lcpo.persistence.provenance.MixedCodeError`) unless ``allow_mixed_code`` is given, and
  then the report names it.
- ``ranks.csv``: each online scheme's rank (1 = highest mean) per row, with the interval, ``best_separated`` and
  ``best_marked`` (separated and enough seeds: the bold mark).
- ``normalized_return.csv`` and ``normalized_return_cdf.png``: per (env, trace) the schemes' mean lifelong
  returns min-max normalized (0 = lowest, 1 = highest among agents) and their empirical CDF per scheme
  (paper Figure 3; x-axis padded to :data:`CDF_XLIM`, one line style and marker per scheme so coinciding curves
  stay visible). Min-max normalization reads means only: with two schemes it puts one at 0 and the other at 1
  on every (env, trace), however much their intervals overlap, so the figure is drawn only with at least
  :data:`MIN_SCHEMES_FOR_CDF` schemes, and it says on its face that intervals are not shown.
- ``ablation_<agent>_<hyperparameter>.{csv,png}`` for every hyperparameter the sweep varies for an agent
  (e.g. LCPO's reservoir size: paper Figure 4; its OOD threshold: Table 7).
- an *OOD detection* table in ``report.md`` for the schemes with an OOD detector (LCPO, LCPO-P): per (env,
  trace, scheme), means over seeds of the fraction of updates that found an anchor batch
  (``constrained_fraction``), the OOD fraction of the candidates (``ood_fraction``) and the threshold in force
  (``diag/ood/threshold``: sigma^2 in trace units for L2, ``D^2`` for Mahalanobis; it moves over a run with
  ``ood_threshold = "auto"``, whose per-window values are in each run's ``diagnostics.csv``).
- ``timeseries_<env>_<trace>.png``: episodic return over time per scheme (mean over seeds, min-max band)
  above the context (episode means of each context entry), like paper Figure 9. Every episode is placed at
  the middle of the steps it covers, ``step - length / 2`` (``step`` is its end), in both panels; returns are
  averaged in equal bins over ``[0, last step]``.
- ``results.parquet`` and ``episodes.parquet``: the store the report was made from
  (:mod:`lcpo.experiments.store`). Nothing is written into the runs folder.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from lcpo.experiments.config import slug
from lcpo.experiments.stats import (MeanCI, holm, iqm, iqm_ci, mean_ci, minmax_bounds, normalize_runs,
                                    normalize_scores, percent, performance_profile, poi_ci,
                                    probability_of_improvement, separates, welch_test)
from lcpo.experiments.store import load_store
from lcpo.persistence.provenance import UNKNOWN, MixedCodeError, mixed_code_cells

__all__ = ["aggregate_block", "across_cells", "check_code", "comparison_table", "interval_text", "lifelong_table",
           "normalized_table", "process_wall_time", "rank_table", "report", "write_report"]

_ROW_BASE = ["env", "trace"]
_ROW_OPTIONAL = ["trace_length", "steps", "warmup_steps", "reset"]


_VALUE_COLS = ("scheme", "agent", "prescient", "n", "mean", "ci_low", "ci_high", "rank", "of", "best_separated",
               "best_marked")

#: Fewest seeds every online scheme of a row needs before the row's best scheme may be marked bold (disjoint
#: t intervals): with 2 seeds a t interval rests on one degree of freedom, and marks stay for rows with more.
MIN_SEEDS_FOR_MARK = 3

#: x-limits of the normalized-return CDF: padded beyond [0, 1] so steps at 0 and 1 are not hidden by the frame.
CDF_XLIM = (-0.03, 1.03)

#: Fewest online schemes for the normalized-return CDF: with two, min-max normalization maps one to 0 and the
#: other to 1 on every (env, trace), whatever their intervals, and the CDF says nothing the table does not.
MIN_SCHEMES_FOR_CDF = 3


def _keys_of(table: pd.DataFrame) -> list[str]:
    """The row-key columns of a lifelong/rank table (env, trace, and any other varying config column)."""
    return [c for c in table.columns if c not in _VALUE_COLS]


def _is_prescient(scheme: str) -> bool:
    return scheme.startswith("prescient")


def _row_keys(runs: pd.DataFrame) -> list[str]:
    keys = list(_ROW_BASE)
    for col in _ROW_OPTIONAL:
        if col in runs and runs[col].astype(str).nunique() > 1:
            keys.append(col)
    return keys


def _ordered_schemes(runs: pd.DataFrame) -> list[str]:
    """Schemes in order of first appearance, LCPO variants first."""
    seen = list(dict.fromkeys(runs["scheme"]))
    return [s for s in seen if s.split("[")[0] == "lcpo"] + [s for s in seen if s.split("[")[0] != "lcpo"]


def _done(runs: pd.DataFrame) -> pd.DataFrame:
    done = runs[(runs["status"] == "done") & np.isfinite(runs["lifelong_return"].astype(float))]
    return done.copy()


#: Order and wording of the run states in the report's first sentence (the store's ``status`` values).
_STATUS_WORDS = (("done", "done"), ("failed", "failed"), ("running", "running"),
                 ("interrupted", "interrupted (started, not running: rerun the sweep or `lcpo resume` to continue)"),
                 ("missing", "not started"))


def _status_text(status: dict) -> str:
    """``"3 done, 1 running, 2 not started"`` from the store's status counts (zero counts left out)."""
    words = dict(_STATUS_WORDS)
    order = [k for k, _ in _STATUS_WORDS] + sorted(set(status) - set(words))
    return ", ".join(f"{status[k]} {words.get(k, k)}" for k in order if status.get(k))


def _cell_name(key) -> str:
    """A cell's name in messages: its key values joined by ``/`` (the env's namespace dropped)."""
    key = key if isinstance(key, tuple) else (key,)
    return "/".join(str(k).split("/")[-1] if i == 0 else str(k) for i, k in enumerate(key))


def check_code(runs: pd.DataFrame, allow_mixed_code: bool = False) -> dict:
    """Whether the seeds pooled in each cell ran on the same code (summary.json ``code``, issue 27 item 5).

    Args:
        runs: the store's per-run table (``code_commit`` column; missing, or None for a run: unknown).
        allow_mixed_code: pool cells whose seeds ran on different commits anyway (the report says so).

    Returns:
        ``{"commits": {commit or "unknown": runs}, "mixed": {cell: [commits]}, "dirty": runs that ran from a
        modified tree, "allowed": allow_mixed_code}``: commits and dirty over the finished runs, ``mixed`` over the
        cells' pooled runs (those with a lifelong return).

    A seed that ran from a modified tree (``code_dirty``) ran on other code than a clean seed of the same
    commit: it is labelled ``COMMIT+dirty`` and the two are mixed. Seeds that all ran from a modified tree on one
    commit are pooled (git cannot tell their changes apart) and counted under ``dirty``.

    Raises:
        MixedCodeError: a cell mixes commits (a known one with another, a clean one with the same commit
            modified, or a known one with unknown ones) and ``allow_mixed_code`` is False; the message names the
            cell and its commits.
    """
    done = runs[runs["status"] == "done"]  # every finished run's code is stated; the pooled ones are checked
    pooled = _done(runs)
    keys = _row_keys(runs) + ["scheme"]
    commits = (done["code_commit"] if "code_commit" in done else pd.Series([None] * len(done), index=done.index))
    commits = commits.map(lambda c: str(c)[:7] if isinstance(c, str) and c else UNKNOWN)
    dirty_flags = (done["code_dirty"].map(lambda d: isinstance(d, (bool, np.bool_)) and bool(d))
                   if "code_dirty" in done else pd.Series([False] * len(done), index=done.index))
    # a seed run from a modified tree ran on other code than a clean seed of the same commit: its label differs
    labels = pd.Series([c + ("+dirty" if c != UNKNOWN and d else "") for c, d in zip(commits, dirty_flags)],
                       index=done.index, dtype=object)
    cells = {_cell_name(k): labels.loc[g.index].tolist() for k, g in pooled.groupby(keys, sort=False, dropna=False)}
    mixed = mixed_code_cells(cells)
    if mixed and not allow_mixed_code:
        cell, cs = next(iter(mixed.items()))
        more = f" (and {len(mixed) - 1} more cell(s))" if len(mixed) > 1 else ""
        raise MixedCodeError(f"cell {cell} pools seeds that ran on different code ({', '.join(cs)}){more}; "
                             f"rerun them on one commit, or pass --allow-mixed-code to pool them anyway")
    dirty = int(dirty_flags.sum())
    return {"commits": commits.value_counts().to_dict(), "mixed": mixed, "dirty": dirty,
            "allowed": bool(allow_mixed_code)}


def _code_text(code: dict) -> str:
    """The report's provenance paragraph."""
    parts = ", ".join(f"{c} ({n} run{'s' if n != 1 else ''})" for c, n in sorted(code["commits"].items()))
    lines = [f"Code of the finished runs (summary.json `code`): {parts or 'none'}."]
    if UNKNOWN in code["commits"]:
        lines.append(f"{code['commits'][UNKNOWN]} run(s) recorded no commit (made before summary.json recorded "
                     "one, or without git): their code is unknown.")
    if code["dirty"]:
        lines.append(f"{code['dirty']} run(s) ran from a tree with uncommitted changes to the package.")
    if code["mixed"]:
        cells = "; ".join(f"{c}: {', '.join(v)}" for c, v in code["mixed"].items())
        lines.append(f"**Seeds that ran on different code are pooled, as told (--allow-mixed-code)**: {cells}.")
    elif code["allowed"]:
        lines.append("Pooling across commits was allowed (--allow-mixed-code); no cell needed it.")
    return " ".join(lines)


def lifelong_table(runs: pd.DataFrame, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Mean lifelong return and Student-t interval across seeds per row key and scheme (long form).

    Args:
        runs: the store's per-run table (:func:`lcpo.experiments.store.collect`); only ``done`` runs count.
        confidence: interval level.
        seed: unused by the t interval (kept for callers that pass it).

    Returns:
        Columns: row keys (env, trace, and any other varying config column), ``scheme``, ``agent``,
        ``prescient``, ``n``, ``mean``, ``ci_low``, ``ci_high`` (:func:`lcpo.experiments.stats.t_interval`;
        NaN for a one-seed cell).
    """
    done = _done(runs)
    keys = _row_keys(runs)
    out = []
    for group_key, grp in done.groupby(keys + ["scheme"], sort=False, dropna=False):
        ci = mean_ci(grp["lifelong_return"].to_numpy(dtype=float), confidence=confidence, seed=seed,
                     single_seed="nan", cell=_cell_name(group_key))
        rec = dict(zip(keys + ["scheme"], group_key))
        rec.update(agent=str(grp["agent"].iloc[0]), prescient=_is_prescient(rec["scheme"]), n=ci.n, mean=ci.mean,
                   ci_low=ci.low, ci_high=ci.high)
        out.append(rec)
    cols = keys + ["scheme", "agent", "prescient", "n", "mean", "ci_low", "ci_high"]
    return pd.DataFrame(out, columns=cols)


def _cis(grp: pd.DataFrame) -> dict[str, MeanCI]:
    return {r.scheme: MeanCI(r.mean, r.ci_low, r.ci_high, r.n) for r in grp.itertuples()}


def rank_table(table: pd.DataFrame) -> pd.DataFrame:
    """Rank of every online (non-prescient) scheme per row, 1 = highest mean lifelong return.

    Args:
        table: :func:`lifelong_table` output.

    Returns:
        ``table``'s online rows plus ``rank`` (int), ``of`` (number of online schemes in the row),
        ``best_separated`` (the row's best scheme's interval lies above all others') and ``best_marked``
        (``best_separated`` and every online scheme of the row has ``n >= MIN_SEEDS_FOR_MARK`` seeds: the
        report's bold mark).
    """
    keys = _keys_of(table)
    online = table[~table["prescient"].astype(bool)].copy()
    parts = []
    for _, grp in online.groupby(keys, sort=False, dropna=False):
        grp = grp.sort_values("mean", ascending=False).copy()
        grp["rank"] = np.arange(1, len(grp) + 1)
        grp["of"] = len(grp)
        cis = _cis(grp)
        best = grp["scheme"].iloc[0]
        sep = separates(cis[best], [c for s, c in cis.items() if s != best]) if len(grp) > 1 else False
        grp["best_separated"] = sep
        grp["best_marked"] = bool(sep and int(grp["n"].min()) >= MIN_SEEDS_FOR_MARK)
        parts.append(grp)
    if not parts:
        return online.assign(rank=pd.Series(dtype=int), of=pd.Series(dtype=int),
                             best_separated=pd.Series(dtype=bool), best_marked=pd.Series(dtype=bool))
    return pd.concat(parts, ignore_index=True)


#: the verdicts of :func:`comparison_table`
HIGHER, LOWER, NOT_SIGNIFICANT, NOT_TESTED = "LCPO higher", "LCPO lower", "not significant", "not tested (1 seed)"
#: the verdict of a pair whose two cells are each constant over their seeds (Welch's test is undefined)
NO_VARIANCE = "not tested (no variance)"


def _lcpo_schemes(schemes) -> list[str]:
    return [s for s in schemes if s.split("[")[0] == "lcpo" and not _is_prescient(s)]


def comparison_table(runs: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """LCPO against each online baseline in each row: Welch's t-test, Holm-adjusted over the whole family.

    The family is every (row, LCPO scheme, baseline) pair where both cells have at least 2 seeds and not both
    are constant over their seeds; a pair with a one-seed cell is listed as not tested (:data:`NOT_TESTED`), a
    pair of two constant cells (e.g. every seed of both at a sparse reward's floor) as :data:`NO_VARIANCE`,
    with ``p`` NaN, and the rest of the report is still written. A difference is significant when its
    Holm-adjusted two-sided p-value is at most ``1 - confidence`` (:func:`lcpo.experiments.stats.welch_test`,
    :func:`lcpo.experiments.stats.holm`).

    Args:
        runs: the store's per-run table (``done`` runs count).
        confidence: 1 - the family-wise error rate.

    Returns:
        One row per pair: the row keys, ``scheme`` (LCPO), ``baseline``, ``n``, ``n_baseline``, ``mean``,
        ``mean_baseline``, ``diff`` (LCPO minus baseline), ``t``, ``df``, ``p``, ``p_holm``, ``significant``,
        ``verdict`` (:data:`HIGHER`, :data:`LOWER`, :data:`NOT_SIGNIFICANT`, :data:`NOT_TESTED` or
        :data:`NO_VARIANCE`).
    """
    done = _done(runs)
    keys = _row_keys(runs)
    recs = []
    for rkey, grp in done.groupby(keys, sort=False, dropna=False):
        rkey = rkey if isinstance(rkey, tuple) else (rkey,)
        vals = {s: g["lifelong_return"].to_numpy(dtype=float) for s, g in grp.groupby("scheme", sort=False)}
        for lc in _lcpo_schemes(vals):
            for b in vals:
                if b.split("[")[0] == "lcpo" or _is_prescient(b):
                    continue
                x, y = vals[lc], vals[b]
                rec = dict(zip(keys, rkey), scheme=lc, baseline=b, n=x.size, n_baseline=y.size,
                           mean=float(x.mean()), mean_baseline=float(y.mean()), diff=float(x.mean() - y.mean()),
                           t=np.nan, df=np.nan, p=np.nan, constant=False)
                if x.size >= 2 and y.size >= 2 and np.all(x == x[0]) and np.all(y == y[0]):
                    rec["constant"] = True  # Welch's test is undefined: listed, not tested
                elif x.size >= 2 and y.size >= 2:
                    w = welch_test(x, y, cell=f"{_cell_name(rkey)}: {lc} vs {b}")
                    rec.update(t=w.t, df=w.df, p=w.p)
                recs.append(rec)
    cols = keys + ["scheme", "baseline", "n", "n_baseline", "mean", "mean_baseline", "diff", "t", "df", "p",
                   "p_holm", "significant", "verdict"]
    out = pd.DataFrame(recs, columns=[c for c in cols if c not in ("p_holm", "significant", "verdict")]
                       + ["constant"])
    out["p_holm"] = np.nan
    tested = out["p"].notna()
    if tested.any():
        out.loc[tested, "p_holm"] = holm(out.loc[tested, "p"].to_numpy())
    alpha = 1.0 - confidence
    out["significant"] = tested & (out["p_holm"] <= alpha)
    out["verdict"] = np.where(~tested, np.where(out["constant"].astype(bool), NO_VARIANCE, NOT_TESTED),
                              np.where(~out["significant"], NOT_SIGNIFICANT,
                                       np.where(out["diff"] > 0, HIGHER, LOWER)))
    return out[cols]


#: Beyond this many optional online schemes, :func:`aggregate_block` tries subsets by coverage order only.
_BLOCK_EXHAUSTIVE = 12


def aggregate_block(rows_of: dict[str, Sequence], required: Sequence[str] = ()) -> tuple[list[str], list]:
    """The task set of the across-row aggregates: the largest block of schemes x rows in which every scheme
    finished in every row, so that every scheme's IQM and profile pools the same rows (Agarwal et al. 2021
    aggregate every algorithm over one task set; a scheme's score pooled over only the rows it ran, or measured
    against a field missing a stronger scheme, would not be comparable with the others').

    Largest: the most (scheme, row) pairs, then the most rows, then the most schemes, then the first in the given
    order; it must hold every ``required`` scheme (the report's LCPO variants) and at least 2 schemes. Subsets of
    up to :data:`_BLOCK_EXHAUSTIVE` optional schemes are searched exhaustively, beyond that those formed by adding
    schemes in order of how many rows they cover.

    Args:
        rows_of: each online scheme's rows (hashable row keys, a list or set) where it finished at least one run,
            in the report's order of schemes.
        required: schemes the block must hold (absent ones are ignored).

    Returns:
        ``(schemes, rows)``: the block's schemes in the given order and its rows in order of first appearance
        (scheme by scheme, as ``rows_of`` iterates them);
        ``([], [])`` when no 2 schemes share a row.
    """
    from itertools import combinations

    names = list(rows_of)
    must = [s for s in names if s in set(required)]
    optional = [s for s in names if s not in set(must)]
    order = list(dict.fromkeys(r for s in names for r in rows_of[s]))
    if len(optional) <= _BLOCK_EXHAUSTIVE:
        candidates = (set(must) | set(c) for k in range(len(optional) + 1) for c in combinations(optional, k))
    else:
        by_cover = sorted(optional, key=lambda s: -len(rows_of[s]))
        candidates = (set(must) | set(by_cover[:k]) for k in range(len(by_cover) + 1))
    best, best_key = ([], []), (0, 0, 0)
    for chosen in candidates:
        if len(chosen) < 2:
            continue
        rows = set.intersection(*(set(rows_of[s]) for s in chosen))
        key = (len(chosen) * len(rows), len(rows), len(chosen))
        if rows and key > best_key:
            best_key = key
            best = ([s for s in names if s in chosen], [r for r in order if r in rows])
    return best


def across_cells(runs: pd.DataFrame, table: pd.DataFrame, confidence: float = 0.95, seed: int = 0,
                 n_resamples: int = 2000) -> dict:
    """Aggregates over rows (env, trace, ...) of normalized scores (Agarwal et al. 2021), over one task set.

    The IQM and the performance profiles pool the rows of :func:`aggregate_block`: the largest block of online
    schemes x rows in which every scheme finished, with the LCPO scheme that finished in the most rows always in
    (other LCPO variants, e.g. an ablation run on one row, join only where they do not shrink the block). Schemes outside it, and rows
    outside it, are returned (``left_out_schemes``, ``left_out_rows``) for the report to name. Each run's
    lifelong return is min-max normalized by its row's lowest and highest mean over the block's schemes and the
    prescient schemes that finished in every block row (paper Figure 3's scale;
    :func:`lcpo.experiments.stats.minmax_bounds`): the same field in every row. Per online scheme of the block:
    the IQM with a stratified-bootstrap interval and the performance profile with bands; per LCPO scheme and
    online baseline (block or not): the probability of improvement over their common rows (a pairwise measure,
    comparable on any shared rows) with its interval.

    Args:
        runs: the store's per-run table (``done`` runs with a finite lifelong return count).
        table: :func:`lifelong_table` of ``runs`` (kept for the signature; the scores come from ``runs``).
        confidence: the intervals' level.
        seed: the bootstrap generator's seed.
        n_resamples: bootstrap resamples.

    Returns:
        ``{"iqm": DataFrame(scheme, cells, runs, iqm, ci_low, ci_high), "poi": DataFrame(scheme, baseline,
        cells, poi, ci_low, ci_high), "profiles": {scheme: (taus, profile, low, high)}, "rows": [row names of
        the block], "field": [the schemes whose means set the normalization], "left_out_schemes": {scheme: n rows
        it finished}, "left_out_rows": {row name: [block schemes missing there]}}``; intervals are NaN where every
        cell of a scheme has one seed.
        IQM, P(LCPO > X) and their bounds are rounded to 12 decimals (the normalization's float error lies below).
    """
    done = _done(runs)
    keys = _row_keys(runs)
    scores: dict[str, dict[str, np.ndarray]] = {}
    for k, g in done.groupby(keys + ["scheme"], sort=False, dropna=False):
        scores.setdefault(k[-1], {})[_cell_name(k[:-1])] = g["lifelong_return"].to_numpy(dtype=float)
    empty = {"iqm": pd.DataFrame(), "poi": pd.DataFrame(), "profiles": {}, "rows": [], "field": [],
             "left_out_schemes": {}, "left_out_rows": {}}
    if not scores:
        return empty
    online = [s for s in _ordered_schemes(done) if not _is_prescient(s)]
    lcpos = _lcpo_schemes(online)  # required: the LCPO scheme that finished in the most rows (plain LCPO first)
    required = [max(lcpos, key=lambda s: (len(scores[s]), s == "lcpo"))] if lcpos else []
    block, rows = aggregate_block({s: list(scores[s]) for s in online}, required=required)
    field = block + [s for s in scores if _is_prescient(s) and all(r in scores[s] for r in rows)]
    scaled = {s: {r: scores[s][r] for r in rows} for s in field} if rows else {}
    bounds = minmax_bounds(scaled) if scaled else {}
    norm = {s: normalize_runs(scaled[s], bounds) for s in block}
    all_rows = list(dict.fromkeys(r for s in online for r in scores[s]))
    taus = np.linspace(-0.25, 1.25, 121)
    iqm_rows, poi_rows, profiles = [], [], {}
    for i, s in enumerate(online):
        if s not in norm:
            continue
        c = norm[s]
        if any(v.size >= 2 for v in c.values()):
            ci = iqm_ci(c, n_resamples=n_resamples, confidence=confidence, seed=seed + i)
            lo, hi = ci.low, ci.high
        else:
            ci, lo, hi = MeanCI(iqm(c), np.nan, np.nan, sum(v.size for v in c.values())), np.nan, np.nan
        iqm_rows.append({"scheme": s, "cells": len(c), "runs": ci.n, **_denoised(iqm=ci.mean, ci_low=lo, ci_high=hi)})
        profiles[s] = (taus, *performance_profile(c, taus, n_resamples=n_resamples, confidence=confidence,
                                                  seed=seed + i))
    for lc in _lcpo_schemes(online):
        for j, b in enumerate(online):
            if b.split("[")[0] == "lcpo":
                continue
            x, y = scores[lc], scores[b]
            common = [c for c in x if c in y]
            if not common:
                continue
            xs, ys = {c: x[c] for c in common}, {c: y[c] for c in common}
            if any(v.size >= 2 for v in (*xs.values(), *ys.values())):
                ci = poi_ci(xs, ys, n_resamples=n_resamples, confidence=confidence, seed=seed + 100 + j)
                lo, hi = ci.low, ci.high
            else:
                ci, lo, hi = MeanCI(probability_of_improvement(xs, ys), np.nan, np.nan, len(common)), np.nan, np.nan
            poi_rows.append({"scheme": lc, "baseline": b, "cells": len(common),
                             **_denoised(poi=ci.mean, ci_low=lo, ci_high=hi)})
    return {"iqm": pd.DataFrame(iqm_rows), "poi": pd.DataFrame(poi_rows), "profiles": profiles, "rows": rows,
            "field": field, "left_out_schemes": {s: len(scores[s]) for s in online if s not in block},
            "left_out_rows": {r: [s for s in block if r not in scores[s]] for r in all_rows if r not in rows}}


def _denoised(**values: float) -> dict[str, float]:
    """Normalized aggregates rounded to 12 decimals: min-max normalization's float error (about 1e-14, e.g. an
    IQM of 1.4e-14 for a scheme whose every run scored 0) is not a value to print."""
    return {k: (float(np.round(v, 12)) + 0.0 if np.isfinite(v) else v) for k, v in values.items()}


def _profile_figure(profiles: dict, path: Path, confidence: float) -> None:
    """Performance profiles with their bootstrap bands (Agarwal et al. 2021, Figure 5 style)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for i, (s, (taus, prof, lo, hi)) in enumerate(profiles.items()):
        (line,) = ax.plot(taus, prof, label=s, linestyle=_LINESTYLES[i % len(_LINESTYLES)], lw=1.4)
        ax.fill_between(taus, lo, hi, color=line.get_color(), alpha=0.15, lw=0)
    ax.set_xlabel("normalized lifelong return tau (0 = worst, 1 = best scheme mean of the env and trace)")
    ax.set_ylabel("fraction of runs with score > tau")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.set_title(f"Performance profiles (runs per (env, trace) weighted equally; {percent(confidence)}% "
                 "stratified-bootstrap bands)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _p(x: float) -> str:
    return "-" if not np.isfinite(x) else (f"{x:.3f}" if x >= 0.001 else f"{x:.1e}")


def _comparison_md(comp: pd.DataFrame) -> str:
    keys = [c for c in comp.columns if c not in ("scheme", "baseline", "n", "n_baseline", "mean", "mean_baseline",
                                                 "diff", "t", "df", "p", "p_holm", "significant", "verdict")]
    rows = [[*(str(getattr(r, k)) for k in keys), r.scheme, r.baseline, f"{r.n} / {r.n_baseline}", _num(r.diff),
             _p(r.p), _p(r.p_holm), f"**{r.verdict}**" if r.significant else r.verdict] for r in comp.itertuples()]
    return _md_table(keys + ["LCPO", "baseline", "seeds", "difference of means", "Welch p", "Holm p",
                             "verdict"], rows)


def normalized_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per row, every scheme's mean min-max normalized across schemes (paper Figure 3).

    A row with a single scheme has no scale (its lowest and highest mean are one) and is left out: normalizing
    it would score that scheme 1, "the best", against nobody.

    Returns:
        ``table``'s row keys, ``scheme`` and ``normalized`` in [0, 1], for the rows with at least 2 schemes.
    """
    keys = _keys_of(table)
    parts = []
    for _, grp in table.groupby(keys, sort=False, dropna=False):
        if len(grp) < 2:
            continue
        grp = grp[keys + ["scheme"]].assign(normalized=normalize_scores(grp["mean"].to_numpy(dtype=float)))
        parts.append(grp)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=keys + ["scheme", "normalized"])


def _num(x: float) -> str:
    if not np.isfinite(x):
        return "nan"
    mag = abs(x)
    return f"{x:.1f}" if mag >= 100 else (f"{x:.2f}" if mag >= 1 else f"{x:.3g}")


def interval_text(mean: float, low: float = float("nan"), high: float = float("nan")) -> str:
    """``mean [low, high]`` as reports print it, with the decimals that show the interval.

    The decimals are those that give the half-width ``(high - low) / 2`` two significant digits, at least 1 and at
    most 6, the same for all three numbers: ``-172.5 [-177.5, -167.5]`` and ``2.290 [2.280, 2.300]`` (a 1-decimal
    rule would print ``2.3 [2.3, 2.3]``, hiding both the interval and any difference between cells of that
    scale). Without a finite interval (1 seed) the mean alone is printed with 3 significant digits and at least 1
    decimal; a zero-width interval (seeds all equal) is printed at those decimals.

    Args:
        mean, low, high: floats in the score's units (NaN ``low``/``high``: no interval).

    Returns:
        The text; ``"n/a"`` for a non-finite mean.
    """
    if not np.isfinite(mean):
        return "n/a"
    half = (high - low) / 2 if np.isfinite(low) and np.isfinite(high) else float("nan")
    if not np.isfinite(half) or half <= 0:
        mag = abs(mean)
        d = 1 if mag == 0 else int(min(6, max(1, 2 - np.floor(np.log10(mag)))))
        text = f"{mean:.{d}f}"
        return text if not np.isfinite(half) else f"{text} [{low:.{d}f}, {high:.{d}f}]"
    d = int(min(6, max(1, 1 - np.floor(np.log10(half)))))
    return f"{mean:.{d}f} [{low:.{d}f}, {high:.{d}f}]"


def _cell(mean: float, low: float, high: float) -> str:
    if not np.isfinite(low):
        return f"{_num(mean)}"
    return f"{_num(mean)} [{_num(low)}, {_num(high)}]"


def _seeds_text(table: pd.DataFrame, confidence: float = 0.95, finished: int = 0) -> str:
    """Report sentence stating the seeds per cell and what the t interval's coverage is (``finished``: the
    finished runs, with a lifelong return or not)."""
    if table.empty:
        return ("Seeds per cell: none finished yet." if not finished else
                "Seeds per cell: none, no finished run has a lifelong return yet.")
    n_min, n_max = int(table["n"].min()), int(table["n"].max())
    count = (f"Every cell averages {n_min} seed{'s' if n_min != 1 else ''}" if n_min == n_max
             else f"Cells average {n_min} to {n_max} seeds (each cell shows its n)")
    if n_max < 2:
        return (f"{count} (column n of lifelong_return.csv): no cell has an interval and no difference is tested; "
                "a single seed says nothing about the spread between seeds.")
    simulated = " (simulated: about 95% at 3, 5 and 10 seeds; tests/experiments/test_stats.py)" \
        if round(confidence, 6) == 0.95 else ""
    ones = (" Cells with one seed have no interval and are not tested." if n_min < 2 else "")
    return (f"{count} (column n of lifelong_return.csv). The t interval's {percent(confidence)}% coverage is "
            f"exact for normal scores at any n >= 2{simulated}; with few seeds it is wide, as it should be.{ones}")


def process_wall_time(runs: pd.DataFrame) -> float:
    """The summed wall time (s) of the processes that ran ``runs``, each population counted once.

    A run trained in a population of N seeds records the population's wall time (``wall_time_s``), shared by its
    N seeds: summing ``wall_time_s`` over the seeds would count a 10-seed population's time ten times. Each run
    contributes its own share: ``wall_share_s`` where it recorded one (each session's wall time divided by the
    seeds it ran with, right for a seed that went on alone after its population), else ``wall_time_s / N``
    (column ``population_size``, 1 when absent).

    Args:
        runs: the store's per-run table (``wall_time_s`` float seconds, NaN for unfinished runs; optional
            ``wall_share_s`` float seconds, NaN where not recorded; optional ``population_size`` int >= 1).

    Returns:
        float seconds (0.0 when no run has a wall time).

    Raises:
        ValueError: if a ``population_size`` is below 1.

    Example:
        >>> process_wall_time(pd.DataFrame({"wall_time_s": [60.0, 60.0, 10.0], "population_size": [2, 2, 1]}))
        70.0
    """
    wall = runs["wall_time_s"].to_numpy(dtype=float)
    size = (runs["population_size"].fillna(1).to_numpy(dtype=float) if "population_size" in runs.columns
            else np.ones(len(runs)))
    if (size < 1).any():
        raise ValueError(f"population_size must be >= 1, got {size[size < 1][0]:g}")
    own = wall / size
    if "wall_share_s" in runs.columns:
        share = pd.to_numeric(runs["wall_share_s"], errors="coerce").to_numpy(dtype=float)
        own = np.where(np.isfinite(share), share, own)
    return float(np.nansum(own))


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.1f} s"


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


#: marks of a baseline's cell in the main tables: LCPO significantly above / below it (Welch, Holm)
MARK_BELOW_LCPO, MARK_ABOVE_LCPO = "\u2020", "\u2021"


def _marks(comp: pd.DataFrame | None, keys: list[str]) -> dict:
    """(row key tuple, baseline) -> mark, for rows with exactly one LCPO scheme."""
    if comp is None or comp.empty:
        return {}
    out = {}
    for rkey, grp in comp.groupby(keys, sort=False, dropna=False):
        if grp["scheme"].nunique() != 1:
            continue
        rkey = rkey if isinstance(rkey, tuple) else (rkey,)
        for r in grp[grp["significant"]].itertuples():
            out[(rkey, r.baseline)] = MARK_BELOW_LCPO if r.diff > 0 else MARK_ABOVE_LCPO
    return out


def _main_tables(table: pd.DataFrame, ranks: pd.DataFrame, schemes: list[str],
                 comp: pd.DataFrame | None = None) -> str:
    keys = _keys_of(table)
    marks = _marks(comp, keys)
    show_n = table["n"].nunique() > 1  # a uniform seed count is stated once in the text instead
    present = set(table["scheme"])
    online = [s for s in schemes if s in present and not _is_prescient(s)]
    has_prescient = bool(table["prescient"].any())
    sections = []
    for env, env_tab in table.groupby("env", sort=False):
        row_keys = [k for k in keys if k != "env"]
        header = row_keys + online + (["best prescient"] if has_prescient else [])
        rows = []
        for rkey, grp in env_tab.groupby(row_keys, sort=False, dropna=False):
            rkey = rkey if isinstance(rkey, tuple) else (rkey,)
            by = {r.scheme: r for r in grp.itertuples()}
            rk = ranks[(ranks["env"] == env)]
            for k, v in zip(row_keys, rkey):
                rk = rk[rk[k].astype(str) == str(v)]
            best = rk.sort_values("rank")["scheme"].iloc[0] if len(rk) else None
            sep = bool(rk["best_marked"].iloc[0]) if len(rk) else False
            cells = [str(v) for v in rkey]
            for s in online:
                if s not in by:
                    cells.append("-")
                    continue
                r = by[s]
                c = _cell(r.mean, r.ci_low, r.ci_high) + (f" (n={r.n})" if show_n else "")
                c += marks.get(((env, *rkey), s), "")
                cells.append(f"**{c}**" if (s == best and sep) else c)
            if has_prescient:
                pres = [r for s, r in by.items() if _is_prescient(s)]
                if pres:
                    r = max(pres, key=lambda r: r.mean)
                    n = f", n={r.n}" if show_n else ""
                    cells.append(f"{_cell(r.mean, r.ci_low, r.ci_high)} ({r.scheme}{n})")
                else:
                    cells.append("-")
            rows.append(cells)
        sections.append(f"### {env}\n\n{_md_table(header, rows)}")
    return "\n\n".join(sections)


def _lcpo_ranks(ranks: pd.DataFrame, confidence: float = 0.95) -> str:
    lc = ranks[ranks["agent"] == "lcpo"]
    if lc.empty:
        return "No LCPO runs in this sweep."
    keys = _keys_of(ranks)
    rows = [[*(str(getattr(r, k)) for k in keys), r.scheme, f"{r.rank} of {r.of}", _cell(r.mean, r.ci_low, r.ci_high)]
            for r in lc.itertuples()]
    return _md_table(keys + ["scheme", "rank", f"lifelong return [{percent(confidence)}% CI]"], rows)


_LINESTYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "v", "D", "x", "+", "*")


def _cdf_figure(norm: pd.DataFrame, schemes: list[str]):
    """The normalized-return CDF figure (paper Figure 3); returns the matplotlib figure (caller closes it).

    Each scheme's empirical CDF is a post-step curve from ``CDF_XLIM[0]`` (value 0) through its sorted
    normalized scores (a jump of 1/n at each) to ``CDF_XLIM[1]`` (value 1), so a scheme at 1 everywhere is a
    visible jump at x = 1 inside the padded axes. Schemes get distinct line styles and markers (markers at the
    scores only), so curves that coincide (e.g. two schemes tied on every pair) remain distinguishable.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    lo, hi = CDF_XLIM
    for i, s in enumerate(schemes):
        v = np.sort(norm.loc[norm["scheme"] == s, "normalized"].to_numpy(dtype=float))
        if v.size == 0:
            continue
        x = np.concatenate([[lo], v, [hi]])
        y = np.concatenate([[0.0], np.arange(1, v.size + 1) / v.size, [1.0]])
        ax.step(x, y, where="post", label=s, linestyle=_LINESTYLES[i % len(_LINESTYLES)],
                marker=_MARKERS[i % len(_MARKERS)], markevery=slice(1, v.size + 1), markersize=4,
                lw=max(0.8, 2.2 - 0.3 * i), alpha=0.9)
    ax.set_xlabel("normalized lifelong return (0 = worst, 1 = best agent per env and trace)")
    ax.set_ylabel("fraction of (env, trace) pairs")
    ax.set_xlim(lo, hi)
    ax.set_ylim(-0.02, 1.04)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # never over a curve
    ax.set_title("Normalized lifelong return CDF (paper Figure 3)\n"
                 "min-max of the seed means: confidence intervals are not shown; overlapping schemes can sit "
                 "far apart", fontsize=9)
    fig.tight_layout()
    return fig


def _plot_cdf(norm: pd.DataFrame, schemes: list[str], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig = _cdf_figure(norm, schemes)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _ablations(done: pd.DataFrame, out_dir: Path, confidence: float, seed: int) -> list[tuple[str, Path, Path, str]]:
    """Tables and plots for every hyperparameter varied for an agent; returns (title, csv, png, markdown)."""
    import matplotlib.pyplot as plt

    results = []
    hp_cols = [c for c in done.columns if c.startswith("hp/")]
    for agent, adf in done.groupby("agent", sort=False):
        for col in hp_cols:
            vals = adf[col].dropna()
            if vals.astype(str).nunique() < 2:
                continue
            name = col[3:]
            others = [c for c in hp_cols if c != col and adf[c].notna().any()]
            keys = ["env", "trace", *others]
            recs = []
            for gkey, grp in adf[adf[col].notna()].groupby(keys + [col], sort=True, dropna=False):
                ci = mean_ci(grp["lifelong_return"].to_numpy(dtype=float), confidence=confidence, seed=seed,
                             single_seed="nan", cell=_cell_name(gkey))
                recs.append({**dict(zip(keys + [name], gkey)), "n": ci.n, "mean": ci.mean, "ci_low": ci.low,
                             "ci_high": ci.high})
            tab = pd.DataFrame(recs)
            stem = f"ablation_{slug(agent)}_{slug(name)}"
            csv_path, png_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.png"
            tab.to_csv(csv_path, index=False)
            numeric = pd.api.types.is_numeric_dtype(tab[name])
            fig, ax = plt.subplots(figsize=(6, 4))
            for lkey, grp in tab.groupby(keys, sort=False, dropna=False):
                grp = grp.sort_values(name)
                x = grp[name].to_numpy(dtype=float) if numeric else np.arange(len(grp))
                lo = (grp["mean"] - grp["ci_low"]).fillna(0).to_numpy()
                hi = (grp["ci_high"] - grp["mean"]).fillna(0).to_numpy()
                label = " / ".join(str(v) for v in (lkey if isinstance(lkey, tuple) else (lkey,)))
                ax.errorbar(x, grp["mean"], yerr=[lo, hi], marker="o", capsize=3, label=label)
                if not numeric:
                    ax.set_xticks(x, grp[name].astype(str))
            if numeric and (tab[name] > 0).all() and tab[name].max() / tab[name].min() >= 10:
                ax.set_xscale("log")
            ax.set_xlabel(name)
            ax.set_ylabel(f"lifelong return (mean, {percent(confidence)}% CI)")
            ax.set_title(f"{agent}: {name} ablation")
            ax.legend(fontsize=6)
            fig.tight_layout()
            fig.savefig(png_path, dpi=120)
            plt.close(fig)
            md_rows = [[*(str(row[k]) for k in keys), str(row[name]), str(row["n"]),
                        _cell(row["mean"], row["ci_low"], row["ci_high"])] for row in tab.to_dict("records")]
            md = _md_table(keys + [name, "n", f"lifelong return [{percent(confidence)}% CI]"], md_rows)
            results.append((f"{agent}: {name}", csv_path, png_path, md))
    return results


def _ood_table(done: pd.DataFrame) -> str:
    """Markdown table of the OOD diagnostics of the schemes that report them ("" when none does)."""
    if "diag/ood/fraction" not in done.columns:
        return ""
    ood = done[done["diag/ood/fraction"].notna()]
    rows = []
    for (env, trace, scheme), grp in ood.groupby(["env", "trace", "scheme"], sort=True, dropna=False):
        thr = grp["diag/ood/threshold"].mean() if "diag/ood/threshold" in grp.columns else math.nan
        rows.append([str(env), str(trace), scheme, f"{grp['constrained_fraction'].mean():.2f}",
                     f"{grp['ood_fraction'].mean():.2f}", "n/a" if math.isnan(thr) else f"{thr:.3g}"])
    if not rows:
        return ""
    return _md_table(["env", "trace", "scheme", "updates with anchors", "OOD fraction of candidates",
                      "mean threshold"], rows)


def _episode_midpoints(ep: pd.DataFrame) -> np.ndarray:
    """Middle of the steps each episode of one run covers, ``(start + end) / 2`` (float64, shape ``(E,)``).

    ``step`` is the global step at the episode's end; its start is ``step - length``, or, without a ``length``
    column, the previous episode's end (0 for the first).
    """
    end = ep["step"].to_numpy(dtype=float)
    if "length" in ep and ep["length"].notna().all():
        start = end - ep["length"].to_numpy(dtype=float)
    else:
        order = np.argsort(end, kind="stable")
        start = np.empty_like(end)
        start[order] = np.concatenate([[0.0], end[order][:-1]])
    return 0.5 * (start + end)


def _binned_returns(ep: pd.DataFrame, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean return and episode count per bin of one run's episodes, each placed at its midpoint.

    Returns:
        ``(means, counts)``, both ``(len(edges) - 1,)``; ``means`` is NaN where a bin holds no episode.
    """
    mid = _episode_midpoints(ep)
    idx = np.clip(np.searchsorted(edges, mid, side="right") - 1, 0, len(edges) - 2)
    sums = np.bincount(idx, weights=ep["return"].to_numpy(dtype=float), minlength=len(edges) - 1)
    counts = np.bincount(idx, minlength=len(edges) - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan), counts


def _timeseries_figure(grp: pd.DataFrame, ge: pd.DataFrame, schemes: list[str], ctx_cols: list[str],
                       title: str, bins: int = 100):
    """Return-over-time figure of one (env, trace): top, the binned episodic return per scheme (mean over
    seeds, min-max band) at the bin centres; below, the context's episode means at the episodes' midpoints.

    Bins are equal and cover ``[0, last episode end]``; their number is at most ``bins`` and at most the
    largest episode count of a run, so bins are about an episode wide or wider. Returns the figure.
    """
    import matplotlib.pyplot as plt

    max_step = float(ge["step"].max())
    edges = np.linspace(0.0, max_step, min(bins, max(2, ge.groupby("run_id").size().max())) + 1)
    centers = 0.5 * (edges[:-1] + edges[1:])
    fig, axes = plt.subplots(2 if ctx_cols else 1, 1, figsize=(8, 6 if ctx_cols else 4), sharex=True,
                             squeeze=False)
    ax = axes[0, 0]
    for s in schemes:
        rids = grp.loc[grp["scheme"] == s, "run_id"]
        if rids.empty:
            continue
        curves = np.array([_binned_returns(ge[ge["run_id"] == r], edges)[0] for r in rids])
        with warnings.catch_warnings():  # all-NaN bins (no episode in them) stay NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(curves, axis=0)
            lo, hi = np.nanmin(curves, axis=0), np.nanmax(curves, axis=0)
        (line,) = ax.plot(centers, mean, label=s, lw=1.2)
        if len(rids) > 1:
            ax.fill_between(centers, lo, hi, color=line.get_color(), alpha=0.15, lw=0)
    ax.set_ylabel("episodic return")
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=10)
    if ctx_cols:
        first = ge[ge["run_id"] == grp["run_id"].iloc[0]].sort_values("step")
        mid = _episode_midpoints(first)
        cax = axes[1, 0]
        for c in ctx_cols:
            if first[c].notna().any():
                cax.plot(mid, first[c].to_numpy(dtype=float), lw=1, label=c.replace("context_mean_", ""))
        cax.set_ylabel("context (episode mean)")
        cax.legend(fontsize=7)
    axes[-1, 0].set_xlim(0.0, max_step)
    axes[-1, 0].set_xlabel("environment step")
    fig.tight_layout()
    return fig


def _timeseries(done: pd.DataFrame, episodes: pd.DataFrame, schemes: list[str], out_dir: Path,
                bins: int = 100) -> list[Path]:
    import matplotlib.pyplot as plt

    paths = []
    if episodes.empty:
        return paths
    eps = episodes[episodes["run_id"].isin(done["run_id"])]
    ctx_cols = [c for c in episodes.columns if c.startswith("context_mean")]
    for (env, trace), grp in done.groupby(["env", "trace"], sort=False):
        ge = eps[eps["run_id"].isin(grp["run_id"])]
        if ge.empty:
            continue
        title = f"{env}, trace {trace}\nepisodic return (mean over seeds, min-max band) and context"
        fig = _timeseries_figure(grp, ge, schemes, ctx_cols, title, bins=bins)
        path = out_dir / f"timeseries_{slug(str(env).split('/')[-1])}_{slug(trace)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def _across_md(runs: pd.DataFrame, table: pd.DataFrame, out_dir: Path, confidence: float, seed: int) -> list[str]:
    """The report's across-cells section (IQM, probability of improvement, performance profiles)."""
    agg = across_cells(runs, table, confidence=confidence, seed=seed)
    if agg["iqm"].empty and agg["poi"].empty:
        return []
    pct = percent(confidence)
    coverage = ("about 85% actual coverage at 3 seeds per row, 93% at 10" if round(confidence, 6) == 0.95 else
                "simulated at the 95% level, about 85% at 3 seeds per row and 93% at 10")
    left = ""
    if agg["left_out_schemes"]:
        left += (" Left out of the block: " + ", ".join(
            f"{s} (finished in {n} row{'s' if n != 1 else ''})" for s, n in agg["left_out_schemes"].items()) + ".")
    if agg["left_out_rows"]:
        left += (" Rows left out: " + "; ".join(f"{r} (no {', '.join(m)})" for r, m in agg["left_out_rows"].items())
                 + ".")
    few = len(agg["field"]) < MIN_SCHEMES_FOR_CDF  # the schemes whose means set the 0-1 scale, prescient ones too
    poi_method = (f"P(LCPO > baseline): per row the Mann-Whitney U of LCPO's seeds over "
                  f"the baseline's divided by n m, averaged over the two schemes' common rows (any scheme, block or "
                  f"not), with a {pct}% stratified-bootstrap "
                  f"interval (seeds resampled within each row, 2,000 resamples, generator seed {seed}). An "
                  f"interval is '-' when every row of the scheme has one seed.")
    block = (f"One task set for every scheme: the IQM and the profiles pool the {len(agg['rows'])} row(s) of the "
             f"largest block of schemes x rows in which every scheme finished (the LCPO scheme with the most rows "
             f"always in; lcpo.experiments.report.aggregate_block), so that each scheme is scored on the same rows "
             f"against the same field.{left} ") if not few else (
        f"The largest block of schemes x rows in which every scheme finished (the LCPO scheme with the most rows "
        f"always in; lcpo.experiments.report.aggregate_block): {len(agg['rows'])} row(s), "
        f"{len(agg['field'])} scheme(s).{left} ")
    if agg["iqm"].empty:  # no block: nothing normalized, no IQM
        text = poi_method
    elif few:  # a block, but no IQM printed below: its method is not described
        text = block + poi_method
    else:
        text = (block + f"Each run's lifelong return min-max normalized by its row's lowest and highest mean over "
                f"the block's schemes (and prescient schemes that finished in every block row). IQM: the mean of "
                f"the middle 50% of a scheme's normalized runs, pooled over the block's rows, with a {pct}% "
                f"stratified-bootstrap interval (seeds resampled within each row, 2,000 resamples, generator seed "
                f"{seed}; it covers less than its level with few seeds per row, {coverage}; "
                f"lcpo.experiments.stats.iqm_ci). " + poi_method)
    md = ["## Across environments and traces (Agarwal et al. 2021)", "", text, ""]
    if agg["iqm"].empty:
        md += ["No two online schemes finished in a common row with the LCPO scheme: no IQM or profiles."]
    elif few:
        md += [(f"No IQM or performance profiles: with {len(agg['field'])} scheme(s) setting the scale (the block's, "
                "and prescient schemes in every block row), min-max normalization by their means puts one mean at 0 "
                "and the other at 1 in every row, "
                "so their IQMs say only which mean is higher (compare the intervals and tests above; the "
                f"aggregates need {MIN_SCHEMES_FOR_CDF} schemes or more). P(LCPO > baseline) reads the returns "
                "themselves and stays.")]
    else:
        md += [_md_table(["scheme", "rows", "runs", f"IQM [{pct}% CI]"],
                         [[r.scheme, r.cells, r.runs, _cell(r.iqm, r.ci_low, r.ci_high)]
                          for r in agg["iqm"].itertuples()])]
    if not agg["poi"].empty:
        md += ["", _md_table(["LCPO", "baseline", "common rows", f"P(LCPO > baseline) [{pct}% CI]"],
                             [[r.scheme, r.baseline, r.cells, _cell(r.poi, r.ci_low, r.ci_high)]
                              for r in agg["poi"].itertuples()])]
    (agg["iqm"].iloc[0:0] if few else agg["iqm"]).to_csv(out_dir / "iqm.csv", index=False)
    agg["poi"].to_csv(out_dir / "probability_of_improvement.csv", index=False)
    if agg["profiles"] and not few:
        _profile_figure(agg["profiles"], out_dir / "performance_profile.png", confidence)
        md += ["", "![performance profiles](performance_profile.png)"]
    md += ["", "CSV: [iqm.csv](iqm.csv), [probability_of_improvement.csv](probability_of_improvement.csv)", ""]
    return md


def write_report(runs: pd.DataFrame, episodes: pd.DataFrame, out_dir: str | Path, *, title: str = "Sweep report",
                 confidence: float = 0.95, seed: int = 0, allow_mixed_code: bool = False) -> Path:
    """Write every table and figure of the report (see the module docstring) into ``out_dir``.

    Args:
        runs: the store's per-run table.
        episodes: the store's per-episode table.
        out_dir: output folder (created).
        title: heading of ``report.md``.
        confidence: interval level.
        seed: bootstrap generator seed (the stratified bootstraps across cells).
        allow_mixed_code: pool the seeds of a cell even when they ran on different commits (the report says
            so); otherwise such a cell is refused (:func:`check_code`).

    Returns:
        The path of ``report.md``.

    Raises:
        ValueError: if ``runs`` lacks the store's columns.
        MixedCodeError: (a ValueError) a cell's seeds ran on different commits and ``allow_mixed_code`` is
            False; nothing is written.
    """
    import matplotlib

    matplotlib.use("Agg")
    missing = {"run_id", "status", "env", "trace", "agent", "scheme", "lifelong_return"} - set(runs.columns)
    if missing:
        raise ValueError(f"runs table lacks columns {sorted(missing)}; is it a results store?")
    code = check_code(runs, allow_mixed_code)  # before anything is written
    from lcpo.persistence.outputs import check_output_dir

    out_dir = check_output_dir(out_dir, create=True)
    for stale in ("normalized_return_cdf.png", "performance_profile.png"):  # drawn only when meaningful: a
        (out_dir / stale).unlink(missing_ok=True)                        # reused --out must not keep an old one
    done = _done(runs)
    finished = runs["status"] == "done"  # with a lifelong return or not (done: those with one)
    schemes = _ordered_schemes(runs)
    table = lifelong_table(runs, confidence=confidence, seed=seed)
    ranks = rank_table(table)
    norm = normalized_table(table)
    comp = comparison_table(runs, confidence=confidence)
    table.to_csv(out_dir / "lifelong_return.csv", index=False)
    ranks.to_csv(out_dir / "ranks.csv", index=False)
    norm.to_csv(out_dir / "normalized_return.csv", index=False)
    comp.to_csv(out_dir / "comparisons.csv", index=False)

    status = runs["status"].value_counts().to_dict()
    wall = process_wall_time(runs)
    steps = float(np.nansum(runs["steps_done"].to_numpy(dtype=float)))
    pct = percent(confidence)
    md = [f"# {title}", "",
          (f"{len(runs)} runs: {_status_text(status)}. " + (
              f"{int(steps):,} environment steps in {_duration(wall)} of summed process wall time (a population's "
              f"wall time counted once, not once per seed; {steps / wall:,.0f} environment steps per wall-second "
              f"of a process on average)." if wall > 0 else "No compute recorded yet (no run has finished).")),
          "",
          (f"Lifelong return: mean episodic return of the episodes ending after the warm-up, averaged over seeds, "
           f"with a {pct}% Student-t interval across seeds (mean +- t * s / sqrt(n); none for a one-seed cell). "
           f"{MARK_BELOW_LCPO} / {MARK_ABOVE_LCPO} after a baseline's value: LCPO is significantly above / "
           f"below it (Welch's t-test, Holm-adjusted over every LCPO-baseline pair of the report, family-wise "
           f"error {1 - confidence:.2g}; table 'LCPO against each baseline'). Bold: the best online scheme of a "
           f"row, only when its interval lies above every other online scheme's and every online scheme of the "
           f"row has at least {MIN_SEEDS_FOR_MARK} seeds. A difference without a mark is not significant: "
           f"it is no lead."), "", _seeds_text(table, confidence, int(finished.sum())), "", _code_text(code), ""]
    unscored = runs[finished & ~runs.index.isin(done.index)]
    if not unscored.empty:
        md += [(f"{len(unscored)} finished run(s) have no lifelong return (no episode ended after the warm-up, or "
                f"summary.json records none) and are left out of every cell: "
                f"{', '.join(unscored['run_id'].astype(str))}."), ""]
    if done.empty:
        md += ["No finished runs yet." if not finished.any() else
               "No tables: no finished run has a lifelong return (listed above).", ""]
    else:
        md += ["## Lifelong return (paper Tables 5-8)", "", _main_tables(table, ranks, schemes, comp), "",
               "CSV: [lifelong_return.csv](lifelong_return.csv)", ""]
        if not comp.empty:
            md += ["## LCPO against each baseline", "",
                   (f"Welch's t-test (two-sided) of LCPO's mean against each online baseline's, per row; Holm's "
                    f"step-down correction over the {int(comp['p'].notna().sum())} tested pairs; significant: "
                    f"Holm p <= {1 - confidence:.2g}. Pairs with a one-seed cell, or whose two cells are each "
                    f"constant over their seeds, are not tested."), "",
                   _comparison_md(comp), "", "CSV: [comparisons.csv](comparisons.csv)", ""]
        md += [
               "## LCPO's rank among the online agents", "", _lcpo_ranks(ranks, confidence), "",
               "CSV: [ranks.csv](ranks.csv)", ""]
        online = [s for s in schemes if s in set(norm["scheme"])]
        md += ["## Normalized lifelong return (paper Figure 3)", "",
               ("Per (env, trace), each scheme's mean lifelong return min-max normalized across the schemes "
                "(0 = lowest, 1 = highest); the CDF over (env, trace) pairs. The normalization reads the seed "
                "means only: two schemes whose intervals overlap can still land at 0 and 1.")]
        if len(online) >= MIN_SCHEMES_FOR_CDF:
            _plot_cdf(norm, online, out_dir / "normalized_return_cdf.png")
            md += ["", "![normalized return CDF](normalized_return_cdf.png)"]
        else:
            md += ["", (f"No CDF figure: with {len(online)} online scheme(s) min-max normalization puts one at 0 "
                        "and the other at 1 on every (env, trace), whether or not their intervals overlap; "
                        f"compare the intervals in the table above (the figure needs {MIN_SCHEMES_FOR_CDF} "
                        "schemes or more).")]
        md += ["", "CSV: [normalized_return.csv](normalized_return.csv)", ""]
        md += _across_md(runs, table, out_dir, confidence, seed)
        abl = _ablations(done, out_dir, confidence, seed)
        if abl:
            md += ["## Ablations (paper Figure 4, Table 7)", ""]
            for name, csv_path, png_path, table_md in abl:
                md += [f"### {name}", "", table_md, "", f"![{name}]({png_path.name})", "",
                       f"CSV: [{csv_path.name}]({csv_path.name})", ""]
        ood = _ood_table(done)
        if ood:
            md += ["## OOD detection", "",
                   ("Means over seeds: the fraction of updates whose OOD sampler found an anchor batch, the OOD "
                    "fraction of the reservoir candidates, and the threshold in force (sigma^2 in trace units for "
                    "L2, D^2 for Mahalanobis; with `ood_threshold = \"auto\"` it is calibrated during the run "
                    "and `ood/threshold` in each run's diagnostics.csv shows it over time)."), "", ood, ""]
        ts = _timeseries(done, episodes, schemes, out_dir)
        if ts:
            md += ["## Return and context over time (paper Figure 9)", ""]
            md += [f"![{p.stem}]({p.name})\n" for p in ts]
    failed = runs[runs["status"] == "failed"]
    if not failed.empty:
        md += ["## Failed runs", "", _md_table(["run", "error"], [[r.run_id, str(r.error)] for r in failed.itertuples()]),
               ""]
    path = out_dir / "report.md"
    path.write_text("\n".join(md) + "\n")
    return path


def report(runs_dir: str | Path, out_dir: str | Path, *, confidence: float = 0.95, seed: int = 0,
           title: str | None = None, allow_mixed_code: bool = False, forgetting: bool = False) -> Path:
    """Load a sweep folder's store and write its report (``lcpo report RUNS_DIR --out DIR``).

    Nothing is written into ``runs_dir`` (unless ``out_dir`` lies inside it): the tables are collected from the
    run folders in memory, and the store's ``results.parquet`` / ``episodes.parquet`` are written into
    ``out_dir`` next to the report.

    Args:
        runs_dir: the sweep folder.
        out_dir: report folder.
        confidence: interval level.
        seed: bootstrap generator seed (the stratified bootstraps across cells).
        title: report heading; default from the sweep name in ``sweep.json``.
        allow_mixed_code: pool seeds that ran on different commits (:func:`write_report`).
        forgetting: append the forgetting section (:mod:`lcpo.experiments.forgetting`; about 45 s per run with
            snapshots the first time, cached in ``out_dir/forgetting_cache``); off by default (`lcpo report
            --forgetting`).

    Returns:
        The path of ``report.md``.

    Raises:
        FileNotFoundError: if ``runs_dir`` is not a sweep folder (or is a file).
        ValueError: a malformed summary/error/config JSON or a non-number summary field (named), or a
            non-finite ``confidence``.
        MixedCodeError: see :func:`write_report`.
    """
    runs_dir = Path(runs_dir)
    if runs_dir.exists() and not runs_dir.is_dir():
        raise FileNotFoundError(f"{runs_dir}: a file, not a sweep folder (give the folder that holds sweep.json)")
    if not runs_dir.is_dir():
        raise FileNotFoundError(f"{runs_dir}: no such sweep folder")
    runs, episodes = load_store(runs_dir, write=False)
    from lcpo.persistence.outputs import check_output_dir

    check_output_dir(out_dir)  # before anything is written: one line naming the path
    if title is None:
        manifest = runs_dir / "sweep.json"
        name = json.loads(manifest.read_text()).get("name", runs_dir.name) if manifest.is_file() else runs_dir.name
        title = f"Sweep report: {name}" if manifest.is_file() else f"Report: {name} (lcpo run folders)"
    if not math.isfinite(confidence):
        raise ValueError(f"confidence must be finite, got {confidence}")
    path = write_report(runs, episodes, out_dir, title=title, confidence=confidence, seed=seed,
                        allow_mixed_code=allow_mixed_code)
    if forgetting:
        from lcpo.experiments.forgetting import append_forgetting_section  # issue 27 item 2: lost return

        append_forgetting_section(path, runs_dir, confidence=confidence)
    for df, name in ((runs, "results.parquet"), (episodes, "episodes.parquet")):
        df.to_parquet(Path(out_dir) / name, index=False)
    return path
