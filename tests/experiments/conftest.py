"""Make the fake executor ``lcpo_fake_run`` importable here and in worker subprocesses (spawned pools, Dask)."""

import os
import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
_pp = os.environ.get("PYTHONPATH", "")
if HERE not in _pp.split(os.pathsep):
    os.environ["PYTHONPATH"] = HERE + (os.pathsep + _pp if _pp else "")
