"""`lcpo run` details a user trips on: the summary names the trace it ran on; a warm-up that swallows the run is
refused; a continuing environment's default reset and score."""

from __future__ import annotations

import json

import pytest

from lcpo.cli.main import main
from lcpo.online.run import RunConfig, execute


def test_summary_records_the_resolved_default_trace(tmp_path):
    summary = execute(RunConfig(agent="a2c", steps=400, checkpoint_every=0), tmp_path / "r")
    assert summary["config"]["trace"] is None  # the config as given ...
    assert summary["trace"] == {"name": "ndbc-46002", "length": 575_501, "unit": "steps"}  # ... and what ran
    cut = execute(RunConfig(agent="a2c", steps=400, checkpoint_every=0, trace="wind-1", trace_length=5000),
                  tmp_path / "c")
    assert cut["trace"] == {"name": "wind-1", "length": 5000, "unit": "steps"}


def test_straggler_summary_names_its_workload(tmp_path):
    summary = execute(RunConfig(env="lcpo/StragglerMitigation-v0", agent="a2c", steps=200, checkpoint_every=0,
                                reset="never"), tmp_path / "s")
    assert summary["trace"]["name"] == "azure-llm" and summary["trace"]["unit"] == "requests"
    assert summary["trace"]["length"] > 10_000 and summary["return_unit"] == "200-step window"


@pytest.mark.parametrize("warmup, steps", [(500, 500), (600, 500)])
def test_warmup_not_below_steps_is_refused(tmp_path, capsys, warmup, steps):
    rc = main(["run", "--agent", "a2c", "--steps", str(steps), "--warmup", str(warmup), "--no-progress",
               "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and f"--warmup {warmup} must be smaller than --steps {steps}" in err
    assert not (tmp_path / "r").exists()
    with pytest.raises(ValueError, match="warmup_steps .* must be smaller than steps"):
        RunConfig(agent="a2c", steps=steps, warmup_steps=warmup)


def test_straggler_cli_default_is_continuing(tmp_path, capsys):
    rc = main(["run", "--env", "lcpo/StragglerMitigation-v0", "--agent", "a2c", "--steps", "400",
               "--checkpoint-every", "0", "--no-progress", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 0 and "over 2 200-step windows" in err
    summary = json.loads((tmp_path / "r" / "a2c-s0" / "summary.json").read_text())
    assert summary["config"]["reset"] == "never" and summary["lifelong_return"] is not None
