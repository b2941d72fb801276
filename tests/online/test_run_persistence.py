"""Run persistence: a crash at any file operation of a checkpoint, resume rules, TensorBoard after a crash,
clear errors for damaged run folders, runs that never update."""

import json
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from faults import Crash, FileFaults
from lcpo.persistence.checkpoint import RunCheckpoints
from lcpo.cli.main import main
from lcpo.online.run import RunConfig, config_changes, execute
from summaries import comparable

# Short runs (seconds): the issue's setting is trace wind-3 of 5,000 steps, seed 3, 1,200 steps, a checkpoint
# every 400, the crash while the step-800 checkpoint is written; the exhaustive crash test halves it.
AGENTS = {
    "a2c": {},                                                                   # on-policy (rollout batch)
    "ddqn": {"buffer_size": 1000, "learning_starts": 100, "train_every": 100, "batch_size": 32,
             "hidden": [16, 16]},                                                # replay buffer
    "lcpo": {"reservoir_size": 1000},                                            # reservoir + OOD sampler
}


def _cfg(agent="a2c", **kw):
    base = dict(trace="wind-3", trace_length=5000, agent=agent, steps=1200, seed=3, checkpoint_every=400,
                diagnostics_every=200, overrides=AGENTS.get(agent, {}))
    base.update(kw)
    return RunConfig(**base)


def _outputs(folder):
    return {name: (folder / name).read_text() for name in ("episodes.csv", "diagnostics.csv")}


def _arm_during_commit(monkeypatch, faults, step):
    """Arm ``faults`` from the start of the checkpoint at ``step`` (its episodes.csv append and diagnostics.csv,
    then the commit) until the next checkpoint starts."""
    import lcpo.online.run as run_module

    real = run_module._run_with_checkpoints

    def run_with_checkpoints(loop, target, config, checkpoint, should_stop=None):
        def armed_checkpoint():
            if loop.steps == step:
                faults.arm()
            else:
                faults.disarm()
            checkpoint()

        return real(loop, target, config, armed_checkpoint, should_stop)

    monkeypatch.setattr(run_module, "_run_with_checkpoints", run_with_checkpoints)


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_crash_at_every_file_operation_of_a_checkpoint_resumes_to_the_same_run(tmp_path, monkeypatch, agent):
    """For every k: the process dies before file operation k of writing the step-400 checkpoint (nothing more
    reaches the disk); the resumed run ends with the lifelong return, episodes.csv and diagnostics.csv of the
    uninterrupted run, whether it resumed from step 200 or 400."""
    import os

    monkeypatch.setattr(os, "fsync", lambda fd: None)  # durability is not under test here (see faults.py)
    cfg = _cfg(agent, steps=600, checkpoint_every=200, diagnostics_every=100)
    full = execute(cfg, tmp_path / "full")
    assert full["updates"] >= 3
    base = tmp_path / "base"
    assert execute(cfg, base, stop_at=200) == {"interrupted_at": 200}

    with pytest.MonkeyPatch.context() as mp:
        counter = FileFaults(mp)
        _arm_during_commit(mp, counter, 400)
        shutil.copytree(base, tmp_path / "count")
        assert execute(cfg, tmp_path / "count")["lifelong_return"] == full["lifelong_return"]
    n = counter.count
    assert n >= 20, counter.log

    resumed_from = set()
    for k in range(1, n + 1):
        trial = tmp_path / f"crash{k}"
        shutil.copytree(base, trial)
        with pytest.MonkeyPatch.context() as mp:
            faults = FileFaults(mp, crash_at=k)
            _arm_during_commit(mp, faults, 400)
            with pytest.raises(Crash):
                execute(cfg, trial)
        assert not (trial / "summary.json").exists()
        resumed = execute(cfg, trial)
        assert resumed["lifelong_return"] == full["lifelong_return"], (k, faults.log[-1])
        assert _outputs(trial) == _outputs(tmp_path / "full"), k
        resumed_from.add(resumed["resumed_from"][-1])
        shutil.rmtree(trial)
    assert resumed_from == {200, 400}  # both sides of the commit point were exercised


