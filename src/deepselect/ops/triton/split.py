"""The split: a long row's segments, each selected by :func:`.short._slice_topk`, and their
exact merges, all in one launch (:func:`split_fused_kernel`)."""

from __future__ import annotations

import triton
import triton.language as tl

from .common import _window
from .short import SHORT_DEFAULTS, SHORT_GROUPS, _row_offset, _slice_topk, _write_in_order

SPLIT_GROUPS = {
    **{n: m for n, m in SHORT_GROUPS.items() if n not in ("src", "dst")},
    "cand": ("ck_ptr", "ci_ptr", "DCT"),
    "cnt": ("cnt_ptr", "NCNT"),
}
"""How :func:`split_fused_kernel` bundles its arguments (see ``launch.bundle``): as
:func:`.short.short_rows_kernel` does, with its candidates and counters in place of
the source and destination pairs."""

SPLIT_DEFAULTS = SHORT_DEFAULTS


@triton.jit
def _merge_up(
    alive, unit, units, col, cnt_row, xr, row, win, cand, out, off, fills, k, page, scr_base,
    KEYS: tl.constexpr, LAST: tl.constexpr, FORM: tl.constexpr, M: tl.constexpr,
    KP: tl.constexpr, FUSED_STATS: tl.constexpr, SMEM_HIST: tl.constexpr,
    RADIX_BITS: tl.constexpr, PREFILTER: tl.constexpr, CAND: tl.constexpr, NT: tl.constexpr,
    PAGE: tl.constexpr,
):  # fmt: skip
    """One merge level of :func:`split_fused_kernel`: the program that wrote ``unit``
    (of ``units``, ``KP`` columns each from column ``col``) counts it into its group
    of ``M // KP`` units; the group's last one to arrive (``alive`` after) merges the
    group into one unit of the next level (or, ``LAST``, the row's outputs). ``cand =
    (ck_row, ci_row, ck_ptr, ci_ptr, DCT)``: the row's candidates and the buffers';
    the rest as :func:`.short._slice_topk` takes them. Returns (alive, the next level's
    unit, its units, its first column, the counters' next level)."""
    ck_row, ci_row, ck_ptr, ci_ptr, DCT = cand
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
            xr, row, j, win, (ck_row + col, ci_row + col, units * KP),
            (ck_ptr + nxt, ci_ptr + nxt, DCT, KP), out, off, fills, k, M, page, scr_base, KEYS,
            True, not LAST, FORM, M, KP, FUSED_STATS, SMEM_HIST, RADIX_BITS, PREFILTER, CAND,
            NT, PAGE, ".cg",
        )  # fmt: skip
    return alive, j, groups, nxt, cnt_row + groups


@triton.jit
def _write_fills(row, out, off, fills, k, page, FORM: tl.constexpr, KP: tl.constexpr,
                 PAGE: tl.constexpr):  # fmt: skip
    """Outputs ``0 .. k - 1`` of row ``row`` as fills (its window is empty): the fill
    index, and the fill value where values are written (``FORM[3]``)."""
    ov_ptr, oi_ptr, stride_ovr, stride_ovc, stride_oir, stride_oic = out
    off_ptr, off_scalar = off
    row64 = row.to(tl.int64)
    orow = (oi_ptr + row64 * stride_oir, stride_oic, ov_ptr + row64 * stride_ovr, stride_ovc)
    none = tl.zeros([KP], tl.int32)
    _write_in_order(
        ov_ptr, 0, none, none != 0, none, 0, k, True, row,
        _row_offset(off_ptr, off_scalar, row, FORM[2]), orow, fills, page, FORM[3], KP, PAGE,
    )  # fmt: skip


@triton.jit
def split_fused_kernel(
    xin, win, cand, cnt, out, off, fills, k, L, nseg, page, scr_ptr, KEYS: tl.constexpr,
    FORM: tl.constexpr, SEL: tl.constexpr, SCR: tl.constexpr, NLEV: tl.constexpr,
    MS: tl.constexpr, PS: tl.constexpr, CS: tl.constexpr, PAGE: tl.constexpr,
):  # fmt: skip
    """A whole split in one launch: program ``p`` selects segment ``p % nseg`` of row
    ``p // nseg`` (``L`` elements, ``NMAX`` held) into its unit of ``KP`` candidate
    columns, then climbs the ``NLEV`` merge levels (tuples of each level's group
    slots ``MS``, prefilter ``PS`` and its room ``CS``) for as long as it is the last
    of its group to arrive (a per-row counter per group in ``cnt = (cnt_ptr, NCNT)``,
    ``[rows, NCNT]``, zero at launch): the merges run as soon as their inputs are
    written, with no launch between levels. Candidates ``cand = (ck, ci, DCT)``,
    ``[rows, DCT]``: level 0 from column 0, each level's units after the previous
    level's; the last level writes the caller's outputs. The groups are the same runs
    of candidates in index order whoever merges them, so the result is bit for bit
    that of :func:`short_rows_kernel`'s levels. A row whose window is empty has only
    fills: its first program writes them, and every program of the row returns at
    once. The other arguments, bundled as :data:`SPLIT_GROUPS` names them, as
    :func:`short_rows_kernel` takes them."""
    x_ptr, stride_xr, stride_xc, N = xin
    ck_ptr, ci_ptr, DCT = cand
    cnt_ptr, NCNT = cnt
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
    if FORM[1]:  # windows: an empty one has nothing to select or merge, only fills
        begin_ptr, end_ptr = win
        lo, hi = _window(begin_ptr, end_ptr, row, N, FORM[1])
        if hi == lo:
            if seg == 0:
                _write_fills(row, out, off, fills, k, page, FORM, KP, PAGE)
            return
    x_row = x_ptr + row64 * stride_xr
    ck_row = ck_ptr + row64 * DCT
    ci_row = ci_ptr + row64 * DCT
    scr_base = scr_ptr + pid.to(tl.int64) * SCR
    _slice_topk(
        (x_row, stride_xc, N), row, seg, win, (ck_row, ci_row, 0), (ck_ptr, ci_ptr, DCT, KP),
        out, off, fills, k, L, page, scr_base, KEYS, False, True, FORM, NMAX, KP, FUSED_STATS,
        SMEM_HIST, RADIX_BITS, PREFILTER, CAND, NT, PAGE, "",
    )  # fmt: skip
    alive = pid >= 0
    unit = seg
    units = nseg
    col = 0
    cnt_row = cnt_ptr + row64 * NCNT
    for m in tl.static_range(NLEV):
        alive, unit, units, col, cnt_row = _merge_up(
            alive, unit, units, col, cnt_row, (x_row, stride_xc, N), row, win,
            (ck_row, ci_row, ck_ptr, ci_ptr, DCT), out, off, fills, k, page, scr_base, KEYS,
            m == NLEV - 1, FORM, MS[m], KP, FUSED_STATS, SMEM_HIST, RADIX_BITS, PS[m], CS[m],
            NT, PAGE,
        )  # fmt: skip
