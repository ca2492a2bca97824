"""Triton kernels: one-pass DeepSelect top-k of a row (or of a row segment).

Reading order: key mapping → the block filter (portable Triton, or a small inline-PTX
core) → compaction (radix-2 select over keys, then over indices among ties) → the
row kernel → output. Launch configuration lives in :mod:`deepselect.triton_backend`; the kernel's
parts in :mod:`.common`, :mod:`.filter`, :mod:`.sync` and :mod:`.compact`.

How one program selects a row ``[lo, hi)``:

1. Blocks of ``B`` elements, aligned to multiples of ``B`` from the row start, are
   visited in a data-independent order (``reference.block_at``): the middle
   blocks ``1 + (a * t + c) mod (m - 2)`` with ``a`` near ``(m - 2) / phi^2`` without
   near-periodic runs (``reference.block_stride``), ``c`` hashed from a fixed seed and
   the row number, and the last and the first block right after the ``CAP / B``
   middle blocks that hold the first compaction's sample, which the threshold starts
   from.
2. A threshold ``T = (key, index)`` — the k-th best so far, ``-inf`` at first — filters
   each block. Elements that beat it are appended to a candidate buffer in global
   memory (this program's scratch, L2-resident), split into NREG regions: warp w
   appends to region w, so placing hits needs no block-wide scan.
3. When the buffer holds ``>= k + B2`` candidates (or a region could overflow on the
   next block) it is compacted to the exact k best, and ``T`` becomes the k-th of them
   (the pivot key, and where ties are cut the tied indices' bound, by radix passes
   over the filled slots: :func:`_compact`). The first compaction of a long enough
   row keeps a rank of the candidates seen so far, a sample of the row, rather than
   k; a row where fewer than k reach that bound is selected again without it.
   SAMPLE_PRE: that bound is found before the stream, over the sample's keys read
   into registers (:func:`_sample_bound`), and the stream starts at it, as at a
   preset key, reading the sample's blocks again.
4. After the last block a final compaction leaves ``min(k, count)`` survivors, which
   are sorted if asked for and written out with their values rebuilt from their keys
   (a selected zero or NaN, whose key folds its sign or payload,
   and the values of outputs sorted by index are read from the row).

The filter is where the time goes: nearly every block holds a few elements of the
running top-k, so appending must cost per hit, not per element, and a block must
cost little more than its read. The PTX core compares packed values with the
threshold value (``set.geu.*x2``: two elements per instruction; NaN compares
unordered, so it passes); a warp where no lane passed — the common case — is done
after one vote. Otherwise a lane whose compare is exact (its compare value is not a
NaN, its elements lie in the window and on one side of the threshold's index) reads
its hits off one compare per word; the others run the exact (key, index, window)
test. The warp scans its lanes' hit counts (a ballot, or shuffles) and each lane
stores its hits in the warp's region (a lane with one hit straight from its bit). The
only block-wide step per block is one sum of the region counts (the trigger). On long
rows (``w32``, see :func:`_tid32`) there is none: each warp streams its share of
every block at its own pace and the warps meet only to compact (:func:`_meet`).

Each thread loads its block share (32 bytes) with two 16-byte loads where the rows
are 16-byte aligned (``vec``), one block ahead of the filter. With ``w32`` each warp
either alternates two word sets in registers or, with ``RING`` stages (k up to 2048
by default), streams through a ring in shared memory filled by ``cp.async``, RING - 1
blocks in flight (:func:`ring_base_asm`); with ``RAISE`` (16-bit keys by default)
the warps also raise their thresholds between compactions from a histogram of the
hits (see HIST_BINS). Measured limits (benchmarks/RESULTS.md): the block-synchronous loop's
instructions and the latency of its hit path; the warp-private loop through the
ring, its instructions: the hits the sample's bound lets through, and compactions.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .common import (
    NREG,
    PROF_SLOTS,
    STRIDE_GOOD,
    STRIDE_SPAN,
    _best_first_keys,
    _block_at,
    _block_stride,
    _clock,
    _clock32,
    _coarse_pair,
    _dealt,
    _first_kk,
    _next_block,
    _next_mid,
    _out_index,
    _store_index,
    _survivors,
    _values_of,
    _window,
)
from .compact import (
    _compact,
    _meet,
    _sample_bound,
)
from .filter import (
    HIST_BASE_ASM,
    _filter_portable,
    _filter_words,
    _load_words,
    _load_words_vec,
    _tid32,
)
from .sampling import kept_row
from .sync import (
    RAISE_CLEAR_ASM,
    RING_STAGE_BYTES,
    _asm_once,
    _hist_start,
    _lane_pick,
    _load32,
    _nap,
    _poll,
    _poll_raise,
    _raise_offer,
    _ring_issue,
    _ring_read,
    _set_sync,
    _smem_base,
    _sync_read,
    _trigger_sum,
)


@triton.jit
def _warp_step(
    w, xw_row, ja, jl, order, pos, i, wc32, lanes, thr, count, cur, scr, k, B2, acc, sample_n,
    KEYS: tl.constexpr, FILTER: tl.constexpr, SHAPE: tl.constexpr, PROFILE: tl.constexpr,
    SAMPLE_Z: tl.constexpr,
):  # fmt: skip
    """One step of an independently streaming warp (W32): filter block ``ja`` from the
    words ``w`` (eight) and reload them with block ``jl`` (two blocks ahead; ``ja``
    becomes ``jl``, which advances in the order of :func:`_next_block`: ``order`` is
    its ``(a, mm, p)``), or, when this warp is done, nap; then poll, and meet the
    others if a compaction is wanted or all are done. ``pos``: the row's ``(first,
    lo, hi, nblk)``; ``lanes``: this thread's ``(woff32, warp32, sb32)``; ``thr``: the
    threshold ``(tk, ti)`` and the filter's compare values ``(tva, tvp)``
    (:func:`_coarse_pair`), renewed with it; ``scr``: the program's ``(scr_k, scr_i,
    cnt_ptr)``. PROFILE: ``acc`` ([32], this warp's) accumulates in lanes 0..4 the
    cycles of the filter (compare and hit path) and of the meetings, the meetings,
    the hits and the blocks with hits (see :func:`_acc`). Returns the words, cursors,
    progress, stream state and ``acc``."""
    w0, w1, w2, w3, w4, w5, w6, w7 = w
    a, mm, p = order
    first, lo, hi, nblk = pos
    woff32, warp32, sb32 = lanes
    tk, ti, tva, tvp = thr
    B: tl.constexpr = SHAPE[0]
    CAP: tl.constexpr = SHAPE[1]
    KEY_BITS: tl.constexpr = KEYS[0]
    # the other warps' state, read before the filter: a warp sees a wanted-flag one
    # step later than a read after it would, and its own region still has room for
    # that step (each warp checks its own count after every block)
    d0, d1, wanted, _ = _sync_read(wc32, sb32)
    if i < nblk:
        wc32, acc = _warp_filter(
            w, ja, (first, lo, hi), woff32, warp32, thr, wc32, scr, cur, acc, KEY_BITS, FILTER,
            B, CAP, PROFILE,
        )  # fmt: skip
        w0, w1, w2, w3, w4, w5, w6, w7 = _load32(
            xw_row, jl, first, woff32, lo, hi, nblk, i + 2 < nblk, B, KEY_BITS
        )
        jn = _next_block(jl, ja, i + 3, a, mm, nblk, p)
        ja = jl  # the block this word set now holds
        jl = jn
    i, wc32, tk, ti, tva, tvp, count, cur, fin, acc = _step_end(
        i, nblk, wc32, (d0, d1, wanted), sb32, warp32, (tk, ti, tva, tvp), count, cur, scr, k,
        B2, acc, sample_n, KEYS, SHAPE, PROFILE, SAMPLE_Z,
    )  # fmt: skip
    return w0, w1, w2, w3, w4, w5, w6, w7, ja, jl, i, wc32, tk, ti, tva, tvp, count, cur, fin, acc


@triton.jit
def _warp_filter(
    w, ja, pos, woff32, warp32, thr, wc32, scr, cur, acc, KEY_BITS: tl.constexpr,
    FILTER: tl.constexpr, B: tl.constexpr, CAP: tl.constexpr, PROFILE: tl.constexpr, hreg=0,
    hbase=0, HIST: tl.constexpr = False,
):  # fmt: skip
    """A warp's filter of its words ``w`` (eight) of block ``ja`` (W32; ``pos``: the
    row's ``(first, lo, hi)``, ``thr``: ``(tk, ti, tva, tvp)``, ``scr``: ``(scr_k,
    scr_i, ...)``): the hits appended to its region of half ``cur``. Returns its count
    and the profile counters (PROFILE)."""
    w0, w1, w2, w3, w4, w5, w6, w7 = w
    first, lo, hi = pos
    tk, ti, tva, tvp = thr
    scr_k = scr[0]
    scr_i = scr[1]
    S: tl.constexpr = CAP // NREG
    PER_WORD: tl.constexpr = 32 // KEY_BITS
    if PROFILE:
        t0 = _clock32(w7)
        before = wc32
    wc32 = _filter_words(
        w0, w1, w2, w3, w4, w5, w6, w7, (ja + first) * B + woff32 * PER_WORD, lo, hi,
        tk, ti, tva, tvp, wc32, scr_k + cur + warp32 * S, scr_i + cur + warp32 * S, FILTER,
        hreg, hbase, HIST,
    )  # fmt: skip
    if PROFILE:
        new = wc32 - before
        acc = _acc(acc, _clock32(wc32) - t0, 0, 0, new, (new > 0).to(tl.int32))
    return wc32, acc


@triton.jit
def _step_end(
    i, nblk, wc32, sync, sb32, warp32, thr, count, cur, scr, k, B2, acc, sample_n,
    KEYS: tl.constexpr, SHAPE: tl.constexpr, PROFILE: tl.constexpr, SAMPLE_Z: tl.constexpr,
    RAISE: tl.constexpr = 0, d3=0,
):  # fmt: skip
    """The end of a warp's step (W32): one block more filtered (``i < nblk``: the step
    filtered one; this warp's done byte set after its last), or a nap if this warp was
    done; then poll the sync state read as the step began (``d0``, ``d1``,
    ``wanted``), and meet the others if a compaction is wanted or all are done.
    Returns the blocks filtered, this warp's count, the threshold and its compare
    values, the buffer's count and half, whether the row is done, and the profile
    counters. ``sync``: ``(d0, d1, wanted)``; ``thr``: ``(tk, ti, tva, tvp)``;
    ``scr``: ``(scr_k, scr_i, cnt_ptr)``."""
    d0, d1, wanted = sync
    tk, ti, tva, tvp = thr
    scr_k, scr_i, cnt_ptr = scr
    KEY_BITS: tl.constexpr = KEYS[0]
    KEY_MASK: tl.constexpr = KEYS[1]
    SIGN: tl.constexpr = KEYS[2]
    LARGEST: tl.constexpr = KEYS[4]
    B: tl.constexpr = SHAPE[0]
    CAP: tl.constexpr = SHAPE[1]
    S: tl.constexpr = CAP // NREG
    LIMIT: tl.constexpr = S - B // NREG  # a region this full takes no more
    fin = i * 0
    if i < nblk:
        i += 1
        if i == nblk:
            _set_sync(wc32 * 0 + 1, 0)
    else:
        _nap(wc32)
    if RAISE > 0:  # the threshold key offered (d3, see HIST_BINS) if above this warp's
        st = _poll_raise(wc32, LIMIT, d0, d1, wanted, sb32, d3, tk)
        go = st & 3
        if st == 4:
            tk = tl.max(d3, axis=0).to(tl.uint32, bitcast=True)
            ti = k * 0 + 0x7FFFFFFF
            tva, tvp = _coarse_pair(tk, KEY_BITS, KEY_MASK, SIGN, LARGEST)
    else:
        go = _poll(wc32, LIMIT, d0, d1, wanted, sb32)
    if go != 0:  # a compaction is wanted, or all done
        if PROFILE:
            t0 = _clock32(wc32)
        tk, ti, count, cur, fin = _meet(
            scr_k, scr_i, cnt_ptr, cur, tl.max(wc32, axis=0), (i >= nblk).to(tl.int32),
            k, B2, tk, ti, sample_n, KEY_BITS, CAP, SAMPLE_Z, RAISE,
        )  # fmt: skip
        wc32 = _dealt(count, warp32)
        tva, tvp = _coarse_pair(tk, KEY_BITS, KEY_MASK, SIGN, LARGEST)
        if PROFILE:
            acc = _acc(acc, 0, _clock32(wc32) - t0, 1, 0, 0)
    return i, wc32, tk, ti, tva, tvp, count, cur, fin, acc


@triton.jit
def _ring_step(
    slot0, js, xw_row, order, pos, i, wc32, lanes, thr, count, cur, scr, k, B2, acc, sample_n,
    KEYS: tl.constexpr, FILTER: tl.constexpr, SHAPE: tl.constexpr, PROFILE: tl.constexpr,
    SAMPLE_Z: tl.constexpr, RING: tl.constexpr, RING_READ: tl.constexpr, hist=(0, 0),
    RAISE: tl.constexpr = 0, ENDS_FIRST: tl.constexpr = False,
):  # fmt: skip
    """One step of an independently streaming warp through its ring (RING > 0, see
    :func:`ring_base_asm`): filter block ``i`` of the order from its stage ``i mod
    RING`` (the stage's block in lane ``i mod RING`` of ``jq``), then copy block ``i +
    RING`` into that stage (``js``: ``(jq, j1, j2, j3)``; ``j1``, ``j3``: blocks ``i +
    RING - 1`` and ``- 3`` of the order, :func:`_next_block`; ENDS_FIRST: the row's
    ends are blocks 0 and 1 of the order (``p = 0``), so every block the loop copies,
    ``i + RING >= 3``, is the middle block after ``j1``). ``lanes``: this thread's
    ``(woff32, warp32, lane32, sb32)``; the rest as :func:`_warp_step` takes them.
    RAISE > 0: the hits counted in the histogram ``hist = (hreg, hbase)`` (from key
    ``hbase``), this warp's offer of a key every 8 * RAISE blocks (at its turn) and
    the offered key taken (see HIST_BINS).
    Then poll and meet as :func:`_warp_step` does."""
    jq, j1, j2, j3 = js
    a, mm, p = order
    first, lo, hi, nblk = pos
    woff32, warp32, lane32, sb32 = lanes
    tk, ti, tva, tvp = thr
    hreg, hbase = hist
    B: tl.constexpr = SHAPE[0]
    CAP: tl.constexpr = SHAPE[1]
    KEY_BITS: tl.constexpr = KEYS[0]
    d0, d1, wanted, d3 = _sync_read(wc32, sb32)
    if i < nblk:
        if (RING & (RING - 1)) == 0:  # (a mask: a signed modulo takes four instructions)
            st = i & (RING - 1)
        else:
            st = i % RING
        slot = slot0 + st * RING_STAGE_BYTES
        w0, w1, w2, w3, w4, w5, w6, w7 = _ring_read(slot, RING_READ)
        ja = _lane_pick(jq, st)
        wc32, acc = _warp_filter(
            (w0, w1, w2, w3, w4, w5, w6, w7), ja, (first, lo, hi), woff32, warp32, thr, wc32,
            scr, cur, acc, KEY_BITS, FILTER, B, CAP, PROFILE, hreg, hbase, RAISE > 0,
        )  # fmt: skip
        q = i + RING
        if ENDS_FIRST:
            jn = _next_mid(j1, a, mm)
        else:
            jn = _next_block(j1, j3, q, a, mm, nblk, p)
        _ring_issue(
            slot, xw_row, jn, first, woff32, lo, hi, nblk, q < nblk, B, KEY_BITS, ENDS_FIRST
        )
        jq = tl.where(lane32 == st, jn, jq)
        j3 = j2
        j2 = j1
        j1 = jn
        if RAISE > 0:  # this warp's turn to offer a key
            due = i + (hreg.to(tl.uint32, bitcast=True) >> 23).to(tl.int32)
            if (due & (8 * RAISE - 1)) == 0:
                _raise_offer(hreg, hbase, k, wc32)
    i, wc32, tk, ti, tva, tvp, count, cur, fin, acc = _step_end(
        i, nblk, wc32, (d0, d1, wanted), sb32, warp32, (tk, ti, tva, tvp), count, cur, scr, k,
        B2, acc, sample_n, KEYS, SHAPE, PROFILE, SAMPLE_Z, RAISE, d3,
    )  # fmt: skip
    return jq, j1, j2, j3, i, wc32, tk, ti, tva, tvp, count, cur, fin, acc


@triton.jit
def _acc(acc, filt, meet, meets, hits, hit_blocks):
    """Profiling: add to the per-warp counters ``acc`` ([32] int32, lanes 0..4;
    cycle counts wrap after 2^31, ~1 s)."""
    lane = tl.arange(0, 32)
    acc += tl.where(lane == 0, filt, 0) + tl.where(lane == 1, meet, 0)
    acc += tl.where(lane == 2, meets, 0) + tl.where(lane == 3, hits, 0)
    return acc + tl.where(lane == 4, hit_blocks, 0)


# ---------------------------------------------------------------------- the kernel
@triton.jit
def _publish_and_compact(
    wcnt, rc, count, cur, kk, slack, tk, scr_k, scr_i, cnt_ptr,
    USE_ASM: tl.constexpr, KEY_BITS: tl.constexpr, CAP: tl.constexpr, prof,
    PROFILE: tl.constexpr,
):  # fmt: skip
    """Publish the regions' counts (each warp's, or the portable path's ``rc``) and
    compact half ``cur`` into the other (see :func:`_compact`)."""
    t = tl.arange(0, 256)
    if USE_ASM:
        tl.store(cnt_ptr + t // 32, wcnt, mask=(t % 32) == 0)
    else:
        tl.store(cnt_ptr + tl.arange(0, NREG), rc)
    # the appends and counts are stores of other warps: order them first
    tl.debug_barrier()
    return _compact(
        scr_k + cur, scr_i + cur, scr_k + (CAP - cur), scr_i + (CAP - cur),
        cnt_ptr, count, kk, slack, tk, KEY_BITS, USE_ASM, CAP, prof, PROFILE,
    )  # fmt: skip


@triton.jit
def _check(
    wcnt, rc, tk, ti, count, cur, scr_k, scr_i, cnt_ptr, k, B2, sample_n, burst_at,
    parity, prof, USE_ASM: tl.constexpr, KEY_BITS: tl.constexpr, B: tl.constexpr,
    CAP: tl.constexpr, CHECK_EVERY: tl.constexpr, PROFILE: tl.constexpr,
    SAMPLE_Z: tl.constexpr,
):  # fmt: skip
    """The compaction trigger: one block-wide sum of the regions' counts (a region that
    could overflow within the next CHECK_EVERY blocks counts as full), then, when
    due, a compaction from half ``cur`` into the other: when the buffer reaches
    ``k + B2`` or a region could overflow, or when this check's new candidates number
    ``burst_at`` or more and the buffer more than k (a threshold far below the row's
    k-th: one block of an ascending row past the sample, all of it hits). Returns the
    threshold, the count, the half, both count forms and (PROFILE) the compaction's
    cycles.

    The PTX path: each warp's leader stores its count to slot ``parity``
    (0 or 1, alternating from check to check) in shared memory, and after one
    barrier every lane sums the slot itself (:func:`_trigger_sum`), where ``tl.sum``
    takes two barriers and shuffles. Two slots: a warp can store the next
    check's count while another still reads this one; the one after that is past
    the next check's barrier."""
    S: tl.constexpr = CAP // NREG
    LIMIT: tl.constexpr = S - CHECK_EVERY * (B // NREG)
    BIG: tl.constexpr = 1 << 24  # flags a full region in the sum
    t = tl.arange(0, 256)
    warp = t // 32
    regs = tl.arange(0, NREG)
    if USE_ASM:
        tot = _trigger_sum(wcnt + tl.where(wcnt > LIMIT, BIG, 0), parity)
    else:
        tot = tl.sum(rc + tl.where(rc > LIMIT, BIG, 0), axis=0)
    fresh = tot % BIG - count
    count = tot % BIG
    pc = tl.zeros([], tl.int64)
    if (tot >= k + B2) | ((fresh >= burst_at) & (count > k)):
        if PROFILE:
            pc -= _clock(tot)
        kk = _first_kk(count, k, sample_n, ti, SAMPLE_Z)
        tk, ti, count = _publish_and_compact(
            wcnt, rc, count, cur, kk, B2 // 2, tk, scr_k, scr_i, cnt_ptr, USE_ASM, KEY_BITS,
            CAP, prof, PROFILE,
        )  # fmt: skip
        cur = CAP - cur
        wcnt = _dealt(count, warp)
        rc = _dealt(count, regs)
        if PROFILE:
            pc += _clock(count)
    return tk, ti, count, cur, wcnt, rc, pc


ROWS_GROUPS = dict(
    xin=("x_ptr", "stride_x", "rows", "N"),
    win=("begin_ptr", "end_ptr", "off_ptr", "off_scalar"),
    out=("ov_ptr", "oi_ptr", "stride_ov", "stride_oi"),
    scratch=("cand_key_ptr", "cand_idx_ptr", "cand_cnt_ptr"),
    fills=("fill_index", "fill_bits"),
    diag=("prof_ptr", "preset_ptr"),
    page=("page_ptr", "page_stride", "max_pages", "n_batch", "r2b_ptr"),
    KEYS=("KEY_BITS", "KEY_MASK", "SIGN", "INF_BITS", "LARGEST"),
    FORM=("ORDER", "HAS_WINDOW", "OFF_TENSOR", "WRITE_VALUES"),
    SHAPE=("B", "CAP", "KP", "CHECK_EVERY", "VEC"),
    WARPS=("W32", "RING", "RING_BASE", "RING_READ", "RAISE"),
    SAMPLE=("SAMPLE_Z", "SAMPLE_PRE", "SAMPLE_TOL", "SAMPLE_KEYS", "SAMPLE_CHUNK",
            "SAMPLE_BLOCKS", "SAMPLE_RADIX", "SAMPLE_BITS"),
    DIAG=("PROFILE", "PRESET"),
    PAGE=("PAGED", "PAGE_SHIFT", "HAS_R2B"),
    fuse=("dst_ptr", "dst_stride", "kt_ptr"),
    FUSE=("FUSED", "RENORM", "K_TENSOR", "FP16", "NINF"),
)  # fmt: skip
"""How :func:`deepselect_rows_kernel` bundles its arguments: each tuple parameter and
the arguments it holds, in order (see ``launch.bundle``)."""

ROWS_DEFAULTS = dict(
    CHECK_EVERY=1, VEC=False, W32=False, RING=0, RING_BASE="", RING_READ="", RAISE=0,
    SAMPLE_Z=5.0, SAMPLE_PRE=False, SAMPLE_TOL=0, SAMPLE_KEYS=0, SAMPLE_CHUNK=0,
    SAMPLE_BLOCKS=2, SAMPLE_RADIX=False, SAMPLE_BITS=0, PROFILE=False, PRESET=False,
    PAGED=False, PAGE_SHIFT=0, HAS_R2B=False, FUSED=False, RENORM=False, K_TENSOR=False,
    FP16=False, NINF=0,
)  # fmt: skip
"""The bundled compile-time arguments a launch may leave out."""


@triton.jit
def _row_plan(row, N, win, seed, m_prev, a_prev, B: tl.constexpr, HAS_WINDOW: tl.constexpr,
              SAMPLE_BLOCKS: tl.constexpr, PRESET: tl.constexpr):  # fmt: skip
    """Row ``row``'s window ``[lo, hi)``, its first block and block count, and its
    data-independent block order: ``(m, mm, a, p, c)`` (see the module docstring);
    ``a`` computed again only where the middle blocks' count ``mm`` differs from the
    last row's (``m_prev``, whose stride was ``a_prev``); the sample's size."""
    if HAS_WINDOW:
        lo, hi = _window(win[0], win[1], row, N, HAS_WINDOW)
    else:
        lo = row * 0
        hi = lo + N
    first = lo // B
    nblk = tl.where(hi > lo, (hi + B - 1) // B - first, 0)
    # data-independent block order (reference.block_at): the middle blocks
    # 1 .. mm in the order 1 + (a*t + c) mod mm, with the last and the first block
    # at p and p + 1, right after the first compaction's sample (a region
    # fills within CAP / B blocks while every element is a candidate); the ring's
    # loop with the sample's bound from registers takes them first (p = 0)
    m = tl.maximum(nblk, 1)
    mm = tl.maximum(m - 2, 1)
    h = (row.to(tl.uint32) + 1) * 0x9E3779B1 + seed.to(tl.uint32) * 0x85EBCA77
    h = h ^ (h >> 15)
    h = h * 0x2C1B3C6D
    h = h ^ (h >> 12)
    # a stride near mm / phi^2 without near-periodic runs (reference.block_stride),
    # computed again only when the row's block count changes; a < mm: the next
    # middle block is one add and at most one subtract away
    if mm != m_prev:
        a_prev = _block_stride(mm, STRIDE_SPAN, STRIDE_GOOD)
        m_prev = mm
    a = a_prev
    # SAMPLE: the first compaction keeps a rank of the candidates seen so far (a
    # sample of the row, reference.sample_rank) rather than the k-th; if fewer
    # than k of the row reach that bound, the row is selected again without it;
    # only where the middle blocks before the ends hold the whole sample
    # (SAMPLE_BLOCKS of them: CAP // B, or, the bound from registers, those its
    # keys take)
    p = tl.maximum(tl.minimum(m - 2, SAMPLE_BLOCKS), 0)
    c = ((h >> 7) % mm.to(tl.uint32)).to(tl.int32)
    sample_n = tl.where(not PRESET and (m - 2 >= SAMPLE_BLOCKS), hi - lo, 0)
    return lo, hi, first, nblk, m, mm, a_prev, m_prev, a, p, c, sample_n


@triton.jit
def _select_row(
    row, xrow, plan, sample_n, scr, k, B2, preset_ptr, prof_row, lanes32, t256, warp, prof,
    KEYS: tl.constexpr, USE_ASM: tl.constexpr, FILTER: tl.constexpr, SHAPE: tl.constexpr,
    WARPS: tl.constexpr, SAMPLE: tl.constexpr, DIAG: tl.constexpr,
):  # fmt: skip
    """The stream over row ``row`` (``xrow``: its raw bits and their 32-bit words;
    ``plan``: :func:`_row_plan`'s ``(lo, hi, first, nblk, m, mm, a, p, c)``), again
    without the sample's bound where fewer than k reach it. Returns the survivors'
    count and half, the profile's time stamp and counters (``prof``: ``p_filt,
    p_comp, p_pre, p_last, p_chk, n_comp, n_hits, n_hitblk``)."""
    x_row, xw_row = xrow
    lo, hi, first, nblk, m, mm, a, p, c = plan
    p_filt, p_comp, p_pre, p_last, p_chk, n_comp, n_hits, n_hitblk = prof
    KEY_BITS: tl.constexpr = KEYS[0]
    KEY_MASK: tl.constexpr = KEYS[1]
    SIGN: tl.constexpr = KEYS[2]
    INF_BITS: tl.constexpr = KEYS[3]
    LARGEST: tl.constexpr = KEYS[4]
    B: tl.constexpr = SHAPE[0]
    W32: tl.constexpr = WARPS[0]
    SAMPLE_Z: tl.constexpr = SAMPLE[0]
    SAMPLE_PRE: tl.constexpr = SAMPLE[1]
    SAMPLE_TOL: tl.constexpr = SAMPLE[2]
    SAMPLE_KEYS: tl.constexpr = SAMPLE[3]
    SAMPLE_CHUNK: tl.constexpr = SAMPLE[4]
    SAMPLE_RADIX: tl.constexpr = SAMPLE[6]
    SAMPLE_BITS: tl.constexpr = SAMPLE[7]
    PROFILE: tl.constexpr = DIAG[0]
    PRESET: tl.constexpr = DIAG[1]
    cur = row * 0  # the scratch half holding the candidates: 0 or CAP
    count = row * 0
    t2 = tl.zeros([], tl.int64)
    go = row * 0 + 1
    for _attempt in range(0, 2):
        if go != 0:
            cur = row * 0
            count = row * 0
            tk = (row * 0).to(tl.uint32)
            ti = row * 0 + 0x7FFFFFFF
            if PRESET:
                tk = tl.load(preset_ptr + row).to(tl.uint32)
            # SAMPLE_PRE: the sample's bound from registers (_sample_bound), not
            # from a first compaction; the stream's compactions then all keep k
            loop_n = sample_n * 0 if SAMPLE_PRE else sample_n
            burst_at = sample_n * 0 + 0x3FFFFFFF
            s_hi = tk  # RAISE: the sample's largest key (sampled rows)
            if SAMPLE_PRE:
                if sample_n > 0:
                    if PROFILE:
                        t_pre = _clock(sample_n)
                    tk, s_hi = _sample_bound(
                        x_row, first, m, a, c, p, k, sample_n, KEY_BITS, KEY_MASK, SIGN,
                        INF_BITS, LARGEST, B, SAMPLE_KEYS, SAMPLE_RADIX, USE_ASM, SAMPLE_Z,
                        SAMPLE_TOL, SAMPLE_CHUNK, prof_row, PROFILE, SAMPLE_BITS, lo, hi,
                    )  # fmt: skip
                    if PROFILE:
                        p_pre += _clock(tk) - t_pre
            ja = _block_at(m * 0, m, a, c, p)
            jb = _block_at(m * 0 + 1, m, a, c, p)
            jc = _block_at(m * 0 + 2, m, a, c, p)
            wcnt = tl.zeros([256], tl.int32)  # PTX path: each lane's copy of its warp's count
            rc = tl.zeros([NREG], tl.int32)  # portable path: the regions' counts
            if W32:  # warp-private loop state (see _tid32): warps stream independently
                tk, ti, count, cur, t2, p_filt, p_comp, n_comp, n_hits, n_hitblk = _stream_w32(
                    cur, count, tk, ti, ja, jb, jc, xw_row, (first, lo, hi, nblk),
                    (m, mm, a, p, c), sample_n, s_hi, loop_n, scr, k, B2, lanes32,
                    (t2, p_filt, p_comp, n_comp, n_hits, n_hitblk), KEYS, FILTER, SHAPE, WARPS,
                    SAMPLE, PROFILE,
                )  # fmt: skip
            else:
                (tk, ti, count, cur, t2, p_filt, p_comp, p_last, p_chk, n_comp, n_hits,
                 n_hitblk) = _stream_sync(
                    cur, count, tk, ti, ja, jb, jc, wcnt, rc, xrow, (first, lo, hi, nblk),
                    (mm, a, p), scr, k, B2, loop_n, burst_at, prof_row, t256, warp,
                    (t2, p_filt, p_comp, p_last, p_chk, n_comp, n_hits, n_hitblk), KEYS, USE_ASM,
                    FILTER, SHAPE, SAMPLE_Z, PROFILE,
                )  # fmt: skip
            # fewer than k at or above the sample's bound: again without it
            go = ((sample_n > 0) & (count < tl.minimum(k, hi - lo))).to(tl.int32)
            sample_n = sample_n * 0
    return count, cur, t2, p_filt, p_comp, p_pre, p_last, p_chk, n_comp, n_hits, n_hitblk


@triton.jit
def _stream_w32(
    cur, count, tk, ti, ja, jb, jc, xw_row, pos, order, sample_n, s_hi, loop_n, scr, k, B2,
    lanes32, prof, KEYS: tl.constexpr, FILTER: tl.constexpr, SHAPE: tl.constexpr,
    WARPS: tl.constexpr, SAMPLE: tl.constexpr, PROFILE: tl.constexpr,
):  # fmt: skip
    """The warp-private stream (W32) over a row from the threshold ``(tk, ti)``: each
    warp filters its share of every block at its own pace and polls the sync state
    before each block; the warps meet (_meet) only when one asks for a compaction (its
    region nearly full) and once all are done. Without a ring two word sets alternate
    (the loop is unrolled twice), each reloaded right after its filter, so no copy
    waits for a pending load. ``lanes32``: ``(zero32, tid32, warp32, woff32, lane32,
    slot0, hist32)``. Returns the threshold, count, half, the profile's time stamp and
    counters (``prof``: ``t2, p_filt, p_comp, n_comp, n_hits, n_hitblk``)."""
    first, lo, hi, nblk = pos
    m, mm, a, p, c = order
    zero32, tid32, warp32, woff32, lane32, slot0, hist32 = lanes32
    t2, p_filt, p_comp, n_comp, n_hits, n_hitblk = prof
    KEY_BITS: tl.constexpr = KEYS[0]
    KEY_MASK: tl.constexpr = KEYS[1]
    SIGN: tl.constexpr = KEYS[2]
    LARGEST: tl.constexpr = KEYS[4]
    B: tl.constexpr = SHAPE[0]
    RING: tl.constexpr = WARPS[1]
    RING_READ: tl.constexpr = WARPS[3]
    RAISE: tl.constexpr = WARPS[4]
    SAMPLE_Z: tl.constexpr = SAMPLE[0]
    SAMPLE_PRE: tl.constexpr = SAMPLE[1]
    wc32 = zero32
    i = nblk * 0  # blocks this warp has filtered
    acc = zero32  # profiling counters (see _warp_step)
    hreg = nblk * 0
    hbase = tk
    if RAISE > 0:  # the row's histogram, zeroed before the barrier; a row
        # without a sample counts only hits at the greatest key (none
        # above its threshold's in practice), so it never offers a key
        # it could not prove
        hbase = tl.where(sample_n > 0, tk, tk | 0xFFFFFFFF)
        hreg = _hist_start(hist32, tid32, hbase, s_hi, RAISE)
        _asm_once(zero32, RAISE_CLEAR_ASM)
    _set_sync(zero32 + (nblk == 0).to(tl.int32), 1)
    tl.debug_barrier()  # every warp's words written before anyone polls
    fin = nblk * 0
    tva, tvp = _coarse_pair(tk, KEY_BITS, KEY_MASK, SIGN, LARGEST)
    sb32 = _smem_base(zero32)
    if RING > 0:  # blocks 0 .. RING - 1 of the order into the stages
        # with the sample's bound from registers the ends need not follow
        # a first compaction's sample: they go first (p = 0), and every
        # block past the ring's first is the middle block after the last
        ENDS_FIRST: tl.constexpr = SAMPLE_PRE and RING >= 3
        pr = p * 0 if ENDS_FIRST else p
        jq = zero32  # lane s: the block in stage s
        j1 = m * 0
        j2 = m * 0
        j3 = m * 0
        for s in tl.static_range(RING):
            js = _block_at(m * 0 + s, m, a, c, pr)
            _ring_issue(
                slot0 + s * RING_STAGE_BYTES, xw_row, js, first, woff32, lo, hi,
                nblk, nblk > s, B, KEY_BITS,
            )  # fmt: skip
            jq = tl.where(lane32 == s, js, jq)
            if s == RING - 1:
                j1 = js
            if s == RING - 2:
                j2 = js
            if s == RING - 3:
                j3 = js
        while fin == 0:
            (jq, j1, j2, j3, i, wc32, tk, ti, tva, tvp, count, cur, fin,
             acc) = _ring_step(
                slot0, (jq, j1, j2, j3), xw_row, (a, mm, p), (first, lo, hi, nblk), i, wc32,
                (woff32, warp32, lane32, sb32), (tk, ti, tva, tvp), count, cur, scr, k, B2,
                acc, loop_n, KEYS, FILTER, SHAPE, PROFILE, SAMPLE_Z, RING, RING_READ,
                (hreg, hbase), RAISE, ENDS_FIRST,
            )  # fmt: skip
    else:
        a0, a1, a2, a3, a4, a5, a6, a7 = _load32(
            xw_row, ja, first, woff32, lo, hi, nblk, nblk > 0, B, KEY_BITS
        )
        b0, b1, b2, b3, b4, b5, b6, b7 = _load32(
            xw_row, jb, first, woff32, lo, hi, nblk, nblk > 1, B, KEY_BITS
        )
        jl = jc  # the next block to load
        while fin == 0:
            (a0, a1, a2, a3, a4, a5, a6, a7, ja, jl, i, wc32, tk, ti, tva, tvp,
             count, cur, fin, acc) = _warp_step(
                (a0, a1, a2, a3, a4, a5, a6, a7), xw_row, ja, jl, (a, mm, p),
                (first, lo, hi, nblk), i, wc32, (woff32, warp32, sb32), (tk, ti, tva, tvp),
                count, cur, scr, k, B2, acc, loop_n, KEYS, FILTER, SHAPE, PROFILE, SAMPLE_Z,
            )  # fmt: skip
            if fin == 0:
                (b0, b1, b2, b3, b4, b5, b6, b7, jb, jl, i, wc32, tk, ti, tva, tvp,
                 count, cur, fin, acc) = _warp_step(
                    (b0, b1, b2, b3, b4, b5, b6, b7), xw_row, jb, jl, (a, mm, p),
                    (first, lo, hi, nblk), i, wc32, (woff32, warp32, sb32),
                    (tk, ti, tva, tvp), count, cur, scr, k, B2, acc, loop_n, KEYS, FILTER,
                    SHAPE, PROFILE, SAMPLE_Z,
                )  # fmt: skip
    if PROFILE:
        t2 = _clock(count)
        # warp 0's counters (the profile is one program's, as thread 0 stores it)
        lane = tl.arange(0, 32)
        p_filt += tl.sum(tl.where(lane == 0, acc, 0), axis=0).to(tl.int64)
        p_comp += tl.sum(tl.where(lane == 1, acc, 0), axis=0).to(tl.int64)
        n_comp += tl.sum(tl.where(lane == 2, acc, 0), axis=0).to(tl.int64)
        n_hits += tl.sum(tl.where(lane == 3, acc, 0), axis=0).to(tl.int64)
        n_hitblk += tl.sum(tl.where(lane == 4, acc, 0), axis=0).to(tl.int64)
    return tk, ti, count, cur, t2, p_filt, p_comp, n_comp, n_hits, n_hitblk


@triton.jit
def _stream_sync(
    cur, count, tk, ti, ja, jb, jc, wcnt, rc, xrow, pos, order, scr, k, B2, loop_n, burst_at,
    prof_row, t256, warp, prof, KEYS: tl.constexpr, USE_ASM: tl.constexpr,
    FILTER: tl.constexpr, SHAPE: tl.constexpr, SAMPLE_Z: tl.constexpr, PROFILE: tl.constexpr,
):  # fmt: skip
    """The block-synchronous stream over a row from the threshold ``(tk, ti)``, its
    blocks ``ja, jb, jc`` first (``order``: ``(mm, a, p)`` of :func:`_next_block`),
    with the compaction trigger every CHECK_EVERY blocks (:func:`_check`) and a final
    compaction. Returns the threshold, count, half, the profile's time stamp and
    counters (``prof``: ``t2, p_filt, p_comp, p_last, p_chk, n_comp, n_hits,
    n_hitblk``)."""
    x_row, xw_row = xrow
    first, lo, hi, nblk = pos
    mm, a, p = order
    scr_k, scr_i, cnt_ptr = scr
    t2, p_filt, p_comp, p_last, p_chk, n_comp, n_hits, n_hitblk = prof
    KEY_BITS: tl.constexpr = KEYS[0]
    KEY_MASK: tl.constexpr = KEYS[1]
    SIGN: tl.constexpr = KEYS[2]
    INF_BITS: tl.constexpr = KEYS[3]
    LARGEST: tl.constexpr = KEYS[4]
    B: tl.constexpr = SHAPE[0]
    CAP: tl.constexpr = SHAPE[1]
    CHECK_EVERY: tl.constexpr = SHAPE[3]
    VEC: tl.constexpr = SHAPE[4]
    S: tl.constexpr = CAP // NREG
    PER_WORD: tl.constexpr = 32 // KEY_BITS
    # elements between consecutive threads' first elements (the word layouts of
    # _word_elem: four words per thread in the vector layout, one in the strided one)
    WORD_ELEMS: tl.constexpr = 4 * PER_WORD if VEC else PER_WORD
    # software prefetch: the next block (VEC; a register copy of a pending load
    # waits for it, so a longer rotation holds no more loads in flight) or three
    if USE_ASM and VEC:
        a0, a1, a2, a3, a4, a5, a6, a7 = _load_words_vec(
            xw_row, (ja + first) * B, lo, hi, nblk > 0, B, KEY_BITS
        )
    if USE_ASM and not VEC:
        a0, a1, a2, a3, a4, a5, a6, a7 = _load_words(
            xw_row, (ja + first) * B, lo, hi, nblk > 0, KEY_BITS
        )
        b0, b1, b2, b3, b4, b5, b6, b7 = _load_words(
            xw_row, (jb + first) * B, lo, hi, nblk > 1, KEY_BITS
        )
        c0, c1, c2, c3, c4, c5, c6, c7 = _load_words(
            xw_row, (jc + first) * B, lo, hi, nblk > 2, KEY_BITS
        )
    for i in range(0, nblk):
        blk_start = (ja + first) * B
        jd = _next_block(jc, ja, i + 3, a, mm, nblk, p)
        if PROFILE:
            t0 = _clock(count)
            c_before = count
        if USE_ASM and VEC:
            b0, b1, b2, b3, b4, b5, b6, b7 = _load_words_vec(
                xw_row, (jb + first) * B, lo, hi, i + 1 < nblk, B, KEY_BITS
            )
        if USE_ASM and not VEC:
            d0, d1, d2, d3, d4, d5, d6, d7 = _load_words(
                xw_row, (jd + first) * B, lo, hi, i + 3 < nblk, KEY_BITS
            )
        if USE_ASM:
            tva, tvp = _coarse_pair(tk, KEY_BITS, KEY_MASK, SIGN, LARGEST)
            wcnt = _filter_words(
                a0, a1, a2, a3, a4, a5, a6, a7, blk_start + t256 * WORD_ELEMS, lo,
                hi, tk, ti, tva, tvp, wcnt, scr_k + cur + warp * S,
                scr_i + cur + warp * S, FILTER,
            )  # fmt: skip
            a0, a1, a2, a3, a4, a5, a6, a7 = b0, b1, b2, b3, b4, b5, b6, b7
            if not VEC:
                b0, b1, b2, b3, b4, b5, b6, b7 = c0, c1, c2, c3, c4, c5, c6, c7
                c0, c1, c2, c3, c4, c5, c6, c7 = d0, d1, d2, d3, d4, d5, d6, d7
        else:
            rc = _filter_portable(
                x_row, blk_start, lo, hi, tk, ti, rc, scr_k + cur, scr_i + cur,
                B, S, KEY_BITS == 16, KEY_MASK, SIGN, INF_BITS, LARGEST,
            )  # fmt: skip
        ja = jb
        jb = jc
        jc = jd
        if PROFILE:
            t1 = _clock(blk_start)
            p_filt += t1 - t0
        if CHECK_EVERY == 1:
            tk, ti, count, cur, wcnt, rc, pc = _check(
                wcnt, rc, tk, ti, count, cur, scr_k, scr_i, cnt_ptr, k, B2,
                loop_n, burst_at, i & 1, prof_row, USE_ASM, KEY_BITS, B, CAP,
                CHECK_EVERY, PROFILE, SAMPLE_Z,
            )  # fmt: skip
        else:  # the trigger's block-wide sum every CHECK_EVERY blocks, and the last
            pc = tl.zeros([], tl.int64)
            done = tl.cast(i, tl.int32) + 1
            if (done % CHECK_EVERY == 0) | (done == nblk):
                parity = ((done + CHECK_EVERY - 1) // CHECK_EVERY) & 1
                tk, ti, count, cur, wcnt, rc, pc = _check(
                    wcnt, rc, tk, ti, count, cur, scr_k, scr_i, cnt_ptr, k, B2,
                    loop_n, burst_at, parity, prof_row, USE_ASM, KEY_BITS, B,
                    CAP, CHECK_EVERY, PROFILE, SAMPLE_Z,
                )  # fmt: skip
        if PROFILE:
            p_chk += _clock(count) - t1 - pc
            p_comp += pc
            n_comp += (pc != 0).to(tl.int64)
            n_hits += count - c_before
            n_hitblk += (count > c_before).to(tl.int64)
    if PROFILE:
        t2 = _clock(count)
    tk, ti, count = _publish_and_compact(
        wcnt, rc, count, cur, k, 0, tk, scr_k, scr_i, cnt_ptr, USE_ASM,
        KEY_BITS, CAP, prof_row, PROFILE,
    )  # fmt: skip
    if PROFILE:
        p_last += _clock(count) - t2
    return tk, ti, count, cur, t2, p_filt, p_comp, p_last, p_chk, n_comp, n_hits, n_hitblk


@triton.jit
def _write_row(
    row, row64, count, cur, x_row, scr, k, fills, win, out, page, KEYS: tl.constexpr,
    FORM: tl.constexpr, CAP: tl.constexpr, KP: tl.constexpr, PAGE: tl.constexpr,
):  # fmt: skip
    """Row ``row``'s output: its ``count <= k`` survivors, dealt over the other half of
    the scratch from ``cur``, sorted as ORDER asks, values rebuilt (WRITE_VALUES),
    indices offset or mapped through the page table, fills after them. Returns the
    indices written."""
    scr_k, scr_i = scr
    fill_index, fill_bits = fills
    off_ptr = win[2]
    off_scalar = win[3]
    ov_ptr, oi_ptr, stride_ov, stride_oi = out
    page_ptr, page_stride, max_pages, n_batch, r2b_ptr = page
    KEY_BITS: tl.constexpr = KEYS[0]
    KEY_MASK: tl.constexpr = KEYS[1]
    SIGN: tl.constexpr = KEYS[2]
    LARGEST: tl.constexpr = KEYS[4]
    ORDER: tl.constexpr = FORM[0]
    OFF_TENSOR: tl.constexpr = FORM[2]
    PAGED: tl.constexpr = PAGE[0]
    PAGE_SHIFT: tl.constexpr = PAGE[1]
    HAS_R2B: tl.constexpr = PAGE[2]
    WRITE_VALUES: tl.constexpr = FORM[3]
    o, real, ck, ci = _survivors(count, cur, scr_k, scr_i, CAP, KP)
    if ORDER == 1:  # best first, ties by lower index
        ck, ci = _best_first_keys(ck, ci, real)
    if ORDER == 2:  # ascending index (the keys no longer match: values read back)
        ci = tl.sort(tl.where(real, ci, 0x7FFFFFFF))
    om = o < k
    if WRITE_VALUES:
        vals = _values_of(
            x_row, ck, ci, real, KEY_BITS, KEY_MASK, SIGN, LARGEST,
            ORDER != 2,
        )  # fmt: skip
        vals = tl.where(real, vals, fill_bits.to(vals.dtype))
        tl.store(ov_ptr + row64 * stride_ov + o, vals, mask=om)
    if OFF_TENSOR:
        off = tl.load(off_ptr + row).to(tl.int64)
    else:
        off = off_scalar.to(tl.int64)
    mapped = _out_index(
        ci, real, row, off, page_ptr, page_stride, max_pages, n_batch, r2b_ptr,
        PAGED, PAGE_SHIFT, HAS_R2B,
    )  # fmt: skip
    out = tl.where(real, mapped, fill_index.to(tl.int64))
    _store_index(oi_ptr + row64 * stride_oi + o, out, om)
    return out


@triton.jit
def deepselect_rows_kernel(
    xin, win, out, scratch, k, B2, fills, seed, diag, page, fuse, KEYS: tl.constexpr,
    FORM: tl.constexpr, USE_ASM: tl.constexpr, FILTER: tl.constexpr, SHAPE: tl.constexpr,
    WARPS: tl.constexpr, SAMPLE: tl.constexpr, DIAG: tl.constexpr, PAGE: tl.constexpr,
    FUSE: tl.constexpr,
):  # fmt: skip
    """Exact top-k of rows ``pid, pid + G, ...`` (a persistent grid of G programs).

    The arguments, bundled as :data:`ROWS_GROUPS` names them: ``xin = (x_ptr,
    stride_x, rows, N)``, the input's raw bits (int16 or int32 view; rows start on
    4-byte boundaries when USE_ASM, whose filter reads them as 32-bit words); ``win =
    (begin_ptr, end_ptr, off_ptr, off_scalar)``, the windows and index offsets; ``out
    = (ov_ptr, oi_ptr, stride_ov, stride_oi)``, outputs ``[rows, k]`` with their row
    strides; ``scratch = (cand_key, cand_idx, cand_cnt)``, this grid's scratch ``[G, 2
    * CAP]`` (two halves, compactions copy from one to the other) and ``[G, NREG]``
    region counts; ``fills = (fill_index, fill_bits)``; ``page``: the page table's
    arguments (PAGED: indices go out mapped through it, see :func:`_out_index`; the
    engine's paged indexer top-k); ``fuse = (dst_ptr, dst_stride, kt_ptr)``: FUSED, each
    row's sampling output instead of its top-k (:func:`.sampling.kept_row`; Nones
    otherwise, compiled out). Compile-time: ``KEYS = (KEY_BITS, KEY_MASK, SIGN,
    INF_BITS, LARGEST)``, ``FORM = (ORDER, HAS_WINDOW, OFF_TENSOR, WRITE_VALUES)``,
    ``SHAPE = (B, CAP, KP, CHECK_EVERY, VEC)``, ``WARPS = (W32, RING, RING_BASE,
    RING_READ, RAISE)``, ``SAMPLE = (SAMPLE_Z, SAMPLE_PRE, SAMPLE_TOL, SAMPLE_KEYS,
    SAMPLE_CHUNK, SAMPLE_BLOCKS, SAMPLE_RADIX, SAMPLE_BITS)``, ``DIAG = (PROFILE,
    PRESET)``, ``PAGE = (PAGED, PAGE_SHIFT, HAS_R2B)``, ``FUSE = (FUSED, RENORM,
    K_TENSOR, FP16, NINF)``. See the module docstring.

    Diagnostics (off in production builds): ``diag = (prof_ptr, preset_ptr)``; PROFILE
    accumulates SM cycles per phase into ``prof_ptr[pid, 0:PROF_SLOTS]`` (see
    benchmarks/profile_kernel.py); PRESET starts each row at the threshold key
    ``preset_ptr[row]`` (exact only if it is at most the row's k-th key) to time the
    stream without the rising threshold."""
    x_ptr, stride_x, rows, N = xin
    cand_key_ptr, cand_idx_ptr, cand_cnt_ptr = scratch
    prof_ptr, preset_ptr = diag
    B: tl.constexpr = SHAPE[0]
    CAP: tl.constexpr = SHAPE[1]
    KP: tl.constexpr = SHAPE[2]
    W32: tl.constexpr = WARPS[0]
    RING: tl.constexpr = WARPS[1]
    RING_BASE: tl.constexpr = WARPS[2]
    RAISE: tl.constexpr = WARPS[4]
    HAS_WINDOW: tl.constexpr = FORM[1]
    SAMPLE_BLOCKS: tl.constexpr = SAMPLE[5]
    PROFILE: tl.constexpr = DIAG[0]
    PRESET: tl.constexpr = DIAG[1]
    FUSED: tl.constexpr = FUSE[0]
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    scr_k = cand_key_ptr + pid.to(tl.int64) * (2 * CAP)
    scr_i = cand_idx_ptr + pid.to(tl.int64) * (2 * CAP)
    cnt_ptr = cand_cnt_ptr + pid * NREG
    prof_row = prof_ptr + pid * PROF_SLOTS  # PROFILE: this program's counters
    t256 = tl.arange(0, 256)
    warp = t256 // 32
    lanes32 = t256  # (W32 only)
    if W32:  # each thread's warp and first word, warp-private (see _tid32)
        zero32 = tl.zeros([32], tl.int32)
        tid32 = _tid32(zero32)
        warp32 = tid32 >> 5  # (shifts and masks: a thread index is never negative)
        woff32 = tid32 * 4  # the vector layout's first word
        lane32 = tid32 & 31
        slot0 = zero32
        hist32 = zero32
        if RING > 0:  # this lane's place in its warp's first stage (see ring_base_asm)
            slot0 = _asm_once(zero32, RING_BASE) + warp32 * (RING * RING_STAGE_BYTES) + lane32 * 16
        if RAISE > 0:
            hist32 = _asm_once(zero32, HIST_BASE_ASM)  # the histogram's address
        lanes32 = (zero32, tid32, warp32, woff32, lane32, slot0, hist32)
    p_row = tl.zeros([], tl.int64)  # whole rows
    p_filt = tl.zeros([], tl.int64)  # filter + per-block count (incl. load waits)
    p_comp = tl.zeros([], tl.int64)  # compactions inside the stream
    p_fin = tl.zeros([], tl.int64)  # final compaction + output
    p_pre = tl.zeros([], tl.int64)  # SAMPLE_PRE: the sample's bound from registers
    p_last = tl.zeros([], tl.int64)  # the final compaction alone (block-synchronous loop)
    p_chk = tl.zeros([], tl.int64)  # the per-block checks, their compactions apart
    n_comp = tl.zeros([], tl.int64)
    n_hits = tl.zeros([], tl.int64)
    n_hitblk = tl.zeros([], tl.int64)
    n_rows = tl.zeros([], tl.int64)
    m_prev = pid * 0 - 1  # the last row's block count and its stride
    a_prev = pid * 0
    for row_ in range(pid, rows, nprog):
        row = tl.cast(row_, tl.int32)  # a tensor in the interpreter too
        row64 = row.to(tl.int64)
        if PROFILE:
            t_row = _clock(row)
        lo, hi, first, nblk, m, mm, a_prev, m_prev, a, p, c, sample_n = _row_plan(
            row, N, win, seed, m_prev, a_prev, B, HAS_WINDOW, SAMPLE_BLOCKS, PRESET
        )
        x_row = x_ptr + row64 * stride_x
        xw_row = x_row.to(tl.pointer_type(tl.int32), bitcast=True)
        (count, cur, t2, p_filt, p_comp, p_pre, p_last, p_chk, n_comp, n_hits,
         n_hitblk) = _select_row(
            row, (x_row, xw_row), (lo, hi, first, nblk, m, mm, a, p, c), sample_n,
            (scr_k, scr_i, cnt_ptr), k, B2, preset_ptr, prof_row, lanes32, t256, warp,
            (p_filt, p_comp, p_pre, p_last, p_chk, n_comp, n_hits, n_hitblk), KEYS, USE_ASM,
            FILTER, SHAPE, WARPS, SAMPLE, DIAG,
        )  # fmt: skip
        tl.debug_barrier()
        # ---- output: the survivors, count <= k of them, dealt over the other half
        if FUSED:  # the sampling operation's row from them instead
            out_idx = kept_row(row64, count, cur, x_row, (scr_k, scr_i), k, N, fuse, KEYS,
                               CAP, KP, FUSE)  # fmt: skip
        else:
            out_idx = _write_row(
                row, row64, count, cur, x_row, (scr_k, scr_i), k, fills, win, out, page,
                KEYS, FORM, CAP, KP, PAGE,
            )  # fmt: skip
        # the next row's appends overwrite slots this row's output just read
        tl.debug_barrier()
        if PROFILE:
            t3 = _clock(tl.sum(out_idx.to(tl.int32), axis=0))
            p_fin += t3 - t2
            p_row += t3 - t_row
            n_rows += 1
    if PROFILE:
        j = tl.arange(0, PROF_SLOTS)
        prof = tl.where(j == 0, p_row, 0) + tl.where(j == 1, p_filt, 0)
        prof += tl.where(j == 2, p_comp, 0) + tl.where(j == 3, p_fin, 0)
        prof += tl.where(j == 4, n_comp, 0) + tl.where(j == 5, n_hits, 0)
        prof += tl.where(j == 6, n_hitblk, 0) + tl.where(j == 7, n_rows, 0)
        prof += tl.where(j == 8, p_pre, 0) + tl.where(j == 11, p_last, 0)
        prof += tl.where(j == 16, p_chk, 0)
        # 9, 10, 12 .. 15: atomics of _sample_bound and _compact
        tl.store(prof_row + j, prof, mask=(j < 9) | (j == 11) | (j == 16))
