"""Runs: summary contents, kill-and-resume equality, the CLI, bad input."""

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from lcpo.cli.main import main
from lcpo.online.run import RunConfig, execute
from summaries import comparable

def _stable(summary):
    return comparable(summary, "resumed_from")


def _cfg(**kw):
    base = dict(trace="wind-3", trace_length=20_000, agent="lcpo", steps=3000, seed=4, checkpoint_every=1000,
                overrides={"reservoir_size": 1000})
    base.update(kw)
    return RunConfig(**base)


def test_summary_fields_and_files(tmp_path):
    s = execute(_cfg(), tmp_path / "r")
    for key in ("lifelong_return", "episodes", "steps", "wall_time_s", "steps_per_s", "constrained_fraction",
                "ood_fraction", "versions", "config"):
        assert key in s
    assert s["steps"] == 3000 and s["episodes"] == 15
    eps = pd.read_csv(tmp_path / "r" / "episodes.csv")
    assert s["lifelong_return"] == pytest.approx(eps["return"].mean())
    assert json.loads((tmp_path / "r" / "summary.json").read_text()) == s
    assert 0.0 < s["constrained_fraction"] <= 1.0 and 0.0 <= s["line_search_accept_fraction"] <= 1.0


def test_warmup_excludes_early_episodes(tmp_path):
    s_all = execute(_cfg(agent="a2c", overrides={}), tmp_path / "a")
    s_warm = execute(_cfg(agent="a2c", overrides={}, warmup_steps=1000), tmp_path / "b")
    eps = pd.read_csv(tmp_path / "a" / "episodes.csv")
    assert s_warm["lifelong_return"] == pytest.approx(eps["return"][eps["step"] > 1000].mean())
    assert s_all["lifelong_return"] != s_warm["lifelong_return"]
    # A2C takes no constrained step and samples no OOD states: its fractions are none, not 0
    assert (s_all["constrained_fraction"], s_all["line_search_accept_fraction"], s_all["ood_fraction"]) == (
        None, None, None)
    from lcpo.cli.run import _results_table

    table = _results_table([(_cfg(agent="a2c", overrides={}), s_all, tmp_path / "a")]).splitlines()
    assert table[0].split()[-1] == "constrained" and table[1].split()[-1] == "-"
    assert table[0].split()[-3] == "episodes"
    # a continuing run's lifelong return averages fixed windows: the column says so, mixed tables say both
    windows = {**s_all, "return_unit": "200-step window"}
    cfg = _cfg(agent="a2c", overrides={})
    assert _results_table([(cfg, windows, tmp_path / "a")]).splitlines()[0].split()[-3] == "windows"
    mixed = _results_table([(cfg, windows, tmp_path / "a"), (cfg, s_all, tmp_path / "b")]).splitlines()
    assert mixed[0].split()[-3] == "episodes/windows"
    assert len({len(line) for line in mixed}) == 1  # the wider header keeps the columns aligned


@pytest.mark.parametrize("agent", ["lcpo", "a2c"])
def test_interrupted_and_resumed_run_equals_uninterrupted(tmp_path, agent):
    cfg = _cfg(agent=agent, overrides={"reservoir_size": 1000} if agent == "lcpo" else {})
    full = execute(cfg, tmp_path / "full")
    part = execute(cfg, tmp_path / "part", stop_at=2000)
    assert part == {"interrupted_at": 2000} and not (tmp_path / "part" / "summary.json").exists()
    resumed = execute(cfg, tmp_path / "part")
    assert _stable(resumed) == _stable(full)
    assert resumed["resumed_from"] == [2000] and full["resumed_from"] == []
    assert (tmp_path / "part" / "episodes.csv").read_text() == (tmp_path / "full" / "episodes.csv").read_text()


def test_summary_comparisons_ignore_only_the_code_record(tmp_path, monkeypatch):
    """Two identical runs, the source tree edited and committed between them (``code`` differs): the summary
    comparison of these tests (tests/summaries.py) finds them equal, and still sees any other difference."""
    import lcpo.persistence.provenance as provenance

    records = iter([{"commit": "a" * 40, "dirty": False, "source": "git"},
                    {"commit": "b" * 40, "dirty": True, "source": "git"}])
    monkeypatch.setattr(provenance, "code_provenance", lambda *args, **kwargs: next(records))
    cfg = _cfg(agent="a2c", overrides={}, steps=400, checkpoint_every=0)
    a, b = execute(cfg, tmp_path / "a"), execute(cfg, tmp_path / "b")
    assert a["code"]["dirty"] is False and b["code"]["dirty"] is True
    assert _stable(a) == _stable(b)
    for key, value in (("lifelong_return", 0.0), ("versions", {}), ("hyperparameters", {})):
        assert _stable({**b, key: value}) != _stable(a), key


