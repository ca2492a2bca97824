"""Compile the Triton kernels for an H100/H200 (sm_90) on a machine without a GPU and
report registers, spills and shared memory: catches compile errors and register
pressure before any GPU time is spent. Each kernel is built as a launch on
contiguous rows and outputs would specialize it (:func:`launch_specialization`:
16-byte aligned pointers, integer arguments equal to 1 or divisible by 16), so
that its loads vectorize as they do on the GPU.

    python scripts/compile_check.py [--dtype bf16|fp16|fp32] [--k 512] [--ptx out.ptx]
    python scripts/compile_check.py --short 4096x8192 --dtype bf16 --order none --paged
    python scripts/compile_check.py --short 4096x4096 --variant radix,old --sass-stats
    python scripts/compile_check.py --stream 4096x129280 --dtype fp32 --order value
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import hashlib
import inspect
import io
import os
import re
import subprocess
import tempfile

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from deepselect import triton_short
from deepselect.ops.triton.bracket import BRACKET_DEFAULTS, BRACKET_GROUPS, bracket_rows_kernel
from deepselect.ops.triton.launch import _fill_bits
from deepselect.ops.triton.passes import PASSES_DEFAULTS, PASSES_GROUPS
from deepselect.ops.triton.short import SHORT_DEFAULTS, SHORT_GROUPS
from deepselect.ops.triton.split import SPLIT_DEFAULTS, SPLIT_GROUPS
from deepselect.ops.triton.stream import ROWS_DEFAULTS, ROWS_GROUPS, deepselect_rows_kernel
from deepselect.ops.triton.sync import SMEM_HIST_MARK
from deepselect.options import Order, TopkOptions
from deepselect.triton_backend import (
    NUM_WARPS,
    LaunchConfig,
    check_variant,
    kernel_constants,
    launch_config,
    occupancy_variant,
    stream_config,
)

DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
H200_SMS = 132


def launch_specialization(fn, sig: dict, values: dict) -> tuple[dict, dict]:
    """What Triton's launch specializes, for a build without a GPU: every pointer
    16-byte aligned (torch's allocations are), and each integer argument of a known
    value (``values``) a compile-time 1 where it is 1, divisible by 16 where it is
    (in a tuple parameter as well). Returns the attributes by argument name (see
    :func:`source`) and the constants to add."""
    div16 = [["tt.divisibility", 16]]
    attrs, ones = {}, {}
    for name, t in sig.items():
        if t.startswith("*"):
            attrs[name] = div16
        elif t != "constexpr" and name in values:
            if values[name] == 1:
                ones[name] = 1
            elif values[name] % 16 == 0:
                attrs[name] = div16
    return attrs, ones


# kernels with tuple parameters: how they bundle their arguments, and the defaults
BUNDLED = {
    deepselect_rows_kernel: (ROWS_GROUPS, ROWS_DEFAULTS),
    triton_short.short_rows_kernel: (SHORT_GROUPS, SHORT_DEFAULTS),
    triton_short.split_fused_kernel: (SPLIT_GROUPS, SPLIT_DEFAULTS),
    triton_short.radix_phases_kernel: (PASSES_GROUPS, PASSES_DEFAULTS),
    bracket_rows_kernel: (BRACKET_GROUPS, BRACKET_DEFAULTS),
}


def source(fn, sig: dict, consts: dict, attrs: dict) -> ASTSource:
    """``fn`` to compile, from its arguments by name: ``sig`` their types
    ("constexpr" for the compile-time ones), ``consts`` the compile-time values (a
    bundled one left out: its default), ``attrs`` as :func:`launch_specialization`
    gives them; a tuple parameter's members at their paths, one wholly compile-time
    as one tuple."""
    groups, defaults = BUNDLED.get(fn, ({}, {}))
    consts = {**defaults, **consts}
    signature, constexprs, paths = {}, {}, {}
    for i, p in enumerate(fn.params):
        members = groups.get(p.name)
        if members is None:
            paths[p.name] = (i,)
            signature[p.name] = sig.get(p.name, "constexpr")
            if signature[p.name] == "constexpr" and p.name in consts:
                constexprs[(i,)] = consts[p.name]
            continue
        types = tuple(sig.get(m, "constexpr") for m in members)
        if p.is_constexpr:
            signature[p.name] = "constexpr"
            constexprs[(i,)] = tuple(consts[m] for m in members)
            continue
        signature[p.name] = types
        for j, m in enumerate(members):
            paths[m] = (i, j)
            if types[j] == "constexpr":  # (an argument a launch leaves out: None)
                constexprs[(i, j)] = consts.get(m)
    return ASTSource(
        fn, signature, constexprs=constexprs, attrs={paths[n]: a for n, a in attrs.items()}
    )


def call_defaults(dtype) -> dict:
    """Integer arguments every launch passes the same way with default options: no
    index offset, fill index -1 and the dtype's fill value, no page map."""
    fill = _fill_bits(TopkOptions().resolved_fill_value(dtype), dtype)
    return dict(off_scalar=0, fill_index=-1, fill_bits=fill, page_stride=0, max_pages=0, n_batch=0)


def compile_rows_kernel(
    dtype,
    k,
    order=Order.NONE,
    largest=True,
    asm=True,
    idx64=False,
    profile=False,
    paged=False,
    every=1,
    novec=False,
    w32=False,
    programs=None,
    overrides=None,
    stream=None,
    kept=None,
):
    """The streaming kernel as a launch builds it: ``stream`` (rows, n), the launch
    run_triton takes for that shape on an H200 (132 SMs); else launch_config's, with
    ``programs`` per SM, a check every ``every`` blocks, the warp-private loop
    (``w32``) and LaunchConfig fields (``overrides``) as asked. ``kept``: the sampling
    launch (triton_sampling.kept_rows) instead, "mask" or "renorm", "-k" appended for
    a per-row k tensor."""
    cfg = launch_config(dtype, k)
    if stream is not None:
        cfg = stream_config(dtype, k, *stream, H200_SMS)
    if programs is not None:
        cfg = occupancy_variant(cfg, programs)
    if every > 1:
        cfg = check_variant(cfg, k, every)
    if w32:
        cfg = dataclasses.replace(cfg, w32=True)
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    bits = 16 if dtype != torch.float32 else 32
    raw = "*i16" if bits == 16 else "*i32"
    sig = {
        "x_ptr": raw,
        "stride_x": "i32",
        "rows": "i32",
        "N": "i32",
        "begin_ptr": "*i64",
        "end_ptr": "*i64",
        "off_ptr": "*i64",
        "off_scalar": "i32",
        "ov_ptr": raw,
        "oi_ptr": "*i64" if idx64 else "*i32",
        "stride_ov": "i32",
        "stride_oi": "i32",
        "cand_key_ptr": "*i32",
        "cand_idx_ptr": "*i32",
        "cand_cnt_ptr": "*i32",
        "k": "i32",
        "B2": "i32",
        "fill_index": "i32",
        "fill_bits": "i32",
        "seed": "i32",
        "prof_ptr": "*i64",
        "preset_ptr": "*i32",
        "page_ptr": "*i32",
        "page_stride": "i32",
        "max_pages": "i32",
        "n_batch": "i32",
        "r2b_ptr": "*i64",
    }
    consts = kernel_constants(
        dtype,
        cfg,
        largest=largest,
        order=order,
        has_window=0 if kept else 3,  # begin and end tensors
        off_tensor=False,
        write_values=not kept,
        asm=asm,
        vec=not novec,
    )
    if kept:  # its output, and a per-row k (else None, a constant)
        renorm = kept.startswith("renorm")
        k_tensor = kept.endswith("-k")
        floats = {torch.float32: "*fp32", torch.bfloat16: "*bf16", torch.float16: "*fp16"}
        sig.update(dst_ptr=floats[dtype] if renorm else raw)
        sig.update(dst_stride="i32", **({"kt_ptr": "*i64"} if k_tensor else {}))
        consts.update(FUSED=True, RENORM=renorm, K_TENSOR=k_tensor, FP16=dtype == torch.float16)
        consts.update(NINF=_fill_bits(float("-inf"), dtype))
    consts.update(PROFILE=profile, PRESET=profile, PAGED=paged, PAGE_SHIFT=4 if paged else 0)
    consts.update(HAS_R2B=paged)
    # the integer arguments of a launch on [rows, n] (4096 x 1M unless ``stream``
    # says), its outputs contiguous, default options
    rows, n = stream if stream is not None else (4096, 1 << 20)
    values = dict(stride_x=n, rows=rows, N=n, stride_ov=k, stride_oi=k, k=k, B2=cfg.B2, seed=0)
    values.update(dst_stride=n)
    values.update(call_defaults(dtype))
    attrs, ones = launch_specialization(deepselect_rows_kernel, sig, values)
    consts.update(ones)
    for name in consts:
        sig[name] = "constexpr"
    src = source(deepselect_rows_kernel, sig, consts, attrs)
    return compile_sm90(
        src, {"num_warps": NUM_WARPS, **({"maxnreg": cfg.maxnreg} if cfg.maxnreg else {})}
    )


def compile_short_levels(dtype, rows, n, k, order=Order.NONE, paged=False, by_phase=False):
    """Each launch of the short/split path's plan for ``[rows, n]`` (132 SMs), compiled
    as run_short launches it (its register cap): [(level, cap, compiled kernel)]. With
    ``k = 1`` the kernels take k as a compile-time constant, as a launch does (Triton
    specializes an integer argument equal to 1). ``by_phase``: the radix passes one
    launch per phase, as run_short launches them where a device refuses their
    cooperative launch."""
    x = torch.empty(rows, n, dtype=dtype, device="meta")  # the plan reads shapes only
    plan = triton_short.short_path(x, k, TopkOptions(order=order), 132)
    if plan is None:
        raise SystemExit(f"{rows} x {n} k={k}: the streaming kernel, not the short path")
    flags = (
        ("largest", True), ("order", order), ("has_window", 2), ("off_tensor", False),
        ("write_values", False),
    )  # fmt: skip
    page_flags = (("PAGED", True), ("PAGE_SHIFT", 6), ("HAS_R2B", False)) if paged else ()
    out = []
    # the arguments run_short launches each level with (its compile-time ones, warps,
    # register cap); the compile-time parameters left at their defaults there (the page
    # map's flags), spelled out
    kernel, signature = triton_short.short_rows_kernel, triton_short.kernel_signature
    levels = plan.levels
    if plan.in_launch:  # one launch: compiled once, reported as its first level
        kernel, signature = triton_short.split_fused_kernel, triton_short.in_launch_signature
        levels = plan.levels[:1]
    launch = triton_short._launch_kwargs(dtype, plan, flags, page_flags, False)
    runs = [(lv, kernel, signature, kw) for lv, kw in zip(levels, launch, strict=True)]
    if plan.passes and order != Order.VALUE:  # the radix passes' launches
        sync = plan.grid_sync and not by_phase
        each = triton_short._passes_kwargs(dtype, plan, flags, page_flags, sync)
        lv = plan.pass_level
        runs = [(lv, triton_short.radix_phases_kernel, triton_short.passes_signature, kw)
                for kw in each]  # fmt: skip
    for lv, kernel, signature, kw in runs:
        params = inspect.signature(kernel.fn).parameters.values()
        defaults = {p.name: p.default for p in params if p.default is not p.empty}
        consts = {**defaults, **kw}
        launch = ("num_warps", "maxnreg", "launch_cooperative_grid")
        opts = {o: consts.pop(o) for o in launch if o in consts}
        sig = signature(dtype, False)  # its own arguments, by name
        sig.update({name: "constexpr" for name in consts})
        # the integer arguments of a launch on contiguous rows and outputs, default
        # options (the candidate buffers' widths left out: the plan's)
        values = dict(stride_xr=n, stride_xc=1, N=n, k=k, L=lv.L, nseg=lv.nseg)
        values.update(stride_ovr=k, stride_ovc=1, stride_oir=k, stride_oic=1)
        values.update(call_defaults(dtype))
        attrs, ones = launch_specialization(kernel, sig, values)
        consts.update(ones)
        sig.update({name: "constexpr" for name in ones})
        src = source(kernel, sig, consts, attrs)
        c = compile_sm90(src, opts)
        out.append((lv, opts.get("maxnreg"), c))
    return triton_short.describe(plan), out


def bins_clash(ptx: str, bits: int) -> int:
    """Shared-memory instructions of Triton's own while a kernel's inline shared-memory
    bins of ``bits``-bit words live (from their inline zero to their inline read,
    ``ops.triton.sync``): each one could overwrite a bin, so there must be none."""
    zero = "st.shared.b64 [%a], %z" if bits == 64 else "st.shared.b32 [%a], 0"
    inside = live = False
    clash = 0
    for line in ptx.splitlines():
        if "begin inline asm" in line or "end inline asm" in line:
            inside = "begin" in line
        elif inside and zero in line:
            live = True
        elif inside and f"ld.shared.b{bits}" in line and "[%a]" in line:
            live = False
        elif live and not inside and ".shared" in line:
            clash += 1
    return clash


def stage_clash(ptx: str) -> int:
    """Shared-memory instructions of Triton's own that could meet a kernel's inline
    staging words (``ops.triton.sync._smem_words_store``, read back by an inline
    load): between the stores and their read, or after the last barrier before the
    first store (a warp still reading Triton's bytes while another stages). Must be 0."""
    inside = live = False
    clash = since_bar = 0
    for line in ptx.splitlines():
        t = line.strip()
        if "begin inline asm" in t or "end inline asm" in t:
            inside = "begin" in t
        elif inside and "st.shared.b32 [%a], %" in t:
            clash += since_bar if not live else 0
            live, since_bar = True, 0
        elif inside and live and "ld.shared.b32" in t and "[%a]" in t:
            live = False
        elif not inside and "bar.sync" in t:
            since_bar = 0
        elif not inside and ".shared" in t:
            clash += live
            since_bar += 1
    return clash


_PTXAS_LOGS: dict[str, str] = {}
"""The log of Triton's own ``ptxas -v`` for each PTX that :func:`compile_sm90` built, by
the PTX's hash: what :func:`ptxas_report` reads instead of assembling it again."""


def _ptx_key(ptx: str) -> str:
    return hashlib.sha256(ptx.encode()).hexdigest()


def compile_sm90(src, options=None):
    """``triton.compile`` for sm_90, keeping the report of the ptxas run that built the
    cubin (Triton passes ``-v`` and prints the log where asked): a kernel's registers
    and spills then cost no second assembly, a third of a build's time. A kernel loaded
    from Triton's cache has no log; :func:`ptxas_report` assembles its PTX."""
    knobs = triton.knobs.nvidia
    was, knobs.dump_ptxas_log = knobs.dump_ptxas_log, True
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log):
            c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    finally:
        knobs.dump_ptxas_log = was
    if "Used " in log.getvalue():
        _PTXAS_LOGS[_ptx_key(c.asm["ptx"])] = log.getvalue()
    return c


