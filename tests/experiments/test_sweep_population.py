"""A sweep groups runs that differ only in seed into population tasks (issue 26 item 5): the folders equal the
runs trained one at a time, and a stop request checkpoints the population, whose resume gives the same runs."""

import json

import pytest

from lcpo.experiments.config import RunSpec
from lcpo.experiments.runner import group_seeds, run_group, run_sweep


def _spec(seed, agent="a2c", steps=1200, **extra):
    config = {"env": "lcpo/WindyPendulum-v0", "agent": agent, "seed": seed, "steps": steps, "trace": "wind-3",
              "trace_length": 5000, "overrides": {"hidden": [16], "rollout_steps": 100},
              "checkpoint_every": 600, "diagnostics_every": 200, **extra}
    from lcpo.online.run import RunConfig

    config = RunConfig.from_dict(config).to_dict()
    return RunSpec(f"{agent}-s{seed}-{steps}", config)


def test_group_seeds_groups_only_runs_that_differ_in_seed_and_respects_the_size_limit():
    specs = [_spec(0), _spec(1), _spec(0, agent="lcpo"), _spec(2), _spec(3), _spec(1, agent="lcpo"),
             _spec(4, steps=600)]
    groups = group_seeds(specs, 3)
    assert [[s.run_id for s in g] for g in groups] == [
        ["a2c-s0-1200", "a2c-s1-1200", "a2c-s2-1200"], ["lcpo-s0-1200", "lcpo-s1-1200"], ["a2c-s3-1200"],
        ["a2c-s4-600"]]
    assert [len(g) for g in group_seeds(specs, 1)] == [1] * len(specs)
    with pytest.raises(ValueError, match="got 0"):
        group_seeds(specs, 0)


def _outputs(folder):
    return {n: (folder / n).read_text() for n in ("episodes.csv", "diagnostics.csv")}


def _stop_after(polls: int):
    """A stop request that turns true after ``polls`` polls (a sweep's SIGINT at a known step)."""
    calls = [0]

    def stop() -> bool:
        calls[0] += 1
        return calls[0] > polls

    return stop


def test_a_sweep_trains_seeds_as_one_population_with_the_folders_of_the_runs_alone(tmp_path):
    specs = [_spec(s) for s in range(3)]
    run_sweep(specs, tmp_path / "batched", workers=1, progress=False, write_store=False)
    run_sweep(specs, tmp_path / "alone", workers=1, progress=False, write_store=False, population=1)
    for spec in specs:
        a = tmp_path / "batched" / "runs" / spec.run_id
        b = tmp_path / "alone" / "runs" / spec.run_id
        assert _outputs(a) == _outputs(b)
        sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
        assert sa["lifelong_return"] == sb["lifelong_return"]
        assert sa["population"]["size"] == 3 and sb["population"] == {"size": 1, "seeds": [spec.config["seed"]]}


def test_a_stopped_population_task_checkpoints_and_resumes_to_the_same_runs(tmp_path):
    specs = [_spec(s) for s in range(2)]
    outs = [str(tmp_path / "runs" / s.run_id) for s in specs]
    calls = [0]

    def stop_soon():
        calls[0] += 1
        return calls[0] > 4  # polls at steps 0, 250, 500, 600 (a checkpoint), 850: stops between checkpoints

    first = run_group([dict(s.config) for s in specs], outs, should_stop=stop_soon)
    assert [r.get("interrupted_at") for r in first] == [850, 850]
    for o in outs:  # the population checkpointed where it stood
        assert json.loads((tmp_path / "runs" / o.split("/")[-1] / "checkpoint" / "latest.json").read_text())["step"] == 850
    resumed = run_group([dict(s.config) for s in specs], outs)
    alone = [run_group([dict(s.config)], [str(tmp_path / "alone" / s.run_id)])[0] for s in specs]
    assert [r["lifelong_return"] for r in resumed] == [r["lifelong_return"] for r in alone]
    for s in specs:
        assert _outputs(tmp_path / "runs" / s.run_id) == _outputs(tmp_path / "alone" / s.run_id)


