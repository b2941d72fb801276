"""Environment arguments (``--env-arg KEY=VALUE``: JSON when it parses, else the string) are checked by every
lcpo entry point: a one-line ``ValueError`` naming the argument as given and its value, before anything is
built; never an internal name (``max_episode_steps`` for ``time_limit``), a conversion's message that names
nothing, or a silent coercion (``int(2.5)``, ``bool('maybe')``)."""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest

from lcpo.envs.arguments import flag, integer, number
from lcpo.envs.registration import make_env

_LIMIT = "must be an integer >= 1 or null (no time limit)"


@pytest.mark.parametrize("env_id, kwargs, message", [
    ("lcpo/TrapGrid-v0", {"time_limit": "abc"}, "'time_limit' must be an integer >= 1, got 'abc'"),
    ("lcpo/TrapGrid-v0", {"time_limit": -5}, "'time_limit' must be an integer >= 1, got -5"),
    # TrapGrid has no "no time limit": its own rule, not windy Pendulum's "or null" (was offered, then refused)
    ("lcpo/TrapGrid-v0", {"max_episode_steps": 2.5}, "'max_episode_steps' must be an integer >= 1, got 2.5"),
    ("lcpo/TrapGrid-v0", {"max_episode_steps": None}, "'max_episode_steps' must be an integer >= 1, got null"),
    ("lcpo/WindyPendulum-v0", {"max_episode_steps": 2.5}, f"'max_episode_steps' {_LIMIT}, got 2.5"),
    # an entry point without a time limit: named as written (was "unknown environment argument(s) ['time_limit']")
    ("lcpo/StragglerMitigation-v0", {"max_episode_steps": 5}, "unknown environment argument(s) ['max_episode_steps']"),
    ("lcpo/ContinuingChain-v0", {"time_limit": -5},
     "'time_limit' must be an integer >= 1 or null (continuing, the default), got -5"),
    ("lcpo/ContinuingChain-v0", {"reward": "abc"}, "'reward' must be a finite number, got 'abc'"),
    ("lcpo/WindyPendulum-v0", {"time_limit": -5}, f"'time_limit' {_LIMIT}, got -5"),
    ("lcpo/WindyPendulum-v0", {"divisor": 0}, "'divisor' must be a finite number > 0, got 0"),
    # was stored and ignored (render_mode='human' drew nothing, 1e400 was taken)
    ("lcpo/WindyPendulum-v0", {"render_mode": "human"}, "WindyPendulumEnv does not render; got render_mode='human'"),
    ("lcpo/WindyPendulum-v0", {"time_limit": 5, "max_episode_steps": 5}, "name the same limit"),
    ("lcpo/StragglerMitigation-v0", {"window_ms": "abc"}, "'window_ms' must be a finite number > 0, got 'abc'"),
    ("lcpo/StragglerMitigation-v0", {"n_servers": 2.5}, "'n_servers' must be an integer >= 1, got 2.5"),
    ("lcpo/StragglerMitigation-v0", {"workload_seed": "abc"}, "'workload_seed' must be an integer >= 0, got 'abc'"),
    ("lcpo/StragglerMitigation-v0", {"gamma_per_s": "abc"}, "'gamma_per_s' must be a number in (0, 1], got 'abc'"),
    ("lcpo/StragglerMitigation-v0", {"log_requests": "maybe"}, "'log_requests' must be true or false, got 'maybe'"),
])
def test_a_bad_argument_is_named_as_given_with_its_value(env_id, kwargs, message):
    with pytest.raises(ValueError) as e:
        make_env(env_id, **kwargs)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_windy_mujoco_entry_points_name_time_limit_bins_and_continuing():
    pytest.importorskip("mujoco")
    for kwargs, message in (({"time_limit": "abc"}, f"'time_limit' {_LIMIT}, got 'abc'"),
                            ({"bins": 1}, "'bins' must be an integer >= 2, got 1"),
                            ({"continuing": "maybe"}, "'continuing' must be true or false, got 'maybe'"),
                            # was "divisor must be a finite positive number, got True" (and a numpy error for
                            # an integer beyond float64)
                            ({"divisor": True}, "'divisor' must be a finite number > 0, got true"),
                            ({"divisor": 10 ** 400}, "'divisor' must be a finite number > 0, got 1e+400")):
        with pytest.raises(ValueError, match=re.escape(message)):
            make_env("lcpo/WindyInvertedPendulum-v0", **kwargs)


