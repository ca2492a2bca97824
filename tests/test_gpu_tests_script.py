"""scripts/gpu_tests.sh deals the tests to its parallel shards (checked without running
them: ``GPU_TESTS_DRY=1``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None or not sys.platform.startswith("linux"),
    reason="the GPU machine's script is bash",
)


def split(tmp_path: Path, mode: str, shards: int) -> tuple[list[str], list[list[str]]]:
    """The collected ids and each shard's ids for the tests of test_keys.py."""
    env = dict(os.environ, OUT=str(tmp_path), GPU_TESTS_DRY="1", GPU_TESTS_MARK="")
    env.update(GPU_TESTS_SHARDS=str(shards), GPU_TESTS_SPLIT=mode)
    bindir = str(Path(sys.executable).parent)  # the script calls python3: this one
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", "")])
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_tests.sh"), "tests/test_keys.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    ids = [ln for ln in (tmp_path / "collect.txt").read_text().splitlines() if "::" in ln]
    parts = [(tmp_path / f"shard_{s}.ids").read_text().splitlines() for s in range(shards)]
    return ids, parts


@pytest.mark.parametrize("mode", ["tests", "functions"])
def test_every_test_in_exactly_one_shard_and_shards_balanced(tmp_path, mode):
    ids, parts = split(tmp_path, mode, 4)
    assert len(ids) > 8
    dealt = [t for p in parts for t in p]
    assert sorted(dealt) == sorted(ids)
    cap = -(-len(ids) // 4)
    # round-robin: within one; functions: pieces of at most cap, largest first
    assert max(map(len, parts)) <= (cap if mode == "tests" else 2 * cap)
    assert min(map(len, parts)) >= 1


def test_functions_mode_keeps_a_small_function_in_one_shard(tmp_path):
    ids, parts = split(tmp_path, "functions", 4)
    cap = -(-len(ids) // 4)
    funcs: dict[str, list[str]] = {}
    for t in ids:
        funcs.setdefault(t.split("[")[0], []).append(t)
    for name, tests in funcs.items():
        if len(tests) <= cap:
            holders = [s for s, p in enumerate(parts) if any(t in p for t in tests)]
            assert len(holders) == 1, (name, holders)


def run_script(tmp_path: Path, mode: str, shards: int, dry: bool, k: str = "") -> str:
    """gpu_tests.sh over test_keys.py's tests (``k``: a -k expression); its output."""
    env = dict(os.environ, OUT=str(tmp_path), GPU_TESTS_DRY="1" if dry else "0")
    env.update(GPU_TESTS_MARK="", GPU_TESTS_SHARDS=str(shards), GPU_TESTS_SPLIT=mode)
    env.update(GPU_TESTS_K=k, GPU_TESTS_TIMEOUT="250")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_tests.sh"), "tests/test_keys.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_queue_mode_cuts_functions_into_pieces_largest_first(tmp_path):
    """GPU_TESTS_SPLIT=queue: every test in exactly one piece of at most ceil(tests /
    3P), a function that fits kept in one piece, the pieces numbered largest first."""
    run_script(tmp_path, "queue", 4, dry=True)
    ids = [ln for ln in (tmp_path / "collect.txt").read_text().splitlines() if "::" in ln]
    files = sorted(tmp_path.glob("piece_*.ids"))
    pieces = [f.read_text().splitlines() for f in files]
    assert sorted(t for p in pieces for t in p) == sorted(ids)
    cap = -(-len(ids) // 12)
    assert max(map(len, pieces)) <= cap and len(pieces) > 4
    assert [len(p) for p in pieces] == sorted(map(len, pieces), reverse=True)
    funcs: dict[str, list[str]] = {}
    for t in ids:
        funcs.setdefault(t.split("[")[0], []).append(t)
    for name, tests in funcs.items():
        if len(tests) <= cap:
            assert sum(any(t in p for t in tests) for p in pieces) == 1, name


def test_queue_mode_runs_every_piece_once(tmp_path):
    """The workers of queue mode take every piece once and report each test."""
    out = run_script(tmp_path, "queue", 2, dry=False, k="round_trip or bad_dtype")
    ids = [ln for ln in (tmp_path / "collect.txt").read_text().splitlines() if "::" in ln]
    taken = [t for f in tmp_path.glob("shard_*.ids") for t in f.read_text().splitlines()]
    assert sorted(taken) == sorted(ids) and len(ids) >= 2
    assert f"total: {len(ids)} tests  {len(ids)} passed  0 failed  0 errors" in out, out
    assert out.rstrip().endswith("PASS"), out
