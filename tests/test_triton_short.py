"""The register-resident short-row kernel and its split/merge path, exactly.

Without a GPU the kernel runs in Triton's interpreter with a small register slice
(``ShortConfig(nmax=...)``) so that rows of a few hundred elements already take the
split path with several segments and merge levels; with a GPU (marker ``gpu``) the
production plan runs at full size."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch
import triton
import triton.language as tl
from helpers import assert_same_topk, bits, warm_then_capture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepselect import TopkOptions, oracle_topk
from deepselect import triton_kernels as K
from deepselect.distributions import KINDS, make
from deepselect.keys import to_keys
from deepselect.options import Order
from deepselect.triton_backend import _RAW
from deepselect.triton_short import (
    CROWDED,
    MAX_IN_LAUNCH,
    ShortConfig,
    _launch_kwargs,
    _warps,
    describe,
    passes_constants,
    prefilter_code,
    prefilters,
    run_short,
    short_path,
)

DEV = "cuda" if torch.cuda.is_available() else "cpu"
SM = 4  # a pretend SM count: the split aims for 2 programs per SM
# the small slices' configs split rows while fewer than SM, whatever their bytes
FEW = dict(split_rows=1.0, split_rows_mid=1.0, split_rows_long=1.0)
SHORT = ShortConfig(nmax=512, min_seg=64, **FEW)
SPLIT = ShortConfig(nmax=128, seg_max=128, min_seg=64, **FEW)
DEEP = ShortConfig(nmax=64, seg_max=64, min_seg=32, **FEW)  # several merge levels
PASSES = dataclasses.replace(SPLIT, radix_passes=True)  # radix passes over the segments
TILED = dataclasses.replace(PASSES, pass_max_tiles=8, grid_per_sm=0.5)  # several a program
NOT_LEAN = dataclasses.replace(SPLIT, split_lean=False)  # the split's prefilter, 6-bit digits


def run(x, k, cfg=SHORT, sm=SM, values=True, want_kind=None, **kw):
    opt = TopkOptions(**kw)
    rows = x.shape[0]
    plan = short_path(x, k, opt, sm, cfg)
    assert plan is not None
    if want_kind is not None:
        assert plan.kind == want_kind, describe(plan)
    ov = torch.full((rows, k), 123.0, dtype=x.dtype, device=x.device) if values else None
    oi = torch.full((rows, k), -77, dtype=opt.index_dtype, device=x.device)
    run_short(x, k, opt, ov, oi, plan)
    return (ov, oi), opt


def check(x, k, **kw):
    got, opt = run(x, k, **kw)
    want = oracle_topk(x, k, opt)
    if got[0] is None:
        want = (None, want[1])
    assert_same_topk(got, want, opt.order)
    return got


def launch_flags(order):
    """The call flags ``_launch_kwargs`` takes (as ``run_short`` passes them): largest,
    no window, no offsets tensor, values written."""
    kw = dict(largest=True, order=order, has_window=0, off_tensor=False, write_values=True)
    return tuple(kw.items())


def same_bits(a, b):
    """Bit-for-bit equal outputs, position by position."""
    assert torch.equal(a[1].cpu(), b[1].cpu())
    if a[0] is not None:
        assert torch.equal(bits(a[0].cpu()), bits(b[0].cpu()))


# ------------------------------------------------------------------------- the plan
def test_plan_short_rows():
    opt = TopkOptions()
    for n in (0, 1, 300, 8192):
        p = short_path(torch.empty(4096, n), 512, opt, 132)
        assert p.kind == "short" and len(p.levels) == 1
        assert p.levels[0].nmax >= n and not p.levels[0].dst_cand
    assert describe(short_path(torch.empty(1, 3000), 64, opt, 132)) == "short nmax=4096"


def test_plan_split_and_stream():
    opt = TopkOptions()
    p = short_path(torch.empty(1, 2**20), 2048, opt, 132)
    assert p.kind == "split"
    first = p.levels[0]
    assert first.nseg * first.L >= 2**20 and first.L >= 4 * 2048
    assert p.levels[-1].nseg == 1 and not p.levels[-1].dst_cand
    assert all(lv.src_cand and lv.L <= 8192 for lv in p.levels[1:])
    assert "split" in describe(p)
    # few rows fill the GPU with segments
    p6 = short_path(torch.empty(6, 2**20), 512, opt, 132)
    assert 6 * p6.levels[0].nseg >= 2 * 132
    # the longer the row, the fewer rows split (their work grows with rows x N, a wave
    # of streaming programs takes one row's time): rows of 1M (2 MB) and fp32 sampler
    # rows below 0.11 x SMs, rows of up to 128 KB below 0.25 x, up to 32 KB 0.5 x
    for rows_split, n, dtype in (
        (14, 2**20, torch.bfloat16),
        (14, 129_280, torch.float32),
        (32, 2**16, torch.bfloat16),
        (32, 2**15, torch.float32),
        (65, 2**14, torch.bfloat16),
        (32, 8193, torch.float32),
    ):
        assert short_path(torch.empty(rows_split, n, dtype=dtype), 512, opt, 132).kind == "split"
        assert short_path(torch.empty(rows_split + 1, n, dtype=dtype), 512, opt, 132) is None
    assert short_path(torch.empty(29, 2**20), 512, opt, 264).kind == "split"  # twice the SMs
    # one row splits on any GPU (one streaming program would leave every other SM idle)
    assert short_path(torch.empty(1, 2**20), 512, opt, 4).kind == "split"
    assert short_path(torch.empty(2, 2**20), 512, opt, 4) is None
    # many rows, moderate or long: the streaming kernel (measured faster at 4096 x 16K,
    # 256 x 64K); the split for moderate rows at any batch stays available by
    # configuration
    assert short_path(torch.empty(4096, 16384, dtype=torch.bfloat16), 512, opt, 132) is None
    assert short_path(torch.empty(4096, 30000), 512, opt, 132) is None
    cfg = ShortConfig(split_max_n=65536)
    assert short_path(torch.empty(4096, 30000), 512, opt, 132, cfg).kind == "split"
    assert short_path(torch.empty(4096, 2**20), 512, opt, 132) is None
    # k too large for the register slice
    assert short_path(torch.empty(1, 2**20), 4096, opt, 132) is None
    assert short_path(torch.empty(1, 100), 20000, opt, 132) is None
    assert describe(None) == "stream"


# ------------------------------------------------------------------ short rows
@pytest.mark.parametrize("kind", KINDS)
def test_distributions_short(kind):
    i = KINDS.index(kind)
    dtype = [torch.bfloat16, torch.float32, torch.float16][i % 3]
    x = make(kind, 2, 300, dtype, DEV, seed=i)
    check(x, 40, largest=bool(i % 2))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("order", list(Order))
def test_orders_and_index_dtypes(dtype, order):
    x = make("distinct32", 2, 200, dtype, DEV, seed=3)
    check(x, 33, order=order, largest=order is not Order.INDEX)
    check(x, 17, order=order, index_dtype=torch.int64, values=False, largest=False)


@pytest.mark.parametrize("n", [0, 1, 39, 40, 41])
def test_lengths_around_k(n):
    x = make("normal", 2, n, torch.float32, DEV, seed=n)
    check(x, 40, order=Order.VALUE if n % 2 else Order.NONE)
    check(x, 40, order=Order.INDEX, fill_value=7.0, fill_index=-3, index_offset=5)


def test_windows_offsets_fills():
    x = make("distinct4096", 5, 300, torch.bfloat16, DEV, seed=5)
    begin = torch.tensor([0, 10, 250, -5, 120], device=DEV)
    end = torch.tensor([300, 40, 400, 3, 120], device=DEV)  # clamped; empty; short
    off = torch.tensor([0, 100, -7, 2**20, 1], device=DEV)
    check(x, 32, begin=begin, end=end, index_offset=off, fill_value=-1.5, fill_index=-9)
    check(x, 32, begin=begin, order=Order.VALUE, index_offset=3)
    check(x, 32, end=end, order=Order.INDEX, largest=False, index_dtype=torch.int64)


def test_k_range():
    x = make("distinct4096", 2, 400, torch.float32, DEV, seed=9)
    for k in (1, 2, 255, 399, 400, 512):
        check(x, k)


def test_strided_input_and_outputs():
    base = make("normal", 300, 3, torch.float32, DEV, seed=4)
    x = base.t()  # [3, 300], column stride 3
    got, opt = run(x, 20, order=Order.VALUE)
    assert_same_topk(got, oracle_topk(x.contiguous(), 20, opt), Order.VALUE)
    opt = TopkOptions(order=Order.INDEX)
    for cfg in (SHORT, PASSES):  # one program a row; radix passes over its segments
        ov = torch.zeros((20, 3), dtype=x.dtype, device=DEV).t()
        oi = torch.zeros((20, 3), dtype=torch.int32, device=DEV).t()
        plan = short_path(x, 20, opt, SM, cfg)
        assert plan.passes == (cfg is PASSES), describe(plan)
        run_short(x, 20, opt, ov, oi, plan)
        assert_same_topk((ov, oi), oracle_topk(x, 20, opt), Order.INDEX, describe(plan))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(
    "cfg", [SHORT, SPLIT, DEEP, PASSES, TILED], ids=["short", "split", "deep", "passes", "tiled"]
)
def test_vector_loads_same_bits(cfg, dtype):
    """``vec_load`` (each thread's run read as vectors, then placed as the spread
    layout has it): bit for bit the element-wise loads, on rows of a length that is
    no multiple of a vector, windows with unaligned ends, a strided input, and the
    radix passes adding several segments to one histogram."""
    vec = dataclasses.replace(cfg, vec_load=True, tile_sum=True)
    cfg = dataclasses.replace(cfg, vec_load=False, tile_sum=False)  # element by element
    x = make("distinct32", 3, 301, dtype, DEV, seed=11)
    begin = torch.tensor([0, 3, 157], device=DEV)
    end = torch.tensor([301, 250, 163], device=DEV)
    for kw in (dict(), dict(begin=begin, end=end, fill_index=-4, index_offset=9)):
        for order in (Order.NONE, Order.INDEX):
            got = check(x, 12, cfg=vec, order=order, **kw)
            same_bits(got, run(x, 12, cfg=cfg, order=order, **kw)[0])
    wide = make("normal", 3, 602, dtype, DEV, seed=12)[:, ::2]  # column stride 2
    same_bits(check(wide, 12, cfg=vec), run(wide, 12, cfg=cfg)[0])


@pytest.mark.parametrize("np_pivots", [4, 8])
@pytest.mark.parametrize("fused", [True, False])
def test_search_variants(np_pivots, fused):
    """4 or 8 pivots per step, and the one-reduction (count, max, min) and pivot
    counts used on the GPU (the interpreter defaults to separate reductions)."""
    cfg = ShortConfig(nmax=64, min_seg=32, np_pivots=np_pivots, fused_stats=fused, **FEW)
    x = make("nan_hotspots", 1, 50, torch.bfloat16, DEV, seed=2)
    check(x, 9, cfg=cfg, largest=False)
    x = make("bits_positive", 1, 60, torch.float32, DEV, seed=3)
    check(x, 7, cfg=cfg, order=Order.VALUE)


SEARCHES = {  # the pivot searches side by side: radix digit splits, and the old one
    "radix6": dict(radix=True, radix_bits=6),
    "radix5": dict(radix=True, radix_bits=5),
    "radix8": dict(radix=True, radix_bits=8),
    "count8": dict(radix=False, np_pivots=8),
}


def _adversarial(n: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Rows aimed at the pivot search: the k-th key inside a long tie (k = 40 below),
    all equal, NaNs of both signs with +-inf and signed zeros, keys that differ only
    in their lowest bit (every leading digit shared), and a mix of both signs and
    magnitudes (every digit differs)."""
    g = torch.Generator().manual_seed(seed)
    rows = torch.empty(6, n, dtype=torch.float64)
    tie = torch.full((n,), -3.0, dtype=torch.float64)
    tie[torch.randperm(n, generator=g)[:50]] = 2.0  # ranks 1..50 tied, k = 40 inside
    tie[torch.randperm(n, generator=g)[:30]] = 7.0  # ranks 1..30 above them (some)
    rows[0] = tie
    rows[1] = 0.75
    specials = torch.tensor([float("nan"), -float("nan"), float("inf"), -float("inf"), 0.0, -0.0])
    rows[2] = specials[torch.randint(0, 6, (n,), generator=g)]
    rows[2, torch.randint(0, n, (n // 4,), generator=g)] = 1.0
    one = torch.tensor(1.0, dtype=dtype)
    step = torch.arange(n) % 2  # 1.0 and its successor: only the last key bit differs
    rows[3] = (one.view(_RAW[dtype]) + step.to(_RAW[dtype])).view(dtype).double()
    rows[4] = (
        torch.randn(n, generator=g, dtype=torch.float64)
        * torch.tensor([1e-30, 1e30])[torch.randint(0, 2, (n,), generator=g)]
    )
    rows[5] = -rows[4].abs()  # negative only: largest=False keys near the top
    return rows.to(dtype).to(DEV)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("search", list(SEARCHES))
def test_pivot_searches_adversarial(search, dtype):
    """Every pivot search (radix select with several digit splits, the counting
    search) against the oracle on rows that break searches: ties across the k-th,
    all equal, NaN/inf/signed zeros (with largest=False NaNs take the bottom key 0,
    the key the invalid elements hold), every leading digit shared, N <= k, windows
    that cut the row to fewer than k, and the split path's candidate levels."""
    i = list(SEARCHES).index(search)
    short = ShortConfig(nmax=256, min_seg=64, **SEARCHES[search], **FEW)
    split = ShortConfig(nmax=256, seg_max=128, min_seg=64, **SEARCHES[search], **FEW)
    x = _adversarial(200, dtype, seed=i)
    rows = x.shape[0]
    begin = torch.tensor([0, 5, 190, 0, 30, 199][:rows], device=DEV)
    end = torch.tensor([200, 150, 200, 41, 31, 200][:rows], device=DEV)
    for k in (1, 40, 199, 200, 256):
        check(x, k, cfg=short, want_kind="short", largest=k % 2 == 0)
    check(x, 40, cfg=short, largest=False, order=Order.VALUE)
    check(x, 40, cfg=short, begin=begin, end=end, order=Order.INDEX, fill_index=-5)
    check(x, 40, cfg=short, begin=begin, end=end, largest=False)
    xs = _adversarial(500, dtype, seed=10 + i)
    check(xs, 40, cfg=split, sm=8, want_kind="split", largest=False)
    check(xs, 12, cfg=split, sm=8, want_kind="split", order=Order.VALUE)
    check(xs, 40, cfg=split, sm=8, begin=begin * 2, end=end * 2 + 60)


@pytest.mark.parametrize("per_thread", [4, 32])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_elements_per_thread(per_thread, dtype):
    """ShortConfig.per_thread sets the warps of every launch (``nmax / (32 per_thread)``,
    at least one): the same exact answer with 4 elements a thread (4 warps at nmax 512)
    and with 32 (one warp), short rows and the split, in both directions, with a
    window; the plan's launches take those warps."""
    short = ShortConfig(nmax=512, min_seg=64, per_thread=per_thread, **FEW)
    split = ShortConfig(nmax=256, seg_max=128, min_seg=64, per_thread=per_thread, **FEW)
    x = _adversarial(400, dtype, seed=per_thread)
    xs = _adversarial(500, dtype, seed=per_thread + 1)
    rows = x.shape[0]
    begin = torch.tensor([0, 5, 190, 0, 30, 199][:rows], device=DEV)
    end = torch.tensor([400, 150, 300, 41, 31, 400][:rows], device=DEV)
    warps = max(1, 512 // (32 * per_thread))
    assert short_path(x, 40, TopkOptions(), SM, short).levels[0].num_warps == warps
    check(x, 40, cfg=short, want_kind="short")
    check(x, 40, cfg=short, largest=False, order=Order.VALUE, begin=begin, end=end)
    check(xs, 40, cfg=split, sm=8, want_kind="split", order=Order.INDEX)
    check(xs, 12, cfg=split, sm=8, want_kind="split", largest=False, begin=begin, end=end)


# --------------------------------------------------------------------- split path
@pytest.mark.parametrize("kind", KINDS)
def test_split_matches_oracle_and_unsplit(kind):
    i = KINDS.index(kind)
    dtype = [torch.bfloat16, torch.float32][i % 2]
    x = make(kind, 1, 500, dtype, DEV, seed=i)
    order = list(Order)[i % 3]
    split = check(x, 12, cfg=SPLIT, sm=2, want_kind="split", order=order, largest=bool(i % 2))
    whole_cfg = ShortConfig(nmax=1024, **FEW)
    whole, _ = run(x, 12, cfg=whole_cfg, want_kind="short", order=order, largest=bool(i % 2))
    same_bits(split, whole)


def test_split_several_merge_levels():
    x = make("distinct32", 1, 700, torch.float32, DEV, seed=1)
    plan = short_path(x, 8, TopkOptions(), SM, DEEP)
    assert plan.kind == "split" and len(plan.levels) >= 3, describe(plan)
    got = check(x, 8, cfg=DEEP, order=Order.VALUE)
    whole, _ = run(x, 8, cfg=ShortConfig(nmax=2048, **FEW), order=Order.VALUE)
    same_bits(got, whole)


def test_split_windows_and_fills():
    """Segments outside a window, and rows with fewer than k valid elements overall."""
    x = make("staircase", 3, 700, torch.bfloat16, DEV, seed=8)
    begin = torch.tensor([0, 130, 600], device=DEV)
    end = torch.tensor([700, 390, 605], device=DEV)  # the last row: 5 < k valid
    off = torch.tensor([1, 2, 3], device=DEV)
    check(
        x,
        12,
        cfg=SPLIT,
        want_kind="split",
        begin=begin,
        end=end,
        index_offset=off,
        fill_index=-2,
        fill_value=0.25,
    )
    check(
        x,
        12,
        cfg=SPLIT,
        begin=begin,
        end=end,
        order=Order.VALUE,
        largest=False,
        index_dtype=torch.int64,
        values=False,
    )


def in_launch(cfg: ShortConfig) -> ShortConfig:
    return dataclasses.replace(cfg, merge_in_launch=True, in_launch_per_sm=64)


def levelled(cfg: ShortConfig) -> ShortConfig:
    return dataclasses.replace(cfg, merge_in_launch=False)


def test_plan_in_launch():
    """The in-launch split: the same segments, merge groups of whole units of kp
    columns (at least two), each level's groups the next level's units, the last
    level one group writing the outputs, all at the warps of its largest slice; as
    many levels as the kernel runs, else the plan of one launch per level."""
    opt = TopkOptions()
    for shape, k in (((1, 2**20), 512), ((6, 2**20), 512), ((1, 2**20), 1231), ((3, 9000), 7)):
        x = torch.empty(shape)
        plain = short_path(x, k, opt, 132, levelled(ShortConfig()))
        fused = short_path(x, k, opt, 132)
        assert fused.in_launch and not plain.in_launch
        warps = max(_warps(lv.nmax) for lv in fused.levels)
        assert fused.levels[0] == dataclasses.replace(plain.levels[0], num_warps=warps)
        units = fused.levels[0].nseg
        for lv in fused.levels[1:]:
            per = lv.L // fused.kp
            assert lv.L == lv.nmax <= 8192 and per >= 2 and lv.L % fused.kp == 0
            assert lv.nseg == -(-units // per) and lv.src_cand
            assert lv.num_warps == warps
            units = lv.nseg
        assert units == 1 and not fused.levels[-1].dst_cand
        assert [lv.dst_cand for lv in fused.levels[1:-1]] == [True] * (len(fused.levels) - 2)
        assert 2 <= len(fused.levels) <= 1 + MAX_IN_LAUNCH
        assert describe(fused).endswith(" in-launch")
    assert describe(short_path(torch.empty(1, 2**20), 512, opt, 132, in_launch(ShortConfig()))) == (
        "split L=8192 seg=128 merge=8192x8 4096x1 in-launch"
    )
    # from more than 6 programs per SM (segments), one launch per level
    assert short_path(torch.empty(6, 2**20), 512, opt, 132).in_launch  # 768 programs
    assert not short_path(torch.empty(7, 2**20), 512, opt, 132).in_launch  # 896
    assert short_path(torch.empty(7, 2**20), 512, opt, 150).in_launch
    # five merge levels (nmax 32, kp 16: two units a group, 20 -> 10 -> 5 -> 3 -> 2 -> 1)
    tiny = ShortConfig(nmax=64, seg_max=64, min_seg=32, merge_in_launch=True)
    deep = dataclasses.replace(tiny, nmax=32, seg_max=32, min_seg=32)
    p = short_path(torch.empty(1, 640), 4, opt, 4, deep)
    assert p.kind == "split" and not p.in_launch, describe(p)
    assert short_path(torch.empty(1, 640), 4, opt, 4, tiny).in_launch
    assert short_path(torch.empty(4, 3000), 64, opt, 132, in_launch(ShortConfig())).kind == "short"
    # short segments, large merges: the launch at the merges' warps (16 for 8192 slots)
    p = short_path(torch.empty(6, 65536), 512, opt, 132, ShortConfig.variant("fused+seg2048"))
    assert describe(p) == "split L=2048 seg=32 merge=8192x2 1024x1 in-launch"
    assert {lv.num_warps for lv in p.levels} == {16}


@pytest.mark.parametrize("kind", ["normal", "distinct2", "staircase", "nan_hotspots", "ascending"])
def test_split_in_launch_same_bits(kind):
    """The split with its merges in one launch: the oracle's top k, bit for bit the
    plan of one launch per level, over one and several merge levels, both directions,
    every order, with windows, offsets and fills."""
    i = ["normal", "distinct2", "staircase", "nan_hotspots", "ascending"].index(kind)
    dtype = [torch.bfloat16, torch.float32, torch.float16][i % 3]
    x = make(kind, 3, 700, dtype, DEV, seed=i)
    begin = torch.tensor([0, 130, 600], device=DEV)
    end = torch.tensor([700, 390, 605], device=DEV)  # the last row: 5 < k valid
    kw = dict(order=list(Order)[i % 3], largest=bool(i % 2), fill_index=-2, fill_value=0.5)
    for cfg, k in ((SPLIT, 12), (DEEP, 8)):
        assert short_path(x, k, TopkOptions(), SM, in_launch(cfg)).in_launch
        got = check(x, k, cfg=in_launch(cfg), want_kind="split", **kw)
        same_bits(got, run(x, k, cfg=levelled(cfg), **kw)[0])
        win = dict(begin=begin, end=end, index_offset=torch.tensor([1, 2, 3], device=DEV))
        win["index_dtype"] = torch.int64 if i % 2 else torch.int32
        got = check(x, k, cfg=in_launch(cfg), **win, **kw)
        same_bits(got, run(x, k, cfg=levelled(cfg), **win, **kw)[0])


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    n=st.integers(0, 300),
    k=st.integers(1, 16),
    kind=st.sampled_from(KINDS),
    dtype=st.sampled_from([torch.bfloat16, torch.float16, torch.float32]),
)
def test_random_calls(data, n, k, kind, dtype):
    """Random shapes, windows and options through whichever plan the shape gets
    (short rows, a split with several merge levels, radix passes over its segments,
    several segments a program)."""
    rows = data.draw(st.integers(1, 3))
    x = make(kind, rows, n, dtype, DEV, seed=n * 31 + k)
    kw = dict(
        largest=data.draw(st.booleans()),
        order=data.draw(st.sampled_from(list(Order))),
        index_dtype=data.draw(st.sampled_from([torch.int32, torch.int64])),
    )
    if data.draw(st.booleans()):
        kw["begin"] = torch.tensor(
            data.draw(st.lists(st.integers(-5, n + 5), min_size=rows, max_size=rows)), device=DEV
        )
        kw["end"] = torch.tensor(
            data.draw(st.lists(st.integers(-5, n + 5), min_size=rows, max_size=rows)), device=DEV
        )
    if data.draw(st.booleans()):
        kw["index_offset"] = data.draw(st.integers(-100, 100))
    cfgs = [SHORT, SPLIT, DEEP, levelled(SPLIT), PASSES, TILED, NOT_LEAN]
    check(x, k, cfg=data.draw(st.sampled_from(cfgs)), **kw)


# ------------------------------------------------------------------ full size, GPU
@pytest.mark.gpu
@pytest.mark.parametrize("rows,n", [(1, 2**20), (6, 2**20), (4096, 4096), (1, 4096), (3, 100_000)])
@pytest.mark.parametrize("k", [512, 2048])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_gpu_full_size(rows, n, k, dtype):
    x = make("normal", rows, n, dtype, "cuda", seed=rows + k)
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    for order in (Order.NONE, Order.VALUE):
        opt = TopkOptions(order=order)
        plan = short_path(x, k, opt, sm)
        assert plan is not None, (rows, n, k)
        ov = torch.empty((rows, k), dtype=dtype, device="cuda")
        oi = torch.empty((rows, k), dtype=torch.int32, device="cuda")
        run_short(x, k, opt, ov, oi, plan)
        assert_same_topk((ov, oi), oracle_topk(x, k, opt), order, describe(plan))


@pytest.mark.gpu
@pytest.mark.parametrize(
    "rows,n,k,dtype",
    [
        (1, 2**20, 512, torch.bfloat16),
        (6, 2**20, 1231, torch.bfloat16),  # four merge levels, units of 2048 columns
        (6, 129_280, 512, torch.float32),
        (3, 100_000, 2048, torch.float32),
    ],
)
def test_gpu_in_launch_same_bits(rows, n, k, dtype):
    """The split with its merges in its one launch, at full size: the oracle's top k
    and bit for bit the plan of one launch per level, on normal and tie-heavy rows,
    unsorted and sorted; captured in a CUDA graph (its counters zeroed in the graph),
    each replay exact after the data changes in place."""
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    x = make("normal", rows, n, dtype, "cuda", seed=k)
    split = ShortConfig(radix_passes=False)  # the split even where radix passes are the default
    for kind in ("normal", "distinct32"):
        x.copy_(make(kind, rows, n, dtype, "cuda", seed=k))
        for order in (Order.NONE, Order.VALUE):
            opt = TopkOptions(order=order)
            plain = short_path(x, k, opt, sm, levelled(split))
            fused = short_path(x, k, opt, sm, split)
            assert fused.in_launch and not plain.in_launch, describe(fused)
            got = []
            for plan in (fused, plain):
                ov = torch.empty((rows, k), dtype=dtype, device="cuda")
                oi = torch.empty((rows, k), dtype=torch.int32, device="cuda")
                run_short(x, k, opt, ov, oi, plan)
                got.append((ov, oi))
            assert_same_topk(got[0], oracle_topk(x, k, opt), order, describe(fused))
            same_bits(got[0], got[1])
    opt = TopkOptions()
    fused = short_path(x, k, opt, sm, in_launch(split))
    ov = torch.empty((rows, k), dtype=dtype, device="cuda")
    oi = torch.empty((rows, k), dtype=torch.int32, device="cuda")
    graph, _ = warm_then_capture(lambda: run_short(x, k, opt, ov, oi, fused))
    for seed in range(3):
        x.copy_(make("distinct32" if seed % 2 else "normal", rows, n, dtype, "cuda", seed=seed))
        graph.replay()
        torch.cuda.synchronize()
        assert_same_topk((ov, oi), oracle_topk(x, k, opt), Order.NONE, f"replay {seed}")


@pytest.mark.gpu
def test_gpu_ties_and_windows():
    x = make("distinct32", 4, 2**20, torch.bfloat16, "cuda", seed=1)
    begin = torch.tensor([0, 1000, 500_000, 7], device="cuda")
    end = torch.tensor([2**20, 900_000, 500_100, 8], device="cuda")
    check(x, 512, cfg=ShortConfig(), sm=132, begin=begin, end=end, order=Order.INDEX)


@pytest.mark.gpu
@pytest.mark.parametrize("rows,n", [(6, 2**20), (64, 3000), (300, 100_000)])
def test_gpu_graph_replay_with_windows_changing(rows, n):
    """Every path the dispatch picks (split, short, stream) captures in a CUDA graph:
    windows and data change in place between replays, each replay is exact."""
    from deepselect import topk_rows

    k = 512
    x = make("normal", rows, n, torch.bfloat16, "cuda", seed=rows)
    g = torch.Generator(device="cuda").manual_seed(rows)
    begin = torch.zeros(rows, dtype=torch.int64, device="cuda")
    end = torch.full((rows,), n, dtype=torch.int64, device="cuda")
    ov = torch.empty((rows, k), dtype=x.dtype, device="cuda")
    oi = torch.empty((rows, k), dtype=torch.int32, device="cuda")

    def call():
        topk_rows(x, k, begin=begin, end=end, order="index", out_values=ov, out_indices=oi)

    graph, _ = warm_then_capture(call)
    for seed in range(3):
        x.copy_(make("distinct32" if seed % 2 else "normal", rows, n, x.dtype, "cuda", seed=seed))
        begin.copy_(torch.randint(0, n // 2, (rows,), device="cuda", generator=g))
        end.copy_(begin + torch.randint(0, n, (rows,), device="cuda", generator=g))
        graph.replay()
        torch.cuda.synchronize()
        opt = TopkOptions(begin=begin, end=end, order=Order.INDEX)
        assert_same_topk((ov, oi), oracle_topk(x, k, opt), Order.INDEX, f"replay {seed}")


@pytest.mark.parametrize("sample_holds", ["largest", "smallest"])
@pytest.mark.parametrize("order", [Order.NONE, Order.VALUE])
def test_prefilter_misled_by_its_sample(sample_holds, order):
    """The prefilter's sample (every 16th position of a 512-long row: one key per thread
    of the one warp that holds it) set to the row's largest keys puts the threshold
    above the k-th key (too few pass), set to the smallest it lets almost every key
    pass (more than the room for them): both fall back to the selection from every
    element, still exact, with and without the prefilter the same bits. Rows with the
    sample left alone take the prefilter (a normal row), beside them."""
    n, k = 512, 8
    x = make("normal", 4, n, torch.float32, DEV, seed=11)
    sampled = torch.arange(0, n, 16, device=DEV)
    lift = 100.0 if sample_holds == "largest" else -100.0
    x[:2, sampled] = lift + torch.arange(len(sampled), device=DEV, dtype=x.dtype)
    assert short_path(x, k, TopkOptions(), SM, SHORT).levels[0].nmax == 512
    with_pf = check(x, k, cfg=SHORT, order=order)
    without, _ = run(x, k, cfg=dataclasses.replace(SHORT, prefilter=False), order=order)
    same_bits(with_pf, without)


def test_in_launch_prefilters_its_merge():
    """As below, in one launch: the merge of the 8 segments' units (2048 columns) by
    the last segment to finish, with the sampled threshold; the same bits as the
    plan of one launch per level. (A lean split takes no prefilter: here not lean,
    as a split of k > LEAN_MAX_KP is.)"""
    cfg = ShortConfig(
        nmax=2048, seg_max=2048, min_seg=1024, merge_in_launch=True, split_lean=False, **FEW
    )
    x = make("normal", 2, 16384, torch.float32, DEV, seed=5)
    plan = short_path(x, 256, TopkOptions(), SM, cfg)
    assert plan.in_launch and len(plan.levels) == 2, describe(plan)
    assert prefilters(plan, plan.levels[1])
    got = check(x, 256, cfg=cfg, order=Order.VALUE)
    plain = dataclasses.replace(cfg, merge_in_launch=False)
    same_bits(got, run(x, 256, cfg=plain, order=Order.VALUE)[0])


def test_prefilter_on_merge_candidates():
    """Segments of 2048 and k = 256: the first level and the merge of the 8 segments'
    candidates (2048 pairs) both keep ~450 elements by the sampled threshold (room
    512); the same bits as without the prefilter, and the oracle's top k. One launch
    per level (the in-launch merge's prefilter: the test above). Not lean."""
    cfg = ShortConfig(
        nmax=2048, seg_max=2048, min_seg=1024, merge_in_launch=False, split_lean=False, **FEW
    )
    x = make("normal", 2, 16384, torch.float32, DEV, seed=5)
    plan = short_path(x, 256, TopkOptions(), SM, cfg)
    assert [lv.src_cand for lv in plan.levels] == [False, True], describe(plan)
    for order in (Order.NONE, Order.VALUE):
        with_pf = check(x, 256, cfg=cfg, order=order)
        without, _ = run(x, 256, cfg=dataclasses.replace(cfg, prefilter=False), order=order)
        same_bits(with_pf, without)


# ------------------------------------------------ the prefilter over values (value_filter)
@triton.jit
def _bound_probe(raw_ptr, thr_ptr, out_ptr, n, KEY_MASK: tl.constexpr, SIGN: tl.constexpr,
                 INF_BITS: tl.constexpr, LARGEST: tl.constexpr, RAW16: tl.constexpr,
                 FP16: tl.constexpr, B: tl.constexpr):  # fmt: skip
    t = tl.program_id(0)
    w = K._key_bound(
        tl.load(thr_ptr + t).to(tl.uint32), KEY_MASK, SIGN, INF_BITS, LARGEST, RAW16, FP16
    )  # fmt: skip
    o = tl.arange(0, B)
    raw = tl.load(raw_ptr + o, mask=o < n, other=0)
    beats = K._beats_bound(K._raw_values(raw, RAW16, FP16), w, LARGEST)
    tl.store(out_ptr + t * n + o, beats.to(tl.int8), mask=o < n)


def _probe_values(dtype):
    """Raw bit patterns to probe: all 65,536 for 16-bit types; for fp32 every special
    (signed zeros and infinities, NaNs of both signs and several payloads, the
    smallest and largest subnormals and normals) and random patterns."""
    if dtype != torch.float32:
        return torch.arange(-(2**15), 2**15, dtype=torch.int16)
    specials = [0, 1, 0x7FFFFF, 0x800000, 0x7F7FFFFF, 0x7F800000, 0x7F800001, 0x7FC00000]
    specials = torch.tensor(specials + [v | -(2**31) for v in specials] + [-1], dtype=torch.int64)
    g = torch.Generator().manual_seed(7)
    rand = torch.randint(-(2**31), 2**31, (16384,), generator=g)
    return torch.cat([specials, rand]).to(torch.int32)


def _probe_thresholds(dtype, keys):
    """Thresholds (0 < thr <= KEY_MASK) at every kind of edge: around +-inf's, the
    zeros' and the NaN key, the keys no value has, and around keys of the values."""
    bits = 16 if dtype != torch.float32 else 32
    km, sign = (1 << bits) - 1, 1 << (bits - 1)
    inf = K._inf_bits(bits, dtype == torch.float16)
    pinf, ninf = inf | sign, (inf | sign) ^ km
    edges = [1, 2, ninf - 1, ninf, ninf + 1, sign - 2, sign - 1, sign, sign + 1]
    edges += [pinf - 1, pinf, pinf + 1, km - 1, km, (ninf + sign) // 2, (sign + pinf) // 2]
    g = torch.Generator().manual_seed(bits)
    some = keys[torch.randint(0, len(keys), (120,), generator=g)]
    thr = torch.cat([torch.tensor(edges), some - 1, some, some + 1])
    return thr[(thr > 0) & (thr <= km)].unique()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("largest", [True, False])
def test_value_bound_is_the_key_threshold(dtype, largest):
    """``_key_bound`` / ``_beats_bound``: for every threshold probed, the values that
    beat the threshold's bound are exactly those whose key is at or above it, on every
    16-bit pattern (NaNs of both signs and any payload, signed zeros, subnormals,
    infinities) and on fp32's specials and random patterns."""
    raw = _probe_values(dtype)
    want_keys = to_keys(raw.view(dtype), largest)
    thr = _probe_thresholds(dtype, want_keys)
    bits = 16 if dtype != torch.float32 else 32
    n = raw.numel()
    out = torch.zeros(len(thr), n, dtype=torch.int8, device=DEV)
    _bound_probe[(len(thr),)](
        raw.to(DEV), thr.to(torch.int64).to(DEV), out, n, (1 << bits) - 1, 1 << (bits - 1),
        K._inf_bits(bits, dtype == torch.float16), largest, bits == 16,
        dtype == torch.float16, triton.next_power_of_2(n),
    )  # fmt: skip
    want = want_keys[None, :] >= thr[:, None]
    bad = (out.cpu().bool() != want).nonzero()
    assert bad.numel() == 0, [(int(thr[t]), int(raw[i])) for t, i in bad[:5].tolist()]


VALUE = ShortConfig(nmax=2048, min_seg=64, value_filter=True, **FEW)


def _sampled_row(sample, head, filler):
    """A row of 2,048 whose prefilter sample (every 16th position, 128 samples: the
    sample ``_prefilter`` reads at nmax 2048) holds ``sample`` (cycled), and whose
    other positions hold ``head`` first, then ``filler`` (cycled)."""
    n = 2048
    pos = torch.arange(0, n, 16)
    x = torch.empty(n, dtype=torch.float64)
    x[pos] = sample.double().repeat(len(pos))[: len(pos)]
    others = torch.ones(n, dtype=torch.bool)
    others[pos] = False
    m = int(others.sum())
    x[others] = torch.cat([head.double(), filler.double().repeat(m)])[:m]
    return x


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("largest", [True, False])
def test_value_filter_thresholds_at_the_edges(dtype, largest):
    """Rows whose sample puts the value prefilter's threshold exactly at the zeros'
    key (the top k ending among zeros of both signs), at the selected side's infinity
    (with NaNs, which pass it for the largest and never for the smallest) and at the
    NaN key, each with between k and the room for them kept, so that the values'
    compare decides the selection: the oracle's top k and the same bits as the key
    prefilter, in every order. (The bound's exactness for every key:
    test_value_bound_is_the_key_threshold.)"""
    nan, inf = float("nan"), float("inf")
    s = 1.0 if largest else -1.0
    g = torch.Generator().manual_seed(3)
    filler = -s * (1.0 + torch.rand(64, generator=g, dtype=torch.float64))  # never kept
    t = torch.tensor
    rows = [
        _sampled_row(
            t([s * 5.0] * 6 + [0.0, -0.0] * 61), t([s * 3.0] * 20 + [-0.0, 0.0] * 4), filler
        ),  # fmt: skip
        _sampled_row(t([s * inf]), t([nan] * 5 + [s * inf] * 3), filler),
        _sampled_row(t([nan]), t([s * inf]), filler),
    ]
    x = torch.stack(rows).to(dtype).to(DEV)
    plan = short_path(x, 32, TopkOptions(largest=largest), SM, VALUE)
    assert plan.kind == "short" and prefilter_code(plan, plan.levels[0]) == 2, describe(plan)
    keyed = dataclasses.replace(VALUE, value_filter=False)
    for order in Order:
        got = check(x, 32, cfg=VALUE, order=order, largest=largest)
        same_bits(got, run(x, 32, cfg=keyed, order=order, largest=largest)[0])


@pytest.mark.parametrize("kind", KINDS)
def test_value_filter_same_bits(kind):
    """The prefilter over values (``ShortConfig.value_filter``) on every distribution,
    both directions, bf16 / fp16 / fp32, with windows: the oracle's top k and the same
    bits as the prefilter over keys (rows of 2,000 at k = 32: normal rows keep ~110 of
    them; tie-heavy rows fall back to every element)."""
    i = KINDS.index(kind)
    dtype = [torch.bfloat16, torch.float16, torch.float32][i % 3]
    x = make(kind, 3, 2000, dtype, DEV, seed=i)
    begin = torch.tensor([0, 7, 1500], device=DEV)
    end = torch.tensor([2000, 1990, 1700], device=DEV)
    keyed = dataclasses.replace(VALUE, value_filter=False)
    for kw in (dict(largest=bool(i % 2)), dict(largest=not i % 2, begin=begin, end=end)):
        order = list(Order)[i % 3]
        got = check(x, 32, cfg=VALUE, order=order, **kw)
        same_bits(got, run(x, 32, cfg=keyed, order=order, **kw)[0])


@pytest.mark.parametrize("in_launch", [False, True])
def test_value_filter_in_a_split(in_launch):
    """A split's segments (slices of the input) take the prefilter over values, its
    merges (candidates) the one over keys: the oracle's top k and the same bits as
    with keys throughout, one launch per level and in one launch. Not lean (a lean
    split has no prefilter)."""
    cfg = ShortConfig(nmax=2048, seg_max=2048, min_seg=1024, merge_in_launch=in_launch,
                      split_lean=False, value_filter=True, **FEW)  # fmt: skip
    x = make("normal", 2, 16384, torch.bfloat16, DEV, seed=8)
    plan = short_path(x, 256, TopkOptions(), SM, cfg)
    assert plan.kind == "split" and plan.in_launch == in_launch, describe(plan)
    for order in (Order.NONE, Order.VALUE):
        got = check(x, 256, cfg=cfg, order=order)
        same_bits(
            got, run(x, 256, cfg=dataclasses.replace(cfg, value_filter=False), order=order)[0]
        )


def test_value_filter_only_where_it_applies():
    """PREFILTER 2 (values) for a slice of the input with the option on, 1 (keys) for
    merge levels of candidates and with the option off, 0 without the prefilter."""
    x = torch.empty(2, 2000)
    plan = short_path(x, 32, TopkOptions(), SM, VALUE)
    assert prefilter_code(plan, plan.levels[0]) == 2
    plan = short_path(x, 32, TopkOptions(), SM, dataclasses.replace(VALUE, value_filter=False))
    assert prefilter_code(plan, plan.levels[0]) == 1
    plan = short_path(x, 32, TopkOptions(), SM, dataclasses.replace(VALUE, prefilter=False))
    assert prefilter_code(plan, plan.levels[0]) == 0
    cfg = ShortConfig(nmax=2048, seg_max=2048, min_seg=1024, merge_in_launch=False,
                      split_lean=False, value_filter=True, **FEW)  # fmt: skip
    plan = short_path(torch.empty(2, 16384), 256, TopkOptions(), SM, cfg)
    assert [prefilter_code(plan, lv) for lv in plan.levels] == [2, 1], describe(plan)
    assert ShortConfig.variant("vf") == ShortConfig(value_filter=True)
    assert ShortConfig.variant("vf+novf") == ShortConfig()


def test_short_config_variants_by_name():
    """The named variants the timing and compile scripts take (ShortConfig.variant)."""
    assert ShortConfig.variant("radix") == ShortConfig()
    assert ShortConfig.variant("old") == ShortConfig(radix=False)
    assert ShortConfig.variant("radix5@96") == ShortConfig(radix_bits=5, reg_cap=96)
    assert ShortConfig.variant("old@64") == ShortConfig(radix=False, reg_cap=64)
    assert ShortConfig.variant("nopf") == ShortConfig(prefilter=False)
    assert ShortConfig.variant("split16384@80") == ShortConfig(split_max_n=16384, reg_cap=80)
    assert ShortConfig.variant("fused") == ShortConfig(merge_in_launch=True)
    assert ShortConfig.variant("levelled") == ShortConfig(merge_in_launch=False)
    assert ShortConfig.variant("fused+seg2048@96") == ShortConfig(
        merge_in_launch=True, seg_max=2048, reg_cap=96
    )
    assert ShortConfig.variant("old+nopf") == ShortConfig(radix=False, prefilter=False)
    assert ShortConfig.variant("radix+pt32") == ShortConfig(per_thread=32)
    for bad in (0, 3, -4):  # the warps of a launch come from it: a power of two
        with pytest.raises(ValueError, match="per_thread"):
            ShortConfig(per_thread=bad)
    x = torch.empty(4096, 16384)  # many rows of 16K: streamed, unless split is asked
    assert short_path(x, 512, TopkOptions(), 132) is None
    plan = short_path(x, 512, TopkOptions(), 132, ShortConfig.variant("split16384"))
    assert describe(plan).startswith("split L=8192 seg=2")
    for bad in ("radixx", "new", "radix@ninety", "warp", "split", "splitx", "seg", "fused+"):
        with pytest.raises(ValueError):
            ShortConfig.variant(bad)
    assert ShortConfig.variant("onlysync+passes4+tiles3+grid2") == ShortConfig(
        radix_passes=None, pass_bits=4, pass_max_tiles=3, grid_per_sm=2
    )
    assert ShortConfig.variant("passes+nosync") == ShortConfig(radix_passes=True, grid_sync=False)
    assert ShortConfig.variant("nopasses") == ShortConfig(radix_passes=False)
    assert ShortConfig.variant("staged+nmax4096+grid2") == ShortConfig(
        staged_write=True, nmax=4096, grid_per_sm=2
    )
    assert ShortConfig.variant("nostaged") == ShortConfig(staged_write=False)
    assert ShortConfig.variant("full") == ShortConfig(full_segments=True)
    for bad in ("passes9", "passes0", "tiles0", "grid0"):
        with pytest.raises(ValueError, match="ShortConfig"):
            ShortConfig.variant(bad)


def test_crowded_short_rows_take_the_occupancy_cap():
    """Short rows of 8 warps take 80 registers (three programs per SM) once there are
    at least CROWDED programs per SM, 128 below that; a reg_cap in the config wins;
    the interpreter takes none. Decided from the shape alone."""
    k, n, sm = 512, 4096, 132
    flags = launch_flags(Order.NONE)

    def cap(rows, cfg=None, interp=False):
        plan = short_path(torch.empty(rows, n), k, TopkOptions(), sm, cfg)
        assert plan.kind == "short" and plan.levels[0].num_warps == 8, describe(plan)
        return _launch_kwargs(torch.bfloat16, plan, flags, (), interp)[0].get("maxnreg")

    assert cap(CROWDED * sm) == 80 and cap(4096) == 80
    assert cap(CROWDED * sm - 1) == 128 and cap(1) == 128
    assert cap(4096, ShortConfig(reg_cap=96)) == 96
    assert cap(4096, interp=True) is None
    assert describe(short_path(torch.empty(4096, n), k, TopkOptions(), sm)).endswith("crowded")


def test_smem_histograms_where_compiled_by_a_known_triton(monkeypatch):
    """The shared-memory histograms are asked of GPU builds by Triton 3.6 or later
    (whose tl.histogram reserves their bytes), never of the interpreter."""
    from deepselect import triton_short

    cfg = ShortConfig()
    monkeypatch.setattr(triton_short, "_interpreting", lambda: False)
    for version, want in (("3.6.0", True), ("3.9.1", True), ("4.0.0", True), ("3.5.1", False)):
        monkeypatch.setattr(triton_short.triton, "__version__", version)
        assert triton_short.smem_hist(cfg) is want, version
    assert not triton_short.smem_hist(ShortConfig(smem_hist=False))
    monkeypatch.setattr(triton_short, "_interpreting", lambda: True)
    monkeypatch.setattr(triton_short.triton, "__version__", "3.6.0")
    assert not triton_short.smem_hist(cfg)


def test_lean_split_launch_constants():
    """A split of k <= LEAN_MAX_KP (``ShortConfig.split_lean``) selects without the
    prefilter, with 8-bit digits, at LEAN_REGS registers (none in the interpreter);
    larger k, short rows and ``split_lean=False`` keep the prefilter, the config's
    digits and the levels' own caps. Decided from the shape alone."""
    from deepselect import triton_short

    flags = launch_flags(Order.VALUE)

    def launches(rows, n, k, cfg=None, interp=False):
        plan = short_path(torch.empty(rows, n), k, TopkOptions(order=Order.VALUE), 132, cfg)
        return plan, _launch_kwargs(torch.bfloat16, plan, flags, (), interp)

    for rows, n in ((6, 2**20), (14, 2**20), (6, 129_280)):
        plan, kws = launches(rows, n, 512)
        assert plan.kind == "split" and triton_short.lean_split(plan), describe(plan)
        for kw in kws:
            assert kw["RADIX_BITS"] == 8 and not kw["PREFILTER"]
            assert kw["maxnreg"] == triton_short.LEAN_REGS
            assert not any(kw.get("PS", ()))
        assert "maxnreg" not in launches(rows, n, 512, interp=True)[1][0]
        plan, kws = launches(rows, n, 512, ShortConfig(split_lean=False))
        assert not triton_short.lean_split(plan)
        assert kws[0]["RADIX_BITS"] == 6 and kws[0]["PREFILTER"]
    plan, kws = launches(14, 2**20, 1024)  # k > LEAN_MAX_KP
    assert not triton_short.lean_split(plan) and kws[0]["PREFILTER"]
    plan, kws = launches(4096, 4096, 512)  # short rows
    assert plan.kind == "short" and kws[0]["PREFILTER"] and kws[0]["RADIX_BITS"] == 6
    assert ShortConfig.variant("nolean") == ShortConfig(split_lean=False)


# ------------------------------------------------------------------ radix passes


@pytest.mark.parametrize(
    "kind, dtype, bits",
    [
        ("normal", torch.bfloat16, 8),
        ("distinct32", torch.float32, 6),  # ties across segments; a 2-bit last digit
        ("all_equal", torch.bfloat16, 4),
        ("nan_hotspots", torch.float32, 8),
        ("bits_negative", torch.float16, 5),  # a 1-bit last digit
    ],
)
def test_radix_passes_match_the_oracle_and_the_levels(kind, dtype, bits):
    """The split as radix passes over its segments (every digit's histogram summed
    across the row's programs, every program writing its own slots): the oracle's top
    k, unsorted and largest=False, and by index bit for bit the levels' result; ties
    across segments taken by index; sorted by value it takes the levels."""
    x = make(kind, 2, 700, dtype, DEV, seed=KINDS.index(kind))
    cfg = dataclasses.replace(PASSES, pass_bits=bits)
    plan = short_path(x, 12, TopkOptions(), SM, cfg)
    assert plan.passes and f" passes{bits} L=" in describe(plan), describe(plan)
    check(x, 12, cfg=cfg, order=Order.NONE, largest=False)
    got = check(x, 12, cfg=cfg, order=Order.INDEX)
    same_bits(got, run(x, 12, cfg=SPLIT, order=Order.INDEX)[0])
    check(x, 12, cfg=cfg, order=Order.VALUE)


def test_plan_radix_passes_where_one_launch_holds_them():
    """With ``radix_passes=None`` (on a GPU, where Triton launches cooperatively) a
    split unsorted or by index with k > 1 takes the radix passes where its rows'
    segments, as many as there are SMs and at least 1024 long, fit one launch (up to
    six a program); with
    no split (k > nmax / 4) they also take any k; sorted by value they take the
    split or the stream."""
    from deepselect import triton_short

    if not triton_short.COOPERATIVE:
        pytest.skip("this Triton cannot launch cooperatively")

    auto = ShortConfig(radix_passes=None)
    assert auto == ShortConfig()  # the default

    def plan(rows, n, k, bits=16, by_value=False, sm=132, cfg=auto):
        return triton_short._plan(rows, n, k, sm, cfg, False, bits, by_value)

    for rows, n, L in ((1, 2**20, 8192), (6, 65536, 4096), (1, 65536, 1024), (2, 129_280, 2048)):
        p = plan(rows, n, 512)
        assert p.passes and p.grid_sync and p.pass_level.L == L, describe(p)
        assert rows * p.pass_level.nseg <= 132 and p.pass_level.nseg == -(-n // L)
        assert p.pass_level.num_warps == _warps(L) and p.levels[0].L == 8192  # the split too
    assert not plan(7, 2**20, 512).passes  # 896 segments of 8192, 8 a program
    assert plan(7, 2**20, 512, sm=896).passes
    assert not plan(1, 2**20, 512, cfg=ShortConfig(radix_passes=False)).passes
    assert not plan(1, 2**20, 512, cfg=dataclasses.replace(auto, grid_sync=False)).passes
    p = plan(1, 2**20, 512, cfg=ShortConfig(grid_sync=False, radix_passes=True))
    assert p.passes and not p.grid_sync
    wide = plan(1, 2**20, 4096)  # no split: 4 k > nmax
    assert wide.passes and wide.grid_sync and wide.levels == (wide.pass_level,)
    assert plan(1, 2**20, 4096, by_value=True) is None
    assert plan(1, 2**20, 512, by_value=True).kind == "split"
    assert plan(1, 4096, 512).kind == "short"
    assert plan(1, 2**20, 2).passes and not plan(1, 2**20, 1).passes  # a cheap split
    assert plan(1, 2**20, 1, cfg=ShortConfig(radix_passes=True)).passes
    # up to six segments a program where the rows need them
    p = plan(1, 2**21, 1231)
    assert p.passes and p.grid_sync and p.pass_tiles == 2 and p.pass_level.nseg == 256
    assert plan(1, 2**22, 64).pass_tiles == 4 and plan(2, 2**20, 512).pass_tiles == 2
    assert plan(5, 2**20, 512).pass_tiles == 5 and plan(6, 2**20, 512).pass_tiles == 6
    assert not plan(1, 2**23, 512).passes and not plan(7, 2**20, 512).passes
    assert not plan(1, 2**22, 64, cfg=dataclasses.replace(auto, pass_max_tiles=3)).passes
    assert plan(1, 2**20, 1231).pass_tiles == 1
    assert not plan(2, 2**20, 512, bits=32).passes  # 32-bit keys: one segment a program
    assert plan(2, 2**20, 512, bits=32, cfg=ShortConfig(radix_passes=True)).pass_tiles == 2


@pytest.mark.parametrize("tile_sum", [False, True])
@pytest.mark.parametrize("rows, n, sm, tiles", [(2, 700, 4, 3), (3, 900, 4, 8), (2, 700, 6, 2)])
def test_radix_passes_several_segments_a_program(rows, n, sm, tiles, tile_sum):
    """Where a row's segments outnumber its programs, each program takes several
    (read again every phase): bit for bit the passes of one segment a program, by
    index with ties across segments and programs; windows, offsets and fills.
    ``tile_sum``: each segment's load issued before the one ahead is written."""
    cfg = dataclasses.replace(PASSES, pass_max_tiles=8, tile_sum=tile_sum)
    x = make("distinct32", rows, n, torch.float32, DEV, seed=rows)
    plan = short_path(x, 12, TopkOptions(), sm, cfg)
    assert plan.passes and plan.pass_tiles == tiles, describe(plan)
    got = check(x, 12, cfg=cfg, sm=sm, order=Order.INDEX)
    same_bits(got, run(x, 12, cfg=PASSES, sm=sm, order=Order.INDEX)[0])
    begin = torch.tensor([5, 130, 600][:rows], device=DEV)
    end = torch.tensor([n, 390, 605][:rows], device=DEV)
    win = dict(cfg=cfg, sm=sm, begin=begin, end=end, fill_index=-2, fill_value=0.25)
    check(x, 12, **win, index_offset=torch.arange(rows, device=DEV), largest=False)


@pytest.mark.parametrize("sm, tiles", [(24, 1), (8, 4)])
def test_radix_passes_staged_write(sm, tiles):
    """``staged_write``: each program stages its selected positions at their output
    slots and then writes its run of slots out at once (indices mapped, values read):
    bit for bit the direct write, one segment a program (held in registers) or
    several; windows (a part, fewer valid than k, an empty one), fills, per-row
    offsets, int64 indices, no values, smallest first, and a page map."""
    from deepselect.triton_backend import PageMap

    staged = dataclasses.replace(PASSES, staged_write=True)
    direct = dataclasses.replace(PASSES, staged_write=False)
    x = make("distinct32", 3, 900, torch.bfloat16, DEV, seed=5)
    plan = short_path(x, 12, TopkOptions(), sm, staged)
    assert plan.passes and plan.pass_tiles == tiles, describe(plan)
    win = dict(
        begin=torch.tensor([0, 130, 600], device=DEV), end=torch.tensor([900, 139, 600], device=DEV)
    )
    cases = [
        dict(),
        dict(
            order=Order.INDEX,
            fill_index=-2,
            fill_value=0.25,
            index_offset=torch.arange(3, device=DEV),
            **win,
        ),
        dict(index_dtype=torch.int64, largest=False, values=False, index_offset=5, **win),
    ]
    for kw in cases:
        got = check(x, 12, cfg=staged, sm=sm, **kw)
        same_bits(got, run(x, 12, cfg=direct, sm=sm, **kw)[0])
    g = torch.Generator().manual_seed(2)
    table = torch.randperm(2 * 300, generator=g).to(torch.int32).reshape(2, -1).to(DEV)
    page = PageMap(table, 4, torch.tensor([1, 0, 1], device=DEV))
    opt = TopkOptions(order=Order.INDEX, **win)
    got = []
    for cfg in (staged, direct):
        oi = torch.full((3, 12), -77, dtype=torch.int32, device=DEV)
        run_short(x, 12, opt, None, oi, short_path(x, 12, opt, sm, cfg), page=page)
        got.append(oi)
    assert torch.equal(got[0], got[1])
    assert (got[0][1, 9:] == opt.fill_index).all() and (got[0][2] == opt.fill_index).all()
    # by default staged where a program takes several segments
    flags = dict(largest=True, order=Order.NONE, has_window=0, off_tensor=False, write_values=True)
    for cfg, want in ((PASSES, tiles > 1), (staged, True), (direct, False)):
        plan = short_path(x, 12, TopkOptions(), sm, cfg)
        assert [c["STAGED"] for c in passes_constants(x.dtype, plan, True, **flags)] == [want]


@pytest.mark.parametrize("sm, tiles", [(24, 1), (8, 4)])
def test_radix_passes_whole_segments(sm, tiles):
    """``full_segments``: a segment wholly inside its row's window is counted without a
    validity mask: bit for bit the masked count, with segments cut by the window's
    ends, by the row's end (N not a multiple of the segment) and wholly outside it;
    one segment a program or several; both key widths."""
    for dtype in (torch.bfloat16, torch.float32):
        x = make("distinct32", 3, 1000, dtype, DEV, seed=7)
        full = dataclasses.replace(PASSES, full_segments=True)
        masked = dataclasses.replace(PASSES, full_segments=False)
        plan = short_path(x, 12, TopkOptions(), sm, full)
        assert plan.passes and plan.pass_tiles == tiles, describe(plan)
        begin = torch.tensor([0, 128, 300], device=DEV)  # on a segment's start, or not
        end = torch.tensor([1000, 640, 301], device=DEV)
        for kw in (dict(), dict(begin=begin, end=end, order=Order.INDEX, fill_index=-3)):
            got = check(x, 12, cfg=full, sm=sm, **kw)
            same_bits(got, run(x, 12, cfg=masked, sm=sm, **kw)[0])


def test_radix_passes_refused_cooperative_launch_runs_by_phase(monkeypatch):
    """A device that refuses the passes' cooperative launch (fewer SMs to the
    process than it has) gets the same result from one launch per phase, a warning
    once, and no further attempt with as many programs; a launch of fewer programs
    is still tried."""
    from deepselect import triton_short

    real = triton_short.radix_phases_kernel
    tried = []

    class Refusing:
        def __getitem__(self, grid):
            def launch(*args, **kw):
                if kw.get("launch_cooperative_grid"):
                    tried.append(grid)
                    raise RuntimeError("Triton Error [CUDA]: too many blocks in cooperative launch")
                return real[grid](*args, **kw)

            return launch

    monkeypatch.setattr(triton_short, "radix_phases_kernel", Refusing())
    monkeypatch.setattr(triton_short, "_COOPERATIVE_REFUSED", {})
    x = make("distinct32", 2, 700, torch.bfloat16, DEV, seed=3)
    opt = TopkOptions(order=Order.INDEX)
    plan = dataclasses.replace(short_path(x, 12, opt, SM, PASSES), grid_sync=True)
    got = []
    for call in range(2):
        ov = torch.empty((2, 12), dtype=x.dtype, device=DEV)
        oi = torch.empty((2, 12), dtype=torch.int32, device=DEV)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            run_short(x, 12, opt, ov, oi, plan)
        assert len(seen) == (call == 0) and len(tried) == 1, (call, seen, tried)
        assert_same_topk((ov, oi), oracle_topk(x, 12, opt), Order.INDEX, f"call {call}")
        got.append((ov, oi))
    assert triton_short._COOPERATIVE_REFUSED == {x.device: tried[0][0]}
    same_bits(got[0], got[1])
    one = x[:1]  # half the programs: tried once more, refused, then by phase
    plan = dataclasses.replace(short_path(one, 12, opt, SM, PASSES), grid_sync=True)
    oi = torch.empty((1, 12), dtype=torch.int32, device=DEV)
    with pytest.warns(RuntimeWarning, match="refused"):
        run_short(one, 12, opt, None, oi, plan)
    assert len(tried) == 2 and tried[1][0] < tried[0][0]
    assert triton_short._COOPERATIVE_REFUSED == {x.device: tried[1][0]}
    assert torch.equal(oi, got[0][1][:1])


def test_radix_passes_windows_offsets_fills():
    """Windows (a whole row, a part, fewer valid than k, an empty one), per-row index
    offsets, fills, int64 indices and no values."""
    x = make("staircase", 4, 700, torch.float16, DEV, seed=8)
    begin = torch.tensor([0, 130, 600, 50], device=DEV)
    end = torch.tensor([700, 390, 605, 50], device=DEV)
    off = torch.tensor([1, 2, 3, 4], device=DEV)
    win = dict(cfg=PASSES, sm=8, want_kind="split", begin=begin, end=end)
    check(x, 12, **win, index_offset=off, fill_index=-2, fill_value=0.25)
    check(x, 12, **win, order=Order.INDEX, index_dtype=torch.int64, values=False, largest=False)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "rows,n,k,dtype,tiles",
    [
        (1, 2**20, 512, torch.bfloat16, 1),
        (6, 2**16, 2048, torch.bfloat16, 1),
        (6, 129_280, 512, torch.float32, 1),
        (2, 2**23 - 1, 1231, torch.float16, 1),
        (6, 2**20, 512, torch.bfloat16, 8),  # six segments a program
        (6, 2**20, 512, torch.bfloat16, -8),  # the same adding to one histogram
        (3, 700_001, 100, torch.float32, -4),
    ],
)
def test_gpu_radix_passes(rows, n, k, dtype, tiles):
    """The radix passes at full size, their programs racing for each row's counters
    (in one cooperative launch where the segments fit one per SM, or ``|tiles|`` a
    program, else a launch per phase; ``tiles < 0``: ``tile_sum``): the oracle's top
    k, unsorted and by index, on normal, tie-heavy and ascending rows; captured in a
    CUDA graph (the counters zeroed in it), each replay exact after the data and
    windows change in place."""
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    cfg = ShortConfig(radix_passes=True, pass_max_tiles=abs(tiles), tile_sum=tiles < 0)
    for kind in ("normal", "distinct32", "ascending"):
        x = make(kind, rows, n, dtype, "cuda", seed=rows)
        for order in (Order.NONE, Order.INDEX):
            got = check(x, k, cfg=cfg, sm=sm, order=order)
    plan = short_path(x, k, TopkOptions(), sm, cfg)
    programs = rows * -(-plan.pass_level.nseg // plan.pass_tiles)
    assert plan.passes and plan.grid_sync == (programs <= sm), describe(plan)
    assert (plan.pass_tiles > 1) == (abs(tiles) > 1), describe(plan)
    begin = torch.zeros(rows, dtype=torch.int64, device="cuda")
    opt = TopkOptions(begin=begin, end=torch.full((rows,), n, device="cuda"))
    ov, oi = got[0], got[1]
    graph, _ = warm_then_capture(lambda: run_short(x, k, opt, ov, oi, plan))
    g = torch.Generator(device="cuda").manual_seed(rows)
    for seed in range(3):
        x.copy_(make("distinct32" if seed % 2 else "normal", rows, n, dtype, "cuda", seed=seed))
        opt.begin.copy_(torch.randint(0, n // 2, (rows,), device="cuda", generator=g))
        opt.end.copy_(opt.begin + torch.randint(0, n, (rows,), device="cuda", generator=g))
        graph.replay()
        torch.cuda.synchronize()
        assert_same_topk((ov, oi), oracle_topk(x, k, opt), Order.NONE, f"replay {seed}")


@pytest.mark.gpu
@pytest.mark.parametrize(
    "rows,n,k,dtype,variant",
    [
        (4096, 4096, 512, torch.bfloat16, "smem"),  # short rows, 6-bit digits
        (64, 3000, 2048, torch.float32, "smem+radix8"),  # short rows, N <= 2k
        (3, 100_000, 512, torch.float32, "smem+nopasses"),  # the split's selects
        (1, 2**20, 512, torch.bfloat16, "smem"),  # the passes in one launch
        (6, 129_280, 512, torch.float32, "smem+passes+nosync"),  # a launch a phase
        (6, 2**20, 1231, torch.float16, "smem+passes+tiles8"),  # six segments a program
        (300, 7, 5, torch.float32, "smem"),  # a warp holds each key twice: tl.histogram
        (7, 12_345, 100, torch.float32, "smem+nopasses"),  # a merge of 256 at 512 threads
    ],
)
def test_gpu_smem_histograms(rows, n, k, dtype, variant):
    """The histograms by shared-memory atomics (``ShortConfig.smem_hist``; inline PTX,
    so only here) in every kernel that takes one: the oracle's top k, unsorted, by
    value and by index, on rows whose keys crowd a few bins (every key one value, 32
    values, an ascending run) as well as normal rows; captured in a CUDA graph, each
    replay exact after the data change in place."""
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    cfg = ShortConfig.variant(variant)
    assert cfg.smem_hist
    for kind in ("normal", "all_equal", "distinct32", "ascending"):
        x = make(kind, rows, n, dtype, "cuda", seed=rows + k)
        for order in (Order.NONE, Order.VALUE, Order.INDEX):
            got = check(x, k, cfg=cfg, sm=sm, order=order)
    opt = TopkOptions()
    plan = short_path(x, k, opt, sm, cfg)
    ov, oi = got
    graph, _ = warm_then_capture(lambda: run_short(x, k, opt, ov, oi, plan))
    for seed in range(2):
        x.copy_(make("distinct32" if seed else "normal", rows, n, dtype, "cuda", seed=seed))
        graph.replay()
        torch.cuda.synchronize()
        assert_same_topk((ov, oi), oracle_topk(x, k, opt), Order.NONE, f"replay {seed}")


@pytest.mark.gpu
@pytest.mark.parametrize(
    "rows,n,k,dtype,variant",
    [
        (4096, 4096, 512, torch.bfloat16, "vf"),  # short rows, crowded
        (4096, 4096, 512, torch.float32, "vf+pt32@128"),  # four warps a row
        (300, 4095, 100, torch.float16, "vf"),  # no multiple of a vector: element loads
        (3, 100_000, 1024, torch.bfloat16, "vf+nopasses"),  # a split (not lean) and merges
    ],
)
def test_gpu_value_filter(rows, n, k, dtype, variant):
    """The prefilter over values at full size (``ShortConfig.value_filter``; the
    compare on the GPU's float32 unit, which must not flush subnormals): the oracle's
    top k and the same bits as the prefilter over keys, both directions, unsorted and
    by value, on rows of NaNs of both signs, signed zeros, raw bit patterns
    (subnormals among them) and normal rows, with windows."""
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    cfg = ShortConfig.variant(variant)
    assert cfg.value_filter
    keyed = dataclasses.replace(cfg, value_filter=False)
    g = torch.Generator(device="cuda").manual_seed(rows)
    begin = torch.randint(0, n // 4, (rows,), device="cuda", generator=g)
    end = begin + torch.randint(n // 2, n, (rows,), device="cuda", generator=g)
    for kind in ("normal", "nan_hotspots", "signed_zeros", "bits_negative", "bits_positive"):
        x = make(kind, rows, n, dtype, "cuda", seed=rows + k)
        for kw in (dict(), dict(largest=False, begin=begin, end=end)):
            for order in (Order.NONE, Order.VALUE):
                got = check(x, k, cfg=cfg, sm=sm, order=order, **kw)
                same_bits(got, run(x, k, cfg=keyed, sm=sm, order=order, **kw)[0])


@pytest.mark.gpu
@pytest.mark.parametrize(
    "rows,n,k,dtype,variant",
    [
        (4096, 4096, 512, torch.bfloat16, "vec"),  # short rows, crowded
        (5, 4095, 100, torch.float16, "vec"),  # no multiple of a vector: element loads
        (3, 100_000, 512, torch.float32, "vec+nopasses"),  # the split and its merges
        (1, 2**20, 512, torch.bfloat16, "vec"),  # the passes in one launch
        (6, 2**20, 512, torch.bfloat16, "vec+tsum+tiles8"),  # six segments a program
        (3, 700_001, 100, torch.float32, "vec+tsum+tiles4+passes"),  # two, odd N
    ],
)
def test_gpu_vector_loads(rows, n, k, dtype, variant):
    """``vec_load`` (and ``tile_sum``) at full size: the oracle's top k, bit for bit
    the element-wise loads', unsorted and by index, with and without windows."""
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    cfg = ShortConfig.variant(variant)
    assert cfg.vec_load
    base = dataclasses.replace(cfg, vec_load=False, tile_sum=False)
    g = torch.Generator(device="cuda").manual_seed(rows)
    begin = torch.randint(0, n // 2, (rows,), device="cuda", generator=g)
    end = begin + torch.randint(0, n, (rows,), device="cuda", generator=g)
    for kind in ("normal", "distinct32"):
        x = make(kind, rows, n, dtype, "cuda", seed=rows + k)
        for kw in (dict(), dict(begin=begin, end=end, fill_index=-1)):
            for order in (Order.NONE, Order.INDEX):
                got = check(x, k, cfg=cfg, sm=sm, order=order, **kw)
                same_bits(got, run(x, k, cfg=base, sm=sm, order=order, **kw)[0])


@pytest.mark.gpu
@pytest.mark.parametrize("field", ["staged_write", "full_segments"])
@pytest.mark.parametrize(
    "rows,n,k,dtype,variant",
    [
        (1, 2**20, 512, torch.bfloat16, "radix"),  # one segment a program
        (6, 2**20, 512, torch.bfloat16, "tiles8"),  # six a program
        (2, 2**21 - 3, 1231, torch.float16, "radix"),  # odd N, k not a power of two
        (6, 129_280, 2048, torch.float32, "passes"),  # 32-bit keys
    ],
)
def test_gpu_radix_passes_options(rows, n, k, dtype, variant, field):
    """The passes' ``staged_write`` and ``full_segments`` at full size: the oracle's
    top k, bit for bit the launch without the option, unsorted and by index, with
    windows (segments cut by them), fills and offsets, int64 indices."""
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    cfg = dataclasses.replace(ShortConfig.variant(variant), **{field: True})
    base = dataclasses.replace(cfg, **{field: False})
    assert short_path(torch.empty(rows, n, dtype=dtype), k, TopkOptions(), sm, cfg).passes
    g = torch.Generator(device="cuda").manual_seed(rows)
    begin = torch.randint(0, n // 2, (rows,), device="cuda", generator=g)
    end = begin + torch.randint(0, n, (rows,), device="cuda", generator=g)
    win = dict(begin=begin, end=end, fill_index=-1, index_offset=7, index_dtype=torch.int64)
    for kind in ("normal", "distinct32"):
        x = make(kind, rows, n, dtype, "cuda", seed=rows + k)
        for kw in (dict(), win):
            for order in (Order.NONE, Order.INDEX):
                got = check(x, k, cfg=cfg, sm=sm, order=order, **kw)
                same_bits(got, run(x, k, cfg=base, sm=sm, order=order, **kw)[0])


def test_radix_passes_write_physical_slots():
    """With a page map the passes' write launch maps every position to its cache
    slot (and leaves fills as fills): bit for bit the levels' paged output."""
    from deepselect.triton_backend import PageMap

    x = make("distinct32", 3, 700, torch.float32, DEV, seed=2)
    g = torch.Generator().manual_seed(2)
    table = torch.randperm(2 * 200, generator=g).to(torch.int32).reshape(2, -1).to(DEV)
    page = PageMap(table, 4, torch.tensor([1, 0, 1], device=DEV))
    opt = TopkOptions(order=Order.INDEX, begin=torch.tensor([0, 3, 690], device=DEV))
    got = []
    for cfg in (PASSES, SPLIT):
        plan = short_path(x, 12, opt, 8, cfg)
        assert plan.passes == (cfg is PASSES), describe(plan)
        oi = torch.full((3, 12), -77, dtype=torch.int32, device=DEV)
        run_short(x, 12, opt, None, oi, plan, page=page)
        got.append(oi)
    assert torch.equal(got[0], got[1])
    assert (got[0][2, 10:] == opt.fill_index).all()  # 10 valid in the last row
