"""scripts/gpu_run.sh cuts the GPU tests into a queue of pieces and runs them in parallel
workers (checked here on the CPU over light tests in projects of their own, the benchmark
left out)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None or not sys.platform.startswith("linux"),
    reason="the GPU machine's script is bash",
)


KEYS_LIKE = """import pytest


@pytest.mark.parametrize("dtype", range(4))
@pytest.mark.parametrize("kind", range(4))
def test_keys_preserve_order(dtype, kind):
    pass


@pytest.mark.parametrize("dtype", range(4))
def test_largest_false_mirrors(dtype):
    pass


@pytest.mark.parametrize("dtype", range(4))
@pytest.mark.parametrize("largest", [True, False])
def test_round_trip(dtype, largest):
    pass


@pytest.mark.parametrize("dtype", range(4))
def test_key_range(dtype):
    pass


@pytest.mark.parametrize("a", range(3))
def test_pairwise_order(a):
    pass


def test_bad_dtype():
    pass
"""
"""A test module shaped like test_keys.py (36 tests in six functions of 1 to 16
parametrisations) that imports nothing heavy: each of the script's pytest processes
starts in a fraction of a second."""


def run_script(
    tmp_path: Path, workers: int, dry: bool, k: str = "", seconds: int = 250, status: int = 0,
    target: str | None = None,
) -> str:  # fmt: skip
    """gpu_run.sh over :data:`KEYS_LIKE`'s tests (or ``target``: a file of their ids),
    every marker (``k``: a -k expression; ``seconds`` its TESTS_TIMEOUT), in a project
    of its own beside ``tmp_path``, its logs in ``tmp_path``; it must exit with
    ``status``; its output."""
    project = tmp_path.with_name(tmp_path.name + "-project")
    r = run_own_project(
        project, "test_keys_like.py", KEYS_LIKE, *([target] if target else []),
        OUT=str(tmp_path), TESTS_DRY="1" if dry else "0", WORKERS=str(workers), TESTS_K=k,
        TESTS_TIMEOUT=str(seconds),
    )  # fmt: skip
    assert r.returncode == status, r.stdout + r.stderr
    return r.stdout


def collected(tmp_path: Path) -> list[str]:
    return [ln for ln in (tmp_path / "collect.txt").read_text().splitlines() if "::" in ln]


def test_functions_cut_into_pieces_largest_first(tmp_path):
    """Every test in exactly one piece of at most ceil(tests / 3P), a function that
    fits kept in one piece, the pieces numbered largest first."""
    run_script(tmp_path, 4, dry=True)
    ids = collected(tmp_path)
    pieces = [f.read_text().splitlines() for f in sorted(tmp_path.glob("piece_*.ids"))]
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


def test_workers_run_every_piece_once(tmp_path):
    """The workers take every piece once and report each test; the tally is printed."""
    out = run_script(tmp_path, 2, dry=False, k="round_trip or bad_dtype")
    ids = collected(tmp_path)
    taken = [t for f in tmp_path.glob("worker_*.ids") for t in f.read_text().splitlines()]
    assert sorted(taken) == sorted(ids) and len(ids) >= 2
    assert f"total: {len(ids)} tests  {len(ids)} passed  0 failed  0 errors" in out, out
    assert out.rstrip().endswith("PASS"), out
    assert (tmp_path / "unfinished.ids").read_text() == ""
    assert (tmp_path / "test_costs.txt").read_text().startswith("# seconds per test")


def test_the_tests_the_time_ran_out_on_are_listed(tmp_path):
    """A run whose time runs out fails, and names the tests of the pieces cut or never
    started in unfinished.ids (no time at all: no piece starts, whatever the
    machine's speed); that file, given back, runs just those tests."""
    out = run_script(tmp_path, 1, dry=False, k="round_trip or bad_dtype", seconds=0, status=1)
    ids = collected(tmp_path)
    left = (tmp_path / "unfinished.ids").read_text().splitlines()
    assert len(ids) >= 2 and sorted(left) == sorted(ids), (left, ids)
    assert f"{len(ids)} tests not finished in time" in out, out
    again = tmp_path / "again"
    shutil.copy(tmp_path / "unfinished.ids", tmp_path / "left.ids")
    run_script(again, 1, dry=True, target=str(tmp_path / "left.ids"))
    assert sorted(collected(again)) == sorted(ids)


def pieces_script(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """``scripts/gpu_test_pieces.py`` with ``args`` (and ``stdin``), finished."""
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_test_pieces.py"), *args],
        input=stdin, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def split_pieces(out: Path, ids: list[str], costs: str) -> list[list[str]]:
    """``split`` of ``ids`` for two workers with ``costs`` (the costs file's text) into
    ``out``: the pieces in order, which hold every test once."""
    path = out / "costs.txt"
    path.write_text(costs)
    r = pieces_script("split", str(out), "2", str(path), stdin="\n".join(ids) + "\n")
    assert r.returncode == 0, r.stderr
    pieces = [f.read_text().split() for f in sorted(out.glob("piece_*.ids"))]
    assert sorted(t for p in pieces for t in p) == sorted(ids)
    return pieces


def run_own_project(tmp_path: Path, name: str, source: str, *args: str, **env_vars: str):
    """gpu_run.sh (with ``args``) in a project of its own: the script and
    ``tests/<name>`` holding ``source``; the finished process."""
    (tmp_path / "scripts").mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    for script in ("gpu_run.sh", "gpu_test_pieces.py", "gpu_test_costs.txt"):
        shutil.copy(ROOT / "scripts" / script, tmp_path / "scripts" / script)
    (tmp_path / "tests" / name).write_text(source)
    env = dict(os.environ, OUT=str(tmp_path / "out"), BENCH="0", TESTS_MARK="", WORKERS="2")
    env.update(env_vars)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return subprocess.run(
        ["bash", str(tmp_path / "scripts" / "gpu_run.sh"), *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_failing_test_fails_the_run(tmp_path):
    """In a project of its own (the script, two tests, one failing), the run fails and
    names the failed test."""
    r = run_own_project(
        tmp_path, "test_fails.py",
        "def test_ok():\n    pass\n\n\ndef test_fails():\n    assert 1 == 2\n",
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "total: 2 tests  1 passed  1 failed  0 errors" in r.stdout, r.stdout
    assert "FAILED tests/test_fails.py::test_fails" in r.stdout


def test_a_piece_cut_by_the_deadline_keeps_what_it_finished(tmp_path):
    """A piece the deadline cuts counts the tests it finished, one error for the test
    it was in, and lists only the tests with no outcome as unfinished."""
    source = (
        "import time\n\nimport pytest\n\n\n"
        "@pytest.mark.parametrize('i', range(3))\n"
        "def test_step(i):\n    if i == 2:\n        time.sleep(60)\n"
    )
    r = run_own_project(tmp_path, "test_slow.py", source, WORKERS="1", TESTS_TIMEOUT="8")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "total: 3 tests  2 passed  0 failed  1 errors" in r.stdout, r.stdout
    left = (tmp_path / "out" / "unfinished.ids").read_text().splitlines()
    assert left == ["tests/test_slow.py::test_step[2]"], left


def test_pieces_ordered_by_their_cost(tmp_path):
    """With a costs file, the pieces go longest expected first, and a function whose
    tests cost much more than the others' is cut into pieces of at most a 3P-th of
    the expected total, one test at least."""
    ids = [f"t.py::cheap[{i}]" for i in range(12)] + [f"t.py::dear[{i}]" for i in range(6)]
    ids += ["t.py::unknown[0]", "t.py::unknown[1]"]
    costs = "# seconds per test\nt.py::cheap 1.0\nt.py::dear 20.0\n"
    pieces = split_pieces(tmp_path, ids, costs)
    cost = {"cheap": 1.0, "dear": 20.0, "unknown": 10.5}  # unknown: the median
    est = [cost[p[0].split("::")[1].split("[")[0]] * len(p) for p in pieces]
    assert est == sorted(est, reverse=True)
    budget = (12 * 1.0 + 6 * 20.0 + 2 * 10.5) / 6
    for p, e in zip(pieces, est, strict=True):  # over the budget by less than one test
        assert e < budget + e / len(p), p
    assert max(len(p) for p in pieces if "dear" in p[0]) < 6  # cut: 120 s > budget


def test_costs_of_a_run(tmp_path):
    """``costs`` reads each finished piece's time off pytest's summary line, per test
    of its function; a piece cut by the deadline or failed counts for nothing. A
    function whose pieces compiled the same kernels is marked ``whole``, and so is one
    the costs the run was split by marked so."""
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

    def costs(*before: str):
        r = pieces_script("costs", str(tmp_path), *before)
        assert r.returncode == 0, r.stderr
        return [ln.split() for ln in r.stdout.splitlines() if not ln.startswith("#")]

    assert costs() == [["a.py::f", "4.00"]]
    # two processes compiled f's two kernels each (f's pieces share them): f is "whole"
    log = [(pid, "k", key, "0", "1.0", "0", "a.py::f") for pid in "12" for key in ("h1", "h2")]
    (tmp_path / "compiles.tsv").write_text("".join("\t".join(r) + "\n" for r in log))
    assert costs() == [["a.py::f", "4.00", "whole"]]
    # kept in one piece by the costs the run was split by, f compiles once: still whole
    (tmp_path / "compiles.tsv").write_text("".join("\t".join(r) + "\n" for r in log[:2]))
    assert costs() == [["a.py::f", "4.00"]]
    (tmp_path / "before.txt").write_text("# seconds per test\na.py::f 9.0 whole\n")
    assert costs(str(tmp_path / "before.txt")) == [["a.py::f", "4.00", "whole"]]


def test_a_whole_function_stays_in_one_piece(tmp_path):
    """A function the costs file marks ``whole`` is not cut, however long; the same
    function without the mark is."""
    ids = [f"t.py::cheap[{i}]" for i in range(12)] + [f"t.py::dear[{i}]" for i in range(6)]
    for mark, want in (("", False), (" whole", True)):
        out = tmp_path / (mark.strip() or "cut")
        out.mkdir()
        costs = f"# seconds per test\nt.py::cheap 1.0\nt.py::dear 20.0{mark}\n"
        pieces = split_pieces(out, ids, costs)
        dear = [p for p in pieces if "dear" in p[0]]
        assert (len(dear) == 1) == want, dear


def test_compiles_of_a_run(tmp_path):
    """``compiles`` sums the compile log's misses (a cache hit costs nothing), counts
    each hash once for the distinct total, and the seconds of a hash that a second
    process compiled again as repeated; by kernel, then by test function, largest
    first (a line of an older log, without its test, under "?")."""
    log = [
        ("1", "a_kernel", "h1", "0", "10.0", "0", "t.py::test_a"),
        ("2", "a_kernel", "h1", "0", "12.0", "0", "t.py::test_b"),  # the same again
        ("1", "a_kernel", "h2", "0", "5.0", "0", "t.py::test_a"),
        ("1", "b_kernel", "h3", "0", "30.0", "0", "t.py::test_b"),
        ("3", "b_kernel", "h3", "1", "0.1", "0", "t.py::test_c"),  # a hit
        ("4", "b_kernel", "h4", "0", "2.0"),  # no test column
    ]
    (tmp_path / "compiles.tsv").write_text("".join("\t".join(r) + "\n" for r in log))
    r = pieces_script("compiles", str(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == (
        "compiles: 5 (4 distinct) in 59 s; 12 s on specialisations another process also compiled"
    )
    at = lines.index(next(ln for ln in lines if ln.endswith(" test")))
    assert lines[1].endswith(" kernel")
    by_kernel = [ln.split() for ln in lines[2:at]]
    assert by_kernel == [["32", "2", "2", "b_kernel"], ["27", "3", "2", "a_kernel"]]
    by_test = [ln.split() for ln in lines[at + 1 :]]
    assert by_test == [
        ["42", "2", "2", "t.py::test_b"], ["15", "2", "2", "t.py::test_a"], ["2", "1", "1", "?"],
    ]  # fmt: skip


COMPILE_ONE = """
import os, sys
import conftest
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

@triton.jit
def _add_one(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) + 1)

conftest._log_compiles(sys.argv[1])
os.environ["PYTEST_CURRENT_TEST"] = "tests/t.py::test_x[a-1] (call)"
triton.compile(ASTSource(_add_one, signature={"x_ptr": "*i32"}), target=GPUTarget("cuda", 90, 32))
"""


def test_the_compile_log_names_the_test(tmp_path):
    """The conftest's compile listener (``DEEPSELECT_COMPILE_LOG``) writes a line a
    compile: process, kernel, hash, a miss, seconds, time, and the test function that
    asked for it (a kernel built for sm_90 here, in a process of its own)."""
    log = tmp_path / "compiles.tsv"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env.update(TRITON_INTERPRET="0", TRITON_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    script = tmp_path / "compile_one.py"  # (Triton reads a kernel's source from its file)
    script.write_text(COMPILE_ONE)
    r = subprocess.run(
        [sys.executable, str(script), str(log)], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    (line,) = log.read_text().splitlines()
    pid, kernel, key, hit, seconds, _, test = line.split("\t")
    assert (kernel, hit, test) == ("_add_one", "0", "tests/t.py::test_x"), line
    assert int(pid) > 0 and len(key) == 64 and float(seconds) > 0


def test_the_script_runs_no_deleted_program():
    text = (ROOT / "scripts" / "gpu_run.sh").read_text()
    for name in ("kernel_table", "short_table", "read_ceiling", "gpu_tests.sh"):
        assert name not in text


def test_pack_leaves_a_handful_of_files(tmp_path, monkeypatch):
    """PACK=1: the pieces' and workers' files and the compile log go into one archive;
    the tally, the costs, the compiles' summary and the unfinished ids stay beside it."""
    monkeypatch.setenv("PACK", "1")
    run_script(tmp_path, 1, dry=False, k="key_range")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "compiles.txt", "gpu.txt", "pieces.tar.gz", "pytest.txt", "test_costs.txt",
        "unfinished.ids",
    ]  # fmt: skip
    with tarfile.open(tmp_path / "pieces.tar.gz") as tar:
        packed = tar.getnames()
    assert "collect.txt" in packed and any(n.startswith("piece_") for n in packed)
    assert any(n.startswith("worker_") for n in packed)
