"""CPU benchmark: deepselect's Numba backend beside torch.topk and a plain row max.

Prints one table and writes a CSV. ``x.amax(dim=1)`` reads the same data once and
does nothing else, so "ratio to amax" says how close the top-k is to a single read.

    PYTHONPATH=src python3 benchmarks/cpu_bench.py --csv benchmarks/cpu_bench.csv
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import time

import torch

from deepselect import distributions
from deepselect.api import topk_rows

# (rows, N, k, dtype, sorted): the indexer shapes (unsorted) and the sampler shape (sorted)
CASES = [
    (16, 1 << 20, 512, torch.float32, False),
    (16, 1 << 20, 512, torch.bfloat16, False),
    (1, 1 << 20, 512, torch.float32, False),
    (1, 1 << 20, 512, torch.bfloat16, False),
    (256, 129_280, 512, torch.float32, True),
]


def _medians_ms(fns, repeats: int, warmup: int, interleave: bool = True) -> list[float]:
    """Median time of each function in ms.

    Interleaved (default): the functions are timed in turn within every repeat, so a
    change of machine load hits all of them alike, and each call follows a call of
    another function, as in a pipeline. Right after a torch op its OpenMP worker
    keeps spinning for a few ms (unless ``OMP_WAIT_POLICY=PASSIVE``) and takes CPU
    time from whatever runs next. Sequential: all repeats of one function, then the
    next; each function then follows itself.
    """
    for fn in fns:
        for _ in range(warmup):
            fn()
    times = [[] for _ in fns]
    plan = (
        [i for _ in range(repeats) for i in range(len(fns))]
        if interleave
        else [i for i in range(len(fns)) for _ in range(repeats)]
    )
    for i in plan:
        t0 = time.perf_counter()
        fns[i]()
        times[i].append(time.perf_counter() - t0)
    return [statistics.median(ts) * 1e3 for ts in times]


def run_case(rows, n, k, dtype, sort, kind, repeats, warmup, interleave=True):
    x = distributions.make(kind, rows, n, dtype, seed=1)
    order = "value" if sort else "none"
    ours, ref, amax = _medians_ms(
        [
            lambda: topk_rows(x, k, order=order),
            lambda: torch.topk(x, k, dim=1, sorted=sort),
            lambda: x.amax(dim=1),
        ],
        repeats,
        warmup,
        interleave,
    )
    return {
        "shape": f"{rows}x{n} k={k}{' sorted' if sort else ''}",
        "dtype": str(dtype).removeprefix("torch."),
        "kind": kind,
        "deepselect_ms": ours,
        "torch_topk_ms": ref,
        "speedup": ref / ours,
        "amax_ms": amax,
        "ratio_to_amax": ours / amax,
        "threads": torch.get_num_threads(),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--csv", default="cpu_bench.csv", help="where to write the CSV")
    p.add_argument("--repeats", type=int, default=15, help="timed repeats (median reported)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls first (incl. JIT)")
    p.add_argument("--kind", default="normal", choices=distributions.KINDS, help="input data")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument(
        "--sequential",
        action="store_true",
        help="all repeats of one function before the next (default: in turn)",
    )
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    results = []
    head = (
        f"{'shape':<26} {'dtype':<9} {'deepselect ms':>13} {'torch.topk ms':>13} "
        f"{'speedup':>8} {'x.amax ms':>10} {'/amax':>6}"
    )
    print(head)
    print("-" * len(head))
    for rows, n, k, dtype, sort in CASES:
        r = run_case(
            rows, n, k, dtype, sort, args.kind, args.repeats, args.warmup, not args.sequential
        )
        results.append(r)
        print(
            f"{r['shape']:<26} {r['dtype']:<9} {r['deepselect_ms']:>13.3f} "
            f"{r['torch_topk_ms']:>13.3f} {r['speedup']:>7.1f}x {r['amax_ms']:>10.3f} "
            f"{r['ratio_to_amax']:>6.2f}",
            flush=True,
        )
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(results[0]))
        w.writeheader()
        w.writerows(results)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    mode = "sequential" if args.sequential else "interleaved"
    wait = os.environ.get("OMP_WAIT_POLICY", "unset")
    print(
        f"wrote {args.csv} ({torch.get_num_threads()} threads, {mode}, "
        f"OMP_WAIT_POLICY {wait}, load average {load:.2f})"
    )


if __name__ == "__main__":
    main()
