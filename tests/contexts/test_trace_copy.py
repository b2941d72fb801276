"""A ContextTrace's deep copy shares its read-only values: Gymnasium's wrappers deep-copy the spec that holds it."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from lcpo.contexts import ContextTrace
from lcpo.envs.registration import make_env


@pytest.fixture
def trace() -> ContextTrace:
    values = np.random.default_rng(0).uniform(-2, 2, size=(500, 2))
    return ContextTrace(values, "demo", {"generator": "demo", "params": {"scale": [1, 2]}})


def test_deepcopy_shares_values_and_copies_metadata(trace):
    dup = copy.deepcopy(trace)
    assert dup is not trace and isinstance(dup, ContextTrace)
    assert dup.values is trace.values  # no bytes copied
    assert not dup.values.flags.writeable
    assert dup.name == "demo" and dup.metadata == trace.metadata
    assert dup.metadata is not trace.metadata and dup.metadata["params"] is not trace.metadata["params"]
    dup.metadata["params"]["scale"].append(3)  # the copy's metadata is its own
    assert trace.metadata["params"]["scale"] == [1, 2]


def test_pickle_still_carries_the_values(trace):
    back = pickle.loads(pickle.dumps(trace))  # another process gets the numbers, not a pointer
    np.testing.assert_array_equal(back.values, trace.values)
    assert back.values is not trace.values and back.metadata == trace.metadata


def _traces_in_wrappers(env):
    """Every ContextTrace that env's wrapper chain holds in its specs' kwargs."""
    found, e = [], env
    while e is not None:
        spec = getattr(e, "_cached_spec", None) or e.spec
        tr = (spec.kwargs or {}).get("trace") if spec is not None else None
        if isinstance(tr, ContextTrace):
            found.append(tr)
        e = getattr(e, "env", None)
    return found


@pytest.mark.parametrize("env_id", ["lcpo/WindyPendulum-v0", "lcpo/WindyInvertedPendulum-v0"])
def test_gym_make_wrappers_hold_one_trace_array(trace, env_id):
    env = make_env(env_id, trace=trace)
    try:
        env.reset(seed=0)
        held = _traces_in_wrappers(env)
        assert len(held) >= 2  # gym.make's wrappers each keep a deep copy of the spec
        assert all(t.values is trace.values for t in held)
        np.testing.assert_array_equal(env.unwrapped.wind.values, trace.values)
    finally:
        env.close()


def test_unpickled_trace_is_read_only_and_a_writable_array_is_copied(trace):
    back = pickle.loads(pickle.dumps(trace))
    assert not back.values.flags.writeable
    object.__setattr__(back, "values", back.values.copy())  # someone swaps in a writable array
    dup = copy.deepcopy(back)
    assert dup.values is not back.values and not dup.values.flags.writeable
    back.values[0, 0] = 99.0
    assert dup.values[0, 0] == trace.values[0, 0]


def test_deepcopy_keeps_a_subclass_and_its_fields():
    from dataclasses import dataclass

    @dataclass(frozen=True, eq=False)
    class Tagged(ContextTrace):
        source: str = "default"

    t = Tagged(np.zeros((3, 2)), "t", {}, "file.csv")
    dup = copy.deepcopy(t)
    assert type(dup) is Tagged and dup.source == "file.csv" and dup.values is t.values
