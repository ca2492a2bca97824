"""The bracket kernel (``triton_bracket.run_bracket``): one program a row, a sampled
bracket of the k-th key, narrowing histograms over the row re-read, a write by running
counts. Exact against the oracle on rows that break selections.

Without a GPU it runs in Triton's interpreter with small programs (two warps, a vector a
thread a step) and small samples, so that rows of a few hundred elements take several
steps in runs of different lengths, brackets that miss, and narrowing reads."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from helpers import assert_same_topk
from test_triton_short import _adversarial

from deepselect import TopkOptions, oracle_topk
from deepselect.distributions import KINDS, make
from deepselect.keys import to_keys
from deepselect.ops.triton.bracket import _bkey, _inner, _runs
from deepselect.ops.triton.launch import PageMap, key_constants
from deepselect.ops.triton.short import SHORT_GROUPS
from deepselect.options import Order
from deepselect.triton_bracket import BracketPlan, bracket_constants, run_bracket

DEV = "cuda" if torch.cuda.is_available() else "cpu"
SMALL = BracketPlan(warps=2, vectors=1, sample=32)  # steps of 512 (16-bit) / 256 (fp32)
FOUR = BracketPlan(warps=4, vectors=1, sample=32)  # runs that end inside or before a window
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def check(x, k, plan=SMALL, values=True, **kw):
    """``run_bracket`` against the oracle, exactly (indices, values bit for bit, fills);
    the outputs start as garbage, so that an unwritten slot fails."""
    opt = TopkOptions(**kw)
    rows = x.shape[0]
    ov = torch.full((rows, k), 123.0, dtype=x.dtype, device=x.device) if values else None
    oi = torch.full((rows, k), -77, dtype=opt.index_dtype, device=x.device)
    run_bracket(x, k, opt, ov, oi, plan)
    want = oracle_topk(x, k, opt)
    if values:
        assert_same_topk((ov, oi), want, opt.order)
    else:  # the same indices; in the same order where the order is asked for
        got, exp = oi.cpu(), want[1].cpu()
        if Order(opt.order) == Order.NONE:
            got, exp = got.sort(dim=1).values, exp.sort(dim=1).values
        assert torch.equal(got, exp)
    return ov, oi


def test_constants():
    kw = dict(largest=True, order="none", has_window=0, off_tensor=False, write_values=True)
    bf = bracket_constants(torch.bfloat16, 2048, BracketPlan(), **kw)
    # the dispatch's plan: 4 warps, each a step of a 16-byte vector a thread (256 keys)
    assert bf["BLOCK"] == 1024 and bf["WARPS"] == 4 and bf["S"] == 256
    assert bf["LOG_NB"] == 8 and bf["KP"] == 2048
    fp = bracket_constants(torch.float32, 1000, BracketPlan(warps=8, vectors=2), **kw)
    assert fp["BLOCK"] == 2048 and fp["WARPS"] == 8 and fp["LOG_NB"] == 8 and fp["KP"] == 1024


@pytest.mark.parametrize("dtype", DTYPES)
def test_adversarial_rows(dtype):
    """Ties across the k-th, all equal, NaN / +-inf / signed zeros, keys differing only
    in the last bit, both signs and every magnitude; k from 1 to past the row, both
    directions."""
    x = _adversarial(700, dtype, seed=4)
    for k in (1, 39, 40, 41, 87, 350, 699, 700, 701):
        check(x, k, largest=k % 2 == 1)
    check(x, 40)  # the tie across the k-th from the top too (k = 40 above: from the bottom)


@pytest.mark.parametrize("kind", KINDS)
def test_distributions(kind):
    """Every distribution at k = N / 8 and N / 4, rows of several blocks, one not a
    multiple of the block or of a vector."""
    i = KINDS.index(kind)
    dtype = DTYPES[i % 3]
    check(make(kind, 2, 1200, dtype, DEV, seed=i), 150)
    check(make(kind, 1, 1001, dtype, DEV, seed=i), 250, largest=False)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_sample_far_off_takes_every_key(dtype):
    """Rows whose sampled positions hold the largest values (the bracket sits above the
    k-th key), the smallest (below it) or one value (a bracket one key wide, far from
    the k-th): exact through the bracket of every key. A sample of one key (its rank
    always outside) too."""
    n, s = 1024, SMALL.sample
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, n, generator=g, dtype=torch.float64)
    at = (torch.arange(s) * n) // s
    x[0, at] = 100.0 + torch.arange(s, dtype=torch.float64)
    x[1, at] = -100.0 - torch.arange(s, dtype=torch.float64)
    x[2] *= 10
    x[2, at] = 1.0  # a bracket of one key (no narrowing after it) that misses
    x = x.to(dtype).to(DEV)
    for k in (5, 100, 512, 600):  # 512: both ranks inside the sample
        check(x, k)
    check(x, 100, plan=BracketPlan(warps=1, vectors=1, sample=1))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("plan", [SMALL, FOUR], ids=["2warps", "4warps"])
def test_values_outside_the_window_never_count(dtype, plan):
    """The largest values of each row just outside its window (a begin off a vector,
    ends inside a step, windows of several steps a run, so that the first and last
    steps are read with bounds and the inner ones without): any of them counted would
    be selected."""
    rows, n = 6, 2000
    x = make("normal", rows, n, dtype, DEV, seed=11)
    begin = torch.tensor([3, 1, 0, 5, 17, 2], device=DEV)
    end = torch.tensor([1997, 1500, 1999, 1201, 1024, 777], device=DEV)
    for r in range(rows):
        lo, hi = int(begin[r]), int(end[r])
        x[r, max(lo - 3, 0) : lo] = 1e4 + r
        x[r, hi : hi + 3] = 2e4 + r
    for k in (5, 150, 600):
        for order in (Order.NONE, Order.VALUE, Order.INDEX):
            check(x, k, plan, begin=begin, end=end, order=order, largest=k != 150)


@triton.jit
def _bkey_kernel(raw_ptr, out_ptr, n, KEYS: tl.constexpr, BLOCK: tl.constexpr):
    """``bracket._bkey`` of ``n`` raw values (as the kernel loads them)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    raw = tl.load(raw_ptr + i, mask=i < n, other=0)
    tl.store(out_ptr + i, _bkey(raw, KEYS).to(tl.int64), mask=i < n)


