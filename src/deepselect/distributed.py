"""Top-k over rows sharded along their last dimension across a process group.

Each rank holds a ``[rows, n_r]`` shard of every row (shards of any, uneven, even
empty sizes; rank r's shard starts at global position ``n_0 + ... + n_{r-1}``). The
exact global top-k is found with one small exchange instead of gathering the rows:

1. **Metadata.** One tiny ``all_gather`` of a small int64 vector per rank (rows,
   dtype, k, order, largest, index dtype, window presence, dst, the shard size and
   any ``shard_sizes`` claim) before any data moves. Every rank checks the same
   table, so every rank raises the same error or none does: a call that differs
   between ranks, or that one rank refuses, never leaves a rank waiting in a
   collective or returns garbage. A rank's offset is the exclusive prefix sum of the
   gathered sizes; it stays on the device.
2. **Local select.** Every rank takes its shard's exact top-k with
   :func:`deepselect.topk_rows` in *index order*, with the shard offset added, so the
   candidates carry global indices. Any element of the global top-k is in its shard's
   top-k (at most k elements of the shard beat it), so the union is exact.
3. **One exchange.** Values (as raw bit patterns, so NaN payloads survive) and global
   indices are packed into one byte buffer per rank and exchanged by a single
   ``all_gather_into_tensor`` (or ``gather`` to one rank): ``k * world *
   (value bytes + index bytes)`` per row, see :func:`exchange_bytes`.
4. **Merge** (:func:`merge_candidates`). Rank r's candidates precede rank r+1's and
   are in ascending index order within a rank, so a candidate's position is monotone
   in its global index. The valid ones are moved to the front of the row by a
   cumsum-and-scatter (fills last, order kept), and :func:`deepselect.topk_rows`
   selects among them with ``end = valid count`` — lowest position wins ties, which
   is the lowest global index. Positions are mapped back to global indices.

The result is bit-identical to :func:`deepselect.topk_rows` on the unsharded rows
(same order, ties, NaN rules, fills). Nothing on the path reads device data on the
host: windows and offsets are translated on the device.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist

from .api import (
    _check_int_vector,
    as_bool,
    check_dense,
    check_index_scalars,
    check_offset_tensor,
    topk_rows,
)
from .options import Order, TopkOptions

__all__ = ["topk", "merge_candidates", "exchange_bytes", "gather_bytes"]

# Marks a missing candidate (a fill of a local select) in the exchanged buffer.
# Global indices are >= 0, so it cannot collide with a real one.
_MISSING = -1

_BITS_DTYPE = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits_dtype(dtype: torch.dtype) -> torch.dtype:
    return _BITS_DTYPE[torch.empty((), dtype=dtype).element_size()]


def _all_gather(t: torch.Tensor, world: int, group) -> torch.Tensor:
    """``[world, *t.shape]``: every rank's ``t``, by one all-gather into one buffer."""
    # concatenated along dim 0 (the layout gloo demands; NCCL takes it too)
    out = torch.empty((world * t.shape[0], *t.shape[1:]), dtype=t.dtype, device=t.device)
    # newer torch renames all_gather_into_tensor to all_gather_single
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(out, t.contiguous(), group=group)
    return out.view(world, *t.shape)


def exchange_bytes(
    k: int, world: int, value_dtype: torch.dtype, index_dtype: torch.dtype = torch.int32
) -> int:
    """Bytes of candidates one rank receives per row: ``k * world * (value + index bytes)``.

    >>> exchange_bytes(512, 2, torch.float32, torch.int32)
    8192
    """
    vb = torch.empty((), dtype=value_dtype).element_size()
    ib = torch.empty((), dtype=index_dtype).element_size()
    return k * world * (vb + ib)


def gather_bytes(n: int, value_dtype: torch.dtype) -> int:
    """Bytes of one whole row of ``n`` values (what gathering the row would move).

    >>> gather_bytes(129_280, torch.float32)
    517120
    """
    return n * torch.empty((), dtype=value_dtype).element_size()


