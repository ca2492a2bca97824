"""Where one program's time goes, per row: the streaming kernel's profiling build on a GPU.

For each shape and launch, prints the measured time (normal build) and, from the
profiling build (the kernel's PROFILE constexpr: SM cycle counters around each phase),
the mean per row of: the whole row, filtering (load waits, the compare, placing hits,
the per-block count), compactions inside the stream, the final compaction + output
(last: the compaction alone), the sample's bound taken in registers (pre; load: its
loads, srch: its key search), the rest (other: the row's set-up, the per-block
compaction checks, the first loads' wait; chk: the checks); the compactions' own
phases (key: the pivot key's search, cens: the census at it, ties: the tied indices'
search, copy: the survivors' placement); and compactions, hits and blocks with hits
per row. With the warp-private loop the phases are warp 0's.

Launches (``--launches``): ``launched``, the launch ``run_triton`` picks for the shape
(:func:`deepselect.triton_backend.stream_config`); ``sync``, the block-synchronous loop
of :func:`~deepselect.triton_backend.launch_config` at two programs per SM; ``w32``, its
warp-private loop. A ``pre`` suffix starts every row at its true k-th key (the kernel's
PRESET constexpr): the stream with a perfect threshold, no rising and (almost) no
compaction.

    python benchmarks/profile_kernel.py [--quick] [--shape bf16:256:1M:512:none]
        [--launches launched,launchedpre] [--dist ascending]
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess

import torch

from deepselect import bench
from deepselect.keys import to_keys
from deepselect.ops.triton.common import PROF_SLOTS
from deepselect.options import TopkOptions
from deepselect.triton_backend import LaunchConfig, launch_config, run_triton, stream_config

LAUNCHES = ("launched", "launchedpre", "sync", "syncpre", "w32", "w32pre")


def launch(name: str, dtype: torch.dtype, k: int, rows: int, n: int, sm: int) -> LaunchConfig:
    """The launch ``name`` (see :data:`LAUNCHES`, a ``pre`` suffix aside) for a shape.

    >>> launch("w32pre", torch.bfloat16, 512, 256, 1 << 20, 132).w32
    True
    >>> launch("sync", torch.float32, 512, 256, 1 << 20, 132).programs_per_sm
    2
    """
    base = name.removesuffix("pre")
    if base == "launched":
        return stream_config(dtype, k, rows, n, sm)
    if base in ("sync", "w32"):
        return dataclasses.replace(launch_config(dtype, k), w32=base == "w32")
    raise ValueError(f"unknown launch {name!r}: one of {', '.join(LAUNCHES)}")


def parse_shape(text: str) -> tuple[str, int, int, int, str]:
    """``DTYPE:BATCH:N[:K[:ORDER]]`` -> ``(dtype, batch, n, k, order)``; sizes take K/M.

    >>> parse_shape("bf16:256:1M")
    ('bf16', 256, 1048576, 512, 'none')
    """
    f = text.split(":")
    if len(f) not in (3, 4, 5) or f[0] not in bench.DTYPES:
        raise ValueError(f"{text!r}: expected DTYPE:BATCH:N[:K[:ORDER]], DTYPE one of bf16, "
                         "fp16, fp32")  # fmt: skip
    order = f[4] if len(f) == 5 else "none"
    if order not in ("none", "value", "index"):
        raise ValueError(f"{text!r}: ORDER is none, value or index")
    k = bench.parse_size(f[3]) if len(f) > 3 else 512
    return f[0], bench.parse_size(f[1]), bench.parse_size(f[2]), k, order


def sm_mhz() -> float:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        return float(out.split()[0])
    except (OSError, ValueError, subprocess.CalledProcessError):
        return 1980.0


def call(x, k, opt, cfg, preset=None, prof=None):
    v = torch.empty((x.shape[0], k), dtype=x.dtype, device=x.device)
    i = torch.empty((x.shape[0], k), dtype=torch.int32, device=x.device)
    run_triton(x, k, opt, v, i, config=cfg, profile=prof, preset=preset)
    return v, i


def profile_shape(shape, names, dist: str, repeats: int, mhz: float) -> None:
    dts, rows, n, k, order = shape
    dtype = bench.DTYPES[dts]
    case = bench.Case("kernel", dtype, rows, n, k, order)
    inputs = bench.input_copies(case, dist, "cuda", cold_bytes=3 * bench.cache_bytes("cuda"))
    opt = TopkOptions(order=order)
    # each input's true k-th key, before anything is timed
    kth = {id(x): to_keys(torch.topk(x, k, dim=1).values[:, -1:]).view(-1).to(torch.int32)
           for x in inputs}  # fmt: skip
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    label = f"{dts} {rows}x{bench.format_size(n)} k={k} {order}" + (
        "" if dist == "normal" else f" {dist}"
    )
    for name in names:
        cfg = launch(name, dtype, k, rows, n, sm)
        pre = name.endswith("pre")

        def fn(x, cfg=cfg, pre=pre):
            return call(x, k, opt, cfg, kth[id(x)] if pre else None)

        want = torch.topk(inputs[0], k, dim=1, sorted=order == "value").values
        status = bench.check_exact(inputs[0], *fn(inputs[0]), want, k, ordered=order == "value")
        s = bench.time_fn(fn, inputs, "cuda", repeats=repeats).median_s
        grid = min(rows, cfg.programs_per_sm * sm)
        prof = torch.zeros((grid, int(PROF_SLOTS)), dtype=torch.int64, device="cuda")
        call(inputs[0], k, opt, cfg, kth[id(inputs[0])] if pre else None, prof)
        tot = prof.sum(dim=0).double() / rows
        us = tot / mhz  # cycles -> us at the maximum SM clock
        other = us[0] - us[1] - us[2] - us[3] - us[8]  # row set-up, checks, load waits
        tb = bench.tbps(bench.effective_bytes(rows, n, k, dtype), s)
        print(
            f"{label:28s} {name:11s} {s * 1e3:7.3f} {tb:5.2f} | {us[0]:6.1f} {us[1]:6.1f} "
            f"{us[2]:7.1f} {us[3]:6.1f} ({us[11]:4.1f}) {us[8]:5.1f} "
            f"({us[9]:4.1f} {us[10]:4.1f}) {other:5.1f} ({us[16]:4.1f}) | "
            f"{us[12]:4.1f} {us[13]:4.1f} {us[14]:4.1f} {us[15]:4.1f} | "
            f"{tot[4]:4.1f} {tot[5]:6.0f} {tot[6]:6.1f} {status}",
            flush=True,
        )
    del inputs
    torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="the kernel scenario's quick shapes")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument(
        "--shape", action="append", type=parse_shape, metavar="DTYPE:BATCH:N[:K[:ORDER]]",
        help="a shape instead of the kernel scenario's (repeatable)",
    )  # fmt: skip
    p.add_argument("--dist", default="normal", help="input distribution (deepselect bench's)")
    p.add_argument("--launches", default="launched,launchedpre,sync,w32",
                   help=f"comma-separated, of {', '.join(LAUNCHES)}")  # fmt: skip
    a = p.parse_args(argv)
    names = a.launches.split(",")
    if set(names) - set(LAUNCHES):
        p.error(f"--launches: unknown {sorted(set(names) - set(LAUNCHES))}")
    if not torch.cuda.is_available():
        p.error("needs a CUDA device")
    shapes = a.shape or [
        (c.dtype_name, c.batch, c.n, c.k, c.order) for c in bench.case_list("kernel", quick=a.quick)
    ]
    mhz = sm_mhz()
    print(f"SM clock {mhz:.0f} MHz; per-row means in us")
    print(
        f"{'shape':28s} {'launch':11s} {'ms':>7s} {'TB/s':>5s} | {'row':>6s} {'filter':>6s} "
        f"{'compact':>7s} {'final':>6s} ({'last':>4s}) {'pre':>5s} ({'load':>4s} {'srch':>4s}) "
        f"{'other':>5s} ({'chk':>4s}) | {'key':>4s} {'cens':>4s} {'ties':>4s} {'copy':>4s} | "
        f"{'comp':>4s} {'hits':>6s} {'hitblk':>6s} check",
        flush=True,
    )
    for shape in shapes:
        profile_shape(shape, names, a.dist, a.repeats, mhz)


if __name__ == "__main__":
    main()
