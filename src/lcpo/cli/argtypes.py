"""Validated argparse types shared by the ``lcpo`` subcommands (errors quote the bad value)."""

from __future__ import annotations

import argparse

__all__ = ["int_at_least", "positive_int", "nonneg_int", "parse_seeds", "seed_list"]


def int_at_least(minimum: int):
    """An argparse ``type`` accepting integers ``>= minimum``; anything else is rejected with the text quoted."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    parse.__name__ = f"int>={minimum}"
    return parse


positive_int = int_at_least(1)
nonneg_int = int_at_least(0)


def parse_seeds(items) -> list[int]:
    """Seeds from CLI words: integers, inclusive ranges ``A-B`` and comma lists, in order, without repeats.

    Example:
        >>> parse_seeds(["0-3", "8"]), parse_seeds(["0", "1", "2"]), parse_seeds(["4,2"])
        ([0, 1, 2, 3, 8], [0, 1, 2], [4, 2])

    Raises:
        ValueError: a word that is neither (quoted), a range that runs backwards, a negative seed, or a seed
            given twice.
    """
    out: list[int] = []
    for item in items:
        for word in str(item).split(","):
            word = word.strip()
            if not word:
                continue
            lo, sep, hi = word.partition("-")
            try:
                a, b = (int(lo), int(hi)) if sep else (int(word), int(word))
            except ValueError:
                raise ValueError(f"bad seed {word!r}: expected an integer, a range A-B or a list (0-3 8)") from None
            if a < 0 or b < a:
                raise ValueError(f"bad seed range {word!r}: expected 0 <= A <= B")
            for s in range(a, b + 1):
                if s in out:
                    raise ValueError(f"seed {s} is given twice ({' '.join(map(str, items))})")
                out.append(s)
    if not out:
        raise ValueError("no seed given")
    return out


def seed_list(text: str) -> list[int]:
    """An argparse ``type`` for one ``--seed`` word (``3``, ``0-15``, ``0,4``): the seeds it names."""
    try:
        return parse_seeds([text])
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
