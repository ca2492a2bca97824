"""Few rows and short rows on a GPU: the register-resident short/split path beside
the streaming kernel and torch.topk, in one run (every result checked first).

    python benchmarks/short_table.py [--repeats 20] [--graph]
        [--only bf16:4096:4096[:k],...] [--dist normal] [--no-stream]

``--graph`` times device time (calls replayed from a CUDA graph) instead of eager
calls (host time included). The ``empty`` column times a one-element ``zero_()``: one
kernel launch doing nothing. ``--levels`` also times a split plan's launches one level
at a time (its first i levels, for each i: the candidates of a prefix are written, the
outputs untouched), and prints each level's share: where a split of one launch per
merge level spends its time. ``--phases``: a one-launch radix passes plan's launch
stopped after each of its phases in turn.
"""

from __future__ import annotations

import argparse
import dataclasses

import kernel_table
import torch
from kernel_table import DT, check, copies_for, draw, time_graph_ms, time_ms

from deepselect import bench, triton_short
from deepselect.options import Order, TopkOptions
from deepselect.triton_backend import _sm_count, run_triton, stream_config
from deepselect.triton_short import describe, run_short, short_path

SHAPES = [  # dtype, batch, N, k
    ("bf16", 1, 1 << 20, 512),
    ("bf16", 6, 1 << 20, 512),
    ("bf16", 6, 1 << 16, 512),
    ("bf16", 256, 1 << 16, 512),
    ("bf16", 4096, 4096, 512),
    ("bf16", 1, 4096, 512),
    ("fp32", 6, 129_280, 512),
]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument(
        "--only",
        default=None,
        metavar="DTYPE:BATCH:N[:K[:ORDER]],...",
        help="these shapes instead of the table's (k = 512, unsorted; ORDER none, value or index)",
    )
    p.add_argument("--graph", action="store_true", help="device time, from CUDA graph replays")
    p.add_argument(
        "--no-stream", action="store_true", help="leave the streaming kernel out (its build)"
    )
    p.add_argument("--dist", default="normal", help="the rows' distribution (kernel_table's)")
    p.add_argument(
        "--levels", action="store_true", help="each level of a split plan timed on its own"
    )
    p.add_argument(
        "--phases",
        action="store_true",
        help="a one-launch radix passes plan's time up to each of its phases",
    )
    a = p.parse_args()
    timer = time_graph_ms if a.graph else time_ms
    kernel_table.SYNC = not a.graph  # eager: one call at a time, its host work included
    shapes = SHAPES
    if a.only:
        shapes = []
        for item in a.only.split(","):
            dts, b, n, *rest = item.split(":")
            k = int(rest[0]) if rest else 512
            shapes.append((dts, int(b), int(n), k, rest[1] if len(rest) > 1 else "none"))
    sm = _sm_count(0)
    print(
        f"{'shape':24s} {'plan':56s} | {'short ms':>8s} {'stream ms':>9s} "
        f"{'topk ms':>8s} {'empty ms':>8s} | {'x topk':>6s} {'TB/s':>5s} chk"
    )
    one = torch.empty(1, device="cuda")  # its zero_(): the least a launch costs
    for dts, rows, n, k, *order in shapes:
        order = order[0] if order else "none"
        dtype = DT[dts]
        esz = torch.finfo(dtype).bits // 8
        nbytes = rows * n * esz
        inputs = [draw(a.dist, rows, n, dtype, s) for s in range(copies_for(nbytes))]
        opt = TopkOptions(order=Order(order))

        def out(x, k=k):
            return (
                torch.empty((x.shape[0], k), dtype=x.dtype, device="cuda"),
                torch.empty((x.shape[0], k), dtype=torch.int32, device="cuda"),
            )

        def stream(x, k=k, opt=opt):
            v, i = out(x)
            run_triton(x, k, opt, v, i, config=stream_config(x.dtype, k, *x.shape, sm))
            return v, i

        s2, t_stream = "-", float("nan")
        if not a.no_stream:
            s2 = check(inputs[0], k, order, *stream(inputs[0]))
            t_stream = timer(stream, inputs, a.repeats)
        t_topk = timer(lambda x, k=k: torch.topk(x, k, dim=1), inputs, a.repeats)
        t_empty = timer(lambda x: one.zero_(), inputs, a.repeats)
        plan = short_path(inputs[0], k, opt, sm)

        def short(x, k=k, opt=opt, plan=plan):
            v, i = out(x)
            run_short(x, k, opt, v, i, plan)
            return v, i

        status = "-"
        t_short = float("nan")
        if plan is not None:
            status = check(inputs[0], k, order, *short(inputs[0]))
            t_short = timer(short, inputs, a.repeats)
        best = min(t for t in (t_short, t_stream) if t == t)
        tb = bench.tbps(bench.effective_bytes(rows, n, k, dtype), best * 1e-3)
        print(
            f"{dts} {rows}x{n} k={k:<5d}{'' if order == 'none' else ' ' + order}".ljust(24)
            + f" {describe(plan):56s} | {t_short:8.3f} {t_stream:9.3f} "
            f"{t_topk:8.3f} {t_empty:8.3f} | {t_topk / best:6.2f} {tb:5.2f} {status}/{s2}",
            flush=True,
        )
        if a.levels and plan is not None and len(plan.levels) > 1 and not plan.in_launch:
            each = level_times(plan, inputs, k, timer, a.repeats, t_short)
            print(f"    levels, ms each: {each}", flush=True)
        if a.phases and plan is not None and plan.grid_sync:
            print(f"    phases, ms to each: {phase_times(plan, inputs, short, timer, a.repeats)}")
        del inputs
        torch.cuda.empty_cache()


def level_times(plan, inputs, k, timer, repeats, t_all) -> str:
    """Each level's time in a split plan: the time of its first i levels (a prefix
    writes only candidates) less that of the first i - 1; the last level's from the
    whole plan's time ``t_all``."""
    opt = TopkOptions()
    prev, parts = 0.0, []
    for i in range(1, len(plan.levels) + 1):
        if i < len(plan.levels):
            head = dataclasses.replace(plan, levels=plan.levels[:i])

            def run(x, head=head):
                i_out = torch.empty((x.shape[0], k), dtype=torch.int32, device="cuda")
                run_short(x, k, opt, None, i_out, head)

            t = timer(run, inputs, repeats)
        else:
            t = t_all
        lv = plan.levels[i - 1]
        parts.append(f"{lv.L}x{lv.nseg} {t - prev:.4f}")
        prev = t
    return ", ".join(parts)


def phase_times(plan, inputs, short, timer, repeats) -> str:
    """A one-launch radix passes plan's time when its launch stops after phase ``i``
    (the passes, then the write), for each ``i``: where its time goes."""
    whole = triton_short._passes_kwargs
    parts = []
    try:
        for last in range(triton_short.pass_count(inputs[0].dtype) + 1):

            def upto(*a, last=last):
                return tuple(dict(kw, LAST=min(kw["LAST"], last)) for kw in whole(*a))

            triton_short._passes_kwargs = upto
            parts.append(f"{last}: {timer(short, inputs, repeats):.4f}")
    finally:
        triton_short._passes_kwargs = whole
    return ", ".join(parts)


if __name__ == "__main__":
    main()
