"""Shared test settings: one torch/BLAS thread (the networks are tiny; threads only add contention)."""

import pytest

from lcpo.threads import limit_threads


@pytest.fixture(autouse=True, scope="session")
def _single_thread():
    with limit_threads(1):
        yield
