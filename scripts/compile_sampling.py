"""Build every variant of the sampling kernels (:mod:`deepselect.ops.triton.sampling`)
for an H100/H200 (sm_90) without a GPU, and print one line per kernel: its variant and
the PTX division instructions it uses (the renorm pass and the logits draw must divide
correctly rounded, ``div.rn.f32``, as torch does), its shared memory in bytes (the
top-p draw's 256 int64 sums need 2,048; ``bins``: its atomic adds to them, ``clash``:
Triton's own shared-memory instructions while they live), and its registers and spills.

    python scripts/compile_sampling.py [--family keep|sums|draw|top_p] [--bits 16|32]
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from pathlib import Path

from triton.compiler import ASTSource

from deepselect.ops.triton import sampling
from deepselect.ops.triton import top_p as top_p_ops
from deepselect.ops.triton.common import _inf_bits
from deepselect.triton_sampling import (
    RANK_MAX,
    READ_BLOCK,
    ROW_BLOCK,
    TOP_P_ROUNDS,
    _part_block,
)

sys.path.insert(0, str(Path(__file__).parent))
from compile_check import bins_clash, compile_sm90, ptxas_report  # noqa: E402

RANKINGS = ((False, False), (True, False), (True, True))
# (K_TENSOR, TEMP_TENSOR, FROM_PROBS, P_TENSOR)
TOP_P_VARIANTS = [(False, t, False, p) for t in (False, True) for p in (False, True)]
TOP_P_VARIANTS += [(False, False, True, p) for p in (False, True)]
TOP_P_VARIANTS += [(True, True, False, True), (True, False, True, True)]
PART_ARGS = ("x_ptr", "sx_row", "sx_col", "val_ptr", "k_ptr", "k_scalar", "seeds_ptr",
             "temp_ptr", "temp_scalar", "ws_ptr", "V", "m", "fix")  # fmt: skip
RAW = {32: ("*i32", "*fp32", -8388608), 16: ("*i16", "*bf16", -128)}


def build(fn, sig: dict, consts: dict) -> str:
    sig = {**sig, **{k: "constexpr" for k in consts}}
    kernel = compile_sm90(ASTSource(fn, signature=sig, constexprs=consts))
    ptx = kernel.asm["ptx"]
    flags = " ".join(f"{k}={int(v)}" for k, v in consts.items() if isinstance(v, bool))
    divs = sorted(set(re.findall(r"\bdiv\.\w+\.f32", ptx)))
    return (
        f"{fn.__name__} bits={consts['KEY_BITS']} {flags} div={','.join(divs) or '-'} "
        f"smem={kernel.metadata.shared} bins={ptx.count('red.shared.add.u64')} "
        f"clash={bins_clash(ptx, 64)} {ptxas_report(ptx)}"
    )


def keep(bits: int, raw: str, flt: str, ninf: int, keys: dict) -> None:
    """The mask and renorm passes, each for (K_TENSOR, BEST_FIRST): a scalar k, a per-row
    k ranked in the pass, a per-row k best first."""
    for renorm, (k_tensor, first) in itertools.product((False, True), RANKINGS):
        sig = dict(x_ptr=raw, sx_row="i64", sx_col="i64", val_ptr=raw, idx_ptr="*i32",
                   k_ptr="*i64", k_scalar="i64", sums_ptr="*fp32", thr_ptr="*i64",
                   out_ptr=flt if renorm else raw, so_row="i64", V="i32", m="i32")  # fmt: skip
        consts = dict(K_TENSOR=k_tensor, RENORM=renorm, NINF=ninf, TILE=16384 // (bits // 8),
                      BEST_FIRST=first, RANK_BLOCK=16 if first else RANK_MAX)  # fmt: skip
        print(build(sampling.keep_rows_kernel, sig, {**consts, **keys}))


def sums(bits: int, raw: str, flt: str, ninf: int, keys: dict) -> None:
    """The kept sums before the renorm pass, by the same rankings."""
    for k_tensor, first in RANKINGS:
        sig = dict(x_ptr=raw, sx_row="i64", sx_col="i64", val_ptr=raw, idx_ptr="*i32",
                   k_ptr="*i64", k_scalar="i64", sums_ptr="*fp32", thr_ptr="*i64",
                   V="i32", m="i32")  # fmt: skip
        consts = dict(K_TENSOR=k_tensor, BEST_FIRST=first, BLOCK=RANK_MAX,
                      RANK_BLOCK=16 if first else 512, **keys)  # fmt: skip
        print(build(sampling.kept_sums_kernel, sig, consts))


def draw(bits: int, raw: str, flt: str, ninf: int, keys: dict) -> None:
    """The seeded top-k draw: an int or per-row k, temperature a float or per row,
    logits or probabilities."""
    for k_tensor, temp_tensor, probs in itertools.product((False, True), repeat=3):
        sig = dict(x_ptr=raw, sx_row="i64", sx_col="i64", val_ptr=raw, idx_ptr="*i32",
                   k_ptr="*i32", k_scalar="i64", seeds_ptr="*i64", temp_ptr="*fp32",
                   temp_scalar="fp32", out_ptr="*i64", V="i32", m="i32")  # fmt: skip
        consts = dict(K_TENSOR=k_tensor, TEMP_TENSOR=temp_tensor, FROM_PROBS=probs,
                      PRECISE_LOG=True, BLOCK=1024)  # fmt: skip
        print(build(sampling.gumbel_draw_kernel, sig, {**consts, **keys}))


def top_p(bits: int, raw: str, flt: str, ninf: int, keys: dict) -> None:
    """The top-p draw and its parts."""
    # the top-p draw: an int or per-row k, logits (temperature a float or per row)
    # or probabilities, top_p a float or per row
    for k_tensor, temp_tensor, probs, p_tensor in TOP_P_VARIANTS:
        sig = dict(xr=(raw, "i64", "i64"), val_ptr=raw, idx_ptr="*i32",
                   k_ptr="*i64", k_scalar="i64", seeds_ptr="*i64", temp_ptr="*fp32",
                   temp_scalar="fp32", p_ptr="*fp64", p_scalar="fp64", out_ptr="*i64",
                   V="i32", m="i32", fix="fp32", parts=("*i64", "i32"))  # fmt: skip
        consts = dict(K_TENSOR=k_tensor, TEMP_TENSOR=temp_tensor, P_TENSOR=p_tensor,
                      FROM_PROBS=probs, PRECISE_LOG=True, SMEM=True, BLOCK=1024,
                      ROW_BLOCK=ROW_BLOCK, READ_BLOCK=READ_BLOCK,
                      ROUNDS=TOP_P_ROUNDS, SP=1, **keys)  # fmt: skip
        print(build(top_p_ops.top_p_draw_kernel, sig, consts))
        if (k_tensor, temp_tensor, probs, p_tensor) == TOP_P_VARIANTS[0]:
            # a small selection's block (k = 50), unlike the whole-row reads' blocks
            print(build(top_p_ops.top_p_draw_kernel, sig, {**consts, "BLOCK": 128}))
        if (k_tensor, temp_tensor, probs) == (False, False, True) and not p_tensor:
            # a few rows' draw: the first read and its check split over programs
            print(build(top_p_ops.top_p_draw_kernel, sig, {**consts, "SP": 128}))
            rows = dict(zip(("x_ptr", "sx_row", "sx_col"), sig["xr"], strict=True))
            part_sig = {n: {**sig, **rows, "ws_ptr": "*i64"}[n] for n in PART_ARGS}
            part_sig.update(L="i32", p_scalar="fp64", rnd="i32",
                            decide=("*fp64", "*i64", "*i32", "*i64", raw, "*i32"))  # fmt: skip
            part = dict(K_TENSOR=k_tensor, TEMP_TENSOR=temp_tensor, FROM_PROBS=probs,
                        PRECISE_LOG=True, READ_BLOCK=_part_block(), SP=128, P_TENSOR=False,
                        **keys)  # fmt: skip
            # FIRST: before the selection, the checks' last part also ending the row's
            # window (1) or writing its top-1 in place of a selection (2); CHECK: the
            # first read (0), a check (1), a check that also picks the next candidate (2)
            for check, first in itertools.product((0, 1, 2), (0, 1, 2)):
                consts = {**part, "CHECK": check, "FIRST": first}
                print(build(top_p_ops.top_p_part_kernel, part_sig, consts))


FAMILIES = {"keep": keep, "sums": sums, "draw": draw, "top_p": top_p}
"""The kernels by family: ``--family`` builds one (the tests build them in parallel)."""


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--family", choices=sorted(FAMILIES), action="append")
    p.add_argument("--bits", type=int, choices=sorted(RAW), action="append")
    a = p.parse_args(argv)
    for bits, (raw, flt, ninf) in RAW.items():
        if a.bits and bits not in a.bits:
            continue
        keys = dict(KEY_BITS=bits, INF_BITS=_inf_bits(bits, False), FP16=False)
        for name, family in FAMILIES.items():
            if not a.family or name in a.family:
                family(bits, raw, flt, ninf, keys)


if __name__ == "__main__":
    main()