def _raw_patterns(dtype) -> torch.Tensor:
    """Every 16-bit pattern; for fp32 the specials (±0, ±inf, NaNs of both signs and
    payloads, the extreme finite and subnormal ones) and 60,000 random patterns."""
    if dtype != torch.float32:
        return torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    g = torch.Generator().manual_seed(3)
    special = [0, 1, 2, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x7F800000, 0x7F800001,
               0x7FC00000, 0x7FFFFFFF]  # fmt: skip
    pos = torch.tensor(special, dtype=torch.int64)
    both = torch.cat([pos, pos | 0x80000000, torch.randint(0, 2**32, (60000,), generator=g)])
    return torch.where(both >= 2**31, both - 2**32, both).to(torch.int32)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
def test_keys_keep_the_contract_order(dtype, largest):
    """The bracket's keys order raw values as the contract's keys do (``keys.to_keys``:
    ±0 equal, every NaN equal and largest, the mirror where not ``largest``): over every
    16-bit pattern and a sample of fp32 ones, equal keys exactly where the contract's
    are equal, smaller exactly where smaller; all inside ``[0, KEY_MASK]``."""
    raw = _raw_patterns(dtype)
    c = key_constants(dtype, largest)
    keys = tuple(c[name] for name in SHORT_GROUPS["KEYS"])  # the kernels' KEYS bundle
    got = torch.empty(raw.numel(), dtype=torch.int64)
    _bkey_kernel[(triton.cdiv(raw.numel(), 4096),)](raw, got, raw.numel(), keys, 4096)
    want = to_keys(raw.view(dtype), largest=largest)
    order = torch.argsort(want, stable=True)
    w, g = want[order], got[order]
    assert bool((g >= 0).all()) and bool((g <= c["KEY_MASK"]).all())
    step_w, step_g = w[1:] - w[:-1], g[1:] - g[:-1]
    assert torch.equal(step_w == 0, step_g == 0)  # equal keys where the contract's are
    assert bool((step_g[step_w > 0] > 0).all())  # and increasing where they increase


