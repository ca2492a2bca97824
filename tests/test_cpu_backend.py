"""The Numba CPU backend against the exact oracle."""

from __future__ import annotations

import os
import select
import signal
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("numba")

from helpers import assert_same_topk, bits  # noqa: E402
from numba import njit  # noqa: E402

from deepselect import cpu_omp, distributions  # noqa: E402
from deepselect.api import make_options, topk_rows  # noqa: E402
from deepselect.cpu_backend import (  # noqa: E402
    CpuConfig,
    _bound,
    _order_params,
    _passes,
    run_cpu,
)
from deepselect.keys import to_keys  # noqa: E402
from deepselect.oracle import oracle_topk  # noqa: E402

DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.float64)

# Tiny blocks and buffers: many blocks, many compactions and chunk tests on small rows.
SMALL = CpuConfig(block=96, b2_min=16, warmup=64, min_segment=16)
# Groups of 5 (partial last groups in every block), widened to 10 and 20 early on.
SMALL5 = CpuConfig(block=96, b2_min=16, warmup=64, min_segment=16, group=5, wide=4, spread=1)

# dtype -> (unsigned numpy type, signed numpy type, signed torch view, bits of +inf)
_RAW = {
    torch.bfloat16: (np.uint16, np.int16, torch.int16, 0x7F80),
    torch.float16: (np.uint16, np.int16, torch.int16, 0x7C00),
    torch.float32: (np.uint32, np.int32, torch.int32, 0x7F800000),
    torch.float64: (np.uint64, np.int64, torch.int64, 0x7FF0000000000000),
}


def _run(x, k, segments=None, config=None, values=True, **kw):
    opt = make_options(x, k, **kw)
    rows = x.shape[0]
    out_i = torch.empty((rows, k), dtype=opt.index_dtype)
    out_v = torch.empty((rows, k), dtype=x.dtype) if values else None
    extra = {} if config is None else {"config": config}
    run_cpu(x, k, opt, out_v, out_i, segments=segments, **extra)
    return (out_v, out_i), opt


def _check(x, k, segments=None, config=None, **kw):
    got, opt = _run(x, k, segments=segments, config=config, **kw)
    want = oracle_topk(x, k, opt)
    assert_same_topk(got, want, opt.order, msg=f"{x.dtype} {list(x.shape)} k={k} {kw}")
    return got


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", distributions.KINDS)
def test_every_kind(kind, dtype):
    x = distributions.make(kind, 3, 3001, dtype, seed=7)
    for config in (None, SMALL, SMALL5):
        _check(x, 40, config=config, order="value")
        _check(x, 40, config=config, order="none", largest=False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [1, 7, 64])
def test_lengths(dtype, k):
    for n in sorted({0, 1, max(k - 1, 0), k, k + 1, 257, 1000, 4097}):
        x = distributions.make("normal", 2, n, dtype, seed=n)
        for config in (None, SMALL):
            _check(x, k, config=config, order="value")
            _check(x, k, config=config, order="index", largest=False)


@pytest.mark.parametrize("k", [1, 100, 513, 4095, 4096, 4097, 6000])
def test_k_sizes(k):
    x = distributions.make("distinct4096", 2, 20011, torch.float32, seed=k)
    _check(x, k, order="value")
    _check(x, k, config=SMALL, order="none")


def test_k_at_least_n_returns_all_then_fills():
    x = distributions.make("normal", 3, 50, torch.bfloat16, seed=1)
    for k in (50, 51, 4100):
        _check(x, k, order="value", fill_value=7.5, fill_index=-3)
        _check(x, k, order="none", largest=False)


@pytest.mark.parametrize("order", ["none", "value", "index"])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_windows_offsets_fills(order, largest, index_dtype):
    rows, n = 6, 5000
    x = distributions.make("distinct32", rows, n, torch.float16, seed=3)
    begin = torch.tensor([0, 10, 4990, 2500, 0, 77], dtype=torch.int32)
    end = torch.tensor([5000, 10, 5000, 2600, 33, 4999], dtype=torch.int64)
    offset = torch.tensor([0, 5, -7, 100, 1 << 20, 3], dtype=torch.int64)
    for config in (None, SMALL):
        _check(
            x,
            64,
            config=config,
            order=order,
            largest=largest,
            index_dtype=index_dtype,
            begin=begin,
            end=end,
            index_offset=offset,
            fill_value=-2.0,
            fill_index=-9,
        )
        _check(x, 64, config=config, order=order, index_offset=11, end=end)


