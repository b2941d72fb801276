"""The canonical named traces: the paper's wind traces 1-4 (Figure 7), an all-zero trace, real NDBC wind.

The paper's trace files are not public, so ``wind-1`` ... ``wind-4`` are seeded equivalents built from the
generators in :mod:`lcpo.contexts.generators`, with every parameter below. Time-structure parameters are
fractions of the trace length, so a short trace is the paper's shape compressed in time (the per-step noise
level is kept). Paper lengths: 20M steps for traces 1-2, 8M for 3-4 (:data:`PAPER_LENGTHS`); the default is
:data:`DEFAULT_LENGTH` = 400,000 steps, which keeps memory and generation time small. All wind traces have two
axes, ``(wind_x, wind_y)``, in trace units, inside ``[-4, 4]``. An int seed is mixed with the trace's position
in the registry (``SeedSequence([seed, index])``), so different traces with the same seed draw independently.

- ``wind-1``: per axis, an Ornstein-Uhlenbeck drift (:func:`~lcpo.contexts.generators.ornstein_uhlenbeck`,
  mean -0.75, stationary std 0.55, relaxation time 2% of the length, i.e. 400K steps at 20M) plus white noise of
  std 0.1, clipped to ``[-2.5, 1.0]``. x and y are independent.
- ``wind-2``: the same kind, wider: mean 0, stationary std 1.6, relaxation time 2% of the length, white noise
  0.1, clipped to ``[-4, 4]``.
- ``wind-3``: piecewise constant plus white noise of std 0.3, clipped to ``[-4, 4]``. Changes at fractions
  1.1/8, 2.2/8, 3.9/8, 5.4/8, 6.9/8 of the length (1.1M, 2.2M, 3.9M, 5.4M, 6.9M of 8M steps); x levels
  -0.3, 0.7, 0.6, 3.5, -0.4, -1.9; y levels -1, -0.5, 0.8, -0.4, 0, -2.7.
- ``wind-4``: white noise of std 0.1 around 0 for the first 4.5/8 of the length; the rest is split into 7 equal
  windows, each holding one burst per axis: ``A sin(2 pi c u + phi) sin(pi u)**2`` for ``u`` in ``[0, 1)`` across
  the window, amplitude ``A ~ U(2.5, 5)``, ``c`` cycles in ``{1, 2, 3}`` and phase ``phi ~ U(0, 2 pi)`` drawn per
  burst and axis from the seed; plus the same noise, clipped to ``[-4, 4]`` (so the largest bursts saturate).
- ``zero``: all zeros, two axes (a stationary control).
- ``ndbc-46002``: measured wind at NOAA NDBC buoy 46002, 2015-12-31 to 2016-07-18, 10-minute records. Per
  record ``u = -WSPD sin(WDIR)``, ``v = -WSPD cos(WDIR)`` (the direction the wind blows toward, m/s), times
  :data:`NDBC_46002_SCALE` = 4 / max(|u|, |v|) over the record, so the trace spans exactly ``[-4, 4]``. The
  package ships the per-record values (``lcpo/data/ndbc_46002_wind.npy``, built by
  ``scripts/build_ndbc_trace.py``); at load they are linearly interpolated in time onto the step grid:
  :data:`NDBC_STEPS_PER_10MIN` = 20 environment steps per 10 minutes of real time, so the gaps in the record
  (up to 2 h 10 min) are bridged by interpolation over their real duration (575,501 steps in all). Given a
  ``length``, the whole record is instead resampled onto ``length`` equally spaced steps.

:func:`resolve_trace` turns anything a user may pass (a trace, an array, a name, a path) into a
:class:`ContextTrace`.
"""

from __future__ import annotations

import difflib
import functools
import os
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from lcpo.cli.catalog import DEFAULT_TRACE, TRACE_NAMES
from lcpo.contexts import generators as gen
from lcpo.contexts.io import SUFFIXES, load_trace
from lcpo.contexts.trace import ContextTrace, TraceError
from lcpo.persistence.strict_json import show

