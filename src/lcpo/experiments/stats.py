"""Statistics for a handful of seeds: per-cell intervals and tests, and aggregates across cells.

A *cell* is one (environment, trace[, setting]) x scheme: its seeds' scores are independent draws. Everything
here is NumPy/SciPy, seeded by a ``numpy.random.Generator`` where it resamples (rliable, which defines most of
the cross-cell measures, does not import beside pandas 3, and its ``random_state`` does not seed its bootstrap).

Per cell:

- :func:`t_interval` (the default of :func:`mean_ci`): the mean with a Student-t interval,
  ``mean +- t_{(1+c)/2, n-1} s / sqrt(n)``. Its coverage is exact for normal scores at any ``n >= 2`` and is
  checked by simulation in ``tests/experiments/test_stats.py`` (about 95% at n = 3, 5, 10). The percentile
  bootstrap that :func:`mean_ci` used before (``method="percentile"``) is kept for comparison only: with
  3 seeds it returns the seeds' [min, max] (drawing all three resamples at the minimum has probability 1/27,
  above 2.5%) and covers about 75% of the time (50% with 2 seeds), measured by the same simulation.
- :func:`welch_test`: Welch's unequal-variance t-test of two cells' means (``scipy.stats.ttest_ind`` with
  ``equal_var=False``).
- :func:`holm`: Holm's step-down adjustment of a family of p-values (Holm 1979), e.g. LCPO against each
  baseline in each cell; it controls the family-wise error rate at alpha without assuming independence.

Across cells (Agarwal et al. 2021, "Deep Reinforcement Learning at the Edge of the Statistical Precipice",
NeurIPS; the definitions of rliable's ``metrics.py`` and ``library.py``, reimplemented):

- :func:`normalize_runs` with :func:`minmax_bounds` (per cell, the lowest and highest scheme mean: the paper's
  Figure 3 normalization) or any reference bounds (e.g. a random and an expert score);
- :func:`iqm` and :func:`iqm_ci`: the interquartile mean of all normalized runs of a scheme with a stratified
  bootstrap interval (seeds resampled within each cell);
- :func:`probability_of_improvement` and :func:`poi_ci`: P(X > Y), the Mann-Whitney U statistic over ``n m``
  per cell, averaged over cells, with a stratified bootstrap interval;
- :func:`performance_profile`: the fraction of runs above each threshold tau (per cell, averaged over cells)
  with stratified bootstrap bands;
- :func:`empirical_cdf`: the CDF of the normalized scheme means across cells (paper Figure 3a).

Bad input is refused with a one-line ``ValueError`` naming the cell: non-finite scores, and fewer than 2 seeds
where an interval or test needs 2.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["MeanCI", "WelchResult", "empirical_cdf", "holm", "iqm", "iqm_ci", "mean_ci", "minmax_bounds", "percent",
           "normalize_runs", "normalize_scores", "percentile_bootstrap_ci", "performance_profile", "poi_ci",
           "probability_of_improvement", "separates", "stratified_bootstrap", "t_interval", "welch_test"]

ArrayLike = Sequence[float] | np.ndarray


@dataclass(frozen=True)
class MeanCI:
    """A sample mean with its confidence interval.

    Attributes:
        mean: the sample mean.
        low, high: interval bounds; NaN for a single seed when the caller asked for NaN rather than an error
            (``mean_ci(..., single_seed="nan")``).
        n: number of values used.
    """

    mean: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class WelchResult:
    """Welch's t-test of ``mean(x) - mean(y)``.

    Attributes:
        diff: ``mean(x) - mean(y)``.
        t: the t statistic.
        df: Welch-Satterthwaite degrees of freedom.
        p: the p-value (two-sided unless asked otherwise).
        n_x, n_y: seeds in each sample.
    """

    diff: float
    t: float
    df: float
    p: float
    n_x: int
    n_y: int


def _where(cell: str | None) -> str:
    return f" (cell {cell})" if cell else ""


def _sample(values: ArrayLike, cell: str | None = None, min_n: int = 1, what: str = "values") -> np.ndarray:
    """``values`` as a finite ``(n,)`` float64 array with ``n >= min_n``, else a ValueError naming the cell."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"{what}{_where(cell)} must be a non-empty 1-D array, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what}{_where(cell)} must be finite, got {x.tolist()}")
    if x.size < min_n:
        raise ValueError(f"{what}{_where(cell)}: {x.size} seed(s), an interval or test needs at least {min_n}")
    return x


