"""The large-k candidates for many rows of a few slices (``triton_short.large_k_plan``):
exact against the oracle on rows that break selections, and the dispatch that sends
shapes to them only once ``LARGE_K_SLICES`` switches it on.

Without a GPU the kernel runs in Triton's interpreter with small slices
(``ShortConfig(nmax=...)``), so that a row of a few hundred elements is held by one
program at up to 32 elements a thread, as 16K and 32K rows are on a GPU."""

from __future__ import annotations

import pytest
import torch
from helpers import assert_same_topk
from test_triton_short import FEW, _adversarial

from deepselect import TopkOptions, oracle_topk, triton_short
from deepselect.distributions import KINDS, make
from deepselect.options import Order
from deepselect.triton_short import (
    LARGE_K_MIN_KP,
    LARGE_K_VARIANTS,
    ShortConfig,
    describe,
    large_k_plan,
    run_short,
    short_path,
)

DEV = "cuda" if torch.cuda.is_available() else "cpu"
SMALL = ShortConfig(nmax=256, min_seg=64, **FEW)  # rows of up to 1024 held by one program


def check_large(x, k, variant, warps=32, cfg=SMALL, sm=4, **kw):
    """``large_k_plan``'s ``variant`` for ``x`` against the oracle, exactly (indices,
    values bit for bit, fills)."""
    opt = TopkOptions(**kw)
    rows, n = x.shape
    bits = x.element_size() * 8
    by_value = Order(opt.order) == Order.VALUE
    interp = triton_short._interpreting()
    plan = large_k_plan(rows, n, k, sm, cfg, interp, bits, by_value, variant, warps)
    ov = torch.full((rows, k), 123.0, dtype=x.dtype, device=x.device)
    oi = torch.full((rows, k), -77, dtype=opt.index_dtype, device=x.device)
    run_short(x, k, opt, ov, oi, plan)
    assert_same_topk((ov, oi), oracle_topk(x, k, opt), opt.order, msg=describe(plan))
    return plan


# ------------------------------------------------------------------------- the plan
def test_large_k_plans():
    cfg = ShortConfig()
    lean = large_k_plan(4096, 16384, 2048, 132, cfg, False, 16, False)
    (lv,) = lean.levels
    # one program a row, the whole row held at 16 a thread, no prefilter
    assert lean.kind == "short" and lean.lean and lv.nmax == 16384 and lv.num_warps == 32
    assert describe(lean) == "short nmax=16384 warps=32 lean"
    assert not triton_short.prefilters(lean, lv)
    flags = (("largest", True), ("order", "none"), ("has_window", 0), ("off_tensor", False))
    flags += (("write_values", True),)
    (kw,) = triton_short._launch_kwargs(torch.bfloat16, lean, flags, (), False)
    assert kw["RADIX_BITS"] == triton_short.LEAN_BITS and not kw["PREFILTER"]
    assert kw["NT"] == 1024 and "maxnreg" not in kw  # (a lean split's cap is for 16 warps)
    # 16 warps: 32 a thread, uncapped (the 64-register cap is for 16 a thread)
    (lv16,) = large_k_plan(4096, 16384, 512, 132, cfg, False, 16, False, "lean", 16).levels
    assert lv16.num_warps == 16 and lv16.maxnreg(512) is None
    pre = large_k_plan(4096, 32768, 2048, 132, cfg, False, 16, False, "prefilter")
    assert not pre.lean and triton_short.prefilters(pre, pre.levels[0])
    assert pre.levels[0].nmax == 32768 and pre.levels[0].num_warps == 32
    split = large_k_plan(4096, 16384, 2048, 132, cfg, False, 16, False, "split")
    assert split.kind == "split" and split.levels[0].L == cfg.nmax and not split.passes
    assert split.levels[-1].nseg == 1 and not split.levels[-1].dst_cand
    lean_split = large_k_plan(4096, 16384, 2048, 132, cfg, False, 16, False, "split-lean")
    assert lean_split.levels == split.levels and lean_split.lean and not split.lean
    each = triton_short._launch_kwargs(torch.bfloat16, lean_split, flags, (), False)
    assert all(kw["maxnreg"] == triton_short.LEAN_REGS for kw in each)
    with pytest.raises(ValueError, match="variant"):
        large_k_plan(4096, 16384, 2048, 132, cfg, False, 16, False, "sorting")
    with pytest.raises(ValueError, match="no split"):  # segments of nmax hold 4 k
        large_k_plan(4096, 16384, 4096, 132, cfg, False, 16, False, "split")
    # few rows: the split, not the radix passes their dispatch takes
    few = large_k_plan(64, 16384, 2048, 132, cfg, False, 32, False, "split")
    assert few.kind == "split" and not few.passes and few.levels[0].L == cfg.nmax
    with pytest.raises(ValueError, match="n <="):
        large_k_plan(4096, 4 * 8192 + 1, 2048, 132, cfg, False, 16, False)


