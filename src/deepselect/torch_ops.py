"""PyTorch integration: a drop-in ``torch.topk``, a ``torch.library`` op, autograd.

Three layers, top-down:

* :func:`topk` has ``torch.topk``'s signature, errors and return type. It moves ``dim``
  last, flattens to ``[rows, N]`` and runs the row API (:func:`deepselect.api.topk_rows`),
  then reshapes back. Eager calls without autograd go straight to the row API: the
  ``torch.library`` dispatcher costs tens of microseconds per call on the host and buys
  nothing there.
* ``torch.ops.deepselect.topk_rows`` (:data:`topk_rows_op`) is the 2-D row op, registered
  with a fake (meta) implementation and an autograd formula. :func:`topk` uses it while
  ``torch.compile`` traces (so the graph holds one opaque node, no graph break, any
  dynamic shape) and in eager mode when the input requires grad.
* ``_rows`` is the shared eager body of both: layout fix-up, then the row API.

Dtypes the row API does not take (integers; fp64 on the GPU) are passed on to
``torch.topk`` unchanged, which is exact for integers but keeps torch's own choice among
tied elements (see ``docs/pytorch.md``). bool and complex inputs reach ``torch.topk`` too,
so they fail with torch's own error.
"""

from __future__ import annotations

import operator
import warnings

import numpy as np
import torch
from torch._C._functorch import is_functorch_wrapped_tensor
from torch.overrides import handle_torch_function, has_torch_function_unary

from .api import _abstract, overlaps, row_runner, topk_rows
from .keys import SUPPORTED_DTYPES
from .options import TopkOptions

__all__ = ["topk", "topk_rows_op", "TopkIndexError", "TopkTypeError", "TopkValueError"]

_ROW_DTYPES_CPU = SUPPORTED_DTYPES + (torch.float64,)


class TopkValueError(RuntimeError, ValueError):
    """A bad value where ``torch.topk`` raises a ``RuntimeError`` (``k`` out of range,
    ``out=`` on the wrong device or with autograd).

    A ``RuntimeError`` like torch's, so code that catches torch's error keeps working,
    and a ``ValueError`` like every other bad argument of deepselect.
    """


class TopkTypeError(RuntimeError, TypeError):
    """An ``out=`` tensor of the wrong dtype (a ``RuntimeError`` in torch)."""


class TopkIndexError(IndexError, ValueError):
    """``dim`` outside ``[-ndim, ndim - 1]`` (an ``IndexError``, as in torch)."""


# --------------------------------------------------------------------------------------
# shared eager body
# --------------------------------------------------------------------------------------


