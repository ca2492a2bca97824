"""The register-resident short-row kernel and its split/merge path, exactly.

Without a GPU the kernel runs in Triton's interpreter with a small register slice
(``ShortConfig(nmax=...)``) so that rows of a few hundred elements already take the
split path with several segments and merge levels; with a GPU (marker ``gpu``) the
production plan runs at full size.

The plan is data: where a test needs a branch of the product that the dispatch takes
for other shapes (one launch per merge level, a split that is not lean, the radix
passes that the interpreter's plan never has), it edits the plan for the shape at
hand (:func:`levelled`, :func:`not_lean`, :func:`helpers.gpu_plan`). The radix passes
themselves and the shared-memory histograms are tested in ``test_radix_passes.py``."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from helpers import (
    FEW,
    SHORT,
    SM,
    SPLIT,
    assert_same_topk,
    gpu_plan,
    same_bits,
    the_split,
    warm_then_capture,
)
from helpers import check_plan as check
from helpers import run_plan as run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepselect import TopkOptions, oracle_topk, triton_short
from deepselect.distributions import KINDS, make
from deepselect.ops.triton.launch import _RAW
from deepselect.options import Order
from deepselect.triton_short import (
    CROWDED,
    MAX_IN_LAUNCH,
    ShortConfig,
    _launch_kwargs,
    _merge_levels,
    _warps,
    describe,
    prefilters,
    run_short,
    short_path,
)

DEV = "cuda" if torch.cuda.is_available() else "cpu"
DEEP = ShortConfig(nmax=64, min_seg=32, **FEW)  # several merge levels


def levelled(plan, k, cfg):
    """An in-launch split's plan as one launch per merge level: the plan the dispatch
    makes where the segments' programs are too many to merge in their launch."""
    if not plan.in_launch:
        return plan
    first = plan.levels[0]
    first = dataclasses.replace(first, num_warps=_warps(first.nmax))
    merges = _merge_levels(first.nseg * k, k, cfg)
    return dataclasses.replace(plan, levels=(first, *merges), in_launch=False)


def not_lean(plan):
    """A split's plan with the prefilter and 6-bit digits, as the dispatch makes it
    for k > LEAN_MAX_KP."""
    return dataclasses.replace(plan, lean=False)


def every_element(plan):
    """The plan selecting from every element held, without the prefilter (as a lean
    split does: 8-bit digits)."""
    return dataclasses.replace(plan, lean=True)


def launch_flags(order):
    """The call flags ``_launch_kwargs`` takes (as ``run_short`` passes them): largest,
    no window, no offsets tensor, values written."""
    kw = dict(largest=True, order=order, has_window=0, off_tensor=False, write_values=True)
    return tuple(kw.items())


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
    # 256 x 64K)
    assert short_path(torch.empty(4096, 16384, dtype=torch.bfloat16), 512, opt, 132) is None
    assert short_path(torch.empty(4096, 30000), 512, opt, 132) is None
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
    # one program a row; radix passes over its segments (one a program at 12 SMs)
    for plan in (short_path(x, 20, opt, SM, SHORT), gpu_plan(x, 20, opt, 12, SPLIT)):
        assert plan.passes == (plan.kind == "split"), describe(plan)
        ov = torch.zeros((20, 3), dtype=x.dtype, device=DEV).t()
        oi = torch.zeros((20, 3), dtype=torch.int32, device=DEV).t()
        run_short(x, 20, opt, ov, oi, plan)
        assert_same_topk((ov, oi), oracle_topk(x, 20, opt), Order.INDEX, describe(plan))


PLANS = {  # a plan of each kind: the config, the pretend SMs and whether radix passes
    "short": dict(cfg=SHORT),
    "split": dict(cfg=SPLIT),
    "deep": dict(cfg=DEEP),
    "passes": dict(cfg=SPLIT, sm=12, passes=True),  # one segment a program
    "tiled": dict(cfg=SPLIT, passes=True),  # three a program (16-bit keys only)
}


@pytest.mark.parametrize(
    "kind, dtype",
    [(kind, dtype) for kind in PLANS for dtype in (torch.bfloat16, torch.float16, torch.float32)
     if kind != "tiled" or dtype != torch.float32],
)  # fmt: skip
def test_vector_loads_same_bits(kind, dtype):
    """A contiguous row is read in 16-byte vectors (each thread's run, then placed as
    the spread layout has it), a strided one element by element: bit for bit the same
    outputs, on rows of a length that is no multiple of a vector, windows with
    unaligned ends, and the radix passes reading several segments a program."""
    how = PLANS[kind]
    x = make("distinct32", 3, 301, dtype, DEV, seed=11)
    strided = torch.zeros(3, 602, dtype=dtype, device=DEV)[:, ::2]  # column stride 2
    strided.copy_(x)
    begin = torch.tensor([0, 3, 157], device=DEV)
    end = torch.tensor([301, 250, 163], device=DEV)
    for kw in (dict(), dict(begin=begin, end=end, fill_index=-4, index_offset=9)):
        for order in (Order.NONE, Order.INDEX):
            got = check(x, 12, **how, order=order, **kw)
            same_bits(got, run(strided, 12, **how, order=order, **kw)[0])


