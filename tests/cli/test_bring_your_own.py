"""Your own environment from the CLI and sweeps (docs/bring-your-own.md): MODULE:ID and MODULE:CLASS, the
continuing default, errors that say what is missing, and the docs' example environment run as the docs run it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from lcpo.cli.main import main
from lcpo.envs.registration import make_env
from lcpo.experiments.config import ConfigError, expand, parse_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "bring-your-own.md"


def doc_module() -> str:
    """The example environment module, as the docs print it."""
    text = DOC.read_text()
    match = re.search(r"<!-- gravity_cartpole\.py[^>]*-->\n```python\n(.*?)```", text, re.S)
    assert match, "docs/bring-your-own.md lost its gravity_cartpole.py block"
    return match.group(1)


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    """A temporary folder as the current directory, with sys.path and sys.modules restored afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("byo_"):
            del sys.modules[name]


def write_module(folder: Path, name: str, source: str) -> None:
    (folder / f"{name}.py").write_text(source.replace('gym.register("GravityCartPole-v0"',
                                                      f'gym.register("{name}-v0"'))


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["run", "--no-progress", *argv])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_docs_example_trains_resumes_and_reports(user_folder, capsys):
    write_module(user_folder, "byo_gravity", doc_module())
    args = ["--env", "byo_gravity:byo_gravity-v0", "--agent", "lcpo", "--checkpoint-every", "300", "--out", "runs"]
    rc, out, err = run(capsys, *args, "--steps", "600")
    assert rc == 0, err
    summary = json.loads((user_folder / "runs" / "lcpo-s0" / "summary.json").read_text())
    assert summary["trace"] == {"name": "ndbc-46002", "length": 575_501, "unit": "steps"}
    assert summary["config"]["reset"] == "end" and summary["return_unit"] == "episode"
    assert "does not declare" not in err  # the example declares its kind
    rc, out, err = run(capsys, *args, "--steps", "900", "--resume")
    assert rc == 0 and "extending the finished run from step 600 to 900" in err
    resumed = json.loads((user_folder / "runs" / "lcpo-s0" / "summary.json").read_text())
    rc, _, err = run(capsys, *args[:-1], "straight", "--steps", "900")
    assert rc == 0, err
    straight = json.loads((user_folder / "straight" / "lcpo-s0" / "summary.json").read_text())
    assert resumed["lifelong_return"] == straight["lifelong_return"] and resumed["episodes"] == straight["episodes"]
    assert main(["report", "runs", "--out", "report"]) == 0
    md = (user_folder / "report" / "report.md").read_text()
    assert "### byo_gravity:byo_gravity-v0" in md and "| ndbc-46002 |" in md
    assert list((user_folder / "report").glob("timeseries_byo_gravity-byo_gravity-v0_ndbc-46002.png"))


def test_module_class_entry_point_and_trace_as_context_trace(user_folder, capsys):
    write_module(user_folder, "byo_cls", doc_module())
    env = make_env("byo_cls:GravityCartPole", trace="zero")
    assert env.unwrapped.trace.name == "zero" and env.unwrapped.context_spec.names == ("gravity_z",)
    rc, _, err = run(capsys, "--env", "byo_cls:GravityCartPole", "--agent", "a2c", "--steps", "300",
                     "--trace", "wind-3", "--trace-length", "1000", "--checkpoint-every", "0", "--out", "r")
    assert rc == 0, err
    summary = json.loads((user_folder / "r" / "a2c-s0" / "summary.json").read_text())
    assert summary["trace"] == {"name": "wind-3", "length": 1000, "unit": "steps"}


UNDECLARED = '''
import gymnasium as gym
import numpy as np


class Plain(gym.Env):
    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.n = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.n += 1
        return np.zeros(2, np.float32), 1.0, False, self.n >= 10, {}
'''


def test_undeclared_environment_is_episodic_with_one_notice(user_folder, capsys):
    write_module(user_folder, "byo_plain", UNDECLARED)
    rc, _, err = run(capsys, "--env", "byo_plain:Plain", "--agent", "a2c", "--steps", "100",
                     "--checkpoint-every", "0", "--out", "r")
    assert rc == 0, err
    notices = [line for line in err.splitlines() if "does not declare whether it is episodic" in line]
    assert len(notices) == 1 and "treating it as episodic" in notices[0]
    summary = json.loads((user_folder / "r" / "a2c-s0" / "summary.json").read_text())
    assert summary["config"]["reset"] == "end" and summary["episodes"] == 10 and summary["lifelong_return"] == 10


