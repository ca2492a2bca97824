"""Register-resident top-k for short rows, and the split/merge path for few long rows.

The streaming kernel (:mod:`deepselect.ops.triton.stream`) runs one program per row and
pays a fixed cost per row for its compactions, so it is slow when rows are short
(the fixed cost dominates) and when there are few long rows (one program per row
leaves most SMs idle). Both cases are served here by one kernel that holds a whole
slice of up to ``NMAX`` elements in registers and selects its exact top-k there:

* **short rows** (``N <= NMAX``): one program per row, one launch.
* **split** (few long rows): level 0 cuts every row into segments of ``L``
  elements, one program per (row, segment), and writes each segment's exact top-k
  as ``(key, index)`` pairs to a scratch buffer. Merge levels then read those pairs
  in groups of ``G`` (the same kernel in candidate mode) until one group per row is
  left, which writes the outputs. Exact, because every element of a row's top-k is
  in its segment's top-k (and in its group's top-k at each level). Where at most
  MAX_IN_LAUNCH merge levels are needed and the segments' programs are few, the
  merges run in the segments' launch (:func:`split_fused_kernel`): the last program
  of a group to finish (a per-group counter) merges it, and so on up the levels;
  otherwise one launch per level.
* **radix passes** (a split unsorted or by index, k > 1, where the rows' segments
  fit one launch at up to PASS_MAX_TILES a program): one cooperative launch (every
  program resident, or the launch refused) of one program per SM, each holding its
  segment's keys in registers the whole time (:func:`radix_phases_kernel`; with
  several segments a program, read again each phase). Per 8-bit digit of the key,
  from the top, every program adds its segment's histogram of the digit (keys
  whose higher digits match those chosen) into the row's, waits at a row barrier,
  and chooses the digit itself from the row's histogram: the pivot key ``P`` and
  the ties ``r`` to take after the last digit. Each program also keeps its own
  histograms as running sums, from which every program counts the keys above and
  at ``P`` in the segments before its own and writes its selected elements at their
  slots. No selection chain, no candidates: a row costs two passes over registers
  (bf16) and two barriers, whatever k.

How one program selects (``NMAX`` elements in registers, ``nv`` of them valid):

Each thread holds consecutive positions of the slice (:func:`_spread`), so that a
running count in position order (steps 1b and 3) is a scan within each thread and one
scan across the threads' totals; a contiguous input is read as each thread's run in
16-byte vectors (:func:`_load_spread`).

1. One reduction gives ``nv`` and the min and max valid key. If ``nv <= k`` every
   valid element is selected and step 2 is skipped.
1b. Prefilter (slices of the input or of a merge level's candidates, ``nv >= 4k``
   and more than ``CAND`` valid): a threshold ``thr`` is the ``r``-th largest of
   ``S`` keys read at evenly spaced positions (one per thread), ``r`` a little above
   the expected number of samples at or above the k-th key; one reduction counts
   the keys ``>= thr``. If between ``k`` and ``CAND``, those keys (in position
   order) go through a scratch row to a ``CAND``-long vector and steps 2-4 run on it
   alone: all of the top k are among them. Otherwise (a sample that far off, or
   ties filling the room) steps 2-4 run on every element, as without the
   prefilter.
2. A radix select for the pivot key ``P`` (the k-th largest valid key), digit by
   digit from the top: a pass takes a histogram of one digit of the keys whose
   higher digits equal the prefix found so far (the histogram's mask), and one
   cumulative sum over its bins, counted from the top, picks the digit holding the
   k-th key and the number of keys above it. With 6-bit digits a 16-bit key takes 3
   passes (digits of 5, 5 and 6 bits) and a 32-bit key 6; a digit that is the same
   in every valid key (known from ``min ^ max``) takes none. Invalid elements hold
   key 0, the bottom of every histogram, where they cannot move the choice, so they
   need no mask of their own. The histograms are shared-memory atomics where a
   GPU build allows them (:func:`smem_hist`), else ``tl.histogram``.
3. One cumulative sum over the packed flags ``(key > P) << 16 | (key == P)`` gives
   every selected element its output slot: all keys above ``P``, then the
   ``k - count(> P)`` lowest-index keys equal to ``P`` (slots follow position
   order, counted by :func:`_running_count`, which is index order — also in
   candidate mode, because every level writes its selection in index order and
   groups are contiguous).
4. The selection is written in index order; ``order="value"`` writes it, reads the
   ``k`` survivors back and sorts them by (key desc, index asc).

Invalid candidates (outside a window, past the row end, or the padding of a segment
with fewer than k valid elements) carry the index ``-1`` and are never selected.

Everything about a launch is decided from shapes only
(:func:`deepselect.triton_short.short_path`), so a call can be captured in a CUDA graph.
The measured reason behind each rule of the plan is in ``docs/tuning.md`` ("Short rows
and the split").
"""

