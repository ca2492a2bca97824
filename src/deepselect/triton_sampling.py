"""Launches of the sampling kernels (:mod:`.ops.triton.sampling`): the engine's GPU
path for ``top_k_mask_logits``, ``top_k_renorm_probs`` and the seeded top-k draws.

Where the select runs the streaming kernel (:func:`fuses`), the masked or
renormalised rows come from one launch of it (:func:`kept_rows`): each program writes
its row's output once the row's selection is final. Elsewhere, and for the draws, the
engine selects first (:func:`deepselect.topk_rows`) and hands the selection here:
``vals`` / ``idx`` ``[rows, m]``, contiguous, best first where :func:`best_first` says
so (and for the draws with a per-row ``k``, ``m = k_max``), in any order elsewhere (an
int ``k``: ``m = k``), or None where an int ``k`` keeps every row (``k <= 0`` or
``k >= V``). Each function writes into buffers it is
given or allocates them; every decision is from shapes, so a call can be captured in a
CUDA graph (no host sync, no value read on the host)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton

from . import launch_cache
from .ops.triton.common import _inf_bits
from .ops.triton.launch import _RAW, KeptRows, _fill_bits, _interpreting, _next_pow2
from .ops.triton.sampling import gumbel_draw_kernel, keep_rows_kernel, kept_sums_kernel
from .ops.triton.top_p import PART_WORDS, top_p_draw_kernel, top_p_part_kernel
from .options import Order, TopkOptions
from .triton_backend import LaunchConfig, run_triton, sm_count, streams
from .triton_short import smem_hist

# after a signature's first launch, launches skip Triton's per-call argument binding
_sums = launch_cache.cached(kept_sums_kernel)
_keep = launch_cache.cached(keep_rows_kernel)
_draw = launch_cache.cached(gumbel_draw_kernel)
_top_p = launch_cache.cached(top_p_draw_kernel)
_top_p_part = launch_cache.cached(top_p_part_kernel)

TILE_BYTES = 16 << 10
"""Bytes of input per program of the streaming pass (4096 fp32): 32 bytes per thread
of 4 warps, two 16-byte loads in flight each; large enough that the threshold's one
load per program is a small share of the program's time."""

MIN_TILE_BYTES = 2 << 10
"""The smallest tile, for few rows: more programs to spread one row over the SMs."""

MIN_PROGRAMS = 1024
"""Tiles shrink (down to :data:`MIN_TILE_BYTES`) until the pass has this many programs:
about 8 per SM of an H100/H200, enough loads in flight at batch 1."""

DRAW_BLOCK = 1024
"""Entries per step of the draw's loop (one step for k <= 1024)."""

RANK_MAX = 1024
"""The largest per-row selection (``k_max``) that the mask and renorm passes rank
themselves (one sort of the row's selection in every program, from L2), so that the
select may leave it in any order; a larger one is selected best first."""

TOP_P_RANKS = 1024
"""The entries a row's top-p draw selects (best first) where ``k`` does not bound
them (a per-row ``k`` without ``k_max``, or a whole row): a row whose ranks that stay
reach past them is read again (:func:`top_p_draw`), a bounded but slower path."""

TOP_P_ROUNDS = 16
"""At most this many candidates of a whole row's top-p draw without its cut
(``ops.triton.top_p._draw_by_rounds``: the row's best Gumbel score, found in the read
for its sum, then one read to check a candidate and one for the next; about ``1 + ln(1
/ top_p)`` are needed); then the cut's radix descent, as for a row of ``k`` past the
selection."""

PART_ROUNDS = 3
"""Candidates of a whole row read in parts (:func:`_split_parts`) that the parts check,
a launch each (each launch also finds the next candidate); a row none of them draws
goes on from there in the draw's launch, in one program (``TOP_P_ROUNDS``). One with
a per-row k, whose rows are seldom whole. The first candidate goes about 1 time in 10
at top_p 0.9, each later one less often: the parts draw all but about 1 row in 10,000
(an undecided flat row of 129,280 costs ~260 us in one program:
docs/notes/2026-12-07-top-p-parts-first.md)."""

