"""A check shared by the device tests (tests/population/test_device.py on the CPU's device code path,
tests/population/test_cuda.py on a real GPU): a population cut on one device resumes on the CPU's host path."""

from __future__ import annotations

import contextlib
import csv

import numpy as np
import pytest
import torch

from lcpo.online.population import execute_population
from lcpo.online.run import RunConfig


def episode_returns(folder) -> np.ndarray:
    """``(episodes,)`` float64 returns of a run folder's episodes.csv."""
    with open(folder / "episodes.csv") as fh:
        return np.array([float(r["return"]) for r in csv.DictReader(fh)])


def check_cut_resumes_on_the_host(tmp_path, rtol: float, device: str = "cpu", cut_context=contextlib.nullcontext):
    """Two LCPO seeds stopped at step 400 of 800 on ``device`` (inside ``cut_context()``, e.g. a patch forcing
    the device code path): the checkpoint holds CPU tensors only; resumed on the host path, every episode return
    and the lifelong return equal the host path's uninterrupted run within ``rtol``."""
    cfgs = [RunConfig(agent="lcpo", trace="wind-1", trace_length=2000, steps=800, seed=s, checkpoint_every=200,
                      diagnostics_every=200, overrides={"hidden": [16], "reservoir_size": 600}) for s in (0, 1)]
    ref = execute_population(cfgs, [tmp_path / f"ref{s}" for s in (0, 1)])
    outs = [tmp_path / f"cut{s}" for s in (0, 1)]
    with cut_context():
        execute_population(cfgs, outs, stop_at=400, device=device)
    state = torch.load(next((outs[0] / "checkpoint").glob("step-*/state.pt")), weights_only=True)
    assert state and all(t.device.type == "cpu" for t in state.values())
    resumed = execute_population(cfgs, outs)
    for s, (r, q) in enumerate(zip(resumed, ref)):
        assert r["resumed_from"] == [400]
        np.testing.assert_allclose(episode_returns(outs[s]), episode_returns(tmp_path / f"ref{s}"), rtol=rtol)
        assert r["lifelong_return"] == pytest.approx(q["lifelong_return"], rel=rtol)
