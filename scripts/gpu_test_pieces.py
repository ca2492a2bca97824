"""How scripts/gpu_run.sh cuts the GPU tests into pieces, and what a run's pieces cost.

    python3 scripts/gpu_test_pieces.py split OUT P [COSTS] < ids
    python3 scripts/gpu_test_pieces.py costs OUT > costs.txt
    python3 scripts/gpu_test_pieces.py compiles OUT > compiles.txt
    python3 scripts/gpu_test_pieces.py tally OUT TESTS COLLECT_ERRORS SECONDS > pytest.txt

``split``: each test function's parametrisations stay together (they share kernel
specialisations, and compiling them is most of the GPU suite's time), cut into
pieces of at most ceil(tests / 3P) written as OUT/piece_<j>.ids, which P workers
take in order. With COSTS (a file of ``function seconds-per-test`` lines, as
``costs`` writes them) a piece also holds at most a 3P-th of the estimated total
time, and the pieces go in order of estimated time, longest first, so that a long
piece does not start late and outlast the deadline. Functions COSTS does not name
are taken at the largest cost (a test that never finished in time has no cost, and
must not start last again).

``costs``: from a run's OUT/piece_<j>.ids, .log and .rc, each function's seconds
per test (pieces that ran to the end only, one function per piece), for the next
run's COSTS; ``whole`` after a function whose pieces compiled the same kernels in
several processes (OUT/compiles.tsv), which ``split`` then keeps in one piece, and
after one the run's own COSTS (``costs OUT COSTS``) marked so.

``compiles``: from OUT/compiles.tsv (one line a Triton compile: process, kernel,
hash, cache hit, seconds, time, test function, as the tests' conftest writes it where
``DEEPSELECT_COMPILE_LOG`` names the file), where the compiling time went: in all,
on distinct specialisations, on specialisations compiled by more than one process
(the workers share one cache, but two that miss it at once both compile), by
kernel, and by test function (the :data:`TOP_TESTS` largest), largest first.

``tally``: from OUT/results.tsv (each test phase's outcome as it ended, as this
module's pytest hook writes it where ``DEEPSELECT_TEST_LOG`` names the file), the workers' pieces
and each piece's exit status, each worker's and the run's tests passed, failed,
errors and skipped, and OUT/unfinished.ids: the tests with no outcome (a piece cut
by the deadline loses only its unfinished tests). A piece cut by the deadline or
crashed counts one error more (the test it was in).
"""

from __future__ import annotations

import math
import os
import re
import sys
from pathlib import Path

TOP_TESTS = 25
"""Test functions listed in ``compiles``' summary."""
FAILED, MAX_FAILED = ("FAILED ", "ERROR "), 40
"""pytest's lines naming a failed test, and how many of them ``tally`` repeats."""


def function(test_id: str) -> str:
    return test_id.split("[")[0]


def read_costs(path: str | None) -> tuple[dict[str, float], set[str]]:
    """A costs file's seconds per test of each function, and the functions marked
    ``whole``."""
    costs: dict[str, float] = {}
    whole: set[str] = set()
    if not path or not Path(path).is_file():
        return costs, whole
    for line in Path(path).read_text().splitlines():
        f = line.split()
        if len(f) in (2, 3) and not line.startswith("#"):
            costs[f[0]] = float(f[1])
            if f[2:] == ["whole"]:
                whole.add(f[0])
    return costs, whole


