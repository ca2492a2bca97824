"""Engine-facing operations built on :func:`deepselect.topk_rows`.

Two users of the library, in the words of their engines:

* **Sparse-attention indexers** — :func:`indexer_topk` turns a ``[rows, max_len]``
  score matrix with per-row valid lengths into int32 token positions, optionally
  shifted into a ragged (flattened) key buffer or mapped through a paged KV cache.
* **Samplers** — :func:`top_k_mask_logits`, :func:`top_k_renorm_probs`,
  :func:`top_k_sampling_from_logits`, :func:`top_k_sampling_from_probs` and the top-k/top-p
  samplers, with ``k`` an int or a per-row tensor.

Every argument that varies per row is a tensor read on its device: nothing here calls
``.item()``, ``.tolist()`` or reduces device data to a host value, so the operations are
safe inside CUDA graphs. Validation uses shapes, dtypes and devices only (and, for CPU
tensors, their values, which costs no device sync). Ties follow the library's single
order: larger value first, NaN largest, ties to the lowest index.
"""

from __future__ import annotations

import torch

from .api import check_dense, check_offset_tensor, sampling_kernels, topk_rows
from .keys import SUPPORTED_DTYPES
from .options import Order, TopkOptions

_INT_DTYPES = (torch.int32, torch.int64)
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_SCORE_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
# Slots are int32: a page id p is usable while p * page_size + page_size - 1 fits.
_INT32_MAX = 2**31 - 1
_MAX_PAGE_SIZE = 2**30
_MASK32 = 0xFFFFFFFF
# Odd multipliers below 2**31, so a 32-bit value times one stays below 2**63 and the
# int64 products never overflow (torch has no uint64 arithmetic on every device).
_MIX_A = 0x7FEB352D
_MIX_B = 0x5BD1E995
_GOLDEN = 0x9E3779B9


# --------------------------------------------------------------------------- checks


def _check_vector(name: str, t, rows: int, device: torch.device, dtypes=_INT_DTYPES) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(t).__name__}")
    check_dense(name, t)
    if t.dtype not in dtypes:
        names = " or ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise TypeError(f"{name} must have dtype {names}; got {t.dtype}")
    if t.dim() != 1 or t.shape[0] != rows:
        raise ValueError(f"{name} must have shape [rows] = [{rows}]; got {list(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name} must be on the input's device {device}; got {t.device}")


def _check_k_int(k) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int; got {type(k).__name__}")
    return k


def _check_2d_float(name: str, x) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(x).__name__}")
    check_dense(name, x)
    if x.dim() != 2:
        raise ValueError(f"{name} must be 2-D [rows, V]; got shape {list(x.shape)}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating tensor; got {x.dtype}")


def _on_cpu(t: torch.Tensor) -> bool:
    return t.device.type == "cpu"


# --------------------------------------------------------------------------- indexer


