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

**Held launches.** A caller that repeats whole calls (:func:`deepselect.topk_rows` per
call signature) goes further: it runs a call's first time inside :func:`recording`,
which notes each launch (the bound kernel and its arguments) and each scratch buffer
the call allocates through :func:`scratch`, and hands the record with the call's own
tensors to :func:`held`. Every tensor argument is then a place in one of those
tensors or buffers (a base and a byte offset), and every other argument is fixed by
the call signature, so :func:`held` writes one function that, on a later call of the
signature, allocates the scratch, computes each tensor argument's address and calls
the launchers with them: no binding, no key, no per-argument work. The launchers
take an address as an int (Triton 3.6 and 3.9 alike), which also skips their
pointer check.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Hashable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch

__all__ = ["launch", "cached", "clear", "recording", "scratch", "held"]

ENABLED = os.environ.get("DEEPSELECT_LAUNCH_CACHE", "1") not in ("", "0")
"""DEEPSELECT_LAUNCH_CACHE=0: every launch takes Triton's own path (for a Triton whose
launcher differs; read at import, settable at run time)."""
HOLD = True
"""False: a held call (:func:`held`) launches nothing and the caller takes its full path
(settable at run time, e.g. to time the difference)."""
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
    rec = getattr(_LOCAL, "rec", None)
    driver = _driver() if ENABLED else None
    if driver is None:
        fn[grid](*args, **kwargs)
        if rec is not None:  # the interpreter's launches are repeated as they are
            rec.note(fn, grid, args, kwargs, None, ok=ENABLED)
        return
    get_device, get_stream, runtime = driver
    if _hooked(runtime.launch_enter_hook) or _hooked(runtime.launch_exit_hook):
        _tritons_path(fn, grid, args, kwargs, rec)  # a profiler is watching: with metadata
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
        _tritons_path(fn, grid, args, kwargs, rec)
        return
    if bound is False:
        kernel = fn[grid](*args, **kwargs)
        if len(_CACHE) >= _LIMIT:
            _CACHE.clear()
        bound = _CACHE[full] = _bind(fn, kernel, grid, args, kwargs)
        if rec is not None:
            rec.note(fn, grid, args, kwargs, bound, ok=bound is not None, device=device)
        return
    if bound is None:
        _tritons_path(fn, grid, args, kwargs, rec)
        return
    k = bound.kernel
    g0, g1, g2 = bound.grid
    k.run(g0, g1, g2, get_stream(device), k.function, k.packed_metadata, None, None, None,
          *args, *bound.tail)  # fmt: skip
    if rec is not None:
        rec.note(fn, grid, args, kwargs, bound, device=device)


def _tritons_path(fn: Any, grid: tuple, args: Sequence[Any], kwargs: dict, rec) -> None:
    """``fn[grid](*args, **kwargs)``: a launch a held call cannot repeat (``rec``, the
    recording in progress, if any, is spoilt)."""
    fn[grid](*args, **kwargs)
    if rec is not None:
        rec.ok = False


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


# ------------------------------------------------------------------- held launches
_LOCAL = threading.local()  # .rec: the Recording in progress on this thread, if any
_SCRATCH_ALIGN = 512  # bytes: a scratch buffer's offset in a held call's one allocation
_LOG = logging.getLogger("deepselect")


class Recording:
    """What one call launched (:func:`launch`) and allocated (:func:`scratch`), noted
    while :func:`recording` is active on its thread. ``ok`` turns False at any launch
    that cannot be repeated from the record (Triton's own path on a GPU)."""

    def __init__(self) -> None:
        self.launches: list[tuple] = []  # (fn, grid, args, kwargs, bound | None)
        self.scratch: list[tuple[torch.Tensor, bool]] = []  # (buffer, zeroed)
        self.ok = True
        self.device: int | None = None

    def note(self, fn, grid, args, kwargs, bound, ok: bool = True, device=None) -> None:
        self.launches.append((fn, grid, args, kwargs, bound))
        if self.device is None:
            self.device = device
        self.ok = self.ok and ok and device == self.device


@contextmanager
def recording():
    """Note this thread's launches and scratch buffers until the block ends."""
    prev = getattr(_LOCAL, "rec", None)
    rec = _LOCAL.rec = Recording()
    try:
        yield rec
    finally:
        _LOCAL.rec = prev


