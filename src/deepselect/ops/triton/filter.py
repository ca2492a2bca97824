"""The block filter: the inline-PTX core (built as a string per dtype and direction)
that compares a warp's words with the threshold and appends its hits to the warp's
region, the portable Triton filter, and the loads that feed them."""

from __future__ import annotations

from functools import cache

import triton
import triton.language as tl

from .common import (
    NREG,
    THREADS,
    WORDS,
    _inf_bits,
    _raw_key,
)


# ------------------------------------------------------------- PTX core of the filter
def _ptx_key(dst: str, raw: str, bits: int, inf: int, largest: bool) -> list[str]:
    """PTX lines computing the selection key of ``raw`` (b32, low ``bits`` bits) into
    ``dst``, as :func:`_to_key` does; ``inf`` is the bit pattern of +inf."""
    mask = (1 << bits) - 1
    sign = 1 << (bits - 1)
    lines = [
        f"and.b32 %mg, {raw}, {mask ^ sign};",
        f"setp.gt.u32 %pn, %mg, {inf};",
        "setp.eq.u32 %pz, %mg, 0;",
        f"and.b32 %sg, {raw}, {sign};",
        "setp.ne.u32 %ps, %sg, 0;",
        f"xor.b32 {dst}, {raw}, {mask};",
        f"@!%ps or.b32 {dst}, {raw}, {sign};",
        f"@%pz mov.b32 {dst}, {sign};",
        f"@%pn mov.b32 {dst}, {mask};",
    ]
    if not largest:
        lines += [f"sub.u32 {dst}, {mask}, {dst};", f"@%pn mov.b32 {dst}, 0;"]
    return lines


def _ptx_element_key(word: str, shift: int, bits: int, inf: int, largest: bool) -> list[str]:
    """PTX lines leaving the element at bit ``shift`` of ``word`` in %raw and its
    selection key in %key."""
    if bits == 16:
        first = f"bfe.u32 %raw, {word}, {shift}, 16;"
    else:
        first = f"mov.b32 %raw, {word};"
    return [first] + _ptx_key("%key", "%raw", bits, inf, largest)


