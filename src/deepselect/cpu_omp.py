"""Running the CPU backend's compiled kernels on torch's own OpenMP threads.

After a parallel torch operation, torch's OpenMP workers keep spinning for a while
(libgomp's default wait policy) before they sleep. Kernels started on threads of our
own then share the cores with them: on 2 cores a 16 x 1M top-k took 15-17 ms right
after a torch op against 10-11 ms after itself. Started as a parallel region of the
OpenMP runtime torch has loaded (``GOMP_parallel``, which libgomp, LLVM's libomp and
Intel's libiomp5 all export), the work runs on those very workers instead, and the
spinning ones pick it up at once.

The region's body is a Numba ``cfunc`` that takes one ``int64`` descriptor: the
tasks, a shared task counter (threads take chunks of tasks with an atomic add), and
the kernels' arrays as addresses and shapes. Where no such runtime is found (not
Linux, or torch built without OpenMP), :func:`runtime` returns None and the caller
falls back to a thread pool; ``DEEPSELECT_OPENMP=0`` forces that fallback. So does
a forked child process: GNU OpenMP's thread team does not survive ``fork`` (a
parallel region there never returns; torch's own operations hang the same way).
"""

from __future__ import annotations

import ctypes
import os
from functools import cache

import torch
from numba import types
from numba.extending import intrinsic

__all__ = ["as_pointer", "fetch_add", "runtime"]

_NAMES = ("libgomp", "libiomp5", "libomp")
_forked = False


def _after_fork_in_child() -> None:
    global _forked
    _forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


@intrinsic
def as_pointer(typingctx, address, ty):
    """``address`` (int64) as a pointer to ``ty``'s numbers (for ``numba.carray``)."""
    if not isinstance(ty, types.NumberClass):
        return None
    sig = types.CPointer(ty.instance_type)(types.int64, ty)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

    return sig, codegen


@intrinsic
def fetch_add(typingctx, ptr, value):
    """Atomically ``*ptr += value`` (int64); returns the old value."""
    sig = types.int64(types.CPointer(types.int64), types.int64)

    def codegen(context, builder, signature, args):
        return builder.atomic_rmw("add", args[0], args[1], "monotonic")

    return sig, codegen


def _loaded_libraries() -> list[str]:
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return []
    return sorted(paths)


def runtime():
    """``GOMP_parallel`` of the OpenMP runtime torch runs its operations on (a ctypes
    function), or None: then run the kernels on a thread pool."""
    return None if _forked else _runtime()


@cache
def _runtime():
    if os.environ.get("DEEPSELECT_OPENMP", "1") in ("0", ""):
        return None
    if "OpenMP" not in torch.__config__.parallel_info():
        return None
    torch_dir = os.path.dirname(torch.__file__)
    libs = [p for p in _loaded_libraries() if os.path.basename(p).startswith(_NAMES)]
    # torch's own copy first (wheels bundle one), then whatever else is loaded
    libs.sort(key=lambda p: not p.startswith(torch_dir))
    for path in libs:
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LOCAL)
            fn = lib.GOMP_parallel
        except (OSError, AttributeError):
            continue
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
        fn.restype = None
        return fn
    return None
