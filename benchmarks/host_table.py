"""Per-call cost in one command: import time, then on a GPU the
host time of queued eager calls on a tiny input and eager against graph replay on
three shapes; on a CPU-only machine the CPU backend's small, large and (with
``--load``) busy-core figures. Every result is checked against the oracle first. A
short table comes last.

    python benchmarks/host_table.py [--calls 2000] [--cpu] [--load]

Timings on a shared machine are noisy: each figure is a median of interleaved rounds.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import torch

import deepselect
from deepselect import indexer_topk, launch_cache, oracle_topk, topk_rows
from deepselect.api import make_options

SUMMARY: list[tuple[str, str, str, str]] = []  # (figure, measured, target, verdict)


def figure(name: str, value: float, target: float, unit: str = "x") -> None:
    ok = "ok" if value <= target else "MISSED"
    SUMMARY.append((name, f"{value:.2f}{unit}", f"<= {target:g}{unit}", ok))


def at_least(name: str, value: float, target: float) -> None:
    ok = "ok" if value >= target else "MISSED"
    SUMMARY.append((name, f"{value:.2f}x", f">= {target:g}x", ok))


def check(x: torch.Tensor, k: int, order: str, idx: torch.Tensor, rows: int = 4) -> None:
    """The first ``rows`` rows' indices against the oracle (as sets where unordered)."""
    xs = x[:rows].cpu()
    _, want = oracle_topk(xs, k, make_options(xs, k, order=order))
    got = idx[:rows].cpu().to(want.dtype)
    if order == "none":
        got, want = got.sort(dim=1).values, want.sort(dim=1).values
    assert torch.equal(got, want), f"wrong result: {list(x.shape)} k={k} {order}"


# ------------------------------------------------------------------------- import


