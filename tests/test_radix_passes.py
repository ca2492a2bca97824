"""The split's radix passes and the shared-memory histograms, exactly.

The radix passes select over a split's segments in place of its merges: each digit's
histogram summed across a row's programs, one or several segments a program, every
program writing its own slots, in one cooperative launch or, where a device refuses
that, one launch per phase. The interpreter's own plan never takes them, so without a
GPU the tests run the plan a cooperatively launching GPU makes
(:func:`helpers.gpu_plan`) on a small register slice (``helpers.SPLIT``), against the
oracle and bit for bit against the split's levels. With a GPU (marker ``gpu``) the
passes run at full size, and so do the histograms by shared-memory atomics and the
16-byte vector loads, in every plan that takes them."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch
from helpers import SM, SPLIT, assert_same_topk, gpu_plan, same_bits, the_split, warm_then_capture
from helpers import check_plan as check
from helpers import run_plan as run

from deepselect import TopkOptions, oracle_topk, triton_short
from deepselect.distributions import KINDS, make
from deepselect.options import Order
from deepselect.triton_short import ShortConfig, _warps, describe, run_short, short_path

DEV = "cuda" if torch.cuda.is_available() else "cpu"


# ------------------------------------------------------------------ radix passes


@pytest.mark.parametrize(
    "kind, dtype",
    [
        ("normal", torch.bfloat16),
        ("distinct32", torch.float32),  # ties across segments
        ("all_equal", torch.bfloat16),
        ("nan_hotspots", torch.float32),
        ("bits_negative", torch.float16),
    ],
)
def test_radix_passes_match_the_oracle_and_the_levels(kind, dtype):
    """The split as radix passes over its segments (every digit's histogram summed
    across the row's programs, every program writing its own slots): the oracle's top
    k, unsorted and largest=False, and by index bit for bit the levels' result; ties
    across segments taken by index; sorted by value it takes the levels."""
    x = make(kind, 2, 700, dtype, DEV, seed=KINDS.index(kind))
    how = dict(cfg=SPLIT, sm=12, passes=True)  # six segments a row, one a program
    plan = gpu_plan(x, 12, TopkOptions(), 12, SPLIT)
    assert plan.passes and plan.pass_tiles == 1 and " passes L=" in describe(plan)
    check(x, 12, **how, order=Order.NONE, largest=False)
    got = check(x, 12, **how, order=Order.INDEX)
    same_bits(got, run(x, 12, cfg=SPLIT, sm=12, order=Order.INDEX)[0])
    check(x, 12, **how, order=Order.VALUE)


def test_plan_radix_passes_where_one_launch_holds_them():
    """On a GPU, where Triton launches cooperatively, a split unsorted or by index with
    k > 1 takes the radix passes where its rows' segments, as many as there are SMs
    and at least 1024 long, fit one launch (up to eight a program, for 16-bit keys);
    with no split (k > nmax / 4) they also take any k; sorted by value they take the
    split or the stream. The interpreter never takes them."""
    if not triton_short.COOPERATIVE:
        pytest.skip("this Triton cannot launch cooperatively")

    def plan(rows, n, k, bits=16, by_value=False, sm=132, interp=False):
        return triton_short._plan(rows, n, k, sm, ShortConfig(), interp, bits, by_value)

    for rows, n, L in ((1, 2**20, 8192), (6, 65536, 4096), (1, 65536, 1024), (2, 129_280, 2048)):
        p = plan(rows, n, 512)
        assert p.passes and p.grid_sync and p.pass_level.L == L, describe(p)
        assert rows * p.pass_level.nseg <= 132 and p.pass_level.nseg == -(-n // L)
        assert p.pass_level.num_warps == _warps(L) and p.levels[0].L == 8192  # the split too
        assert not plan(rows, n, 512, interp=True).passes
    assert not plan(9, 2**20, 512).passes  # 1152 segments of 8192, 10 a program
    assert plan(7, 2**20, 512, sm=896).passes
    wide = plan(1, 2**20, 4096)  # no split: 4 k > nmax
    assert wide.passes and wide.grid_sync and wide.levels == (wide.pass_level,)
    assert plan(1, 2**20, 4096, by_value=True) is None
    assert plan(1, 2**20, 4096, interp=True) is None
    assert plan(1, 2**20, 512, by_value=True).kind == "split"
    assert plan(1, 4096, 512).kind == "short"
    assert plan(1, 2**20, 2).passes and not plan(1, 2**20, 1).passes  # a cheap split
    # up to eight segments a program (PASS_MAX_TILES) where the rows need them
    p = plan(1, 2**21, 1231)
    assert p.passes and p.grid_sync and p.pass_tiles == 2 and p.pass_level.nseg == 256
    assert plan(1, 2**22, 64).pass_tiles == 4 and plan(2, 2**20, 512).pass_tiles == 2
    assert plan(5, 2**20, 512).pass_tiles == 5 and plan(6, 2**20, 512).pass_tiles == 6
    assert plan(1, 2**23, 512).pass_tiles == 8 and plan(7, 2**20, 512).pass_tiles == 8
    assert not plan(1, 2**24, 512).passes and not plan(9, 2**20, 512).passes
    assert plan(1, 2**20, 1231).pass_tiles == 1
    assert not plan(2, 2**20, 512, bits=32).passes  # 32-bit keys: one segment a program
    # k > 1024: the passes also take rows that the split leaves to the stream
    assert plan(64, 16384, 2048, bits=32).passes  # 128 segments of 8192, one a program
    assert plan(64, 32768, 2048).pass_tiles == 2 and plan(32, 2**17, 1100).pass_tiles == 4
    assert plan(64, 16384, 1024, bits=32) is None  # kp 1024: the stream
    assert plan(64, 16384, 2048, bits=32, by_value=True) is None
    assert plan(64, 32768, 2048, bits=32) is None  # 2 segments a program of 32-bit keys
    assert plan(66, 2**17, 2048).pass_tiles == 8  # 16 segments a row, two programs
    assert plan(67, 2**17, 2048) is None  # too many
    # too many too, rows of up to two slices: the bracket kernel (sorted 16-bit keys: a
    # wide short row; longer 32-bit rows: the stream)
    assert plan(512, 16384, 2048).kind == "bracket"
    assert plan(512, 16384, 2048, bits=32).kind == "bracket"
    assert plan(512, 16385, 2048, bits=32) is None
    whole = plan(512, 16384, 2048, by_value=True)
    assert whole.kind == "short" and not whole.passes and whole.levels[0].nmax == 16384


@pytest.mark.parametrize("rows, n, sm, tiles", [(2, 700, 4, 3), (3, 750, 4, 6), (2, 700, 6, 2)])
def test_radix_passes_several_segments_a_program(rows, n, sm, tiles):
    """Where a row's segments outnumber its programs, each program takes several
    (read again every phase, each segment's load issued before the one ahead is
    written; the write staged at the output slots): bit for bit the levels, by index
    with ties across segments and programs; windows, offsets and fills."""
    x = make("distinct32", rows, n, torch.bfloat16, DEV, seed=rows)
    plan = gpu_plan(x, 12, TopkOptions(), sm, SPLIT)
    assert plan.passes and plan.pass_tiles == tiles, describe(plan)
    how = dict(cfg=SPLIT, sm=sm)
    got = check(x, 12, **how, passes=True, order=Order.INDEX)
    same_bits(got, run(x, 12, **how, order=Order.INDEX)[0])
    begin = torch.tensor([5, 130, 600][:rows], device=DEV)
    end = torch.tensor([n, 390, 605][:rows], device=DEV)
    win = dict(**how, begin=begin, end=end, fill_index=-2, fill_value=0.25)
    check(x, 12, **win, passes=True, index_offset=torch.arange(rows, device=DEV), largest=False)


@pytest.mark.parametrize("sm, tiles", [(24, 1), (8, 4)])
def test_radix_passes_write(sm, tiles):
    """The passes' write, one segment a program (its selection written directly) or
    several (each program's selected positions staged at their output slots, then
    its run of slots written out at once, indices mapped, values read): bit for bit
    the levels; windows (a part, fewer valid than k, an empty one), fills, per-row
    offsets, int64 indices, no values, smallest first, and a page map."""
    from deepselect.ops.triton.launch import PageMap

    x = make("distinct32", 3, 900, torch.bfloat16, DEV, seed=5)
    plan = gpu_plan(x, 12, TopkOptions(), sm, SPLIT)
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
        got = check(x, 12, cfg=SPLIT, sm=sm, passes=True, **kw)
        same_bits(got, run(x, 12, cfg=SPLIT, sm=sm, **kw)[0])
    g = torch.Generator().manual_seed(2)
    table = torch.randperm(2 * 300, generator=g).to(torch.int32).reshape(2, -1).to(DEV)
    page = PageMap(table, 4, torch.tensor([1, 0, 1], device=DEV))
    opt = TopkOptions(order=Order.INDEX, **win)
    got = []
    for plan in (gpu_plan(x, 12, opt, sm, SPLIT), short_path(x, 12, opt, sm, SPLIT)):
        oi = torch.full((3, 12), -77, dtype=torch.int32, device=DEV)
        run_short(x, 12, opt, None, oi, plan, page=page)
        got.append(oi)
    assert torch.equal(got[0], got[1])
    assert (got[0][1, 9:] == opt.fill_index).all() and (got[0][2] == opt.fill_index).all()


@pytest.mark.parametrize(
    "sm, tiles, dtype",
    [(24, 1, torch.bfloat16), (24, 1, torch.float32), (8, 4, torch.bfloat16)],
)
def test_radix_passes_whole_segments(sm, tiles, dtype):
    """Segments wholly inside the row's window (counted without a validity mask where
    a program takes several), cut by the window's ends, by the row's end (N not a
    multiple of the segment) and wholly outside it: bit for bit the levels."""
    x = make("distinct32", 3, 1000, dtype, DEV, seed=7)
    plan = gpu_plan(x, 12, TopkOptions(), sm, SPLIT)
    assert plan.passes and plan.pass_tiles == tiles, describe(plan)
    begin = torch.tensor([0, 128, 300], device=DEV)  # on a segment's start, or not
    end = torch.tensor([1000, 640, 301], device=DEV)
    for kw in (dict(), dict(begin=begin, end=end, order=Order.INDEX, fill_index=-3)):
        got = check(x, 12, cfg=SPLIT, sm=sm, passes=True, **kw)
        same_bits(got, run(x, 12, cfg=SPLIT, sm=sm, **kw)[0])


def test_radix_passes_refused_cooperative_launch_runs_by_phase(monkeypatch):
    """A device that refuses the passes' cooperative launch (fewer SMs to the
    process than it has) gets the same result from one launch per phase, a warning
    once, and no further attempt with as many programs; a launch of fewer programs
    is still tried."""
    real = triton_short._passes_kernel  # the launch site's kernel
    tried = []

    class Refusing:
        def __getitem__(self, grid):
            def launch(*args, **kw):
                if kw.get("launch_cooperative_grid"):
                    tried.append(grid)
                    raise RuntimeError("Triton Error [CUDA]: too many blocks in cooperative launch")
                return real[grid](*args, **kw)

            return launch

    monkeypatch.setattr(triton_short, "_passes_kernel", Refusing())
    monkeypatch.setattr(triton_short, "_COOPERATIVE_REFUSED", {})
    x = make("distinct32", 2, 700, torch.bfloat16, DEV, seed=3)
    opt = TopkOptions(order=Order.INDEX)
    plan = dataclasses.replace(gpu_plan(x, 12, opt, SM, SPLIT), grid_sync=True)
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
    plan = dataclasses.replace(gpu_plan(one, 12, opt, SM, SPLIT), grid_sync=True)
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
    win = dict(cfg=SPLIT, sm=8, passes=True, want_kind="split", begin=begin, end=end)
    check(x, 12, **win, index_offset=off, fill_index=-2, fill_value=0.25)
    check(x, 12, **win, order=Order.INDEX, index_dtype=torch.int64, values=False, largest=False)


def test_radix_passes_write_physical_slots():
    """With a page map the passes' write launch maps every position to its cache
    slot (and leaves fills as fills): bit for bit the levels' paged output."""
    from deepselect.ops.triton.launch import PageMap

    x = make("distinct32", 3, 700, torch.float32, DEV, seed=2)
    g = torch.Generator().manual_seed(2)
    table = torch.randperm(2 * 200, generator=g).to(torch.int32).reshape(2, -1).to(DEV)
    page = PageMap(table, 4, torch.tensor([1, 0, 1], device=DEV))
    opt = TopkOptions(order=Order.INDEX, begin=torch.tensor([0, 3, 690], device=DEV))
    passes, split = gpu_plan(x, 12, opt, 24, SPLIT), short_path(x, 12, opt, 24, SPLIT)
    assert passes.passes and passes.pass_tiles == 1 and not split.passes, describe(passes)
    got = []
    for plan in (passes, split):
        oi = torch.full((3, 12), -77, dtype=torch.int32, device=DEV)
        run_short(x, 12, opt, None, oi, plan, page=page)
        got.append(oi)
    assert torch.equal(got[0], got[1])
    assert (got[0][2, 10:] == opt.fill_index).all()  # 10 valid in the last row