def test_dispatch_takes_large_k_only_once_switched_on(monkeypatch):
    opt = TopkOptions()

    def path(rows, n, k, dtype=torch.bfloat16, order="none"):
        x = torch.empty(rows, n, dtype=dtype, device="meta")
        return describe(short_path(x, k, TopkOptions(order=order), 132))

    # below LARGE_K_MIN_KP, past the slices, rows of one slice, few rows: unchanged
    same = [(4096, 16384, LARGE_K_MIN_KP // 2), (4096, 4 * 8192 + 1, 2048)]
    same += [(4096, 8192, 2048), (64, 16384, 2048), (4, 16384, 2048), (512, 16384, 512)]
    off = {s: path(*s) for s in same + [(4096, 16384, 2048), (512, 32768, 2048)]}
    assert off[(4096, 16384, 2048)] == "stream" and off[(512, 32768, 2048)] == "stream"
    monkeypatch.setattr(triton_short, "LARGE_K_SLICES", 4)
    triton_short._plan.cache_clear()
    try:
        assert path(4096, 16384, 2048) == "short nmax=16384 warps=32 lean"
        assert path(512, 32768, 1024) == "short nmax=32768 warps=32 lean"
        assert path(512, 16384, 2048, order="value") == "short nmax=16384 warps=32 lean"
        assert path(512, 16384, 2048, torch.float32) == "short nmax=16384 warps=32 lean"
        assert {s: path(*s) for s in same} == {s: off[s] for s in same}
    finally:
        monkeypatch.undo()
        triton_short._plan.cache_clear()
    assert short_path(torch.empty(4096, 16384, device="meta"), 2048, opt, 132) is None


# ------------------------------------------------------------------ exact selections
@pytest.mark.parametrize("variant", LARGE_K_VARIANTS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_large_k_adversarial(variant, dtype):
    """Rows of 2-4 slices at k = N / 8 and around it: ties across the k-th, all equal,
    NaN / +-inf / signed zeros (largest=False too), a leading digit every key shares;
    orders, windows shorter than k, fills and offsets."""
    x = _adversarial(500, dtype, seed=LARGE_K_VARIANTS.index(variant))
    rows = x.shape[0]
    for k in (1, 62, 63, 64, 128) if variant in ("lean", "prefilter") else (1, 62, 63, 64):
        check_large(x, k, variant, largest=k % 2 == 0)  # (a split takes k <= nmax / 4)
    check_large(x, 64, variant, order=Order.VALUE, largest=False)
    begin = torch.tensor([0, 5, 450, 0, 30, 499][:rows], device=DEV)
    end = torch.tensor([500, 350, 500, 41, 31, 500][:rows], device=DEV)
    check_large(x, 64, variant, begin=begin, end=end, order=Order.INDEX, fill_index=-5)
    check_large(x, 64, variant, end=end, index_offset=7, index_dtype=torch.int64)


@pytest.mark.parametrize("kind", KINDS)
def test_large_k_distributions(kind):
    """Every distribution, at the indexer's k = N / 8 on a row of a slice and a
    quarter, by the program that holds the whole row, with and without the
    prefilter."""
    i = KINDS.index(kind)
    x = make(kind, 2, 320, (torch.bfloat16, torch.float32)[i % 2], DEV, seed=i)
    check_large(x, 40, "lean")
    check_large(x, 40, "prefilter")


@pytest.mark.parametrize("variant", ["lean", "prefilter"])
def test_large_k_held_at_32_a_thread(variant):
    """A program holding 32 elements a thread (a 32K row at 32 warps; here 1,024
    elements at one warp): its running counts span the longer runs."""
    x = make("distinct32", 2, 1000, torch.bfloat16, DEV, seed=3)
    plan = check_large(x, 125, variant, warps=1)
    assert plan.levels[0].nmax == 1024 and plan.levels[0].num_warps == 1
    check_large(make("all_equal", 1, 1000, torch.float32, DEV), 125, variant, 1)


# ------------------------------------------------------------------------- on a GPU
@pytest.mark.gpu
@pytest.mark.parametrize("variant", LARGE_K_VARIANTS)
@pytest.mark.parametrize(
    "rows,n,k,dtype",
    [
        (512, 16384, 2048, torch.bfloat16),
        (300, 32768, 2048, torch.bfloat16),
        (300, 16384, 2048, torch.float32),
        (200, 12345, 1024, torch.bfloat16),
    ],
)
def test_gpu_large_k_full_size(variant, rows, n, k, dtype):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    cfg = ShortConfig()
    for kind in ("normal", "distinct32", "nan_hotspots", "all_equal"):
        x = make(kind, rows, n, dtype, "cuda", seed=rows + k)
        check_large(x, k, variant, cfg=cfg, sm=132)
    check_large(x, k, variant, cfg=cfg, sm=132, order=Order.VALUE, largest=False)
