"""The launches the dispatch makes for a grid of call shapes, and the PTX of each kernel
they compile, for sm_90 on a machine without a GPU: a restructuring of the kernels or
the dispatch must leave both unchanged, except where a change is meant and timed.

    python scripts/launch_snapshot.py snap.json            # every launch, every PTX hash
    python scripts/launch_snapshot.py snap.json --no-ptx   # launches only (seconds)
    python scripts/launch_snapshot.py new.json --compare snap.json

A launch is recorded as the kernel's name, its compile-time arguments, its launch
options and its arguments' types; its PTX is hashed without the debug lines (``.loc``,
``.file``, the debug sections), which follow source positions rather than code.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import re
import sys
from concurrent.futures import ProcessPoolExecutor

import torch

sys.path.insert(0, os.path.dirname(__file__))

from deepselect.options import Order, TopkOptions  # noqa: E402

SMS = 132
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
SHAPES = [
    (1, 4096), (4096, 4096), (1, 1 << 20), (6, 1 << 20), (6, 65536), (8, 131072),
    (64, 16384), (64, 131072), (6, 129280), (512, 16384), (4096, 8192), (4096, 16384),
    (256, 65536), (4096, 65536), (256, 129280), (512, 129280), (4096, 129280),
    (512, 131072), (768, 262144), (256, 262144), (256, 1 << 20), (4096, 1 << 20),
]  # fmt: skip
KS = [1, 50, 512, 1024, 2048, 4096]


def grid(full: bool):
    """(dtype, rows, n, k, order, largest, window, off_tensor, values, aligned)."""
    for dt, (rows, n), k, order in itertools.product(DTYPES, SHAPES, KS, Order):
        if dt == "fp16" and (rows, n) not in ((4096, 1 << 20), (6, 65536), (4096, 4096)):
            continue
        yield dt, rows, n, k, order.value, True, 0, False, True, True
        if not full:
            continue
        yield dt, rows, n, k, order.value, False, 3, True, False, True
        yield dt, rows, n, k, order.value, True, 2, False, True, False


ROWS_SIG = dict(
    x_ptr="RAW", stride_x="i32", rows="i32", N="i32", begin_ptr="*i64", end_ptr="*i64",
    off_ptr="*i64", off_scalar="i32", ov_ptr="RAW", oi_ptr="*i32", stride_ov="i32",
    stride_oi="i32", cand_key_ptr="*i32", cand_idx_ptr="*i32", cand_cnt_ptr="*i32", k="i32",
    B2="i32", fill_index="i32", fill_bits="i32", seed="i32", prof_ptr="*i64",
    preset_ptr="*i32", page_ptr="*i32", page_stride="i32", max_pages="i32", n_batch="i32",
    r2b_ptr="*i64",
)  # fmt: skip


def _defaults(dtype) -> dict:
    """Integer arguments a call with default options passes (compile_check.call_defaults)."""
    from deepselect.ops.triton.launch import _fill_bits

    fill = _fill_bits(TopkOptions().resolved_fill_value(dtype), dtype)
    return dict(off_scalar=0, fill_index=-1, fill_bits=fill, page_stride=0, max_pages=0, n_batch=0)


def _launches_before(dt, rows, n, k, order, largest, window, off_tensor, values, aligned):
    """The launches of the dispatch in the layout of triton_backend / triton_short:
    [(name, kernel, argument types, compile-time arguments and options, integers)]."""
    from deepselect import triton_backend as TB
    from deepselect import triton_short as TS

    dtype = DTYPES[dt]
    raw = "*i16" if dtype != torch.float32 else "*i32"
    opt = TopkOptions(order=Order(order), largest=largest)
    x = torch.empty(rows, n, dtype=dtype, device="meta")
    plan = TS.short_path(x, k, opt, SMS)
    flags = (
        ("largest", largest), ("order", Order(order)), ("has_window", window),
        ("off_tensor", off_tensor), ("write_values", values),
    )  # fmt: skip
    out = []
    ints = dict(stride_xr=n, stride_xc=1, N=n, k=k, stride_ovr=k, stride_ovc=1, stride_oir=k)
    ints.update(stride_oic=1, **_defaults(dtype))
    if plan is not None:
        if plan.kind == "bracket":
            from deepselect import triton_bracket as TK

            kw = TK.bracket_constants(dtype, k, TK.BRACKET, **dict(flags))
            kw.update(TK.launch_options(TK.BRACKET))
            sig = TK.bracket_signature(dtype, False)
            return [("bracket_rows_kernel", TK.bracket_rows_kernel, sig, kw, ints)]
        if plan.passes and Order(order) != Order.VALUE:
            sig = TS.passes_signature(dtype, False)
            lv = plan.pass_level
            for kw in TS._passes_kwargs(dtype, plan, flags, (), plan.grid_sync):
                out.append(("radix_phases_kernel", TS.radix_phases_kernel, sig, kw,
                            dict(ints, L=lv.L, nseg=lv.nseg)))  # fmt: skip
            return out
        lk = TS._launch_kwargs(dtype, plan, flags, (), False)
        if plan.in_launch:
            lv = plan.levels[0]
            sig = TS.in_launch_signature(dtype, False)
            return [("split_fused_kernel", TS.split_fused_kernel, sig, lk[0],
                     dict(ints, L=lv.L, nseg=lv.nseg))]  # fmt: skip
        sig = TS.kernel_signature(dtype, False)
        for lv, kw in zip(plan.levels, lk, strict=True):
            out.append(("short_rows_kernel", TS.short_rows_kernel, sig, kw,
                        dict(ints, L=lv.L, nseg=lv.nseg)))  # fmt: skip
        return out
    if k > TB.MAX_FAST_K:
        return [("oracle", None, {}, {}, {})]
    stream = getattr(TB, "stream_launch", TB.stream_config)
    cfg = stream(dtype, k, rows, n, SMS)
    kw = TB.kernel_constants(
        dtype, cfg, largest=largest, order=Order(order), has_window=window,
        off_tensor=off_tensor, write_values=values, asm=aligned,
        vec=aligned and getattr(cfg, "vec", True),
    )  # fmt: skip
    kw.update(PROFILE=False, PRESET=False, num_warps=getattr(cfg, "num_warps", 8))
    if cfg.maxnreg is not None:
        kw["maxnreg"] = cfg.maxnreg
    sig = {name: raw if t == "RAW" else t for name, t in ROWS_SIG.items()}
    ints = dict(stride_x=n, rows=rows, N=n, stride_ov=k, stride_oi=k, k=k, B2=cfg.B2, seed=0)
    ints.update(_defaults(dtype))
    try:
        from deepselect.ops.triton.stream import deepselect_rows_kernel as kernel
    except ImportError:  # the layout before ops/triton
        kernel = TB.K.deepselect_rows_kernel
    return [("deepselect_rows_kernel", kernel, sig, kw, ints)]


def launches(point):
    """The launches for one grid point, from whichever layout this tree has."""
    try:
        from deepselect import dispatch
    except ImportError:
        return _launches_before(*point)
    return dispatch.snapshot_launches(*point, sm_count=SMS)


_LAUNCH_OPTS = ("num_warps", "maxnreg", "launch_cooperative_grid")


def _jsonable(v):
    if isinstance(v, tuple | list):
        return [_jsonable(e) for e in v]
    if isinstance(v, float | int | str | bool) or v is None:
        return v
    return str(v)


def compile_key(name, dt, kw, ints):
    consts = {k: _jsonable(v) for k, v in sorted(kw.items()) if k not in _LAUNCH_OPTS}
    opts = {k: kw[k] for k in _LAUNCH_OPTS if k in kw}
    spec = {k: (v == 1, v % 16 == 0) for k, v in sorted(ints.items())}
    return json.dumps([name, dt, consts, opts, spec], sort_keys=True)


_DEBUG = re.compile(r"^\s*(\.loc|\.file|//)")


# a function Triton emits apart (noinline) is named after its module, its own name,
# its arguments' types and its compile-time arguments: only its own name is kept
_MANGLED = re.compile(r"[A-Za-z0-9_]*_\$_[A-Za-z0-9_$]*")
_OWN_NAME = re.compile(r"_\$_(_?[a-z][a-z0-9_]*?)__[A-Z]")


def _own_name(m: re.Match) -> str:
    own = _OWN_NAME.search(m.group(0))
    return own.group(1) if own else m.group(0)


# the labels line info places around inlined calls (``$L__tmpN:``, referenced only from
# the debug sections): a call split out into a helper adds some and renumbers the rest
_DEBUG_LABEL = re.compile(r"^\$L__tmp\d+:\s*$")
# parameter names, ``<kernel>_param_<n>``: positional, so the same where a kernel's
# arguments are bundled into tuples in the same order; its name is dropped
_PARAM = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*?(_param_\d+)\b")


def ptx_hash(ptx: str) -> str:
    """The PTX without what follows source positions or names rather than code: the
    debug sections, ``.loc``/``.file`` lines and comments, line info's ``$L__tmpN``
    labels, noinline functions' mangled names (their own name kept) and the kernel's
    name in its parameters' names (``_param_<n>`` kept)."""
    body = re.split(r"\.section\s+\.debug", ptx, maxsplit=1)[0]
    lines = [
        _PARAM.sub(r"\1", _MANGLED.sub(_own_name, ln))
        for ln in body.splitlines()
        if not _DEBUG.match(ln) and not _DEBUG_LABEL.match(ln)
    ]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def compile_launch(fn, sig: dict, kw: dict, ints: dict):
    """``fn`` compiled for sm_90 as a launch with these arguments would build it."""
    import inspect

    import triton
    from compile_check import BUNDLED, launch_specialization, source
    from triton.backends.compiler import GPUTarget

    params = inspect.signature(fn.fn).parameters.values()
    defaults = {p.name: p.default for p in params if p.default is not p.empty}
    consts = {**defaults, **BUNDLED.get(fn, ({}, {}))[1], **kw}
    opts = {o: consts.pop(o) for o in _LAUNCH_OPTS if o in consts}
    sig = dict(sig)
    sig.update({name: "constexpr" for name in consts})
    attrs, ones = launch_specialization(fn, sig, ints)
    consts.update(ones)
    sig.update({name: "constexpr" for name in ones})
    src = source(fn, sig, consts, attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)


