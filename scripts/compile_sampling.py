"""Build every variant of the sampling kernels (:mod:`deepselect.ops.triton.sampling`)
for an H100/H200 (sm_90) without a GPU, and print one line per kernel: its variant and
the PTX division and log instructions it uses (the renorm pass and the logits draw
must divide correctly rounded, ``div.rn.f32``, as torch does).

    python scripts/compile_sampling.py
"""

from __future__ import annotations

import itertools
import re

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from deepselect.ops.triton import sampling
from deepselect.ops.triton.common import _inf_bits

TARGET = GPUTarget("cuda", 90, 32)
RAW = {32: ("*i32", "*fp32", -8388608), 16: ("*i16", "*bf16", -128)}


def build(fn, sig: dict, consts: dict) -> str:
    sig = {**sig, **{k: "constexpr" for k in consts}}
    ptx = triton.compile(ASTSource(fn, signature=sig, constexprs=consts), target=TARGET).asm["ptx"]
    flags = " ".join(f"{k}={int(v)}" for k, v in consts.items() if isinstance(v, bool))
    divs = sorted(set(re.findall(r"\bdiv\.\w+\.f32", ptx)))
    return f"{fn.__name__} bits={consts['KEY_BITS']} {flags} div={','.join(divs) or '-'}"


def main() -> None:
    for bits, (raw, flt, ninf) in RAW.items():
        keys = dict(KEY_BITS=bits, INF_BITS=_inf_bits(bits, False), FP16=False)
        for renorm, k_tensor in itertools.product((False, True), repeat=2):
            sig = dict(x_ptr=raw, sx_row="i64", sx_col="i64", val_ptr=raw, idx_ptr="*i32",
                       k_ptr="*i64", k_scalar="i64", sums_ptr="*fp32",
                       out_ptr=flt if renorm else raw, so_row="i64", V="i32", m="i32")  # fmt: skip
            consts = dict(K_TENSOR=k_tensor, RENORM=renorm, NINF=ninf, TILE=16384 // (bits // 8),
                          WORST_BLOCK=16 if k_tensor else 512)  # fmt: skip
            print(build(sampling.keep_rows_kernel, sig, {**consts, **keys}))
        for k_tensor in (False, True):
            sig = dict(x_ptr=raw, sx_row="i64", sx_col="i64", val_ptr=raw, k_ptr="*i64",
                       k_scalar="i64", sums_ptr="*fp32", V="i32", m="i32")  # fmt: skip
            consts = dict(K_TENSOR=k_tensor, KEY_BITS=bits, FP16=False, BLOCK=1024)
            print(build(sampling.kept_sums_kernel, sig, consts))
        for k_tensor, temp_tensor, probs in itertools.product((False, True), repeat=3):
            sig = dict(x_ptr=raw, sx_row="i64", sx_col="i64", val_ptr=raw, idx_ptr="*i32",
                       k_ptr="*i32", k_scalar="i64", seeds_ptr="*i64", temp_ptr="*fp32",
                       temp_scalar="fp32", out_ptr="*i64", V="i32", m="i32")  # fmt: skip
            consts = dict(K_TENSOR=k_tensor, TEMP_TENSOR=temp_tensor, FROM_PROBS=probs,
                          PRECISE_LOG=True, BLOCK=1024)  # fmt: skip
            print(build(sampling.gumbel_draw_kernel, sig, {**consts, **keys}))


if __name__ == "__main__":
    main()
