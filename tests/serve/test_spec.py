"""The spec file of a system without a Gymnasium environment: spaces and context built from JSON, errors that
name the file and the field."""

from __future__ import annotations

import json
import warnings

import gymnasium as gym
import numpy as np
import pytest

from lcpo.serve.spec import SpecError, load_spec, spec_env


def test_spec_builds_spaces_and_context(tmp_path):
    doc = {"observation": {"size": 4, "low": -1.0, "high": [1, 2, 3, None]},
           "action": {"multi_discrete": [5, 5]},
           "context": {"indices": [2, 3], "names": ["load", "size"], "units": "normalized"}, "continuing": False}
    (tmp_path / "s.json").write_text(json.dumps(doc))
    env = spec_env(load_spec(tmp_path / "s.json"))
    assert env.observation_space == gym.spaces.Box(np.float32([-1] * 4), np.float32([1, 2, 3, np.inf]))
    assert env.action_space == gym.spaces.MultiDiscrete([5, 5]) and env.metadata["continuing"] is False
    assert env.context_spec.indices == (2, 3) and env.context_spec.names == ("load", "size")
    with pytest.raises(RuntimeError, match="placeholder"):
        env.reset()


@pytest.mark.parametrize("doc,match", [
    ({"action": {"discrete": 3}}, "observation must be an object"),
    ({"observation": {"size": 0}, "action": {"discrete": 3}}, "observation.size"),
    ({"observation": {"size": 2, "low": [0]}, "action": {"discrete": 3}}, "observation.low"),
    ({"observation": {"size": 2, "low": 1, "high": 0}, "action": {"discrete": 3}}, "exceeds observation.high"),
    ({"observation": {"size": 2}, "action": {"box": 3}}, "action must be"),
    ({"observation": {"size": 2}, "action": {"discrete": 1}}, "action.discrete"),
    ({"observation": {"size": 2}, "action": {"multi_discrete": [3, 4]}}, "equal bins"),
    ({"observation": {"size": 2}, "action": {"discrete": 3}, "context": {"indices": [5]}}, "context.indices"),
    ({"observation": {"size": 2}, "action": {"discrete": 3}, "code": "import os"}, r"unknown field\(s\) \['code'\]"),
    ({"observation": {"size": 2}, "action": {"discrete": 3}, "continuing": "yes"}, "continuing"),
])
def test_bad_spec_names_the_field(doc, match):
    with pytest.raises(SpecError, match=match):
        spec_env(doc)


@pytest.mark.parametrize("doc, message", [  # a spec is JSON: values are quoted in JSON's words (were True, None)
    ({"observation": {"size": 3}, "action": {"discrete": True}}, "action.discrete must be an integer >= 2, got true"),
    ({"observation": {"size": 3}, "action": {"multi_discrete": [True, 2]}},
     "action.multi_discrete must be a list of integers >= 2, got [true, 2]"),
    ({"observation": {"size": 3}, "action": {"discrete": 2}, "continuing": None},
     "continuing must be true or false, got null"),
    ({"observation": {"size": None}, "action": {"discrete": 2}}, "observation.size must be a positive integer, got null"),
])
def test_bad_spec_values_are_quoted_as_json_writes_them(doc, message):
    with pytest.raises(SpecError) as e:
        spec_env(doc)
    assert str(e.value) == message


@pytest.mark.parametrize("observation, message", [
    # was a RuntimeWarning (overflow in cast) and an infinite bound
    ({"size": 2, "low": -1, "high": [1, 1e39]}, "observation.high[1] = 1e+39 is beyond float32's range (±3.4e38)"),
    ({"size": 2, "low": -1e39, "high": 1}, "observation.low = -1e+39 is beyond float32's range (±3.4e38)"),
    ({"size": 2, "high": [1, 10 ** 400]}, "observation.high[1] = 1e+400 is beyond float32's range"),  # OverflowError
    ({"size": 2, "low": [0, float("nan")]}, "observation.low[1] must be a number or null (unbounded), got nan"),
    ({"size": 2, "low": float("inf")}, "observation.low = inf leaves no observation inside the bounds"),
    ({"size": 2, "high": [1, -float("inf")]}, "observation.high[1] = -inf leaves no observation inside the bounds"),
])
def test_a_bound_float32_cannot_hold_is_refused_naming_the_entry(observation, message):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning on the way
        with pytest.raises(SpecError) as e:
            spec_env({"observation": observation, "action": {"discrete": 2}})
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_infinite_bounds_mean_unbounded_and_float32_s_maximum_is_a_bound(tmp_path):
    """Python's json writes an infinite bound as Infinity (a spec built in Python, a STATE/serve.json); it reads
    as unbounded, as null does. float32's maximum as printed (3.4028235e38, just above it in float64) is kept."""
    (tmp_path / "s.json").write_text('{"observation": {"size": 3, "low": [-Infinity, null, -3.4028235e38], '
                                     '"high": [Infinity, 1, 3.4028235e38]}, "action": {"discrete": 2}}')
    space = spec_env(load_spec(tmp_path / "s.json")).observation_space
    f32 = np.finfo(np.float32).max
    assert space == gym.spaces.Box(np.float32([-np.inf, -np.inf, -f32]), np.float32([np.inf, 1, f32]))
    # a float literal beyond float64 is not a way to write "unbounded": Python's json would read it as Infinity
    (tmp_path / "big.json").write_text('{"observation": {"size": 3, "high": [1, 1e400, 1]}, "action": {"discrete": 2}}')
    with pytest.raises(SpecError, match=r"big.json: the number 1e400 is beyond float64's range \(±1.797e308\); write "
                                        r"null \(or ±Infinity\) for an unbounded entry"):
        load_spec(tmp_path / "big.json")


def test_bad_spec_file_names_the_file(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SpecError, match="bad.json is not JSON"):
        load_spec(tmp_path / "bad.json")
    (tmp_path / "worse.json").write_text(json.dumps({"observation": {"size": -1}, "action": {"discrete": 2}}))
    with pytest.raises(SpecError, match=r"worse.json: observation.size"):
        load_spec(tmp_path / "worse.json")
    (tmp_path / "twice.json").write_text('{"observation": {"size": 2, "size": 3}, "action": {"discrete": 2}}')
    with pytest.raises(SpecError, match=r"twice.json repeats a key in one object \(duplicate key 'size'\)"):
        load_spec(tmp_path / "twice.json")
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "missing.json")


def test_an_agent_that_needs_a_context_names_the_spec_field_it_lacks(tmp_path):
    from lcpo.serve.learner import build_agent

    doc = {"observation": {"size": 4}, "action": {"discrete": 3}}
    (tmp_path / "s.json").write_text(json.dumps(doc))
    env = spec_env(load_spec(tmp_path / "s.json"))
    with pytest.raises(ValueError) as e:
        build_agent(env, "lcpo", 0, {})
    msg = str(e.value)
    assert "agent 'lcpo' needs the served system's context" in msg and '"context": {"indices"' in msg
    assert "object at 0x" not in msg and "__init__" not in msg and "\n" not in msg
    assert build_agent(env, "a2c", 0, {}) is not None  # A2C reads no context: the same spec serves it
