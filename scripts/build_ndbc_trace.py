"""Derive the packaged NDBC 46002 wind records from the raw NOAA cwind file.

Usage::

    python scripts/build_ndbc_trace.py [SOURCE] [--out src/lcpo/data/ndbc_46002_wind.npy]

Reads ``46002c2016.txt`` (default: ``/work/shared/data/ndbc_46002_cwind_2016/46002c2016.txt``), checks its
sha256, converts each 10-minute record to ``(minutes since the first record, u * scale, v * scale)`` with
``u = -WSPD sin(WDIR)``, ``v = -WSPD cos(WDIR)``, ``scale = 4 / max(|u|, |v|)``
(:func:`lcpo.contexts.importers.ndbc_records`, the conversion ``lcpo traces import ndbc`` uses, here strict:
a missing value is an error), prints the import report, and writes the ``(N, 3)`` float32 array atomically.
The per-step resampling happens at load time (:func:`lcpo.contexts.canonical.ndbc_46002`, with
:func:`lcpo.contexts.importers.resample`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from lcpo.contexts.canonical import NDBC_46002_SOURCE_SHA256
from lcpo.contexts.importers import ndbc_records

DEFAULT_SOURCE = Path("/work/shared/data/ndbc_46002_cwind_2016/46002c2016.txt")
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "src" / "lcpo" / "data" / "ndbc_46002_wind.npy"


def main(argv: list[str] | None = None) -> int:
    """Build the file; returns the exit status (1 if the source's sha256 differs and ``--force`` is not set)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", type=Path, default=DEFAULT_SOURCE, help="NDBC cwind text file")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output .npy (default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="build even if the source sha256 differs")
    args = parser.parse_args(argv)
    digest = hashlib.sha256(args.source.read_bytes()).hexdigest()
    if digest != NDBC_46002_SOURCE_SHA256 and not args.force:
        print(f"{args.source}: sha256 {digest} differs from the documented {NDBC_46002_SOURCE_SHA256}; "
              "use --force to build anyway (and update PROVENANCE.md)", file=sys.stderr)
        return 1
    records, report = ndbc_records(args.source, missing="error")
    print("\n".join(report.lines()[:5]))
    fd, tmp = tempfile.mkstemp(prefix=".ndbc.", suffix=".npy", dir=args.out.parent)
    with os.fdopen(fd, "wb") as handle:
        np.save(handle, records, allow_pickle=False)
    os.chmod(tmp, 0o644)
    os.replace(tmp, args.out)
    print(f"wrote {args.out}: {records.shape[0]} records, shape {records.shape}, {records.dtype}, "
          f"span {records[-1, 0]:.0f} min, sha256 of source {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
