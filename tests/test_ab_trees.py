"""scripts/ab_trees.sh: a command run with a commit's src/ and the working tree's in
turns, on one machine (the trees' own packages imported, each output line tagged)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("git") is None or not (ROOT / ".git").exists(),
    reason="needs bash and a git checkout",
)

WHERE = "import importlib.util as u; print(u.find_spec('deepselect').origin)"


def ab(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "ab_trees.sh"), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_each_tree_runs_its_own_package_in_turns(tmp_path):
    env = {**os.environ, "AB_DIR": str(tmp_path / "ab"), "OUT": str(tmp_path)}
    env.pop("PYTHONPATH", None)
    r = ab("prepare", "HEAD", env=env)
    assert r.returncode == 0, r.stderr
    tree = tmp_path / "ab" / "HEAD" / "src"
    assert (tree / "deepselect" / "__init__.py").is_file()
    r = ab("run", "HEAD", "2", "--", sys.executable, "-c", WHERE, env=env)
    assert r.returncode == 0, r.stderr
    want = [f"[HEAD {i}] {tree / 'deepselect' / '__init__.py'}" for i in (1, 2)]
    new = [f"[new {i}] {ROOT / 'src' / 'deepselect' / '__init__.py'}" for i in (1, 2)]
    assert r.stdout.splitlines() == [want[0], new[0], want[1], new[1]], r.stdout
    assert (tmp_path / "ab.txt").read_text() == r.stdout


def test_a_failing_command_or_a_missing_tree_fails_the_run(tmp_path):
    env = {**os.environ, "AB_DIR": str(tmp_path / "ab")}
    assert ab("run", "HEAD", "--", sys.executable, "-c", "1", env=env).returncode == 2
    assert ab("prepare", "HEAD", env=env).returncode == 0
    r = ab("run", "HEAD", "1", "--", sys.executable, "-c", "raise SystemExit(3)", env=env)
    assert r.returncode == 1
    assert ab("run", "HEAD", env=env).returncode == 2  # no command
