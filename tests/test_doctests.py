"""Every docstring example in the package runs and prints what it shows (they rot silently otherwise)."""

import doctest
import importlib
import pkgutil

import pytest

import lcpo

MODULES = sorted(m.name for m in pkgutil.walk_packages(lcpo.__path__, "lcpo.") if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples failed in {name}"