@pytest.mark.parametrize("env, argv, fragments", [
    ("byo_missing_mod:Env-v0", [], ["cannot import module 'byo_missing_mod'", "PYTHONPATH", "pip install -e"]),
    ("byo_errs:Nope-v0", [], ["registers no environment id 'Nope-v0'", "gymnasium.register(id='Nope-v0'",
                              "environment classes in it: ['Plain']"]),
    ("byo_errs:Plain", ["--agent", "lcpo"], ["declares no context", "ContextSpec(indices=", "info['context']",
                                             "bring-your-own.md"]),
    ("byo_errs:Plain", ["--agent", "a2c"], ["cannot be checkpointed", "get_state()", "--checkpoint-every 0"]),
])
def test_errors_name_what_is_missing_and_how_to_add_it(user_folder, capsys, env, argv, fragments):
    write_module(user_folder, "byo_errs", UNDECLARED)
    rc, _, err = run(capsys, "--env", env, "--steps", "100", "--out", "r", *argv)
    assert rc == 2 and err.count("lcpo run: error:") == 1 and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, fragment
    assert not (user_folder / "r").exists()


def test_continuing_environment_defaults_to_never_and_scores_windows(tmp_path, capsys):
    # ContinuingChain: reward 1 every step, never ends: each 200-step window returns exactly 200
    rc, _, err = run(capsys, "--env", "lcpo/ContinuingChain-v0", "--agent", "a2c", "--steps", "1000",
                     "--checkpoint-every", "0", "--out", str(tmp_path / "r"))
    assert rc == 0, err
    summary = json.loads((tmp_path / "r" / "a2c-s0" / "summary.json").read_text())
    assert summary["config"]["reset"] == "never" and summary["return_unit"] == "200-step window"
    assert summary["episodes"] == 5 and summary["lifelong_return"] == 200.0
    assert "over 5 200-step windows" in err
    rc, _, err = run(capsys, "--env", "lcpo/ContinuingChain-v0", "--agent", "a2c", "--steps", "1000",
                     "--checkpoint-every", "0", "--reset", "end", "--out", str(tmp_path / "e"))
    assert rc == 0 and "is a continuing task" in err and "over 0 episodes" in err


def _sweep(**kw):
    d = {"name": "t", "steps": 400, "seeds": 1, "envs": ["lcpo/WindyPendulum-v0"], "traces": ["zero"],
         "agents": ["a2c"], "checkpoint_every": 200}
    d.update(kw)
    return d


def test_sweep_reset_defaults_follow_each_environment():
    cfg = parse_config(_sweep(envs=["lcpo/WindyPendulum-v0", "lcpo/ContinuingChain-v0"]))
    resets = {s.config["env"]: s.config["reset"] for s in expand(cfg)}
    assert resets == {"lcpo/WindyPendulum-v0": "end", "lcpo/ContinuingChain-v0": "never"}
    given = expand(parse_config(_sweep(envs=["lcpo/ContinuingChain-v0"], reset="every:50")))
    assert {s.config["reset"] for s in given} == {"every:50"}


def test_sweep_loads_a_user_environment_and_validates_it(user_folder):
    write_module(user_folder, "byo_sweep", doc_module())
    specs = expand(parse_config(_sweep(envs=["byo_sweep:byo_sweep-v0"], traces=["ndbc-46002"])))
    assert specs[0].config["reset"] == "end" and specs[0].run_id.startswith("byo_sweep-byo_sweep-v0_ndbc-46002")
    with pytest.raises(ConfigError, match=r"envs\[0\].*cannot import module 'byo_nowhere'"):
        parse_config(_sweep(envs=["byo_nowhere:X-v0"]))
    write_module(user_folder, "byo_plain2", UNDECLARED)
    notices: list[str] = []
    with pytest.raises(ConfigError, match="cannot be checkpointed"):
        expand(parse_config(_sweep(envs=["byo_plain2:Plain"])))
    expand(parse_config(_sweep(envs=["byo_plain2:Plain"], checkpoint_every=0)), notices=notices)
    assert any("does not declare whether it is episodic" in n for n in notices)
