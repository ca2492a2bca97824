"""Triton kernels: one-pass DeepSelect top-k of a row (or of a row segment).

Reading order: key mapping → the block filter (portable Triton, or a small inline-PTX
core) → compaction (radix-2 select over keys, then over indices among ties) → the
row kernel → output. Launch configuration lives in :mod:`deepselect.triton_backend`.

How one program selects a row ``[lo, hi)``:

1. Blocks of ``B`` elements, aligned to multiples of ``B`` from the row start, are
   visited in a data-independent order (``reference.block_at``): the middle
   blocks ``1 + (a * t + c) mod (m - 2)`` with ``a`` near ``(m - 2) / phi^2`` without
   near-periodic runs (``reference.block_stride``), ``c`` hashed from a fixed seed and
   the row number, and the last and the first block right after the ``CAP / B``
   middle blocks that hold the first compaction's sample, which the threshold starts
   from.
2. A threshold ``T = (key, index)`` — the k-th best so far, ``-inf`` at first — filters
   each block. Elements that beat it are appended to a candidate buffer in global
   memory (this program's scratch, L2-resident), split into NREG regions: warp w
   appends to region w, so placing hits needs no block-wide scan.
3. When the buffer holds ``>= k + B2`` candidates (or a region could overflow on the
   next block) it is compacted to the exact k best, and ``T`` becomes the k-th of them
   (the pivot key, and where ties are cut the tied indices' bound, by radix passes
   over the filled slots: :func:`_compact`). The first compaction of a long enough
   row keeps a rank of the candidates seen so far, a sample of the row, rather than
   k; a row where fewer than k reach that bound is selected again without it.
   SAMPLE_PRE: that bound is found before the stream, over the sample's keys read
   into registers (:func:`_sample_bound`), and the stream starts at it, as at a
   preset key, reading the sample's blocks again.
4. After the last block a final compaction leaves ``min(k, count)`` survivors, which
   are sorted if asked for and written out with their values rebuilt from their keys
   (a selected zero or NaN, whose key folds its sign or payload,
   and the values of outputs sorted by index are read from the row).

The filter is where the time goes: nearly every block holds a few elements of the
running top-k, so appending must cost per hit, not per element, and a block must
cost little more than its read. The PTX core compares packed values with the
threshold value (``set.geu.*x2``: two elements per instruction; NaN compares
unordered, so it passes); a warp where no lane passed — the common case — is done
after one vote. Otherwise a lane whose compare is exact (its compare value is not a
NaN, its elements lie in the window and on one side of the threshold's index) reads
its hits off one compare per word; the others run the exact (key, index, window)
test. The warp scans its lanes' hit counts (a ballot, or shuffles) and each lane
stores its hits in the warp's region (a lane with one hit straight from its bit). The
only block-wide step per block is one sum of the region counts (the trigger). On long
rows (``w32``, see :func:`_tid32`) there is none: each warp streams its share of
every block at its own pace and the warps meet only to compact (:func:`_meet`).

Each thread loads its block share (32 bytes) with two 16-byte loads where the rows
are 16-byte aligned (``vec``), one block ahead of the filter. With ``w32`` each warp
either alternates two word sets in registers or, with ``RING`` stages (k up to 2048
by default), streams through a ring in shared memory filled by ``cp.async``, RING - 1
blocks in flight (:func:`ring_base_asm`); with ``RAISE`` (16-bit keys by default)
the warps also raise their thresholds between compactions from a histogram of the
hits (see HIST_BINS). Measured limits (benchmarks/RESULTS.md): the block-synchronous loop's
instructions and the latency of its hit path; the warp-private loop through the
ring, its instructions: the hits the sample's bound lets through, and compactions.
"""

from __future__ import annotations

from functools import cache

import triton
import triton.language as tl

from . import reference

STRIDE_SPAN = tl.constexpr(reference.STRIDE_SPAN)
STRIDE_GOOD = tl.constexpr(reference.STRIDE_GOOD)
SAMPLE_PAD = tl.constexpr(reference.SAMPLE_PAD)
THREADS = 256  # lanes of a block tile: one column per thread (num_warps = 8)
WORDS = 8  # 32-bit words per thread per block: 16 bf16/fp16 or 8 fp32 elements
NT_STREAM = tl.constexpr(THREADS)  # the streaming kernel's threads, in its jit code


# ----------------------------------------------------------------------------- keys
@triton.jit
def _to_key(
    raw,
    KEY_MASK: tl.constexpr,
    SIGN: tl.constexpr,
    INF_BITS: tl.constexpr,
    LARGEST: tl.constexpr,
):
    """uint32 raw bit patterns (low KEY_BITS bits) -> order-preserving selection keys,
    exactly as :func:`deepselect.keys.to_keys`."""
    mag = raw & (KEY_MASK ^ SIGN)
    # (x & M) ^ M rather than ~x & M: the same instruction, and Triton 3.8's
    # interpreter cannot invert a uint32 (numpy 2.4)
    key = tl.where((raw & SIGN) != 0, (raw & KEY_MASK) ^ KEY_MASK, raw | SIGN)
    key = tl.where(mag == 0, SIGN, key)
    is_nan = mag > INF_BITS
    key = tl.where(is_nan, KEY_MASK, key)
    if not LARGEST:
        key = tl.where(is_nan, 0, KEY_MASK - key)
    return key.to(tl.uint32)


@triton.jit
def _key_to_raw(key, KEY_MASK: tl.constexpr, SIGN: tl.constexpr, LARGEST: tl.constexpr):
    """Scalar selection key -> raw bits of a value with that key (NaN for the top key);
    used to compare packed values against the threshold."""
    if LARGEST:
        kl = key
    else:
        kl = tl.where(key == 0, KEY_MASK, KEY_MASK - key)
    return tl.where((kl & SIGN) != 0, kl ^ SIGN, (kl & KEY_MASK) ^ KEY_MASK).to(tl.uint32)


@triton.jit
def _coarse_value(tk, past, KEY_MASK: tl.constexpr, SIGN: tl.constexpr, LARGEST: tl.constexpr):
    """Raw bits of the value the filter's packed compare (``>=``; ``<=`` for the
    smallest) takes against threshold key ``tk``: every element with a key above
    ``tk`` passes it. Where ``past`` (the elements lie at or past the threshold's
    index, so a tie cannot beat it) the next key's value, so that rows with many
    values equal to the threshold's rarely enter the exact test."""
    nxt = tk + 1
    if not LARGEST:  # the key after +0.0's is -0.0's bits, which compare equal to it
        nxt = tl.where(nxt == SIGN, nxt + 1, nxt)
    strict = past & (tk < KEY_MASK)
    return _key_to_raw(tl.where(strict, nxt, tk), KEY_MASK, SIGN, LARGEST)


@triton.jit
def _coarse_pair(tk, KEY_BITS: tl.constexpr, KEY_MASK: tl.constexpr, SIGN: tl.constexpr,
                 LARGEST: tl.constexpr):  # fmt: skip
    """:func:`_coarse_value` of ``tk`` before and past the threshold's index, as the
    filter's int32 operands (16-bit types: in both halves). Computed when the
    threshold changes, not for every block."""
    at = _coarse_value(tk, tk != tk, KEY_MASK, SIGN, LARGEST)  # past: False
    past = _coarse_value(tk, tk == tk, KEY_MASK, SIGN, LARGEST)  # past: True
    if KEY_BITS == 16:
        at = at | (at << 16)
        past = past | (past << 16)
    return at.to(tl.int32, bitcast=True), past.to(tl.int32, bitcast=True)


@triton.jit
def _raw_key(
    raw,
    RAW16: tl.constexpr,
    KEY_MASK: tl.constexpr,
    SIGN: tl.constexpr,
    INF_BITS: tl.constexpr,
    LARGEST: tl.constexpr,
):
    """Selection keys of loaded raw bits (an int16 or int32 view of the values)."""
    if RAW16:
        raw = raw.to(tl.uint16, bitcast=True).to(tl.uint32)
    else:
        raw = raw.to(tl.uint32, bitcast=True)
    return _to_key(raw, KEY_MASK, SIGN, INF_BITS, LARGEST)


@triton.jit
def _window(begin_ptr, end_ptr, row, N, WINDOW: tl.constexpr):
    """Row ``row``'s window ``[lo, hi)``, clamped to ``[0, N]`` (an empty one if
    ``end < begin``). WINDOW: bit 0, a begin tensor is given (else 0); bit 1, an end
    tensor (else N)."""
    lo = row * 0
    hi = lo + N
    if WINDOW & 1:
        lo = tl.load(begin_ptr + row).to(tl.int32)
    if WINDOW & 2:
        hi = tl.load(end_ptr + row).to(tl.int32)
    lo = tl.minimum(tl.maximum(lo, 0), N)
    return lo, tl.maximum(tl.minimum(hi, N), lo)


@triton.jit
def _best_first(ck, ci, real):
    """The indices ``ci`` ordered by key ``ck`` descending, ties by lower index (entries
    not ``real`` go last): one descending sort of (key, ~index)."""
    _, ci = _best_first_keys(ck, ci, real)
    return ci


@triton.jit
def _best_first_keys(ck, ci, real):
    """:func:`_best_first`'s order of both the keys and the indices (keys 0 where not
    ``real``)."""
    comb = (ck.to(tl.uint64) << 32) | (0x7FFFFFFF - ci).to(tl.uint64)
    comb = tl.sort(tl.where(real, comb, 0), descending=True)
    ci = (0x7FFFFFFF - (comb & 0xFFFFFFFF).to(tl.int64)).to(tl.int32)
    return (comb >> 32).to(tl.uint32), ci


@triton.jit
def _values_of(x_row, ck, ci, real, KEY_BITS: tl.constexpr, KEY_MASK: tl.constexpr,
               SIGN: tl.constexpr, LARGEST: tl.constexpr, FROM_KEYS: tl.constexpr):  # fmt: skip
    """The raw bits of the selected values ``x_row[ci]`` (where ``real``). FROM_KEYS: from
    their keys ``ck``, which give every value's bits back but a zero's sign and a NaN's
    payload (:func:`_to_key` folds -0.0 into +0.0 and every NaN into one key); only
    those are read from the row, so the output waits on no gather from memory where
    the selection holds neither."""
    if FROM_KEYS:
        zero_key = SIGN if LARGEST else KEY_MASK - SIGN
        nan_key = KEY_MASK if LARGEST else 0
        odd = real & ((ck == zero_key) | (ck == nan_key))
        vals = tl.load(x_row + ci, mask=odd, other=0)
        bits = _key_to_raw(ck, KEY_MASK, SIGN, LARGEST)
        if KEY_BITS == 16:
            rebuilt = bits.to(tl.uint16).to(tl.int16, bitcast=True)
        else:
            rebuilt = bits.to(tl.int32, bitcast=True)
        vals = tl.where(odd, vals, rebuilt.to(vals.dtype))
    else:
        vals = tl.load(x_row + ci, mask=real, other=0)
    return vals


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


