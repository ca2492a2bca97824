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

Everything about a launch is decided from shapes only (:func:`short_path`), so a call
can be captured in a CUDA graph. The measured reason behind each rule of the plan is
in ``docs/tuning.md`` ("Short rows and the split").
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from dataclasses import dataclass, fields
from functools import cache

import torch
import triton
import triton.language as tl

from .ops.triton.common import _best_first, _inf_bits, _out_index, _raw_key, _store_index, _window
from .ops.triton.compact import _radix_select
from .ops.triton.launch import (
    _ORDER_CODE,
    _RAW,
    CROWDED_PER_SM,
    PageMap,
    _fill_bits,
    _interpreting,
    _next_pow2,
    occupancy_cap,
    page_arguments,
    row_arguments,
)
from .ops.triton.sync import _histogram, _smem_bins_add, _smem_bins_read, _smem_bins_zero
from .options import Order, TopkOptions


def _can_launch_cooperatively() -> bool:
    """Whether this Triton launches a kernel cooperatively (``launch_cooperative_grid``,
    from Triton 3.3): every program resident at once, or the launch refused."""
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:  # pragma: no cover - a Triton without the NVIDIA backend
        return False
    return "launch_cooperative_grid" in {f.name for f in fields(CUDAOptions)}


COOPERATIVE = _can_launch_cooperatively()
_COOPERATIVE_REFUSED: dict[torch.device, int] = {}
"""Per device, the fewest programs a cooperative launch of the radix passes was
refused with (fewer SMs to this process than the device has, under MPS or a green
context; or programs too large to share an SM, as ``grid_per_sm > 1`` may ask):
passes of as many programs or more run one launch per phase from then on."""


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
    x_row, stride_xc, idx, sel, slot, kk, k, fills, row, off, oi_row, stride_oic, ov_row,
    stride_ovc, fill_index, fill_bits, page_ptr, page_stride, max_pages, n_batch, r2b_ptr,
    WRITE_VALUES: tl.constexpr, KP: tl.constexpr, PAGED: tl.constexpr,
    PAGE_SHIFT: tl.constexpr, HAS_R2B: tl.constexpr,
):  # fmt: skip
    """The selected positions ``idx`` (where ``sel``) written at their output ``slot``s
    (position order) as the position plus the row's offset or its cache slot, their
    values re-read (L1/L2) rather than kept live beside the keys; where ``fills``,
    also the fill index and value of outputs ``kk .. k - 1``."""
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
    x_row, stride_xc, s0, n, kk, k, fills, row, off, oi_row, stride_oic, ov_row, stride_ovc,
    fill_index, fill_bits, page_ptr, page_stride, max_pages, n_batch, r2b_ptr,
    KEY_MASK: tl.constexpr, SIGN: tl.constexpr, INF_BITS: tl.constexpr, LARGEST: tl.constexpr,
    RAW16: tl.constexpr, SORT: tl.constexpr, WRITE_VALUES: tl.constexpr, KP: tl.constexpr,
    PAGED: tl.constexpr, PAGE_SHIFT: tl.constexpr, HAS_R2B: tl.constexpr,
):  # fmt: skip
    """Outputs ``s0 .. s0 + n - 1`` (``n <= KP``) hold row positions staged there by
    this program's threads (before a barrier): each is read back and written again
    as its index (the row's offset or its cache slot) with its value, so that the
    mapping and the value's read run once per output rather than once per element
    held. ``SORT`` (``s0 = 0``, ``n = kk``): the outputs first put best first. Where
    ``fills``, outputs ``kk .. k - 1`` get the fill index and value."""
    q = tl.arange(0, KP)
    real = q < n
    ci = tl.load(oi_row + (s0 + q).to(tl.int64) * stride_oic, mask=real, other=0).to(tl.int32)
    if SORT:
        craw = tl.load(x_row + ci.to(tl.int64) * stride_xc, mask=real, other=0)
        ck = _raw_key(craw, RAW16, KEY_MASK, SIGN, INF_BITS, LARGEST)
        ci = _best_first(ck, ci, real)
        tl.debug_barrier()  # every read of the staged positions before the rewrite
    _write_in_order(
        x_row, stride_xc, ci, real, s0 + q, kk, k, fills, row, off, oi_row, stride_oic, ov_row,
        stride_ovc, fill_index, fill_bits, page_ptr, page_stride, max_pages, n_batch, r2b_ptr,
        WRITE_VALUES, KP, PAGED, PAGE_SHIFT, HAS_R2B,
    )  # fmt: skip


