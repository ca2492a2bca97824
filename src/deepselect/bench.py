"""``deepselect bench``: DeepSelect's performance cases, timed against torch.topk.

The program a user runs first: it proves (or disproves) the speed on their own
machine. For every case it

1. draws random inputs and checks every library's result against ``torch.topk``'s
   values (and deepselect's indices against the exact oracle on a few rows),
2. times deepselect, ``torch.topk``, a plain read of the same bytes (the read
   ceiling) and any other top-k library it can import, with one shared timer,
3. prints a table, and optionally writes CSV and bar charts.

The case list follows DeepSelect's published figures: the sparse-attention
*indexer* (bf16, unsorted, k in {512, 1024}, N from 256 to 1M) and the *sampler*
(fp32 logits over a 129,280-token vocabulary, k = 512, sorted values). Without a
GPU the same program runs the CPU backend on shapes that finish in about a minute.

Effective bandwidth is DeepSelect's metric: (valid input bytes + output bytes) /
time, with the output counted as deepselect's call produces it (values + int32
indices). The bytes are counted once per case, so every library's TB/s on a row is
the same bytes over its own time and TB/s ratios equal time ratios. The table shows
TB/s on a GPU and GB/s on a CPU; the CSV's ``*_tbps`` columns are TB/s everywhere.

>>> cases = case_list("sampler", device="cuda", quick=True)
>>> [(c.batch, c.n, c.k, c.order) for c in cases][:1]
[(6, 129280, 512, 'value')]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import importlib
import importlib.util
import math
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import distributions, runinfo
from .keys import to_keys
from .options import Order, TopkOptions

# --------------------------------------------------------------------------- cases

INDEXER_BATCHES = (6, 256, 512, 768, 4096)
INDEXER_NS = (256, 1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 17, 1 << 18, 1 << 19, 1 << 20)
INDEXER_KS = (512, 1024)
SAMPLER_BATCHES = (6, 256, 512, 768, 4096)
SAMPLER_N = 129_280  # DeepSeek's vocabulary
SAMPLER_K = 512

# A GPU run that still shows both ends of each figure (launch-bound and bandwidth-bound).
QUICK_INDEXER_BATCHES = (6, 512, 4096)
QUICK_INDEXER_NS = (1 << 14, 1 << 17, 1 << 20)
QUICK_SAMPLER_BATCHES = (6, 512, 4096)

# Without a GPU: shapes that keep the whole run near a minute on two cores, even
# when topk_rows falls back to the sorting oracle (~1 s per 8M elements).
CPU_INDEXER_BATCHES = (6, 32)
CPU_INDEXER_NS = (1 << 14, 1 << 17, 1 << 20)
CPU_SAMPLER_BATCHES = (6, 32)
CPU_QUICK_INDEXER_NS = (1 << 14, 1 << 18)
CPU_QUICK_SAMPLER_BATCHES = (6,)

SCENARIOS = ("indexer", "sampler")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
_DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


@dataclass(frozen=True)
class Case:
    """One benchmark shape: ``batch`` rows of ``n`` elements, top ``k`` of each."""

    scenario: str
    dtype: torch.dtype
    batch: int
    n: int
    k: int
    order: str  # deepselect's output order: "none" (indexer) or "value" (sampler)

    @property
    def dtype_name(self) -> str:
        return _DTYPE_NAMES.get(self.dtype, str(self.dtype).removeprefix("torch."))

    @property
    def input_bytes(self) -> int:
        return self.batch * self.n * self.dtype.itemsize


def parse_size(text: str) -> int:
    """``"129280"``, ``"128K"``, ``"1M"`` -> int (K = 1024, M = 1024**2).

    >>> parse_size("128K"), parse_size("1M"), parse_size("129280")
    (131072, 1048576, 129280)
    """
    t = str(text).strip().upper()
    scale = 1
    if t.endswith("K"):
        scale, t = 1 << 10, t[:-1]
    elif t.endswith("M"):
        scale, t = 1 << 20, t[:-1]
    try:
        value = int(t) * scale
    except ValueError:
        raise ValueError(
            f"sizes must be integers with an optional K or M suffix; got {text!r}"
        ) from None
    if value < 1:
        raise ValueError(f"sizes must be >= 1; got {text!r}")
    return value


def format_size(n: int) -> str:
    """Inverse of :func:`parse_size` where exact: 131072 -> ``"128K"``, 129280 -> ``"129280"``."""
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10}K"
    return str(n)


def case_list(
    scenario: str = "all",
    *,
    device: str = "cuda",
    quick: bool = False,
    batches: Sequence[int] | None = None,
    ns: Sequence[int] | None = None,
    ks: Sequence[int] | None = None,
    dtype: torch.dtype | None = None,
) -> list[Case]:
    """The benchmark's cases, in the order they run.

    Args:
        scenario: ``"indexer"``, ``"sampler"`` or ``"all"``.
        device: ``"cuda"`` gives DeepSelect's published list (or its ``quick`` subset);
            ``"cpu"`` gives small shapes that finish in about a minute.
        quick: a shorter list.
        batches, ns, ks, dtype: replace the list's batches / row lengths / k / dtype
            in every selected scenario (e.g. a single custom shape).

    Returns:
        ``list[Case]``; indexer cases are unsorted (``order="none"``), sampler cases
        sorted by value.

    >>> [c.n for c in case_list("indexer", device="cuda", ks=[512], batches=[6])][:3]
    [256, 1024, 4096]
    """
    if scenario not in SCENARIOS + ("all",):
        raise ValueError(f"scenario must be 'indexer', 'sampler' or 'all'; got {scenario!r}")
    if device not in ("cuda", "cpu"):
        raise ValueError(f"device must be 'cuda' or 'cpu'; got {device!r}")
    for name, seq in (("batches", batches), ("ns", ns), ("ks", ks)):
        if seq is not None and (not seq or any(int(v) < 1 for v in seq)):
            raise ValueError(f"{name} must be a non-empty list of integers >= 1; got {seq!r}")
    cpu = device == "cpu"
    if cpu:
        ib, i_ns = CPU_INDEXER_BATCHES, CPU_QUICK_INDEXER_NS if quick else CPU_INDEXER_NS
        i_ks, sb = (512,), CPU_QUICK_SAMPLER_BATCHES if quick else CPU_SAMPLER_BATCHES
    elif quick:
        ib, i_ns, i_ks, sb = QUICK_INDEXER_BATCHES, QUICK_INDEXER_NS, (512,), QUICK_SAMPLER_BATCHES
    else:
        ib, i_ns, i_ks, sb = INDEXER_BATCHES, INDEXER_NS, INDEXER_KS, SAMPLER_BATCHES
    cases: list[Case] = []
    if scenario in ("indexer", "all"):
        for k in ks or i_ks:
            for b in batches or ib:
                for n in ns or i_ns:
                    cases.append(Case("indexer", dtype or torch.bfloat16, b, n, k, "none"))
    if scenario in ("sampler", "all"):
        for k in ks or (SAMPLER_K,):
            for b in batches or sb:
                for n in ns or (SAMPLER_N,):
                    cases.append(Case("sampler", dtype or torch.float32, b, n, k, "value"))
    return cases


# ------------------------------------------------------------------------- metrics


def effective_bytes(
    batch: int,
    n: int,
    k: int,
    dtype: torch.dtype,
    *,
    valid: int | None = None,
    index_bytes: int = 4,
    values: bool = True,
) -> int:
    """Bytes an ideal top-k moves: the valid input read once plus the outputs written.

    Args:
        batch, n, k: the shape; the output is ``[batch, k]`` (fills included).
        dtype: input (and value output) dtype.
        valid: valid input elements in all (default ``batch * n``: no windows).
        index_bytes: 4 for int32 indices, 8 for int64.
        values: whether the call writes values too.

    >>> effective_bytes(2, 1000, 10, torch.bfloat16)  # 2*1000*2 + 2*10*(2+4)
    4120
    """
    valid = batch * n if valid is None else valid
    per_out = index_bytes + (dtype.itemsize if values else 0)
    return valid * dtype.itemsize + batch * k * per_out


def tbps(nbytes: float, seconds: float | None) -> float | None:
    """Terabytes (10**12 bytes) per second; None when there is no time.

    >>> tbps(4e12, 2.0)
    2.0
    """
    if seconds is None or not seconds > 0:
        return None
    return nbytes / seconds / 1e12


def bandwidth_unit(device: str) -> tuple[str, float]:
    """The unit a device's bandwidth reads well in, and the factor from TB/s to it.

    >>> bandwidth_unit("cuda"), bandwidth_unit("cpu")
    (('TB/s', 1.0), ('GB/s', 1000.0))
    """
    return ("GB/s", 1000.0) if str(device).startswith("cpu") else ("TB/s", 1.0)


SPREAD_WARN = 1.5
"""Slowest over fastest call of one measurement above which the table warns: the
median is then a poor summary (other load, clock changes, a cache that was warm)."""


def speedup(reference_s: float | None, ours_s: float | None) -> float | None:
    """How many times faster ``ours`` is than ``reference`` (> 1 means faster).

    >>> speedup(3.0, 1.5)
    2.0
    """
    if reference_s is None or ours_s is None or not ours_s > 0:
        return None
    return reference_s / ours_s


def percent(part: float | None, whole: float | None) -> float | None:
    """``100 * part / whole``, or None.

    >>> percent(1.0, 4.0)
    25.0
    """
    if part is None or whole is None or not whole > 0:
        return None
    return 100.0 * part / whole


# ---------------------------------------------------------------------- exactness

EXACT = "exact"


def _bits(t: torch.Tensor) -> torch.Tensor:
    itype = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(itype)


def _bad_rows(mask: torch.Tensor) -> str:
    rows = mask.nonzero().flatten()[:5].tolist()
    return ", ".join(str(r) for r in rows)


def check_exact(
    x: torch.Tensor,
    values: torch.Tensor | None,
    indices: torch.Tensor,
    want_values: torch.Tensor,
    k: int,
    *,
    ordered: bool,
    fill_index: int | None = None,
) -> str:
    """Judge a top-k result by the values it selected, so ties may pick any index.

    Args:
        x: ``[rows, N]`` input.
        values: ``[rows, >= min(k, N)]`` returned values, or None for index-only calls.
        indices: ``[rows, >= min(k, N)]`` returned indices (any integer dtype).
        want_values: ``[rows, min(k, N)]`` values of ``torch.topk`` (sorted if ``ordered``).
        k: requested k; when ``k > N`` only the first N columns hold elements.
        ordered: compare value sequences position by position (sorted output);
            otherwise compare each row's values as a multiset.
        fill_index: if given and ``k > N``, the index expected in the fill columns.

    Returns:
        ``"exact"`` or ``"inexact: <reason>"``. Values are compared as order keys
        (:func:`deepselect.keys.to_keys`: bit patterns, with -0.0 == +0.0 and all NaNs
        equal, as the contract orders them); returned values must be bitwise
        ``x[row, index]``, indices in range and distinct.

    >>> x = torch.tensor([[1.0, 5.0, 3.0]])
    >>> want = torch.topk(x, 2).values
    >>> check_exact(x, None, torch.tensor([[2, 1]]), want, 2, ordered=False)
    'exact'
    >>> check_exact(x, None, torch.tensor([[0, 1]]), want, 2, ordered=False)
    'inexact: wrong values in rows 0'
    """
    rows, n = x.shape
    kv = min(k, n)
    if indices.dim() != 2 or indices.shape[0] != rows or indices.shape[1] < kv:
        return f"inexact: indices have shape {list(indices.shape)}, want [{rows}, {k}]"
    idx = indices[:, :kv].to(torch.int64)
    out_of_range = ((idx < 0) | (idx >= n)).any(dim=1)
    if bool(out_of_range.any()):
        return f"inexact: index out of range in rows {_bad_rows(out_of_range)}"
    srt = idx.sort(dim=1).values
    repeated = (srt[:, 1:] == srt[:, :-1]).any(dim=1)
    if bool(repeated.any()):
        return f"inexact: repeated index in rows {_bad_rows(repeated)}"
    picked = torch.gather(_bits(x), 1, idx)
    if values is not None:
        if values.shape[0] != rows or values.shape[1] < kv or values.dtype != x.dtype:
            return f"inexact: values have shape {list(values.shape)} / dtype {values.dtype}"
        not_bitwise = (_bits(values[:, :kv]) != picked).any(dim=1)
        if bool(not_bitwise.any()):
            return f"inexact: values are not x[row, index] in rows {_bad_rows(not_bitwise)}"
        got = to_keys(values[:, :kv])
    else:
        got = to_keys(picked.view(x.dtype))
    want = to_keys(want_values[:, :kv])
    if not ordered:
        got, want = got.sort(dim=1).values, want.sort(dim=1).values
    wrong = (got != want).any(dim=1)
    if bool(wrong.any()):
        return f"inexact: wrong values in rows {_bad_rows(wrong)}"
    if fill_index is not None and k > n:
        bad_fill = (indices[:, n:k].to(torch.int64) != fill_index).any(dim=1)
        if bool(bad_fill.any()):
            return f"inexact: fill index is not {fill_index} in rows {_bad_rows(bad_fill)}"
    return EXACT


def check_against_oracle(
    x: torch.Tensor,
    values: torch.Tensor | None,
    indices: torch.Tensor,
    k: int,
    order: str | TopkOptions,
    *,
    max_rows: int = 8,
) -> str:
    """Compare deepselect's indices (and values) with the exact oracle on a few rows.

    Ties go to the lowest index in the contract, so the selected index *set* is unique;
    rows are spread evenly over the batch (first and last included) to keep this cheap.
    ``order``: the output order, or the call's whole :class:`TopkOptions` (windows,
    ``largest``, offsets: per-row tensors are taken for the compared rows).

    Returns:
        ``"exact"`` or ``"inexact: <reason>"``.
    """
    from .oracle import oracle_topk

    rows = x.shape[0]
    if rows == 0:
        return EXACT
    take = min(rows, max_rows)
    sel = torch.linspace(0, rows - 1, take).round().to(torch.int64).unique()
    if isinstance(order, TopkOptions):
        per_row = ("begin", "end", "index_offset")
        opt = dataclasses.replace(order, **{
            f: getattr(order, f)[sel.to(getattr(order, f).device)]
            for f in per_row if isinstance(getattr(order, f), torch.Tensor)
        })  # fmt: skip
    else:
        opt = TopkOptions(order=Order.parse(order), index_dtype=indices.dtype)
    want_v, want_i = oracle_topk(x[sel.to(x.device)], k, opt)
    got_i = indices[sel.to(indices.device)].to(torch.int64)
    want_i = want_i.to(torch.int64)
    got_v = values[sel.to(values.device)] if values is not None else None
    if opt.order is Order.NONE:
        gp, wp = got_i.argsort(dim=1, stable=True), want_i.argsort(dim=1, stable=True)
        got_i, want_i = got_i.gather(1, gp), want_i.gather(1, wp)
        if got_v is not None:
            got_v = _bits(got_v).gather(1, gp)
            want_v = _bits(want_v).gather(1, wp)
    elif got_v is not None:
        got_v, want_v = _bits(got_v), _bits(want_v)
    bad = (got_i != want_i).any(dim=1)
    if got_v is not None:
        bad |= (got_v != want_v).any(dim=1)
    if bool(bad.any()):
        return f"inexact: differs from the oracle in rows {_bad_rows(sel[bad.cpu()])}"
    return EXACT


# -------------------------------------------------------------------------- timing


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


def time_fn(
    fn: Callable[[torch.Tensor], object],
    inputs: Sequence[torch.Tensor],
    device: torch.device | str,
    *,
    repeats: int = 20,
    warmup: int = 3,
    graph: bool = False,
    max_seconds: float | None = None,
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

    Returns:
        :class:`Timing` with the median and the samples, in seconds.

    >>> t = time_fn(lambda x: x.sum(), [torch.ones(8)], "cpu", repeats=3, warmup=1)
    >>> len(t.samples)
    3
    """
    return time_fns(
        {"fn": fn}, inputs, device, repeats=repeats, warmup=warmup, graph=graph,
        max_seconds=max_seconds,
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
) -> dict[str, Timing]:
    """:func:`time_fn` for several calls at once, interleaved: each round times every
    call once (in an order rotated round by round), so that whatever drifts during a
    run (clocks, temperature, neighbours) falls on all of them alike. For calls whose
    differences are smaller than the spread between runs; ``samples[r]`` of each
    :class:`Timing` come from the same round ``r``, for paired comparisons. On CUDA
    the calls are queued behind a sleep kernel (:func:`head_start`), so that each
    call's events hold its device time, not the host's work of launching it.

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
    events: dict[str, list] = {n: [] for n in names}
    if cuda:
        torch.cuda.synchronize(device)
        head_start(len(names) * (8 if max_seconds is not None else repeats))
    t0 = time.perf_counter()
    spent = 0.0
    for r in range(repeats):
        for j in range(len(names)):
            n = names[(r + j) % len(names)]
            call = calls[n][(warmup + r) % len(calls[n])]
            if cuda:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
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
                head_start(8 * len(names))
            if spent > max_seconds:
                break
    if cuda:
        torch.cuda.synchronize(device)
        events = {n: [a.elapsed_time(b) / 1e3 for a, b in v] for n, v in events.items()}
    return {n: Timing(statistics.median(v), v) for n, v in events.items()}


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


# -------------------------------------------------------------------------- inputs


def draw(
    kind: str,
    rows: int,
    n: int,
    dtype: torch.dtype,
    device: torch.device | str,
    seed: int = 0,
) -> torch.Tensor:
    """A ``[rows, n]`` tensor of distribution ``kind``, drawn on ``device``.

    The benchmark kinds (:data:`deepselect.distributions.BENCH_KINDS`) are drawn
    directly on the device in fp32 and rounded to ``dtype`` (same distributions as
    :func:`deepselect.distributions.make`, which builds fp64 on the CPU and would take
    minutes for a 4096 x 1M batch); other kinds come from ``distributions.make``.

    >>> draw("ascending", 2, 4, torch.float32, "cpu")[1].tolist()
    [0.0, 0.25, 0.5, 0.75]
    """
    device = torch.device(device)
    if kind not in distributions.KINDS:
        raise ValueError(f"dist must be one of {', '.join(distributions.KINDS)}; got {kind!r}")
    if kind not in ("normal", "shifted", "tiny", "ascending", "distinct32"):
        return distributions.make(kind, rows, n, dtype, device, seed)
    g = torch.Generator(device=device).manual_seed(seed)
    out = torch.empty(rows, n, dtype=dtype, device=device)
    if kind == "ascending":
        out.copy_((torch.arange(n, device=device, dtype=torch.float64) / max(n, 1)).expand(rows, n))
        return out
    pool = torch.randn(32, generator=g, device=device) * 10
    chunk = max(1, (64 << 20) // max(n, 1))  # bound the fp32 / int64 temporaries
    for r in range(0, rows, chunk):
        m = min(chunk, rows - r)
        if kind == "distinct32":
            part = pool[torch.randint(0, 32, (m, n), generator=g, device=device)]
        else:
            part = torch.randn(m, n, generator=g, device=device)
            if kind == "shifted":
                part += 100.0
            elif kind == "tiny":
                part *= 1e-8
        out[r : r + m] = part
    return out


def input_copies(
    case: Case, kind: str, device: torch.device | str, *, cold_bytes: int, seed: int = 0
) -> list[torch.Tensor]:
    """Views ``[batch, n]`` of one buffer at least ``cold_bytes`` large (one copy at
    least), filled with fresh random data: rotating through them defeats the cache."""
    copies = max(1, math.ceil(cold_bytes / max(case.input_bytes, 1)))
    buf = draw(kind, copies * case.batch, case.n, case.dtype, device, seed)
    return list(buf.view(copies, case.batch, case.n).unbind(0))


# ----------------------------------------------------------------------- libraries


@dataclass
class Library:
    """A top-k implementation behind one call: ``call(x, k, ordered) -> (values|None,
    indices)``. ``ordered`` asks for values sorted descending."""

    name: str
    call: Callable[[torch.Tensor, int, bool], tuple[torch.Tensor | None, torch.Tensor]]
    fill_index: int | None = None  # index written past N when k > N, if any
    note: str = ""


def deepselect_library() -> Library:
    """deepselect's ``topk_rows`` with int32 indices (backend picked by device)."""
    from .api import topk_rows

    def call(x, k, ordered):
        return topk_rows(x, k, order="value" if ordered else "none", index_dtype=torch.int32)

    return Library("deepselect", call, fill_index=-1)