def _inf_bits(bits: int, fp16: bool) -> int:
    if bits == 32:
        return 0x7F800000
    return 0x7C00 if fp16 else 0x7F80


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


# ------------------------------------------------------------------ block filters
# The candidate buffer is split into NREG regions of CAP // NREG slots; the filter of
# warp w (PTX) or of the w-th eighth of a block (portable) appends to region w, so no
# block-wide scan places hits. A block adds at most B // NREG to a region.
NREG = tl.constexpr(8)
WALK = tl.constexpr(512)  # candidates a compaction's pass over the buffer reads at once
PROF_SLOTS = tl.constexpr(32)  # PROFILE: counters per program (benchmarks/profile_kernel.py)


@triton.jit
def _dealt(count, region):
    """How many of ``count`` candidates dealt round-robin over the NREG regions (as a
    compaction leaves its survivors) lie in region ``region``."""
    return (count - region + NREG - 1) // NREG


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


def _edge_word(c: int) -> int:
    """Word ``c`` (0..7) of a lane's share of a block, from the lane's first word: four
    consecutive words, then four more 1024 words on (the two 16-byte pieces)."""
    return (c // 4) * 1024 + c % 4


def _ptx_in_window(off: int, first: str, lo: str, hi: str) -> list[str]:
    """%p := word ``first + off`` lies in words [lo, hi) (needs ``.reg .b32 %w``)."""
    return [f"add.s32 %w, {first}, {off};", f"setp.ge.s32 %p, %w, {lo};",
            f"setp.lt.and.s32 %p, %w, {hi}, %p;"]  # fmt: skip


def load32_asm() -> str:
    """Eight words per thread (vector layout, :func:`_word_elem`): $8 the address of
    the thread's first word, $9 nonzero when the whole block lies in the window (two
    16-byte loads), else each word $10 + r (+ 1024) is loaded only inside words
    [$11, $12), 0 outside."""
    out = [
        "{",
        ".reg .pred %pf, %p;",
        ".reg .b32 %w;",
        "setp.ne.s32 %pf, $9, 0;",
        "@%pf ld.global.nc.v4.b32 {$0, $1, $2, $3}, [$8];",
        "@%pf ld.global.nc.v4.b32 {$4, $5, $6, $7}, [$8 + 4096];",
        "@%pf bra $$L32D${:uid};",
    ]
    for c in range(8):
        off = _edge_word(c)
        out += [f"mov.b32 ${c}, 0;", *_ptx_in_window(off, "$10", "$11", "$12")]
        out.append(f"@%p ld.global.nc.b32 ${c}, [$8 + {4 * off}];")
    out += ["$$L32D${:uid}:", "}"]
    return "\n".join(out)


LOAD32_ASM = tl.constexpr(load32_asm())


# RING > 0 (LaunchConfig.ring): each warp streams its share of the blocks through a
# ring of RING stages in static shared memory, filled by cp.async, in place of the two
# register-held word sets: RING - 1 blocks are in flight while one is filtered, at no
# register cost. A stage is a warp's 1 KiB of a block, each lane's two 16-byte pieces at
# its lane * 16 and 512 + lane * 16 (the vector layout's words, :func:`_word_elem`); a
# lane reads back only what its own copies wrote, so no barrier is needed, only its
# own cp.async.wait_group.
RING_STAGE_BYTES = tl.constexpr(1024)


def ring_bytes(stages: int, warps: int = 8) -> int:
    """Static shared memory a program's ring takes: ``stages`` stages for each warp."""
    return warps * stages * RING_STAGE_BYTES.value


def ring_base_asm(stages: int) -> str:
    """The ring's shared-memory address: :func:`ring_bytes` declared once per program
    (the asm runs once, before the row loop)."""
    size = ring_bytes(stages)
    return f"{{ .shared .align 128 .b8 deepselect_ring[{size}]; mov.u32 $0, deepselect_ring; }}"


def ring_read_asm(stages: int) -> str:
    """This lane's eight words of the stage at $8, once its copies are in: the ring's
    copies are committed one group a step (:func:`ring_issue_asm`), so all but the
    ``stages - 1`` newest groups being complete means this stage's are."""
    return (
        f"cp.async.wait_group {stages - 1}; "
        "ld.shared.v4.b32 {$0, $1, $2, $3}, [$8]; ld.shared.v4.b32 {$4, $5, $6, $7}, [$8+512];"
    )


def ring_issue_asm() -> str:
    """Copy this lane's share of a block into its stage at $1 and commit one group
    (empty if $8 == 0: nothing is left to load). $2 nonzero: the block lies wholly in
    the window, two 16-byte copies from $3 (the lane's first word) and $3 + 4096;
    else each word $4 + r (+ 1024) is copied only inside words [$5, $6) and zero
    filled outside (a 4-byte copy reading nothing, from the row's start $7)."""
    out = [
        "{",
        ".reg .pred %pf, %p;",
        ".reg .b32 %w, %n;",
        ".reg .b64 %g;",
        "setp.eq.s32 %p, $8, 0;",
        "@%p bra $$LRD${:uid};",
        "setp.ne.s32 %pf, $2, 0;",
        "@%pf cp.async.cg.shared.global [$1], [$3], 16;",
        "@%pf cp.async.cg.shared.global [$1+512], [$3+4096], 16;",
        "@%pf bra $$LRD${:uid};",
    ]
    for c in range(8):
        off = _edge_word(c)
        out += [
            *_ptx_in_window(off, "$4", "$5", "$6"),
            "selp.u32 %n, 4, 0, %p;",
            f"add.s64 %g, $3, {4 * off};",
            "selp.b64 %g, %g, $7, %p;",
            f"cp.async.ca.shared.global [$1+{(c // 4) * 512 + 4 * (c % 4)}], [%g], 4, %n;",
        ]
    out += ["$$LRD${:uid}:", "cp.async.commit_group;", "mov.b32 $0, 0;", "}"]
    return "\n".join(out)


RING_ISSUE_ASM = tl.constexpr(ring_issue_asm())

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


def raise_asm() -> str:
    """Offer the threshold key the warps may raise to (see HIST_BINS): $1 the
    histogram's packed address (HIST_PACK_ASM), $2 its base key, $3 k. Lane l holds
    bins 8l .. 8l + 7; a suffix sum over the lanes finds the last lane whose bins and
    those above reach k, that lane the last of its bins that does: that bin's first
    key goes to the spare sync word (word 3) if above what it holds; nothing where no
    bin start has k candidates at or above it. The counts only grow while the row
    streams, so a stale read gives a lower key, never a wrong one."""
    per = HIST_BINS.value // 32
    b = [f"%b{j}" for j in range(per)]
    out = [
        "{",
        f".reg .b32 %b<{per}>, %a, %s, %t, %u, %bal, %lane, %j, %acc, %sh;",
        ".reg .pred %p;",
        "mov.u32 %lane, %laneid;",
        f"and.b32 %a, $1, {HIST_ADDR_MASK};",
        f"mad.lo.u32 %a, %lane, {4 * per}, %a;",
    ]
    out += [
        f"ld.volatile.shared.v4.u32 {{{', '.join(b[q : q + 4])}}}, [%a+{4 * q}];"
        for q in range(0, per, 4)
    ]
    out += [f"add.u32 %s, {b[0]}, {b[1]};"] + [f"add.u32 %s, %s, {x};" for x in b[2:]]
    for d in (1, 2, 4, 8, 16):  # %s: this lane's bins and all above
        out += [f"shfl.sync.down.b32 %t|%p, %s, {d}, 31, 0xffffffff;", "@%p add.u32 %s, %s, %t;"]
    out += [
        "shfl.sync.down.b32 %u|%p, %s, 1, 31, 0xffffffff;",  # the bins above this lane's
        "@!%p mov.u32 %u, 0;",
        "setp.hs.u32 %p, %s, $3;",
        "vote.sync.ballot.b32 %bal, %p, 0xffffffff;",
        "mov.u32 %acc, %u;",
        "mov.u32 %j, 0;",
    ]
    for x in reversed(b):  # %j: how many of this lane's bin starts have k at or above
        out += [f"add.u32 %acc, %acc, {x};", "setp.hs.u32 %p, %acc, $3;", "@%p add.u32 %j, %j, 1;"]
    out += [
        f"mad.lo.u32 %j, %lane, {per}, %j;",
        "sub.u32 %j, %j, 1;",  # this lane's last bin reaching k (if it is the lane)
        "bfind.u32 %t, %bal;",  # the last lane reaching k
        "shfl.sync.idx.b32 %j, %j, %t, 31, 0xffffffff;",
        "bfe.u32 %sh, $1, 18, 5;",
        "shl.b32 %j, %j, %sh;",
        "add.u32 %j, %j, $2;",
        "setp.ne.u32 %p, %bal, 0;",
        "setp.eq.and.u32 %p, %lane, 0, %p;",
        "mov.b32 %a, global_smem;",
        "@%p red.shared.max.u32 [%a+12], %j;",
        "mov.b32 $0, 0;",
        "}",
    ]
    return "\n".join(out)


RAISE_ASM = tl.constexpr(raise_asm())
# POLL_ASM, with bit 2 set where the spare sync word $7 (an offered threshold key) is
# above this warp's $8
POLL_RAISE_ASM = tl.constexpr(
    "{ .reg .pred %p; .reg .b32 %a, %w; setp.gt.s32 %p, $1, $2; "
    "@%p st.volatile.shared.b32 [$6+8], 1; selp.b32 %w, 1, $5, %p; "
    "and.b32 %a, $3, $4; setp.eq.u32 %p, %a, 0x01010101; selp.b32 %a, 2, 0, %p; "
    "or.b32 %w, %a, %w; setp.hi.u32 %p, $7, $8; selp.b32 %a, 4, 0, %p; or.b32 $0, %a, %w; }"
)
# the spare sync word := 0 (no key offered): as a row starts, and after a compaction
# (whose reductions may have used it)
RAISE_CLEAR_ASM = tl.constexpr(
    "{ .reg .b32 %a; mov.b32 %a, global_smem; st.volatile.shared.b32 [%a+12], 0; mov.b32 $0, 0; }"
)
# W32: lane 0 of each warp stores $1 at word warp of shared bytes 16.. (free between
# the meetings); after a barrier, TK_MIN_ASM reads the least of the eight
TK_STORE_ASM = tl.constexpr(
    "{ .reg .pred %p; .reg .b32 %t, %l, %a; mov.u32 %t, %tid.x; and.b32 %l, %t, 31; "
    "setp.eq.u32 %p, %l, 0; shr.u32 %t, %t, 5; shl.b32 %t, %t, 2; add.u32 %a, %t, 16; "
    "mov.b32 %t, global_smem; add.u32 %a, %a, %t; @%p st.shared.b32 [%a], $1; "
    "mov.b32 $0, 0; }"
)
TK_MIN_ASM = tl.constexpr(
    "{ .reg .b32 %a<8>, %p; mov.b32 %p, global_smem; add.u32 %p, %p, 16; "
    "ld.shared.v4.b32 {%a0, %a1, %a2, %a3}, [%p]; ld.shared.v4.b32 {%a4, %a5, %a6, %a7}, [%p+16]; "
    "min.u32 %a0, %a0, %a1; min.u32 %a2, %a2, %a3; min.u32 %a4, %a4, %a5; "
    "min.u32 %a6, %a6, %a7; min.u32 %a0, %a0, %a2; min.u32 %a4, %a4, %a6; "
    "min.u32 $0, %a0, %a4; }"
)
# lane $2's value of $1 (every lane gets it)
LANE_PICK_ASM = tl.constexpr("shfl.sync.idx.b32 $0, $1, $2, 0x1f, 0xffffffff;")

# The warps' sync state in shared memory (Triton's own reductions use the same bytes
# only inside a compaction, between barriers, and it is rewritten after it): bytes
# 0..7 "warp w has filtered all its blocks" (0 or 1), word 2 "a compaction is
# wanted". One 16-byte load reads it all (SYNC_READ_ASM), issued when a step starts
# so that its latency passes under the filter; POLL_ASM then decides with it.
SYNC_READ_ASM = tl.constexpr("ld.volatile.shared.v4.b32 {$0, $1, $2, $3}, [$5];")
# the shared-memory address of those words, taken once per program: a symbol's
# address in a (non-pure) asm of the loop is computed again at every step
SMEM_BASE_ASM = tl.constexpr("mov.u32 $0, global_smem;")
# $0: bit 0 the wanted-flag (as read in $5, or raised here if $1 > $2: this warp's
# region is nearly full), bit 1 every warp done (the done bytes $3, $4 as read);
# $6 the words' address (SMEM_BASE_ASM).
POLL_ASM = tl.constexpr(
    "{ .reg .pred %p; .reg .b32 %a, %w; setp.gt.s32 %p, $1, $2; "
    "@%p st.volatile.shared.b32 [$6+8], 1; selp.b32 %w, 1, $5, %p; "
    "and.b32 %a, $3, $4; setp.eq.u32 %p, %a, 0x01010101; selp.b32 %a, 2, 0, %p; "
    "or.b32 $0, %a, %w; }"
)
# this warp's done byte := $1 (every lane stores the same); with $2, wanted := 0
SET_SYNC_ASM = tl.constexpr(
    "{ .reg .b32 %t, %a; .reg .pred %p; mov.u32 %t, %tid.x; shr.u32 %t, %t, 5; "
    "mov.b32 %a, global_smem; add.u32 %a, %a, %t; "
    "st.volatile.shared.u8 [%a], $1; setp.ne.s32 %p, $2, 0; "
    "@%p st.volatile.shared.b32 [global_smem+8], 0; mov.b32 $0, 0; }"
)
# a done warp waits a little before polling again (the working warps issue meanwhile)
NAP_ASM = tl.constexpr("{ nanosleep.u32 64; mov.b32 $0, 0; }")


@triton.jit
def _smem_base(dep32):
    """The shared-memory address of the sync words (see SMEM_BASE_ASM)."""
    return tl.inline_asm_elementwise(
        SMEM_BASE_ASM, "=r,r", [dep32], dtype=tl.int32, is_pure=True, pack=1
    )


@triton.jit
def _sync_read(dep32, sb32):
    """The sync state as it is now (see SYNC_READ_ASM; ``sb32`` from
    :func:`_smem_base`): done bytes, wanted, spare."""
    return tl.inline_asm_elementwise(
        SYNC_READ_ASM, "=r,=r,=r,=r,r,r", [dep32, sb32],
        dtype=(tl.int32,) * 4, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def _poll(wcnt32, limit, d0, d1, wanted, sb32):
    """Warp-uniform sync state from a :func:`_sync_read` (see POLL_ASM): bit 0 a
    compaction is wanted (raised here if this warp's count exceeds ``limit``), bit 1
    every warp is done."""
    st = tl.inline_asm_elementwise(
        POLL_ASM, "=r,r,r,r,r,r,r", [wcnt32, wcnt32 * 0 + limit, d0, d1, wanted, sb32],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip
    return tl.max(st, axis=0)


@triton.jit
def _set_sync(done32, clear):
    """This warp's done byte := ``done32`` (the same in every lane); if ``clear``, the
    wanted-flag := 0."""
    return tl.inline_asm_elementwise(
        SET_SYNC_ASM, "=r,r,r", [done32, done32 * 0 + clear],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def _nap(dep32):
    return tl.inline_asm_elementwise(
        NAP_ASM, "=r,r", [dep32], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip


# lane 0 of each warp stores $1 (its warp's count) at $2 + 4 * warp
PUBLISH_ASM = tl.constexpr(
    "{ .reg .pred %p; .reg .b32 %t, %l; .reg .b64 %o, %a; mov.u32 %t, %tid.x; "
    "and.b32 %l, %t, 31; setp.eq.u32 %p, %l, 0; shr.u32 %t, %t, 5; "
    "mul.wide.u32 %o, %t, 4; add.s64 %a, $2, %o; @%p st.global.b32 [%a], $1; "
    "mov.b32 $0, 0; }"
)


@triton.jit
def _load32(xw_row, j, first, woff32, lo, hi, nblk, live, B: tl.constexpr, KEY_BITS: tl.constexpr):
    """Block ``j`` of the row's ``nblk`` (from block ``first``): its 8 words per thread
    into warp-private tensors (see :func:`load32_asm`); nothing if not live. The
    middle blocks ``1 .. nblk - 2`` lie wholly in the window [lo, hi) (block 0 holds
    ``lo``, block ``nblk - 1`` the element before ``hi``) and take the 16-byte loads;
    the two ends test each word."""
    PER_WORD: tl.constexpr = 32 // KEY_BITS
    wstart = (j + first) * (B // PER_WORD)
    full = (live & (j > 0) & (j < nblk - 1)).to(tl.int32)
    wlo = tl.where(live, lo // PER_WORD, 0x7FFFFFFF)
    whi = (hi + PER_WORD - 1) // PER_WORD
    wfirst = wstart + woff32  # this lane's first word
    zero = woff32 * 0
    return tl.inline_asm_elementwise(
        LOAD32_ASM, "=r,=r,=r,=r,=r,=r,=r,=r,l,r,r,r,r",
        [xw_row + wfirst, zero + full, wfirst, zero + wlo, zero + whi],
        dtype=(tl.int32,) * 8, is_pure=True, pack=1,
    )  # fmt: skip


@triton.jit
def _asm_once(dep32, ASM: tl.constexpr):
    """Run ``ASM`` (one int32 result, one operand: ``dep32``, what it waits for), never
    merged with another run nor dropped: the ring's and the histogram's addresses
    (:func:`ring_base_asm`, HIST_BASE_ASM), the offered key cleared (RAISE_CLEAR_ASM)."""
    return tl.inline_asm_elementwise(
        ASM, "=r,r", [dep32], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip


@triton.jit
def _ring_read(slot32, RING_READ: tl.constexpr):
    """This lane's eight words of the stage at ``slot32`` (see :func:`ring_read_asm`)."""
    return tl.inline_asm_elementwise(
        RING_READ, "=r,=r,=r,=r,=r,=r,=r,=r,r", [slot32],
        dtype=(tl.int32,) * 8, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def _ring_issue(slot32, xw_row, j, first, woff32, lo, hi, nblk, live, B: tl.constexpr,
                KEY_BITS: tl.constexpr, MIDDLE: tl.constexpr = False):  # fmt: skip
    """Block ``j`` (of the row's ``nblk``, from block ``first``) into this warp's stage
    at ``slot32`` by cp.async, one group committed (see :func:`ring_issue_asm`); the
    middle blocks whole, the two ends word by word as :func:`_load32` reads them.
    MIDDLE: ``j`` is known to be a middle block (no test)."""
    PER_WORD: tl.constexpr = 32 // KEY_BITS
    wstart = (j + first) * (B // PER_WORD)
    if MIDDLE:
        full = live.to(tl.int32)
    else:
        full = (live & (j > 0) & (j < nblk - 1)).to(tl.int32)
    wfirst = wstart + woff32
    zero = woff32 * 0
    return tl.inline_asm_elementwise(
        RING_ISSUE_ASM, "=r,r,r,l,r,r,r,l,r",
        [slot32, zero + full, xw_row + wfirst, wfirst, zero + lo // PER_WORD,
         zero + (hi + PER_WORD - 1) // PER_WORD, xw_row + zero, zero + live.to(tl.int32)],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def _lane_pick(v32, lane):
    """Lane ``lane``'s element of the warp-private ``v32``, in every lane."""
    return tl.inline_asm_elementwise(
        LANE_PICK_ASM, "=r,r,r", [v32, v32 * 0 + lane], dtype=tl.int32, is_pure=True, pack=1
    )  # fmt: skip


@triton.jit
def _hist_start(hist32, tid32, base, hi_key, RAISE: tl.constexpr):
    """A row's histogram (see HIST_BINS): this thread's word of it zeroed (every
    thread's, with a barrier after, before any warp counts), and its address packed
    with the bin width that fits keys ``base`` .. ``hi_key`` (uint32) into its bins and
    the blocks until this warp's turn to offer (its turn ``warp * RAISE`` of every
    ``8 * RAISE``)."""
    tl.inline_asm_elementwise(
        HIST_ZERO_ASM, "=r,r", [hist32 + tid32 * 4], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip
    rng = (hi_key - base).to(tl.int32, bitcast=True)
    packed = tl.inline_asm_elementwise(
        HIST_PACK_ASM, "=r,r,r", [hist32, hist32 * 0 + rng], dtype=tl.int32, is_pure=True, pack=1
    )  # fmt: skip
    packed = packed | ((((8 - tid32 // 32) % 8) * RAISE) << 23)
    return tl.max(packed, axis=0)  # the same in every lane


@triton.jit
def _raise_offer(hreg, hbase, k, dep32):
    """Offer the key the warps' thresholds may rise to (see :func:`raise_asm`);
    ``dep32`` any warp-private [32] value."""
    z = dep32 * 0
    tl.inline_asm_elementwise(
        RAISE_ASM, "=r,r,r,r", [z + hreg, z + hbase.to(tl.int32, bitcast=True), z + k],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def _poll_raise(wcnt32, limit, d0, d1, wanted, sb32, d3, tk):
    """:func:`_poll`, with bit 2 set where the offered key ``d3`` (the sync read's
    spare word) is above this warp's threshold key ``tk`` (see POLL_RAISE_ASM)."""
    st = tl.inline_asm_elementwise(
        POLL_RAISE_ASM, "=r,r,r,r,r,r,r,r,r",
        [wcnt32, wcnt32 * 0 + limit, d0, d1, wanted, sb32, d3,
         wcnt32 * 0 + tk.to(tl.int32, bitcast=True)],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip
    return tl.max(st, axis=0)


@triton.jit
def _tk_least(tk, dep32):
    """The least of the warps' threshold keys ``tk`` (a barrier between their stores
    and the reads; W32, at a meeting)."""
    tl.inline_asm_elementwise(
        TK_STORE_ASM, "=r,r", [dep32 + tk.to(tl.int32, bitcast=True)],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip
    tl.debug_barrier()
    least = tl.inline_asm_elementwise(
        TK_MIN_ASM, "=r,r", [dep32], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip
    return tl.max(least, axis=0).to(tl.uint32, bitcast=True)


# the trigger's slots: 2 x 8 words of shared memory from byte 16 (past the w32 sync
# words; Triton's own reductions use these bytes only between barriers elsewhere).
# Lane 0 of each warp stores $1 to slot $2 (0 or 1), word warp; the block-sync
# loop has no Triton shared-memory use between this store and the reads after the
# barrier
TRIG_STORE_ASM = tl.constexpr(
    "{ .reg .pred %p; .reg .b32 %t, %l, %a; mov.u32 %t, %tid.x; and.b32 %l, %t, 31; "
    "setp.eq.u32 %p, %l, 0; shr.u32 %t, %t, 5; shl.b32 %a, $2, 5; add.u32 %a, %a, 16; "
    "shl.b32 %t, %t, 2; add.u32 %a, %a, %t; mov.b32 %t, global_smem; add.u32 %a, %a, %t; "
    "@%p st.shared.b32 [%a], $1; mov.b32 $0, 0; }"
)
# every lane: the sum of slot $1's 8 words
TRIG_SUM_ASM = tl.constexpr(
    "{ .reg .b32 %a<8>, %p; shl.b32 %p, $1, 5; add.u32 %p, %p, 16; mov.b32 %a0, global_smem; "
    "add.u32 %p, %p, %a0; ld.shared.v4.b32 {%a0, %a1, %a2, %a3}, [%p]; "
    "ld.shared.v4.b32 {%a4, %a5, %a6, %a7}, [%p+16]; add.s32 %a0, %a0, %a1; "
    "add.s32 %a2, %a2, %a3; add.s32 %a4, %a4, %a5; add.s32 %a6, %a6, %a7; "
    "add.s32 %a0, %a0, %a2; add.s32 %a4, %a4, %a6; add.s32 $0, %a0, %a4; }"
)


@triton.jit
def _trigger_sum(val, parity):
    """The block-wide sum of ``val`` ([256]: each warp's count, the same in every
    lane) as a scalar, with one barrier: each warp's lane 0 stores it to slot
    ``parity`` in shared memory, and after the barrier every lane adds the 8 words
    itself (a [32]-shaped value, reduced within the warp), so no second barrier."""
    tl.inline_asm_elementwise(
        TRIG_STORE_ASM, "=r,r,r", [val, val * 0 + parity], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip
    tl.debug_barrier()
    z32 = tl.zeros([32], tl.int32)
    s = tl.inline_asm_elementwise(
        TRIG_SUM_ASM, "=r,r", [z32 + parity], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip
    return tl.max(s, axis=0)


# A histogram in shared memory. Triton 3.6 lowers tl.histogram to warp votes, one per
# bin bit and key, then a popcount per 32 bins: ~80 instructions a key for 256 bins
# at 16 keys a thread (SASS, sm_90). Here each key adds one to its bin's word with a
# shared-memory atomic. The bins are the first NB words of the kernel's shared
# memory: nothing else of the kernel uses it between the barriers of
# _smem_histogram, and the allocation Triton makes for its own operations must
# cover NB words (see there; a compile test checks it). Word $1 := 0:
SMEM_ZERO_ASM = tl.constexpr(
    "{ .reg .b32 %a, %b; shl.b32 %a, $1, 2; mov.b32 %b, global_smem; add.u32 %a, %a, %b; "
    "st.shared.b32 [%a], 0; mov.b32 $0, 0; }"
)
# word $1 += 1 where $2 != 0 (the comment marks it in the PTX: SMEM_HIST_MARK)
SMEM_HIST_MARK = "deepselect-smem-histogram"
SMEM_ADD_ASM = tl.constexpr(
    "{ /* " + SMEM_HIST_MARK + " */ .reg .pred %p; .reg .b32 %a, %b; setp.ne.s32 %p, $2, 0; "
    "shl.b32 %a, $1, 2; "
    "mov.b32 %b, global_smem; add.u32 %a, %a, %b; @%p red.shared.add.u32 [%a], 1; "
    "mov.b32 $0, 0; }"
)
# $0 := word $1
SMEM_LOAD_ASM = tl.constexpr(
    "{ .reg .b32 %a, %b; shl.b32 %a, $1, 2; mov.b32 %b, global_smem; add.u32 %a, %a, %b; "
    "ld.shared.b32 $0, [%a]; }"
)


@triton.jit
def _smem_bins_zero(NB: tl.constexpr):
    """Start a histogram in shared memory (:func:`_smem_histogram`): its ``NB`` words
    := 0, between barriers (Triton's earlier uses of the bytes are over)."""
    j = tl.arange(0, NB)
    tl.debug_barrier()
    tl.inline_asm_elementwise(
        SMEM_ZERO_ASM, "=r,r", [j], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip
    tl.debug_barrier()


@triton.jit
def _smem_bins_add(bins, mask):
    """Add one to the word of each element's bin where ``mask``: after
    :func:`_smem_bins_zero`, any number of times, with no other use of shared memory
    in between; ``bins`` at least as long as the program's threads."""
    tl.inline_asm_elementwise(
        SMEM_ADD_ASM, "=r,r,r", [bins, mask.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip


@triton.jit
def _smem_bins_read(NB: tl.constexpr):
    """The histogram's ``NB`` counts (a barrier after the adds, one after the read);
    and the reservation that makes Triton allocate the words."""
    j = tl.arange(0, NB)
    tl.debug_barrier()
    h = tl.inline_asm_elementwise(
        SMEM_LOAD_ASM, "=r,r", [j], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip
    tl.debug_barrier()  # every thread has read the bins before Triton uses the bytes
    # Triton sizes the kernel's shared memory by its own operations only: a
    # tl.histogram of NB bins, which takes NB words, under a condition it cannot
    # decide (an opaque zero from PTX) reserves them; ptxas then drops the branch
    zero = tl.inline_asm_elementwise(
        "mov.b32 $0, 0;", "=r,r", [tl.full((), 0, tl.int32)], dtype=tl.int32, is_pure=True,
        pack=1,
    )  # fmt: skip
    if zero != 0:
        h += tl.histogram(j, NB)
    return h


@triton.jit
def _smem_histogram(bins, mask, NB: tl.constexpr):
    """``tl.histogram(bins, NB, mask=mask)`` (``bins`` int32 in [0, NB), ``mask`` the
    elements that count) by shared-memory atomics; GPU only (inline PTX). Every
    thread of the program takes part: a call is block-wide, between barriers.
    ``bins`` must have at least as many elements as the program has threads (see
    :func:`_histogram`, which callers take)."""
    _smem_bins_zero(NB)
    _smem_bins_add(bins, mask)
    return _smem_bins_read(NB)


@triton.jit
def _histogram(bins, mask, NB: tl.constexpr, SMEM: tl.constexpr, NT: tl.constexpr):
    """``tl.histogram(bins, NB, mask=mask)`` (``mask`` None: every element counts),
    by shared-memory atomics (:func:`_smem_histogram`) where ``SMEM`` asks for them
    and ``bins`` has at least as many elements as the program's ``NT`` threads: a
    shorter tensor is held by several threads at once, and each copy would add its
    key again."""
    if SMEM and bins.shape[0] >= NT:
        if mask is None:
            h = _smem_histogram(bins, bins >= 0, NB)
        else:
            h = _smem_histogram(bins, mask, NB)
    elif mask is None:
        h = tl.histogram(bins, NB)
    else:
        h = tl.histogram(bins, NB, mask=mask)
    return h


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


@triton.jit
def _first_kk(seen, k, sample_n, ti, SAMPLE_Z: tl.constexpr):
    """How many candidates a compaction keeps: k, or, when ``sample_n > 0`` (the row's
    length) and the threshold is not yet set (index ``ti`` still the initial one), the
    rank of :func:`reference.sample_rank` among the ``seen`` candidates, a sample of
    the row (where that is lower than k)."""
    lam = seen.to(tl.float64) * k / tl.maximum(sample_n, 1).to(tl.float64)
    # clamped before the conversion (no overflow for any margin; the same rank)
    x = tl.minimum(tl.maximum(lam + SAMPLE_Z * tl.sqrt(lam), -SAMPLE_PAD - 1.0), k * 1.0)
    r = tl.maximum(x.to(tl.int32) + SAMPLE_PAD, 1)
    return tl.where((sample_n > 0) & (ti == 0x7FFFFFFF) & (r < k), r, k)


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


@triton.jit
def _out_index(pos, real, row, off, page_ptr, page_stride, max_pages, n_batch, r2b_ptr,
               PAGED: tl.constexpr, PAGE_SHIFT: tl.constexpr, HAS_R2B: tl.constexpr):  # fmt: skip
    """The index written for row position ``pos`` (int32, valid where ``real``): ``pos +
    off``, or, PAGED, the physical slot ``page[b, pos >> s] << s | pos & (2^s - 1)`` of
    the row's sequence ``b`` (``r2b_ptr[row]``, or the row itself). Out-of-table
    positions and sequences are clamped, never read past the table."""
    if PAGED:
        if HAS_R2B:
            b = tl.load(r2b_ptr + row).to(tl.int64)
        else:
            b = row.to(tl.int64)
        b = tl.minimum(tl.maximum(b, 0), n_batch - 1)  # the table is never empty
        pc = tl.minimum(pos >> PAGE_SHIFT, max_pages - 1).to(tl.int64)
        phys = tl.load(page_ptr + b * page_stride + pc, mask=real, other=0).to(tl.int64)
        return (phys << PAGE_SHIFT) + (pos & ((1 << PAGE_SHIFT) - 1)).to(tl.int64)
    else:
        return pos.to(tl.int64) + off


@triton.jit
def _store_index(ptr, val, mask):
    """Indices into an int32 or int64 output (cast to the buffer's element type: the
    pointer's type already makes the two buffers two kernel specialisations)."""
    tl.store(ptr, val.to(ptr.dtype.element_ty), mask=mask)


NO_STRIDE = tl.constexpr(reference.NO_STRIDE)


@triton.jit
def _largest_quotient(m, a):
    """The largest partial quotient of ``m / a``; NO_STRIDE if ``a`` is outside
    ``[1, m)`` or not coprime with ``m`` (:func:`deepselect.reference.block_stride`)."""
    valid = (a >= 1) & (a < m)
    x = m
    y = tl.where(valid, a, 0)
    q = m * 0
    while y != 0:
        q = tl.maximum(q, x // y)
        r = x % y
        x = y
        y = r
    return tl.where(valid & (x == 1), q, NO_STRIDE)


@triton.jit
def _block_stride(m, SPAN: tl.constexpr, GOOD: tl.constexpr):
    """The block order's multiplier for ``m`` blocks, as
    :func:`deepselect.reference.block_stride` defines it."""
    a0 = ((m.to(tl.int64) * 0x61C88647) >> 32).to(tl.int32)  # m / phi^2
    best_a = m * 0 + 1
    best_q = m * 0 + NO_STRIDE
    d = m * 0
    while (d < SPAN) & (best_q > GOOD):
        q = _largest_quotient(m, a0 + d)
        best_a = tl.where(q < best_q, a0 + d, best_a)
        best_q = tl.minimum(q, best_q)
        q = _largest_quotient(m, a0 - d)
        best_a = tl.where(q < best_q, a0 - d, best_a)
        best_q = tl.minimum(q, best_q)
        d += 1
    return tl.where(m > 1, best_a, 0)


@triton.jit
def _clock(dep):
    """The SM's cycle counter, read once ``dep`` is computed (profiling builds only)."""
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %clock64;", "=l,r", [dep], dtype=tl.int64, is_pure=False, pack=1
    )


@triton.jit
def _lap(q, dep, slot):
    """Profiling: the cycles since ``q`` (a :func:`_clock` read), once ``dep`` is
    computed, added to the counter at ``slot``; returns the new reading."""
    q1 = _clock(dep)
    tl.atomic_add(slot, q1 - q)
    return q1


@triton.jit
def _clock32(dep):
    """The SM's 32-bit cycle counter, read once ``dep`` is computed (profiling)."""
    return tl.inline_asm_elementwise(
        "mov.u32 $0, %clock;", "=r,r", [dep], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _next_mid(j, a, mm):
    """The middle block after ``j`` in the order ``1 + (a * t + c) mod mm`` of the
    blocks ``1 .. mm`` (``0 <= a < mm``; see ``reference.block_at``)."""
    j = j + a
    return tl.where(j > mm, j - mm, j)


@triton.jit
def _block_at(q, m, a, c, p):
    """Block ``q`` of a row's ``m`` (:func:`reference.block_at` with the ends at
    ``p``; ``c < mm = max(m - 2, 1)``, ``a < mm``)."""
    mm = tl.maximum(m - 2, 1)
    t = tl.where(q < p, q, q - 2)
    mid = 1 + ((a.to(tl.int64) * t + c) % mm).to(tl.int32)
    return tl.where(q == p, m - 1, tl.where(q == p + 1, 0, mid))


@triton.jit
def _next_block(j, j3, q, a, mm, nblk, p):
    """Block ``q`` of the order (:func:`_block_at` with the ends at ``p``) from blocks
    ``q - 1`` (``j``) and ``q - 3`` (``j3``; ``q >= 3``): the middle block after ``j``,
    or at ``p`` and ``p + 1`` the ends, at ``p + 2`` the middle block after ``j3``."""
    d = q - p
    nxt = _next_mid(tl.where(d == 2, j3, j), a, mm)
    return tl.where(d == 0, nblk - 1, tl.where(d == 1, 0, nxt))


@triton.jit
def _warp_step(
    w0, w1, w2, w3, w4, w5, w6, w7, xw_row, ja, jl, a, mm, p, first, lo, hi, i, nblk,
    wc32, woff32, warp32, tk, ti, tva, tvp, count, cur, scr_k, scr_i, cnt_ptr, k, B2,
    acc, sample_n, sb32, KEY_BITS: tl.constexpr, KEY_MASK: tl.constexpr, SIGN: tl.constexpr,
    LARGEST: tl.constexpr, FILTER: tl.constexpr, B: tl.constexpr, CAP: tl.constexpr,
    PROFILE: tl.constexpr, SAMPLE_Z: tl.constexpr,
):  # fmt: skip
    """One step of an independently streaming warp (W32): filter block ``ja`` from the
    words ``w*`` and reload them with block ``jl`` (two blocks ahead; ``ja`` becomes
    ``jl``, which advances in the order of :func:`_next_block`), or, when this warp
    is done, nap; then poll, and meet the others if a compaction is wanted or all are
    done. PROFILE: ``acc`` ([32], this warp's) accumulates
    in lanes 0..4 the cycles of the filter (compare and hit path) and of the
    meetings, the meetings, the hits and the blocks with hits (see :func:`_acc`).
    ``tva``/``tvp``: the filter's compare values (:func:`_coarse_pair`), renewed with
    the threshold. Returns the words, cursors, progress, stream state and ``acc``."""
    # the other warps' state, read before the filter: a warp sees a wanted-flag one
    # step later than a read after it would, and its own region still has room for
    # that step (each warp checks its own count after every block)
    d0, d1, wanted, _ = _sync_read(wc32, sb32)
    if i < nblk:
        wc32, acc = _warp_filter(
            w0, w1, w2, w3, w4, w5, w6, w7, ja, first, woff32, warp32, lo, hi, tk, ti, tva, tvp,
            wc32, scr_k, scr_i, cur, acc, KEY_BITS, FILTER, B, CAP, PROFILE,
        )  # fmt: skip
        w0, w1, w2, w3, w4, w5, w6, w7 = _load32(
            xw_row, jl, first, woff32, lo, hi, nblk, i + 2 < nblk, B, KEY_BITS
        )
        jn = _next_block(jl, ja, i + 3, a, mm, nblk, p)
        ja = jl  # the block this word set now holds
        jl = jn
    i, wc32, tk, ti, tva, tvp, count, cur, fin, acc = _step_end(
        i, nblk, wc32, d0, d1, wanted, sb32, warp32, tk, ti, tva, tvp, count, cur, scr_k, scr_i,
        cnt_ptr, k, B2, acc, sample_n, KEY_BITS, KEY_MASK, SIGN, LARGEST, B, CAP, PROFILE,
        SAMPLE_Z,
    )  # fmt: skip
    return w0, w1, w2, w3, w4, w5, w6, w7, ja, jl, i, wc32, tk, ti, tva, tvp, count, cur, fin, acc


@triton.jit
def _warp_filter(
    w0, w1, w2, w3, w4, w5, w6, w7, ja, first, woff32, warp32, lo, hi, tk, ti, tva, tvp,
    wc32, scr_k, scr_i, cur, acc, KEY_BITS: tl.constexpr, FILTER: tl.constexpr,
    B: tl.constexpr, CAP: tl.constexpr, PROFILE: tl.constexpr, hreg=0, hbase=0,
    HIST: tl.constexpr = False,
):  # fmt: skip
    """A warp's filter of its words of block ``ja`` (W32): the hits appended to its
    region of half ``cur``. Returns its count and the profile counters (PROFILE)."""
    S: tl.constexpr = CAP // NREG
    PER_WORD: tl.constexpr = 32 // KEY_BITS
    if PROFILE:
        t0 = _clock32(w7)
        before = wc32
    wc32 = _filter_words(
        w0, w1, w2, w3, w4, w5, w6, w7, (ja + first) * B + woff32 * PER_WORD, lo, hi,
        tk, ti, tva, tvp, wc32, scr_k + cur + warp32 * S, scr_i + cur + warp32 * S, FILTER,
        hreg, hbase, HIST,
    )  # fmt: skip
    if PROFILE:
        new = wc32 - before
        acc = _acc(acc, _clock32(wc32) - t0, 0, 0, new, (new > 0).to(tl.int32))
    return wc32, acc


@triton.jit
def _step_end(
    i, nblk, wc32, d0, d1, wanted, sb32, warp32, tk, ti, tva, tvp, count, cur, scr_k, scr_i,
    cnt_ptr, k, B2, acc, sample_n, KEY_BITS: tl.constexpr, KEY_MASK: tl.constexpr,
    SIGN: tl.constexpr, LARGEST: tl.constexpr, B: tl.constexpr, CAP: tl.constexpr,
    PROFILE: tl.constexpr, SAMPLE_Z: tl.constexpr, RAISE: tl.constexpr = 0, d3=0,
):  # fmt: skip
    """The end of a warp's step (W32): one block more filtered (``i < nblk``: the step
    filtered one; this warp's done byte set after its last), or a nap if this warp was
    done; then poll the sync state read as the step began (``d0``, ``d1``,
    ``wanted``), and meet the others if a compaction is wanted or all are done.
    Returns the blocks filtered, this warp's count, the threshold and its compare
    values, the buffer's count and half, whether the row is done, and the profile
    counters."""
    S: tl.constexpr = CAP // NREG
    LIMIT: tl.constexpr = S - B // NREG  # a region this full takes no more
    fin = i * 0
    if i < nblk:
        i += 1
        if i == nblk:
            _set_sync(wc32 * 0 + 1, 0)
    else:
        _nap(wc32)
    if RAISE > 0:  # the threshold key offered (d3, see HIST_BINS) if above this warp's
        st = _poll_raise(wc32, LIMIT, d0, d1, wanted, sb32, d3, tk)
        go = st & 3
        if st == 4:
            tk = tl.max(d3, axis=0).to(tl.uint32, bitcast=True)
            ti = k * 0 + 0x7FFFFFFF
            tva, tvp = _coarse_pair(tk, KEY_BITS, KEY_MASK, SIGN, LARGEST)
    else:
        go = _poll(wc32, LIMIT, d0, d1, wanted, sb32)
    if go != 0:  # a compaction is wanted, or all done
        if PROFILE:
            t0 = _clock32(wc32)
        tk, ti, count, cur, fin = _meet(
            scr_k, scr_i, cnt_ptr, cur, tl.max(wc32, axis=0), (i >= nblk).to(tl.int32),
            k, B2, tk, ti, sample_n, KEY_BITS, CAP, SAMPLE_Z, RAISE,
        )  # fmt: skip
        wc32 = _dealt(count, warp32)
        tva, tvp = _coarse_pair(tk, KEY_BITS, KEY_MASK, SIGN, LARGEST)
        if PROFILE:
            acc = _acc(acc, 0, _clock32(wc32) - t0, 1, 0, 0)
    return i, wc32, tk, ti, tva, tvp, count, cur, fin, acc


@triton.jit
def _ring_step(
    slot0, jq, j1, j2, j3, xw_row, a, mm, p, first, lo, hi, i, nblk, wc32, woff32, warp32,
    lane32, tk, ti, tva, tvp, count, cur, scr_k, scr_i, cnt_ptr, k, B2, acc, sample_n,
    sb32, KEY_BITS: tl.constexpr, KEY_MASK: tl.constexpr, SIGN: tl.constexpr,
    LARGEST: tl.constexpr, FILTER: tl.constexpr, B: tl.constexpr, CAP: tl.constexpr,
    PROFILE: tl.constexpr, SAMPLE_Z: tl.constexpr, RING: tl.constexpr,
    RING_READ: tl.constexpr, hreg=0, hbase=0,
    RAISE: tl.constexpr = 0, ENDS_FIRST: tl.constexpr = False,
):  # fmt: skip
    """One step of an independently streaming warp through its ring (RING > 0, see
    :func:`ring_base_asm`): filter block ``i`` of the order from its stage ``i mod
    RING`` (the stage's block in lane ``i mod RING`` of ``jq``), then copy block ``i +
    RING`` into that stage (``j1``, ``j3``: blocks ``i + RING - 1`` and ``- 3`` of the
    order, :func:`_next_block`; ENDS_FIRST: the row's ends are blocks 0 and 1 of the
    order (``p = 0``), so every block the loop copies, ``i + RING >= 3``, is the middle
    block after ``j1``).
    RAISE > 0: the hits counted in the histogram ``hreg`` (from key ``hbase``), this
    warp's offer of a key every 8 * RAISE blocks (at its turn) and the offered key
    taken (see HIST_BINS).
    Then poll and meet as :func:`_warp_step` does."""
    d0, d1, wanted, d3 = _sync_read(wc32, sb32)
    if i < nblk:
        if (RING & (RING - 1)) == 0:  # (a mask: a signed modulo takes four instructions)
            st = i & (RING - 1)
        else:
            st = i % RING
        slot = slot0 + st * RING_STAGE_BYTES
        w0, w1, w2, w3, w4, w5, w6, w7 = _ring_read(slot, RING_READ)
        ja = _lane_pick(jq, st)
        wc32, acc = _warp_filter(
            w0, w1, w2, w3, w4, w5, w6, w7, ja, first, woff32, warp32, lo, hi, tk, ti, tva, tvp,
            wc32, scr_k, scr_i, cur, acc, KEY_BITS, FILTER, B, CAP, PROFILE, hreg, hbase,
            RAISE > 0,
        )  # fmt: skip
        q = i + RING
        if ENDS_FIRST:
            jn = _next_mid(j1, a, mm)
        else:
            jn = _next_block(j1, j3, q, a, mm, nblk, p)
        _ring_issue(
            slot, xw_row, jn, first, woff32, lo, hi, nblk, q < nblk, B, KEY_BITS, ENDS_FIRST
        )
        jq = tl.where(lane32 == st, jn, jq)
        j3 = j2
        j2 = j1
        j1 = jn
        if RAISE > 0:  # this warp's turn to offer a key
            due = i + (hreg.to(tl.uint32, bitcast=True) >> 23).to(tl.int32)
            if (due & (8 * RAISE - 1)) == 0:
                _raise_offer(hreg, hbase, k, wc32)
    i, wc32, tk, ti, tva, tvp, count, cur, fin, acc = _step_end(
        i, nblk, wc32, d0, d1, wanted, sb32, warp32, tk, ti, tva, tvp, count, cur, scr_k, scr_i,
        cnt_ptr, k, B2, acc, sample_n, KEY_BITS, KEY_MASK, SIGN, LARGEST, B, CAP, PROFILE,
        SAMPLE_Z, RAISE, d3,
    )  # fmt: skip
    return jq, j1, j2, j3, i, wc32, tk, ti, tva, tvp, count, cur, fin, acc


@triton.jit
def _acc(acc, filt, meet, meets, hits, hit_blocks):
    """Profiling: add to the per-warp counters ``acc`` ([32] int32, lanes 0..4;
    cycle counts wrap after 2^31, ~1 s)."""
    lane = tl.arange(0, 32)
    acc += tl.where(lane == 0, filt, 0) + tl.where(lane == 1, meet, 0)
    acc += tl.where(lane == 2, meets, 0) + tl.where(lane == 3, hits, 0)
    return acc + tl.where(lane == 4, hit_blocks, 0)


# ---------------------------------------------------------------------- the kernel
@triton.jit
def _publish_and_compact(
    wcnt, rc, count, cur, kk, slack, tk, scr_k, scr_i, cnt_ptr,
    USE_ASM: tl.constexpr, KEY_BITS: tl.constexpr, CAP: tl.constexpr, prof,
    PROFILE: tl.constexpr,
):  # fmt: skip
    """Publish the regions' counts (each warp's, or the portable path's ``rc``) and
    compact half ``cur`` into the other (see :func:`_compact`)."""
    t = tl.arange(0, 256)
    if USE_ASM:
        tl.store(cnt_ptr + t // 32, wcnt, mask=(t % 32) == 0)
    else:
        tl.store(cnt_ptr + tl.arange(0, NREG), rc)
    # the appends and counts are stores of other warps: order them first
    tl.debug_barrier()
    return _compact(
        scr_k + cur, scr_i + cur, scr_k + (CAP - cur), scr_i + (CAP - cur),
        cnt_ptr, count, kk, slack, tk, KEY_BITS, USE_ASM, CAP, prof, PROFILE,
    )  # fmt: skip


@triton.jit
def _check(
    wcnt, rc, tk, ti, count, cur, scr_k, scr_i, cnt_ptr, k, B2, sample_n, burst_at,
    parity, prof, USE_ASM: tl.constexpr, KEY_BITS: tl.constexpr, B: tl.constexpr,
    CAP: tl.constexpr, CHECK_EVERY: tl.constexpr, PROFILE: tl.constexpr,
    SAMPLE_Z: tl.constexpr,
):  # fmt: skip
    """The compaction trigger: one block-wide sum of the regions' counts (a region that
    could overflow within the next CHECK_EVERY blocks counts as full), then, when
    due, a compaction from half ``cur`` into the other: when the buffer reaches
    ``k + B2`` or a region could overflow, or when this check's new candidates number
    ``burst_at`` or more and the buffer more than k (a threshold far below the row's
    k-th: one block of an ascending row past the sample, all of it hits). Returns the
    threshold, the count, the half, both count forms and (PROFILE) the compaction's
    cycles.

    The PTX path: each warp's leader stores its count to slot ``parity``
    (0 or 1, alternating from check to check) in shared memory, and after one
    barrier every lane sums the slot itself (:func:`_trigger_sum`), where ``tl.sum``
    takes two barriers and shuffles. Two slots: a warp can store the next
    check's count while another still reads this one; the one after that is past
    the next check's barrier."""
    S: tl.constexpr = CAP // NREG
    LIMIT: tl.constexpr = S - CHECK_EVERY * (B // NREG)
    BIG: tl.constexpr = 1 << 24  # flags a full region in the sum
    t = tl.arange(0, 256)
    warp = t // 32
    regs = tl.arange(0, NREG)
    if USE_ASM:
        tot = _trigger_sum(wcnt + tl.where(wcnt > LIMIT, BIG, 0), parity)
    else:
        tot = tl.sum(rc + tl.where(rc > LIMIT, BIG, 0), axis=0)
    fresh = tot % BIG - count
    count = tot % BIG
    pc = tl.zeros([], tl.int64)
    if (tot >= k + B2) | ((fresh >= burst_at) & (count > k)):
        if PROFILE:
            pc -= _clock(tot)
        kk = _first_kk(count, k, sample_n, ti, SAMPLE_Z)
        tk, ti, count = _publish_and_compact(
            wcnt, rc, count, cur, kk, B2 // 2, tk, scr_k, scr_i, cnt_ptr, USE_ASM, KEY_BITS,
            CAP, prof, PROFILE,
        )  # fmt: skip
        cur = CAP - cur
        wcnt = _dealt(count, warp)
        rc = _dealt(count, regs)
        if PROFILE:
            pc += _clock(count)
    return tk, ti, count, cur, wcnt, rc, pc


@triton.jit
def deepselect_rows_kernel(
    x_ptr,
    stride_x,
    rows,
    N,
    begin_ptr,
    end_ptr,
    off_ptr,
    off_scalar,
    ov_ptr,
    oi_ptr,
    stride_ov,
    stride_oi,
    cand_key_ptr,
    cand_idx_ptr,
    cand_cnt_ptr,
    k,
    B2,
    fill_index,
    fill_bits,
    seed,
    prof_ptr,
    preset_ptr,
    page_ptr,
    page_stride,
    max_pages,
    n_batch,
    r2b_ptr,
    KEY_BITS: tl.constexpr,
    KEY_MASK: tl.constexpr,
    SIGN: tl.constexpr,
    INF_BITS: tl.constexpr,
    LARGEST: tl.constexpr,
    ORDER: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
    OFF_TENSOR: tl.constexpr,
    WRITE_VALUES: tl.constexpr,
    USE_ASM: tl.constexpr,
    FILTER: tl.constexpr,
    B: tl.constexpr,
    CAP: tl.constexpr,
    KP: tl.constexpr,
    CHECK_EVERY: tl.constexpr = 1,
    VEC: tl.constexpr = False,
    W32: tl.constexpr = False,
    RING: tl.constexpr = 0,
    RING_BASE: tl.constexpr = "",
    RING_READ: tl.constexpr = "",
    RAISE: tl.constexpr = 0,
    SAMPLE_Z: tl.constexpr = 5.0,
    SAMPLE_PRE: tl.constexpr = False,
    SAMPLE_TOL: tl.constexpr = 0,
    SAMPLE_KEYS: tl.constexpr = 0,
    SAMPLE_CHUNK: tl.constexpr = 0,
    SAMPLE_BLOCKS: tl.constexpr = 2,
    SAMPLE_RADIX: tl.constexpr = False,
    SAMPLE_BITS: tl.constexpr = 0,
    PROFILE: tl.constexpr = False,
    PRESET: tl.constexpr = False,
    PAGED: tl.constexpr = False,
    PAGE_SHIFT: tl.constexpr = 0,
    HAS_R2B: tl.constexpr = False,
):
    """Exact top-k of rows ``pid, pid + G, ...`` (a persistent grid of G programs).

    x_ptr: the input's raw bits (int16 or int32 view; rows start on 4-byte boundaries
    when USE_ASM, whose filter reads them as 32-bit words); cand_key/idx: this grid's
    scratch ``[G, 2 * CAP]`` (two halves, compactions copy from one to the other),
    cand_cnt: ``[G, NREG]`` region counts; outputs
    ``[rows, k]`` with their row strides. See the module docstring. PAGED: indices go
    out mapped through a page table (see :func:`_out_index`; the engine's paged
    indexer top-k).

    Diagnostics (off in production builds): PROFILE accumulates SM cycles per phase
    into ``prof_ptr[pid, 0:PROF_SLOTS]`` (see benchmarks/profile_kernel.py); PRESET starts each
    row at the threshold key ``preset_ptr[row]`` (exact only if it is at most the
    row's k-th key) to time the stream without the rising threshold."""
    S: tl.constexpr = CAP // NREG
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    scr_k = cand_key_ptr + pid.to(tl.int64) * (2 * CAP)
    scr_i = cand_idx_ptr + pid.to(tl.int64) * (2 * CAP)
    cnt_ptr = cand_cnt_ptr + pid * NREG
    prof_row = prof_ptr + pid * PROF_SLOTS  # PROFILE: this program's counters
    t256 = tl.arange(0, 256)
    warp = t256 // 32
    PER_WORD: tl.constexpr = 32 // KEY_BITS
    # elements between consecutive threads' first elements (the word layouts of
    # _word_elem: four words per thread in the vector layout, one in the strided one)
    WORD_ELEMS: tl.constexpr = 4 * PER_WORD if VEC else PER_WORD
    if W32:  # each thread's warp and first word, warp-private (see _tid32)
        zero32 = tl.zeros([32], tl.int32)
        tid32 = _tid32(zero32)
        warp32 = tid32 >> 5  # (shifts and masks: a thread index is never negative)
        woff32 = tid32 * 4  # the vector layout's first word
        lane32 = tid32 & 31
        if RING > 0:  # this lane's place in its warp's first stage (see ring_base_asm)
            slot0 = _asm_once(zero32, RING_BASE) + warp32 * (RING * RING_STAGE_BYTES) + lane32 * 16
        if RAISE > 0:
            hist32 = _asm_once(zero32, HIST_BASE_ASM)  # the histogram's address
    p_row = tl.zeros([], tl.int64)  # whole rows
    p_filt = tl.zeros([], tl.int64)  # filter + per-block count (incl. load waits)
    p_comp = tl.zeros([], tl.int64)  # compactions inside the stream
    p_fin = tl.zeros([], tl.int64)  # final compaction + output
    p_pre = tl.zeros([], tl.int64)  # SAMPLE_PRE: the sample's bound from registers
    p_last = tl.zeros([], tl.int64)  # the final compaction alone (block-synchronous loop)
    p_chk = tl.zeros([], tl.int64)  # the per-block checks, their compactions apart
    n_comp = tl.zeros([], tl.int64)
    n_hits = tl.zeros([], tl.int64)
    n_hitblk = tl.zeros([], tl.int64)
    n_rows = tl.zeros([], tl.int64)
    m_prev = pid * 0 - 1  # the last row's block count and its stride
    a_prev = pid * 0
    for row_ in range(pid, rows, nprog):
        row = tl.cast(row_, tl.int32)  # a tensor in the interpreter too
        row64 = row.to(tl.int64)
        if PROFILE:
            t_row = _clock(row)
        if HAS_WINDOW:
            lo, hi = _window(begin_ptr, end_ptr, row, N, HAS_WINDOW)
        else:
            lo = row * 0
            hi = lo + N
        first = lo // B
        nblk = tl.where(hi > lo, (hi + B - 1) // B - first, 0)
        # data-independent block order (reference.block_at): the middle blocks
        # 1 .. mm in the order 1 + (a*t + c) mod mm, with the last and the first block
        # at p and p + 1, right after the first compaction's sample (a region
        # fills within CAP / B blocks while every element is a candidate); the ring's
        # loop with the sample's bound from registers takes them first (p = 0)
        m = tl.maximum(nblk, 1)
        mm = tl.maximum(m - 2, 1)
        h = (row.to(tl.uint32) + 1) * 0x9E3779B1 + seed.to(tl.uint32) * 0x85EBCA77
        h = h ^ (h >> 15)
        h = h * 0x2C1B3C6D
        h = h ^ (h >> 12)
        # a stride near mm / phi^2 without near-periodic runs (reference.block_stride),
        # computed again only when the row's block count changes; a < mm: the next
        # middle block is one add and at most one subtract away
        if mm != m_prev:
            a_prev = _block_stride(mm, STRIDE_SPAN, STRIDE_GOOD)
            m_prev = mm
        a = a_prev
        # SAMPLE: the first compaction keeps a rank of the candidates seen so far (a
        # sample of the row, reference.sample_rank) rather than the k-th; if fewer
        # than k of the row reach that bound, the row is selected again without it;
        # only where the middle blocks before the ends hold the whole sample
        # (SAMPLE_BLOCKS of them: CAP // B, or, the bound from registers, those its
        # keys take)
        p = tl.maximum(tl.minimum(m - 2, SAMPLE_BLOCKS), 0)
        c = ((h >> 7) % mm.to(tl.uint32)).to(tl.int32)
        sample_n = tl.where(not PRESET and (m - 2 >= SAMPLE_BLOCKS), hi - lo, 0)
        x_row = x_ptr + row64 * stride_x
        xw_row = x_row.to(tl.pointer_type(tl.int32), bitcast=True)
        cur = row * 0  # the scratch half holding the candidates: 0 or CAP
        count = row * 0
        t2 = tl.zeros([], tl.int64)
        go = row * 0 + 1
        for _attempt in range(0, 2):
            if go != 0:
                cur = row * 0
                count = row * 0
                tk = (row * 0).to(tl.uint32)
                ti = row * 0 + 0x7FFFFFFF
                if PRESET:
                    tk = tl.load(preset_ptr + row).to(tl.uint32)
                # SAMPLE_PRE: the sample's bound from registers (_sample_bound), not
                # from a first compaction; the stream's compactions then all keep k
                loop_n = sample_n * 0 if SAMPLE_PRE else sample_n
                burst_at = sample_n * 0 + 0x3FFFFFFF
                s_hi = tk  # RAISE: the sample's largest key (sampled rows)
                if SAMPLE_PRE:
                    if sample_n > 0:
                        if PROFILE:
                            t_pre = _clock(sample_n)
                        tk, s_hi = _sample_bound(
                            x_row, first, m, a, c, p, k, sample_n, KEY_BITS, KEY_MASK, SIGN,
                            INF_BITS, LARGEST, B, SAMPLE_KEYS, SAMPLE_RADIX, USE_ASM, SAMPLE_Z,
                            SAMPLE_TOL, SAMPLE_CHUNK, prof_row, PROFILE, SAMPLE_BITS, lo, hi,
                        )  # fmt: skip
                        if PROFILE:
                            p_pre += _clock(tk) - t_pre
                ja = _block_at(m * 0, m, a, c, p)
                jb = _block_at(m * 0 + 1, m, a, c, p)
                jc = _block_at(m * 0 + 2, m, a, c, p)
                wcnt = tl.zeros([256], tl.int32)  # PTX path: each lane's copy of its warp's count
                rc = tl.zeros([NREG], tl.int32)  # portable path: the regions' counts
                if W32:  # warp-private loop state (see _tid32): warps stream independently
                    # Each warp filters its share of every block at its own pace and polls the
                    # sync state before each block; the warps meet (_meet) only when one asks
                    # for a compaction (its region nearly full) and once all are done. Two
                    # word sets alternate (the loop is unrolled twice), each reloaded right
                    # after its filter, so no copy waits for a pending load.
                    wc32 = zero32
                    i = row * 0  # blocks this warp has filtered
                    acc = zero32  # profiling counters (see _warp_step)
                    hreg = row * 0
                    hbase = tk
                    if RAISE > 0:  # the row's histogram, zeroed before the barrier; a row
                        # without a sample counts only hits at the greatest key (none
                        # above its threshold's in practice), so it never offers a key
                        # it could not prove
                        hbase = tl.where(sample_n > 0, tk, tk | 0xFFFFFFFF)
                        hreg = _hist_start(hist32, tid32, hbase, s_hi, RAISE)
                        _asm_once(zero32, RAISE_CLEAR_ASM)
                    _set_sync(zero32 + (nblk == 0).to(tl.int32), 1)
                    tl.debug_barrier()  # every warp's words written before anyone polls
                    fin = row * 0
                    tva, tvp = _coarse_pair(tk, KEY_BITS, KEY_MASK, SIGN, LARGEST)
                    sb32 = _smem_base(zero32)
                    if RING > 0:  # blocks 0 .. RING - 1 of the order into the stages
                        # with the sample's bound from registers the ends need not follow
                        # a first compaction's sample: they go first (p = 0), and every
                        # block past the ring's first is the middle block after the last
                        ENDS_FIRST: tl.constexpr = SAMPLE_PRE and RING >= 3
                        pr = p * 0 if ENDS_FIRST else p
                        jq = zero32  # lane s: the block in stage s
                        j1 = m * 0
                        j2 = m * 0
                        j3 = m * 0
                        for s in tl.static_range(RING):
                            js = _block_at(m * 0 + s, m, a, c, pr)
                            _ring_issue(
                                slot0 + s * RING_STAGE_BYTES, xw_row, js, first, woff32, lo, hi,
                                nblk, nblk > s, B, KEY_BITS,
                            )  # fmt: skip
                            jq = tl.where(lane32 == s, js, jq)
                            if s == RING - 1:
                                j1 = js
                            if s == RING - 2:
                                j2 = js
                            if s == RING - 3:
                                j3 = js
                        while fin == 0:
                            (jq, j1, j2, j3, i, wc32, tk, ti, tva, tvp, count, cur, fin,
                             acc) = _ring_step(
                                slot0, jq, j1, j2, j3, xw_row, a, mm, p, first, lo, hi, i, nblk,
                                wc32, woff32, warp32, lane32, tk, ti, tva, tvp, count, cur, scr_k,
                                scr_i, cnt_ptr, k, B2, acc, loop_n, sb32, KEY_BITS, KEY_MASK, SIGN,
                                LARGEST, FILTER, B, CAP, PROFILE, SAMPLE_Z, RING, RING_READ, hreg,
                                hbase, RAISE, ENDS_FIRST,
                            )  # fmt: skip
                    else:
                        a0, a1, a2, a3, a4, a5, a6, a7 = _load32(
                            xw_row, ja, first, woff32, lo, hi, nblk, nblk > 0, B, KEY_BITS
                        )
                        b0, b1, b2, b3, b4, b5, b6, b7 = _load32(
                            xw_row, jb, first, woff32, lo, hi, nblk, nblk > 1, B, KEY_BITS
                        )
                        jl = jc  # the next block to load
                        while fin == 0:
                            (a0, a1, a2, a3, a4, a5, a6, a7, ja, jl, i, wc32, tk, ti, tva, tvp,
                             count, cur, fin, acc) = _warp_step(
                                a0, a1, a2, a3, a4, a5, a6, a7, xw_row, ja, jl, a, mm, p, first,
                                lo, hi, i, nblk, wc32, woff32, warp32, tk, ti, tva, tvp, count, cur,
                                scr_k, scr_i, cnt_ptr, k, B2, acc, loop_n, sb32, KEY_BITS,
                                KEY_MASK, SIGN, LARGEST, FILTER, B, CAP, PROFILE, SAMPLE_Z,
                            )  # fmt: skip
                            if fin == 0:
                                (b0, b1, b2, b3, b4, b5, b6, b7, jb, jl, i, wc32, tk, ti, tva, tvp,
                                 count, cur, fin, acc) = _warp_step(
                                    b0, b1, b2, b3, b4, b5, b6, b7, xw_row, jb, jl, a, mm, p, first,
                                    lo, hi, i, nblk, wc32, woff32, warp32, tk, ti, tva, tvp, count,
                                    cur, scr_k, scr_i, cnt_ptr, k, B2, acc, loop_n, sb32,
                                    KEY_BITS, KEY_MASK, SIGN, LARGEST, FILTER, B, CAP, PROFILE,
                                    SAMPLE_Z,
                                )  # fmt: skip
                    if PROFILE:
                        t2 = _clock(count)
                        # warp 0's counters (the profile is one program's, as thread 0 stores it)
                        lane = tl.arange(0, 32)
                        p_filt += tl.sum(tl.where(lane == 0, acc, 0), axis=0).to(tl.int64)
                        p_comp += tl.sum(tl.where(lane == 1, acc, 0), axis=0).to(tl.int64)
                        n_comp += tl.sum(tl.where(lane == 2, acc, 0), axis=0).to(tl.int64)
                        n_hits += tl.sum(tl.where(lane == 3, acc, 0), axis=0).to(tl.int64)
                        n_hitblk += tl.sum(tl.where(lane == 4, acc, 0), axis=0).to(tl.int64)
                        acc = zero32
                else:
                    # software prefetch: the next block (VEC; a register copy of a pending load
                    # waits for it, so a longer rotation holds no more loads in flight) or three
                    if USE_ASM and VEC:
                        a0, a1, a2, a3, a4, a5, a6, a7 = _load_words_vec(
                            xw_row, (ja + first) * B, lo, hi, nblk > 0, B, KEY_BITS
                        )
                    if USE_ASM and not VEC:
                        a0, a1, a2, a3, a4, a5, a6, a7 = _load_words(
                            xw_row, (ja + first) * B, lo, hi, nblk > 0, KEY_BITS
                        )
                        b0, b1, b2, b3, b4, b5, b6, b7 = _load_words(
                            xw_row, (jb + first) * B, lo, hi, nblk > 1, KEY_BITS
                        )
                        c0, c1, c2, c3, c4, c5, c6, c7 = _load_words(
                            xw_row, (jc + first) * B, lo, hi, nblk > 2, KEY_BITS
                        )
                    for i in range(0, nblk):
                        blk_start = (ja + first) * B
                        jd = _next_block(jc, ja, i + 3, a, mm, nblk, p)
                        if PROFILE:
                            t0 = _clock(count)
                            c_before = count
                        if USE_ASM and VEC:
                            b0, b1, b2, b3, b4, b5, b6, b7 = _load_words_vec(
                                xw_row, (jb + first) * B, lo, hi, i + 1 < nblk, B, KEY_BITS
                            )
                        if USE_ASM and not VEC:
                            d0, d1, d2, d3, d4, d5, d6, d7 = _load_words(
                                xw_row, (jd + first) * B, lo, hi, i + 3 < nblk, KEY_BITS
                            )
                        if USE_ASM:
                            tva, tvp = _coarse_pair(tk, KEY_BITS, KEY_MASK, SIGN, LARGEST)
                            wcnt = _filter_words(
                                a0, a1, a2, a3, a4, a5, a6, a7, blk_start + t256 * WORD_ELEMS, lo,
                                hi, tk, ti, tva, tvp, wcnt, scr_k + cur + warp * S,
                                scr_i + cur + warp * S, FILTER,
                            )  # fmt: skip
                            a0, a1, a2, a3, a4, a5, a6, a7 = b0, b1, b2, b3, b4, b5, b6, b7
                            if not VEC:
                                b0, b1, b2, b3, b4, b5, b6, b7 = c0, c1, c2, c3, c4, c5, c6, c7
                                c0, c1, c2, c3, c4, c5, c6, c7 = d0, d1, d2, d3, d4, d5, d6, d7
                        else:
                            rc = _filter_portable(
                                x_row, blk_start, lo, hi, tk, ti, rc, scr_k + cur, scr_i + cur,
                                B, S, KEY_BITS == 16, KEY_MASK, SIGN, INF_BITS, LARGEST,
                            )  # fmt: skip
                        ja = jb
                        jb = jc
                        jc = jd
                        if PROFILE:
                            t1 = _clock(blk_start)
                            p_filt += t1 - t0
                        if CHECK_EVERY == 1:
                            tk, ti, count, cur, wcnt, rc, pc = _check(
                                wcnt, rc, tk, ti, count, cur, scr_k, scr_i, cnt_ptr, k, B2,
                                loop_n, burst_at, i & 1, prof_row, USE_ASM, KEY_BITS, B, CAP,
                                CHECK_EVERY, PROFILE, SAMPLE_Z,
                            )  # fmt: skip
                        else:  # the trigger's block-wide sum every CHECK_EVERY blocks, and the last
                            pc = tl.zeros([], tl.int64)
                            done = tl.cast(i, tl.int32) + 1
                            if (done % CHECK_EVERY == 0) | (done == nblk):
                                parity = ((done + CHECK_EVERY - 1) // CHECK_EVERY) & 1
                                tk, ti, count, cur, wcnt, rc, pc = _check(
                                    wcnt, rc, tk, ti, count, cur, scr_k, scr_i, cnt_ptr, k, B2,
                                    loop_n, burst_at, parity, prof_row, USE_ASM, KEY_BITS, B,
                                    CAP, CHECK_EVERY, PROFILE, SAMPLE_Z,
                                )  # fmt: skip
                        if PROFILE:
                            p_chk += _clock(count) - t1 - pc
                            p_comp += pc
                            n_comp += (pc != 0).to(tl.int64)
                            n_hits += count - c_before
                            n_hitblk += (count > c_before).to(tl.int64)
                    if PROFILE:
                        t2 = _clock(count)
                    tk, ti, count = _publish_and_compact(
                        wcnt, rc, count, cur, k, 0, tk, scr_k, scr_i, cnt_ptr, USE_ASM,
                        KEY_BITS, CAP, prof_row, PROFILE,
                    )  # fmt: skip
                    if PROFILE:
                        p_last += _clock(count) - t2
                # fewer than k at or above the sample's bound: again without it
                go = ((sample_n > 0) & (count < tl.minimum(k, hi - lo))).to(tl.int32)
                sample_n = sample_n * 0
        tl.debug_barrier()
        # ---- output: the survivors, count <= k of them, dealt over the other half
        o = tl.arange(0, KP)
        real = o < count
        slot = (CAP - cur) + (o % NREG) * S + o // NREG
        ck = tl.load(scr_k + slot, mask=real, other=0).to(tl.uint32, bitcast=True)
        ci = tl.load(scr_i + slot, mask=real, other=0)
        if ORDER == 1:  # best first, ties by lower index
            ck, ci = _best_first_keys(ck, ci, real)
        if ORDER == 2:  # ascending index (the keys no longer match: values read back)
            ci = tl.sort(tl.where(real, ci, 0x7FFFFFFF))
        om = o < k
        if WRITE_VALUES:
            vals = _values_of(
                x_row, ck, ci, real, KEY_BITS, KEY_MASK, SIGN, LARGEST,
                ORDER != 2,
            )  # fmt: skip
            vals = tl.where(real, vals, fill_bits.to(vals.dtype))
            tl.store(ov_ptr + row64 * stride_ov + o, vals, mask=om)
        if OFF_TENSOR:
            off = tl.load(off_ptr + row).to(tl.int64)
        else:
            off = off_scalar.to(tl.int64)
        mapped = _out_index(
            ci, real, row, off, page_ptr, page_stride, max_pages, n_batch, r2b_ptr,
            PAGED, PAGE_SHIFT, HAS_R2B,
        )  # fmt: skip
        out = tl.where(real, mapped, fill_index.to(tl.int64))
        _store_index(oi_ptr + row64 * stride_oi + o, out, om)
        # the next row's appends overwrite slots this row's output just read
        tl.debug_barrier()
        if PROFILE:
            t3 = _clock(tl.sum(out.to(tl.int32), axis=0))
            p_fin += t3 - t2
            p_row += t3 - t_row
            n_rows += 1
    if PROFILE:
        j = tl.arange(0, PROF_SLOTS)
        prof = tl.where(j == 0, p_row, 0) + tl.where(j == 1, p_filt, 0)
        prof += tl.where(j == 2, p_comp, 0) + tl.where(j == 3, p_fin, 0)
        prof += tl.where(j == 4, n_comp, 0) + tl.where(j == 5, n_hits, 0)
        prof += tl.where(j == 6, n_hitblk, 0) + tl.where(j == 7, n_rows, 0)
        prof += tl.where(j == 8, p_pre, 0) + tl.where(j == 11, p_last, 0)
        prof += tl.where(j == 16, p_chk, 0)
        # 9, 10, 12 .. 15: atomics of _sample_bound and _compact
        tl.store(prof_row + j, prof, mask=(j < 9) | (j == 11) | (j == 16))
