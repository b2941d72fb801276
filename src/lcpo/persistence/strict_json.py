"""JSON that refuses an object with a repeated key.

``json.loads`` keeps the last of two equal keys silently (``{"a": 1, "a": 2}`` reads as ``{"a": 2}``), so a typo or
a copy-paste in a request body, a spec file or a ``--set`` value would change a setting without a word. Everything
in lcpo that reads JSON written by a person or a client parses it with :func:`unique_object` as the
``object_pairs_hook`` (:func:`loads_strict`), and reports :class:`DuplicateKeyError` in one line naming the key.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DuplicateKeyError", "unique_object", "loads_strict"]


def _show(key: str) -> str:
    """``repr(key)`` cut to 40 characters (messages quote what a client sent)."""
    r = repr(key)
    return r if len(r) <= 40 else r[:37] + "..."


class DuplicateKeyError(ValueError):
    """A JSON object holds the same key twice; ``key`` is the first key found repeated."""

    def __init__(self, key: str):
        super().__init__(f"duplicate key {_show(key)}")
        self.key = key


def unique_object(pairs: list) -> dict:
    """``json.loads``'s ``object_pairs_hook`` that refuses an object with a repeated key.

    Args:
        pairs: the object's ``(key, value)`` pairs in document order.

    Returns:
        The object as a dict.

    Raises:
        DuplicateKeyError: naming the first key that appears twice.
    """
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise DuplicateKeyError(k)
            seen.add(k)
    return out


def loads_strict(text: str | bytes) -> Any:
    """``json.loads(text)``, refusing an object with a repeated key anywhere in the document.

    Raises:
        DuplicateKeyError: an object holds a key twice (a ``ValueError``; names the key).
        json.JSONDecodeError: for text that is not JSON (also a ``ValueError``).
    """
    return json.loads(text, object_pairs_hook=unique_object)
