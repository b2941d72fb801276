"""The `traces` command: list, make, plot."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lcpo.cli import traces as cli
from lcpo.contexts import TRACE_NAMES, load_trace, resolve_trace, save_trace

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_list_prints_every_trace_and_straggler_workload_with_description(capsys):
    from lcpo.envs.straggler.workloads import WORKLOAD_NAMES

    assert cli.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("context traces") and lines[len(TRACE_NAMES) + 1].startswith("straggler workloads")
    assert len(lines) == len(TRACE_NAMES) + len(WORKLOAD_NAMES) + 2
    for line, (name, description) in zip(lines[1:], TRACE_NAMES.items()):
        assert line.split()[0] == name and line.endswith(description)
    assert [line.split()[0] for line in lines[len(TRACE_NAMES) + 2:]] == list(WORKLOAD_NAMES)


@pytest.mark.parametrize("suffix", [".npy", ".csv"])
def test_make_writes_the_resolved_trace(tmp_path, capsys, suffix):
    out = tmp_path / f"w3{suffix}"
    assert cli.main(["make", "wind-3", "--length", "2000", "--seed", "5", "--out", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    loaded = load_trace(out)
    np.testing.assert_array_equal(loaded.values, resolve_trace("wind-3", length=2000, seed=5).values)
    assert loaded.name == "wind-3" and loaded.metadata["seed"] == 5
    assert (tmp_path / f"w3{suffix}.json").exists()


def test_make_and_plot_create_missing_folders_once_the_input_is_good(tmp_path, capsys):
    """As `lcpo run --out a/b/c` creates its folder; a refused name creates nothing. The sidecar is named with
    its folder."""
    out = tmp_path / "tr" / "deeper" / "w2.npy"
    assert cli.main(["make", "wnd-2", "--out", str(out)]) == 2
    assert not (tmp_path / "tr").exists()
    capsys.readouterr()
    assert cli.main(["make", "wind-2", "--length", "500", "--out", str(out)]) == 0
    assert capsys.readouterr().out.endswith(f"and {out}.json\n")
    assert out.is_file() and Path(f"{out}.json").is_file()
    png = tmp_path / "figs" / "w2.png"
    assert cli.main(["plot", "wind-2", "--length", "500", "--out", str(png)]) == 0
    assert png.is_file()


@pytest.mark.parametrize("argv, fragment", [
    (["make", "wind-3", "--length", "100", "--out", "missing/x"], "unknown trace file extension ''"),
    (["plot", "wind-3", "--length", "100", "--out", "missing/a.xyz"], "got '.xyz'"),
    (["plot", "wind-3", "--length", "100", "--out", "missing/a"], "got 'no extension'"),
])
def test_an_out_name_of_the_wrong_kind_is_refused_before_any_folder_is_made(tmp_path, capsys, monkeypatch, argv,
                                                                          fragment):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"--out {argv[-1]}" in err and fragment in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "missing").exists()


def test_make_unknown_name_fails_with_message(tmp_path, capsys):
    assert cli.main(["make", "wnd-2", "--out", str(tmp_path / "x.npy")]) == 2
    err = capsys.readouterr().err
    assert "unknown trace name 'wnd-2'" in err and "wind-2" in err
    assert not (tmp_path / "x.npy").exists()


@pytest.mark.parametrize("argv", [["make", "wind-1", "--length", "0", "--out", "x.npy"],
                                  ["make", "wind-1", "--length", "ten", "--out", "x.npy"],
                                  ["make", "wind-1"],
                                  ["plot", "wind-1"],
                                  []])
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2


def test_plot_names_and_files(tmp_path, capsys):
    path = save_trace(resolve_trace("wind-2", length=300), tmp_path / "w2.csv")
    out = tmp_path / "plot.png"
    assert cli.main(["plot", "wind-4", str(path), "--length", "30000", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert "wrote" in capsys.readouterr().out


def test_envelope_keeps_extremes():
    series = np.zeros(100_000)
    series[12_345] = 7.0
    series[99_999] = -3.0
    steps, low, high = cli._envelope(series, 1000)
    assert len(steps) == 1000 and steps[0] == 0
    assert high.max() == 7.0 and low.min() == -3.0


def test_add_parser_integrates_into_a_main_parser(capsys):
    parser = argparse.ArgumentParser(prog="lcpo")
    cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["traces", "list"])
    assert args.command == "traces" and args.traces_command == "list"
    assert args.func(args) == 0
    assert "ndbc-46002" in capsys.readouterr().out


def test_module_entry_point():
    result = subprocess.run([sys.executable, "-m", "lcpo.cli.traces", "list"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "wind-1" in result.stdout


@pytest.mark.parametrize("kind", ["csv", "ndbc"])
def test_import_refuses_to_overwrite_its_source_file(tmp_path, capsys, monkeypatch, kind):
    monkeypatch.chdir(tmp_path)
    if kind == "csv":
        source = tmp_path / "load.csv"
        text = "time,load\n2024-03-01T00:00:00Z,1\n2024-03-01T00:01:00Z,2\n2024-03-01T00:02:00Z,4\n"
        outs = ["load.csv", str(source), "./load.csv"]
    else:  # an NDBC file named like a trace file, and a --out whose sidecar would be the source
        source = tmp_path / "b.npy.json"
        text = ("#YY  MM DD hh mm WDIR WSPD\n#yr  mo dy hr mn degT m/s\n"
                "2016 01 01 00 00  90  5.0\n2016 01 01 00 10 180 10.0\n")
        outs = ["b.npy"]
    source.write_text(text)
    for out in outs:
        assert cli.main(["import", kind, source.name, "--out", out]) == 2
        err = capsys.readouterr().err
        assert "would overwrite the source file" in err and source.name in err
        assert source.read_text() == text  # the user's raw data is intact
    assert cli.main(["import", kind, source.name, "--out", "fine.npy"]) == 0
    assert (tmp_path / "fine.npy").is_file() and source.read_text() == text
