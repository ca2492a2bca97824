"""The CPU backend: DeepSelect per row, JIT-compiled with Numba.

Each row (or row segment) is read once, in contiguous blocks visited in a random
order that depends only on the row number and a fixed seed. Every element's
order-preserving key (the mapping of :mod:`deepselect.keys`, computed here from the
raw bit pattern) is compared with the running threshold ``T = (key, index)`` — the
k-th best candidate so far — and the few that beat it are appended to a candidate
buffer. When the buffer holds ``k + B2`` candidates it is compacted back to ``k`` by a
radix select (8-bit digits of the key, then of the index among tied keys), which
also raises ``T``. Rows shorter than the thread count are split into segments; each
segment's exact top-k is taken and the segments are merged by the same select, which
is exact because every element of the row's top-k is in its segment's top-k.

The hot loop (:func:`_skip`) is branch-light and stores nothing: it compares raw bit
patterns, not keys. From the threshold's own bits :func:`_bound` derives a prefilter of
one or two integer min/max reductions per group of ``g`` elements (128 bytes; signed
order for positive floats, unsigned for negative ones, NaNs of both signs caught above
+-inf) that every element reaching the threshold's key passes. Only a group that passes
is walked element by element, and only elements passing the prefilter get the exact
key test, so the key work scales with the hits.

Rows (or segments) are tasks that worker threads take in chunks from a shared counter.
The workers are torch's own OpenMP threads where torch has an OpenMP runtime
(:mod:`deepselect.cpu_omp`: after a torch operation they are still spinning, and
threads of our own would share the cores with them), else a thread pool
(``DEEPSELECT_OPENMP=0`` forces it). A region that stalls behind busy cores hands
over to the pool for a while (:func:`_run_stage`); small calls run on the calling
thread alone (:data:`SMALL_WORK`).

Compiled on first use (not at import of :mod:`deepselect`) and cached on disk
(``cache=True``), so a new process loads the machine code instead of recompiling.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np
import torch
from numba import carray, cfunc, njit, types
from numba.extending import register_jitable

from . import cpu_omp, reference
from ._log import log_launch
from ._numba_cache import compiling, prepare_cache
from .cpu_omp import as_pointer, fetch_add
from .options import Order, TopkOptions

prepare_cache()  # before the njit(cache=True) decorators below

# the kernels' block-order multiplier, compiled from the reference's definition
register_jitable(reference._largest_quotient)
_block_stride = njit(cache=True, nogil=True)(reference.block_stride)
_block_at = njit(cache=True, nogil=True)(reference.block_at)
# where the threshold starts: a bound from the first candidates
_sample_rank = njit(cache=True, nogil=True)(reference.sample_rank)
_sample_blocks = njit(cache=True, nogil=True)(reference.sample_blocks)

__all__ = ["CpuConfig", "CONFIG", "run_cpu"]


@dataclass(frozen=True)
class CpuConfig:
    """Tuning of the CPU backend (element counts).

    Measured on a 2-core AMD EPYC (AVX2), fp32 / bf16 rows of 129K and 1M, k = 512, one
    thread, on a shared machine (differences under ~5% are noise there): block size,
    first window (2K-16K) and B2 (128-512) all within noise. The prefilter scan of
    cached data costs ~0.5 ns per fp32 element with groups of 32 and ~0.15 ns with
    groups of 256 (the reduction's fixed cost per group); from memory both read at
    about one core's share of the bandwidth. What is left is the hit path: ~60-100 ns
    per group that holds a hit (about k ln(N / warmup) of them per row) and ~5 ns per
    candidate per compaction (~4 us for k + B2 = 768).
    """

    block: int = 8192  #: B: elements per block of the random block order
    b2_min: int = 256  #: B2 = max(b2_min, k // 2): candidates beyond k before a compaction
    warmup: int = 4096  #: first compaction once this many candidates (at least k + B2)
    min_segment: int = 65536  #: shortest row segment worth a thread of its own
    seed: int = 0x5EED  #: seed of the block order (data-independent)
    group: int = 0  #: elements per prefilter test; 0: 128 bytes' worth
    wide: int = 8  #: wide groups of up to this many groups once hits are sparse
    spread: int = 4  #: widen while a wide group expects at most 1/spread hits


CONFIG = CpuConfig()

# ---------------------------------------------------------------------------
# JIT kernels. `T` is the unsigned key type (np.uint16 / np.uint32 / np.uint64) and
# `S` the signed type of the same width, passed as number classes so that every
# operation stays in that width (numba would otherwise widen to 64 bits and cut the
# SIMD lanes).
# ---------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _key(u, T, sign, absmask, inf, flip, nanval):
    # keys.py: positive -> set the sign bit, negative -> invert; -0 -> +0; NaN -> top;
    # largest=False -> complement, NaN pinned to the bottom. The sign is spread by
    # arithmetic rather than a select, by a shift known at compile time: each measured
    # 2x faster once vectorised (AVX2).
    ab = T(u & absmask)
    neg = T(T(0) - T(u >> T(np.iinfo(T).bits - 1)))  # all ones for negative values
    k = T(u ^ T(neg | sign))
    k = sign if ab == T(0) else k
    k = T(k ^ flip)
    return nanval if ab > inf else k


@njit(cache=True, nogil=True)
def _bound(u, T, S, largest, sign, absmask, inf):
    """Prefilter (mode, a, b) of the threshold element's bits u; see :func:`_passes`.

    Every element whose key reaches the threshold's key passes the prefilter (more may
    pass; the exact key test follows). The prefilter compares raw bits, two integer
    ops per element instead of a full key: positive floats order as their signed bit
    patterns, negative ones as their unsigned patterns reversed, and NaNs of either
    sign sit above +inf or above -inf in unsigned order.
    """
    ab = T(u & absmask)
    nan_b = T(sign | inf)  # NaNs with the sign bit set lie above this
    if largest:
        if ab > inf:  # only NaNs reach a NaN
            return 0, T(inf + T(1)), nan_b
        if u < sign and ab != T(0):  # above zero: larger signed patterns, or a -NaN
            return 0, u, nan_b
        # zero or below: every non-negative pattern, negatives down to u, and NaNs
        return 1, (T(sign) if ab == T(0) else u), nan_b
    if ab > inf:  # fewer than k non-NaN so far: everything passes
        return 3, T(sign - T(1)), nan_b
    if u >= sign and ab != T(0):  # below zero: larger unsigned patterns (and -NaNs)
        return 2, u, nan_b
    return 3, (T(0) if ab == T(0) else u), nan_b  # zero or above: signed <= u


@njit(cache=True, nogil=True)
def _strict_bound(u, T, S, largest, sign, absmask, inf):
    """Prefilter (see :func:`_bound`) of what beats the threshold element's bits ``u``
    where its index cannot be undercut: the next value beyond ``u`` (larger when
    ``largest``, else smaller). Beyond +inf lie the NaNs; beyond a NaN, for the
    largest, nothing (one bit pattern, a NaN tie, still passes to the exact test)."""
    ab = T(u & absmask)
    if ab > inf:
        if largest:
            return 0, T(T(~T(0)) >> T(1)), T(~T(0))
        return _bound(u, T, S, largest, sign, absmask, inf)  # every non-NaN beats it
    if ab == T(0):  # +-0: the smallest subnormal on the far side of zero
        nu = T(1) if largest else T(sign | T(1))
    elif (u < sign) == largest:  # away from zero: one more unit of magnitude
        nu = T(u + T(1))
    else:  # towards zero (the last step lands on -0 or +0)
        nu = T(u - T(1))
    return _bound(nu, T, S, largest, sign, absmask, inf)


@njit(cache=True, nogil=True)
def _passes(u, T, S, mode, a, b):
    if mode == 0:
        return (S(u) >= S(a)) | (u > b)
    if mode == 1:
        return (u <= a) | (u > b)
    if mode == 2:
        return u >= a
    return S(u) <= S(a)


@njit(cache=True, nogil=True)
def _skip(src, p, pend, g, T, S, mode, a, b):
    """First group start p (stepping by g) where some element passes the prefilter
    (mode, a, b) of :func:`_bound`, or the start of the last, partial group.

    The hot loop: one or two integer min/max reductions per group, no stores. The
    group length g is a run-time value on purpose: LLVM's loop vectoriser then turns
    the reduction into SIMD (a constant trip count is fully unrolled first and stays
    scalar, since Numba leaves the SLP vectoriser off). Unsigned indices: a signed one
    costs a wrap-around test per element, a slice a reference count per group.
    """
    lo_s = S(T(T(~T(0)) >> T(1)) + T(1))  # smallest signed value
    hi_s = S(T(~T(0)) >> T(1))
    if mode == 0:
        sa = S(a)
        while p + g <= pend:
            ms = lo_s
            mu = T(0)
            for t in range(g):
                ms = max(ms, S(src[np.uint64(p + t)]))
                mu = max(mu, src[np.uint64(p + t)])
            if ms >= sa or mu > b:
                return p
            p += g
    elif mode == 1:
        while p + g <= pend:
            mn = T(~T(0))
            mu = T(0)
            for t in range(g):
                mn = min(mn, src[np.uint64(p + t)])
                mu = max(mu, src[np.uint64(p + t)])
            if mn <= a or mu > b:
                return p
            p += g
    elif mode == 2:
        while p + g <= pend:
            mu = T(0)
            for t in range(g):
                mu = max(mu, src[np.uint64(p + t)])
            if mu >= a:
                return p
            p += g
    else:
        sa = S(a)
        while p + g <= pend:
            ms = hi_s
            for t in range(g):
                ms = min(ms, S(src[np.uint64(p + t)]))
            if ms <= sa:
                return p
            p += g
    return p


@njit(cache=True, nogil=True)
def _select_kth(ck, ci, n, k, sk, si, hist, T, kbits, ibits):
    """(key, index) of the k-th best of ck/ci[:n] (key desc, index asc); 1 <= k <= n.

    hist is scratch of 1024 counters; sk/si of n elements.

    Radix select: 8-bit digits of the key from the top, keeping only the elements of
    the chosen digit (copied to sk/si), then digits of the index among the tied keys.
    """
    rem = k
    m = n
    src_k, src_i = ck, ci
    shift = kbits - 8
    while shift >= 0:
        ts = T(shift)
        # Four interleaved histograms: the top digits of real data fall in a few bins,
        # and one histogram would chain every increment through the same counter.
        hist[:] = 0
        m4 = m - m % 4
        for j in range(0, m4, 4):
            hist[np.int64(T(src_k[j] >> ts) & T(255))] += 1
            hist[256 + np.int64(T(src_k[j + 1] >> ts) & T(255))] += 1
            hist[512 + np.int64(T(src_k[j + 2] >> ts) & T(255))] += 1
            hist[768 + np.int64(T(src_k[j + 3] >> ts) & T(255))] += 1
        for j in range(m4, m):
            hist[np.int64(T(src_k[j] >> ts) & T(255))] += 1
        for b in range(256):
            hist[b] += hist[256 + b] + hist[512 + b] + hist[768 + b]
        d = 255
        while hist[d] < rem:
            rem -= hist[d]
            d -= 1
        td = T(d)
        m2 = 0
        for j in range(m):  # branch-free: the chosen digit may be any fraction
            kk = src_k[j]
            sk[m2] = kk
            si[m2] = src_i[j]
            m2 += T(T(kk >> ts) & T(255)) == td
        m = m2
        src_k, src_i = sk, si
        shift -= 8
    kth = sk[0]
    if rem == m:  # take every tie: the k-th is the last of them by index
        return kth, si[:m].max()
    shift = ibits - 8
    while shift >= 0:  # lowest indices first among the ties
        hist[:] = 0
        for j in range(m):
            hist[(si[j] >> shift) & 255] += 1
        d = 0
        while hist[d] < rem:
            rem -= hist[d]
            d += 1
        m2 = 0
        for j in range(m):
            if ((si[j] >> shift) & 255) == d:
                si[m2] = si[j]
                m2 += 1
        m = m2
        shift -= 8
    return kth, si[0]


@njit(cache=True, nogil=True)
def _keep(ck, ci, n, tk, ti):
    """Move the candidates at or above (tk, ti) to the front; return their count."""
    pos = 0
    for j in range(n):
        kk = ck[j]
        if kk > tk or (kk == tk and ci[j] <= ti):
            ck[pos] = kk
            ci[pos] = ci[j]
            pos += 1
    return pos


@njit(cache=True, nogil=True)
def _radix_pass_all(keys, perm, tmp, hist, bits, n):
    """Stable LSD radix sort of perm[:n] by keys[perm] ascending, 8 bits per pass."""
    for shift in range(0, bits, 8):
        hist[:] = 0
        for j in range(n):
            hist[np.int64(keys[perm[j]] >> shift) & 255] += 1
        if n == 0 or hist[np.int64(keys[perm[0]] >> shift) & 255] == n:
            continue  # one digit throughout (the top digits of a row's best): no change
        total = 0
        for d in range(256):
            c = hist[d]
            hist[d] = total
            total += c
        for j in range(n):
            p = perm[j]
            d = np.int64(keys[p] >> shift) & 255
            tmp[hist[d]] = p
            hist[d] += 1
        perm[:n] = tmp[:n]


@njit(cache=True, nogil=True)
def _order_params(seed, row, seg, m):
    """Multiplier a (:func:`deepselect.reference.block_stride`) and hashed shift c of
    the middle blocks' order in :func:`deepselect.reference.block_at`."""
    m = max(m - 2, 1)
    h = np.uint64(seed) ^ (np.uint64(row) * np.uint64(0x9E3779B97F4A7C15))
    h ^= np.uint64(seg) * np.uint64(0xC2B2AE3D27D4EB4F)
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    c = np.int64((h >> np.uint64(32)) % np.uint64(m))
    return _block_stride(m), c


