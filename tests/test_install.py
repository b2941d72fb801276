"""Installs that suit the user's machine: a torch range (no exact pin), CI running the README's test command
verbatim after installing the CPU build, and the README telling CPU-only users how to get that build."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _readme_commands() -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", (REPO / "README.md").read_text(), re.S)


def test_torch_is_a_range_that_admits_the_installed_version():
    from packaging.requirements import Requirement

    import torch

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (req,) = [Requirement(d) for d in deps if Requirement(d).name == "torch"]
    assert not any(s.operator in ("==", "===") for s in req.specifier), f"exact pin: {req}"
    assert req.specifier.contains(torch.__version__.split("+")[0])
    assert not req.specifier.contains("2.2.0")  # the lower bound is real


def test_ci_runs_the_readme_test_command_verbatim_after_the_cpu_build():
    test_cmd = next(c for c in _readme_commands() if "pytest" in c and "pip install -e" in c)
    lines = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[-1] == test_cmd
    torch_line = next(i for i, line in enumerate(lines) if "pip install torch==" in line)
    assert torch_line < len(lines) - 1


def test_readme_tells_cpu_only_users_how_to_get_the_cpu_build():
    assert any("pip install torch --index-url https://download.pytorch.org/whl/cpu" in c for c in _readme_commands())


@pytest.mark.parametrize("fragment", ["a few minutes", "a few seconds"])
def test_readme_makes_no_unmeasured_time_claims(fragment):
    assert fragment not in (REPO / "README.md").read_text()
