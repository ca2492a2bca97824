"""The radix passes: the k-th key of a row found digit by digit by every segment's
program at once (in one cooperative launch, or one launch per phase), then the write."""

from __future__ import annotations

import triton
import triton.language as tl

from .common import _raw_key, _store_index, _window
from .short import (
    SHORT_GROUPS,
    _input_slice,
    _row_offset,
    _running_count,
    _slice_pos,
    _slice_raw,
    _write_in_order,
    _write_staged,
)
from .sync import _histogram, _smem_bins_add, _smem_bins_read, _smem_bins_zero

PASSES_GROUPS = dict(
    xin=SHORT_GROUPS["xin"],
    win=SHORT_GROUPS["win"],
    sync=("tot_ptr", "cnt_ptr", "hs_ptr"),
    out=SHORT_GROUPS["out"],
    off=SHORT_GROUPS["off"],
    fills=SHORT_GROUPS["fills"],
    page=SHORT_GROUPS["page"],
    KEYS=SHORT_GROUPS["KEYS"],
    FORM=("HAS_WINDOW", "OFF_TENSOR", "WRITE_VALUES"),
    SHAPE=("NMAX", "KP", "NT"),
    PHASES=("DIGIT", "FIRST", "LAST", "NSEGP", "TILES"),
    PAGE=SHORT_GROUPS["PAGE"],
)
"""How :func:`radix_phases_kernel` bundles its arguments (see ``launch.bundle``)."""

PASSES_DEFAULTS = dict(TILES=1, PAGED=False, PAGE_SHIFT=0, HAS_R2B=False)
"""The bundled compile-time arguments a launch may leave out."""


@triton.jit
def _row_barrier(cnt_ptr, nseg):
    """Arrive at a row's counter (zero at launch) and wait until the row's ``nseg``
    programs have: what this program wrote before, each of them may read after. Only
    in a launch whose programs are all resident at once (a cooperative launch)."""
    tl.debug_barrier()  # every thread's writes issued before the arrival
    tl.atomic_add(cnt_ptr, 1, sem="release", scope="gpu")
    seen = tl.atomic_add(cnt_ptr, 0, sem="acquire", scope="gpu")
    while seen < nseg:
        seen = tl.atomic_add(cnt_ptr, 0, sem="acquire", scope="gpu")


@triton.jit
def _digit_bins(keys, valid, prefix, BITS: tl.constexpr, DIGIT: tl.constexpr, P: tl.constexpr):
    """Radix pass ``P``'s bins and mask (see :func:`_digit_histogram`)."""
    TOP: tl.constexpr = BITS - DIGIT * P  # the bits above this digit
    SH: tl.constexpr = TOP - DIGIT if TOP > DIGIT else 0
    NB: tl.constexpr = 1 << DIGIT
    m = valid
    if P > 0:
        m = valid & ((keys >> TOP) == (prefix >> TOP))
    rbin = (NB - 1 - ((keys >> SH) & ((1 << (TOP - SH)) - 1))).to(tl.int32)
    return rbin, m


@triton.jit
def _digit_histogram(
    keys, valid, prefix, BITS: tl.constexpr, DIGIT: tl.constexpr, P: tl.constexpr,
    SMEM: tl.constexpr, NT: tl.constexpr,
):  # fmt: skip
    """Radix pass ``P``'s histogram: of digit ``P`` (``DIGIT`` bits from the top, the
    last one narrower) of the valid keys whose higher digits are those of ``prefix``;
    bin ``j`` for digit ``2**DIGIT - 1 - j`` (the largest first). ``SMEM``, ``NT``: by
    shared-memory atomics (``ops.triton.sync._histogram``)."""
    rbin, m = _digit_bins(keys, valid, prefix, BITS, DIGIT, P)
    return _histogram(rbin, m, 1 << DIGIT, SMEM, NT)


@triton.jit
def _choose_digit(tot, prefix, rem, BITS: tl.constexpr, DIGIT: tl.constexpr, P: tl.constexpr):
    """From pass ``P``'s row histogram ``tot``: the prefix with digit ``P`` set to the
    one holding the ``rem``-th key from the top, that key's rank within it and the
    digit's bin."""
    TOP: tl.constexpr = BITS - DIGIT * P
    SH: tl.constexpr = TOP - DIGIT if TOP > DIGIT else 0
    NB: tl.constexpr = 1 << DIGIT
    # the bins above the chosen one: those whose running count from the top is still
    # short of rem
    short = tl.cumsum(tot, axis=0) < rem
    nb = tl.sum(short.to(tl.int32), axis=0)
    prefix = prefix | ((NB - 1 - nb).to(tl.uint32) << SH)
    return prefix, rem - tl.sum(tl.where(short, tot, 0), axis=0), nb