from __future__ import annotations

import triton
import triton.language as tl

from .common import _best_first, _out_index, _raw_key, _store_index, _window
from .compact import _radix_select


# ---------------------------------------------------------------------- the kernel
@triton.jit
def _stats_combine(n_a, max_a, min_a, n_b, max_b, min_b):
    return n_a + n_b, tl.maximum(max_a, max_b), tl.minimum(min_a, min_b)


@triton.jit
def _prefilter(
    nv, kmax, kmin, k, x_row, stride_xc, lo, hi, s0, L, sk_row, si_row,
    SRC_CAND: tl.constexpr, CAND: tl.constexpr, KEY_MASK: tl.constexpr, SIGN: tl.constexpr,
    INF_BITS: tl.constexpr, LARGEST: tl.constexpr, RAW16: tl.constexpr,
    RADIX_BITS: tl.constexpr, CM: tl.constexpr, SMEM: tl.constexpr, NT: tl.constexpr,
    NMAX: tl.constexpr,
):  # fmt: skip
    """A threshold ``thr`` at or below the k-th largest valid key, likely; ``thr = 0``
    where the slice is too short for it to pay (fewer than ``4k`` or ``CAND`` valid
    elements). ``kmax``/``kmin`` bound the valid keys (the radix select's digits
    shared by both take no pass). ``NMAX``: the elements held.

    ``S`` keys (one per thread) are read again at evenly spaced positions of the
    slice (``[max(lo, s0), min(hi, s0 + L))``, L1/L2 hits: the row's window, or
    ``[0, C)`` of a candidate row, where a padding entry samples as key 0), and
    ``thr`` is their ``r``-th largest, ``r`` the expected number of samples at or
    above the k-th key, ``m = k S / nv``, plus 2.5 standard deviations (``sqrt(m)``)
    and 2. So about ``r nv / S`` keys pass, at least k unless the sample is that far
    off. Exact whatever the data: the caller counts the keys ``>= thr`` (``c``) and
    keeps the threshold only if ``k <= c <= CAND`` (every one of the top k is then
    ``>= thr``), and otherwise selects from every element."""
    S: tl.constexpr = NMAX // 16  # one a thread at 16 held a thread
    thr = (nv * 0).to(tl.uint32)
    if (nv >= 4 * k) & (nv > CAND):
        a = tl.maximum(lo, s0)
        span = tl.minimum(hi, s0 + L) - a
        pos = a + (span * tl.arange(0, S)) // S
        if SRC_CAND:
            sk = tl.load(sk_row + pos, cache_modifier=CM).to(tl.uint32, bitcast=True)
            sk = tl.where(tl.load(si_row + pos, cache_modifier=CM) >= 0, sk, 0)
        else:
            raw = tl.load(x_row + pos.to(tl.int64) * stride_xc)
            sk = _raw_key(raw, RAW16, KEY_MASK, SIGN, INF_BITS, LARGEST).to(tl.uint32)
        m = (k * S) / nv.to(tl.float32)  # k may be a compile-time 1
        r = tl.minimum((m + 2.5 * tl.sqrt(m) + 2.0).to(tl.int32), S)
        thr, _ = _radix_select(
            sk, nv * 0 + S, kmax, kmin, r, 16 if RAW16 else 32, RADIX_BITS, SMEM, NT
        )  # fmt: skip
    return thr