@njit(cache=True, nogil=True)
def _segment_topk(src, off, lo, hi, k, T, S, consts, cfg, seed, row, seg, ck, ci, sk, si, hist,
                  outk, outi, outv):  # fmt: skip
    """Exact top-k of row positions [lo, hi), element j at src[off + j].

    The threshold starts at a bound from the first candidates
    (:func:`deepselect.reference.sample_rank`); if fewer than k elements reach it, the
    row is selected again without one.

    ck/ci/sk/si ([max(k + B2, warmup) + widest group] at least) and hist ([1024]) are
    scratch. Writes min(k, hi - lo) candidates (any order) to outk/outi and their raw
    bits to outv (read here, while the row is still in cache); returns that count.
    """
    sign, absmask, inf, flip, nanval = consts[0], consts[1], consts[2], consts[3], consts[4]
    kbits, ibits = np.int64(consts[5]), np.int64(consts[6])
    block, b2, warm, g, gmax, spread = cfg[0], cfg[1], cfg[2], cfg[3], cfg[4], cfg[5]
    largest = flip == T(0)
    fm, fa, fb = 0, T(0), T(0)  # prefilter of the threshold, see _bound
    # and of the next value: for blocks at or past the threshold's index, where a tie
    # with it is no hit (rows of few distinct values: most of the row)
    xm, xa, xb = 0, T(0), T(0)
    n = hi - lo
    if n <= 0:
        return 0
    if n <= k:
        for t in range(n):
            outk[t] = _key(src[off + lo + t], T, sign, absmask, inf, flip, nanval)
            outi[t] = lo + t
            outv[t] = src[off + lo + t]
        return n
    first = min(max(k + b2, warm), ck.size - g)
    m = (n + block - 1) // block
    a, c = _order_params(seed, row, seg, m)
    # the ends come after the sample's blocks; a row too short to give a sample without
    # them starts at the k-th best
    s = _sample_blocks(first, block)
    rank = _sample_rank(first, k, n) if m - 2 >= s else 0
    most = ck.size - gmax  # a trigger this high leaves room for a widest group's hits
    for _attempt in range(2):  # a second one only if the bound was too high
        cnt = 0
        trig = first
        have = False
        last = -1  # the block of the last compaction
        tk = T(0)
        ti = np.int64(0)
        for i in range(m):
            b = _block_at(i, m, a, c, s)
            p = off + lo + b * block  # position in src
            pend = min(p + block, off + hi)
            # Wider groups once hits are sparse (about k / seen per element): one
            # reduction per wide group costs far less than per narrow one, and a wide
            # group that holds a hit is narrowed down by the same test at the narrow width.
            wide = g
            while wide < gmax and 2 * wide * k * spread <= i * block:
                wide *= 2
            past = lo + b * block >= ti  # the block lies at or past the threshold's index
            bm, ba, bb = (xm, xa, xb) if have and past else (fm, fa, fb)
            while p < pend:
                if have:
                    p = _skip(src, p, pend, wide, T, S, bm, ba, bb)
                    if p >= pend:
                        break
                    q = min(p + wide, pend)
                    while p < q:
                        if wide > g:  # narrow down; a narrow group was just tested
                            p = _skip(src, p, q, g, T, S, bm, ba, bb)
                            if p >= q:
                                break
                        r = min(p + g, q)
                        for t in range(p, r):  # a group holding a hit (or a last, partial one)
                            u = src[np.uint64(t)]
                            if _passes(u, T, S, bm, ba, bb):
                                kk = _key(u, T, sign, absmask, inf, flip, nanval)
                                j = t - off
                                if kk > tk or (kk == tk and j < ti):
                                    ck[cnt] = kk
                                    ci[cnt] = j
                                    cnt += 1
                        p = r
                else:  # threshold still -inf: everything is a candidate
                    q = min(p + g, pend)
                    for t in range(q - p):
                        ck[cnt + t] = _key(src[p + t], T, sign, absmask, inf, flip, nanval)
                        ci[cnt + t] = p + t - off
                    cnt += q - p
                p = q
                if cnt >= trig:
                    # the first candidates are a sample of the row: start at its rank-th
                    # best (reference.sample_rank), later at the k-th best candidate
                    kth = rank if not have and rank > 0 else k
                    tk, ti = _select_kth(ck, ci, cnt, kth, sk, si, hist, T, kbits, ibits)
                    cnt = _keep(ck, ci, cnt, tk, ti)
                    tu = src[off + ti]
                    fm, fa, fb = _bound(tu, T, S, largest, sign, absmask, inf)
                    xm, xa, xb = _strict_bound(tu, T, S, largest, sign, absmask, inf)
                    past = lo + b * block >= ti
                    bm, ba, bb = (xm, xa, xb) if past else (fm, fa, fb)
                    # hits that come densely (a second compaction within one block, as
                    # on a monotone row) let the buffer grow: fewer, larger compactions
                    dense = have and i == last
                    trig = min(2 * trig - k, most) if dense else k + b2
                    have = True
                    last = i
        if cnt > k:
            tk, ti = _select_kth(ck, ci, cnt, k, sk, si, hist, T, kbits, ibits)
            cnt = _keep(ck, ci, cnt, tk, ti)
        if cnt >= k or rank == 0:
            break
        rank = 0  # fewer than k at or above the sample's bound: again without it
    outk[:cnt] = ck[:cnt]
    outi[:cnt] = ci[:cnt]
    for t in range(cnt):
        outv[t] = src[off + ci[t]]
    return cnt