def scratch(shape, dtype: torch.dtype, device: torch.device, zero: bool = False) -> torch.Tensor:
    """``torch.empty`` (``torch.zeros`` with ``zero``) of a buffer that a launch uses
    during one call only: a held call allocates it again each time."""
    t = (torch.zeros if zero else torch.empty)(shape, dtype=dtype, device=device)
    rec = getattr(_LOCAL, "rec", None)
    if rec is not None:
        rec.scratch.append((t, zero))
    return t


class _NotHeld(Exception):
    """A record that cannot be repeated from the call's tensors alone."""


def held(rec: Recording, tensors: Sequence[torch.Tensor | None]) -> Callable | None:
    """The recorded call as a function of new tensors in the places of ``tensors``
    (the call's own: input, outputs, windows; None where absent), or None where it
    cannot be repeated from them: nothing or a Triton-path launch recorded, or a tensor
    argument that is neither a place in one of ``tensors`` or of the scratch buffers
    nor in exactly one of them.

    The function takes the new tensors in the same order, launches and returns True;
    or, where the new tensors' 16-byte alignment differs from the recorded ones' (a
    kernel specialised on it), where a launch hook or DEBUG logging is on, or on
    another current device, launches nothing and returns False (the caller takes the
    full path). The caller guarantees everything else the record depends on: shapes,
    strides, dtypes, device and options (its call signature)."""
    if not rec.ok or not rec.launches:
        return None
    compiled = rec.launches[0][4] is not None
    if any((b is not None) != compiled for *_, b in rec.launches):
        return None
    spans = [_span(t) for t in tensors] + [_span(t) for t, _ in rec.scratch]
    try:
        places = [_places(args, spans) for _, _, args, _, _ in rec.launches]
    except _NotHeld:
        return None
    used = sorted({j for p in places for j, _ in p if j < len(tensors)})
    align = {j: tensors[j].data_ptr() % _ALIGN for j in used}
    if compiled:
        return _compiled_replay(rec, places, len(tensors), used, align)
    return _interpreted_replay(rec, places, tensors, align)


def _span(t: torch.Tensor | None) -> tuple[int, int] | None:
    """``[first, last + 1)`` byte addresses of a tensor's elements (None: no place)."""
    if t is None or t.numel() == 0:
        return None
    end = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
    p = t.data_ptr()
    return p, p + end * t.element_size()


def _places(args, spans) -> list[tuple[int, int]]:
    """``(owner, byte offset)`` of each tensor argument, in order (tuples flattened)."""
    out = []
    for a in args:
        if type(a) is tuple:
            out += _places(a, spans)
        elif isinstance(a, torch.Tensor):
            p = a.data_ptr()
            owners = [j for j, s in enumerate(spans) if s is not None and s[0] <= p < s[1]]
            if len(owners) != 1:
                raise _NotHeld
            out.append((owners[0], p - spans[owners[0]][0]))
    return out


