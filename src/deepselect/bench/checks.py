"""The exactness judge: every result is checked before it is timed."""

from __future__ import annotations

import dataclasses

import torch

from ..keys import to_keys
from ..options import Order, TopkOptions

EXACT = "exact"


def _bits(t: torch.Tensor) -> torch.Tensor:
    itype = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(itype)


def _bad_rows(mask: torch.Tensor) -> str:
    rows = mask.nonzero().flatten()[:5].tolist()
    return ", ".join(str(r) for r in rows)


def check_exact(
    x: torch.Tensor,
    values: torch.Tensor | None,
    indices: torch.Tensor,
    want_values: torch.Tensor,
    k: int,
    *,
    ordered: bool,
    fill_index: int | None = None,
) -> str:
    """Judge a top-k result by the values it selected, so ties may pick any index.

    Args:
        x: ``[rows, N]`` input.
        values: ``[rows, >= min(k, N)]`` returned values, or None for index-only calls.
        indices: ``[rows, >= min(k, N)]`` returned indices (any integer dtype).
        want_values: ``[rows, min(k, N)]`` values of ``torch.topk`` (sorted if ``ordered``).
        k: requested k; when ``k > N`` only the first N columns hold elements.
        ordered: compare value sequences position by position (sorted output);
            otherwise compare each row's values as a multiset.
        fill_index: if given and ``k > N``, the index expected in the fill columns.

    Returns:
        ``"exact"`` or ``"inexact: <reason>"``. Values are compared as order keys
        (:func:`deepselect.keys.to_keys`: bit patterns, with -0.0 == +0.0 and all NaNs
        equal, as the contract orders them); returned values must be bitwise
        ``x[row, index]``, indices in range and distinct.

    >>> x = torch.tensor([[1.0, 5.0, 3.0]])
    >>> want = torch.topk(x, 2).values
    >>> check_exact(x, None, torch.tensor([[2, 1]]), want, 2, ordered=False)
    'exact'
    >>> check_exact(x, None, torch.tensor([[0, 1]]), want, 2, ordered=False)
    'inexact: wrong values in rows 0'
    """
    rows, n = x.shape
    kv = min(k, n)
    if indices.dim() != 2 or indices.shape[0] != rows or indices.shape[1] < kv:
        return f"inexact: indices have shape {list(indices.shape)}, want [{rows}, {k}]"
    idx = indices[:, :kv].to(torch.int64)
    out_of_range = ((idx < 0) | (idx >= n)).any(dim=1)
    if bool(out_of_range.any()):
        return f"inexact: index out of range in rows {_bad_rows(out_of_range)}"
    srt = idx.sort(dim=1).values
    repeated = (srt[:, 1:] == srt[:, :-1]).any(dim=1)
    if bool(repeated.any()):
        return f"inexact: repeated index in rows {_bad_rows(repeated)}"
    picked = torch.gather(_bits(x), 1, idx)
    if values is not None:
        if values.shape[0] != rows or values.shape[1] < kv or values.dtype != x.dtype:
            return f"inexact: values have shape {list(values.shape)} / dtype {values.dtype}"
        not_bitwise = (_bits(values[:, :kv]) != picked).any(dim=1)
        if bool(not_bitwise.any()):
            return f"inexact: values are not x[row, index] in rows {_bad_rows(not_bitwise)}"
        got = to_keys(values[:, :kv])
    else:
        got = to_keys(picked.view(x.dtype))
    want = to_keys(want_values[:, :kv])
    if not ordered:
        got, want = got.sort(dim=1).values, want.sort(dim=1).values
    wrong = (got != want).any(dim=1)
    if bool(wrong.any()):
        return f"inexact: wrong values in rows {_bad_rows(wrong)}"
    if fill_index is not None and k > n:
        bad_fill = (indices[:, n:k].to(torch.int64) != fill_index).any(dim=1)
        if bool(bad_fill.any()):
            return f"inexact: fill index is not {fill_index} in rows {_bad_rows(bad_fill)}"
    return EXACT


def check_against_oracle(
    x: torch.Tensor,
    values: torch.Tensor | None,
    indices: torch.Tensor,
    k: int,
    order: str | TopkOptions,
    *,
    max_rows: int = 8,
) -> str:
    """Compare deepselect's indices (and values) with the exact oracle on a few rows.

    Ties go to the lowest index in the contract, so the selected index *set* is unique;
    rows are spread evenly over the batch (first and last included) to keep this cheap.
    ``order``: the output order, or the call's whole :class:`TopkOptions` (windows,
    ``largest``, offsets: per-row tensors are taken for the compared rows).

    Returns:
        ``"exact"`` or ``"inexact: <reason>"``.
    """
    from ..oracle import oracle_topk

    rows = x.shape[0]
    if rows == 0:
        return EXACT
    take = min(rows, max_rows)
    sel = torch.linspace(0, rows - 1, take).round().to(torch.int64).unique()
    if isinstance(order, TopkOptions):
        per_row = ("begin", "end", "index_offset")
        opt = dataclasses.replace(order, **{
            f: getattr(order, f)[sel.to(getattr(order, f).device)]
            for f in per_row if isinstance(getattr(order, f), torch.Tensor)
        })  # fmt: skip
    else:
        opt = TopkOptions(order=Order.parse(order), index_dtype=indices.dtype)
    want_v, want_i = oracle_topk(x[sel.to(x.device)], k, opt)
    got_i = indices[sel.to(indices.device)].to(torch.int64)
    want_i = want_i.to(torch.int64)
    got_v = values[sel.to(values.device)] if values is not None else None
    if opt.order is Order.NONE:
        gp, wp = got_i.argsort(dim=1, stable=True), want_i.argsort(dim=1, stable=True)
        got_i, want_i = got_i.gather(1, gp), want_i.gather(1, wp)
        if got_v is not None:
            got_v = _bits(got_v).gather(1, gp)
            want_v = _bits(want_v).gather(1, wp)
    elif got_v is not None:
        got_v, want_v = _bits(got_v), _bits(want_v)
    bad = (got_i != want_i).any(dim=1)
    if got_v is not None:
        bad |= (got_v != want_v).any(dim=1)
    if bool(bad.any()):
        return f"inexact: differs from the oracle in rows {_bad_rows(sel[bad.cpu()])}"
    return EXACT
