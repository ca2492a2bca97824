"""Launching a compiled Triton kernel again without Triton's per-call argument binding.

``kernel[grid](*args, **kwargs)`` costs tens of microseconds on the host each time
(Triton 3.6 and 3.9 alike): ``JITFunction.run`` binds every argument to the signature,
computes each one's specialization (dtype, 16-byte alignment, ``== 1``), hashes that
into a cache key, looks the compiled kernel up, checks the globals it read, and only
then calls the compiled launcher. :func:`launch` does that once per call signature,
keeps the ``CompiledKernel`` that ``JITFunction.run`` returns, and afterwards calls
its launcher directly, as ``JITFunction.run`` itself does at its end (the same call
in both versions)::

    kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata,
               launch_metadata, launch_enter_hook, launch_exit_hook, *bound_args)

where ``bound_args`` are all the kernel's parameters in order, constexprs included
(the launcher skips them). ``launch_metadata`` and the hooks are passed as None (the
launcher then calls no hook) while no launch hook is set; with one set (a profiler)
every call takes Triton's own path.

What Triton would specialize on must be in the cache key, or a kernel compiled for
one case would run on another. Unless the caller gives a key, :func:`launch` derives
one (:func:`_arg_key`): integers by value (every specialization Triton makes of one:
its width, whether it equals 1, whether 16 divides it, follows from the value), a
tensor's dtype and 16-byte alignment, a tuple's elements, each so, a float by its
type, and any other argument by type and value; keyword arguments (constexprs and
launch options) by value. A launch site's integers are fixed by its call signature (shapes, strides,
options), so repeated calls find their entry. :func:`launch` adds the grid and the
current device.

Under ``TRITON_INTERPRET=1`` ``JITFunction`` is an interpreter object that returns no
compiled kernel: every call takes Triton's own path there.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch

__all__ = ["launch", "cached", "clear"]

ENABLED = os.environ.get("DEEPSELECT_LAUNCH_CACHE", "1") not in ("", "0")
"""DEEPSELECT_LAUNCH_CACHE=0: every launch takes Triton's own path (for a Triton whose
launcher differs; read at import, settable at run time)."""
_ALIGN = 16  # bytes: Triton's pointer specialization (tt.divisibility = 16)
_LIMIT = 1024


@dataclass(frozen=True)
class _Bound:
    kernel: Any  # triton.compiler.CompiledKernel
    grid: tuple[int, int, int]
    tail: tuple  # the parameters after the positional arguments: keywords and defaults


_CACHE: dict[tuple, _Bound | None] = {}  # None: this signature always takes Triton's path


def clear() -> None:
    """Forget every bound launch (e.g. after ``triton`` recompiled its kernels)."""
    _CACHE.clear()


@cache
def _driver():
    """``(get_current_device, get_current_stream, knobs.runtime)`` of the active Triton
    driver (imported on first use), or None under the interpreter or without a GPU
    driver: then every launch takes Triton's own path."""
    import triton
    from triton import knobs

    if knobs.runtime.interpret:
        return None
    try:
        d = triton.runtime.driver.active
        return d.get_current_device, d.get_current_stream, knobs.runtime
    except RuntimeError:  # no active driver
        return None