READ_BLOCK = 1024
"""Entries a step of :func:`top_p_draw`'s other reads of a row (its sum, the rounds,
the draw): eight a thread of the program's 128, each step's loaded during the step
before, so that a program has loads in flight (measured against 512:
docs/notes/2026-12-06-top-p-past-the-selection.md)."""

ROW_BLOCK = 256
"""Entries a step of :func:`top_p_draw`'s passes over a row: at least the program's
threads (``32 * NUM_WARPS``), as its shared-memory sums need."""

SPLIT_MAX_ROWS = 64
"""Top-p draws of at most this many rows, where some may keep the whole row, read each
row by several programs (:func:`_split_parts`) before the draw's launch, where one
program a row would leave most SMs idle (more rows gain nothing:
docs/notes/2026-12-06-top-p-past-the-selection.md)."""

SPLIT_PROGRAMS_PER_SM = 4
"""Programs of the split first read and check that run at once on an SM (4 warps each;
at ``PART_BLOCK`` 512, 88-103 registers, four fit): a row's parts fill the SMs once,
not more."""

PART_BLOCK = 512
"""Entries a step of a part's reads: half a read's ``READ_BLOCK``, so that a part holds
half the registers (sm_90: 88-103 against 158-189) and twice as many parts run at once
(a part's launch was bound by its programs' serial reads at two an SM:
docs/notes/2026-12-07-top-p-parts-first.md)."""

NUM_WARPS = 4

_BY_VALUE = TopkOptions(order=Order.VALUE)  # the two-launch path's select


def fuses(x: torch.Tensor, m: int) -> bool:
    """Whether ``top_k_mask_logits`` / ``top_k_renorm_probs`` of ``x`` with a selection
    of ``m`` per row (0: none needed) take :func:`kept_rows`: where the select of the
    two-launch path runs the streaming kernel, whose programs then write the rows
    instead (the short and split paths' programs hold slices of rows, not rows). From
    shapes only."""
    return m > 0 and streams(x, m, _BY_VALUE)


def stream_tile(rows: int, v: int, elem_size: int) -> int:
    """Elements per program of :func:`keep_rows_kernel`'s pass over ``[rows, v]``.

    >>> stream_tile(4096, 129280, 4), stream_tile(1, 129280, 4)
    (4096, 512)
    """
    tile = TILE_BYTES // elem_size
    while tile * elem_size > MIN_TILE_BYTES and rows * triton.cdiv(v, tile) < MIN_PROGRAMS:
        tile //= 2
    return tile


def _key_args(dtype: torch.dtype) -> dict:
    bits = 8 * torch.empty((), dtype=dtype).element_size()
    fp16 = dtype == torch.float16
    return dict(KEY_BITS=bits, INF_BITS=_inf_bits(bits, fp16), FP16=fp16)


def _k_args(k, x: torch.Tensor, vals: torch.Tensor | None, idx: torch.Tensor | None):
    """``(k_ptr, k_scalar, K_TENSOR, vals, idx, m)``; placeholders where nothing was
    selected (an int k that keeps every row)."""
    tensor = isinstance(k, torch.Tensor)
    if vals is None:
        vals, idx, m = x, x, 1
    else:
        m = vals.shape[1]
    return (k if tensor else x), (0 if tensor else int(k)), tensor, vals, idx, m


def mask_rows(x: torch.Tensor, k, vals, idx, out: torch.Tensor | None = None) -> torch.Tensor:
    """``out [rows, V]`` (the input's dtype, unit column stride): each row's kept
    entries bitwise ``x``, ``-inf`` elsewhere. One launch."""
    return _keep_rows(x, k, vals, idx, out, renorm=False)


def renorm_rows(x: torch.Tensor, k, vals, idx, out: torch.Tensor | None = None) -> torch.Tensor:
    """``out [rows, V]``: ``p / (sum of the row's kept p)`` where kept, ``0 / sum``
    elsewhere (fp32 sums and quotients; a zero sum gives NaN). Two launches: the kept
    sums from the selected values, then the pass."""
    return _keep_rows(x, k, vals, idx, out, renorm=True)