def percent(confidence: float) -> str:
    """An interval level as the report prints it: ``0.95`` -> ``"95"``, ``0.995`` -> ``"99.5"``, ``0.975`` ->
    ``"97.5"`` (rounding to a whole percent printed 0.995 as "100%").

    >>> [percent(c) for c in (0.95, 0.9, 0.995, 0.975, 0.6827)]
    ['95', '90', '99.5', '97.5', '68.27']
    """
    return f"{float(confidence) * 100:.10g}"


def _check_confidence(confidence: float) -> None:
    if not (isinstance(confidence, (int, float)) and 0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _rng(seed: int | np.random.Generator) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


# -- one cell ------------------------------------------------------------------------------------------------
def t_interval(values: ArrayLike, confidence: float = 0.95, cell: str | None = None) -> MeanCI:
    """Mean and Student-t confidence interval of the mean: ``mean +- t_{(1+c)/2, n-1} * s / sqrt(n)``.

    ``s`` is the sample standard deviation (``ddof=1``). Exact coverage for normal scores; for 3-25 seeds of
    roughly symmetric scores it is the standard small-sample interval (coverage simulated in the tests).

    Args:
        values: ``(n,)`` per-seed scores, ``n >= 2``, finite.
        confidence: level in (0, 1).
        cell: the cell's name, used in error messages.

    Returns:
        A :class:`MeanCI` (identical values give a zero-width interval).

    Raises:
        ValueError: fewer than 2 seeds, non-finite or non-1-D values, or ``confidence`` outside (0, 1).

    >>> ci = t_interval([1.0, 2.0, 3.0])
    >>> round(ci.low, 4), round(ci.high, 4)  # 2 -+ 4.3027 / sqrt(3)
    (-0.4841, 4.4841)
    """
    _check_confidence(confidence)
    x = _sample(values, cell, min_n=2)
    n = x.size
    mean = float(x.mean())
    half = float(stats.t.ppf(0.5 + confidence / 2.0, n - 1) * x.std(ddof=1) / np.sqrt(n))
    return MeanCI(mean, mean - half, mean + half, n)


def percentile_bootstrap_ci(values: ArrayLike, confidence: float = 0.95, seed: int | np.random.Generator = 0,
                            n_resamples: int = 9999, cell: str | None = None) -> MeanCI:
    """Mean and percentile-bootstrap interval of the mean (``scipy.stats.bootstrap``, ``method="percentile"``).

    Kept to show why it is not the default: with ``n`` seeds its bounds are quantiles of resample means, so at
    ``n = 3`` it is the seeds' [min, max] and covers about 75% (tests/experiments/test_stats.py).

    Args:
        values: ``(n,)`` finite scores, ``n >= 2``.
        confidence: level in (0, 1).
        seed: seed or Generator of the resampling.
        n_resamples: bootstrap resamples.
        cell: the cell's name, for error messages.

    Returns:
        A :class:`MeanCI`.

    Raises:
        ValueError: as :func:`t_interval`.
    """
    _check_confidence(confidence)
    x = _sample(values, cell, min_n=2)
    mean = float(x.mean())
    if np.all(x == x[0]):
        return MeanCI(mean, mean, mean, int(x.size))
    res = stats.bootstrap((x,), np.mean, n_resamples=n_resamples, confidence_level=confidence,
                          method="percentile", vectorized=True, rng=_rng(seed))
    return MeanCI(mean, float(res.confidence_interval.low), float(res.confidence_interval.high), int(x.size))


def mean_ci(values: ArrayLike, confidence: float = 0.95, seed: int | np.random.Generator = 0,
            n_resamples: int = 9999, *, method: str = "t", single_seed: str = "raise",
            cell: str | None = None) -> MeanCI:
    """A cell's mean and confidence interval across seeds (paper Tables 5-8: 95% intervals over seeds).

    Args:
        values: ``(n,)`` per-seed scores (e.g. lifelong returns), finite.
        confidence: level in (0, 1).
        seed: generator seed (``method="percentile"`` only).
        n_resamples: bootstrap resamples (``method="percentile"`` only).
        method: ``"t"`` (default, :func:`t_interval`) or ``"percentile"`` (:func:`percentile_bootstrap_ci`).
        single_seed: with one seed, ``"raise"`` (default) or ``"nan"`` (return the value with NaN bounds, for
            tables that show one-seed cells without an interval).
        cell: the cell's name, used in error messages.

    Returns:
        A :class:`MeanCI`.

    Raises:
        ValueError: empty, non-1-D or non-finite values; one seed with ``single_seed="raise"``; an unknown
            ``method``; ``confidence`` outside (0, 1).
    """
    if method not in ("t", "percentile"):
        raise ValueError(f"method must be 't' or 'percentile', got {method!r}")
    if single_seed not in ("raise", "nan"):
        raise ValueError(f"single_seed must be 'raise' or 'nan', got {single_seed!r}")
    _check_confidence(confidence)
    x = _sample(values, cell)
    if x.size == 1 and single_seed == "nan":
        return MeanCI(float(x[0]), float("nan"), float("nan"), 1)
    if method == "t":
        return t_interval(x, confidence, cell)
    return percentile_bootstrap_ci(x, confidence, seed, n_resamples, cell)


def welch_test(x: ArrayLike, y: ArrayLike, alternative: str = "two-sided", cell: str | None = None) -> WelchResult:
    """Welch's unequal-variance t-test of the difference of two cells' means.

    ``t = (mean_x - mean_y) / sqrt(s_x^2/n_x + s_y^2/n_y)`` with Welch-Satterthwaite degrees of freedom
    ``(s_x^2/n_x + s_y^2/n_y)^2 / ((s_x^2/n_x)^2/(n_x-1) + (s_y^2/n_y)^2/(n_y-1))`` (Welch 1947); computed by
    ``scipy.stats.ttest_ind(x, y, equal_var=False)``.

    Args:
        x, y: ``(n_x,)``, ``(n_y,)`` finite scores, at least 2 seeds each.
        alternative: ``"two-sided"``, ``"greater"`` (mean x > mean y) or ``"less"``.
        cell: the comparison's name, used in error messages.

    Returns:
        A :class:`WelchResult`.

    Raises:
        ValueError: fewer than 2 seeds in a sample, non-finite values, or both samples constant (no variance:
            the test is undefined).
    """
    a = _sample(x, cell, min_n=2, what="x")
    b = _sample(y, cell, min_n=2, what="y")
    if np.all(a == a[0]) and np.all(b == b[0]):
        raise ValueError(f"Welch's test{_where(cell)}: both samples are constant, the test is undefined")
    res = stats.ttest_ind(a, b, equal_var=False, alternative=alternative)
    return WelchResult(float(a.mean() - b.mean()), float(res.statistic), float(res.df), float(res.pvalue),
                       int(a.size), int(b.size))


def holm(pvalues: ArrayLike) -> np.ndarray:
    """Holm's step-down adjusted p-values of a family of ``k`` tests (Holm 1979).

    With ``p_(1) <= ... <= p_(k)`` sorted, ``adj_(i) = max_{j <= i} min(1, (k - j + 1) p_(j))``; rejecting the
    hypotheses with ``adj <= alpha`` controls the family-wise error rate at ``alpha``.

    Args:
        pvalues: ``(k,)`` p-values in [0, 1], finite.

    Returns:
        ``(k,)`` float64 adjusted p-values, in the input's order.

    Raises:
        ValueError: empty input, non-finite values or values outside [0, 1].

    >>> holm([0.01, 0.04, 0.03]).round(3).tolist()
    [0.03, 0.06, 0.06]
    """
    p = _sample(pvalues, what="p-values")
    if np.any((p < 0) | (p > 1)):
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()}")
    k = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, (k - np.arange(k)) * p[order])
    adj = np.empty(k)
    adj[order] = np.maximum.accumulate(stepped)
    return adj


