"""ContextTrace.scaled: the divided trace is computed once per read-only array and divisor and shared by its users."""

from __future__ import annotations

import copy
import gc
import weakref

import numpy as np
import pytest

from lcpo.contexts import ContextTrace, TraceError
from lcpo.contexts import trace as trace_module
from lcpo.envs.registration import make_env


@pytest.fixture
def trace() -> ContextTrace:
    values = np.random.default_rng(1).uniform(-4, 4, size=(1000, 2))
    return ContextTrace(values, "demo", {"generator": "demo"})


def test_scaled_values_name_and_metadata(trace):
    half = trace.scaled(8)
    np.testing.assert_array_equal(half.values, trace.values / 8.0)  # bit-identical to a fresh division
    assert half.values.dtype == np.float64 and half.values.shape == (1000, 2) and not half.values.flags.writeable
    assert half.name == "demo/8" and half.metadata == {"generator": "demo", "divisor": 8.0}
    assert trace.metadata == {"generator": "demo"}  # the base's metadata is untouched
    assert trace.scaled(1) is trace and trace.scaled(np.float32(1.0)) is trace


def test_deep_copies_of_one_trace_share_one_divided_array(trace):
    # what a population's seed environments do: each holds a deep copy of the trace and divides it
    copies = [copy.deepcopy(trace) for _ in range(5)]
    divided = [c.scaled(8) for c in copies]
    assert all(d.values is divided[0].values for d in divided)
    assert divided[0].values is not trace.values
    assert trace.scaled(8.0).values is divided[0].values  # an int and a float divisor are one key
    assert trace.scaled(2).values is not divided[0].values  # another divisor, another array
    np.testing.assert_array_equal(trace.scaled(2).values, trace.values / 2.0)


def test_a_writable_trace_gets_a_private_array_that_follows_its_values(trace):
    own = ContextTrace(trace.values.copy(), "own")
    object.__setattr__(own, "values", own.values.copy())  # someone swapped in a writable array
    first = own.scaled(4)
    own.values[0, 0] = 2.0
    second = own.scaled(4)
    assert first.values is not second.values
    assert second.values[0, 0] == 0.5 and first.values[0, 0] == trace.values[0, 0] / 4.0


def test_the_cache_keeps_no_array_alive(trace):
    divided = trace.scaled(8)
    ref = weakref.ref(divided.values)
    del divided
    gc.collect()
    assert ref() is None  # only weak references in the cache
    base = ContextTrace(np.ones((10, 2)), "base")
    base_ref = weakref.ref(base.values)
    base.scaled(8)
    del base
    gc.collect()
    assert base_ref() is None
    again = trace.scaled(8)  # recomputed after the first array died, and still right
    np.testing.assert_array_equal(again.values, trace.values / 8.0)
    assert all(b() is not None and q() is not None for b, q in trace_module._QUOTIENTS.values())


@pytest.mark.parametrize("bad", [0, 0.0, float("nan"), float("inf"), -float("inf"), "eight", None])
def test_invalid_divisor_is_one_line_naming_it(trace, bad):
    with pytest.raises(TraceError, match=r"trace 'demo': invalid divisor") as err:
        trace.scaled(bad)
    assert "\n" not in str(err.value)


def test_a_divisor_that_overflows_is_refused():
    big = ContextTrace(np.array([[1e300, 0.0], [1.0, -1.0]]), "big")
    with pytest.raises(TraceError, match=r"trace 'big': divisor 1e-10 overflows"):
        big.scaled(1e-10)


@pytest.mark.parametrize("env_id", ["lcpo/WindyInvertedPendulum-v0", "lcpo/WindyInvertedDoublePendulum-v0"])
def test_seed_environments_with_a_divisor_hold_one_wind_array(trace, env_id):
    envs = [make_env(env_id, trace=trace, divisor=8) for _ in range(3)]
    try:
        held = [env.unwrapped.wind.values for env in envs]
        assert all(h is held[0] for h in held)  # was one 8 * T * 2-byte array per environment
        np.testing.assert_array_equal(held[0], trace.values / 8.0)
    finally:
        for env in envs:
            env.close()


def test_trace_values_and_quotients_cannot_be_made_writable_so_the_cache_cannot_go_stale(trace):
    # a read-only array that owns its data can be made writable again; one over bytes cannot (review helper-32)
    for arr in (trace.values, trace.scaled(8).values):
        with pytest.raises(ValueError, match="WRITEABLE"):
            arr.setflags(write=True)
    import pickle

    back = pickle.loads(pickle.dumps(trace, protocol=5))
    with pytest.raises(ValueError, match="WRITEABLE"):
        back.values.setflags(write=True)
    np.testing.assert_array_equal(back.scaled(8).values, trace.values / 8.0)


def test_a_fortran_ordered_array_becomes_a_c_ordered_trace_shared_by_its_environments():
    values = np.asfortranarray(np.random.default_rng(2).uniform(-1, 1, size=(300, 2)))
    t = ContextTrace(values, "f")
    assert t.values.flags.c_contiguous
    envs = [make_env("lcpo/WindyInvertedPendulum-v0", trace=t) for _ in range(2)]
    try:
        assert envs[0].unwrapped.wind.values is envs[1].unwrapped.wind.values is t.values  # no private C copy
    finally:
        for env in envs:
            env.close()


@pytest.mark.parametrize("bad", ["8", b"8", 10 ** 400])
def test_strings_and_huge_integers_are_invalid_divisors(trace, bad):
    with pytest.raises(TraceError, match="invalid divisor"):
        trace.scaled(bad)