# ---------------------------------------------------------- shared-memory histograms
def test_smem_histograms_where_compiled_by_a_known_triton(monkeypatch):
    """The shared-memory histograms are asked of GPU builds by Triton 3.6 or later
    (whose tl.histogram reserves their bytes), never of the interpreter."""
    from deepselect.ops.triton import launch

    monkeypatch.setattr(launch, "_interpreting", lambda: False)
    for version, want in (("3.6.0", True), ("3.9.1", True), ("4.0.0", True), ("3.5.1", False)):
        monkeypatch.setattr(launch.triton, "__version__", version)
        assert triton_short.smem_hist() is want, version
    monkeypatch.setattr(launch, "_interpreting", lambda: True)
    monkeypatch.setattr(launch.triton, "__version__", "3.6.0")
    assert not triton_short.smem_hist()


# ------------------------------------------------------------------ full size, GPU
def _full_plan(x, k, opt, sm, mode):
    """The plan for this call (``mode`` "plan"), the split it holds ("split": the
    plan sorted by value takes) or its radix passes one launch per phase ("phase":
    where the device refuses their cooperative launch)."""
    plan = short_path(x, k, opt, sm)
    if mode == "split":
        return the_split(plan)
    if mode == "phase":
        assert plan.passes, describe(plan)
        return dataclasses.replace(plan, grid_sync=False)
    return plan