def ptxas_report(ptx: str) -> str:
    """Registers / spills as ptxas reports them for sm_90: from the build's own ptxas
    run where :func:`compile_sm90` kept its log, else by assembling the PTX."""
    info = _PTXAS_LOGS.get(_ptx_key(ptx))
    if info is None:
        info = _assemble(ptx)
    regs = re.search(r"Used (\d+) registers", info)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", info)
    stack = re.search(r"(\d+) bytes stack frame", info)
    return (
        f"regs={regs.group(1) if regs else '?'} "
        f"spill_st={spill.group(1) if spill else '?'} spill_ld={spill.group(2) if spill else '?'} "
        f"stack={stack.group(1) if stack else '?'}"
    )


def _assemble(ptx: str) -> str:
    """``ptxas -v`` for sm_90 on the PTX: its log."""
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/ptxas-blackwell")
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "k.ptx")
        open(f, "w").write(ptx)
        r = subprocess.run(
            [ptxas, "-v", "-arch=sm_90a", f, "-o", os.path.join(d, "k.o")],
            capture_output=True,
            text=True,
        )
    return r.stderr


def sass(cubin: bytes) -> str:
    """The cubin's SASS as nvdisasm prints it (control flow annotated)."""
    nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/nvdisasm")
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "k.cubin")
        open(f, "wb").write(cubin)
        return subprocess.run(
            [nvdisasm, "-c", "-g", f], capture_output=True, text=True, check=True
        ).stdout


