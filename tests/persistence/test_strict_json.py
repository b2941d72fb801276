"""lcpo.persistence.strict_json: JSON that refuses an object with a repeated key, anywhere in the document."""

import json

import pytest

from lcpo.persistence.strict_json import DuplicateKeyError, loads_strict


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