_FLAGS = ("KP", "ORDER", "LARGEST", "HAS_WINDOW", "OFF_TENSOR", "WRITE_VALUES", "FILTER",
          "INF_BITS")  # fmt: skip


def _config_of(ck: str) -> str:
    name, dt, consts, opts, _ = json.loads(ck)
    rest = {k: v for k, v in consts.items() if k not in _FLAGS}
    return json.dumps([name, dt, rest, opts], sort_keys=True)


def _compile(job):
    point, i = job
    _name, fn, sig, kw, ints = launches(point)[i]
    try:
        return ptx_hash(compile_launch(fn, sig, kw, ints).asm["ptx"])
    except Exception as e:  # recorded: a launch that does not compile is a finding
        return f"error: {type(e).__name__}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--no-ptx", action="store_true")
    ap.add_argument("--quick", action="store_true", help="default options only")
    ap.add_argument("--compare", metavar="OLD")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--kernels", default="", help="comma-separated kernel names (default all)")
    ap.add_argument(
        "--per-config", type=int, default=0, metavar="N",
        help="compile only N launches of each configuration (the launch's compile-time "
        "arguments other than k, order, direction, window, offset and values flags)",
    )  # fmt: skip
    a = ap.parse_args()
    wanted = set(filter(None, a.kernels.split(",")))
    points = {}
    jobs = {}
    for p in grid(not a.quick):
        ls = launches(p)
        keys = []
        for i, (name, _fn, _sig, kw, ints) in enumerate(ls):
            if name == "oracle" or (wanted and name not in wanted):
                keys.append(name)
                continue
            ck = compile_key(name, p[0], kw, ints)
            keys.append(ck)
            jobs.setdefault(ck, (p, i))
        points[json.dumps(p)] = keys
    print(f"{len(points)} call shapes, {len(jobs)} distinct launches", flush=True)
    hashes = {}
    if not a.no_ptx:
        if a.compare:  # the call shapes compiled there
            chosen = [p for p, h in json.load(open(a.compare))["ptx"].items() if "-" not in h]
        elif a.per_config:  # the first call shapes of each configuration
            taken, chosen = {}, []
            for p, keys in points.items():
                groups = [_config_of(ck) for ck in keys if ck in jobs]
                if any(taken.get(g, 0) < a.per_config for g in groups):
                    chosen.append(p)
                    for g in groups:
                        taken[g] = taken.get(g, 0) + 1
        else:
            chosen = list(points)
        todo = sorted({ck for p in chosen for ck in points.get(p, []) if ck in jobs})
        print(f"compiling {len(todo)} launches of {len(chosen)} call shapes", flush=True)
        with ProcessPoolExecutor(a.jobs) as ex:
            for i, h in enumerate(ex.map(_compile, [jobs[ck] for ck in todo])):
                hashes[todo[i]] = h
                if i % 10 == 0:
                    print(f"  compiled {i + 1}/{len(todo)}", flush=True)
    snap = {p: [hashes.get(ck, "-") for ck in keys] for p, keys in points.items()}
    snap_launches = {p: keys for p, keys in points.items()}
    json.dump({"ptx": snap, "launches": snap_launches}, open(a.out, "w"), indent=0)
    if a.compare:
        old = json.load(open(a.compare))["ptx"]
        both = [p for p in snap if "-" not in snap[p] + old.get(p, ["-"])]
        diff = [p for p in both if snap[p] != old[p]]
        print(f"{len(both) - len(diff)} of {len(both)} call shapes compiled in both: same PTX")
        for p in diff[:40]:
            print("  differs:", p)
        sys.exit(1 if diff else 0)


if __name__ == "__main__":
    main()
