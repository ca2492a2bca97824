"""Sampling kernels around an exact top-k selection (:mod:`deepselect.triton_sampling`
launches them; :mod:`deepselect.engine` defines what they compute).

Each row's selection is ``m`` (value, index) pairs from the exact select: in any order
(a scalar ``k``, ``m = k``; a per-row ``k`` with ``m = k_max <= RANK_MAX``, ranked
in the kernels) or best first (a per-row ``k``, larger ``m``; the draws always). A row
keeps its best ``n = min(k[row], m)`` entries, or the whole row where ``k[row] <= 0``
or ``k[row] >= V``. The kept set is the elements at or above the row's threshold, the
(key, index) pair of its n-th best entry: an element survives iff its key beats the
threshold's, or equals it at an index no higher than the threshold's (the library's one
order: NaN largest, ties to the lowest index, see :func:`.common._to_key`).

* :func:`keep_rows_kernel` — one streaming pass over ``[rows, V]`` in column tiles
  (grid ``rows x tiles``): the input's bits where kept and ``-inf`` elsewhere
  (``top_k_mask_logits``), or ``p / sum`` where kept and ``0 / sum`` elsewhere
  (``top_k_renorm_probs``, the sum from :func:`kept_sums_kernel`).
* :func:`kept_sums_kernel` — each row's kept sum in fp32, from its n selected values
  (a whole-row read only for rows that keep the whole row).
* :func:`gumbel_draw_kernel` — one program per row over its kept entries: the seeded
  Gumbel-max draw of ``engine._draw`` with ``engine._uniform_at``'s hash, bit for bit.
* :func:`kept_row` — the same masked or renormalised row written by the streaming
  kernel's own program once its selection is final (``deepselect_rows_kernel``'s FUSE
  launch): every column outside the kept set holds one value, so the row is written
  without being read again, and the input is read once in all.

Inputs are read as their raw integer view (int16 / int32), so a kept value is written
back with its bits as they were (NaN payloads, -0.0)."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from .common import _best_first_keys, _key_to_raw, _survivors, _to_key, _values_of
from .sync import _smem_wide_add, _smem_wide_read, _smem_wide_zero

# engine._mix32 / _uniform_at's constants, as uint32 arithmetic (products wrap mod 2**32
# exactly as the int64 products there are masked to 32 bits)
MIX_A = tl.constexpr(0x7FEB352D)
MIX_B = tl.constexpr(0x5BD1E995)
GOLDEN = tl.constexpr(0x9E3779B9)
COL_NONE = tl.constexpr(2**62)  # a column past every real one (ties go to the lowest)
# bytes of a row that :func:`kept_row` writes a step: 32 a thread of the streaming
# kernel's 256, two 16-byte stores
ROW_STEP_BYTES = tl.constexpr(8192)


@triton.jit
def _kept_count(k_ptr, k_scalar, row, V, m, K_TENSOR: tl.constexpr):
    """Row ``row``'s whole-row flag (``k <= 0`` or ``k >= V``) and how many of its ``m``
    selected entries it keeps (``min(k, m)``, at least 1)."""
    if K_TENSOR:
        kr = tl.load(k_ptr + row).to(tl.int64)
    else:
        kr = row * 0 + k_scalar
    keep_all = (kr <= 0) | (kr >= V)
    return keep_all, tl.minimum(tl.maximum(kr, 1), m)


@triton.jit
def _keys(raw, KEY_BITS: tl.constexpr, INF_BITS: tl.constexpr):
    """Selection keys (largest first) of raw int16 / int32 bits."""
    # one return: Triton 3.6 compiles the code after a return in a constexpr branch
    if KEY_BITS == 16:
        key = _to_key(raw.to(tl.uint16, bitcast=True).to(tl.uint32), 0xFFFF, 0x8000, INF_BITS, True)
    else:
        key = _to_key(raw.to(tl.uint32, bitcast=True), 0xFFFFFFFF, 0x80000000, INF_BITS, True)
    return key


@triton.jit
def _as_f32(raw, KEY_BITS: tl.constexpr, FP16: tl.constexpr):
    """The fp32 value of raw bits of an fp32, fp16 or bf16 (exact)."""
    if KEY_BITS == 32:
        v = raw.to(tl.float32, bitcast=True)
    elif FP16:
        v = raw.to(tl.float16, bitcast=True).to(tl.float32)
    else:
        v = raw.to(tl.bfloat16, bitcast=True).to(tl.float32)
    return v


@triton.jit
def keep_rows_kernel(
    x_ptr, sx_row, sx_col,  # [rows, V] raw view of the input
    val_ptr, idx_ptr,  # [rows, m] contiguous: the selection
    k_ptr, k_scalar, sums_ptr, thr_ptr,
    out_ptr, so_row,  # [rows, V] unit column stride: raw view (mask) or floats (renorm)
    V, m,
    K_TENSOR: tl.constexpr, RENORM: tl.constexpr, KEY_BITS: tl.constexpr,
    INF_BITS: tl.constexpr, FP16: tl.constexpr, NINF: tl.constexpr, TILE: tl.constexpr,
    BEST_FIRST: tl.constexpr, RANK_BLOCK: tl.constexpr,
):  # fmt: skip
    """One column tile of one row: kept entries bitwise the input and the rest ``-inf``
    (``RENORM``: ``where(kept, p, 0) / sums[row]`` in fp32, stored in the output's
    dtype). Each program finds the row's threshold itself (:func:`_threshold`), but
    for a renorm that ranks a per-row k's selection: :func:`kept_sums_kernel` ranked it
    once, and ``thr[row]`` holds the rank."""
    row = tl.program_id(0).to(tl.int64)
    keep_all, n = _kept_count(k_ptr, k_scalar, row, V, m, K_TENSOR)
    if RENORM and K_TENSOR and not BEST_FIRST:
        t = tl.load(thr_ptr + row).to(tl.uint64, bitcast=True)
    else:
        t = _threshold(
            val_ptr + row * m, idx_ptr + row * m, tl.where(keep_all, 0, m), n, K_TENSOR,
            BEST_FIRST, KEY_BITS, INF_BITS, RANK_BLOCK,
        )  # fmt: skip
    # (key 0, index V) lies below every element: the whole row stays
    t_key = tl.where(keep_all, 0, (t >> 32).to(tl.uint32))
    t_idx = tl.where(keep_all, V, ((t & 0xFFFFFFFF).to(tl.uint32) ^ 0xFFFFFFFF).to(tl.int64))
    cols = tl.program_id(1).to(tl.int64) * TILE + tl.arange(0, TILE)
    inside = cols < V
    raw = tl.load(x_ptr + row * sx_row + cols * sx_col, mask=inside, other=0)
    key = _keys(raw, KEY_BITS, INF_BITS)
    keep = (key > t_key) | ((key == t_key) & (cols <= t_idx))
    dst = out_ptr + row * so_row + cols
    if RENORM:
        total = tl.load(sums_ptr + row)
        p = tl.where(keep, _as_f32(raw, KEY_BITS, FP16), 0.0)
        tl.store(dst, tl.math.div_rn(p, total).to(out_ptr.dtype.element_ty), mask=inside)
    else:
        tl.store(dst, tl.where(keep, raw, NINF).to(raw.dtype), mask=inside)


@triton.jit
def _rank_keys(val_ptr, idx_ptr, c, valid, KEY_BITS: tl.constexpr, INF_BITS: tl.constexpr):
    """uint64 ranks of the selected entries at ``c``: ``key << 32 | (2**32 - 1 - index)``,
    larger for the better entry (the higher key; of equal keys, the lower index)."""
    key = _keys(tl.load(val_ptr + c, mask=valid, other=0), KEY_BITS, INF_BITS)
    idx = tl.load(idx_ptr + c, mask=valid, other=0).to(tl.uint32)
    return (key.to(tl.uint64) << 32) | (idx ^ 0xFFFFFFFF).to(tl.uint64)


@triton.jit
def _threshold(
    val_ptr, idx_ptr, m, n, K_TENSOR: tl.constexpr, BEST_FIRST: tl.constexpr,
    KEY_BITS: tl.constexpr, INF_BITS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """The rank (:func:`_rank_keys`) of the n-th best of a row's ``m`` selected entries
    (``m = 0``: a value every kept-whole row overrides):

    * a per-row k with the selection best first: entry ``n - 1``, one load;
    * a per-row k in any order (``m <= BLOCK``): the entries ranked in one sort;
    * a scalar k (``n = m``, any order): the worst of the m, the least rank, in
      BLOCK-wide steps."""
    if K_TENSOR and BEST_FIRST:
        t = _rank_keys(val_ptr, idx_ptr, n - 1, m > 0, KEY_BITS, INF_BITS)
    elif K_TENSOR:
        c = tl.arange(0, BLOCK)
        ranks = tl.where(c < m, _rank_keys(val_ptr, idx_ptr, c, c < m, KEY_BITS, INF_BITS), 0)
        t = tl.max(tl.where(c == n - 1, tl.sort(ranks, descending=True), 0), axis=0)
    else:
        t = tl.full([], 0xFFFFFFFFFFFFFFFF, tl.uint64)
        for s in range(0, m, BLOCK):
            c = s + tl.arange(0, BLOCK)
            ranks = _rank_keys(val_ptr, idx_ptr, c, c < m, KEY_BITS, INF_BITS)
            t = tl.minimum(t, tl.min(tl.where(c < m, ranks, 0xFFFFFFFFFFFFFFFF), axis=0))
    return t


@triton.jit
def kept_sums_kernel(
    x_ptr, sx_row, sx_col, val_ptr, idx_ptr, k_ptr, k_scalar, sums_ptr, thr_ptr, V, m,
    K_TENSOR: tl.constexpr, KEY_BITS: tl.constexpr, INF_BITS: tl.constexpr,
    FP16: tl.constexpr, BEST_FIRST: tl.constexpr, BLOCK: tl.constexpr,
    RANK_BLOCK: tl.constexpr,
):  # fmt: skip
    """``sums[row]``: the fp32 sum of the row's kept entries, from its selected values
    (rows that keep the whole row read it): the first n where they are best first or
    n = m, else (a per-row k, any order, ``m <= RANK_BLOCK``) those ranked at or above
    the n-th best (:func:`_threshold`), whose rank goes to ``thr[row]``."""
    row = tl.program_id(0).to(tl.int64)
    keep_all, n = _kept_count(k_ptr, k_scalar, row, V, m, K_TENSOR)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    if keep_all:
        for s in range(0, V, BLOCK):
            c = s + tl.arange(0, BLOCK)
            raw = tl.load(x_ptr + row * sx_row + c * sx_col, mask=c < V, other=0)
            acc += _as_f32(raw, KEY_BITS, FP16)
    elif K_TENSOR and not BEST_FIRST:
        thr = _threshold(
            val_ptr + row * m, idx_ptr + row * m, m, n, True, False, KEY_BITS, INF_BITS,
            RANK_BLOCK,
        )  # fmt: skip
        tl.store(thr_ptr + row, thr.to(tl.int64, bitcast=True))
        for t in range(0, m, BLOCK):  # (one step: m <= RANK_BLOCK <= BLOCK)
            c = t + tl.arange(0, BLOCK)
            raw = tl.load(val_ptr + row * m + c, mask=c < m, other=0)
            ranks = _rank_keys(
                val_ptr + row * m, idx_ptr + row * m, c, c < m, KEY_BITS, INF_BITS
            )  # fmt: skip
            acc += tl.where((c < m) & (ranks >= thr), _as_f32(raw, KEY_BITS, FP16), 0.0)
    else:
        for t in range(0, n, BLOCK):  # (not s: its type would differ between branches)
            c = t + tl.arange(0, BLOCK)
            raw = tl.load(val_ptr + row * m + c, mask=c < n, other=0)
            acc += _as_f32(raw, KEY_BITS, FP16)
    tl.store(sums_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def _mix32(h):
    """engine._mix32 on uint32."""
    h = (h ^ (h >> 16)) * MIX_A
    h = (h ^ (h >> 15)) * MIX_B
    h = (h ^ (h >> 16)) * MIX_A
    return h ^ (h >> 15)


@triton.jit
def _uniform(key, col):
    """engine._uniform_at's number for the row's key (uint32) at int64 columns ``col``:
    the top 23 bits of a hash, plus a half, times 2**-23 (every step exact in fp32)."""
    c = col.to(tl.uint32) * GOLDEN + 1
    h = _mix32(key ^ _mix32(c))
    h = _mix32(h ^ key)
    return ((h >> 9).to(tl.float32) + 0.5) * (1.0 / 8388608.0)


@triton.jit
def _log(v, PRECISE_LOG: tl.constexpr):
    # libdevice's logf is the CUDA logf that torch's log uses on the device; the
    # interpreter has no libdevice and takes numpy's log
    if PRECISE_LOG:
        out = libdevice.log(v)
    else:
        out = tl.log(v)
    return out


@triton.jit
def _gumbel_step(score, col, key, live, best, best_col, nan, PRECISE_LOG: tl.constexpr):
    """One step of the seeded Gumbel-max over columns ``col``: ``score - log(-log(u))``
    where ``live``, folded into the running ``best`` (ties to the lowest column) and the
    NaN flag ``nan``."""
    g = score - _log(-_log(_uniform(key, col), PRECISE_LOG), PRECISE_LOG)
    nan = nan | (live & (g != g)).to(tl.int32)
    g = tl.where(live, g, float("-inf"))
    up = (g > best) | ((g == best) & (col < best_col) & live)
    return tl.where(up, g, best), tl.where(up, col, best_col), nan


@triton.jit
def _scored_step(score, col, key, live, best, best_col, nan, FROM_PROBS: tl.constexpr,
                 PRECISE_LOG: tl.constexpr):  # fmt: skip
    """:func:`_gumbel_step` of the top-p draw's scores: ``logit / t`` as they are, a
    probability ``p`` as ``log(p)`` (``-inf`` kept)."""
    if FROM_PROBS:
        score = tl.where(score == float("-inf"), score, _log(score, PRECISE_LOG))
    return _gumbel_step(score, col, key, live, best, best_col, nan, PRECISE_LOG)


@triton.jit
def _filtered_step(score, col, key, live, best, best_col, nan, top, FROM_PROBS: tl.constexpr,
                   PRECISE_LOG: tl.constexpr):  # fmt: skip
    """:func:`_scored_step` over a read's next columns ``col`` (past every column of its
    steps so far), and ``top``, the best Gumbel score of those steps: the hash of each
    column, but the logs only where one of the step's entries may beat ``top``.

    An entry's score ``s + G`` (``G = -log(-log u)``; ``s = log p`` for probabilities)
    reaches ``top - slack`` only if ``-log u <= a = exp(s - top + slack)``, and as
    ``-log u >= 1 - u`` (exact in fp32 for the hash's ``u``), only if ``1 - u <= a``.
    The test takes the fast exponentials and a margin of ``2**-10`` on ``a``, far more
    than their error; ``slack`` is far more than the rounding of the scores' logs. An
    entry it rejects thus scores below ``top`` and, a later column, cannot win a tie
    either. About ``a`` of the entries pass (where ``a`` is small, ``-log u`` is ``1 -
    u`` to first order): the chance that each beats ``top``. NaN scores (and negative
    probabilities, whose log is NaN) always take the exact step."""
    u = _uniform(key, col)
    slack = (tl.abs(top) + 32.0) * (1.0 / 4096.0)
    bound = tl.where(top == float("inf"), top, top - slack)
    if FROM_PROBS:
        a = score * tl.exp(-bound)
        odd = (score != score) | (score < 0.0)
    else:
        a = tl.exp(score - bound)
        odd = score != score
    may = live & ((1.0 - u <= a * (1.0 + 1.0 / 1024.0)) | odd)
    if tl.max(may.to(tl.int32), axis=0) != 0:
        best, best_col, nan = _scored_step(
            score, col, key, may, best, best_col, nan, FROM_PROBS, PRECISE_LOG
        )  # fmt: skip
        top = tl.maximum(top, tl.max(best, axis=0))
    return best, best_col, nan, top


@triton.jit
def _gumbel_start(BLOCK: tl.constexpr):
    """The state of a read's :func:`_filtered_step`: no best score yet (per thread, its
    column, the NaN flag) and no best over the read."""
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    best_col = tl.full([BLOCK], COL_NONE, tl.int64)
    return best, best_col, tl.zeros([BLOCK], tl.int32), tl.full([], float("-inf"), tl.float32)


@triton.jit
def _gumbel_pick(best, best_col, nan):
    """The column the steps of :func:`_gumbel_step` drew (the best score, ties to the
    lowest column), and whether the draw holds: no NaN score and a finite best."""
    b = tl.max(best, axis=0)
    b_col = tl.min(tl.where(best == b, best_col, COL_NONE), axis=0)
    return b_col, (tl.max(nan, axis=0) == 0) & (b > float("-inf")) & (b < float("inf"))


@triton.jit
def gumbel_draw_kernel(
    x_ptr, sx_row, sx_col, val_ptr, idx_ptr, k_ptr, k_scalar, seeds_ptr,
    temp_ptr, temp_scalar, out_ptr, V, m,
    K_TENSOR: tl.constexpr, TEMP_TENSOR: tl.constexpr, FROM_PROBS: tl.constexpr,
    KEY_BITS: tl.constexpr, INF_BITS: tl.constexpr, FP16: tl.constexpr,
    PRECISE_LOG: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """``out[row]``: the column of the largest ``score - log(-log(u(seed, column)))``
    over the row's kept entries (ties to the lowest column), where ``score`` is
    ``logit / temperature`` (fp32, correctly rounded) or ``log(p)``; a row whose
    largest Gumbel score is not finite (or NaN) takes its top-1 instead: the largest
    kept value, NaN largest, ties to the lowest column."""
    row = tl.program_id(0).to(tl.int64)
    keep_all, n = _kept_count(k_ptr, k_scalar, row, V, m, K_TENSOR)
    count = tl.where(keep_all, V, n)
    n_sel = tl.where(keep_all, 0, n)  # entries read from the selection
    seed = tl.load(seeds_ptr + row)
    key = _mix32(seed.to(tl.uint32) ^ _mix32((seed >> 32).to(tl.uint32) ^ GOLDEN))
    if TEMP_TENSOR:
        t = tl.load(temp_ptr + row).to(tl.float32)
    else:
        t = temp_scalar  # an fp32 argument (the interpreter: a float it rounds to fp32)
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    best_col = tl.full([BLOCK], COL_NONE, tl.int64)
    top_key = tl.zeros([BLOCK], tl.uint32)
    top_col = tl.full([BLOCK], COL_NONE, tl.int64)
    nan = tl.zeros([BLOCK], tl.int32)
    for s in range(0, count, BLOCK):
        j = s + tl.arange(0, BLOCK)
        ok = j < count
        # rows that keep the whole row read it; the others their selected entries
        src = tl.where(keep_all, x_ptr + row * sx_row + j * sx_col, val_ptr + row * m + j)
        raw = tl.load(src, mask=ok, other=0)
        sel = tl.load(idx_ptr + row * m + j, mask=j < n_sel, other=0).to(tl.int64)
        col = tl.where(keep_all, j.to(tl.int64), sel)
        v = _as_f32(raw, KEY_BITS, FP16)
        if FROM_PROBS:
            score = tl.where(v == float("-inf"), v, _log(v, PRECISE_LOG))
        else:
            score = tl.math.div_rn(v, t)
        best, best_col, nan = _gumbel_step(score, col, key, ok, best, best_col, nan, PRECISE_LOG)
        k_ = _keys(raw, KEY_BITS, INF_BITS)
        up = ok & ((k_ > top_key) | ((k_ == top_key) & (col < top_col)))
        top_key = tl.where(up, k_, top_key)
        top_col = tl.where(up, col, top_col)
    b = tl.max(best, axis=0)
    b_col = tl.min(tl.where(best == b, best_col, COL_NONE), axis=0)
    tk = tl.max(top_key, axis=0)
    t_col = tl.min(tl.where(top_key == tk, top_col, COL_NONE), axis=0)
    fine = (tl.max(nan, axis=0) == 0) & (b > float("-inf")) & (b < float("inf"))
    tl.store(out_ptr + row, tl.where(fine, b_col, t_col))


@triton.jit
def kept_row(
    row64, count, cur, x_row, scr, k, N, fuse, KEYS: tl.constexpr, CAP: tl.constexpr,
    KP: tl.constexpr, FUSE: tl.constexpr,
):  # fmt: skip
    """Row ``row64``'s output of ``top_k_mask_logits`` or ``top_k_renorm_probs`` from its
    selection, the ``count`` survivors of the streaming kernel's last compaction of it
    (``cur``, ``scr = (scr_k, scr_i)``: where they lie, see :func:`.common._survivors`;
    ``k``: the selection's size, ``N``: the row's length, ``x_row``: its raw bits).

    The row keeps its survivors, its best ``min(k[row], k)`` of them (K_TENSOR: a
    per-row ``k`` at ``kt_ptr``), or itself whole (``k[row] <= 0`` or ``>= N``). Written
    to ``dst_ptr + row64 * dst_stride`` (``fuse = (dst_ptr, dst_stride, kt_ptr)``): the
    kept entries bitwise the input and ``NINF`` (-inf's bits) elsewhere, or, RENORM,
    ``p / sum`` where kept and ``0 / sum`` elsewhere in the output's dtype, the kept sum
    in fp32 from the selected values. Every column outside the kept set holds the same
    value: it goes over the whole row, then the kept entries over it, so only a row
    kept whole is read again. ``FUSE = (FUSED, RENORM, K_TENSOR, FP16, NINF)``. Returns
    the survivors' indices."""
    dst_ptr, dst_stride, kt_ptr = fuse
    RENORM: tl.constexpr = FUSE[1]
    K_TENSOR: tl.constexpr = FUSE[2]
    FP16: tl.constexpr = FUSE[3]
    KEY_BITS: tl.constexpr = KEYS[0]
    KEY_MASK: tl.constexpr = KEYS[1]
    SIGN: tl.constexpr = KEYS[2]
    LARGEST: tl.constexpr = KEYS[4]
    o, real, ck, ci = _survivors(count, cur, scr[0], scr[1], CAP, KP)
    dst_row = dst_ptr + row64 * dst_stride
    if K_TENSOR:  # the best n of the survivors: ranked
        keep_all, n = _kept_count(kt_ptr, 0, row64, N, k, True)
        ck, ci = _best_first_keys(ck, ci, real)
        kept = real & (o < n)
        if keep_all:
            _whole_row(x_row, dst_row, N, KEY_BITS, FP16, RENORM)
        else:
            raw = _values_of(x_row, ck, ci, kept, KEY_BITS, KEY_MASK, SIGN, LARGEST, True)
            _fill_and_keep(dst_row, N, raw, ci, kept, KEY_BITS, FUSE)
    else:
        raw = _values_of(x_row, ck, ci, real, KEY_BITS, KEY_MASK, SIGN, LARGEST, True)
        _fill_and_keep(dst_row, N, raw, ci, real, KEY_BITS, FUSE)
    return ci


@triton.jit
def _fill_and_keep(dst_row, N, raw, ci, kept, KEY_BITS: tl.constexpr, FUSE: tl.constexpr):
    """:func:`kept_row` of a row that keeps the entries ``raw`` (raw bits) at columns
    ``ci`` where ``kept``: the value of every other column over the whole row, then
    the kept entries over it."""
    RENORM: tl.constexpr = FUSE[1]
    FP16: tl.constexpr = FUSE[3]
    NINF: tl.constexpr = FUSE[4]
    STEP: tl.constexpr = ROW_STEP_BYTES * 8 // KEY_BITS
    if RENORM:
        ty = dst_row.dtype.element_ty
        p = tl.where(kept, _as_f32(raw, KEY_BITS, FP16), 0.0)
        total = tl.sum(p, axis=0)
        fill = tl.math.div_rn(tl.zeros([STEP], tl.float32), total).to(ty)  # 0 / sum
        vals = tl.math.div_rn(p, total).to(ty)
        _fill_row(dst_row, N, fill, STEP)
    else:
        vals = raw
        _fill_row(dst_row, N, tl.full([STEP], NINF, raw.dtype), STEP)
    # the kept entries after the fill: both are this program's stores, which the
    # barrier orders
    tl.debug_barrier()
    tl.store(dst_row + ci, vals, mask=kept)


@triton.jit
def _fill_row(dst_row, N, fill, STEP: tl.constexpr):
    """``fill`` (``[STEP]``) over the row's ``N`` columns."""
    cols = tl.arange(0, STEP)
    for s in range(0, N, STEP):
        tl.store(dst_row + s + cols, fill, mask=s + cols < N)


@triton.jit
def _whole_row(x_row, dst_row, N, KEY_BITS: tl.constexpr, FP16: tl.constexpr,
               RENORM: tl.constexpr):  # fmt: skip
    """:func:`kept_row` of a row kept whole: the input's bits, or (RENORM) ``p / sum``
    with the sum of the whole row (read twice)."""
    STEP: tl.constexpr = ROW_STEP_BYTES * 8 // KEY_BITS
    cols = tl.arange(0, STEP)
    total = 0.0
    if RENORM:
        acc = tl.zeros([STEP], tl.float32)
        for s in range(0, N, STEP):
            part = tl.load(x_row + s + cols, mask=s + cols < N, other=0)
            acc += _as_f32(part, KEY_BITS, FP16)
        total = tl.sum(acc, axis=0)
    for t in range(0, N, STEP):  # (not s: its type would differ between branches)
        inside = t + cols < N
        raw = tl.load(x_row + t + cols, mask=inside, other=0)
        if RENORM:
            q = tl.math.div_rn(_as_f32(raw, KEY_BITS, FP16), total)
            tl.store(dst_row + t + cols, q.to(dst_row.dtype.element_ty), mask=inside)
        else:
            tl.store(dst_row + t + cols, raw, mask=inside)


@triton.jit
def _top_p_weights(raw, t, ok, mx, KEY_BITS: tl.constexpr, FP16: tl.constexpr,
                   FROM_PROBS: tl.constexpr, PRECISE: tl.constexpr):  # fmt: skip
    """fp32 ``(score, unnormalised weight)`` of entries: ``(p, p)``, or ``(s, exp(s -
    mx))`` with ``s = logit / t`` correctly rounded and ``mx`` the row's best ``s``; 0
    weight where not ``ok``."""
    v = _as_f32(raw, KEY_BITS, FP16)
    if FROM_PROBS:
        s = v
        w = v
    else:
        s = tl.math.div_rn(v, t)
        if PRECISE:  # (the interpreter has no libdevice)
            w = libdevice.exp(s - mx)
        else:
            w = tl.exp(s - mx)
    return s, tl.where(ok, w, 0.0)


@triton.jit
def _fixed(w, fix):
    """A weight in ``[0, 1]`` as an int64 multiple of ``1 / fix`` (a power of two, so
    that a row's sum stays below ``2**62``), rounded to nearest: sums of them are exact,
    whatever their order."""
    w = tl.minimum(tl.maximum(w, 0.0), 1.0)
    return (w.to(tl.float64) * fix + 0.5).to(tl.int64)


@triton.jit
def _descend(
    x_row, sx_col, V, target, t, mx, fix, BY_MASS: tl.constexpr, KEY_BITS: tl.constexpr,
    INF_BITS: tl.constexpr, FP16: tl.constexpr, FROM_PROBS: tl.constexpr,
    PRECISE: tl.constexpr, SMEM: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """``(tk, above)``: the key where the row's running count (or, ``BY_MASS``, its
    fixed-point weight, :func:`_fixed`) from the best entry first reaches ``target``
    (an fp64), and the count (weight) of the keys beyond it, which stays below the
    target. A radix descent, eight key bits a pass over the row: each pass sums the
    count (weight) of the entries in each of 256 bins of the next digit, among those
    whose higher digits are found, by int64 shared-memory atomics (``SMEM``; else, as
    in the interpreter, in registers). Integer sums do not depend on the order of the
    additions. Bounded: ``KEY_BITS / 8`` reads of the row. ``BLOCK`` at least the
    program's threads."""
    bins = tl.arange(0, 256)
    tk = tl.zeros([], tl.uint32)
    above = tl.zeros([], tl.int64)
    for lvl in tl.static_range(KEY_BITS // 8):
        sh = KEY_BITS - 8 * (lvl + 1)
        h = tl.zeros([256], tl.int64)
        if SMEM:
            _smem_wide_zero(256)
        for s in range(0, V, BLOCK):
            c = s + tl.arange(0, BLOCK)
            ok = c < V
            raw = tl.load(x_row + c * sx_col, mask=ok, other=0)
            key = _keys(raw, KEY_BITS, INF_BITS)
            if lvl > 0:  # within the digits found so far
                ok = ok & ((key >> (sh + 8)) == (tk >> (sh + 8)))
            digit = ((key >> sh) & 255).to(tl.int32)
            if BY_MASS:
                _, w = _top_p_weights(raw, t, ok, mx, KEY_BITS, FP16, FROM_PROBS, PRECISE)
                val = _fixed(w, fix)
            else:
                val = ok.to(tl.int64)
            if SMEM:
                _smem_wide_add(digit, val, ok)
            else:
                one = (digit[:, None] == bins[None, :]) & ok[:, None]
                h += tl.sum(tl.where(one, val[:, None], 0), axis=0)
        if SMEM:
            h = _smem_wide_read(256)
        at_least = tl.sum(h, axis=0) - tl.cumsum(h, axis=0) + h  # this digit or higher
        reach = (above + at_least).to(tl.float64) >= target
        d = tl.maximum(tl.sum(reach.to(tl.int32), axis=0) - 1, 0)  # the last that reaches
        tk = tk | (d.to(tl.uint32) << sh)
        above = above + tl.sum(tl.where(bins == d + 1, at_least, 0), axis=0)
    return tk, above


@triton.jit
def _fixed_at(tk, t, mx, fix, KEY_BITS: tl.constexpr, FP16: tl.constexpr,
              FROM_PROBS: tl.constexpr, PRECISE: tl.constexpr):  # fmt: skip
    """:func:`_fixed` weight of the entries of key ``tk`` (not NaN's): one value."""
    if KEY_BITS == 16:
        raw = _key_to_raw(tk, 0xFFFF, 0x8000, True).to(tl.uint16).to(tl.int16, bitcast=True)
    else:
        raw = _key_to_raw(tk, 0xFFFFFFFF, 0x80000000, True).to(tl.int32, bitcast=True)
    _, w = _top_p_weights(raw, t, True, mx, KEY_BITS, FP16, FROM_PROBS, PRECISE)
    return _fixed(w, fix)


@triton.jit
def _ahead(x_row, sx_col, V, q, BLOCK: tl.constexpr):
    """The raw bits of a read's step at column ``q`` (none past the row)."""
    c = q + tl.arange(0, BLOCK)
    return tl.load(x_row + c * sx_col, mask=c < V, other=0)


@triton.jit
def _read_step(x_row, sx_col, V, q, held, KEY_BITS: tl.constexpr, INF_BITS: tl.constexpr,
               BLOCK: tl.constexpr):  # fmt: skip
    """A read's step at column ``q`` from ``held``, its raw bits loaded a step before
    (:func:`_ahead`): its columns, which are in the row, the raw bits, their keys, and
    the next step's bits, loaded now, so that they arrive while this step works (one
    program a row would otherwise wait on every step's loads)."""
    c = q + tl.arange(0, BLOCK)
    nxt = _ahead(x_row, sx_col, V, q + BLOCK, BLOCK)
    return c, c < V, held, _keys(held, KEY_BITS, INF_BITS), nxt


@triton.jit
def _pool_pick(x_row, sx_col, V, key, kb, cb, t, mx, KEY_BITS: tl.constexpr,
               INF_BITS: tl.constexpr, FP16: tl.constexpr, FROM_PROBS: tl.constexpr,
               PRECISE: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    """``(column, finite, clean)``: the best Gumbel score over the ranks before ``(kb,
    cb)`` (key, then column) in one read of the row (:func:`_filtered_step`); ``clean``:
    no NaN score among them."""
    best, best_col, nan, top = _gumbel_start(BLOCK)
    held = _ahead(x_row, sx_col, V, 0, BLOCK)
    for q in range(0, V, BLOCK):
        c, ok, raw, kc, held = _read_step(x_row, sx_col, V, q, held, KEY_BITS, INF_BITS, BLOCK)
        pool = ok & ((kc > kb) | ((kc == kb) & (c < cb)))
        score, _ = _top_p_weights(raw, t, ok, mx, KEY_BITS, FP16, FROM_PROBS, PRECISE)
        best, best_col, nan, top = _filtered_step(
            score, c.to(tl.int64), key, pool, best, best_col, nan, top, FROM_PROBS, PRECISE
        )  # fmt: skip
    cand, drawn = _gumbel_pick(best, best_col, nan)
    return cand, drawn, tl.max(nan, axis=0) == 0


@triton.jit
def _draw_by_rounds(
    x_row, sx_col, V, key, cut_fix, t, mx, fix, cand, drawn, clean, KEY_BITS: tl.constexpr,
    INF_BITS: tl.constexpr, FP16: tl.constexpr, FROM_PROBS: tl.constexpr,
    PRECISE: tl.constexpr, ROUNDS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """``(column, fine, done)``: the top-p draw of a whole row without finding its cut,
    from ``cand``, the best Gumbel score over the whole row (``drawn``: finite;
    ``clean``: no NaN score in the row), checking at most ``ROUNDS`` candidates, each
    by a read of the row and, where it goes, one more for the next.

    The draw is the best Gumbel score over the ranks that stay, and they are a prefix
    of the row's order (key, then column), the ranks whose ranks before them weigh
    below ``cut_fix`` (:func:`_fixed` sums). A candidate is the best score over a pool
    that holds that prefix (first the row, then the ranks before the last candidate).
    The weight before it below the cut, it stays, so it is the best of the prefix too
    (ties to the lowest column alike); else no rank from it on stays, and the next pool
    is the ranks before it (:func:`_pool_pick`). The pool's weight falls by a uniform
    share a round (the candidate is drawn in proportion to weight), so a top_p of p
    takes about ``1 + ln(1 / p)`` candidates. Not ``done``: a NaN score in a pool (the
    prefix's NaN would decide), or ``ROUNDS`` candidates; the caller then finds the
    cut. ``fine``: the best score finite (else the caller keeps the top-1)."""
    done = tl.where(clean, 0, 2)  # 1: drawn, 2: a NaN score, 0: go on
    for r in range(ROUNDS):
        if done == 0:
            ck = _keys(tl.load(x_row + cand * sx_col, mask=drawn, other=0), KEY_BITS, INF_BITS)
            before = _weight_before(
                x_row, sx_col, 0, V, ck, cand, t, mx, fix, drawn, KEY_BITS, INF_BITS, FP16,
                FROM_PROBS, PRECISE, BLOCK,
            )  # fmt: skip
            stays = before.to(tl.float64) < cut_fix
            done = tl.where(stays | ~drawn, 1, 0)
            if (done == 0) & (r + 1 < ROUNDS):
                cand, drawn, clean = _pool_pick(
                    x_row, sx_col, V, key, ck, cand, t, mx, KEY_BITS, INF_BITS, FP16,
                    FROM_PROBS, PRECISE, BLOCK,
                )  # fmt: skip
                done = tl.where(clean, 0, 2)
    return cand, drawn, done == 1


@triton.jit
def _weight_before(x_row, sx_col, start, end, ck, cand, t, mx, fix, go, KEY_BITS: tl.constexpr,
                   INF_BITS: tl.constexpr, FP16: tl.constexpr, FROM_PROBS: tl.constexpr,
                   PRECISE: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    """The :func:`_fixed` weight of the entries of columns ``[start, end)`` before the
    candidate ``(ck, cand)`` (key, then column) in the row's order, in one read of them
    where ``go`` (else 0)."""
    before = tl.zeros([BLOCK], tl.int64)
    if go:
        held = _ahead(x_row, sx_col, end, start, BLOCK)
        for q in range(start, end, BLOCK):
            c, ok, raw, kc, held = _read_step(
                x_row, sx_col, end, q, held, KEY_BITS, INF_BITS, BLOCK
            )
            ahead = ok & ((kc > ck) | ((kc == ck) & (c < cand)))
            _, w = _top_p_weights(raw, t, ahead, mx, KEY_BITS, FP16, FROM_PROBS, PRECISE)
            before += _fixed(w, fix)
    return tl.sum(before, axis=0)


@triton.jit
def _read_parts(x_row, sx_col, start, end, key, t, mx, fix, go, KEY_BITS: tl.constexpr,
                INF_BITS: tl.constexpr, FP16: tl.constexpr, FROM_PROBS: tl.constexpr,
                PRECISE: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    """``(sum, fixed sum, column, drawn, clean, best)`` of columns ``[start, end)`` of a
    row, in one read of them where ``go``: their weights' fp64 and :func:`_fixed` sums,
    their best Gumbel score and its column (:func:`_gumbel_pick`: ``drawn``, finite and
    no NaN score; ``clean``: no NaN score)."""
    row_sum = tl.zeros([BLOCK], tl.float64)
    row_fix = tl.zeros([BLOCK], tl.int64)
    best, best_col, nan, top = _gumbel_start(BLOCK)
    if go:
        held = _ahead(x_row, sx_col, end, start, BLOCK)
        for r in range(start, end, BLOCK):
            c, ok, raw, kc, held = _read_step(
                x_row, sx_col, end, r, held, KEY_BITS, INF_BITS, BLOCK
            )
            score, w = _top_p_weights(raw, t, ok, mx, KEY_BITS, FP16, FROM_PROBS, PRECISE)
            row_sum += w.to(tl.float64)
            row_fix += _fixed(w, fix)
            best, best_col, nan, top = _filtered_step(
                score, c.to(tl.int64), key, ok, best, best_col, nan, top, FROM_PROBS, PRECISE
            )  # fmt: skip
    pick, drawn = _gumbel_pick(best, best_col, nan)
    clean = tl.max(nan, axis=0) == 0
    return (
        tl.sum(row_sum, axis=0),
        tl.sum(row_fix, axis=0),
        pick,
        drawn,
        clean,
        tl.max(best, axis=0),
    )


# a row's parts (:func:`top_p_part_kernel`), each PART_WORDS int64 words: the fp64 sum
# (its bits), the fixed sum, the best Gumbel score (fp64 bits), its column, NaN seen,
# and the weight before the row's candidate (the same kernel's check)
PART_WORDS = tl.constexpr(6)


@triton.jit
def _parts_of_row(ws_ptr, row, SP: tl.constexpr, MOD: tl.constexpr):
    """``(sum, fixed sum, column, drawn, clean, before)`` of a row from its ``SP`` parts
    (a power of two; a part past the row's end holds none of it): as one read of the
    whole row gives them (:func:`_read_parts`; the fp64 sum added in another order), and
    the weight before the candidate summed over the parts. ``MOD``: the loads' cache
    modifier (``".cg"`` for words other programs wrote during this launch)."""
    part = ws_ptr + (row * SP + tl.arange(0, SP)) * PART_WORDS
    sums = tl.load(part, cache_modifier=MOD).to(tl.float64, bitcast=True)
    fixes = tl.load(part + 1, cache_modifier=MOD)
    g = tl.load(part + 2, cache_modifier=MOD).to(tl.float64, bitcast=True)
    cols = tl.load(part + 3, cache_modifier=MOD)
    clean = tl.max(tl.load(part + 4, cache_modifier=MOD), axis=0) == 0
    b = tl.max(g, axis=0)
    pick = tl.min(tl.where(g == b, cols, COL_NONE), axis=0)
    drawn = clean & (b > float("-inf")) & (b < float("inf"))
    before = tl.sum(tl.load(part + 5, cache_modifier=MOD), axis=0)
    return tl.sum(sums, axis=0), tl.sum(fixes, axis=0), pick, drawn, clean, before


@triton.jit
def _decided(whole_read, fix_all, drawn, before_all, top_p):
    """Whether a whole row read by parts is drawn by them alone: its candidate (the best
    Gumbel score over the row, finite, no NaN score in the row: ``drawn``) stays,
    because the row stays whole (``top_p >= 1``) or the weight before it is below the
    cut. It is then the best score over the ranks that stay, wherever they lie.
    ``whole_read``: the row is whole and was read by the parts; ``top_p`` an fp64."""
    stays = before_all.to(tl.float64) < top_p * fix_all.to(tl.float64)
    return whole_read & drawn & ((top_p >= 1.0) | stays)


@triton.jit
def _row_of_draw(row, k_ptr, k_scalar, seeds_ptr, temp_ptr, temp_scalar, val_ptr, V, m,
                 K_TENSOR: tl.constexpr, TEMP_TENSOR: tl.constexpr, FROM_PROBS: tl.constexpr,
                 KEY_BITS: tl.constexpr, FP16: tl.constexpr, PRECISE: tl.constexpr,
                 BEST: tl.constexpr = True):  # fmt: skip
    """``(k, whole, key, t, mx)`` of a row's top-p draw: its k, whether it keeps the
    whole row (``k <= 0`` or ``k >= V``), its seed's hash key, its temperature and its
    best score (rank 0 of its ``m`` selected entries; ``p`` itself for probabilities;
    0 without ``BEST``, before the selection: probabilities' weights need none)."""
    if K_TENSOR:
        kr = tl.load(k_ptr + row).to(tl.int64)
    else:
        kr = row * 0 + k_scalar
    seed = tl.load(seeds_ptr + row)
    key = _mix32(seed.to(tl.uint32) ^ _mix32((seed >> 32).to(tl.uint32) ^ GOLDEN))
    if TEMP_TENSOR:
        t = tl.load(temp_ptr + row).to(tl.float32)
    else:
        t = temp_scalar
    mx = tl.zeros([], tl.float32)
    if BEST:
        best = tl.load(val_ptr + row * m)
        mx = _top_p_weights(best, t, True, 0.0, KEY_BITS, FP16, FROM_PROBS, PRECISE)[0]
    return kr, (kr <= 0) | (kr >= V), key, t, mx


@triton.jit
def top_p_part_kernel(
    x_ptr, sx_row, sx_col, val_ptr, k_ptr, k_scalar, seeds_ptr, temp_ptr, temp_scalar,
    ws_ptr, V, m, fix, L, p_scalar: tl.float64, first,
    K_TENSOR: tl.constexpr, TEMP_TENSOR: tl.constexpr, FROM_PROBS: tl.constexpr,
    KEY_BITS: tl.constexpr, INF_BITS: tl.constexpr, FP16: tl.constexpr,
    PRECISE_LOG: tl.constexpr, READ_BLOCK: tl.constexpr, SP: tl.constexpr,
    CHECK: tl.constexpr, P_TENSOR: tl.constexpr, FIRST: tl.constexpr,
):  # fmt: skip
    """Part ``j`` (columns ``[j L, (j + 1) L)``, none past the row's end) of a whole
    row's first read for :func:`top_p_draw_kernel` (grid ``rows x SP``), so that a few
    rows are read by many programs: the sums of its weights and its best Gumbel score;
    or (``CHECK``, a second launch) the weight of its entries before the best score over
    the row's parts, which the draw's launch sums and compares with the cut.

    ``FIRST`` (probabilities, whose weights need no best score): the parts run before
    the selection, ``first = (p_ptr, end_ptr, cnt_ptr)``. The first launch zeroes each
    row's count; in the check, the row's last part to count itself decides
    (:func:`_decided`) and writes the row's window end for the selection: 0 where the
    parts draw the row (the selection then leaves it), else ``V``. ``p_scalar`` /
    ``P_TENSOR``: top_p as the draw takes it."""
    row = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1)
    _, whole, key, t, mx = _row_of_draw(
        row, k_ptr, k_scalar, seeds_ptr, temp_ptr, temp_scalar, val_ptr, V, m, K_TENSOR,
        TEMP_TENSOR, FROM_PROBS, KEY_BITS, FP16, PRECISE_LOG, not FIRST,
    )  # fmt: skip
    x_row = x_ptr + row * sx_row
    start = j * L
    end = tl.minimum(start + L, V)
    go = whole & (V > m)
    part = ws_ptr + (row * SP + j) * PART_WORDS
    if CHECK:
        _, _, pick, drawn, _, _ = _parts_of_row(ws_ptr, row, SP, "")
        ck = _keys(tl.load(x_row + pick * sx_col, mask=go & drawn, other=0), KEY_BITS, INF_BITS)
        before = _weight_before(
            x_row, sx_col, start, end, ck, pick, t, mx, fix, go & drawn, KEY_BITS, INF_BITS,
            FP16, FROM_PROBS, PRECISE_LOG, READ_BLOCK,
        )  # fmt: skip
        tl.store(part + 5, before)
        if FIRST:
            p_ptr, end_ptr, cnt_ptr = first
            tl.debug_barrier()  # every store of the part before the count that publishes it
            if tl.atomic_add(cnt_ptr + row, 1, sem="acq_rel", scope="gpu") == SP - 1:
                row_parts = _parts_of_row(ws_ptr, row, SP, ".cg")
                if P_TENSOR:
                    top_p = tl.load(p_ptr + row)
                else:
                    top_p = p_scalar
                done = _decided(go, row_parts[1], row_parts[3], row_parts[5], top_p)
                tl.store(end_ptr + row, tl.where(done, 0, V).to(tl.int64))
    else:
        if FIRST:
            if j == 0:
                tl.store(first[2] + row, 0)
        total, fixed, pick, drawn, clean, best = _read_parts(
            x_row, sx_col, start, end, key, t, mx, fix, go, KEY_BITS, INF_BITS, FP16,
            FROM_PROBS, PRECISE_LOG, READ_BLOCK,
        )  # fmt: skip
        tl.store(part, total.to(tl.int64, bitcast=True))
        tl.store(part + 1, fixed)
        tl.store(part + 2, best.to(tl.float64).to(tl.int64, bitcast=True))
        tl.store(part + 3, pick)
        tl.store(part + 4, (~clean).to(tl.int64))


@triton.jit
def top_p_draw_kernel(
    xr, val_ptr, idx_ptr, k_ptr, k_scalar, seeds_ptr, temp_ptr, temp_scalar, p_ptr,
    p_scalar: tl.float64, out_ptr, V, m, fix, ws_ptr,
    K_TENSOR: tl.constexpr, TEMP_TENSOR: tl.constexpr, P_TENSOR: tl.constexpr,
    FROM_PROBS: tl.constexpr, KEY_BITS: tl.constexpr, INF_BITS: tl.constexpr,
    FP16: tl.constexpr, PRECISE_LOG: tl.constexpr, SMEM: tl.constexpr, BLOCK: tl.constexpr,
    ROW_BLOCK: tl.constexpr, READ_BLOCK: tl.constexpr, ROUNDS: tl.constexpr,
    SP: tl.constexpr,
):  # fmt: skip
    """``out[row]``: ``engine._top_p_draw`` of a row (logits scaled by ``temperature``,
    or probabilities) with ``m`` entries selected best first: its top-k set is its
    best ``kk = k[row]`` entries (the whole row where ``k <= 0`` or ``k >= V``); rank j
    of it stays when the weights of the ranks before it are below ``top_p`` times the
    set's total (rank 0 always, every rank where ``top_p >= 1``); then the seeded
    Gumbel-max draw of :func:`gumbel_draw_kernel` over the ranks that stay, the top-1
    where it is not finite. The weights are ``p``, or ``exp(s - max s)`` (the softmax
    before its division: the cut compares sums of one scale). ``xr = (x_ptr, sx_row,
    sx_col)``: the rows' raw bits and strides.

    * A whole row read by parts (``SP > 1``, :func:`top_p_part_kernel`) whose
      candidate stays (:func:`_decided`): that candidate, with no read of the row or
      the selection (which, for probabilities, may have left the row out).
    * Where the ranks that stay are within the selection (``kk <= m``; or a whole
      row, whose weights summed in one read of it reach the cut inside the
      selection): fp64 sums over the selection, from L2.
    * Else (a flat row, or ``m < kk < V``): bounded passes over the row. A whole row's
      read for its sum also finds its best Gumbel score, the draw where ``top_p >= 1``
      and else the first candidate of :func:`_draw_by_rounds` (a read to check each
      candidate, one more for the next; about ``1 + ln(1 / top_p)`` candidates).
      Where that does not finish, and where ``m < kk < V``: the
      ``kk``-th key and the set's total by :func:`_descend` on counts (where ``kk <
      V``), then the key where the weights reach the cut by :func:`_descend` on
      weights, in fixed point; then a draw over the row, the ties at that key by
      column."""
    x_ptr, sx_row, sx_col = xr
    row = tl.program_id(0).to(tl.int64)
    kr, whole, key, t, mx = _row_of_draw(
        row, k_ptr, k_scalar, seeds_ptr, temp_ptr, temp_scalar, val_ptr, V, m, K_TENSOR,
        TEMP_TENSOR, FROM_PROBS, KEY_BITS, FP16, PRECISE_LOG,
    )  # fmt: skip
    kk = tl.where(whole, V, kr)
    n = tl.minimum(kk, m)  # the ranks of the set within the selection
    beyond = kk > m
    if P_TENSOR:  # (a block of it: the interpreter's scalar comparisons do not mix)
        top_p = tl.load(p_ptr + row) + tl.zeros([BLOCK], tl.float64)
    else:  # (an fp64 scalar argument: a Python float keeps its 53 bits)
        top_p = p_scalar + tl.zeros([BLOCK], tl.float64)
    base = val_ptr + row * m
    x_row = x_ptr + row * sx_row
    total = tl.zeros([BLOCK], tl.float64)
    for s in range(0, n, BLOCK):
        j = s + tl.arange(0, BLOCK)
        raw = tl.load(base + j, mask=j < n, other=0)
        _, w = _top_p_weights(raw, t, j < n, mx, KEY_BITS, FP16, FROM_PROBS, PRECISE_LOG)
        total += w.to(tl.float64)
    sel = tl.sum(total, axis=0)
    if SP > 1:  # the row's parts, from the launches before (where it is whole)
        sum_all, fix_all, row_pick, row_drawn, row_clean, before_all = _parts_of_row(
            ws_ptr, row, SP, ""
        )  # fmt: skip
    else:
        before_all = tl.zeros([], tl.int64)
        sum_all, fix_all, row_pick, row_drawn, row_clean, row_top = _read_parts(
            x_row, sx_col, 0, V, key, t, mx, fix, beyond & whole, KEY_BITS, INF_BITS, FP16,
            FROM_PROBS, PRECISE_LOG, READ_BLOCK,
        )  # fmt: skip
    cut = top_p * tl.where(beyond, sum_all, sel)
    every = top_p >= 1.0
    finite = (mx == mx) & (mx < float("inf")) & (mx > float("-inf"))
    # the selection holds every rank that stays, or the row has no distribution
    # (top_p <= 0 or NaN, unchecked on a device: rank 0 alone, as the selection's loop
    # keeps it)
    inside = tl.max(((sel >= cut) & ~every).to(tl.int32), axis=0) & whole.to(tl.int32)
    inside = inside | tl.max((~(top_p > 0.0)).to(tl.int32), axis=0)
    inside = inside | (~beyond | ~finite).to(tl.int32)
    b_col = tl.zeros([], tl.int64)
    fine = b_col == 0
    drawn = b_col != 0  # by the rounds, for a whole row
    decided = drawn
    if SP > 1:  # the parts' candidate stays (before the selection, for probabilities)
        decided = _decided(whole & beyond, fix_all, row_drawn, before_all, tl.max(top_p, axis=0))
    if decided:
        b_col = row_pick
        fine = row_drawn
        drawn = row_drawn
    elif inside != 0:
        best = tl.full([BLOCK], float("-inf"), tl.float32)
        best_col = tl.full([BLOCK], COL_NONE, tl.int64)
        nan = tl.zeros([BLOCK], tl.int32)
        run = tl.zeros([], tl.float64)  # the weights of the ranks before this step's first
        for u in range(0, n, BLOCK):  # (not s: its type would differ between loops)
            j = u + tl.arange(0, BLOCK)
            ok = j < n
            raw = tl.load(base + j, mask=ok, other=0)
            score, _ = _top_p_weights(raw, t, ok, mx, KEY_BITS, FP16, FROM_PROBS, PRECISE_LOG)
            prev = tl.load(base + j - 1, mask=ok & (j > 0), other=0)
            _, wp = _top_p_weights(
                prev, t, ok & (j > 0), mx, KEY_BITS, FP16, FROM_PROBS, PRECISE_LOG
            )  # fmt: skip
            before = run + tl.cumsum(wp.to(tl.float64), axis=0)
            run += tl.sum(wp.to(tl.float64), axis=0)
            stays = ok & ((before < cut) | (j == 0) | every)
            col = tl.load(idx_ptr + row * m + j, mask=ok, other=0).to(tl.int64)
            best, best_col, nan = _scored_step(
                score, col, key, stays, best, best_col, nan, FROM_PROBS, PRECISE_LOG
            )  # fmt: skip
        b_col, fine = _gumbel_pick(best, best_col, nan)
    elif whole & (tl.max((~every).to(tl.int32), axis=0) == 0):  # the row stays whole
        b_col = row_pick
        fine = row_drawn
        drawn = fine | ~fine
    elif whole:
        cut_fix = tl.max(top_p, axis=0) * fix_all.to(tl.float64)
        b_col, fine, drawn = _draw_by_rounds(
            x_row, sx_col, V, key, cut_fix, t, mx, fix, row_pick, row_drawn, row_clean,
            KEY_BITS, INF_BITS, FP16, FROM_PROBS, PRECISE_LOG, ROUNDS, READ_BLOCK,
        )  # fmt: skip
    if (inside == 0) & ~drawn:
        # the set: keys above tk, and the first n_at of key tk by column
        tk = tl.zeros([], tl.uint32)
        n_at = V + row * 0
        set_fix = fix_all
        if kk < V:  # the kk-th key, then the weight of the set
            tk, above = _descend(
                x_row, sx_col, V, kk.to(tl.float64), t, mx, fix, False, KEY_BITS,
                INF_BITS, FP16, FROM_PROBS, PRECISE_LOG, SMEM, ROW_BLOCK,
            )  # fmt: skip
            n_at = kk - above
            heavier = tl.zeros([READ_BLOCK], tl.int64)
            held = _ahead(x_row, sx_col, V, 0, READ_BLOCK)
            for r2 in range(0, V, READ_BLOCK):
                c, ok, raw, kc, held = _read_step(
                    x_row, sx_col, V, r2, held, KEY_BITS, INF_BITS, READ_BLOCK
                )  # fmt: skip
                ok = ok & (kc > tk)
                _, w = _top_p_weights(raw, t, ok, mx, KEY_BITS, FP16, FROM_PROBS, PRECISE_LOG)
                heavier += _fixed(w, fix)
            at = _fixed_at(tk, t, mx, fix, KEY_BITS, FP16, FROM_PROBS, PRECISE_LOG)
            set_fix = tl.sum(heavier, axis=0) + n_at * at
        if tl.max((~every).to(tl.int32), axis=0) != 0:  # the key where the cut falls
            cut_fix = tl.max(top_p, axis=0) * set_fix.to(tl.float64)
            tk, above = _descend(
                x_row, sx_col, V, cut_fix, t, mx, fix, True, KEY_BITS, INF_BITS, FP16,
                FROM_PROBS, PRECISE_LOG, SMEM, ROW_BLOCK,
            )  # fmt: skip
            # ties: one value, one weight (> 0, as the cut falls among them)
            at = tl.maximum(_fixed_at(tk, t, mx, fix, KEY_BITS, FP16, FROM_PROBS, PRECISE_LOG), 1)
            need = tl.ceil((cut_fix - above.to(tl.float64)) / at.to(tl.float64)).to(tl.int64)
            n_at = tl.maximum(need, 1)
        seen = tl.zeros([], tl.int64)  # entries of key tk in the columns before this step
        row_best, row_col, row_nan, row_top = _gumbel_start(READ_BLOCK)
        held = _ahead(x_row, sx_col, V, 0, READ_BLOCK)
        for q in range(0, V, READ_BLOCK):
            c, ok, raw, kc, held = _read_step(
                x_row, sx_col, V, q, held, KEY_BITS, INF_BITS, READ_BLOCK
            )  # fmt: skip
            tie = ok & (kc == tk)
            order = seen + tl.cumsum(tie.to(tl.int64), axis=0) - tie.to(tl.int64)
            seen += tl.sum(tie.to(tl.int64), axis=0)
            stays = ok & ((kc > tk) | (tie & (order < n_at)))
            score, _ = _top_p_weights(raw, t, ok, mx, KEY_BITS, FP16, FROM_PROBS, PRECISE_LOG)
            row_best, row_col, row_nan, row_top = _filtered_step(
                score, c.to(tl.int64), key, stays, row_best, row_col, row_nan, row_top,
                FROM_PROBS, PRECISE_LOG,
            )  # fmt: skip
        b_col, fine = _gumbel_pick(row_best, row_col, row_nan)
    top = tl.load(idx_ptr + row * m).to(tl.int64)
    tl.store(out_ptr + row, tl.where(fine, b_col, top))
