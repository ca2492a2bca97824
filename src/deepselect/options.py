"""The output options of the contract, shared by every backend.

One frozen dataclass carries what a caller may ask of a row top-k besides ``k``:
direction, output order, per-row windows, fill for short rows, index offset and
index dtype. Backends read it; :mod:`deepselect.api` builds and validates it.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import torch


class Order(str, enum.Enum):
    """Order of the k outputs of a row (fills always come last)."""

    NONE = "none"  #: any order (fastest); the selected *set* is still unique
    VALUE = "value"  #: best first (descending for largest=True), ties by lower index
    INDEX = "index"  #: ascending index

    @classmethod
    def parse(cls, order: str | Order) -> Order:
        try:  # a dict lookup: an Enum call costs about a microsecond per top-k call
            return _ORDERS[order]
        except (KeyError, TypeError):
            allowed = ", ".join(repr(o.value) for o in cls)
            raise ValueError(f"order must be one of {allowed}; got {order!r}") from None


_ORDERS = {o.value: o for o in Order}  # a member is equal to (and hashes as) its value


@dataclass(frozen=True)
class TopkOptions:
    """What to select and how to lay the result out.

    Attributes:
        largest: select the k largest (True) or the k smallest (False). NaN counts as
            larger than +inf either way, so with ``largest=False`` NaNs come last.
        order: :class:`Order` of the outputs.
        begin, end: per-row window ``[begin, end)`` as integer tensors ``[rows]`` on
            the input's device (None = whole row). Only positions inside the window
            are candidates; returned indices are positions in the full row. Values
            outside ``0 <= begin <= end <= N`` are clamped into that range on the
            device (validated with a ``ValueError`` when the tensors are on the CPU).
        index_offset: added to every returned (non-fill) index: an int or an integer
            tensor ``[rows]``.
        fill_value: value written where a row has fewer than k valid elements
            (default: -inf for largest, +inf for smallest).
        fill_index: index written there (default -1; the offset is not added).
        index_dtype: ``torch.int32`` or ``torch.int64``.
    """

    largest: bool = True
    order: Order = Order.NONE
    begin: torch.Tensor | None = None
    end: torch.Tensor | None = None
    index_offset: int | torch.Tensor | None = None
    fill_value: float | None = None
    fill_index: int = -1
    index_dtype: torch.dtype = torch.int32

    def resolved_fill_value(self, dtype: torch.dtype) -> float:
        if self.fill_value is not None:
            return float(self.fill_value)
        return -math.inf if self.largest else math.inf

    def window_bounds(
        self, rows: int, n: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Clamped ``(begin, end)`` as int64 tensors ``[rows]`` on ``device``."""
        if self.begin is None:
            begin = torch.zeros(rows, dtype=torch.int64, device=device)
        else:
            begin = self.begin.to(device=device, dtype=torch.int64).clamp(0, n)
        if self.end is None:
            end = torch.full((rows,), n, dtype=torch.int64, device=device)
        else:
            end = self.end.to(device=device, dtype=torch.int64).clamp(max=n)
        return begin, torch.maximum(end, begin)

    def offset_tensor(self, rows: int, device: torch.device) -> torch.Tensor:
        """Per-row index offset as an int64 tensor ``[rows]``."""
        off = self.index_offset
        if off is None:
            return torch.zeros(rows, dtype=torch.int64, device=device)
        if isinstance(off, torch.Tensor):
            return off.to(device=device, dtype=torch.int64)
        return torch.full((rows,), int(off), dtype=torch.int64, device=device)
