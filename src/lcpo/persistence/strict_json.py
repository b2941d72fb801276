"""JSON that refuses an object with a repeated key.

``json.loads`` keeps the last of two equal keys silently (``{"a": 1, "a": 2}`` reads as ``{"a": 2}``), so a typo or
a copy-paste in a request body, a spec file or a ``--set`` value would change a setting without a word. Everything
in lcpo that reads JSON written by a person or a client parses it with :func:`unique_object` as the
``object_pairs_hook`` (:func:`loads_strict`), and reports :class:`DuplicateKeyError` in one line naming the key.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

__all__ = ["DuplicateKeyError", "unique_object", "loads_strict", "show"]


def show(value: Any, width: int = 60) -> str:
    """A value a person or a client gave, as one-line error messages quote it: JSON's ``true``, ``false`` and
    ``null`` for Python's booleans and None (a ``--set``/``--env-arg`` value or a request field arrives as
    JSON, and ``time_limit=true`` was written ``true``, not ``True``); a NumPy scalar as its Python value; an
    integer beyond +-1e16 in exponent form (``10**400`` as ``1e+400``, as a float's repr writes ``1e+39``);
    anything else as its ``repr`` (a string quoted, ``'abc'``), cut to ``width`` characters with ``...``.

    Args:
        value: any Python object.
        width: the longest text returned, in characters (>= 4).

    Returns:
        The text, at most ``width`` characters.

    Example:
        >>> show(True), show(None), show(10 ** 400), show("abc"), show("x" * 100, width=8)
        ('true', 'null', '1e+400', "'abc'", "'xxxx...")
    """
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, np.generic):
        value = value.item()
    if type(value) is int and not -10 ** 16 < value < 10 ** 16:
        from decimal import Decimal

        mantissa, _, exponent = f"{Decimal(value):.6e}".partition("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{exponent}"
    r = repr(value)
    return r if len(r) <= width else r[:width - 3] + "..."


class DuplicateKeyError(ValueError):
    """A JSON object holds the same key twice; ``key`` is the first key found repeated."""

    def __init__(self, key: str):
        super().__init__(f"duplicate key {show(key, 40)}")
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