def kept_rows(
    x: torch.Tensor,
    k,
    m: int,
    *,
    renorm: bool,
    config: LaunchConfig | None = None,
    grid: int | None = None,
) -> torch.Tensor:
    """``[rows, V]`` of ``x``'s dtype: :func:`mask_rows` (or, ``renorm``,
    :func:`renorm_rows`, the kept sums in fp32 from the selected values) in one launch
    of the streaming kernel, which selects ``1 <= m <= 4096`` entries of each row and
    writes its output from them: a row keeps them all (an int ``k``), its best
    ``min(k[row], m)`` (a per-row ``k`` tensor) or itself whole (``k[row] <= 0`` or
    ``>= V``). ``config``, ``grid``: as :func:`.triton_backend.run_triton` takes them
    (tests drive many blocks and compactions with small ones)."""
    rows, v = x.shape
    out = torch.empty((rows, v), dtype=x.dtype, device=x.device)
    if rows == 0 or v == 0:
        return out
    dst = out if renorm else out.view(_RAW[x.dtype])
    kept = KeptRows(dst, k if isinstance(k, torch.Tensor) else None, renorm)
    # no top-k output: the index buffer only stands in for absent tensors
    run_triton(x, m, TopkOptions(), None, dst, config=config, grid=grid, kept=kept)
    return out


def best_first(k, m: int) -> bool:
    """Whether :func:`mask_rows` and :func:`renorm_rows` need a selection of ``m`` per
    row best first: a per-row ``k`` with ``m > RANK_MAX``. Elsewhere any order does
    (the cheaper select): the pass ranks it itself.

    >>> best_first(50, 4096), best_first(torch.ones(2), 1024), best_first(torch.ones(2), 1025)
    (False, False, True)
    """
    return isinstance(k, torch.Tensor) and m > RANK_MAX


def _keep_rows(x, k, vals, idx, out, *, renorm: bool) -> torch.Tensor:
    rows, v = x.shape
    if out is None:
        out = torch.empty((rows, v), dtype=x.dtype, device=x.device)
    if rows == 0 or v == 0:
        return out
    raw = x.view(_RAW[x.dtype])
    k_ptr, k_scalar, k_tensor, vals, idx, m = _k_args(k, x, vals, idx)
    vals = vals.view(_RAW[x.dtype])
    keys = _key_args(x.dtype)
    first = best_first(k, m)
    # a per-row k's selection ranked in one block; a scalar k's worst in steps of one
    rank = 16 if first else min(RANK_MAX, max(16, _next_pow2(m)))
    sums = thr = out  # unused without renorm
    if renorm:  # the sums, and a per-row k's thresholds where the sums rank them
        sums = launch_cache.scratch((rows,), torch.float32, x.device)
        thr = launch_cache.scratch((rows,), torch.int64, x.device)
        _sums[(rows,)](
            raw, raw.stride(0), raw.stride(1), vals, idx, k_ptr, k_scalar, sums, thr, v, m,
            K_TENSOR=k_tensor, KEY_BITS=keys["KEY_BITS"], INF_BITS=keys["INF_BITS"],
            FP16=keys["FP16"], BEST_FIRST=first, BLOCK=RANK_MAX, RANK_BLOCK=rank,
            num_warps=NUM_WARPS,
        )  # fmt: skip
    dst = out if renorm else out.view(_RAW[x.dtype])
    tile = stream_tile(rows, v, x.element_size())
    _keep[(rows, triton.cdiv(v, tile))](
        raw, raw.stride(0), raw.stride(1), vals, idx, k_ptr, k_scalar, sums, thr,
        dst, dst.stride(0), v, m,
        K_TENSOR=k_tensor, RENORM=renorm, NINF=_fill_bits(float("-inf"), x.dtype),
        TILE=tile, BEST_FIRST=first, RANK_BLOCK=rank, num_warps=NUM_WARPS, **keys,
    )  # fmt: skip
    return out


