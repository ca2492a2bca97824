"""Shared test setup.

Without a CUDA device the Triton kernels run in Triton's interpreter, which must be
switched on before any kernel module is imported.
"""

import functools
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

HAS_CUDA = torch.cuda.is_available()


def _interpret_without_nested_repatching() -> None:
    """Triton's interpreter (3.9) patches ``triton.language`` for a launch, then again
    (``inspect.getmembers`` over the modules) on every nested ``@triton.jit`` call, though
    the launch's patch of the same modules is in force until it ends: ~40% of an
    interpreted launch's time in this suite. Skip only those nested re-patches; every
    launch still patches and restores as before. Where the interpreter's internals
    differ (another Triton), nothing is changed; ``DEEPSELECT_INTERPRETER_PATCH=0``
    turns it off."""
    import inspect

    import triton.language as tl
    from triton.runtime import interpreter as ti

    if not all(hasattr(ti, n) for n in ("_patch_lang", "GridExecutor", "_LangPatchScope")):
        return
    patch, launch = ti._patch_lang, ti.GridExecutor.__call__
    state = {"launch": False, "patched": frozenset()}

    @functools.cache  # a function's answer, found once (its module's globals are set)
    def langs(fn) -> frozenset:
        mods = (v for v in fn.__globals__.values() if inspect.ismodule(v))
        return frozenset(id(v) for v in mods if v in (tl, tl.core))

    def patch_once(fn):
        mine = langs(fn)
        if state["launch"] and mine and mine <= state["patched"]:
            return ti._LangPatchScope()  # the launch's patch covers it: nothing to undo
        scope = patch(fn)
        if state["launch"]:
            state["patched"] = state["patched"] | mine
        return scope

    def launch_scoped(self, *args, **kwargs):
        outer = dict(state)
        state.update(launch=True, patched=frozenset())
        try:
            return launch(self, *args, **kwargs)
        finally:
            state.update(outer)

    ti._patch_lang = patch_once
    ti.GridExecutor.__call__ = launch_scoped


def _interpret_with_type_lookups_kept() -> None:
    """Lookups Triton's interpreter (3.9) repeats on every operation, kept once per
    type: the numpy dtype of a Triton type (``_get_np_dtype`` builds a table of 19
    types each call) and block types (the builder's ``get_block_ty`` and
    ``block_type.with_element_ty`` construct one, validating its shape, each call).
    All are pure functions of immutable types: about a third of an interpreted
    sampling kernel's time. Where the interpreter differs (another
    Triton), nothing is changed; ``DEEPSELECT_INTERPRETER_PATCH=0`` turns it off."""
    from triton.runtime import interpreter as ti

    builder = getattr(ti, "InterpreterBuilder", None)
    if not callable(getattr(ti, "_get_np_dtype", None)) or builder is None:
        return
    if not callable(getattr(builder, "get_block_ty", None)):
        return
    import triton.language as tl

    np_dtype, block_ty = ti._get_np_dtype, builder.get_block_ty
    with_element_ty = getattr(tl.block_type, "with_element_ty", None)
    np_dtypes: dict = {}
    block_tys: dict = {}

    def kept(found: dict, key, make):
        try:
            return found[key]
        except KeyError:
            value = found[key] = make()
            return value
        except TypeError:  # an unhashable type: as before
            return make()

    def get_np_dtype(tt_dtype):
        # a block's numpy dtype is its element's (a pointer's: uint64 either way)
        key = tt_dtype.element_ty if isinstance(tt_dtype, tl.block_type) else tt_dtype
        return kept(np_dtypes, key, lambda: np_dtype(tt_dtype))

    def get_block_ty(self, dtype, shape):
        return kept(block_tys, (dtype, tuple(shape)), lambda: block_ty(self, dtype, shape))

    def kept_with_element_ty(self, scalar_ty):
        key = (scalar_ty, tuple(self.shape))
        return kept(block_tys, key, lambda: with_element_ty(self, scalar_ty))

    ti._get_np_dtype = get_np_dtype
    builder.get_block_ty = get_block_ty
    if callable(with_element_ty):
        tl.block_type.with_element_ty = kept_with_element_ty


def _interpret_without_dead_overflow_checks() -> None:
    """Triton's interpreter (3.6-3.9) builds an overflow check around every int32 add,
    sub and mul (two casts, the op in int64, three compares: ~8 more operations), whose
    only use is a ``device_assert`` that does nothing unless the launch is in debug
    mode. Skip the check where the interpreter's options say debug is off: the results
    are the same operations' results. About a third of an interpreted draw test's time
    (the seeded hash is int32 multiplies). Only the interpreter's builder is affected;
    where Triton's semantic layer differs, nothing is changed."""
    from triton.language import semantic
    from triton.runtime import interpreter as ti

    cls = getattr(semantic, "TritonSemantic", None)
    check = getattr(cls, "binary_op_sanitize_overflow_impl", None)
    builder = getattr(ti, "InterpreterBuilder", None)
    if not callable(check) or not callable(getattr(cls, "device_assert", None)) or builder is None:
        return

    def check_if_asserted(self, lhs, rhs, binary_op):
        if isinstance(self.builder, builder) and not getattr(self.builder.options, "debug", True):
            return None
        return check(self, lhs, rhs, binary_op)

    cls.binary_op_sanitize_overflow_impl = check_if_asserted


def _log_compiles(path: str) -> None:
    """Each Triton compile or cache lookup appended to ``path`` as a line: process,
    kernel, hash, cache hit (0/1), seconds, time, test function
    (``scripts/gpu_test_pieces.py compiles`` sums them). Where Triton has no
    compilation listener (before 3.4), nothing."""
    import time

    import triton

    compilation = getattr(getattr(triton, "knobs", None), "compilation", None)
    if compilation is None or not hasattr(compilation, "listener"):
        return

    def listener(*, src, metadata, metadata_group, times, cache_hit):
        spent = times.ir_initialization + times.total_lowering + times.store_results
        # the test that asked for it: pytest's "<file>::<name>[<params>] (<phase>)"
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0].split("[")[0]
        line = (
            f"{os.getpid()}\t{getattr(src, 'name', '?')}\t{metadata.get('hash', '?')}\t"
            f"{int(cache_hit)}\t{spent / 1e6:.3f}\t{time.time():.1f}\t{test}\n"
        )
        try:  # one short write a line: whole lines between processes
            with open(path, "a") as f:
                f.write(line)
        except OSError:  # a log that cannot be written must not fail a compile
            pass

    compilation.listener = listener


if (
    os.environ.get("TRITON_INTERPRET") == "1"
    and os.environ.get("DEEPSELECT_INTERPRETER_PATCH", "1") == "1"
):
    _interpret_without_nested_repatching()
    _interpret_with_type_lookups_kept()
    _interpret_without_dead_overflow_checks()


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


if os.environ.get("DEEPSELECT_COMPILE_LOG"):
    _log_compiles(os.environ["DEEPSELECT_COMPILE_LOG"])
