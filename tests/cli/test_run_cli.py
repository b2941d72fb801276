"""`lcpo run`: bad hyperparameters, agents, environment ids and arguments give clear errors, not tracebacks."""

from __future__ import annotations

import pytest

from lcpo.cli.main import build_parser, main
from lcpo.cli.run import _announce_offline_training, _check_known, parse_assignments
from lcpo.online.run import RunConfig


def _run(capsys, tmp_path, *argv):
    rc = main(["run", "--steps", "400", "--no-progress", "--checkpoint-every", "0", "--out", str(tmp_path / "runs"),
               *argv])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("assignment, fragments", [
    ("rollout_steps=1.5", ["'rollout_steps' must be an integer, got 1.5"]),
    ("max_kl=1e400", ["'max_kl' must be a finite number, got 1e400"]),
    ("rollout_steps=1e400", ["'rollout_steps' must be a finite number, got 1e400"]),
    ("max_kl=NaN", ["'max_kl' must be a finite number, got nan"]),
    ("hidden=[-1]", ["'hidden'", "[-1]", "--set hidden=[64,64]"]),
    ("hidden=64,64", ["'hidden'", "'64,64'", "--set hidden=[64,64]"]),
    ("hidden=(32,32)", ["'hidden'", "'(32,32)'", "--set hidden=[64,64]"]),
    ("gamma=1.5", ["'gamma' must be in (0, 1], got 1.5"]),
    ("cg_iters=0", ["'cg_iters' must be an integer >= 1, got 0"]),
])
def test_bad_set_value_is_a_clear_error_and_nothing_runs(capsys, tmp_path, assignment, fragments):
    rc, err = _run(capsys, tmp_path, "--agent", "trpo", "--set", assignment)
    assert rc == 2
    assert err.startswith("lcpo run: error: ") and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err
    assert not (tmp_path / "runs").exists()


def test_set_values_are_json_first():
    assert parse_assignments(["hidden=[64,64]", "gamma=0.9", "hidden2=64,64", "n=3"], "--set") == {
        "hidden": [64, 64], "gamma": 0.9, "hidden2": "64,64", "n": 3}


def test_a_set_value_whose_json_repeats_a_key_is_refused(capsys, tmp_path):
    """JSON alone keeps the last of two equal keys: `--set 'x={"a": 1, "a": 2}'` would read as {"a": 2}."""
    with pytest.raises(ValueError, match=r"""--set 'x=\{"a": 1, "b": \{"c": 2, "c": 3\}\}'.*duplicate key 'c'"""):
        parse_assignments(['x={"a": 1, "b": {"c": 2, "c": 3}}'], "--set")
    rc, err = _run(capsys, tmp_path, "--set", 'hidden={"a": 1, "a": 2}')
    assert rc == 2 and "duplicate key 'a'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_multi_agent_key_unknown_to_every_agent_is_an_error(capsys, tmp_path):
    rc, err = _run(capsys, tmp_path, "--agent", "ppo", "a2c", "--set", "nosuch=1")
    assert rc == 2 and "'nosuch'" in err and "ppo, a2c" in err
    assert not (tmp_path / "runs").exists()


def test_multi_agent_key_known_to_one_agent_is_accepted():
    _check_known(["ppo", "a2c"], {"clip": 0.3, "gamma": 0.9})  # clip: PPO only
    with pytest.raises(ValueError, match=r"\['nosuch', 'zz'\]"):
        _check_known(["ppo", "a2c"], {"clip": 0.3, "zz": 1, "nosuch": 2})


def test_multi_agent_configs_are_all_validated_before_the_first_run(capsys, tmp_path):
    # a2c does not know cg_iters and would run; trpo's cg_iters is invalid: nothing may run
    rc, err = _run(capsys, tmp_path, "--agent", "a2c", "trpo", "--set", "cg_iters=0")
    assert rc == 2 and "'cg_iters' must be an integer >= 1, got 0" in err
    assert not (tmp_path / "runs" / "a2c-s0").exists()


def test_help_documents_per_agent_keys():
    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["run"].format_help().split())
    assert "each gets only the keys it knows" in help_text


def test_unknown_env_lists_registered_ids(capsys, tmp_path):
    rc, err = _run(capsys, tmp_path, "--env", "nosuch")
    assert rc == 2 and "'nosuch'" in err and "lcpo/WindyPendulum-v0" in err and "[]" not in err


def test_close_env_id_is_suggested_once(capsys, tmp_path):
    rc, err = _run(capsys, tmp_path, "--env", "lcpo/WindyPendulm-v0")
    assert rc == 2
    suggestion = err.split("did you mean one of ", 1)[1].split("?", 1)[0]
    assert suggestion.count("'lcpo/WindyPendulum-v0'") == 1