@pytest.mark.parametrize("fused", [True, False])
def test_fused_stats(fused):
    """The one-reduction (count, max, min) used on the GPU and the separate reductions
    of the interpreter's plan: the same exact answer."""
    cfg = ShortConfig(nmax=64, min_seg=32, **FEW)

    def edit(plan):
        return dataclasses.replace(plan, fused_stats=fused)

    x = make("nan_hotspots", 1, 50, torch.bfloat16, DEV, seed=2)
    check(x, 9, cfg=cfg, edit=edit, largest=False)
    x = make("bits_positive", 1, 60, torch.float32, DEV, seed=3)
    check(x, 7, cfg=cfg, edit=edit, order=Order.VALUE)


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
@pytest.mark.parametrize("lean", [False, True], ids=["6bit", "8bit"])
def test_pivot_searches_adversarial(lean, dtype):
    """The radix select of 6-bit digits with the prefilter (short rows; a split of k >
    LEAN_MAX_KP) and of 8-bit digits without it (a lean split) against the oracle on
    rows that break searches: ties across the k-th, all equal, NaN/inf/signed zeros
    (with largest=False NaNs take the bottom key 0, the key the invalid elements
    hold), every leading digit shared, N <= k, windows that cut the row to fewer than
    k, and the split path's candidate levels."""
    i = int(lean)
    short = ShortConfig(nmax=256, min_seg=64, **FEW)

    def edit(plan):
        return dataclasses.replace(plan, lean=lean)

    x = _adversarial(200, dtype, seed=i)
    rows = x.shape[0]
    begin = torch.tensor([0, 5, 190, 0, 30, 199][:rows], device=DEV)
    end = torch.tensor([200, 150, 200, 41, 31, 200][:rows], device=DEV)
    for k in (1, 40, 199, 200, 256):
        check(x, k, cfg=short, edit=edit, want_kind="short", largest=k % 2 == 0)
    check(x, 40, cfg=short, edit=edit, largest=False, order=Order.VALUE)
    check(x, 40, cfg=short, edit=edit, begin=begin, end=end, order=Order.INDEX, fill_index=-5)
    check(x, 40, cfg=short, edit=edit, begin=begin, end=end, largest=False)
    xs = _adversarial(500, dtype, seed=10 + i)
    win = dict(cfg=short, sm=8, edit=edit, want_kind="split")
    check(xs, 40, **win, largest=False)
    check(xs, 12, **win, order=Order.VALUE)
    check(xs, 40, **win, begin=begin * 2, end=end * 2 + 60)


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


@pytest.mark.parametrize("cfg", ["split", "deep"])
def test_split_rows_with_empty_windows(cfg):
    """Rows whose window is empty (begin = end, end < begin, both past the row) beside
    rows with one: the empty rows' fills in every output form, from their first program
    alone (the others leave at once), one merge level or several."""
    x = make("distinct32", 6, 700, torch.float32, DEV, seed=3)
    begin = torch.tensor([5, 0, 300, 800, 0, 650], device=DEV)
    end = torch.tensor([5, 700, 200, 900, 640, 650], device=DEV)
    off = torch.tensor([10, 20, 30, 40, 50, 60], device=DEV)
    kw = dict(cfg={"split": SPLIT, "deep": DEEP}[cfg], sm=16)  # in one launch
    assert short_path(x, 12, TopkOptions(end=end), 16, kw["cfg"]).in_launch
    for order in Order:
        check(x, 12, **kw, want_kind="split", begin=begin, end=end, order=order,
              fill_value=-2.5, fill_index=-4, index_offset=off)  # fmt: skip
    check(x, 9, **kw, end=end, values=False, largest=False, index_dtype=torch.int64)
    check(x, 12, **kw, begin=begin, order=Order.VALUE, index_offset=7)


