"""Build the bracket kernel (:mod:`deepselect.ops.triton.bracket`) for an H100/H200 (sm_90)
without a GPU and print one line per variant: its shared memory in bytes, the atomic adds
to its histogram (``bins``), Triton's own shared-memory instructions while the bins live
(``clash``: each could overwrite a bin, so there must be none), registers and spills.

    python scripts/compile_bracket.py [--warps 8] [--vectors 1,2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget

from deepselect.options import Order
from deepselect.triton_bracket import BracketPlan, bracket_constants

sys.path.insert(0, str(Path(__file__).parent))
import compile_check  # noqa: E402
from compile_check import call_defaults, launch_specialization, ptxas_report, source  # noqa: E402

from deepselect.ops.triton.bracket import (  # noqa: E402
    BRACKET_DEFAULTS,
    BRACKET_GROUPS,
    bracket_rows_kernel,
)

TARGET = GPUTarget("cuda", 90, 32)
compile_check.BUNDLED[bracket_rows_kernel] = (BRACKET_GROUPS, BRACKET_DEFAULTS)


def bins_clash(ptx: str) -> int:
    """Shared-memory instructions of Triton's own from an inline zero of the bins to
    their inline read."""
    inside = live = False
    clash = 0
    for line in ptx.splitlines():
        if "begin inline asm" in line or "end inline asm" in line:
            inside = "begin" in line
        elif inside and "st.shared.b32 [%a], 0" in line:
            live = True
        elif inside and "ld.shared.b32" in line and "[%a]" in line:
            live = False
        elif live and not inside and ".shared" in line:
            clash += 1
    return clash


def build(dtype, k, plan: BracketPlan, order: Order, idx64=False) -> str:
    raw = "*i16" if dtype != torch.float32 else "*i32"
    sig = dict(x_ptr=raw, stride_xr="i32", stride_xc="i32", N="i32", begin_ptr="*i64",
               end_ptr="*i64", ov_ptr=raw, oi_ptr="*i64" if idx64 else "*i32",
               stride_ovr="i32", stride_ovc="i32", stride_oir="i32", stride_oic="i32",
               off_ptr="*i64", off_scalar="i32", fill_index="i32", fill_bits="i32", k="i32",
               page_ptr="*i32", page_stride="i32", max_pages="i32", n_batch="i32",
               r2b_ptr="*i64")  # fmt: skip
    consts = bracket_constants(
        dtype, k, plan, largest=True, order=order, has_window=3, off_tensor=False,
        write_values=True,
    )  # fmt: skip
    values = dict(call_defaults(dtype), stride_xr=16384, stride_xc=1, N=16384, k=k)
    values.update(stride_ovr=k, stride_ovc=1, stride_oir=k, stride_oic=1)
    attrs, ones = launch_specialization(bracket_rows_kernel, sig, values)
    sig.update({n: "constexpr" for n in ones})
    src = source(bracket_rows_kernel, sig, {**consts, **ones}, attrs)
    opts = dict(num_warps=plan.warps, num_stages=1)
    if plan.maxnreg is not None:
        opts["maxnreg"] = plan.maxnreg
    c = triton.compile(src, target=TARGET, options=opts)
    ptx = c.asm["ptx"]
    return (
        f"{str(dtype)[6:]:8s} k={k:5d} order={order.value:5s} warps={plan.warps} "
        f"vectors={plan.vectors} cap={plan.maxnreg} smem={c.metadata.shared} "
        f"bins={ptx.count('red.shared.add.u32')} clash={bins_clash(ptx)} {ptxas_report(ptx)}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--warps", type=int, default=8)
    p.add_argument("--vectors", default="1,2")
    p.add_argument("--cap", type=int, default=None)
    a = p.parse_args()
    for dtype in (torch.bfloat16, torch.float32):
        for vec in (int(v) for v in a.vectors.split(",")):
            plan = BracketPlan(warps=a.warps, vectors=vec, maxnreg=a.cap)
            for k, order in ((2048, Order.NONE), (512, Order.NONE), (2048, Order.VALUE)):
                print(build(dtype, k, plan, order), flush=True)


if __name__ == "__main__":
    main()
