"""The package layout (issue 24, item 11): subpackages by role, no import cycle in ``ood``, old names still import."""

import ast
import importlib
from pathlib import Path

import lcpo

SRC = Path(lcpo.__file__).resolve().parent


def test_package_root_holds_only_subpackages():
    """Beside the subpackages, only ``__init__.py`` and ``__main__.py`` (``python -m lcpo``, the CLI's entry)."""
    modules = sorted(p.name for p in SRC.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert modules == []


def _lcpo_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lcpo"):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("lcpo"))
    return names


def test_no_import_cycle_between_ood_modules():
    graph = {p.stem: {m.rsplit(".", 1)[-1] for m in _lcpo_imports(p) if m.startswith("lcpo.ood.")}
             for p in (SRC / "ood").glob("*.py") if p.stem != "__init__"}

    def reaches(a, b, seen=()):
        return any(n == b or (n not in seen and reaches(n, b, seen + (n,))) for n in graph.get(a, ()))

    cyclic = [m for m in graph if reaches(m, m)]
    assert cyclic == [], graph
    assert graph["calibration"] == {"gaussian"} and "calibration" in graph["detectors"]


def test_moved_modules_import_under_their_old_names_as_the_same_object():
    assert len(lcpo.MOVED) == 15
    for old, new in lcpo.MOVED.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
    from lcpo.loop import Transition
    from lcpo.online.loop import Transition as T2
    assert Transition is T2


def test_gridworld_experiment_lives_with_the_experiments():
    assert (SRC / "experiments" / "gridworld.py").is_file()
    assert not (SRC / "gridworld_experiment.py").exists()
