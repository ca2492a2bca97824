"""Exact top-k of rows where k is a large share of the row: one program a row that reads
the row from memory once and from L2 after, selecting by counts, never by compaction.

The streaming kernel's threshold rejects little where k is an eighth of the row (the
indexer's k = 2048 over 16K), and holding a whole row in registers leaves one program
per SM with nothing to hide its waits behind. Here a program holds a 16-byte vector a
thread at a time, so that several run on each SM, and the row's later reads hit L2 (a
row of up to some 64 KB, a few programs an SM, stays there). Each warp reads its own run
of the row (``W`` runs in index order) and keeps its own counts, so that its histogram
adds and the write's running sums wait on no other warp: the runs meet only between
reads, where each run's counts give its place in the output.

1. **Bracket.** ``S`` keys read at evenly spaced positions of the row's window are
   sorted; the ones at the ranks ``m -/+ (3 sqrt(m) + 2)`` (``m = k S / n``, the rank the
   k-th key is expected at) give ``lo <= hi``, which bracket the k-th key unless the
   sample is that far off.
2. **First read.** Each run counts its keys above ``hi`` (register sums) and adds the
   keys in ``[lo, hi]`` to its histogram of ``NB`` bins, bin ``(key - lo) >> s`` (``s``
   the fewest bits that fit the bracket into the bins), by shared-memory atomics. The
   k-th key is in the bracket if the keys above ``hi`` are fewer than k and those at or
   above ``lo`` (the same count plus the bins') at least k; otherwise (a sample that
   far off, or none taken) the bracket becomes every key and the histogram is taken
   again.
3. **Narrowing.** The bin where the count from the top reaches k becomes the bracket,
   the keys above it are counted, and while the bin is wider than one key, another
   read takes the histogram of the keys inside it at ``s - log2(NB)`` bits. 16-bit keys
   of a normal row need none (the bracket spans fewer than 256 keys). The runs'
   histograms summed choose the bin; each run's own give its keys above the new
   bracket. Unless the order is by index, a bin wider than one key that holds at most
   ``CAP = W * NB`` keys ends the reads (32-bit keys of a normal row: after the first):
   the write's read stages those keys' positions, and the narrowing goes on over them
   alone.
4. **Write.** Each run's keys above the bracket and inside it being known, a last read
   writes every key above it at slots counted by a running sum in index order (within
   a run, a warp's own scan; across runs, the counts of the runs before it). Where the
   bracket is one key, the pivot ``P`` (the k-th largest), the first ``k - above`` keys
   equal to it follow, interleaved in index order where the order is by index (the
   selection in index order, as the short rows' kernel writes it). Where it was left
   wider (staged, as above), the pivot and the selected keys among the staged ones are
   found after the read and written last. The read stores only the selected positions
   at their slots; after it each slot is read back and written once as its index
   (offset or cache slot) and value (put best first where the order is by value).

Exact whatever the data: each histogram is over a range of keys known to hold the
k-th, bins are monotone in the key, and counts are integers. Bounded: at most ``2 +
ceil(KEY_BITS / log2(NB))`` reads of the row (a normal row: two, whatever the dtype).
No data-dependent launch, no host sync.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .common import _window
from .short import SHORT_GROUPS, _row_offset, _write_staged
from .sync import (
    _histogram,
    _smem_bins_add,
    _smem_bins_read,
    _smem_bins_zero,
    _smem_words_store,
)

BRACKET_Z = tl.constexpr(3.0)  # the bracket's half width, in standard deviations ...
BRACKET_PAD = tl.constexpr(2.0)  # ... plus this many samples


@triton.jit
def _bkey(raw, KEYS: tl.constexpr):
    """The bracket's keys of raw bits ``raw`` (int16 or int32 as loaded; ``KEYS =
    (KEY_MASK, SIGN, INF_BITS, LARGEST, RAW16)``): in the contract's order, ±0 one key
    and every NaN one key, the largest (the smallest where not ``LARGEST``). Not
    ``common._to_key``'s values, for fewer instructions an entry in the reads: the
    magnitude signed by the sign bit (``(mag ^ s) - s``, ±0 both 0) plus the magnitude
    of infinity, so that -inf is 0, +inf ``2 * INF_BITS`` and the NaNs above it (the
    negative ones wrap around to the top), then every NaN clamped to one key,
    ``2 * INF_BITS + 1`` (below ``KEY_MASK``). Only this kernel's comparisons and
    histograms see them; its outputs are read from the row."""
    MAG: tl.constexpr = KEYS[0] ^ KEYS[1]
    TOP: tl.constexpr = 2 * KEYS[2] + 1
    v = raw.to(tl.int32)  # sign-extended from 16 bits
    s = (v >> 31).to(tl.uint32, bitcast=True)  # all ones where the sign is set
    t = (v.to(tl.uint32, bitcast=True) & MAG) ^ s
    key = tl.minimum(t - s + KEYS[2], tl.full([], TOP, tl.uint32))
    if not KEYS[3]:
        key = TOP - key
    return key


@triton.jit
def _load(x_row, stride_xc, pos, lo, hi):
    """The raw bits at the row positions ``pos`` inside ``[lo, hi)`` (0 elsewhere)."""
    ok = (pos >= lo) & (pos < hi)
    return tl.load(x_row + pos.to(tl.int64) * stride_xc, mask=ok, other=0)


@triton.jit
def _runs(a, hi, W: tl.constexpr, C: tl.constexpr):
    """The row's window from ``a`` to ``hi`` as ``W`` runs of ``nstep`` steps of ``C``
    elements, one run a warp in index order: each run's first position ``start``
    (``[W]``) and the positions of every run's first step ``p0`` (``[W, C]``, a
    warp a row: its reductions along the row are the warp's own, no barrier)."""
    nstep = tl.cdiv(tl.cdiv(hi - a, C), W)
    start = a + tl.arange(0, W) * (nstep * C)
    return start[:, None] + tl.arange(0, C)[None, :], start, nstep


