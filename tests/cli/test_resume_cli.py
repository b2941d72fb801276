"""`lcpo resume FOLDER`: continue or extend runs from their recorded configuration, no options repeated."""

import json

from lcpo.cli.main import main
from summaries import comparable

COMMON = ["--trace", "wind-3", "--trace-length", "4000", "--set", "reservoir_size=500", "--checkpoint-every", "300",
          "--no-progress"]


def _stable(summary: dict) -> dict:
    """The summary without what differs between identical runs (wall time, speed, code record, resume history)."""
    return comparable(summary, "resumed_from", "versions")


def _summary(folder) -> dict:
    return json.loads((folder / "summary.json").read_text())


def test_resume_extends_every_run_of_an_out_folder_like_an_uninterrupted_run(tmp_path, capsys):
    short, full = tmp_path / "short", tmp_path / "full"
    assert main(["run", "--agent", "lcpo", "a2c", "--steps", "600", "--out", str(short), *COMMON]) == 0
    assert main(["run", "--agent", "lcpo", "a2c", "--steps", "1200", "--out", str(full), *COMMON]) == 0
    capsys.readouterr()
    assert main(["resume", str(short), "--steps", "1200", "--no-progress"]) == 0
    out = capsys.readouterr()
    assert "extending the finished run from step 600 to 1,200" in out.err
    for run in ("lcpo-s0", "a2c-s0"):
        a, b = _summary(short / run), _summary(full / run)
        assert a["steps"] == 1200 and a["resumed_from"] == [600]
        assert _stable(a) == _stable(b)
        assert run.split("-")[0] in out.out


def test_resume_of_one_run_folder_and_of_a_finished_run_changes_nothing(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["run", "--steps", "600", "--out", str(out), *COMMON]) == 0
    before = (out / "lcpo-s0" / "summary.json").read_text()
    assert main(["resume", str(out / "lcpo-s0"), "--no-progress"]) == 0
    assert (out / "lcpo-s0" / "summary.json").read_text() == before
    assert "lifelong return" in capsys.readouterr().out


def test_resume_refuses_fewer_steps_and_names_bad_folders(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["run", "--steps", "600", "--out", str(out), *COMMON]) == 0
    capsys.readouterr()
    assert main(["resume", str(out), "--steps", "300", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "a run cannot be shortened (--steps 300)" in err
    assert "--out" not in err.replace("lcpo run --out DIR", "")  # lcpo resume has no --out to suggest
    assert "start a new run with lcpo run --out DIR" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["resume", str(empty)]) == 2
    assert f"{empty} holds no run" in capsys.readouterr().err
    assert main(["resume", str(tmp_path / "missing")]) == 2
    assert "missing: no such folder" in capsys.readouterr().err
    (out / "lcpo-s0" / "config.json").write_text("{not json")
    assert main(["resume", str(out)]) == 2
    err = capsys.readouterr().err
    assert "config.json is not valid JSON" in err
