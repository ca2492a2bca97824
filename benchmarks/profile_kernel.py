"""Where one program's time goes, per row: the kernel's profiling build on a GPU.

For each shape and launch variant, prints the measured time (normal build) and, from
the profiling build (SM cycle counters around each phase, 128 registers so that two
programs still fit per SM), the mean per row of: the whole row, filtering (load waits,
the compare, placing hits, the per-block count), compactions inside the stream, the
final compaction + output (last: the compaction alone, block-synchronous loop), the
sample's bound taken in registers (pre: the prologue of `sample_pre`, and its
phases: the loads with the keys' range, the key search), the rest (other: the row's
set-up, the per-block compaction checks, the first loads' wait; chk: the checks, with
their barrier's wait for the slowest warp, their compactions apart); the compactions'
own phases (key: the pivot key's search, cens: the census at it, ties: the tied
indices' search, copy: the survivors' placement; every compaction of the row, the
final one included); and compactions, hits and blocks with hits per row.
Variants: the mode's own, or kernel_table.py's --variant parts joined with '+' on the
block-synchronous default (``radix``, ``stol2+preset``).
``preset`` starts every row at its true k-th key: the stream with a perfect
threshold, no rising and (almost) no compaction. With independent warps (``w32*``) the
phases are warp 0's: filter = its compares and hit path (not its load waits), compact =
its time in the meetings (waiting for the others, the compactions, the final one),
final = the output write; hits and hit blocks are warp 0's too (about 1/8 of the row's).

    python benchmarks/profile_kernel.py [--quick] [--dtype fp32] [--variants w32,w32pre]
        [--dist ascending] [--only bf16:256:65536:512:none]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import subprocess

import torch
from kernel_table import DT, apply_variant, check, copies_for, draw, only_cases, time_ms

from deepselect import bench
from deepselect.keys import to_keys
from deepselect.ops.triton.common import PROF_SLOTS
from deepselect.options import TopkOptions
from deepselect.triton_backend import (
    _sm_count,
    check_variant,
    launch_config,
    other_search,
    run_triton,
    stream_config,
)

SHAPES = [  # dtype, batch, N, k, order
    ("bf16", 4096, 1 << 20, 512, "none"),
    ("bf16", 256, 1 << 20, 512, "none"),
    ("bf16", 256, 1 << 16, 512, "none"),
    ("bf16", 512, 1 << 17, 2048, "none"),
    ("fp32", 4096, 129_280, 512, "value"),
    ("fp32", 256, 129_280, 512, "value"),
]
QUICK = [SHAPES[0], SHAPES[1], SHAPES[5]]
FIELDS = ["row", "filter", "compact", "final", "n_comp", "hits", "hit_blocks", "rows"]


def sm_mhz() -> float:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return float(out.split()[0])
    except (OSError, ValueError, subprocess.CalledProcessError):
        return 1980.0


def variants(dtype, k, quick=False):
    # the block-synchronous loop (its phases are timed); w32 / w32pre: warps independent
    base = dataclasses.replace(launch_config(dtype, k), w32_from=None)
    crowded = dataclasses.replace(stream_config(dtype, k, 1 << 20, base.B, 1), w32_from=None)
    if quick:
        out = {
            "default": (base, False),
            "preset": (base, True),
            # the trigger's block-wide sum every 8th block: the loop almost without it
            "check8pre": (check_variant(base, k, 8), True),
            "w32": (dataclasses.replace(base, w32=True), False),
            "w32pre": (dataclasses.replace(base, w32=True), True),
            "w32nosb": (dataclasses.replace(base, w32=True, sample=False), False),
            "w32nopf": (dataclasses.replace(base, w32=True, ahead=0), False),
            "w32nopfpre": (dataclasses.replace(base, w32=True, ahead=0), True),
            # three programs per SM (80 registers), the register-held key search kept
            "w32occ3": (dataclasses.replace(base, w32=True, programs_per_sm=3, maxnreg=80), False),
            # the launch of crowded rows (stream_config; fp32: a check every second block)
            "crowded": (crowded, False),
            "crowdedpre": (crowded, True),
        }
        if base.search_tol:  # fp32: the compactions' early stop off
            out["exact"] = (dataclasses.replace(base, search_tol=0), False)
        return out
    out = {"default": (base, False), "other": (other_search(base), False)}
    out["preset"] = (base, True)
    out.update(crowded=(crowded, False), crowdedpre=(crowded, True))
    big = 2 * base.CAP
    out["cap2x"] = (dataclasses.replace(base, CAP=big, B2=big - k - base.B), False)
    out["check2"] = (check_variant(base, k, 2), False)
    return out


def composed(name, dtype, k):
    """A variant named by kernel_table.py's --variant parts joined with '+' on the
    block-synchronous default (``radix+preset``: with the preset key), or None where a
    part is unknown."""
    cfg = dataclasses.replace(launch_config(dtype, k), w32_from=None)
    parts = name.split("+")
    try:
        for part in parts:
            if part != "preset":
                cfg = apply_variant(cfg, part, k)
    except ValueError:
        return None
    return cfg, "preset" in parts


def call(x, k, opt, cfg, kth=None, prof=None):
    v = torch.empty((x.shape[0], k), dtype=x.dtype, device=x.device)
    i = torch.empty((x.shape[0], k), dtype=torch.int32, device=x.device)
    pre = kth[id(x)] if kth is not None else None
    run_triton(x, k, opt, v, i, config=cfg, profile=prof, preset=pre)
    return v, i


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--dtype", choices=sorted(DT), default=None, help="only these shapes")
    p.add_argument(
        "--only",
        default=None,
        help="comma-separated DTYPE:BATCH:N:K:ORDER (any shapes, as kernel_table.py's)",
    )
    p.add_argument("--dist", default="normal", help="input kind, as kernel_table.py's --dist")
    p.add_argument(
        "--variants",
        default=None,
        help="comma-separated: only these of the mode's variants (e.g. w32,w32pre)",
    )
    a = p.parse_args()
    wanted = set(a.variants.split(",")) if a.variants else None
    if wanted:  # every name known before anything runs
        known = set(variants(torch.bfloat16, 512, a.quick)) | set(
            variants(torch.float32, 512, a.quick)
        )
        known |= {w for w in wanted if composed(w, torch.float32, 512) is not None}
        if wanted - known:
            p.error(f"--variants: unknown {sorted(wanted - known)}; known {sorted(known)}")
    mhz = sm_mhz()
    print(f"SM clock {mhz:.0f} MHz; per-row means in us")
    hdr = (
        f"{'shape':28s} {'variant':9s} {'ms':>7s} {'TB/s':>5s} | {'row':>6s} {'filter':>6s} "
        f"{'compact':>7s} {'final':>6s} ({'last':>4s}) {'pre':>5s} ({'load':>4s} {'srch':>4s}) "
        f"{'other':>5s} ({'chk':>4s}) | {'key':>4s} {'cens':>4s} {'ties':>4s} {'copy':>4s} | "
        f"{'comp':>4s} {'hits':>6s} {'hitblk':>6s} chk"
    )
    print(hdr, flush=True)
    shapes = QUICK if a.quick else SHAPES
    if a.only:
        try:
            shapes = only_cases(a.only)
        except ValueError as e:
            p.error(str(e))
    for dts, rows, n, k, order in shapes:
        if a.dtype and dts != a.dtype:
            continue
        dtype = DT[dts]
        esz = torch.finfo(dtype).bits // 8
        nbytes = rows * n * esz
        inputs = [draw(a.dist, rows, n, dtype, s) for s in range(copies_for(nbytes))]
        opt = TopkOptions(order=order)
        # each input's true k-th key (computed before timing)
        kth = {id(x): to_keys(torch.topk(x, k, dim=1).values[:, -1:]).view(-1) for x in inputs}
        kth = {key: q.to(torch.int32) for key, q in kth.items()}
        shape = f"{dts} {rows}x{n} k={k} {order}" + ("" if a.dist == "normal" else f" {a.dist}")
        cases = variants(dtype, k, a.quick)
        cases.update({w: composed(w, dtype, k) for w in (wanted or ()) if w not in cases})
        for name, (cfg, use_preset) in cases.items():
            if name == "other" and cfg == launch_config(dtype, k):
                continue
            if wanted and name not in wanted:
                continue

            fn = functools.partial(call, k=k, opt=opt, cfg=cfg, kth=kth if use_preset else None)

            v, i = fn(inputs[0])
            status = check(inputs[0], k, order, v, i)
            ms = time_ms(fn, inputs, a.repeats)
            pcfg = cfg
            grid = min(rows, cfg.programs_per_sm * _sm_count(0))
            prof = torch.zeros((grid, int(PROF_SLOTS)), dtype=torch.int64, device="cuda")
            call(inputs[0], k, opt, pcfg, kth if use_preset else None, prof)
            tot = prof.sum(dim=0).double() / rows
            us = tot / mhz  # cycles -> us at the maximum SM clock
            other = us[0] - us[1] - us[2] - us[3] - us[8]  # row set-up, checks, load waits
            tb = bench.tbps(bench.effective_bytes(rows, n, k, dtype), ms * 1e-3)
            print(
                f"{shape:28s} {name:9s} {ms:7.3f} {tb:5.2f} | {us[0]:6.1f} {us[1]:6.1f} "
                f"{us[2]:7.1f} {us[3]:6.1f} ({us[11]:4.1f}) {us[8]:5.1f} "
                f"({us[9]:4.1f} {us[10]:4.1f}) {other:5.1f} ({us[16]:4.1f}) | "
                f"{us[12]:4.1f} {us[13]:4.1f} {us[14]:4.1f} {us[15]:4.1f} | "
                f"{tot[4]:4.1f} {tot[5]:6.0f} {tot[6]:6.1f} {status}",
                flush=True,
            )
        del inputs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