@njit(cache=True, nogil=True)
def _stage_segments(t0, t1, data, rowbase, es, begin, end, nseg, k, T, S, consts, cfg, seed, candk,
                    candi, candv, count):  # fmt: skip
    """Tasks t0..t1-1 = (row, segment): exact top-k into candk/candi/candv[task], count[task]."""
    cap = max(k + cfg[1], cfg[2]) + max(cfg[3], cfg[4])  # scratch shared by this thread's tasks
    ck = np.empty(cap, data.dtype)
    ci = np.empty(cap, np.int64)
    sk = np.empty(cap, data.dtype)
    si = np.empty(cap, np.int64)
    hist = np.empty(1024, np.int64)
    for t in range(t0, t1):
        r = t // nseg
        s = t % nseg
        b = begin[r]
        width = end[r] - b
        lo = b + width * s // nseg
        hi = b + width * (s + 1) // nseg
        if es == 1:
            src = data
            off = rowbase[r]
        else:  # strided row: read it once into a contiguous scratch
            src = np.empty(max(hi - lo, 0), data.dtype)
            for j in range(lo, hi):
                src[j - lo] = data[rowbase[r] + j * es]
            off = -lo
        count[t] = _segment_topk(
            src,
            off,
            lo,
            hi,
            k,
            T,
            S,
            consts,
            cfg,
            seed,
            r,
            s,
            ck,
            ci,
            sk,
            si,
            hist,
            candk[t],
            candi[t],
            candv[t],
        )