def torch_library() -> Library:
    def call(x, k, ordered):
        r = torch.topk(x, min(k, x.shape[1]), dim=1, largest=True, sorted=ordered)
        return r.values, r.indices

    return Library("torch.topk", call)


def backend_problem(device: torch.device | str) -> tuple[str | None, str]:
    """Whether deepselect's backend for ``device`` can run: ``(problem, note)``.

    ``problem`` is None when it can; ``note`` is a remark for the report (the CPU
    backend missing means ``topk_rows`` runs its sorting fallback).
    """
    device = torch.device(device)
    if device.type == "cuda":
        try:
            importlib.import_module("deepselect.triton_backend")
        except ImportError as exc:
            return (
                f"deepselect's Triton backend is not importable ({exc}); "
                "timing torch.topk and the read ceiling only",
                "",
            )
        return None, ""
    try:
        importlib.import_module("deepselect.cpu_backend")
    except ImportError as exc:
        return None, (
            f"deepselect's CPU backend is not importable ({exc}): topk_rows runs its exact "
            "sorting fallback, so its CPU times here are not the CPU backend's"
        )
    return None, ""


def _flashinfer_library() -> Library | None:
    if importlib.util.find_spec("flashinfer") is None:
        return None
    import flashinfer

    fn = getattr(flashinfer, "top_k", None)
    if fn is None:
        topk_mod = getattr(flashinfer, "topk", None)
        fn = getattr(topk_mod, "top_k", None)
    if fn is None:
        return None

    def call(x, k, ordered):
        v, i = fn(x, k, sorted=ordered)
        return v, i

    return Library("flashinfer", call)


