"""The streaming kernel's launch: the configuration each shape gets, the build's
checks on a configuration, and the launch's variants against the oracle, exactly.

The configuration is decided from the shape alone (rows, row length, k, dtype and
the SM count): programs per SM and a crowded launch's register cap, the
block-synchronous or the warp-private loop, how often the compaction is checked and
how the sample's bound is found; those rules are checked here without a launch. A
configuration the kernel cannot take (a buffer too small for its checks or too large
for its counts, a sample size or raise interval that is not an allowed power of two,
a ring past the shared memory a launch takes) is refused before a build. The
variants (compaction checks every few blocks, the compaction's radix passes, the
sample's bound from registers or from a first compaction, the warp-private loop, the
ring, the raised threshold) run in Triton's interpreter on small shapes
(:func:`helpers.small_config`) and, with a GPU (marker ``gpu``), at full size."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from helpers import assert_same_topk, check_small, small_config

from deepselect import TopkOptions, oracle_topk, topk_rows
from deepselect.distributions import make
from deepselect.ops.triton.launch import CROWDED_PER_SM
from deepselect.options import Order
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


# ------------------------------------------------------------- the launch by shape
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
            assert stream_shape(dtype, big, 4096, n, sm) == launch_config(dtype, big)
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
        assert stream_shape(dtype, k, 4 * sm + 1, n, sm).programs_per_sm == CROWDED_PER_SM


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


# ------------------------------------------------------------ the build's checks
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


# ------------------------------------------------------------- the variants, small
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


# ------------------------------------------------------------------ full size on a GPU
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
