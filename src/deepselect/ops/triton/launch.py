"""What every Triton launch passes, whatever the kernel: the raw integer view of the
input, the output order's code, windows and index offsets, fill bits, page maps, and
the register cap that fits a number of programs on an SM. Decided from shapes, dtypes
and options only."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from functools import cache

import torch
import triton

from ...options import Order, TopkOptions
from .common import _inf_bits

_ORDER_CODE = {Order.NONE: 0, Order.VALUE: 1, Order.INDEX: 2}


_RAW = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}


def _next_pow2(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


CROWDED_PER_SM = 3
"""Programs per SM of a crowded launch (:func:`stream_config`)."""


def occupancy_cap(programs_per_sm: int) -> int:
    """The register cap that fits ``programs_per_sm`` programs of 256 threads in an
    SM's 64K registers (a multiple of 8, at most 255): 80 for three."""
    return min((65536 // (256 * programs_per_sm)) // 8 * 8, 255)


@dataclass(frozen=True)
class PageMap:
    """Indices written as physical slots of a paged cache (the engine's paged indexer):
    position ``p`` of row ``r`` becomes ``table[b, p // page_size] * page_size +
    p % page_size`` with ``b = row_to_batch[r]`` (or ``r``); fills stay fills.

    table: int32 ``[batch, max_pages]`` with unit column stride; page_size: a power of
    two; row_to_batch: ``[rows]`` integer tensor or None."""

    table: torch.Tensor
    page_size: int
    row_to_batch: torch.Tensor | None = None


def page_arguments(page: PageMap | None, placeholder: torch.Tensor) -> tuple[tuple, dict]:
    """The kernels' page-table arguments and compile-time flags for ``page``."""
    if page is None:
        return (placeholder, 0, 0, 0, placeholder), {}
    t = page.table
    if t.numel() == 0:  # no pages: every slot reads page 0 (as the plain mapping does)
        t = torch.zeros((1, 1), dtype=torch.int32, device=t.device)
    r2b = page.row_to_batch
    return (
        (t, t.stride(0), t.shape[1], t.shape[0], r2b if r2b is not None else placeholder),
        dict(
            PAGED=True,
            PAGE_SHIFT=page.page_size.bit_length() - 1,
            HAS_R2B=r2b is not None,
        ),
    )


@dataclass(frozen=True)
class KeptRows:
    """A streaming launch that writes each row's sampling output in place of its top-k
    (``top_k_mask_logits`` and ``top_k_renorm_probs`` of :mod:`deepselect.engine`,
    launched by :mod:`deepselect.triton_sampling`; see ``ops.triton.sampling.kept_row``):
    the row's kept entries bitwise the input and -inf elsewhere, or, ``renorm``,
    ``p / sum`` of the kept ``p`` and ``0 / sum`` elsewhere.

    out: ``[rows, V]`` with unit column stride, the input's raw integer view (mask) or
    its dtype (renorm); k_rows: an int32/int64 ``[rows]`` per-row k (a row keeps its
    best ``min(k_rows[row], k)`` selected entries, or all of itself where ``k_rows[row]
    <= 0`` or ``>= V``), or None: every row keeps its k selected."""

    out: torch.Tensor
    k_rows: torch.Tensor | None
    renorm: bool


def kept_arguments(kept: KeptRows | None, dtype: torch.dtype) -> tuple[tuple, dict]:
    """The streaming kernel's ``fuse`` arguments and compile-time flags for ``kept``:
    Nones where there is none, which Triton compiles as constants (no parameters)."""
    if kept is None:
        return (None, None, None), {}
    return (kept.out, kept.out.stride(0), kept.k_rows), dict(
        FUSED=True,
        RENORM=kept.renorm,
        K_TENSOR=kept.k_rows is not None,
        FP16=dtype == torch.float16,
        NINF=_fill_bits(float("-inf"), dtype),
    )


def key_constants(dtype: torch.dtype, largest: bool) -> dict:
    """The compile-time arguments of a register-held selection's keys (the kernels'
    ``KEYS`` bundle): the key's mask and sign bit, the raw bits of infinity, the
    direction, 16-bit raw values or not."""
    bits = 16 if dtype in (torch.bfloat16, torch.float16) else 32
    return dict(
        KEY_MASK=(1 << bits) - 1,
        SIGN=1 << (bits - 1),
        INF_BITS=_inf_bits(bits, dtype == torch.float16),
        LARGEST=largest,
        RAW16=bits == 16,
    )


def bundle(groups: dict, flat: dict, defaults: dict | None = None) -> dict:
    """Keyword arguments by name (``flat``, where a member of a group left out takes
    its value from ``defaults``) as a kernel with tuple parameters takes them: each
    group of ``groups`` (a parameter's name and the names it bundles, in order) as one
    tuple, where it holds one of them or ``defaults`` all; the rest (launch options
    among them) as they are."""
    defaults = defaults or {}
    out = dict(flat)
    for name, members in groups.items():
        if any(m in out for m in members) or all(m in defaults for m in members):
            out[name] = tuple(out.pop(m) if m in out else defaults[m] for m in members)
    return out


def _fill_bits(value: float, dtype: torch.dtype) -> int:
    """The raw bit pattern of ``value`` in ``dtype`` (as the kernel's int16/int32 view),
    cached by the value's bits: -0.0 equals 0.0 as a key, and a NaN equals nothing."""
    return _fill_bits_of(struct.pack("<d", float(value)), dtype)


@cache
def _fill_bits_of(packed: bytes, dtype: torch.dtype) -> int:
    value = struct.unpack("<d", packed)[0]
    return int(torch.tensor(value, dtype=dtype).view(_RAW[dtype]).item())


def row_arguments(x: torch.Tensor, opt: TopkOptions, placeholder: torch.Tensor) -> tuple:
    """The kernels' per-row window and index-offset arguments: ``(window, begin, end,
    off_tensor, off_ptr, off_scalar)``; ``placeholder`` stands in for absent tensors.
    ``window`` (the kernels' HAS_WINDOW) has bit 0 set when a begin tensor is given
    and bit 1 when an end tensor is: an absent bound costs no tensor and no load."""
    window = (opt.begin is not None) | (opt.end is not None) << 1
    begin = opt.begin if opt.begin is not None else placeholder
    end = opt.end if opt.end is not None else placeholder
    off_tensor = isinstance(opt.index_offset, torch.Tensor)
    off_ptr = opt.index_offset if off_tensor else placeholder
    off_scalar = 0 if off_tensor or opt.index_offset is None else int(opt.index_offset)
    return window, begin, end, off_tensor, off_ptr, off_scalar


@cache  # Triton reads it once, when the kernels are defined; so do we (host time per call)
def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


SMEM_HIST_TRITON = (3, 6)
"""The oldest Triton whose ``tl.histogram`` reserves the shared memory that the
shared-memory histograms use (checked by the compile tests on 3.6, 3.8 and 3.9);
older releases keep ``tl.histogram``."""


def smem_hist() -> bool:
    """Whether the launches take their histograms from shared memory by atomics
    (inline PTX, ``ops.triton.sync._histogram``), not ``tl.histogram`` (which Triton 3.6
    lowers to warp votes): in GPU builds by a Triton of at least SMEM_HIST_TRITON (the
    interpreter runs no PTX)."""
    release = tuple(int(p) for p in triton.__version__.split(".")[:2])
    return not _interpreting() and release >= SMEM_HIST_TRITON
