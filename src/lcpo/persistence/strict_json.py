"""JSON that refuses an object with a repeated key.

``json.loads`` keeps the last of two equal keys silently (``{"a": 1, "a": 2}`` reads as ``{"a": 2}``), so a typo or
a copy-paste in a request body, a spec file or a ``--set`` value would change a setting without a word. Everything
in lcpo that reads JSON written by a person or a client parses it with :func:`unique_object` as the
``object_pairs_hook`` (:func:`loads_strict`), and reports :class:`DuplicateKeyError` in one line naming the key.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

__all__ = ["DuplicateKeyError", "unique_object", "loads_strict", "show", "BeyondFloat64", "parse_float"]

_MIN_WIDTH = 16  # room for the exponent form of any integer of fewer than 100,000 digits (-1.234568e+99999)


def show(value: Any, width: int = 60) -> str:
    """A value a person or a client gave, as one-line error messages quote it, in JSON's words where they differ
    from Python's: ``true``, ``false`` and ``null`` for booleans and None, inside lists and objects too (a
    ``--set``/``--env-arg`` value, a sweep file's or a request's field arrives as JSON: ``time_limit=true`` was
    written ``true``, not ``True``); a NumPy scalar as its Python value; an integer whose digits do not fit in
    ``width`` in exponent form (``10**400`` as ``1e+400``, as a float's repr writes ``1e+39``); a literal float64
    cannot hold (:class:`BeyondFloat64`) as written; strings quoted as Python does (``'abc'``); the text cut to
    ``width`` characters with ``...``.

    Args:
        value: any Python object (None, bool, int, float, str, list, tuple, dict, NumPy scalar or array, ...).
        width: the longest text returned, in characters.

    Returns:
        The text, at most ``width`` characters.

    Raises:
        ValueError: ``width`` below 16.

    Example:
        >>> show(True), show([True, None]), show(10 ** 400), show("abc"), show("x" * 100, width=16)
        ('true', '[true, null]', '1e+400', "'abc'", "'xxxxxxxxxxxx...")
    """
    if width < _MIN_WIDTH:
        raise ValueError(f"show: width must be >= {_MIN_WIDTH}, got {width}")
    r = _render(value, width)
    return r if len(r) <= width else r[:width - 3] + "..."


def _render(value: Any, width: int, budget: int = 200, depth: int = 0) -> str:
    """:func:`show`'s text before the cut; lists and objects are rendered only as far as ``budget`` characters
    (the cut keeps fewer) and 16 levels deep (a list that holds itself ends there), so any value costs little."""
    if depth > 16:
        return "..."
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, np.generic):
        value = value.item()
        if isinstance(value, bool):
            return "true" if value else "false"
    if type(value) is int:
        return _integer(value, width)
    if isinstance(value, (list, tuple)):  # a JSON array either way
        parts, used = [], 0
        for x in value:
            if used > budget:
                parts.append("...")
                break
            parts.append(_render(x, width, budget - used, depth + 1))
            used += len(parts[-1]) + 2
        return "[" + ", ".join(parts) + "]"
    if isinstance(value, dict):
        parts, used = [], 0
        for k, x in value.items():
            if used > budget:
                parts.append("...")
                break
            key, item = (_render(v, width, budget - used, depth + 1) for v in (k, x))
            parts.append(f"{key}: {item}")
            used += len(parts[-1]) + 2
        return "{" + ", ".join(parts) + "}"
    try:
        return repr(value)
    except ValueError:  # an int subclass or object whose repr exceeds Python's int-to-str digit limit
        return f"<{type(value).__name__}>"


def _integer(value: int, width: int) -> str:
    """An int as its digits where they fit in ``width``, else in exponent form with 7 significant digits, rounded
    (``-1.234568e+20``), computed without converting the whole integer to a string (Python refuses integers of
    more than 4,300 digits there)."""
    if value.bit_length() < 13_000:  # about 3,900 digits: repr works
        text = repr(value)
        if len(text) <= width:
            return text
    magnitude = abs(value)
    exponent = int(math.log10(magnitude))
    while 10 ** exponent > magnitude:  # log10's rounding near a power of ten
        exponent -= 1
    while 10 ** (exponent + 1) <= magnitude:
        exponent += 1
    q = magnitude // 10 ** (exponent - 7) if exponent >= 7 else magnitude * 10 ** (7 - exponent)  # 8 digits
    q = (q + 5) // 10  # 7 significant digits, rounded half up
    if q == 10 ** 7:  # 9.9999995e+20 rounds to 1e+21
        q, exponent = q // 10, exponent + 1
    mantissa = f"{q // 10 ** 6}.{q % 10 ** 6:06d}".rstrip("0").rstrip(".")
    return f"{'-' if value < 0 else ''}{mantissa}e+{exponent}"


class BeyondFloat64(float):
    """A JSON float literal that float64 cannot hold, as :func:`parse_float` reads it: beyond its range
    (``1e400``, ``-2.5E999``: the value ``json`` reads, ``inf`` or ``-inf``) or nonzero below its smallest
    subnormal (``1e-400``: ``0.0``). The value is the float ``json`` would read, so every check and every file
    treats it as before (``json.dumps`` writes ``Infinity``); only its ``repr`` and ``str`` are the literal as
    written, so a message quotes what the writer wrote (``got 1e400``, not ``got inf``, a value nobody wrote).

    Args:
        text: the literal, as ``json`` hands it to ``parse_float``.

    Attributes:
        text: the literal.

    Raises:
        ValueError: ``text`` is not a float literal (from ``float(text)``).
    """

    text: str

    def __new__(cls, text: str) -> "BeyondFloat64":
        obj = super().__new__(cls, float(text))
        obj.text = str(text)
        return obj

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__

    def __reduce__(self):  # copy, deepcopy and pickle rebuild it from its text
        return (BeyondFloat64, (self.text,))


def parse_float(text: str) -> float:
    """``json.loads``'s ``parse_float``: ``float(text)``, except that a literal float64 cannot hold (beyond its
    range, or nonzero and below its smallest subnormal) is a :class:`BeyondFloat64` of the same value.

    Args:
        text: a JSON number with a fraction or an exponent.

    Returns:
        A float (a :class:`BeyondFloat64` for such a literal).
    """
    f = float(text)
    if math.isinf(f) or (f == 0.0 and any(c in "123456789" for c in text.lower().partition("e")[0])):
        return BeyondFloat64(text)
    return f


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
    """``json.loads(text)``, refusing an object with a repeated key anywhere in the document; a float literal
    float64 cannot hold (``1e400``) is a :class:`BeyondFloat64` (the same value, quoted as written).

    Raises:
        DuplicateKeyError: an object holds a key twice (a ``ValueError``; names the key).
        json.JSONDecodeError: for text that is not JSON (also a ``ValueError``).
    """
    return json.loads(text, object_pairs_hook=unique_object, parse_float=parse_float)