_SASS_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_SASS_SOURCE = re.compile(r'## File "([^"]+)", line (\d+)')
_SASS_LABEL = re.compile(r"^\s*\.L_x_(\d+):")
_SASS_BACK = re.compile(r"BRA\s+`\(\.L_x_(\d+)\)")


_SASS_OP = re.compile(r"(?:@!?U?P\w+\s+)?([A-Z0-9_]+)([.A-Z0-9_]*)")


def _opcode(ins: str) -> tuple[str, str]:
    """An instruction's opcode and its modifiers (``LDG``, ``.E.128``), its guard
    predicate dropped."""
    m = _SASS_OP.match(ins)
    return (m.group(1), m.group(2)) if m else ("?", "")


def sass_stats(cubin: bytes) -> str:
    """Instruction count of the SASS and of the operations the pivot searches use
    (static: a loop body counts once)."""
    ops = collections.Counter()
    for line in sass(cubin).splitlines():
        if m := _SASS_LINE.search(line):
            op, mods = _opcode(m.group(2))
            ops[op] += 1
            if op == "LDG" and ".128" in mods:  # 16-byte global loads
                ops["LDG128"] += 1
    keys = ("VOTE", "POPC", "LOP3", "ISETP", "SEL", "SHFL", "ATOMS", "BAR", "LDG128")
    total = sum(n for o, n in ops.items() if o != "LDG128")
    return f"sass={total} " + " ".join(f"{o}={ops[o]}" for o in keys)


