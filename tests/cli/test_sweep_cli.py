"""`lcpo sweep` argument validation."""

from __future__ import annotations

import pytest

from lcpo.cli.sweep import build_parser


@pytest.mark.parametrize("workers", ["0", "-2", "two"])
def test_workers_must_be_a_positive_integer(capsys, workers):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["configs/smoke.toml", "--workers", workers, "--dry-run"])
    assert info.value.code == 2
    assert f"expected a positive integer, got {workers!r}" in capsys.readouterr().err


def test_positive_workers_accepted():
    assert build_parser().parse_args(["c.toml", "--workers", "3"]).workers == 3


def test_second_sweep_on_one_folder_is_a_one_line_error(capsys, tmp_path):
    import fcntl

    from lcpo.cli.main import main

    config = tmp_path / "tiny.toml"
    config.write_text('name = "tiny"\nsteps = 200\nseeds = 1\nenvs = ["lcpo/WindyPendulum-v0"]\n'
                      'traces = ["wind-3"]\ntrace_length = 400\nagents = ["a2c"]\ncheckpoint_every = 0\n')
    out = tmp_path / "sweep"
    out.mkdir()
    with open(out / ".sweep.lock", "w") as held:  # the first sweep, still running
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        rc = main(["sweep", str(config), "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert err.startswith("lcpo sweep: error: another sweep is running in ") and str(out) in err
    assert not (out / "runs").exists()  # nothing ran


def test_out_naming_a_file_is_a_one_line_error(capsys, tmp_path):
    from lcpo.cli.main import main

    config = tmp_path / "tiny.toml"
    config.write_text('name = "tiny"\nsteps = 200\nseeds = 1\nenvs = ["lcpo/WindyPendulum-v0"]\n'
                      'traces = ["wind-3"]\ntrace_length = 400\nagents = ["a2c"]\ncheckpoint_every = 0\n')
    (tmp_path / "afile").write_text("mine")
    rc = main(["sweep", str(config), "--out", str(tmp_path / "afile"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and "is an existing file, not a folder" in err
    assert (tmp_path / "afile").read_text() == "mine"


def test_dry_run_into_a_closed_pipe_is_quiet(tmp_path):
    """`lcpo sweep CONFIG --dry-run | head -1` must not print a BrokenPipeError traceback."""
    import subprocess
    import sys
    from pathlib import Path

    config = Path(__file__).resolve().parents[2] / "configs" / "paper-budget.toml"
    cmd = f'"{sys.executable}" -m lcpo.cli.main sweep "{config}" --dry-run --out "{tmp_path}" | head -1'
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert proc.stdout.startswith("WindyPendulum-v0_")
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_only_selects_and_orders_runs_and_names_a_pattern_that_matches_nothing(capsys, tmp_path):
    from pathlib import Path

    from lcpo.cli.main import main

    config = Path(__file__).resolve().parents[2] / "configs" / "paper-budget.toml"
    rc = main(["sweep", str(config), "--out", str(tmp_path / "s"), "--dry-run",
               "--only", "*wind-1_ppo_s0-*", "--only", "*wind-1_*_s1-*"])
    cap = capsys.readouterr()
    ids = cap.out.split()
    assert rc == 0 and ids[0].startswith("WindyPendulum-v0_wind-1_ppo_s0-")
    assert len(ids) == 5 and all("_wind-1_" in i and "_s1-" in i for i in ids[1:])
    assert "5 of 24 runs" in cap.err
    rc = main(["sweep", str(config), "--out", str(tmp_path / "s"), "--dry-run", "--only", "*wind-2*"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and "'*wind-2*' match no run" in err
    assert not (tmp_path / "s").exists()


def test_dry_run_shows_how_the_runs_group_into_population_tasks(capsys, tmp_path):
    """`--population N` groups runs that differ only in seed into one task; the dry run said nothing of it."""
    from pathlib import Path

    from lcpo.cli.main import main

    config = Path(__file__).resolve().parents[2] / "configs" / "smoke.toml"  # 2 traces x 2 agents x 2 seeds
    assert main(["sweep", str(config), "--out", str(tmp_path / "s"), "--dry-run"]) == 0
    assert "to start: 8 run(s) (0 finished, skipped) as 4 task(s): 4 of 2 seeds" in capsys.readouterr().err
    assert main(["sweep", str(config), "--out", str(tmp_path / "s"), "--dry-run", "--no-batch"]) == 0
    assert "as 8 task(s): 8 of 1 seed " in capsys.readouterr().err
    assert main(["sweep", str(config), "--out", str(tmp_path / "s"), "--dry-run", "--only", "*wind-1_a2c*"]) == 0
    assert "to start: 2 run(s) (0 finished, skipped) as 1 task(s): 1 of 2 seeds" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("flags, repeated", [
    ([], ""), (["--population", "16"], ""),
    (["--population", "2"], " --population 2"),
    (["--no-batch"], " --no-batch"), (["--no-batch", "--population", "2"], " --no-batch"),
    (["--device", "cuda:1", "--population", "4"], " --population 4 --device cuda:1")])
def test_the_resume_line_of_a_stopped_sweep_repeats_how_its_populations_ran(flags, repeated):
    """A sweep run with --population 2 and stopped by Ctrl-C said "to resume: lcpo sweep C --out O --workers 1":
    followed as printed, the default of 16 seeds per task grouped the stopped population's seeds with seeds not
    started, whose checkpoints stand at other steps, so they all ran one by one; --device was dropped too."""
    import signal

    from lcpo.cli.sweep import _stopped_line
    from lcpo.experiments.runner import RunOutcome, SweepInterrupted

    args = build_parser().parse_args(["c.toml", "--out", "o", "--workers", "1", *flags])
    stopped = SweepInterrupted(signal.SIGINT, False, [RunOutcome("r0", "interrupted"), RunOutcome("r1", "pending")])
    line = _stopped_line(stopped, args, "o")
    assert line.endswith(f"to resume: lcpo sweep c.toml --out o --workers 1{repeated}"), line
    assert len(line.splitlines()) == 1


def test_a_stopped_sweep_says_which_runs_have_a_checkpoint(tmp_path):
    """Ctrl-C 4 s into a sweep printed "4 running run(s) checkpointed where they stood" while none had reached its
    first step: no checkpoint existed, and the next sweep started them afresh."""
    import signal

    from lcpo.cli.sweep import _stopped_line
    from lcpo.experiments.runner import RunOutcome, SweepInterrupted

    args = build_parser().parse_args(["c.toml", "--out", str(tmp_path)])
    (tmp_path / "runs" / "r0" / "checkpoint" / "step-00000850").mkdir(parents=True)  # a generation
    (tmp_path / "runs" / "r1").mkdir(parents=True)  # a folder with no checkpoint yet
    outcomes = [RunOutcome("r0", "interrupted"), RunOutcome("r1", "interrupted"), RunOutcome("r2", "interrupted")]
    line = _stopped_line(SweepInterrupted(signal.SIGINT, False, outcomes), args, tmp_path)
    assert ("3 running run(s) checkpointed where they stood (1 with a checkpoint, 2 stopped before their first: "
            "they start afresh)") in line, line
    line = _stopped_line(SweepInterrupted(signal.SIGINT, False, outcomes[1:]), args, tmp_path)
    assert "2 running run(s) stopped before their first checkpoint: they start afresh" in line, line
    line = _stopped_line(SweepInterrupted(signal.SIGINT, False, outcomes[:1]), args, tmp_path)
    assert "1 running run(s) checkpointed where they stood, 0 not started" in line, line


def _stopped_sweep(tmp_path, population=2):
    """A 3-seed A2C sweep whose first ``population`` seeds were stopped at step 850 as one population task (a
    checkpoint at 850); the third has no folder."""
    from lcpo.experiments.config import expand, load_config
    from lcpo.experiments.runner import run_dir, run_group

    cfg = tmp_path / "s.toml"
    cfg.write_text('name = "s"\nenvs = ["lcpo/WindyPendulum-v0"]\ntraces = ["wind-3"]\ntrace_length = 5000\n'
                   'agents = ["a2c"]\nseeds = 3\nsteps = 1200\ncheckpoint_every = 600\ndiagnostics_every = 200\n'
                   '[overrides.a2c]\nhidden = [[16]]\nrollout_steps = [100]\n')
    out = tmp_path / "out"
    specs = expand(load_config(cfg))
    calls = [0]

    def stop_soon():
        calls[0] += 1
        return calls[0] > 4  # polls at 0, 250, 500, 600 (checkpoint), 850: stops at 850 with a checkpoint there

    outs = [run_dir(out, s.run_id) for s in specs[:population]]
    assert [r["interrupted_at"] for r in run_group([dict(s.config) for s in specs[:population]],
                                                   [str(o) for o in outs], should_stop=stop_soon)] == [850] * population
    return cfg, out, outs


def _dry(capsys, cfg, out, *flags):
    from lcpo.cli.main import main

    assert main(["sweep", str(cfg), "--out", str(out), "--dry-run", *flags]) == 0
    return capsys.readouterr().err


def test_dry_run_says_where_runs_resume_and_names_a_population_checkpoint_whose_generations_are_gone(
        capsys, tmp_path):
    """Session 7 of the study resumed run folders whose checkpoint/ had not come along: the sweep started them
    again from step 0 without a word. The dry run now reads the pointers and says where each run would start."""
    import shutil

    cfg, out, outs = _stopped_sweep(tmp_path)
    assert "resume: 3 from step 0 (no run folder yet)" in _dry(capsys, cfg, tmp_path / "new", "--population", "2")
    err = _dry(capsys, cfg, out, "--population", "2")
    assert "resume: 2 from step 850, 1 from step 0 (" in err and "refused" not in err
    for o in outs:
        shutil.rmtree(o / "checkpoint")
    err = _dry(capsys, cfg, out, "--population", "2")
    assert "resume: 1 from step 0, 2 refused (below) (" in err
    assert "(step 850) names generations gone from 2 run folder(s) that hold a run's files but no checkpoint" in err
    # run alone (another grouping), each seed weighs the pointer beside its folder as the population does: refused
    err = _dry(capsys, cfg, out, "--population", "1")
    assert "resume: 1 from step 0, 2 refused (below) (" in err and "ahead" not in err
    assert err.count("names a generation gone from") == 2 and "which holds a run's files but no checkpoint" in err
    from lcpo.online.population import population_folder

    shutil.rmtree(population_folder(outs, "a2c"))  # as the refusal says: then they start afresh
    assert "resume: 3 from step 0 (" in _dry(capsys, cfg, out, "--population", "1")


def test_dry_run_names_another_groupings_checkpoint_ahead_of_a_population_and_runs_alone_take_it(capsys,
                                                                                                 tmp_path):
    import json
    import shutil

    from lcpo.online.population import population_folder

    cfg, out, outs = _stopped_sweep(tmp_path, population=3)
    # a population pointer of another grouping (seeds 0-1) ahead of runs that --population 3 starts as one
    # population, from their own checkpoints (a population reads only its own pointer)
    err = _dry(capsys, cfg, out, "--population", "3")
    assert "resume: 3 from step 850 (" in err and "ahead" not in err
    doc = json.loads((population_folder(outs, "a2c") / "population.json").read_text())
    doc["step"] = 1000  # as if that population had committed step 1000 and been killed before the exports
    doc["members"] = doc["members"][:2]
    other = population_folder(outs[:2], "a2c")
    other.mkdir()
    (other / "population.json").write_text(json.dumps(doc))
    err = _dry(capsys, cfg, out, "--population", "3")
    assert "(step 1,000, 2 seeds) is ahead of 2 run(s) that this sweep starts from their own checkpoints" in err
    assert "those steps are computed again" in err
    # run alone, each seed takes the later generation beside it, as `lcpo resume` would: nothing computed again
    err = _dry(capsys, cfg, out, "--population", "1")
    assert "resume: 2 from step 1,000, 1 from step 850 (" in err and "ahead" not in err
    shutil.rmtree(other)
    assert "resume: 3 from step 850 (" in _dry(capsys, cfg, out, "--population", "1")


def test_dry_run_reports_malformed_pointers_without_a_traceback(capsys, tmp_path):
    from lcpo.online.population import population_folder

    cfg, out, outs = _stopped_sweep(tmp_path)
    pop_pointer = population_folder(outs, "a2c") / "population.json"
    for text, expect in (('{"step": 850', "truncated or corrupt"), ('{"format": 1, "step": 850, "members": [1]}',
                                                                     "truncated or corrupt"),
                         ('{"format": 1, "step": 850, "members": null}', "truncated or corrupt")):
        pop_pointer.write_text(text)
        err = _dry(capsys, cfg, out, "--population", "2")
        assert "resume: 1 from step 0, 2 refused (below)" in err and expect in err and "Traceback" not in err
    pop_pointer.unlink()
    (outs[1] / "checkpoint" / "latest.json").write_text("garbage")
    err = _dry(capsys, cfg, out, "--population", "1")
    assert "resume: 1 from step 850, 1 from step 0, 1 refused (below)" in err and "truncated or corrupt" in err


def test_a_task_refused_before_it_wrote_anything_leaves_no_run_folder(capsys, tmp_path):
    """A malformed population pointer refuses a task of runs that have no folder yet: the refusal used to leave
    their folders created, holding only error.json; now nothing is written, the summary names the failure once."""
    from lcpo.cli.main import main
    from lcpo.experiments.config import expand, load_config
    from lcpo.experiments.runner import run_dir
    from lcpo.online.population import population_folder

    cfg = tmp_path / "s.toml"
    cfg.write_text('name = "s"\nenvs = ["lcpo/WindyPendulum-v0"]\ntraces = ["wind-3"]\ntrace_length = 5000\n'
                   'agents = ["a2c"]\nseeds = 2\nsteps = 400\ncheckpoint_every = 200\n'
                   '[overrides.a2c]\nhidden = [[16]]\nrollout_steps = [100]\n')
    out = tmp_path / "out"
    outs = [run_dir(out, s.run_id) for s in expand(load_config(cfg))]
    pop = population_folder(outs, "a2c")
    pop.mkdir(parents=True)
    (pop / "population.json").write_text('{"format": 1, "step": ')
    assert main(["sweep", str(cfg), "--out", str(out), "--population", "2", "--workers", "1",
                 "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "truncated or corrupt" in err and "(2 runs)" in err and "error.json" not in err
    assert not any(o.exists() for o in outs)


def test_a_refused_population_task_fails_its_runs_with_one_line_each_said_once(capsys, tmp_path):
    """The sweep side of the refusal: every run of the task fails (error.json in each), the others run, and the
    shared error is printed once as it happens and once in the summary (it was printed once per run, twice)."""
    import json
    import shutil

    from lcpo.cli.main import main

    cfg, out, outs = _stopped_sweep(tmp_path)
    for o in outs:
        shutil.rmtree(o / "checkpoint")
    assert main(["sweep", str(cfg), "--out", str(out), "--population", "2", "--workers", "1",
                 "--no-progress"]) == 1
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("run failed: ") == 1 and err.count("  failed: ") == 1, err
    assert "names generations" not in err and "gone from" in err and "(2 runs; see error.json in " in err
    assert "3 runs in" in captured.out and "1 done" in captured.out and "2 failed" in captured.out
    for o in outs:
        assert "CheckpointError" in json.loads((o / "error.json").read_text())["error"]


def test_dry_run_models_a_task_that_falls_back_to_one_by_one_and_a_pointer_of_the_wrong_type(tmp_path):
    """A review found the dry run promising the population's step to a task that the sweep then resumed one by
    one (their starts differ), and a pointer with "step": "850" aborting it. One by one, each run now weighs the
    pointer beside its folder as a run alone does (`execute`), and the preview says so. Pointers only: the
    preview reads no state."""
    import json

    from lcpo.experiments.config import expand, load_config
    from lcpo.experiments.runner import resume_preview, run_dir
    from lcpo.online.population import _member_key, population_folder
    from lcpo.online.run import RunConfig

    cfg = tmp_path / "s.toml"
    cfg.write_text('name = "s"\nenvs = ["lcpo/WindyPendulum-v0"]\ntraces = ["wind-3"]\ntrace_length = 5000\n'
                   'agents = ["a2c"]\nseeds = 2\nsteps = 1200\ncheckpoint_every = 200\n')
    out = tmp_path / "out"
    specs = expand(load_config(cfg))
    outs = [run_dir(out, s.run_id) for s in specs]

    def folder_at(o, step, gens):
        for g in gens:
            (o / "checkpoint" / g).mkdir(parents=True)
        (o / "checkpoint" / "latest.json").write_text(json.dumps(
            {"format": 2, "step": step, "folder": gens[0], "config": {}, "files": {"state.json": {"sha256": "0"}}}))

    folder_at(outs[0], 800, ["g800", "p1000"])  # seed 0: its population generation at 1000 is there
    folder_at(outs[1], 600, ["g600"])            # seed 1: went on alone from below (its 1000 generation collected)
    pop = population_folder(outs, "a2c")
    pop.mkdir()
    pointer = {"format": 1, "step": 1000, "members": [
        {"folder": _member_key(o, pop), "generation": "p1000", "sha256": "0",
         "config": RunConfig.from_dict(s.config).to_dict()} for o, s in zip(outs, specs)]}
    (pop / "population.json").write_text(json.dumps(pointer))
    starts, failing, lines = resume_preview(specs, out, 2)
    # 1000 (pointer) and 600 (own) differ: one by one, each as a run alone: seed 0 from the population's
    # generation in its folder (the later of its two), seed 1 from its own 600 (went on alone)
    assert (starts, failing) == ({1000: 1, 600: 1}, 0)
    assert any("start at different steps" in ln and "one by one" in ln for ln in lines), lines
    pointer["step"] = "1000"
    (pop / "population.json").write_text(json.dumps(pointer))
    starts, failing, lines = resume_preview(specs, out, 2)
    assert failing == 2 and any("truncated or corrupt (step '1000')" in ln for ln in lines), lines


def _fake_lcpo_run_folder(path):
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    (path / "summary.json").write_text("{}")


def test_sweep_into_a_folder_of_lcpo_run_runs_is_refused_before_anything_is_written(capsys, tmp_path):
    """A sweep there would write runs/ beside `lcpo run`'s AGENT-sSEED folders, and the report would read only
    the sweep's: refused in one line, dry run included, the folder unchanged."""
    from lcpo.cli.main import main

    config = tmp_path / "tiny.toml"
    config.write_text('name = "tiny"\nsteps = 200\nseeds = 1\nenvs = ["lcpo/WindyPendulum-v0"]\n'
                      'traces = ["wind-3"]\ntrace_length = 400\nagents = ["a2c"]\ncheckpoint_every = 0\n')
    out = tmp_path / "cartpole"
    _fake_lcpo_run_folder(out / "lcpo-s0")
    for extra in ([], ["--dry-run"]):
        rc = main(["sweep", str(config), "--out", str(out), "--no-progress", *extra])
        err = capsys.readouterr().err
        assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert err.startswith(f"lcpo sweep: error: {out} holds `lcpo run` output folders (lcpo-s0)")
        assert "another folder" in err
        assert sorted(p.name for p in out.iterdir()) == ["lcpo-s0"]  # no sweep.json, no runs/


def test_run_sweep_refuses_the_same_folder(tmp_path):
    from lcpo.experiments.config import expand, load_config
    from lcpo.experiments.runner import run_sweep

    config = tmp_path / "tiny.toml"
    config.write_text('name = "tiny"\nsteps = 200\nseeds = 1\nenvs = ["lcpo/WindyPendulum-v0"]\n'
                      'traces = ["wind-3"]\ntrace_length = 400\nagents = ["a2c"]\ncheckpoint_every = 0\n')
    out = tmp_path / "mine"
    _fake_lcpo_run_folder(out / "a2c-s3")
    with pytest.raises(ValueError, match=r"holds `lcpo run` output folders \(a2c-s3\)"):
        run_sweep(expand(load_config(config)), out, progress=False)
    assert not (out / "sweep.json").exists() and not (out / "runs").exists()


def test_a_sweep_folder_and_an_empty_folder_pass(tmp_path):
    from lcpo.experiments.store import check_folder_for

    check_folder_for(tmp_path / "missing", "sweep")
    check_folder_for(tmp_path, "sweep")
    (tmp_path / "sweep.json").write_text("{}")
    _fake_lcpo_run_folder(tmp_path / "lcpo-s0")  # a manifest is there: the sweep's own folder, resumed
    check_folder_for(tmp_path, "sweep")
    with pytest.raises(ValueError, match="writer must be"):
        check_folder_for(tmp_path, "report")


def test_lcpo_run_into_a_sweep_folder_is_refused(capsys, tmp_path):
    from lcpo.cli.main import main

    (tmp_path / "sweep.json").write_text("{}")
    rc = main(["run", "--agent", "a2c", "--steps", "200", "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert f"{tmp_path} is a sweep folder (it holds sweep.json)" in err and "another --out" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.json"]


def test_a_grid_value_a_run_refuses_is_named_with_the_config_file(capsys, tmp_path):
    """An override the run refuses (gamma 1.5 in a grid) is found when the grid expands, after the file parsed;
    its one line names the file like every other config error, and nothing is written."""
    from lcpo.cli.main import main

    config = tmp_path / "grid.toml"
    config.write_text('envs = ["lcpo/WindyPendulum-v0"]\ntraces = ["wind-1"]\nagents = ["a2c"]\nseeds = 2\n'
                      'steps = 1000\n[overrides.a2c]\ngamma = [0.9, 1.5]\n')
    out = tmp_path / "sweep"
    assert main(["sweep", str(config), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == (f"lcpo sweep: error: {config}: overrides.a2c (env 'lcpo/WindyPendulum-v0', trace 'wind-1'): "
                   "hyperparameter 'gamma' must be in (0, 1], got 1.5\n")
    assert not out.exists()
    # a top-level setting a run refuses is not put down to the overrides
    config.write_text('envs = ["lcpo/WindyPendulum-v0"]\ntraces = ["wind-1"]\nagents = ["a2c"]\nseeds = 1\n'
                      'steps = 9007199254740993\n[overrides.a2c]\ngamma = [0.9]\n')
    assert main(["sweep", str(config), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"lcpo sweep: error: {config}: runs of a2c (env 'lcpo/WindyPendulum-v0', trace "
                          "'wind-1'): steps must be at most 2**53"), err
    assert not out.exists()
