"""A Gymnasium vector env given where one environment is needed is refused up front, in one line (issue 24
item 8): by ``make_env`` (``lcpo run --env``, sweeps), by every agent's constructor and by the online loop."""

from __future__ import annotations

import sys

import gymnasium as gym
import pytest

from lcpo.cli.main import main
from lcpo.envs.registration import make_env
from lcpo.online.loop import OnlineLoop

MODULE = '''
import gymnasium as gym

class ByoVec(gym.vector.SyncVectorEnv):
    def __init__(self, trace=None):
        super().__init__([lambda: gym.make("CartPole-v1")] * 2)

def make_vec(trace=None):
    return gym.make_vec("CartPole-v1", num_envs=3)

gym.register("ByoVec-v0", entry_point=make_vec)
'''


@pytest.fixture
def vec_module(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    (tmp_path / "byo_vec.py").write_text(MODULE)
    yield "byo_vec"
    sys.modules.pop("byo_vec", None)
    gym.registry.pop("ByoVec-v0", None)


@pytest.mark.parametrize("target", ["ByoVec", "make_vec", "ByoVec-v0"])
def test_make_env_refuses_a_vector_env_naming_it(vec_module, target):
    with pytest.raises(TypeError) as info:
        make_env(f"{vec_module}:{target}")
    message = str(info.value)
    assert f"'{vec_module}:{target}'" in message and "vector env" in message and "\n" not in message
    assert "--seed 0-N" in message and "docs/population.md" in message
    # with --seed 0-1 already given, the advice must say how a vector env is recognised
    assert "MODULE:CLASS of a gymnasium.vector.VectorEnv subclass" in message and "vector_entry_point" in message


def test_lcpo_run_refuses_a_vector_env_in_one_line(vec_module, capsys):
    rc = main(["run", "--no-progress", "--env", f"{vec_module}:ByoVec", "--agent", "a2c", "--steps", "200",
               "--out", "out"])
    err = capsys.readouterr().err
    # refused up front (a vector env is a population: one seed per sub-environment), before any run starts
    assert rc == 2 and err.startswith("lcpo run: error: environment 'byo_vec:ByoVec' is a ") and "vector env" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("name", ["a2c", "lcpo", "ppo", "ddqn", "sac", "prescient-trpo", "mbcd", "tabular-a2c"])
def test_agents_refuse_a_vector_env(name):
    from lcpo.agents import AGENTS

    vec = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    with pytest.raises(TypeError, match=f"given to {AGENTS[name].__name__} is a Gymnasium vector env "
                                             r"\(SyncVectorEnv, num_envs=2\)"):
        AGENTS[name](vec, seed=0)
    vec.close()


def test_online_loop_refuses_a_wrapped_vector_env():
    vec = gym.wrappers.vector.RecordEpisodeStatistics(gym.make_vec("CartPole-v1", num_envs=2))
    with pytest.raises(TypeError, match="online loop is a Gymnasium vector env"):
        OnlineLoop(vec, agent=None)
    from lcpo.envs.preflight import VectorEnvError

    assert issubclass(VectorEnvError, TypeError) and issubclass(VectorEnvError, ValueError)
