"""Device helpers every Triton kernel shares: order-preserving keys, windows, the output's
indices and values, the data-independent block order, clocks for the profiling build."""

from __future__ import annotations

import triton
import triton.language as tl

from ... import reference

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


def _inf_bits(bits: int, fp16: bool) -> int:
    if bits == 32:
        return 0x7F800000
    return 0x7C00 if fp16 else 0x7F80


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
def _survivors(count, cur, scr_k, scr_i, CAP: tl.constexpr, KP: tl.constexpr):
    """A row's ``count`` survivors, as its last compaction dealt them over the scratch
    half from ``CAP - cur`` (``scr_k``, ``scr_i``: the program's keys and indices): the
    lanes ``o < KP``, whether each holds one (``real``), its key and its index."""
    S: tl.constexpr = CAP // NREG
    o = tl.arange(0, KP)
    real = o < count
    slot = (CAP - cur) + (o % NREG) * S + o // NREG
    ck = tl.load(scr_k + slot, mask=real, other=0).to(tl.uint32, bitcast=True)
    ci = tl.load(scr_i + slot, mask=real, other=0)
    return o, real, ck, ci


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
