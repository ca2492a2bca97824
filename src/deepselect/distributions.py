"""Input distributions that break weaker top-k implementations.

Used by the tests (every backend against the oracle) and by the benchmarks
(robustness to the data). ``make(kind, rows, n, dtype)`` draws one batch.
"""

from __future__ import annotations

import torch

_BITS = {torch.bfloat16: 16, torch.float16: 16, torch.float32: 32, torch.float64: 64}
_INT = {16: torch.int16, 32: torch.int32, 64: torch.int64}


def _random_bits(rows: int, n: int, dtype: torch.dtype, sign: int, g: torch.Generator):
    """Uniform random bit patterns with the given sign bit (0 or 1): every finite
    magnitude, subnormals, ±inf and NaNs of that sign."""
    bits = _BITS[dtype]
    hi = 1 << (bits - 1)
    if bits == 64:
        raw = torch.randint(-(2**62), 2**62, (rows, n), generator=g, dtype=torch.int64) * 2
        raw = raw.abs()
    else:
        raw = torch.randint(0, hi, (rows, n), generator=g, dtype=torch.int64)
    if sign:
        raw = raw - hi if bits < 64 else raw | (-(2**63))
    return raw.to(_INT[bits]).view(dtype)


def _normal(rows, n, g):
    return torch.randn(rows, n, generator=g, dtype=torch.float64)


def _few(count):
    def make(rows, n, g):
        pool = torch.randn(count, generator=g, dtype=torch.float64) * 10
        return pool[torch.randint(0, count, (rows, n), generator=g)]

    return make


def _nan_hotspots(rows, n, g):
    x = torch.randn(rows, n, generator=g, dtype=torch.float64)
    for r in range(rows):
        if n == 0:
            break
        start = int(torch.randint(0, n, (1,), generator=g))
        length = max(1, n // 50)
        x[r, start : start + length] = float("nan")
        x[r, int(torch.randint(0, n, (1,), generator=g))] = -float("nan")
        x[r, int(torch.randint(0, n, (1,), generator=g))] = float("inf")
        x[r, int(torch.randint(0, n, (1,), generator=g))] = -float("inf")
    return x


def _ascending(rows, n, g):
    return torch.arange(n, dtype=torch.float64).expand(rows, n).clone() / max(n, 1)


def _descending(rows, n, g):
    return -_ascending(rows, n, g)


def _staircase(rows, n, g):
    # rising steps of 64 equal values, each step above the last: big values at the end
    return (torch.arange(n, dtype=torch.float64) // 64).expand(rows, n).clone()


def _signed_zeros(rows, n, g):
    x = torch.randint(0, 3, (rows, n), generator=g).to(torch.float64) - 1.0
    zero = x == 0
    neg = torch.rand(rows, n, generator=g) < 0.5
    x[zero & neg] = -0.0
    return x


_FLOAT_KINDS = {
    "normal": _normal,
    "shifted": lambda rows, n, g: _normal(rows, n, g) + 100.0,
    "tiny": lambda rows, n, g: _normal(rows, n, g) * 1e-8,
    "huge": lambda rows, n, g: _normal(rows, n, g) * 1e4,
    "distinct2": _few(2),
    "distinct32": _few(32),
    "distinct4096": _few(4096),
    "all_equal": lambda rows, n, g: torch.full((rows, n), 1.5, dtype=torch.float64),
    "ascending": _ascending,
    "descending": _descending,
    "staircase": _staircase,
    "nan_hotspots": _nan_hotspots,
    "signed_zeros": _signed_zeros,
}

KINDS: tuple[str, ...] = tuple(_FLOAT_KINDS) + ("bits_positive", "bits_negative")
"""Every distribution :func:`make` knows."""

BENCH_KINDS: tuple[str, ...] = ("normal", "shifted", "tiny", "ascending", "distinct32")
"""The robustness set of the benchmarks."""

ADVERSARIAL_KINDS: tuple[str, ...] = ("shifted", "tiny", "ascending", "distinct32", "all_equal")
"""The indexer grid's adversarial rows (``deepselect bench --scenario indexer-grid
--dist all``), each timed against normal rows of the same shape: +100, x1e-8,
ascending, 32 distinct values, all equal."""


def make(
    kind: str,
    rows: int,
    n: int,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    seed: int = 0,
) -> torch.Tensor:
    """Draw a ``[rows, n]`` tensor of distribution ``kind`` (see :data:`KINDS`).

    Values are built in float64 on the CPU and rounded to ``dtype``, except the
    ``bits_*`` kinds, which are raw bit patterns of ``dtype`` (subnormals, ±inf, NaN).
    Note that rounding can create ties (e.g. ``shifted`` in bf16): that is intended.
    """
    g = torch.Generator().manual_seed(seed)
    if kind == "bits_positive":
        x = _random_bits(rows, n, dtype, 0, g)
    elif kind == "bits_negative":
        x = _random_bits(rows, n, dtype, 1, g)
    elif kind in _FLOAT_KINDS:
        x = _FLOAT_KINDS[kind](rows, n, g).to(dtype)
    else:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    return x.to(device)
