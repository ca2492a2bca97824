"""The kernel's benchmark table on a GPU, beside torch.topk and a plain read, in one run.

Prints one line per shape: time of deepselect, torch.topk and x.amax(dim=1) (the read
ceiling), speedup, effective TB/s = (valid input bytes + output bytes) / time.
Inputs rotate through copies that together exceed the L2 cache (cold L2); timing
uses CUDA events, a warm-up and the median of repeats, the timed calls queued behind
a sleep kernel so that the events hold device time only (``--sync``: one call at a
time, the host's launch inside the events as before 2026-12-01). Every result is
checked against torch.topk's values before it is timed.

    python benchmarks/kernel_table.py [--quick] [--csv out.csv] [--dist normal] [--sync]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import re
import statistics
import sys

import torch

from deepselect import bench, reference
from deepselect.distributions import make
from deepselect.options import TopkOptions
from deepselect.triton_backend import (
    _sm_count,
    check_variant,
    chunk_variant,
    launch_config,
    occupancy_variant,
    other_search,
    run_triton,
    stream_config,
    tight_variant,
)

L2_BYTES = 60 * 2**20

CASES = [  # dtype, batch, N, k, order
    ("bf16", 4096, 1 << 20, 512, "none"),
    ("bf16", 256, 1 << 20, 512, "none"),
    ("bf16", 256, 1 << 16, 512, "none"),
    ("bf16", 768, 1 << 18, 1024, "none"),
    ("bf16", 512, 1 << 17, 2048, "none"),
    ("bf16", 6, 1 << 20, 512, "none"),
    ("fp32", 4096, 129_280, 512, "value"),
    ("fp32", 256, 129_280, 512, "value"),
    ("fp32", 6, 129_280, 512, "value"),
]
QUICK = [CASES[0], CASES[1], CASES[2], CASES[6], CASES[7]]
DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def copies_for(nbytes: int) -> int:
    return max(1, min(16, -(-3 * L2_BYTES // max(nbytes, 1))))


SYNC = False
"""--sync: the old timing, one call at a time (its host work inside the events)."""


def time_ms(fn, inputs, repeats: int = 20, sync: bool | None = None) -> float:
    """Median device time of one call of ``fn``, over the inputs in turn (cold L2 when
    they are many). The timed calls are queued behind a sleep kernel and run back to
    back, so each event pair holds the call's device work only. Timed one at a time
    (``sync``, by default SYNC), an event pair also holds the host's launch of the
    call: the device sits idle between the first event and the kernel."""
    sync = SYNC if sync is None else sync
    for x in inputs[:2]:
        fn(x)
    torch.cuda.synchronize()
    pairs = []
    if not sync:
        bench.head_start(repeats)
    for r in range(repeats):
        x = inputs[r % len(inputs)]
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(x)
        b.record()
        if sync:
            b.synchronize()
        pairs.append((a, b))
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in pairs)


def time_graph_ms(fn, inputs, repeats: int = 20) -> float:
    """Device time of one call: ``repeats`` calls (over the inputs in turn) captured in
    one CUDA graph, the replay timed and divided; the median of 5 replays, queued
    behind a sleep kernel as in :func:`time_ms`. No host time between launches,
    unlike eager calls (a call of several small launches is otherwise timed as its
    host work)."""
    for x in inputs[:2]:
        fn(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for r in range(repeats):
            fn(inputs[r % len(inputs)])
    g.replay()
    torch.cuda.synchronize()
    pairs = []
    if not SYNC:
        bench.head_start(5)
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        if SYNC:
            b.synchronize()
        pairs.append((a, b))
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) / repeats for a, b in pairs)


def draw(dist: str, rows: int, n: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    # the normal family on the GPU (a 4096 x 1M batch in float64 on the host takes
    # minutes); the other kinds as the tests draw them
    if dist in ("normal", "shifted", "tiny"):
        g = torch.Generator(device="cuda").manual_seed(seed)
        x = torch.randn(rows, n, device="cuda", generator=g)
        x = x + 100.0 if dist == "shifted" else x * 1e-8 if dist == "tiny" else x
        return x.to(dtype)
    return make(dist, rows, n, dtype, "cuda", seed=seed)


def check(x, k, order, vals, idx) -> str:
    """Same multiset of values as torch.topk (ties may pick other indices), and the
    values are x[row, idx]."""
    tv = torch.topk(x.float(), k, dim=1).values
    ours = vals.float()
    if order != "value":  # unsorted or by index: compared as sets
        ours = ours.sort(dim=1, descending=True).values
    ok = torch.equal(torch.nan_to_num(ours, nan=1e38), torch.nan_to_num(tv, nan=1e38))
    ok &= torch.equal(
        torch.gather(x, 1, idx.long()).float().nan_to_num(1e38), vals.float().nan_to_num(1e38)
    )
    return "ok" if ok else "WRONG"


FLAGS = {  # launch variants that set fields of the launch
    "novec": dict(vec=False),
    "w32": dict(w32=True),
    "now32": dict(w32_from=None),
    "pre": dict(sample_pre=True),
    "nopre": dict(sample_pre=False),
    "burst": dict(burst=True),
    "nosb": dict(sample=False),
    "noballot": dict(ballot=False),
    "nofast": dict(fast=False),
    "nosingle": dict(single=False),
    "twobar": dict(one_barrier=False),
    "tiesheld": dict(ties_held=True),
    "lean": dict(lean_final=True),
    "tiesrank": dict(ties_rank=True),
    "spread": dict(sample_spread=True),
    "nospread": dict(sample_spread=False),
    "noregties": dict(reg_ties=False),
    "radix": dict(radix_search=True),
    "noradix": dict(radix_search=False),
    "smem": dict(radix_search=True, smem_hist=True),
    "chunk": dict(chunk_search=True),
    "srdx": dict(sample_radix=True),
    "vfk": dict(values_from_keys=True),
    "ends": dict(sample_ends=True),
    "noends": dict(sample_ends=False),
    "novfk": dict(values_from_keys=False),
    "tri": dict(tri_search=True),
    "notri": dict(tri_search=False),
}
NUMBERED = {  # launch variants NAME<N> that set one field to N
    "pf": ("ahead", int),
    "ring": ("ring", int),
    "raise": ("raise_every", int),
    "sk": ("sample_keys", int),
    "stol": ("sample_tol", int),
    "sbits": ("sample_bits", int),
    "tol": ("search_tol", int),
    "z": ("sample_z", float),
}


def apply_variant(cfg, part, k):
    """``cfg`` changed as the launch variant ``part`` says (see --variant); ValueError
    for an unknown one."""
    if part in ("default", "plain", "unchunked"):  # plain, unchunked: main() starts there
        return cfg
    if part == "other":
        return other_search(cfg)
    if part in FLAGS:
        return dataclasses.replace(cfg, **FLAGS[part])
    if part == "regsearch":  # e.g. occ3+regsearch: the register-held key search kept
        return dataclasses.replace(cfg, reg_search=cfg.CAP <= 8192)
    m = re.fullmatch(r"([a-z]+)(\d+)", part)
    name, n = (m[1], m[2]) if m else (None, None)
    if name == "check":  # check1: every block, the buffer as launched
        return check_variant(cfg, k, int(n))
    if name == "chunk":  # chunk8: radix passes over the filled slots, checks every 8 blocks
        return chunk_variant(cfg, k, int(n))
    if name == "tight":  # every N blocks in the launch's buffer: less slack
        return tight_variant(cfg, k, int(n))
    if name == "occ":
        return occupancy_variant(cfg, int(n))
    if name == "ch":  # compaction chunk (NP kept at CH * NP = 4096)
        return dataclasses.replace(cfg, CH=int(n), NP=max(2, 4096 // int(n)))
    if name in NUMBERED:
        field, kind = NUMBERED[name]
        return dataclasses.replace(cfg, **{field: kind(n)})
    raise ValueError(f"unknown variant {part!r}")


def only_cases(spec: str) -> list[tuple]:
    """The cases ``--only`` names: DTYPE:BATCH:N picks the table's (any k and order),
    DTYPE:BATCH:N:K:ORDER any shape; ValueError for a malformed or unknown one."""
    out = []
    for item in spec.split(","):
        f = item.split(":")
        if len(f) == 3 and f[0] in DT:
            found = [c for c in CASES if c[:3] == (f[0], int(f[1]), int(f[2]))]
            if not found:
                raise ValueError(f"--only {item}: not in the table (give K:ORDER too)")
            out += found
        elif len(f) == 5 and f[0] in DT and f[4] in ("none", "value", "index"):
            out.append((f[0], int(f[1]), int(f[2]), int(f[3]), f[4]))
        else:
            raise ValueError(f"--only {item}: expected DTYPE:BATCH:N[:K:ORDER]")
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--csv", default=None)
    p.add_argument("--dist", default="normal")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument(
        "--sync",
        action="store_true",
        help="time one call at a time (the events then hold the host's launch too)",
    )
    p.add_argument(
        "--only",
        default=None,
        help="comma-separated DTYPE:BATCH:N (e.g. fp32:256:129280): only those cases of "
        "the table; DTYPE:BATCH:N:K:ORDER any shape (e.g. fp32:300:129280:512:value)",
    )
    p.add_argument(
        "--variant",
        default="default",
        help=(
            "comma-separated launch variants: default (run_triton's launch), other (the other"
            " compaction key search), checkN (compaction checked every N blocks), tightN (the"
            " same in the launch's buffer, with less slack), occN (N programs per SM), novec "
            "(4-byte loads, three blocks rotated), w32 (warps stream independently: every "
            "row), now32 (never), pfN (warps also ask L2 for the block N beyond the loaded "
            "one), nosb (the first compaction keeps k, not a sample's rank), pre / nopre (the"
            " sample's bound from registers before the stream / from the first compaction), "
            "burst (a check that finds k new candidates compacts at once; with pre), "
            "stolN (the sample's bound searched to within rank * 2^-N; with pre), skN (that "
            "bound from the sample's first N elements; with pre), spread (the sample as "
            "128-byte runs spread over the row; with pre; nospread: whole blocks), "
            "noballot (hits always placed with a shuffle scan), nofast (every hit lane runs "
            "the exact test), nosingle (a lane's one hit placed by the general loop), twobar "
            "(the per-block trigger as tl.sum), noregties (tie-index search by chunked "
            "passes), tiesheld (that search over the filled slots only), lean (the final "
            "compaction's census from its search's counts), tiesrank (up to 64 tied indices "
            "ranked at once), radix / noradix "
            "(the compaction's key by a radix select / a bisection), smem (the radix select "
            "of 8-bit digits, histograms in shared memory),"
            " tri / notri (by a trisection / not), plain (first part only: launch_config's "
            "launch, never crowded), unchunked (first part only: stream_config's launch "
            "without chunked_config), regsearch (the register-held key search, after occN), "
            "chN (compaction chunks of N), zN (the sample's rank N standard deviations above "
            "its mean, not 5), tolN (a compaction before the last may keep up to k * (1 + "
            "2^-N)), ringN (each warp's blocks through N shared-memory stages, cp.async), "
            "chunk (the compaction's searches by radix passes over the filled slots), chunkN "
            "(the same, checked every N blocks in a buffer grown for them), srdx (the "
            "sample's bound by a radix select, histograms in shared memory; with pre), "
            "sbitsN (that radix select stopped at the key's top N bits), vfk / novfk (the "
            "values written rebuilt from the keys / gathered from the row), ends / noends (the "
            "spread sample over the whole window / its middle blocks only); "
            "joined with '+' (w32+pf4); 'both' = default,other; 'all' = default,other,check2"
        ),
    )
    a = p.parse_args()
    global SYNC
    SYNC = a.sync
    rows_out = []
    hdr = (
        f"{'dtype':5s} {'dist':10s} {'batch':>5s} {'N':>8s} {'k':>5s} {'order':5s} "
        f"{'variant':9s} | "
        f"{'ours ms':>8s} {'topk ms':>8s} {'read ms':>8s} | {'speedup':>7s} {'TB/s':>6s} "
        f"{'%read':>6s} check"
    )
    print(hdr, flush=True)
    variants = {"both": "default,other", "all": "default,other,check2"}.get(a.variant, a.variant)
    variants = variants.split(",")
    for v in variants:  # every part known, before anything is timed
        for part in v.split("+"):
            try:
                apply_variant(launch_config(torch.float32, 512), part, 512)
            except ValueError as e:
                p.error(str(e))
    cases = QUICK if a.quick else CASES
    if a.only is not None:
        try:
            cases = only_cases(a.only)
        except ValueError as e:
            p.error(str(e))
    for dts, rows, n, k, order in cases:
        dtype = DT[dts]
        esz = torch.finfo(dtype).bits // 8
        nbytes = rows * n * esz
        inputs = [draw(a.dist, rows, n, dtype, s) for s in range(copies_for(nbytes))]
        theirs = time_ms(
            lambda x, k=k, order=order: torch.topk(x, k, dim=1, sorted=order != "none"),
            inputs,
            min(a.repeats, 10),
        )
        read = time_ms(lambda x: x.amax(dim=1), inputs, a.repeats)
        for variant in variants:
            parts = variant.split("+")  # e.g. w32+pf4
            if parts[0] == "plain":  # two programs per SM, whatever the row count
                cfg = launch_config(dtype, k)
            elif parts[0] == "unchunked":  # the launch without chunked_config's searches
                cfg = stream_config(dtype, k, rows, n, _sm_count(0), chunked=False)
            else:
                cfg = stream_config(dtype, k, rows, n, _sm_count(0))  # as run_triton launches
            for part in parts:
                cfg = apply_variant(cfg, part, k)
            variant = (
                ("chunk" if cfg.chunk_search else "regs" if cfg.reg_search else "passes")
                + (f"/c{cfg.check_every}" if cfg.check_every > 1 else "")
                + (f"/o{cfg.programs_per_sm}" if cfg.programs_per_sm != 2 else "")
                + ("" if cfg.vec else "/nv")
                + ("/w32" if cfg.w32 else "/now32" if cfg.w32_from is None else "")
                + (f"/pf{cfg.ahead}" if cfg.ahead else "")
                + (f"/r{cfg.ring}" if cfg.ring else "")
                + (f"/up{cfg.raise_every}" if cfg.raise_every else "")
                + ("" if cfg.sample else "/nosb")
                + ("/pre" if cfg.samples_in_registers else "")
                + ("+burst" if cfg.samples_in_registers and cfg.burst else "")
                + (f"+stol{cfg.sample_tol}" if cfg.samples_in_registers and cfg.sample_tol else "")
                + (f"+sk{cfg.sample_keys}" if cfg.samples_in_registers and cfg.sample_keys else "")
                + ("+spread" if cfg.samples_in_registers and cfg.sample_spread else "")
                + ("+ends" if cfg.samples_in_registers and cfg.sample_spread and cfg.sample_ends
                   else "")
                + ("+srdx" if cfg.samples_in_registers and cfg.sample_radix else "")
                + (f"/{cfg.sample_bits}b" if cfg.samples_in_registers and cfg.sample_radix
                   and cfg.sample_bits else "")
                + ("" if cfg.values_from_keys else "/gather")
                + ("" if cfg.ballot else "/nob")
                + ("" if cfg.fast else "/nof")
                + ("" if cfg.single else "/nos")
                + ("" if cfg.one_barrier else "/2b")
                + ("" if cfg.reg_ties else "/nrt")
                + ("/th" if cfg.ties_held else "")
                + ("/lean" if cfg.lean_final else "")
                + ("/rank" if cfg.ties_rank else "")
                + ("/rdx" if cfg.radix_search and cfg.reg_search else "")
                + ("/tri" if cfg.tri_search and cfg.reg_search and not cfg.radix_search else "")
                + ("" if cfg.CH == 512 else f"/ch{cfg.CH}")
                + ("" if cfg.sample_z == reference.SAMPLE_Z else f"/z{cfg.sample_z:g}")
                + (f"/tol{cfg.search_tol}" if cfg.search_tol else "")
            )

            def ours_fn(x, k=k, order=order, cfg=cfg):
                opt = TopkOptions(order=order)
                v = torch.empty((x.shape[0], k), dtype=x.dtype, device=x.device)
                i = torch.empty((x.shape[0], k), dtype=torch.int32, device=x.device)
                run_triton(x, k, opt, v, i, config=cfg)
                return v, i

            v, i = ours_fn(inputs[0])
            torch.cuda.synchronize()
            status = check(inputs[0], k, order, v, i)
            ours = time_ms(ours_fn, inputs, a.repeats)
            tb = bench.tbps(bench.effective_bytes(rows, n, k, dtype), ours * 1e-3)
            rb = bench.tbps(nbytes, read * 1e-3)
            line = (
                f"{dts:5s} {a.dist:10s} {rows:5d} {n:8d} {k:5d} {order:5s} {variant:9s} | "
                f"{ours:8.3f} {theirs:8.3f} {read:8.3f} | "
                f"{theirs / ours:7.2f} {tb:6.2f} {100 * tb / rb:5.0f}% {status}"
            )
            print(line, flush=True)
            rows_out.append(
                dict(
                    dtype=dts,
                    dist=a.dist,
                    batch=rows,
                    N=n,
                    k=k,
                    order=order,
                    variant=variant,
                    ours_ms=ours,
                    topk_ms=theirs,
                    read_ms=read,
                    speedup=theirs / ours,
                    tbps=tb,
                    check=status,
                )
            )
        del inputs
        torch.cuda.empty_cache()
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows_out[0]))
            w.writeheader()
            w.writerows(rows_out)
    if any(r["check"] != "ok" for r in rows_out):
        sys.exit(1)


if __name__ == "__main__":
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    main()