def sass_loops(text: str, min_body: int = 16, top: int = 6) -> list[str]:
    """The loops of nvdisasm's SASS (``sass``'s text; a branch back to a label at least
    ``min_body`` instructions before it), one line each in program order: the body's
    instructions, its global loads and stores, shared stores and atomics, and the
    ``top`` source lines (``file:line``, from ``-lineinfo``) with the most instructions
    in it. What a step of a read costs, before any GPU time."""
    insts, labels, src = [], {}, "?"
    for line in text.splitlines():
        if m := _SASS_SOURCE.search(line):
            src = f"{os.path.basename(m.group(1))}:{m.group(2)}"
        elif m := _SASS_LABEL.match(line):
            labels[m.group(1)] = len(insts)
        elif m := _SASS_LINE.search(line):
            insts.append((m.group(2), src))
    out = []
    for i, (ins, _) in enumerate(insts):
        m = _SASS_BACK.search(ins)
        if not m or labels.get(m.group(1), i) > i - min_body:
            continue
        body = insts[labels[m.group(1)] : i + 1]
        ops = collections.Counter(_opcode(b)[0] for b, _ in body)
        lines = collections.Counter(s for _, s in body).most_common(top)
        out.append(
            f"loop of {len(body)}: LDG={ops['LDG']} STG={ops['STG']} STS={ops['STS']} "
            f"ATOMS={ops['ATOMS'] + ops['RED']} | "
            + " ".join(f"{s}={n}" for s, n in lines)
        )
    return out