def test_bad_env_arg_names_key_and_valid_kwargs_only(capsys, tmp_path):
    rc, err = _run(capsys, tmp_path, "--env-arg", "bogus=1")
    assert rc == 2 and "['bogus']" in err and "'continuing'" in err and "'trace'" in err
    assert "array(" not in err and len(err) < 400


@pytest.mark.parametrize("assignment, message", [
    # was "invalid literal for int() with base 10: 'abc'"
    ("time_limit=abc", "environment argument 'time_limit' must be an integer >= 1 or null (no time limit), got 'abc'"),
    # was "max_episode_steps must be >= 1 or None, got -5": the environment's internal name
    ("time_limit=-5", "environment argument 'time_limit' must be an integer >= 1 or null (no time limit), got -5"),
    ("time_limit=2.5", "environment argument 'time_limit' must be an integer >= 1 or null (no time limit), got 2.5"),
    ("time_limit=true", "environment argument 'time_limit' must be an integer >= 1 or null (no time limit), got true"),
    ("max_episode_steps=0",
     "environment argument 'max_episode_steps' must be an integer >= 1 or null (no time limit), got 0"),
    ("divisor=abc", "environment argument 'divisor' must be a finite number > 0, got 'abc'"),
    ("divisor=-1", "environment argument 'divisor' must be a finite number > 0, got -1"),  # was "ContextSpec: scale"
    ("bins=abc", "environment argument 'bins' must be an integer >= 2, got 'abc'"),
    ("bins=2.5", "environment argument 'bins' must be an integer >= 2, got 2.5"),  # was run with 2 bins
    ("continuing=maybe", "environment argument 'continuing' must be true or false, got 'maybe'"),  # was run
    # JSON reads 1e400 as an infinity: refused as what was written (was "got inf")
    ("time_limit=1e400", "environment argument 'time_limit' must be an integer >= 1 or null (no time limit), got 1e400"),
    ("time_limit=1e-400", "environment argument 'time_limit' must be an integer >= 1 or null (no time limit), "
                          "got 1e-400"),  # (json reads 0.0)
    ("time_limit=100000000000000000000",
     "environment argument 'time_limit' = 100000000000000000000 is beyond int64's range (at most 2**63 - 1)"),
    ("divisor=1e400", "environment argument 'divisor' must be a finite number > 0, got 1e400"),
    ("time_limit=[true,null]",
     "environment argument 'time_limit' must be an integer >= 1 or null (no time limit), got [true, null]"),
])
def test_a_bad_env_arg_value_is_one_line_naming_the_argument_and_nothing_runs(capsys, tmp_path, assignment, message):
    rc, err = _run(capsys, tmp_path, "--agent", "a2c", "--env-arg", assignment)
    assert rc == 2 and err == f"lcpo run: error: {message}\n"
    assert not (tmp_path / "runs").exists()


def test_a_trace_given_as_an_env_arg_is_refused_not_silently_replaced(capsys, tmp_path):
    """`--env-arg trace=wind-2` on a windy env ran on the default trace (ndbc-46002) without a word."""
    rc, err = _run(capsys, tmp_path, "--agent", "a2c", "--env-arg", "trace=wind-2")
    assert rc == 2 and err == ("lcpo run: error: environment argument 'trace' ('wind-2') would be replaced by the "
                               "run's trace (the default): give it as --trace (traces = [...] in a sweep file), not "
                               "as an environment argument\n")
    assert not (tmp_path / "runs").exists()
    from lcpo.envs.preflight import run_env_kwargs

    assert run_env_kwargs("lcpo/StragglerMitigation-v0", None, None, {"trace": "azure-llm"}) == {"trace": "azure-llm"}
    with pytest.raises(ValueError, match=r"would be replaced by the run's trace \(azure-llm\)"):
        run_env_kwargs("lcpo/StragglerMitigation-v0", "azure-llm", None, {"trace": "azure-llm"})


