"""The Triton kernels against the oracle, exactly, on every kind of input: the
distributions, dtypes, directions and orders, lengths around k and the range of k,
windows, offsets and fills, strided rows and outputs, loads at every alignment, and
values rebuilt from the selected keys; and the streaming kernel's device functions
(the sample's rank, the block order and stride, the sample's columns, the filter's
coarse compare) against their reference definitions.

Without a GPU the kernels run in Triton's interpreter on small shapes, with a small
block and buffer (:func:`helpers.small_config`) so that many blocks and compactions
happen; with a GPU (marker ``gpu``) the same matrix runs at full size through the
production launch. The launch each shape gets and its variants are tested in
``test_stream_launch.py``."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import triton
import triton.language as tl
from helpers import assert_same_topk, check_small, run_small, small_config

from deepselect import TopkOptions, oracle_topk, topk_rows
from deepselect.distributions import KINDS, make
from deepselect.keys import from_keys, to_keys
from deepselect.ops.triton.common import (
    STRIDE_GOOD,
    STRIDE_SPAN,
    _block_at,
    _block_stride,
    _coarse_value,
    _first_kk,
    _next_block,
)
from deepselect.ops.triton.compact import _sample_cols
from deepselect.options import Order
from deepselect.reference import block_at, block_stride, sample_rank
from deepselect.triton_backend import launch_config, run_triton

DEV = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_distributions(kind, dtype):
    x = make(kind, 2, 1500, dtype, DEV, seed=11)
    check_small(x, 40)
    check_small(x, 40, largest=False, order=Order.VALUE)


def _odd_nans(dtype):
    """Raw bits of two NaNs of ``dtype`` other than the canonical one: a positive NaN
    with the lowest payload bit, and a negative quiet NaN with another payload (as the
    signed int16 / int32 the raw view stores; -0x3D is bf16's 0xFFC3)."""
    nans = {torch.bfloat16: [0x7F81, -0x3D], torch.float16: [0x7C01, -0x1FB]}
    return nans.get(dtype, [0x7F800001, -0x3FFFFB])


@pytest.mark.parametrize("kind", ["signed_zeros", "nan_hotspots", "bits_negative"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("order", [Order.NONE, Order.VALUE, Order.INDEX])
def test_values_from_keys(kind, dtype, order):
    """The values written rebuilt from the selected keys, the selected zeros and NaNs
    read from the row (a key holds neither a zero's sign nor a NaN's payload): bitwise
    the oracle's values, in both directions, with a window and rows short of k (the
    fill value after the valid ones)."""
    x = make(kind, 3, 1500, dtype, DEV, seed=12)
    if kind == "nan_hotspots":  # NaNs of both signs and other payloads among the selected
        raw = x.view(torch.int16 if dtype != torch.float32 else torch.int32)
        nans = _odd_nans(dtype)
        raw[0, 5:500:7] = nans[0]
        raw[1, 11:800:13] = nans[1]
        assert x[:2].isnan().sum() > 60
    begin, end = torch.tensor([0, 100, 1480]), torch.tensor([1500, 1400, 1500])
    for largest in (True, False):
        kw = dict(largest=largest, order=order)
        check_small(x, 40, **kw)
        check_small(x, 40, begin=begin, end=end, fill_value=-7.0, **kw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", list(Order))
def test_orders_and_index_dtypes(dtype, order):
    x = make("distinct32", 3, 900, dtype, DEV, seed=2)
    check_small(x, 33, order=order)
    check_small(x, 33, order=order, index_dtype=torch.int64, largest=False)


@pytest.mark.parametrize("n", [0, 1, 39, 40, 41, 257, 1000])
def test_lengths_around_k(n):
    x = make("normal", 2, n, torch.float32, DEV, seed=n)
    check_small(x, 40, order=Order.VALUE)
    check_small(x, 40, order=Order.INDEX, fill_value=7.0, fill_index=-3)


@pytest.mark.parametrize("k", [1, 2, 127, 300])
def test_k_range(k):
    x = make("distinct4096", 2, 1200, torch.bfloat16, DEV, seed=k)
    check_small(x, k)


def test_windows_offsets_fill():
    x = make("normal", 5, 1000, torch.float32, DEV, seed=4)
    begin = torch.tensor([0, 3, 500, 999, 10], device=DEV)
    end = torch.tensor([1000, 70, 515, 999, 1000], device=DEV)
    off = torch.tensor([0, 10, -7, 5, 1 << 20], device=DEV)
    for order in Order:
        check_small(x, 40, begin=begin, end=end, index_offset=off, order=order, fill_index=-2)
    check_small(x, 40, begin=begin.int(), end=end.int(), index_offset=9)
    check_small(x, 40, begin=begin, order=Order.VALUE)  # an absent bound is loaded from
    check_small(x, 40, end=end.int(), order=Order.INDEX)  # nowhere: 0 and N


def test_fill_value_keeps_its_bits_from_call_to_call():
    """A fill of -0.0 after one of +0.0 (equal as floats, so equal as cache keys) keeps
    its sign bit, and back; rows shorter than k show the fill."""
    x = make("normal", 2, 30, torch.float32, DEV, seed=5)
    for fill in (0.0, -0.0, 0.0):
        (ov, _), _ = run_small(x, 40, fill_value=fill, order=Order.VALUE)
        want = torch.tensor(fill).view(torch.int32)
        assert bool((ov[:, 30:].view(torch.int32) == want).all()), fill


def test_out_of_range_windows_are_clamped():
    x = make("normal", 2, 300, torch.float32, DEV, seed=6)
    begin = torch.tensor([-5, 250], device=DEV)
    end = torch.tensor([10**6, 100], device=DEV)  # clamped to [0, 300] and [250, 250]
    check_small(x, 20, begin=begin, end=end)


def test_strided_rows():
    base = make("normal", 4, 2000, torch.bfloat16, DEV, seed=8)
    check_small(base[:, 7:1507], 25)  # row stride 2000, odd start offset
    check_small(base[::2], 25, order=Order.VALUE)


def test_non_contiguous_output_buffers():
    x = make("normal", 4, 600, torch.float32, DEV, seed=3)
    ov = torch.empty((20, 4), device=DEV).t()  # column stride 4
    oi = torch.empty((20, 4), dtype=torch.int64, device=DEV).t()
    opt = TopkOptions(order=Order.VALUE, index_dtype=torch.int64)
    run_triton(x, 20, opt, ov, oi, config=small_config(20))
    assert_same_topk((ov, oi), oracle_topk(x, 20, opt), Order.VALUE)


def test_grid_and_seed_do_not_change_the_answer():
    x = make("distinct2", 5, 700, torch.float16, DEV, seed=9)
    (v1, i1), _ = run_small(x, 30, grid=1, seed=0, order=Order.VALUE)
    (v2, i2), _ = run_small(x, 30, grid=5, seed=12345, order=Order.VALUE)
    assert torch.equal(i1, i2) and torch.equal(v1.view(torch.int16), v2.view(torch.int16))


def test_public_api_backend_triton():
    x = make("normal", 3, 500, torch.float32, DEV, seed=1)
    v, i = topk_rows(x, 10, backend="triton", order="value", index_dtype=torch.int64)
    assert_same_topk(
        (v, i), oracle_topk(x, 10, TopkOptions(order=Order.VALUE, index_dtype=torch.int64)), "value"
    )
    v, i = topk_rows(x, 10, backend="triton", return_values=False)
    assert v is None
    assert_same_topk((None, i), oracle_topk(x, 10, TopkOptions()))


@triton.jit
def _first_kk_kernel(seen_ptr, n_ptr, out_ptr, cnt, k, ti, Z: tl.constexpr):
    for i in range(0, cnt):
        tl.store(out_ptr + i, _first_kk(tl.load(seen_ptr + i), k, tl.load(n_ptr + i), ti, Z))


def test_first_kk_matches_the_reference():
    """The stream kernel's sample rank is the reference's definition (k where none,
    and once the row's threshold is set)."""
    pairs = [(s, n) for s in (1, 384, 4096, 8192, 6144) for n in (0, 5000, 129_280, 1 << 20)]
    seen = torch.tensor([s for s, _ in pairs], dtype=torch.int32, device=DEV)
    n = torch.tensor([n for _, n in pairs], dtype=torch.int32, device=DEV)
    for k, z in ((40, 5.0), (512, 5.0), (2048, 5.0), (512, -1e9)):
        out = torch.empty(len(pairs), dtype=torch.int32, device=DEV)
        _first_kk_kernel[(1,)](seen, n, out, len(pairs), k, 0x7FFFFFFF, z)
        want = [(sample_rank(a, k, b, z) or k) if b > 0 else k for a, b in pairs]
        assert out.tolist() == want
        _first_kk_kernel[(1,)](seen, n, out, len(pairs), k, 1234, z)  # threshold set
        assert out.tolist() == [k] * len(pairs)


@triton.jit
def _order_kernel(out_ptr, m, a, c, p):
    mm = tl.maximum(m - 2, 1)
    j0 = _block_at(m * 0, m, a, c, p)
    j1 = _block_at(m * 0 + 1, m, a, c, p)
    j2 = _block_at(m * 0 + 2, m, a, c, p)
    tl.store(out_ptr, j0)
    tl.store(out_ptr + 1, j1)
    tl.store(out_ptr + 2, j2)
    for q in range(3, m):  # block q from blocks q - 1 and q - 3, as the stream does
        jn = _next_block(j2, j0, q, a, mm, m, p)
        j0 = j1
        j1 = j2
        j2 = jn
        tl.store(out_ptr + q, jn)


@triton.jit
def _sample_cols_kernel(out_ptr, first, m, a, c, p, B: tl.constexpr, NS: tl.constexpr,
                        CHUNK: tl.constexpr, lo=0, hi=0, ENDS: tl.constexpr = False):  # fmt: skip
    e = tl.arange(0, NS)
    tl.store(out_ptr + e, _sample_cols(e, first, m, a, c, p, B, NS, CHUNK, lo, hi, ENDS))


@pytest.mark.parametrize("B,NS,CHUNK", [(128, 512, 32), (128, 128, 64), (4096, 4096, 64)])
def test_sample_columns(B, NS, CHUNK):
    """The sample's columns (_sample_cols): CHUNK = 0, the first NS elements of the
    order's first p middle blocks (reference.block_at); else runs of CHUNK spread
    over every middle block: distinct, in the middle blocks, each run consecutive,
    and stratified: above any column, the sample's share and the middle blocks'
    share differ by less than one run's spacing. So an ascending row's sample ranks
    its elements as the row does (a block sample of it can hold only its top). ENDS:
    the same over the CHUNK-aligned slots of the whole window, ends included."""
    p = max(1, NS // B)
    for m in (p + 2, p + 3, 7 * p + 5, 100):
        mid = m - 2
        a = block_stride(mid)
        for first, c in ((0, 0), (3, mid // 2), (17, mid - 1)):
            out = torch.empty(NS, dtype=torch.int32, device=DEV)
            _sample_cols_kernel[(1,)](out, first, m, a, c, p, B, NS, 0)
            want = [(block_at(e // B, m, a, c, p) + first) * B + e % B for e in range(NS)]
            assert out.tolist() == want
            _sample_cols_kernel[(1,)](out, first, m, a, c, p, B, NS, CHUNK)
            cols = out.tolist()
            lo, hi = (first + 1) * B, (first + m - 1) * B
            assert len(set(cols)) == NS and lo <= min(cols) and max(cols) < hi
            runs = [cols[i : i + CHUNK] for i in range(0, NS, CHUNK)]
            assert all(r == list(range(r[0], r[0] + CHUNK)) for r in runs)
            spacing = mid * (B // CHUNK) / (NS // CHUNK) * CHUNK  # columns between runs
            for t in range(lo, hi, max(1, (hi - lo) // 997)):
                share = sum(col >= t for col in cols) / NS
                assert abs(share - (hi - t) / (hi - lo)) * (hi - lo) < 2 * spacing, (m, t)
            # ENDS: over the whole window [wlo, whi), its partial first and last blocks too
            for wlo, whi in ((first * B, (first + m) * B), ((first + 1) * B - 1, lo + mid * B + 3),
                             (first * B + 5, (first + m) * B - 7)):  # fmt: skip
                _sample_cols_kernel[(1,)](out, first, m, a, c, p, B, NS, CHUNK, wlo, whi, True)
                cols = out.tolist()
                runs = [cols[i : i + CHUNK] for i in range(0, NS, CHUNK)]
                assert len(set(cols)) == NS and wlo <= min(cols) and max(cols) < whi
                assert all(r == list(range(r[0], r[0] + CHUNK)) for r in runs)
                assert all(r[0] % CHUNK == 0 for r in runs)  # aligned runs: whole lines
                alo, ahi = -(-wlo // CHUNK) * CHUNK, whi // CHUNK * CHUNK
                spacing = (ahi - alo) / (NS // CHUNK)
                for t in range(alo, ahi, max(1, (ahi - alo) // 997)):
                    share = sum(col >= t for col in cols) / NS
                    assert abs(share - (ahi - t) / (ahi - alo)) * (ahi - alo) < 2 * spacing
                if wlo == first * B and whi == (first + m) * B and spacing / 2 + CHUNK <= B:
                    assert min(cols) < lo and max(cols) >= hi  # runs in both end blocks


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 6, 9, 40, 64])
def test_block_order_matches_the_reference(m):
    """The stream kernel's block order (the first three blocks directly, then each from
    the one before, and the one after the ends from the block before them) is
    reference.block_at, with the ends after the sample's blocks."""
    mid = max(m - 2, 1)
    a = block_stride(mid)
    for s in (0, 1, 2, 4, 12):
        p = max(min(s, m - 2), 0)
        for c in {0, mid // 2, mid - 1}:
            out = torch.full((max(m, 3),), -1, dtype=torch.int32, device=DEV)
            _order_kernel[(1,)](out, m, a, c, p)
            assert out[:m].tolist() == [block_at(i, m, a, c, s) for i in range(m)], (s, c)


@triton.jit
def _stride_kernel(m_ptr, out_ptr, n):
    for i in range(0, n):
        m = tl.load(m_ptr + i)
        tl.store(out_ptr + i, _block_stride(m, STRIDE_SPAN, STRIDE_GOOD))


def test_block_stride_matches_the_reference():
    """The stream kernel's block-order multiplier is the reference's definition."""
    ms = [*range(0, 260), 511, 512, 780, 1986, 4095, 4096, 8191, 8192, 65535]
    m = torch.tensor(ms, dtype=torch.int32, device=DEV)
    out = torch.empty_like(m)
    _stride_kernel[(1,)](m, out, len(ms))
    assert out.tolist() == [block_stride(v) for v in ms]


@triton.jit
def _coarse_kernel(tk_ptr, out_ptr, n, PAST: tl.constexpr, KEY_MASK: tl.constexpr,
                   SIGN: tl.constexpr, LARGEST: tl.constexpr):  # fmt: skip
    i = tl.arange(0, 1024)
    for s in range(0, n, 1024):
        tk = tl.load(tk_ptr + s + i, mask=s + i < n).to(tl.uint32)
        raw = _coarse_value(tk, (i >= 0) & PAST, KEY_MASK, SIGN, LARGEST)
        tl.store(out_ptr + s + i, raw.to(tl.int64), mask=s + i < n)


def _coarse_values(dtype, largest, past):
    """Threshold keys (every 16-bit key; a spread of 32-bit ones), their coarse
    compare values (:func:`ops.triton.common._coarse_value`, run by the kernel above)
    and the keys of the worst and best non-NaN values."""
    bits = torch.finfo(dtype).bits
    mask = (1 << bits) - 1
    if bits == 16:
        tks = torch.arange(0, 1 << 16, dtype=torch.int64)
    else:  # every 16-bit prefix with low bits 0, 1 and all ones
        hi = torch.arange(0, 1 << 16, dtype=torch.int64) << 16
        tks = torch.cat([hi, hi + 1, hi + 0xFFFF])
    out = torch.empty_like(tks, device=DEV)
    tk32 = torch.where(tks >= 2**31, tks - 2**32, tks).to(torch.int32)
    _coarse_kernel[(1,)](tk32.to(DEV), out, len(tks), past, mask, 1 << (bits - 1), largest)
    raw = out.cpu() & mask
    itype = {16: torch.int16, 32: torch.int32}[bits]
    coarse = torch.where(raw > mask >> 1, raw - (1 << bits), raw).to(itype).view(dtype)
    inf = torch.tensor([float("-inf"), float("inf")], dtype=dtype)
    worst, best = to_keys(inf if largest else inf.flip(0), largest).tolist()
    return tks, coarse, worst, best


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("past", [False, True])
def test_coarse_compare_value_lets_every_hit_through(dtype, largest, past):
    """The PTX filter's first test compares values with the coarse value of the
    threshold key (>= when largest, <= when smallest; NaN is unordered and passes):
    every element whose key is above the threshold key — or equal to it, unless
    ``past`` — must pass. And ``past`` the threshold's index a tie at the threshold
    must fail it, or knowing the index gains nothing."""
    tks, coarse, worst, best = _coarse_values(dtype, largest, past)

    def passes(v):  # the packed compare, elementwise
        return torch.isnan(coarse) | (v >= coarse if largest else v <= coarse)

    # the weakest element that must pass: the value of the least key at or above the
    # bound (keys between -inf's and +inf's are all values but -0.0's, which is +0.0's
    # neighbour; above them only NaNs)
    bound = tks + 1 if past else tks
    least = bound.clamp(worst, best)
    least += to_keys(from_keys(least, dtype, largest), largest) != least
    ok = passes(from_keys(least, dtype, largest)) | (bound > best)
    assert bool(ok.all()), tks[~ok][:8].tolist()
    if past:  # a value whose key is the threshold key (-0.0 has +0.0's key) fails
        tie = from_keys(tks, dtype, largest)
        real = (tks >= worst) & (tks < best) & (to_keys(tie, largest) == tks)
        assert bool((~passes(tie) | torch.isnan(coarse))[real].all())
        assert bool((~torch.isnan(coarse))[real].all())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("past", [False, True])
def test_coarse_compare_is_exact_where_its_value_is_not_nan(dtype, largest, past):
    """The filter's fast path (:func:`filter_asm`) takes a lane's hits straight
    from the compare with the coarse value where that value is not a NaN: then the
    compare (>= unordered when largest, <= ordered when smallest) must pass exactly
    the values whose key is at least the bound (the threshold key, or the next one
    ``past`` the threshold's index). Both sides are monotone in the value, so the
    least value at or above the bound passing, the greatest below it failing and
    the NaNs' verdict make the whole set. A threshold key is a candidate's key (or
    0, before the first compaction), never -0.0's empty slot."""
    tks, coarse, worst, best = _coarse_values(dtype, largest, past)
    held = (to_keys(from_keys(tks, dtype, largest), largest) == tks) | (tks == 0)
    real = ~torch.isnan(coarse) & held
    assert int(real.sum()) > len(tks) // 2  # the fast path is the usual one

    def exact(v):
        return (torch.isnan(v) | (v >= coarse)) if largest else (v <= coarse)

    bound = tks + 1 if past else tks
    assert bool((bound[real] <= best).all())  # some value is a hit
    least = bound.clamp(worst, best)
    least += to_keys(from_keys(least, dtype, largest), largest) != least  # -0.0's slot
    assert bool(exact(from_keys(least, dtype, largest))[real].all())
    below = (bound - 1).clamp(max=best)
    below -= (to_keys(from_keys(below.clamp(min=worst), dtype, largest), largest) != below).long()
    has_below = real & (below >= worst)
    assert int(has_below.sum()) > 0
    bad = exact(from_keys(below.clamp(min=worst), dtype, largest)) & has_below
    assert not bool(bad.any()), tks[bad][:8].tolist()
    # a NaN's key is the largest (largest) or 0 (smallest): a hit exactly when largest
    nan = torch.full_like(coarse, float("nan"))
    assert bool((exact(nan) == largest)[real].all())


# ------------------------------------------------------------------ full size on a GPU
GPU_KS = [1, 512, 1024, 1231, 2048, 4096, 5000]


@pytest.mark.gpu
@pytest.mark.parametrize("k", GPU_KS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_k_values(k, dtype):
    x = make("normal", 8, 300_000, dtype, "cuda", seed=k)
    for order in Order:
        opt = TopkOptions(order=order)
        got = topk_rows(x, k, order=order)
        assert_same_topk(got, oracle_topk(x, k, opt), order, f"k={k}")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_distributions(kind, dtype):
    x = make(kind, 6, 1 << 18, dtype, "cuda", seed=3)
    for largest in (True, False):
        opt = TopkOptions(largest=largest, order=Order.VALUE)
        got = topk_rows(x, 512, largest=largest, order="value")
        assert_same_topk(got, oracle_topk(x, 512, opt), "value", kind)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [0, 1, 511, 512, 513, 4095, 4097, 100_003, (1 << 23) - 1])
def test_gpu_lengths(n):
    rows = 2 if n > 10**6 else 5
    x = make("normal", rows, n, torch.bfloat16, "cuda", seed=n)
    got = topk_rows(x, 512, order="index", index_dtype=torch.int64)
    assert_same_topk(
        got, oracle_topk(x, 512, TopkOptions(order=Order.INDEX, index_dtype=torch.int64)), "index"
    )


@pytest.mark.gpu
@pytest.mark.parametrize("rows,n", [(4096, 16384), (1024, 129_280), (256, 1 << 20)])
def test_gpu_batches(rows, n):
    x = make(
        "normal", rows, n, torch.bfloat16 if n != 129_280 else torch.float32, "cuda", seed=rows
    )
    got = topk_rows(x, 512)
    assert_same_topk(got, oracle_topk(x, 512, TopkOptions()))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("shift", [0, 1, 2])
def test_gpu_stream_loads_at_every_alignment_and_window(dtype, shift):
    """The streaming kernel's load paths at full size: 16-byte loads (rows on 16-byte
    boundaries), 4-byte loads (4-byte boundaries) and the portable filter (bf16 rows
    on 2-byte boundaries), each with no window, both bounds, begin only and end only
    (partial blocks at the window edges, an odd row length)."""
    rows, n, k = 40, 70_001, 512
    base = make("distinct32", rows, 70_024, dtype, "cuda", seed=shift)  # 16-byte rows
    x = base[:, shift : shift + n]
    g = torch.Generator(device="cuda").manual_seed(shift)
    begin = torch.randint(0, 30_000, (rows,), device="cuda", generator=g)
    end = begin + torch.randint(0, 40_000, (rows,), device="cuda", generator=g)
    cfg = launch_config(dtype, k)  # the streaming kernel, whatever the row count
    for window in ({}, {"begin": begin, "end": end}, {"begin": begin}, {"end": end.int()}):
        opt = TopkOptions(order=Order.VALUE, **window)
        ov = torch.empty((rows, k), dtype=dtype, device="cuda")
        oi = torch.empty((rows, k), dtype=torch.int32, device="cuda")
        run_triton(x, k, opt, ov, oi, config=cfg)
        assert_same_topk((ov, oi), oracle_topk(x, k, opt), opt.order)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("w32", [False, True])
def test_gpu_stream_kernel_every_dtype_and_direction(dtype, largest, w32):
    """The streaming kernel itself (its PTX filter: packed max or min of the words,
    then the exact test) for bf16, fp16 and fp32, largest and smallest, in both loops:
    few-row calls of topk_rows take the short/split path, so this forces the kernel.
    NaN hot spots and two distinct values put NaN and ties at the threshold."""
    rows, n, k = 12, 300_000, 512
    for kind in ("normal", "nan_hotspots", "distinct2"):
        x = make(kind, rows, n, dtype, "cuda", seed=5)
        cfg = dataclasses.replace(launch_config(dtype, k), w32=w32)
        opt = TopkOptions(largest=largest, order=Order.VALUE)
        ov = torch.empty((rows, k), dtype=dtype, device="cuda")
        oi = torch.empty((rows, k), dtype=torch.int32, device="cuda")
        run_triton(x, k, opt, ov, oi, config=cfg)
        assert_same_topk((ov, oi), oracle_topk(x, k, opt), opt.order, kind)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_gpu_values_from_keys(dtype):
    """The default launch's values rebuilt from the keys on the GPU, full-size rows:
    NaNs of both signs and other payloads and zeros of both signs among the selected
    come back bit for bit (read from the row), in both directions, unsorted and by
    value, in the warp-private and the block-synchronous loop (rows of 1M and of 64K)."""
    itype = torch.int32 if dtype == torch.float32 else torch.int16
    nan = _odd_nans(dtype)
    for rows, n in ((24, 1 << 20), (64, 1 << 16)):
        x = make("normal", rows, n, dtype, "cuda", seed=3)
        raw = x.view(itype)
        raw[0::3, 1000:60000:97] = nan[0]  # ~600 NaNs of one payload, ~600 of another
        raw[1::3, 2000:64000:101] = nan[1]
        x[2::3] = x[2::3].abs()  # +0.0 and -0.0 the k smallest of nonnegative rows
        raw[2::3, 500:64000:7] = 0
        raw[2::3, 503:64000:7] = -(1 << (torch.finfo(dtype).bits - 1))
        for largest in (True, False):
            for order in ("none", "value"):
                opt = TopkOptions(largest=largest, order=order)
                got = topk_rows(x, 512, largest=largest, order=order)
                assert_same_topk(got, oracle_topk(x, 512, opt), opt.order, f"{n} {order}")


@pytest.mark.gpu
def test_gpu_windows_and_strides():
    base = make("distinct32", 64, 200_001, torch.bfloat16, "cuda", seed=1)
    x = base[:, 1:150_000]  # odd start: the portable path
    check = lambda got, opt: assert_same_topk(got, oracle_topk(x, 1024, opt), opt.order)
    g = torch.Generator(device="cuda").manual_seed(0)
    begin = torch.randint(0, 70_000, (64,), device="cuda", generator=g)
    end = begin + torch.randint(0, 80_000, (64,), device="cuda", generator=g)
    opt = TopkOptions(begin=begin, end=end, index_offset=begin, order=Order.VALUE)
    check(topk_rows(x, 1024, begin=begin, end=end, index_offset=begin, order="value"), opt)
    y = base[:, :150_000]
    opt = TopkOptions(begin=begin, end=end)
    assert_same_topk(topk_rows(y, 1024, begin=begin, end=end), oracle_topk(y, 1024, opt))
