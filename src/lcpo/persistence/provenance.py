"""Which code a run ran on: the git commit of the imported ``lcpo`` source tree and whether it was modified.

``lcpo.online.run.execute`` records :func:`code_provenance` in every run's ``summary.json`` (key ``code``), and
the report (:mod:`lcpo.experiments.report`) refuses to pool the seeds of one cell that ran on different commits
unless told to (:func:`mixed_code_cells`). It costs one ``git status`` call per run, made once at the start of
the run (about 5 ms measured on the 2-core development machine; docs/experiments.md, "Provenance").

No git, no repository, or a package installed outside a work tree (``site-packages``) gives ``commit`` and
``dirty`` None, never an error: a run does not fail for want of provenance.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["UNKNOWN", "code_provenance", "code_label", "mixed_code_cells", "MixedCodeError"]

#: the label of a run whose summary records no commit (runs made before the field existed, or without git)
UNKNOWN = "unknown"

_INSTALL_DIRS = {"site-packages", "dist-packages"}


class MixedCodeError(ValueError):
    """Seeds of one cell ran on different code and the caller did not allow pooling them."""


def _package_dir() -> Path:
    import lcpo

    return Path(lcpo.__file__).resolve().parent


def _work_tree(start: Path) -> Path | None:
    """The nearest ancestor of ``start`` holding ``.git`` (a folder, or a file in a git worktree), or None when
    there is none or the path passes through an install folder (``site-packages``: an installed copy is not
    the source tree of any enclosing repository)."""
    for folder in (start, *start.parents):
        if folder.name in _INSTALL_DIRS:
            return None
        if (folder / ".git").exists():
            return folder
    return None


def code_provenance(package_dir: str | Path | None = None, timeout_s: float = 5.0) -> dict[str, Any]:
    """The git commit and modification state of the source tree ``lcpo`` is imported from.

    One ``git status --porcelain=v2 --branch`` call, restricted to the package folder: ``dirty`` is True when a
    tracked file of the package is modified or staged, or an untracked, not ignored file lies in it (changes
    elsewhere in the repository, e.g. docs or results, do not count).

    Args:
        package_dir: the package folder to describe (default: the imported ``lcpo`` package's folder).
        timeout_s: limit of the git call (seconds).

    Returns:
        ``{"commit": str | None, "dirty": bool | None, "source": str}``: ``commit`` the 40-hex-digit HEAD
        commit, ``dirty`` as above, ``source`` ``"git"`` or why there is no record (``"no git work tree"``,
        ``"git not found"``, ``"git failed: ..."``). Never raises for a missing git or repository.
    """
    pkg = Path(package_dir).resolve() if package_dir is not None else _package_dir()
    tree = _work_tree(pkg)
    if tree is None:
        return {"commit": None, "dirty": None, "source": "no git work tree"}
    try:
        proc = subprocess.run(["git", "-C", str(tree), "status", "--porcelain=v2", "--branch",
                               "--untracked-files=normal", "--", str(pkg)],
                              capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError:
        return {"commit": None, "dirty": None, "source": "git not found"}
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"commit": None, "dirty": None, "source": f"git failed: {type(exc).__name__}"}
    if proc.returncode != 0:
        msg = (proc.stderr.strip().splitlines() or ["exit status %d" % proc.returncode])[0]
        return {"commit": None, "dirty": None, "source": f"git failed: {msg}"}
    commit, dirty = None, False
    for line in proc.stdout.splitlines():
        if line.startswith("# branch.oid "):
            oid = line.split()[2]
            commit = oid if oid != "(initial)" else None
        elif line and not line.startswith("#"):
            dirty = True
    return {"commit": commit, "dirty": dirty if commit is not None else None, "source": "git"}


def code_label(code: Mapping[str, Any] | None) -> str:
    """A short label of one run's code record: the commit's first 7 digits, ``+dirty`` when modified, or
    :data:`UNKNOWN` when the run recorded no commit.

    >>> code_label({"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": True})
    '0123456+dirty'
    >>> code_label(None)
    'unknown'
    """
    if not code or not code.get("commit"):
        return UNKNOWN
    return str(code["commit"])[:7] + ("+dirty" if code.get("dirty") else "")


def mixed_code_cells(cells: Mapping[str, Sequence[str | None]]) -> dict[str, list[str]]:
    """The cells whose seeds ran on different commits.

    Args:
        cells: cell name -> the commit of each of its runs (full or short hashes; None or :data:`UNKNOWN` for a
            run that recorded none).

    Returns:
        cell -> its sorted distinct commits (:data:`UNKNOWN` included), for the cells with more than one
        distinct value. A cell whose runs all lack a commit is not mixed (nothing shows a difference; the
        report says the code is unknown); one that mixes a known commit with unknown ones is.
    """
    out = {}
    for cell, commits in cells.items():
        distinct = sorted({(c if c else UNKNOWN) for c in commits})
        if len(distinct) > 1:
            out[cell] = distinct
    return out
