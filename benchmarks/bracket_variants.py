"""k a large share of the row (the indexer's k = 2048 over 8K-32K, batch 64-4096): the
plan the dispatch takes, the one it took before the bracket kernel (``before``: the
short rows' kernel or the stream), and the bracket kernel (``triton_bracket``: a program
a row reading one block at a time, the row re-read from L2) at several launch shapes.

    python benchmarks/bracket_variants.py [--quick]       # GPU, ~2-3 min
    python benchmarks/bracket_variants.py --rows 512,4096 --n 8192 --dtype float32 --plans BRACKET
    TRITON_INTERPRET=1 python benchmarks/bracket_variants.py --cpu   # tiny, no GPU

Each cell checks every call against ``torch.topk`` (values, then the indices' values),
then times CUDA-graph replays interleaved, inputs rotated past the L2, beside a plain
read (``x.amax(dim=1)``). Prints one line per call: us, x before, % of the read.
"""

from __future__ import annotations

import argparse
import math
import sys

import torch

from deepselect import topk_rows, triton_short
from deepselect.bench.timing import cache_bytes, time_fns
from deepselect.distributions import make
from deepselect.options import TopkOptions
from deepselect.triton_backend import run_triton, sm_count, stream_config
from deepselect.triton_bracket import BRACKET, BracketPlan, run_bracket

BF, FP = torch.bfloat16, torch.float32
# (rows, n, dtype, k, distribution)
GPU = [(r, 16384, dt, 2048, "normal") for dt in (BF, FP) for r in (64, 512, 4096)]
GPU += [(4096, 8192, dt, 2048, "normal") for dt in (BF, FP)]
GPU += [(512, 32768, BF, 2048, "normal"), (4096, 16384, BF, 512, "normal")]
GPU += [(64, 131072, BF, 2048, "normal"), (512, 131072, BF, 2048, "normal")]
GPU += [(4096, 16384, BF, 2048, d) for d in ("ascending", "distinct32", "all_equal", "tiny")]
QUICK = [c for c in GPU if c[0] == 4096 and c[4] in ("normal", "ascending")]
QUICK += [c for c in GPU if c[:2] == (512, 16384)]
CPU = [(3, 3000, BF, 300, "normal"), (2, 2000, FP, 250, "distinct32")]
PLANS = {
    "BRACKET": BRACKET,  # the dispatch's plan (4 warps), launched directly
    "b4v2": BracketPlan(vectors=2),
    "b8": BracketPlan(warps=8),
    "b2": BracketPlan(warps=2),
    "s512": BracketPlan(sample=512),
    "s128": BracketPlan(sample=128),
    "s64": BracketPlan(sample=64),
}
QUICK_PLANS = ("BRACKET",)
CPU_PLANS = {"tiny": BracketPlan(warps=2, vectors=1, sample=32)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--rows", help="cells of these batches (with --n, --dtype; k 2048, normal)")
    p.add_argument("--n", default="16384", help="row lengths of --rows' cells")
    p.add_argument("--dtype", default="bfloat16", help="dtypes of --rows' cells")
    p.add_argument("--plans", help="the bracket plans to launch, by name (default all)")
    a = p.parse_args(argv)
    dev = "cpu" if a.cpu else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: run on a GPU, or with --cpu", file=sys.stderr)
        return 2
    cells = CPU if a.cpu else (QUICK if a.quick else GPU)
    plans = CPU_PLANS if a.cpu else PLANS
    if a.quick and not a.cpu:
        plans = {n: PLANS[n] for n in QUICK_PLANS}
    if a.rows:
        cells = [
            (r, n, getattr(torch, d), 2048, "normal")
            for d in a.dtype.split(",")
            for n in map(int, a.n.split(","))
            for r in map(int, a.rows.split(","))
        ]
    if a.plans:
        plans = {n: {**PLANS, **CPU_PLANS}[n] for n in a.plans.split(",")}
    print("rows | n | dtype | k | dist | call | us | x before | % read | status", flush=True)
    bad = 0
    for rows, n, dt, k, dist in cells:
        size = rows * n * dt.itemsize
        copies = 1 if a.cpu else max(1, math.ceil(3 * cache_bytes(dev) / size))
        xs = [make(dist, rows, n, dt, dev, seed=rows + n + c) for c in range(copies)]
        want = torch.topk(xs[0].float(), k, dim=1).values
        ov = torch.empty((rows, k), dtype=dt, device=dev)
        oi = torch.empty((rows, k), dtype=torch.int32, device=dev)
        opt = TopkOptions()
        fns = {"dispatch": _dispatch(k, ov, oi), "before": _before(xs[0], k, opt, ov, oi)}
        for name, plan in plans.items():
            fns[name] = _bracket(plan, k, opt, ov, oi)
        status = {}
        for name, fn in fns.items():
            fn(xs[0])
            got = torch.sort(ov.float(), dim=1, descending=True).values
            picked = torch.sort(xs[0].gather(1, oi.long()).float(), 1, descending=True).values
            ok = torch.equal(got, want) and torch.equal(picked, want)
            status[name] = "exact" if ok else "WRONG"
            bad += not ok
        fns["read"] = lambda x: x.amax(dim=1)
        tm = time_fns(fns, xs, dev, repeats=a.repeats, warmup=1 if a.cpu else 3, graph=not a.cpu)
        us = {name: v.median_s * 1e6 for name, v in tm.items()}
        for name in fns:
            if name != "read":
                print(
                    f"{rows} | {n} | {str(dt)[6:]} | {k} | {dist} | {name} | {us[name]:.1f} | "
                    f"{us['before'] / us[name]:.2f} | {100 * us['read'] / us[name]:.0f}% | "
                    f"{status[name]}",
                    flush=True,
                )
    return 1 if bad else 0


def _dispatch(k, ov, oi):
    def run(x):
        topk_rows(x, k, out_values=ov, out_indices=oi)

    return run


def _before(x0, k, opt, ov, oi):
    """The launch the dispatch took before the bracket kernel's rule: the short rows'
    kernel, or the stream."""
    rows, n = x0.shape
    sm = sm_count(x0.device)
    was = triton_short.BRACKET_KP
    triton_short.BRACKET_KP = 0
    triton_short._plan.cache_clear()
    try:
        plan = triton_short.short_path(x0, k, opt, sm)
    finally:
        triton_short.BRACKET_KP = was
        triton_short._plan.cache_clear()
    cfg = stream_config(x0.dtype, k, rows, n, sm)

    def run(x):
        if plan is None:
            run_triton(x, k, opt, ov, oi, config=cfg)
        else:
            triton_short.run_short(x, k, opt, ov, oi, plan)

    return run


def _bracket(plan, k, opt, ov, oi):
    def run(x):
        run_bracket(x, k, opt, ov, oi, plan)

    return run


if __name__ == "__main__":
    sys.exit(main())