__all__ = [
    "TRACE_NAMES",
    "DEFAULT_TRACE",
    "DEFAULT_LENGTH",
    "PAPER_LENGTHS",
    "WIND_BOUND",
    "WIND_COLUMNS",
    "NDBC_STEPS_PER_10MIN",
    "NDBC_46002_SCALE",
    "wind_1",
    "wind_2",
    "wind_3",
    "wind_4",
    "zero",
    "ndbc_46002",
    "build_ndbc_records",
    "make_trace",
    "resolve_trace",
]

WIND_BOUND = 4.0
"""All canonical wind traces lie in ``[-WIND_BOUND, WIND_BOUND]`` (trace units)."""

WIND_COLUMNS = ["wind_x", "wind_y"]
"""Axis names of the canonical wind traces (CSV header, plot legend)."""

DEFAULT_LENGTH = 400_000
"""Default number of steps of the synthetic traces when no ``length`` is given."""

PAPER_LENGTHS = {"wind-1": 20_000_000, "wind-2": 20_000_000, "wind-3": 8_000_000, "wind-4": 8_000_000}
"""Lengths of the paper's traces (Figure 7), in environment steps."""


NDBC_STEPS_PER_10MIN = 20
"""Environment steps per 10 minutes of real time in the ``ndbc-46002`` trace (one step = 30 s)."""

NDBC_46002_MAX_COMPONENT = 20.851519386404032
"""max(|u|, |v|) over the NDBC 46002 2016 record, in m/s (checked against the source by the tests)."""

NDBC_46002_SCALE = WIND_BOUND / NDBC_46002_MAX_COMPONENT
"""Scale from m/s to trace units of the ``ndbc-46002`` trace (about 0.1918)."""

NDBC_46002_SOURCE_SHA256 = "7bbee729fb25acde488271d24c4c5f4a4d92d5a135e15370d75ed93b6c78cce9"
"""sha256 of the source file ``46002c2016.txt`` the packaged records were derived from."""

_NDBC_RESOURCE = "ndbc_46002_wind.npy"

# Paper trace 3 (Figure 7): change points as fractions of 8M steps, levels per segment (x, y).
_WIND3_CHANGES = np.array([1.1, 2.2, 3.9, 5.4, 6.9]) / 8.0
_WIND3_LEVELS = np.array([[-0.3, -1.0], [0.7, -0.5], [0.6, 0.8], [3.5, -0.4], [-0.4, 0.0], [-1.9, -2.7]])


def _length(name: str, length: int | None) -> int:
    if length is None:
        return DEFAULT_LENGTH
    if isinstance(length, (bool, np.bool_)) or not isinstance(length, (int, np.integer)) or length < 1:
        raise TraceError(f"trace {name!r}: length must be a positive integer, got {length!r}")
    return int(length)


def _wind(name: str, values: np.ndarray, bounds: tuple[float, float], seed: int, params: dict[str, Any],
          description: str) -> ContextTrace:
    meta = {"generator": name, "description": description, "seed": seed, "length": int(values.shape[0]),
            "columns": list(WIND_COLUMNS), "units": "trace units", "clip": list(bounds), "params": params}
    return ContextTrace(gen.clip(values, bounds), name, meta)


def _ou_wind(name: str, length: int | None, seed: gen.SeedLike, mean: float, std: float, relax_fraction: float,
             noise_std: float, bounds: tuple[float, float]) -> ContextTrace:
    n = _length(name, length)
    rng = _rng(name, seed)
    theta = 1.0 / max(relax_fraction * n, 1e-12)
    sigma = std * np.sqrt(2.0 * theta)  # stationary std = sigma / sqrt(2 theta)
    values = gen.ornstein_uhlenbeck(n, 2, theta=theta, mu=mean, sigma=sigma, seed=rng)
    values += noise_std * rng.standard_normal(values.shape)
    params = {"mean": mean, "stationary_std": std, "relaxation_fraction": relax_fraction, "theta": theta,
              "sigma": sigma, "noise_std": noise_std}
    return _wind(name, values, bounds, _seed_repr(seed), params, TRACE_NAMES[name])


