"""Wide short rows (``triton_short.wide_short_plan``): many rows of 16-bit keys of one to
two slices at large k, each held whole by one program at 32 elements a thread. Exact
against the oracle on rows that break selections, and the dispatch that sends exactly
those shapes there (its neighbours keep their plans).

Without a GPU the kernel runs in Triton's interpreter with small slices
(``ShortConfig(nmax=512)``: a row of up to 1,024 elements at one warp), so that a
program holds 32 elements a thread, as a 16K row at 16 warps does on a GPU."""

from __future__ import annotations

import pytest
import torch
from helpers import SHORT, assert_same_topk
from test_triton_short import _adversarial

from deepselect import TopkOptions, oracle_topk, triton_short
from deepselect.distributions import KINDS, make
from deepselect.options import Order
from deepselect.triton_short import (
    BRACKET_KP,
    PER_THREAD,
    WIDE_SHORT_MIN_KP,
    WIDE_SHORT_SLICES,
    ShortConfig,
    describe,
    run_short,
    short_path,
    wide_short_plan,
)

DEV = "cuda" if torch.cuda.is_available() else "cpu"
WIDE = SHORT  # nmax = 512: rows of 513..1024 held by one warp, 32 a thread


def check_wide(x, k, cfg=WIDE, **kw):
    """``wide_short_plan`` for ``x`` against the oracle, exactly (indices, values bit
    for bit, fills)."""
    opt = TopkOptions(**kw)
    rows, n = x.shape
    plan = wide_short_plan(n, k, cfg, triton_short._interpreting())
    ov = torch.full((rows, k), 123.0, dtype=x.dtype, device=x.device)
    oi = torch.full((rows, k), -77, dtype=opt.index_dtype, device=x.device)
    run_short(x, k, opt, ov, oi, plan)
    assert_same_topk((ov, oi), oracle_topk(x, k, opt), opt.order, msg=describe(plan))
    return plan


def path(rows, n, k, dtype=torch.bfloat16, order="none", sm=132):
    x = torch.empty(rows, n, dtype=dtype, device="meta")
    return describe(short_path(x, k, TopkOptions(order=order), sm))


# ------------------------------------------------------------------------- the plan
def test_wide_short_plan():
    cfg = ShortConfig()
    plan = wide_short_plan(16384, 2048, cfg, False)
    (lv,) = plan.levels
    # one program a row, the whole row at 16 warps (32 a thread), the short selection
    assert plan.kind == "short" and not plan.lean and not plan.passes and not plan.in_launch
    assert lv.nmax == 16384 and lv.num_warps == 16 and lv.nseg == 1 and not lv.dst_cand
    assert lv.nmax // (32 * lv.num_warps) == 2 * PER_THREAD
    assert describe(plan) == "short nmax=16384 warps=16"
    assert triton_short.prefilters(plan, lv)
    flags = (("largest", True), ("order", "none"), ("has_window", 0), ("off_tensor", False))
    flags += (("write_values", True),)
    for k in (2048, 1024, 513):
        each = wide_short_plan(16384, k, cfg, False)
        (kw,) = triton_short._launch_kwargs(torch.bfloat16, each, flags, (), False)
        assert kw["RADIX_BITS"] == triton_short.RADIX_BITS and kw["PREFILTER"]
        assert kw["NT"] == 512 and kw["NMAX"] == 16384 and kw["num_warps"] == 16
        # 32 a thread spill under the 64-register cap of 16 warps at 16 a thread
        assert "maxnreg" not in kw, k
    odd = wide_short_plan(12345, 1024, cfg, False).levels[0]
    assert odd.L == 12345 and odd.nmax == 16384 and odd.num_warps == 16
    # in the interpreter: one warp for a row of up to two slices of 512
    (small,) = wide_short_plan(1000, 125, WIDE, True).levels
    assert small.nmax == 1024 and small.num_warps == 1
    for n, k in ((8192, 2048), (16385, 2048), (16384, 8193)):
        with pytest.raises(ValueError, match="wide_short_plan takes"):
            wide_short_plan(n, k, cfg, False)


