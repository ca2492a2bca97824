"""The project's code-size limits, checked on every Python file under ``src/``,
``scripts/``, ``benchmarks/`` and ``tests/``: no file over MAX_FILE_LINES lines, no
function (nested ones and ``@triton.jit`` kernels included) spanning more than
MAX_FUNCTION_LINES lines from its ``def`` to its last line, no function taking more
than MAX_PARAMETERS parameters (positional-only, positional, keyword-only, ``*args``
and ``**kwargs`` each counted), and no class with more than MAX_CLASS_FIELDS
annotated class-level fields (``name: type`` lines, as a dataclass's). The files are
parsed, not imported; the checker is also run on sources that break each limit by
one and on sources that keep each limit exactly."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MAX_FILE_LINES = 1000
MAX_FUNCTION_LINES = 200
MAX_PARAMETERS = 30
MAX_CLASS_FIELDS = 24

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("src", "scripts", "benchmarks", "tests")


def python_files() -> list[Path]:
    """Every ``.py`` file under the checked folders, hidden folders left out."""
    files = []
    for top in CHECKED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if not any(part.startswith(".") for part in path.relative_to(ROOT).parts):
                files.append(path)
    return files


def parameter_count(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    return (
        len(a.posonlyargs)
        + len(a.args)
        + len(a.kwonlyargs)
        + (a.vararg is not None)
        + (a.kwarg is not None)
    )


def class_fields(cls: ast.ClassDef) -> int:
    """Annotated names in the class's own body (``name: type`` with or without a
    value); those of nested classes and methods are not the class's."""
    return sum(isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) for s in cls.body)


def violations(source: str, name: str) -> list[str]:
    """Each limit ``source`` (the text of the file ``name``) breaks, as a line naming
    the file, the line, the function or class and the measure against its limit."""
    found = []
    lines = len(source.splitlines())
    if lines > MAX_FILE_LINES:
        found.append(f"{name}: {lines} lines (at most {MAX_FILE_LINES} a file)")
    try:
        tree = ast.parse(source, filename=name)
    except SyntaxError as e:
        return [*found, f"{name}:{e.lineno}: cannot be parsed ({e.msg})"]

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qual = f"{scope}{child.name}"
                where = f"{name}:{child.lineno}: function {qual}"
                span = child.end_lineno - child.lineno + 1
                if span > MAX_FUNCTION_LINES:
                    found.append(f"{where} spans {span} lines (at most {MAX_FUNCTION_LINES})")
                params = parameter_count(child)
                if params > MAX_PARAMETERS:
                    found.append(f"{where} takes {params} parameters (at most {MAX_PARAMETERS})")
                visit(child, f"{qual}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                qual = f"{scope}{child.name}"
                fields = class_fields(child)
                if fields > MAX_CLASS_FIELDS:
                    found.append(
                        f"{name}:{child.lineno}: class {qual} has {fields} annotated fields "
                        f"(at most {MAX_CLASS_FIELDS})"
                    )
                visit(child, f"{qual}.")
            else:
                visit(child, scope)

    visit(tree, "")
    return found


def test_every_file_keeps_the_limits():
    files = python_files()
    assert len(files) > 50  # the folders were found
    assert ROOT / "tests" / "test_limits.py" in files
    found = []
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        found += violations(path.read_text(encoding="utf-8"), rel)
    assert not found, "code-size limits broken:\n" + "\n".join(found)


def _function(name: str, params: int, body_lines: int, indent: str = "") -> str:
    args = ", ".join(f"a{i}" for i in range(params))
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(body_lines))
    return f"{indent}def {name}({args}):\n{body}"


def _class(name: str, fields: int) -> str:
    return f"class {name}:\n" + "".join(f"    f{i}: int = {i}\n" for i in range(fields))


def test_the_limits_held_exactly_pass():
    """A file of exactly MAX_FILE_LINES lines holding a function of exactly
    MAX_FUNCTION_LINES lines and MAX_PARAMETERS parameters and a class of exactly
    MAX_CLASS_FIELDS fields breaks nothing."""
    source = _function("f", MAX_PARAMETERS, MAX_FUNCTION_LINES - 1)
    source += _class("C", MAX_CLASS_FIELDS)
    pad = MAX_FILE_LINES - len(source.splitlines())
    source += "# padding\n" * pad
    assert len(source.splitlines()) == MAX_FILE_LINES
    assert violations(source, "ok.py") == []


@pytest.mark.parametrize("limit", ["file", "function", "parameters", "fields", "syntax"])
def test_each_limit_broken_by_one_is_named(limit, tmp_path):
    """One past each limit, in a file written out and checked as the suite checks
    the project's files: the message names the file, the line and the function or
    class (a nested function by its enclosing one's name, a method by its class's)
    and the measure."""
    if limit == "file":
        source = "x = 1\n" * (MAX_FILE_LINES + 1)
        want = [f"big.py: {MAX_FILE_LINES + 1} lines (at most {MAX_FILE_LINES} a file)"]
    elif limit == "function":  # a decorated kernel nested in a function: both too long
        source = "import triton\n\n\ndef outer():\n    @triton.jit\n"
        source += _function("kernel", 1, MAX_FUNCTION_LINES, indent="    ")
        want = [
            f"big.py:4: function outer spans {MAX_FUNCTION_LINES + 3} lines "
            f"(at most {MAX_FUNCTION_LINES})",
            f"big.py:6: function outer.<locals>.kernel spans {MAX_FUNCTION_LINES + 1} lines "
            f"(at most {MAX_FUNCTION_LINES})",
        ]
    elif limit == "parameters":  # each kind of parameter counted
        names = [f"a{i}" for i in range(MAX_PARAMETERS - 4)]
        sig = f"self, {', '.join(names)}, /, p, *args, k, **kw"
        source = f"class Host:\n    def method({sig}):\n        pass\n"
        want = [
            f"big.py:2: function Host.method takes {MAX_PARAMETERS + 1} parameters "
            f"(at most {MAX_PARAMETERS})"
        ]
    elif limit == "fields":
        source = "import dataclasses\n\n\n@dataclasses.dataclass\n"
        source += _class("Config", MAX_CLASS_FIELDS + 1)
        want = [
            f"big.py:5: class Config has {MAX_CLASS_FIELDS + 1} annotated fields "
            f"(at most {MAX_CLASS_FIELDS})"
        ]
    else:
        source = "def f(:\n"
        want = None
    path = tmp_path / "big.py"
    path.write_text(source)
    got = violations(path.read_text(), "big.py")
    if want is None:
        assert len(got) == 1 and got[0].startswith("big.py:1: cannot be parsed"), got
    else:
        assert got == want