@njit(cache=True, nogil=True)
def _row_order(bk, bi, total, order, indexed, T, kbits, ibits):
    """Permutation of the selected ``bk``/``bi[:total]`` into ``order`` (0 none, 1 value,
    2 index); ``indexed``: ``bi`` already ascends."""
    perm = np.arange(total)
    if order != 0 and not (indexed and order == 2):
        tmp = np.empty(total, np.int64)
        hist = np.empty(1024, np.int64)
        # LSD radix sort: index digits, then (for value order) descending key digits
        if not indexed:
            _radix_pass_all(bi, perm, tmp, hist, ibits, total)
        if order == 1:
            top = T(~T(0))
            desc = np.empty(total, bk.dtype)
            for j in range(total):
                desc[j] = T(top - bk[j])
            _radix_pass_all(desc, perm, tmp, hist, kbits, total)
    return perm


@njit(cache=True, nogil=True)
def _stage_merge(r0, r1, data, rowbase, es, nseg, k, T, consts, candk, candi, candv, count, order,
                 offsets, has_values, fill_bits, fill_index, outv, outi):  # fmt: skip
    """Rows r0..r1-1: merge the segments' candidates to the exact top-k, order, write."""
    kbits, ibits = np.int64(consts[5]), np.int64(consts[6])
    for r in range(r0, r1):
        total = 0
        for s in range(nseg):
            total += count[r * nseg + s]
        bk = np.empty(total, candk.dtype)
        bi = np.empty(total, np.int64)
        pos = 0
        for s in range(nseg):
            t = r * nseg + s
            c = count[t]
            bk[pos : pos + c] = candk[t, :c]
            bi[pos : pos + c] = candi[t, :c]
            pos += c
        if total > k:
            sk = np.empty(total, candk.dtype)
            si = np.empty(total, np.int64)
            hist = np.empty(1024, np.int64)
            tk, ti = _select_kth(bk, bi, total, k, sk, si, hist, T, kbits, ibits)
            total = _keep(bk, bi, total, tk, ti)
        perm = _row_order(bk, bi, total, order, False, T, kbits, ibits)
        base = rowbase[r]
        for j in range(total):
            idx = bi[perm[j]]
            outi[r, j] = idx + offsets[r]
            if has_values:  # unsplit rows: the bits read while the row was hot
                outv[r, j] = candv[r, perm[j]] if nseg == 1 else data[base + idx * es]
        for j in range(total, k):
            outi[r, j] = fill_index
            if has_values:
                outv[r, j] = fill_bits