def separates(best: MeanCI, others: Sequence[MeanCI]) -> bool:
    """Whether ``best``'s interval lies strictly above every other interval (lower bound > their upper bounds).

    Not a test (two 95% intervals can overlap while the difference is significant); kept for callers that
    mark disjoint intervals. A NaN bound (one seed) never separates.
    """
    if not np.isfinite(best.low):
        return False
    return all(np.isfinite(o.high) and best.low > o.high for o in others)


# -- across cells --------------------------------------------------------------------------------------------
Cells = Mapping[str, ArrayLike]


def _cells(cells: Cells, what: str = "scores", min_n: int = 1) -> dict[str, np.ndarray]:
    if not cells:
        raise ValueError(f"{what}: no cells")
    return {str(c): _sample(v, c, min_n=min_n, what=what) for c, v in cells.items()}


def normalize_scores(means: ArrayLike) -> np.ndarray:
    """Min-max normalize one cell row's scheme means: the lowest maps to 0, the highest to 1 (paper Figure 3).

    When all schemes tie, every score is 1.

    Args:
        means: ``(k,)`` finite mean scores, one per scheme.

    Returns:
        ``(k,)`` float64 in [0, 1].

    Raises:
        ValueError: for an empty or non-finite input.

    >>> normalize_scores([-200.0, -150.0, -100.0]).tolist()
    [0.0, 0.5, 1.0]
    """
    m = _sample(means, what="means")
    lo, hi = m.min(), m.max()
    if hi == lo:
        return np.ones_like(m)
    return (m - lo) / (hi - lo)


