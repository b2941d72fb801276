"""Up-front size check of a preallocated memory: refuse one larger than the machine before allocating it.

The check counts the buffers this process already holds (a ledger of live owners, weakly referenced): a
population's seeds each preallocate their own reservoir or replay buffer, so 64 seeds of a buffer that fits once
may not fit together, and the 64th is refused before any of them fills (issue 26: memory).
"""

from __future__ import annotations

import gc
import os
import weakref

__all__ = ["physical_memory", "require_fits", "reserved_bytes"]


def physical_memory() -> int | None:
    """This machine's physical memory in bytes (``os.sysconf``), or None where the platform does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


#: owner object -> bytes its preallocated buffer takes once filled (live owners only: an entry leaves with its owner)
_reserved: "weakref.WeakKeyDictionary[object, int]" = weakref.WeakKeyDictionary()


def _size(nbytes: int) -> str:
    """``nbytes`` for a message: ``1.5 GiB``, ``12.0 MiB`` or ``36.0 kiB``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes / 2**10:,.1f} kiB"


def reserved_bytes(exclude: object | None = None) -> tuple[int, int]:
    """Bytes and count of the preallocated buffers this process holds now (registered by :func:`require_fits`
    with an ``owner``), ``exclude`` left out. Returns ``(bytes, buffers)``, both int."""
    items = [n for owner, n in list(_reserved.items()) if owner is not exclude]
    return sum(items), len(items)


def require_fits(nbytes: int, what: str, setting: str, owner: object | None = None) -> None:
    """Refuse a preallocated array of ``nbytes`` bytes (int) that, with the buffers this process already holds,
    is larger than this machine's physical memory.

    NumPy reserves a zero-filled array lazily, so an impossible size fails later (an out-of-memory kill) or
    with NumPy's own words (``Maximum allowed dimension exceeded``) that name no setting; this names both. With
    an ``owner`` (the buffer object, weakly referenced), the size is recorded in the process's ledger for as long
    as the owner lives, and later checks count it: the seeds of a population, each with its own buffer, are
    checked together.

    Args:
        nbytes: bytes the array(s) will take once filled.
        what: the memory, for the message (``"the LCPO reservoir of 1,000,000 states x 9"``).
        setting: the setting that sizes it, for the message (``"reservoir_size (1% of the run's steps)"``).
        owner: the object holding the memory (weak-referenceable), or None to check without recording.

    Raises:
        ValueError: one line naming ``what``, its size, the machine's memory, the memory other live buffers
            already hold (when that is what makes it too large) and ``setting``.
    """
    total = physical_memory()
    if total is None:
        return
    if nbytes > total:
        raise ValueError(f"{what} would take {_size(nbytes)}, more than this machine's "
                         f"{_size(total)} of memory; lower {setting}")
    held, count = reserved_bytes(exclude=owner)
    if held and nbytes + held > total:
        gc.collect()  # buffers of dropped objects held only by reference cycles leave the ledger
        held, count = reserved_bytes(exclude=owner)
    if held and nbytes + held > total:
        raise ValueError(f"{what} would take {_size(nbytes)}, and {count:,} other buffer(s) of this "
                         f"process (a population's other seeds) already hold {_size(held)}: more than "
                         f"this machine's {_size(total)} of memory together; lower {setting}, or train "
                         f"fewer seeds per process (--population, or a shorter --seed range)")
    if owner is not None:
        _reserved[owner] = int(nbytes)