# ---------------------------------------------------------------------------
# Running the stages: every worker thread takes chunks of tasks from a shared counter
# until none is left. The workers are torch's OpenMP threads (a parallel region, see
# cpu_omp) where possible, else a thread pool; both run _run_tasks on one int64
# descriptor:
# ---------------------------------------------------------------------------
_D_NEXT, _D_COUNT, _D_CHUNK, _D_STAGE = 0, 1, 2, 3
_D_ES, _D_NSEG, _D_K, _D_SEED, _D_ORDER, _D_VALUES, _D_FILLB, _D_FILLI = range(4, 12)
_D_ARRAYS = 12  # then (address, rows, cols) per array, in run_cpu's order
_D_LEN = _D_ARRAYS + 3 * 13
_STAGE_BOTH, _STAGE_SEGMENTS, _STAGE_MERGE = 0, 1, 2
_POOL: ThreadPoolExecutor | None = None  # where torch has no OpenMP runtime to run on


def _drop_pool_in_child() -> None:  # a forked child has none of the pool's threads
    global _POOL
    _POOL = None


os.register_at_fork(after_in_child=_drop_pool_in_child)


@njit(cache=True, nogil=True)
def _array(desc, j, ty):
    o = _D_ARRAYS + 3 * j
    return carray(as_pointer(desc[o], ty), (desc[o + 1], desc[o + 2]))


@njit(cache=True, nogil=True)
def _run_tasks(desc, T, S):
    """One worker's share of a stage: chunks of tasks until none is left."""
    i64 = np.int64
    data = _array(desc, 0, T)[0]
    rowbase = _array(desc, 1, i64)[0]
    begin = _array(desc, 2, i64)[0]
    end = _array(desc, 3, i64)[0]
    consts = _array(desc, 4, T)[0]
    cfg = _array(desc, 5, i64)[0]
    candk = _array(desc, 6, T)
    candi = _array(desc, 7, i64)
    candv = _array(desc, 8, T)
    count = _array(desc, 9, i64)[0]
    offsets = _array(desc, 10, i64)[0]
    outv = _array(desc, 11, T)
    outi = _array(desc, 12, i64)
    es, nseg, k = desc[_D_ES], desc[_D_NSEG], desc[_D_K]
    n, chunk, stage = desc[_D_COUNT], desc[_D_CHUNK], desc[_D_STAGE]
    next_task = as_pointer(desc.ctypes.data + 8 * _D_NEXT, i64)
    while True:
        t0 = fetch_add(next_task, chunk)
        if t0 >= n:
            return
        t1 = min(n, t0 + chunk)
        if stage != _STAGE_MERGE:
            _stage_segments(t0, t1, data, rowbase, es, begin, end, nseg, k, T, S, consts, cfg,
                            desc[_D_SEED], candk, candi, candv, count)  # fmt: skip
        if stage != _STAGE_SEGMENTS:
            _stage_merge(t0, t1, data, rowbase, es, nseg, k, T, consts, candk, candi, candv,
                         count, desc[_D_ORDER], offsets, desc[_D_VALUES] != 0,
                         T(desc[_D_FILLB]), desc[_D_FILLI], outv, outi)  # fmt: skip


