"""The command line's own usability (issue 24 item 9): defaults in --help, usage errors in one line with a
pointer to --help, whole numbers in float notation (--steps 1e5), and a raw timestamped CSV given as a trace
pointed to `lcpo traces import csv`."""

from __future__ import annotations

import argparse
import re

import pytest

from lcpo.cli.argtypes import nonneg_int, positive_int
from lcpo.cli.main import build_parser, main


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_run_help_shows_the_defaults(capsys):
    text = _help(capsys, "run")
    for fragment in ("environment steps per run (default: 1000000)",
                     "(default: lcpo/WindyPendulum-v0)", "(default: lcpo)", "steps between checkpoints (0: none) "
                     "(default: 50000)", "(default: runs)"):
        assert fragment in text
    assert "(default: None)" not in text and "(default: False)" not in text
    assert text.count("(default:") >= 8  # said once per option, never twice
    assert "default: the bundled ndbc-46002" in text and "(default: ndbc" not in text


@pytest.mark.parametrize("argv", [["traces", "make", "--help"], ["sweep", "--help"], ["report", "--help"]])
def test_every_command_shows_its_defaults(capsys, argv):
    assert "(default: " in _help(capsys, *argv[:-1])


@pytest.mark.parametrize("argv, fragment, command", [
    (["run", "--steps", "abc"], "argument --steps: expected a positive integer, got 'abc'",
     "lcpo run"),
    (["run", "--stepz", "3"], "unrecognized arguments: --stepz 3", "lcpo run"),
    (["frob"], "invalid choice: 'frob'", "lcpo"),
    (["traces", "import", "csv"], "the following arguments are required", "lcpo traces import"),
])
def test_usage_errors_are_one_line_with_a_pointer_to_help(capsys, argv, fragment, command):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert len(err.splitlines()) == 1 and "usage:" not in err
    assert err.startswith(f"{command}: error: ") and fragment in err and f"(see `{command} --help`)" in err


@pytest.mark.parametrize("text, value", [("100000", 100_000), ("100_000", 100_000), ("1e5", 100_000),
                                         ("2.5e6", 2_500_000), ("100000.0", 100_000), ("1E3", 1000)])
def test_whole_numbers_in_float_notation_are_counts(text, value):
    from lcpo.cli.argtypes import parse_count

    assert positive_int(text) == value and nonneg_int(text) == value and parse_count(text) == value
    args = build_parser().parse_args(["run", "--steps", text, "--checkpoint-every", text])
    assert args.steps == value and args.checkpoint_every == value


@pytest.mark.parametrize("text, why", [("1.5", "not a whole number; 1e5 or 2.5e6 are"),
                                       ("2.5e-1", "not a whole number; 1e5 or 2.5e6 are"),
                                       ("0", ""), ("-1e3", ""), ("inf", ""), ("nan", ""), ("ten", "")])
def test_other_numbers_are_refused_naming_them(text, why):
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f"got {text!r}{f' ({why})' if why else ''}")):
        positive_int(text)


def test_sweep_steps_in_float_notation(tmp_path):
    from lcpo.experiments.config import load_config

    path = tmp_path / "s.toml"
    path.write_text('name = "t"\nsteps = 2e3\nseeds = 1\nenvs = ["lcpo/WindyPendulum-v0"]\ntraces = ["wind-1"]\n'
                    'agents = ["a2c"]\n')
    assert load_config(path, executor="lcpo_fake_run").steps == 2000
    path.write_text(path.read_text().replace("2e3", "2.5"))
    with pytest.raises(ValueError, match="steps: expected an integer, got 2.5"):
        load_config(path, executor="lcpo_fake_run")


@pytest.mark.parametrize("content", ["time,wind\n2024-01-01T00:00:00Z,1.5\n2024-01-01T00:10:00Z,2\n",
                                     "2024-01-01 00:00,1.5\n2024-01-01 00:10,2\n",
                                     "timestamp,wind\n1700000000,1.5\n1700000600,2\n"])
def test_a_timestamped_csv_as_trace_points_to_traces_import(capsys, tmp_path, content):
    raw = tmp_path / "raw.csv"
    raw.write_text(content)
    rc = main(["run", "--no-progress", "--trace", str(raw), "--steps", "10", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1
    assert f"lcpo traces import csv {raw} --out trace.npy" in err


def test_a_column_named_time_that_does_not_increase_is_a_context(tmp_path):
    """Only a first column named like a time axis *and* increasing like one is taken for timestamps."""
    from lcpo.contexts import load_trace

    path = tmp_path / "ok.csv"
    path.write_text("time,load\n3,1\n1,2\n2,4\n")
    assert load_trace(path).values[:, 0].tolist() == [3.0, 1.0, 2.0]