def test_issue_case_crash_after_the_new_tensors_resumes_to_the_uninterrupted_return(tmp_path, monkeypatch):
    """The reported case: the process dies right after the step-800 state.pt is renamed into place. The old
    two-file checkpoint then combined step-400 JSON with step-800 tensors (lifelong return -1153.9958 instead
    of -1123.7667 on the reporting machine)."""
    import os

    cfg = _cfg("a2c")
    full = execute(cfg, tmp_path / "full")
    out = tmp_path / "cut"
    execute(cfg, out, stop_at=400)
    faults = FileFaults(monkeypatch)  # counts; the crash comes from replace_then_die
    _arm_during_commit(monkeypatch, faults, 800)
    replace = os.replace

    def replace_then_die(src, dst, *args, **kwargs):
        replace(src, dst, *args, **kwargs)
        if faults.armed and str(dst).endswith("state.pt"):
            faults.crashed = True
            raise Crash("died after state.pt")

    monkeypatch.setattr(os, "replace", replace_then_die)
    with pytest.raises(Crash):
        execute(cfg, out)
    assert faults.crashed
    monkeypatch.undo()
    resumed = execute(cfg, out)
    assert resumed["resumed_from"] == [400] and resumed["lifelong_return"] == full["lifelong_return"]


# -- resume rules -------------------------------------------------------------------------------------------


def _files(folder):
    """Every file of a run folder and its content (but the lock's holder line, which every writer rewrites)."""
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def test_more_steps_extend_a_finished_run_to_the_longer_run(tmp_path):
    short = execute(_cfg(steps=800), tmp_path / "ext")
    assert short["steps"] == 800 and RunCheckpoints(tmp_path / "ext" / "checkpoint").latest().step == 800
    messages = []
    longer = execute(_cfg(steps=1200), tmp_path / "ext", on_message=messages.append)
    straight = execute(_cfg(steps=1200), tmp_path / "straight")
    assert longer["resumed_from"] == [800] and straight["resumed_from"] == []
    assert longer["lifelong_return"] == straight["lifelong_return"] and longer["steps"] == 1200
    assert _outputs(tmp_path / "ext") == _outputs(tmp_path / "straight")
    assert messages == [f"{tmp_path / 'ext'}: extending the finished run from step 800 to 1,200"]
    assert json.loads((tmp_path / "ext" / "config.json").read_text())["run"]["steps"] == 1200


def test_same_config_on_a_finished_run_returns_its_summary_and_says_so(tmp_path):
    s = execute(_cfg(steps=400), tmp_path / "r")
    before = _files(tmp_path / "r")
    messages = []
    assert execute(_cfg(steps=400), tmp_path / "r", on_message=messages.append) == s
    assert messages == [f"{tmp_path / 'r'}: finished (400 steps); nothing to run"]
    assert _files(tmp_path / "r") == before


def test_other_changes_are_refused_naming_each_key_and_nothing_is_modified(tmp_path):
    execute(_cfg(steps=400), tmp_path / "r")
    before = _files(tmp_path / "r")
    changed = _cfg(steps=2000, seed=5, overrides={"actor_lr": 0.001}, diagnostics_every=100)
    with pytest.raises(ValueError) as exc:
        execute(changed, tmp_path / "r")
    msg = str(exc.value)
    for fragment in ("overrides.actor_lr: (unset) -> 0.001", "seed: 3 -> 5", "diagnostics_every: 200 -> 100"):
        assert fragment in msg, msg
    assert "steps:" not in msg  # steps alone may change
    assert _files(tmp_path / "r") == before  # config.json included: nothing was overwritten


def test_interrupted_run_refuses_a_changed_config_and_may_change_steps(tmp_path):
    execute(_cfg(), tmp_path / "r", stop_at=800)
    before = _files(tmp_path / "r")
    with pytest.raises(ValueError, match="reset: \"end\" -> \"every:50\""):
        execute(_cfg(reset="every:50"), tmp_path / "r")
    with pytest.raises(ValueError, match="checkpoint is at step 800, past the requested 600 steps"):
        execute(_cfg(steps=600), tmp_path / "r")
    assert _files(tmp_path / "r") == before
    assert execute(_cfg(steps=1000), tmp_path / "r")["steps"] == 1000


def test_finished_run_cannot_be_shortened_or_extended_without_a_final_checkpoint(tmp_path):
    execute(_cfg(steps=400), tmp_path / "r")
    with pytest.raises(ValueError, match="cannot be shortened"):
        execute(_cfg(steps=200), tmp_path / "r")
    execute(_cfg(steps=400, checkpoint_every=0), tmp_path / "nock")
    with pytest.raises(ValueError, match="no checkpoint of its final step 400"):
        execute(_cfg(steps=800, checkpoint_every=0), tmp_path / "nock")


