"""An ``--out`` that cannot be written (issue 24 item 3): every command that writes files refuses it before any
work with one line on stderr naming the path, exits 2, and writes nothing (lcpo.persistence.outputs)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from lcpo.cli.main import main
from lcpo.persistence.outputs import OutputError, check_output_dir, check_output_file

SWEEP = """name = "t"
envs = ["lcpo/WindyPendulum-v0"]
traces = ["wind-1"]
trace_length = 400
agents = ["a2c"]
seeds = 1
steps = 200
checkpoint_every = 100
"""

RAW_CSV = "time,wind_x\n2024-01-01T00:00:00,1.0\n2024-01-01T00:10:00,2.0\n2024-01-01T00:20:00,1.5\n"


@pytest.fixture(scope="module")
def finished_runs(tmp_path_factory):
    """An `lcpo run --out` folder with one finished run (the input of `lcpo report`)."""
    out = tmp_path_factory.mktemp("runs") / "runs"
    assert main(["run", "--no-progress", "--agent", "a2c", "--steps", "200", "--trace", "wind-1", "--trace-length",
                 "400", "--checkpoint-every", "0", "--out", str(out)]) == 0
    return out


def _bad_outputs(tmp_path: Path) -> list[tuple[str, Path]]:
    """Output locations nobody can write: under a regular file (fails for root too), a read-only folder (when
    not root: root ignores permission bits), a file system that takes no new files (/proc)."""
    (tmp_path / "notes.txt").write_text("keep me\n")
    bad = [("under-a-file", tmp_path / "notes.txt" / "out")]
    if os.geteuid() != 0:
        ro = tmp_path / "readonly"
        ro.mkdir()
        ro.chmod(0o555)
        bad.append(("read-only", ro / "out"))
    if Path("/proc/self").is_dir():
        bad.append(("proc", Path("/proc") / "out"))
    return bad


def _commands(tmp_path: Path, out: Path, runs: Path) -> dict[str, list[str]]:
    (tmp_path / "sweep.toml").write_text(SWEEP)
    (tmp_path / "raw.csv").write_text(RAW_CSV)
    return {
        "sweep": ["sweep", str(tmp_path / "sweep.toml"), "--out", str(out), "--no-progress"],
        "report": ["report", str(runs), "--out", str(out)],
        "traces make": ["traces", "make", "wind-1", "--length", "100", "--out", str(out.with_suffix(".npy"))],
        "traces import": ["traces", "import", "csv", str(tmp_path / "raw.csv"), "--out",
                          str(out.with_suffix(".csv"))],
        "traces plot": ["traces", "plot", "wind-1", "--length", "100", "--out", str(out.with_suffix(".png"))],
        "run": ["run", "--no-progress", "--agent", "a2c", "--steps", "200", "--trace", "wind-1", "--trace-length",
                "400", "--out", str(out)],
        "figure": ["figure", "gridworld", "--scale", "0.01", "--seeds", "1", "--out", str(out), "--no-progress"],
    }


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("command", ["sweep", "report", "traces make", "traces import", "traces plot", "run",
                                     "figure"])
def test_unwritable_out_is_one_line_naming_the_path_exit_2_nothing_written(tmp_path, capsys, finished_runs,
                                                                           command):
    runs_before = _tree(finished_runs)
    for kind, out in _bad_outputs(tmp_path):
        argv = _commands(tmp_path, out, finished_runs)[command]
        given = argv[argv.index("--out") + 1]
        before = _tree(tmp_path)
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2, (kind, err)
        assert err.count("\n") == 1 and "Traceback" not in err, (kind, err)
        assert given in err, (kind, err)  # names the path as the user gave it
        assert _tree(tmp_path) == before, kind  # nothing written (notes.txt untouched, no new file or folder)
        assert not Path(given).exists()
    assert _tree(finished_runs) == runs_before


def test_checks_name_the_path_and_the_folder_at_fault(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("x")
    with pytest.raises(OutputError, match=re.escape(f"--out {f} is an existing file, not a folder")):
        check_output_dir(f)
    with pytest.raises(OutputError, match=re.escape(f"--out {f / 'a' / 'b'}: {f} is a file, not a folder")):
        check_output_dir(f / "a" / "b", create=True)
    with pytest.raises(OutputError, match=re.escape(f"report {tmp_path} is a folder; give a file name")):
        check_output_file(tmp_path, what="report")
    with pytest.raises(OutputError, match=f"folder {tmp_path / 'missing'} does not exist"):
        check_output_file(tmp_path / "missing" / "t.npy")
    made = check_output_dir(tmp_path / "new" / "deeper", create=True)
    assert made.is_dir() and sorted(p.name for p in tmp_path.iterdir()) == ["new", "notes.txt"]  # probe removed
    assert check_output_file(tmp_path / "more" / "t.npy", create_parent=True) == tmp_path / "more" / "t.npy"
    # checked now, created later: nothing made by the check
    assert check_output_file(tmp_path / "later" / "t.npy", missing_parent_ok=True) == tmp_path / "later" / "t.npy"
    assert not (tmp_path / "later").exists()
    with pytest.raises(OutputError, match=re.escape(f"{f}")):
        check_output_file(f / "a" / "t.npy", missing_parent_ok=True)


@pytest.mark.skipif(not (Path("/proc/self").is_dir() and os.access("/proc", os.W_OK | os.X_OK)),
                    reason="needs procfs that the permission check lets through (root)")
def test_a_folder_whose_file_system_refuses_new_files_is_named_as_such():
    """/proc exists, yet creating a file in it fails with ENOENT: the message said "No such file or directory"."""
    with pytest.raises(OutputError) as e:
        check_output_dir(Path("/proc/lcpo-out"), "--out")
    assert str(e.value) == "--out /proc/lcpo-out: cannot write in /proc: its file system does not accept new files"