def _region16(desc):
    _run_tasks(carray(desc, (_D_LEN,)), np.uint16, np.int16)


def _region32(desc):
    _run_tasks(carray(desc, (_D_LEN,)), np.uint32, np.int32)


def _region64(desc):
    _run_tasks(carray(desc, (_D_LEN,)), np.uint64, np.int64)


_REGIONS = {np.uint16: _region16, np.uint32: _region32, np.uint64: _region64}


@cache
def _region_fn(T):
    """The compiled body of a parallel region for keys of type ``T`` (compiled on first
    use, cached on disk): ``(address, ctypes function of the descriptor's address)``.
    Called through ctypes, it lets go of the GIL."""
    sig = types.void(types.CPointer(types.int64))
    f = cfunc(sig, nopython=True, cache=True)(_REGIONS[T])
    return f.address, ctypes.CFUNCTYPE(None, ctypes.c_void_p)(f.address)


def _region(T) -> int:
    """Address of the compiled body of a parallel region for keys of type ``T``."""
    return _region_fn(T)[0]


# A parallel region returns only once every thread of torch's team has run its body:
# a team thread whose core is busy elsewhere holds the call for a time slice or more
# (8 x 100K: a median of 12 ms against 0.5 ms; here every busy call took 8 ms). The
# pool's caller waits only for the workers that started. So a shape's first call runs
# on the pool, which sets the time to beat; later ones on the region until one takes
# far longer than the fastest call of the shape, then on the pool for REGION_PAUSE_S.
REGION_PAUSE_S = 1.0
_region_off_until = 0.0
_fastest: dict[tuple, float] = {}  # seconds, per (shape, stage, workers)