@pytest.mark.parametrize("population", [2, 1])
def test_a_resumed_sweep_says_where_each_run_resumed(tmp_path, capfd, population):
    """The runs' one-line notes reach the sweep's standard error (from its worker processes), as `lcpo run`
    prints them: before, a sweep resumed, or started afresh, without a word."""
    specs = [_spec(s) for s in range(2)]
    outs = [str(tmp_path / "runs" / s.run_id) for s in specs]
    groups = [[dict(s.config) for s in specs]] if population == 2 else [[dict(s.config)] for s in specs]
    out_groups = [outs] if population == 2 else [[o] for o in outs]
    stopped = []
    for g, o in zip(groups, out_groups):
        stopped += [r["interrupted_at"] for r in run_group(g, o, should_stop=_stop_after(4))]
    first = capfd.readouterr().err
    assert "resuming" not in first and "nothing to resume" not in first  # new folders: no note
    run_sweep(specs, tmp_path, workers=1, progress=False, write_store=False, population=population)
    err = capfd.readouterr().err
    for o, step in zip(outs, stopped):
        assert 0 < step < 1200
        assert f"lcpo sweep: {o}: resuming from the checkpoint at step {step:,}\n" in err, err


def test_a_dask_sweep_says_once_where_each_run_resumed(tmp_path, capfd):
    """On the Dask backend each task's notes are events of the sweep's own topic, which the sweep writes once per
    note (``distributed.print`` printed each two to four times: on the worker, and again per client)."""
    pytest.importorskip("dask.distributed")
    specs = [_spec(s) for s in range(2)]
    outs = [str(tmp_path / "runs" / s.run_id) for s in specs]
    assert [r["interrupted_at"] for r in run_group([dict(s.config) for s in specs], outs,
                                                   should_stop=_stop_after(4))] == [850, 850]
    capfd.readouterr()
    out = run_sweep(specs, tmp_path, backend="dask", workers=1, progress=False, write_store=False)
    assert {o.status for o in out} == {"done"}
    err = capfd.readouterr().err
    for o in outs:
        assert err.count(f"{o}: resuming from the checkpoint at step 850") == 1, err
        assert f"lcpo sweep: {o}: resuming from the checkpoint at step 850\n" in err


def test_progress_counts_the_runs_of_a_running_population_not_its_task(tmp_path, monkeypatch):
    """The bar said "running=1" while a population of 3 seeds trained (it counted worker slots): now 3, and 0
    once they are done; a task of one run after it counts 1."""
    import lcpo.experiments.runner as runner

    seen = []

    class Recording(runner._Progress):
        def _post(self):
            seen.append(self.counts())
            super()._post()

    monkeypatch.setattr(runner, "_Progress", Recording)
    specs = [_spec(s, steps=400) for s in range(3)] + [_spec(0, agent="lcpo", steps=400)]
    run_sweep(specs, tmp_path, workers=1, progress=False, write_store=False, population=3)
    assert seen[0] == (0, 1, 0)  # before any task starts: estimated from the worker slots
    assert (0, 3, 0) in seen  # the population's 3 seeds running
    assert seen.index((0, 3, 0)) < seen.index((3, 0, 0)) < seen.index((3, 1, 0))  # then LCPO's one run
    assert seen[-1] == (4, 0, 0)


def test_progress_counts_start_and_finish_by_hand():
    from lcpo.experiments.runner import _Progress

    bar = _Progress(total=7, skipped=2, workers=2, enabled=False)
    assert bar.counts() == (2, 2, 0)  # estimated: two slots, five runs to go
    bar.started(4)
    assert bar.counts() == (2, 4, 0)
    bar.update(True)
    bar.update(False)
    assert bar.counts() == (3, 2, 1)
    bar.started(1)
    for ok in (True, True, True):
        bar.update(ok)
    assert bar.counts() == (6, 0, 1)