def indexer_topk(
    scores: torch.Tensor,
    lengths: torch.Tensor,
    k: int,
    *,
    starts: torch.Tensor | None = None,
    ragged_offsets: torch.Tensor | None = None,
    page_table: torch.Tensor | None = None,
    page_size: int | None = None,
    row_to_batch: torch.Tensor | None = None,
    order: str | Order = Order.NONE,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Top-k token positions of every indexer score row (sparse attention).

    Row ``r`` has valid scores at columns ``[starts[r], starts[r] + lengths[r])``; the
    result holds the columns of its k best scores (exact, ties to the lowest column),
    then ``-1`` where fewer than k columns are valid.

    **Position convention.** A selected position ``p`` is the *column of the score row*
    (``starts[r] <= p < starts[r] + lengths[r]``). Without options it is returned as is.
    With ``ragged_offsets`` the result is ``ragged_offsets[r] + p`` (a position in a
    flattened key buffer). With ``page_table`` it is the physical slot
    ``page_table[b, p // page_size] * page_size + p % page_size`` with
    ``b = row_to_batch[r]`` (default ``b = r``). Fills stay ``-1`` in every mode.

    Args:
        scores: ``[rows, max_len]`` fp32 / bf16 (fp16 too), any strides.
        lengths: ``[rows]`` int32/int64, valid scores per row (on the scores' device).
        k: positions per row, ``>= 1``.
        starts: ``[rows]`` int32/int64 first valid column per row (default 0).
        ragged_offsets: ``[rows]`` int32/int64 added to each selected position.
        page_table: ``[batch, max_pages]`` int32 page ids of each sequence.
        page_size: tokens per page, a power of two (1 allowed); required with
            ``page_table``.
        row_to_batch: ``[rows]`` int32/int64 sequence of each row (several query rows
            may share a sequence); only with ``page_table``.
        order: ``"none"`` (default, fastest), ``"index"`` (ascending position ``p``;
            in paged mode the order of ``p``, not of the physical slots) or ``"value"``.
        out: caller-owned ``[rows, k]`` int32 buffer to write into.

    Returns:
        int32 ``[rows, k]`` (``out`` when given).

    Raises:
        ValueError: ``ragged_offsets`` together with ``page_table``; ``page_size``
            without ``page_table`` or not a power of two; shapes/devices that do not
            match; on CPU, windows past ``max_len`` or pages past the table.

    >>> s = torch.tensor([[0.1, 0.9, 0.5, 0.7], [0.3, 0.2, 0.8, 0.0]])
    >>> indexer_topk(s, torch.tensor([4, 2]), 2, order="index").tolist()
    [[1, 3], [0, 1]]
    """
    if not isinstance(scores, torch.Tensor):
        raise TypeError(f"scores must be a torch.Tensor; got {type(scores).__name__}")
    check_dense("scores", scores)
    if scores.dim() != 2:
        raise ValueError(f"scores must be 2-D [rows, max_len]; got shape {list(scores.shape)}")
    allowed = _SCORE_DTYPES if _on_cpu(scores) else _SCORE_DTYPES[:3]
    if scores.dtype not in allowed:
        names = ", ".join(str(d).removeprefix("torch.") for d in allowed)
        raise TypeError(f"scores must have dtype {names}; got {scores.dtype}")
    k = _check_k_int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1; got {k}")
    rows, max_len = scores.shape
    dev = scores.device
    _check_vector("lengths", lengths, rows, dev)
    if starts is not None:
        _check_vector("starts", starts, rows, dev)
    if ragged_offsets is not None:
        _check_vector("ragged_offsets", ragged_offsets, rows, dev)
        if _on_cpu(ragged_offsets):  # on a device topk_rows asserts it (index_offset)
            check_offset_tensor("ragged_offsets", ragged_offsets, torch.int32, max_len)
        if page_table is not None:
            raise ValueError(
                "ragged_offsets and page_table are exclusive: a position is either shifted "
                "into a ragged buffer or mapped through pages, not both"
            )
    if page_table is None:
        if page_size is not None:
            raise ValueError("page_size is only valid together with page_table")
        if row_to_batch is not None:
            raise ValueError("row_to_batch is only valid together with page_table")
    else:
        if not isinstance(page_table, torch.Tensor):
            raise TypeError(f"page_table must be a torch.Tensor; got {type(page_table).__name__}")
        if page_table.dtype != torch.int32:
            raise TypeError(f"page_table must have dtype int32; got {page_table.dtype}")
        if page_table.dim() != 2:
            raise ValueError(
                f"page_table must be 2-D [batch, max_pages]; got shape {list(page_table.shape)}"
            )
        if page_table.device != dev:
            raise ValueError(
                f"page_table must be on the scores' device {dev}; got {page_table.device}"
            )
        if page_size is None:
            raise ValueError("page_size is required with page_table")
        if isinstance(page_size, bool) or not isinstance(page_size, int):
            raise TypeError(f"page_size must be an int; got {type(page_size).__name__}")
        if page_size < 1 or page_size & (page_size - 1) or page_size > _MAX_PAGE_SIZE:
            raise ValueError(
                f"page_size must be a power of two (1, 2, 4, ... 2**30); got {page_size}"
            )
        if row_to_batch is not None:
            _check_vector("row_to_batch", row_to_batch, rows, dev)
        elif page_table.shape[0] != rows:
            raise ValueError(
                f"without row_to_batch, page_table must have one row per score row "
                f"({rows}); got {page_table.shape[0]}"
            )
    order = Order.parse(order)
    if out is not None:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor or None; got {type(out).__name__}")
        if tuple(out.shape) != (rows, k) or out.dtype != torch.int32 or out.device != dev:
            raise ValueError(
                f"out must be int32 [{rows}, {k}] on {dev}; got {out.dtype} "
                f"{list(out.shape)} on {out.device}"
            )

    # without starts the lengths are the windows' ends as they are: no tensor is built
    begin = starts
    end = lengths if starts is None else starts.to(torch.int64) + lengths.to(torch.int64)
    if _on_cpu(scores) and rows:  # values of CPU tensors are free to check
        b = begin if begin is not None else torch.zeros_like(lengths)
        bad = (lengths < 0) | (b < 0) | (end > max_len)
        if bool(bad.any()):
            r = int(bad.nonzero()[0, 0])
            raise ValueError(
                f"each row needs 0 <= starts, 0 <= lengths and starts + lengths <= max_len "
                f"= {max_len}; row {r} has starts={int(b[r])}, lengths={int(lengths[r])}"
            )

    if page_table is None:
        _, idx = topk_rows(
            scores,
            k,
            order=order,
            begin=begin,
            end=end,
            index_offset=ragged_offsets,
            fill_index=-1,
            index_dtype=torch.int32,
            return_values=False,
            out_indices=out,
        )
        return idx

    if _fused_pages(scores, k, out):
        # the page map is applied in the kernels' output write: no extra passes
        from .ops.triton.launch import PageMap
        from .triton_backend import run_triton

        res = out if out is not None else torch.empty((rows, k), dtype=torch.int32, device=dev)
        table = _guarded_table(page_table, page_size)
        table = table if table.stride(1) == 1 else table.contiguous()
        opt = TopkOptions(order=order, begin=begin, end=end, fill_index=-1)
        run_triton(scores, k, opt, None, res, page=PageMap(table, page_size, row_to_batch))
        return res
    return _paged_positions(scores, k, order, begin, end, page_table, page_size, row_to_batch, out)


def _paged_positions(
    scores, k, order, begin, end, page_table, page_size: int, row_to_batch, out
) -> torch.Tensor:
    """:func:`indexer_topk` through a page table where the kernels cannot map the
    positions in their output write: the positions, then the table's slots by torch
    gathers (validated on the CPU, clamped on a device)."""
    rows, dev = scores.shape[0], scores.device
    _, pos = topk_rows(
        scores,
        k,
        order=order,
        begin=begin,
        end=end,
        fill_index=-1,
        index_dtype=torch.int64,
        return_values=False,
    )
    batch = (
        row_to_batch.to(torch.int64)
        if row_to_batch is not None
        else torch.arange(rows, dtype=torch.int64, device=dev)
    )
    n_batch, max_pages = page_table.shape
    if _on_cpu(scores) and rows:
        if row_to_batch is not None and bool(((batch < 0) | (batch >= n_batch)).any()):
            raise ValueError(f"row_to_batch values must lie in [0, batch = {n_batch})")
        if bool((end > max_pages * page_size).any()):
            raise ValueError(
                f"page_table covers {max_pages} pages of {page_size} = "
                f"{max_pages * page_size} positions; some row reaches past that"
            )
        _check_pages_cpu(page_table, page_size, batch, begin, end)
    valid = pos >= 0
    p = pos.clamp(min=0)
    shift = page_size.bit_length() - 1
    # Clamped gathers: on a device, out-of-table input must not turn into a fault.
    page_col = (p >> shift).clamp(max=max(max_pages - 1, 0))
    flat = batch.clamp(0, max(n_batch - 1, 0))[:, None] * max_pages + page_col
    if page_table.numel() == 0:
        phys = torch.zeros_like(p)
    else:
        phys = page_table.reshape(-1).to(torch.int64)[flat.reshape(-1)].view_as(p)
    within = p & (page_size - 1)
    slot = phys * page_size + within
    bad = valid & ((phys < 0) | (phys >= _page_cap(page_size)))
    # a bad id under a real position: -2**31 + p % page_size, as the fused kernels write
    slot = torch.where(bad, within - 2**31, slot)
    result = torch.where(valid, slot, torch.full_like(slot, -1)).to(torch.int32)
    if out is None:
        return result
    out.copy_(result)
    return out


def _check_pages_cpu(table, page_size: int, batch, begin, end) -> None:
    """ValueError unless every page under a valid position of a row (its window
    ``[begin, end)``) has an id in ``[0, 2**31 / page_size)``: one whose slots fit int32."""
    rows = batch.shape[0]
    shift = page_size.bit_length() - 1
    b = begin.to(torch.int64) if begin is not None else torch.zeros(rows, dtype=torch.int64)
    e = end.to(torch.int64)
    cols = torch.arange(table.shape[1])[None, :]
    under = (cols >= (b >> shift)[:, None]) & (cols <= ((e - 1) >> shift)[:, None])
    under &= (e > b)[:, None]
    ids = table.to(torch.int64)[batch]
    bad = under & ((ids < 0) | (ids >= _page_cap(page_size)))
    if bool(bad.any()):
        r, c = (int(v) for v in bad.nonzero()[0])
        raise ValueError(
            f"page_table ids under a row's valid positions must lie in [0, "
            f"{_page_cap(page_size) - 1}] (int32 slots of page_size {page_size}); row {r} "
            f"reads page {c} with id {int(ids[r, c])}"
        )


def _page_cap(page_size: int) -> int:
    """The first page id whose slots do not fit int32."""
    return 2**31 // page_size


def _guarded_table(table: torch.Tensor, page_size: int) -> torch.Tensor:
    """``table`` with every id that has no int32 slots (negative, or ``>= 2**31 /
    page_size``) replaced by one whose slot the kernels' int32 store turns into
    ``-2**31 + p % page_size``: distinct from the fill -1 and from every real slot.
    Three elementwise passes over the (small) table, on its device, no sync."""
    cap = _page_cap(page_size)
    if page_size == 1:  # every non-negative int32 id fits; -2**31 is its own slot
        return torch.where(table < 0, -(2**31), table)
    # cap * page_size = 2**31, which the int32 store wraps to -2**31
    return torch.where(table < 0, cap, table.clamp(max=cap))


def _fused_pages(scores: torch.Tensor, k: int, out: torch.Tensor | None) -> bool:
    """Whether the paged indexer runs with the page map fused into the Triton kernels'
    output write (CUDA, the one-pass kernels' k, a unit-stride output buffer)."""
    from .triton_backend import MAX_FAST_K

    return scores.device.type == "cuda" and k <= MAX_FAST_K and (out is None or out.stride(1) == 1)


# --------------------------------------------------------------------------- sampling


def _check_k(x: torch.Tensor, k, k_max: int | None):
    """The validated ``(k, m)``: ``k`` an int ``>= 0`` or an integer ``[rows]`` tensor;
    ``m`` how many entries each row's selection needs (``min(k_max, V)`` for a tensor,
    ``k`` for an int ``0 < k < V``, 0 where no row needs one)."""
    rows, v = x.shape
    if isinstance(k, torch.Tensor):
        _check_vector("k", k, rows, x.device)
        if k_max is None:
            k_max = v
        elif isinstance(k_max, bool) or not isinstance(k_max, int) or k_max < 1:
            raise ValueError(f"k_max must be an int >= 1; got {k_max!r}")
        if _on_cpu(k) and rows and bool(((k > k_max) & (k < v)).any()):
            raise ValueError(f"k must be <= k_max = {k_max} (or >= V = {v}) in every row")
        return k, (min(k_max, v) if rows and v else 0)
    if k_max is not None:
        raise ValueError("k_max is only meaningful when k is a per-row tensor")
    k = _check_k_int(k)
    if k < 0:
        raise ValueError(f"k must be >= 0; got {k}")
    return k, (k if 0 < k < v and rows else 0)


def _keep_mask(x: torch.Tensor, k, k_max: int | None) -> torch.Tensor:
    """Boolean ``[rows, V]``: True on each row's top-k under the library's order.

    ``k <= 0`` or ``k >= V`` keeps the whole row (FlashInfer's convention for 0)."""
    k, m = _check_k(x, k, k_max)
    if m == 0:
        return torch.ones_like(x, dtype=torch.bool)
    if isinstance(k, torch.Tensor):
        # Sorted by value, so rank j of a row is its (j+1)-th best: keep ranks < k[row].
        _, idx = topk_rows(x, m, order=Order.VALUE, return_values=False, index_dtype=torch.int64)
        ranks = torch.arange(m, device=x.device)[None, :]
        take = ranks < k.to(torch.int64)[:, None]
        keep = torch.zeros_like(x, dtype=torch.bool)
        keep.scatter_(1, idx, take)
        return keep | ((k <= 0) | (k >= x.shape[1]))[:, None]
    _, idx = topk_rows(x, k, return_values=False, index_dtype=torch.int64)
    keep = torch.zeros_like(x, dtype=torch.bool)
    keep.scatter_(1, idx, True)
    return keep


def _uses_kernels(x: torch.Tensor) -> bool:
    """Whether ``x`` takes the fused sampling kernels (:func:`.api.sampling_kernels`):
    CUDA tensors of the kernels' dtypes. CPU tensors keep the torch definitions, which
    the tests compare the kernels against."""
    return x.device.type == "cuda" and x.dtype in SUPPORTED_DTYPES


def _selection(x: torch.Tensor, m: int, best_first: bool):
    """``(values, int32 indices)`` ``[rows, m]`` of each row's selection, best first
    or in any order (the cheaper select), or ``(None, None)`` where no row needs one
    (``m == 0``)."""
    if m == 0:
        return None, None
    return topk_rows(x, m, order=Order.VALUE if best_first else Order.NONE)


def _kept_rows(
    x: torch.Tensor, k, k_max, *, renorm: bool, one_launch: bool | None = None
) -> torch.Tensor:
    """:func:`top_k_mask_logits` (or, ``renorm``, :func:`top_k_renorm_probs`) on the
    kernels: one launch where the select streams (its programs write the rows), else
    the select, then a pass (the kept sums before it for renorm). The select is in
    any order wherever the pass can rank it itself (:func:`.triton_sampling.best_first`):
    an unsorted select of one row is the radix passes, ~10 us less than a sorted one
    at k = 512.
    ``one_launch``: None decides by shape (:func:`.triton_sampling.fuses`); the tests
    and ``benchmarks/sampling_fused_variants.py`` force either path."""
    k, m = _check_k(x, k, k_max)
    kernels = sampling_kernels()
    if kernels.fuses(x, m) if one_launch is None else one_launch and m > 0:
        return kernels.kept_rows(x, k, m, renorm=renorm)
    sel = _selection(x, m, kernels.best_first(k, m))
    return (kernels.renorm_rows if renorm else kernels.mask_rows)(x, k, *sel)


def _int_view(x: torch.Tensor) -> torch.Tensor:
    return x.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()])


def top_k_mask_logits(logits: torch.Tensor, k: int | torch.Tensor, *, k_max: int | None = None):
    """Keep each row's top-k logits, set the rest to ``-inf``.

    Args:
        logits: ``[rows, V]`` fp32 / bf16 / fp16 (fp64 on CPU).
        k: an int, or an int32/int64 tensor ``[rows]`` on the logits' device. ``k <= 0``
            or ``k >= V`` keeps the whole row.
        k_max: with a tensor ``k``, an upper bound on every ``k[row]`` the caller
            guarantees (default ``V``); a smaller bound makes the selection cheaper.
            Rows with ``k_max < k < V`` are an error (checked on CPU; on a device
            they keep only ``k_max``).

    Returns:
        ``[rows, V]`` of the logits' dtype; kept entries are bitwise the input. Ties at
        the k-th value go to the lowest index, so exactly k entries survive.

    >>> top_k_mask_logits(torch.tensor([[1.0, 3.0, 3.0, 2.0]]), 2).tolist()
    [[-inf, 3.0, 3.0, -inf]]
    """
    _check_2d_float("logits", logits)
    grad = logits.requires_grad and torch.is_grad_enabled()
    if not grad and _uses_kernels(logits):
        return _kept_rows(logits, k, k_max, renorm=False)
    keep = _keep_mask(logits, k, k_max)
    if grad:
        return _MaskLogits.apply(logits, keep)
    return _masked(logits, keep)


def _masked(logits: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    # Select on bit patterns: a float where() may rewrite NaN payloads on the CPU.
    ninf = torch.full((), float("-inf"), dtype=logits.dtype, device=logits.device)
    bits = torch.where(keep, _int_view(logits.contiguous()), _int_view(ninf.reshape(1)))
    return bits.view(logits.dtype)


class _MaskLogits(torch.autograd.Function):
    """:func:`top_k_mask_logits` with its gradient: through the kept entries, zero
    through the masked ones (the mask is piecewise constant in the logits)."""

    @staticmethod
    def forward(ctx, logits, keep):
        ctx.save_for_backward(keep)
        return _masked(logits, keep)

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return torch.where(keep, grad, torch.zeros((), dtype=grad.dtype, device=grad.device)), None


def top_k_renorm_probs(probs: torch.Tensor, k: int | torch.Tensor, *, k_max: int | None = None):
    """Zero each row outside its top-k and renormalise the row to sum to 1.

    Args:
        probs: ``[rows, V]`` non-negative floats (need not sum to 1).
        k, k_max: as in :func:`top_k_mask_logits`.

    Returns:
        ``[rows, V]`` of the probs' dtype (sums accumulated in fp32 or wider). A row
        whose kept entries sum to 0 becomes NaN, like any 0/0.

    >>> top_k_renorm_probs(torch.tensor([[0.0, 0.375, 0.125, 0.125]]), 2).tolist()
    [[0.0, 0.75, 0.25, 0.0]]
    """
    _check_2d_float("probs", probs)
    if _uses_kernels(probs):
        return _kept_rows(probs, k, k_max, renorm=True)
    keep = _keep_mask(probs, k, k_max)
    acc = torch.promote_types(probs.dtype, torch.float32)
    kept = torch.where(keep, probs.to(acc), torch.zeros((), dtype=acc, device=probs.device))
    return (kept / kept.sum(dim=1, keepdim=True)).to(probs.dtype)


def _mix32(h: torch.Tensor) -> torch.Tensor:
    """An avalanche mix of 32-bit values held in int64 (all ops stay below 2**63)."""
    h = ((h ^ (h >> 16)) * _MIX_A) & _MASK32
    h = ((h ^ (h >> 15)) * _MIX_B) & _MASK32
    h = ((h ^ (h >> 16)) * _MIX_A) & _MASK32
    return h ^ (h >> 15)


def counter_uniform(seeds: torch.Tensor, n: int) -> torch.Tensor:
    """Counter-based uniforms in (0, 1): ``[rows, n]`` fp32, a pure function of
    ``(seeds[row], column)``, so the same seed gives the same numbers on any device.

    >>> u = counter_uniform(torch.tensor([7]), 4)
    >>> bool(((u > 0) & (u < 1)).all()), torch.equal(u, counter_uniform(torch.tensor([7]), 4))
    (True, True)
    """
    return _uniform_at(seeds, torch.arange(n, dtype=torch.int64, device=seeds.device)[None, :])


def _uniform_at(seeds: torch.Tensor, col: torch.Tensor) -> torch.Tensor:
    """:func:`counter_uniform`'s numbers at the int64 columns ``col`` (``[rows, m]``, or
    ``[1, m]`` for every row)."""
    s = seeds.to(torch.int64)
    lo, hi = s & _MASK32, (s >> 32) & _MASK32
    key = _mix32(lo ^ _mix32(hi ^ _GOLDEN))[:, None]
    h = _mix32(key ^ _mix32((col * _GOLDEN + 1) & _MASK32))
    return _unit_interval(_mix32(h ^ key))


def _unit_interval(h: torch.Tensor) -> torch.Tensor:
    """The top 23 of ``h``'s 32 bits as a float32 strictly inside (0, 1): 23 bits and
    the half fit float32's 24-bit significand exactly (with 24 bits, 2^24 - 0.5 would
    round up to 2^24 and give 1.0, whose Gumbel score is NaN)."""
    return ((h >> 9).to(torch.float32) + 0.5) * (1.0 / (1 << 23))


def _check_temperature(temperature, rows: int, device: torch.device):
    """A float ``> 0`` or a float ``[rows]`` tensor (values checked on the CPU only)."""
    if isinstance(temperature, torch.Tensor):
        _check_vector("temperature", temperature, rows, device, dtypes=_FLOAT_DTYPES)
        if _on_cpu(temperature) and rows and not bool((temperature > 0).all()):
            raise ValueError("temperature must be > 0 in every row")
        return temperature.to(torch.float32)[:, None]
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool):
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0; got {temperature}")
        return float(temperature)
    raise TypeError(f"temperature must be a float or a tensor; got {type(temperature).__name__}")


def top_k_sampling_from_logits(
    logits: torch.Tensor,
    k: int | torch.Tensor,
    *,
    temperature: float | torch.Tensor = 1.0,
    generator: torch.Generator | None = None,
    seeds: torch.Tensor | None = None,
    k_max: int | None = None,
) -> torch.Tensor:
    """Sample one token per row from the softmax of its top-k logits / temperature.

    Args:
        logits: ``[rows, V]`` floats (finite in the kept set; NaN logits count as the
            largest and would make the row's probabilities NaN).
        k, k_max: as in :func:`top_k_mask_logits` (``k <= 0`` or ``>= V``: whole row).
        temperature: a float ``> 0`` or a float tensor ``[rows]`` (values ``> 0``).
        generator: a ``torch.Generator`` for ``torch.multinomial`` (reproducible for a
            fixed state). Without it or ``seeds``, a device draws as with ``seeds``
            drawn from torch's default generator (on the kernels; the CPU keeps
            ``torch.multinomial``).
        seeds: ``[rows]`` int64 per-row seeds instead: Gumbel-max with
            :func:`counter_uniform`, so each row's draw depends only on its seed, its
            logits and its k — not on the batch around it. Exclusive with ``generator``.

    Returns:
        int64 ``[rows]`` token ids, always inside the row's top-k set.

    >>> g = torch.Generator().manual_seed(0)
    >>> int(top_k_sampling_from_logits(torch.tensor([[0.0, 5.0, 1.0]]), 1, generator=g)[0])
    1
    """
    _check_2d_float("logits", logits)
    rows, v = logits.shape
    if v == 0:
        raise ValueError("logits must have at least one column to sample from")
    _check_randomness(rows, logits.device, generator, seeds)
    temp = _check_temperature(temperature, rows, logits.device)
    seeds = _device_seeds(logits, generator, seeds)
    if seeds is not None and _uses_kernels(logits):
        return _fused_draw(logits, k, k_max, seeds, temp)
    cols, base = _kept_columns(logits, k, k_max)
    scores = base / temp
    # A row without a distribution (its largest scaled logit not finite: all kept
    # logits -inf, a NaN or +inf among them, or logit / temperature past fp32) takes
    # its top-1: the largest kept logit, NaN largest, ties to the lowest column.
    top = cols.expand(rows, -1).gather(1, torch.argmax(base, dim=1, keepdim=True)).squeeze(1)
    return _draw(scores, cols, top, seeds, generator)


def _fused_draw(x, k, k_max, seeds, temp) -> torch.Tensor:
    """The seeded draw on the kernels: the select (best first for a per-row k, whose
    ranks decide what is kept), then one program per row over its kept entries.
    ``temp`` is :func:`_check_temperature`'s, or None for probabilities."""
    k, m = _check_k(x, k, k_max)
    sel = _selection(x, m, isinstance(k, torch.Tensor))  # a per-row k: its best by position
    kernels = sampling_kernels()
    if temp is None:
        return kernels.gumbel_draw(x, k, *sel, seeds, from_probs=True)
    return kernels.gumbel_draw(
        x, k, *sel, seeds, temp[:, 0] if isinstance(temp, torch.Tensor) else temp
    )


def _kept_columns(x: torch.Tensor, k, k_max) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cols, base)``: the int64 columns a draw scores (ascending in each row, so that
    ties in an argmax go to the lowest column) and their values in fp32. With an int
    ``0 < k < V`` only the k kept columns: the same draw as over the masked row, without
    hashing or exponentiating the V - k that cannot win; else every column, the ones
    outside the top-k at ``-inf``."""
    v = x.shape[1]
    if not isinstance(k, torch.Tensor) and k_max is None and 0 < _check_k_int(k) < v:
        _, cols = topk_rows(x, k, order=Order.INDEX, return_values=False, index_dtype=torch.int64)
        return cols, x.gather(1, cols).to(torch.float32)
    cols = torch.arange(v, dtype=torch.int64, device=x.device)[None, :]
    return cols, top_k_mask_logits(x, k, k_max=k_max).to(torch.float32)


def _draw(scores, cols, top, seeds, generator) -> torch.Tensor:
    """One column per row from the softmax of the fp32 ``scores`` ``[rows, m]`` over the
    int64 columns ``cols`` (``[rows, m]`` or ``[1, m]``, ascending in each row so that
    an exact tie in the Gumbel argmax goes to the lowest column). A row whose largest
    score is not finite (no distribution) returns ``top[row]`` instead."""
    rows = scores.shape[0]
    if seeds is not None:  # Gumbel-max
        best, pick = torch.max(scores - torch.log(-torch.log(_uniform_at(seeds, cols))), dim=1)
        ok = torch.isfinite(best)
    else:
        ok = torch.isfinite(scores.amax(dim=1))
        probs = torch.softmax(scores, dim=1)
        probs = torch.where(ok[:, None], probs, 0.0)
        probs[:, 0] += (~ok).to(probs.dtype)  # any valid row for multinomial; replaced below
        pick = torch.multinomial(probs, 1, generator=generator).squeeze(1)
    tok = cols.expand(rows, -1).gather(1, pick.reshape(rows, 1)).squeeze(1)
    return torch.where(ok, tok, top)


# Row sums of probabilities must be within this of 1 on the CPU (checked in fp64): fp32
# rounding over a vocabulary of ~10**6 stays far below it; 16-bit rows get 1e-2.
PROBS_SUM_TOL = {
    torch.float64: 1e-4,
    torch.float32: 1e-4,
    torch.float16: 1e-2,
    torch.bfloat16: 1e-2,
}


def _check_randomness(rows: int, device: torch.device, generator, seeds) -> None:
    if generator is not None and seeds is not None:
        raise ValueError("generator and seeds are exclusive: give one or neither")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator; got {type(generator).__name__}")
    if seeds is not None:
        _check_vector("seeds", seeds, rows, device, dtypes=(torch.int64,))


def _device_seeds(x: torch.Tensor, generator, seeds):
    """The per-row seeds of a draw: ``seeds``; or, on a device with the kernels and
    without ``generator`` either, seeds drawn from torch's default generator for the
    device, so that a plain call takes the seeded kernels (reproducible under
    ``torch.manual_seed``); else None (``torch.multinomial``, with ``generator``)."""
    if seeds is not None or generator is not None or not _uses_kernels(x):
        return seeds
    return torch.randint(-(2**62), 2**62, (x.shape[0],), dtype=torch.int64, device=x.device)


def _check_probs(probs) -> None:
    """2-D floats; on the CPU also: no NaN, nothing negative, rows summing to 1 within
    :data:`PROBS_SUM_TOL` (a device tensor is not read on the host)."""
    _check_2d_float("probs", probs)
    if probs.shape[1] == 0:
        raise ValueError("probs must have at least one column to sample from")
    if not _on_cpu(probs) or probs.numel() == 0:
        return
    if bool(probs.isnan().any()):
        raise ValueError("probs must not hold NaN")
    if bool((probs < 0).any()):
        raise ValueError("probs must be >= 0")
    tol = PROBS_SUM_TOL[probs.dtype]
    err = (probs.to(torch.float64).sum(dim=1) - 1).abs()
    if not bool((err <= tol).all()):  # inf sums fail here too
        row = int(torch.argmax(torch.where(err.isnan(), float("inf"), err)))
        raise ValueError(
            f"probs rows must sum to 1 within {tol}; row {row} sums to "
            f"{float(probs[row].double().sum())}"
        )


def _check_top_p(top_p, rows: int, device: torch.device):
    """A float in (0, 1] or a float ``[rows]`` tensor (values checked on the CPU)."""
    if isinstance(top_p, torch.Tensor):
        _check_vector("top_p", top_p, rows, device, dtypes=_FLOAT_DTYPES)
        if _on_cpu(top_p) and rows and not bool(((top_p > 0) & (top_p <= 1)).all()):
            raise ValueError("top_p must be in (0, 1] in every row (NaN is not)")
        return top_p.to(torch.float64)[:, None]
    if isinstance(top_p, (int, float)) and not isinstance(top_p, bool):
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1]; got {top_p}")
        return float(top_p)
    raise TypeError(f"top_p must be a float or a tensor; got {type(top_p).__name__}")


def _int_k_selects(x: torch.Tensor, k, k_max) -> bool:
    """Whether ``k`` is an int that selects part of each row (``0 < k < V``)."""
    return not isinstance(k, torch.Tensor) and k_max is None and 0 < _check_k_int(k) < x.shape[1]


def _ranked_kept(x: torch.Tensor, k, k_max):
    """Each row's top-k columns best first (value descending, NaN largest, ties to the
    lowest column): int64 ``cols [rows, m]`` and bool ``kept [rows, m]`` (rank < k)."""
    rows, v = x.shape
    if _int_k_selects(x, k, k_max):
        _, cols = topk_rows(x, k, order=Order.VALUE, return_values=False, index_dtype=torch.int64)
        return cols, torch.ones_like(cols, dtype=torch.bool)
    keep = _keep_mask(x, k, k_max)  # validates k and k_max; whole rows for k <= 0, >= V
    if rows == 0:
        cols = torch.zeros((0, v), dtype=torch.int64, device=x.device)
        return cols, torch.ones_like(cols, dtype=torch.bool)
    _, cols = topk_rows(x, v, order=Order.VALUE, return_values=False, index_dtype=torch.int64)
    return cols, keep.gather(1, cols)


def _top_p_kernel(x, k, k_max, seeds, p, temp) -> torch.Tensor:
    """The seeded top-k, top-p draw on the kernels: the select best first (``k``
    entries for an int ``0 < k < V``; else ``k_max``, or
    :data:`.triton_sampling.TOP_P_RANKS`, of them), then one program a row over it,
    reading the row again only where the ranks that stay reach past it. ``p``,
    ``temp``: as the checks return them (``temp`` None for probabilities)."""
    k, _ = _check_k(x, k, k_max)
    kernels = sampling_kernels()
    v = x.shape[1]
    if isinstance(k, torch.Tensor) or not 0 < k < v:
        m = min(kernels.TOP_P_RANKS if k_max is None else k_max, v)
    else:
        m = k
    squeeze = lambda t: t[:, 0] if isinstance(t, torch.Tensor) else t  # noqa: E731
    return kernels.top_p_draw(
        x, k, None, None, seeds, squeeze(p), 1.0 if temp is None else squeeze(temp),
        from_probs=temp is None,
        select=(m, lambda end: topk_rows(x, m, order=Order.VALUE, end=end)),
    )  # fmt: skip


def _top_p_draw(vals, weights, cols, kept, top_p, seeds, generator, from_probs: bool):
    """Top-p over ranked columns, then the draw.

    ``vals`` are the scores in rank order (logit / temperature, or the probabilities),
    ``weights`` their probabilities within the top-k set (any positive scale). Rank j
    stays when the mass of ranks < j is below ``top_p`` times the kept mass; rank 0
    always stays, ``top_p >= 1`` keeps the whole top-k set."""
    acc = torch.float64
    w = torch.where(kept, weights.to(acc), torch.zeros((), dtype=acc, device=cols.device))
    total = w.sum(dim=1, keepdim=True)
    # Exclusive prefix sums as a shifted cumsum (subtracting w from it could round).
    before = torch.cat([torch.zeros_like(w[:, :1]), torch.cumsum(w, dim=1)[:, :-1]], dim=1)
    rank0 = torch.zeros_like(kept)
    rank0[:, :1] = True
    keep = kept & ((before < top_p * total) | rank0)
    if isinstance(top_p, torch.Tensor):
        keep = keep | (kept & (top_p >= 1))
    elif top_p >= 1:
        keep = kept
    v32 = vals.to(torch.float32)
    scores = torch.log(v32) if from_probs else v32
    scores = torch.where(keep, scores, float("-inf"))
    top = cols[:, 0]  # rank 0: the largest, NaN largest, ties to the lowest column
    # Ascending columns, so an exact tie in the Gumbel argmax goes to the lowest column.
    cols, perm = torch.sort(cols, dim=1)
    return _draw(scores.gather(1, perm), cols, top, seeds, generator)


def top_k_sampling_from_probs(
    probs: torch.Tensor,
    k: int | torch.Tensor,
    *,
    generator: torch.Generator | None = None,
    seeds: torch.Tensor | None = None,
    k_max: int | None = None,
) -> torch.Tensor:
    """Sample one token per row with probability proportional to ``probs`` over the
    row's top-k (the kept probabilities renormalised).

    Args:
        probs: ``[rows, V]`` floats, each row >= 0 and summing to 1 within
            :data:`PROBS_SUM_TOL` (checked on the CPU, ``ValueError`` naming ``probs``).
        k, k_max: as in :func:`top_k_mask_logits` (``k <= 0`` or ``>= V``: whole row).
        generator, seeds: as in :func:`top_k_sampling_from_logits`; with ``seeds`` the
            draw is Gumbel-max over ``log(probs)`` of the kept columns.

    Returns:
        int64 ``[rows]`` token ids inside the row's top-k set. A row whose kept mass is
        0 — or, on a device, where values are not checked, whose kept entries hold a
        negative, NaN or infinite probability — returns its top-1 (the largest kept
        probability, NaN largest, ties to the lowest column).

    >>> int(top_k_sampling_from_probs(torch.tensor([[0.1, 0.6, 0.3]]), 1,
    ...                               seeds=torch.tensor([3]))[0])
    1
    """
    _check_probs(probs)
    rows = probs.shape[0]
    _check_randomness(rows, probs.device, generator, seeds)
    seeds = _device_seeds(probs, generator, seeds)
    if seeds is not None and _uses_kernels(probs):
        return _fused_draw(probs, k, k_max, seeds, None)
    cols, base = _kept_columns(probs, k, k_max)
    top = cols.expand(rows, -1).gather(1, torch.argmax(base, dim=1, keepdim=True)).squeeze(1)
    # log(-inf) is NaN: the masked entries go back to -inf, log(0) = -inf never wins.
    scores = torch.where(base == float("-inf"), float("-inf"), torch.log(base))
    return _draw(scores, cols, top, seeds, generator)


def top_k_top_p_sampling_from_logits(
    logits: torch.Tensor,
    k: int | torch.Tensor,
    top_p: float | torch.Tensor,
    *,
    temperature: float | torch.Tensor = 1.0,
    generator: torch.Generator | None = None,
    seeds: torch.Tensor | None = None,
    k_max: int | None = None,
) -> torch.Tensor:
    """Sample one token per row after top-k, then top-p, over softmax(logits / temperature).

    The exact top-k comes first; its tokens are ranked by logit descending, ties to the
    lowest column, and the smallest prefix whose probability (renormalised over the
    top-k) reaches ``top_p`` is kept: rank j stays when the ranks before it hold less
    than ``top_p``. A tie at the cut goes to the lowest column; rank 0 always stays.

    Args:
        logits, k, k_max, temperature, generator, seeds: as in
            :func:`top_k_sampling_from_logits`.
        top_p: a float in ``(0, 1]`` or a float tensor ``[rows]``. On the CPU anything
            else (NaN included) is a ``ValueError`` naming ``top_p``; on a device the
            tensor is not read on the host: ``top_p <= 0`` or NaN keeps only the top-1,
            ``top_p > 1`` keeps the whole top-k set.

    Returns:
        int64 ``[rows]`` token ids inside the kept set. Rows without a distribution
        take their top-1 as in :func:`top_k_sampling_from_logits`.

    >>> int(top_k_top_p_sampling_from_logits(torch.tensor([[0.0, 5.0, 1.0]]), 3, 0.5,
    ...                                      seeds=torch.tensor([3]))[0])
    1
    """
    _check_2d_float("logits", logits)
    rows, v = logits.shape
    if v == 0:
        raise ValueError("logits must have at least one column to sample from")
    _check_randomness(rows, logits.device, generator, seeds)
    temp = _check_temperature(temperature, rows, logits.device)
    p = _check_top_p(top_p, rows, logits.device)
    seeds = _device_seeds(logits, generator, seeds)
    if seeds is not None and _uses_kernels(logits):
        return _top_p_kernel(logits, k, k_max, seeds, p, temp)
    cols, kept = _ranked_kept(logits, k, k_max)
    scaled = logits.gather(1, cols).to(torch.float32) / temp
    weights = torch.softmax(torch.where(kept, scaled, float("-inf")), dim=1)
    return _top_p_draw(scaled, weights, cols, kept, p, seeds, generator, from_probs=False)


def top_k_top_p_sampling_from_probs(
    probs: torch.Tensor,
    k: int | torch.Tensor,
    top_p: float | torch.Tensor,
    *,
    generator: torch.Generator | None = None,
    seeds: torch.Tensor | None = None,
    k_max: int | None = None,
) -> torch.Tensor:
    """:func:`top_k_top_p_sampling_from_logits` over probabilities: top-k, then the
    smallest prefix (probability descending, ties to the lowest column) holding
    ``top_p`` of the kept mass, then a draw proportional to ``probs``.

    Args:
        probs: as in :func:`top_k_sampling_from_probs` (checked on the CPU).
        k, k_max, generator, seeds: as in :func:`top_k_sampling_from_probs`.
        top_p: as in :func:`top_k_top_p_sampling_from_logits`.

    Returns:
        int64 ``[rows]`` token ids inside the kept set; rows without a distribution
        take their top-1 as in :func:`top_k_sampling_from_probs`.

    >>> int(top_k_top_p_sampling_from_probs(torch.tensor([[0.1, 0.6, 0.3]]), 3, 0.5,
    ...                                     seeds=torch.tensor([3]))[0])
    1
    """
    _check_probs(probs)
    rows, _ = probs.shape
    _check_randomness(rows, probs.device, generator, seeds)
    p = _check_top_p(top_p, rows, probs.device)
    seeds = _device_seeds(probs, generator, seeds)
    if seeds is not None and _uses_kernels(probs):
        return _top_p_kernel(probs, k, k_max, seeds, p, None)
    cols, kept = _ranked_kept(probs, k, k_max)
    vals = probs.gather(1, cols)
    return _top_p_draw(vals, vals, cols, kept, p, seeds, generator, from_probs=True)
