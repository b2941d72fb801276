"""Validated argparse types and the parser class shared by the ``lcpo`` subcommands (errors quote the bad value).

Standard library only: the help and list commands import this and nothing heavy.
"""

from __future__ import annotations

import argparse
import math

from lcpo.experiments.config import MAX_SEED, MAX_SEEDS  # a stdlib-only module: the help stays fast

__all__ = ["LcpoParser", "DefaultsHelpFormatter", "parse_count", "int_at_least", "positive_int", "nonneg_int",
           "parse_seeds", "seed_list", "seed_word"]


def parse_count(text: str) -> int | None:
    """A whole number written as an integer (``100000``, ``100_000``) or in float notation with an integral
    value (``1e5``, ``2.5e6``, ``100000.0``); ``None`` for anything else (``1.5``, ``abc``, ``inf``)."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) or not value.is_integer():
        return None
    return int(value)


def int_at_least(minimum: int):
    """An argparse ``type`` accepting whole numbers ``>= minimum`` (``1e5`` and ``2.5e6`` included, see
    :func:`parse_count`); anything else (``1.5``) is rejected with the text quoted."""

    def parse(text: str) -> int:
        value = parse_count(text)
        if value is None or value < minimum:
            what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            why = ""
            try:
                if value is None and math.isfinite(float(text)):
                    why = " (not a whole number; 1e5 or 2.5e6 are)"
            except ValueError:
                pass
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}{why}")
        return value

    parse.__name__ = f"int>={minimum}"
    return parse


positive_int = int_at_least(1)
nonneg_int = int_at_least(0)


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default (``(default: 1000000)``) unless the help text already says it, or
    the option has no meaningful default (``None``, ``False``, a suppressed one)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (not action.option_strings or "default" in text or default is None or default is False
                or default is argparse.SUPPRESS or isinstance(action, argparse._HelpAction)
                or default == [] or text == argparse.SUPPRESS):
            return text
        shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else str(default)
        return f"{text} (default: {shown.replace('%', '%%')})"


class LcpoParser(argparse.ArgumentParser):
    """The ``lcpo`` parser (and, through ``add_subparsers``, every subcommand's): defaults in ``--help``, and a
    usage error in one line with a pointer to ``--help``, instead of the usage block first."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        """Print ``PROG: error: MESSAGE (see `PROG --help`)`` on one line to stderr and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see `{self.prog} --help`)\n")




def parse_seeds(items) -> list[int]:
    """Seeds from CLI words: integers, inclusive ranges ``A-B`` and comma lists, in order, without repeats.

    Example:
        >>> parse_seeds(["0-3", "8"]), parse_seeds(["0", "1", "2"]), parse_seeds(["4,2"])
        ([0, 1, 2, 3, 8], [0, 1, 2], [4, 2])

    Raises:
        ValueError: a word that is neither (quoted), an empty entry in a comma list (``0,,1``, ``,1``; a trailing
            comma is allowed), a range that runs backwards, a negative seed or one above
            :data:`MAX_SEED`, a seed given twice, or more than :data:`MAX_SEEDS` seeds in all.
    """
    out: list[int] = []
    seen: set[int] = set()
    for item in items:
        words = str(item).split(",")
        for i, word in enumerate(words):
            word = word.strip()
            if not word:
                if 0 < i == len(words) - 1:  # a trailing comma, as in `--seed 0, 1`
                    continue
                raise ValueError(f"bad seed {str(item)!r}: an empty entry in the comma list (expected e.g. 0,4 or 0-3)")
            lo, sep, hi = word.partition("-")
            try:
                a, b = (int(lo), int(hi)) if sep else (int(word), int(word))
            except ValueError:
                raise ValueError(f"bad seed {word!r}: expected an integer, a range A-B or a list (0-3 8)") from None
            if a < 0 or b < a:
                raise ValueError(f"bad seed range {word!r}: expected 0 <= A <= B")
            if b > MAX_SEED:
                raise ValueError(f"bad seed {word!r}: seeds must lie in 0..2**64-1 ({MAX_SEED})")
            if len(out) + (b - a + 1) > MAX_SEEDS:
                raise ValueError(f"seed {word!r} names {len(out) + b - a + 1:,} seeds in all; at most {MAX_SEEDS:,} "
                                 f"in one command")
            for s in range(a, b + 1):
                if s in seen:
                    raise ValueError(f"seed {s} is given twice ({' '.join(map(str, items))})")
                seen.add(s)
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


def seed_word(text: str) -> str:
    """An argparse ``type`` for one ``--seed`` word: the word as typed, once it names valid seeds, so that
    :func:`parse_seeds` of all the words can check them together and quote them as given (``0-999 5``, not
    the thousand seeds of the range)."""
    seed_list(text)
    return text
