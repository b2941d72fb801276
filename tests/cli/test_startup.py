"""Help and list commands answer at once: they import no PyTorch, SciPy, pandas, numba or MuJoCo (checked in a
fresh interpreter's sys.modules), and `lcpo --help` tells what a bare `lcpo` does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lcpo.cli.main import main

HEAVY = ("torch", "scipy", "pandas", "numba", "mujoco", "matplotlib", "gymnasium")

_PROBE = """
import json, sys
from lcpo.cli.main import main
try:
    main({argv!r})
except SystemExit:
    pass
sys.stdout.flush()
print("\\nMODULES=" + json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["agents", "list"], ["envs", "list"],
                                  ["traces", "list"], ["sweep", "--help"], ["report", "--help"],
                                  ["traces", "import", "--help"], ["serve", "--help"], ["agents", "show", "lcpo"],
                                  ["agents", "show", "prescient-sac"]])
def test_help_and_list_commands_import_nothing_heavy(argv):
    done = subprocess.run([sys.executable, "-c", _PROBE.format(argv=argv, heavy=HEAVY)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out, _, modules = done.stdout.rpartition("MODULES=")
    assert json.loads(modules) == [], f"lcpo {' '.join(argv)} imported {modules.strip()}"
    assert out.strip(), "printed nothing"


def test_help_says_a_bare_lcpo_starts_the_default_run(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "A bare `lcpo` starts the default run" in text and "1,000,000 steps" in text
