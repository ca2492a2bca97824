"""The row API: validation, allocation and dispatch to a backend.

Kernels write into buffers they are given; everything a caller can get wrong is
checked here, on the host, from shapes, dtypes and devices only — never from the
data, so no call syncs with the device.
"""

from __future__ import annotations

from functools import cache

import torch

from .keys import SUPPORTED_DTYPES
from .options import Order, TopkOptions

_INDEX_DTYPES = (torch.int32, torch.int64)
_CPU_DTYPES = SUPPORTED_DTYPES + (torch.float64,)


def _check_int_vector(name: str, t: torch.Tensor, rows: int, device: torch.device) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None; got {type(t).__name__}")
    if t.dtype not in _INDEX_DTYPES:
        raise TypeError(f"{name} must have dtype int32 or int64; got {t.dtype}")
    if t.dim() != 1 or t.shape[0] != rows:
        raise ValueError(f"{name} must have shape [rows] = [{rows}]; got {list(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name} must be on the input's device {device}; got {t.device}")


def _check_out(
    name: str, t: torch.Tensor, shape: tuple[int, int], dtype: torch.dtype, device: torch.device
) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None; got {type(t).__name__}")
    if tuple(t.shape) != shape:
        raise ValueError(f"{name} must have shape {list(shape)}; got {list(t.shape)}")
    if t.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype}; got {t.dtype}")
    if t.device != device:
        raise ValueError(f"{name} must be on the input's device {device}; got {t.device}")


def make_options(
    x: torch.Tensor,
    k: int,
    *,
    largest: bool = True,
    order: str | Order = Order.NONE,
    begin: torch.Tensor | None = None,
    end: torch.Tensor | None = None,
    index_offset: int | torch.Tensor | None = None,
    fill_value: float | None = None,
    fill_index: int = -1,
    index_dtype: torch.dtype = torch.int32,
) -> TopkOptions:
    """Validate a row top-k call and return its :class:`TopkOptions`."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor; got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [rows, N]; got {x.dim()}-D shape {list(x.shape)}")
    dev = x.device
    cpu = dev.type == "cpu"
    allowed = _CPU_DTYPES if cpu else SUPPORTED_DTYPES
    if x.dtype not in allowed:
        names = ", ".join(str(d).removeprefix("torch.") for d in allowed)
        raise TypeError(f"x must have dtype {names} on {dev.type}; got {x.dtype}")
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int; got {type(k).__name__}")
    if k < 1:
        raise ValueError(f"k must be >= 1; got {k}")
    if not isinstance(largest, bool):
        raise TypeError(f"largest must be a bool; got {type(largest).__name__}")
    order = Order.parse(order)
    if index_dtype not in _INDEX_DTYPES:
        raise TypeError(f"index_dtype must be torch.int32 or torch.int64; got {index_dtype}")
    rows, n = x.shape
    if index_dtype == torch.int32 and n > 2**31 - 1:
        raise ValueError(f"index_dtype=int32 cannot address rows of length {n}")
    for name, t in (("begin", begin), ("end", end)):
        if t is not None:
            _check_int_vector(name, t, rows, dev)
    if cpu and (begin is not None or end is not None):  # no device sync
        b = begin if begin is not None else torch.zeros(rows, dtype=torch.int64)
        e = end if end is not None else torch.full((rows,), n, dtype=torch.int64)
        bad = (b < 0) | (e > n) | (b > e)
        if bool(bad.any()):
            r = int(bad.nonzero()[0, 0])
            raise ValueError(
                f"windows must satisfy 0 <= begin <= end <= N = {n}; "
                f"row {r} has begin={int(b[r])}, end={int(e[r])}"
            )
    if isinstance(index_offset, torch.Tensor):
        _check_int_vector("index_offset", index_offset, rows, dev)
    elif index_offset is not None and (
        isinstance(index_offset, bool) or not isinstance(index_offset, int)
    ):
        raise TypeError(f"index_offset must be an int, a tensor or None; got {index_offset!r}")
    if isinstance(fill_index, bool) or not isinstance(fill_index, int):
        raise TypeError(f"fill_index must be an int; got {type(fill_index).__name__}")
    if fill_value is not None and not isinstance(fill_value, (int, float)):
        raise TypeError(f"fill_value must be a number or None; got {type(fill_value).__name__}")
    return TopkOptions(
        largest=largest,
        order=order,
        begin=begin,
        end=end,
        index_offset=index_offset,
        fill_value=fill_value,
        fill_index=fill_index,
        index_dtype=index_dtype,
    )


def topk_rows(
    x: torch.Tensor,
    k: int,
    *,
    largest: bool = True,
    order: str | Order = Order.NONE,
    begin: torch.Tensor | None = None,
    end: torch.Tensor | None = None,
    index_offset: int | torch.Tensor | None = None,
    fill_value: float | None = None,
    fill_index: int = -1,
    index_dtype: torch.dtype = torch.int32,
    return_values: bool = True,
    out_values: torch.Tensor | None = None,
    out_indices: torch.Tensor | None = None,
    backend: str | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Exact top-k of every row of a 2-D tensor.

    Args:
        x: ``[rows, N]`` bf16 / fp16 / fp32 (fp64 too on the CPU), any strides.
        k: elements per row, ``>= 1``; ``k > N`` (or a short window) returns every
            valid element first, then ``fill_value`` / ``fill_index``.
        largest: k largest (default) or k smallest; NaN counts as larger than +inf.
        order: ``"none"`` (any order, fastest), ``"value"`` (best first, ties by lower
            index) or ``"index"`` (ascending position).
        begin, end: optional per-row window ``[begin, end)``, int32/int64 ``[rows]``
            on ``x``'s device; read on the device, never synced.
        index_offset: int or int tensor ``[rows]`` added to every returned index.
        fill_value, fill_index: written where a row has fewer than k valid elements
            (default -inf / +inf for largest / smallest, and -1).
        index_dtype: ``torch.int32`` (default) or ``torch.int64``.
        return_values: if False, only indices are produced (values is None).
        out_values, out_indices: caller-owned ``[rows, k]`` outputs to write into.
        backend: force ``"triton"``, ``"cpu"`` or ``"oracle"``; default picks by device.

    Returns:
        ``(values [rows, k] | None, indices [rows, k])``; ``values`` are bitwise equal to
        ``x[row, index]``. Ties go to the lowest index, so the selected set is unique.

    >>> x = torch.tensor([[0.5, 2.0, -1.0, 2.0]])
    >>> v, i = topk_rows(x, 2, order="value")
    >>> i.tolist(), v.tolist()
    ([[1, 3]], [[2.0, 2.0]])
    """
    if torch.compiler.is_compiling():  # a traced graph sees one registered op
        return _traced_topk_rows(
            x, k, largest, order, begin, end, index_offset, fill_value, fill_index,
            index_dtype, return_values, out_values, out_indices, backend,
        )  # fmt: skip
    opt = make_options(
        x,
        k,
        largest=largest,
        order=order,
        begin=begin,
        end=end,
        index_offset=index_offset,
        fill_value=fill_value,
        fill_index=fill_index,
        index_dtype=index_dtype,
    )
    rows = x.shape[0]
    dev = x.device
    if out_indices is None:
        out_indices = torch.empty((rows, k), dtype=index_dtype, device=dev)
    else:
        _check_out("out_indices", out_indices, (rows, k), index_dtype, dev)
    if not return_values:
        if out_values is not None:
            raise ValueError("out_values was given but return_values=False")
    elif out_values is None:
        out_values = torch.empty((rows, k), dtype=x.dtype, device=dev)
    else:
        _check_out("out_values", out_values, (rows, k), x.dtype, dev)
    run = _pick_backend(x, backend)
    run(x, k, opt, out_values, out_indices)
    return out_values, out_indices