def test_indices_only_and_int64():
    x = distributions.make("staircase", 4, 9000, torch.float32, seed=2)
    (v, i), opt = _run(x, 300, values=False, index_dtype=torch.int64, order="index")
    assert v is None
    assert_same_topk((None, i), oracle_topk(x, 300, opt), "index")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_non_contiguous_inputs(dtype):
    base = distributions.make("nan_hotspots", 6, 8002, dtype, seed=5)
    for x in (base[:, ::2], base[::2], base.t().contiguous().t(), base[1:2].expand(3, -1)):
        for config in (None, SMALL):
            _check(x, 50, config=config, order="value")
            _check(x, 50, config=config, order="none", segments=3)


def test_non_contiguous_outputs():
    x = distributions.make("normal", 4, 3000, torch.bfloat16, seed=9)
    opt = make_options(x, 20, order="value")
    out_v = torch.empty((20, 4), dtype=x.dtype).t()
    out_i = torch.empty((20, 4), dtype=torch.int32).t()
    run_cpu(x, 20, opt, out_v, out_i)
    assert_same_topk((out_v, out_i), oracle_topk(x, 20, opt), "value")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["normal", "distinct2", "ascending", "bits_negative"])
def test_segment_split_is_bit_identical(kind, dtype):
    x = distributions.make(kind, 2, 4099, dtype, seed=11)
    begin = torch.tensor([0, 1000])
    end = torch.tensor([4099, 1500])
    ref = _check(x, 70, segments=1, config=SMALL, order="value", begin=begin, end=end)
    for segments in (2, 3, 7, 64):
        got = _check(x, 70, segments=segments, config=SMALL, order="value", begin=begin, end=end)
        assert torch.equal(got[1], ref[1]), f"segments={segments} changed the result"
        assert torch.equal(bits(got[0]), bits(ref[0]))
        _check(x, 70, segments=segments, config=SMALL, order="none", begin=begin, end=end)


@pytest.mark.parametrize("dtype", DTYPES)
def test_openmp_region_and_thread_pool_agree(dtype, monkeypatch):
    """The kernels run as a region of torch's OpenMP runtime where there is one, else
    on a thread pool: the same results either way, split or not, with windows,
    offsets, fills and values (fill bits of every width, a 64-bit one past int64)."""
    x = distributions.make("distinct32", 5, 9001, dtype, seed=3)
    kw = dict(
        begin=torch.tensor([0, 10, 0, 4000, 0]),
        end=torch.tensor([9001, 9001, 50, 9000, 0]),
        index_offset=torch.tensor([0, 7, -3, 2**40, 1]),
        fill_value=float("-inf") if dtype != torch.float64 else -1.0e300,
        order="value",
        index_dtype=torch.int64,
    )
    for segments in (None, 1, 3):
        with_omp = _check(x, 90, segments=segments, config=SMALL, **kw)
        with monkeypatch.context() as m:
            m.setattr(cpu_omp, "runtime", lambda: None)
            pooled = _check(x, 90, segments=segments, config=SMALL, **kw)
        assert torch.equal(with_omp[1], pooled[1])
        assert torch.equal(bits(with_omp[0]), bits(pooled[0]))


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or "OpenMP" not in torch.__config__.parallel_info(),
    reason="torch's OpenMP runtime is looked up in /proc/self/maps (Linux)",
)
def test_openmp_runtime_is_found():
    """Else the kernels silently fall back to a thread pool, which shares the cores
    with torch's still-spinning OpenMP workers after every torch operation."""
    assert cpu_omp.runtime() is not None or os.environ.get("DEEPSELECT_OPENMP") == "0"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("largest", [True, False])