def _sgl_library() -> Library | None:
    if importlib.util.find_spec("sgl_kernel") is None:
        return None
    import sgl_kernel

    v2 = getattr(sgl_kernel, "fast_topk_v2", None)
    if v2 is not None:
        lengths: dict[tuple, torch.Tensor] = {}

        def call_v2(x, k, ordered):
            if ordered:
                raise NotImplementedError("fast_topk_v2 returns unsorted indices only")
            key = (x.shape[0], x.shape[1], x.device)
            if key not in lengths:  # allocated once, outside the timed calls
                lengths[key] = torch.full(key[:1], key[1], dtype=torch.int32, device=x.device)
            return None, v2(x, lengths[key], k)

        return Library("sgl-kernel", call_v2, note="fast_topk_v2")
    fast = getattr(sgl_kernel, "fast_topk", None)
    if fast is None:
        return None

    def call(x, k, ordered):
        v, i = fast(x, k, dim=-1)
        return v, i

    return Library("sgl-kernel", call, note="fast_topk")


def extra_libraries(device: torch.device | str) -> list[Library]:
    """Other GPU top-k libraries that import here (FlashInfer, sgl-kernel); a library
    that fails to import is left out, never an error."""
    if torch.device(device).type != "cuda":
        return []
    found = []
    for make in (_flashinfer_library, _sgl_library):
        try:
            lib = make()
        except Exception:  # a broken install must not stop the benchmark
            lib = None
        if lib is not None:
            found.append(lib)
    return found


