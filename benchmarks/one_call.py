"""One warm-up call and one measured call of the streaming kernel, for a profiler.

    ncu --kernel-name regex:deepselect_rows_kernel --launch-skip 1 --launch-count 1 \\
        --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \\
        python benchmarks/one_call.py --rows 256 --n 1048576 [--preset]

``--preset`` starts every row at its true k-th key (the stream without the rising
threshold), as benchmarks/profile_kernel.py does; ``--w32`` runs the warp-private
loop (``LaunchConfig.w32``), otherwise the block-synchronous one, both at two
programs per SM; ``--as-launched`` the launch ``run_triton`` picks for the shape
(``stream_config``: e.g. three programs per SM at 80 registers for bf16 4096 x 1M);
``--short`` the register-resident short/split path of the shape
(``short_rows_kernel``).
"""

from __future__ import annotations

import argparse
import dataclasses

import torch
from kernel_table import DT, draw

from deepselect.keys import to_keys
from deepselect.options import TopkOptions
from deepselect.triton_backend import _sm_count, launch_config, run_triton
from deepselect.triton_short import run_short, short_path


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="bf16", choices=list(DT))
    p.add_argument("--rows", type=int, default=256)
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--k", type=int, default=512)
    p.add_argument("--order", default="none")
    p.add_argument("--preset", action="store_true")
    p.add_argument("--w32", action="store_true", help="the warp-private loop (LaunchConfig.w32)")
    p.add_argument("--short", action="store_true", help="the short/split path of the shape")
    p.add_argument(
        "--as-launched",
        action="store_true",
        help="the launch run_triton picks for the shape (stream_config: programs per SM, "
        "register cap, loop), not launch_config's at two programs per SM",
    )
    a = p.parse_args()
    cfg = dataclasses.replace(launch_config(DT[a.dtype], a.k), w32=a.w32, w32_from=None)
    x = draw("normal", a.rows, a.n, DT[a.dtype], 0)
    opt = TopkOptions(order=a.order)
    pre = None
    if a.preset:
        kth = torch.topk(x, a.k, dim=1).values[:, -1:]
        pre = to_keys(kth).view(-1).to(torch.int32)
    v = torch.empty((a.rows, a.k), dtype=x.dtype, device="cuda")
    i = torch.empty((a.rows, a.k), dtype=torch.int32, device="cuda")
    plan = short_path(x, a.k, opt, _sm_count(0)) if a.short else None
    if a.short and plan is None:
        p.error("--short: the shape takes the streaming kernel")
    for _ in range(2):  # the first call compiles; the profiler takes the second
        if plan is not None:
            run_short(x, a.k, opt, v, i, plan)
            continue
        if a.as_launched:
            run_triton(x, a.k, opt, v, i, preset=pre)
        else:
            grid = min(a.rows, 2 * _sm_count(0))
            run_triton(x, a.k, opt, v, i, preset=pre, config=cfg, grid=grid)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
