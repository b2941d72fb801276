"""The results store: one row per spec with status, config and summary columns; scanning without a manifest."""

import json

import pandas as pd
import pytest

from lcpo.experiments.config import expand, parse_config
from lcpo.experiments.runner import run_dir, run_sweep
from lcpo.experiments.store import collect, load_store, scheme_label

FAKE = "lcpo_fake_run"


def test_statuses_columns_and_scan_without_manifest(tmp_path):
    d = {"name": "t", "steps": 1000, "seeds": 1, "envs": ["lcpo/WindyPendulum-v0"], "traces": ["wind-1"],
         "agents": ["lcpo", "a2c", "fail"], "checkpoint_every": 200,
         "overrides": {"lcpo": {"reservoir_size": [10, 20]}}}
    specs = expand(parse_config(d, executor=FAKE), executor=FAKE)
    run_sweep(specs, tmp_path, workers=1, executor=FAKE, progress=False, write_store=False)
    # a spec whose run never started, as after a crash before it was scheduled
    extra = expand(parse_config({**d, "seeds": [5], "agents": ["a2c"], "overrides": {}}, executor=FAKE),
                   executor=FAKE)
    manifest = json.loads((tmp_path / "sweep.json").read_text())
    manifest["specs"].append({"run_id": extra[0].run_id, "config": dict(extra[0].config)})
    (tmp_path / "sweep.json").write_text(json.dumps(manifest))

    runs, episodes = collect(tmp_path)
    assert len(runs) == 5 and runs["run_id"].is_unique
    by = runs.set_index("scheme")
    assert by.loc["lcpo[reservoir_size=20]", "status"] == "done"
    assert by.loc["lcpo[reservoir_size=20]", "hp/reservoir_size"] == 20
    assert str(runs["hp/reservoir_size"].dtype) == "Int64"  # integers stay integers next to missing values
    assert set(runs.loc[runs.agent == "fail", "status"]) == {"failed"}
    assert set(runs.loc[runs.seed == 5, "status"]) == {"missing"}
    assert set(episodes["run_id"]) == set(runs.loc[runs.status == "done", "run_id"])
    assert len(episodes) == 3 * 5

    (tmp_path / "sweep.json").unlink()  # scanning the run folders gives the same rows for the runs that exist
    scanned, _ = collect(tmp_path)
    cols = ["run_id", "status", "env", "trace", "agent", "seed", "scheme", "lifelong_return"]
    pd.testing.assert_frame_equal(
        scanned[cols].sort_values("run_id").reset_index(drop=True),
        runs.loc[runs.status != "missing", cols].sort_values("run_id").reset_index(drop=True))
    r, e = load_store(tmp_path)
    assert (tmp_path / "results.parquet").exists() and len(r) == 4 and len(e) == 15


def test_bad_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a sweep folder"):
        collect(tmp_path)
    (tmp_path / "runs" / "x").mkdir(parents=True)
    (tmp_path / "runs" / "x" / "summary.json").write_text("{not json")
    with pytest.raises(ValueError, match="summary.json: malformed JSON"):
        collect(tmp_path)


def test_scheme_label():
    assert scheme_label("a2c", {}) == "a2c"
    assert scheme_label("lcpo", {"b": [64, 64], "a": 0.5}) == "lcpo[a=0.5,b=[64,64]]"
    assert run_dir("R", "id").as_posix() == "R/runs/id"


