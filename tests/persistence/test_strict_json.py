"""lcpo.persistence.strict_json: JSON that refuses an object with a repeated key, anywhere in the document."""

import copy
import json
import math
import pickle

import numpy as np
import pytest

from lcpo.persistence.strict_json import BeyondFloat64, DuplicateKeyError, loads_strict, show


def test_equal_keys_are_refused_at_any_depth_and_named():
    for text, key in [('{"a": 1, "a": 2}', "a"), ('[{"x": {"k": 1, "j": 2, "k": 3}}]', "k"),
                      ('{"a": 1, "\\u0061": 2}', "a")]:  # an escape spelling the same key
        with pytest.raises(DuplicateKeyError, match=f"duplicate key '{key}'") as err:
            loads_strict(text)
        assert err.value.key == key and isinstance(err.value, ValueError)
    assert json.loads('{"a": 1, "a": 2}') == {"a": 2}  # what it guards against: json keeps the last silently


def test_documents_without_repeats_read_as_json_does():
    for text in ['{"a": 1, "b": {"a": 2}}', '[{"a": 1}, {"a": 2}]', '"text"', "3.5", '{"": 0, " ": 1}']:
        assert loads_strict(text) == json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        loads_strict("{bad")


def test_show_quotes_values_in_json_words_at_any_depth_within_its_width():
    assert [show(v) for v in (True, np.False_, None, [True, None], {"a": None}, (np.True_, 2))] == [
        "true", "false", "null", "[true, null]", "{'a': null}", "[true, 2]"]
    # integers: their digits where they fit, else 7 significant digits, rounded (never more than the width)
    assert show(-123456789012345678901) == "-123456789012345678901"
    assert show(-123456789012345678901234567890, width=16) == "-1.234568e+29"
    assert show(999_999_950_000_000_000, width=16) == "1e+18" and show(10 ** 400) == "1e+400"
    assert show([10 ** 5000]) == "[1e+5000]"  # repr would raise ValueError (Python's 4,300-digit limit)
    assert show(np.int64(-2 ** 63)) == "-9223372036854775808" and show(np.float32(2.5)) == "2.5"
    assert show("x" * 100, width=16) == "'xxxxxxxxxxxx..." and len(show(list(range(10 ** 6)))) == 60
    loop = [1]
    loop.append(loop)
    assert show(loop, width=200).startswith("[1, [1, [1, ") and show(loop, width=200).count("[") == 17
    with pytest.raises(ValueError, match="width must be >= 16, got 4"):
        show(1, width=4)


def test_a_float_literal_float64_cannot_hold_keeps_json_s_value_and_is_quoted_as_written():
    doc = loads_strict('{"a": 1e400, "b": [-2.5E999, 1e-400, 0e-400, 1e308]}')
    a, (b, tiny, zero, big) = doc["a"], doc["b"]
    assert (a, b, tiny) == (math.inf, -math.inf, 0.0) and all(isinstance(x, BeyondFloat64) for x in (a, b, tiny))
    assert (repr(a), str(b), show([a, b, tiny])) == ("1e400", "-2.5E999", "[1e400, -2.5E999, 1e-400]")
    assert type(zero) is float and type(big) is float and big == 1e308  # what float64 holds stays a float
    assert json.dumps(doc) == '{"a": Infinity, "b": [-Infinity, 0.0, 0.0, 1e+308]}'  # files: the value, as before
    for copied in (copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert type(copied) is BeyondFloat64 and repr(copied) == "1e400" and copied == a
