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


if (
    os.environ.get("TRITON_INTERPRET") == "1"
    and os.environ.get("DEEPSELECT_INTERPRETER_PATCH", "1") == "1"
):
    _interpret_without_nested_repatching()
    _interpret_with_type_lookups_kept()


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
