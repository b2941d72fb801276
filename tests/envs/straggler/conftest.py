"""Fixtures for the straggler tests."""

from __future__ import annotations

import pytest
from straggler_helpers import exp_workload


@pytest.fixture
def exp60():
    """60 req/s, exponential sizes of mean 28 ms (offered load ~0.32 without hedging)."""
    return exp_workload(200_000, 60.0, 28.0, seed=1)
