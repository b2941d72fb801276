"""Validated argparse types shared by the ``lcpo`` subcommands (errors quote the bad value)."""

from __future__ import annotations

import argparse

__all__ = ["int_at_least", "positive_int", "nonneg_int"]


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
