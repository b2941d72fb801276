"""Automatic OOD threshold (``ood_threshold="auto"``): a detector whose threshold is set from the data.

LCPO's OOD threshold is in the context's own units (squared context units for L2, ``D^2`` for Mahalanobis) and
the paper lists choosing it automatically as future work (Section 6). A threshold given in the wrong units
silently turns LCPO into A2C (no OOD state found) or constrains it on almost every past state. The rules here
need no unit: multiplying every context entry by any ``c > 0`` (a change of units the environment does not
declare) leaves every OOD label unchanged, exactly in real arithmetic (``docs/lcpo.md``, "Automatic OOD
threshold").

Two rules, compared in ``docs/lcpo.md`` with learning runs (``benchmarks/ood_auto.py``):

``"quantile"`` (the default of ``"auto"``; one parameter, the target OOD fraction ``q``)
    At every update the OOD sampler draws ``N = 5 b`` reservoir states (paper Algorithm 3); their distances to
    the recent batch give the statistic ``t_u`` that would label exactly the ``k = ceil(q N)`` farthest of them
    OOD (the midpoint between the ``k``-th and the ``(k+1)``-th largest distance). The threshold is the geometric
    mean of ``t_u`` over every update so far, ``theta_u = exp(mean_{v <= u} log t_v)``: slowly re-estimated, with
    equal weight on the whole history, so a recent batch whose context is new finds far more than ``q`` of the
    reservoir OOD and a stationary stretch finds less. L2 distances scale by ``c^2`` under a change of units and
    so do ``t_u`` and ``theta_u``; Mahalanobis distances do not change.

``"standardized"`` (one parameter ``tau``; L2 only)
    Each context axis is divided by its running standard deviation over every context seen so far; a state is
    OOD if its squared L2 distance to the recent mean in these units exceeds ``tau``.

Both keep exact per-run statistics (:class:`RunningMoments`) of the detector's features, which fix the
degenerate cases without a unit: an L2 distance at or below ``1e-6`` of the features' running spread (their
:attr:`RunningMoments.spread` squared, summed) never counts as OOD, and neither does a ``D^2`` at or below
``1e-6`` (already unit-free); an update whose statistic ``t_u`` is at or below that floor (the candidates are
indistinguishable from the present, e.g. a context that has never moved) is not absorbed into the threshold; and
the Mahalanobis detector works on features divided by their running standard deviation, so its covariance floor
(``Mahalanobis``'s ``floor``) is relative to the context's own spread. A feature that has always been exactly 0
has spread 0 and adds nothing to the floor, whatever the other features' units.
"""

from __future__ import annotations

import math

import numpy as np

from lcpo.envs.context import ContextSpec
from lcpo.ood.gaussian import gaussian_fit, mahalanobis_sq

__all__ = ["AUTO_RULES", "AutoThreshold", "RunningMoments", "load_calibration", "quantile_statistic"]

#: the rules of :class:`AutoThreshold`; the first is the one ``ood_threshold="auto"`` uses by default.
AUTO_RULES = ("quantile", "standardized")
#: detectors :class:`AutoThreshold` calibrates (names of :func:`lcpo.ood.detectors.make_detector`).
AUTO_DETECTORS = ("l2", "mahalanobis", "mahalanobis-full")
#: distances below this fraction of the features' running variance (summed over features for L2) are never
#: OOD: a context that has not changed in its own terms is in distribution, whatever its units.
REL_EPS = 1e-6