@cache  # built once: the string is a compile-time constant of every launch
def _word_elem(c: int, j: int, per_word: int, vec: bool) -> int:
    """Offset, from the thread's first element, of element ``j`` of the thread's word
    ``c``. Strided layout: word ``c`` of thread ``t`` is word ``c * 256 + t`` of the
    block. Vector layout (``vec``): words ``q * 1024 + 4 t + r`` for ``c = 4 q + r``
    (two 16-byte loads per thread), the thread's first element at ``4 t`` words."""
    word = (c // 4) * 4 * THREADS + c % 4 if vec else c * THREADS
    return word * per_word + j


def _ptx_fast_entry(bits: int, inf: int, vec: bool) -> list[str]:
    """PTX lines jumping to ``$$FAST`` (:func:`_ptx_fast_mask`) where the lane's
    compare is exact: the compare value $9 is not a NaN and the lane's elements
    ($12 .. its last) lie in the window [$13, $14) and all on one side of the
    threshold's index $11."""
    per_word = 32 // bits
    span = _word_elem(WORDS - 1, per_word - 1, per_word, vec)  # the lane's last element
    return [
        f"and.b32 %t, $9, {(1 << (bits - 1)) - 1};",  # (16-bit: the low half's) magnitude
        f"setp.le.u32 %px, %t, {inf};",
        "setp.ge.s32 %pv, $12, $13;",
        "and.pred %px, %px, %pv;",
        f"add.s32 %t, $12, {span};",
        "setp.lt.s32 %pv, %t, $14;",
        "and.pred %px, %px, %pv;",
        "setp.le.s32 %pv, $11, $12;",
        "setp.gt.s32 %pn, $11, %t;",
        "or.pred %pv, %pv, %pn;",
        "and.pred %px, %px, %pv;",
        "@%px bra $$FAST${:uid};",
    ]


def _ptx_fast_mask(w: list[str], bits: int, largest: bool, ty: str) -> list[str]:
    """PTX lines from ``$$FAST`` on, falling through to the scan: the lane's hit mask
    from one (paired, for 16-bit types) compare per word with $9 (see
    :func:`filter_asm`, ``fast``)."""
    exact = ("geu" if largest else "le") + "." + ty
    out = ["$$FAST${:uid}:"]
    for c in range(WORDS):
        if bits == 32:
            out += [f"setp.{exact} %p, {w[c]}, $9;", f"@%p or.b32 %mask, %mask, {1 << c};"]
        else:  # the low half's result in %p, the high half's in %pe
            out += [
                f"setp.{exact} %p|%pe, {w[c]}, $9;",
                f"@%p or.b32 %mask, %mask, {1 << (2 * c)};",
                f"@%pe or.b32 %mask, %mask, {1 << (2 * c + 1)};",
            ]
    return out


def _ptx_single_hit(
    w: list[str], bits: int, inf: int, largest: bool, vec: bool, hist: bool = False
) -> list[str]:
    """PTX lines placing a lane's only hit (``%n == 1``; bit ``%b`` of ``%mask``) at
    ``[%pk]`` / ``[%pi]`` and jumping to the end: its word picked by three levels of
    selects on the word's number, its element's key and index computed from the bit,
    rather than a test of every word and element of the lane. Other lanes fall
    through to the general placement."""
    per_word = 32 // bits
    shift = per_word.bit_length() - 1  # log2(elements a word)
    out = [
        "setp.ne.u32 %p, %n, 1;",
        "@%p bra $$MULTI${:uid};",
        "bfind.u32 %b, %mask;",
        f"shr.u32 %c, %b, {shift};",  # the word's number
        "and.b32 %t, %c, 4;",
        "setp.ne.u32 %q, %t, 0;",
    ]
    out += [f"selp.b32 %x{r}, {w[4 + r]}, {w[r]}, %q;" for r in range(4)]
    out += ["and.b32 %t, %c, 2;", "setp.ne.u32 %q, %t, 0;"]
    out += ["selp.b32 %x0, %x2, %x0, %q;", "selp.b32 %x1, %x3, %x1, %q;"]
    out += ["and.b32 %t, %c, 1;", "setp.ne.u32 %q, %t, 0;", "selp.b32 %raw, %x1, %x0, %q;"]
    if per_word > 1:  # the element's half of the word
        out += [
            "and.b32 %j, %b, 1;",
            "shl.b32 %t, %j, 4;",
            "bfe.u32 %raw, %raw, %t, 16;",
        ]
    out += _ptx_key("%key", "%raw", bits, inf, largest)
    # the element's offset from the lane's first (see _word_elem)
    if vec:  # word (c // 4) * 4 * THREADS + c % 4
        out += [
            "shr.u32 %t, %c, 2;",
            "and.b32 %u, %c, 3;",
            f"mad.lo.u32 %t, %t, {4 * THREADS}, %u;",
        ]
    else:  # word c * THREADS
        out += [f"mul.lo.u32 %t, %c, {THREADS};"]
    if per_word > 1:
        out += [f"mad.lo.u32 %t, %t, {per_word}, %j;"]
    out += [
        "add.s32 %idx, $12, %t;",
        "st.global.u32 [%pk], %key;",
        "st.global.u32 [%pi], %idx;",
        *(_ptx_hist_count("s") if hist else []),
        "bra.uni $$DONE${:uid};",
        "$$MULTI${:uid}:",
    ]
    return out


def _ptx_hist_count(site: str) -> list[str]:
    """PTX lines counting the hit ``%key`` in the histogram (address %ha, bin width
    2^%hs from base key $19; keys past the last bin in it; keys below $19 nowhere, nor
    keys at or below the threshold's $10, which can raise it no further: the hits of
    a tie-heavy row, most of them at the threshold's key, skip the rest with one
    branch): see HIST_BINS. ``site`` names the hit's place in the filter (labels)."""
    return [
        "setp.ls.u32 %p, %key, $10;",
        f"@%p bra $$NOH{site}${{:uid}};",
        "sub.u32 %hb, %key, $19;",
        "shr.u32 %hb, %hb, %hs;",
        f"min.u32 %hb, %hb, {HIST_BINS.value - 1};",
        "shl.b32 %hb, %hb, 2;",
        "add.u32 %hb, %hb, %ha;",
        "setp.hs.u32 %p, %key, $19;",
        "@%p red.shared.add.u32 [%hb], 1;",
        f"$$NOH{site}${{:uid}}:",
    ]


def filter_asm(
    bits: int, largest: bool, fp16: bool, vec: bool = False, hist: bool = False
) -> str:
    """One thread's share of the block filter, with its warp's hits appended.

    Operands: $0 the warp's new candidate count (out, the same in every lane);
    $1..$8 the thread's words; $9 the value compared with (:func:`_coarse_value`;
    16-bit types: in both halves); $10 threshold key; $11 threshold index; $12
    index of the thread's first element (word layout: :func:`_word_elem`); $13 lo,
    $14 hi (the window); $15 the warp's candidate count; $16, $17 the warp's key
    and index regions (64-bit pointers).

    One compare of the words' packed max (min) with the threshold value (NaN is
    unordered, so it passes) decides whether the warp has anything to look at; only
    then do the lanes with a candidate run the exact (key, index, window) test, the
    warp scans its lanes' hit counts and each lane stores its hits at its offset in
    the warp's region. No barrier, no atomic: a warp that has no candidate — the
    usual case — costs only the compare and one vote. The scan is a ballot and two
    bit counts where no lane has two hits (the usual block with hits), else six
    dependent shuffles.

    Where the compare itself is exact — the compare value is not a NaN
    and the lane's elements lie in the window and all on one side of the threshold's
    index (the compare value is the one for that side, see :func:`_coarse_value`) —
    a lane's hits are read off one (paired) compare per word, without any element's
    key. For tk a candidate's key, key >= tk is value >= value(tk) (unordered: a
    NaN's key is the largest), and for the smallest value <= value(tk), where a NaN
    (key 0, never a hit once tk > 0; tk = 0's value is a NaN) fails the ordered
    compare. Checked for every 16-bit key by tests/test_triton.py.

    A lane with one hit (the usual lane with any) places it directly
    (:func:`_ptx_single_hit`).

    ``hist``: each hit also counts in the program's histogram of candidate keys
    (see HIST_BINS; $18 the histogram's packed address and shift, $19 its base
    key)."""
    per_word = 32 // bits
    cmp = "geu" if largest else "leu"
    ty = ("f16x2" if fp16 else "bf16x2") if bits == 16 else "f32"
    inf = _inf_bits(bits, fp16)
    w = [f"${1 + c}" for c in range(WORDS)]
    out = [
        "{",
        ".reg .b32 %f<8>, %acc, %mg, %sg, %raw, %key, %idx, %mask, %n, %s, %t, %tot, %sel,",
        "    %res, %b, %c, %j, %u, %x<4>, %ha, %hs, %hb;",
        ".reg .b64 %pk, %pi, %off;",
        ".reg .pred %p, %pn, %pz, %ps, %ph, %pe, %pv, %q, %px;",
        "mov.b32 %mask, 0;",
        # $0 may share a register with an input: it is written last, after every read
        "mov.b32 %res, $15;",
    ]
    # one compare of the words' packed max (min): a word passes iff their max does
    # (.NaN: a NaN anywhere makes the max NaN, which passes the unordered compare)
    red = f"{'max' if largest else 'min'}.NaN.{ty}"
    out += [f"{red} %f{c}, {w[2 * c]}, {w[2 * c + 1]};" for c in range(WORDS // 2)]
    out += [f"{red} %f0, %f0, %f1;", f"{red} %f2, %f2, %f3;", f"{red} %f0, %f0, %f2;"]
    out += [f"set.{cmp}.u32.{ty} %acc, %f0, $9;"]
    out += [
        "setp.ne.u32 %q, %acc, 0;",
        "vote.sync.any.pred %p, %q, 0xffffffff;",
        "@!%p bra $$DONE${:uid};",
        "@!%q bra $$SCAN${:uid};",
    ]
    out += _ptx_fast_entry(bits, inf, vec)
    bit = 0
    for c in range(WORDS):
        out += [f"set.{cmp}.u32.{ty} %f0, {w[c]}, $9;", "setp.eq.u32 %p, %f0, 0;"]
        out += [f"@%p bra $$SKIP{c}${{:uid}};"]
        for j in range(per_word):
            elem = _word_elem(c, j, per_word, vec)
            out += _ptx_element_key(w[c], j * bits, bits, inf, largest)
            out += [
                f"add.s32 %idx, $12, {elem};",
                "setp.gt.u32 %ph, %key, $10;",
                "setp.eq.u32 %pe, %key, $10;",
                "setp.lt.s32 %pv, %idx, $11;",
                "and.pred %pe, %pe, %pv;",
                "or.pred %ph, %ph, %pe;",
                "setp.ge.s32 %pv, %idx, $13;",
                "and.pred %ph, %ph, %pv;",
                "setp.lt.s32 %pv, %idx, $14;",
                "and.pred %ph, %ph, %pv;",
                f"@%ph or.b32 %mask, %mask, {1 << bit};",
            ]
            bit += 1
        out.append(f"$$SKIP{c}${{:uid}}:")
    out += ["bra.uni $$SCAN${:uid};"] + _ptx_fast_mask(w, bits, largest, ty)
    # the warp's exclusive scan of the lanes' hit counts (%s) and their total (%tot)
    out += ["$$SCAN${:uid}:", "popc.b32 %n, %mask;"]
    out += [  # no lane with two hits: the lanes below with one, counted in a ballot
        "setp.le.u32 %q, %n, 1;",
        "vote.sync.all.pred %p, %q, 0xffffffff;",
        "@!%p bra $$SHFL${:uid};",
        "setp.ne.u32 %q, %n, 0;",
        "vote.sync.ballot.b32 %b, %q, 0xffffffff;",
        "mov.u32 %t, %lanemask_lt;",
        "and.b32 %t, %t, %b;",
        "popc.b32 %tot, %b;",
        "popc.b32 %s, %t;",
        "bra.uni $$PLACE${:uid};",
        "$$SHFL${:uid}:",
    ]
    out += ["mov.b32 %s, %n;"]
    for d in (1, 2, 4, 8, 16):
        out += [f"shfl.sync.up.b32 %t|%p, %s, {d}, 0, 0xffffffff;", "@%p add.u32 %s, %s, %t;"]
    out += [
        "shfl.sync.idx.b32 %tot, %s, 31, 31, 0xffffffff;",
        "sub.u32 %s, %s, %n;",
        "$$PLACE${:uid}:",
        "add.u32 %res, $15, %tot;",
        "setp.eq.u32 %p, %n, 0;",
        "@%p bra $$DONE${:uid};",
        "add.u32 %s, %s, $15;",
        "mul.wide.u32 %off, %s, 4;",
        "add.s64 %pk, $16, %off;",
        "add.s64 %pi, $17, %off;",
    ]
    if hist:  # the histogram's address and bin width (HIST_PACK_ASM)
        out += [f"and.b32 %ha, $18, {HIST_ADDR_MASK};", "bfe.u32 %hs, $18, 18, 5;"]
    out += _ptx_single_hit(w, bits, inf, largest, vec, hist)
    bit = 0
    for c in range(WORDS):
        wmask = ((1 << per_word) - 1) << (c * per_word)
        out += [
            f"and.b32 %sel, %mask, {wmask};",
            "setp.eq.u32 %p, %sel, 0;",
            f"@%p bra $$NOW{c}${{:uid}};",
        ]
        for j in range(per_word):
            elem = _word_elem(c, j, per_word, vec)
            label = f"$$NO{bit}${{:uid}}"
            if per_word > 1:  # (one element a word: the word's test was this one)
                out += [
                    f"and.b32 %sel, %mask, {1 << bit};",
                    "setp.eq.u32 %p, %sel, 0;",
                    f"@%p bra {label};",
                ]
            out += _ptx_element_key(w[c], j * bits, bits, inf, largest)
            out += [
                f"add.s32 %idx, $12, {elem};",
                "st.global.u32 [%pk], %key;",
                "st.global.u32 [%pi], %idx;",
                *(_ptx_hist_count(str(bit)) if hist else []),
                "add.u64 %pk, %pk, 4;",
                "add.u64 %pi, %pi, 4;",
                f"{label}:",
            ]
            bit += 1
        out.append(f"$$NOW{c}${{:uid}}:")
    out += ["$$DONE${:uid}:", "mov.b32 $0, %res;", "}"]
    return "\n".join(out)


@triton.jit
def _filter_portable(
    x_row,
    blk_start,
    lo,
    hi,
    tk,
    ti,
    rc,
    buf_k,
    buf_i,
    B: tl.constexpr,
    S: tl.constexpr,
    RAW16: tl.constexpr,
    KEY_MASK: tl.constexpr,
    SIGN: tl.constexpr,
    INF_BITS: tl.constexpr,
    LARGEST: tl.constexpr,
):
    """Plain-Triton filter of one block: exact hits appended to the regions, whose
    counts ``rc`` ([NREG]) it returns updated.

    Full-width scans and masked stores: correct everywhere (also in the
    interpreter), but pays per element what the PTX core pays per hit."""
    R: tl.constexpr = B // NREG
    idx = blk_start + tl.arange(0, B)
    valid = (idx >= lo) & (idx < hi)
    raw = tl.load(x_row + idx, mask=valid, other=0)
    key = _raw_key(raw, RAW16, KEY_MASK, SIGN, INF_BITS, LARGEST)
    hit = valid & ((key > tk) | ((key == tk) & (idx < ti)))
    h = tl.reshape(hit.to(tl.int32), [NREG, R])
    nh = tl.sum(h, axis=1)
    if tl.sum(nh, axis=0) > 0:
        pos = tl.cumsum(h, axis=1) - 1 + rc[:, None]
        addr = tl.arange(0, NREG)[:, None] * S + pos
        m = tl.reshape(hit, [NREG, R])
        tl.store(buf_k + addr, tl.reshape(key.to(tl.int32, bitcast=True), [NREG, R]), mask=m)
        tl.store(buf_i + addr, tl.reshape(idx, [NREG, R]), mask=m)
    return rc + nh


@triton.jit
def _word(xw_row, wi, wlo, whi):
    """Word ``wi`` of the row, 0 outside the words ``[wlo, whi)``."""
    return tl.load(xw_row + wi, mask=(wi >= wlo) & (wi < whi), other=0)


@triton.jit
def _masked_words(xw_row, base, wlo, whi, S: tl.constexpr):
    """Eight words of the row, ``c = 4 q + r`` at ``base + q * 1024 + r * S`` (S = 256:
    the strided layout; S = 1: the vector layout; :func:`_word_elem`)."""
    w0 = _word(xw_row, base, wlo, whi)
    w1 = _word(xw_row, base + S, wlo, whi)
    w2 = _word(xw_row, base + 2 * S, wlo, whi)
    w3 = _word(xw_row, base + 3 * S, wlo, whi)
    w4 = _word(xw_row, base + 1024, wlo, whi)
    w5 = _word(xw_row, base + 1024 + S, wlo, whi)
    w6 = _word(xw_row, base + 1024 + 2 * S, wlo, whi)
    w7 = _word(xw_row, base + 1024 + 3 * S, wlo, whi)
    return w0, w1, w2, w3, w4, w5, w6, w7


@triton.jit
def _load_words(xw_row, blk_start, lo, hi, live, KEY_BITS: tl.constexpr):
    """The 8 words per thread of one block (masked to the window; nothing if not live).

    Thread ``t`` owns word ``c * 256 + t`` for ``c < 8``: every load is a coalesced
    1 KiB row, and element order inside the buffer does not matter (compaction
    selects by (key, index))."""
    PER_WORD: tl.constexpr = 32 // KEY_BITS
    wi = blk_start // PER_WORD + tl.arange(0, 256)
    wlo = tl.where(live, lo // PER_WORD, 0x7FFFFFFF)
    whi = (hi + PER_WORD - 1) // PER_WORD
    return _masked_words(xw_row, wi, wlo, whi, 256)


# Two 16-byte loads per thread (vector layout of :func:`_word_elem`); the caller
# guarantees 16-byte aligned rows and a block wholly inside the window.
VEC_LOAD_ASM = tl.constexpr(
    "ld.global.nc.v4.b32 {$0, $1, $2, $3}, [$8];\n"
    "ld.global.nc.v4.b32 {$4, $5, $6, $7}, [$8 + 4096];"
)


@triton.jit
def _load_words_vec(xw_row, blk_start, lo, hi, live, B: tl.constexpr, KEY_BITS: tl.constexpr):
    """The 8 words per thread of one block in the vector layout: two 16-byte loads
    where the block lies wholly inside the window, masked 4-byte loads otherwise
    (window edges; nothing if not live). Rows must start on 16-byte boundaries."""
    PER_WORD: tl.constexpr = 32 // KEY_BITS
    base = blk_start // PER_WORD + 4 * tl.arange(0, 256)
    if live & (blk_start >= lo) & (blk_start + B <= hi):
        w0, w1, w2, w3, w4, w5, w6, w7 = tl.inline_asm_elementwise(
            VEC_LOAD_ASM, "=r,=r,=r,=r,=r,=r,=r,=r,l", [xw_row + base],
            dtype=(tl.int32,) * 8, is_pure=True, pack=1,
        )  # fmt: skip
    else:
        wlo = tl.where(live, lo // PER_WORD, 0x7FFFFFFF)
        whi = (hi + PER_WORD - 1) // PER_WORD
        w0, w1, w2, w3, w4, w5, w6, w7 = _masked_words(xw_row, base, wlo, whi, 1)
    return w0, w1, w2, w3, w4, w5, w6, w7


@triton.jit
def _filter_words(
    w0, w1, w2, w3, w4, w5, w6, w7, first_elem, lo, hi, tk, ti, tv_at, tv_past, wcnt, rk, ri,
    FILTER: tl.constexpr, hreg=0, hbase=0, HIST: tl.constexpr = False,
):  # fmt: skip
    """The filter with its per-thread core in PTX (see :func:`filter_asm`): returns
    each lane's copy of its warp's new candidate count. ``first_elem`` is each
    thread's first element, ``rk``/``ri`` its warp's regions, ``tv_at``/``tv_past``
    the compare values of :func:`_coarse_pair`; every operand has the shape of
    ``wcnt`` ([256], or [32] in the warp-private form of :func:`_tid32`). HIST: the
    hits also counted in the histogram ``hreg`` from key ``hbase`` (see HIST_BINS)."""
    zero = wcnt * 0
    tv = tl.where(first_elem >= ti, tv_past, tv_at)
    if HIST:
        return tl.inline_asm_elementwise(
            FILTER, "=r" + ",r" * 15 + ",l,l,r,r",
            [w0, w1, w2, w3, w4, w5, w6, w7, zero + tv,
             zero + tk.to(tl.int32, bitcast=True), zero + ti, first_elem, zero + lo, zero + hi,
             wcnt, rk, ri, zero + hreg, zero + hbase.to(tl.int32, bitcast=True)],
            dtype=tl.int32, is_pure=False, pack=1,
        )  # fmt: skip
    return tl.inline_asm_elementwise(
        FILTER, "=r" + ",r" * 15 + ",l,l",
        [w0, w1, w2, w3, w4, w5, w6, w7, zero + tv,
         zero + tk.to(tl.int32, bitcast=True), zero + ti, first_elem, zero + lo, zero + hi,
         wcnt, rk, ri],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip


# --------------------------------------------------------- warp-private stream state
# W32: the loop's per-thread state lives in [32]-shaped tensors. With 8 warps Triton
# holds such a tensor once per warp (one element per lane, the warps "replicating" it)
# and reduces it inside a warp, without shared memory or a barrier; the PTX below
# gives each thread its own data (thread index from %tid), so each warp's copy is in
# fact that warp's own. Nothing in the loop then couples the warps: each polls a few
# shared-memory words after each block (POLL_ASM) and the warps meet only when one of
# them needs a compaction and at the end, where the [256]-shaped form takes a
# block-wide sum and three barriers per block.
# Never store a [32]-shaped value with tl.store (Triton would write one warp's copy).
TID_ASM = tl.constexpr("mov.u32 $0, %tid.x;")


@triton.jit
def _tid32(zero32):
    """Each thread's index in the program, as a [32]-shaped (warp-private) tensor."""
    return tl.inline_asm_elementwise(
        TID_ASM, "=r,r", [zero32], dtype=tl.int32, is_pure=True, pack=1
    )  # fmt: skip


# RAISE > 0 (LaunchConfig.raise_every, warps streaming through the ring, sampled rows):
# the hits of a row are also counted in a histogram of HIST_BINS bins in static shared
# memory (bin b: keys from base + b * 2^s, the last bin everything above; base the
# sample's bound, 2^s the sample's key range over HIST_BINS; a row without a sample:
# the greatest key, so it never reaches k and never offers). Every RAISE blocks one
# warp in turn reads the histogram and offers the highest bin start with k or more
# candidates at or above it in the spare sync word (RAISE_ASM); every warp takes it as
# its threshold key when it polls (POLL_RAISE_ASM) if it is above its own: those
# candidates are all in the buffer, so the row's k-th key is at least that start. The
# threshold then follows the k-th of the part of the row seen so far between the
# compactions, instead of staying at the sample's bound. The histogram's packed form:
# bits 0..17 its address, 18..22 the bin width's log2, 23..30 how many blocks this
# warp is before its turn in 8 * RAISE.
HIST_BINS = tl.constexpr(256)


HIST_BYTES = 4 * HIST_BINS.value


HIST_ADDR_MASK = (1 << 18) - 1


HIST_BASE_ASM = tl.constexpr(
    f"{{ .shared .align 16 .b8 deepselect_hist[{HIST_BYTES}]; mov.u32 $0, deepselect_hist; }}"
)


# the histogram's word $1 := 0
HIST_ZERO_ASM = tl.constexpr("{ st.shared.u32 [$1], 0; mov.b32 $0, 0; }")


# the histogram's address $1 with its bin width 2^s in bits 18.. (s = the bit length of
# the key range $2 less 8, at least 0: the range fits in the bins; s < 25)
HIST_PACK_ASM = tl.constexpr(
    "{ .reg .b32 %t; bfind.u32 %t, $2; sub.s32 %t, %t, 7; max.s32 %t, %t, 0; "
    "shl.b32 %t, %t, 18; or.b32 $0, %t, $1; }"
)
