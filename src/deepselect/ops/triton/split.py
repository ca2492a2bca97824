"""The split: a long row's segments, each selected by :func:`.short._slice_topk`, and their
exact merges, all in one launch (:func:`split_fused_kernel`)."""

from __future__ import annotations

import triton
import triton.language as tl

from .short import _slice_topk


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