def test_report_reads_a_folder_of_lcpo_run_outputs(tmp_path):
    """``lcpo run --agent lcpo a2c --seed 0 1 --out DIR`` writes DIR/AGENT-sSEED/; ``lcpo report DIR`` reads them."""
    from lcpo.cli.main import main as cli
    from lcpo.experiments.report import report
    from lcpo.experiments.store import runs_root

    out = tmp_path / "runs"
    assert cli(["run", "--agent", "lcpo", "a2c", "--seed", "0", "1", "--steps", "1000", "--trace-length", "1000",
                "--out", str(out), "--no-progress", "--checkpoint-every", "0"]) == 0
    (out / "notes").mkdir()  # a stray folder that is not a run is ignored
    assert runs_root(out) == out
    runs, episodes = collect(out)
    assert sorted(runs["run_id"]) == ["a2c-s0", "a2c-s1", "lcpo-s0", "lcpo-s1"]
    assert set(runs["status"]) == {"done"} and sorted(set(runs["scheme"])) == ["a2c", "lcpo"]
    assert sorted(runs["seed"]) == [0, 0, 1, 1]
    assert len(episodes) == 4 * 5  # 1,000 steps of 200-step episodes per run
    md = report(out, tmp_path / "report").read_text()
    assert md.startswith("# Report: runs (lcpo run folders)")  # not a sweep: no manifest
    table = pd.read_csv(tmp_path / "report" / "lifelong_return.csv")
    assert sorted(table["scheme"]) == ["a2c", "lcpo"] and list(table["n"]) == [2, 2]
    by_run = runs.set_index("run_id")["lifelong_return"]
    lcpo_mean = table.set_index("scheme").loc["lcpo", "mean"]
    assert lcpo_mean == pytest.approx((by_run["lcpo-s0"] + by_run["lcpo-s1"]) / 2)
    with pytest.raises(FileNotFoundError, match="no `lcpo run` output folders"):
        collect(tmp_path / "runs" / "notes")
    # a run stopped before its summary (Ctrl-C, kill -9) is counted as interrupted, not left out; a folder of
    # such runs alone is still an `lcpo run` folder
    for name in ("a2c-s1", "lcpo-s1"):
        (out / name / "summary.json").unlink()
    runs, _ = collect(out)
    assert runs.set_index("run_id")["status"].to_dict() == {"a2c-s0": "done", "a2c-s1": "interrupted",
                                                            "lcpo-s0": "done", "lcpo-s1": "interrupted"}
    assert "4 runs: 2 done, 2 interrupted" in report(out, tmp_path / "report2").read_text()
    for name in ("a2c-s0", "lcpo-s0"):
        (out / name / "summary.json").unlink()
    assert runs_root(out) == out and set(collect(out)[0]["status"]) == {"interrupted"}


def _one_run_sweep(tmp_path):
    d = {"name": "t", "steps": 1000, "seeds": 2, "envs": ["lcpo/WindyPendulum-v0"], "traces": ["wind-1"],
         "agents": ["a2c"]}
    specs = expand(parse_config(d, executor=FAKE), executor=FAKE)
    run_sweep(specs[:1], tmp_path, workers=1, executor=FAKE, progress=False, write_store=False)
    manifest = json.loads((tmp_path / "sweep.json").read_text())
    manifest["specs"].append({"run_id": specs[1].run_id, "config": dict(specs[1].config)})
    (tmp_path / "sweep.json").write_text(json.dumps(manifest))
    return specs


def test_started_runs_are_running_while_locked_and_interrupted_after(tmp_path):
    from lcpo.persistence.runlock import RunLock

    specs = _one_run_sweep(tmp_path)
    second = run_dir(tmp_path, specs[1].run_id)
    assert collect(tmp_path)[0].set_index("run_id").loc[specs[1].run_id, "status"] == "missing"
    second.mkdir()
    (second / "config.json").write_text(json.dumps({"run": dict(specs[1].config)}))
    with RunLock(second):
        holder = (second / ".lock").read_text()
        assert collect(tmp_path)[0].set_index("run_id").loc[specs[1].run_id, "status"] == "running"
        assert (second / ".lock").read_text() == holder  # probed, not written
    runs = collect(tmp_path)[0].set_index("run_id")
    assert runs.loc[specs[1].run_id, "status"] == "interrupted"
    assert runs.loc[specs[0].run_id, "status"] == "done"


