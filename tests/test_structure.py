"""The package's imports flow one way: kernels never import the layers that call them,
the API never imports the integrations built on it, and no two modules import each
other (directly or through others). Read from the source, so a lazy import inside a
function counts as much as one at the top."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "deepselect"

# lowest first: a module may import modules of its own layer or below
LAYERS = [
    ("base", ["_log", "_numba_cache", "keys", "options", "oracle", "reference", "distributions",
              "runinfo", "launch_cache"]),  # fmt: skip
    ("kernels", ["ops", "cpu_omp", "cpu_backend", "cpu_small"]),
    ("backends", ["triton_backend", "triton_short", "triton_bracket", "triton_sampling"]),
    ("api", ["api"]),
    ("integration", ["torch_ops", "engine", "distributed", "lightning_indexer"]),
    ("tools", ["bench", "experiments", "cli", "__main__", "__init__"]),
]


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, name: str) -> set[str]:
    """The package's modules that ``path`` imports (their dotted names in the package)."""
    tree = ast.parse(path.read_text())
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)] if node.level > 1 else list(here)
                mod = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("deepselect"):
                mod = node.module.removeprefix("deepselect").lstrip(".")
            else:
                continue
            for alias in node.names:
                sub = f"{mod}.{alias.name}" if mod else alias.name
                out.add(sub if (PKG / sub.replace(".", "/")).with_suffix(".py").exists()
                        or (PKG / sub.replace(".", "/")).is_dir() else mod)  # fmt: skip
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("deepselect."):
                    out.add(alias.name.removeprefix("deepselect."))
    return {m for m in out if m and m != name}


def graph() -> dict[str, set[str]]:
    mods = {_module_name(p): p for p in PKG.rglob("*.py")}
    return {name: _imports(p, name) & set(mods) for name, p in mods.items()}


def _layer(module: str) -> int:
    top = module.split(".")[0]
    for i, (_, names) in enumerate(LAYERS):
        if top in names:
            return i
    raise AssertionError(f"{module}: in no layer of tests/test_structure.py")


def test_every_module_has_a_layer():
    for module in graph():
        _layer(module)


def test_imports_flow_down_the_layers():
    bad = [
        f"{m} ({LAYERS[_layer(m)][0]}) imports {d} ({LAYERS[_layer(d)][0]})"
        for m, deps in graph().items()
        for d in deps
        if _layer(d) > _layer(m)
    ]
    assert not bad, "\n".join(bad)


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk of ``g`` closes (empty where there is none)."""
    done, path, found = set(), [], []

    def visit(m: str) -> None:
        if m in path:
            found.append(path[path.index(m):] + [m])
            return
        if m in done:
            return
        path.append(m)
        for d in sorted(g.get(m, ())):
            visit(d)
        path.pop()
        done.add(m)

    for m in sorted(g):
        visit(m)
    return found


def test_no_import_cycles():
    assert not cycles(graph())


def test_the_check_sees_a_cycle(tmp_path, monkeypatch):
    """The cycle search finds one where two modules import each other."""
    pkg = tmp_path / "deepselect"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "keys.py").write_text("from .options import X\n")
    (pkg / "options.py").write_text("def f():\n    from .keys import Y\n")
    monkeypatch.setattr(__import__(__name__), "PKG", pkg)
    g = graph()
    assert g["keys"] == {"options"} and g["options"] == {"keys"}
    assert cycles(g) == [["keys", "options", "keys"]]


def test_readme_layout_names_every_module():
    """README's layout table names every module of the package (a folder's row, such as
    ``deepselect/bench/``, covers the modules in it)."""
    readme = (PKG.parents[1] / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    folders = {line.split("`")[1] for line in layout.splitlines() if line.startswith("| `")}
    missing = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).as_posix()
        if path.name in ("__init__.py", "__main__.py"):
            continue
        if any(f.endswith("/") and rel.startswith(f) for f in folders):
            continue
        if f"`{rel}`" not in layout and f"`{path.name}`" not in layout:
            missing.append(rel)
    assert not missing, f"README.md's layout table does not name: {missing}"
