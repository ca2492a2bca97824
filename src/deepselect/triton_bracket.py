"""The launch of :func:`~deepselect.ops.triton.bracket.bracket_rows_kernel`: one program a
row, the row read from memory once and from L2 after, selecting by a sampled bracket and
narrowing histograms (rows where k is a large share of the row). Decided from shapes
only, so a call can be captured in a CUDA graph."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch

from . import launch_cache
from .ops.triton.bracket import BRACKET_DEFAULTS, BRACKET_GROUPS, bracket_rows_kernel
from .ops.triton.launch import (
    _ORDER_CODE,
    _RAW,
    PageMap,
    _fill_bits,
    _interpreting,
    _next_pow2,
    bundle,
    key_constants,
    page_arguments,
    row_arguments,
    smem_hist,
)
from .options import Order, TopkOptions

_bracket_kernel = launch_cache.cached(bracket_rows_kernel)


@dataclass(frozen=True)
class BracketPlan:
    """One launch of a program a row (the defaults: the dispatch's, :data:`BRACKET`).

    warps: the program's warps, a run of the row each; vectors: 16-byte vectors a thread
    reads a step (a step: ``32 * vectors`` vectors a warp); sample: keys sampled for the
    bracket (a power of two). Each warp keeps a histogram of 256 bins (a narrowing read
    for each 8 bits the bracket spans)."""

    warps: int = 4
    vectors: int = 1
    sample: int = 256


BRACKET = BracketPlan()
"""The launch the dispatch takes (``triton_short.BRACKET_KP``): 4 warps, each reading its
own run of the row a 16-byte vector a thread at a time, each load a step ahead, a sample
of 256, the selection's positions staged at their output slots and its indices and
values written once after the loop (the measured reasons for each: docs/tuning.md)."""


def bracket_constants(
    dtype: torch.dtype,
    k: int,
    plan: BracketPlan,
    *,
    largest: bool,
    order: Order,
    has_window: int,
    off_tensor: bool,
    write_values: bool,
) -> dict:
    """The compile-time parameters of ``bracket_rows_kernel`` (the launch and a compile
    check without a GPU build the same kernel)."""
    bits = 16 if dtype in (torch.bfloat16, torch.float16) else 32
    per_vector = 128 // bits
    return dict(
        **key_constants(dtype, largest),
        ORDER=_ORDER_CODE[Order(order)],
        HAS_WINDOW=has_window,
        OFF_TENSOR=off_tensor,
        WRITE_VALUES=write_values,
        BLOCK=32 * plan.warps * plan.vectors * per_vector,
        S=plan.sample,
        LOG_NB=8,
        KP=max(16, _next_pow2(k)),
        SMEM_HIST=smem_hist(),
        ASM=not _interpreting(),
        WARPS=plan.warps,
    )


def bracket_signature(dtype: torch.dtype, idx64: bool) -> dict:
    """Argument types of ``bracket_rows_kernel`` by name, its tuple parameters' members
    apart (for ``scripts/compile_check.source``)."""
    raw = "*i16" if dtype in (torch.bfloat16, torch.float16) else "*i32"
    sig = dict(x_ptr=raw, stride_xr="i32", stride_xc="i32", N="i32", begin_ptr="*i64")
    sig.update(end_ptr="*i64", ov_ptr=raw, oi_ptr="*i64" if idx64 else "*i32")
    for name in ("stride_ovr", "stride_ovc", "stride_oir", "stride_oic"):
        sig[name] = "i32"
    sig.update(off_ptr="*i64", off_scalar="i32", fill_index="i32", fill_bits="i32", k="i32")
    sig.update(stage="*i32")
    sig.update(page_ptr="*i32", page_stride="i32", max_pages="i32", n_batch="i32")
    sig.update(r2b_ptr="*i64")
    return sig


def launch_options(plan: BracketPlan) -> dict:
    """The launch's options: warps, no software pipelining (its buffers would share the
    bins' bytes), registers up to 128 (without a bound, the ptxas of Triton 3.9 builds
    4 warps at 72 registers with spills)."""
    return dict(num_warps=plan.warps, num_stages=1, maxnreg=128)


@cache
def _launch_bundle(dtype, k, plan: BracketPlan, flags: tuple, page_flags: tuple, interp: bool):
    """The bundled launch arguments (``interp`` keys the cache: the stores' form
    follows it)."""
    kw = bracket_constants(dtype, k, plan, **dict(flags))
    kw.update(page_flags)
    kw.update(launch_options(plan))
    return bundle(BRACKET_GROUPS, kw, BRACKET_DEFAULTS)


def run_bracket(
    x: torch.Tensor,
    k: int,
    opt: TopkOptions,
    out_values: torch.Tensor | None,
    out_indices: torch.Tensor,
    plan: BracketPlan = BracketPlan(),
    page: PageMap | None = None,
) -> None:
    """Write the exact top-k of every row of ``x`` (``[rows, N]`` bf16 / fp16 / fp32, any
    strides) into ``out_values`` (``[rows, k]`` of ``x.dtype``, or None) and
    ``out_indices`` (``[rows, k]`` of ``opt.index_dtype``), with ``opt``'s windows,
    order, fills and offsets, by one launch of a program a row."""
    rows, n = x.shape
    if rows == 0 or k == 0:
        return
    raw = x.view(_RAW[x.dtype])
    has_window, begin, end, off_tensor, off_ptr, off_scalar = row_arguments(x, opt, out_indices)
    fill_bits = _fill_bits(opt.resolved_fill_value(x.dtype), x.dtype)
    page_args, page_flags = page_arguments(page, out_indices)
    write_values = out_values is not None
    ov = out_values.view(_RAW[x.dtype]) if write_values else raw
    ov_strides = (ov.stride(0), ov.stride(1)) if write_values else (0, 0)
    flags = (
        ("largest", opt.largest),
        ("order", opt.order),
        ("has_window", has_window),
        ("off_tensor", off_tensor),
        ("write_values", write_values),
    )
    kw = _launch_bundle(x.dtype, k, plan, flags, tuple(page_flags.items()), _interpreting())
    # the staged positions of a bracket's keys: in shared memory on a GPU, else here
    sel = kw["SEL"]
    stage = out_indices
    if not sel[4]:
        stage = torch.empty(rows, sel[6] << sel[2], dtype=torch.int32, device=x.device)
    _bracket_kernel[(rows,)](
        (raw, x.stride(0), x.stride(1), n),
        (begin, end),
        (ov, out_indices, *ov_strides, out_indices.stride(0), out_indices.stride(1)),
        (off_ptr, off_scalar),
        (opt.fill_index, fill_bits),
        k,
        stage,
        page_args,
        **kw,
    )
