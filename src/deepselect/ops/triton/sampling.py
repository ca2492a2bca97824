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

from .common import _best_first_keys, _survivors, _to_key, _values_of

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
def _first_of_best(v, cols, none):
    """``(b, col)``: the largest of ``v`` and the lowest of ``cols`` holding it
    (``none``: a column past every real one)."""
    b = tl.max(v, axis=0)
    return b, tl.min(tl.where(v == b, cols, none), axis=0)


@triton.jit
def _top_step(k, col, ok, top_key, top_col):
    """Each lane's largest key so far and the lowest column holding it, after columns
    ``col`` of keys ``k`` (where ``ok``); :func:`_first_of_best` then gives the row's."""
    up = ok & ((k > top_key) | ((k == top_key) & (col < top_col)))
    return tl.where(up, k, top_key), tl.where(up, col, top_col)


@triton.jit
def _gumbel_pick(best, best_col, nan):
    """The column the steps of :func:`_gumbel_step` drew (the best score, ties to the
    lowest column), and whether the draw holds: no NaN score and a finite best."""
    b, b_col = _first_of_best(best, best_col, COL_NONE)
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
        top_key, top_col = _top_step(_keys(raw, KEY_BITS, INF_BITS), col, ok, top_key, top_col)
    b_col, fine = _gumbel_pick(best, best_col, nan)
    t_col = _first_of_best(top_key, top_col, COL_NONE)[1]
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
