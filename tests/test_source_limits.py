"""The package's source stays readable: no file over 1,000 lines, no function over 200
lines or with more than 30 parameters (a kernel's bundled tuples count once each), no
class of more than 24 annotated fields (the configs). Read from the source with ``ast``."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "deepselect"

MAX_FILE_LINES = 1000
MAX_FUNCTION_LINES = 200
MAX_PARAMETERS = 30
MAX_FIELDS = 24


def over_limits(name: str, source: str) -> list[str]:
    """Each limit ``source`` (the file ``name``) goes past, as a line of text."""
    found = []
    lines = len(source.splitlines())
    if lines > MAX_FILE_LINES:
        found.append(f"{name}: {lines} lines")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            params = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
            params += (a.vararg is not None) + (a.kwarg is not None)
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{name}: {node.name} is {length} lines")
            if params > MAX_PARAMETERS:
                found.append(f"{name}: {node.name} takes {params} parameters")
        elif isinstance(node, ast.ClassDef):
            fields = sum(isinstance(s, ast.AnnAssign) for s in node.body)
            if fields > MAX_FIELDS:
                found.append(f"{name}: {node.name} has {fields} fields")
    return found


def test_the_package_keeps_its_limits():
    found = []
    for path in sorted(PKG.rglob("*.py")):
        found += over_limits(str(path.relative_to(PKG.parent)), path.read_text())
    assert not found, found


def test_the_check_sees_each_limit():
    params = ", ".join(f"a{i}" for i in range(MAX_PARAMETERS + 1))
    body = "\n".join(["    x = 1"] * MAX_FUNCTION_LINES)
    fields = "\n".join(f"    f{i}: int = 0" for i in range(MAX_FIELDS + 1))
    source = f"def wide({params}):\n    pass\n\n\ndef long():\n{body}\n\n\nclass C:\n{fields}\n"
    source += "\n" * MAX_FILE_LINES
    assert over_limits("m.py", source) == [
        f"m.py: {len(source.splitlines())} lines",
        f"m.py: wide takes {MAX_PARAMETERS + 1} parameters",
        f"m.py: long is {MAX_FUNCTION_LINES + 1} lines",
        f"m.py: C has {MAX_FIELDS + 1} fields",
    ]
    # at the limits, nothing
    ok = ", ".join(f"a{i}" for i in range(MAX_PARAMETERS))
    assert over_limits("m.py", f"def f({ok}):\n    pass\n") == []