def test_plan_in_launch():
    """The in-launch split: segments of nmax, merge groups of whole units of kp
    columns (at least two), each level's groups the next level's units, the last
    level one group writing the outputs, all at the warps of its largest slice; as
    many levels as the kernel runs, else the plan of one launch per level."""
    opt = TopkOptions()
    for shape, k in (((1, 2**20), 512), ((6, 2**20), 512), ((1, 2**20), 1231), ((3, 9000), 7)):
        fused = short_path(torch.empty(shape), k, opt, 132)
        assert fused.in_launch
        warps = max(_warps(lv.nmax) for lv in fused.levels)
        first = fused.levels[0]
        assert (first.L, first.nmax, first.num_warps) == (8192, 8192, warps)
        assert first.nseg == -(-shape[1] // 8192) and first.dst_cand and not first.src_cand
        units = first.nseg
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
    assert describe(short_path(torch.empty(1, 2**20), 512, opt, 132)) == (
        "split L=8192 seg=128 merge=8192x8 4096x1 in-launch"
    )
    # from more than 6 programs per SM (segments), one launch per level
    assert short_path(torch.empty(6, 2**20), 512, opt, 132).in_launch  # 768 programs
    plain = short_path(torch.empty(7, 2**20), 512, opt, 132)  # 896
    assert not plain.in_launch and [lv.L for lv in plain.levels] == [8192, 8192, 4096]
    assert short_path(torch.empty(7, 2**20), 512, opt, 150).in_launch
    # five merge levels (nmax 32, kp 16: two units a group, 20 -> 10 -> 5 -> 3 -> 2 -> 1)
    tiny = ShortConfig(nmax=64, min_seg=32)
    deep = ShortConfig(nmax=32, min_seg=32)
    p = short_path(torch.empty(1, 640), 4, opt, 4, deep)
    assert p.kind == "split" and not p.in_launch, describe(p)
    assert short_path(torch.empty(1, 640), 4, opt, 4, tiny).in_launch
    assert short_path(torch.empty(4, 3000), 64, opt, 132).kind == "short"


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
    for cfg, k, sm in ((SPLIT, 12, SM), (DEEP, 8, 6)):  # 18 and 33 programs
        assert short_path(x, k, TopkOptions(), sm, cfg).in_launch

        def plain(plan, k=k, cfg=cfg):
            return levelled(plan, k, cfg)

        got = check(x, k, cfg=cfg, sm=sm, want_kind="split", **kw)
        same_bits(got, run(x, k, cfg=cfg, sm=sm, edit=plain, **kw)[0])
        win = dict(begin=begin, end=end, index_offset=torch.tensor([1, 2, 3], device=DEV))
        win["index_dtype"] = torch.int64 if i % 2 else torch.int32
        got = check(x, k, cfg=cfg, sm=sm, **win, **kw)
        same_bits(got, run(x, k, cfg=cfg, sm=sm, edit=plain, **win, **kw)[0])


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
    (short rows, a split with several merge levels, one launch per level, not lean,
    radix passes over its segments, several segments a program)."""
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
    plans = [
        dict(cfg=SHORT),
        dict(cfg=SPLIT),
        dict(cfg=DEEP),
        dict(cfg=SPLIT, edit=lambda p: levelled(p, k, SPLIT)),
        dict(cfg=SPLIT, edit=not_lean),
        dict(cfg=SPLIT, sm=12),  # with the radix passes where a GPU takes them
        dict(cfg=SPLIT, sm=4),  # ... several segments a program (16-bit keys)
    ]
    i = data.draw(st.integers(0, len(plans) - 1))
    how = plans[i]
    if i >= 5:  # the GPU's plan, whatever it holds
        opt = TopkOptions(**kw)
        plan = gpu_plan(x, k, opt, how["sm"], SPLIT)
        how = dict(cfg=SPLIT, sm=how["sm"], edit=lambda p: plan)
    check(x, k, **how, **kw)


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
    for kind in ("normal", "distinct32"):
        x.copy_(make(kind, rows, n, dtype, "cuda", seed=k))
        for order in (Order.NONE, Order.VALUE):
            opt = TopkOptions(order=order)
            # the split also where the radix passes are the plan for this order
            fused = the_split(short_path(x, k, opt, sm))
            plain = levelled(fused, k, ShortConfig())
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
    fused = the_split(short_path(x, k, opt, sm))
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
    element, still exact, and the same bits as the selection from every element
    without the prefilter. Rows with the sample left alone take the prefilter (a
    normal row), beside them."""
    n, k = 512, 8
    x = make("normal", 4, n, torch.float32, DEV, seed=11)
    sampled = torch.arange(0, n, 16, device=DEV)
    lift = 100.0 if sample_holds == "largest" else -100.0
    x[:2, sampled] = lift + torch.arange(len(sampled), device=DEV, dtype=x.dtype)
    plan = short_path(x, k, TopkOptions(), SM, SHORT)
    assert plan.levels[0].nmax == 512 and prefilters(plan, plan.levels[0])
    with_pf = check(x, k, cfg=SHORT, order=order)
    without, _ = run(x, k, cfg=SHORT, edit=every_element, order=order)
    same_bits(with_pf, without)


def test_in_launch_prefilters_its_merge():
    """As below, in one launch: the merge of the 8 segments' units (2048 columns) by
    the last segment to finish, with the sampled threshold; the same bits as the
    plan of one launch per level. (A lean split takes no prefilter: here not lean,
    as a split of k > LEAN_MAX_KP is.)"""
    cfg = ShortConfig(nmax=2048, min_seg=1024, **FEW)
    x = make("normal", 2, 16384, torch.float32, DEV, seed=5)
    plan = not_lean(short_path(x, 256, TopkOptions(), SM, cfg))
    assert plan.in_launch and len(plan.levels) == 2, describe(plan)
    assert prefilters(plan, plan.levels[1])
    got = check(x, 256, cfg=cfg, edit=not_lean, order=Order.VALUE)

    def plain(plan):
        return levelled(not_lean(plan), 256, cfg)

    same_bits(got, run(x, 256, cfg=cfg, edit=plain, order=Order.VALUE)[0])


def test_prefilter_on_merge_candidates():
    """Segments of 2048 and k = 256: the first level and the merge of the 8 segments'
    candidates (2048 pairs) both keep ~450 elements by the sampled threshold (room
    512); the same bits as without the prefilter, and the oracle's top k. One launch
    per level (the in-launch merge's prefilter: the test above). Not lean."""
    cfg = ShortConfig(nmax=2048, min_seg=1024, **FEW)

    def plain(plan):
        return levelled(not_lean(plan), 256, cfg)

    x = make("normal", 2, 16384, torch.float32, DEV, seed=5)
    plan = plain(short_path(x, 256, TopkOptions(), SM, cfg))
    assert [lv.src_cand for lv in plan.levels] == [False, True], describe(plan)
    assert all(prefilters(plan, lv) for lv in plan.levels)
    for order in (Order.NONE, Order.VALUE):
        with_pf = check(x, 256, cfg=cfg, edit=plain, order=order)
        without, _ = run(x, 256, cfg=cfg, edit=lambda p: every_element(plain(p)), order=order)
        same_bits(with_pf, without)


def test_crowded_short_rows_take_the_occupancy_cap():
    """Short rows of 8 warps take 80 registers (three programs per SM) once there are
    at least CROWDED programs per SM, 128 below that; the interpreter takes none.
    Decided from the shape alone."""
    k, n, sm = 512, 4096, 132
    flags = launch_flags(Order.NONE)

    def cap(rows, cfg=None, interp=False):
        plan = short_path(torch.empty(rows, n), k, TopkOptions(), sm, cfg)
        assert plan.kind == "short" and plan.levels[0].num_warps == 8, describe(plan)
        return _launch_kwargs(torch.bfloat16, plan, flags, (), interp)[0].get("maxnreg")

    assert cap(CROWDED * sm) == 80 and cap(4096) == 80
    assert cap(CROWDED * sm - 1) == 128 and cap(1) == 128
    assert cap(4096, interp=True) is None
    assert describe(short_path(torch.empty(4096, n), k, TopkOptions(), sm)).endswith("crowded")


def test_lean_split_launch_constants():
    """A split of k <= LEAN_MAX_KP selects without the prefilter, with 8-bit digits,
    at LEAN_REGS registers (none in the interpreter); larger k and short rows keep
    the prefilter, 6-bit digits and the levels' own caps. Decided from the shape
    alone."""
    flags = launch_flags(Order.VALUE)

    def launches(rows, n, k, interp=False):
        plan = short_path(torch.empty(rows, n), k, TopkOptions(order=Order.VALUE), 132)
        return plan, _launch_kwargs(torch.bfloat16, plan, flags, (), interp)

    for rows, n in ((6, 2**20), (14, 2**20), (6, 129_280)):
        plan, kws = launches(rows, n, 512)
        assert plan.kind == "split" and plan.lean, describe(plan)
        for kw in kws:
            assert kw["RADIX_BITS"] == 8 and not kw["PREFILTER"]
            assert kw["maxnreg"] == triton_short.LEAN_REGS
            assert not any(kw.get("PS", ()))
        assert "maxnreg" not in launches(rows, n, 512, interp=True)[1][0]
    plan, kws = launches(14, 2**20, 1024)  # k > LEAN_MAX_KP
    assert not plan.lean and kws[0]["PREFILTER"] and kws[0]["RADIX_BITS"] == 6
    plan, kws = launches(4096, 4096, 512)  # short rows
    assert plan.kind == "short" and kws[0]["PREFILTER"] and kws[0]["RADIX_BITS"] == 6