@triton.jit
def _inner(a, lo, hi, nstep, W: tl.constexpr, C: tl.constexpr):
    """The steps ``[b_in, b_out)`` whose every run's ``C`` positions lie inside the
    window ``[lo, hi)`` (runs as ``_runs`` lays them from ``a``): the first step of the
    first run starts before ``lo`` unless ``a == lo``; the last run, furthest right,
    leaves the window first."""
    b_in = tl.where(a == lo, 0, 1)
    b_out = tl.maximum(hi - (a + (W - 1) * nstep * C), 0) // C
    return b_in, tl.maximum(b_out, b_in)


@triton.jit
def _step(x_row, stride_xc, p0, b, ahead, lo, hi, KEYS: tl.constexpr, C: tl.constexpr,
          INNER: tl.constexpr):  # fmt: skip
    """Step ``b`` of every run (first positions ``p0``), its raw bits ``ahead``
    (loaded a step before; step 0's by ``_load(.., p0, ..)``): its positions, keys and
    which are in ``[lo, hi)``, and step ``b + 1``'s raw bits, loaded now for the next
    step (positions past ``hi`` load nothing). ``INNER``: steps ``b`` and ``b + 1`` lie
    inside the window for every run (``_inner``): no bound compared, the next step
    loaded a vector a thread without a mask."""
    pos = p0 + b * C
    if INNER:
        nxt = tl.load(x_row + (pos + C).to(tl.int64) * stride_xc)
        ok = tl.full(pos.shape, 1, tl.int1)
    else:
        nxt = _load(x_row, stride_xc, pos + C, lo, hi)
        ok = (pos >= lo) & (pos < hi)
    key = _bkey(ahead, KEYS)
    return pos, key, ok, nxt


# word [$1] := $3 where $2 != 0 (a store that keeps its operands' layout: Triton's own
# store through a scattered pointer re-lays its operands out through shared memory)
_ST = "{ .reg .pred %p; setp.ne.s32 %p, $2, 0; @%p st.global.bBITS [$1], $3; mov.b32 $0, 0; }"
STORE32_ASM = tl.constexpr(_ST.replace("BITS", "32"))
STORE64_ASM = tl.constexpr(_ST.replace("BITS", "64"))