def gumbel_draw(
    x: torch.Tensor,
    k,
    vals,
    idx,
    seeds: torch.Tensor,
    temperature: float | torch.Tensor = 1.0,
    *,
    from_probs: bool = False,
) -> torch.Tensor:
    """int64 ``[rows]``: each row's seeded Gumbel-max draw over its kept entries (the
    engine's ``_draw`` with ``seeds``), the top-1 where the row has no distribution.

    ``temperature``: a float or a float ``[rows]`` tensor (logits only); ``from_probs``
    scores ``log(p)`` instead of ``logit / temperature``. One launch."""
    rows, v = x.shape
    out = torch.empty(rows, dtype=torch.int64, device=x.device)
    if rows == 0:
        return out
    raw = x.view(_RAW[x.dtype])
    k_ptr, k_scalar, k_tensor, vals, idx, m = _k_args(k, x, vals, idx)
    temp_tensor = isinstance(temperature, torch.Tensor)
    block = DRAW_BLOCK if vals is x else min(DRAW_BLOCK, max(_next_pow2(m), 128))
    _draw[(rows,)](
        raw, raw.stride(0), raw.stride(1), vals.view(_RAW[x.dtype]), idx, k_ptr, k_scalar,
        seeds, temperature if temp_tensor else x, 1.0 if temp_tensor else float(temperature),
        out, v, m,
        K_TENSOR=k_tensor, TEMP_TENSOR=temp_tensor, FROM_PROBS=from_probs,
        PRECISE_LOG=not _interpreting(), BLOCK=block, num_warps=NUM_WARPS,
        **_key_args(x.dtype),
    )  # fmt: skip
    return out


def fixed_scale(v: int) -> float:
    """The scale of a row's fixed-point weights (``ops.triton.top_p._fixed``: a weight
    in ``[0, 1]`` times it, rounded to an int64): a power of two at which ``v`` of them
    sum below ``2**62``."""
    return float(2 ** (62 - max(v, 1).bit_length()))


def _part_block() -> int:
    """Entries a step of the parts' reads: ``PART_BLOCK``, or ``READ_BLOCK`` where that
    is smaller."""
    return min(PART_BLOCK, READ_BLOCK)