def _rng(name: str, seed: gen.SeedLike) -> np.random.Generator:
    """A generator for trace ``name``: an int seed is mixed with the trace's index in the registry, so that
    ``wind-1`` and ``wind-2`` with the same seed do not share their random draws; a Generator is used as is."""
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)) and seed >= 0:
        return np.random.default_rng(np.random.SeedSequence([int(seed), list(_MAKERS).index(name)]))
    return gen.as_generator(seed)


def _seed_repr(seed: gen.SeedLike) -> Any:
    return int(seed) if isinstance(seed, (int, np.integer)) else repr(seed)


def wind_1(length: int | None = None, seed: gen.SeedLike = 0) -> ContextTrace:
    """Paper trace 1: slow Ornstein-Uhlenbeck drift per axis, roughly within ``[-2.5, 1]``.

    Args:
        length: steps (default :data:`DEFAULT_LENGTH`; the paper's is 20M).
        seed: int, ``SeedSequence`` or ``Generator``.

    Returns:
        ``(length, 2)`` trace named ``"wind-1"`` (parameters in the module docstring and its metadata).

    Raises:
        TraceError: if ``length`` is not a positive integer.
    """
    return _ou_wind("wind-1", length, seed, mean=-0.75, std=0.55, relax_fraction=0.02, noise_std=0.1,
                    bounds=(-2.5, 1.0))


def wind_2(length: int | None = None, seed: gen.SeedLike = 0) -> ContextTrace:
    """Paper trace 2: wider Ornstein-Uhlenbeck drift per axis, spanning ``[-4, 4]``.

    Args:
        length: steps (default :data:`DEFAULT_LENGTH`; the paper's is 20M).
        seed: int, ``SeedSequence`` or ``Generator``.

    Returns:
        ``(length, 2)`` trace named ``"wind-2"``.

    Raises:
        TraceError: if ``length`` is not a positive integer.
    """
    return _ou_wind("wind-2", length, seed, mean=0.0, std=1.6, relax_fraction=0.02, noise_std=0.1,
                    bounds=(-WIND_BOUND, WIND_BOUND))


def wind_3(length: int | None = None, seed: gen.SeedLike = 0) -> ContextTrace:
    """Paper trace 3: six constant segments (levels and change points of Figure 7) plus noise of std 0.3.

    Args:
        length: steps (default :data:`DEFAULT_LENGTH`; the paper's is 8M). At least 8 steps.
        seed: int, ``SeedSequence`` or ``Generator``.

    Returns:
        ``(length, 2)`` trace named ``"wind-3"``; ``metadata["params"]["change_points"]`` holds the steps.

    Raises:
        TraceError: if ``length`` is not an integer ``>= 8``.
    """
    name = "wind-3"
    n = _length(name, length)
    if n < 8:
        raise TraceError(f"trace {name!r}: length must be >= 8 to hold its 6 segments, got {n}")
    changes = np.round(_WIND3_CHANGES * n).astype(np.int64)
    noise_std = 0.3
    values = gen.piecewise_constant(n, changes, _WIND3_LEVELS, noise_std=noise_std,
                                   seed=_rng(name, seed))
    params = {"change_points": changes.tolist(), "change_fractions": _WIND3_CHANGES.tolist(),
              "levels": _WIND3_LEVELS.tolist(), "noise_std": noise_std}
    return _wind(name, values, (-WIND_BOUND, WIND_BOUND), _seed_repr(seed), params, TRACE_NAMES[name])


