"""The one timer of every benchmark: CUDA events behind a sleep kernel (device time),
or ``time.perf_counter`` on the CPU; cold caches by rotating input copies; CUDA-graph
replays; and the plain reads that set the bandwidth ceiling."""

from __future__ import annotations

import importlib.util
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .cases import parse_size
from .metrics import tbps


@dataclass
class Timing:
    """Seconds per call: the median and every sample."""

    median_s: float
    samples: list[float] = field(default_factory=list)


def cache_bytes(device: torch.device | str) -> int:
    """Size of the cache a cold-cache benchmark must defeat: the GPU's L2, or on the
    CPU the last-level cache (from sysfs where readable, else 32 MiB)."""
    device = torch.device(device)
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return int(getattr(props, "L2_cache_size", 0) or 64 << 20)
    for index in (3, 2):
        try:
            text = Path(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size").read_text()
            return parse_size(text.strip())
        except (OSError, ValueError):
            continue
    return 32 << 20


HEAD_START_S = 250e-6
"""Device time queued ahead of each timed CUDA call (:func:`head_start`): more than
the host takes to launch one (tens of microseconds for a top-k call)."""


def head_start(calls: int) -> None:
    """Keep the current CUDA device busy (a sleep kernel of about ``HEAD_START_S`` per
    call, at ~2 GHz) while the host queues ``calls`` timed calls, so that the events
    around each call hold its device work only: recorded on an idle device, the first
    event would also hold the host's launch of the call."""
    torch.cuda._sleep(int(HEAD_START_S * 2e9 * calls))


def cold_copies(nbytes: int, device: torch.device | str, cap: int = 32) -> int:
    """How many copies of an input of ``nbytes`` a cold-cache timing rotates through:
    enough to hold three times the cache (:func:`cache_bytes`), at most ``cap``; one
    on the CPU.

    >>> cold_copies(1 << 30, "cpu")
    1
    """
    if torch.device(device).type == "cpu":
        return 1
    return max(1, min(cap, math.ceil(3 * cache_bytes(device) / nbytes)))


def time_fn(
    fn: Callable[[torch.Tensor], object],
    inputs: Sequence[torch.Tensor],
    device: torch.device | str,
    *,
    repeats: int = 20,
    warmup: int = 3,
    graph: bool = False,
    max_seconds: float | None = None,
    queued: bool = True,
) -> Timing:
    """Median time of ``fn(inputs[i])``, rotating through ``inputs`` call by call.

    Every call sees the next input copy, so when the copies together exceed the cache
    (see :func:`cache_bytes`) each call reads its input cold, as a real model does.

    Args:
        fn: the call to time; takes one input tensor, its result is discarded.
        inputs: input copies (same shape) to rotate through.
        device: ``cuda`` (CUDA events around each call, on the current stream) or
            ``cpu`` (``time.perf_counter``).
        repeats: timed calls; the median is reported.
        warmup: untimed calls first (compilation, autotuning, allocator warm-up).
        graph: CUDA only: capture each call in a CUDA graph and time its replay
            (no launch overhead; what a graph-captured engine sees).
        max_seconds: stop early once the timed calls have taken this long
            (at least one is always timed); keeps slow CPU fallbacks bounded.
        queued: CUDA: queue the timed calls behind a sleep kernel, so that the events
            hold device time only; False times each call alone on an idle device,
            its events then holding the host's launch as well (a call's latency).

    Returns:
        :class:`Timing` with the median and the samples, in seconds.

    >>> t = time_fn(lambda x: x.sum(), [torch.ones(8)], "cpu", repeats=3, warmup=1)
    >>> len(t.samples)
    3
    """
    return time_fns(
        {"fn": fn}, inputs, device, repeats=repeats, warmup=warmup, graph=graph,
        max_seconds=max_seconds, queued=queued,
    )["fn"]  # fmt: skip


def time_fns(
    fns: Mapping[str, Callable[[torch.Tensor], object]],
    inputs: Sequence[torch.Tensor],
    device: torch.device | str,
    *,
    repeats: int = 20,
    warmup: int = 3,
    graph: bool = False,
    max_seconds: float | None = None,
    queued: bool = True,
    flush: bool | Callable[[], object] = True,
) -> dict[str, Timing]:
    """:func:`time_fn` for several calls at once, interleaved: each round times every
    call once (in an order rotated round by round), so that whatever drifts during a
    run (clocks, temperature, neighbours) falls on all of them alike. For calls whose
    differences are smaller than the spread between runs; ``samples[r]`` of each
    :class:`Timing` come from the same round ``r``, for paired comparisons. On CUDA
    the calls are queued behind a sleep kernel (:func:`head_start`), so that each
    call's events hold its device time, not the host's work of launching it.

    ``flush``: before each timed call, outside its events, evict the cache: the calls
    of a round share the round's input copy, which an input smaller than the cache
    would leave warm for all but the first. True: on CUDA, a read of twice the L2
    (:func:`l2_flush`), on the CPU none; False: none; a callable: that.

    >>> t = time_fns({"a": lambda x: x + 1, "b": lambda x: x * 2}, [torch.ones(4)], "cpu",
    ...              repeats=4, warmup=1)
    >>> sorted(t), len(t["a"].samples)
    (['a', 'b'], 4)
    """
    device = torch.device(device)
    if not fns or not inputs:
        raise ValueError("fns and inputs must each hold at least one entry")
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0; got {repeats}, {warmup}")
    if graph and device.type != "cuda":
        raise ValueError("graph=True needs a CUDA device")
    names = list(fns)
    calls = {
        n: _capture_graphs(f, inputs[: warmup + repeats])
        if graph
        else [lambda inp=inp, f=f: f(inp) for inp in inputs]
        for n, f in fns.items()
    }
    for i in range(warmup):
        for n in names:
            calls[n][i % len(calls[n])]()
    cuda = device.type == "cuda"
    if isinstance(flush, bool):
        flush = l2_flush(device) if flush and cuda else None
    events: dict[str, list] = {n: [] for n in names}
    if cuda:
        torch.cuda.synchronize(device)
    if cuda and queued:
        head_start(len(names) * (8 if max_seconds is not None else repeats))
    t0 = time.perf_counter()
    spent = 0.0
    for r in range(repeats):
        for j in range(len(names)):
            n = names[(r + j) % len(names)]
            call = calls[n][(warmup + r) % len(calls[n])]
            if flush is not None:
                flush()
            if cuda:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                if not queued:
                    torch.cuda.synchronize(device)
                a.record()
                call()
                b.record()
                events[n].append((a, b))
            else:
                t = time.perf_counter()
                call()
                events[n].append(time.perf_counter() - t)
                spent += events[n][-1]
        if max_seconds is not None:  # at least one round is always timed
            if cuda and r % 8 == 7:
                torch.cuda.synchronize(device)
                spent = time.perf_counter() - t0
                if queued:
                    head_start(8 * len(names))
            if spent > max_seconds:
                break
    if cuda:
        torch.cuda.synchronize(device)
        events = {n: [a.elapsed_time(b) / 1e3 for a, b in v] for n, v in events.items()}
    return {n: Timing(statistics.median(v), v) for n, v in events.items()}


_FLUSH: dict[torch.device, torch.Tensor] = {}


def l2_flush(device: torch.device | str) -> Callable[[], object]:
    """A call that reads twice the L2 of CUDA ``device`` (one buffer a device, kept),
    evicting whatever a timed call would otherwise find there. A read, not a write:
    a write would leave the L2 full of dirty lines, whose write-back the timed call's
    own reads would then pay for (inputs past the L2 time slower)."""
    device = torch.device(device)
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    buf = _FLUSH.get(device)
    if buf is None:
        buf = _FLUSH[device] = torch.zeros(
            2 * cache_bytes(device) // 4, dtype=torch.float32, device=device
        )
    return buf.sum


def _capture_graphs(fn, inputs) -> list[Callable[[], object]]:
    # Warm up on a side stream (lazy init, compilation) as graph capture requires,
    # then capture one graph per input copy into one shared pool; sharing is safe
    # because the graphs are replayed one at a time in capture order.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for inp in inputs[:2]:
            fn(inp)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    pool = torch.cuda.graph_pool_handle()
    graphs = []
    for inp in inputs:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            fn(inp)
        graphs.append(g)
    return [g.replay for g in graphs]


# The plain read that sets the ceiling. torch's amax leaves bandwidth on the table
# for large bf16 inputs on an H200 (3.7 TB/s where a streaming Triton read reaches
# 4.6), while Triton's launch costs more on tiny ones; the ceiling is the faster.
_READ_BLOCK, _READ_ITERS = 2048, 8  # 16K elements per program: best of 4 tried on an H200
tl = None  # triton.language, bound on first use so that importing this module stays light
_read_kernel_cache: list = []


def _triton_read_kernel():
    global tl
    if not _read_kernel_cache:
        import triton
        import triton.language as language

        tl = language  # the kernel below resolves ``tl`` from this module's globals

        @triton.jit
        def read_max(x_ptr, out_ptr, numel, BLOCK: tl.constexpr, ITERS: tl.constexpr):
            pid = tl.program_id(0)
            base = pid.to(tl.int64) * BLOCK * ITERS
            acc = tl.full([BLOCK], float("-inf"), tl.float32)
            for i in tl.range(ITERS):
                offs = base + i * BLOCK + tl.arange(0, BLOCK)
                v = tl.load(x_ptr + offs, mask=offs < numel, other=float("-inf"))
                acc = tl.maximum(acc, v.to(tl.float32))
            tl.store(out_ptr + pid, tl.max(acc, 0))

        _read_kernel_cache.append((read_max, triton.cdiv))
    return _read_kernel_cache[0]


def triton_read(x: torch.Tensor) -> torch.Tensor:
    """Stream a contiguous tensor once and return per-program maxima (fp32): a read
    with next to no compute, to measure the card's read bandwidth.

    >>> # on a GPU: float(triton_read(x).max()) == float(x.float().max())
    """
    if not x.is_contiguous():
        raise ValueError("triton_read needs a contiguous tensor")
    kernel, cdiv = _triton_read_kernel()
    numel = x.numel()
    grid = max(1, cdiv(numel, _READ_BLOCK * _READ_ITERS))
    out = torch.empty(grid, dtype=torch.float32, device=x.device)
    kernel[(grid,)](x, out, numel, BLOCK=_READ_BLOCK, ITERS=_READ_ITERS)
    return out


_BITS_VIEW = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _amax_bits(x: torch.Tensor) -> torch.Tensor:
    return x.view(_BITS_VIEW[x.element_size()]).amax(dim=1)


def read_kernels(device: torch.device | str) -> list[tuple[str, Callable]]:
    """The plain reads timed for the ceiling: ``x.amax(dim=1)`` and the same over the
    bit patterns as integers everywhere, plus :func:`triton_read` on CUDA when Triton
    is importable. The integer one is there for the CPU, where torch's amax over bf16
    converts every element and ran at 0.9 GB/s on a 2-core machine, the same bytes
    as int16 at 7.4 GB/s: a read that slow is no ceiling."""
    reads: list[tuple[str, Callable]] = [
        ("amax", lambda x: x.amax(dim=1)),
        ("amax-bits", _amax_bits),
    ]
    if torch.device(device).type == "cuda" and importlib.util.find_spec("triton"):
        reads.append(("triton", triton_read))
    return reads


def measure_read_peak(device: torch.device | str, cold_bytes: int, repeats: int = 10) -> float:
    """The card's read bandwidth in TB/s: the faster of :func:`read_kernels` over a
    bf16 buffer several times the cache (at least 1 GiB on a GPU)."""
    dev = torch.device(device)
    total = max(cold_bytes, (1 << 30) if dev.type == "cuda" else 64 << 20)
    n = 1 << 20
    rows = max(1, total // (2 * n))
    buf = torch.full((rows, n), 1.0, dtype=torch.bfloat16, device=dev)
    half = max(1, rows // 2)
    views = [buf[:half], buf[half:]] if rows > 1 else [buf]
    best = None
    for _, read in read_kernels(dev):
        try:
            t = time_fn(read, views, dev, repeats=repeats, warmup=2).median_s
        except Exception:
            continue
        best = t if best is None else min(best, t)
    return tbps(views[0].numel() * 2, best) or 0.0


READ_METHODS = ("amax", "amax-bits", "sum", "copy", "triton")
"""The plain reads the ``read`` scenario times (:func:`read_calls`)."""


def read_calls(x: torch.Tensor) -> dict[str, tuple[Callable, int]]:
    """The ``read`` scenario's calls for inputs shaped like ``x``: each of
    :func:`read_kernels`, ``x.sum(dim=1)`` and a copy into a buffer of ``x``'s shape,
    with the bytes each moves per input byte (2 for the copy: read and write)."""
    out = torch.empty_like(x)
    calls = {name: (fn, 1) for name, fn in read_kernels(x.device)}
    calls["sum"] = (lambda t: t.sum(dim=1), 1)
    calls["copy"] = (out.copy_, 2)
    return {name: calls[name] for name in READ_METHODS if name in calls}