def _split_parts(rows: int, v: int, k, device: torch.device) -> tuple[int, int]:
    """``(S, L)``: each row's first read and check in ``S`` parts of ``L`` columns (a
    multiple of the parts' block, :func:`_part_block`), or ``(1, v)`` (none: many rows,
    short rows, or an int ``k`` that keeps no whole row)."""
    whole = isinstance(k, torch.Tensor) or k <= 0 or k >= v
    block = _part_block()
    if rows > SPLIT_MAX_ROWS or v < 2 * block or not whole:
        return 1, v
    # as many programs as run at once, not more: one more than fit makes a second wave
    # as long as the first (at two an SM, 64 rows in 5 parts made 320 programs for 264)
    slots = SPLIT_PROGRAMS_PER_SM * sm_count(device)
    parts = max(1, min(slots // rows, triton.cdiv(v, block)))
    length = triton.cdiv(triton.cdiv(v, parts), block) * block
    return triton.cdiv(v, length), length


def top_p_draw(
    x: torch.Tensor,
    k: int | torch.Tensor,
    vals: torch.Tensor | None,
    idx: torch.Tensor | None,
    seeds: torch.Tensor,
    top_p: float | torch.Tensor,
    temperature: float | torch.Tensor = 1.0,
    *,
    from_probs: bool = False,
    select: tuple[int, Callable] | None = None,
) -> torch.Tensor:
    """int64 ``[rows]``: each row's seeded draw after its top-k (``k`` an int or an
    integer ``[rows]`` tensor; ``<= 0`` or ``>= V``: the whole row) and top-p, as
    ``engine._top_p_draw`` defines it, from its ``m`` selected entries ``vals`` /
    ``idx`` (``[rows, m]``, best first, ``m >= 1``), reading the row itself where the
    ranks that stay reach past them. ``top_p``: a float or an fp64 ``[rows]`` tensor;
    ``temperature``: a float or a float ``[rows]`` tensor (logits only). One launch,
    after the parts' ``PART_ROUNDS + 1`` where a few whole rows are read in parts
    (``_split_parts``), which draw most of those rows themselves.

    ``select = (m, fn)`` in place of ``vals`` and ``idx`` (None): ``fn(end)`` selects
    them, ``end`` None (whole rows) or an int64 ``[rows]`` of the rows' window ends.
    Probabilities read in parts then select after the parts, only the rows whose
    candidate the parts did not draw (the others' windows empty); with an int ``k``
    (every row whole) they select nothing: the parts' top-1 of each row stands for the
    selection (``m = 1``; a row the parts leave reads itself in the draw's launch)."""
    m = vals.shape[1] if select is None else select[0]
    rows, v = x.shape
    out = torch.empty(rows, dtype=torch.int64, device=x.device)
    if rows == 0:
        return out
    p_tensor = isinstance(top_p, torch.Tensor)
    p_ptr, p_scalar = (top_p, 1.0) if p_tensor else (x, float(top_p))
    temp_tensor = isinstance(temperature, torch.Tensor)
    k_tensor = isinstance(k, torch.Tensor)
    keys = _key_args(x.dtype)
    # the descents' bin sums: shared-memory atomics; else in registers, 256 a step's
    # entry (a Triton older than SMEM_HIST_TRITON on a GPU: short steps, slow)
    smem = smem_hist()
    fix = fixed_scale(v)
    parts, length = _split_parts(rows, v, k, x.device)
    first = select is not None and from_probs and parts > 1
    top1 = first and not k_tensor  # every row whole: the parts' top-1 is the selection
    if top1:
        m = 1
        vals = launch_cache.scratch((rows, 1), x.dtype, x.device)
        idx = launch_cache.scratch((rows, 1), torch.int32, x.device)
    if select is not None and not first:
        vals, idx = select[1](None)
    row_args = (
        x.view(_RAW[x.dtype]), x.stride(0), x.stride(1),
        x.view(_RAW[x.dtype]) if first else vals.view(_RAW[x.dtype]),  # (no best needed)
        k if k_tensor else x, 0 if k_tensor else int(k), seeds,
        temperature if temp_tensor else x, 1.0 if temp_tensor else float(temperature),
    )  # fmt: skip
    row_flags = dict(K_TENSOR=k_tensor, TEMP_TENSOR=temp_tensor, FROM_PROBS=from_probs,
                     PRECISE_LOG=not _interpreting(), READ_BLOCK=READ_BLOCK, **keys)  # fmt: skip
    sp = _next_pow2(parts)  # (parts past the row's end hold none of it)
    ws, slot = out, 0
    if parts > 1:  # the first read and its check rounds by rows x sp programs
        ws = launch_cache.scratch((rows, sp, PART_WORDS.value), torch.int64, x.device)
        cnt = launch_cache.scratch((rows,), torch.int32, x.device)
        ends = out  # (a placeholder of the same type)
        if first and not top1:
            ends = launch_cache.scratch((rows,), torch.int64, x.device)
        tops = (vals.view(_RAW[x.dtype]), idx) if top1 else (row_args[0], cnt)
        # (a per-row k seldom keeps a whole row: one round, no launches for the rare one)
        rounds = 1 if k_tensor else PART_ROUNDS
        for rnd in range(rounds + 1):
            check = 0 if rnd == 0 else 1 if rnd == rounds else 2  # 2: it picks the next
            _top_p_part[(rows, sp)](
                *row_args, ws, v, m, fix, length, p_scalar, (p_ptr, ends, cnt, out, *tops),
                rnd, SP=sp, CHECK=check, P_TENSOR=p_tensor, FIRST=2 if top1 else int(first),
                num_warps=NUM_WARPS, **{**row_flags, "READ_BLOCK": _part_block()},
            )  # fmt: skip
        # the last round's candidate (the draw's rounds check it again), or the first
        slot = (rounds - 1) % 2 if rounds else 0
    if first and not top1:
        vals, idx = select[1](ends)
    xr, vals_raw, draw_args = row_args[:3], vals.view(_RAW[x.dtype]), row_args[4:]
    _top_p[(rows,)](
        xr, vals_raw, idx, *draw_args, p_ptr, p_scalar, out, v, m, fix, (ws, slot),
        P_TENSOR=p_tensor, SMEM=smem, BLOCK=min(DRAW_BLOCK, max(_next_pow2(m), 128)),
        ROW_BLOCK=ROW_BLOCK if smem or _interpreting() else 32, ROUNDS=TOP_P_ROUNDS,
        SP=sp,
        num_warps=NUM_WARPS, **row_flags,
    )  # fmt: skip
    return out