# -------------------------------------------------------------------------- runner


@dataclass
class BenchConfig:
    """What one ``deepselect bench`` run does (see :func:`register` for the flags)."""

    device: str = "cuda"
    repeats: int = 20
    warmup: int = 3
    graph: bool = False
    max_bytes: int = 1 << 30
    cold_factor: float = 3.0
    max_seconds: float | None = None
    seed: int = 0


BASE_COLUMNS = (
    "scenario",
    "dist",
    "dtype",
    "batch",
    "n",
    "k",
    "order",
    "device",
    "graph",
    "copies",
    "bytes",
    "deepselect_us",
    "torch_us",
    "read_us",
    "deepselect_min_us",
    "deepselect_max_us",
    "torch_min_us",
    "torch_max_us",
    "spread",
    "speedup",
    "deepselect_tbps",
    "torch_tbps",
    "read_tbps",
    "pct_of_read",
    "deepselect_status",
    "status",
    *runinfo.FIELDS,
)
"""CSV columns every run writes; each extra library adds ``<name>_us``,
``<name>_tbps`` and ``<name>_status``. Times are medians (``*_us``) and extremes
(``*_min_us``, ``*_max_us``) in µs; ``spread`` is the larger slowest-over-fastest
ratio of deepselect's and torch.topk's calls; the last columns say what the run ran
on (:data:`deepselect.runinfo.FIELDS`, the same in every row of a run)."""


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return text[:80]


