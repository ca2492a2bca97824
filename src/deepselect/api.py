"""The row API: validation, allocation and dispatch to a backend.

Kernels write into buffers they are given; everything a caller can get wrong is
checked here, on the host, from shapes, dtypes and devices only — never from the
data, so no call syncs with the device.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor

from . import launch_cache
from .keys import SUPPORTED_DTYPES
from .options import Order, TopkOptions
from .oracle import run_oracle

_INDEX_DTYPES = (torch.int32, torch.int64)
_CPU_DTYPES = SUPPORTED_DTYPES + (torch.float64,)
_INDEX_RANGE = {torch.int32: (-(2**31), 2**31 - 1), torch.int64: (-(2**63), 2**63 - 1)}


def as_bool(name: str, value) -> bool:
    """``value`` as a bool: Python and NumPy bools are taken; anything else (ints
    included, as torch.topk refuses them) is a TypeError naming ``name``."""
    if value is True or value is False:
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise TypeError(f"{name} must be a bool; got {type(value).__name__} {value!r}")


def as_int(name: str, value) -> int:
    """``value`` as a Python int: ints and NumPy integers are taken; bools, floats and
    anything else are a TypeError naming ``name`` (never silently truncated)."""
    if isinstance(value, bool) or isinstance(value, np.bool_):
        raise TypeError(f"{name} must be an int; got bool {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, np.integer):
        return operator.index(value)
    raise TypeError(f"{name} must be an int; got {type(value).__name__} {value!r}")


def check_dense(name: str, t: torch.Tensor) -> None:
    """Sparse, mkldnn and other non-strided layouts are refused by name."""
    if t.layout != torch.strided:
        raise TypeError(f"{name} must be a dense (strided) tensor; got layout {t.layout}")


def check_index_scalars(
    index_offset, fill_index, index_dtype: torch.dtype, n: int
) -> tuple[int | torch.Tensor | None, int]:
    """Validate a scalar ``index_offset`` and ``fill_index`` against ``index_dtype``.

    The rule (docs/pytorch.md, "Index ranges"): every index a call can write must fit
    ``index_dtype``: ``fill_index`` itself, and ``index_offset + p`` for every position
    ``0 <= p < n`` of a row (whatever the windows). Scalars are checked here, on the
    host; tensor offsets in :func:`check_offset_tensor`."""
    lo, hi = _INDEX_RANGE[index_dtype]
    kind = str(index_dtype).removeprefix("torch.")
    fill_index = as_int("fill_index", fill_index)
    if not lo <= fill_index <= hi:
        raise ValueError(f"fill_index must fit index_dtype {kind} [{lo}, {hi}]; got {fill_index}")
    if index_offset is not None and not isinstance(index_offset, torch.Tensor):
        try:
            index_offset = as_int("index_offset", index_offset)
        except TypeError:
            raise TypeError(
                f"index_offset must be an int, an integer tensor or None; got {index_offset!r}"
            ) from None
        top = index_offset + max(n - 1, 0)
        if index_offset < lo or top > hi:
            raise ValueError(
                f"index_offset + position must fit index_dtype {kind} [{lo}, {hi}] for "
                f"every position of a row of N = {n}; got index_offset={index_offset}"
            )
    return index_offset, fill_index


def check_offset_tensor(name: str, off: torch.Tensor, index_dtype: torch.dtype, n: int) -> None:
    """The range rule of :func:`check_index_scalars` for a per-row offset tensor.

    On the CPU its values are read (free): a ValueError naming ``name``. On a device
    they are not read on the host: with int32 output the check is a device-side
    assertion (``torch._assert_async``, no sync; a failing one stops the process like
    any device assert) instead of a silent wrap. With int64 output an int64 offset is
    the caller's to keep within ``2**63 - N``."""
    if off.numel() == 0:
        return
    lo, hi = _INDEX_RANGE[index_dtype]
    if off.device.type == "cpu":
        o = off.to(torch.int64)
        if int(o.min()) < lo or int(o.max()) > hi - max(n - 1, 0):
            kind = str(index_dtype).removeprefix("torch.")
            raise ValueError(
                f"{name} + position must fit index_dtype {kind} [{lo}, {hi}] for every "
                f"position of a row of N = {n}; got {name} in "
                f"[{int(o.min())}, {int(o.max())}]"
            )
    elif index_dtype == torch.int32 and off.device.type != "meta":
        o = off.to(torch.int64)
        ok = (o.amin() >= lo) & (o.amax() <= hi - max(n - 1, 0))
        torch._assert_async(ok, f"{name} + position does not fit index_dtype int32")


