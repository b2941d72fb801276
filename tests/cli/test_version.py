"""`lcpo --version` names the package version and the code it runs; every command's errors share argparse's
`lcpo COMMAND: error:` prefix."""

import re
import subprocess
import sys

import pytest

import lcpo
from lcpo.cli.main import main, version_line
from lcpo.persistence.provenance import code_provenance


def test_version_prints_the_version_and_the_commit_of_the_imported_tree(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    out = capsys.readouterr().out.strip()
    code = code_provenance()
    assert out.startswith(f"lcpo {lcpo.__version__} (commit ")
    if code["commit"]:
        assert re.fullmatch(rf"lcpo {re.escape(lcpo.__version__)} \(commit {code['commit'][:7]}(\+dirty)?\)", out)
        assert out.endswith("+dirty)") == bool(code["dirty"])
    else:
        assert out == f"lcpo {lcpo.__version__} (commit unknown: {code['source']})"


def test_version_of_a_copy_outside_any_work_tree_says_why_there_is_no_commit(monkeypatch):
    import lcpo.persistence.provenance as provenance

    monkeypatch.setattr(provenance, "code_provenance",
                        lambda: {"commit": None, "dirty": None, "source": "no git work tree"})
    assert version_line() == f"lcpo {lcpo.__version__} (commit unknown: no git work tree)"


def test_version_from_the_installed_command_exits_zero():
    proc = subprocess.run([sys.executable, "-m", "lcpo.cli.main", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith(f"lcpo {lcpo.__version__} (commit "), proc.stderr


def test_python_dash_m_lcpo_is_the_lcpo_command():
    """`python -m lcpo` failed ("No module named lcpo.__main__"); it is the command, exit status included."""
    proc = subprocess.run([sys.executable, "-m", "lcpo", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith(f"lcpo {lcpo.__version__} (commit "), proc.stderr
    proc = subprocess.run([sys.executable, "-m", "lcpo", "run", "--steps", "0"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("lcpo run: error: argument --steps"), proc.stderr


@pytest.mark.parametrize("argv, prefix", [
    (["run", "--agent", "a2c", "--set", "gamma=2", "--steps", "50"], "lcpo run: error: "),
    (["report", "/nonexistent/lcpo-sweep-folder"], "lcpo report: error: "),
    (["traces", "plot", "no-such-trace", "--out", "t.png"], "lcpo traces: error: "),
])
def test_errors_carry_the_commands_prefix_as_argparse_does(tmp_path, capsys, monkeypatch, argv, prefix):
    monkeypatch.chdir(tmp_path)
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(prefix) and err.count("\n") == 1, err
    # argparse's own errors of the same command read the same
    with pytest.raises(SystemExit):
        main([argv[0], "--no-such-option-anywhere"])
    assert capsys.readouterr().err.splitlines()[-1].startswith(prefix)