def case_fields(case, dist: str, device: str) -> dict:
    """The columns that name a case (shared by measured and failed rows)."""
    return {
        "scenario": case.scenario,
        "dist": dist,
        "dtype": case.dtype_name,
        "batch": case.batch,
        "n": case.n,
        "k": case.k,
        "order": case.order,
        "device": device,
    }


def run_case(
    case: Case,
    dist: str,
    config: BenchConfig,
    ours: Library | None,
    extras: Sequence[Library] = (),
) -> dict:
    """Check and time one case; returns one CSV row (see :data:`BASE_COLUMNS`).

    ``ours`` is deepselect's adapter, or None when its backend cannot run here.
    """
    dev = torch.device(config.device)
    nbytes = effective_bytes(case.batch, case.n, case.k, case.dtype)
    row: dict = {
        **case_fields(case, dist, dev.type),
        "graph": config.graph,
        "bytes": nbytes,
        "deepselect_status": "n/a" if ours is None else "",
        "status": "ok",
    }
    if case.input_bytes > config.max_bytes:
        row["status"] = f"skipped: input {case.input_bytes / 2**30:.1f} GiB > memory budget"
        return row
    try:
        cold = 0 if case.input_bytes * 2 > config.max_bytes else config.cold_factor
        inputs = input_copies(
            case, dist, dev, cold_bytes=int(cold * cache_bytes(dev)), seed=config.seed
        )
    except (RuntimeError, MemoryError) as exc:  # out of memory: report, go on
        row["status"] = f"error: {_short(exc)}"
        return row
    row["copies"] = len(inputs)
    ordered = case.order == "value"
    x0 = inputs[0]
    timed: list[tuple[str, Library]] = []
    want = torch_library().call(x0, case.k, ordered)[0]
    for lib in ([ours] if ours is not None else []) + list(extras):
        col = "deepselect" if lib is ours else lib.name
        try:
            v, i = lib.call(x0, case.k, ordered)
        except Exception as exc:  # another library may lack a shape; ours must not
            word = "error" if lib is ours else "unsupported"
            row[f"{col}_status"] = f"{word}: {_short(exc)}"
            continue
        status = check_exact(x0, v, i, want, case.k, ordered=ordered, fill_index=lib.fill_index)
        if lib is ours and status == EXACT:
            status = check_against_oracle(x0, v, i, case.k, case.order)
        row[f"{col}_status"] = status
        timed.append((col, lib))
        del v, i
    del want

    def timeit(fn) -> Timing:
        return time_fn(
            fn,
            inputs,
            dev,
            repeats=config.repeats,
            warmup=config.warmup,
            graph=config.graph,
            max_seconds=config.max_seconds,
        )

    def record(col: str, t: Timing) -> None:
        row[f"{col}_us"] = t.median_s * 1e6
        if col in ("deepselect", "torch"):
            row[f"{col}_min_us"] = min(t.samples) * 1e6
            row[f"{col}_max_us"] = max(t.samples) * 1e6

    k = case.k
    record("torch", timeit(lambda x: torch_library().call(x, k, ordered)))
    reads = []
    for _, read in read_kernels(dev):
        try:
            reads.append(timeit(read).median_s)
        except Exception:  # a read that cannot run here just does not count
            continue
    row["read_us"] = min(reads) * 1e6 if reads else None
    for col, lib in timed:
        try:
            record(col, timeit(lambda x, lib=lib: lib.call(x, k, ordered)))
        except Exception as exc:
            row[f"{col}_status"] = f"error: {_short(exc)}"
    fill_metrics(row, case.input_bytes, [lib.name for lib in extras])
    del x0
    inputs.clear()  # free the copies before the next case allocates its own
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return row


