"""What a timing is reported as: effective bytes, bandwidth, speedup and shares."""

from __future__ import annotations

import torch


def effective_bytes(
    batch: int,
    n: int,
    k: int,
    dtype: torch.dtype,
    *,
    valid: int | None = None,
    index_bytes: int = 4,
    values: bool = True,
) -> int:
    """Bytes an ideal top-k moves: the valid input read once plus the outputs written.

    Args:
        batch, n, k: the shape; the output is ``[batch, k]`` (fills included).
        dtype: input (and value output) dtype.
        valid: valid input elements in all (default ``batch * n``: no windows).
        index_bytes: 4 for int32 indices, 8 for int64.
        values: whether the call writes values too.

    >>> effective_bytes(2, 1000, 10, torch.bfloat16)  # 2*1000*2 + 2*10*(2+4)
    4120
    """
    valid = batch * n if valid is None else valid
    per_out = index_bytes + (dtype.itemsize if values else 0)
    return valid * dtype.itemsize + batch * k * per_out


def tbps(nbytes: float, seconds: float | None) -> float | None:
    """Terabytes (10**12 bytes) per second; None when there is no time.

    >>> tbps(4e12, 2.0)
    2.0
    """
    if seconds is None or not seconds > 0:
        return None
    return nbytes / seconds / 1e12


def bandwidth_unit(device: str) -> tuple[str, float]:
    """The unit a device's bandwidth reads well in, and the factor from TB/s to it.

    >>> bandwidth_unit("cuda"), bandwidth_unit("cpu")
    (('TB/s', 1.0), ('GB/s', 1000.0))
    """
    return ("GB/s", 1000.0) if str(device).startswith("cpu") else ("TB/s", 1.0)


SPREAD_WARN = 1.5
"""Slowest over fastest call of one measurement above which the table warns: the
median is then a poor summary (other load, clock changes, a cache that was warm)."""


def speedup(reference_s: float | None, ours_s: float | None) -> float | None:
    """How many times faster ``ours`` is than ``reference`` (> 1 means faster).

    >>> speedup(3.0, 1.5)
    2.0
    """
    if reference_s is None or ours_s is None or not ours_s > 0:
        return None
    return reference_s / ours_s


def percent(part: float | None, whole: float | None) -> float | None:
    """``100 * part / whole``, or None.

    >>> percent(1.0, 4.0)
    25.0
    """
    if part is None or whole is None or not whole > 0:
        return None
    return 100.0 * part / whole