@pytest.mark.gpu
@pytest.mark.parametrize(
    "rows,n,k,dtype,mode",
    [
        (1, 2**20, 512, torch.bfloat16, "plan"),
        (6, 2**16, 2048, torch.bfloat16, "plan"),
        (6, 129_280, 512, torch.float32, "plan"),
        (6, 129_280, 512, torch.float32, "phase"),
        (2, 2**21 - 3, 1231, torch.float16, "phase"),
        (6, 2**20, 512, torch.bfloat16, "plan"),  # six segments a program
        (3, 700_001, 100, torch.bfloat16, "plan"),  # two, odd N
    ],
)
def test_gpu_radix_passes(rows, n, k, dtype, mode):
    """The radix passes at full size, their programs racing for each row's counters
    (in one cooperative launch, one or several segments a program; "phase": one
    launch per phase): the oracle's top k, unsorted and by index, on normal,
    tie-heavy and ascending rows; captured in a CUDA graph (the counters zeroed in
    it), each replay exact after the data and windows change in place."""
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    for kind in ("normal", "distinct32", "ascending"):
        x = make(kind, rows, n, dtype, "cuda", seed=rows)
        for order in (Order.NONE, Order.INDEX):
            opt = TopkOptions(order=order)
            plan = _full_plan(x, k, opt, sm, mode)
            assert plan.passes and plan.grid_sync == (mode == "plan"), describe(plan)
            ov = torch.empty((rows, k), dtype=dtype, device="cuda")
            oi = torch.empty((rows, k), dtype=torch.int32, device="cuda")
            run_short(x, k, opt, ov, oi, plan)
            assert_same_topk((ov, oi), oracle_topk(x, k, opt), order, describe(plan))
    begin = torch.zeros(rows, dtype=torch.int64, device="cuda")
    opt = TopkOptions(begin=begin, end=torch.full((rows,), n, device="cuda"))
    plan = _full_plan(x, k, opt, sm, mode)
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
    "rows,n,k,dtype,mode",
    [
        (4096, 4096, 512, torch.bfloat16, "plan"),  # short rows, 6-bit digits
        (64, 3000, 2048, torch.float32, "plan"),  # short rows, N <= 2k
        (3, 100_000, 512, torch.float32, "split"),  # the split's selects, 8-bit digits
        (1, 2**20, 512, torch.bfloat16, "plan"),  # the passes in one launch
        (6, 129_280, 512, torch.float32, "phase"),  # a launch a phase
        (6, 2**20, 1231, torch.float16, "plan"),  # six segments a program
        (300, 7, 5, torch.float32, "plan"),  # a warp holds each key twice: tl.histogram
        (7, 12_345, 100, torch.float32, "split"),  # a merge of 256 at 512 threads
    ],
)
def test_gpu_smem_histograms(rows, n, k, dtype, mode):
    """The histograms by shared-memory atomics (inline PTX, so only here) in every
    kernel that takes one: the oracle's top k, unsorted, by value and by index, on
    rows whose keys crowd a few bins (every key one value, 32 values, an ascending
    run) as well as normal rows; captured in a CUDA graph, each replay exact after the
    data change in place."""
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    assert triton_short.smem_hist()
    for kind in ("normal", "all_equal", "distinct32", "ascending"):
        x = make(kind, rows, n, dtype, "cuda", seed=rows + k)
        for order in (Order.NONE, Order.VALUE, Order.INDEX):
            got = check(x, k, cfg=ShortConfig(), sm=sm, edit=lambda p: _edit(p, mode), order=order)
    opt = TopkOptions()
    plan = _full_plan(x, k, opt, sm, mode)
    ov, oi = got
    graph, _ = warm_then_capture(lambda: run_short(x, k, opt, ov, oi, plan))
    for seed in range(2):
        x.copy_(make("distinct32" if seed else "normal", rows, n, dtype, "cuda", seed=seed))
        graph.replay()
        torch.cuda.synchronize()
        assert_same_topk((ov, oi), oracle_topk(x, k, opt), Order.NONE, f"replay {seed}")


