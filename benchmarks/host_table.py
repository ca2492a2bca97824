"""Where a small call's time goes on a GPU machine: host time per call (a loop of
calls, one sync at the end), eager time (events around one call: host path plus
kernel) and graph-replay time (the same call captured in a CUDA graph), beside an
empty launch measured the same three ways. Every result is checked first.

    python benchmarks/host_table.py [--calls 2000] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import torch
import triton

from deepselect import bench, topk_rows
from deepselect.options import TopkOptions
from deepselect.triton_backend import _sm_count
from deepselect.triton_short import run_short, short_path

SHAPES = [  # dtype, batch, N, k
    (torch.bfloat16, 1, 4096, 512),
    (torch.bfloat16, 6, 65_536, 512),
    (torch.float32, 1, 129_280, 512),
]


@triton.jit
def _nop(ptr):
    pass


def host_us(fn, calls: int) -> float:
    """Wall time per call of ``calls`` calls with one sync at the end: the host's cost
    when the GPU keeps up."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / calls * 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--profile", action="store_true", help="cProfile of the 1 x 4096 call")
    a = p.parse_args()
    sm = _sm_count(0)
    buf = torch.empty(1, device="cuda")
    rows_out = []

    def line(name, fn):
        h = host_us(fn, a.calls)
        # one call on an idle device
        e = bench.time_fn(lambda _: fn(), [buf], "cuda", repeats=50, queued=False).median_s * 1e6
        r = bench.time_fn(lambda _: fn(), [buf], "cuda", repeats=50, graph=True).median_s * 1e6
        rows_out.append(f"{name:34s} | {h:8.1f} {e:8.1f} {r:8.1f}")
        print(rows_out[-1], flush=True)

    print(f"{'call':34s} | {'host us':>8s} {'eager us':>8s} {'graph us':>8s}")
    line("torch zero_ (1 element)", lambda: buf.zero_())
    line("triton empty kernel", lambda: _nop[(1,)](buf))
    for dtype, rows, n, k in SHAPES:
        x = torch.randn(rows, n, device="cuda").to(dtype)
        ov = torch.empty((rows, k), dtype=dtype, device="cuda")
        oi = torch.empty((rows, k), dtype=torch.int32, device="cuda")
        name = f"{str(dtype).removeprefix('torch.')} {rows}x{n} k={k}"
        want = torch.topk(x, k, dim=1).values
        assert bench.check_exact(x, *topk_rows(x, k), want, k, ordered=False) == bench.EXACT, name
        line(f"{name} topk_rows", lambda x=x, k=k: topk_rows(x, k))
        line(
            f"{name} topk_rows(out=)",
            lambda x=x, k=k, ov=ov, oi=oi: topk_rows(x, k, out_values=ov, out_indices=oi),
        )
        plan = short_path(x, k, TopkOptions(), sm)
        if plan is not None:
            opt = TopkOptions()
            line(
                f"{name} run_short",
                lambda x=x, k=k, ov=ov, oi=oi, plan=plan, opt=opt: run_short(
                    x, k, opt, ov, oi, plan
                ),
            )
        line(f"{name} torch.topk", lambda x=x, k=k: torch.topk(x, k, dim=1))
        if a.profile and n == 4096:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(a.calls):
                topk_rows(x, k, out_values=ov, out_indices=oi)
            pr.disable()
            torch.cuda.synchronize()
            pstats.Stats(pr).sort_stats("tottime").print_stats(25)
    print("==== host table")
    print(f"{'call':34s} | {'host us':>8s} {'eager us':>8s} {'graph us':>8s}")
    print("\n".join(rows_out))


if __name__ == "__main__":
    main()