def _run_stage(
    stage: int, count: int, T, desc: np.ndarray, at: int, workers: int, shape: tuple
) -> None:
    """Run ``stage`` over ``count`` tasks of ``desc`` (at address ``at``) on up to
    ``workers`` threads; ``shape`` (dtype, rows, N) keys the region's stall watch."""
    global _region_off_until
    workers = min(workers, count)
    desc[_D_NEXT] = 0
    # chunks of ~1/4 of a worker's share: balance without a counter round trip per task
    desc[_D_COUNT : _D_STAGE + 1] = (count, max(1, count // (4 * workers)), stage)
    address, body = _region_fn(T)
    if workers == 1:  # the region's body on this thread: no region, no pool
        body(at)
        return
    key = (shape, stage, workers)
    fastest = _fastest.get(key)
    start = time.perf_counter()
    gomp = cpu_omp.runtime()
    if gomp is not None and fastest is not None and start >= _region_off_until:
        gomp(address, at, workers, 0)  # on torch's OpenMP threads
        took = time.perf_counter() - start
        if took > 2 * fastest + 1e-3:  # stalled behind a busy core
            _region_off_until = time.perf_counter() + REGION_PAUSE_S
    else:
        _run_pool(body, at, workers)
        took = time.perf_counter() - start
    if fastest is None or took < fastest:
        if len(_fastest) > 4096:
            _fastest.clear()
        _fastest[key] = took


def _run_pool(body, at: int, workers: int) -> None:
    """The region's body (descriptor at ``at``) on the calling thread and
    ``workers - 1`` pool threads."""
    global _POOL
    if _POOL is None or _POOL._max_workers < workers - 1:
        _POOL = ThreadPoolExecutor(max_workers=workers - 1, thread_name_prefix="deepselect")
    futures = [_POOL.submit(body, at) for _ in range(workers - 1)]
    body(at)
    for f in futures:
        # a worker that has not started (its core busy elsewhere) finds nothing left
        # to take: drop it rather than wait for a core
        if not f.cancel():
            f.result()


# ---------------------------------------------------------------------------
# Host side
# ---------------------------------------------------------------------------

# dtype -> (signed torch view, unsigned numpy type, bits, bit pattern of +inf)
_LAYOUT = {
    torch.bfloat16: (torch.int16, np.uint16, 16, 0x7F80),
    torch.float16: (torch.int16, np.uint16, 16, 0x7C00),
    torch.float32: (torch.int32, np.uint32, 32, 0x7F800000),
    torch.float64: (torch.int64, np.uint64, 64, 0x7FF0000000000000),
}


_SIGNED = {np.uint16: np.int16, np.uint32: np.int32, np.uint64: np.int64}
_ORDER_CODE = {Order.NONE: 0, Order.VALUE: 1, Order.INDEX: 2}

SMALL_WORK = 1 << 16
"""Calls of at most this many elements in all run on the calling thread alone: a
parallel region's start and end cost more than such a call's whole selection (and
on busy cores far more)."""


def threads() -> int:
    """Worker threads of the CPU backend (``torch.get_num_threads()``)."""
    return max(1, torch.get_num_threads())


def _segments(rows: int, n: int, k: int, cfg: CpuConfig) -> int:
    """Segments per row from shapes only: enough tasks for every thread."""
    nthreads = threads()
    if rows >= nthreads or n < 2 * max(cfg.min_segment, 4 * k):
        return 1
    return max(1, min(nthreads // max(rows, 1), n // max(cfg.min_segment, 4 * k)))


@cache
def _fill_bits(packed: bytes, dtype: torch.dtype) -> int:
    """The unsigned bit pattern of a fill value (``packed``: its 8 bytes as a double,
    so that -0.0 and 0.0, and every NaN, are keys of their own) in ``dtype``."""
    signed, _, bits, _ = _LAYOUT[dtype]
    value = struct.unpack("<d", packed)[0]
    return int(torch.tensor(value, dtype=dtype).view(signed).item()) & ((1 << bits) - 1)


@dataclass(frozen=True)
class _Plan:
    """A call shape's descriptor (:func:`_run_tasks`) with everything but the call's
    own arrays filled in, and the constant arrays it points to (kept alive here;
    the kernels only read them)."""

    T: type
    nseg: int
    tasks: int
    workers: int
    desc: tuple  # the descriptor's int64 entries
    scratch: tuple  # byte offsets of candk, candi, candv, count in one buffer; its size
    keep: tuple  # the arrays the descriptor points to


def _slot(j: int) -> int:
    return _D_ARRAYS + 3 * j


@lru_cache(maxsize=256)
def _plan(dtype, rows, n, s0, s1, k, largest, order, has_values, fill_bits, fill_index, offset,
          nseg, nthreads, config) -> _Plan:  # fmt: skip
    signed, T, bits, inf_bits = _LAYOUT[dtype]
    group = config.group if config.group > 0 else max(1, 128 // (bits // 8))
    top = (1 << bits) - 1
    sign = 1 << (bits - 1)
    ibits = max(8, -(-max(n - 1, 1).bit_length() // 8) * 8)
    consts = np.array(
        [sign, top >> 1, inf_bits, 0 if largest else top, top if largest else 0, bits, ibits],
        dtype=T,
    )
    cfg = np.array(
        [
            config.block,
            max(config.b2_min, k // 2),
            config.warmup,
            group,
            group * max(1, config.wide),
            max(1, config.spread),
        ],
        dtype=np.int64,
    )
    rowbase = np.arange(rows, dtype=np.int64) * s0
    begin = np.zeros(rows, dtype=np.int64)
    end = np.full(rows, n, dtype=np.int64)
    offsets = np.full(rows, offset or 0, dtype=np.int64)
    zero = np.zeros(1, dtype=T)  # the input of rows of length 0
    es = 1 if n <= 1 else s1
    kk = max(1, min(k, n))
    tasks = rows * nseg
    width = np.dtype(T).itemsize
    parts, at = [], 0
    for size in (tasks * kk * width, tasks * kk * 8, tasks * kk * width, tasks * 8):
        parts.append(at)
        at += -(-size // 64) * 64
    desc = [0] * _D_LEN
    scalars = (es, nseg, k, config.seed, order, has_values, fill_bits, fill_index)
    desc[_D_ES : _D_FILLI + 1] = [(int(v) + 2**63) % 2**64 - 2**63 for v in scalars]
    for j, a in ((0, zero), (1, rowbase), (2, begin), (3, end), (4, consts), (5, cfg),
                 (10, offsets)):  # fmt: skip
        desc[_slot(j) : _slot(j) + 3] = [a.ctypes.data, 1, a.shape[0]]
    for j, cols in ((6, kk), (7, kk), (8, kk), (9, tasks)):
        desc[_slot(j) + 1 : _slot(j) + 3] = [tasks if j != 9 else 1, cols]
    if n > 0:  # the input, read as one span from the first row's start
        desc[_slot(0) + 1 : _slot(0) + 3] = [1, (rows - 1) * s0 + (n - 1) * s1 + 1]
    desc[_slot(11) + 1 : _slot(11) + 3] = [rows, k] if has_values else [1, 1]
    desc[_slot(12) + 1 : _slot(12) + 3] = [rows, k]
    workers = 1 if rows * n <= SMALL_WORK else nthreads
    return _Plan(T, nseg, tasks, workers, tuple(desc), (*parts, at),
                 (zero, rowbase, begin, end, consts, cfg, offsets))  # fmt: skip


_RAN: set = set()  # dtypes whose kernels have run (and so are compiled) in this process
_local = threading.local()
SCRATCH_KEPT = 1 << 20
"""Bytes of scratch (candidates of every task) a thread keeps for its next call of the
same shape; larger calls allocate theirs afresh."""


def _thread_descriptor(plan: _Plan) -> tuple:
    """``(plan, descriptor, its address, scratch)``: this thread's descriptor for
    ``plan``, its constant part and scratch filled in (the caller holds the tuple
    while the kernels run). Kept per thread: a call's kernels have all returned (or never
    started) before the same thread makes its next call."""
    states = getattr(_local, "states", None)
    if states is None:
        states = _local.states = {}
    st = states.get(id(plan))
    if st is not None and st[0] is plan:
        return st
    desc = np.array(plan.desc, dtype=np.int64)
    *parts, size = plan.scratch
    scratch = np.empty(size, dtype=np.uint8)
    base = scratch.ctypes.data
    for j, at in zip((6, 7, 8, 9), parts, strict=True):
        desc[_slot(j)] = base + at
    st = (plan, desc, desc.ctypes.data, scratch)
    if size <= SCRATCH_KEPT:
        if len(states) >= 64:
            states.clear()
        states[id(plan)] = st
    return st


def run_cpu(
    x: torch.Tensor,
    k: int,
    opt: TopkOptions,
    out_values: torch.Tensor | None,
    out_indices: torch.Tensor,
    *,
    segments: int | None = None,
    config: CpuConfig = CONFIG,
) -> None:
    """Exact top-k of every row of a CPU tensor, written into the given buffers.

    Args:
        x: ``[rows, N]`` bf16 / fp16 / fp32 / fp64 on the CPU, any strides.
        k: elements per row, ``>= 1`` (``k >= N`` returns all valid elements, then fills).
        opt: validated :class:`TopkOptions` (see :func:`deepselect.api.make_options`).
        out_values: ``[rows, k]`` of ``x.dtype`` or None; receives ``x[row, index]`` bit for bit.
        out_indices: ``[rows, k]`` int32 / int64.
        segments: segments per row (default: chosen from the shapes and thread count);
            any value gives the same result.
        config: block sizes (:class:`CpuConfig`).

    >>> from deepselect.api import make_options
    >>> x = torch.tensor([[0.5, 2.0, -1.0, 2.0]])
    >>> i = torch.empty(1, 2, dtype=torch.int32)
    >>> run_cpu(x, 2, make_options(x, 2, order="value"), None, i)
    >>> i.tolist()
    [[1, 3]]
    """
    rows, n = x.shape
    if rows == 0:
        return
    T = _LAYOUT[x.dtype][1]
    nseg = _segments(rows, n, k, config) if segments is None else max(1, int(segments))
    s0, s1 = x.stride()
    has_values = out_values is not None
    fill_bits = 0
    if has_values:
        fill = struct.pack("<d", opt.resolved_fill_value(x.dtype))
        fill_bits = _fill_bits(fill, x.dtype)
    off = opt.index_offset
    off_tensor = isinstance(off, torch.Tensor)
    plan = _plan(x.dtype, rows, n, s0, s1, k, opt.largest, _ORDER_CODE[opt.order], has_values,
                 fill_bits, opt.fill_index, None if off_tensor else off, nseg, threads(),
                 config)  # fmt: skip
    state = _thread_descriptor(plan)
    desc, at = state[1], state[2]
    keep = [state]  # what this call's descriptor points to, alive until the kernels return
    if n > 0:
        desc[_slot(0)] = x.data_ptr()
    if opt.begin is not None or opt.end is not None:
        b, e = opt.window_bounds(rows, n, torch.device("cpu"))
        b, e = b.contiguous(), e.contiguous()
        keep += [b, e]
        desc[_slot(2)] = b.data_ptr()
        desc[_slot(3)] = e.data_ptr()
    else:
        desc[_slot(2)], desc[_slot(3)] = plan.desc[_slot(2)], plan.desc[_slot(3)]
    if off_tensor:
        o = opt.offset_tensor(rows, torch.device("cpu")).contiguous()
        keep.append(o)
        desc[_slot(10)] = o.data_ptr()
    else:
        desc[_slot(10)] = plan.desc[_slot(10)]
    direct_i = out_indices.dtype == torch.int64 and out_indices.is_contiguous()
    oi = out_indices if direct_i else torch.empty((rows, k), dtype=torch.int64)
    desc[_slot(12)] = oi.data_ptr()
    if has_values:
        direct_v = out_values.is_contiguous()
        ov = out_values if direct_v else torch.empty((rows, k), dtype=x.dtype)
        desc[_slot(11)] = ov.data_ptr()
    else:
        desc[_slot(11)] = oi.data_ptr()  # not written
    log_launch("cpu", x.dtype, x.shape, k, opt.order, segments=nseg, threads=plan.workers)
    shape = (x.dtype, rows, n)
    with compiling(x.dtype) if x.dtype not in _RAN else nullcontext():
        # (a notice on stderr while the first call compiles)
        if nseg == 1:  # both stages in one task per row: each worker is handed work once
            _run_stage(_STAGE_BOTH, rows, T, desc, at, plan.workers, shape)
        else:
            _run_stage(_STAGE_SEGMENTS, plan.tasks, T, desc, at, plan.workers, shape)
            _run_stage(_STAGE_MERGE, rows, T, desc, at, plan.workers, shape)
    _RAN.add(x.dtype)
    del keep
    if not direct_i:
        out_indices.copy_(oi)
    if has_values and not direct_v:
        out_values.copy_(ov)
