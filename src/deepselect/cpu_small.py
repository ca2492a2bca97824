"""The CPU backend's lean path: small calls selected in one compiled function.

A call of short rows (:data:`SMALL_N`) on one thread costs more in the
streaming kernel's set-up (descriptor, sample, compactions) than in its selection. Here
each row is read once into keys (the mapping of :mod:`deepselect.keys`, as the
streaming kernel computes it) with a histogram of their top 8 bits;
the elements at or above the k-th key's digit, in index order, are then selected
exactly by the streaming kernel's radix select (key, then index among ties) and
written in the requested order by its merge stage's ordering. Rows, windows, fills,
offsets and index dtypes follow the same contract as :func:`.cpu_backend.run_cpu`;
larger calls go there.

The constant part of a call signature (shape, strides, ``k``, options) is a small
int64 array made once per signature; a call passes it and its own tensors' addresses
to the compiled function through ctypes (no descriptor per thread, no region).
"""

from __future__ import annotations

import ctypes
import logging
import struct
from contextlib import nullcontext
from functools import cache

import numpy as np
import torch
from numba import carray, cfunc, njit, types

from ._log import log_launch, logger
from ._numba_cache import compiling
from .cpu_backend import (
    _LAYOUT,
    _ORDER_CODE,
    SMALL_WORK,
    _fill_bits,
    _keep,
    _key,
    _row_order,
    _select_kth,
    run_cpu,
)
from .cpu_omp import as_pointer
from .options import TopkOptions

__all__ = ["SMALL_N", "run_cpu_small"]

SMALL_N = 8192
"""Rows of at most this many elements take the lean path, in calls that run on one
thread anyway (``rows * N <= cpu_backend.SMALL_WORK``); measured in docs/tuning.md."""


# the constant descriptor: int64 entries
_C_ROWS, _C_N, _C_S0, _C_S1, _C_K, _C_ORDER, _C_VALUES, _C_FILLB, _C_FILLI = range(9)
_C_OFFSET, _C_IDX32, _C_SIGN, _C_ABSMASK, _C_INF, _C_FLIP, _C_NANVAL, _C_KBITS = range(9, 17)
_C_IBITS, _C_SPAN = 17, 18
_C_LEN = 19


@njit(cache=True, nogil=True)
def _small_rows(c, xp, vp, ip, bp, ep, op, T):
    """Every row's exact top-k; ``c`` the constant descriptor, then the addresses of
    the input, the value and index outputs, and the windows' and offsets' int64
    arrays (0: none)."""
    i64 = np.int64
    rows, n, s0, s1, k = c[_C_ROWS], c[_C_N], c[_C_S0], c[_C_S1], c[_C_K]
    sign, absmask, inf = T(c[_C_SIGN]), T(c[_C_ABSMASK]), T(c[_C_INF])
    flip, nanval = T(c[_C_FLIP]), T(c[_C_NANVAL])
    kbits, ibits = c[_C_KBITS], c[_C_IBITS]
    order, has_values, fill_bits = c[_C_ORDER], c[_C_VALUES] != 0, T(c[_C_FILLB])
    data = carray(as_pointer(xp, T), (max(c[_C_SPAN], 1),))
    outv = carray(as_pointer(vp, T), (rows, k))
    outi = carray(as_pointer(ip, i64), (rows, k))
    outi32 = carray(as_pointer(ip, np.int32), (rows, k))
    shift = T(kbits - 8)
    ck = np.empty(n, T)
    ci = np.empty(n, i64)
    sk = np.empty(n, T)
    si = np.empty(n, i64)
    hist = np.empty(1024, i64)
    for r in range(rows):
        b, e = i64(0), n
        if bp != 0:
            b = carray(as_pointer(bp, i64), (rows,))[r]
            e = carray(as_pointer(ep, i64), (rows,))[r]
        off = c[_C_OFFSET] if op == 0 else carray(as_pointer(op, i64), (rows,))[r]
        base = r * s0
        m = e - b
        if s1 == 1:  # contiguous: the key loop vectorises (measured 8x the strided one)
            src = data[base + b : base + e]
            for j in range(m):
                ck[j] = _key(src[j], T, sign, absmask, inf, flip, nanval)
        else:
            for j in range(m):
                ck[j] = _key(data[base + (b + j) * s1], T, sign, absmask, inf, flip, nanval)
        # Four interleaved histograms: a row's top digits fall in a few bins, and one
        # histogram would chain every increment through the same counter.
        hist[:] = 0
        m4 = m - m % 4
        for j in range(0, m4, 4):
            hist[i64(ck[j] >> shift)] += 1
            hist[256 + i64(ck[j + 1] >> shift)] += 1
            hist[512 + i64(ck[j + 2] >> shift)] += 1
            hist[768 + i64(ck[j + 3] >> shift)] += 1
        for j in range(m4, m):
            hist[i64(ck[j] >> shift)] += 1
        total = m
        if m > k:  # keep the digits at and above the k-th key's, in index order
            rem = k
            d = 255
            while hist[d] + hist[256 + d] + hist[512 + d] + hist[768 + d] < rem:
                rem -= hist[d] + hist[256 + d] + hist[512 + d] + hist[768 + d]
                d -= 1
            td = T(d) << shift
            total = 0
            for j in range(m):  # few pass: a predictable branch
                kk = ck[j]
                if kk >= td:
                    ck[total] = kk
                    ci[total] = b + j
                    total += 1
            if total > k:
                tk, ti = _select_kth(ck, ci, total, k, sk, si, hist, T, kbits, ibits)
                total = _keep(ck, ci, total, tk, ti)
        else:
            for j in range(m):
                ci[j] = b + j
        perm = _row_order(ck, ci, total, order, True, T, kbits, ibits)
        for j in range(total):
            idx = ci[perm[j]]
            if c[_C_IDX32] != 0:
                outi32[r, j] = idx + off
            else:
                outi[r, j] = idx + off
            if has_values:
                outv[r, j] = data[base + idx * s1]
        for j in range(total, k):
            if c[_C_IDX32] != 0:
                outi32[r, j] = c[_C_FILLI]
            else:
                outi[r, j] = c[_C_FILLI]
            if has_values:
                outv[r, j] = fill_bits