def wind_4(length: int | None = None, seed: gen.SeedLike = 0) -> ContextTrace:
    """Paper trace 4: calm (noise around 0) for the first 4.5/8 of the length, then 7 sinusoidal bursts.

    Args:
        length: steps (default :data:`DEFAULT_LENGTH`; the paper's is 8M).
        seed: int, ``SeedSequence`` or ``Generator``.

    Returns:
        ``(length, 2)`` trace named ``"wind-4"``; ``metadata["params"]`` holds the onset step and each burst's
        amplitudes, cycles and phases.

    Raises:
        TraceError: if ``length`` is not a positive integer.
    """
    name = "wind-4"
    n = _length(name, length)
    rng = _rng(name, seed)
    onset_fraction, n_bursts, noise_std = 4.5 / 8.0, 7, 0.1
    onset = int(round(onset_fraction * n))
    amplitude = rng.uniform(2.5, 5.0, size=(n_bursts, 2))
    cycles = rng.integers(1, 4, size=(n_bursts, 2))
    phase = rng.uniform(0.0, 2.0 * np.pi, size=(n_bursts, 2))

    def bursts(t: np.ndarray) -> np.ndarray:
        out = np.zeros((t.size, 2))
        tail = t >= onset
        pos = (t[tail] - onset) / max(n - onset, 1) * n_bursts  # burst index + position within it
        k = np.minimum(pos.astype(np.int64), n_bursts - 1)
        u = (pos - k)[:, None]
        out[tail] = (amplitude[k] * np.sin(2.0 * np.pi * cycles[k] * u + phase[k])
                     * np.sin(np.pi * u) ** 2)
        return out

    values = gen.signal_plus_noise(n, bursts, noise_std=noise_std, seed=rng)
    params = {"onset": onset, "onset_fraction": onset_fraction, "n_bursts": n_bursts, "noise_std": noise_std,
              "amplitude": amplitude.tolist(), "cycles": cycles.tolist(), "phase": phase.tolist()}
    return _wind(name, values, (-WIND_BOUND, WIND_BOUND), _seed_repr(seed), params, TRACE_NAMES[name])


def zero(length: int | None = None, seed: gen.SeedLike = 0) -> ContextTrace:
    """An all-zero two-axis trace (no wind). ``seed`` is accepted and ignored.

    Returns:
        ``(length, 2)`` zeros named ``"zero"``.

    Raises:
        TraceError: if ``length`` is not a positive integer.
    """
    n = _length("zero", length)
    meta = {"generator": "zero", "description": TRACE_NAMES["zero"], "length": n, "columns": list(WIND_COLUMNS),
            "units": "trace units"}
    return ContextTrace(np.zeros((n, 2)), "zero", meta)


def build_ndbc_records(source: str | os.PathLike) -> np.ndarray:
    """Derive the packaged per-record NDBC wind from the raw cwind file (used by ``scripts/build_ndbc_trace.py``).

    The conversion is :func:`lcpo.contexts.importers.ndbc_records` (the one ``lcpo traces import ndbc`` uses),
    strict about missing values: the packaged record is the file as published, no record dropped.

    Args:
        source: path to NDBC's ``46002c2016.txt`` (cwind format: ``#YY MM DD hh mm WDIR WSPD GDR GST GTIME``,
            two ``#`` header lines, UTC times, WDIR in degrees the wind comes from, WSPD in m/s).

    Returns:
        ``(N, 3)`` float32 array, one row per record: minutes since the first record, ``u * scale``,
        ``v * scale``, with ``u = -WSPD sin(WDIR)``, ``v = -WSPD cos(WDIR)`` (toward which the wind blows) and
        ``scale = 4 / max(|u|, |v|)`` over the file.

    Raises:
        TraceError: unreadable file, missing values (WDIR 999 / WSPD 99), or times that do not increase.
    """
    from lcpo.contexts.importers import ndbc_records

    return ndbc_records(source, missing="error")[0]