def fill_metrics(row: dict, input_bytes: int, extra_names: Sequence[str] = ()) -> dict:
    """Derive TB/s, speedup, % of the read ceiling and the spread from the row's times
    (µs) and ``row["bytes"]``; the read ceiling is the plain read's bandwidth over the
    input; the spread is the larger max/min of deepselect's and torch.topk's calls.

    >>> r = fill_metrics({"bytes": 2e6, "deepselect_us": 1.0, "torch_us": 4.0,
    ...                   "read_us": 0.5}, input_bytes=1e6)
    >>> r["speedup"], r["deepselect_tbps"], r["read_tbps"], r["pct_of_read"]
    (4.0, 2.0, 2.0, 100.0)
    """

    def sec(col):
        us = row.get(col)
        return None if us is None or us == "" else float(us) / 1e6

    nbytes = float(row["bytes"])
    row["deepselect_tbps"] = tbps(nbytes, sec("deepselect_us"))
    row["torch_tbps"] = tbps(nbytes, sec("torch_us"))
    row["read_tbps"] = tbps(input_bytes, sec("read_us"))
    row["speedup"] = speedup(sec("torch_us"), sec("deepselect_us"))
    row["pct_of_read"] = percent(row["deepselect_tbps"], row["read_tbps"])
    ratios = [
        hi / lo
        for lo, hi in ((sec(f"{c}_min_us"), sec(f"{c}_max_us")) for c in ("deepselect", "torch"))
        if lo and hi
    ]
    row["spread"] = max(ratios) if ratios else None
    for name in extra_names:
        row[f"{name}_tbps"] = tbps(nbytes, sec(f"{name}_us"))
    return row


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


# -------------------------------------------------------------------------- output


def columns_for(extra_names: Sequence[str]) -> list[str]:
    cols = list(BASE_COLUMNS)
    for name in extra_names:
        cols += [f"{name}_us", f"{name}_tbps", f"{name}_status"]
    return cols


