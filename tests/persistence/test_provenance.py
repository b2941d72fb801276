"""Code provenance: the commit and dirty flag of the package's git tree, recorded in summary.json."""

import subprocess

import pytest

from lcpo.online.run import RunConfig, execute
from lcpo.persistence.provenance import UNKNOWN, code_label, code_provenance, mixed_code_cells


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "proj"
    pkg = root / "src" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "mod.py").write_text("x = 1\n")
    (root / "README.md").write_text("hi\n")
    _git(root, "init", "-q")
    _git(root, "-c", "user.email=a@b", "-c", "user.name=a", "add", "-A")
    _git(root, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "init")
    return root, pkg


def test_commit_and_dirty_flag_follow_the_package_tree(repo):
    root, pkg = repo
    head = _git(root, "rev-parse", "HEAD")
    assert code_provenance(pkg) == {"commit": head, "dirty": False, "source": "git"}
    (root / "README.md").write_text("changed elsewhere\n")  # outside the package: still clean
    assert code_provenance(pkg)["dirty"] is False
    (pkg / "new.py").write_text("y = 2\n")  # an untracked module in the package
    assert code_provenance(pkg)["dirty"] is True
    (pkg / "new.py").unlink()
    (pkg / "mod.py").write_text("x = 2\n")  # a modified tracked module
    assert code_provenance(pkg) == {"commit": head, "dirty": True, "source": "git"}


def test_no_repository_no_git_or_an_installed_copy_give_none(tmp_path, monkeypatch):
    plain = tmp_path / "plain" / "pkg"
    plain.mkdir(parents=True)
    assert code_provenance(plain) == {"commit": None, "dirty": None, "source": "no git work tree"}
    installed = tmp_path / "venv" / "lib" / "site-packages" / "pkg"
    installed.mkdir(parents=True)
    (tmp_path / ".git").mkdir()  # an enclosing repository does not describe an installed copy
    assert code_provenance(installed)["commit"] is None
    fake = tmp_path / "repo2" / "pkg"
    fake.mkdir(parents=True)
    (tmp_path / "repo2" / ".git").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert code_provenance(fake) == {"commit": None, "dirty": None, "source": "git not found"}


def test_broken_repository_is_reported_not_raised(tmp_path):
    pkg = tmp_path / "r" / "pkg"
    pkg.mkdir(parents=True)
    (tmp_path / "r" / ".git").write_text("gitdir: /nonexistent\n")
    rec = code_provenance(pkg)
    assert rec["commit"] is None and rec["dirty"] is None and rec["source"].startswith("git failed")


def test_labels_and_mixed_cells():
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert code_label({"commit": sha, "dirty": False}) == "0123456"
    assert code_label({"commit": sha, "dirty": True}) == "0123456+dirty"
    assert code_label({"commit": None, "dirty": None}) == code_label(None) == UNKNOWN
    cells = {"wind-1/lcpo": ["45a036a", "ea600fc", "633759d"], "wind-3/lcpo": ["c2d58c0"] * 3,
             "wind-1/sac": [None], "old": [None, UNKNOWN], "half": ["c2d58c0", None]}
    assert mixed_code_cells(cells) == {"wind-1/lcpo": ["45a036a", "633759d", "ea600fc"],
                                       "half": ["c2d58c0", UNKNOWN]}


def test_run_summary_records_the_code(tmp_path):
    cfg = RunConfig(trace="wind-3", trace_length=2000, agent="a2c", steps=400, seed=0, checkpoint_every=400)
    s = execute(cfg, tmp_path / "r")
    assert s["code"] == code_provenance()
    assert set(s["code"]) == {"commit", "dirty", "source"}
