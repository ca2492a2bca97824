"""The examples in the package's docstrings run and print what they say."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import deepselect

MODULES = sorted(m.name for m in pkgutil.iter_modules(deepselect.__path__) if m.name != "__main__")


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"deepselect.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