def write_csv(
    rows: Sequence[dict],
    path: str | Path,
    extra_names: Sequence[str] = (),
    info: Mapping[str, object] | None = None,
) -> Path:
    """Write the result rows to ``path`` (parents created); missing cells stay empty.
    ``info`` (:func:`deepselect.runinfo.run_info`) fills the run's columns of every row."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = columns_for(extra_names)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            r = {**r, **(info or {})}
            w.writerow({c: _csv_cell(r.get(c)) for c in cols})
    return path


def _csv_cell(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


def format_time(us: float | None) -> str:
    """µs -> a short human string: ``"12.3 µs"``, ``"4.56 ms"``, ``"1.20 s"``."""
    if us is None or us == "":
        return "—"
    us = float(us)
    if us < 1000:
        return f"{us:.1f} µs"
    if us < 1e6:
        return f"{us / 1e3:.2f} ms"
    return f"{us / 1e6:.2f} s"


def _fmt(v, spec: str, suffix: str = "") -> str:
    return "—" if v is None or v == "" else f"{float(v):{spec}}{suffix}"


def _mark(status: str) -> str:
    if status == EXACT:
        return "[green]✓[/]"
    if not status or status == "n/a":
        return ""
    word = status.split(":")[0]
    color = "yellow" if word == "unsupported" else "red"
    return f"[{color}]{word}[/]"


OVER_READ_MARK = "†"
OVER_READ_NOTE = (
    "† faster than the plain read timed beside it (the fastest of torch's amax over the "
    "values and over their bits, and a Triton read on a GPU), so that read is not a "
    "ceiling for this shape: it fell short of the memory's bandwidth there (on short or "
    "few rows, fixed costs such as launches dominate both times)"
)


def _pct_cell(pct) -> str:
    if pct is None or pct == "":
        return "—"
    pct = float(pct)
    return f"{pct:.0f}%{OVER_READ_MARK}" if pct > 100 else f"{pct:.0f}%"


def _spread_cell(spread) -> str:
    if spread is None or spread == "":
        return "—"
    spread = float(spread)
    text = f"{spread:.2f}×"
    return f"[yellow]{text}![/]" if spread > SPREAD_WARN else text


def render_table(
    rows: Sequence[dict], extra_names: Sequence[str] = (), title: str = "", unit: str = ""
):
    """A ``rich.table.Table`` of the results (one line per case).

    Times are medians; ``spread`` is the slowest call over the fastest (see
    :data:`SPREAD_WARN`); bandwidth is in ``unit`` (default: GB/s when every row ran
    on the CPU, else TB/s); a share of the plain read above 100% carries
    :data:`OVER_READ_MARK` (explained by :data:`OVER_READ_NOTE`).
    """
    from rich.table import Table

    if not unit:
        unit = "GB/s" if rows and all(r.get("device") == "cpu" for r in rows) else "TB/s"
    scale = bandwidth_unit("cpu" if unit == "GB/s" else "cuda")[1]
    dists = {r["dist"] for r in rows}
    t = Table(title=title or None, header_style="bold")
    t.add_column("scenario", no_wrap=True)
    if len(dists) > 1:
        t.add_column("dist", no_wrap=True)
    for c in ("dtype", "batch", "N", "k", "deepselect", "torch.topk", "spread", "speedup", unit,
              "% read"):  # fmt: skip
        t.add_column(c, justify="right", no_wrap=True)
    for name in extra_names:
        t.add_column(name, justify="right", no_wrap=True)
    for r in rows:
        cells = [r["scenario"]]
        if len(dists) > 1:
            cells.append(r["dist"])
        cells += [r["dtype"], str(r["batch"]), format_size(int(r["n"])), str(r["k"])]
        if r.get("status", "ok") != "ok":
            cells += [f"[dim]{r['status']}[/]"] + [""] * (5 + len(extra_names))
            t.add_row(*cells)
            continue
        ds_status = r.get("deepselect_status", "")
        ds = format_time(r.get("deepselect_us"))
        if ds_status not in (EXACT, ""):
            ds = f"{ds} {_mark(ds_status)}" if r.get("deepselect_us") else _mark(ds_status)
        bw = r.get("deepselect_tbps")
        cells += [
            ds,
            format_time(r.get("torch_us")),
            _spread_cell(r.get("spread")),
            _fmt(r.get("speedup"), ".2f", "×"),
            _fmt(None if bw in (None, "") else float(bw) * scale, ".3g"),
            _pct_cell(r.get("pct_of_read")),
        ]
        for name in extra_names:
            st = r.get(f"{name}_status", "")
            us = r.get(f"{name}_us")
            cells.append(f"{format_time(us)} {_mark(st)}" if us else _mark(st))
        t.add_row(*cells)
    return t


def notes(rows: Sequence[dict]) -> list[str]:
    """Lines to print under the table: what a mark in it means, and a warning when
    calls of one measurement varied more than :data:`SPREAD_WARN` times.

    >>> notes([{"spread": 1.1, "pct_of_read": 80.0}])
    []
    >>> [line[:9] for line in notes([{"spread": 3.0, "pct_of_read": 120.0}])]
    ['† faster ', 'warning: ']
    """

    def over(col: str, limit: float) -> int:
        return sum(1 for r in rows if r.get(col) not in (None, "") and float(r[col]) > limit)

    lines = []
    if over("pct_of_read", 100.0):
        lines.append(OVER_READ_NOTE)
    noisy = over("spread", SPREAD_WARN)
    if noisy:
        lines.append(
            f"warning: in {noisy} case{'s' if noisy > 1 else ''} (marked !) the slowest call "
            f"took more than {SPREAD_WARN}x the fastest, so the medians are unsteady: other "
            "load on the machine, changing clocks or a short run; rerun, or raise --repeats"
        )
    return lines


def summary(rows: Sequence[dict]) -> str:
    """One line: geometric-mean speedup over the cases where deepselect was exact."""
    ups = [
        float(r["speedup"])
        for r in rows
        if r.get("speedup") and r.get("deepselect_status") == EXACT
    ]
    inexact = [r for r in rows if str(r.get("deepselect_status", "")).startswith("inexact")]
    parts = []
    if ups:
        gm = math.exp(sum(math.log(u) for u in ups) / len(ups))
        parts.append(
            f"deepselect vs torch.topk: geometric-mean speedup {gm:.2f}× over {len(ups)} "
            f"cases (min {min(ups):.2f}×, max {max(ups):.2f}×)"
        )
    if inexact:
        parts.append(f"[red]{len(inexact)} cases where deepselect was NOT exact[/]")
    return "; ".join(parts)


# ----------------------------------------------------------------------------- CLI


def _int_list(text: str) -> list[int]:
    """An option's list of sizes; argparse prints the error's text as it is."""
    try:
        values = [parse_size(t) for t in text.replace(",", " ").split()]
    except ValueError:
        values = []
    if not values:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a list of sizes: give integers >= 1, each with an optional "
            "K (x1024) or M (x1024^2) suffix, separated by commas, e.g. '6,4096' or '16K,1M'"
        )
    return values


def register(subparsers) -> None:
    """Add ``deepselect bench`` to the CLI's subparsers."""
    p = subparsers.add_parser(
        "bench",
        help="benchmark against torch.topk on this machine",
        description=(
            "Time deepselect against torch.topk on DeepSelect's performance cases "
            "(indexer: bf16, unsorted; sampler: fp32, N=129280, k=512, sorted), checking "
            "every result for exactness first. Without a GPU, runs the CPU backend on "
            "small shapes. Prints median times, the spread of each measurement "
            "(slowest call / fastest), the speedup and the effective bandwidth (TB/s on "
            "a GPU, GB/s on a CPU)."
        ),
    )
    p.add_argument(
        "--scenario",
        choices=("indexer", "sampler", "all"),
        default="all",
        help="indexer (bf16, unsorted, k 512/1024, N 256..1M), sampler (fp32, N=129280, "
        "k=512, sorted by value) or both",
    )
    p.add_argument(
        "--batch", type=_int_list, metavar="SIZES",
        help="batch sizes, e.g. '6,4096' (default: the scenario's list, e.g. "
        "6,256,512,768,4096 on a GPU, 6,32 on a CPU)",
    )  # fmt: skip
    p.add_argument(
        "--n", type=_int_list, metavar="SIZES",
        help="row lengths with an optional K/M suffix, e.g. '16K,1M' (default: the "
        "scenario's list: up to 1M for the indexer, 129280 for the sampler)",
    )  # fmt: skip
    p.add_argument(
        "--k", type=_int_list, metavar="SIZES",
        help="k values, e.g. '512,1024' (default: 512,1024 for the indexer's full run on a "
        "GPU, else 512)",
    )  # fmt: skip
    p.add_argument(
        "--dtype", choices=tuple(DTYPES),
        help="override the scenario's dtype (default: bf16 for the indexer, fp32 for the "
        "sampler)",
    )  # fmt: skip
    p.add_argument(
        "--dist",
        default="normal",
        help=f"input distribution(s), comma-separated, or 'all' = "
        f"{','.join(distributions.BENCH_KINDS)}",
    )
    p.add_argument("--quick", action="store_true", help="a short run")
    p.add_argument("--graph", action="store_true", help="time CUDA-graph replays")
    p.add_argument(
        "--csv", metavar="PATH",
        help="write the results as CSV, each row with the run's versions, device, "
        "threads, commit and date",
    )  # fmt: skip
    p.add_argument("--plot", metavar="DIR", help="write PNG bar charts into DIR")
    p.add_argument(
        "--repeats", type=int,
        help="timed calls per measurement (default: 20 on a GPU, 10 with --quick; 5 on a "
        "CPU, 3 with --quick)",
    )  # fmt: skip
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda if available, else cpu")
    p.add_argument(
        "--max-gib",
        type=float,
        help="memory budget for one input copy, GiB; larger cases are skipped "
        "(default: 30%% of the GPU's memory, 2 GiB on the CPU)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.set_defaults(func=main)


def _dists(text: str) -> list[str]:
    if text == "all":
        return list(distributions.BENCH_KINDS)
    kinds = [t for t in text.replace(",", " ").split() if t]
    for kind in kinds:
        if kind not in distributions.KINDS:
            raise ValueError(
                f"--dist must be 'all' or among {', '.join(distributions.KINDS)}; got {kind!r}"
            )
    return kinds


def main(args: argparse.Namespace) -> int:
    """Run ``deepselect bench``; returns the exit status (1 if any result was inexact)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    # a pipe or file gets a wide table rather than rich's 80-column default
    out = Console() if sys.stdout.isatty() else Console(width=200)
    err = Console(stderr=True)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        if device == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda: no CUDA device is available")
        if args.graph and device != "cuda":
            raise ValueError("--graph needs --device cuda")
        if args.repeats is not None and args.repeats < 1:
            raise ValueError(f"--repeats must be >= 1; got {args.repeats}")
        if args.max_gib is not None and not args.max_gib > 0:
            raise ValueError(f"--max-gib must be > 0; got {args.max_gib}")
        dists = _dists(args.dist)
        cases = case_list(
            args.scenario,
            device=device,
            quick=args.quick,
            batches=args.batch,
            ns=args.n,
            ks=args.k,
            dtype=DTYPES[args.dtype] if args.dtype else None,
        )
    except ValueError as exc:
        err.print(f"[red]deepselect bench: {exc}[/]")
        return 2

    cpu = device == "cpu"
    if args.max_gib is not None:
        max_bytes = int(args.max_gib * 2**30)
    elif cpu:
        max_bytes = 2 << 30
    else:
        max_bytes = int(0.3 * torch.cuda.get_device_properties(0).total_memory)
    config = BenchConfig(
        device=device,
        repeats=args.repeats or ((3 if args.quick else 5) if cpu else (10 if args.quick else 20)),
        # on the CPU the exactness check just before timing is the warm-up (and the
        # JIT compile); the sorting fallback is too slow to call more than needed
        warmup=0 if cpu else 3,
        graph=args.graph,
        max_bytes=max_bytes,
        # the CPU fallback may sort whole rows: bound each measurement, not the case list
        max_seconds=1.5 if cpu else None,
        seed=args.seed,
    )

    problem, note = backend_problem(device)
    ours = None if problem else deepselect_library()
    extras = extra_libraries(device)
    extra_names = [lib.name for lib in extras]
    dev = torch.device(device)
    info = runinfo.run_info(device)
    if cpu:
        name = f"CPU ({info['device_name']}, {info['threads']} threads)"
    else:
        name = torch.cuda.get_device_name(dev)
    unit, scale = bandwidth_unit(device)
    cache = cache_bytes(dev)
    peak = measure_read_peak(dev, int(config.cold_factor * cache))
    err.print(
        f"[bold]deepselect bench[/] on {name}: cache {cache / 2**20:.0f} MiB, "
        f"read ceiling {peak * scale:.3g} {unit} (plain read of a cold buffer); "
        f"{len(cases) * len(dists)} cases, median of {config.repeats}"
        + (", CUDA-graph replay" if config.graph else "")
    )
    err.print(
        f"deepselect {info['deepselect_version']}"
        + (f" at {info['git_commit']}" if info["git_commit"] else "")
        + f", torch {info['torch_version']}, triton {info['triton_version'] or '-'}, "
        f"numba {info['numba_version'] or '-'}"
    )
    if problem:
        err.print(f"[yellow]{problem}[/]")
    if note:
        err.print(f"[yellow]note: {note}[/]")
    for lib in extras:
        err.print(f"also timing {lib.name}" + (f" ({lib.note})" if lib.note else ""))

    rows: list[dict] = []
    progress = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    with progress:
        task = progress.add_task("bench", total=len(cases) * len(dists))
        for dist in dists:
            for case in cases:
                progress.update(
                    task,
                    description=f"{case.scenario} {case.dtype_name} b={case.batch} "
                    f"N={format_size(case.n)} k={case.k} {dist}",
                )
                try:
                    row = run_case(case, dist, config, ours, extras)
                except Exception as exc:  # one broken case must not lose the others
                    if device == "cuda":
                        torch.cuda.empty_cache()
                    row = {**case_fields(case, dist, device), "status": f"error: {_short(exc)}"}
                rows.append(row)
                progress.advance(task)

    out.print(render_table(rows, extra_names, title=f"deepselect bench — {name}", unit=unit))
    line = summary(rows)
    if line:
        out.print(line)
    for line in notes(rows):
        out.print(f"[yellow]{line}[/]" if line.startswith("warning") else line)
    bad = [r for r in rows if str(r.get("deepselect_status", "")).startswith("inexact")]
    for r in bad[:10]:
        out.print(
            f"[red]inexact[/] {r['scenario']} b={r['batch']} N={r['n']} k={r['k']} "
            f"{r['dist']}: {r['deepselect_status']}"
        )
    if args.csv:
        out.print(f"CSV: {write_csv(rows, args.csv, extra_names, info)}")
    if args.plot:
        from .plotting import plot_results

        for path in plot_results(rows, args.plot, extra_names):
            out.print(f"plot: {path}")
    return 1 if bad else 0