def test_a_sample_bound_above_the_kth_is_dropped(dtype, largest):
    """The threshold starts at a bound taken from the first candidates (the first
    visited block). Where that block holds the row's best values, the bound lies above
    the k-th best: fewer than k elements reach it and the row must be selected again
    without it (else the result would be short and filled)."""
    n, k, cfg = 20_000, 40, SMALL
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, n, generator=g, dtype=torch.float64)
    m = -(-n // cfg.block)
    for row in range(3):
        _, c = _order_params(cfg.seed, row, 0, m)
        start = c * cfg.block  # the first block visited: its first 64 elements the best
        x[row, start : start + 64] += 100.0 if largest else -100.0
    x = x.to(dtype)
    got = _check(x, k, segments=1, config=cfg, order="value", largest=largest)
    assert (got[1] >= 0).all()


def test_values_are_raw_bits():
    # NaN payloads of both signs and -0.0 must come back exactly as stored
    pattern = [0x7FC1, 0xFFC3, 0x8000, 0x0000, 0x3F80, 0x7F81]
    raw = torch.tensor([[p - (1 << 16) if p >= 1 << 15 else p for p in pattern]], dtype=torch.int16)
    x = raw.view(torch.bfloat16)
    for k in (1, 3, 6):
        (v, i), opt = _run(x, k, order="value")
        assert torch.equal(bits(v), bits(x)[0, i[0].long()][None])
        assert_same_topk((v, i), oracle_topk(x, k, opt), "value")


def test_public_entry_point_dispatches_here():
    x = distributions.make("shifted", 5, 7777, torch.bfloat16, seed=4)
    for order in ("none", "value", "index"):
        got = topk_rows(x, 33, order=order, largest=order != "index")
        opt = make_options(x, 33, order=order, largest=order != "index")
        assert_same_topk(got, oracle_topk(x, 33, opt), order)
    empty = torch.empty(0, 10)
    v, i = topk_rows(empty, 4)
    assert v.shape == (0, 4) and i.shape == (0, 4)


def _special_patterns(dtype):
    """Bit patterns (as unsigned ints) of every kind of value the prefilter separates:
    NaNs of both signs and payloads, +-inf, +-0, the smallest and largest subnormals,
    +-1 and the largest finite values."""
    _, _, _, inf = _RAW[dtype]
    bits = torch.finfo(dtype).bits
    sign = 1 << (bits - 1)
    one = int(torch.tensor(1.0, dtype=dtype).view(_RAW[dtype][2]).item()) & (2 * sign - 1)
    mant = (inf & -inf) - 1  # largest subnormal: every mantissa bit below the exponent
    base = [inf + 1, inf | (inf >> 1), sign - 1, inf, 0, 1, mant, one, inf - 1]
    return sorted({b for p in base for b in (p, p | sign)})


def _as_tensor(patterns, dtype):
    utype, _, itype, _ = _RAW[dtype]
    raw = np.array(patterns, dtype=utype).view(np.dtype(utype().dtype.name[1:]))
    return torch.from_numpy(raw.copy()).view(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("largest", [True, False])
def test_prefilter_never_drops_a_reaching_key(dtype, largest):
    """Every element whose key reaches the threshold's passes the raw-bit prefilter;
    the only extra elements it lets through are NaNs. 16-bit: all 65536 patterns
    against thresholds at every special value and random patterns."""
    utype, stype, _, inf = _RAW[dtype]
    bits = torch.finfo(dtype).bits
    sign = 1 << (bits - 1)
    g = np.random.default_rng(bits + largest)
    special = _special_patterns(dtype)
    hi = (1 << bits) - 1
    if bits == 16:
        xs = np.arange(1 << 16, dtype=np.uint64)
    else:
        xs = g.integers(0, hi, 60000, dtype=np.uint64, endpoint=True)
    xs = np.concatenate([np.array(special, dtype=np.uint64), xs]).astype(utype)
    ts = np.concatenate(
        [np.array(special, dtype=np.uint64), g.integers(0, hi, 300, dtype=np.uint64, endpoint=True)]
    ).astype(utype)
    xt, tt = _as_tensor(xs, dtype), _as_tensor(ts, dtype)
    xk = to_keys(xt, largest).numpy()
    tk = to_keys(tt, largest).numpy()
    nan = torch.isnan(xt).numpy()
    miss, extra, passed = _prefilter_errors(
        ts, xs, tk, xk, nan, utype, stype, largest, utype(sign), utype(sign - 1), utype(inf)
    )
    assert miss == 0, f"{miss} elements reaching the threshold were dropped"
    assert extra == 0, f"{extra} non-NaN elements below the threshold passed"
    assert 0 < passed < ts.size * xs.size  # the prefilter does filter


@njit(cache=False)
def _prefilter_errors(ts, xs, tkeys, xkeys, xnan, T, S, largest, sign, absmask, inf):
    miss = extra = passed = 0
    for i in range(ts.size):
        fm, fa, fb = _bound(ts[i], T, S, largest, sign, absmask, inf)
        for j in range(xs.size):
            ok = _passes(xs[j], T, S, fm, fa, fb)
            want = xkeys[j] >= tkeys[i]
            passed += ok
            miss += want and not ok
            extra += ok and not want and not xnan[j]
    return miss, extra, passed


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("largest", [True, False])
def test_thresholds_on_special_values(dtype, largest):
    """Rows drawn from a few special values, so that the running threshold sits on a
    NaN, +-inf, +-0, a subnormal or a negative value, with long runs of ties."""
    special = _special_patterns(dtype)
    g = torch.Generator().manual_seed(len(special))
    pools = [
        special,  # everything
        [p for p in special if p >> (torch.finfo(dtype).bits - 1)],  # sign bit set only
        [p for p in special if not p >> (torch.finfo(dtype).bits - 1)],  # sign bit clear
    ]
    for pool in pools:
        vals = _as_tensor(pool, dtype)
        x = vals[torch.randint(0, len(pool), (3, 2500), generator=g)]
        x[2, :2000] = _as_tensor([special[-1]], dtype)  # mostly one NaN (or the top)
        for k in (1, 30, 700):
            for config in (SMALL, SMALL5):
                _check(x, k, config=config, order="value", largest=largest)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_works_in_a_forked_child():
    """Neither torch's OpenMP team nor our thread pool survives fork: a child process
    (a data-loader worker, say) must not wait on threads it does not have."""
    x = distributions.make("normal", 8, 20_000, torch.float32, seed=5)
    want = _check(x, 50)  # the parent's team or pool exists now
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports through the pipe; pytest must not run on here
        ok = 0
        try:
            got, _ = _run(x, 50)
            ok = int(torch.equal(got[1], want[1]))
        finally:
            os.write(w, bytes([ok]))
            os._exit(0)
    os.close(w)
    ready, _, _ = select.select([r], [], [], 60)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert ready, "the forked child hung"
    assert os.read(r, 1) == b"\x01"


@pytest.mark.parametrize("path", ["region", "pool", "one thread"])
def test_each_way_of_running_the_tasks(monkeypatch, path):
    """The calling thread alone, torch's OpenMP region and the thread pool (where a
    region stalls) give the same exact result, windows and offsets included."""
    from deepselect import cpu_backend as cb

    if path == "pool":
        monkeypatch.setattr(cb, "_region_off_until", float("inf"))
    if path == "one thread":
        monkeypatch.setattr(cb, "SMALL_WORK", 1 << 40)
    cb._plan.cache_clear()
    x = torch.randn(6, 30_000).to(torch.bfloat16)  # over SMALL_WORK: threaded
    end = torch.tensor([30_000, 5, 0, 29_999, 100, 17_000])
    for _ in range(3):  # a shape's first threaded call runs on the pool, later ones not
        _check(x, 40, order="value", end=end, index_offset=torch.arange(6) * 7)
        _check(x, 40, segments=3, order="none")
    cb._plan.cache_clear()


def test_threads_calling_threaded_calls_at_once():
    """Two Python threads each starting parallel calls (regions or the pool) at once,
    each with its own descriptor and scratch."""
    from concurrent.futures import ThreadPoolExecutor

    xs = [torch.randn(4, 40_000 + 1000 * j) for j in range(4)]
    wants = [oracle_topk(x, 64, make_options(x, 64, order="index"))[1] for x in xs]

    def work(j):
        bad = 0
        for r in range(6):
            c = (j + r) % len(xs)
            bad += not torch.equal(topk_rows(xs[c], 64, order="index")[1], wants[c])
        return bad

    with ThreadPoolExecutor(2) as pool:
        assert sum(pool.map(work, range(4))) == 0
