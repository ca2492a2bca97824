"""The exact oracle: top-k by a stable sort, the judge of every other backend.

Simple and obviously right: map values to keys (:mod:`deepselect.keys`), push
elements outside each row's window below every key, and take a *stable* descending
sort of the keys, which keeps equal keys in index order — so ties go to the lowest
index. Slow (a full sort per row); use it in tests, never in a hot path.
"""

from __future__ import annotations

import torch

from .keys import to_keys
from .options import Order, TopkOptions


def oracle_topk(
    x: torch.Tensor, k: int, options: TopkOptions | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k of every row of ``x`` under DESIGN.md's total order.

    Args:
        x: ``[rows, N]`` bf16 / fp16 / fp32 / fp64 tensor, any strides, any device.
        k: number of elements per row, ``k >= 1``.
        options: output options (windows, order, fill, offsets, ...);
            defaults to :class:`TopkOptions()`.

    Returns:
        ``(values [rows, k] of x.dtype, indices [rows, k] of options.index_dtype)``.
        Rows with fewer than ``k`` valid elements hold them first, then
        ``options.fill_value`` / ``options.fill_index``. ``values`` are bitwise
        ``x[row, index]``.

    >>> v, i = oracle_topk(torch.tensor([[1.0, 3.0, 3.0, 2.0]]), 2)
    >>> i.tolist()
    [[1, 2]]
    """
    opt = options or TopkOptions()
    rows, n = x.shape
    dev = x.device
    keys = to_keys(x, largest=opt.largest)  # int64, >= 0 except for fp64
    pos = torch.arange(n, device=dev).expand(rows, n)
    begin, end = opt.window_bounds(rows, n, dev)
    valid = (pos >= begin[:, None]) & (pos < end[:, None])
    floor = torch.iinfo(torch.int64).min
    keys = torch.where(valid, keys, torch.full_like(keys, floor))
    # Invalid elements sort after every valid one: equal to floor only if x is fp64's
    # mirrored NaN; break that tie explicitly by sorting validity first.
    order = torch.argsort(keys, dim=1, descending=True, stable=True)
    valid_sorted = torch.gather(valid, 1, order)
    order = torch.gather(order, 1, torch.argsort(~valid_sorted, dim=1, stable=True))
    kk = min(k, n)
    idx = order[:, :kk]
    count = valid.sum(dim=1)  # valid elements per row
    slot = torch.arange(kk, device=dev).expand(rows, kk)
    is_real = slot < count[:, None]
    if opt.order is Order.INDEX:
        # sort the real ones by index, keep fills at the end
        big = torch.iinfo(torch.int64).max
        idx = torch.sort(torch.where(is_real, idx, torch.full_like(idx, big)), dim=1).values
        idx = torch.where(is_real, idx, torch.zeros_like(idx))
    # move values as bit patterns: float gather/where/cat may rewrite NaN payloads
    ibits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
    xb = x.view(ibits)
    values = torch.gather(xb, 1, idx) if n > 0 else xb.new_empty(rows, 0)
    out_idx = idx + opt.offset_tensor(rows, dev)[:, None]
    fill_value = opt.resolved_fill_value(x.dtype)
    # the fill's bits read on the host, then filled on the device: no host-to-device
    # copy, so the sort-based path can be captured in a CUDA graph
    fill_int = int(torch.tensor(fill_value, dtype=x.dtype).view(ibits))
    fill_bits = torch.full((), fill_int, dtype=ibits, device=dev)
    values = torch.where(is_real, values, fill_bits).view(x.dtype)
    out_idx = torch.where(is_real, out_idx, torch.full_like(out_idx, opt.fill_index))
    if kk < k:  # N < k: pad the remaining columns with fills
        pad = k - kk
        pad_bits = fill_bits.expand(rows, pad)
        values = torch.cat([values.view(ibits), pad_bits], dim=1).view(x.dtype)
        out_idx = torch.cat([out_idx, out_idx.new_full((rows, pad), opt.fill_index)], dim=1)
    return values, out_idx.to(opt.index_dtype)


def run_oracle(x, k, opt, out_values, out_indices) -> None:
    """The exact top-k by the oracle, written into the given buffers (the path for k
    above the kernels' limit and for the ``"oracle"`` backend)."""
    from ._log import log_launch

    log_launch("oracle", x.dtype, x.shape, k, opt.order)
    v, i = oracle_topk(x, k, opt)
    out_indices.copy_(i)
    if out_values is not None:
        out_values.copy_(v)
