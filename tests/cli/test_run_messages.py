"""`lcpo run` messages a new user relies on: options that would be ignored are refused, the lifelong-return line
says what it averages, Ctrl-C is one line, and a bug in the user's own environment keeps its traceback."""

from __future__ import annotations

import json
import sys

import pytest

from lcpo.cli.main import main

_BUGGY_ENV = '''
import gymnasium as gym
import numpy as np


class Buggy(gym.Env):
    metadata = {"render_modes": [], "continuing": False}

    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        if self.t == 5:
            float("not a number")  # the user's bug: ValueError raised in their own file
        return np.zeros(2, np.float32), 1.0, False, self.t % 10 == 0, {}
'''


def _run(capsys, tmp_path, *argv):
    rc = main(["run", "--no-progress", "--checkpoint-every", "0", "--out", str(tmp_path / "runs"), *argv])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("argv, fragment", [
    (["--env", "lcpo/StragglerMitigation-v0", "--agent", "a2c"], "has no effect on lcpo/StragglerMitigation-v0"),
    (["--env", "CartPole-v1", "--agent", "a2c"], "has no effect without --trace"),
])
def test_trace_length_that_would_be_ignored_is_refused(capsys, tmp_path, argv, fragment):
    rc, err = _run(capsys, tmp_path, *argv, "--steps", "50", "--trace-length", "2000")
    assert rc == 2, err
    assert err.startswith("lcpo run: error: --trace-length 2000 ") and fragment in err
    assert not (tmp_path / "runs").exists()


def test_trace_length_of_a_user_env_given_a_trace_reaches_it(capsys, tmp_path):
    rc, err = _run(capsys, tmp_path, "--env", "CartPole-v1", "--agent", "a2c", "--trace", "wind-3",
                   "--trace-length", "700", "--steps", "50")
    # CartPole takes no trace argument: the trace (fitted to 700 steps) is passed, so the run is refused by
    # the environment's keyword check, never silently run without it
    assert rc == 2 and "'trace'" in err, err


def test_lifelong_return_line_counts_only_episodes_after_the_warmup(capsys, tmp_path):
    # 200-step episodes end at steps 200, 400, 600; a 399-step warm-up leaves the last two in the mean
    rc, err = _run(capsys, tmp_path, "--agent", "a2c", "--trace", "wind-3", "--trace-length", "1000",
                   "--steps", "600", "--warmup", "399")
    assert rc == 0, err
    summary = json.loads((tmp_path / "runs" / "a2c-s0" / "summary.json").read_text())
    assert summary["episodes"] == 3 and summary["scored_episodes"] == 2
    rows = (tmp_path / "runs" / "a2c-s0" / "episodes.csv").read_text().splitlines()[1:]
    returns = [float(r.split(",")[2]) for r in rows]
    assert summary["lifelong_return"] == pytest.approx(sum(returns[1:]) / 2, rel=1e-12)
    assert "over 2 of 3 episodes (those ending after the 399-step warm-up)" in err


def test_lifelong_return_line_without_warmup_counts_every_episode(capsys, tmp_path):
    rc, err = _run(capsys, tmp_path, "--agent", "a2c", "--trace", "wind-3", "--trace-length", "1000",
                   "--steps", "400")
    assert rc == 0, err
    assert "lifelong return" in err and "over 2 episodes," in err and "warm-up" not in err


def test_ctrl_c_is_one_line_and_exit_status_130(capsys, tmp_path, monkeypatch):
    import lcpo.online.run

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(lcpo.online.run, "execute", interrupted)
    rc, err = _run(capsys, tmp_path, "--agent", "a2c", "--trace", "wind-3", "--trace-length", "1000",
                   "--steps", "400")
    assert rc == 130
    assert err.startswith("lcpo run: interrupted") and len(err.strip().splitlines()) == 1
    assert f"`lcpo resume {tmp_path / 'runs'}`" in err  # the command's own folder, not a placeholder
    assert "lcpo sweep" not in err  # a sweep's way back does not apply to `lcpo run`


def test_bug_in_the_users_environment_keeps_its_traceback(capsys, tmp_path, monkeypatch):
    (tmp_path / "review_buggy_env.py").write_text(_BUGGY_ENV)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.delitem(sys.modules, "review_buggy_env", raising=False)
    try:
        with pytest.raises(ValueError, match="could not convert string to float") as info:
            _run(capsys, tmp_path, "--env", "review_buggy_env:Buggy", "--agent", "a2c", "--steps", "50")
        assert any(entry.path.name == "review_buggy_env.py" for entry in info.traceback)
    finally:
        sys.modules.pop("review_buggy_env", None)


def test_lcpo_own_bad_input_errors_stay_one_line(capsys, tmp_path):
    rc, err = _run(capsys, tmp_path, "--agent", "a2c", "--set", "gamma=2", "--steps", "50")
    assert rc == 2 and err.startswith("lcpo run: error: ") and "Traceback" not in err


@pytest.mark.parametrize("seeds, named", [(["0-999", "5"], "seed 5 is given twice (0-999 5)"),
                                          (["0-9000", "9001-10000"], "seed '9001-10000' names 10,001 seeds")])
def test_seed_errors_across_words_quote_the_words_as_typed(capsys, tmp_path, seeds, named):
    """`--seed 0-999 5` said "seed 5 is given twice (0 1 2 ... 999 5)": a 3,900-character line listing every seed
    of the range, and `--seed 0-9000 9001-10000` named the word '10000', which the user never typed."""
    rc, err = _run(capsys, tmp_path, "--agent", "a2c", "--steps", "50", "--seed", *seeds)
    assert rc == 2 and named in err and len(err.strip().splitlines()) == 1 and len(err) < 200, err
    assert not (tmp_path / "runs").exists()


def test_an_agent_given_twice_is_named_before_anything_runs(capsys, tmp_path):
    rc, err = _run(capsys, tmp_path, "--agent", "a2c", "lcpo", "a2c", "--steps", "400")
    assert rc == 2 and err.strip() == ("lcpo run: error: --agent 'a2c' is given twice (a2c lcpo a2c): each agent runs "
                                       "once per seed")
    assert not (tmp_path / "runs").exists()


def test_a_population_line_only_for_a_population_that_ran(capsys, tmp_path):
    """Resuming seeds that had all finished printed "population of 4 seeds, N environment steps/s in all", the
    figure of a population that ran before (and of another size): nothing ran."""
    argv = ("--agent", "a2c", "--trace", "wind-3", "--trace-length", "1000", "--steps", "400", "--seed", "0-1")
    rc, err = _run(capsys, tmp_path, *argv)
    assert rc == 0 and "a2c: population of 2 seeds" in err, err
    rc, err = _run(capsys, tmp_path, *argv, "--resume")
    assert rc == 0 and "finished (400 steps); nothing to run" in err, err
    assert "population of" not in err, err
