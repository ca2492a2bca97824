"""One warm-up call and one measured call of a kernel, for a profiler (Nsight Compute).

    ncu --kernel-name regex:deepselect_rows_kernel --launch-skip 1 --launch-count 1 \\
        --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \\
        python benchmarks/one_call.py --rows 256 --n 1M [--preset]

By default the launch ``run_triton`` picks for the shape (short rows and few rows take
the short/split path: profile ``short_rows_kernel`` and its kin then). ``--stream``
forces the streaming kernel's launch for the shape (:func:`stream_config`), ``--w32``
/ ``--sync`` its warp-private / block-synchronous loop at two programs per SM;
``--preset`` starts every row at its true k-th key (the stream without the rising
threshold). For a per-instruction view: ``ncu ... -o rep python benchmarks/one_call.py``,
``ncu --import rep.ncu-rep --page source --csv --print-source sass > src.csv``, then
``python benchmarks/ncu_source_summary.py src.csv``.
"""

from __future__ import annotations

import argparse
import dataclasses

import torch

from deepselect import bench
from deepselect.keys import to_keys
from deepselect.options import TopkOptions
from deepselect.triton_backend import launch_config, run_triton, stream_config


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", default="bf16", choices=list(bench.DTYPES))
    p.add_argument("--rows", type=bench.parse_size, default=256)
    p.add_argument("--n", type=bench.parse_size, default=1 << 20)
    p.add_argument("--k", type=bench.parse_size, default=512)
    p.add_argument("--order", default="none", choices=("none", "value", "index"))
    p.add_argument("--dist", default="normal", help="input distribution (deepselect bench's)")
    p.add_argument("--preset", action="store_true", help="rows start at their k-th key")
    loop = p.add_mutually_exclusive_group()
    loop.add_argument("--stream", action="store_true", help="the streaming kernel's launch")
    loop.add_argument("--w32", action="store_true", help="the warp-private loop, 2 per SM")
    loop.add_argument("--sync", action="store_true", help="the block-synchronous loop, 2 per SM")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("needs a CUDA device")
    dtype = bench.DTYPES[a.dtype]
    x = bench.draw(a.dist, a.rows, a.n, dtype, "cuda")
    opt = TopkOptions(order=a.order)
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    cfg = None
    if a.stream or a.preset:
        cfg = stream_config(dtype, a.k, a.rows, a.n, sm)
    if a.w32 or a.sync:
        cfg = dataclasses.replace(launch_config(dtype, a.k), w32=a.w32)
    pre = None
    if a.preset:
        pre = to_keys(torch.topk(x, a.k, dim=1).values[:, -1:]).view(-1).to(torch.int32)
    v = torch.empty((a.rows, a.k), dtype=x.dtype, device="cuda")
    i = torch.empty((a.rows, a.k), dtype=torch.int32, device="cuda")
    for _ in range(2):  # the first call compiles; the profiler takes the second
        run_triton(x, a.k, opt, v, i, config=cfg, preset=pre)
    torch.cuda.synchronize()
    want = torch.topk(x, a.k, dim=1, sorted=a.order == "value").values
    print(bench.check_exact(x, v, i, want, a.k, ordered=a.order == "value"))


if __name__ == "__main__":
    main()
