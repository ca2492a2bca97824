"""Few rows of 128K at k = 2048: the streaming kernel (a program a row, today's plan
from 33 to 66 rows of 16-bit keys) against the radix passes with more segments a
program than ``triton_short.PASS_MAX_TILES`` allows (the passes take a row over
``sm_count // rows`` programs in one cooperative launch). Decides PASS_MAX_TILES.

    python benchmarks/large_k_passes_tiles.py          # GPU, < 60 s
    TRITON_INTERPRET=1 python benchmarks/large_k_passes_tiles.py --cpu   # tiny, no GPU

Each cell checks both against ``torch.topk`` (values, then the indices' values), then
times CUDA-graph replays interleaved, inputs rotated past the L2, beside a plain read
(``x.amax(dim=1)``).
"""

from __future__ import annotations

import argparse
import sys

import torch

from deepselect import triton_short
from deepselect.bench.timing import cold_copies, time_fns
from deepselect.options import TopkOptions
from deepselect.triton_backend import run_triton, sm_count, stream_config

K = 2048
GPU = [(rows, 131072, dt) for dt in (torch.bfloat16, torch.float16) for rows in (40, 64)]
GPU += [(64, 65536, torch.bfloat16), (100, 131072, torch.bfloat16)]
CPU = [(3, 9000, torch.bfloat16)]
TILES = (8, 12, 16)


def passes_plan(x: torch.Tensor, k: int, tiles: int, sm: int):
    """The radix passes' plan for ``x`` with up to ``tiles`` segments a program, or None."""
    was = triton_short.PASS_MAX_TILES
    triton_short.PASS_MAX_TILES = tiles
    triton_short._plan.cache_clear()
    try:
        plan = triton_short.short_path(x, k, TopkOptions(), sm)
    finally:
        triton_short.PASS_MAX_TILES = was
        triton_short._plan.cache_clear()
    return plan if plan is not None and plan.passes else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--repeats", type=int, default=30)
    a = p.parse_args(argv)
    dev = "cpu" if a.cpu else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: run on a GPU, or with --cpu", file=sys.stderr)
        return 2
    sm = sm_count(torch.device(dev))
    k = K if dev == "cuda" else 64
    print("rows | n | dtype | plan | us | x stream | read us | % read | status", flush=True)
    for rows, n, dt in CPU if a.cpu else GPU:
        g = torch.Generator(device=dev).manual_seed(rows + n)
        copies = cold_copies(rows * n * 2, dev, cap=1 << 20)  # (uncapped: cold at any size)
        xs = [torch.randn(rows, n, device=dev, generator=g).to(dt) for _ in range(copies)]
        want = torch.topk(xs[0].float(), k, dim=1).values
        ov = torch.empty((rows, k), dtype=dt, device=dev)
        oi = torch.empty((rows, k), dtype=torch.int32, device=dev)
        opt = TopkOptions()
        fns = {"stream": _stream(stream_config(dt, k, rows, n, sm), k, opt, ov, oi)}
        for t in TILES:  # each plan once (a limit above a row's need gives the same)
            plan = passes_plan(xs[0], k, t, sm)
            if plan is not None:
                fns.setdefault(f"passes{plan.pass_tiles}", _passes(plan, k, opt, ov, oi))
        status = {}
        for name, fn in fns.items():
            fn(xs[0])
            got = torch.sort(ov.float(), dim=1, descending=True).values
            ok = torch.equal(got, want) and torch.equal(
                torch.sort(xs[0].gather(1, oi.long()).float(), 1, descending=True).values, want
            )
            status[name] = "exact" if ok else "WRONG"
        fns["read"] = lambda x: x.amax(dim=1)
        tm = time_fns(fns, xs, dev, repeats=a.repeats, warmup=1 if a.cpu else 3, graph=not a.cpu)
        us = {name: v.median_s * 1e6 for name, v in tm.items()}
        for name in fns:
            if name == "read":
                continue
            print(
                f"{rows} | {n} | {str(dt)[6:]} | {name} | {us[name]:.1f} | "
                f"{us['stream'] / us[name]:.2f} | {us['read']:.1f} | "
                f"{100 * us['read'] / us[name]:.0f}% | {status[name]}",
                flush=True,
            )
    return 0


def _stream(cfg, k, opt, ov, oi):
    def run(x):
        run_triton(x, k, opt, ov, oi, config=cfg)

    return run


def _passes(plan, k, opt, ov, oi):
    def run(x):
        triton_short.run_short(x, k, opt, ov, oi, plan)

    return run


if __name__ == "__main__":
    sys.exit(main())