@triton.jit
def _spread(M: tl.constexpr, NT: tl.constexpr):
    """The slice position held at each place of an ``M``-long vector, so that each of
    the program's ``NT`` threads holds consecutive positions: Triton gives place ``e``
    to thread ``e % NT`` (its ``e // NT``-th element), which is given position
    ``(e % NT) * (M / NT) + e // NT``. Index order is then thread by thread, and a
    running count in that order (:func:`_running_count`) is a scan within each thread
    and one across the threads' totals, not one block-wide scan per element held."""
    T: tl.constexpr = NT if NT < M else M
    e = tl.arange(0, M)
    return (e % T) * (M // T) + e // T


@triton.jit
def _running_count(v, NT: tl.constexpr):
    """Inclusive running sum of ``v`` in position order, for a vector laid out by
    :func:`_spread`: exact for any layout, cheap for the one it assumes."""
    M: tl.constexpr = v.shape[0]
    T: tl.constexpr = NT if NT < M else M
    v2 = tl.reshape(v, [M // T, T])  # [element of the thread, thread]
    tot = tl.sum(v2, axis=0)
    before = tl.cumsum(tot, axis=0) - tot
    return tl.reshape(tl.cumsum(v2, axis=0) + before[None, :], [M])


@triton.jit
def _load_spread(
    base, start, lo_v, hi_v, L, N, M: tl.constexpr, NT: tl.constexpr, V: tl.constexpr
):  # fmt: skip
    """``base[start + o]`` for the positions ``o`` of :func:`_spread` (``0 <= o < L``,
    ``lo_v <= start + o < hi_v``, ``start + o < N``; 0 elsewhere; ``lo_v`` and
    ``hi_v`` multiples of ``V``), read as each thread's run of consecutive positions
    in vectors of ``V`` elements: 16-byte loads where the launch knows ``start``,
    ``L`` and ``N`` multiples of ``V`` too (Triton's specialization of arguments
    divisible by 16), element by element otherwise; then placed as :func:`_spread`
    has them."""
    T: tl.constexpr = NT if NT < M else M
    R: tl.constexpr = M // T
    W: tl.constexpr = V if V < R else R
    # [thread, vector of its run, element of the vector]: a vector load where Triton
    # knows the mask the same over each vector (the bounds multiples of V)
    o3 = tl.arange(0, T)[:, None, None] * R + tl.arange(0, R // W)[None, :, None] * W
    o3 = o3 + tl.arange(0, W)[None, None, :]
    i3 = start + o3
    m = (o3 < L) & (i3 >= lo_v) & (i3 < hi_v) & (i3 < N)
    raw3 = tl.load(base + i3.to(tl.int64), mask=m, other=0)
    return tl.reshape(tl.trans(tl.reshape(raw3, [T, R])), [M])


@triton.jit
def _compact(kept, keys, idx, c, base, CAND: tl.constexpr, NT: tl.constexpr):
    """The held elements where ``kept`` (``c <= CAND`` of them), in position order, as
    ``CAND``-long vectors of their keys and indices (index -1 and key 0 past ``c``):
    written as packed ``key << 32 | index`` words to this program's scratch row
    ``base`` (at least ``CAND`` words) at their rank among the kept, and read back."""
    slot = _running_count(kept.to(tl.int32), NT) - 1
    word = (keys.to(tl.uint32, bitcast=True).to(tl.int64) << 32) | idx.to(tl.int64)
    tl.store(base + slot, word, mask=kept)
    tl.debug_barrier()  # every write before the read-back
    q = _spread(CAND, NT)
    # as int64 also where a launch without the prefilter passes a placeholder for the
    # scratch: Triton builds this branch (dead there) all the same
    w = tl.load(base + q, mask=q < c, other=0xFFFFFFFF).to(tl.int64)
    return (w >> 32).to(tl.uint32), w.to(tl.int32)


@triton.jit
def _row_offset(off_ptr, off_scalar, row, OFF_TENSOR: tl.constexpr):
    """The index offset of row ``row``: its entry of ``off_ptr`` or the one scalar."""
    if OFF_TENSOR:
        return tl.load(off_ptr + row).to(tl.int64)
    return off_scalar.to(tl.int64)


@triton.jit
def _write_in_order(
    x_row, stride_xc, idx, sel, slot, kk, k, fills, row, off, orow, fill, page,
    WRITE_VALUES: tl.constexpr, KP: tl.constexpr, PAGE: tl.constexpr,
):  # fmt: skip
    """The selected positions ``idx`` (where ``sel``) written at their output ``slot``s
    (position order) as the position plus the row's offset or its cache slot, their
    values re-read (L1/L2) rather than kept live beside the keys; where ``fills``,
    also the fill index and value of outputs ``kk .. k - 1``. ``orow = (oi_row,
    stride_oic, ov_row, stride_ovc)``: the row's outputs; ``fill = (fill_index,
    fill_bits)``; ``page``/``PAGE``: the page map's arguments and flags (``PAGED,
    PAGE_SHIFT, HAS_R2B``)."""
    oi_row, stride_oic, ov_row, stride_ovc = orow
    fill_index, fill_bits = fill
    page_ptr, page_stride, max_pages, n_batch, r2b_ptr = page
    PAGED: tl.constexpr = PAGE[0]
    PAGE_SHIFT: tl.constexpr = PAGE[1]
    HAS_R2B: tl.constexpr = PAGE[2]
    s64 = slot.to(tl.int64)
    q = tl.arange(0, KP)
    out = _out_index(
        idx, sel, row, off, page_ptr, page_stride, max_pages, n_batch, r2b_ptr, PAGED,
        PAGE_SHIFT, HAS_R2B,
    )  # fmt: skip
    _store_index(oi_row + s64 * stride_oic, out, sel)
    fm = (q >= kk) & (q < k)
    if fills:
        fi = tl.full([KP], 0, tl.int64) + fill_index
        _store_index(oi_row + q.to(tl.int64) * stride_oic, fi, fm)
    if WRITE_VALUES:
        v = tl.load(x_row + idx.to(tl.int64) * stride_xc, mask=sel, other=0)
        tl.store(ov_row + s64 * stride_ovc, v, mask=sel)
        if fills:
            fv = tl.full([KP], 0, tl.int32) + fill_bits
            tl.store(ov_row + q.to(tl.int64) * stride_ovc, fv.to(v.dtype), mask=fm)


@triton.jit
def _write_staged(
    x_row, stride_xc, s0, n, kk, k, fills, row, off, orow, fill, page, KEYS: tl.constexpr,
    SORT: tl.constexpr, WRITE_VALUES: tl.constexpr, KP: tl.constexpr, PAGE: tl.constexpr,
):  # fmt: skip
    """Outputs ``s0 .. s0 + n - 1`` (``n <= KP``) hold row positions staged there by
    this program's threads (before a barrier): each is read back and written again
    as its index (the row's offset or its cache slot) with its value, so that the
    mapping and the value's read run once per output rather than once per element
    held. ``SORT`` (``s0 = 0``, ``n = kk``): the outputs first put best first. Where
    ``fills``, outputs ``kk .. k - 1`` get the fill index and value. ``orow``,
    ``fill``, ``page``, ``PAGE``: as :func:`_write_in_order` takes them; ``KEYS =
    (KEY_MASK, SIGN, INF_BITS, LARGEST, RAW16)``."""
    oi_row, stride_oic, _, _ = orow
    q = tl.arange(0, KP)
    real = q < n
    ci = tl.load(oi_row + (s0 + q).to(tl.int64) * stride_oic, mask=real, other=0).to(tl.int32)
    if SORT:
        craw = tl.load(x_row + ci.to(tl.int64) * stride_xc, mask=real, other=0)
        ck = _key(craw, KEYS)
        ci = _best_first(ck, ci, real)
        tl.debug_barrier()  # every read of the staged positions before the rewrite
    _write_in_order(
        x_row, stride_xc, ci, real, s0 + q, kk, k, fills, row, off, orow, fill, page,
        WRITE_VALUES, KP, PAGE,
    )  # fmt: skip


@triton.jit
def _key(raw, KEYS: tl.constexpr):
    """The key of raw bits ``raw`` (see ``common._raw_key``), ``KEYS = (KEY_MASK, SIGN,
    INF_BITS, LARGEST, RAW16)``."""
    KEY_MASK: tl.constexpr = KEYS[0]
    SIGN: tl.constexpr = KEYS[1]
    INF_BITS: tl.constexpr = KEYS[2]
    LARGEST: tl.constexpr = KEYS[3]
    RAW16: tl.constexpr = KEYS[4]
    return _raw_key(raw, RAW16, KEY_MASK, SIGN, INF_BITS, LARGEST)


@triton.jit
def _finish(
    keys, idx, valid, nv, kmax, kmin, k, row, seg, x_row, stride_xc, dst, out, off, fill, page,
    KEYS: tl.constexpr, DST_CAND: tl.constexpr, FORM: tl.constexpr, KP: tl.constexpr,
    SMEM_HIST: tl.constexpr, RADIX_BITS: tl.constexpr, PAGE: tl.constexpr, NT: tl.constexpr,
):  # fmt: skip
    """Steps 2-4 for the elements held (``keys``/``idx`` of any power-of-two length,
    invalid ones with key 0): the pivot key, every selected element's slot, and the
    writes (candidate pairs or the caller's outputs). ``nv``/``kmax``/``kmin``: the
    count and key range of the valid ones. Candidates go to ``[seg * U, seg * U + U)``
    of the row's ``DC`` columns, padded with index -1 past the selection (``U >= k``),
    ``dst = (dk_ptr, di_ptr, DC, U)``; outputs ``out = (ov_ptr, oi_ptr, stride_ovr,
    stride_ovc, stride_oir, stride_oic)``, offsets ``off = (off_ptr, off_scalar)``,
    ``FORM = (ORDER, HAS_WINDOW, OFF_TENSOR, WRITE_VALUES)``; the rest as
    :func:`_write_staged` takes them."""
    dk_ptr, di_ptr, DC, U = dst
    ov_ptr, oi_ptr, stride_ovr, stride_ovc, stride_oir, stride_oic = out
    off_ptr, off_scalar = off
    RAW16: tl.constexpr = KEYS[4]
    ORDER: tl.constexpr = FORM[0]
    OFF_TENSOR: tl.constexpr = FORM[2]
    WRITE_VALUES: tl.constexpr = FORM[3]
    PAGED: tl.constexpr = PAGE[0]
    row64 = row.to(tl.int64)
    # 2. pivot key
    pk, above = _radix_select(
        keys, nv, kmax, kmin, k, 16 if RAW16 else 32, RADIX_BITS, SMEM_HIST, NT
    )  # fmt: skip
    kk = tl.minimum(k, nv)
    take_all = nv <= k
    # 3. slots: keys above P first-come, then the lowest-index ties up to kk
    gtm = tl.where(take_all, valid, keys > pk)
    eqm = tl.where(take_all, False, valid & (keys == pk))
    r = kk - above
    packed = _running_count(gtm.to(tl.int32) * 65536 + eqm.to(tl.int32), NT)
    c_eq = packed & 0xFFFF
    sel = gtm | (eqm & (c_eq <= r))
    slot = (packed >> 16) + tl.minimum(c_eq, r) - 1

    q = tl.arange(0, KP)
    if DST_CAND:
        base = row64 * DC + seg * U
        tl.store(dk_ptr + base + slot, keys.to(tl.int32, bitcast=True), mask=sel)
        tl.store(di_ptr + base + slot, idx, mask=sel)
        tl.store(di_ptr + base + q, tl.full([KP], -1, tl.int32), mask=(q >= kk) & (q < U))
    else:
        off = _row_offset(off_ptr, off_scalar, row, OFF_TENSOR)
        oi_row = oi_ptr + row64 * stride_oir
        ov_row = ov_ptr + row64 * stride_ovr
        orow = (oi_row, stride_oic, ov_row, stride_ovc)
        if ORDER == 1 or PAGED:
            # stage the selection's indices in the output, read them back as one KP
            # vector and sort it by (key desc, index asc); PAGED: so that the page
            # table is read once per output, not once per element held
            _store_index(oi_row + slot.to(tl.int64) * stride_oic, idx, sel)
            tl.debug_barrier()
            _write_staged(
                x_row, stride_xc, 0, kk, kk, k, True, row, off, orow, fill, page, KEYS,
                ORDER == 1, WRITE_VALUES, KP, PAGE,
            )  # fmt: skip
        else:
            # the slots follow index order: the selection goes straight out
            _write_in_order(
                x_row, stride_xc, idx, sel, slot, kk, k, True, row, off, orow, fill, page,
                WRITE_VALUES, KP, PAGE,
            )  # fmt: skip


@triton.jit
def _vector_bounds(lo, hi, V: tl.constexpr):
    """The window ``[lo, hi)`` widened to multiples of ``V`` elements (16 bytes), so
    that a load masked by it stays one vector load per 16 bytes; the elements it adds
    are read, not used."""
    return (lo // V) * V, ((hi + V - 1) // V) * V


@triton.jit
def _slice_pos(
    N, row, seg, L, begin_ptr, end_ptr, RAW16: tl.constexpr, HAS_WINDOW: tl.constexpr,
    NMAX: tl.constexpr, NT: tl.constexpr,
):  # fmt: skip
    """Slice ``seg`` (positions ``[seg * L, seg * L + L)``) of one input row, laid out by
    :func:`_spread`: its positions, validity (inside the slice and the row's window),
    which to load and the row's window ``[lo, hi)``."""
    o = _spread(NMAX, NT)
    if HAS_WINDOW:
        lo, hi = _window(begin_ptr, end_ptr, row, N, HAS_WINDOW)
    else:
        lo = 0
        hi = N
    idx = seg * L + o
    valid = (o < L) & (idx >= lo) & (idx < hi)
    lo_v, hi_v = _vector_bounds(lo, hi, 8 if RAW16 else 4)  # the load's, inside the row
    ld = (o < L) & (idx >= lo_v) & (idx < hi_v) & (idx < N)
    return idx, valid, ld, lo, hi


@triton.jit
def _slice_raw(
    x_row, stride_xc, N, row, seg, L, begin_ptr, end_ptr, RAW16: tl.constexpr,
    HAS_WINDOW: tl.constexpr, NMAX: tl.constexpr, NT: tl.constexpr,
):  # fmt: skip
    """:func:`_slice_pos`'s slice read: its raw bits (any value where not valid),
    positions, validity and the row's window. A contiguous row is read as each
    thread's run in 16-byte vectors (:func:`_load_spread`), a strided one element by
    element."""
    idx, valid, ld, lo, hi = _slice_pos(
        N, row, seg, L, begin_ptr, end_ptr, RAW16, HAS_WINDOW, NMAX, NT
    )  # fmt: skip
    if stride_xc == 1:
        V: tl.constexpr = 8 if RAW16 else 4
        lo_v, hi_v = _vector_bounds(lo, hi, V)
        raw = _load_spread(x_row, seg * L, lo_v, hi_v, L, N, NMAX, NT, V)
    else:
        raw = tl.load(x_row + idx.to(tl.int64) * stride_xc, mask=ld, other=0)
    return raw, idx, valid, lo, hi


@triton.jit
def _input_slice(
    x_row, stride_xc, N, row, seg, L, begin_ptr, end_ptr, KEY_MASK: tl.constexpr,
    SIGN: tl.constexpr, INF_BITS: tl.constexpr, LARGEST: tl.constexpr, RAW16: tl.constexpr,
    HAS_WINDOW: tl.constexpr, NMAX: tl.constexpr, NT: tl.constexpr,
):  # fmt: skip
    """:func:`_slice_raw` with the raw bits made keys."""
    raw, idx, valid, lo, hi = _slice_raw(
        x_row, stride_xc, N, row, seg, L, begin_ptr, end_ptr, RAW16, HAS_WINDOW, NMAX, NT
    )  # fmt: skip
    keys = _raw_key(raw, RAW16, KEY_MASK, SIGN, INF_BITS, LARGEST)
    return keys, idx, valid, lo, hi


@triton.jit
def _slice_topk(
    xr, row, seg, win, src, dst, out, off, fill, k, L, page, scr_base, KEYS: tl.constexpr,
    SRC_CAND: tl.constexpr, DST_CAND: tl.constexpr, FORM: tl.constexpr, NMAX: tl.constexpr,
    KP: tl.constexpr, FUSED_STATS: tl.constexpr, SMEM_HIST: tl.constexpr,
    RADIX_BITS: tl.constexpr, PREFILTER: tl.constexpr, CAND: tl.constexpr, NT: tl.constexpr,
    PAGE: tl.constexpr, CM: tl.constexpr,
):  # fmt: skip
    """Exact top-k of slice ``seg`` of row ``row`` (see :func:`short_rows_kernel`):
    ``xr = (x_row, stride_xc, N)`` the row's input, ``win = (begin_ptr, end_ptr)`` the
    windows; ``src = (src_k, src_i, C)`` the row's candidate pairs (``C`` columns
    valid) in candidate mode; ``dst``, ``out``, ``off``, ``fill``, ``page`` as
    :func:`_finish` takes them; ``scr_base`` the program's prefilter scratch; ``CM``
    the candidates' load cache modifier (".cg" where other programs of the same
    launch wrote them). ``PREFILTER``: whether to try the sampled threshold
    (:func:`_prefilter`)."""
    x_row, stride_xc, N = xr
    begin_ptr, end_ptr = win
    src_k, src_i, C = src
    KEY_MASK: tl.constexpr = KEYS[0]
    SIGN: tl.constexpr = KEYS[1]
    INF_BITS: tl.constexpr = KEYS[2]
    LARGEST: tl.constexpr = KEYS[3]
    RAW16: tl.constexpr = KEYS[4]
    HAS_WINDOW: tl.constexpr = FORM[1]
    o = _spread(NMAX, NT)
    pos_in = seg * L + o
    if SRC_CAND:
        inr = (o < L) & (pos_in < C)
        idx = tl.load(src_i + pos_in, mask=inr, other=-1, cache_modifier=CM)
        keys = tl.load(src_k + pos_in, mask=inr, other=0, cache_modifier=CM)
        keys = keys.to(tl.uint32, bitcast=True)
        valid = idx >= 0
        lo = 0
        hi = C
    else:
        keys, idx, valid, lo, hi = _input_slice(
            x_row, stride_xc, N, row, seg, L, begin_ptr, end_ptr, KEY_MASK, SIGN, INF_BITS,
            LARGEST, RAW16, HAS_WINDOW, NMAX, NT,
        )  # fmt: skip

    # 2-4. the selection from what is held: first, where it pays, a sampled threshold
    # keeps only the elements at or above it (see _prefilter)
    use = False
    keys, nv, kmax, kmin = _held_stats(keys, valid, FUSED_STATS)
    thr = kmin
    c = nv
    kept = valid  # (built, not run, without the prefilter)
    if PREFILTER:
        thr = _prefilter(
            nv, kmax, kmin, k, x_row, stride_xc, lo, hi, seg * L, L, src_k, src_i, SRC_CAND,
            CAND, KEY_MASK, SIGN, INF_BITS, LARGEST, RAW16, RADIX_BITS, CM, SMEM_HIST, NT,
            NMAX,
        )  # fmt: skip
        kept = keys >= thr
        c = tl.sum(kept.to(tl.int32), axis=0)
        use = (thr > 0) & (c >= k) & (c <= CAND)
    if use:
        ck, ci = _compact(kept, keys, idx, c, scr_base, CAND, NT)
        _finish(
            ck.to(tl.uint32), ci, ci >= 0, c, kmax, thr, k, row, seg, x_row, stride_xc, dst,
            out, off, fill, page, KEYS, DST_CAND, FORM, KP, SMEM_HIST, RADIX_BITS, PAGE, NT,
        )  # fmt: skip
    else:
        _finish(
            keys, idx, valid, nv, kmax, kmin, k, row, seg, x_row, stride_xc, dst, out, off,
            fill, page, KEYS, DST_CAND, FORM, KP, SMEM_HIST, RADIX_BITS, PAGE, NT,
        )  # fmt: skip


@triton.jit
def _held_stats(keys, valid, FUSED_STATS: tl.constexpr):
    """Step 1: the held keys with key 0 where not valid (below every pivot and never
    above P, so that only the stats and the ties at P need the mask, not every step of
    the search), and the count and key range of the valid ones."""
    keys = tl.where(valid, keys, 0).to(tl.uint32)
    if FUSED_STATS:  # one block-wide reduction
        nv, kmax, kmin = tl.reduce(
            (
                valid.to(tl.int32),
                keys,
                tl.where(valid, keys, 0xFFFFFFFF).to(tl.uint32),
            ),
            0,
            _stats_combine,
        )
    else:  # the same as three reductions (the interpreter runs a tuple reduce slowly)
        nv = tl.sum(valid.to(tl.int32), axis=0)
        kmax = tl.max(keys, axis=0)
        kmin = tl.min(tl.where(valid, keys, 0xFFFFFFFF).to(tl.uint32), axis=0)
    return keys, nv, kmax, kmin


SHORT_GROUPS = dict(
    xin=("x_ptr", "stride_xr", "stride_xc", "N"),
    win=("begin_ptr", "end_ptr"),
    src=("sk_ptr", "si_ptr", "C"),
    dst=("dk_ptr", "di_ptr", "DC"),
    out=("ov_ptr", "oi_ptr", "stride_ovr", "stride_ovc", "stride_oir", "stride_oic"),
    off=("off_ptr", "off_scalar"),
    fills=("fill_index", "fill_bits"),
    page=("page_ptr", "page_stride", "max_pages", "n_batch", "r2b_ptr"),
    KEYS=("KEY_MASK", "SIGN", "INF_BITS", "LARGEST", "RAW16"),
    FORM=("ORDER", "HAS_WINDOW", "OFF_TENSOR", "WRITE_VALUES"),
    SEL=("NMAX", "KP", "FUSED_STATS", "SMEM_HIST", "RADIX_BITS", "PREFILTER", "CAND", "NT"),
    PAGE=("PAGED", "PAGE_SHIFT", "HAS_R2B"),
)  # fmt: skip
"""How :func:`short_rows_kernel` bundles its arguments: each tuple parameter and the
arguments it holds, in order (see ``launch.bundle``)."""

SHORT_DEFAULTS = dict(PAGED=False, PAGE_SHIFT=0, HAS_R2B=False)
"""The bundled compile-time arguments a launch may leave out (no page map)."""


@triton.jit
def short_rows_kernel(
    xin, win, src, dst, out, off, fills, k, L, nseg, page, scr_ptr, KEYS: tl.constexpr,
    SRC_CAND: tl.constexpr, DST_CAND: tl.constexpr, FORM: tl.constexpr, SEL: tl.constexpr,
    PAGE: tl.constexpr,
):  # fmt: skip
    """Exact top-k of one slice per program: program ``p`` takes slice ``p % nseg`` of
    row ``p // nseg``. The arguments, bundled as :data:`SHORT_GROUPS` names them.

    Source (SRC_CAND=False): the raw bits of ``xin = (x_ptr, stride_xr, stride_xc,
    N)`` (int16/int32 view, any strides); the slice is positions ``[s*L, s*L + L)``
    intersected with the row's window (``win = (begin_ptr, end_ptr)``).
    Source (SRC_CAND=True): candidate pairs ``src = (sk, si, C)``, ``[rows, C]`` (int32
    keys as bits, int32 indices, -1 = none); the slice is ``[s*L, s*L + L)`` of them.
    Destination (DST_CAND=True): pairs ``dst = (dk, di, DC)``, ``[rows, DC]``, slice
    ``s`` at ``[s*k, s*k + k)``, selection in index order, then -1 padding.
    Destination (DST_CAND=False): the caller's ``[rows, k]`` outputs ``out = (ov_ptr,
    oi_ptr, stride_ovr, stride_ovc, stride_oir, stride_oic)`` (any strides), with
    order, index offset (``off = (off_ptr, off_scalar)``), fills (``fills =
    (fill_index, fill_bits)``) and the page map (``page``); needs ``nseg == 1``.
    Compile-time: ``KEYS = (KEY_MASK, SIGN, INF_BITS, LARGEST, RAW16)``, ``FORM =
    (ORDER, HAS_WINDOW, OFF_TENSOR, WRITE_VALUES)``, ``SEL = (NMAX, KP, FUSED_STATS,
    SMEM_HIST, RADIX_BITS, PREFILTER, CAND, NT)``, ``PAGE = (PAGED, PAGE_SHIFT,
    HAS_R2B)``. ``L <= NMAX``; ``KP`` is a power of two ``>= k``."""
    x_ptr, stride_xr, stride_xc, N = xin
    sk_ptr, si_ptr, C = src
    dk_ptr, di_ptr, DC = dst
    NMAX: tl.constexpr = SEL[0]
    KP: tl.constexpr = SEL[1]
    FUSED_STATS: tl.constexpr = SEL[2]
    SMEM_HIST: tl.constexpr = SEL[3]
    RADIX_BITS: tl.constexpr = SEL[4]
    PREFILTER: tl.constexpr = SEL[5]
    CAND: tl.constexpr = SEL[6]
    NT: tl.constexpr = SEL[7]
    pid = tl.program_id(0)
    row = pid // nseg
    seg = pid % nseg
    row64 = row.to(tl.int64)
    _slice_topk(
        (x_ptr + row64 * stride_xr, stride_xc, N), row, seg, win,
        (sk_ptr + row64 * C, si_ptr + row64 * C, C), (dk_ptr, di_ptr, DC, k), out, off, fills,
        k, L, page, scr_ptr + pid.to(tl.int64) * CAND, KEYS, SRC_CAND, DST_CAND, FORM, NMAX,
        KP, FUSED_STATS, SMEM_HIST, RADIX_BITS, PREFILTER, CAND, NT, PAGE, "",
    )  # fmt: skip