def test_the_vector_entry_point_names_the_argument_too():
    with pytest.raises(ValueError, match=re.escape(f"'time_limit' {_LIMIT}, got -5")):
        gym.make_vec("lcpo/WindyPendulum-v0", num_envs=2, vectorization_mode="vector_entry_point",
                     env_kwargs=[{"time_limit": 200}, {"time_limit": -5}])


def test_integral_values_json_writes_as_floats_are_accepted_exactly():
    env = make_env("lcpo/WindyPendulum-v0", time_limit=2e2, bins=15.0, divisor=np.float32(2))
    assert env.unwrapped.max_episode_steps == 200 and type(env.unwrapped.max_episode_steps) is int
    assert env.action_space == gym.spaces.MultiDiscrete([15])
    assert make_env("lcpo/TrapGrid-v0", max_episode_steps=np.int64(7)).unwrapped.max_episode_steps == 7


def test_the_checks_themselves():
    assert integer(None, "t", none="no limit") is None and integer(np.int32(3), "t") == 3
    assert number(1, "d", low=0.0, low_open=True) == 1.0 and flag(np.bool_(True), "c") is True
    for bad in (True, "3", 3.5, float("inf"), None, [3]):
        with pytest.raises(ValueError, match=r"environment argument 't' must be an integer >= 1, got "):
            integer(bad, "t")
    for bad, what in ((10 ** 400, "a finite number"), (np.nan, "a finite number"), (False, "a finite number")):
        with pytest.raises(ValueError, match=f"'d' must be {what}, got"):
            number(bad, "d")
    with pytest.raises(ValueError, match=r"'g' must be a number in \(0, 1\], got 0"):
        number(0, "g", low=0.0, high=1.0, low_open=True)
    with pytest.raises(ValueError, match="'c' must be true or false, got 1"):
        flag(1, "c")


def test_values_are_shown_as_the_user_wrote_them_json_style():
    """``--env-arg time_limit=true`` arrives as Python's True: the message says ``true``, not ``True``."""
    for bad, shown in ((True, "true"), (np.bool_(False), "false"), (np.float32(2.5), "2.5"), ("abc", "'abc'")):
        with pytest.raises(ValueError, match=re.escape(f"must be an integer >= 1, got {shown}") + "$"):
            integer(bad, "t")
    with pytest.raises(ValueError, match=re.escape("must be a finite number, got null") + "$"):
        number(None, "d")
    with pytest.raises(ValueError, match=re.escape("got 1e+400") + "$"):
        number(10 ** 400, "d")
    with pytest.raises(ValueError, match="max_episode_steps=true and time_limit=null name the same limit"):
        make_env("lcpo/WindyPendulum-v0", max_episode_steps=True, time_limit=None)


def test_the_name_the_user_gave_and_every_entry_points_valid_arguments_are_named():
    from lcpo.envs.registration import make_env

    with pytest.raises(ValueError, match=r"^environment argument 'max_episode_steps' must be an integer >= 1, "
                                         r"got null$"):
        make_env("lcpo/TrapGrid-v0", max_episode_steps=None)  # the grid world needs a limit
    with pytest.raises(ValueError, match=r"^unknown environment argument\(s\) \['foo'\] for "
                                         r"lcpo/StragglerMitigation-v0; valid keyword arguments: \[.*'n_servers'"):
        make_env("lcpo/StragglerMitigation-v0", foo=1)  # was gymnasium's raw TypeError text


def test_workload_and_trace_values_are_quoted_in_json_words_not_python_type_names():
    """Was "cannot make a workload from bool" / "from BeyondFloat64", and "workload=True and its alias ..."."""
    for bad, shown in ((True, "true"), (5, "5"), ({"x": None}, "{'x': null}")):
        with pytest.raises(ValueError, match=re.escape(f"cannot make a workload from {shown}; expected")):
            make_env("lcpo/StragglerMitigation-v0", workload=bad)
    with pytest.raises(ValueError, match=re.escape("give the workload once: workload=true and its alias "
                                                   "trace='azure-llm'")):
        make_env("lcpo/StragglerMitigation-v0", workload=True, trace="azure-llm")
    with pytest.raises((TypeError, ValueError), match=re.escape("a trace name or a file path, got true")):
        make_env("lcpo/WindyPendulum-v0", trace=True)
