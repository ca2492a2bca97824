"""The examples in the package's docstrings run and print what they say."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import deepselect

# every module, those of subpackages (deepselect.bench.timing, ...) included
MODULES = sorted(
    m.name.removeprefix("deepselect.")
    for m in pkgutil.walk_packages(deepselect.__path__, "deepselect.")
    if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"deepselect.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