def import_times(runs: int = 5) -> None:
    """Fresh processes, alternating, median of ``runs`` each."""
    code = "import time; t = time.perf_counter(); import {m}; print(time.perf_counter() - t)"
    times: dict[str, list[float]] = {"torch": [], "deepselect": []}
    for _ in range(runs):
        for m in times:
            out = subprocess.run(
                [sys.executable, "-c", code.format(m=m)], capture_output=True, text=True
            )
            if out.returncode != 0:
                print(f"import {m} failed in a fresh process:\n{out.stderr[-2000:]}")
                return
            times[m].append(float(out.stdout.strip().splitlines()[-1]))
    probe = (
        "import sys, deepselect; "
        "print(' '.join(m for m in ('torch._dynamo', 'triton', 'numba') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    t, d = statistics.median(times["torch"]), statistics.median(times["deepselect"])
    heavy = loaded.stdout.strip() or "none of dynamo, triton, numba"
    print(f"import torch {t:.2f} s, import deepselect {d:.2f} s (fresh processes, median of "
          f"{runs}); loaded by import deepselect: {heavy}")  # fmt: skip
    figure("import deepselect / import torch", d / t, 1.3)


# ------------------------------------------------------------------------- GPU


def queued_us(fn, calls: int) -> float:
    """Wall time per call of ``calls`` calls queued back to back, one sync at the end:
    the host's cost per call where the GPU keeps up."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / calls * 1e6


def graph_us(fn, calls: int) -> float:
    """The same, for replays of ``fn`` captured once in a CUDA graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return queued_us(g.replay, calls)


def interleaved(fns: dict, calls: int, rounds: int = 5, timer=queued_us) -> dict[str, float]:
    got: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(rounds):
        names = list(fns)
        names = names[r % len(names) :] + names[: r % len(names)]
        for name in names:
            got[name].append(timer(fns[name], calls))
    return {name: statistics.median(v) for name, v in got.items()}


def _nop_kernel():
    import triton

    @triton.jit
    def nop(ptr, n):
        pass

    return nop


def gpu_tables(calls: int) -> None:
    dev = "cuda"
    rows, n, k = 8, 4096, 64
    x = torch.randn(rows, n, device=dev).bfloat16()
    lengths = torch.full((rows,), n, dtype=torch.int32, device=dev)
    check(x, k, "value", deepselect.topk(x, k).indices)
    check(x, k, "none", topk_rows(x, k)[1])
    check(x, k, "none", indexer_topk(x, lengths, k))
    fns = {
        "torch.topk": lambda: torch.topk(x, k),
        "deepselect.topk": lambda: deepselect.topk(x, k),
        "topk_rows": lambda: topk_rows(x, k),
        "indexer_topk": lambda: indexer_topk(x, lengths, k),
    }

    def switched(fn, name):  # the same call with a launch_cache switch off
        def call():
            setattr(launch_cache, name, False)
            try:
                fn()
            finally:
                setattr(launch_cache, name, True)

        return call

    # the call's launches not held: its full path, then also Triton's own binding
    fns["  full path"] = switched(fns["topk_rows"], "HOLD")
    fns["  Triton's launch path"] = switched(fns["topk_rows"], "ENABLED")
    # what a Triton launch costs by itself, through Triton's binding and straight to the
    # compiled launcher (deepselect.launch_cache)
    nop, buf = _nop_kernel(), torch.empty(1, device=dev)
    fns["triton empty kernel"] = lambda: nop[(1,)](buf, 1)
    fns["  via launch_cache"] = lambda: launch_cache.launch(nop, (1,), (buf, 1), {})
    us = interleaved(fns, calls)
    base = us["torch.topk"]
    print(f"\n== queued eager host time per call, {rows} x {n} bf16, k = {k} "
          f"({calls} calls, median of 5 rounds)")  # fmt: skip
    for name, v in us.items():
        print(f"{name:18s} {v:8.1f} us  {v / base:5.2f}x torch.topk")
    figure("GPU host: deepselect.topk / torch.topk", us["deepselect.topk"] / base, 1.0)
    figure("GPU host: topk_rows / torch.topk", us["topk_rows"] / base, 0.8)
    figure("GPU host: indexer_topk / torch.topk", us["indexer_topk"] / base, 0.8)

    shapes = [  # rows, N, dtype, k, order
        (256, 65_536, torch.bfloat16, 512, "none"),
        (64, 129_280, torch.float32, 50, "value"),
        (64, 131_072, torch.bfloat16, 2048, "none"),
    ]
    print("\n== eager (queued calls) against graph replay, per call")
    for r, nn, dt, kk, order in shapes:
        xx = torch.randn(r, nn, device=dev).to(dt)
        ov = torch.empty((r, kk), dtype=dt, device=dev)
        oi = torch.empty((r, kk), dtype=torch.int32, device=dev)
        topk_rows(xx, kk, order=order, out_values=ov, out_indices=oi)
        check(xx, kk, order, oi)

        def call(xx=xx, kk=kk, order=order, ov=ov, oi=oi):
            topk_rows(xx, kk, order=order, out_values=ov, out_indices=oi)

        e = interleaved({"eager": call}, 200, rounds=3)["eager"]
        g = interleaved({"graph": call}, 200, rounds=3, timer=graph_us)["graph"]
        name = f"{r} x {nn} {str(dt).removeprefix('torch.')} k={kk} {order}"
        print(f"{name:34s} eager {e:8.1f} us  graph {g:8.1f} us  {e / g:5.2f}x")
        figure(f"GPU eager / graph: {name}", e / g, 1.15)


def host_profile(calls: int) -> None:
    """Where the host time of an eager call goes: cProfile over ``calls`` queued calls,
    the functions with the most time of their own."""
    import cProfile
    import pstats

    for r, nn, dt, kk in [(8, 4096, torch.bfloat16, 64), (256, 65_536, torch.bfloat16, 512)]:
        xx = torch.randn(r, nn, device="cuda").to(dt)
        for _ in range(20):
            topk_rows(xx, kk)
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(calls):
            topk_rows(xx, kk)
        prof.disable()
        torch.cuda.synchronize()
        print(f"\n== host profile: topk_rows({r} x {nn} {dt}, k={kk}), {calls} calls; "
              "own time first")  # fmt: skip
        pstats.Stats(prof).sort_stats("tottime").print_stats(18)


# ------------------------------------------------------------------------- CPU


def cpu_ms(fn, repeats: int) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1e3


def cpu_interleaved(fns: dict, repeats: int, rounds: int = 3) -> dict[str, float]:
    got: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            got[name].append(cpu_ms(fn, repeats))
    return {name: statistics.median(v) for name, v in got.items()}


def cpu_tables(load: bool) -> None:
    x = torch.randn(1, 4096)
    check(x, 64, "value", deepselect.topk(x, 64).indices)
    fns = {
        "torch.topk": lambda: torch.topk(x, 64),
        "deepselect.topk": lambda: deepselect.topk(x, 64),
    }
    small = cpu_interleaved(fns, repeats=2000)
    ours, theirs = small["deepselect.topk"] * 1e3, small["torch.topk"] * 1e3
    print(f"\n== CPU small call, 1 x 4096 fp32, k = 64: deepselect.topk {ours:.1f} us, "
          f"torch.topk {theirs:.1f} us")  # fmt: skip
    figure("CPU 1x4096 k=64: deepselect.topk / torch.topk",
           small["deepselect.topk"] / small["torch.topk"], 1.0)  # fmt: skip

    print("\n== CPU 16 x 1M, k = 512 (one run)")
    for dt in (torch.float32, torch.bfloat16):
        xx = torch.randn(16, 1 << 20).to(dt)
        check(xx, 512, "none", topk_rows(xx, 512)[1], rows=2)
        t = cpu_interleaved(
            {
                "deepselect": lambda xx=xx: topk_rows(xx, 512),
                "torch.topk": lambda xx=xx: torch.topk(xx, 512),
                "amax": lambda xx=xx: xx.amax(dim=1),
            },
            repeats=5,
        )
        name = str(dt).removeprefix("torch.")
        print(f"{name:9s} deepselect {t['deepselect']:7.2f} ms  torch.topk "
              f"{t['torch.topk']:7.2f} ms  amax {t['amax']:6.2f} ms")  # fmt: skip
        at_least(f"CPU 16x1M {name}: torch.topk / deepselect", t["torch.topk"] / t["deepselect"], 5)
        figure(f"CPU 16x1M {name}: deepselect / amax", t["deepselect"] / t["amax"], 2.5)

    if not load:
        return
    from deepselect.bench import case_list

    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(0.5)
        print("\n== CPU under load (two spinning processes): deepselect bench --quick's cases")
        for c in case_list("all", device="cpu", quick=True):
            xx = torch.randn(c.batch, c.n).to(c.dtype)
            check(xx, c.k, c.order, topk_rows(xx, c.k, order=c.order)[1], rows=2)
            t = cpu_interleaved(
                {
                    "deepselect": lambda xx=xx, c=c: topk_rows(xx, c.k, order=c.order),
                    "torch.topk": lambda xx=xx, c=c: torch.topk(xx, c.k, sorted=c.order == "value"),
                },
                repeats=10,
            )
            name = f"{c.scenario} {c.dtype_name} {c.batch}x{c.n} k={c.k}"
            print(f"{name:30s} deepselect {t['deepselect']:7.2f} ms  torch.topk "
                  f"{t['torch.topk']:7.2f} ms")  # fmt: skip
            figure(f"CPU loaded {name}: deepselect / torch.topk",
                   t["deepselect"] / t["torch.topk"], 1.5)  # fmt: skip
    finally:
        for p in spin:
            p.kill()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=2000, help="queued calls per GPU measurement")
    p.add_argument("--cpu", action="store_true", help="the CPU figures on a GPU machine too")
    p.add_argument("--load", action="store_true", help="CPU: also the quick cases under load")
    p.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="CALLS",
        help="GPU: also profile the host side of CALLS eager calls (cProfile)",
    )
    p.add_argument("--import-runs", type=int, default=5, help="fresh processes per import time")
    a = p.parse_args()
    t0 = time.perf_counter()
    print(f"deepselect {deepselect.__version__}, torch {torch.__version__}, "
          f"python {sys.version.split()[0]}, {torch.get_num_threads()} CPU threads")  # fmt: skip
    import_times(a.import_runs)
    if torch.cuda.is_available():
        print(f"GPU: {torch.cuda.get_device_name()}")
        gpu_tables(a.calls)
        if a.profile:
            host_profile(a.profile)
    if a.cpu or not torch.cuda.is_available():
        cpu_tables(a.load)
    print(f"\n==== per-call cost figures ({time.perf_counter() - t0:.0f} s)")
    w = max(len(s[0]) for s in SUMMARY)
    for name, got, target, verdict in SUMMARY:
        print(f"{name:{w}s}  {got:>8s}  {target:>9s}  {verdict}")


if __name__ == "__main__":
    main()
