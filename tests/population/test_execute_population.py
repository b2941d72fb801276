"""Populations with run folders (issue 26 items 4 and 5): each seed folder equals its solo run, a population
resumes exactly (from a stop, from a crash at any file operation of its checkpoint, a seed folder alone), seeds
are independent, and `lcpo run --seed 0-3` equals `--no-batch`."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from faults import Crash, FileFaults
from lcpo.cli.main import main
from lcpo.online.population import Population, execute_population, population_folder, read_population_pointer
from lcpo.online.run import RunConfig, execute
from lcpo.persistence.checkpoint import RunCheckpoints
from lcpo.persistence.runlog import RunLog
from summaries import comparable

AGENTS = {
    "a2c": {"hidden": [16]},                                                     # on-policy (rollout batch)
    "ddqn": {"buffer_size": 1000, "learning_starts": 100, "train_every": 100, "batch_size": 32,
             "hidden": [16, 16]},                                                # replay buffer
    "lcpo": {"reservoir_size": 1000, "hidden": [16]},                            # reservoir + OOD sampler
}


def _cfg(agent="a2c", seed=0, **kw):
    base = dict(trace="wind-3", trace_length=5000, agent=agent, steps=600, seed=seed, checkpoint_every=200,
                diagnostics_every=200, overrides=AGENTS.get(agent, {}), reset="every:150")
    base.update(kw)
    return RunConfig(**base)


def _outputs(folder):
    return {name: (folder / name).read_text() for name in ("episodes.csv", "diagnostics.csv", "config.json")}


def _untimed(summary):
    return comparable(summary, "population")


def _same(a, b, where="state"):
    """Recursive bitwise equality of two checkpoint states (tensors, arrays, plain values)."""
    if isinstance(a, dict):
        if where.endswith(".loop") and a.get("wrappers") is None and b.get("wrappers") is not None:
            # lcpo's native vector env has no wrappers (the solo env's OrderEnforcing/PassiveEnvChecker flags
            # are set again by the seeded reset of a resume); a SyncVectorEnv's are saved and compared
            b = {k: v for k, v in b.items() if k != "wrappers"}
            a = {k: v for k, v in a.items() if k != "wrappers"}
        # a population's checkpoint state names the population (provenance, top level only), a solo run's does not
        extra = {"population"} if "." not in where else set()
        assert isinstance(b, dict) and set(a) - extra == set(b) - extra, where
        for k in set(a) & set(b):
            if k not in ("wall_time_s", "wall_share_s", "offline_train_s"):
                _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        assert a == b, where


def _scalars(tb_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def _snapshots(folder):
    from lcpo.experiments.drift import load_snapshots

    return [(s["step"], s["obs"].tolist(), {k: v.tolist() for k, v in s["params"].items()})
            for s in load_snapshots(folder)]


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_each_seed_folder_equals_its_solo_run(tmp_path, agent, monkeypatch):
    """Generic path (and a2c's batch-native one): bitwise equal episodes, diagnostics, config, summary (but
    timing), checkpoint, forgetting probes and TensorBoard scalars."""
    import lcpo.agents.population as agent_pop

    monkeypatch.setattr(agent_pop, "BATCH_NATIVE", frozenset())  # the generic path for every agent
    cfgs = [_cfg(agent, s, probe_every=200, tensorboard=agent == "a2c") for s in (0, 1, 2)]
    pops = execute_population(cfgs, [tmp_path / f"pop{s}" for s in (0, 1, 2)])
    for c, p in zip(cfgs, pops):
        solo = execute(c, tmp_path / f"solo{c.seed}")
        assert _untimed(p) == _untimed(solo)
        assert p["population"]["size"] == 3 and p["population"]["seeds"] == [0, 1, 2]
        assert p["population"]["steps_per_s"] > 0 and p["updates"] > 0
        assert _outputs(tmp_path / f"pop{c.seed}") == _outputs(tmp_path / f"solo{c.seed}")
        _same(RunCheckpoints(tmp_path / f"pop{c.seed}" / "checkpoint").load(),
              RunCheckpoints(tmp_path / f"solo{c.seed}" / "checkpoint").load())
        assert _snapshots(tmp_path / f"pop{c.seed}") == _snapshots(tmp_path / f"solo{c.seed}")
        if c.tensorboard:
            assert _scalars(tmp_path / f"pop{c.seed}" / "tb", "rollout/episode_return") == \
                _scalars(tmp_path / f"solo{c.seed}" / "tb", "rollout/episode_return")
    if agent != "ddqn":
        assert len(_snapshots(tmp_path / "pop0")) == 3  # snapshots at the updates of steps 200, 400, 600
    assert not population_folder([tmp_path / f"pop{s}" for s in (0, 1, 2)], agent).exists()  # spent: removed


def test_stopped_population_resumes_to_the_uninterrupted_runs(tmp_path):
    cfgs = [_cfg("lcpo", s) for s in (0, 1)]
    full = execute_population(cfgs, [tmp_path / f"full{s}" for s in (0, 1)])
    outs = [tmp_path / f"cut{s}" for s in (0, 1)]
    assert execute_population(cfgs, outs, stop_at=400) == [{"interrupted_at": 400}] * 2
    assert not (outs[0] / "summary.json").exists() and population_folder(outs, "lcpo").is_dir()
    messages = []
    resumed = execute_population(cfgs, outs, on_message=messages.append)
    assert messages == [f"{o}: resuming from the checkpoint at step 400" for o in outs]
    for s, a, b in zip((0, 1), resumed, full):
        assert a["resumed_from"] == [400] and a["lifelong_return"] == b["lifelong_return"]
        assert _untimed({**a, "resumed_from": []}) == _untimed(b)
        assert _outputs(tmp_path / f"cut{s}") == _outputs(tmp_path / f"full{s}")


def test_a_seed_folder_of_a_stopped_population_resumes_alone(tmp_path):
    """`lcpo resume <seed folder>` needs no special case: the folder's checkpoint is a solo run's."""
    cfgs = [_cfg("a2c", s) for s in (0, 1)]
    outs = [tmp_path / f"p{s}" for s in (0, 1)]
    execute_population(cfgs, outs, stop_at=400)
    alone = execute(cfgs[1], outs[1])
    solo = execute(cfgs[1], tmp_path / "solo")
    assert alone["resumed_from"] == [400] and alone["lifelong_return"] == solo["lifelong_return"]
    assert _outputs(outs[1]) == _outputs(tmp_path / "solo")
    # the other seed continues later; a population of the two now refuses (steps 400 and 600 differ)...
    with pytest.raises(ValueError, match="different steps"):
        execute_population([_cfg("a2c", s, steps=800) for s in (0, 1)], outs)
    # ...while the unfinished one finishes as a population of one
    rest = execute_population(cfgs, outs)
    assert rest[1] == json.loads((outs[1] / "summary.json").read_text())
    assert rest[0]["lifelong_return"] == execute(cfgs[0], tmp_path / "solo0")["lifelong_return"]


def _arm_during_commit(monkeypatch, faults, step):
    """Arm ``faults`` from the first file a checkpoint at ``step`` writes (seed 0's episodes.csv append) until
    the next checkpoint starts: every seed folder's CSVs and new generation, the population pointer, every seed
    folder's pointer."""
    from lcpo.online.population import PopulationLoop

    real = RunLog.write

    def write(self, episodes, final=False, last_step=None):
        if not final and self._pop_loop is not None:
            if self._pop_loop.steps == step:
                faults.arm()
            elif self._pop_loop.steps > step:
                faults.disarm()
        return real(self, episodes, final, last_step)

    real_run = PopulationLoop.run

    def run(self, until_step):  # lets each log see its population's step
        RunLog._pop_loop = self
        return real_run(self, until_step)

    monkeypatch.setattr(RunLog, "_pop_loop", None, raising=False)
    monkeypatch.setattr(PopulationLoop, "run", run)
    monkeypatch.setattr(RunLog, "write", write)


def _crash_trials(tmp_path, monkeypatch, stride):
    import os

    monkeypatch.setattr(os, "fsync", lambda fd: None)  # durability is not under test here (see faults.py)
    cfgs = [_cfg("a2c", s, reset="end") for s in (0, 1)]
    full = execute_population(cfgs, [tmp_path / f"full{s}" for s in (0, 1)])
    base = tmp_path / "base"
    execute_population(cfgs, [base / f"r{s}" for s in (0, 1)], stop_at=200)
    with pytest.MonkeyPatch.context() as mp:
        counter = FileFaults(mp)
        _arm_during_commit(mp, counter, 400)
        shutil.copytree(base, tmp_path / "count")
        execute_population(cfgs, [tmp_path / "count" / f"r{s}" for s in (0, 1)])
    n = counter.count
    assert n >= 60, counter.log  # the population commit, two exports, two log writes
    sources = set()
    for k in sorted(set(range(1, n + 1, stride)) | {n}):
        trial = tmp_path / f"crash{k}"
        shutil.copytree(base, trial)
        outs = [trial / f"r{s}" for s in (0, 1)]
        with pytest.MonkeyPatch.context() as mp:
            faults = FileFaults(mp, crash_at=k)
            _arm_during_commit(mp, faults, 400)
            with pytest.raises(Crash):
                execute_population(cfgs, outs)
        assert not (outs[0] / "summary.json").exists()
        steps = [RunCheckpoints(o / "checkpoint").latest().step for o in outs]
        pop = read_population_pointer(population_folder(outs, "a2c"))["step"]
        sources.add((pop, *steps))
        resumed = execute_population(cfgs, outs)
        for s, r, f in zip((0, 1), resumed, full):
            assert r["lifelong_return"] == f["lifelong_return"], (k, faults.log[-1])
            assert r["resumed_from"][-1] == pop, k  # always from the population's committed step
            assert _outputs(outs[s]) == _outputs(tmp_path / f"full{s}"), k
        shutil.rmtree(trial)
    return sources


def test_crash_during_a_population_checkpoint_resumes_to_the_same_runs(tmp_path, monkeypatch):
    """The process dies before file operation k of the step-400 checkpoint (population commit, then each seed
    folder's export): the resumed population ends as the uninterrupted one, from step 200 or 400, also when the
    seed folders were left at different steps (a crash between the exports)."""
    sources = _crash_trials(tmp_path, monkeypatch, stride=5)
    assert {(200, 200, 200), (400, 200, 200), (400, 400, 200), (400, 400, 400)} <= sources, sources


def test_a_pointer_whose_generations_are_gone_is_refused_and_nothing_is_written(tmp_path):
    """Run folders brought back with their files but without their checkpoint/ (a copy that skipped the large
    files) while the population pointer says step 400: resuming used to start every seed afresh, silently
    overwriting 400 steps of episodes; now a one-line CheckpointError names the pointer, the missing generation
    and the way on, and no run folder changes."""
    from lcpo.persistence.checkpoint import CheckpointError

    cfgs = [_cfg("a2c", s) for s in (0, 1)]
    outs = [tmp_path / f"p{s}" for s in (0, 1)]
    execute_population(cfgs, outs, stop_at=400)
    pop_dir = population_folder(outs, "a2c")
    generation = read_population_pointer(pop_dir)["members"][0]["generation"]
    for out in outs:
        shutil.rmtree(out / "checkpoint")
    def listing():
        return {str(f.relative_to(tmp_path)): f.read_bytes() for f in sorted(tmp_path.rglob("*"))
                if f.is_file() and f.name != ".lock"}  # the locks record who last held them

    before = listing()
    with pytest.raises(CheckpointError) as err:
        execute_population(cfgs, outs)
    msg = str(err.value)
    assert "\n" not in msg and "(step 400)" in msg and str(pop_dir / "population.json") in msg
    assert f"names {generation}, gone from {outs[0] / 'checkpoint'}" in msg and f"delete {pop_dir}" in msg
    assert listing() == before  # every file, the population's own included
    # as the message says: without the pointer, the seeds start afresh and end as uninterrupted runs
    shutil.rmtree(pop_dir)
    again = execute_population(cfgs, outs)
    full = execute_population(cfgs, [tmp_path / f"full{s}" for s in (0, 1)])
    assert [a["lifelong_return"] for a in again] == [b["lifelong_return"] for b in full]


def test_a_seed_that_went_on_alone_from_below_the_pointer_is_not_refused(tmp_path):
    """A seed folder left behind the pointer (a kill between the population's commit and that folder's export)
    and then resumed alone: its solo commit collects the population's generation. Its own later history stands
    (as before the refusal above existed): the seeds now stand at different steps and go on one by one."""
    cfgs = [_cfg("a2c", s) for s in (0, 1)]
    outs = [tmp_path / f"p{s}" for s in (0, 1)]
    execute_population(cfgs, outs, stop_at=200)
    shutil.copytree(outs[1] / "checkpoint", tmp_path / "at200")
    execute_population(cfgs, outs, stop_at=400)
    shutil.rmtree(outs[1] / "checkpoint")
    shutil.copytree(tmp_path / "at200", outs[1] / "checkpoint")  # seed 1's folder as the kill left it: step 200
    assert execute(cfgs[1], outs[1], stop_at=300) == {"interrupted_at": 300}  # on alone, below the pointer
    with pytest.raises(ValueError, match="different steps") as err:
        execute_population(cfgs, outs)
    assert "CheckpointError" not in type(err.value).__name__
    full = execute_population(cfgs, [tmp_path / f"full{s}" for s in (0, 1)])
    for cfg, out, f in zip(cfgs, outs, full):  # one by one, as the message says
        assert execute(cfg, out)["lifelong_return"] == f["lifelong_return"]


def test_fewer_steps_than_the_population_checkpoint_are_refused_as_for_a_folders_own(tmp_path):
    """The folders at step 200 (a kill before their exports), the population's pointer at 400: asking for 300
    steps used to start the seeds afresh, discarding both; now the solo rule's one-line refusal."""
    cfgs = [_cfg("a2c", s) for s in (0, 1)]
    outs = [tmp_path / f"p{s}" for s in (0, 1)]
    execute_population(cfgs, outs, stop_at=200)
    for o in outs:
        shutil.copytree(o / "checkpoint", tmp_path / f"{o.name}-200")
    execute_population(cfgs, outs, stop_at=400)
    gens = {m["folder"]: m["generation"] for m in read_population_pointer(population_folder(outs, "a2c"))["members"]}
    for o in outs:
        g = next(v for k, v in gens.items() if k.endswith(o.name))
        shutil.move(o / "checkpoint" / g, tmp_path / g)
        shutil.rmtree(o / "checkpoint")
        shutil.copytree(tmp_path / f"{o.name}-200", o / "checkpoint")
        shutil.move(tmp_path / g, o / "checkpoint" / g)  # the population's generation, not yet exported
    with pytest.raises(ValueError, match=r"population checkpoint .* is at step 400, past the requested 300 steps; "
                                         r"pass --steps 400 or more"):
        execute_population([_cfg("a2c", s, steps=300) for s in (0, 1)], outs)
    assert [r["resumed_from"] for r in execute_population(cfgs, outs)] == [[200, 400], [200, 400]]


def test_deleted_run_folders_start_afresh_and_a_fresh_start_drops_the_stale_pointer(tmp_path):
    """Run folders deleted while their population's folder stays: a fresh start, with a note; the stale pointer
    goes at once, so a fresh population stopped before its first checkpoint resumes afresh, not refused."""
    cfgs = [_cfg("a2c", s) for s in (0, 1)]
    outs = [tmp_path / f"p{s}" for s in (0, 1)]
    execute_population(cfgs, outs, stop_at=400)
    pop_dir = population_folder(outs, "a2c")
    for out in outs:
        shutil.rmtree(out)
    generations = [m["generation"] for m in read_population_pointer(pop_dir)["members"]]

    class Killed(Exception):
        pass

    def killed(msg):  # the process dies as the fresh start begins writing, before its first checkpoint
        raise Killed(msg)

    with pytest.raises(Killed) as note:
        execute_population(cfgs, outs, on_message=killed)
    assert str(note.value) == (f"{outs[0]}: the population checkpoint {pop_dir / 'population.json'} (step 400) "
                               f"names {generations[0]}, gone, and the folder holds no run; starting afresh from step 0")
    assert read_population_pointer(pop_dir) is None  # the stale pointer went first
    notes = []
    again = execute_population(cfgs, outs, on_message=notes.append)
    assert not [n for n in notes if "population checkpoint" in n]
    full = execute_population(cfgs, [tmp_path / f"full{s}" for s in (0, 1)])
    assert [a["lifelong_return"] for a in again] == [b["lifelong_return"] for b in full]


@pytest.mark.slow
def test_crash_at_every_file_operation_of_a_population_checkpoint(tmp_path, monkeypatch):
    _crash_trials(tmp_path, monkeypatch, stride=1)


def test_changing_one_seeds_environment_leaves_the_others_identical(tmp_path):
    cfgs = [_cfg("a2c", s) for s in (0, 1, 2)]
    execute_population(cfgs, [tmp_path / f"a{s}" for s in (0, 1, 2)])
    changed = [cfgs[0], _cfg("a2c", 1, env_kwargs={"time_limit": 90}, trace="wind-1"), cfgs[2]]
    execute_population(changed, [tmp_path / f"b{s}" for s in (0, 1, 2)])
    for s in (0, 2):
        assert _outputs(tmp_path / f"a{s}") == _outputs(tmp_path / f"b{s}")
    assert _outputs(tmp_path / "a1")["episodes.csv"] != _outputs(tmp_path / "b1")["episodes.csv"]
    assert execute(changed[1], tmp_path / "solo1")["lifelong_return"] == \
        json.loads((tmp_path / "b1" / "summary.json").read_text())["lifelong_return"]


def test_members_must_share_agent_steps_and_overrides(tmp_path):
    with pytest.raises(ValueError, match="must share steps: seed 0 has 600, seed 1 has 800"):
        execute_population([_cfg(seed=0), _cfg(seed=1, steps=800)], [tmp_path / "a", tmp_path / "b"])
    with pytest.raises(ValueError, match="seeds repeat"):
        execute_population([_cfg(seed=0), _cfg(seed=0)], [tmp_path / "a", tmp_path / "b"])
    assert not (tmp_path / "a").exists()


def test_a_seed_going_on_alone_after_its_population_counts_only_its_share_of_the_wall_time(tmp_path):
    """A population's wall time W is shared by its N seeds; a seed resumed alone after the population stopped adds
    its own session whole. ``wall_share_s`` records that split: W / N plus the run's own sessions (before, a
    reader had only ``wall_time_s``, W plus the solo session, and a seed that had left its population recorded no
    population size, so the reports counted W once per seed). Summed over the runs, every session counts once."""
    from lcpo.experiments.report import process_wall_time

    cfgs = [_cfg("a2c", s) for s in (0, 1)]
    outs = [tmp_path / f"p{s}" for s in (0, 1)]
    execute_population(cfgs, outs, stop_at=400)
    _, state = RunCheckpoints(outs[1] / "checkpoint").load()
    W = state["wall_time_s"]
    assert W > 0 and state["wall_share_s"] == pytest.approx(W / 2)
    alone = execute(cfgs[1], outs[1])  # seed 1 goes on alone
    rest = execute_population(cfgs, outs)[0]  # seed 0 finishes as a population of one (seed 1 is done)
    for summary in (alone, rest):
        assert summary["wall_time_s"] > W
        assert summary["wall_share_s"] == pytest.approx(summary["wall_time_s"] - W / 2)  # W/2 + its own session
    assert rest["population"]["size"] == 1
    # the seed that went on alone still names the population it ran in, and from which step it ran alone
    assert alone["population"] == {"alone_from": 400, "size": 2, "seeds": [0, 1],
                                   "batch_native": rest["population"]["batch_native"], "device": "cpu"}
    runs = pd.DataFrame({"wall_time_s": [alone["wall_time_s"], rest["wall_time_s"]], "population_size": [1, 1],
                         "wall_share_s": [alone["wall_share_s"], rest["wall_share_s"]]})
    own = (alone["wall_time_s"] - W) + (rest["wall_time_s"] - W)
    assert process_wall_time(runs) == pytest.approx(W + own)
    assert process_wall_time(runs.drop(columns="wall_share_s")) == pytest.approx(2 * W + own)  # the old count


def test_wall_shares_of_checkpoints_written_before_the_record():
    """Older checkpoints have no ``wall_share_s``: one population's states share one wall time (W / N each);
    solo checkpoints joined into a population keep their own."""
    from lcpo.online.population import _wall_shares

    assert _wall_shares([{"wall_time_s": 9.0}] * 3) == [3.0, 3.0, 3.0]
    assert _wall_shares([{"wall_time_s": 4.0}, {"wall_time_s": 6.0}]) == [4.0, 6.0]
    assert _wall_shares([{"wall_time_s": 9.0, "wall_share_s": 5.0}, {"wall_time_s": 9.0}]) == [5.0, 4.5]


def test_cli_seed_range_writes_the_folders_of_the_solo_runs(tmp_path, capsys):
    args = ["run", "--agent", "a2c", "--trace", "wind-3", "--trace-length", "5000", "--steps", "2000",
            "--set", "hidden=[16]", "--checkpoint-every", "1000", "--no-progress"]
    assert main([*args, "--seed", "0-2", "5", "--out", str(tmp_path / "pop")]) == 0
    err = capsys.readouterr().err
    assert "a2c: population of 4 seeds" in err
    assert main([*args, "--seed", "0", "1", "2", "5", "--no-batch", "--out", str(tmp_path / "solo")]) == 0
    for s in (0, 1, 2, 5):
        a, b = tmp_path / "pop" / f"a2c-s{s}", tmp_path / "solo" / f"a2c-s{s}"
        assert _outputs(a) == _outputs(b)
        sa, sb = (json.loads((f / "summary.json").read_text()) for f in (a, b))
        assert _untimed(sa) == _untimed(sb) and sa["population"]["seeds"] == [0, 1, 2, 5]
        assert sb["population"] == {"size": 1, "seeds": [s]}  # trained alone, and says so


#: a two-seed A2C population with a checkpoint every 400 steps (the CLI resume tests below)
_RESUME_ARGS = ["--agent", "a2c", "--trace", "wind-3", "--trace-length", "5000", "--set", "hidden=[16]",
                "--checkpoint-every", "400", "--no-progress", "--seed", "0-1"]


def test_cli_resume_extends_population_folders_as_a_population(tmp_path, capsys):
    args = _RESUME_ARGS
    assert main(["run", *args, "--steps", "400", "--out", str(tmp_path / "r")]) == 0
    assert main(["resume", str(tmp_path / "r"), "--steps", "800", "--no-progress"]) == 0
    assert "population of 2 seeds" in capsys.readouterr().err
    assert main(["run", *args, "--steps", "800", "--out", str(tmp_path / "straight")]) == 0
    for s in (0, 1):
        assert _outputs(tmp_path / "r" / f"a2c-s{s}")["episodes.csv"] == \
            _outputs(tmp_path / "straight" / f"a2c-s{s}")["episodes.csv"]


def test_cli_resume_continues_seeds_at_different_steps_one_by_one(tmp_path, capsys):
    """One seed of a population folder extended alone first: `lcpo resume OUT` used to stop with "cannot
    continue these runs as one population"; it continues them one by one, as `lcpo sweep` does, and each
    folder ends as the straight run."""
    args = _RESUME_ARGS
    assert main(["run", *args, "--steps", "400", "--out", str(tmp_path / "r")]) == 0
    assert main(["resume", str(tmp_path / "r" / "a2c-s1"), "--steps", "600", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["resume", str(tmp_path / "r"), "--steps", "800", "--no-progress"]) == 0
    assert "different steps; continuing them one by one" in capsys.readouterr().err
    assert main(["run", *args, "--steps", "800", "--out", str(tmp_path / "straight")]) == 0
    for s in (0, 1):
        assert _outputs(tmp_path / "r" / f"a2c-s{s}")["episodes.csv"] == \
            _outputs(tmp_path / "straight" / f"a2c-s{s}")["episodes.csv"]


def test_parse_seeds():
    from lcpo.cli.argtypes import parse_seeds

    assert parse_seeds(["0-3", "8"]) == [0, 1, 2, 3, 8] and parse_seeds(["0", "1", "2"]) == [0, 1, 2]
    for bad, match in (("3-1", "0 <= A <= B"), ("x", "bad seed 'x'"), ("-2", "bad seed '-2'")):
        with pytest.raises(ValueError, match=match):
            parse_seeds([bad])
    with pytest.raises(ValueError, match="seed 2 is given twice"):
        parse_seeds(["0-3", "2"])
    assert parse_seeds(["0,", "1"]) == [0, 1]  # `--seed 0, 1`: a trailing comma
    for bad in ("0,,1", ",1", ","):  # a stray comma was skipped: --seed 0,,1 ran seeds 0 and 1
        with pytest.raises(ValueError, match=f"bad seed '{bad}': an empty entry in the comma list"):
            parse_seeds([bad])


def test_seeds_out_of_range_or_too_many_are_one_line_errors_naming_the_value(tmp_path, capsys):
    """A seed above 2**64-1 failed deep in the run ("Overflow when unpacking long long", no value named), and a
    mistyped range such as 0-999999999 hung expanding it (a quadratic repeat check over a billion seeds)."""
    import time

    from lcpo.cli.argtypes import MAX_SEED, MAX_SEEDS, parse_seeds

    assert parse_seeds([str(MAX_SEED)]) == [MAX_SEED]
    with pytest.raises(ValueError, match=r"bad seed '18446744073709551616': seeds must lie in 0\.\.2\*\*64-1"):
        parse_seeds([str(MAX_SEED + 1)])
    assert parse_seeds([f"0-{MAX_SEEDS - 1}"]) == list(range(MAX_SEEDS))
    t0 = time.process_time()
    with pytest.raises(ValueError, match=r"seed '0-999999999' names 1,000,000,000 seeds in all; at most 10,000"):
        parse_seeds(["0-999999999"])
    with pytest.raises(ValueError, match=r"seed '10-10000' names 10,001 seeds in all"):
        parse_seeds(["0-9", "10-10000"])
    assert time.process_time() - t0 < 1.0
    for bad, named in (("99999999999999999999", "'99999999999999999999'"), ("0-999999999", "'0-999999999'")):
        with pytest.raises(SystemExit) as info:  # a usage error, as --seed 3-1
            main(["run", "--agent", "a2c", "--seed", bad, "--steps", "400", "--no-progress",
                  "--out", str(tmp_path / "x")])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert named in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x").exists()


def test_cli_takes_a_users_vector_env_as_the_population(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MODULE:CLASS is imported from the current folder or sys.path
    args = ["run", "--env", "population_toys:EdgeVectorEnv", "--env-arg", "time_limit=5", "--agent", "a2c",
            "--set", "hidden=[8]", "--set", "rollout_steps=20", "--steps", "100", "--checkpoint-every", "50",
            "--no-progress", "--out", str(tmp_path / "v")]
    assert main([*args, "--seed", "0-2", "--env-arg", "num_envs=2"]) == 2
    assert "vector env of 2 sub-environments: pass 2 seeds" in capsys.readouterr().err
    assert not (tmp_path / "v").exists()
    assert main([*args, "--seed", "0-1"]) == 0  # made with num_envs=2, one sub-environment per seed
    for s in (0, 1):
        summary = json.loads((tmp_path / "v" / f"a2c-s{s}" / "summary.json").read_text())
        assert summary["episodes"] == 20 and summary["population"]["size"] == 2


def test_never_reset_on_a_time_limited_env_equals_the_solo_runs(tmp_path):
    """`--reset never` on the windy Pendulum (200-step time limit): each seed carries on past it, as alone."""
    cfgs = [_cfg("a2c", s, reset="never", steps=500, checkpoint_every=250) for s in (0, 1)]
    pops = execute_population(cfgs, [tmp_path / f"p{s}" for s in (0, 1)])
    for c, p in zip(cfgs, pops):
        solo = execute(c, tmp_path / f"s{c.seed}")
        assert _untimed(p) == _untimed(solo) and p["episodes"] == 2  # two 200-step windows
        assert _outputs(tmp_path / f"p{c.seed}") == _outputs(tmp_path / f"s{c.seed}")


def _batch_native_candidates():
    from lcpo.agents import AGENTS
    from lcpo.agents.population import BATCH_NATIVE

    return sorted(set(BATCH_NATIVE) | {a for a in ("a2c",) if hasattr(AGENTS[a], "population")})


@pytest.mark.parametrize("agent", _batch_native_candidates())
def test_batch_native_population_folders_equal_the_solo_runs(tmp_path, monkeypatch, agent):
    """The batch-native path (one object with a seed axis) writes each seed's folder bit for bit as its solo run
    (stated tolerance: none, for the plain-MLP agents listed; see docs/population.md)."""
    import lcpo.agents.population as agent_pop

    monkeypatch.setattr(agent_pop, "BATCH_NATIVE", frozenset(agent_pop.BATCH_NATIVE | {agent}))
    where = {"overrides": {}}
    if agent.startswith("tabular"):  # a tabular agent needs discrete states
        where = {"env": "lcpo/TrapGrid-v0", "trace": None, "trace_length": None, "reset": "end", "overrides": {}}
    elif agent.startswith("lcpo"):  # a strong, short trace: OOD anchors and constrained updates within the run
        where = {"trace": "wind-1", "trace_length": 2000, "steps": 1000, "overrides": {"reservoir_size": 1000}}
    if agent in ("ppo", "lcpo-p"):  # fewer PPO epochs (default 30): the same code path, less time
        where["overrides"] = {**where["overrides"], "epochs": 6, "minibatch_size": 100}
    cfgs = [_cfg(agent, s, probe_every=200, **where) for s in (0, 1, 2)]
    pops = execute_population(cfgs, [tmp_path / f"pop{s}" for s in (0, 1, 2)])
    assert all(p["population"]["batch_native"] for p in pops)
    if agent.startswith("lcpo"):
        assert all(p["constrained_fraction"] > 0 for p in pops)  # the anchored (constrained) step ran
    for c, p in zip(cfgs, pops):
        solo = execute(c, tmp_path / f"solo{c.seed}")
        assert _untimed(p) == _untimed(solo)
        assert _outputs(tmp_path / f"pop{c.seed}") == _outputs(tmp_path / f"solo{c.seed}")
        assert _snapshots(tmp_path / f"pop{c.seed}") == _snapshots(tmp_path / f"solo{c.seed}")
    # and a batch-native population resumes from its seed folders' checkpoints exactly
    outs = [tmp_path / f"cut{s}" for s in (0, 1, 2)]
    execute_population(cfgs, outs, stop_at=400)
    shutil.rmtree(population_folder(outs, agent))  # only the seed folders' own checkpoints are left
    for s, r in zip((0, 1, 2), execute_population(cfgs, outs)):
        assert r["resumed_from"] == [400]
        assert _outputs(tmp_path / f"cut{s}") == _outputs(tmp_path / f"solo{s}")


def test_device_reaches_the_batch_native_population_and_is_refused_elsewhere(tmp_path, monkeypatch, capsys):
    """--device plumbing without a GPU: the device goes to make_population for a batch-native agent; the
    generic path refuses it (before any env is made); the CLI refuses cuda where there is none (one line)."""
    import lcpo.agents.population as agent_pop
    from lcpo.online.population import Population

    seen = {}
    real = agent_pop.make_population

    def spy(name, env, seeds, **kw):
        seen.update(kw)
        return real(name, env, seeds, **kw)

    monkeypatch.setattr(agent_pop, "make_population", spy)
    pop = Population("a2c", seeds=[0, 1], trace="wind-3", trace_length=1000, device="cpu:0", hidden=[8])
    assert seen == {"hidden": [8]} and pop.device == "cpu" and pop.batch_native  # the CPU: today's path
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"^device 'cuda': no CUDA GPU here"):  # the library's own word
            Population("a2c", seeds=[0, 1], trace="wind-3", trace_length=1000, device="cuda")
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU, as far as the checks can see
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ValueError, match=r"^device cuda: agent 'ddqn' is not batch-native here"):
        Population("ddqn", seeds=[0, 1], trace="wind-3", trace_length=1000, device="cuda")
    with pytest.raises(ValueError, match=r"^device cuda: agent 'a2c' is not batch-native with batch=False"):
        Population("a2c", seeds=[0, 1], trace="wind-3", trace_length=1000, device="cuda", batch=False)
    from lcpo.experiments.config import RunSpec
    from lcpo.experiments.runner import run_sweep

    spec = RunSpec("d-ddqn-s0", {"env": "lcpo/WindyPendulum-v0", "agent": "ddqn", "seed": 0, "steps": 10})
    with pytest.raises(ValueError, match=r"^device cuda: agents \['ddqn'\] are not batch-native .*device='cpu'"):
        run_sweep([spec], tmp_path / "lib-sweep", device="cuda")
    assert not (tmp_path / "lib-sweep").exists()  # refused before the folder is made
    monkeypatch.undo()
    if not torch.cuda.is_available():
        assert main(["run", "--agent", "a2c", "--seed", "0-1", "--device", "cuda", "--steps", "10",
                     "--out", str(tmp_path)]) == 2
        assert capsys.readouterr().err.startswith("lcpo run: error: --device 'cuda': no CUDA GPU here")


@pytest.mark.slow
def test_kill_9_of_a_population_process_resumes_to_the_uninterrupted_runs(tmp_path):
    """A real `kill -9` of `lcpo run --seed 0-1` once its population has committed a checkpoint, then
    `lcpo resume`: the seed folders end byte-identical to an uninterrupted run's."""
    import os
    import signal
    import subprocess
    import sys
    import time

    args = ["run", "--agent", "a2c", "--trace", "wind-3", "--trace-length", "5000", "--steps", "20000",
            "--checkpoint-every", "500", "--seed", "0-1", "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-m", "lcpo.cli.main", *args, "--out", str(tmp_path / "cut")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    outs = [tmp_path / "cut" / f"a2c-s{s}" for s in (0, 1)]
    deadline = time.monotonic() + 300
    pointer = None
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            pointer = read_population_pointer(population_folder(outs, "a2c"))
        except Exception:  # noqa: BLE001 - being written: look again
            pointer = None
        if pointer and pointer["step"] >= 1000:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert pointer and pointer["step"] >= 1000 and not (outs[0] / "summary.json").exists()
    assert main(["resume", str(tmp_path / "cut"), "--no-progress"]) == 0
    assert main([*args, "--out", str(tmp_path / "full")]) == 0
    for s in (0, 1):
        assert _outputs(tmp_path / "cut" / f"a2c-s{s}") == _outputs(tmp_path / "full" / f"a2c-s{s}")
        summary = json.loads((tmp_path / "cut" / f"a2c-s{s}" / "summary.json").read_text())
        assert summary["resumed_from"][-1] >= 1000


def test_description_environments_are_made_once_and_closed(tmp_path, monkeypatch):
    """The native vector env has no per-seed env objects: run folders are described by one env per distinct
    environment configuration, made once for all seeds and closed with the population."""
    import lcpo.online.run as run_mod

    made, closed = [], []
    real = run_mod.make_run_env

    def tracked(config):
        env = real(config)
        made.append(env)
        inner = env.close
        env.close = lambda: (closed.append(env), inner())
        return env

    monkeypatch.setattr(run_mod, "make_run_env", tracked)
    cfgs = [_cfg("a2c", s, steps=200, checkpoint_every=0) for s in (0, 1, 2)]
    execute_population(cfgs, [tmp_path / f"s{s}" for s in (0, 1, 2)])
    assert len(made) == 1 and closed == made


def _killed_before_the_exports(tmp_path, cfgs, outs, at, behind):
    """The population's folders as a kill after its step-``at`` commit and before the seed folders' exports
    leaves them: each folder's own pointer at ``behind`` (None: no checkpoint yet), the population's pointer at
    ``at`` naming generations present in the folders."""
    execute_population(cfgs, outs, stop_at=behind or at)
    for o in outs:
        shutil.copytree(o / "checkpoint", tmp_path / f"{o.name}-own")
    if behind:
        execute_population(cfgs, outs, stop_at=at)
    pointer = read_population_pointer(population_folder(outs, cfgs[0].agent))
    assert pointer["step"] == at
    for o, m in zip(outs, pointer["members"]):
        shutil.move(o / "checkpoint" / m["generation"], tmp_path / m["generation"])
        shutil.rmtree(o / "checkpoint")
        if behind:
            shutil.copytree(tmp_path / f"{o.name}-own", o / "checkpoint")
        else:
            (o / "checkpoint").mkdir()
        shutil.move(tmp_path / m["generation"], o / "checkpoint" / m["generation"])
    return pointer


@pytest.mark.parametrize("behind", [200, None])
def test_a_seed_resumed_alone_takes_the_populations_later_generation(tmp_path, behind):
    """`lcpo resume <seed folder>` (and --no-batch, a sweep's one-by-one fallback: all `execute`) after a kill
    between the population's commit at step 400 and the folders' own pointers: it used to resume from the
    folder's step 200 (or, with no checkpoint of its own yet, start afresh, deleting the population's
    generation); now it resumes from the population's step 400, with a note, and ends as the uninterrupted run."""
    cfgs = [_cfg("a2c", s) for s in (0, 1)]
    outs = [tmp_path / f"p{s}" for s in (0, 1)]
    _killed_before_the_exports(tmp_path, cfgs, outs, 400, behind)
    assert RunCheckpoints(outs[1] / "checkpoint").latest() is None if behind is None else \
        RunCheckpoints(outs[1] / "checkpoint").latest().step == 200
    notes = []
    alone = execute(cfgs[1], outs[1], on_message=notes.append)
    pop_dir = population_folder(outs, "a2c")
    assert notes == [f"{outs[1]}: resuming from the population checkpoint {pop_dir / 'population.json'} at step 400"]
    assert alone["resumed_from"][-1] == 400
    full = execute(cfgs[1], tmp_path / "solo")
    assert alone["lifelong_return"] == full["lifelong_return"]
    assert _outputs(outs[1]) == _outputs(tmp_path / "solo")
    # the other seed through the CLI, the same way
    assert main(["resume", str(outs[0])]) == 0
    assert json.loads((outs[0] / "summary.json").read_text())["resumed_from"][-1] == 400


def test_a_pointer_of_another_configuration_or_an_unreadable_one_is_not_taken_alone(tmp_path):
    cfgs = [_cfg("a2c", s) for s in (0, 1)]
    outs = [tmp_path / f"p{s}" for s in (0, 1)]
    _killed_before_the_exports(tmp_path, cfgs, outs, 400, 200)
    from lcpo.online.population import pointer_for_folder

    assert pointer_for_folder(cfgs[0], outs[0])[1] == 400
    assert pointer_for_folder(_cfg("a2c", 0, overrides={"hidden": [8]}), outs[0]) == (None, 0, None)
    assert pointer_for_folder(_cfg("a2c", 0, steps=900), outs[0])[1] == 400  # more steps: the same run, extended
    bad = tmp_path / ".population-a2c-00000000"
    bad.mkdir()
    (bad / "population.json").write_text('{"format": 1, "step": ')
    notes = []
    assert pointer_for_folder(cfgs[0], outs[0], notes.append)[1] == 400
    assert len(notes) == 1 and "skipping an unreadable population checkpoint" in notes[0] and str(bad) in notes[0]


def test_a_fresh_start_refuses_folders_a_population_pointer_names(tmp_path):
    """Killed between its first population commit and the folders' own pointers, a population's seed folders
    held no run by `resume_plan`'s reading: a start without resume (`lcpo run`, no --resume) deleted the
    population's generations and its pointer without a word. Now it is refused as for a folder holding a run,
    alone or as a population, and nothing changes; resuming takes the generations."""
    cfgs = [_cfg("a2c", s) for s in (0, 1)]
    outs = [tmp_path / f"p{s}" for s in (0, 1)]
    _killed_before_the_exports(tmp_path, cfgs, outs, 200, None)

    def listing():
        return {str(f.relative_to(tmp_path)): f.read_bytes() for f in sorted(tmp_path.rglob("*"))
                if f.is_file() and f.name != ".lock"}

    before = listing()
    with pytest.raises(ValueError, match=r"p1 already holds a run \(the population checkpoint .*population\.json "
                                         r"names its generation at step 200\); pass --resume"):
        execute(cfgs[1], outs[1], resume=False)
    with pytest.raises(ValueError, match=r"p0 already holds a run \(the population checkpoint"):
        execute_population(cfgs, outs, resume=False)
    # fewer steps than the pointer's (its generation would be collected by the fresh run's first commit), and
    # another grouping's population over the same folders (a population reads its own pointer; the fresh start
    # checks the pointers beside each folder too)
    with pytest.raises(ValueError, match=r"p1 already holds a run"):
        execute(_cfg("a2c", 1, steps=100), outs[1], resume=False)
    with pytest.raises(ValueError, match=r"p1 already holds a run"):
        execute_population([cfgs[1]], [outs[1]], resume=False, population_dir=tmp_path / "elsewhere")
    assert listing() == before
    assert [r["resumed_from"] for r in execute_population(cfgs, outs)] == [[200], [200]]


def test_an_unreadable_pointer_beside_many_seed_folders_is_named_once(tmp_path, capsys):
    """`lcpo resume` of a folder of seeds, one at a time, said "skipping an unreadable population checkpoint"
    once per seed: the same fact, repeated. Now one line."""
    out = tmp_path / "runs"
    common = ["--trace", "wind-3", "--trace-length", "1000", "--checkpoint-every", "200", "--no-progress"]
    assert main(["run", "--agent", "a2c", "--seed", "0-2", "--steps", "400", "--no-batch", "--out", str(out),
                 *common]) == 0
    bad = out / ".population-a2c-00000000"
    bad.mkdir()
    (bad / "population.json").write_text('{"format": 1, "step": ')
    capsys.readouterr()
    assert main(["resume", str(out), "--steps", "600", "--no-batch", "--no-progress"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "skipping an unreadable population checkpoint" in line]
    assert len(lines) == 1 and str(bad) in lines[0] and lines[0].startswith(f"{out}: "), err
    for s in range(3):
        assert json.loads((out / f"a2c-s{s}" / "summary.json").read_text())["steps"] == 600


@pytest.mark.parametrize("seeds, message", [
    ("12", r"^seeds must be a sequence of integers .*got '12'"),  # was seeds 1 and 2
    ([0, 1.5], r"^seeds\[1\] must be an integer >= 0, got 1\.5"),  # was seed 1
    ([0, True], r"^seeds\[1\] must be an integer >= 0, got True"),
    ([0, -1], r"^seeds\[1\] must be an integer >= 0, got -1"),
    (3, r"^seeds must be a sequence of integers"),
])
def test_population_refuses_seeds_that_are_not_integers_in_one_line(seeds, message):
    with pytest.raises(ValueError, match=message) as info:
        Population("a2c", seeds=seeds, trace="wind-3", trace_length=1000)
    assert "\n" not in str(info.value)


def test_population_takes_numpy_integer_seeds():
    import numpy as np

    with Population("a2c", seeds=np.arange(2), trace="wind-3", trace_length=1000, hidden=[8]) as pop:
        assert pop.seeds == [0, 1] and all(type(s) is int for s in pop.seeds)


@pytest.mark.parametrize("agent", ["a2c", "lcpo", "prescient-a2c"])
def test_a_finished_population_leaves_no_cycle_holding_its_episode_rows(tmp_path, agent):
    """After execute_population returns (stopped, then resumed to the end), nothing keeps the seeds' episode rows
    alive without a garbage collection: a sweep worker's next population must not share the process with the
    last one's rows (about 420 MB resident a seed at the end of a 20M-step windy InvertedPendulum run). A
    prescient agent's offline training runs a loop of its own (Agent.learn), which held its agent until
    session 23."""
    import gc

    from lcpo.online.episodes import EpisodeRows

    over = {"hidden": [16], "train_steps": 300, "train_episode_steps": 100} if agent.startswith("prescient") else {}
    cfgs = [_cfg(agent, s, **({"overrides": over} if over else {})) for s in (0, 1)]
    outs = [tmp_path / f"s{s}" for s in (0, 1)]
    gc.collect()
    gc.disable()
    try:
        execute_population(cfgs, outs, stop_at=400)
        execute_population(cfgs, outs)
        alive = sum(isinstance(o, EpisodeRows) for o in gc.get_objects())
    finally:
        gc.enable()
    assert alive == 0
