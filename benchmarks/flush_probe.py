"""The L2 flush of ``bench.timing.time_fns`` three ways, on the same calls: none, a write
of twice the L2 (its first form), a read of twice the L2 (today's). A small input should
read cold with either flush (its time rises against none); an input past the L2 should
not move with the read (the write leaves dirty lines that the timed call's reads then
write back).

    python benchmarks/flush_probe.py          # GPU, ~1 minute

CUDA-graph replays of ``topk_rows`` and ``x.amax(dim=1)``, 4 copies rotated, median of
``--repeats``; then eager calls (one on an idle device, host included) for two small cells.
"""

from __future__ import annotations

import argparse
import sys

import torch

from deepselect import topk_rows
from deepselect.bench.timing import cache_bytes, time_fns

BF, FP = torch.bfloat16, torch.float32
GRAPH = [(1, 16384, BF, 512), (6, 131072, BF, 512), (64, 16384, FP, 2048),
         (512, 16384, BF, 2048), (4096, 16384, BF, 512), (4096, 131072, BF, 2048)]  # fmt: skip
EAGER = [(8, 16384, FP, 2048), (64, 16384, BF, 2048)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=30)
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: this probe times the GPU's L2", file=sys.stderr)
        return 2
    dev = "cuda"
    wbuf = torch.empty(2 * cache_bytes(dev), dtype=torch.uint8, device=dev)
    modes = {"none": False, "write": wbuf.zero_, "read": True}
    for graph, cells in ((True, GRAPH), (False, EAGER)):
        what = "graph replays, us (the read's us)" if graph else "eager calls, us"
        print(f"{what}: rows x n | dtype | k | " + " | ".join(modes))
        for rows, n, dt, k in cells:
            xs = [torch.randn(rows, n, device=dev).to(dt) for _ in range(4)]
            fns = {"sel": lambda x, k=k: topk_rows(x, k)}
            if graph:
                fns["read"] = lambda x: x.amax(dim=1)
            res = []
            for fl in modes.values():
                t = time_fns(fns, xs, dev, repeats=a.repeats, graph=graph, queued=graph, flush=fl)
                us = t["sel"].median_s * 1e6
                res.append(f"{us:.1f} ({t['read'].median_s * 1e6:.1f})" if graph else f"{us:.1f}")
            print(f"{rows} x {n} | {str(dt)[6:]} | {k} | " + " | ".join(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