def config_overrides(spec: str) -> dict:
    """``FIELD=VALUE,...`` as LaunchConfig fields, each value read as its field's type
    (bool: 0/1/true/false); ValueError for an unknown field or a bad value."""
    fields = {f.name: f.type for f in dataclasses.fields(LaunchConfig)}
    out = {}
    for item in filter(None, spec.split(",")):
        name, _, value = item.partition("=")
        if name not in fields:
            raise ValueError(f"--cfg {item}: LaunchConfig has no field {name!r}")
        kind = str(fields[name])
        if kind.startswith("bool"):
            if value.lower() not in ("0", "1", "true", "false"):
                raise ValueError(f"--cfg {item}: a bool is 0, 1, true or false")
            out[name] = value.lower() in ("1", "true")
        elif kind.startswith("float"):
            out[name] = float(value)
        else:
            out[name] = None if value == "None" else int(value)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="all")
    p.add_argument("--k", type=int, nargs="*", default=[512])
    p.add_argument("--ptx", default=None)
    p.add_argument("--sass", default=None, help="also write the SASS (nvdisasm) to this prefix")
    p.add_argument("--order", choices=[o.value for o in Order], nargs="*")
    p.add_argument("--profile", action="store_true", help="the profiling build")
    p.add_argument("--paged", action="store_true", help="indices mapped through a page table")
    p.add_argument(
        "--kept",
        choices=["mask", "renorm", "mask-k", "renorm-k"],
        help="the sampling launch (one read of the rows): masked or renormalised rows, "
        "-k: a per-row k",
    )
    p.add_argument("--every", type=int, default=1, help="blocks between compaction checks")
    p.add_argument("--novec", action="store_true", help="4-byte loads, three blocks rotated")
    p.add_argument("--w32", action="store_true", help="warps stream independently")
    p.add_argument(
        "--programs", type=int, default=None, help="programs per SM (their register cap)"
    )
    p.add_argument(
        "--cfg",
        default="",
        metavar="FIELD=VALUE,...",
        help="LaunchConfig fields set last (e.g. sample_radix=1,sample_bits=16)",
    )
    p.add_argument(
        "--short",
        default=None,
        metavar="ROWSxN",
        help="the short/split path's launches for this shape instead (e.g. 4096x8192)",
    )
    p.add_argument(
        "--stream",
        default=None,
        metavar="ROWSxN",
        help="the streaming launch run_triton takes for this shape on an H200 (132 SMs)",
    )
    p.add_argument(
        "--variant",
        default="plan",
        help="with --short: 'plan' (the launches of the shape's plan) or 'by-phase' (its "
        "radix passes one launch per phase, as where a cooperative launch is refused)",
    )
    p.add_argument(
        "--sass-stats", action="store_true", help="also count SASS instructions (nvdisasm)"
    )
    a = p.parse_args()
    try:
        overrides = config_overrides(a.cfg)
    except ValueError as e:
        p.error(str(e))
    dtypes = list(DT) if a.dtype == "all" else [a.dtype]
    stream = tuple(int(v) for v in a.stream.lower().split("x")) if a.stream else None
    if a.short:
        rows, n = (int(v) for v in a.short.lower().split("x"))
        for d in dtypes:
            for k in a.k:
                for order in Order:
                    if a.order and order.value not in a.order:
                        continue
                    for v in a.variant.split(","):
                        plan, levels = compile_short_levels(
                            DT[d], rows, n, k, order, a.paged, v == "by-phase"
                        )
                        for lv, cap, c in levels:
                            stats = f" {sass_stats(c.asm['cubin'])}" if a.sass_stats else ""
                            # the shared-memory histograms' atomics in the PTX
                            stats += f" smem_hist={c.asm['ptx'].count(SMEM_HIST_MARK)}"
                            if a.sass:
                                name = f"{a.sass}.{d}.{k}.{order.value}.{v}.L{lv.L}.sass"
                                open(name, "w").write(sass(c.asm["cubin"]))
                            where = f"L={lv.L} nseg={lv.nseg} warps={lv.num_warps}"
                            print(
                                f"{d:5s} k={k:5d} order={order.value:5s} {v:6s} {plan}: "
                                f"{where} cap={cap} shared={c.metadata.shared} "
                                f"{ptxas_report(c.asm['ptx'])}{stats}"
                            )
        return
    for d in dtypes:
        for k in a.k:
            for order in Order:
                if a.order and order.value not in a.order:
                    continue
                c = compile_rows_kernel(
                    DT[d],
                    k,
                    order,
                    profile=a.profile,
                    paged=a.paged,
                    every=a.every,
                    novec=a.novec,
                    w32=a.w32,
                    programs=a.programs,
                    overrides=overrides,
                    stream=stream,
                    kept=a.kept,
                )
                ptx = c.asm["ptx"]
                print(
                    f"{d:5s} k={k:5d} order={order.value:5s} shared={c.metadata.shared} "
                    f"{ptxas_report(ptx)}"
                )
                if a.ptx:
                    open(f"{a.ptx}.{d}.{k}.{order.value}.ptx", "w").write(ptx)
                if a.sass:
                    open(f"{a.sass}.{d}.{k}.{order.value}.sass", "w").write(sass(c.asm["cubin"]))


if __name__ == "__main__":
    main()
