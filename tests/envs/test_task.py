"""Episodic or continuing: each environment declares it once (metadata["continuing"]); defaults follow it."""

from __future__ import annotations

import gymnasium as gym
import pytest

from lcpo.envs import make_env
from lcpo.envs.registration import ENV_IDS
from lcpo.envs.task import declare_continuing, declared_continuing, default_reset, is_continuing, return_unit


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_every_registered_environment_declares_a_bool(env_id):
    env = make_env(env_id)
    assert isinstance(declared_continuing(env), bool)
    assert default_reset(env) == ("never" if declared_continuing(env) else "end")
    env.close()


def test_kinds_follow_constructor_arguments_per_instance():
    assert not is_continuing(make_env("lcpo/WindyPendulum-v0"))
    assert is_continuing(make_env("lcpo/WindyPendulum-v0", continuing=True))
    assert is_continuing(make_env("lcpo/WindyPendulum-v0", time_limit=None))
    assert not is_continuing(make_env("lcpo/WindyPendulum-v0"))  # one instance's kind does not leak to the class
    assert is_continuing(make_env("lcpo/ContinuingChain-v0"))
    assert not is_continuing(make_env("lcpo/ContinuingChain-v0", max_episode_steps=5))
    assert is_continuing(make_env("lcpo/StragglerMitigation-v0"))


def test_undeclared_and_malformed_declarations():
    class Plain(gym.Env):
        metadata = {"render_modes": []}

    class Bad(gym.Env):
        metadata = {"continuing": "yes"}

    assert declared_continuing(Plain()) is None and not is_continuing(Plain()) and default_reset(Plain()) == "end"
    with pytest.raises(ValueError, match=r"metadata\['continuing'\] must be True or False, got 'yes'"):
        declared_continuing(Bad())
    env = Plain()
    declare_continuing(env, True)
    assert is_continuing(env) and Plain.metadata == {"render_modes": []} and env.metadata["render_modes"] == []
    with pytest.raises(ValueError, match="true or false"):
        declare_continuing(env, 1)


def test_return_unit():
    assert return_unit("end") == "episode" and return_unit("every:50") == "episode"
    assert return_unit("never") == "200-step window" and return_unit("never", 50) == "50-step window"
