"""Experiments: sweep configs, the sweep runner (local process pool or Dask), the results store, the report.

``lcpo sweep CONFIG --out RUNS_DIR`` expands a TOML grid (:mod:`lcpo.experiments.config`) into run specs and
runs them (:mod:`lcpo.experiments.runner`) through ``lcpo.online.run.execute``; :mod:`lcpo.experiments.store`
gathers one row per run and the per-episode series; ``lcpo report RUNS_DIR --out DIR``
(:mod:`lcpo.experiments.report`) writes the paper's tables and figures. See ``docs/experiments.md``.

Names are imported lazily so that sweep worker processes, which only need the runner, do not pay for pandas
and SciPy.
"""

from importlib import import_module

_EXPORTS = {
    "ConfigError": "config", "RunSpec": "config", "SweepConfig": "config", "expand": "config",
    "load_config": "config", "make_run_id": "config", "parse_config": "config",
    "RunFailed": "runner", "RunOutcome": "runner", "run_one": "runner", "run_sweep": "runner",
    "MeanCI": "stats", "mean_ci": "stats", "normalize_scores": "stats", "t_interval": "stats",
    "welch_test": "stats", "holm": "stats", "iqm_ci": "stats", "poi_ci": "stats",
    "collect": "store", "load_store": "store", "write_store": "store",
    "report": "report", "write_report": "report",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f"lcpo.experiments.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'lcpo.experiments' has no attribute {name!r}")


def __dir__():
    return __all__
