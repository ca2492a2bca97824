"""Top-p draws after an exact top-k selection (:func:`deepselect.triton_sampling.top_p_draw`
launches them; ``engine._top_p_draw`` defines what they compute): the seeded Gumbel-max
draw of :mod:`.sampling` over the ranks that stay.

* :func:`top_p_part_kernel` — a few whole rows read by many programs each: the row's
  sums and first candidate, then check rounds, a launch each, that draw most rows.
* :func:`top_p_draw_kernel` — one program a row: a row the parts drew, or the draw
  from the selection where the ranks that stay lie within it, else bounded reads of
  the row (rounds of candidates, then the cut's radix descent).

Weights are compared as fixed-point integers (:func:`_fixed`), whose sums are exact in
any order, so that a draw does not depend on how a row was split."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from .common import _key_to_raw
from .sampling import (
    COL_NONE,
    GOLDEN,
    _as_f32,
    _filtered_step,
    _first_of_best,
    _gumbel_pick,
    _gumbel_start,
    _keys,
    _mix32,
    _scored_step,
    _top_step,
)
from .sync import _smem_wide_add, _smem_wide_read, _smem_wide_zero

TOP_NONE = tl.constexpr(2**31 - 1)  # a column past every real one, as int32


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
def _pool_read(x_row, sx_col, start, end, key, ck, cand, t, mx, fix, go, POOL: tl.constexpr,
               PICK: tl.constexpr, KEY_BITS: tl.constexpr, INF_BITS: tl.constexpr,
               FP16: tl.constexpr, FROM_PROBS: tl.constexpr, PRECISE: tl.constexpr,
               BLOCK: tl.constexpr, TOP: tl.constexpr = False):  # fmt: skip
    """One read of columns ``[start, end)`` of a row where ``go``, over its pool: the
    entries before the candidate ``(ck, cand)`` (key, then column) in the row's order
    (``POOL``), or every entry. ``(sum, fixed, best, best_col, nan, top_key, top_col)``:
    the pool's weights' fp64 sum (every entry's only) and :func:`_fixed` sum, (``PICK``)
    the state of :func:`_filtered_step` over the pool (its best Gumbel score, for
    :func:`_gumbel_pick`), and (``TOP``) its largest key and the lowest column holding
    it (``TOP_NONE`` where the pool is empty)."""
    total = tl.zeros([BLOCK], tl.float64)
    top_key = tl.zeros([BLOCK], tl.uint32)
    top_col = tl.full([BLOCK], TOP_NONE, tl.int32)
    fixed = tl.zeros([BLOCK], tl.int64)
    best, best_col, nan, top = _gumbel_start(BLOCK)
    if go:
        held = _ahead(x_row, sx_col, end, start, BLOCK)
        for q in range(start, end, BLOCK):
            c, ok, raw, kc, held = _read_step(
                x_row, sx_col, end, q, held, KEY_BITS, INF_BITS, BLOCK
            )  # fmt: skip
            if POOL:
                ok = ok & ((kc > ck) | ((kc == ck) & (c < cand)))
            score, w = _top_p_weights(raw, t, ok, mx, KEY_BITS, FP16, FROM_PROBS, PRECISE)
            if not POOL:
                total += w.to(tl.float64)
            fixed += _fixed(w, fix)
            if PICK:
                best, best_col, nan, top = _filtered_step(
                    score, c.to(tl.int64), key, ok, best, best_col, nan, top, FROM_PROBS,
                    PRECISE,
                )  # fmt: skip
            if TOP:
                top_key, top_col = _top_step(kc, c.to(tl.int32), ok, top_key, top_col)
    tk, tc = _first_of_best(top_key, top_col, TOP_NONE)
    return tl.sum(total, axis=0), tl.sum(fixed, axis=0), best, best_col, nan, tk, tc


@triton.jit
def _pool_pick(x_row, sx_col, V, key, kb, cb, t, mx, KEY_BITS: tl.constexpr,
               INF_BITS: tl.constexpr, FP16: tl.constexpr, FROM_PROBS: tl.constexpr,
               PRECISE: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    """``(column, finite, clean)``: the best Gumbel score over the ranks before ``(kb,
    cb)`` (key, then column) in one read of the row (:func:`_pool_read`); ``clean``:
    no NaN score among them."""
    best, best_col, nan = _pool_read(
        x_row, sx_col, 0, V, key, kb, cb, t, mx, 1.0, True, True, True, KEY_BITS, INF_BITS,
        FP16, FROM_PROBS, PRECISE, BLOCK,
    )[2:5]  # fmt: skip
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
    return _pool_read(
        x_row, sx_col, start, end, 0, ck, cand, t, mx, fix, go, True, False, KEY_BITS,
        INF_BITS, FP16, FROM_PROBS, PRECISE, BLOCK,
    )[1]  # fmt: skip


@triton.jit
def _read_parts(x_row, sx_col, start, end, key, t, mx, fix, go, KEY_BITS: tl.constexpr,
                INF_BITS: tl.constexpr, FP16: tl.constexpr, FROM_PROBS: tl.constexpr,
                PRECISE: tl.constexpr, BLOCK: tl.constexpr,
                TOP: tl.constexpr = False):  # fmt: skip
    """``(sum, fixed sum, column, drawn, clean, best, top_key, top_col)`` of columns
    ``[start, end)`` of a row, in one read of them where ``go``: their weights' fp64 and
    :func:`_fixed` sums, their best Gumbel score and its column (:func:`_gumbel_pick`:
    ``drawn``, finite and no NaN score; ``clean``: no NaN score), and (``TOP``) their
    largest key and its lowest column."""
    row_sum, row_fix, best, best_col, nan, top_key, top_col = _pool_read(
        x_row, sx_col, start, end, key, 0, 0, t, mx, fix, go, False, True, KEY_BITS, INF_BITS,
        FP16, FROM_PROBS, PRECISE, BLOCK, TOP,
    )  # fmt: skip
    pick, drawn = _gumbel_pick(best, best_col, nan)
    clean = tl.max(nan, axis=0) == 0
    return (
        row_sum,
        row_fix,
        pick,
        drawn,
        clean,
        tl.max(best, axis=0),
        top_key,
        top_col,
    )


# a row's parts (:func:`top_p_part_kernel`), each PART_WORDS int64 words: the fp64 sum
# (its bits), the fixed sum, a pick (slot 0: words 2-4, the best Gumbel score's fp64
# bits, its column, NaN seen), the weight before the row's candidate (the check), and
# a second slot of a pick (words 6-8: the check rounds' picks alternate between them),
# and the part's largest key and its lowest column (words 9-10: ``FIRST`` 2)
PART_WORDS = tl.constexpr(11)


@triton.jit
def _parts_of_row(ws_ptr, row, SP: tl.constexpr, MOD: tl.constexpr, slot=0):
    """``(sum, fixed sum, column, drawn, clean, before)`` of a row from its ``SP`` parts
    (a power of two; a part past the row's end holds none of it): as one read of the
    whole row gives them (:func:`_read_parts`; the fp64 sum added in another order), the
    pick of ``slot`` (0: the first read's, over the whole row), and the weight before
    the candidate summed over the parts. ``MOD``: the loads' cache modifier (``".cg"``
    for words other programs wrote during this launch)."""
    part = ws_ptr + (row * SP + tl.arange(0, SP)) * PART_WORDS
    sums = tl.load(part, cache_modifier=MOD).to(tl.float64, bitcast=True)
    fixes = tl.load(part + 1, cache_modifier=MOD)
    pick = part + 2 + 4 * slot
    g = tl.load(pick, cache_modifier=MOD).to(tl.float64, bitcast=True)
    cols = tl.load(pick + 1, cache_modifier=MOD)
    clean = tl.max(tl.load(pick + 2, cache_modifier=MOD), axis=0) == 0
    b, col = _first_of_best(g, cols, COL_NONE)
    drawn = clean & (b > float("-inf")) & (b < float("inf"))
    before = tl.sum(tl.load(part + 5, cache_modifier=MOD), axis=0)
    return tl.sum(sums, axis=0), tl.sum(fixes, axis=0), col, drawn, clean, before


@triton.jit
def _store_pick(pick, best, col, clean):
    """A part's pick: its best Gumbel score's bits, its column, NaN seen."""
    tl.store(pick, best.to(tl.float64).to(tl.int64, bitcast=True))
    tl.store(pick + 1, col)
    tl.store(pick + 2, (~clean).to(tl.int64))


@triton.jit
def _top_of_parts(ws_ptr, row, SP: tl.constexpr, x_row, sx_col, val_ptr, idx_ptr):
    """A row's top-1 from its parts' largest keys (words 9 and 10; the lowest column at
    the largest), as a selection of one entry: its raw bits and its column."""
    part = ws_ptr + (row * SP + tl.arange(0, SP)) * PART_WORDS
    keys = tl.load(part + 9, cache_modifier=".cg")
    cols = tl.load(part + 10, cache_modifier=".cg")
    col = _first_of_best(keys, cols, TOP_NONE)[1]
    col = tl.where(col < TOP_NONE, col, 0)  # (a row of no columns: none to write)
    tl.store(val_ptr + row, tl.load(x_row + col * sx_col))
    tl.store(idx_ptr + row, col.to(tl.int32))


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


@triton.jit(do_not_specialize=["rnd"])
def top_p_part_kernel(
    x_ptr, sx_row, sx_col, val_ptr, k_ptr, k_scalar, seeds_ptr, temp_ptr, temp_scalar,
    ws_ptr, V, m, fix, L, p_scalar: tl.float64, decide, rnd,
    K_TENSOR: tl.constexpr, TEMP_TENSOR: tl.constexpr, FROM_PROBS: tl.constexpr,
    KEY_BITS: tl.constexpr, INF_BITS: tl.constexpr, FP16: tl.constexpr,
    PRECISE_LOG: tl.constexpr, READ_BLOCK: tl.constexpr, SP: tl.constexpr,
    CHECK: tl.constexpr, P_TENSOR: tl.constexpr, FIRST: tl.constexpr,
):  # fmt: skip
    """Part ``j`` (columns ``[j L, (j + 1) L)``, none past the row's end) of a whole
    row's reads for :func:`top_p_draw_kernel` (grid ``rows x SP``), so that a few rows
    are read by many programs, in rounds, one launch each: first (``rnd`` 0) the sums
    of its weights and its best Gumbel score (the row's first candidate: the best over
    the row's parts); then ``CHECK`` rounds ``rnd = 1, 2, ...``, each over the rows not
    yet drawn: the weight of the part's entries before the candidate, and (``CHECK``
    2, where a round follows) their best Gumbel score, which the next round checks
    where this one's goes (as :func:`_draw_by_rounds` does in one program, a read a
    round instead of two).

    ``decide = (p_ptr, end_ptr, cnt_ptr, out_ptr, top_val, top_idx)``. The first
    launch zeroes each row's count and sets ``out`` to -1 (not drawn). In a check, each
    part counts itself after its stores (a block barrier, then an acq_rel atomic add, as
    the split's merges do), and the row's last part decides (:func:`_decided`): where
    the candidate stays, it writes it to ``out`` (the draw's launch takes it), and it
    zeroes the count for the next round. A candidate that is not finite, or a pool with
    a NaN score, ends the rounds (the draw's launch decides): the parts carry their pick
    to the next slot unchanged. ``p_scalar`` / ``P_TENSOR``: top_p as the draw takes it.

    ``FIRST`` (probabilities, whose weights need no best score): the parts run before
    the selection. 1: the last part also writes the row's window end for it, 0 where
    drawn (the selection then leaves the row), else ``V``. 2 (every row whole: an int
    ``k``): no selection; the first read also finds each part's largest key, and the
    first check's last part writes the row's top-1 to ``top_val`` / ``top_idx``, the
    one entry the draw's launch takes as its selection (``m = 1``)."""
    row = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1)
    _, whole, key, t, mx = _row_of_draw(
        row, k_ptr, k_scalar, seeds_ptr, temp_ptr, temp_scalar, val_ptr, V, m, K_TENSOR,
        TEMP_TENSOR, FROM_PROBS, KEY_BITS, FP16, PRECISE_LOG, not FIRST,
    )  # fmt: skip
    p_ptr, end_ptr, cnt_ptr, out_ptr, top_val, top_idx = decide
    x_row = x_ptr + row * sx_row
    start = j * L
    end = tl.minimum(start + L, V)
    go = whole & (V > m)
    part = ws_ptr + (row * SP + j) * PART_WORDS
    if CHECK:
        if tl.load(out_ptr + row) < 0:  # not drawn in a round before
            slot = (rnd + 1) % 2  # the candidate's: the round before's picks
            pick, drawn = _parts_of_row(ws_ptr, row, SP, "", slot)[2:4]
            live = go & drawn
            ck = _keys(tl.load(x_row + pick * sx_col, mask=live, other=0), KEY_BITS, INF_BITS)
            before, best, best_col, nan = _pool_read(
                x_row, sx_col, start, end, key, ck, pick, t, mx, fix, live, True, CHECK == 2,
                KEY_BITS, INF_BITS, FP16, FROM_PROBS, PRECISE_LOG, READ_BLOCK,
            )[1:5]  # fmt: skip
            tl.store(part + 5, before)
            if CHECK == 2:  # the next round's candidate (a read's own, or carried)
                held = part + 2 + 4 * slot
                b = tl.where(live, tl.max(best, axis=0), tl.load(held).to(tl.float64, bitcast=True))
                col = tl.where(live, _gumbel_pick(best, best_col, nan)[0], tl.load(held + 1))
                clean = tl.where(live, tl.max(nan, axis=0) == 0, tl.load(held + 2) == 0)
                _store_pick(part + 2 + 4 * (1 - slot), b, col, clean)
            tl.debug_barrier()  # every store of the part before the count that publishes it
            if tl.atomic_add(cnt_ptr + row, 1, sem="acq_rel", scope="gpu") == SP - 1:
                row_parts = _parts_of_row(ws_ptr, row, SP, ".cg", slot)
                if P_TENSOR:
                    top_p = tl.load(p_ptr + row)
                else:
                    top_p = p_scalar
                done = _decided(go, row_parts[1], row_parts[3], row_parts[5], top_p)
                tl.store(out_ptr + row, tl.where(done, row_parts[2], -1))
                tl.store(cnt_ptr + row, 0)
                if FIRST == 1:
                    tl.store(end_ptr + row, tl.where(done, 0, V).to(tl.int64))
                if FIRST == 2:
                    if rnd == 1:  # the row's top-1: the draw's selection (m = 1)
                        _top_of_parts(ws_ptr, row, SP, x_row, sx_col, top_val, top_idx)
    else:
        if j == 0:
            tl.store(cnt_ptr + row, 0)
            tl.store(out_ptr + row, -1)
        total, fixed, pick, drawn, clean, best, top_key, top_col = _read_parts(
            x_row, sx_col, start, end, key, t, mx, fix, go, KEY_BITS, INF_BITS, FP16,
            FROM_PROBS, PRECISE_LOG, READ_BLOCK, FIRST == 2,
        )  # fmt: skip
        tl.store(part, total.to(tl.int64, bitcast=True))
        tl.store(part + 1, fixed)
        _store_pick(part + 2, best, pick, clean)
        if FIRST == 2:
            tl.store(part + 9, top_key.to(tl.int64))
            tl.store(part + 10, top_col)


@triton.jit
def top_p_draw_kernel(
    xr, val_ptr, idx_ptr, k_ptr, k_scalar, seeds_ptr, temp_ptr, temp_scalar, p_ptr,
    p_scalar: tl.float64, out_ptr, V, m, fix, parts,
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

    * A whole row read by parts (``SP > 1``, :func:`top_p_part_kernel`; ``parts =
      (ws_ptr, slot)``, their words and the slot of their last pick) that drew it in
      one of their rounds (``out[row]`` set): that token, with no read of the row or
      the selection (which, for probabilities, may have left the row out). Else the
      rounds below go on from the parts' last pick.
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
    ws_ptr, slot = parts
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
        sum_all, fix_all, row_pick, row_drawn, row_clean, row_before = _parts_of_row(
            ws_ptr, row, SP, "", slot
        )  # fmt: skip
        parted = tl.load(out_ptr + row)
    else:
        parted = tl.full([], -1, tl.int64)
        sum_all, fix_all, row_pick, row_drawn, row_clean, row_top = _read_parts(
            x_row, sx_col, 0, V, key, t, mx, fix, beyond & whole, KEY_BITS, INF_BITS, FP16,
            FROM_PROBS, PRECISE_LOG, READ_BLOCK,
        )[:6]  # fmt: skip
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
    if parted >= 0:  # drawn by the parts' rounds (before the selection, for probabilities)
        b_col = parted
        drawn = b_col >= 0
        fine = drawn
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