def _extent(t: torch.Tensor) -> tuple[int, int]:
    span = 0
    for size, stride in zip(t.shape, t.stride(), strict=True):
        span += (size - 1) * abs(stride)
    lo = t.data_ptr()
    return lo, lo + (span + 1) * t.element_size()


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` may share memory: same storage and intersecting byte
    ranges (exact for dense tensors; interleaved strided views count as overlapping).
    From pointers and strides only: no device sync. A traced graph has no pointers
    (and copies its results into ``out`` buffers after computing them): False."""
    if torch.compiler.is_compiling() or a.numel() == 0 or b.numel() == 0 or a.device.type == "meta":
        return False
    if not torch._C._overlaps(a, b):  # different storages (cheap, in C++)
        return False
    a0, a1 = _extent(a)
    b0, b1 = _extent(b)
    return a0 < b1 and b0 < a1


def check_no_overlap(name: str, out: torch.Tensor, inputs) -> None:
    """ValueError when an output buffer shares memory with an input (as torch.topk's
    ``out=`` refuses it): a kernel would read what it has already overwritten."""
    for other, t in inputs:
        if isinstance(t, torch.Tensor) and overlaps(out, t):
            raise ValueError(
                f"{name} overlaps {other} in memory; outputs must not share memory with "
                f"inputs or with each other"
            )


def _check_int_vector(name: str, t: torch.Tensor, rows: int, device: torch.device) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None; got {type(t).__name__}")
    check_dense(name, t)
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
    check_dense(name, t)
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
    check_dense("x", x)
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
    largest = as_bool("largest", largest)
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
    index_offset, fill_index = check_index_scalars(index_offset, fill_index, index_dtype, n)
    if isinstance(index_offset, torch.Tensor):
        _check_int_vector("index_offset", index_offset, rows, dev)
        check_offset_tensor("index_offset", index_offset, index_dtype, n)
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
    if torch.compiler.is_compiling() or _wants_grad(x) or _abstract(x):
        # a traced graph sees one registered op; autograd needs its backward formula;
        # meta and fake tensors its shape formula
        return _traced_topk_rows(
            x, k, largest, order, begin, end, index_offset, fill_value, fill_index,
            index_dtype, return_values, out_values, out_indices, backend,
        )  # fmt: skip
    key = _plan_key(
        x, k, largest, order, begin, end, index_offset, fill_value, fill_index, index_dtype,
        return_values, out_values, out_indices, backend,
    )  # fmt: skip
    plan = _PLANS.get(key) if key is not None else None
    fresh = plan is None
    if fresh:
        plan = _make_plan(
            x, k, largest, order, begin, end, index_offset, fill_value, fill_index,
            index_dtype, return_values, out_values, out_indices, backend,
        )  # fmt: skip
    inputs = None
    if out_indices is None:
        out_indices = torch.empty(plan.out_shape, dtype=plan.index_dtype, device=plan.device)
    else:
        inputs = (("x", x), ("begin", begin), ("end", end), ("index_offset", index_offset))
        check_no_overlap("out_indices", out_indices, inputs)
    if plan.value_dtype is not None:
        if out_values is None:
            out_values = torch.empty(plan.out_shape, dtype=plan.value_dtype, device=plan.device)
        else:
            if inputs is None:
                inputs = (("x", x), ("begin", begin), ("end", end), ("index_offset", index_offset))
            check_no_overlap("out_values", out_values, inputs + (("out_indices", out_indices),))
    held = plan.held
    if held is not None and held(x, out_values, out_indices, begin, end):
        return out_values, out_indices
    opt = plan.opt
    if begin is not None or end is not None:
        opt = TopkOptions(
            largest=opt.largest, order=opt.order, begin=begin, end=end,
            index_offset=opt.index_offset, fill_value=opt.fill_value,
            fill_index=opt.fill_index, index_dtype=opt.index_dtype,
        )  # fmt: skip
    if not (fresh and key is not None):
        plan.run(x, k, opt, out_values, out_indices)
        return out_values, out_indices
    # the first call of a signature: held, so that the next calls repeat it with their
    # own tensors: by the backend itself where it says how (``run.hold``), else its
    # launches are noted and repeated (launch_cache.held)
    hold = getattr(plan.run, "hold", None)
    with launch_cache.recording() as rec:
        plan.run(x, k, opt, out_values, out_indices)
    if hold is not None:
        plan.held = hold(x, k, opt, out_values, out_indices)
    else:
        plan.held = launch_cache.held(rec, (x, out_values, out_indices, begin, end))
    if len(_PLANS) >= _PLAN_LIMIT:  # many shapes: start again rather than grow
        _PLANS.clear()
    _PLANS[key] = plan
    return out_values, out_indices


def row_runner(x: torch.Tensor, k: int, largest: bool, order: str, index_dtype: torch.dtype):
    """``topk_rows(x, k, largest=largest, order=order, index_dtype=index_dtype)`` set
    up once for ``x``'s signature (shape, strides, dtype, device): a function of one
    tensor of that signature, for a caller that checks the signature (and that the
    call is eager, without autograd) itself; None where such calls need
    :func:`topk_rows`' own checks."""
    key = _plan_key(x, k, largest, order, None, None, None, None, -1, index_dtype, True, None,
                    None, None)  # fmt: skip
    plan = _PLANS.get(key) if key is not None else None
    if plan is None:
        return None
    run, opt, shape, device = plan.run, plan.opt, plan.out_shape, plan.device
    vdtype, idtype, held = plan.value_dtype, plan.index_dtype, plan.held

    def runner(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out_values = torch.empty(shape, dtype=vdtype, device=device)
        out_indices = torch.empty(shape, dtype=idtype, device=device)
        if held is None or not held(x, out_values, out_indices, None, None):
            run(x, k, opt, out_values, out_indices)
        return out_values, out_indices

    return runner


@dataclass(eq=False)
class _Plan:
    """What an eager call of one signature needs once it has been validated: the
    options (windows left out: they are the call's own tensors), the backend and the
    outputs to allocate; and, once its first call has run, that call's launches held
    (:func:`launch_cache.held`; None where they cannot be repeated). Holds no tensor:
    a plan outlives the calls it served."""

    opt: TopkOptions
    run: Callable
    out_shape: tuple[int, int]
    index_dtype: torch.dtype
    value_dtype: torch.dtype | None  # None: no values output
    device: torch.device
    held: Callable | None = None


# Plans of eager calls by signature (_plan_key): a repeated call checks a tuple of
# shapes, strides, dtypes and flags instead of validating again. A dict's get and set
# are atomic, and plans are immutable, so threads share it safely.
_PLANS: dict[tuple, _Plan] = {}
_PLAN_LIMIT = 1024


def _tensor_key(t):
    """Everything validation reads of an argument tensor (none of its values)."""
    if t is None:
        return None
    return (type(t), t.layout, t.shape, t.stride(), t.dtype, t.device)


def _plan_key(
    x, k, largest, order, begin, end, index_offset, fill_value, fill_index, index_dtype,
    return_values, out_values, out_indices, backend,
):  # fmt: skip
    """The signature of an eager call whose validation depends on nothing else, or
    None where it needs a fresh look: per-row offset tensors and CPU windows (their
    values are checked), and scalars of types the key could confuse (``1 == True``,
    ``5.0 == 5``, ``-0.0 == 0.0``, NaN)."""
    if (
        type(x) is not torch.Tensor
        or type(k) is not int
        or type(largest) is not bool
        or type(return_values) is not bool
        or type(fill_index) is not int
        or not (index_offset is None or type(index_offset) is int)
        or not (fill_value is None or (type(fill_value) in (int, float) and fill_value))
        or fill_value != fill_value  # NaN
        or not isinstance(order, str)
        or not (backend is None or type(backend) is str)
        or not isinstance(index_dtype, torch.dtype)
        or x.layout != torch.strided
    ):
        return None
    windows = begin is not None or end is not None
    if windows and x.device.type == "cpu":
        return None
    try:
        return (
            x.shape, x.stride(), x.dtype, x.device, k, largest, order, index_offset,
            fill_value, type(fill_value), fill_index, index_dtype, return_values, backend,
            _tensor_key(begin) if windows else None, _tensor_key(end) if windows else None,
            _tensor_key(out_values), _tensor_key(out_indices),
        )  # fmt: skip
    except (TypeError, RuntimeError):  # e.g. a tensor whose strides cannot be read
        return None


def _make_plan(
    x, k, largest, order, begin, end, index_offset, fill_value, fill_index, index_dtype,
    return_values, out_values, out_indices, backend,
):  # fmt: skip
    """Validate an eager call in full (every rule of :func:`make_options` and the
    output buffers') and return its :class:`_Plan`."""
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
    return_values = as_bool("return_values", return_values)
    rows = x.shape[0]
    dev = x.device
    if out_indices is not None:
        _check_out("out_indices", out_indices, (rows, k), index_dtype, dev)
    if not return_values:
        if out_values is not None:
            raise ValueError("out_values was given but return_values=False")
    elif out_values is not None:
        _check_out("out_values", out_values, (rows, k), x.dtype, dev)
    run = _pick_backend(x, backend)
    if begin is not None or end is not None:  # the call's own tensors, not the plan's
        opt = dataclasses.replace(opt, begin=None, end=None)
    return _Plan(opt, run, (rows, k), index_dtype, x.dtype if return_values else None, dev)


def _wants_grad(x) -> bool:
    return isinstance(x, torch.Tensor) and x.requires_grad and torch.is_grad_enabled()


def _abstract(x) -> bool:
    """A tensor without data (meta device, or a FakeTensor outside torch.compile)."""
    if type(x) is torch.Tensor:  # (the common case first: host time per call)
        return x.is_meta
    if not isinstance(x, torch.Tensor):
        return False
    return x.is_meta or isinstance(x, FakeTensor)


def _traced_topk_rows(
    x, k, largest, order, begin, end, index_offset, fill_value, fill_index, index_dtype,
    return_values, out_values, out_indices, backend,
):  # fmt: skip
    """:func:`topk_rows` under ``torch.compile``: the registered op
    ``deepselect::topk_rows`` (validated when it runs; its fill slots hold index -1,
    real ones an index >= 0), then the offset, fills and output buffers as tensor ops
    a graph can hold. A forced ``backend`` runs eagerly outside the graph. Also the
    eager path of an input that requires grad (the op's backward formula)."""
    if _wants_grad(x):
        if out_values is not None or out_indices is not None:
            raise ValueError(
                "out_values/out_indices cannot be used while x requires grad (an output "
                "buffer is not differentiable); call under torch.no_grad() or drop them"
            )
        if backend is not None:
            raise ValueError(
                f"backend={backend!r} has no backward formula; leave backend=None while "
                "x requires grad"
            )
        make_options(
            x, k, largest=largest, order=order, begin=begin, end=end,
            index_offset=index_offset, fill_value=fill_value, fill_index=fill_index,
            index_dtype=index_dtype,
        )  # fmt: skip
        return_values = as_bool("return_values", return_values)
    elif isinstance(x, torch.Tensor) and x.dim() == 2:  # host scalars: free to check
        index_offset, fill_index = check_index_scalars(
            index_offset, fill_index, index_dtype, x.shape[1]
        )
    if backend is not None:
        return _eager_topk_rows(
            x, k, largest=largest, order=order, begin=begin, end=end,
            index_offset=index_offset, fill_value=fill_value, fill_index=fill_index,
            index_dtype=index_dtype, return_values=return_values, out_values=out_values,
            out_indices=out_indices, backend=backend,
        )  # fmt: skip
    shifted = index_offset is not None or fill_index != -1
    v, i = torch.ops.deepselect.topk_rows(
        x, k, largest, Order.parse(order).value, begin, end,
        torch.int64 if shifted else index_dtype,
    )  # fmt: skip
    real = i >= 0
    if index_offset is not None:  # in int64: the range rule was checked above
        i = i + (index_offset[:, None] if isinstance(index_offset, torch.Tensor) else index_offset)
    if shifted:
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


# Run outside any graph being traced. torch._disable_dynamo is torch.compiler.disable
# with the import of torch._dynamo (over a second, with Triton behind it) put off to the
# first call, which only a trace makes: ``import deepselect`` stays cheap.
_eager_topk_rows = torch._disable_dynamo(_eager_topk_rows)


def _load_triton():
    from .triton_backend import run_triton

    return run_triton


def _load_cpu():
    try:
        from .cpu_small import run_cpu_small
    except ImportError:  # numba missing: stay correct, if slow
        return run_oracle
    return run_cpu_small


def _load_reference():
    from .reference import run_reference

    return run_reference


# each imported on first use (no Triton import for CPU-only use), then looked up
_BACKENDS = {
    "triton": _load_triton,
    "cpu": _load_cpu,
    "oracle": lambda: run_oracle,
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


def sampling_kernels():
    """The Triton launchers of the sampling operations (:mod:`.triton_sampling`), the
    engine's GPU path; imported on first use (no Triton import for CPU-only use)."""
    from . import triton_sampling

    return triton_sampling