def test_killed_process_resumes_to_same_summary(tmp_path):
    """SIGKILL a real `lcpo run` mid-way (after a checkpoint), resume with --resume: same summary."""
    args = ["--trace", "wind-3", "--trace-length", "20000", "--steps", "6000", "--seed", "1",
            "--checkpoint-every", "1000", "--set", "reservoir_size=1000", "--no-progress"]
    ref = tmp_path / "ref"
    assert main(["run", *args, "--out", str(ref)]) == 0
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "lcpo.cli.main", "run", *args, "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = out / "lcpo-s1" / "checkpoint" / "latest.json"
    import time

    deadline = time.time() + 120
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert main(["run", *args, "--out", str(out), "--resume"]) == 0
    a = json.loads((ref / "lcpo-s1" / "summary.json").read_text())
    b = json.loads((out / "lcpo-s1" / "summary.json").read_text())
    assert _stable(a) == _stable(b)


def test_cli_runs_two_agents_side_by_side(tmp_path, capsys):
    rc = main(["run", "--agent", "lcpo", "a2c", "--trace", "zero", "--steps", "600", "--out", str(tmp_path),
               "--no-progress", "--set", "reservoir_size=500", "--checkpoint-every", "0"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "lcpo" in out and "a2c" in out and "lifelong return" in out
    assert (tmp_path / "lcpo-s0" / "summary.json").exists() and (tmp_path / "a2c-s0" / "summary.json").exists()


def test_cli_refuses_to_overwrite_without_resume(tmp_path, capsys):
    args = ["run", "--trace", "zero", "--steps", "200", "--out", str(tmp_path), "--no-progress"]
    assert main(args) == 0
    assert main(args) == 2
    assert "--resume" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["run", "--env", "lcpo/Nope-v0", "--steps", "10"], "unknown environment id 'lcpo/Nope-v0'"),
    (["run", "--trace", "wind-9", "--steps", "10"], "--trace: unknown trace name 'wind-9'"),
    (["run", "--agent", "dqn9", "--steps", "10"], "unknown agent 'dqn9'"),
    (["run", "--set", "c_anchor", "--steps", "10"], "KEY=VALUE"),
    (["run", "--set", "nope=1", "--steps", "10"], "unknown hyperparameter 'nope'"),
    (["run", "--reset", "every:zero", "--steps", "10"], "--reset: bad reset condition 'every:zero'"),
    (["run", "--reset", "sometimes", "--steps", "10"], "--reset: bad reset condition 'sometimes'"),
])
def test_cli_bad_input_names_the_problem(tmp_path, capsys, argv, message):
    assert main([*argv, "--out", str(tmp_path), "--no-progress"]) == 2
    assert message in capsys.readouterr().err


def test_bad_trace_files_are_rejected(tmp_path, capsys):
    nan_file = tmp_path / "nan.csv"
    nan_file.write_text("wind_x,wind_y\n0.0,1.0\nnan,0.0\n")
    shape_file = tmp_path / "shape.npy"
    np.save(shape_file, np.zeros((10, 3)))
    for f, msg in ((nan_file, "non-finite"), (shape_file, "2 columns")):
        assert main(["run", "--trace", str(f), "--steps", "10", "--out", str(tmp_path / "o"), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert msg in err, err


def test_module_entry_point_help():
    out = subprocess.run([sys.executable, "-m", "lcpo.cli.main", "--help"], capture_output=True, text=True,
                         env={**os.environ}, check=True).stdout
    for cmd in ("run", "traces", "envs", "agents"):
        assert cmd in out


@pytest.mark.parametrize("flag, value", [("--steps", "-5"), ("--steps", "ten"), ("--seed", "-1")])
def test_cli_rejects_bad_numbers(flag, value, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", flag, value])
    assert exc.value.code == 2
    assert repr(value) in capsys.readouterr().err
