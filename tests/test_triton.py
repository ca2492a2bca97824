"""The Triton kernels against the oracle, exactly.

Without a GPU the kernels run in Triton's interpreter on small shapes, with a small
block and buffer so that many blocks and compactions happen; with a GPU (marker
``gpu``) the same matrix runs at full size through the production launch."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import triton
import triton.language as tl
from helpers import assert_same_topk

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
from deepselect.ops.triton.launch import CROWDED_PER_SM, _next_pow2
from deepselect.options import Order
from deepselect.reference import block_at, block_stride, sample_rank
from deepselect.triton_backend import (
    CHUNK_EVERY,
    CROWDED_MAX_K,
    RING_MAX,
    RING_STAGES,
    SAMPLE_HELD,
    SHORT_SAMPLE_MAX_K,
    SHORT_SAMPLE_N,
    W32_FROM,
    W32_MID_BLOCKS,
    W32_MID_MAX_K16,
    W32_MID_MAX_K32,
    LaunchConfig,
    check_variant,
    kernel_constants,
    launch_config,
    occupancy_variant,
    raise_fits,
    ring_stages_max,
    run_triton,
    stream_config,
    stream_shape,
)
from deepselect.triton_short import short_path

DEV = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def small_config(k: int, every: int = 1) -> LaunchConfig:
    """A launch of blocks of 128 elements and a buffer of at least 512 slots, so that
    rows of a few thousand elements take many blocks and compactions."""
    B = 128
    cap = max(512, _next_pow2(k + every * B + max(B // 2, k)))
    return LaunchConfig(
        B=B, CAP=cap, B2=cap - k - every * B, KP=max(16, _next_pow2(k)), check_every=every
    )


def run_small(
    x,
    k,
    grid=None,
    seed=0,
    every=1,
    sample_z=None,
    pre=None,
    sample_tol=0,
    sample_keys=0,
    sample_radix=False,
    sample_bits=0,
    **kw,
):
    """``x``'s top-k by the streaming kernel at :func:`small_config`'s launch; ``pre``
    (the sample's bound from registers, or from a first compaction), ``sample_z`` (its
    margin), ``sample_tol``, ``sample_keys``, ``sample_radix`` and ``sample_bits`` as
    LaunchConfig's fields; the rest are TopkOptions."""
    opt = TopkOptions(**kw)
    rows = x.shape[0]
    ov = torch.empty((rows, k), dtype=x.dtype, device=x.device)
    oi = torch.empty((rows, k), dtype=opt.index_dtype, device=x.device)
    cfg = dataclasses.replace(
        small_config(k, every), sample_tol=sample_tol, sample_keys=sample_keys,
        sample_radix=sample_radix, sample_bits=sample_bits,
    )  # fmt: skip
    if sample_z is not None:
        cfg = dataclasses.replace(cfg, sample_z=sample_z)
    if pre is not None:
        cfg = dataclasses.replace(cfg, sample_pre=pre)
    run_triton(x, k, opt, ov, oi, config=cfg, grid=grid, seed=seed)
    return (ov, oi), opt


def check_small(x, k, **kw):
    got, opt = run_small(x, k, **kw)
    assert_same_topk(got, oracle_topk(x, k, opt), opt.order)


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