def _small16(c, xp, vp, ip, bp, ep, op):
    _small_rows(carray(c, (_C_LEN,)), xp, vp, ip, bp, ep, op, np.uint16)


def _small32(c, xp, vp, ip, bp, ep, op):
    _small_rows(carray(c, (_C_LEN,)), xp, vp, ip, bp, ep, op, np.uint32)


def _small64(c, xp, vp, ip, bp, ep, op):
    _small_rows(carray(c, (_C_LEN,)), xp, vp, ip, bp, ep, op, np.uint64)


_BODIES = {np.uint16: _small16, np.uint32: _small32, np.uint64: _small64}


@cache
def _kernel(T):
    """The compiled lean path for keys of type ``T`` (compiled on first use, cached on
    disk) as a ctypes function; it lets go of the GIL."""
    i64 = types.int64
    sig = types.void(types.CPointer(i64), i64, i64, i64, i64, i64, i64)
    f = cfunc(sig, nopython=True, cache=True)(_BODIES[T])
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p, *[ctypes.c_int64] * 6)(f.address)


@cache
def _constants(dtype, rows, n, s0, s1, k, largest, order, has_values, fill, fill_index, offset,
               idx32) -> np.ndarray:  # fmt: skip
    """The constant descriptor of a call signature (``fill``: the fill value's 8 bytes
    as a double, see :func:`.cpu_backend._fill_bits`)."""
    _, _, bits, inf_bits = _LAYOUT[dtype]
    top = (1 << bits) - 1
    v = [0] * _C_LEN
    v[_C_ROWS], v[_C_N], v[_C_S0], v[_C_S1], v[_C_K] = rows, n, s0, s1, k
    v[_C_ORDER], v[_C_VALUES] = _ORDER_CODE[order], has_values
    v[_C_FILLB] = _fill_bits(fill, dtype) if has_values else 0
    v[_C_FILLI], v[_C_OFFSET], v[_C_IDX32] = fill_index, offset, idx32
    v[_C_SIGN], v[_C_ABSMASK], v[_C_INF] = 1 << (bits - 1), top >> 1, inf_bits
    v[_C_FLIP], v[_C_NANVAL] = (0, top) if largest else (top, 0)
    v[_C_KBITS], v[_C_IBITS] = bits, max(8, -(-max(n - 1, 1).bit_length() // 8) * 8)
    v[_C_SPAN] = (rows - 1) * s0 + (n - 1) * s1 + 1 if n > 0 else 0
    # unsigned 64-bit patterns as the int64 of the same bits
    c = np.array([(int(a) + 2**63) % 2**64 - 2**63 for a in v], dtype=np.int64)
    c.setflags(write=False)
    return c


_RAN: set = set()  # dtypes whose lean kernel has run (and so is compiled) here


def run_cpu_small(
    x: torch.Tensor,
    k: int,
    opt: TopkOptions,
    out_values: torch.Tensor | None,
    out_indices: torch.Tensor,
) -> None:
    """:func:`.cpu_backend.run_cpu` (same arguments and results), through the lean path
    for calls of short rows (:data:`SMALL_N`).

    >>> from deepselect.api import make_options
    >>> x = torch.tensor([[0.5, 2.0, -1.0, 2.0]])
    >>> i = torch.empty(1, 2, dtype=torch.int32)
    >>> run_cpu_small(x, 2, make_options(x, 2, order="value"), None, i)
    >>> i.tolist()
    [[1, 3]]
    """
    key = _call_key(x, k, opt, out_values, out_indices)
    call = _CALLS.get(key)
    if call is None or call[0] is not opt:  # (the entry holds opt: its id stays unique)
        call = _prepare(x, k, opt, out_values is not None, out_indices.dtype)
        if opt.begin is None and opt.end is None:  # a window's options are per call
            if len(_CALLS) >= 256:
                _CALLS.clear()
            _CALLS[key] = call
    fn = call[1]
    has_values = out_values is not None
    if _direct(call, x, out_values, out_indices):  # seen before, outputs written in place
        log_launch("cpu-small", x.dtype, x.shape, k, opt.order)
        vp = out_values.data_ptr() if has_values else 0
        fn(call[4], x.data_ptr(), vp, out_indices.data_ptr(), 0, 0, 0)
        return
    rows, n = x.shape
    if fn is None:
        if rows > 0:
            run_cpu(x, k, opt, out_values, out_indices)
        return
    log_launch("cpu-small", x.dtype, x.shape, k, opt.order)
    c = call[2]
    direct_i = out_indices.is_contiguous()
    oi = out_indices if direct_i else torch.empty((rows, k), dtype=out_indices.dtype)
    direct_v = not has_values or out_values.is_contiguous()
    ov = out_values if direct_v else torch.empty((rows, k), dtype=x.dtype)
    bp = ep = op = 0
    if opt.begin is not None or opt.end is not None:
        b, e = opt.window_bounds(rows, n, torch.device("cpu"))
        b, e = b.contiguous(), e.contiguous()
        bp, ep = b.data_ptr(), e.data_ptr()
    if isinstance(opt.index_offset, torch.Tensor):
        o = opt.offset_tensor(rows, torch.device("cpu")).contiguous()
        op = o.data_ptr()
    with compiling(x.dtype) if x.dtype not in _RAN else nullcontext():
        fn(c.ctypes.data, x.data_ptr() if n > 0 else 0, ov.data_ptr() if has_values else 0,
           oi.data_ptr(), bp, ep, op)  # fmt: skip
    _RAN.add(x.dtype)
    if not direct_i:
        out_indices.copy_(oi)
    if not direct_v:
        out_values.copy_(ov)


def _call_key(x, k, opt, out_values, out_indices) -> tuple:
    """A call's entry in :data:`_CALLS`."""
    return (id(opt), x.dtype, x.shape, x.stride(), k, out_values is None, out_indices.dtype)


def _direct(call: tuple, x, out_values, out_indices) -> bool:
    """Whether a prepared call goes straight to the compiled kernel: the lean path with
    no per-row tensors, outputs written in place, its kernel compiled here already."""
    return (
        call[3]
        and out_indices.is_contiguous()
        and (out_values is None or out_values.is_contiguous())
        and x.dtype in _RAN
    )


def hold(
    x: torch.Tensor,
    k: int,
    opt: TopkOptions,
    out_values: torch.Tensor | None,
    out_indices: torch.Tensor,
):
    """After a call of :func:`run_cpu_small` with these arguments: the same call as a
    function ``held(x, out_values, out_indices, begin, end) -> bool`` of new tensors of
    the same signature (shapes, strides, dtypes: the caller's guarantee; no windows),
    which calls the compiled kernel directly and returns True; or None where the call
    took another path (the streaming kernel, windows, offset tensors, outputs written
    through a copy). With DEBUG logging on it returns False (the caller's full path
    logs the call)."""
    call = _CALLS.get(_call_key(x, k, opt, out_values, out_indices))
    if call is None or call[0] is not opt or not _direct(call, x, out_values, out_indices):
        return None
    fn, addr, has_values = call[1], call[4], out_values is not None

    def held(x, out_values, out_indices, begin=None, end=None, _call=call) -> bool:
        if logger.isEnabledFor(logging.DEBUG):
            return False
        vp = out_values.data_ptr() if has_values else 0
        fn(addr, x.data_ptr(), vp, out_indices.data_ptr(), 0, 0, 0)
        return True

    return held


run_cpu_small.hold = hold  # (api: a backend's way to hold a call; see launch_cache.held)


# Calls by signature: (the options, the compiled function or None for the streaming
# kernel, the constant descriptor, whether the call has no per-row tensors, the
# descriptor's address)
_CALLS: dict[tuple, tuple] = {}


def _prepare(x: torch.Tensor, k: int, opt: TopkOptions, has_values: bool, index_dtype) -> tuple:
    rows, n = x.shape
    if rows == 0 or n > SMALL_N or rows * n > SMALL_WORK:
        return (opt, None, None, False, 0)
    fill = struct.pack("<d", opt.resolved_fill_value(x.dtype)) if has_values else None
    off = opt.index_offset
    off_tensor = isinstance(off, torch.Tensor)
    s0, s1 = x.stride()
    c = _constants(x.dtype, rows, n, s0, s1, k, opt.largest, opt.order, has_values, fill,
                   opt.fill_index, 0 if off_tensor or off is None else off,
                   index_dtype == torch.int32)  # fmt: skip
    plain = opt.begin is None and opt.end is None and not off_tensor and n > 0
    return (opt, _kernel(_LAYOUT[x.dtype][1]), c, plain, c.ctypes.data)