def minmax_bounds(scores: Mapping[str, Cells]) -> dict[str, tuple[float, float]]:
    """Per cell, the lowest and highest scheme mean (the reference points of paper Figure 3's normalization).

    Args:
        scores: scheme -> cell -> ``(n,)`` per-seed scores. Cells may differ between schemes; each cell's
            bounds use the schemes that have it.

    Returns:
        cell -> ``(low, high)``.

    Raises:
        ValueError: non-finite scores (naming the cell).
    """
    means: dict[str, list[float]] = {}
    for scheme, cells in scores.items():
        for cell, x in _cells(cells, f"scores of {scheme}").items():
            means.setdefault(cell, []).append(float(x.mean()))
    return {c: (min(m), max(m)) for c, m in means.items()}


def normalize_runs(cells: Cells, bounds: Mapping[str, tuple[float, float]]) -> dict[str, np.ndarray]:
    """Normalize each cell's per-seed scores by reference bounds: ``(x - low) / (high - low)``.

    With :func:`minmax_bounds` this is paper Figure 3's scale (0 = the worst scheme mean of the cell, 1 = the
    best; single seeds can fall outside [0, 1]); with (random, expert) scores it is Agarwal et al.'s
    human-normalized style. A cell whose bounds coincide (all schemes tie) maps to 1.

    Args:
        cells: cell -> ``(n,)`` finite scores.
        bounds: cell -> ``(low, high)`` (every cell of ``cells`` needs one).

    Returns:
        cell -> ``(n,)`` float64 normalized scores.

    Raises:
        ValueError: non-finite scores, a cell without bounds, or non-finite bounds.
    """
    out = {}
    for cell, x in _cells(cells).items():
        if cell not in bounds:
            raise ValueError(f"no normalization bounds for cell {cell}")
        lo, hi = (float(b) for b in bounds[cell])
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError(f"normalization bounds of cell {cell} must be finite, got {(lo, hi)}")
        out[cell] = np.ones_like(x) if hi == lo else (x - lo) / (hi - lo)
    return out


def iqm(values: ArrayLike | Cells) -> float:
    """Interquartile mean: the mean of the middle 50% of the scores, all cells' runs pooled (Agarwal et al.
    2021, Section 4.1; ``scipy.stats.trim_mean(x, 0.25)``, which cuts ``floor(0.25 n)`` values at each end).

    Args:
        values: ``(N,)`` scores, or cell -> ``(n_c,)`` scores (pooled).

    Returns:
        The IQM (float).

    Raises:
        ValueError: empty or non-finite scores (naming the cell).

    >>> iqm([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 100.0])  # mean of 3, 4, 5, 6
    4.5
    """
    if isinstance(values, Mapping):
        x = np.concatenate(list(_cells(values).values()))
    else:
        x = _sample(values)
    return float(stats.trim_mean(x, 0.25))