def _rows(
    x: torch.Tensor,
    k: int,
    largest: bool,
    order: str,
    begin: torch.Tensor | None = None,
    end: torch.Tensor | None = None,
    index_dtype: torch.dtype = torch.int64,
    out_values: torch.Tensor | None = None,
    out_indices: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    # Rows whose elements are not adjacent (``dim`` was not the innermost dimension)
    # would be read with a stride: on a GPU every element then costs a whole memory
    # transaction, far more than one contiguous copy.
    if x.shape[1] > 1 and x.stride(1) != 1:
        x = x.contiguous()
    return topk_rows(
        x,
        k,
        largest=largest,
        order=order,
        begin=begin,
        end=end,
        index_dtype=index_dtype,
        out_values=out_values,
        out_indices=out_indices,
    )


# --------------------------------------------------------------------------------------
# the registered row op
# --------------------------------------------------------------------------------------


@torch.library.custom_op("deepselect::topk_rows", mutates_args=())
def topk_rows_op(
    x: torch.Tensor,
    k: int,
    largest: bool = True,
    order: str = "value",
    begin: torch.Tensor | None = None,
    end: torch.Tensor | None = None,
    index_dtype: torch.dtype = torch.int64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k of every row, as a ``torch.library`` op (``torch.ops.deepselect.topk_rows``).

    The same selection as :func:`deepselect.api.topk_rows` with the options a traced
    graph needs; use it where ``torch.compile`` or autograd must see one op.

    Args:
        x: ``[rows, N]`` bf16 / fp16 / fp32 (fp64 too on the CPU), any strides.
        k: elements per row, ``>= 1`` (``k > N`` or short windows give fills).
        largest: k largest (True) or k smallest.
        order: ``"none"``, ``"value"`` or ``"index"``.
        begin, end: optional per-row windows, int32/int64 ``[rows]`` on ``x``'s device.
        index_dtype: ``torch.int32`` or ``torch.int64``.

    Returns:
        ``(values [rows, k] of x.dtype, indices [rows, k] of index_dtype)``; values are
        differentiable w.r.t. ``x`` (the gradient goes to the selected positions).

    >>> x = torch.tensor([[1.0, 3.0, 2.0]], requires_grad=True)
    >>> v, i = torch.ops.deepselect.topk_rows(x, 2, True, "value", None, None, torch.int64)
    >>> i.tolist()
    [[1, 2]]
    """
    v, i = _rows(x, k, largest, order, begin, end, index_dtype)
    return v, i


@topk_rows_op.register_fake
def _topk_rows_fake(x, k, largest=True, order="value", begin=None, end=None, index_dtype=None):
    torch._check(x.dim() == 2, lambda: f"x must be 2-D [rows, N]; got {x.dim()}-D")
    torch._check(k >= 1, lambda: f"k must be >= 1; got {k}")
    rows = x.shape[0]
    values = x.new_empty((rows, k))
    indices = x.new_empty((rows, k), dtype=index_dtype or torch.int64)
    return values, indices


def _setup_context(ctx, inputs, output):
    x, k, _largest, _order, begin, end, _index_dtype = inputs
    _, indices = output
    n = x.shape[1]
    # Fill slots (short rows) carry an index that is not a position of x: mask them.
    ctx.masked = begin is not None or end is not None or k > n
    ctx.x_shape = x.shape
    ctx.save_for_backward(indices, begin, end)


def _backward(ctx, grad_values, _grad_indices):
    indices, begin, end = ctx.saved_tensors
    rows, n = ctx.x_shape
    grad_x = grad_values.new_zeros((rows, n))
    if n == 0:
        return grad_x, None, None, None, None, None, None
    indices = indices.long()
    if ctx.masked:
        b, e = TopkOptions(begin=begin, end=end).window_bounds(rows, n, indices.device)
        k = indices.shape[1]
        real = torch.arange(k, device=indices.device) < (e - b)[:, None]
        zero = torch.zeros((), dtype=indices.dtype, device=indices.device)
        indices = torch.where(real, indices, zero)
        grad_values = torch.where(real, grad_values, torch.zeros_like(grad_values))
        grad_x = grad_x.scatter_add(1, indices, grad_values)  # fills all point at 0
    else:
        grad_x = grad_x.scatter(1, indices, grad_values)  # indices of a row are distinct
    return grad_x, None, None, None, None, None, None


torch.library.register_autograd(topk_rows_op, _backward, setup_context=_setup_context)


# --------------------------------------------------------------------------------------
# the torch.topk drop-in
# --------------------------------------------------------------------------------------


def _as_int(name: str, value, position: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, torch.SymInt):
        return value
    if not isinstance(value, bool) and hasattr(value, "__index__"):
        return operator.index(value)
    raise TypeError(f"topk(): argument '{name}'{position} must be int, not {type(value).__name__}")


def _check_bool(name: str, value) -> bool:
    if value is True or value is False:
        return value
    if isinstance(value, np.bool_):  # what numpy comparisons give
        return bool(value)
    raise TypeError(f"topk(): argument '{name}' must be bool, not {type(value).__name__}")


def _check_out(out, input: torch.Tensor, shape: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(out, (tuple, list)):
        raise TypeError(
            f"topk(): argument 'out' must be tuple of Tensors, not {type(out).__name__}"
        )
    if len(out) != 2 or not all(isinstance(t, torch.Tensor) for t in out):
        raise TypeError(f"topk(): argument 'out' must be a tuple of 2 Tensors; got {out!r}")
    if input.requires_grad and torch.is_grad_enabled():
        raise TopkValueError(
            "topk(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad."
        )
    values, indices = out
    for name, t in (("values", values), ("indices", indices)):
        if overlaps(t, input):
            raise TopkValueError(
                f"topk(): out {name} overlaps input in memory (unsupported operation: some "
                f"elements of the input tensor and the written-to tensor refer to a single "
                f"memory location)"
            )
    if overlaps(values, indices):
        raise TopkValueError("topk(): out values and out indices overlap in memory")
    for name, t, dtype in (("values", values, input.dtype), ("indices", indices, torch.int64)):
        if t.dtype != dtype:
            raise TopkTypeError(
                f"topk(): out {name} must have dtype {dtype} "
                f"(Expected out tensor to have dtype {dtype}, but got {t.dtype} instead)"
            )
        if t.device != input.device:
            raise TopkValueError(
                f"topk(): out {name} must be on the input's device {input.device}; got {t.device}"
            )
        if tuple(t.shape) != shape:
            # torch.topk's out= rule: resize, warning when elements are thrown away
            if t.numel() != 0:
                warnings.warn(
                    f"An output with one or more elements was resized since it had shape "
                    f"{list(t.shape)}, which does not match the required output shape "
                    f"{list(shape)}. This behavior is deprecated; resize it to zero "
                    f"elements first (t.resize_(0)).",
                    UserWarning,
                    stacklevel=3,
                )
            t.resize_(shape)
    return values, indices


def _row_view(t: torch.Tensor, d: int, rows: int, k: int) -> torch.Tensor | None:
    """``t`` (the output layout) as a writable ``[rows, k]`` view, or None if there is none
    with adjacent elements in a row."""
    tm = t if d == t.dim() - 1 else t.movedim(d, -1)
    try:
        v = tm.view(rows, k)
    except RuntimeError:
        return None
    return v if k == 1 or v.stride(1) == 1 else None


def topk(
    input: torch.Tensor,
    k: int,
    dim: int = -1,
    largest: bool = True,
    sorted: bool = True,
    *,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.return_types.topk:
    """Drop-in ``torch.topk``: the k largest (or smallest) elements along ``dim``.

    Same signature, semantics, errors and return type as ``torch.topk``; the result is
    identical wherever ``torch.topk``'s is unique. Where elements tie, the one with the
    lower index along ``dim`` is taken (torch leaves that choice open). NaN counts as
    larger than +inf (so with ``largest=False`` NaNs come last), as in torch.

    Args:
        input: tensor of any shape (0-d too). bf16 / fp16 / fp32 (and fp64 on the CPU)
            run through deepselect; other dtypes are handed to ``torch.topk``.
        k: number of elements, ``0 <= k <= input.size(dim)`` (1 for a 0-d input).
        dim: dimension to select along (negative counts from the end). Default: last.
        largest: k largest (default) or k smallest.
        sorted: values best first, ties by lower index (default); False: any order.
        out: optional ``(values, indices)`` to write into: ``input``'s dtype and
            ``torch.int64``, on ``input``'s device; resized like torch's ``out=``.

    Returns:
        ``torch.return_types.topk(values, indices)``: ``input``'s shape with ``dim`` of
        size ``k``; ``indices`` int64 positions along ``dim``. ``values`` are
        differentiable w.r.t. ``input``.

    >>> x = torch.tensor([[0.5, 2.0, -1.0, 2.0], [3.0, 1.0, 1.0, 0.0]])
    >>> topk(x, 2).indices.tolist()
    [[1, 3], [0, 1]]
    >>> topk(x, 1, dim=0, largest=False).values.tolist()
    [[0.5, 1.0, -1.0, 0.0]]
    """
    if not isinstance(input, torch.Tensor):
        raise TypeError(
            f"topk(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}"
        )
    if has_torch_function_unary(input):  # a __torch_function__ subclass sees this call
        return handle_torch_function(
            topk, (input,), input, k, dim=dim, largest=largest, sorted=sorted, out=out
        )
    key = None
    if (
        out is None
        and not torch.compiler.is_compiling()  # a trace must not read (and guard on) _PLANS
        and type(input) is torch.Tensor
        and type(k) is int
        and type(dim) is int
        and type(largest) is bool
        and type(sorted) is bool
    ):  # a signature seen before skips the checks below (the key holds no value 1 == True)
        key = (input.shape, input.dtype, input.device, input.layout, k, dim, largest, sorted)
        plan = _PLANS.get(key)
        if plan is not None and not (
            (input.requires_grad and torch.is_grad_enabled())
            or torch.jit.is_tracing()
            or is_functorch_wrapped_tensor(input)
        ):
            d, nd, rows, n, lead, kk, order, strides, runner = plan
            x2 = _as_rows(input, d, nd, rows, n)
            if runner is not None and x2.stride() == strides:  # set up for these strides
                v2, i2 = runner(x2)
            else:
                v2, i2 = _rows(x2, kk, largest, order)
            return torch.return_types.topk(
                (_unflatten(v2, d, nd, lead), _unflatten(i2, d, nd, lead))
            )
    k = _as_int("k", k, " (position 2)")
    dim = _as_int("dim", dim, "")
    largest = _check_bool("largest", largest)
    sorted = _check_bool("sorted", sorted)
    if input.layout != torch.strided:
        raise TypeError(
            f"topk(): argument 'input' must be a dense (strided) tensor; got layout {input.layout}"
        )
    dtype = input.dtype
    device_type = input.device.type
    if dtype not in (_ROW_DTYPES_CPU if device_type in ("cpu", "meta") else SUPPORTED_DTYPES):
        return torch.topk(input, k, dim, largest, sorted, out=out)

    nd = input.dim()
    lo, hi = (-1, 0) if nd == 0 else (-nd, nd - 1)
    if dim < lo or dim > hi:
        raise TopkIndexError(
            f"topk(): dim must be in [{lo}, {hi}] for a {nd}-D input "
            f"(Dimension out of range (expected to be in range of [{lo}, {hi}], "
            f"but got {dim}))"
        )
    if nd == 0:
        d, n, lead = 0, 1, ()
    else:
        d = dim % nd
        n = input.shape[d]
        lead = input.shape[:d] + input.shape[d + 1 :]
    if k < 0 or k > n:
        raise TopkValueError(
            f"topk(): selected index k out of range: k must be in [0, {n}] "
            f"(the size of dim {dim}); got k={k}"
        )
    if not torch.compiler.is_compiling() and is_functorch_wrapped_tensor(input):
        # vmap, grad, jvp, jacrev: composable ops
        if out is not None:
            raise TopkValueError("topk(): out= is not supported under torch.func transforms")
        return _sorted_topk(input, k, dim, largest, sorted)
    kk = 1 if nd == 0 else k  # a 0-d input gives its element back, for k = 0 as for k = 1
    rows = 1
    for s in lead:
        rows = rows * s
    if rows == 0 or kk == 0:  # nothing to select: torch's own answer is the same
        return torch.topk(input, k, dim, largest, sorted, out=out)

    order = "value" if sorted else "none"
    x2 = _as_rows(input, d, nd, rows, n)
    if out is not None:
        shape = () if nd == 0 else tuple(input.shape[:d]) + (k,) + tuple(input.shape[d + 1 :])
        ov, oi = _check_out(out, input, shape)
        if torch.compiler.is_compiling() or torch.jit.is_tracing() or _abstract(input):
            v2, i2 = topk_rows_op(x2, kk, largest, order, None, None, torch.int64)
            ov.copy_(_unflatten(v2, d, nd, lead))
            oi.copy_(_unflatten(i2, d, nd, lead))
            return torch.return_types.topk((ov, oi))
        dv = _row_view(ov, d, rows, kk) if nd else ov.view(1, 1)
        di = _row_view(oi, d, rows, kk) if nd else oi.view(1, 1)
        if dv is not None and di is not None:  # write in place: nothing is allocated
            _rows(x2, kk, largest, order, out_values=dv, out_indices=di)
        else:
            v2, i2 = _rows(x2, kk, largest, order)
            ov.copy_(_unflatten(v2, d, nd, lead))
            oi.copy_(_unflatten(i2, d, nd, lead))
        return torch.return_types.topk((ov, oi))

    if (
        torch.compiler.is_compiling()
        or (input.requires_grad and torch.is_grad_enabled())
        or torch.jit.is_tracing()
        or _abstract(input)
    ):  # the registered op: autograd, traces, meta and fake tensors see one node
        v2, i2 = topk_rows_op(x2, kk, largest, order, None, None, torch.int64)
    else:
        v2, i2 = _rows(x2, kk, largest, order)
        if key is not None and not _abstract(input):
            if len(_PLANS) >= _PLAN_LIMIT:
                _PLANS.clear()
            runner = None
            if n <= 1 or x2.stride(1) == 1:  # rows that _rows passes on as they are
                runner = row_runner(x2, kk, largest, order, torch.int64)
            _PLANS[key] = (d, nd, rows, n, lead, kk, order, x2.stride(), runner)
    return torch.return_types.topk((_unflatten(v2, d, nd, lead), _unflatten(i2, d, nd, lead)))


# Eager calls' layouts by signature (shape, dtype, device, layout, k, dim, largest,
# sorted): what the checks of :func:`topk` decided, so a repeated call goes straight
# to the row API. Never holds a tensor; dict get and set are atomic across threads.
_PLANS: dict[tuple, tuple] = {}
_PLAN_LIMIT = 1024


def _as_rows(input: torch.Tensor, d: int, nd: int, rows: int, n: int) -> torch.Tensor:
    """``input`` as ``[rows, N]`` with ``dim`` (``d``) last."""
    if nd == 2 and d == 1:  # the common case: no reshaping at all
        return input
    if nd == 0:
        return input.reshape(1, 1)
    if d == nd - 1:
        return input.reshape(rows, n)
    return input.movedim(d, -1).reshape(rows, n)


def _sorted_topk(
    input: torch.Tensor, k: int, dim: int, largest: bool, sorted: bool
) -> torch.return_types.topk:
    """The same selection from composable torch ops, for the torch.func transforms
    (vmap, grad, jvp, jacrev), which cannot see inside the kernels: a stable sort keeps
    tied elements in index order (ties to the lowest index) and puts NaN above +inf,
    so its first k are exactly deepselect's, sorted. O(N log N): a fallback, not the
    fast path."""
    if input.dim() == 0:
        zero = torch.zeros((), dtype=torch.int64, device=input.device)
        return torch.return_types.topk((input.clone(), zero))
    v, i = torch.sort(input, dim=dim, descending=largest, stable=True)
    return torch.return_types.topk((v.narrow(dim, 0, k), i.narrow(dim, 0, k)))


def _unflatten(t2: torch.Tensor, d: int, nd: int, lead: tuple) -> torch.Tensor:
    """``[rows, k]`` back to the input's layout with ``dim`` of size k (a view)."""
    if nd == 2 and d == 1:
        return t2
    if nd == 0:
        return t2.reshape(())
    t = t2.reshape(tuple(lead) + (t2.shape[1],))
    return t if d == nd - 1 else t.movedim(-1, d)