def _layout(rec: Recording) -> tuple[list[tuple[str, int]], int, int]:
    """Each scratch buffer's place in a held call's two allocations (``e``: uninitialised,
    ``z``: zeroed), ``_SCRATCH_ALIGN`` apart, and the two sizes in bytes."""
    where, size = [], {"e": 0, "z": 0}
    for t, zero in rec.scratch:
        pool = "z" if zero else "e"
        where.append((pool, size[pool]))
        nbytes = t.numel() * t.element_size()
        size[pool] += -(-nbytes // _SCRATCH_ALIGN) * _SCRATCH_ALIGN
    return where, size["e"], size["z"]


def _compiled_replay(rec: Recording, places, ntensors: int, used, align) -> Callable:
    """The held call as generated Python: the launchers called with the arguments'
    expressions (addresses as ints, everything else as recorded)."""
    where, e_bytes, z_bytes = _layout(rec)
    consts: list[Any] = []

    def expr(a, it) -> str:
        if type(a) is tuple:
            return "(" + "".join(expr(b, it) + ", " for b in a) + ")"
        if isinstance(a, torch.Tensor):
            j, off = next(it)
            if j < ntensors:
                return f"(p{j} + {off})"
            pool, base = where[j - ntensors]
            return f"(p{pool} + {base + off})"
        if a is None or type(a) in (int, bool):
            return repr(a)
        consts.append(a)
        return f"C[{len(consts) - 1}]"

    names = ", ".join(f"r{j}" for j in range(ntensors))
    body = [f"def replay({names}):"]
    body.append("    if not (MOD.ENABLED and MOD.HOLD):\n        return False")
    body.append("    if H(RT.launch_enter_hook) or H(RT.launch_exit_hook):")
    body.append("        return False")
    body.append("    if LOG.isEnabledFor(10) or DEV() != D:")
    body.append("        return False")
    for j in used:
        body.append(f"    p{j} = r{j}.data_ptr()")
    if used:
        check = " or ".join(f"p{j} % {_ALIGN} != {align[j]}" for j in used)
        body.append(f"    if {check}:\n        return False")
    for pool, nbytes, alloc in (("e", e_bytes, "EMPTY"), ("z", z_bytes, "ZEROS")):
        if nbytes:
            body.append(f"    {pool} = {alloc}({nbytes}, dtype=U8, device=TD)")
            body.append(f"    p{pool} = {pool}.data_ptr()")
    body.append("    s = STREAM(D)")
    ns: dict[str, Any] = {}
    for i, ((_, _, args, _, bound), pl) in enumerate(zip(rec.launches, places, strict=True)):
        k = bound.kernel
        ns.update({f"L{i}": k.run, f"F{i}": k.function, f"M{i}": k.packed_metadata})
        ns[f"T{i}"] = bound.tail
        g = ", ".join(str(v) for v in bound.grid)
        it = iter(pl)
        a = ", ".join(expr(v, it) for v in args)
        body.append(f"    L{i}({g}, s, F{i}, M{i}, None, None, None, {a}, *T{i})")
    body.append("    return True")
    get_device, get_stream, runtime = _driver()
    device = rec.scratch[0][0].device if rec.scratch else None
    ns.update(
        MOD=_module(), LOG=_LOG, DEV=get_device, D=rec.device, STREAM=get_stream, C=consts,
        U8=torch.uint8, TD=device, EMPTY=torch.empty, ZEROS=torch.zeros,
        H=_hooked, RT=runtime,
    )  # fmt: skip
    exec("\n".join(body), ns)  # noqa: S102 - source built above from ints and names only
    return ns["replay"]


def _interpreted_replay(rec: Recording, places, tensors, align) -> Callable:
    """The held call under the interpreter (and with the launch cache off): each
    launch through ``fn[grid]`` with the recorded tensor arguments rebuilt as the same
    views of the new tensors and of fresh scratch buffers."""
    recorded = [args for _, _, args, _, _ in rec.launches]
    views = [_view_specs(a, iter(pl)) for a, pl in zip(recorded, places, strict=True)]
    zeroed = [z for _, z in rec.scratch]
    shapes = [(t.numel() * t.element_size(), t.device) for t, _ in rec.scratch]
    launches = [(fn, grid, kwargs) for fn, grid, _, kwargs, _ in rec.launches]

    def replay(*new: torch.Tensor | None) -> bool:
        if not HOLD or _LOG.isEnabledFor(logging.DEBUG):
            return False
        if any(new[j].data_ptr() % _ALIGN != a for j, a in align.items()):
            return False
        buffers = [
            (torch.zeros if z else torch.empty)(n, dtype=torch.uint8, device=d)
            for (n, d), z in zip(shapes, zeroed, strict=True)
        ]
        owners = list(new) + buffers
        for (fn, grid, kwargs), spec in zip(launches, views, strict=True):
            fn[grid](*_rebuild(spec, owners), **kwargs)
        return True

    return replay


def _view_specs(args, it) -> tuple:
    """The recorded arguments with each tensor replaced by how to rebuild it: its
    owner, its byte offset from the owner's first element, dtype, shape and strides."""
    out = []
    for a in args:
        if type(a) is tuple:
            out.append(_view_specs(a, it))
        elif isinstance(a, torch.Tensor):
            j, off = next(it)
            out.append(_View(j, off, a.dtype, a.shape, a.stride()))
        else:
            out.append(a)
    return tuple(out)


@dataclass(frozen=True)
class _View:
    owner: int
    offset: int  # bytes from the owner's first element
    dtype: torch.dtype
    shape: torch.Size
    stride: tuple[int, ...]


def _rebuild(spec: tuple, owners) -> tuple:
    out = []
    for a in spec:
        if type(a) is tuple:
            out.append(_rebuild(a, owners))
        elif isinstance(a, _View):
            o = owners[a.owner]
            start = o.storage_offset() * o.element_size() + a.offset
            t = torch.empty(0, dtype=a.dtype, device=o.device)
            size = t.element_size()
            out.append(t.set_(o.untyped_storage(), start // size, a.shape, a.stride))
        else:
            out.append(a)
    return tuple(out)


@cache
def _module():
    import sys

    return sys.modules[__name__]