@triton.jit
def _scatter(ptr, val, mask, ASM: tl.constexpr):
    """``tl.store(ptr, val, mask=mask)`` (``val`` of the pointer's element type, 32 or
    64 bits: the staged positions); ``ASM``: by inline PTX, in the layout the operands
    have (GPU builds)."""
    if ASM:
        m = mask.to(tl.int32)
        if val.dtype.primitive_bitwidth == 32:
            tl.inline_asm_elementwise(STORE32_ASM, "=r,l,r,r", [ptr, m, val], dtype=tl.int32,
                                      is_pure=False, pack=1)  # fmt: skip
        else:
            tl.inline_asm_elementwise(STORE64_ASM, "=r,l,r,l", [ptr, m, val], dtype=tl.int32,
                                      is_pure=False, pack=1)  # fmt: skip
    else:
        tl.store(ptr, val, mask=mask)


@triton.jit
def _sample_bracket(x_row, stride_xc, lo, nv, k, KEYS: tl.constexpr, S: tl.constexpr):
    """``(blo, bhi)``: keys of the window's ``S`` evenly spaced samples at the ranks
    below and above the one the k-th key is expected at (every key where the rank
    falls outside the sample)."""
    j = tl.arange(0, S)
    pos = lo + ((nv.to(tl.int64) * j) // S).to(tl.int32)
    raw = _load(x_row, stride_xc, pos, lo, lo + nv)
    key = _bkey(raw, KEYS)
    srt = tl.sort(key, descending=True)
    m = (k * 1.0) * S / nv.to(tl.float32)  # k may be a compile-time 1
    d = BRACKET_Z * tl.sqrt(m) + BRACKET_PAD
    r_hi = (m - d).to(tl.int32)  # ranks from 1: the r-th largest sample at srt[r - 1]
    r_lo = tl.ceil(m + d).to(tl.int32)
    bhi = tl.sum(tl.where(j == r_hi - 1, srt, 0), axis=0).to(tl.uint32)
    blo = tl.sum(tl.where(j == r_lo - 1, srt, 0), axis=0).to(tl.uint32)
    bhi = tl.where(r_hi >= 1, bhi, KEYS[0]).to(tl.uint32)
    blo = tl.where(r_lo <= S, blo, 0).to(tl.uint32)
    return blo, bhi


@triton.jit
def _shift(span, LOG_NB: tl.constexpr):
    """The fewest bits ``s`` with ``span >> s < 2 ** LOG_NB``."""
    s = span.to(tl.int32) * 0
    while (span >> s) >= (1 << LOG_NB):
        s += 1
    return s


@triton.jit
def _bins_step(x_row, stride_xc, p0, b, ahead, lo, hi, blo, bhi, s, h, over,
               KEYS: tl.constexpr, C: tl.constexpr, LOG_NB: tl.constexpr,
               SMEM: tl.constexpr, INNER: tl.constexpr):  # fmt: skip
    """Step ``b`` of ``_bins``' read: its keys in ``[blo, bhi]`` added to their runs'
    bins, those above ``bhi`` counted (``over``); the next step's raw bits."""
    NB: tl.constexpr = 1 << LOG_NB
    W: tl.constexpr = p0.shape[0]
    at = (tl.arange(0, W) * NB)[:, None]  # each run's bins apart
    _, key, ok, ahead = _step(x_row, stride_xc, p0, b, ahead, lo, hi, KEYS, C, INNER)
    inb = ok & (key >= blo) & (key <= bhi)
    bins = tl.where(inb, at + ((key - blo) >> s).to(tl.int32), 0)
    if SMEM:
        _smem_bins_add(bins, inb)
    else:
        h += tl.histogram(tl.reshape(bins, [W * C]), W * NB, mask=tl.reshape(inb, [W * C]))
    over += (ok & (key > bhi)).to(tl.int32)
    return ahead, h, over


@triton.jit
def _bins(x_row, stride_xc, p0, lo, hi, nstep, inner, blo, bhi, s, KEYS: tl.constexpr,
          C: tl.constexpr, LOG_NB: tl.constexpr, SMEM: tl.constexpr):  # fmt: skip
    """One read of the window ``[lo, hi)`` by runs (``p0``, ``nstep``: see ``_runs``):
    each run's histogram (``[W, NB]``) of its keys in ``[blo, bhi]``, bin ``(key -
    blo) >> s``, by shared-memory atomics (``SMEM``; else in registers, as the
    interpreter runs it), and each run's count of keys above ``bhi`` (``[W]``). No
    other use of shared memory while the bins live: no reduction inside the loop (the
    counts are per-lane sums). The steps inside the window (``inner``) compare no
    bound."""
    NB: tl.constexpr = 1 << LOG_NB
    W: tl.constexpr = p0.shape[0]
    h = tl.zeros([W * NB], tl.int32)
    over = tl.zeros([W, C], tl.int32)
    if SMEM:
        _smem_bins_zero(W * NB)
    ahead = _load(x_row, stride_xc, p0, lo, hi)
    # the steps in order: before the inner ones, the inner ones whose next step is
    # inner too, the rest (the last inner one among them)
    b_in, b_out = inner
    tail = tl.maximum(b_in, b_out - 1)
    for b in range(0, b_in):
        ahead, h, over = _bins_step(
            x_row, stride_xc, p0, b, ahead, lo, hi, blo, bhi, s, h, over, KEYS, C, LOG_NB,
            SMEM, False,
        )  # fmt: skip
    for b in range(b_in, tail):
        ahead, h, over = _bins_step(
            x_row, stride_xc, p0, b, ahead, lo, hi, blo, bhi, s, h, over, KEYS, C, LOG_NB,
            SMEM, True,
        )  # fmt: skip
    for b in range(tail, nstep):
        ahead, h, over = _bins_step(
            x_row, stride_xc, p0, b, ahead, lo, hi, blo, bhi, s, h, over, KEYS, C, LOG_NB,
            SMEM, False,
        )  # fmt: skip
    if SMEM:
        h = _smem_bins_read(W * NB)
    return tl.reshape(h, [W, NB]), tl.sum(over, axis=1)


@triton.jit
def _narrow(hw, blo, bhi, s, above_w, kk, LOG_NB: tl.constexpr):
    """The bin of the runs' histograms ``hw`` (over ``[blo, bhi]`` at ``s`` bits)
    where the count from the top, the ``above_w`` keys beyond ``bhi`` first, reaches
    ``kk``: its keys ``[blo', bhi']``, and each run's keys above it and in it."""
    NB: tl.constexpr = 1 << LOG_NB
    h = tl.sum(hw, axis=0)
    at_least = tl.sum(h, axis=0) - tl.cumsum(h, axis=0) + h  # keys in this bin or higher
    reach = (tl.sum(above_w, axis=0) + at_least) >= kk
    b = tl.maximum(tl.sum(reach.to(tl.int32), axis=0) - 1, 0)  # the last bin that reaches
    j = tl.arange(0, NB)[None, :]
    above_w = above_w + tl.sum(tl.where(j > b, hw, 0), axis=1)
    in_w = tl.sum(tl.where(j == b, hw, 0), axis=1)
    blo = blo + (b.to(tl.uint32) << s)
    width = (tl.full([], 1, tl.uint32) << s.to(tl.uint32)) - 1
    bhi = tl.minimum(blo + width, bhi)
    return blo, bhi, above_w, in_w


@triton.jit
def _pivot(x_row, stride_xc, p0, lo, hi, nstep, inner, nv, k, KEYS: tl.constexpr,
           C: tl.constexpr, S: tl.constexpr, LOG_NB: tl.constexpr,
           SMEM: tl.constexpr, COLLECT: tl.constexpr):  # fmt: skip
    """Steps 1-3: the bracket ``[blo, bhi]`` of the window's k-th largest key, and each
    run's keys above it and inside it (``nv > k`` valid keys; runs as ``_runs`` gives
    them). The reads narrow it to one key (``blo == bhi``, the pivot), or, with
    ``COLLECT``, stop at the first bin wider than one key that holds at most
    ``W * 2**LOG_NB`` keys (``collect``): the write's read then stages them, and
    ``_collected`` narrows among those alone, at ``s`` bits first (the bin spans
    ``2**s`` keys, ``s > 0``). ``inner``: the steps inside the window (``_inner``)."""
    KEY_BITS: tl.constexpr = 16 if KEYS[4] else 32
    CAP: tl.constexpr = p0.shape[0] << LOG_NB
    kk = tl.minimum(k, nv)
    blo, bhi = _sample_bracket(x_row, stride_xc, lo, nv, k, KEYS, S)
    s = _shift(bhi - blo, LOG_NB)
    above_w = tl.zeros([p0.shape[0]], tl.int32)
    at_w = above_w
    first = nv == nv
    done = nv != nv
    collect = done
    # one read a step, from a single place in the code, so that nothing of Triton's
    # own can fall between the bins' zero and their read however it lays out the loop
    while not done:
        hw, over_w = _bins(
            x_row, stride_xc, p0, lo, hi, nstep, inner, blo, bhi, s, KEYS, C, LOG_NB, SMEM
        )  # fmt: skip
        above_w = tl.where(first, over_w, above_w)  # the first read counts the keys above
        above = tl.sum(above_w, axis=0)
        miss = first & ((above >= kk) | (above + tl.sum(tl.sum(hw, axis=1), axis=0) < kk))
        nlo, nhi, nabove_w, at_w = _narrow(hw, blo, bhi, s, above_w, kk, LOG_NB)
        # the sample that far off: every key, read again; else the bin that holds the
        # k-th key, read again at fewer bits while it spans more than one key (or, to
        # collect, held by few enough keys to stage)
        if COLLECT:
            collect = (miss == 0) & (s > 0) & (tl.sum(at_w, axis=0) <= CAP)
        blo = tl.where(miss, 0, nlo).to(tl.uint32)
        bhi = tl.where(miss, KEYS[0], nhi).to(tl.uint32)
        above_w = tl.where(miss, 0, nabove_w)
        done = ((not miss) & (s == 0)) | collect
        s = tl.where(miss, KEY_BITS - LOG_NB, tl.maximum(s - LOG_NB, 0))
        first = nv != nv
    return blo, bhi, s, above_w, at_w, collect


@triton.jit
def _collected(x_row, stride_xc, stage_row, c_b, blo, bhi, s, above, kk, oi_row, stride_oic,
               KEYS: tl.constexpr, LOG_NB: tl.constexpr, CAP: tl.constexpr,
               SMEM: tl.constexpr, NT: tl.constexpr):  # fmt: skip
    """After a write's read that staged the ``c_b <= CAP`` positions of the keys in the
    bracket ``[blo, bhi]`` in index order (in shared memory, or at ``stage_row``
    without ``SMEM``) and wrote the ``above`` keys beyond it: the pivot among them, by
    the reads' narrowing at ``s`` bits and down, and the ``kk - above`` of them that
    are selected (those above the pivot, then the first at it in index order) written
    to the outputs ``above .. kk - 1`` as positions (``_write_staged`` reads them
    back)."""
    NB: tl.constexpr = 1 << LOG_NB
    j = tl.arange(0, CAP)
    real = j < c_b
    if SMEM:
        pos = _smem_bins_read(CAP)
    else:
        pos = tl.load(stage_row + j, mask=real, other=0)
    key = _bkey(tl.load(x_row + pos.to(tl.int64) * stride_xc, mask=real, other=0), KEYS)
    above_w = tl.zeros([1], tl.int32) + above
    done = c_b != c_b
    while not done:
        inb = real & (key >= blo) & (key <= bhi)
        bins = tl.where(inb, ((key - blo) >> s).to(tl.int32), 0)
        h = tl.reshape(_histogram(bins, inb, NB, SMEM, NT), [1, NB])
        blo, bhi, above_w, _ = _narrow(h, blo, bhi, s, above_w, kk, LOG_NB)
        done = s == 0
        s = tl.maximum(s - LOG_NB, 0)
    eq = real & (key == blo)
    r = kk - tl.sum(above_w, axis=0)
    sel = real & ((key > blo) | (eq & (tl.cumsum(eq.to(tl.int32), axis=0) <= r)))
    slot = above + tl.cumsum(sel.to(tl.int32), axis=0) - 1
    sel = sel & (slot < kk)  # a guard: never a write past the row
    tl.store(oi_row + slot.to(tl.int64) * stride_oic, pos.to(oi_row.dtype.element_ty), mask=sel)


@triton.jit
def _write_step(x_row, stride_xc, p0, b, ahead, lo, hi, pk, phi_or_r, n_gt, n_eq, kk,
                oi_row, stride_oic, stage_row, KEYS: tl.constexpr, C: tl.constexpr,
                ASM: tl.constexpr, SMEM: tl.constexpr, STAGE: tl.constexpr,
                INNER: tl.constexpr):  # fmt: skip
    """Step ``b`` of ``_write_read``'s read; the next step's raw bits and the runs'
    counts after it."""
    pos, key, ok, ahead = _step(x_row, stride_xc, p0, b, ahead, lo, hi, KEYS, C, INNER)
    if STAGE:
        gt = ok & (key > phi_or_r)
        eq = ok & (key >= pk) & (key <= phi_or_r)
    else:
        r = phi_or_r
        gt = tl.where(r == 0, ok, ok & (key > pk))
        eq = tl.where(r == 0, False, ok & (key == pk))
    flags = gt.to(tl.int32) * 65536 + eq.to(tl.int32)
    run = tl.cumsum(flags, axis=1)  # < 65536 of each in a step
    c_eq = n_eq[:, None] + (run & 0xFFFF)
    if STAGE:
        slot = n_gt[:, None] + (run >> 16) - 1
        sel = gt
    else:
        slot = n_gt[:, None] + (run >> 16) + tl.minimum(c_eq, r) - 1
        sel = gt | (eq & (c_eq <= r))
    # (slot < kk holds for every selected key: a guard, never a write past the row)
    sel = sel & (slot < kk)
    oi_at = oi_row + slot.to(tl.int64) * stride_oic
    _scatter(oi_at, pos.to(oi_row.dtype.element_ty), sel, ASM)
    if STAGE:
        if SMEM:
            _smem_words_store(c_eq - 1, pos, eq)
        else:
            tl.store(stage_row + c_eq - 1, pos, mask=eq)
    tot = tl.sum(flags, axis=1)
    return ahead, n_gt + (tot >> 16), n_eq + (tot & 0xFFFF)


@triton.jit
def _write_read(x_row, stride_xc, p0, lo, hi, nstep, inner, pk, phi_or_r, n_gt, n_eq, kk,
                oi_row, stride_oic, stage_row, KEYS: tl.constexpr, C: tl.constexpr,
                ASM: tl.constexpr, SMEM: tl.constexpr, STAGE: tl.constexpr):  # fmt: skip
    """Step 4's read of the window (runs ``p0``, ``nstep``; ``n_gt``, ``n_eq``: the keys
    of the runs before each above the bracket and in it): each key above it goes to
    its output slot as its position, counted in index order. ``STAGE``: the bracket
    ``[pk, phi_or_r]`` holds more than one key, and the positions of its keys go to
    their slots in the staging words (shared memory, or ``stage_row``) for
    ``_collected``. Else the bracket is the pivot ``pk`` (``phi_or_r``: the ``r`` keys at
    it to take), whose first ``r`` keys go to the outputs interleaved with the keys
    above it in index order; ``r = 0`` where the window holds at most k keys (every
    valid key is then above it). The steps inside the window (``inner``) compare no
    bound."""
    if STAGE:
        tl.debug_barrier()  # Triton's earlier uses of the staging words are over
    ahead = _load(x_row, stride_xc, p0, lo, hi)
    b_in, b_out = inner  # the steps in order, as in _bins
    tail = tl.maximum(b_in, b_out - 1)
    for b in range(0, b_in):
        ahead, n_gt, n_eq = _write_step(
            x_row, stride_xc, p0, b, ahead, lo, hi, pk, phi_or_r, n_gt, n_eq, kk, oi_row,
            stride_oic, stage_row, KEYS, C, ASM, SMEM, STAGE, False,
        )  # fmt: skip
    for b in range(b_in, tail):
        ahead, n_gt, n_eq = _write_step(
            x_row, stride_xc, p0, b, ahead, lo, hi, pk, phi_or_r, n_gt, n_eq, kk, oi_row,
            stride_oic, stage_row, KEYS, C, ASM, SMEM, STAGE, True,
        )  # fmt: skip
    for b in range(tail, nstep):
        ahead, n_gt, n_eq = _write_step(
            x_row, stride_xc, p0, b, ahead, lo, hi, pk, phi_or_r, n_gt, n_eq, kk, oi_row,
            stride_oic, stage_row, KEYS, C, ASM, SMEM, STAGE, False,
        )  # fmt: skip


BRACKET_GROUPS = dict(
    **{g: SHORT_GROUPS[g] for g in ("xin", "win", "out", "off", "fills", "page", "KEYS", "FORM")},
    SEL=("BLOCK", "S", "LOG_NB", "KP", "SMEM_HIST", "ASM", "WARPS"),
    PAGE=SHORT_GROUPS["PAGE"],
)  # fmt: skip
"""How :func:`bracket_rows_kernel` bundles its arguments (see ``launch.bundle``): the
short rows' row, window, output, offset, fill, page, key and form tuples, and its own
selection constants."""

BRACKET_DEFAULTS = dict(PAGED=False, PAGE_SHIFT=0, HAS_R2B=False)
"""The bundled compile-time arguments a launch may leave out (no page map)."""


@triton.jit
def bracket_rows_kernel(
    xin, win, out, off, fills, k, stage, page, KEYS: tl.constexpr, FORM: tl.constexpr,
    SEL: tl.constexpr, PAGE: tl.constexpr,
):  # fmt: skip
    """Exact top-k of row ``program_id(0)`` of ``xin = (x_ptr, stride_xr, stride_xc, N)``
    (its int16/int32 raw view) inside its window (``win = (begin_ptr, end_ptr)``), into
    the ``[rows, k]`` outputs ``out = (ov_ptr, oi_ptr, stride_ovr, stride_ovc,
    stride_oir, stride_oic)`` (``ORDER`` 0: any, 1: by value, 2: by index), with the index
    offset ``off = (off_ptr, off_scalar)``, the fills ``fills = (fill_index,
    fill_bits)`` past a window shorter than k and the page map ``page``; ``stage``:
    ``[rows, W * 2**LOG_NB]`` int32 words for the staged positions without
    ``SMEM_HIST`` (else shared memory holds them, and ``stage`` is not read). Compile-time:
    ``KEYS``, ``FORM``, ``PAGE`` as ``short_rows_kernel`` takes them; ``SEL = (BLOCK,
    S, LOG_NB, KP, SMEM_HIST, ASM, WARPS)``: the elements read at once (a multiple of
    the program's threads), the sample, the histogram's bins (log2), a power of two >=
    k, shared-memory histograms, the positions' stores by inline PTX (GPU builds), the
    program's warps. Each warp reads its own run of the row (a ``BLOCK / WARPS`` step
    at a time, each load issued a step ahead) and keeps its own histogram, so that
    its counts and running sums need no barrier; the write stages the selection's
    positions at their slots in the loop and writes indices and values after it, once
    an output."""
    x_ptr, stride_xr, stride_xc, N = xin
    begin_ptr, end_ptr = win
    ov_ptr, oi_ptr, stride_ovr, stride_ovc, stride_oir, stride_oic = out
    off_ptr, off_scalar = off
    RAW16: tl.constexpr = KEYS[4]
    ORDER: tl.constexpr = FORM[0]
    HAS_WINDOW: tl.constexpr = FORM[1]
    OFF_TENSOR: tl.constexpr = FORM[2]
    WRITE_VALUES: tl.constexpr = FORM[3]
    BLOCK: tl.constexpr = SEL[0]
    S: tl.constexpr = SEL[1]
    LOG_NB: tl.constexpr = SEL[2]
    KP: tl.constexpr = SEL[3]
    SMEM: tl.constexpr = SEL[4]
    ASM: tl.constexpr = SEL[5]
    W: tl.constexpr = SEL[6]
    C: tl.constexpr = BLOCK // W
    V: tl.constexpr = 8 if RAW16 else 4  # elements of a 16-byte vector
    COLLECT: tl.constexpr = ORDER != 2  # (by index: the selection in index order)
    CAP: tl.constexpr = W << LOG_NB  # the keys a bracket may hold to be staged
    row = tl.program_id(0)
    row64 = row.to(tl.int64)
    x_row = x_ptr + row64 * stride_xr
    lo, hi = _window(begin_ptr, end_ptr, row, N, HAS_WINDOW)
    nv = hi - lo
    kk = tl.minimum(k, nv)
    a = (lo // V) * V  # runs start at a vector's first element
    p0, start, nstep = _runs(a, hi, W, C)
    inner = _inner(a, lo, hi, nstep, W, C)
    # a window of at most k keys: every valid key, each run's share of them
    gt_w = tl.maximum(tl.minimum(hi, start + nstep * C) - tl.maximum(lo, start), 0)
    eq_w = gt_w * 0
    pk = tl.zeros([], tl.uint32)
    phi = pk
    s = pk.to(tl.int32)
    collect = nv != nv
    if nv > k:
        pk, phi, s, gt_w, eq_w, collect = _pivot(
            x_row, stride_xc, p0, lo, hi, nstep, inner, nv, k, KEYS, C, S, LOG_NB, SMEM,
            COLLECT,
        )  # fmt: skip
    # 4. the write: every key above the bracket [pk, phi], then the first kk - above keys
    # in it where it is one key (the pivot), in index order (interleaved where the order
    # is by index); positions staged at their slots in the loop, indices and values once
    # an output after. A bracket of more keys (collect): its keys' positions staged in
    # index order, the pivot and their selection found among them after the loop
    offset = _row_offset(off_ptr, off_scalar, row, OFF_TENSOR)
    oi_row = oi_ptr + row64 * stride_oir
    ov_row = ov_ptr + row64 * stride_ovr
    orow = (oi_row, stride_oic, ov_row, stride_ovc)
    above = tl.sum(gt_w, axis=0)
    r = kk - above
    n_gt = tl.cumsum(gt_w, axis=0) - gt_w  # the keys of the runs before each, in order
    n_eq = tl.cumsum(eq_w, axis=0) - eq_w
    stage_row = stage + row64 * CAP
    if COLLECT and collect:
        _write_read(
            x_row, stride_xc, p0, lo, hi, nstep, inner, pk, phi, n_gt, n_eq, kk, oi_row,
            stride_oic, stage_row, KEYS, C, ASM, SMEM, True,
        )  # fmt: skip
        tl.debug_barrier()  # every staged position before the read-back
        _collected(
            x_row, stride_xc, stage_row, tl.sum(eq_w, axis=0), pk, phi, s, above, kk,
            oi_row, stride_oic, KEYS, LOG_NB, CAP, SMEM, W * 32,
        )  # fmt: skip
    else:
        _write_read(
            x_row, stride_xc, p0, lo, hi, nstep, inner, pk, r, n_gt, n_eq, kk, oi_row,
            stride_oic, stage_row, KEYS, C, ASM, SMEM, False,
        )  # fmt: skip
    tl.debug_barrier()  # every staged position before the read-back
    _write_staged(
        x_row, stride_xc, 0, kk, kk, k, True, row, offset, orow, fills, page, KEYS,
        ORDER == 1, WRITE_VALUES, KP, PAGE,
    )  # fmt: skip