@triton.jit
def _finish(
    keys, idx, valid, nv, kmax, kmin, k, row, seg, x_row, stride_xc, dk_ptr, di_ptr, DC, U,
    ov_ptr, oi_ptr, stride_ovr, stride_ovc, stride_oir, stride_oic, off_ptr, off_scalar,
    fill_index, fill_bits, page_ptr, page_stride, max_pages, n_batch, r2b_ptr,
    KEY_MASK: tl.constexpr, SIGN: tl.constexpr, INF_BITS: tl.constexpr, LARGEST: tl.constexpr,
    RAW16: tl.constexpr, DST_CAND: tl.constexpr, ORDER: tl.constexpr, OFF_TENSOR: tl.constexpr,
    WRITE_VALUES: tl.constexpr, KP: tl.constexpr, SMEM_HIST: tl.constexpr,
    RADIX_BITS: tl.constexpr, PAGED: tl.constexpr, PAGE_SHIFT: tl.constexpr,
    HAS_R2B: tl.constexpr, NT: tl.constexpr,
):  # fmt: skip
    """Steps 2-4 for the elements held (``keys``/``idx`` of any power-of-two length,
    invalid ones with key 0): the pivot key, every selected element's slot, and the
    writes (candidate pairs or the caller's outputs). ``nv``/``kmax``/``kmin``: the
    count and key range of the valid ones. Candidates go to ``[seg * U, seg * U + U)``
    of the row's ``DC`` columns, padded with index -1 past the selection (``U >= k``)."""
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
        if ORDER == 1 or PAGED:
            # stage the selection's indices in the output, read them back as one KP
            # vector and sort it by (key desc, index asc); PAGED: so that the page
            # table is read once per output, not once per element held
            _store_index(oi_row + slot.to(tl.int64) * stride_oic, idx, sel)
            tl.debug_barrier()
            _write_staged(
                x_row, stride_xc, 0, kk, kk, k, True, row, off, oi_row, stride_oic, ov_row,
                stride_ovc, fill_index, fill_bits, page_ptr, page_stride, max_pages, n_batch,
                r2b_ptr, KEY_MASK, SIGN, INF_BITS, LARGEST, RAW16, ORDER == 1, WRITE_VALUES,
                KP, PAGED, PAGE_SHIFT, HAS_R2B,
            )  # fmt: skip
        else:
            # the slots follow index order: the selection goes straight out
            _write_in_order(
                x_row, stride_xc, idx, sel, slot, kk, k, True, row, off, oi_row, stride_oic,
                ov_row, stride_ovc, fill_index, fill_bits, page_ptr, page_stride, max_pages,
                n_batch, r2b_ptr, WRITE_VALUES, KP, PAGED, PAGE_SHIFT, HAS_R2B,
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
    x_row, stride_xc, N, row, seg, begin_ptr, end_ptr, src_k, src_i, C, dk_ptr, di_ptr, DC,
    U, ov_ptr, oi_ptr, stride_ovr, stride_ovc, stride_oir, stride_oic, off_ptr, off_scalar,
    fill_index, fill_bits, k, L, page_ptr, page_stride, max_pages, n_batch, r2b_ptr,
    scr_base, KEY_MASK: tl.constexpr, SIGN: tl.constexpr, INF_BITS: tl.constexpr,
    LARGEST: tl.constexpr, RAW16: tl.constexpr, SRC_CAND: tl.constexpr,
    DST_CAND: tl.constexpr, ORDER: tl.constexpr, HAS_WINDOW: tl.constexpr,
    OFF_TENSOR: tl.constexpr, WRITE_VALUES: tl.constexpr, NMAX: tl.constexpr,
    KP: tl.constexpr, FUSED_STATS: tl.constexpr, SMEM_HIST: tl.constexpr,
    RADIX_BITS: tl.constexpr, PREFILTER: tl.constexpr, CAND: tl.constexpr, NT: tl.constexpr,
    PAGED: tl.constexpr, PAGE_SHIFT: tl.constexpr, HAS_R2B: tl.constexpr, CM: tl.constexpr,
):  # fmt: skip
    """Exact top-k of slice ``seg`` of row ``row`` (see :func:`short_rows_kernel`):
    ``src_k``/``src_i`` the row's candidate pairs (``C`` columns valid) in candidate
    mode; ``scr_base`` the program's prefilter scratch; ``CM`` the candidates' load
    cache modifier (".cg" where other programs of the same launch wrote them).
    ``PREFILTER``: whether to try the sampled threshold (:func:`_prefilter`)."""
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
            ck.to(tl.uint32), ci, ci >= 0, c, kmax, thr, k, row, seg, x_row, stride_xc, dk_ptr,
            di_ptr, DC, U, ov_ptr, oi_ptr, stride_ovr, stride_ovc, stride_oir, stride_oic,
            off_ptr, off_scalar, fill_index, fill_bits, page_ptr, page_stride, max_pages,
            n_batch, r2b_ptr, KEY_MASK, SIGN, INF_BITS, LARGEST, RAW16, DST_CAND, ORDER,
            OFF_TENSOR, WRITE_VALUES, KP, SMEM_HIST, RADIX_BITS, PAGED, PAGE_SHIFT, HAS_R2B, NT,
        )  # fmt: skip
    else:
        _finish(
            keys, idx, valid, nv, kmax, kmin, k, row, seg, x_row, stride_xc, dk_ptr, di_ptr,
            DC, U, ov_ptr, oi_ptr, stride_ovr, stride_ovc, stride_oir, stride_oic, off_ptr,
            off_scalar, fill_index, fill_bits, page_ptr, page_stride, max_pages, n_batch,
            r2b_ptr, KEY_MASK, SIGN, INF_BITS, LARGEST, RAW16, DST_CAND, ORDER, OFF_TENSOR,
            WRITE_VALUES, KP, SMEM_HIST, RADIX_BITS, PAGED, PAGE_SHIFT, HAS_R2B, NT,
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


@triton.jit
def short_rows_kernel(
    x_ptr, stride_xr, stride_xc, N, begin_ptr, end_ptr, sk_ptr, si_ptr, C, dk_ptr, di_ptr,
    DC, ov_ptr, oi_ptr, stride_ovr, stride_ovc, stride_oir, stride_oic, off_ptr, off_scalar,
    fill_index, fill_bits, k, L, nseg, page_ptr, page_stride, max_pages, n_batch, r2b_ptr,
    scr_ptr, KEY_MASK: tl.constexpr, SIGN: tl.constexpr, INF_BITS: tl.constexpr,
    LARGEST: tl.constexpr, RAW16: tl.constexpr, SRC_CAND: tl.constexpr,
    DST_CAND: tl.constexpr, ORDER: tl.constexpr, HAS_WINDOW: tl.constexpr,
    OFF_TENSOR: tl.constexpr, WRITE_VALUES: tl.constexpr, NMAX: tl.constexpr,
    KP: tl.constexpr, FUSED_STATS: tl.constexpr, SMEM_HIST: tl.constexpr,
    RADIX_BITS: tl.constexpr, PREFILTER: tl.constexpr, CAND: tl.constexpr, NT: tl.constexpr,
    PAGED: tl.constexpr = False, PAGE_SHIFT: tl.constexpr = 0, HAS_R2B: tl.constexpr = False,
):  # fmt: skip
    """Exact top-k of one slice per program: program ``p`` takes slice ``p % nseg`` of
    row ``p // nseg``.

    Source (SRC_CAND=False): the raw bits of ``x`` (int16/int32 view, any strides);
    the slice is positions ``[s*L, s*L + L)`` intersected with the row's window.
    Source (SRC_CAND=True): candidate pairs ``sk/si [rows, C]`` (int32 keys as bits,
    int32 indices, -1 = none); the slice is ``[s*L, s*L + L)`` of them.
    Destination (DST_CAND=True): pairs ``dk/di [rows, DC]``, slice ``s`` at
    ``[s*k, s*k + k)``, selection in index order, then -1 padding.
    Destination (DST_CAND=False): the caller's ``[rows, k]`` outputs (any strides),
    with order, index offset and fills; needs ``nseg == 1``.
    ``L <= NMAX``; ``KP`` is a power of two ``>= k``."""
    pid = tl.program_id(0)
    row = pid // nseg
    seg = pid % nseg
    row64 = row.to(tl.int64)
    _slice_topk(
        x_ptr + row64 * stride_xr, stride_xc, N, row, seg, begin_ptr, end_ptr,
        sk_ptr + row64 * C, si_ptr + row64 * C, C, dk_ptr, di_ptr, DC, k, ov_ptr, oi_ptr,
        stride_ovr, stride_ovc, stride_oir, stride_oic, off_ptr, off_scalar, fill_index,
        fill_bits, k, L, page_ptr, page_stride, max_pages, n_batch, r2b_ptr,
        scr_ptr + pid.to(tl.int64) * CAND, KEY_MASK, SIGN, INF_BITS, LARGEST, RAW16, SRC_CAND,
        DST_CAND, ORDER, HAS_WINDOW, OFF_TENSOR, WRITE_VALUES, NMAX, KP, FUSED_STATS,
        SMEM_HIST, RADIX_BITS, PREFILTER, CAND, NT, PAGED, PAGE_SHIFT, HAS_R2B, "",
    )  # fmt: skip


@triton.jit
def _merge_up(
    alive, unit, units, col, cnt_row, x_row, stride_xc, N, row, begin_ptr, end_ptr, ck_row,
    ci_row, ck_ptr, ci_ptr, DCT, ov_ptr, oi_ptr, stride_ovr, stride_ovc, stride_oir,
    stride_oic, off_ptr, off_scalar, fill_index, fill_bits, k, page_ptr, page_stride,
    max_pages, n_batch, r2b_ptr, scr_base, KEY_MASK: tl.constexpr, SIGN: tl.constexpr,
    INF_BITS: tl.constexpr, LARGEST: tl.constexpr, RAW16: tl.constexpr, LAST: tl.constexpr,
    ORDER: tl.constexpr, HAS_WINDOW: tl.constexpr, OFF_TENSOR: tl.constexpr,
    WRITE_VALUES: tl.constexpr, M: tl.constexpr, KP: tl.constexpr,
    FUSED_STATS: tl.constexpr, SMEM_HIST: tl.constexpr, RADIX_BITS: tl.constexpr,
    PREFILTER: tl.constexpr, CAND: tl.constexpr, NT: tl.constexpr, PAGED: tl.constexpr,
    PAGE_SHIFT: tl.constexpr, HAS_R2B: tl.constexpr,
):  # fmt: skip
    """One merge level of :func:`split_fused_kernel`: the program that wrote ``unit``
    (of ``units``, ``KP`` columns each from column ``col``) counts it into its group
    of ``M // KP`` units; the group's last one to arrive (``alive`` after) merges the
    group into one unit of the next level (or, ``LAST``, the row's outputs). Returns
    (alive, the next level's unit, its units, its first column, the counters' next
    level)."""
    GU: tl.constexpr = M // KP
    j = unit // GU
    n_in = tl.minimum(units - j * GU, GU)
    groups = (units + GU - 1) // GU
    if alive:
        tl.debug_barrier()  # every store of the unit before the count that publishes it
        old = tl.atomic_add(cnt_row + j, 1, sem="acq_rel", scope="gpu")
        alive = old == n_in - 1
    nxt = col + units * KP
    if alive:
        _slice_topk(
            x_row, stride_xc, N, row, j, begin_ptr, end_ptr, ck_row + col, ci_row + col,
            units * KP, ck_ptr + nxt, ci_ptr + nxt, DCT, KP, ov_ptr, oi_ptr, stride_ovr,
            stride_ovc, stride_oir, stride_oic, off_ptr, off_scalar, fill_index, fill_bits, k,
            M, page_ptr, page_stride, max_pages, n_batch, r2b_ptr, scr_base, KEY_MASK, SIGN,
            INF_BITS, LARGEST, RAW16, True, not LAST, ORDER, HAS_WINDOW, OFF_TENSOR,
            WRITE_VALUES, M, KP, FUSED_STATS, SMEM_HIST, RADIX_BITS, PREFILTER, CAND, NT,
            PAGED, PAGE_SHIFT, HAS_R2B, ".cg",
        )  # fmt: skip
    return alive, j, groups, nxt, cnt_row + groups


@triton.jit
def split_fused_kernel(
    x_ptr, stride_xr, stride_xc, N, begin_ptr, end_ptr, ck_ptr, ci_ptr, DCT, cnt_ptr, NCNT,
    ov_ptr, oi_ptr, stride_ovr, stride_ovc, stride_oir, stride_oic, off_ptr, off_scalar,
    fill_index, fill_bits, k, L, nseg, page_ptr, page_stride, max_pages, n_batch, r2b_ptr,
    scr_ptr, KEY_MASK: tl.constexpr, SIGN: tl.constexpr, INF_BITS: tl.constexpr,
    LARGEST: tl.constexpr, RAW16: tl.constexpr, ORDER: tl.constexpr,
    HAS_WINDOW: tl.constexpr, OFF_TENSOR: tl.constexpr, WRITE_VALUES: tl.constexpr,
    NMAX: tl.constexpr, KP: tl.constexpr, FUSED_STATS: tl.constexpr,
    SMEM_HIST: tl.constexpr, RADIX_BITS: tl.constexpr, PREFILTER: tl.constexpr,
    CAND: tl.constexpr, NT: tl.constexpr, SCR: tl.constexpr, NLEV: tl.constexpr,
    MS: tl.constexpr, PS: tl.constexpr, CS: tl.constexpr, PAGED: tl.constexpr = False,
    PAGE_SHIFT: tl.constexpr = 0, HAS_R2B: tl.constexpr = False,
):  # fmt: skip
    """A whole split in one launch: program ``p`` selects segment ``p % nseg`` of row
    ``p // nseg`` (``L`` elements, ``NMAX`` held) into its unit of ``KP`` candidate
    columns, then climbs the ``NLEV`` merge levels (tuples of each level's group
    slots ``MS``, prefilter ``PS`` and its room ``CS``) for as long as it is the last
    of its group to arrive (a per-row counter per group in ``cnt [rows, NCNT]``, zero
    at launch): the merges run as soon as their inputs are written, with no launch
    between levels. Candidates ``ck/ci [rows, DCT]``: level 0 from column 0, each
    level's units after the previous level's; the last level writes the caller's
    outputs. The groups are the same runs of candidates in index order whoever
    merges them, so the result is bit for bit that of :func:`short_rows_kernel`'s
    levels."""
    pid = tl.program_id(0)
    row = pid // nseg
    seg = pid % nseg
    row64 = row.to(tl.int64)
    x_row = x_ptr + row64 * stride_xr
    ck_row = ck_ptr + row64 * DCT
    ci_row = ci_ptr + row64 * DCT
    scr_base = scr_ptr + pid.to(tl.int64) * SCR
    _slice_topk(
        x_row, stride_xc, N, row, seg, begin_ptr, end_ptr, ck_row, ci_row, 0, ck_ptr, ci_ptr,
        DCT, KP, ov_ptr, oi_ptr, stride_ovr, stride_ovc, stride_oir, stride_oic, off_ptr,
        off_scalar, fill_index, fill_bits, k, L, page_ptr, page_stride, max_pages, n_batch,
        r2b_ptr, scr_base, KEY_MASK, SIGN, INF_BITS, LARGEST, RAW16, False, True, ORDER,
        HAS_WINDOW, OFF_TENSOR, WRITE_VALUES, NMAX, KP, FUSED_STATS, SMEM_HIST, RADIX_BITS,
        PREFILTER, CAND, NT, PAGED, PAGE_SHIFT, HAS_R2B, "",
    )  # fmt: skip
    alive = pid >= 0
    unit = seg
    units = nseg
    col = 0
    cnt_row = cnt_ptr + row64 * NCNT
    for m in tl.static_range(NLEV):
        alive, unit, units, col, cnt_row = _merge_up(
            alive, unit, units, col, cnt_row, x_row, stride_xc, N, row, begin_ptr, end_ptr,
            ck_row, ci_row, ck_ptr, ci_ptr, DCT, ov_ptr, oi_ptr, stride_ovr, stride_ovc,
            stride_oir, stride_oic, off_ptr, off_scalar, fill_index, fill_bits, k, page_ptr,
            page_stride, max_pages, n_batch, r2b_ptr, scr_base, KEY_MASK, SIGN, INF_BITS,
            LARGEST, RAW16, m == NLEV - 1, ORDER, HAS_WINDOW, OFF_TENSOR, WRITE_VALUES, MS[m],
            KP, FUSED_STATS, SMEM_HIST, RADIX_BITS, PS[m], CS[m], NT, PAGED, PAGE_SHIFT,
            HAS_R2B,
        )  # fmt: skip


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
    x_ptr, stride_xr, stride_xc, N, begin_ptr, end_ptr, tot_ptr, cnt_ptr, hs_ptr, ov_ptr,
    oi_ptr, stride_ovr, stride_ovc, stride_oir, stride_oic, off_ptr, off_scalar, fill_index,
    fill_bits, k, L, nseg, page_ptr, page_stride, max_pages, n_batch, r2b_ptr,
    KEY_MASK: tl.constexpr, SIGN: tl.constexpr, INF_BITS: tl.constexpr, LARGEST: tl.constexpr,
    RAW16: tl.constexpr, HAS_WINDOW: tl.constexpr, OFF_TENSOR: tl.constexpr,
    WRITE_VALUES: tl.constexpr, NMAX: tl.constexpr, KP: tl.constexpr, NT: tl.constexpr,
    DIGIT: tl.constexpr, FIRST: tl.constexpr, LAST: tl.constexpr, NSEGP: tl.constexpr,
    TILES: tl.constexpr = 1, PAGED: tl.constexpr = False, PAGE_SHIFT: tl.constexpr = 0,
    HAS_R2B: tl.constexpr = False, SMEM_HIST: tl.constexpr = False,
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
    (:func:`_write_staged`)."""
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
                    seg0 == 0, row, off, oi_ptr + row64 * stride_oir, stride_oic,
                    ov_ptr + row64 * stride_ovr, stride_ovc, fill_index, fill_bits, page_ptr,
                    page_stride, max_pages, n_batch, r2b_ptr, WRITE_VALUES, KP, NT, PAGED,
                    PAGE_SHIFT, HAS_R2B, False,
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
                        eq0, kk, k, seg0 + t == 0, row, off, oi_ptr + row64 * stride_oir,
                        stride_oic, ov_ptr + row64 * stride_ovr, stride_ovc, fill_index,
                        fill_bits, page_ptr, page_stride, max_pages, n_batch, r2b_ptr,
                        WRITE_VALUES, KP, NT, PAGED, PAGE_SHIFT, HAS_R2B, True,
                    )  # fmt: skip
                    gt0 += gt
                    eq0 += eq
                tl.debug_barrier()  # the program's slots, staged by all its threads
                _write_staged(
                    x_row, stride_xc, s_first, gt0 + tl.minimum(eq0, rem) - s_first, kk, k,
                    seg0 == 0, row, off, oi_ptr + row64 * stride_oir, stride_oic,
                    ov_ptr + row64 * stride_ovr, stride_ovc, fill_index, fill_bits, page_ptr,
                    page_stride, max_pages, n_batch, r2b_ptr, KEY_MASK, SIGN, INF_BITS,
                    LARGEST, RAW16, False, WRITE_VALUES, KP, PAGED, PAGE_SHIFT,
                    HAS_R2B,
                )  # fmt: skip


@triton.jit
def _write_segment(
    x_row, stride_xc, keys, idx, valid, pk, r, gt0, eq0, kk, k, fills, row, off, oi_row,
    stride_oic, ov_row, stride_ovc, fill_index, fill_bits, page_ptr, page_stride, max_pages,
    n_batch, r2b_ptr, WRITE_VALUES: tl.constexpr, KP: tl.constexpr, NT: tl.constexpr,
    PAGED: tl.constexpr, PAGE_SHIFT: tl.constexpr, HAS_R2B: tl.constexpr,
    STAGE: tl.constexpr = False,
):  # fmt: skip
    """One segment's part of a row's output, its pivot key ``pk`` and ties to take
    ``r`` known: its keys above ``pk`` and its ties ranked below ``r`` among the
    row's, at their slots in position order after the ``gt0`` keys above and ``eq0``
    ties of the row's segments before it; its counts of both. ``STAGE``: only their
    positions, staged for :func:`_write_staged` (no fills)."""
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
            x_row, stride_xc, idx, sel, slot, kk, k, fills, row, off, oi_row, stride_oic,
            ov_row, stride_ovc, fill_index, fill_bits, page_ptr, page_stride, max_pages,
            n_batch, r2b_ptr, WRITE_VALUES, KP, PAGED, PAGE_SHIFT, HAS_R2B,
        )  # fmt: skip
    return tl.sum(gtm.to(tl.int32), axis=0), tl.sum(eqm.to(tl.int32), axis=0)


# ------------------------------------------------------------------------- the plan
def _hash_once(self) -> int:
    """A frozen dataclass's hash, computed on first use and kept: configs and plans are
    cache keys on every call (hashing a plan's fields again costs ~1 us)."""
    h = self.__dict__.get("_hash")
    if h is None:
        h = self.__dict__["_hash"] = hash(tuple(getattr(self, f.name) for f in fields(self)))
    return h


@dataclass(frozen=True)
class ShortConfig:
    """The sizes a plan is built from. The product takes the defaults; the tests
    shrink them, so that the interpreter reaches the split, its merge levels and the
    radix passes on rows of a few hundred elements.

    nmax: the largest slice one program holds in registers (a power of two), 16
        elements a thread: the longest short row, the split's segment and merge group.
    min_seg: the shortest segment of a split or of the radix passes; a split's
        segment is also at least ``4 k`` long.
    split_rows: rows split (more than one) while ``rows < frac * sm_count``, ``frac``
        the first for rows of up to MID_BYTES, the second up to LONG_BYTES, the third
        beyond: the longer the row, the fewer rows split.
    """

    nmax: int = 8192
    min_seg: int = 1024
    split_rows: tuple[float, float, float] = (0.5, 0.25, 0.11)

    __hash__ = _hash_once


_DEFAULT = ShortConfig()
MID_BYTES, LONG_BYTES = 1 << 15, 1 << 17  # the row sizes between ShortConfig.split_rows
PER_THREAD = 16  # elements a thread holds: more spill, fewer add threads to every reduction
RADIX_BITS = 6  # a program's radix select: 5-6 bit digits do the least work (tl.histogram)
IN_LAUNCH_PER_SM = 6  # a split merges in its launch up to this many programs per SM
PASS_BITS = 8  # the digit of a radix pass
PASS_MIN_K = 1  # the radix passes for k above this: at k = 1 the split is as cheap
PASS_MAX_TILES = 6  # the most segments a program of the radix passes takes ...
PASS_TILES_MAX_BITS = 16  # ... and only for keys this wide (wider: a pass more to read)
LEAN_MAX_KP = 512  # a split of k up to this is lean (see lean_split)
LEAN_BITS = 8  # a lean split's digits
LEAN_REGS = 64  # a lean split's register cap: two programs of 16 warps per SM
MAX_IN_LAUNCH = 4
"""The most merge levels a split runs in one launch (:func:`split_fused_kernel`, where
each is another copy of the selection's code)."""

CROWDED = CROWDED_PER_SM
"""Programs per SM from which a short-row launch takes :meth:`Level.maxnreg`'s
occupancy cap, as many as the streaming kernel's crowded launches run (rows of one
program each: the cap only helps once every SM has programs waiting for the third
slot it makes)."""


@dataclass(frozen=True)
class Level:
    """One launch: ``nseg`` slices of ``L`` elements (or candidates) per row, held in
    ``nmax`` registers; ``src_cand``/``dst_cand`` say where it reads and writes."""

    L: int
    nseg: int
    nmax: int
    src_cand: bool
    dst_cand: bool
    num_warps: int
    crowded: bool = False  # programs enough for CROWDED per SM (set for short rows)

    def maxnreg(self, kp: int) -> int | None:
        """Register cap that keeps two programs per SM, where it costs (almost) no
        spills (ptxas, sm_90): 8 warps at <= 128 registers; 16 warps (8192 keys)
        writing the output at <= 64 where kp <= 1024 (larger kp, and levels writing
        candidates, spill there, so those stay uncapped). A crowded 8-warp launch
        (short rows, at least CROWDED programs per SM) takes the occupancy cap, three
        programs per SM."""
        if self.num_warps == 8:
            return occupancy_cap(CROWDED) if self.crowded else 128
        if self.num_warps == 16 and kp <= 1024 and not self.dst_cand:
            return 64
        return None


@dataclass(frozen=True)
class ShortPlan:
    """The launches of a short-row or split top-k, decided from shapes only.

    ``fused_stats``: (count, max, min) in one tuple reduction (not in the interpreter,
    which runs a tuple reduction element by element). ``lean``: a split of k up to
    LEAN_MAX_KP selects without the sampled prefilter, with LEAN_BITS-bit digits, at
    LEAN_REGS registers. ``in_launch``: a split whose merges run in its one launch
    (units of kp columns). ``pass_level``: unsorted or by index, radix passes over
    segments of the row instead, ``pass_tiles`` a program, in one cooperative launch
    (``grid_sync``) or one launch per phase."""

    kind: str  # "short" or "split"
    levels: tuple[Level, ...]
    kp: int
    fused_stats: bool
    lean: bool = False
    in_launch: bool = False
    pass_level: Level | None = None
    pass_tiles: int = 1
    grid_sync: bool = False

    __hash__ = _hash_once

    @property
    def passes(self) -> bool:
        return self.pass_level is not None


def _warps(nmax: int) -> int:
    return max(1, min(16, nmax // (32 * PER_THREAD)))


def _merge_levels(c: int, k: int, cfg: ShortConfig) -> list[Level]:
    """Candidate levels reducing ``c`` pairs per row to the final write."""
    out = []
    while True:
        g = min(cfg.nmax, max(16, _next_pow2(c)))
        nseg = -(-c // g)
        out.append(Level(g, nseg, g, True, nseg > 1, _warps(g)))
        if nseg == 1:
            return out
        c = nseg * k


def _in_launch_levels(units: int, kp: int, cfg: ShortConfig) -> list[Level] | None:
    """Merge levels for :func:`split_fused_kernel`: each reduces ``units`` of ``kp``
    candidate columns in groups of whole units (as many as ``nmax`` slots hold, fewer
    where fewer are left), each with the warps its slots want (the launch takes the
    most of its levels'); None where more than MAX_IN_LAUNCH levels would be needed
    or a group would hold only one unit."""
    out = []
    while True:
        g = min(cfg.nmax, max(16, _next_pow2(units * kp)))
        if g // kp < 2:
            return None
        groups = -(-units // (g // kp))
        out.append(Level(g, groups, g, True, groups > 1, _warps(g)))
        if groups == 1:
            return out if len(out) <= MAX_IN_LAUNCH else None
        units = groups


def short_path(
    x: torch.Tensor,
    k: int,
    opt: TopkOptions,
    sm_count: int,
    cfg: ShortConfig | None = None,
) -> ShortPlan | None:
    """Pick the register-resident path for ``x [rows, N]``, or None when the streaming
    kernel is the better choice (many long rows) or k is too large.

    Decided from ``rows``, ``N``, ``k``, the dtype's width and ``sm_count`` only —
    never from the data and without a device sync, so it is safe under CUDA-graph
    capture.

    >>> p = short_path(torch.empty(4, 3000), 64, TopkOptions(), sm_count=132)
    >>> describe(p)
    'short nmax=4096'
    """
    bits = x.element_size() * 8
    by_value = Order(opt.order) == Order.VALUE
    cfg = cfg or _DEFAULT
    return _plan(x.shape[0], x.shape[1], k, sm_count, cfg, _interpreting(), bits, by_value)


@cache  # decided once per shape: the plan is host work on every call
def _plan(
    rows: int,
    n: int,
    k: int,
    sm_count: int,
    cfg: ShortConfig,
    interpreting: bool,
    bits: int,
    by_value: bool,
) -> ShortPlan | None:
    if k > cfg.nmax or n >= 2**31 - 2**16:
        return None
    kp = max(16, _next_pow2(k))
    fused = not interpreting
    if n <= cfg.nmax:
        nm = max(16, _next_pow2(n))
        crowded = rows >= CROWDED * sm_count
        level = Level(max(n, 1), 1, nm, False, False, _warps(nm), crowded)
        return ShortPlan("short", (level,), kp, fused)
    # the radix passes: where one cooperative launch holds the rows' segments (the
    # interpreter runs programs one after another, so never there)
    passes = _pass_level(rows, n, sm_count, cfg, bits)
    pkw = {}
    if passes is not None and COOPERATIVE and not interpreting and k > PASS_MIN_K:
        pkw = dict(pass_level=passes[0], pass_tiles=passes[1], grid_sync=True)
    lmin = max(cfg.min_seg, _next_pow2(4 * k))
    if lmin > cfg.nmax:  # no split; radix passes (any k) unless sorted by value
        if not pkw or by_value:
            return None
        return ShortPlan("split", (pkw["pass_level"],), kp, fused, **pkw)
    row_bytes = n * bits // 8
    frac = cfg.split_rows[(row_bytes > MID_BYTES) + (row_bytes > LONG_BYTES)]
    if rows > 1 and rows >= frac * sm_count:
        return None  # (one row always splits: a program alone leaves the rest idle)
    L = cfg.nmax
    nseg = -(-n // L)
    levels = [Level(L, nseg, L, False, True, _warps(L))]
    lean = kp <= LEAN_MAX_KP
    merges = None
    if rows * nseg <= IN_LAUNCH_PER_SM * sm_count:
        merges = _in_launch_levels(nseg, kp, cfg)
    if merges is not None:  # one launch: the warps that the largest slice wants
        w = max(lv.num_warps for lv in levels + merges)
        one = tuple(dataclasses.replace(lv, num_warps=w) for lv in levels + merges)
        return ShortPlan("split", one, kp, fused, lean, True, **pkw)
    levels += _merge_levels(nseg * k, k, cfg)
    return ShortPlan("split", tuple(levels), kp, fused, lean, **pkw)


def _pass_level(
    rows: int, n: int, sm_count: int, cfg: ShortConfig, bits: int
) -> tuple[Level, int] | None:
    """The segments of a split's radix passes and how many a program takes, where one
    launch of at most a program per SM holds them (a program of up to 1,024 threads
    always fits an SM alone), else None: as many segments as there are SMs (at least
    ``min_seg`` long, at most ``nmax``), so that every SM shares the work; where more
    are needed, up to PASS_MAX_TILES a program for keys of up to PASS_TILES_MAX_BITS."""
    L = min(cfg.nmax, max(cfg.min_seg, _next_pow2(-(-rows * n // sm_count))))
    nseg = -(-n // L)
    per_row = sm_count // rows  # programs a row may have
    if per_row == 0:
        return None
    tiles = -(-nseg // per_row)  # the fewest segments a program
    if tiles > (PASS_MAX_TILES if bits <= PASS_TILES_MAX_BITS else 1):
        return None
    return Level(L, nseg, L, False, False, _warps(L)), tiles


def describe(plan: ShortPlan | None) -> str:
    """One line for a benchmark table: the path and, for a split, the segment length,
    segments per row and each merge level's group size x groups."""
    if plan is None:
        return "stream"
    if plan.kind == "short":
        lv = plan.levels[0]
        return f"short nmax={lv.nmax}" + (" crowded" if lv.crowded else "")
    first = plan.levels[0]
    merges = " ".join(f"{lv.L}x{lv.nseg}" for lv in plan.levels[1:])
    return (
        f"split L={first.L} seg={first.nseg} merge={merges}"
        + (" in-launch" if plan.in_launch else "")
        + (f" passes L={plan.pass_level.L}" if plan.passes else "")
        + (f" tiles={plan.pass_tiles}" if plan.pass_tiles > 1 else "")
        + (" one-launch" if plan.grid_sync else "")
    )


# ----------------------------------------------------------------------- the launch
def kernel_constants(
    dtype: torch.dtype,
    plan: ShortPlan,
    level: Level,
    *,
    largest: bool,
    order: Order,
    has_window: int,
    off_tensor: bool,
    write_values: bool,
) -> dict:
    """The compile-time parameters of ``short_rows_kernel`` for one level of a plan
    (the launch and a compile check without a GPU build the same kernel)."""
    bits = 16 if dtype in (torch.bfloat16, torch.float16) else 32
    return dict(
        KEY_MASK=(1 << bits) - 1,
        SIGN=1 << (bits - 1),
        INF_BITS=_inf_bits(bits, dtype == torch.float16),
        LARGEST=largest,
        RAW16=bits == 16,
        SRC_CAND=level.src_cand,
        DST_CAND=level.dst_cand,
        ORDER=_ORDER_CODE[Order(order)],
        HAS_WINDOW=has_window,
        OFF_TENSOR=off_tensor,
        WRITE_VALUES=write_values,
        NMAX=level.nmax,
        KP=plan.kp,
        FUSED_STATS=plan.fused_stats,
        SMEM_HIST=smem_hist(),
        RADIX_BITS=LEAN_BITS if plan.lean else RADIX_BITS,
        PREFILTER=prefilters(plan, level),
        CAND=cand_size(level.nmax, plan.kp),
        NT=32 * level.num_warps,
    )


def in_launch_constants(
    dtype: torch.dtype,
    plan: ShortPlan,
    *,
    largest: bool,
    order: Order,
    has_window: int,
    off_tensor: bool,
    write_values: bool,
) -> dict:
    """The compile-time parameters of ``split_fused_kernel`` for an ``in_launch`` plan:
    level 0's as :func:`kernel_constants` gives them, and per merge level its group
    slots (``MS``), prefilter (``PS``) and prefilter room (``CS``)."""
    first, merges = plan.levels[0], plan.levels[1:]
    kw = kernel_constants(
        dtype, plan, first, largest=largest, order=order, has_window=has_window,
        off_tensor=off_tensor, write_values=write_values,
    )  # fmt: skip
    del kw["SRC_CAND"], kw["DST_CAND"]
    kw["NLEV"] = len(merges)
    kw["MS"] = tuple(lv.nmax for lv in merges)
    kw["PS"] = tuple(prefilters(plan, lv) for lv in merges)
    kw["CS"] = tuple(cand_size(lv.nmax, plan.kp) for lv in merges)
    kw["SCR"] = max(kw["CAND"], *kw["CS"])
    return kw


def passes_constants(
    dtype: torch.dtype,
    plan: ShortPlan,
    sync: bool,
    *,
    largest: bool,
    order: Order,
    has_window: int,
    off_tensor: bool,
    write_values: bool,
) -> list[dict]:
    """The compile-time parameters of each ``radix_phases_kernel`` launch of a plan
    with ``passes``: all phases in one (``sync``: the plan's ``grid_sync``, where the
    device takes it) or one launch per phase (a pass per PASS_BITS-bit digit of the
    key, the write); the segments at the warps their length wants (not those of the
    split's merges)."""
    first = plan.pass_level
    kw = kernel_constants(
        dtype, plan, first, largest=largest, order=order, has_window=has_window,
        off_tensor=off_tensor, write_values=write_values,
    )  # fmt: skip
    common = {n: kw[n] for n in ("KEY_MASK", "SIGN", "INF_BITS", "LARGEST", "RAW16")}
    common.update(HAS_WINDOW=has_window, OFF_TENSOR=off_tensor, WRITE_VALUES=write_values)
    common.update(NMAX=first.nmax, KP=plan.kp, NT=kw["NT"], DIGIT=PASS_BITS)
    common.update(NSEGP=_next_pow2(first.nseg), TILES=plan.pass_tiles, SMEM_HIST=smem_hist())
    last = pass_count(dtype)
    if sync:
        return [dict(common, FIRST=0, LAST=last)]
    return [dict(common, FIRST=p, LAST=p) for p in range(last + 1)]


SMEM_HIST_TRITON = (3, 6)
"""The oldest Triton whose ``tl.histogram`` reserves the shared memory that the
shared-memory histograms use (checked by the compile tests on 3.6, 3.8 and 3.9);
older releases keep ``tl.histogram``."""


def smem_hist() -> bool:
    """Whether the launches take their histograms from shared memory by atomics
    (inline PTX, ``ops.triton.sync._histogram``), not ``tl.histogram`` (which Triton 3.6
    lowers to warp votes): in GPU builds by a Triton of at least SMEM_HIST_TRITON (the
    interpreter runs no PTX)."""
    release = tuple(int(p) for p in triton.__version__.split(".")[:2])
    return not _interpreting() and release >= SMEM_HIST_TRITON


def pass_count(dtype: torch.dtype) -> int:
    """Radix passes over keys of ``dtype``."""
    return -(-torch.finfo(dtype).bits // PASS_BITS)


def cand_size(nmax: int, kp: int) -> int:
    """Room for the elements a prefilter keeps (a power of two): twice ``kp`` (the
    power of two >= k), at least an eighth of the slice."""
    return min(nmax, max(2 * kp, nmax // 8, 16))


def prefilters(plan: ShortPlan, level: Level) -> bool:
    """Whether ``level`` tries the sampled prefilter: not in a lean split, and slices
    long enough that the kept elements fill at most a quarter of them."""
    return not plan.lean and level.nmax >= 4 * cand_size(level.nmax, plan.kp)


@cache  # built once per plan and call shape: host time per call
def _launch_kwargs(
    dtype: torch.dtype, plan: ShortPlan, flags: tuple, page_flags: tuple, interp: bool
) -> tuple[dict, ...]:
    """Per level of ``plan``: its compile-time arguments (``flags``: the keyword
    arguments of :func:`kernel_constants` as ``(name, value)`` pairs; ``page_flags``
    those of the page map, for the level that writes the output) and launch options
    (warps, the register cap; none in the interpreter). An ``in_launch`` plan: one
    launch's (:func:`in_launch_constants`), at its levels' warps, uncapped unless
    lean."""
    if plan.in_launch:
        kw = in_launch_constants(dtype, plan, **dict(flags))
        kw.update(page_flags)
        kw["num_warps"] = plan.levels[0].num_warps
        if plan.lean and not interp:
            kw["maxnreg"] = LEAN_REGS
        return (kw,)
    out = []
    for lv in plan.levels:
        kw = kernel_constants(dtype, plan, lv, **dict(flags))
        if not lv.dst_cand:
            kw.update(page_flags)
        kw["num_warps"] = lv.num_warps
        cap = None if interp else (LEAN_REGS if plan.lean else lv.maxnreg(plan.kp))
        if cap is not None:
            kw["maxnreg"] = cap
        out.append(kw)
    return tuple(out)


@cache
def _passes_kwargs(
    dtype: torch.dtype, plan: ShortPlan, flags: tuple, page_flags: tuple, sync: bool
) -> tuple[dict, ...]:
    """Each launch's compile-time arguments and launch options (as
    :func:`_launch_kwargs` gives a level's; no register cap: they hold one slice;
    the one launch of ``sync`` cooperative)."""
    warps = plan.pass_level.num_warps
    each = passes_constants(dtype, plan, sync, **dict(flags))
    out = tuple(dict(kw, num_warps=warps) for kw in each)
    out[-1].update(page_flags)  # the write's
    if sync:
        out[0]["launch_cooperative_grid"] = True
    return out


def kernel_signature(dtype: torch.dtype, idx64: bool) -> dict:
    """Argument types of ``short_rows_kernel`` (for ``triton.compile(ASTSource(...))``)."""
    raw = "*i16" if dtype in (torch.bfloat16, torch.float16) else "*i32"
    i32 = "i32"
    sig = dict(x_ptr=raw, stride_xr=i32, stride_xc=i32, N=i32, begin_ptr="*i64")
    sig.update(end_ptr="*i64", sk_ptr="*i32", si_ptr="*i32", C=i32, dk_ptr="*i32")
    sig.update(di_ptr="*i32", DC=i32, ov_ptr=raw, oi_ptr="*i64" if idx64 else "*i32")
    for name in ("stride_ovr", "stride_ovc", "stride_oir", "stride_oic"):
        sig[name] = i32
    sig.update(off_ptr="*i64", off_scalar=i32, fill_index=i32, fill_bits=i32)
    sig.update(k=i32, L=i32, nseg=i32, page_ptr="*i32", page_stride=i32, max_pages=i32)
    sig.update(n_batch=i32, r2b_ptr="*i64", scr_ptr="*i64")
    return sig


def passes_signature(dtype: torch.dtype, idx64: bool) -> dict:
    """Argument types of ``radix_phases_kernel`` (for ``triton.compile(ASTSource(...))``)."""
    types = kernel_signature(dtype, idx64)
    types.update(tot_ptr="*i32", cnt_ptr="*i32", hs_ptr="*i32")
    names = inspect.signature(radix_phases_kernel.fn).parameters
    return {name: types[name] for name in names if name in types}


def in_launch_signature(dtype: torch.dtype, idx64: bool) -> dict:
    """Argument types of ``split_fused_kernel`` (for ``triton.compile(ASTSource(...))``):
    those of ``short_rows_kernel`` it shares, its candidate buffers and counters, in
    its own order."""
    types = kernel_signature(dtype, idx64)
    types.update(ck_ptr="*i32", ci_ptr="*i32", DCT="i32", cnt_ptr="*i32", NCNT="i32")
    names = inspect.signature(split_fused_kernel.fn).parameters
    return {name: types[name] for name in names if name in types}


def run_short(
    x: torch.Tensor,
    k: int,
    opt: TopkOptions,
    out_values: torch.Tensor | None,
    out_indices: torch.Tensor,
    plan: ShortPlan,
    page: PageMap | None = None,
) -> None:
    """Write the exact top-k of every row of ``x`` into the given buffers, by ``plan``.

    Args:
        x: ``[rows, N]`` bf16 / fp16 / fp32 on a CUDA device (or the CPU under
            ``TRITON_INTERPRET=1``), any strides.
        k: outputs per row, at most the plan's ``nmax``.
        opt: the output options (windows, order, fills, offsets, index dtype).
        out_values: ``[rows, k]`` of ``x.dtype`` or None; out_indices: ``[rows, k]``
            of ``opt.index_dtype``; any strides.
        plan: from :func:`short_path` for this shape.
        page: optional :class:`~deepselect.ops.triton.launch.PageMap`: indices written as
            physical slots of a paged cache (final level only).

    >>> x = torch.randn(2, 300, device="cuda")  # doctest: +SKIP
    >>> oi = torch.empty(2, 8, dtype=torch.int32, device="cuda")  # doctest: +SKIP
    >>> plan = short_path(x, 8, TopkOptions(), sm_count=132)  # doctest: +SKIP
    >>> run_short(x, 8, TopkOptions(), None, oi, plan)  # doctest: +SKIP
    """
    rows, n = x.shape
    if rows == 0:
        return
    dev = x.device
    raw = x.view(_RAW[x.dtype])  # same width: a view for any strides
    has_window, begin, end, off_tensor, off_ptr, off_scalar = row_arguments(x, opt, out_indices)
    fill_bits = _fill_bits(opt.resolved_fill_value(x.dtype), x.dtype)
    page_args, page_flags = page_arguments(page, out_indices)
    no_page, _ = page_arguments(None, out_indices)
    write_values = out_values is not None
    ov = out_values.view(_RAW[x.dtype]) if write_values else raw
    ov_strides = (ov.stride(0), ov.stride(1)) if write_values else (0, 0)
    flags = (
        ("largest", opt.largest),
        ("order", opt.order),
        ("has_window", has_window),
        ("off_tensor", off_tensor),
        ("write_values", write_values),
    )
    if plan.passes and Order(opt.order) != Order.VALUE:
        first = plan.pass_level
        npass = pass_count(x.dtype)
        ntot = rows * npass << PASS_BITS
        zero = torch.zeros(ntot + rows * npass, dtype=torch.int32, device=dev)  # a memset
        hs = torch.empty((rows, first.nseg, npass << PASS_BITS), dtype=torch.int32, device=dev)
        grid = (rows * -(-first.nseg // plan.pass_tiles),)
        args = (
            raw, x.stride(0), x.stride(1), n, begin, end, zero[:ntot], zero[ntot:], hs, ov,
            out_indices, *ov_strides, out_indices.stride(0), out_indices.stride(1), off_ptr,
            off_scalar, opt.fill_index, fill_bits, k, first.L, first.nseg, *page_args,
        )  # fmt: skip
        refused = _COOPERATIVE_REFUSED.get(dev)
        if plan.grid_sync and (refused is None or grid[0] < refused):
            (kw,) = _passes_kwargs(x.dtype, plan, flags, tuple(page_flags.items()), True)
            try:
                radix_phases_kernel[grid](*args, **kw)
                return
            except RuntimeError as e:  # more programs than the device holds at once
                if "cooperative" not in str(e):
                    raise
                _COOPERATIVE_REFUSED[dev] = grid[0]  # (nothing ran: counters still zero)
                warnings.warn(
                    f"{dev} refused a cooperative launch of {grid[0]} programs ({e}); "
                    "deepselect's radix passes of as many run one launch per phase on it "
                    "from now on (slower, as exact)",
                    RuntimeWarning,
                    stacklevel=2,
                )
        for kw in _passes_kwargs(x.dtype, plan, flags, tuple(page_flags.items()), False):
            radix_phases_kernel[grid](*args, **kw)
        return
    launch_kw = _launch_kwargs(x.dtype, plan, flags, tuple(page_flags.items()), _interpreting())
    if plan.in_launch:
        first, (kw,) = plan.levels[0], launch_kw
        units = [first.nseg] + [lv.nseg for lv in plan.levels[1:-1]]
        dct = sum(units) * plan.kp  # every level's units but the last (the outputs)
        ck = torch.empty((rows, dct), dtype=torch.int32, device=dev)
        ci = torch.empty((rows, dct), dtype=torch.int32, device=dev)
        ncnt = sum(lv.nseg for lv in plan.levels[1:])  # one counter per merge group
        cnt = torch.zeros((rows, ncnt), dtype=torch.int32, device=dev)
        scr = out_indices  # unused unless a level prefilters
        if kw["PREFILTER"] or any(kw["PS"]):
            scr = torch.empty((rows * first.nseg, kw["SCR"]), dtype=torch.int64, device=dev)
        split_fused_kernel[(rows * first.nseg,)](
            raw, x.stride(0), x.stride(1), n, begin, end, ck, ci, dct, cnt, ncnt, ov,
            out_indices, *ov_strides, out_indices.stride(0), out_indices.stride(1), off_ptr,
            off_scalar, opt.fill_index, fill_bits, k, first.L, first.nseg, *page_args, scr, **kw,
        )  # fmt: skip
        return
    src_k = src_i = out_indices  # unused until a level writes candidates
    c = 0
    for lv, kw in zip(plan.levels, launch_kw, strict=True):
        if lv.dst_cand:
            dc = lv.nseg * k
            dst_k = torch.empty((rows, dc), dtype=torch.int32, device=dev)
            dst_i = torch.empty((rows, dc), dtype=torch.int32, device=dev)
        else:
            dc = 0
            dst_k = dst_i = out_indices
        scr = out_indices  # unused unless the level prefilters
        if kw["PREFILTER"]:
            scr = torch.empty((rows * lv.nseg, kw["CAND"]), dtype=torch.int64, device=dev)
        short_rows_kernel[(rows * lv.nseg,)](
            raw,
            x.stride(0),
            x.stride(1),
            n,
            begin,
            end,
            src_k,
            src_i,
            c,
            dst_k,
            dst_i,
            dc,
            ov,
            out_indices,
            *ov_strides,
            out_indices.stride(0),
            out_indices.stride(1),
            off_ptr,
            off_scalar,
            opt.fill_index,
            fill_bits,
            k,
            lv.L,
            lv.nseg,
            *(page_args if not lv.dst_cand else no_page),
            scr,
            **kw,
        )
        src_k, src_i, c = dst_k, dst_i, dc