@pytest.mark.parametrize("kind", ["normal", "distinct2", "distinct32", "ascending", "nan_hotspots"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("every", [1, 3])
def test_chunk_search(kind, dtype, every):
    """The compaction's key (two passes for 16-bit keys, four for 32-bit ones) and the
    tied indices' bound by radix passes over the filled slots, checked every block or
    every third in a buffer grown for it (check_variant). Tie-heavy rows cut ties in
    compactions within the stream (a census of their range first) and in the last;
    windows, both directions, with and without the sample's bound from registers."""
    n, k = 2500, 40
    x = make(kind, 3, n, dtype, DEV, seed=23)
    begin, end = torch.tensor([0, 130, 900]), torch.tensor([n, n - 70, 1400])
    for sample_pre, largest, window in (
        (True, True, {}),
        (True, False, {"begin": begin, "end": end}),
        (False, True, {"begin": begin}),
    ):
        opt = TopkOptions(order=Order.VALUE, largest=largest, **window)
        cfg = check_variant(small_config(k), k, every) if every > 1 else small_config(k)
        cfg = dataclasses.replace(cfg, sample_pre=sample_pre)
        assert cfg.check_every == every
        ov = torch.empty((3, k), dtype=x.dtype, device=x.device)
        oi = torch.empty((3, k), dtype=opt.index_dtype, device=x.device)
        run_triton(x, k, opt, ov, oi, config=cfg, grid=2)
        assert_same_topk((ov, oi), oracle_topk(x, k, opt), opt.order, kind)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sample_held_past_the_buffer(dtype):
    """A buffer past SAMPLE_HELD slots (checks every 8 blocks) keeps the sample's bound
    from registers, its keys capped at SAMPLE_HELD and the row's sample blocks those
    they take; a buffer of 2^20 slots or more is refused (the compaction's passes
    count candidates in 20 bits)."""
    cfg = check_variant(launch_config(dtype, 512), 512, 8)
    assert cfg.CAP > SAMPLE_HELD and cfg.sample_pre
    for asm in (False, True):
        c = kernel_constants(
            dtype, cfg, largest=True, order=Order.NONE, has_window=0, off_tensor=False,
            write_values=True, asm=asm, vec=asm,
        )  # fmt: skip
        assert c["SAMPLE_PRE"] and c["SAMPLE_KEYS"] == SAMPLE_HELD
        assert c["SAMPLE_BLOCKS"] == -(-c["SAMPLE_KEYS"] // cfg.B)
    plain = launch_config(dtype, 512)
    c = kernel_constants(
        dtype, plain, largest=True, order=Order.NONE, has_window=0, off_tensor=False,
        write_values=True, asm=True, vec=True,
    )  # fmt: skip
    assert c["SAMPLE_BLOCKS"] == plain.CAP // plain.B
    with pytest.raises(ValueError, match="CAP < 2"):  # counts packed in 20 bits
        kernel_constants(
            dtype, check_variant(cfg, 512, 300), largest=True, order=Order.NONE,
            has_window=0, off_tensor=False, write_values=True, asm=False,
        )  # fmt: skip


@pytest.mark.parametrize("kind", ["normal", "ascending", "distinct2", "nan_hotspots", "staircase"])
@pytest.mark.parametrize("every", [2, 3])
def test_compaction_checked_every_few_blocks(kind, every):
    """The trigger's block-wide sum only every few blocks (and after the last): the
    regions hold that many blocks' worst case, the answer is the same."""
    x = make(kind, 2, 1500, torch.bfloat16, DEV, seed=17)
    check_small(x, 40, every=every)
    check_small(x, 40, every=every, largest=False, order=Order.VALUE)


@pytest.mark.parametrize("kind", ["normal", "ascending", "distinct2", "staircase"])
def test_compaction_checked_every_few_blocks_in_a_tight_buffer(kind):
    """A check every 3 blocks in a buffer sized for one: a slack B2 of less than a
    block, so that compactions come from the regions' limit as often as from the
    count. The same answer, both directions, with windows."""
    x = make(kind, 3, 3000, torch.float32, DEV, seed=29)
    k = 40
    base = small_config(k)
    cfg = dataclasses.replace(base, check_every=3, B2=base.CAP - k - 3 * base.B)
    assert 1 <= cfg.B2 < cfg.B and cfg.CAP // 8 > 3 * (cfg.B // 8)
    begin, end = torch.tensor([0, 10, 700]), torch.tensor([3000, 2990, 2100])
    for largest, window in ((True, {}), (False, {"begin": begin, "end": end})):
        opt = TopkOptions(order=Order.VALUE, largest=largest, **window)
        ov = torch.empty((3, k), dtype=x.dtype, device=x.device)
        oi = torch.empty((3, k), dtype=opt.index_dtype, device=x.device)
        run_triton(x, k, opt, ov, oi, config=cfg)
        assert_same_topk((ov, oi), oracle_topk(x, k, opt), opt.order, kind)


def test_a_buffer_too_small_for_its_checks_is_refused():
    """A region must hold check_every blocks' worst case, and B2 be at least 1:
    run_triton refuses a config that breaks either."""
    base = small_config(40)  # 512 slots, regions of 64, blocks of 128 (16 a region)
    x = make("normal", 1, 1000, torch.float32, DEV, seed=1)
    ov = torch.empty((1, 40), dtype=x.dtype, device=x.device)
    oi = torch.empty((1, 40), dtype=torch.int32, device=x.device)
    for bad in (dataclasses.replace(base, check_every=4), dataclasses.replace(base, B2=0)):
        with pytest.raises(ValueError, match="cannot hold"):
            run_triton(x, 40, TopkOptions(), ov, oi, config=bad)


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


_PRE = [False, True, "tol", "keys", "radix", "radix16"]


@pytest.mark.parametrize("kind", ["normal", "ascending", "descending", "distinct2", "nan_hotspots"])
@pytest.mark.parametrize("z,pre", [(z, pre) for z in (5.0, -1e9) for pre in _PRE])
def test_sample_bound(kind, z, pre):
    """The first compaction keeps the rank reference.sample_rank of the candidates seen
    (here 384 of 5000: rank 13 of k = 40). Exact where that bound holds (z = 5) and
    where it lies above the k-th and each row is selected again without it (z =
    -1e9: rank 1, the best element seen). ``pre``: the bound from the sample held in
    registers before the stream (LaunchConfig.sample_pre), not from a compaction;
    "tol": its search stopping within 1.5 times the rank (LaunchConfig.sample_tol =
    1); "keys": the bound from 128 sampled elements, runs of 32 over the whole window
    (LaunchConfig.sample_keys); "radix": the bound by a radix select
    (LaunchConfig.sample_radix), "radix16" the same stopped at the key's top 16 bits
    (sample_bits: a lower bound)."""
    x = make(kind, 3, 5000, torch.float32, DEV, seed=17)
    kw = dict(sample_z=z, pre=bool(pre), sample_tol=int(pre == "tol"))
    kw["sample_keys"] = 128 if pre == "keys" else 0
    kw["sample_radix"] = pre in ("radix", "radix16")
    kw["sample_bits"] = 16 if pre == "radix16" else 0
    check_small(x, 40, **kw)
    begin, end = torch.tensor([0, 100, 4000]), torch.tensor([5000, 4100, 4030])
    check_small(x, 40, largest=False, order=Order.VALUE, begin=begin, end=end, **kw)


@pytest.mark.parametrize("keys", [3000, -4])
def test_sample_keys_must_be_a_power_of_two(keys):
    """LaunchConfig.sample_keys sizes a register tensor: anything but 0 or a power of
    two is refused before a build."""
    cfg = dataclasses.replace(launch_config(torch.bfloat16, 512), sample_keys=keys)
    with pytest.raises(ValueError, match="power of two"):
        kernel_constants(
            torch.bfloat16, cfg, largest=True, order=Order.NONE, has_window=0,
            off_tensor=False, write_values=True, asm=False,
        )  # fmt: skip


@pytest.mark.parametrize("ring", [-1, 6, 40])
def test_ring_stages_are_bounded(ring):
    """LaunchConfig.ring declares ring x 8 KiB of static shared memory a program: more
    than RING_MAX stages (past the 48 KiB a launch takes without opting in) is refused
    before a build, with or without the warp-private loop; RING_MAX is accepted."""
    for w32 in (False, True):
        cfg = dataclasses.replace(launch_config(torch.bfloat16, 512), w32=w32)
        kw = dict(
            largest=True, order=Order.NONE, has_window=0, off_tensor=False, write_values=True,
            asm=True, vec=True,
        )  # fmt: skip
        with pytest.raises(ValueError, match="ring"):
            kernel_constants(torch.bfloat16, dataclasses.replace(cfg, ring=ring), **kw)
        ok = kernel_constants(torch.bfloat16, dataclasses.replace(cfg, ring=RING_MAX), **kw)
        assert ok["RING"] == (RING_MAX if w32 else 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_ring_leaves_room_for_the_sorted_output(dtype):
    """The kernel's own shared memory grows with k (the sorted output: 32 KiB at k =
    4096), and a launch past 48 KiB in all fails: launch_config streams through the
    ring up to k = 2048 only, and a ring that does not fit beside KP is refused."""
    kw = dict(
        largest=True, order=Order.VALUE, has_window=0, off_tensor=False, write_values=True,
        asm=True, vec=True,
    )  # fmt: skip
    for k in (1, 512, 1024, 2048, 2049, 4096, 5000):
        cfg = launch_config(dtype, k)
        assert cfg.ring == (RING_STAGES if k <= 2048 else 0), k
        w32 = dataclasses.replace(cfg, w32=True)
        assert kernel_constants(dtype, w32, **kw)["RING"] == cfg.ring
        with pytest.raises(ValueError, match="ring"):
            kernel_constants(
                dtype, dataclasses.replace(w32, ring=ring_stages_max(cfg.KP) + 1), **kw
            )
    assert ring_stages_max(4096) < RING_STAGES <= ring_stages_max(2048)


@pytest.mark.parametrize("dtype", DTYPES)
def test_raised_threshold_only_where_its_histogram_fits(dtype):
    """LaunchConfig.raise_every (a power of two up to 32) counts the hits in 1 KiB of static
    shared memory beside the ring: taken only in the ring's loop, with the sample's
    bound from registers, and where it fits beside the ring and the kernel's own
    shared memory (k up to 1024 with four stages); elsewhere the build is the same
    as without it, and the filter counts nothing."""
    kw = dict(
        largest=True, order=Order.VALUE, has_window=0, off_tensor=False, write_values=True,
        asm=True, vec=True,
    )  # fmt: skip
    for k in (1, 512, 1024, 2048, 4096):
        base = launch_config(dtype, k)
        cfg = dataclasses.replace(base, w32=True, raise_every=8, sample_pre=True)
        fits = bool(cfg.ring) and raise_fits(cfg.KP, cfg.ring)
        assert fits == (cfg.KP <= 1024), k
        got = kernel_constants(dtype, cfg, **kw)
        want = 8 if fits else 0
        assert got["RAISE"] == want, k
        assert ("red.shared.add" in got["FILTER"]) == (want > 0), k
        for off in (
            dataclasses.replace(cfg, ring=0),
            dataclasses.replace(cfg, w32=False),
            dataclasses.replace(cfg, sample_pre=False),
        ):
            assert kernel_constants(dtype, off, **kw)["RAISE"] == 0
    cfg = dataclasses.replace(launch_config(dtype, 512), w32=True)
    for bad in (-1, 3, 12, 64):
        with pytest.raises(ValueError, match="raise_every"):
            kernel_constants(dtype, dataclasses.replace(cfg, raise_every=bad), **kw)


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


def _gpu_windows(rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row window starts in [0, 100,000) and ends up to 12,000 past them (too
    short to be sampled), on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    begin = torch.randint(0, 100_000, (rows,), device="cuda", generator=g)
    return begin, begin + torch.randint(0, 12_000, (rows,), device="cuda", generator=g)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["normal", "ascending", "distinct2", "nan_hotspots", "staircase"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("ring", [0, 3, 4])
def test_gpu_warp_private_stream(kind, dtype, ring):
    """The streaming kernel with its loop state warp-private (``w32``: warps stream
    independently and meet only to compact), through compactions, ties, NaN, windows
    of 0 to ~70 blocks (fewer blocks than a ring's stages among them) and k = 512 /
    2048; the blocks held in registers (ring 0) or streamed through shared-memory
    stages (``ring``)."""
    rows, n = 24, 300_000
    x = make(kind, rows, n, dtype, "cuda", seed=31)
    begin, short = _gpu_windows(rows, 1)
    cases = (
        (512, {}),
        (2048, {"begin": begin}),
        (512, {"end": begin + 150_000}),
        (512, {"begin": begin, "end": short}),
    )
    for k, window in cases:
        cfg = dataclasses.replace(launch_config(dtype, k), w32=True, ring=ring)
        for order in (Order.NONE, Order.VALUE):
            opt = TopkOptions(order=order, **window)
            ov = torch.empty((rows, k), dtype=dtype, device="cuda")
            oi = torch.empty((rows, k), dtype=torch.int32, device="cuda")
            run_triton(x, k, opt, ov, oi, config=cfg)
            assert_same_topk((ov, oi), oracle_topk(x, k, opt), order)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "kind", ["normal", "ascending", "descending", "distinct2", "nan_hotspots", "staircase"]
)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("every", [1, 8])
def test_gpu_raised_threshold(kind, dtype, every):
    """The warps raising their thresholds from the hits' histogram between compactions
    (``raise_every``): rows long enough to be sampled, ties, NaN, both directions,
    windows (a sampled window, one too short to be sampled), k = 512 and 1024, every
    order; the result is the oracle's."""
    rows, n = 24, 400_000
    x = make(kind, rows, n, dtype, "cuda", seed=41)
    begin, short = _gpu_windows(rows, 2)
    cases = (
        (512, True, {}),
        (1024, False, {"begin": begin}),
        (512, False, {"end": begin + 250_000}),
        (1024, True, {"begin": begin, "end": short}),
    )
    for k, largest, window in cases:
        cfg = dataclasses.replace(launch_config(dtype, k), w32=True, raise_every=every)
        for order in (Order.NONE, Order.VALUE, Order.INDEX):
            opt = TopkOptions(order=order, largest=largest, **window)
            ov = torch.empty((rows, k), dtype=dtype, device="cuda")
            oi = torch.empty((rows, k), dtype=torch.int32, device="cuda")
            run_triton(x, k, opt, ov, oi, config=cfg)
            assert_same_topk((ov, oi), oracle_topk(x, k, opt), order, f"{kind} k={k} {window}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [1, CROWDED_MAX_K])
def test_crowded_stream_launches_take_the_occupancy_cap(dtype, k):
    """Rows that two programs per SM do not cover in one wave launch CROWDED_PER_SM
    per SM at the register cap that fits them, with the launch's own key search;
    fewer rows, and larger k, keep launch_config's. A crowded block-synchronous
    launch whose buffer holds two blocks without growing (32-bit keys) checks every
    second block and takes the sample's bound from its first compaction; rows long
    enough for the warp-private loop never do. The other crowded launches only
    where they need fewer waves of rows than two per SM (not at 512 rows, which
    both cover in two). Decided from the shape alone (stream_shape)."""
    base = launch_config(dtype, k)
    sm = 132
    # rows below the warp-private loop's (test_mid_rows_take_the_warp_loop), and at it
    short_n, long_n = W32_MID_BLOCKS * base.B - 1, W32_FROM * base.B
    for n in (short_n, long_n):
        for rows in (1, 2 * sm):
            assert stream_shape(dtype, k, rows, n, sm) == base
        for big in (CROWDED_MAX_K + 1, 2048):
            assert stream_shape(dtype, big, 4096, n, sm) == launch_config(
                dtype, big
            )
        for rows in (2 * sm + 1, 4096):
            cfg = stream_shape(dtype, k, rows, n, sm)
            assert cfg.programs_per_sm == CROWDED_PER_SM
            assert cfg.maxnreg is not None and cfg.maxnreg * 256 * CROWDED_PER_SM <= 65536
            assert cfg.CAP == base.CAP
            every = 2 if n == short_n and dtype == torch.float32 else 1
            assert cfg.check_every == every
            assert cfg.CAP // 8 > cfg.check_every * (cfg.B // 8)  # a region holds them
            assert cfg.sample_pre == (base.sample_pre and every == 1)
            same = dict(programs_per_sm=2, maxnreg=base.maxnreg, check_every=1, B2=base.B2)
            assert dataclasses.replace(cfg, sample_pre=base.sample_pre, **same) == base
        # 512 rows: two waves either way, so only the check-every-second-block launch
        # crowds them; 2 * 2 * sm + 1 rows: three waves at two per SM, two crowded
        every2 = n == short_n and dtype == torch.float32
        per_sm = stream_shape(dtype, k, 512, n, sm).programs_per_sm
        assert per_sm == (CROWDED_PER_SM if every2 else base.programs_per_sm)
        assert (
            stream_shape(dtype, k, 4 * sm + 1, n, sm).programs_per_sm
            == CROWDED_PER_SM
        )


def test_short_16bit_rows_take_half_a_spread_sample():
    """16-bit rows of up to SHORT_SAMPLE_N elements, k up to SHORT_SAMPLE_MAX_K, take
    the sample's bound from 4096 keys, at any row count; longer rows, larger k and
    32-bit keys the whole sample. From the shape alone."""
    sm = 132
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        assert launch_config(dtype, 512).sample_pre
        for k in (1, 512, 1024):
            for n in (20_000, SHORT_SAMPLE_N, SHORT_SAMPLE_N + 1, 1 << 20):
                for rows in (1, 256, 4096):
                    cfg = stream_config(dtype, k, rows, n, sm)
                    short = dtype != torch.float32 and n <= SHORT_SAMPLE_N
                    half = short and k <= SHORT_SAMPLE_MAX_K
                    assert cfg.sample_keys == (4096 if half else 0), (dtype, k, n, rows)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_mid_rows_take_the_warp_loop(dtype):
    """Rows of W32_MID_BLOCKS blocks up to W32_FROM take the warp-private loop with
    launch_config's searches: 32-bit rows, k up to W32_MID_MAX_K32, at two programs
    per SM in up to two waves or where no launch crowds, else at CROWDED_PER_SM per
    SM (the register-held search and the sample's bound from registers kept); 16-bit
    rows, k up to W32_MID_MAX_K16, unless their launch is crowded (three programs per
    SM, where a wave of rows is saved). Shorter rows and larger k keep the
    block-synchronous loop, longer rows stream_launch's w32 as before. From the
    shape alone (stream_shape)."""
    base, sm = launch_config(dtype, 512), 132
    lo, hi = W32_MID_BLOCKS * base.B, W32_FROM * base.B
    for n in (lo - 1, lo, 129_280, hi - 1, hi):
        for rows in (1, 6, 2 * sm, 2 * sm + 1, 4 * sm, 4 * sm + 1, 4096):
            for k in (1, 512, 1024, 2048, 4096):
                cfg = stream_shape(dtype, k, rows, n, sm)
                few = rows <= 4 * sm or k > CROWDED_MAX_K  # up to two waves, or never crowded
                if dtype == torch.float32:
                    want = lo <= n < hi and k <= W32_MID_MAX_K32
                else:  # crowded: a wave saved at three per SM (k <= CROWDED_MAX_K)
                    waves = (-(-rows // (2 * sm)), -(-rows // (CROWDED_PER_SM * sm)))
                    crowded = rows > 2 * sm and waves[1] < waves[0]
                    want = lo <= n < hi and k <= W32_MID_MAX_K16 and not crowded
                assert cfg.w32 == want, (n, rows, k)
                if want:  # the launch as launch_config's, in the warp-private loop
                    base_k = launch_config(dtype, k)
                    if not few:  # crowded: three per SM at the cap that fits them
                        assert cfg.programs_per_sm == CROWDED_PER_SM, (n, rows, k)
                        assert cfg.maxnreg * 256 * CROWDED_PER_SM <= 65536
                        assert cfg.sample_pre == base_k.sample_pre
                        base_k = occupancy_variant(base_k, CROWDED_PER_SM)
                    assert cfg == dataclasses.replace(base_k, w32=True)
                launched = stream_config(dtype, k, rows, n, sm)
                assert launched.w32 == (want or n >= hi), (n, rows, k)


def test_search_rules_by_shape():
    """stream_config's rules past stream_shape's: 16-bit rows of the block-synchronous
    loop check every CHUNK_EVERY blocks in a buffer grown for them; rows shorter than
    W32_FROM blocks take the sample's bound by a radix select (for 32-bit keys of the
    key's top 16 bits); the rest of the launch as stream_shape's."""
    sm = 132
    for dtype in (torch.bfloat16, torch.float32):
        B = launch_config(dtype, 512).B
        for n in (20_000, 1 << 16, 129_280, 1 << 18, W32_FROM * B):
            for rows, k in ((6, 512), (256, 512), (4096, 512), (768, 1024), (512, 2048)):
                cfg = stream_config(dtype, k, rows, n, sm)
                base = stream_shape(dtype, k, rows, n, sm)
                short = n < W32_FROM * base.B
                block = dtype == torch.bfloat16 and not base.w32 and short
                every = CHUNK_EVERY if block else base.check_every
                assert cfg.check_every == every, (dtype, n, rows, k)
                assert cfg.sample_radix == short
                assert cfg.w32 == (base.w32 or not short)  # long rows: independent warps
                # 32-bit keys: the bound from the key's top 16 bits
                assert cfg.sample_bits == (16 if short and dtype == torch.float32 else 0)
                if block:
                    assert cfg.CAP // 8 > every * (cfg.B // 8) and cfg.CAP > base.CAP
                    assert cfg.B2 == cfg.CAP - k - every * cfg.B
                same = dict(
                    sample_radix=False, sample_bits=0, check_every=base.check_every,
                    CAP=base.CAP, B2=base.B2, w32=base.w32,
                )  # fmt: skip
                assert dataclasses.replace(cfg, **same) == base


@pytest.mark.gpu
@pytest.mark.parametrize(
    "dtype,mid", [(torch.bfloat16, False), (torch.float32, False), (torch.float32, True)]
)
def test_gpu_crowded_rows_by_default(dtype, mid):
    """More rows than two programs per SM take the crowded launch by default (fp32:
    a compaction check every second block; fp32 rows of W32_MID_BLOCKS blocks or more
    in more than two waves: the warp-private loop) and stay exact on adversarial
    inputs, both directions, sorted and unsorted, with windows."""
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    rows, n, k = (4 * sm + 5, 70_000, 512) if mid else (2 * sm + 5, 20_000, 512)
    cfg = stream_config(dtype, k, rows, n, sm)
    assert (cfg.programs_per_sm, cfg.w32) == (CROWDED_PER_SM, mid)
    g = torch.Generator(device="cuda").manual_seed(6)
    begin = torch.randint(0, 5_000, (rows,), device="cuda", generator=g)
    for kind in ("normal", "ascending", "distinct2", "nan_hotspots", "staircase"):
        x = make(kind, rows, n, dtype, "cuda", seed=14)
        for largest, order, window in (
            (True, Order.VALUE, {}),
            (False, Order.NONE, {"begin": begin}),
            (True, Order.INDEX, {"begin": begin}),
        ):
            opt = TopkOptions(order=order, largest=largest, **window)
            assert short_path(x, k, opt, sm) is None  # the streaming kernel
            got = topk_rows(x, k, order=order.value, largest=largest, **window)
            assert_same_topk(got, oracle_topk(x, k, opt), order, kind)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "variant", [{}, {"programs_per_sm": CROWDED_PER_SM, "maxnreg": 80}], ids=["plain", "crowded"]
)
@pytest.mark.parametrize("w32", [False, True])
def test_gpu_launch_variants(variant, w32):
    """Both loops on rows that the dispatch would give the other one, at two
    programs per SM and at a crowded launch's register cap (spills). Windows put
    lanes across the window's edges and the threshold's index inside blocks."""
    rows, n, k = 24, 300_000, 512
    g = torch.Generator(device="cuda").manual_seed(4)
    begin = torch.randint(0, 100_000, (rows,), device="cuda", generator=g)
    for kind in ("normal", "ascending", "distinct2", "nan_hotspots", "signed_zeros"):
        for dtype in (torch.bfloat16, torch.float32):
            x = make(kind, rows, n, dtype, "cuda", seed=9)
            cfg = dataclasses.replace(launch_config(dtype, k), w32=w32, **variant)
            for largest in (True, False):
                opt = TopkOptions(order=Order.VALUE, largest=largest, begin=begin)
                ov = torch.empty((rows, k), dtype=dtype, device="cuda")
                oi = torch.empty((rows, k), dtype=torch.int32, device="cuda")
                run_triton(x, k, opt, ov, oi, config=cfg)
                assert_same_topk((ov, oi), oracle_topk(x, k, opt), opt.order, kind)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "loop,every", [("block", 1), ("block", 8), ("w32", 1)], ids=["block1", "block8", "w32"]
)
@pytest.mark.parametrize("n", [65_536, 300_000])
def test_gpu_chunk_search(loop, every, n):
    """The compaction's radix passes on the GPU (their histograms by shared-memory
    atomics), in both loops, the block-synchronous one also checked every 8 blocks in a buffer
    grown for it: tie-heavy and constant rows (ties cut within the stream and in the
    last compaction), NaNs, ascending rows, windows, both directions, k = 512 and
    2048; z = -1e9 puts the sample's bound above the k-th, so rows are selected
    again."""
    rows = 24
    g = torch.Generator(device="cuda").manual_seed(7)
    begin = torch.randint(0, n // 3, (rows,), device="cuda", generator=g)
    for kind in ("normal", "ascending", "distinct2", "distinct32", "all_equal", "nan_hotspots"):
        for dtype, k, z in ((torch.bfloat16, 512, 5.0), (torch.float32, 512, 5.0),
                            (torch.bfloat16, 2048, -1e9)):  # fmt: skip
            x = make(kind, rows, n, dtype, "cuda", seed=10)
            cfg = launch_config(dtype, k)
            cfg = check_variant(cfg, k, every) if every > 1 else cfg
            cfg = dataclasses.replace(cfg, w32=loop == "w32", sample_z=z)
            for largest, window in ((True, {}), (False, {"begin": begin})):
                opt = TopkOptions(order=Order.VALUE, largest=largest, **window)
                ov = torch.empty((rows, k), dtype=dtype, device="cuda")
                oi = torch.empty((rows, k), dtype=torch.int32, device="cuda")
                run_triton(x, k, opt, ov, oi, config=cfg)
                assert_same_topk((ov, oi), oracle_topk(x, k, opt), opt.order, f"{kind} {k}")


@pytest.mark.gpu
@pytest.mark.parametrize("w32", [False, True])
def test_gpu_sample_bound_from_registers(w32):
    """LaunchConfig.sample_pre on the GPU, in both loops: the sample's bound from its
    keys held in registers and the stream started there, reading the sample again,
    on tie-heavy, constant and NaN rows (a bound shared by more elements than the
    buffer holds), with windows; k = 2048 smallest; the bound by a radix select
    (sample_radix, for fp32 of the key's top 16 bits); z = -1e9 puts the bound above
    the k-th, so every row is selected again."""
    rows, n = 24, 300_000
    g = torch.Generator(device="cuda").manual_seed(5)
    begin = torch.randint(0, 100_000, (rows,), device="cuda", generator=g)
    cases = [(torch.bfloat16, 512, 5.0, {}), (torch.float32, 512, 5.0, {})]
    cases += [(torch.float32, 2048, 5.0, {}), (torch.bfloat16, 512, -1e9, {})]
    cases += [(torch.bfloat16, 1024, 5.0, {})]
    cases += [(torch.bfloat16, 512, 5.0, dict(sample_radix=True))]
    cases += [(torch.float32, 512, -1e9, dict(sample_radix=True, sample_bits=16))]
    for kind in ("normal", "ascending", "descending", "distinct2", "all_equal", "nan_hotspots"):
        for dtype, k, z, search in cases:
            x = make(kind, rows, n, dtype, "cuda", seed=9)
            cfg = dataclasses.replace(
                launch_config(dtype, k), w32=w32, sample_pre=True,
                sample_z=z, **search,
            )  # fmt: skip
            opt = TopkOptions(order=Order.VALUE, largest=k != 2048, begin=begin)
            ov = torch.empty((rows, k), dtype=dtype, device="cuda")
            oi = torch.empty((rows, k), dtype=torch.int32, device="cuda")
            run_triton(x, k, opt, ov, oi, config=cfg)
            assert_same_topk((ov, oi), oracle_topk(x, k, opt), opt.order, f"{kind} {k} {z}")


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
