"""Build the bracket kernel (:mod:`deepselect.ops.triton.bracket`) for an H100/H200 (sm_90)
without a GPU and print one line per variant: its shared memory in bytes, the atomic adds
to its histogram (``bins``), Triton's own shared-memory instructions while the bins live
(``clash``: each could overwrite a bin, so there must be none), the same around the
staged positions of a bracket left wide (``stage_clash``), the layout conversions
(``cvt``: each goes through shared memory and its barriers; ``loop_cvt``: those inside a
loop over the row's blocks), registers and spills.

    python scripts/compile_bracket.py [--warps 8] [--vectors 1,2] [--sample 256] [--dtypes bf16]
    python scripts/compile_bracket.py --dtypes bf16 --loops   # each loop's SASS: a step's cost

By default the dispatch's launch (``triton_bracket.BRACKET``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from deepselect.options import Order
from deepselect.triton_bracket import (
    BRACKET,
    BracketPlan,
    bracket_constants,
    bracket_signature,
    launch_options,
)

sys.path.insert(0, str(Path(__file__).parent))
from compile_check import (  # noqa: E402
    bins_clash,
    call_defaults,
    compile_sm90,
    launch_specialization,
    ptxas_report,
    sass,
    sass_loops,
    source,
    stage_clash,
)

from deepselect.ops.triton.bracket import bracket_rows_kernel  # noqa: E402


def loop_conversions(ttgir: str) -> int:
    """The layout conversions of ``ttgir`` inside an ``scf.for`` body (a region's
    closing brace sits at its opening line's indent)."""
    loops, n = [], 0
    for line in ttgir.splitlines():
        indent = len(line) - len(line.lstrip())
        if loops and line.lstrip().startswith("}") and indent == loops[-1]:
            loops.pop()
        elif "scf.for" in line and line.rstrip().endswith("{"):
            loops.append(indent)
        elif loops and "ttg.convert_layout" in line:
            n += 1
    return n


def build(dtype, k, plan: BracketPlan, order: Order, idx64=False, loops=False) -> str:
    sig = bracket_signature(dtype, idx64)
    consts = bracket_constants(
        dtype, k, plan, largest=True, order=order, has_window=3, off_tensor=False,
        write_values=True,
    )  # fmt: skip
    values = dict(call_defaults(dtype), stride_xr=16384, stride_xc=1, N=16384, k=k)
    values.update(stride_ovr=k, stride_ovc=1, stride_oir=k, stride_oic=1)
    attrs, ones = launch_specialization(bracket_rows_kernel, sig, values)
    sig.update({n: "constexpr" for n in ones})
    src = source(bracket_rows_kernel, sig, {**consts, **ones}, attrs)
    c = compile_sm90(src, launch_options(plan))
    ptx = c.asm["ptx"]
    steps = "".join(f"\n  {ln}" for ln in sass_loops(sass(c.asm["cubin"]))) if loops else ""
    return (
        f"{str(dtype)[6:]:8s} k={k:5d} order={order.value:5s} warps={plan.warps} "
        f"vectors={plan.vectors} sample={plan.sample} smem={c.metadata.shared} "
        f"bins={ptx.count('red.shared.add.u32')} clash={bins_clash(ptx, 32)} "
        f"stage_clash={stage_clash(ptx)} "
        f"cvt={c.asm['ttgir'].count('convert_layout')} "
        f"loop_cvt={loop_conversions(c.asm['ttgir'])} {ptxas_report(ptx)}{steps}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--warps", type=int, default=BRACKET.warps)
    p.add_argument("--vectors", default=str(BRACKET.vectors))
    p.add_argument("--sample", type=int, default=BRACKET.sample)
    p.add_argument("--dtypes", default="bf16,fp32")
    p.add_argument("--loops", action="store_true", help="each loop's SASS (sass_loops)")
    a = p.parse_args()
    dts = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    for name in a.dtypes.split(","):
        for vec in (int(v) for v in a.vectors.split(",")):
            plan = BracketPlan(warps=a.warps, vectors=vec, sample=a.sample)
            for k, order in ((2048, Order.NONE), (512, Order.NONE), (2048, Order.VALUE)):
                print(build(dts[name], k, plan, order, loops=a.loops), flush=True)


if __name__ == "__main__":
    main()