@pytest.mark.parametrize("bad", ['"abc"', "true", "[1]"])
def test_a_summary_field_that_is_not_a_number_names_the_file(tmp_path, bad):
    specs = _one_run_sweep(tmp_path)
    path = run_dir(tmp_path, specs[0].run_id) / "summary.json"
    path.write_text(path.read_text().replace('"lifelong_return":', f'"lifelong_return": {bad}, "_old":', 1))
    with pytest.raises(ValueError, match=r"summary\.json: lifelong_return must be a number, got ") as err:
        collect(tmp_path)
    assert str(path) in str(err.value)


def test_a_summary_that_is_not_an_object_names_the_file(tmp_path):
    specs = _one_run_sweep(tmp_path)
    path = run_dir(tmp_path, specs[0].run_id) / "summary.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"summary\.json: malformed: a JSON object was expected, got list"):
        collect(tmp_path)


def test_the_lock_probe_reads_only_a_would_block_as_held(tmp_path, monkeypatch):
    import errno
    import fcntl

    from lcpo.persistence.runlock import lock_in_force

    (tmp_path / ".lock").write_text("")
    for code, held in ((errno.EWOULDBLOCK, True), (errno.ENOLCK, False), (errno.EINVAL, False)):
        def refuse(fh, op, code=code):
            if op & fcntl.LOCK_NB:
                raise OSError(code, "refused")
        monkeypatch.setattr(fcntl, "flock", refuse)
        assert lock_in_force(tmp_path) is held


def test_a_sweep_refuses_a_malformed_summary_before_running_anything(tmp_path, capsys):
    from lcpo.cli import sweep as sweep_cli

    specs = _one_run_sweep(tmp_path)
    bad = run_dir(tmp_path, specs[0].run_id) / "summary.json"
    bad.write_text("[]")
    manifest = (tmp_path / "sweep.json").read_bytes()
    with pytest.raises(ValueError, match=r"summary\.json: malformed: a JSON object was expected, got list; "
                                         r"repair it, or delete it"):
        run_sweep(specs, tmp_path, workers=1, executor=FAKE, progress=False)
    assert not run_dir(tmp_path, specs[1].run_id).exists()  # the unfinished run did not start
    assert (tmp_path / "sweep.json").read_bytes() == manifest
    toml = tmp_path / "t.toml"
    toml.write_text('name = "t"\nsteps = 1000\nseeds = 2\nenvs = ["lcpo/WindyPendulum-v0"]\ntraces = ["wind-1"]\n'
                    f'agents = ["a2c"]\nout = "{tmp_path}"\n')
    assert sweep_cli.main([str(toml), "--executor", FAKE, "--dry-run"]) == 2
    err = capsys.readouterr()
    assert err.err.startswith("lcpo sweep: error: ") and "malformed" in err.err and err.out == ""
    assert sweep_cli.main([str(toml), "--executor", FAKE, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lcpo sweep: error: ") and "malformed" in err and err.count("\n") == 1
    assert not run_dir(tmp_path, specs[1].run_id).exists()


def test_a_partial_last_episode_line_is_left_out(tmp_path):
    """A run killed in the middle of an append leaves a partial last line in ``episodes.csv`` (until it resumes);
    ``collect`` reads the complete lines, with their integer columns, and never a row of cut numbers."""
    from lcpo.cli.main import main as cli

    out = tmp_path / "runs"
    assert cli(["run", "--agent", "a2c", "--seed", "0", "--steps", "1000", "--trace-length", "1000",
                "--out", str(out), "--no-progress", "--checkpoint-every", "0"]) == 0
    path = out / "a2c-s0" / "episodes.csv"
    full = collect(out)[1]
    assert len(full) == 5
    text = path.read_bytes()
    last = text.rstrip(b"\n").rsplit(b"\n", 1)[1]
    for cut in (1, 3, len(last) - 1):  # "4", "4,1" (a step of 1 instead of 1000), all but the last digit
        path.write_bytes(text + last[:cut])
        ep = collect(out)[1]
        pd.testing.assert_frame_equal(ep, full)
    path.write_bytes(text.split(b"\n", 1)[0][:5])  # a header cut short: no complete line at all
    assert len(collect(out)[1]) == 0