class RunningMoments:
    """Exact running mean and variance per feature over every batch seen (float64).

    Batches are merged with the pairwise update of Chan, Golub and LeVeque (1979), so the result does not
    depend on how the stream was cut into batches beyond float rounding.

    Args:
        dim: number of features ``k``.
    """

    def __init__(self, dim: int):
        self.n = 0
        self.mean = np.zeros(dim)
        self.m2 = np.zeros(dim)

    def update(self, x: np.ndarray) -> None:
        """Merge a batch ``x (N, k)`` (cast to float64) into the moments (an empty batch changes nothing).

        Raises:
            ValueError: if ``x`` is not ``(N, k)`` or holds a non-finite value.
        """
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.mean.shape[0]:
            raise ValueError(f"RunningMoments.update: expected shape (N, {self.mean.shape[0]}), got {x.shape}")
        if x.shape[0] == 0:
            return
        bad = ~np.isfinite(x)
        if bad.any():
            row, col = (int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"OOD detector features: non-finite value {float(x[row, col])} in row {row}, feature "
                             f"{col} of the recent batch ({int(bad.sum())} non-finite in all)")
        nb = x.shape[0]
        mb = x.mean(axis=0)
        m2b = ((x - mb) ** 2).sum(axis=0)
        n = self.n + nb
        delta = mb - self.mean
        self.mean = self.mean + delta * (nb / n)
        self.m2 = self.m2 + m2b + delta ** 2 * (self.n * nb / n)
        self.n = n

    @property
    def var(self) -> np.ndarray:
        """``(k,)`` float64 population variance (0 before any data)."""
        return self.m2 / self.n if self.n else np.zeros_like(self.m2)

    @property
    def spread(self) -> np.ndarray:
        """``(k,)`` float64 non-negative spread of each feature, ``max(std, 1e-6 rms)``; 0 only for a feature that has
        always been exactly 0. Scales by ``c`` when the feature is multiplied by ``c > 0``."""
        var = self.var
        rms = np.sqrt(self.mean ** 2 + var)
        return np.maximum(np.sqrt(var), REL_EPS * rms)

    @property
    def scale(self) -> np.ndarray:
        """``(k,)`` float64 positive unit of each feature: :attr:`spread`, or 1 for a feature that was always 0.

        Dividing by it removes the unit: it scales by ``c`` under a change of units, except the all-zero
        fallback, which only applies where every value, and so every difference, is 0 anyway.
        """
        s = self.spread
        return np.where(s > 0, s, 1.0)

    def state_dict(self) -> dict:
        """Counters and moments (exact resume): ``n`` (int), ``mean`` and ``m2`` (``(k,)`` float64 copies)."""
        return {"n": int(self.n), "mean": self.mean.copy(), "m2": self.m2.copy()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output.

        Raises:
            KeyError: for a missing ``n``, ``mean`` or ``m2``.
            ValueError: ``mean`` and ``m2`` that are not two ``(k,)`` arrays, or values with no numeric form (the
                moments are left as they were).
        """
        n = int(state["n"])  # every field converted first: a refused state leaves the moments as they were
        mean = np.array(state["mean"], dtype=np.float64)
        m2 = np.array(state["m2"], dtype=np.float64)
        if mean.shape != m2.shape or mean.ndim != 1:
            raise ValueError(f"running moments state has mean of shape {mean.shape} and m2 of shape {m2.shape}; "
                             "expected two (k,) arrays")
        self.n, self.mean, self.m2 = n, mean, m2


def quantile_statistic(distances: np.ndarray, fraction: float) -> float:
    """The threshold that labels the ``k = ceil(fraction N)`` largest of ``N`` distances OOD.

    It is the midpoint between the ``k``-th largest distance ``d_k`` and the largest distance strictly below
    ``d_k`` (0 if there is none), so no distance lies on it and exactly the ``k`` largest are above it, or, when
    ``d_k`` is tied, the ``k`` largest and every distance equal to ``d_k`` (ties are common with
    piecewise-constant contexts: a threshold on the tie would label none of the tied states OOD, e.g. none of a
    reservoir filled during one long constant regime right after the context changes). Homogeneous: scaling
    every distance by ``c > 0`` scales the result by ``c`` (up to float rounding).

    Args:
        distances: ``(N,)`` non-negative distances, ``N >= 1``.
        fraction: target OOD fraction ``q`` in (0, 1). ``k`` is computed so that float rounding of ``q N``
            does not add one (``q = 0.07``, ``N = 100`` gives ``k = 7``).

    Returns:
        The statistic (float, >= 0); 0 when ``d_k = 0``. With ``k = N`` it is half the smallest distance.

    Raises:
        ValueError: for an empty input, a non-finite distance, or a fraction outside (0, 1).

    Example:
        >>> quantile_statistic(np.array([4.0, 1.0, 3.0, 2.0]), 0.5)   # 4 and 3 are above 2.5
        2.5
    """
    d = np.asarray(distances, dtype=np.float64).ravel()
    if d.size == 0:
        raise ValueError("quantile_statistic: no distances")
    if not np.all(np.isfinite(d)):
        raise ValueError(f"quantile_statistic: non-finite distance {float(d[~np.isfinite(d)][0])}")
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"target OOD fraction must be in (0, 1), got {fraction!r}")
    n = d.size
    # ceil(q n) without the float error of q n (0.07 * 100 = 7.000000000000001): q n is within n ulps of exact
    k = min(n, max(1, math.ceil(fraction * n - 1e-9 * n)))
    dk = float(np.partition(d, n - k)[n - k])  # the k-th largest is the (n-k)-th smallest (0-based)
    below = d[d < dk]
    return (dk + (float(below.max()) if below.size else 0.0)) / 2.0


def _is_real(x) -> bool:
    """A real number (not a bool, a string or None)."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


class AutoThreshold:
    """An OOD detector with an automatically calibrated threshold (``ood_threshold="auto"``).

    The detector interface of :mod:`lcpo.ood.detectors` (``fit(recent_obs)``, ``__call__(obs) -> (N,) bool``,
    ``distance_sq``) plus ``calibrate(candidate_obs)``, which :func:`lcpo.ood.sample_ood` calls once per update
    on the drawn candidates before labelling them (the ``"quantile"`` rule absorbs their distances then; the
    ``"standardized"`` rule needs nothing). Rules and their reasoning: module docstring and ``docs/lcpo.md``.

    Distances: ``"l2"`` uses the per-axis mean of each context group (as :class:`~lcpo.ood.detectors.L2Distance`)
    in raw context units under ``"quantile"`` and in running-std units under ``"standardized"``;
    ``"mahalanobis"`` (context entries) and ``"mahalanobis-full"`` (whole observation) use ``D^2`` of features
    divided by their running standard deviation, with :class:`~lcpo.ood.detectors.Mahalanobis`'s
    regularisation.

    Args:
        detector: ``"l2"``, ``"mahalanobis"`` or ``"mahalanobis-full"``.
        spec: the environment's context declaration (its ``scale`` is used only to report the L2 threshold in
            trace units, :attr:`threshold_report`).
        rule: ``"quantile"`` or ``"standardized"`` (L2 only).
        target_fraction: ``q`` of the quantile rule, in (0, 1).
        std_threshold: ``tau`` of the standardized rule (squared running-std units), > 0.

    Raises:
        ValueError: unknown detector or rule, the standardized rule with a Mahalanobis detector (its distance is
            already in units of the context's spread, so the rule would be a fixed ``D^2``), or a parameter
            out of range (the message names it).
    """

    def __init__(self, detector: str, spec: ContextSpec | None, rule: str = "quantile",
                 target_fraction: float = 0.5, std_threshold: float = 1.0):
        if detector not in AUTO_DETECTORS:
            raise ValueError(f"unknown OOD detector {detector!r}; choose one of {list(AUTO_DETECTORS)}")
        if rule not in AUTO_RULES:
            raise ValueError(f"unknown automatic OOD threshold rule {rule!r}; choose one of {list(AUTO_RULES)}")
        if rule == "standardized" and detector != "l2":
            raise ValueError(f"the 'standardized' OOD threshold rule applies to the l2 detector only, not "
                             f"{detector!r} (a Mahalanobis distance is already standardized); use 'quantile'")
        if not (_is_real(target_fraction) and 0.0 < float(target_fraction) < 1.0):
            raise ValueError(f"ood_target_fraction must be a number in (0, 1), got {target_fraction!r}")
        if not (_is_real(std_threshold) and math.isfinite(std_threshold) and std_threshold > 0):
            raise ValueError(f"ood_std_threshold must be a positive finite number, got {std_threshold!r}")
        if spec is None and detector != "mahalanobis-full":
            raise ValueError(f"the {detector} detector needs a ContextSpec")
        self.detector, self.spec, self.rule = detector, spec, rule
        self.target_fraction, self.std_threshold = float(target_fraction), float(std_threshold)
        self.ridge, self.floor = 1e-6, 1e-6  # as Mahalanobis, here in running-std units
        self.moments: RunningMoments | None = None  # sized on the first fit (mahalanobis-full: obs_dim)
        self.log_sum = 0.0      # quantile rule: sum of log t_u over the updates that calibrated
        self.calibrations = 0   # ... and their number
        self._fit = None        # this update's fitted center (L2) or (mean, precision) (Mahalanobis), and scale

    # -- features and distances -------------------------------------------------------------------------------
    def _features(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float64)
        if self.detector == "l2":
            return self.spec.summary(obs)
        if self.detector == "mahalanobis":
            return self.spec.select(obs)
        return obs

    def _standardized(self) -> bool:
        return self.detector != "l2" or self.rule == "standardized"

    def fit(self, recent_obs: np.ndarray) -> "AutoThreshold":
        """Merge the recent batch's features into the running moments, then fit the distance on it.

        Args:
            recent_obs: ``(M, obs_dim)`` observations of the recent batch (cast to float64), ``M >= 1``.

        Returns:
            ``self``.

        Raises:
            ValueError: for an empty batch, a non-finite context value, or features of another width than the
                first batch's (:meth:`RunningMoments.update`).
        """
        if np.ndim(recent_obs) != 2:
            raise ValueError(f"AutoThreshold.fit expects (M, obs_dim) observations, got shape {np.shape(recent_obs)}")
        x = self._features(recent_obs)
        if x.shape[0] < 1:
            raise ValueError("AutoThreshold.fit needs at least one recent observation")
        moments = RunningMoments(x.shape[1]) if self.moments is None else self.moments
        moments.update(x)  # refuses a non-finite batch before changing anything
        self.moments = moments
        scale = self.moments.scale if self._standardized() else np.ones(x.shape[1])
        z = x / scale
        if self.detector == "l2":
            self._fit = (z.mean(axis=0), scale)
        else:
            self._fit = (gaussian_fit(z, self.ridge, self.floor), scale)
        return self

    def distance_sq(self, obs: np.ndarray) -> np.ndarray:
        """``(N,)`` float64 squared distances of ``obs (N, obs_dim)`` to the recent batch: squared context units
        (L2, quantile rule), squared running-std units (L2, standardized rule) or ``D^2`` (Mahalanobis).

        Raises:
            RuntimeError: before :meth:`fit`.
        """
        if self._fit is None:
            raise RuntimeError("AutoThreshold: call fit(recent_obs) first")
        params, scale = self._fit
        z = self._features(obs) / scale
        if self.detector == "l2":
            d = z - params
            return np.einsum("ij,ij->i", d, d)
        return mahalanobis_sq(z, *params)

    def _eps(self) -> float:
        """Distances at or below this are never OOD: ``REL_EPS`` in standardized units (or ``D^2``), else
        ``REL_EPS`` times the features' summed squared :attr:`RunningMoments.spread` (module doc)."""
        if self._standardized():
            return REL_EPS
        return REL_EPS * float(np.sum(self.moments.spread ** 2))

    # -- the threshold ------------------------------------------------------------------------------------------
    @property
    def threshold(self) -> float:
        """The current threshold in the units of :meth:`distance_sq` (``inf`` before any calibration of the
        quantile rule, i.e. nothing is OOD until the reservoir has been seen once)."""
        if self.rule == "standardized":
            return self.std_threshold
        if self.calibrations == 0:
            return math.inf
        return math.exp(self.log_sum / self.calibrations)

    @property
    def threshold_report(self) -> float:
        """The threshold as a diagnostic (``ood/threshold``): for L2 the equivalent ``sigma^2`` in trace units
        (comparable with a hand-picked ``ood_threshold``; the standardized rule's ``tau`` times the mean running
        variance of the context axes), for Mahalanobis ``D^2``. NaN before it exists."""
        t = self.threshold
        if not math.isfinite(t) or self.moments is None:
            return math.nan
        if self.detector != "l2":
            return t
        if self.rule == "standardized":
            t = t * float(np.mean(self.moments.spread ** 2))
        return t / self.spec.scale ** 2

    def calibrate(self, candidate_obs: np.ndarray) -> None:
        """Absorb one update's reservoir candidates (``(N, obs_dim)``, ``N >= 1``) into the threshold estimate.

        Called by :func:`lcpo.ood.sample_ood` once per update, after :meth:`fit` and before labelling. The
        quantile rule adds ``log t_u`` (:func:`quantile_statistic`) to its running mean, unless ``t_u`` is at or
        below the ``eps`` floor (the candidates cannot be told from the present: the update says nothing about
        how far apart contexts are, and its ``log t_u`` would depend on the floor, i.e. on rounding); the
        standardized rule does nothing.

        Raises:
            RuntimeError: before :meth:`fit`.
            ValueError: for a non-finite candidate distance (:func:`quantile_statistic`).
        """
        if self.rule != "quantile":
            return
        d = self.distance_sq(candidate_obs)
        if d.size == 0:
            return
        t = quantile_statistic(d, self.target_fraction)
        if t <= self._eps():
            return
        self.log_sum += math.log(t)
        self.calibrations += 1

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """``(N,) bool`` for ``obs (N, obs_dim)``: True where the distance exceeds both the threshold and the
        ``eps`` floor.

        Raises:
            RuntimeError: before :meth:`fit`.
        """
        d = self.distance_sq(obs)
        return (d > self.threshold) & (d > self._eps())

    # -- persistence ----------------------------------------------------------------------------------------------
    def _identity(self) -> dict:
        return {"detector": self.detector, "rule": self.rule, "target_fraction": self.target_fraction,
                "std_threshold": self.std_threshold}

    def state_dict(self) -> dict:
        """Running moments and the quantile rule's sums (the per-update fit is redone at every update), with
        the detector, rule and parameters they were computed for."""
        return {"moments": None if self.moments is None else self.moments.state_dict(),
                "log_sum": float(self.log_sum), "calibrations": int(self.calibrations), **self._identity()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly.

        Raises:
            ValueError: if the state was computed for another detector, rule or parameter (its sums are in
                another unit or for another target), naming the setting; states written before these were
                recorded are accepted.
            KeyError: for a state without ``moments``, ``log_sum`` or ``calibrations``.
        """
        for key, mine in self._identity().items():
            theirs = state.get(key, mine)
            if theirs != mine:
                raise ValueError(f"the checkpoint's automatic OOD threshold was calibrated with {key}={theirs!r}, "
                                 f"this agent uses {key}={mine!r}; resume with the run's own setting")
        m = state["moments"]  # everything read before anything changes: a refused state leaves the calibration
        log_sum, calibrations = float(state["log_sum"]), int(state["calibrations"])
        moments = None
        if m is not None:
            moments = RunningMoments(len(m["mean"]))
            moments.load_state_dict(m)
        self.moments, self.log_sum, self.calibrations = moments, log_sum, calibrations
        self._fit = None


def load_calibration(detector, state: dict) -> None:
    """Restore an agent's automatic-threshold state from its ``state["ood_calibration"]`` (LCPO, LCPO-P).

    A detector with a fixed threshold has no state (checkpoints written before this module existed have none).

    Raises:
        ValueError: if ``detector`` is an :class:`AutoThreshold` and ``state`` has no calibration (a checkpoint
            written with a fixed threshold: resume it with that threshold), or the other way round (a checkpoint
            whose threshold was calibrated, loaded into an agent with a fixed one), or a calibration for other
            settings (:meth:`AutoThreshold.load_state_dict`).
    """
    if not isinstance(detector, AutoThreshold):
        if state.get("ood_calibration") is not None:
            raise ValueError("this checkpoint's OOD threshold was calibrated automatically (ood_threshold='auto') "
                             "but the agent uses a fixed one; resume with --set ood_threshold=auto")
        return
    if state.get("ood_calibration") is None:
        raise ValueError("this checkpoint was written with a fixed OOD threshold but the agent calibrates it "
                         "automatically; resume with the threshold the run used (--set ood_threshold=<value>)")
    detector.load_state_dict(state["ood_calibration"])