@triton.jit
def _inner_kernel(lo_ptr, hi_ptr, out_ptr, W: tl.constexpr, C: tl.constexpr, V: tl.constexpr):
    """The runs' steps and their inner ones (``bracket._inner``) for window ``i``."""
    i = tl.program_id(0)
    lo = tl.load(lo_ptr + i)
    hi = tl.load(hi_ptr + i)
    a = (lo // V) * V
    _, _, nstep = _runs(a, hi, W, C)
    b_in, b_out = _inner(a, lo, hi, nstep, W, C)
    tl.store(out_ptr + 4 * i, a)
    tl.store(out_ptr + 4 * i + 1, nstep)
    tl.store(out_ptr + 4 * i + 2, b_in)
    tl.store(out_ptr + 4 * i + 3, b_out)


def test_inner_steps_lie_inside_the_window():
    """``_inner``'s steps, read without bounds and loaded a step ahead without a mask:
    every position of every run's steps ``[b_in, b_out)`` lies inside the window, for
    windows of every start and length against runs of 1-8 warps; a window of whole
    steps from a vector's start is inner throughout."""
    g = torch.Generator().manual_seed(5)
    lo = torch.randint(0, 300, (200,), generator=g, dtype=torch.int32)
    hi = lo + torch.randint(1, 3000, (200,), generator=g, dtype=torch.int32)
    lo[:20], hi[:20] = 0, torch.arange(1, 21, dtype=torch.int32) * 768  # whole steps
    for w, c, v in ((1, 32, 4), (2, 128, 4), (4, 256, 8), (8, 64, 8)):
        out = torch.zeros(200, 4, dtype=torch.int32, device=DEV)
        _inner_kernel[(200,)](lo.to(DEV), hi.to(DEV), out, W=w, C=c, V=v)
        got = zip(out.cpu().tolist(), lo.tolist(), hi.tolist(), strict=True)
        for (a, nstep, b_in, b_out), lo_, hi_ in got:
            assert 0 <= b_in <= b_out <= nstep
            for b in range(b_in, b_out):
                first = a + b * c  # run 0's step b
                last = a + (w - 1) * nstep * c + (b + 1) * c  # past the last run's step b
                assert lo_ <= first and last <= hi_, (lo_, hi_, a, nstep, b)
            if lo_ == 0 and hi_ % (w * c) == 0:
                assert (b_in, b_out) == (0, nstep), (hi_, w, c)


@pytest.mark.parametrize("extra", [0, 1], ids=["cap", "cap+1"])
def test_a_bracket_of_cap_keys_is_staged_one_more_is_read(extra):
    """fp32 rows whose sample misses (its positions hold the largest values), so that
    the first read bins every key by its top 8 bits, and whose k-th key lies in the bin
    of [0.5, 2) holding exactly ``CAP`` keys (staged in the write's read, then narrowed
    among themselves three times) or one more (narrowed by reading the row again); ties
    at the k-th key among them; unsorted, by value and by index."""
    cap = SMALL.warps * 256
    n, s = 2048, SMALL.sample
    g = torch.Generator().manual_seed(7)
    x = torch.rand(n, generator=g, dtype=torch.float64) * 0.25  # below the bin
    at = (torch.arange(s) * n) // s
    free = torch.ones(n, dtype=torch.bool)
    free[at] = False
    cols = torch.randperm(n, generator=g)
    cols = cols[free[cols]]
    mid = cols[: cap + extra]
    x[mid] = 0.5 + torch.rand(cap + extra, generator=g, dtype=torch.float64) * 1.4
    x[mid[::7]] = 1.25  # ties, the k-th among them
    x[mid.max()] = 1.9  # the bin's last key in index order, selected: none may be lost
    above = cols[cap + extra : cap + extra + 100]
    x[above] = 10.0 + torch.arange(100, dtype=torch.float64)
    x[at] = 100.0 + torch.arange(s, dtype=torch.float64)
    x = x[None].repeat(2, 1).to(torch.float32).to(DEV)
    rank_125 = int((x[0] > 1.25).sum())  # the ties at 1.25 start after these
    for k in (rank_125 + 3, s + 100 + 1, s + 100 + cap // 2):
        for order in (Order.NONE, Order.VALUE, Order.INDEX):
            check(x, k, order=order)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("plan", [SMALL, FOUR], ids=["2warps", "4warps"])
def test_outputs(dtype, plan):
    """Windows (a part, one shorter than k, an empty one, one starting off a vector),
    fills, per-row and scalar offsets, int64 indices, no values, by value and by index,
    a strided input; runs of two and four warps (some empty, some cut by the window)."""
    x = make("normal", 4, 900, dtype, DEV, seed=3)
    win = dict(
        begin=torch.tensor([0, 131, 600, 3], device=DEV),
        end=torch.tensor([900, 140, 600, 897], device=DEV),
    )
    check(x, 60, plan, **win, fill_index=-2, fill_value=0.25)
    check(x, 60, plan, **win, order=Order.VALUE, index_offset=torch.arange(4, device=DEV))
    check(x, 60, plan, **win, order=Order.INDEX, index_dtype=torch.int64, largest=False)
    check(x, 60, plan, values=False, index_offset=7, **win)
    check(x, 60, plan, **win, index_offset=torch.arange(4, device=DEV), fill_index=-3)
    wide = make("normal", 4, 1800, dtype, DEV, seed=4)
    check(wide[:, ::2], 100, plan)
    check(wide.t().contiguous().t()[:, :700], 100, plan, order=Order.VALUE)


def test_page_map():
    """Indices written as the slots of a paged cache: the oracle's positions mapped."""
    x = make("distinct32", 3, 900, torch.bfloat16, DEV, seed=5)
    g = torch.Generator().manual_seed(2)
    table = torch.randperm(2 * 300, generator=g).to(torch.int32).reshape(2, -1).to(DEV)
    r2b = torch.tensor([1, 0, 1], device=DEV)
    for order in (Order.INDEX, Order.VALUE):
        opt = TopkOptions(order=order)
        oi = torch.full((3, 40), -77, dtype=torch.int32, device=DEV)
        run_bracket(x, 40, opt, None, oi, SMALL, page=PageMap(table, 4, r2b))
        pos = oracle_topk(x, 40, opt)[1].long()
        want = table[r2b[:, None], pos // 4].long() * 4 + pos % 4
        assert torch.equal(oi.long().cpu(), want.cpu())


# ------------------------------------------------------------------------- on a GPU
@pytest.mark.gpu
@pytest.mark.parametrize(
    "rows,n,k,dtype",
    [
        (300, 16384, 2048, torch.bfloat16),
        (200, 8192, 2049, torch.float32),
        (64, 32768, 512, torch.float16),
        (100, 16384, 1, torch.bfloat16),
    ],
)
def test_gpu_full_size(rows, n, k, dtype):
    """The dispatch's launch (``BRACKET``: 8 warps, a 16-byte vector a thread, a sample
    of 256) on every shape, not only the ones the dispatch routes here (those run in
    ``test_gpu_dispatch_takes_it``), exact against the oracle on rows that break
    selections, windows too."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    for kind in ("normal", "ascending", "distinct32", "nan_hotspots", "all_equal", "tiny"):
        check(make(kind, rows, n, dtype, "cuda", seed=rows + k), k, plan=BracketPlan())
    x = make("normal", rows, n, dtype, "cuda", seed=1)
    g = torch.Generator().manual_seed(3)
    end = torch.randint(n // 2, n + 1, (rows,), generator=g).cuda()
    begin = torch.randint(0, n // 4, (rows,), generator=g).cuda()
    check(x, k, plan=BracketPlan(), begin=begin, end=end, order=Order.VALUE)
    check(x, k, plan=BracketPlan(), end=end, largest=False, index_dtype=torch.int64)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "rows,n,dtype",
    [
        (512, 16384, torch.bfloat16),
        (4096, 8192, torch.float16),
        (512, 8192, torch.float32),
        (512, 16384, torch.float32),
    ],
)
def test_gpu_dispatch_takes_it(rows, n, dtype):
    """Where the dispatch routes a shape here (``triton_short.BRACKET_KP``), ``topk_rows``
    runs the bracket kernel's launch: exact against the oracle, unsorted and by index,
    with a window."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from deepselect import topk_rows
    from deepselect.triton_short import describe, short_path

    sm = torch.cuda.get_device_properties(0).multi_processor_count
    x = make("distinct32", rows, n, dtype, "cuda", seed=9)
    assert describe(short_path(x, 2048, TopkOptions(), sm)) == "bracket"
    end = torch.full((rows,), n - 5, device="cuda")
    for kw in (dict(), dict(order=Order.INDEX, end=end)):
        got = topk_rows(x, 2048, **kw)
        assert_same_topk(got, oracle_topk(x, 2048, TopkOptions(**kw)), kw.get("order", "none"))
