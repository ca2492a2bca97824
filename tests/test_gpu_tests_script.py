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
    run_script(tmp_path, mode, shards, dry=True)
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


def run_script(
    tmp_path: Path, mode: str, shards: int, dry: bool, k: str = "", seconds: int = 250,
    status: int = 0,
) -> str:  # fmt: skip
    """gpu_tests.sh over test_keys.py's tests (``k``: a -k expression; ``seconds`` its
    GPU_TESTS_TIMEOUT), which must exit with ``status``; its output."""
    env = dict(os.environ, OUT=str(tmp_path), GPU_TESTS_DRY="1" if dry else "0")
    env.update(GPU_TESTS_MARK="", GPU_TESTS_SHARDS=str(shards), GPU_TESTS_SPLIT=mode)
    env.update(GPU_TESTS_K=k, GPU_TESTS_TIMEOUT=str(seconds))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_tests.sh"), "tests/test_keys.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == status, r.stdout + r.stderr
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
    assert (tmp_path / "unfinished.ids").read_text() == ""


def test_queue_mode_lists_the_tests_the_time_ran_out_on(tmp_path):
    """A queue run whose time runs out fails, and names the tests of the pieces cut
    or never started in unfinished.ids, for a run of their own (no time at all: no
    piece starts, whatever the machine's speed)."""
    out = run_script(tmp_path, "queue", 1, dry=False, k="round_trip or bad_dtype", seconds=0,
                     status=1)  # fmt: skip
    ids = [ln for ln in (tmp_path / "collect.txt").read_text().splitlines() if "::" in ln]
    left = (tmp_path / "unfinished.ids").read_text().splitlines()
    assert len(ids) >= 2 and sorted(left) == sorted(ids), (left, ids)
    assert f"{len(ids)} tests not finished in time" in out, out


def test_queue_mode_orders_pieces_by_their_cost(tmp_path):
    """With a costs file, the pieces go longest expected first, and a function whose
    tests cost much more than the others' is cut into pieces of at most a 3P-th of
    the expected total, one test at least."""
    ids = [f"t.py::cheap[{i}]" for i in range(12)] + [f"t.py::dear[{i}]" for i in range(6)]
    ids += ["t.py::unknown[0]", "t.py::unknown[1]"]
    costs = tmp_path / "costs.txt"
    costs.write_text("# seconds per test\nt.py::cheap 1.0\nt.py::dear 20.0\n")
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_test_pieces.py"), "split", str(tmp_path),
         "2", "queue", str(costs)],
        input="\n".join(ids) + "\n", capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    pieces = [f.read_text().split() for f in sorted(tmp_path.glob("piece_*.ids"))]
    assert sorted(t for p in pieces for t in p) == sorted(ids)
    cost = {"cheap": 1.0, "dear": 20.0, "unknown": 10.5}  # unknown: the median
    est = [cost[p[0].split("::")[1].split("[")[0]] * len(p) for p in pieces]
    assert est == sorted(est, reverse=True)
    budget = (12 * 1.0 + 6 * 20.0 + 2 * 10.5) / 6
    for p, e in zip(pieces, est, strict=True):  # over the budget by less than one test
        assert e < budget + e / len(p), p
    assert max(len(p) for p in pieces if "dear" in p[0]) < 6  # cut: 120 s > budget


def test_costs_of_a_queue_run(tmp_path):
    """``costs`` reads each finished piece's time off pytest's summary line, per test
    of its function; a piece cut by the deadline or failed counts for nothing."""
    pieces = {
        "piece_0000": (["a.py::f[0]", "a.py::f[1]"], "2 passed in 10.00s", "0"),
        "piece_0001": (["a.py::f[2]"], "1 passed in 2.00s", "0"),
        "piece_0002": (["a.py::g[0]"], "..", "124"),
        "piece_0003": (["a.py::h[0]"], "1 failed in 3.00s", "1"),
    }
    for name, (tests, log, rc) in pieces.items():
        (tmp_path / f"{name}.ids").write_text("\n".join(tests) + "\n")
        (tmp_path / f"{name}.log").write_text(log + "\n")
        (tmp_path / f"{name}.rc").write_text(rc + "\n")
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_test_pieces.py"), "costs", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines() if not ln.startswith("#")]
    assert rows == [["a.py::f", "4.00"]]