def _edit(plan, mode):
    """:func:`_full_plan`'s edit of a plan already made."""
    if mode == "split":
        return the_split(plan)
    if mode == "phase" and plan.passes:
        return dataclasses.replace(plan, grid_sync=False)
    return plan


@pytest.mark.gpu
@pytest.mark.parametrize(
    "rows,n,k,dtype,mode",
    [
        (4096, 4096, 512, torch.bfloat16, "plan"),  # short rows, crowded
        (5, 4095, 100, torch.float16, "plan"),  # no multiple of a vector
        (3, 100_000, 512, torch.float32, "split"),  # the split and its merges
        (1, 2**20, 512, torch.bfloat16, "plan"),  # the passes in one launch
        (6, 2**20, 512, torch.bfloat16, "plan"),  # six segments a program
        (3, 700_001, 100, torch.bfloat16, "plan"),  # two, odd N
    ],
)
def test_gpu_vector_loads(rows, n, k, dtype, mode):
    """Contiguous rows read in 16-byte vectors at full size: the oracle's top k, bit
    for bit the strided rows' element loads, unsorted and by index, with and without
    windows."""
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    how = dict(cfg=ShortConfig(), sm=sm, edit=lambda p: _edit(p, mode))
    g = torch.Generator(device="cuda").manual_seed(rows)
    begin = torch.randint(0, n // 2, (rows,), device="cuda", generator=g)
    end = begin + torch.randint(0, n, (rows,), device="cuda", generator=g)
    for kind in ("normal", "distinct32"):
        x = make(kind, rows, n, dtype, "cuda", seed=rows + k)
        strided = torch.empty(rows, 2 * n, dtype=dtype, device="cuda")[:, ::2]
        strided.copy_(x)
        for kw in (dict(), dict(begin=begin, end=end, fill_index=-1)):
            for order in (Order.NONE, Order.INDEX):
                got = check(x, k, **how, order=order, **kw)
                same_bits(got, run(strided, k, **how, order=order, **kw)[0])
        del strided


@pytest.mark.gpu
@pytest.mark.parametrize(
    "rows,n,k,dtype",
    [
        (1, 2**20, 512, torch.bfloat16),  # one segment a program
        (6, 2**20, 512, torch.bfloat16),  # six a program: staged write, whole segments
        (2, 2**21 - 3, 1231, torch.float16),  # odd N, k not a power of two
        (6, 129_280, 2048, torch.float32),  # 32-bit keys
    ],
)
def test_gpu_radix_passes_same_bits_as_the_split(rows, n, k, dtype):
    """The passes at full size: the oracle's top k, bit for bit the split's, unsorted
    and by index, with windows (segments cut by them), fills and offsets, int64
    indices."""
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    assert short_path(torch.empty(rows, n, dtype=dtype), k, TopkOptions(), sm).passes
    g = torch.Generator(device="cuda").manual_seed(rows)
    begin = torch.randint(0, n // 2, (rows,), device="cuda", generator=g)
    end = begin + torch.randint(0, n, (rows,), device="cuda", generator=g)
    win = dict(begin=begin, end=end, fill_index=-1, index_offset=7, index_dtype=torch.int64)
    how = dict(cfg=ShortConfig(), sm=sm)
    for kind in ("normal", "distinct32"):
        x = make(kind, rows, n, dtype, "cuda", seed=rows + k)
        for kw in (dict(), win):
            for order in (Order.NONE, Order.INDEX):
                got = check(x, k, **how, order=order, **kw)
                same_bits(got, run(x, k, **how, edit=the_split, order=order, **kw)[0])
