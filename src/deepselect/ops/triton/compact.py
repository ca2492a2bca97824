"""Compaction: the exact k best of a candidate buffer by radix passes over the filled
slots (ties by index), the sample's bound before the stream, and the warps' meeting."""

from __future__ import annotations

import triton
import triton.language as tl

from .common import (
    NREG,
    NT_STREAM,
    WALK,
    _block_at,
    _clock,
    _first_kk,
    _lap,
    _raw_key,
)
from .sync import (
    PUBLISH_ASM,
    RAISE_CLEAR_ASM,
    _asm_once,
    _histogram,
    _poll,
    _set_sync,
    _smem_base,
    _smem_bins_add,
    _smem_bins_read,
    _smem_bins_zero,
    _sync_read,
    _tk_least,
)


@triton.jit
def _publish32(wcnt32, cnt_ptr):
    """Each warp's count to ``cnt_ptr[warp]``; then a barrier, and the total."""
    tl.inline_asm_elementwise(
        PUBLISH_ASM, "=r,r,l", [wcnt32, cnt_ptr + wcnt32 * 0],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip
    tl.debug_barrier()  # the counts and every warp's appends before anyone reads them
    return tl.sum(tl.load(cnt_ptr + tl.arange(0, NREG)), axis=0)


# --------------------------------------------------------------------- compaction
# A compaction reads the regions of one half of the scratch (counts in cnt_ptr) and
# writes the survivors to the other half, survivor r at slot r // NREG of region
# r % NREG. Passes walk the regions in chunks of CH = NREG x CHR candidates.
@triton.jit
def _chunk_values(src_k, src_i, addr0, col, cnt_l, j, pkey, BY_INDEX: tl.constexpr,
                  CH: tl.constexpr):  # fmt: skip
    """Chunk ``j`` of a compaction's walk over the regions: each slot's value (its key,
    or, BY_INDEX, its index, as uint32) and whether it takes part (a filled slot; with
    BY_INDEX, one whose key is ``pkey``)."""
    CHR: tl.constexpr = CH // NREG
    m = j * CHR + col < cnt_l
    ck = tl.load(src_k + addr0 + j * CHR, mask=m, other=0).to(tl.uint32, bitcast=True)
    if BY_INDEX:
        ci = tl.load(src_i + addr0 + j * CHR, mask=m, other=0)
        return ci.to(tl.uint32, bitcast=True), m & (ck == pkey)
    return ck, m


@triton.jit
def _radix_pass(
    keys,
    prefix,
    rem,
    above,
    SHIFT: tl.constexpr,
    WIDTH: tl.constexpr,
    TOP: tl.constexpr,
    SMEM: tl.constexpr = False,
    NT: tl.constexpr = 0,
):
    """One digit of the radix select: the digit ``(key >> SHIFT) % 2^WIDTH`` of the
    ``rem``-th largest among the valid keys whose bits above the digit equal those of
    ``prefix`` (``TOP``: there are none, every key takes part).

    The histogram counts bins from the top (bin ``j`` holds digit ``2^WIDTH - 1 - j``),
    so that one inclusive cumulative sum gives, per bin, the keys at or above its
    digit. Invalid elements hold key 0, so they can only fall into the last bin (digit
    0, while the prefix so far is 0), and they need no mask: they add to no count
    above it, and the last bin is chosen exactly when the bins above it hold fewer
    than ``rem`` keys, whatever it holds. Invariant: at least ``rem >= 1`` matching
    valid keys exist, so a bin is found. Returns the prefix with this digit set, the
    rank left inside the chosen digit and the count of valid keys above the new
    prefix. ``SMEM``, ``NT``: the histogram by shared-memory atomics (:func:`_histogram`)."""
    NB: tl.constexpr = 1 << WIDTH
    rbin = ((NB - 1) - ((keys >> SHIFT) & (NB - 1))).to(tl.int32)
    if TOP:
        h = _histogram(rbin, None, NB, SMEM, NT)
    else:
        match = (keys >> (SHIFT + WIDTH)) == (prefix >> (SHIFT + WIDTH))
        h = _histogram(rbin, match, NB, SMEM, NT)
    c = tl.cumsum(h, axis=0)
    # the bins strictly above the chosen one are those still short of rem: their number
    # (the chosen bin's position) and their keys in one sum, the number in bits 20+
    # (counts are at most NMAX <= 16384 < 2^20, bins at most 256)
    s = tl.sum(tl.where(c < rem, h + (1 << 20), 0), axis=0)
    gt = s & 0xFFFFF
    digit = ((NB - 1) - (s >> 20)).to(tl.uint32)
    return prefix | (digit << SHIFT), rem - gt, above + gt


@triton.jit
def _radix_select(
    keys, nv, kmax, kmin, k, BITS: tl.constexpr, RB: tl.constexpr, SMEM: tl.constexpr = False,
    NT: tl.constexpr = 0, TOP_BITS: tl.constexpr = 0,
):  # fmt: skip
    """The k-th largest valid key P and the number of valid keys above it, by a radix
    select from the top digit down: ``ceil(BITS / RB)`` histogram passes at most, the
    ``BITS`` key bits shared out as evenly as possible (16-bit keys with ``RB = 6``:
    digits of 5, 5 and 6 bits; a digit narrower than ``RB`` costs the same).

    A digit that is the same in every valid key (the bits of ``kmin ^ kmax`` from the
    digit up are zero) is known without a pass: the prefix takes ``kmin``'s bits and
    no key is above it. If ``nv <= k`` every pass is skipped (every valid element is
    selected; the result is then unused). ``SMEM``: histograms in shared memory
    (:func:`_histogram`; ``NT`` the program's threads). TOP_BITS > 0: no pass once at
    least that many top bits are known; the lower bits of the result are then 0 (the
    lowest key of the k-th key's bin: at most the k-th key, and ``above`` counts the
    keys above the bin)."""
    NPASS: tl.constexpr = (BITS + RB - 1) // RB
    prefix = (kmin * 0).to(tl.uint32)
    rem = tl.minimum(k, nv)
    above = nv * 0
    diff = (kmin ^ kmax).to(tl.uint32)
    for t in tl.static_range(NPASS if TOP_BITS == 0 else -(-TOP_BITS * NPASS // BITS)):
        # digit t: bits [BITS - (t + 1) * BITS // NPASS, BITS - t * BITS // NPASS)
        if (nv > k) & ((diff >> (BITS - ((t + 1) * BITS) // NPASS)) != 0):
            prefix, rem, above = _radix_pass(
                keys,
                prefix,
                rem,
                above,
                BITS - ((t + 1) * BITS) // NPASS,
                ((t + 1) * BITS) // NPASS - (t * BITS) // NPASS,
                t == 0,
                SMEM,
                NT,
            )
        else:
            prefix = (kmin >> (BITS - ((t + 1) * BITS) // NPASS)) << (
                BITS - ((t + 1) * BITS) // NPASS
            )
    return prefix, above


@triton.jit
def _search_held(
    keys, pk, hi, kk, tol, total, RADIX: tl.constexpr, SMEM: tl.constexpr,
    TOP_BITS: tl.constexpr = 0,
):  # fmt: skip
    """The kk-th largest of the register-held ``keys`` (uint32, ``total`` of them
    valid, all >= ``pk``, the others 0), known to lie in ``[pk, hi]`` with ``hi`` the
    largest. RADIX: by :func:`_radix_select` (digits of up to 6 bits, or with SMEM
    of 8 and their histograms in shared memory; digits every key shares skipped;
    TOP_BITS: see there, the key is then a lower bound). Else by bisection, a compare
    and a block-wide sum a step; ``tol > 0``: it may stop at a key with between kk
    and kk + tol keys at or above it."""
    if RADIX:  # empty slots hold key 0, as _radix_select takes invalid elements
        pk, _ = _radix_select(
            keys, total, hi, pk, kk, 32, 8 if SMEM else 6, SMEM, NT_STREAM, TOP_BITS,
        )  # fmt: skip
    else:
        while pk < hi:  # invariant: at least kk candidates have key >= pk
            mid = pk + (hi - pk) // 2 + 1
            c = tl.sum((keys >= mid).to(tl.int32), axis=0)
            if c >= kk:
                pk = mid
                if (tol > 0) & (c <= kk + tol):  # close enough: done
                    hi = mid
            else:
                hi = mid - 1
    return pk


@triton.jit
def _census(src_k, src_i, addr0, col, cnt_l, nch, pk, CH: tl.constexpr):
    """A pass over the candidates (chunks of :func:`_compact`'s walk): how many have
    a key above ``pk`` and equal to it, and the lowest and highest tied index."""
    CHR: tl.constexpr = CH // NREG
    n_gt = tl.zeros([CH], tl.int32)
    n_eq = tl.zeros([CH], tl.int32)
    imin = tl.full([CH], 0x7FFFFFFF, tl.int32)
    imax = tl.full([CH], -1, tl.int32)
    for j in range(0, nch):
        m = j * CHR + col < cnt_l
        ck = tl.load(src_k + addr0 + j * CHR, mask=m, other=0).to(tl.uint32, bitcast=True)
        ci = tl.load(src_i + addr0 + j * CHR, mask=m, other=0)
        eq = m & (ck == pk)
        n_gt += (m & (ck > pk)).to(tl.int32)
        n_eq += eq.to(tl.int32)
        imin = tl.minimum(imin, tl.where(eq, ci, 0x7FFFFFFF))
        imax = tl.maximum(imax, tl.where(eq, ci, -1))
    gt = tl.sum(n_gt, axis=0)
    eqn = tl.sum(n_eq, axis=0)
    return gt, eqn, tl.min(imin, axis=0), tl.max(imax, axis=0)


# A compaction's pivot key, and where ties must be cut the tied indices' bound, by
# radix passes over the filled slots only (the chunks of _compact's walk), an 8-bit
# digit a pass, each pass one histogram of 256 bins accumulated over the chunks. No
# key is held in registers, so the buffer may be of any size; a pass costs per
# candidate, not per slot. The histograms by shared-memory atomics with the PTX
# path (inline PTX), tl.histogram otherwise (as in the interpreter).


@triton.jit
def _chunk_pass(
    src_k, src_i, addr0, col, cnt_l, nch, prefix, rem, lo, first, pk, base,
    BY_INDEX: tl.constexpr, CH: tl.constexpr, SMEM: tl.constexpr,
):  # fmt: skip
    """One digit of a radix select over the candidates: bits ``[lo, lo + 8)`` of the
    ``rem``-th largest value ``v`` among those whose bits above ``lo + 8`` equal
    ``prefix``'s (``first``: the top digit, every candidate takes part). ``v`` is the
    key, or, BY_INDEX, ``base - index`` of the candidates whose key is ``pk`` (so the
    largest ``v`` is the lowest index). Returns the prefix with the digit set, the rank
    left inside it, the values above the new prefix among those matching the old one,
    and the values equal to the new prefix's digits so far (the chosen bin's count)."""
    sh = tl.minimum(lo + 8, 31)  # (every v that reaches past bit 31 has first set)
    h = tl.zeros([256], tl.int32)
    if SMEM:
        _smem_bins_zero(256)
    for j in range(0, nch):
        v, m = _chunk_values(src_k, src_i, addr0, col, cnt_l, j, pk, BY_INDEX, CH)
        if BY_INDEX:
            v = base - v
        m = m & (((v >> sh) == (prefix >> sh)) | first)
        rbin = (255 - ((v >> lo) & 255)).to(tl.int32)  # bin 0: the highest digit
        if SMEM:
            _smem_bins_add(rbin, m)
        else:
            h += tl.histogram(rbin, 256, mask=m)
    if SMEM:
        h = _smem_bins_read(256)
    c = tl.cumsum(h, axis=0)  # the values at or above each bin's digit
    # in one sum: the bins above the chosen one (their number and their values) and
    # the chosen bin's count, bits 0..19, 20..27 and 32.. (counts below 2^20)
    chosen = (c >= rem) & (c - h < rem)
    s = tl.sum(
        tl.where(c < rem, h + (1 << 20), 0).to(tl.int64)
        + tl.where(chosen, h.to(tl.int64) << 32, 0),
        axis=0,
    )
    gt = (s & 0xFFFFF).to(tl.int32)
    digit = (255 - ((s >> 20) & 0xFF)).to(tl.uint32)
    eq = (s >> 32).to(tl.int32)
    return prefix | (digit << lo), rem - gt, gt, eq


@triton.jit
def _chunk_kth(
    src_k, addr0, col, cnt_l, nch, kk, KEY_BITS: tl.constexpr, CH: tl.constexpr,
    SMEM: tl.constexpr,
):  # fmt: skip
    """The kk-th largest key P of the candidates (``1 <= kk <=`` their count) by
    :func:`_chunk_pass`, one pass per 8 key bits; returns P, the candidates with a
    key above it and those with key P."""
    kk = kk + tl.zeros((), tl.int32)  # a tensor also where k is a compile-time 1
    prefix = (kk * 0).to(tl.uint32)
    rem = kk
    gt = kk * 0
    eq = kk * 0
    for t in tl.static_range(KEY_BITS // 8):
        prefix, rem, g, eq = _chunk_pass(
            src_k, src_k, addr0, col, cnt_l, nch, prefix, rem, KEY_BITS - 8 * (t + 1),
            (kk * 0 + t) == 0, prefix, prefix, False, CH, SMEM,
        )  # fmt: skip
        gt += g
    return prefix, gt, eq


@triton.jit
def _chunk_tied(
    src_k, src_i, addr0, col, cnt_l, nch, pk, ilo, ihi, need, CH: tl.constexpr,
    SMEM: tl.constexpr,
):  # fmt: skip
    """The ``need``-th lowest index among the candidates whose key is ``pk``, their
    indices in ``[ilo, ihi]`` (distinct: an element is a candidate once): a radix
    select of ``ihi - index`` over the digits that the range spans."""
    span = (ihi - ilo).to(tl.uint32)
    top = ihi * 0
    while (top < 24) & ((span >> tl.minimum(top + 8, 31)) != 0):
        top += 8
    prefix = span * 0
    rem = need
    lo = top
    while lo >= 0:
        prefix, rem, _, _ = _chunk_pass(
            src_k, src_i, addr0, col, cnt_l, nch, prefix, rem, lo, lo == top, pk,
            ihi.to(tl.uint32), True, CH, SMEM,
        )  # fmt: skip
        lo -= 8
    return ihi - prefix.to(tl.int32)


@triton.jit
def _sample_cols(
    e, first, m, a, c, p, B: tl.constexpr, NS: tl.constexpr, CHUNK: tl.constexpr, lo=0, hi=0,
    ENDS: tl.constexpr = False,
):  # fmt: skip
    """The row's columns of the sample's elements ``e`` (``tl.arange(0, NS)``), all in
    the row's middle blocks (1 .. m - 2 of :func:`_block_at`, wholly in the window;
    ``m - 2 >= p = CAP // B`` and ``NS <= CAP``). CHUNK = 0: the first ``NS`` elements
    of the order's first ``p`` middle blocks. Else ``NS / CHUNK`` runs of CHUNK
    consecutive elements, evenly spaced over all the middle blocks (run ``j`` in slot
    ``(2j + 1) * slots / (2 NS / CHUNK)`` of their CHUNK-element slots, the middle
    of its share; NS and CHUNK powers of two): a fixed, data-independent
    sample, as the blocks are, that no trend along the row can skew (a sample of
    whole blocks of an ascending row misses the row's top or holds only it). ENDS
    (with CHUNK): the runs spread the same way over the CHUNK-aligned slots of the
    whole window ``[lo, hi)``, the row's first and last blocks too (they hold the top
    of a row that rises or falls along its length); the middle blocks alone hold
    enough of those slots (they are aligned and lie in the window)."""
    if CHUNK == 0:
        col = (_block_at(e // B, m, a, c, p) + first) * B + e % B
    else:  # the slots from ``base`` on, at least NS // CHUNK of them
        if ENDS:
            base = (lo + CHUNK - 1) // CHUNK * CHUNK
            slots = (hi // CHUNK - base // CHUNK).to(tl.int64)
        else:
            base = (first + 1) * B
            slots = ((m - 2) * (B // CHUNK)).to(tl.int64)
        run = (((e // CHUNK) * 2 + 1).to(tl.int64) * slots // (2 * NS // CHUNK)).to(tl.int32)
        col = base + run * CHUNK + e % CHUNK
    return col


@triton.jit(noinline=True)  # its registers apart from the stream loop's
def _sample_bound(
    x_row, first, m, a, c, p, k, sample_n, KEY_BITS: tl.constexpr, KEY_MASK: tl.constexpr,
    SIGN: tl.constexpr, INF_BITS: tl.constexpr, LARGEST: tl.constexpr, B: tl.constexpr,
    NS: tl.constexpr, RADIX: tl.constexpr, SMEM: tl.constexpr, SAMPLE_Z: tl.constexpr,
    SAMPLE_TOL: tl.constexpr, CHUNK: tl.constexpr, prof, PROFILE: tl.constexpr,
    SAMPLE_BITS: tl.constexpr = 0, lo=0, hi=0,
):  # fmt: skip
    """SAMPLE_PRE: where a sampled row's threshold starts, in place of appending its
    sample and compacting it to its rank. The sample (:func:`_sample_cols`: the first
    ``NS <= CAP`` elements of the first ``p = CAP // B`` middle blocks of the order,
    or runs of CHUNK spread over all of them) is read into registers and the rank
    :func:`_first_kk` of its ``NS`` keys found by :func:`_search_held`: that key is
    the bound (a smaller sample: a lower rank's key, so a lower bound, found with less
    work). The stream starts there, as at a preset key, from the order's first block,
    and reads the sample again (from L2, most of it), its hits placed as any.
    SAMPLE_TOL > 0: the search may stop at a key with between the rank and ``rank *
    (1 + 2^-SAMPLE_TOL)`` sampled keys at or above it (a bound that much lower: still
    valid, as any bound at or below the rank's key). SAMPLE_BITS > 0 (a radix
    select): the bound is the lowest key of the rank's key's top SAMPLE_BITS bits
    (fewer passes; a lower bound). ENDS: the runs over the whole window ``[lo,
    hi)``, not its middle blocks only (:func:`_sample_cols`). PROFILE: the loads' and the
    search's cycles added to ``prof[9]`` and ``prof[10]``. Returns the bound and the
    sample's largest key."""
    if PROFILE:
        t0 = _clock(sample_n)
    col = _sample_cols(tl.arange(0, NS), first, m, a, c, p, B, NS, CHUNK, lo, hi, True)
    keys = _raw_key(tl.load(x_row + col), KEY_BITS == 16, KEY_MASK, SIGN, INF_BITS, LARGEST)
    kk = _first_kk(sample_n * 0 + NS, k, sample_n, sample_n * 0 + 0x7FFFFFFF, SAMPLE_Z)
    k_lo = tl.min(keys, axis=0)
    k_hi = tl.max(keys, axis=0)
    if PROFILE:
        t1 = _clock(k_lo + k_hi)
        tl.atomic_add(prof + 9, t1 - t0)
    tol = kk * 0
    if SAMPLE_TOL > 0:
        tol = kk >> SAMPLE_TOL
    TOP: tl.constexpr = 0 if SAMPLE_BITS == 0 else SAMPLE_BITS + 32 - KEY_BITS  # of 32
    pk = _search_held(keys, k_lo, k_hi, kk, tol, NS, RADIX, SMEM, TOP)
    if PROFILE:
        tl.atomic_add(prof + 10, _clock(pk) - t1)
    tl.debug_barrier()  # the reductions' shared memory is free for the stream's words
    return pk, k_hi


@triton.jit
def _compact(
    src_k, src_i, dst_k, dst_i, cnt_ptr, total, kk, slack, lo_key, KEY_BITS: tl.constexpr,
    SMEM: tl.constexpr, CAP: tl.constexpr, prof, PROFILE: tl.constexpr,
):  # fmt: skip
    """Keep the best of the ``total`` candidates (regions of ``src``, counts at
    ``cnt_ptr``) in ``dst`` and return the new threshold (key, index) and count.

    The pivot key P is the kk-th largest key, by radix passes over the filled slots
    (:func:`_chunk_kth`: any buffer size, a pass costs per candidate; SMEM: their
    histograms by shared-memory atomics). Candidates with key > P survive; of those
    tied at P, all survive while that leaves at most ``kk + slack`` (then the
    threshold is (P, largest tied index), valid since every dropped or later-filtered
    element has kk better survivors); otherwise exactly the lowest-index ones needed
    (radix passes over the tied indices, :func:`_chunk_tied`, after a census of their
    range). ``slack = 0`` gives exactly kk; ``total <= kk`` keeps everything.
    PROFILE: the cycles of the key search, the census, the tied-index search and the
    survivors' placement added to ``prof[12:16]``."""
    S: tl.constexpr = CAP // NREG
    CH: tl.constexpr = WALK
    CHR: tl.constexpr = CH // NREG
    offs = tl.arange(0, CH)
    col = offs % CHR
    cnt_l = tl.load(cnt_ptr + offs // CHR)
    addr0 = (offs // CHR) * S + col
    nch = (tl.max(cnt_l, axis=0) + CHR - 1) // CHR
    pk = lo_key * 0
    pi = total * 0 + 0x7FFFFFFF
    if PROFILE:
        q = _clock(total)
    if total > kk:
        # radix passes over the filled slots: the key, its counts, and where the ties
        # must be cut, their indices' range (a census) and the bound among them
        pk, gt, eqn = _chunk_kth(
            src_k, addr0, col, cnt_l, nch, kk, KEY_BITS, CH, SMEM,
        )  # fmt: skip
        if PROFILE:
            q = _lap(q, pk, prof + 12)
        ilo = pi * 0
        if (gt + eqn > kk + slack) | (slack > 0):  # the threshold's index: the ties' range
            _, _, ilo, pi = _census(src_k, src_i, addr0, col, cnt_l, nch, pk, CH)
        if PROFILE:
            q = _lap(q, pi, prof + 13)
        if gt + eqn > kk + slack:
            pi = _chunk_tied(
                src_k, src_i, addr0, col, cnt_l, nch, pk, ilo, pi, kk - gt, CH, SMEM,
            )  # fmt: skip
        if PROFILE:
            q = _lap(q, pi, prof + 14)
    # survivors to the other half, dealt round-robin over its regions
    base = total * 0
    for j in range(0, nch):
        m = j * CHR + col < cnt_l
        ck = tl.load(src_k + addr0 + j * CHR, mask=m, other=0).to(tl.uint32, bitcast=True)
        ci = tl.load(src_i + addr0 + j * CHR, mask=m, other=0)
        surv = m & ((ck > pk) | ((ck == pk) & (ci <= pi)))
        s = surv.to(tl.int32)
        pos = base + tl.cumsum(s, axis=0) - 1
        dst = (pos % NREG) * S + pos // NREG
        tl.store(dst_k + dst, ck.to(tl.int32, bitcast=True), mask=surv)
        tl.store(dst_i + dst, ci, mask=surv)
        base += tl.sum(s, axis=0)
    if PROFILE:
        tl.atomic_add(prof + 15, _clock(base) - q)
    return pk, pi, base


@triton.jit(noinline=True)  # one copy: every warp meets at the same barriers
def _meet(
    scr_k, scr_i, cnt_ptr, cur, wcount, done, k, B2, tk, ti, sample_n,
    KEY_BITS: tl.constexpr, CAP: tl.constexpr, SAMPLE_Z: tl.constexpr, RAISE: tl.constexpr = 0,
):  # fmt: skip
    """Where the independently streaming warps (W32) meet: a compaction of half ``cur``
    into the other, with each warp's count ``wcount``; the final one (slack 0) once
    every warp is done. ``done``: this warp has filtered all its blocks. Returns the
    threshold, the count, the half to append to (after the final compaction: the
    half it read, as the output expects) and whether this was the final one.
    ``sample_n > 0``: a compaction before the last keeps :func:`_first_kk`. RAISE > 0:
    the warps' thresholds may differ (each raised its own): the search starts from
    the least of them (every one is at most the buffer's k-th key)."""
    z32 = tl.zeros([32], tl.int32)
    if RAISE > 0:
        tk = _tk_least(tk, z32)  # its barrier is the one below's
    else:
        tl.debug_barrier()  # every warp is here: its appends and its done byte are in
    sb32 = _smem_base(z32)
    d0, d1, wanted, _ = _sync_read(z32, sb32)
    fin = _poll(z32, 0, d0, d1, wanted, sb32) >> 1  # the same in every warp
    total = _publish32(z32 + wcount, cnt_ptr)
    kk = tl.where(fin != 0, k, _first_kk(total, k, sample_n, ti, SAMPLE_Z))
    slack = tl.where(fin != 0, 0, B2 // 2)
    tk, ti, count = _compact(
        scr_k + cur, scr_i + cur, scr_k + (CAP - cur), scr_i + (CAP - cur), cnt_ptr,
        total, kk, slack, tk, KEY_BITS, True, CAP, cnt_ptr, False,
    )  # fmt: skip
    tl.debug_barrier()  # the compaction's use of shared memory is over
    _set_sync(z32 + done, 1)
    if RAISE > 0:
        _asm_once(z32, RAISE_CLEAR_ASM)
    tl.debug_barrier()  # the sync state is consistent before anyone polls
    # the survivors are in the other half; the output reads "the other half" of cur
    return tk, ti, count, tl.where(fin != 0, cur, CAP - cur), fin