@pytest.mark.parametrize("assignment, message", [
    ("gamma=2", "hyperparameter 'gamma' must be in (0, 1], got 2"),  # as written (was the converted 2.0)
    # was a multi-line C++ stack trace from torch ("Overflow when unpacking long long")
    # was "Maximum allowed dimension exceeded" (numpy), or a 300-digit rollout
    ("rollout_steps=100000000000000000000",
     "hyperparameter 'rollout_steps' = 100000000000000000000 is beyond int64's range (at most 2**63 - 1)"),
    ("hidden=" + "[" * 3000 + "]" * 3000, "--set 'hidden': the JSON value is nested too deeply"),  # was a traceback
    ("hidden=[100000000000000000000]", "hyperparameter 'hidden' must be a JSON list of positive integers (at most "
                                       "65,536), e.g. --set hidden=[64,64]; got [100000000000000000000]"),
])
def test_a_bad_set_value_is_one_line_quoting_it_as_written(capsys, tmp_path, assignment, message):
    rc, err = _run(capsys, tmp_path, "--agent", "a2c", "--set", assignment)
    assert rc == 2 and err == f"lcpo run: error: {message}\n"
    assert not (tmp_path / "runs").exists()


def _cfg(agent, **overrides):
    return RunConfig(agent=agent, steps=10, overrides=overrides)


def test_prescient_announces_offline_training(capsys):
    _announce_offline_training(_cfg("prescient-a2c"))
    assert capsys.readouterr().err == ("prescient-a2c: training offline for 1,600,000 steps over the whole trace "
                                       "first (set train_steps to change)\n")
    _announce_offline_training(_cfg("prescient-trpo", train_steps=2500))
    assert "prescient-trpo: training offline for 2,500 steps" in capsys.readouterr().err
    _announce_offline_training(_cfg("prescient-a2c", train_steps=2500), seeds=3)  # once for a population
    assert capsys.readouterr().err == ("prescient-a2c: training offline for 2,500 steps for each of 3 seeds, one "
                                       "after the other, over the whole trace first (set train_steps to change)\n")


def test_no_announcement_without_offline_training(capsys):
    _announce_offline_training(_cfg("a2c"))
    _announce_offline_training(_cfg("prescient-a2c", train_steps=0))
    assert capsys.readouterr().err == ""


def test_prescient_run_prints_the_line_before_its_result(capsys, tmp_path):
    rc, err = _run(capsys, tmp_path, "--agent", "prescient-a2c", "--trace-length", "600", "--set",
                   "train_steps=300", "--steps", "20")
    assert rc == 0
    lines = err.splitlines()
    assert lines[0] == ("prescient-a2c: training offline for 300 steps over the whole trace first "
                        "(set train_steps to change)")
    assert lines[1].startswith("prescient-a2c seed 0: lifelong return")


@pytest.mark.parametrize("flag, value", [("--steps", "1e20"), ("--checkpoint-every", "9007199254740993")])
def test_a_step_count_beyond_2_to_the_53_is_refused(capsys, tmp_path, flag, value):
    """1e20 steps were accepted (stored in config.json, beyond int64) and the run went on for ever."""
    rc = main(["run", "--agent", "a2c", "--no-progress", "--out", str(tmp_path / "runs"), flag, value])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    given = int(float(value)) if "e" in value else int(value)
    assert "must be at most 2**53 = 9,007,199,254,740,992" in err and err.rstrip().endswith(f"got {given:,}")
    assert not (tmp_path / "runs").exists()
    assert RunConfig(steps=2**53).steps == 2**53  # the bound itself is a valid run length


@pytest.mark.parametrize("argv, prefix", [
    (["run", "--agent", "a2c", "--trace-length", "10000000000000", "--steps", "1000"], "lcpo run"),
    (["traces", "make", "wind-3", "--length", "10000000000000"], "lcpo traces"),
])
def test_an_array_larger_than_the_machine_is_a_one_line_error(capsys, tmp_path, argv, prefix):
    """A trace of 10**13 steps (72.8 TiB) ended in NumPy's _ArrayMemoryError traceback."""
    out = tmp_path / "out" / ("x.npy" if "traces" in argv else "runs")
    rc = main([*argv, "--out", str(out)] + (["--no-progress"] if prefix == "lcpo run" else []))
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"{prefix}: error: not enough memory: Unable to allocate ") and "TiB" in err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="trace_length must be at most 2\\*\\*53"):
        RunConfig(trace_length=2**53 + 1)


def test_a_tabular_agent_on_an_env_without_discrete_states_is_refused_before_any_run(capsys, tmp_path):
    """`--agent a2c tabular-a2c` ran a2c to the end, then failed: now nothing runs and nothing is written."""
    rc = main(["run", "--agent", "a2c", "tabular-a2c", "--steps", "400", "--trace", "wind-3", "--no-progress",
               "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert rc == 2 and err == ("lcpo run: error: agent tabular-a2c needs an environment with discrete states "
                               "(n_tabular_states and tabular_index(obs), as lcpo/TrapGrid-v0 declares), got "
                               "lcpo/WindyPendulum-v0\n")
    assert not (tmp_path / "runs").exists()