def stratified_bootstrap(cells: Sequence[Mapping[str, np.ndarray]], statistic: Callable[..., np.ndarray],
                         n_resamples: int = 2000, confidence: float = 0.95,
                         seed: int | np.random.Generator = 0) -> tuple[float, float, float]:
    """Point estimate and percentile interval of a statistic under a stratified bootstrap over seeds.

    Each resample draws, independently for each sample and each cell, ``n_c`` seeds with replacement from
    that cell's ``n_c`` seeds (the stratified bootstrap of Agarwal et al. 2021, Section 4: cells are fixed,
    seeds are random). A cell with one seed contributes no resampling variability.

    Args:
        cells: one or more samples, each cell -> ``(n_c,)`` float64 scores (already checked).
        statistic: ``statistic(*resampled)``, each argument cell -> ``(B, n_c)`` array, returns ``(B,)``.
        n_resamples: bootstrap resamples ``B``.
        confidence: interval level in (0, 1).
        seed: seed or ``numpy.random.Generator``.

    Returns:
        ``(estimate, low, high)``: the statistic on the data and the percentile interval.

    Raises:
        ValueError: every cell of every sample has fewer than 2 seeds (no interval), ``n_resamples < 1``,
            ``confidence`` outside (0, 1).
    """
    _check_confidence(confidence)
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if all(v.size < 2 for sample in cells for v in sample.values()):
        raise ValueError("stratified bootstrap: every cell has a single seed, an interval needs at least one cell "
                         "with 2 seeds or more")
    rng = _rng(seed)
    est = float(statistic(*({c: v[None, :] for c, v in s.items()} for s in cells))[0])
    resampled = [{c: v[rng.integers(0, v.size, size=(n_resamples, v.size))] for c, v in s.items()} for s in cells]
    vals = np.asarray(statistic(*resampled), dtype=np.float64)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(vals, [alpha, 1.0 - alpha])
    return est, float(lo), float(hi)


def _pooled(sample: Mapping[str, np.ndarray]) -> np.ndarray:
    return np.concatenate([sample[c] for c in sample], axis=1)


def iqm_ci(cells: Cells, n_resamples: int = 2000, confidence: float = 0.95,
           seed: int | np.random.Generator = 0) -> MeanCI:
    """IQM of one scheme's normalized scores across cells with a stratified-bootstrap percentile interval.

    Coverage (simulated, ``tests/experiments/test_stats.py::test_iqm_ci_coverage_slow``, 1,000 draws): 5 cells
    with normal scores (means 0, 0.25, ..., 1, sd 0.2), the true value the IQM of the pooled population: 85%
    for a nominal 95% interval at 3 seeds per cell and 93% at 10. Like every percentile bootstrap it
    under-covers with few seeds, though less than one cell's percentile interval (75% at 3 seeds) because the
    cells pool; read it as a description of the spread, and use :func:`welch_test` with :func:`holm` for
    per-cell claims.

    Args:
        cells: cell -> ``(n_c,)`` normalized scores of one scheme.
        n_resamples: bootstrap resamples.
        confidence: interval level.
        seed: seed or Generator.

    Returns:
        A :class:`MeanCI` with the IQM and its interval (``n``: the number of runs pooled).

    Raises:
        ValueError: non-finite scores (naming the cell), or every cell has a single seed.
    """
    s = _cells(cells)
    est, lo, hi = stratified_bootstrap([s], lambda r: stats.trim_mean(_pooled(r), 0.25, axis=1),
                                       n_resamples, confidence, seed)
    return MeanCI(est, lo, hi, int(sum(v.size for v in s.values())))