def test_resume_without_checkpoint_starts_afresh_with_a_message(tmp_path):
    out = tmp_path / "r"
    execute(_cfg(checkpoint_every=0), out, stop_at=300)  # stopped before any checkpoint: nothing resumable
    (out / "episodes.csv").write_text("stale\n")
    messages = []
    s = execute(_cfg(steps=400), out, on_message=messages.append)
    assert messages == [f"{out}: no checkpoint to resume from (the run stopped before its first checkpoint); "
                        "starting afresh from step 0"]
    assert s["resumed_from"] == [] and comparable(s) == comparable(execute(_cfg(steps=400), tmp_path / "ref"))


def test_config_changes_fill_defaults_and_compare_nested_keys():
    old = _cfg().to_dict()
    assert config_changes(old, _cfg(probe_every=0).to_dict()) == []
    assert config_changes(old, _cfg(probe_every=100).to_dict()) == [("probe_every", 0, 100)]
    assert config_changes(old, _cfg(env_kwargs={"continuing": True}).to_dict()) == [
        ("env_kwargs.continuing", "(unset)", True)]


def test_cli_resume_reports_resumed_and_refusals(tmp_path, capsys):
    args = ["run", "--agent", "a2c", "--trace", "wind-3", "--trace-length", "5000", "--seed", "3",
            "--checkpoint-every", "200", "--no-progress", "--out", str(tmp_path)]
    assert main([*args, "--steps", "400"]) == 0
    capsys.readouterr()
    assert main([*args, "--steps", "600", "--resume", "--set", "actor_lr=0.01"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "overrides.actor_lr: (unset) -> 0.01" in err
    assert main([*args, "--steps", "600", "--resume"]) == 0
    err = capsys.readouterr().err
    assert "extending the finished run from step 400 to 600" in err
    assert json.loads((tmp_path / "a2c-s3" / "summary.json").read_text())["resumed_from"] == [400]


# -- TensorBoard --------------------------------------------------------------------------------------------


def _scalars(tb_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_tensorboard_events_past_the_checkpoint_are_purged_on_resume(tmp_path, monkeypatch):
    """A crash at step ~1000 (past the step-800 checkpoint, TensorBoard events of steps 801-1000 already on
    disk), then resume: every step appears once, with the uninterrupted run's values."""
    cfg = _cfg(tensorboard=True)
    execute(cfg, tmp_path / "full")
    out = tmp_path / "cut"
    import lcpo.persistence.runlog

    real = lcpo.persistence.runlog.RunLog.on_episode

    def on_episode(self, row):
        real(self, row)
        if row[1] >= 1000 and not (out / "summary.json").exists():
            self._tb.flush()  # the events reach the disk, then the process dies
            raise Crash("after step 1000")

    monkeypatch.setattr(lcpo.persistence.runlog.RunLog, "on_episode", on_episode)
    with pytest.raises(Crash):
        execute(cfg, out)
    monkeypatch.undo()
    crashed = [s for s, _ in _scalars(out / "tb", "rollout/episode_return")]
    assert max(crashed) == 1000 and RunCheckpoints(out / "checkpoint").latest().step == 800
    execute(cfg, out)
    for tag in ("rollout/episode_return", "train/policy_loss"):
        got, want = _scalars(out / "tb", tag), _scalars(tmp_path / "full" / "tb", tag)
        assert [s for s, _ in got] == [s for s, _ in want], tag
        assert [v for _, v in got] == pytest.approx([v for _, v in want])


# -- damaged folders and bad paths: one-line errors ---------------------------------------------------------


def _cli(tmp_path, capsys, *extra, out=None):
    rc = main(["run", "--agent", "a2c", "--trace", "wind-3", "--trace-length", "5000", "--steps", "400",
               "--checkpoint-every", "200", "--no-progress", "--out", str(out or tmp_path / "runs"), *extra])
    err = capsys.readouterr().err
    return rc, err


def _stopped_run(tmp_path):
    out = tmp_path / "runs" / "a2c-s0"
    execute(RunConfig(agent="a2c", trace="wind-3", trace_length=5000, steps=400, checkpoint_every=200), out,
            stop_at=200)
    return out, RunCheckpoints(out / "checkpoint").latest().folder


@pytest.mark.parametrize("damage", ["truncated state.pt", "crafted pickle state.pt", "truncated state.json",
                                    "truncated latest.json", "edited episodes.csv"])
def test_damaged_checkpoint_is_a_one_line_error_naming_the_file(tmp_path, capsys, damage):
    out, gen = _stopped_run(tmp_path)
    if damage == "truncated latest.json":
        target = out / "checkpoint" / "latest.json"
    elif damage == "edited episodes.csv":
        target = out / "episodes.csv"
    else:
        target = gen / damage.split()[-1]
    if damage.startswith("crafted"):
        import pickle

        marker = tmp_path / "PWNED"

        class Evil:
            def __reduce__(self):
                import os

                return (os.system, (f"touch {marker}",))

        target.write_bytes(pickle.dumps(Evil()))
    elif damage.startswith("edited"):
        lines = target.read_text().splitlines(keepends=True)
        lines[1] = lines[1].replace(",", ",9", 1)  # the first episode's end step, changed
        target.write_text("".join(lines))
    else:
        target.write_bytes(target.read_bytes()[:25])
    before = _files(out)
    rc, err = _cli(tmp_path, capsys, "--resume")
    assert rc == 2 and err.startswith("lcpo run: error: ") and err.count("\n") == 1, err
    assert str(target) in err and "Traceback" not in err
    assert _files(out) == before
    if damage.startswith("crafted"):
        assert not (tmp_path / "PWNED").exists()


def test_out_naming_an_existing_file_is_a_one_line_error(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    rc, err = _cli(tmp_path, capsys, out=f)
    assert rc == 2 and err == f"lcpo run: error: --out {f} is an existing file, not a folder\n"
    with pytest.raises(ValueError, match=f"run folder {f / 'r'}: {f} is an existing file"):
        execute(_cfg(), f / "r")


def test_failed_run_leaves_no_empty_run_folder(tmp_path, capsys):
    rc, err = _cli(tmp_path, capsys, "--env-arg", "bogus=1", out=tmp_path / "new" / "deeper")
    assert rc == 2 and "bogus" in err
    assert not (tmp_path / "new").exists()
    # a failure in the middle of a run, before its first checkpoint: nothing resumable, nothing left
    import lcpo.online.run

    class Boom(Exception):
        pass

    def boom(*a, **k):
        raise Boom()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lcpo.online.run, "lifelong_return", boom)
        with pytest.raises(Boom):
            execute(_cfg(steps=200, checkpoint_every=0), tmp_path / "mid")
    assert not (tmp_path / "mid").exists()
    # ...but a failed run that committed a checkpoint keeps its folder (it can resume)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lcpo.online.run, "lifelong_return", boom)
        with pytest.raises(Boom):
            execute(_cfg(steps=400), tmp_path / "kept")
    assert RunCheckpoints(tmp_path / "kept" / "checkpoint").latest().step == 400


def test_damaged_checkpoint_error_is_one_line_from_a_subprocess(tmp_path):
    """The same through the installed entry point (no traceback on stderr)."""
    out, gen = _stopped_run(tmp_path)
    (gen / "state.pt").write_bytes(b"")
    proc = subprocess.run([sys.executable, "-m", "lcpo.cli.main", "run", "--agent", "a2c", "--trace", "wind-3",
                           "--trace-length", "5000", "--steps", "400", "--checkpoint-every", "200",
                           "--no-progress", "--resume", "--out", str(tmp_path / "runs")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and str(gen / "state.pt") in proc.stderr


# -- runs that never update ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cfg", [
    _cfg("prescient-a2c", steps=200, overrides={"train_steps": 200, "hidden": [8]}),
    _cfg("a2c", steps=150),  # shorter than one 200-step rollout
], ids=["prescient", "short"])
def test_run_without_updates_writes_a_diagnostics_header(tmp_path, cfg):
    s = execute(cfg, tmp_path / "r")
    assert s["updates"] == 0
    text = (tmp_path / "r" / "diagnostics.csv").read_text()
    assert text == "step,updates\n"
    assert list(pd.read_csv(tmp_path / "r" / "diagnostics.csv").columns) == ["step", "updates"]


def test_last_diagnostics_row_is_labelled_with_the_last_step(tmp_path):
    execute(_cfg(steps=1100, diagnostics_every=400), tmp_path / "r")
    steps = pd.read_csv(tmp_path / "r" / "diagnostics.csv")["step"].tolist()
    assert steps == [400, 800, 1100]


def test_checkpoint_of_an_older_lcpo_still_resumes(tmp_path):
    """Runs interrupted under the two-file layout (checkpoint/state.pt + state.json, no pointer) resume; the
    next commit replaces the old files."""
    import torch

    from lcpo.persistence.checkpoint import _split

    cfg = _cfg(steps=600, checkpoint_every=200)
    full = execute(cfg, tmp_path / "full")
    out = tmp_path / "old"
    execute(cfg, out, stop_at=400)
    store = RunCheckpoints(out / "checkpoint")
    _, state = store.load()
    state.pop("resumed_from")
    shutil.rmtree(store.folder)
    store.folder.mkdir()
    tensors = {}
    skeleton = _split(state, tensors, "state")
    torch.save(tensors, store.folder / "state.pt")
    (store.folder / "state.json").write_text(json.dumps(skeleton))
    info = store.latest()
    assert info.legacy and info.step == 400
    messages = []
    assert execute(cfg, out, on_message=messages.append)["lifelong_return"] == full["lifelong_return"]
    assert "read unverified" in messages[0]
    assert sorted(p.name[:17] for p in store.folder.iterdir()) == ["latest.json", "step-000000000600"]


def test_checkpoints_hold_where_episodes_csv_ends_not_its_rows(tmp_path):
    """A checkpoint's size does not grow with the episodes: the loop state counts them and the log state records
    the file's length and SHA-256 (the rows were in the JSON, 743 MB per seed at 12.55M steps of
    InvertedPendulum)."""
    import hashlib

    from lcpo.persistence.checkpoint import load_state

    out = tmp_path / "r"
    execute(_cfg(steps=1200, reset="every:50"), out, stop_at=800)
    gen = RunCheckpoints(out / "checkpoint").latest().folder
    state = load_state(gen / "state")
    data = (out / "episodes.csv").read_bytes()
    assert "episodes" not in state["loop"] and state["loop"]["episode_count"] == 16 == data.count(b"\n") - 1
    assert state["log"]["episodes_file"] == {"rows": 16, "bytes": len(data),
                                             "sha256": hashlib.sha256(data).hexdigest(), "width": 6}
    assert b"episode" not in (gen / "state.json").read_bytes().replace(b"episode_count", b"").replace(
        b"episodes_file", b"")


def test_rows_a_stopped_process_appended_after_its_checkpoint_are_cut_on_resume(tmp_path):
    """The process dies after appending the step-800 rows to episodes.csv, before committing the checkpoint
    (here: a partial line too); the resume from step 400 ends with the uninterrupted run's files."""
    cfg = _cfg(reset="every:50")
    execute(cfg, tmp_path / "full")
    out = tmp_path / "cut"
    execute(cfg, out, stop_at=400)
    ahead = tmp_path / "ahead"
    execute(cfg, ahead, stop_at=800)
    (out / "episodes.csv").write_bytes((ahead / "episodes.csv").read_bytes() + b"17,850,-3.")
    resumed = execute(cfg, out)
    assert resumed["resumed_from"] == [400]
    assert _outputs(out) == _outputs(tmp_path / "full")


def test_a_checkpoint_holding_its_rows_in_the_loop_state_still_resumes(tmp_path):
    """Checkpoints written before episodes.csv was append-only hold the rows (lists) in the loop state and no
    marker: they resume to the uninterrupted run, and the file is rewritten from those rows."""
    cfg = _cfg(steps=1200, reset="every:50")
    full = execute(cfg, tmp_path / "full")
    out = tmp_path / "old"
    execute(cfg, out, stop_at=800)
    store = RunCheckpoints(out / "checkpoint")
    step, state = store.load()
    rows = pd.read_csv(out / "episodes.csv")
    state["loop"].pop("episode_count")
    state["loop"]["episodes"] = [[int(r[0]), int(r[1]), float(r[2]), int(r[3]), *map(float, r[4:])]
                                 for r in rows.itertuples(index=False)]
    state["log"].pop("episodes_file")
    store.commit(step, state, cfg.to_dict())
    (out / "episodes.csv").write_text("stale\n")
    assert execute(cfg, out)["lifelong_return"] == full["lifelong_return"]
    assert _outputs(out) == _outputs(tmp_path / "full")