def merge_candidates(
    value_bits: torch.Tensor,
    indices: torch.Tensor,
    k: int,
    dtype: torch.dtype,
    options: TopkOptions | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k of every row from the ranks' candidate lists.

    Args:
        value_bits: ``[world, rows, c]`` integer tensor, the raw bit patterns of the
            candidates' values (int16 for bf16/fp16, int32 for fp32, int64 for fp64).
        indices: ``[world, rows, c]`` int32/int64 global indices; ``-1`` marks a
            missing candidate. Within ``[r, row]`` the real candidates come first,
            in ascending index order, and every index of rank r is below every index
            of rank r+1 (what index-ordered local selects of consecutive shards give).
        k: elements per row of the result.
        dtype: the values' floating dtype.
        options: ``largest``, ``order``, ``fill_value``, ``fill_index``,
            ``index_offset`` and ``index_dtype`` of the result (windows are ignored:
            they were applied by the local selects).

    Returns:
        ``(values [rows, k] of dtype, indices [rows, k] of options.index_dtype)``,
        identical to :func:`deepselect.topk_rows` on the concatenated rows.

    >>> bits = torch.tensor([[[1.0, 3.0]], [[3.0, 0.0]]]).view(torch.int32)
    >>> idx = torch.tensor([[[0, 1]], [[2, -1]]])
    >>> v, i = merge_candidates(bits, idx, 2, torch.float32)
    >>> i.tolist(), v.tolist()
    ([[1, 2]], [[3.0, 3.0]])
    """
    opt = options or TopkOptions()
    world, rows, c = indices.shape
    dev = indices.device
    # [rows, world * c]: position order = rank order, then index order within a rank
    vb = value_bits.permute(1, 0, 2).reshape(rows, world * c)
    gi = indices.permute(1, 0, 2).reshape(rows, world * c).to(torch.int64)
    valid = gi != _MISSING
    count = valid.sum(dim=1)
    # valid ones to the front, missing ones after them, both in their original order
    vi = valid.to(torch.int64)
    dest = torch.where(valid, vi.cumsum(1) - 1, count[:, None] + (1 - vi).cumsum(1) - 1)
    vb = torch.empty_like(vb).scatter_(1, dest, vb)
    gi = torch.empty_like(gi).scatter_(1, dest, gi)
    _, pos = topk_rows(
        vb.view(dtype),
        k,
        largest=opt.largest,
        order=opt.order,
        end=count,
        index_dtype=torch.int64,
        return_values=False,
    )
    real = pos >= 0
    pos = pos.clamp(min=0)
    out_idx = torch.gather(gi, 1, pos) + opt.offset_tensor(rows, dev)[:, None]
    out_idx = torch.where(real, out_idx, torch.full_like(out_idx, opt.fill_index))
    fill = torch.tensor(opt.resolved_fill_value(dtype), dtype=dtype).view(vb.dtype).to(dev)
    out_bits = torch.where(real, torch.gather(vb, 1, pos), fill)
    return out_bits.view(dtype), out_idx.to(opt.index_dtype)


_DTYPE_CODE = {torch.bfloat16: 1, torch.float16: 2, torch.float32: 3, torch.float64: 4}
_ORDER_CODE = {Order.NONE: 0, Order.VALUE: 1, Order.INDEX: 2}
_INDEX_CODE = {torch.int32: 32, torch.int64: 64}
# What every rank must agree on, in the order it is checked: the metadata's columns
# after "refused"; then come each rank's shard size and its shard_sizes claim.
_AGREED = ("rows", "dtype", "k", "order", "largest", "index_dtype", "begin", "end", "dst")
_AGREED_NAMES = {"begin": "whether begin is given", "end": "whether end is given"}


def _validate(x_local, k, largest, order, begin, end, index_offset, fill_value, fill_index,
              index_dtype, dst, world, shard_sizes):  # fmt: skip
    """This rank's own argument checks (no collective): raises what is wrong here."""
    if not isinstance(x_local, torch.Tensor):
        raise TypeError(f"x_local must be a torch.Tensor; got {type(x_local).__name__}")
    check_dense("x_local", x_local)
    if x_local.dim() != 2:
        raise ValueError(f"x_local must be 2-D [rows, n_r]; got shape {list(x_local.shape)}")
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int; got {type(k).__name__}")
    if k < 1:
        raise ValueError(f"k must be >= 1; got {k}")
    as_bool("largest", largest)
    Order.parse(order)
    if index_dtype not in (torch.int32, torch.int64):
        raise TypeError(f"index_dtype must be torch.int32 or torch.int64; got {index_dtype}")
    rows = x_local.shape[0]
    for name, t in (("begin", begin), ("end", end)):
        if t is not None:
            _check_int_vector(name, t, rows, x_local.device)
    if isinstance(index_offset, torch.Tensor):
        _check_int_vector("index_offset", index_offset, rows, x_local.device)
    check_index_scalars(index_offset, fill_index, index_dtype, 0)  # types; ranges later
    if fill_value is not None and not isinstance(fill_value, (int, float)):
        raise TypeError(f"fill_value must be a number or None; got {type(fill_value).__name__}")
    if dst is not None and (isinstance(dst, bool) or not isinstance(dst, int)):
        raise TypeError(f"dst must be an int rank of the group or None; got {dst!r}")
    if world is not None and dst is not None and not 0 <= dst < world:
        raise ValueError(f"dst must be a rank of the group, 0 <= dst < {world}; got {dst}")
    if world is not None and shard_sizes is not None:
        sizes = list(shard_sizes)
        if len(sizes) != world or any(isinstance(s, bool) or not isinstance(s, int) for s in sizes):
            raise ValueError(f"shard_sizes must be {world} ints (one per rank); got {sizes!r}")


def _metadata(x_local, k, largest, order, begin, end, index_dtype, dst, world, shard_sizes,
              refused: bool) -> list[int]:  # fmt: skip
    """This rank's row of the metadata exchange (all -1 after a refusal)."""
    if refused:
        return [1] + [-1] * (len(_AGREED) + 1 + world)
    rows, n = x_local.shape
    claim = list(shard_sizes) if shard_sizes is not None else [-1] * world
    return [
        0, rows, _DTYPE_CODE.get(x_local.dtype, 0), k, _ORDER_CODE[Order.parse(order)],
        int(bool(largest)), _INDEX_CODE[index_dtype], int(begin is not None),
        int(end is not None), -1 if dst is None else dst, n, *claim,
    ]  # fmt: skip


def _agree(table: list[list[int]], local_error: Exception | None) -> None:
    """Raise on every rank alike when a rank refused its arguments or the ranks' calls
    differ (``table``: every rank's :func:`_metadata` row, the same on every rank)."""
    if local_error is not None:
        raise local_error
    refused = [r for r, row in enumerate(table) if row[0]]
    if refused:
        raise ValueError(
            f"rank {refused[0]} of the group refused its arguments (its own error says "
            f"why); no rank moved any data"
        )
    for j, name in enumerate(_AGREED, start=1):
        got = [row[j] for row in table]
        if len(set(got)) == 1:
            continue
        if name == "rows":
            raise ValueError(f"x_local must have the same number of rows on every rank; got {got}")
        what = _AGREED_NAMES.get(name, name)
        raise ValueError(f"{what} must be the same on every rank; got {got} (by rank)")
    j = len(_AGREED) + 1
    sizes = [row[j] for row in table]
    for r, row in enumerate(table):
        claim = row[j + 1 :]
        if claim[0] != -1 and claim != sizes:
            raise ValueError(
                f"shard_sizes on rank {r} = {claim} but the shards have {sizes} columns"
            )


def topk(
    x_local: torch.Tensor,
    k: int,
    *,
    group: dist.ProcessGroup | None = None,
    largest: bool = True,
    order: str | Order = Order.NONE,
    begin: torch.Tensor | None = None,
    end: torch.Tensor | None = None,
    index_offset: int | torch.Tensor | None = None,
    fill_value: float | None = None,
    fill_index: int = -1,
    index_dtype: torch.dtype = torch.int64,
    dst: int | None = None,
    shard_sizes: Sequence[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Exact top-k of rows split along their last dimension across a process group.

    Call it on every rank of ``group`` with that rank's shard. Rank r's shard holds
    global positions ``[s_r, s_r + n_r)`` with ``s_r = n_0 + ... + n_{r-1}``.

    Args:
        x_local: ``[rows, n_r]`` bf16 / fp16 / fp32 shard (fp64 on the CPU); ``rows``
            and dtype equal on every rank, ``n_r`` free (0 allowed).
        k: elements per row, ``>= 1``; rows with fewer valid elements are filled.
        group: process group (default: the world group). Gloo on the CPU, NCCL on
            CUDA; the shard must be on the backend's device.
        largest, order, fill_value, fill_index: as in :func:`deepselect.topk_rows`.
        begin, end: optional per-row window in *global* positions, int32/int64
            ``[rows]`` on ``x_local``'s device, the same on every rank.
        index_offset: int or int tensor ``[rows]`` added to every returned index.
        index_dtype: ``torch.int64`` (default) or ``torch.int32``; also the dtype of
            the exchanged indices (int32 halves their bytes; the global row length
            must then stay below 2**31).
        dst: rank of the group that receives the result (a ``gather`` instead of an
            ``all_gather``); the others return None. Default: every rank gets it.
        shard_sizes: the ``n_r`` of every rank, if known on the host; checked against
            the gathered sizes (a ValueError on every rank when they differ).

    Raises:
        ValueError / TypeError: on every rank alike, after the metadata exchange, when
            any rank's arguments are wrong or the ranks disagree on rows, dtype, k,
            order, largest, index_dtype, window presence, dst or the shard sizes
            (checked on the host: on CUDA the exchange's table costs one tiny copy to
            the host; while ``torch.compile`` traces, only the tracing rank's own
            checks run). Floats for ``index_offset`` / ``fill_index`` are a TypeError
            (never truncated); indices that cannot fit ``index_dtype`` a ValueError.

    Returns:
        ``(values [rows, k], indices [rows, k])`` with global indices — bit-identical
        to ``deepselect.topk_rows`` on the concatenated rows — or None on ranks other
        than ``dst``.

    Example (two ranks of a gloo group, each running)::

        x_local = logits[:, start:stop]            # this rank's vocabulary slice
        v, i = deepselect.distributed.topk(x_local, 512, order="value")
    """
    ready = dist.is_available() and dist.is_initialized()
    world = dist.get_world_size(group) if ready else None
    args = (x_local, k, largest, order, begin, end, index_offset, fill_value, fill_index,
            index_dtype, dst, world, shard_sizes)  # fmt: skip
    if not ready:  # no group to tell: this rank's own errors first
        _validate(*args)
        raise ValueError("torch.distributed must be initialised (init_process_group) first")
    rank = dist.get_rank(group)
    # a traced graph or a CUDA-graph capture cannot raise on a gathered table: there
    # only this rank's own checks run
    compiling = torch.compiler.is_compiling() or (
        torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    )
    local_error = None
    if compiling:  # traced or captured from an accepted call: no refusals to exchange
        _validate(*args)
    else:
        try:
            _validate(*args)
        except (TypeError, ValueError) as exc:
            local_error = exc
    if isinstance(x_local, torch.Tensor):
        dev = x_local.device
    elif dist.get_backend(group) == "nccl":
        dev = torch.device("cuda", torch.cuda.current_device())
    else:
        dev = torch.device("cpu")
    # One small exchange before any data moves: every rank checks the same table, so
    # all raise the same error or none does (no rank is left waiting in a collective).
    meta = _metadata(x_local, k, largest, order, begin, end, index_dtype, dst, world,
                     shard_sizes, local_error is not None)  # fmt: skip
    table = _all_gather(torch.tensor(meta, dtype=torch.int64, device=dev), world, group)
    if not compiling:
        host = table.tolist()  # a CUDA table: one tiny copy to the host
        _agree(host, local_error)
    largest = as_bool("largest", largest)
    rows, n = x_local.shape
    sizes = table[:, len(_AGREED) + 1]
    starts = sizes.cumsum(0) - sizes
    offset, total = starts[rank], sizes.sum()
    if not compiling:  # the range rule with the global row length, on every rank alike
        n_total = sum(row[len(_AGREED) + 1] for row in host)
        check_index_scalars(index_offset, fill_index, index_dtype, n_total)
        if isinstance(index_offset, torch.Tensor):
            check_offset_tensor("index_offset", index_offset, index_dtype, n_total)

    if begin is not None or end is not None:
        if dev.type == "cpu" and not torch.compiler.is_compiling():
            # validate the global windows the way topk_rows does on the CPU
            b = begin if begin is not None else torch.zeros(rows, dtype=torch.int64)
            e = end if end is not None else total.expand(rows)
            bad = (b < 0) | (e > total) | (b > e)
            if bool(bad.any()):
                r = int(bad.nonzero()[0, 0])
                raise ValueError(
                    f"windows must satisfy 0 <= begin <= end <= N = {int(total)}; "
                    f"row {r} has begin={int(b[r])}, end={int(e[r])}"
                )
        # the global window as topk_rows would clamp it, then this shard's part of it
        gb = torch.zeros(rows, dtype=torch.int64, device=dev) if begin is None else begin
        ge = total.expand(rows) if end is None else end
        gb = torch.minimum(gb.to(torch.int64).clamp(min=0), total)
        ge = torch.maximum(torch.minimum(ge.to(torch.int64), total), gb)
        local_begin = (gb - offset).clamp(0, n)
        local_end = (ge - offset).clamp(0, n)
    else:
        local_begin = local_end = None

    vals, idx = topk_rows(
        x_local,
        k,
        largest=largest,
        order=Order.INDEX,
        begin=local_begin,
        end=local_end,
        index_offset=offset.expand(rows).contiguous(),
        fill_index=_MISSING,
        index_dtype=torch.int64,
    )
    # one byte buffer per rank: value bits then indices, so one collective moves both
    bits_dtype = _bits_dtype(x_local.dtype)
    vbytes = k * vals.element_size()
    packed = torch.cat(
        [vals.view(bits_dtype).view(torch.uint8), idx.to(index_dtype).view(torch.uint8)], dim=1
    )
    if dst is None:
        buf = _all_gather(packed, world, group)
    else:
        me = dist.get_rank(group)
        gdst = dst if group is None else dist.get_global_rank(group, dst)
        parts = [torch.empty_like(packed) for _ in range(world)] if me == dst else None
        dist.gather(packed, parts, dst=gdst, group=group)
        if me != dst:
            return None
        buf = torch.stack(parts)
    value_bits = buf[:, :, :vbytes].contiguous().view(bits_dtype)
    indices = buf[:, :, vbytes:].contiguous().view(index_dtype)
    opt = TopkOptions(
        largest=largest,
        order=Order.parse(order),
        index_offset=index_offset,
        fill_value=fill_value,
        fill_index=fill_index,
        index_dtype=index_dtype,
    )
    return merge_candidates(value_bits, indices, k, x_local.dtype, opt)
