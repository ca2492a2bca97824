"""A representative subset of the GPU kernels' launches, small enough to run under
NVIDIA compute-sanitizer, each result checked against the oracle.

    python scripts/sanitize_cases.py [--cases stream|short|passes|w32|block|all]  # warm
    compute-sanitizer --tool memcheck --error-exitcode 3 python scripts/sanitize_cases.py

``block`` is three groups. ``stream``: the streaming kernel's block-synchronous loop (bf16 / fp16 /
fp32, largest and smallest, windows that cut blocks, sorted outputs); ``short``: the
short-row kernel and the split path (segments and merge levels, in launches of their
own and in one); ``passes``: the radix passes (in one cooperative launch, one launch
per phase, several segments a program).
``w32``: the streaming kernel's warp-private
loop, whose warps poll a few shared-memory flags that other warps set without a
barrier between them (by design: a warp sees a flag one step late at worst), which
racecheck reports as hazards on those words. Exit status 1 if any result differs
from the oracle (the sanitizer's own exit status reports its errors).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys

import torch

from deepselect import triton_short
from deepselect.api import topk_rows
from deepselect.bench import EXACT, check_against_oracle
from deepselect.distributions import make
from deepselect.options import Order, TopkOptions
from deepselect.triton_backend import launch_config, run_triton, sm_count
from deepselect.triton_short import ShortConfig, run_short, short_path


def stream(
    dtype, largest: bool, order: Order, w32: bool, window: bool, dev="cuda", scale=1
) -> bool:
    """One streaming-kernel launch (the loop forced either way) on NaN, ties and a
    normal part; a window that starts and ends inside blocks. ``scale`` divides the
    row length (a check of this script itself on the CPU, under the interpreter)."""
    rows, n, k = 6, 150_000 // scale, 512 // scale
    x = make("nan_hotspots", rows, n, dtype, dev, seed=11)
    x[:, : n // 3] = make("distinct2", rows, n // 3, dtype, dev, seed=12)
    kw = {}
    if window:
        kw = {
            "begin": torch.arange(rows, device=dev) * (977 // scale) + 5,
            "end": n - torch.arange(rows, device=dev) * (1231 // scale) - 3,
        }
    opt = TopkOptions(largest=largest, order=order, **kw)
    cfg = dataclasses.replace(launch_config(dtype, k), w32=w32)
    ov = torch.empty((rows, k), dtype=dtype, device=dev)
    oi = torch.empty((rows, k), dtype=torch.int32, device=dev)
    run_triton(x, k, opt, ov, oi, config=cfg)
    return check_against_oracle(x, ov, oi, k, opt, max_rows=rows) == EXACT


def short_and_split(dtype, dev="cuda", scale=1) -> bool:
    """topk_rows on shapes its dispatch sends to the short kernel (many short rows)
    and to the split path (two long rows: segments, then their merges)."""
    ok = True
    for rows, n, k in ((64, 3000 // scale, 64 // scale), (2, 400_000 // scale, 512 // scale)):
        x = make("normal", rows, n, dtype, dev, seed=rows)
        for order in (Order.NONE, Order.VALUE):
            v, i = topk_rows(x, k, order=order)
            ok &= check_against_oracle(x, v, i, k, TopkOptions(order=order), max_rows=rows) == EXACT
    return ok


def split(dtype, in_launch: bool, dev="cuda", scale=1) -> bool:
    """Long rows split, with every merge in the one launch (the last program of a
    group to finish merges it: candidates read across programs, counters; two rows)
    or one launch per merge level (one row, at a pretend SM count of 8: more than 6
    segments a pretend SM)."""
    rows, n, k = (2 if in_launch else 1), 400_000 // scale, 512 // scale
    x = make("distinct32", rows, n, dtype, dev, seed=3)
    sm = torch.cuda.get_device_properties(0).multi_processor_count if dev == "cuda" else 32
    cfg = ShortConfig()
    if scale > 1:  # slices of the interpreter's size, several merge levels
        cfg = ShortConfig(nmax=128, min_seg=64, split_rows=(1.0, 1.0, 1.0))
    if not in_launch:
        sm = 8
    ok = True
    for order in (Order.NONE, Order.VALUE):
        opt = TopkOptions(order=order)
        plan = short_path(x, k, opt, sm, cfg)
        ok &= plan is not None and plan.kind == "split" and plan.in_launch == in_launch
        ov = torch.empty((rows, k), dtype=dtype, device=dev)
        oi = torch.empty((rows, k), dtype=torch.int32, device=dev)
        run_short(x, k, opt, ov, oi, plan)
        ok &= check_against_oracle(x, ov, oi, k, opt, max_rows=rows) == EXACT
    return ok


def passes(dtype, sync, tiles=1, dev="cuda", scale=1) -> bool:
    """Long rows split as radix passes (each digit's histogram gathered across a
    row's programs; every program writing its own slots), in one cooperative launch
    (``sync``, row barriers between phases) or one launch per phase (as where a
    device refuses the cooperative launch), ``tiles > 1``: several segments a
    program: rows of 32 values, ties across segments, unsorted and by index. Under
    the interpreter, the plan a GPU makes, one launch per phase."""
    rows, n, k = (6, 1_000_000, 512) if tiles > 1 and scale == 1 else (2, 400_000, 512)
    n, k = n // scale, k // scale
    x = make("distinct32", rows, n, dtype, dev, seed=4)
    sm = sm_count(torch.device(dev))
    cfg = ShortConfig()
    if scale > 1:  # slices of the interpreter's size, a segment a program
        cfg, sm = ShortConfig(nmax=128, min_seg=64, split_rows=(1.0, 1.0, 1.0)), 128
    ok = True
    for order in (Order.NONE, Order.INDEX):
        opt = TopkOptions(order=order)
        plan = triton_short._plan(rows, n, k, sm, cfg, False, x.element_size() * 8, False)
        if plan is None or not plan.passes:
            return False
        if not sync or dev != "cuda":
            plan = dataclasses.replace(plan, grid_sync=False, fused_stats=dev == "cuda")
        ok &= plan.grid_sync or not (sync and scale == 1)  # full size: the rows fit one launch
        ok &= plan.pass_tiles > 1 or not (tiles > 1 and scale == 1)
        ov = torch.empty((rows, k), dtype=dtype, device=dev)
        oi = torch.empty((rows, k), dtype=torch.int32, device=dev)
        run_short(x, k, opt, ov, oi, plan)
        ok &= check_against_oracle(x, ov, oi, k, opt, max_rows=rows) == EXACT
    return ok


GROUPS = {"block": ("stream", "short", "passes"), "all": ("stream", "short", "passes", "w32")}
"""Named sets of case groups; a group's own name selects it alone."""
CHOICES = ("stream", "short", "passes", "w32", *GROUPS)


def cases(which: str, dev: str = "cuda", scale: int = 1):
    """(name, thunk) pairs of the chosen set: a group (``stream``: the block-synchronous
    loop; ``short``: the short-row kernel and the split; ``passes``; ``w32``) or a named
    set of them (``block``, ``all``)."""
    groups = GROUPS.get(which, (which,))
    out = []
    if "stream" in groups:
        for dtype in (torch.bfloat16, torch.float16, torch.float32):
            for largest in (True, False):
                name = f"stream block {dtype} largest={largest}"
                out.append((name, stream, (dtype, largest, Order.VALUE, False, True)))
        name = "stream block bf16 unsorted"
        out.append((name, stream, (torch.bfloat16, True, Order.NONE, False, False)))
    if "short" in groups:
        for dtype in (torch.bfloat16, torch.float32):
            out.append((f"short and split {dtype}", short_and_split, (dtype,)))
        out.append(("split in one launch bf16", split, (torch.bfloat16, True)))
        out.append(("split level by level bf16", split, (torch.bfloat16, False)))
    if "passes" in groups:
        out.append(("split as radix passes in one launch fp32", passes, (torch.float32, True)))
        out.append(("split as radix passes a launch each bf16", passes, (torch.bfloat16, False)))
        if scale == 1:  # (smaller, it is the case above)
            name = "split as radix passes, segments a program, bf16"
            out.append((name, passes, (torch.bfloat16, True, 8)))
    if "w32" in groups:
        for dtype in (torch.bfloat16, torch.float32):
            for largest in (True, False):
                name = f"stream w32 {dtype} largest={largest}"
                out.append((name, stream, (dtype, largest, Order.VALUE, True, True)))
    return [(name, functools.partial(f, *args, dev=dev, scale=scale)) for name, f, args in out]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", choices=CHOICES, default="all")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA device", file=sys.stderr)
        return 2
    todo = cases(a.cases)
    bad = 0
    for name, run in todo:
        ok = run()
        bad += not ok
        print(f"{'ok   ' if ok else 'WRONG'} {name}", flush=True)
    print(f"{bad} of {len(todo)} cases differ from the oracle")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