def split(
    out: Path, p: int, ids: list[str], costs: dict[str, float], whole: frozenset[str] = frozenset()
) -> None:
    funcs: dict[str, list[str]] = {}
    for i in ids:
        funcs.setdefault(function(i), []).append(i)
    # a function without a cost (new, or never finished in time) may be long: it starts
    # among the first
    default = max(costs.values()) if costs else 1.0
    per = {f: costs.get(f, default) for f in funcs}
    cap = -(-len(ids) // (3 * p))
    budget = sum(per[f] * len(t) for f, t in funcs.items()) / (3 * p)
    pieces = []
    for f, tests in funcs.items():
        size = cap
        if costs:  # no piece longer than a 3P-th of the estimated total
            size = max(1, min(cap, math.ceil(budget / per[f])))
        if f in whole:  # its tests share their kernels: pieces would compile them twice
            size = len(tests)
        pieces += [tests[j : j + size] for j in range(0, len(tests), size)]
    pieces.sort(key=lambda pc: (per[function(pc[0])] * len(pc), len(pc)), reverse=True)
    for j, piece in enumerate(pieces):
        (out / f"piece_{j:04d}.ids").write_text("".join(t + "\n" for t in piece))


def costs_of_run(out: Path) -> dict[str, float]:
    spent: dict[str, list[float]] = {}
    for ids_file in sorted(out.glob("piece_*.ids")):
        j = ids_file.stem
        rc = out / f"{j}.rc"
        log = out / f"{j}.log"
        if not rc.is_file() or rc.read_text().strip() not in ("0", "5") or not log.is_file():
            continue
        tests = ids_file.read_text().splitlines()
        m = re.findall(r" in ([0-9.]+)s", log.read_text())
        if not tests or not m:
            continue
        f = function(tests[0])
        seconds, n = spent.get(f, [0.0, 0])
        spent[f] = [seconds + float(m[-1]), n + len(tests)]
    return {f: seconds / n for f, (seconds, n) in spent.items()}


def _compiles(out: Path) -> list[tuple[str, str, str, float, str]]:
    """OUT/compiles.tsv's compiles (cache misses): process, kernel, hash, seconds, test."""
    log = out / "compiles.tsv"
    rows = []
    if log.is_file():
        for line in log.read_text().splitlines():
            f = line.split("\t")
            if len(f) >= 5 and f[3] == "0":  # misses only: a hit costs no compile
                test = f[6] if len(f) >= 7 else "?"  # (a log before the test column)
                rows.append((f[0], f[1], f[2], float(f[4]), test))
    return rows


SHARED_REPEATS = 1.5
"""``costs`` marks a function ``whole`` where its compiles were at least this many times
its distinct ones: its pieces, in several processes, compiled the same kernels."""


def shared_kernels(out: Path) -> set[str]:
    """The test functions whose pieces compiled the same kernels (``costs``' ``whole``)."""
    n: dict[str, list] = {}
    for _, _, key, _, test in _compiles(out):
        c = n.setdefault(test, [0, set()])
        c[0] += 1
        c[1].add(key)
    return {t for t, (k, keys) in n.items() if k >= SHARED_REPEATS * len(keys)}


def compiles_of_run(out: Path) -> list[str]:
    rows = _compiles(out)
    total = sum(r[3] for r in rows)
    first: dict[str, float] = {}
    by: dict[str, dict[str, list]] = {"kernel": {}, "test": {}}
    for _, name, key, sec, test in rows:
        first.setdefault(key, sec)
        for what, group in (("kernel", name), ("test", test)):
            k = by[what].setdefault(group, [0, set(), 0.0])
            k[0] += 1
            k[1].add(key)
            k[2] += sec
    repeated = total - sum(first.values())
    lines = [
        f"compiles: {len(rows)} ({len(first)} distinct) in {total:.0f} s;"
        f" {repeated:.0f} s on specialisations another process also compiled",
    ]
    for what, top in (("kernel", None), ("test", TOP_TESTS)):
        lines.append(f"{'seconds':>8} {'compiles':>8} {'distinct':>8}  {what}")
        ranked = sorted(by[what].items(), key=lambda kv: -kv[1][2])
        for name, (n, keys, sec) in ranked[:top]:
            lines.append(f"{sec:8.0f} {n:8d} {len(keys):8d}  {name}")
    return lines


def pytest_runtest_logreport(report) -> None:
    """A pytest hook (``pytest -p gpu_test_pieces``, as gpu_run.sh's workers run): where
    ``DEEPSELECT_TEST_LOG`` names a file, each test phase's outcome as it ends, one
    line ``<test id> <phase> <outcome>`` (tab-separated), for ``tally``."""
    path = os.environ.get("DEEPSELECT_TEST_LOG")
    if not path:
        return
    try:  # one short write a line: whole lines between processes
        with open(path, "a") as f:
            f.write(f"{report.nodeid}\t{report.when}\t{report.outcome}\n")
    except OSError:
        pass


def outcomes(out: Path) -> dict[str, str]:
    """Each test's outcome in OUT/results.tsv: passed, failed (its call), error (its
    setup or teardown), skipped."""
    got: dict[str, str] = {}
    path = out / "results.tsv"
    for line in path.read_text().splitlines() if path.is_file() else []:
        f = line.split("\t")
        if len(f) != 3:
            continue
        test, when, outcome = f
        if outcome == "failed":
            got[test] = "failed" if when == "call" else "error"
        elif outcome == "skipped" and got.get(test) not in ("failed", "error"):
            got[test] = "skipped"
        elif when == "call" and test not in got:
            got[test] = "passed"
    return got


def tally(out: Path, tests: int, collect_errors: int, seconds: int) -> tuple[list[str], bool]:
    """The run's report (lines) and whether every test passed (skips allowed)."""
    got = outcomes(out)
    kinds = ("passed", "failed", "error", "skipped")
    total = dict.fromkeys(kinds, 0)
    total["error"] = collect_errors
    lines, bad, unfinished = [], False, []
    for w in range(sum(1 for _ in out.glob("worker_*.pieces"))):
        mine = dict.fromkeys(kinds, 0)
        state = "ok"
        for j in (out / f"worker_{w}.pieces").read_text().split():
            ids = (out / f"{j}.ids").read_text().splitlines()
            rc_file = out / f"{j}.rc"
            rc = rc_file.read_text().strip() if rc_file.is_file() else "1"
            for t in ids:
                if t in got:
                    mine[got[t]] += 1
                else:
                    unfinished.append(t)
            if rc in ("124", "137"):
                state = f"TIMEOUT ({j})"
                mine["error"] += any(t not in got for t in ids)
            elif rc not in ("0", "5"):
                state = f"rc={rc} ({j})"
                mine["error"] += not any(got.get(t) in ("failed", "error") for t in ids)
        bad |= state != "ok"
        n = len((out / f"worker_{w}.ids").read_text().splitlines())
        lines.append(
            f"worker {w:2d}: {n:3d} tests  {mine['passed']:3d} passed  {mine['failed']:3d} "
            f"failed  {mine['error']:3d} errors  {mine['skipped']:3d} skipped  {state}"
        )
        for k in kinds:
            total[k] += mine[k]
    ok = not bad and total["failed"] == 0 and total["error"] == 0
    status = "PASS" if ok else "FAIL"
    if tests == 0 and collect_errors == 0:
        status, ok = "FAIL (no tests collected)", False
    lines.append(
        f"total: {tests} tests  {total['passed']} passed  {total['failed']} failed  "
        f"{total['error']} errors  {total['skipped']} skipped  in {seconds} s: {status}"
    )
    (out / "unfinished.ids").write_text("".join(t + "\n" for t in unfinished))
    if not ok:
        logs = [log.read_text().splitlines() for log in sorted(out.glob("piece_*.log"))]
        lines += [ln for log in logs for ln in log if ln.startswith(FAILED)][:MAX_FAILED]
        if unfinished:
            where = out / "unfinished.ids"
            lines.append(f"{len(unfinished)} tests not finished in time: their ids in {where}")
    return lines, ok


def main() -> None:
    what, out = sys.argv[1], Path(sys.argv[2])
    if what == "split":
        costs, whole = read_costs(sys.argv[4] if len(sys.argv) > 4 else None)
        split(out, int(sys.argv[3]), sys.stdin.read().splitlines(), costs, frozenset(whole))
    elif what == "costs":
        print("# seconds per test of each GPU test function (scripts/gpu_test_pieces.py costs)")
        # a function kept in one piece compiles its kernels once: it keeps the mark
        # the run was split by (COSTS), or the next run would cut it again
        shared = shared_kernels(out) | read_costs(sys.argv[3] if len(sys.argv) > 3 else None)[1]
        for f, c in sorted(costs_of_run(out).items(), key=lambda fc: -fc[1]):
            print(f"{f} {c:.2f}" + (" whole" if f in shared else ""))
    elif what == "compiles":
        print("\n".join(compiles_of_run(out)))
    elif what == "tally":
        lines, ok = tally(out, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        print("\n".join(lines))
        sys.exit(0 if ok else 1)
    else:
        sys.exit(f"unknown command {what!r}: split, costs, compiles or tally")


if __name__ == "__main__":
    main()