def _ndbc_records() -> np.ndarray:
    resource = resources.files("lcpo").joinpath("data", _NDBC_RESOURCE)
    try:
        with resource.open("rb") as handle:
            records = np.load(handle, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise TraceError(f"packaged NDBC trace lcpo/data/{_NDBC_RESOURCE} is missing or unreadable: {exc}; "
                         "rebuild it with scripts/build_ndbc_trace.py") from exc
    if records.ndim != 2 or records.shape[1] != 3:
        raise TraceError(f"lcpo/data/{_NDBC_RESOURCE}: expected (N, 3) records, got shape {records.shape}")
    return records.astype(np.float64)


def ndbc_46002(length: int | None = None, seed: gen.SeedLike = 0,
               steps_per_10min: int = NDBC_STEPS_PER_10MIN) -> ContextTrace:
    """Real wind at NDBC buoy 46002 (2016), scaled into ``[-4, 4]`` and resampled onto environment steps.

    Step ``k`` is at real time ``k * 10 / steps_per_10min`` minutes after the first record; values are linearly
    interpolated in time between records, so gaps in the record last their real duration.

    Args:
        length: if given, resample the whole record onto ``length`` equally spaced steps instead.
        seed: accepted and ignored (the trace is deterministic).
        steps_per_10min: environment steps per 10 minutes of real time (default 20, one step = 30 s).

    Returns:
        ``(T, 2)`` trace named ``"ndbc-46002"`` (``T = 575,501`` with the defaults).

    Raises:
        TraceError: if ``length`` or ``steps_per_10min`` is not a positive integer, or the packaged file is
            missing.
    """
    name = "ndbc-46002"
    if isinstance(steps_per_10min, bool) or not isinstance(steps_per_10min, (int, np.integer)) \
            or steps_per_10min < 1:
        raise TraceError(f"trace {name!r}: steps_per_10min must be a positive integer, got {steps_per_10min!r}")
    from lcpo.contexts.importers import resample  # the conversion `lcpo traces import ndbc` shares

    records = _ndbc_records()
    if length is None:
        values, _ = resample(records[:, 0], records[:, 1:], step_minutes=10.0 / steps_per_10min)
        rule = f"linear interpolation in time, {steps_per_10min} steps per 10 minutes"
    else:
        n = _length(name, length)
        values, rule = resample(records[:, 0], records[:, 1:], length=n)
    n = values.shape[0]
    meta = {"generator": name, "description": TRACE_NAMES[name], "length": n, "columns": list(WIND_COLUMNS),
            "units": "trace units (m/s times scale)", "scale": NDBC_46002_SCALE,
            "scale_rule": "4 / max(|u|, |v|) over the record", "resampling": rule,
            "source": "NOAA NDBC buoy 46002 continuous winds 2016 (46002c2016.txt)",
            "source_sha256": NDBC_46002_SOURCE_SHA256, "licence": "public domain (NOAA, U.S. Government work)"}
    return ContextTrace(values, name, meta)


# TRACE_NAMES (name -> description) lives in lcpo.cli.catalog, importable without NumPy (`lcpo traces list`).

_MAKERS: dict[str, Callable[..., ContextTrace]] = {
    "wind-1": wind_1, "wind-2": wind_2, "wind-3": wind_3, "wind-4": wind_4, "zero": zero,
    "ndbc-46002": ndbc_46002,
}


def make_trace(name: str, length: int | None = None, seed: gen.SeedLike = 0) -> ContextTrace:
    """Build a registered trace by name.

    Args:
        name: one of :data:`TRACE_NAMES`.
        length: steps; default per trace (:data:`DEFAULT_LENGTH` for synthetic ones, the natural
            resolution for ``ndbc-46002``).
        seed: int, ``SeedSequence`` or ``Generator``.

    Returns:
        The trace. With an int seed, a repeated call with the same name, length and seed returns the same
        object (traces are immutable: read-only values, and nothing in lcpo writes their metadata). The
        :data:`RECENT_TRACES` most recent are kept, so the N seeds of a population, and the environments made
        for each seed's run folder, share one copy of a 20M-step trace instead of generating one each (320 MB
        and about 3 s of CPU apiece). A ``Generator`` or ``SeedSequence`` seed always generates afresh.

    Raises:
        TraceError: unknown name (the message lists the known names and suggests close ones), bad length.
    """
    maker = _MAKERS.get(name)
    if maker is None:
        close = difflib.get_close_matches(name, list(TRACE_NAMES), n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        raise TraceError(f"unknown trace name {name!r}{hint}; known names: {', '.join(TRACE_NAMES)}; "
                         f"or give a path to a {'/'.join(SUFFIXES)} file")
    key = _recent_key(name, length, seed)
    return maker(length=length, seed=seed) if key is None else _recent(*key)


#: How many generated traces :func:`make_trace` keeps for reuse (name, length and int seed alike).
RECENT_TRACES = 2


@functools.lru_cache(maxsize=RECENT_TRACES)
def _recent(name: str, length: int | None, seed: int) -> ContextTrace:
    """:func:`make_trace`'s generation for an int seed, the :data:`RECENT_TRACES` most recent kept."""
    return _MAKERS[name](length=length, seed=seed)


def _is_plain_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _recent_key(name: str, length: int | None, seed: gen.SeedLike) -> tuple | None:
    """The reuse key of a :func:`make_trace` call, or None when it must generate (a stateful or odd seed, a
    length that :func:`_length` will refuse)."""
    if not _is_plain_int(seed) or not (length is None or _is_plain_int(length)):
        return None
    return name, None if length is None else int(length), int(seed)


def _fit_length(trace: ContextTrace, length: int | None) -> ContextTrace:
    """Cut a concrete trace to ``length`` steps, or repeat it (wrapping, like global time does)."""
    if length is None or length == len(trace):
        return trace
    n = _length(trace.name, length)
    idx = np.arange(n) % len(trace)
    meta = dict(trace.metadata, length=n, fitted_from=len(trace))
    return ContextTrace(trace.values[idx], trace.name, meta)


def _looks_like_path(spec: str) -> bool:
    suffix = Path(spec).suffix[1:]
    return (suffix.isalpha() or os.sep in spec or "/" in spec or Path(spec).is_file())


def resolve_trace(spec: ContextTrace | np.ndarray | str | os.PathLike, length: int | None = None,
                  seed: gen.SeedLike = 0) -> ContextTrace:
    """Turn a trace, an array, a registered name or a file path into a :class:`ContextTrace`.

    Args:
        spec: a :class:`ContextTrace` (returned as is); a ``(T, d)`` array (named ``"array"``); a name from
            :data:`TRACE_NAMES`; or a path to a ``.npy``/``.csv`` file (see :func:`~lcpo.contexts.io.load_trace`).
        length: for a name, the number of steps to generate (see :func:`make_trace`); for a concrete trace
            (trace, array, file), cut it to the first ``length`` steps or repeat it cyclically up to ``length``.
        seed: the generator seed for synthetic names.

    Returns:
        The trace.

    Raises:
        TraceError: unknown names (listing known names and close matches), invalid arrays or files.
        TypeError: ``spec`` of another type.
    """
    if isinstance(spec, ContextTrace):
        return _fit_length(spec, length)
    if isinstance(spec, np.ndarray):
        return _fit_length(ContextTrace(spec, "array", {"source": "array"}), length)
    if isinstance(spec, os.PathLike):
        return _fit_length(load_trace(spec), length)
    if isinstance(spec, str):
        if spec in _MAKERS:
            return make_trace(spec, length=length, seed=seed)
        if _looks_like_path(spec):
            return _fit_length(load_trace(spec), length)
        return make_trace(spec, length=length, seed=seed)  # raises the unknown-name error
    raise TypeError(f"trace must be a ContextTrace, a (T, d) array, a trace name or a file path, got {show(spec)}")