@triton.jit
def _whole(seg, L, lo, hi, NMAX: tl.constexpr):
    """Whether every one of the ``NMAX`` positions of segment ``seg`` (``[seg * L, seg *
    L + L)``) is valid: inside the segment and the row's window ``[lo, hi)``."""
    return (L >= NMAX) & (seg * L >= lo) & (seg * L + NMAX <= hi)


@triton.jit
def radix_phases_kernel(
    xin, win, sync, out, off, fills, k, L, nseg, page, KEYS: tl.constexpr, FORM: tl.constexpr,
    SHAPE: tl.constexpr, PHASES: tl.constexpr, PAGE: tl.constexpr,
    SMEM_HIST: tl.constexpr = False,
):  # fmt: skip
    """A row's radix select spread over its segments (``nseg`` of ``L`` per row, one
    program per ``TILES`` of them in a row), phases ``FIRST .. LAST`` of it. Phase ``p <
    NPASS`` (one per ``DIGIT``-bit digit of the key, from the top): the histogram of the
    digit over the segments' valid keys whose higher digits are those chosen so far,
    added to the row's ``tot [rows, NPASS, 2**DIGIT]`` (zero at launch) and kept per
    program as running sums over the bins in ``hs [rows, nseg, NPASS, 2**DIGIT]`` (its
    first programs-of-the-row entries of each row). Phase ``NPASS``: each segment's keys
    above the pivot ``P`` and its ties at ``P`` ranked below ``r`` among the row's (the
    segments before it, then position order), each written at its slot in position
    order, the segments of the programs before counted from their running sums (above
    the chosen bin of every pass, in that of the last), those of its own as it writes
    them; segment 0 writes the fills. Every program reads the finished histograms and
    chooses the digits itself: a phase needs only that the phases before it are
    complete, by a row barrier (``cnt [rows, NPASS]``, zero at launch) between phases of
    one launch or by the launches' order. ``SMEM_HIST``: the histograms by
    shared-memory atomics.

    One segment a program (``TILES == 1``) holds its keys in registers throughout and
    writes its selection directly. Several (``TILES > 1``) read them again each phase
    (from L2), each segment's load issued before the segment ahead of it is counted or
    written; they add to one histogram (with ``SMEM_HIST``), count a segment wholly
    inside the row's window without a validity mask (:func:`_whole`), and stage each
    selected position at its slot, the program's run of slots then written out at once
    (:func:`_write_staged`).

    The arguments, bundled as :data:`PASSES_GROUPS` names them: ``sync = (tot_ptr,
    cnt_ptr, hs_ptr)``, the rest as :func:`.short.short_rows_kernel` takes them;
    compile-time ``FORM = (HAS_WINDOW, OFF_TENSOR, WRITE_VALUES)``, ``SHAPE = (NMAX, KP,
    NT)``, ``PHASES = (DIGIT, FIRST, LAST, NSEGP, TILES)``."""
    x_ptr, stride_xr, stride_xc, N = xin
    begin_ptr, end_ptr = win
    tot_ptr, cnt_ptr, hs_ptr = sync
    ov_ptr, oi_ptr, stride_ovr, stride_ovc, stride_oir, stride_oic = out
    off_ptr, off_scalar = off
    KEY_MASK: tl.constexpr = KEYS[0]
    SIGN: tl.constexpr = KEYS[1]
    INF_BITS: tl.constexpr = KEYS[2]
    LARGEST: tl.constexpr = KEYS[3]
    RAW16: tl.constexpr = KEYS[4]
    HAS_WINDOW: tl.constexpr = FORM[0]
    OFF_TENSOR: tl.constexpr = FORM[1]
    WRITE_VALUES: tl.constexpr = FORM[2]
    NMAX: tl.constexpr = SHAPE[0]
    KP: tl.constexpr = SHAPE[1]
    NT: tl.constexpr = SHAPE[2]
    DIGIT: tl.constexpr = PHASES[0]
    FIRST: tl.constexpr = PHASES[1]
    LAST: tl.constexpr = PHASES[2]
    NSEGP: tl.constexpr = PHASES[3]
    TILES: tl.constexpr = PHASES[4]
    nprog = (nseg + TILES - 1) // TILES  # programs per row
    pid = tl.program_id(0)
    row = pid // nprog
    q = pid % nprog  # this program's place in its row
    seg0 = q * TILES  # its first segment
    row64 = row.to(tl.int64)
    x_row = x_ptr + row64 * stride_xr
    if TILES == 1:
        keys, idx, valid, lo, hi = _input_slice(
            x_row, stride_xc, N, row, seg0, L, begin_ptr, end_ptr, KEY_MASK, SIGN, INF_BITS,
            LARGEST, RAW16, HAS_WINDOW, NMAX, NT,
        )  # fmt: skip
        keys = keys.to(tl.uint32)
    BITS: tl.constexpr = 16 if RAW16 else 32
    NPASS: tl.constexpr = (BITS + DIGIT - 1) // DIGIT
    NB: tl.constexpr = 1 << DIGIT
    j = tl.arange(0, NB)
    everyone = tl.full([NMAX], 1, tl.int1)  # the validity of a whole segment
    tot_row = tot_ptr + row64 * (NPASS * NB)
    cnt_row = cnt_ptr + row64 * NPASS
    hs_row = hs_ptr + row64 * nseg * (NPASS * NB)
    b = tl.arange(0, NSEGP)
    gto = tl.zeros([NSEGP], tl.int32)  # keys above P in each program of the row
    eqo = tl.zeros([NSEGP], tl.int32)  # ... and at P
    prefix = tl.full((), 0, tl.uint32)  # the digits chosen so far, in place
    rem = k  # the rank of the pivot among the keys that share them
    kk = k  # the outputs that hold a key: min(k, valid keys of the row)
    for p in tl.static_range(NPASS + 1):
        if p > FIRST and p <= LAST:
            _row_barrier(cnt_row + p - 1, nprog)
        if p >= 1 and p <= LAST:  # pass p - 1 is complete: its digit
            tot = tl.load(tot_row + (p - 1) * NB + j, cache_modifier=".cg")
            if p == 1:
                kk = tl.minimum(k, tl.sum(tot, axis=0))
                rem = kk
            prefix, rem, nb = _choose_digit(tot, prefix, rem, BITS, DIGIT, p - 1)
            if LAST == NPASS:  # the write to come: the programs before, from their sums
                hs_b = hs_row + (b * NPASS + p - 1) * NB
                up = tl.load(
                    hs_b + tl.maximum(nb - 1, 0), mask=b < q, other=0, cache_modifier=".cg"
                )
                up = tl.where(nb > 0, up, 0)  # no bin above the first
                gto += up
                if p == NPASS:
                    at = tl.load(hs_b + nb, mask=b < q, other=0, cache_modifier=".cg")
                    eqo = at - up
        if p >= FIRST and p <= LAST and p < NPASS:
            if TILES == 1:
                h = _digit_histogram(keys, valid, prefix, BITS, DIGIT, p, SMEM_HIST, NT)
            elif SMEM_HIST and NMAX >= NT:  # one histogram, loads ahead
                _smem_bins_zero(NB)
                lo_w, hi_w = _window(begin_ptr, end_ptr, row, N, HAS_WINDOW)
                raw, _, _, _, _ = _slice_raw(
                    x_row, stride_xc, N, row, seg0, L, begin_ptr, end_ptr, RAW16, HAS_WINDOW,
                    NMAX, NT,
                )  # fmt: skip
                for t in tl.range(TILES):
                    nxt, _, _, _, _ = _slice_raw(
                        x_row, stride_xc, N, row, seg0 + t + 1, tl.where(t + 1 < TILES, L, 0),
                        begin_ptr, end_ptr, RAW16, HAS_WINDOW, NMAX, NT,
                    )  # fmt: skip
                    keys = _raw_key(raw, RAW16, KEY_MASK, SIGN, INF_BITS, LARGEST)
                    # a whole segment's count is a call of its own on a constant mask, so
                    # that the build drops the mask; merged into one call on a mask chosen
                    # at run time, the build keeps one masked count for both (ptxas, sm_90)
                    if _whole(seg0 + t, L, lo_w, hi_w, NMAX):
                        bins, m = _digit_bins(keys.to(tl.uint32), everyone, prefix, BITS, DIGIT, p)
                        _smem_bins_add(bins, m)
                    else:
                        _, valid, _, _, _ = _slice_pos(
                            N, row, seg0 + t, L, begin_ptr, end_ptr, RAW16, HAS_WINDOW, NMAX,
                            NT,
                        )  # fmt: skip
                        bins, m = _digit_bins(keys.to(tl.uint32), valid, prefix, BITS, DIGIT, p)
                        _smem_bins_add(bins, m)
                    raw = nxt
                h = _smem_bins_read(NB)
            else:  # a histogram a segment, summed
                h = tl.zeros([NB], tl.int32)
                for t in tl.range(TILES):
                    keys, idx, valid, lo, hi = _input_slice(
                        x_row, stride_xc, N, row, seg0 + t, L, begin_ptr, end_ptr, KEY_MASK,
                        SIGN, INF_BITS, LARGEST, RAW16, HAS_WINDOW, NMAX, NT,
                    )  # fmt: skip
                    if _whole(seg0 + t, L, lo, hi, NMAX):
                        valid = everyone
                    h += _digit_histogram(
                        keys.to(tl.uint32), valid, prefix, BITS, DIGIT, p, SMEM_HIST, NT
                    )
            tl.store(hs_row + (q * NPASS + p) * NB + j, tl.cumsum(h, axis=0))
            tl.atomic_add(tot_row + p * NB + j, h, mask=h > 0, sem="relaxed", scope="gpu")
        if p >= FIRST and p <= LAST and p == NPASS:
            off = _row_offset(off_ptr, off_scalar, row, OFF_TENSOR)
            gt0 = tl.sum(gto, axis=0)  # the keys above P before this program's segments
            eq0 = tl.sum(eqo, axis=0)
            s_first = gt0 + tl.minimum(eq0, rem)  # TILES > 1: its first output slot
            if TILES == 1:
                _write_segment(
                    x_row, stride_xc, keys, idx, valid, prefix, rem, gt0, eq0, kk, k,
                    seg0 == 0, row, off,
                    (oi_ptr + row64 * stride_oir, stride_oic, ov_ptr + row64 * stride_ovr,
                     stride_ovc),
                    fills, page, WRITE_VALUES, KP, NT, PAGE, False,
                )  # fmt: skip
            else:
                raw, _, _, _, _ = _slice_raw(
                    x_row, stride_xc, N, row, seg0, L, begin_ptr, end_ptr, RAW16, HAS_WINDOW,
                    NMAX, NT,
                )  # fmt: skip
                for t in tl.range(TILES):  # the next segment's load in flight meanwhile
                    nxt, _, _, _, _ = _slice_raw(
                        x_row, stride_xc, N, row, seg0 + t + 1, tl.where(t + 1 < TILES, L, 0),
                        begin_ptr, end_ptr, RAW16, HAS_WINDOW, NMAX, NT,
                    )  # fmt: skip
                    idx, valid, _, _, _ = _slice_pos(
                        N, row, seg0 + t, L, begin_ptr, end_ptr, RAW16, HAS_WINDOW, NMAX, NT
                    )  # fmt: skip
                    keys = _raw_key(raw, RAW16, KEY_MASK, SIGN, INF_BITS, LARGEST)
                    raw = nxt
                    gt, eq = _write_segment(
                        x_row, stride_xc, keys.to(tl.uint32), idx, valid, prefix, rem, gt0,
                        eq0, kk, k, seg0 + t == 0, row, off,
                        (oi_ptr + row64 * stride_oir, stride_oic,
                         ov_ptr + row64 * stride_ovr, stride_ovc),
                        fills, page, WRITE_VALUES, KP, NT, PAGE, True,
                    )  # fmt: skip
                    gt0 += gt
                    eq0 += eq
                tl.debug_barrier()  # the program's slots, staged by all its threads
                _write_staged(
                    x_row, stride_xc, s_first, gt0 + tl.minimum(eq0, rem) - s_first, kk, k,
                    seg0 == 0, row, off,
                    (oi_ptr + row64 * stride_oir, stride_oic, ov_ptr + row64 * stride_ovr,
                     stride_ovc),
                    fills, page, KEYS, False, WRITE_VALUES, KP, PAGE,
                )  # fmt: skip


