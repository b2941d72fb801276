"""Up-front size check of a preallocated memory: refuse one larger than the machine before allocating it."""

from __future__ import annotations

import os

__all__ = ["physical_memory", "require_fits"]


def physical_memory() -> int | None:
    """This machine's physical memory in bytes (``os.sysconf``), or None where the platform does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def require_fits(nbytes: int, what: str, setting: str) -> None:
    """Refuse a preallocated array of ``nbytes`` bytes (int) larger than this machine's physical memory.

    NumPy reserves a zero-filled array lazily, so an impossible size fails later (an out-of-memory kill) or
    with NumPy's own words (``Maximum allowed dimension exceeded``) that name no setting; this names both.

    Args:
        nbytes: bytes the array(s) will take once filled.
        what: the memory, for the message (``"the LCPO reservoir of 1,000,000 states x 9"``).
        setting: the setting that sizes it, for the message (``"reservoir_size (1% of the run's steps)"``).

    Raises:
        ValueError: one line naming ``what``, its size, the machine's memory and ``setting``.
    """
    total = physical_memory()
    if total is not None and nbytes > total:
        raise ValueError(f"{what} would take {nbytes / 2**30:,.1f} GiB, more than this machine's "
                         f"{total / 2**30:,.1f} GiB of memory; lower {setting}")