def launch(
    fn: Any,
    grid: Sequence[int],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    key: Hashable | None = None,
) -> None:
    """``fn[grid](*args, **kwargs)``, from the second call of a signature on without
    Triton's argument binding.

    Args:
        fn: a ``@triton.jit`` function.
        grid: up to three ints.
        args: the positional arguments; everything that changes from call to call
            (tensors above all) must be here, not in ``kwargs``.
        kwargs: constexprs and launch options (``num_warps``, ``maxnreg``...).
        key: hashable; equal keys must mean equal specialization classes of ``args``
            (see the module's docstring) and equal ``kwargs``. None: derived from
            them (a microsecond or two for thirty arguments).

    A launch site ``kernel[grid](*args, **kw)`` becomes
    ``launch_cache.launch(kernel, grid, args, kw)``, or keeps its form with the kernel
    wrapped once by :func:`cached`.
    """
    grid = tuple(grid)
    driver = _driver() if ENABLED else None
    if driver is None:
        fn[grid](*args, **kwargs)
        return
    get_device, get_stream, runtime = driver
    if _hooked(runtime.launch_enter_hook) or _hooked(runtime.launch_exit_hook):
        fn[grid](*args, **kwargs)  # a profiler is watching: Triton's path, with metadata
        return
    device = get_device()
    try:
        if key is None:
            key = (_arg_key(args), tuple(kwargs.items()))
        else:
            key = (key, tuple(_align(a) for a in args if isinstance(a, torch.Tensor)))
        full = (key, fn, grid, device)
        bound = _CACHE.get(full, False)
    except TypeError:  # an unhashable argument: Triton's path
        fn[grid](*args, **kwargs)
        return
    if bound is False:
        kernel = fn[grid](*args, **kwargs)
        if len(_CACHE) >= _LIMIT:
            _CACHE.clear()
        _CACHE[full] = _bind(fn, kernel, grid, args, kwargs)
        return
    if bound is None:
        fn[grid](*args, **kwargs)
        return
    k = bound.kernel
    g0, g1, g2 = bound.grid
    k.run(g0, g1, g2, get_stream(device), k.function, k.packed_metadata, None, None, None,
          *args, *bound.tail)  # fmt: skip


class cached:  # noqa: N801 - used like the decorator-made kernels it wraps
    """A ``@triton.jit`` kernel whose ``kernel[grid](*args, **kwargs)`` launches go
    through :func:`launch`; every other attribute is the kernel's own."""

    def __init__(self, fn: Any):
        self.jit = fn

    def __getitem__(self, grid):
        fn = self.jit

        def run(*args, **kwargs):
            launch(fn, grid, args, kwargs)

        return run

    def __getattr__(self, name: str):
        return getattr(self.jit, name)


def _align(t: torch.Tensor) -> tuple:
    return (t.dtype, t.data_ptr() % _ALIGN == 0)


def _arg_key(args: Sequence[Any]) -> tuple:
    """The derived key of positional arguments: integers (sizes, strides, flags) by
    value, which fixes every specialization Triton makes of them; tensors by dtype and
    16-byte alignment; tuples element by element; floats by type (Triton passes any
    as fp32); bools by type and value (``True == 1`` must not share a kernel);
    anything else by type and value."""
    out = []
    for a in args:
        t = type(a)
        if t is int:
            out.append(a)
        elif t is tuple:
            out.append(_arg_key(a))
        elif isinstance(a, torch.Tensor):
            out.append((a.dtype, a.data_ptr() % _ALIGN == 0))
        elif t is float:
            out.append(float)  # Triton passes a float as fp32 whatever its value
        else:
            out.append((t, a))
    return tuple(out)


def _hooked(hook) -> bool:
    """Whether a launch hook is set: a callable, or (Triton 3.6, 3.9) a non-empty
    ``HookChain``. An empty chain does nothing, so None is passed in its place."""
    return hook is not None and bool(getattr(hook, "calls", True))


def _bind(fn: Any, kernel: Any, grid: tuple, args: Sequence[Any], kwargs: dict) -> _Bound | None:
    """The launch to repeat, or None where it cannot be repeated safely: no compiled
    kernel (the interpreter), a tensor among the keyword arguments, or a parameter
    neither given nor defaulted."""
    params = getattr(fn, "params", None)
    if params is None or kernel is None or getattr(kernel, "function", None) is None:
        return None
    if not hasattr(kernel, "packed_metadata") or len(args) > len(params) or len(grid) > 3:
        return None
    tail = []
    for p in params[len(args) :]:
        if p.name in kwargs:
            value = kwargs[p.name]
        else:
            value = p.default
            if value is _empty():
                return None
        if isinstance(value, torch.Tensor):
            return None
        tail.append(value)
    return _Bound(kernel, (*grid, 1, 1)[:3], tuple(tail))


@cache
def _empty() -> object:
    import inspect

    return inspect.Parameter.empty