@triton.jit
def _write_segment(
    x_row, stride_xc, keys, idx, valid, pk, r, gt0, eq0, kk, k, fills, row, off, orow, fill,
    page, WRITE_VALUES: tl.constexpr, KP: tl.constexpr, NT: tl.constexpr, PAGE: tl.constexpr,
    STAGE: tl.constexpr = False,
):  # fmt: skip
    """One segment's part of a row's output, its pivot key ``pk`` and ties to take
    ``r`` known: its keys above ``pk`` and its ties ranked below ``r`` among the
    row's, at their slots in position order after the ``gt0`` keys above and ``eq0``
    ties of the row's segments before it; its counts of both. ``STAGE``: only their
    positions, staged for :func:`_write_staged` (no fills). ``orow``, ``fill``,
    ``page``, ``PAGE``: as :func:`.short._write_in_order` takes them."""
    oi_row, stride_oic, _, _ = orow
    gtm = valid & (keys > pk)
    eqm = valid & (keys == pk)
    packed = _running_count(gtm.to(tl.int32) * 65536 + eqm.to(tl.int32), NT)
    rank = eq0 + (packed & 0xFFFF) - eqm.to(tl.int32)  # among the row's ties, from 0
    sel = gtm | (eqm & (rank < r))
    slot = gt0 + (packed >> 16) - gtm.to(tl.int32) + tl.minimum(rank, r)
    if STAGE:
        _store_index(oi_row + slot.to(tl.int64) * stride_oic, idx, sel)
    else:
        _write_in_order(
            x_row, stride_xc, idx, sel, slot, kk, k, fills, row, off, orow, fill, page,
            WRITE_VALUES, KP, PAGE,
        )  # fmt: skip
    return tl.sum(gtm.to(tl.int32), axis=0), tl.sum(eqm.to(tl.int32), axis=0)