def test_dispatch_routes_many_16_bit_rows_of_two_slices_at_large_k():
    wide = "short nmax=16384 warps=16"
    for rows, n, k in [(512, 16384, 1024), (4096, 16384, 1024), (300, 12345, 1024),
                       (4096, 16384, WIDE_SHORT_MIN_KP // 2 + 1)]:  # fmt: skip
        assert path(rows, n, k) == wide, (rows, n, k)
        assert path(rows, n, k, torch.float16) == wide, (rows, n, k)
    # at kp = BRACKET_KP, unsorted or by index: the bracket kernel (sorted: held whole)
    for rows, n, k in [(512, 16384, 2048), (4096, 16384, 2048), (4096, 8193, 2048),
                       (300, 12345, BRACKET_KP // 2 + 1)]:  # fmt: skip
        assert path(rows, n, k) == "bracket", (rows, n, k)
        assert path(rows, n, k, torch.float16, order="index") == "bracket", (rows, n, k)
        assert path(rows, n, k, order="value") == wide, (rows, n, k)
    assert path(512, 16384, 2048, sm=78) == "bracket"
    # rows of one slice: the bracket kernel from half a slice, where they crowd the SMs
    assert path(4096, 8192, 2048) == "bracket"
    assert path(4096, 4097, 2048) == "bracket"
    assert path(4096, 8192, 2048, order="value") == "short nmax=8192 crowded"
    assert path(4096, 4096, 2048) == "short nmax=4096 crowded"
    assert path(1024, 4096, 2048) == "short nmax=4096 crowded"
    assert path(395, 8192, 2048) == "short nmax=8192"
    # 32-bit keys: rows of one slice that crowd the SMs too, not wider rows
    assert path(4096, 8192, 2048, torch.float32) == "bracket"
    assert path(4096, 8192, 2048, torch.float32, order="value") == "short nmax=8192 crowded"
    assert path(395, 8192, 2048, torch.float32) == "short nmax=8192"
    # 32-bit rows of up to two slices too, where the radix passes do not hold them
    assert path(512, 16384, 2048, torch.float32) == "bracket"
    assert path(4096, 12345, 2048, torch.float32) == "bracket"
    assert path(512, 16384, 2048, torch.float32, order="value") == "stream"
    # the neighbours keep their plans: longer 32-bit rows, longer rows, k <= 512, few
    # rows (the split or its radix passes)
    assert path(512, 16385, 2048, torch.float32) == "stream"
    assert path(512, 2 * 16384, 2048) == "stream"
    assert path(512, WIDE_SHORT_SLICES * 8192 + 1, 2048) == "stream"
    assert path(4096, 16384, WIDE_SHORT_MIN_KP // 2) == "stream"
    assert path(4096, 16384, 256) == "stream"
    assert path(4, 16384, 2048).startswith("split")
    assert path(64, 16384, 1024).startswith("split")
    # k past a split's segment: the stream as before (kp 4096 untimed)
    assert path(4096, 16384, 2049) == "stream"
    assert short_path(torch.empty(4096, 16385, device="meta"), 2048, TopkOptions(), 132) is None


# ------------------------------------------------------------------ exact selections
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_wide_short_adversarial(dtype):
    """Rows of two slices at k = N / 8 and around it, at 32 a thread: ties across the
    k-th, all equal, NaN / +-inf / signed zeros (largest=False too), a leading digit
    every key shares; orders, windows shorter than k, fills and offsets."""
    n = 1000
    x = _adversarial(n, dtype, seed=3 if dtype == torch.float16 else 2)
    rows = x.shape[0]
    for k in (1, 40, 124, 125, 128, 512):
        plan = check_wide(x, k, largest=k % 2 == 0)
        assert plan.levels[0].nmax // (32 * plan.levels[0].num_warps) == 2 * PER_THREAD
    check_wide(x, 125, order=Order.VALUE, largest=False)
    begin = torch.tensor([0, 5, 900, 0, 60, 999][:rows], device=DEV)
    end = torch.tensor([1000, 700, 1000, 81, 61, 1000][:rows], device=DEV)
    check_wide(x, 125, begin=begin, end=end, order=Order.INDEX, fill_index=-5)
    check_wide(x, 125, end=end, index_offset=7, index_dtype=torch.int64)


@pytest.mark.parametrize("kind", KINDS)
def test_wide_short_distributions(kind):
    """Every distribution at the indexer's k = N / 8, on rows of a slice and a
    quarter and of two whole slices."""
    i = KINDS.index(kind)
    dtype = (torch.bfloat16, torch.float16)[i % 2]
    check_wide(make(kind, 2, 640, dtype, DEV, seed=i), 80)
    check_wide(make(kind, 1, 1024, dtype, DEV, seed=i), 128)


# ------------------------------------------------------------------------- on a GPU
@pytest.mark.gpu
@pytest.mark.parametrize(
    "rows,n,k,dtype",
    [
        (512, 16000, 1024, torch.bfloat16),
        (300, 16384, 1024, torch.bfloat16),
        (200, 12345, 1024, torch.float16),
        (300, 8200, 600, torch.bfloat16),
    ],
)
def test_gpu_wide_short_full_size(rows, n, k, dtype):
    """The routed shapes as the dispatch plans them, exact against the oracle."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    cfg = ShortConfig()
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.empty(rows, n, dtype=dtype, device="meta")
    assert short_path(x, k, TopkOptions(), sm) == wide_short_plan(n, k, cfg, False)
    for kind in ("normal", "distinct32", "nan_hotspots", "all_equal"):
        x = make(kind, rows, n, dtype, "cuda", seed=rows + k)
        check_wide(x, k, cfg=cfg)
    check_wide(x, k, cfg=cfg, order=Order.VALUE, largest=False)