def _poi_cell(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(B,)`` P(X > Y) + 0.5 P(X = Y) of ``(B, n)`` against ``(B, m)`` resamples: U / (n m)."""
    gt = (x[:, :, None] > y[:, None, :]).mean(axis=(1, 2))
    eq = (x[:, :, None] == y[:, None, :]).mean(axis=(1, 2))
    return gt + 0.5 * eq


def probability_of_improvement(x: Cells, y: Cells) -> float:
    """P(X > Y): the probability that a run of scheme X beats a run of scheme Y on a random common cell.

    Per cell, the Mann-Whitney U statistic of X's seeds over Y's divided by ``n m`` (ties count one half),
    then the mean over the cells both schemes have (Agarwal et al. 2021, Section 4.3). Scores need not be
    normalized: only orders within a cell count.

    Args:
        x, y: cell -> ``(n_c,)`` / ``(m_c,)`` finite scores (higher is better).

    Returns:
        P(X > Y) in [0, 1].

    Raises:
        ValueError: non-finite scores (naming the cell) or no common cell.

    >>> probability_of_improvement({"a": [3.0, 1.0]}, {"a": [2.0, 2.0, 0.0]})  # U = 4 of 6
    0.6666666666666666
    """
    a, b = _common(x, y)
    return float(np.mean([_poi_cell(a[c][None], b[c][None])[0] for c in a]))


def _common(x: Cells, y: Cells) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    a, b = _cells(x, "scores of X"), _cells(y, "scores of Y")
    common = [c for c in a if c in b]
    if not common:
        raise ValueError(f"probability of improvement: no common cell (X: {sorted(a)}, Y: {sorted(b)})")
    return {c: a[c] for c in common}, {c: b[c] for c in common}


def poi_ci(x: Cells, y: Cells, n_resamples: int = 2000, confidence: float = 0.95,
           seed: int | np.random.Generator = 0) -> MeanCI:
    """:func:`probability_of_improvement` with a stratified-bootstrap percentile interval (X's and Y's seeds
    resampled independently within each common cell).

    Args:
        x, y: cell -> per-seed scores.
        n_resamples, confidence, seed: as :func:`stratified_bootstrap`.

    Returns:
        A :class:`MeanCI` (``n``: the number of common cells).

    Raises:
        ValueError: non-finite scores, no common cell, or single seeds everywhere.
    """
    a, b = _common(x, y)

    def stat(ra, rb):
        return np.mean([_poi_cell(ra[c], rb[c]) for c in ra], axis=0)

    est, lo, hi = stratified_bootstrap([a, b], stat, n_resamples, confidence, seed)
    return MeanCI(est, lo, hi, len(a))


def performance_profile(cells: Cells, taus: ArrayLike, n_resamples: int = 2000, confidence: float = 0.95,
                        seed: int | np.random.Generator = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Performance profile: the fraction of runs with a normalized score above each threshold tau.

    Per cell the fraction of its seeds with score ``> tau``, averaged over cells (each cell weighs the same;
    with equal seeds per cell this is rliable's pooled run-score distribution), with stratified-bootstrap
    percentile bands (Agarwal et al. 2021, Section 4.2).

    Args:
        cells: cell -> ``(n_c,)`` normalized scores of one scheme.
        taus: ``(T,)`` thresholds.
        n_resamples, confidence, seed: as :func:`stratified_bootstrap`.

    Returns:
        ``(profile, low, high)``, each ``(T,)`` float64 in [0, 1]; with single seeds everywhere the bands equal
        the profile.

    Raises:
        ValueError: non-finite scores (naming the cell) or thresholds.
    """
    _check_confidence(confidence)
    s = _cells(cells)
    t = _sample(taus, what="taus")

    def frac(sample: Mapping[str, np.ndarray]) -> np.ndarray:  # cell -> (B, n) -> (B, T)
        return np.mean([(v[:, :, None] > t[None, None, :]).mean(axis=1) for v in sample.values()], axis=0)

    profile = frac({c: v[None] for c, v in s.items()})[0]
    if all(v.size < 2 for v in s.values()):
        return profile, profile.copy(), profile.copy()
    rng = _rng(seed)
    boot = frac({c: v[rng.integers(0, v.size, size=(n_resamples, v.size))] for c, v in s.items()})
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(boot, [alpha, 1.0 - alpha], axis=0)
    return profile, lo, hi


def empirical_cdf(values: ArrayLike, grid: ArrayLike) -> np.ndarray:
    """Empirical CDF ``F(g) = #{v <= g} / n`` of normalized scheme means across cells (paper Figure 3a).

    Args:
        values: ``(n,)`` finite scores (one per cell).
        grid: ``(G,)`` points.

    Returns:
        ``(G,)`` float64 in [0, 1].

    Raises:
        ValueError: non-finite input.

    >>> empirical_cdf([0.0, 0.5, 1.0], [0.0, 0.75]).tolist()
    [0.3333333333333333, 0.6666666666666666]
    """
    v = np.sort(_sample(values))
    g = _sample(grid, what="grid")
    return np.searchsorted(v, g, side="right") / v.size