def _traced_topk_rows(
    x, k, largest, order, begin, end, index_offset, fill_value, fill_index, index_dtype,
    return_values, out_values, out_indices, backend,
):  # fmt: skip
    """:func:`topk_rows` under ``torch.compile``: the registered op
    ``deepselect::topk_rows`` (validated when it runs; its fill slots hold index -1,
    real ones an index >= 0), then the offset, fills and output buffers as tensor ops
    a graph can hold. A forced ``backend`` runs eagerly outside the graph."""
    if backend is not None:
        return _eager_topk_rows(
            x, k, largest=largest, order=order, begin=begin, end=end,
            index_offset=index_offset, fill_value=fill_value, fill_index=fill_index,
            index_dtype=index_dtype, return_values=return_values, out_values=out_values,
            out_indices=out_indices, backend=backend,
        )  # fmt: skip
    v, i = torch.ops.deepselect.topk_rows(
        x, k, largest, Order.parse(order).value, begin, end, index_dtype
    )
    real = i >= 0
    if index_offset is not None:
        i = i + (index_offset[:, None] if isinstance(index_offset, torch.Tensor) else index_offset)
    if index_offset is not None or fill_index != -1:
        i = torch.where(real, i, torch.full_like(i, fill_index)).to(index_dtype)
    if fill_value is not None:
        v = torch.where(real, v, torch.full_like(v, fill_value))
    if out_indices is not None:
        i = out_indices.copy_(i)
    if not return_values:
        return None, i
    if out_values is not None:
        v = out_values.copy_(v)
    return v, i


def _eager_topk_rows(*args, **kw):
    return topk_rows(*args, **kw)


_eager_topk_rows = torch.compiler.disable(_eager_topk_rows)


def _run_oracle(x, k, opt, out_values, out_indices) -> None:
    from .oracle import oracle_topk

    v, i = oracle_topk(x, k, opt)
    out_indices.copy_(i)
    if out_values is not None:
        out_values.copy_(v)


def _load_triton():
    from .triton_backend import run_triton

    return run_triton


def _load_cpu():
    try:
        from .cpu_backend import run_cpu
    except ImportError:  # numba missing: stay correct, if slow
        return _run_oracle
    return run_cpu


def _load_reference():
    from .reference import run_reference

    return run_reference


# each imported on first use (no Triton import for CPU-only use), then looked up
_BACKENDS = {
    "triton": _load_triton,
    "cpu": _load_cpu,
    "oracle": lambda: _run_oracle,
    "reference": _load_reference,
}


def _pick_backend(x: torch.Tensor, backend: str | None):
    if backend is None:
        backend = "triton" if x.device.type == "cuda" else "cpu"
    if not isinstance(backend, str) or backend not in _BACKENDS:
        names = ", ".join(repr(b) for b in _BACKENDS)
        raise ValueError(f"backend must be {names} or None; got {backend!r}")
    if backend == "cpu" and x.device.type != "cpu":
        raise ValueError(f"backend='cpu' needs a CPU tensor; x is on {x.device}")
    return _loaded(backend)


@cache
def _loaded(backend: str):
    return _BACKENDS[backend]()
