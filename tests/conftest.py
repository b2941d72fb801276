"""Shared test settings: one torch/BLAS thread (the networks are tiny; threads only add contention); a loader
for the scripts under benchmarks/ (they are not a package)."""

import importlib.util
from pathlib import Path

import pytest

from lcpo.online.threads import limit_threads


@pytest.fixture(autouse=True, scope="session")
def _single_thread():
    with limit_threads(1):
        yield


@pytest.fixture(scope="session")
def load_benchmark():
    """``load_benchmark("ood_auto")``: the module ``benchmarks/ood_auto.py``, imported from its file."""
    root = Path(__file__).resolve().parents[1]

    def load(name: str):
        spec = importlib.util.spec_from_file_location(f"benchmark_{name}", root / "benchmarks" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load
