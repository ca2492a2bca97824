"""Shared test setup.

Without a CUDA device the Triton kernels run in Triton's interpreter, which must be
switched on before any kernel module is imported.
"""

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
    if os.environ.get("DEEPSELECT_INTERPRETER_PATCH", "1") != "1":
        return
    import inspect

    import triton.language as tl
    from triton.runtime import interpreter as ti

    if not all(hasattr(ti, n) for n in ("_patch_lang", "GridExecutor", "_LangPatchScope")):
        return
    patch, launch = ti._patch_lang, ti.GridExecutor.__call__
    state = {"launch": False, "patched": frozenset()}
    seen: dict = {}  # a function's answer, found once (its module's globals are set)

    def langs(fn) -> frozenset:
        mine = seen.get(fn)
        if mine is None:
            mods = (v for v in fn.__globals__.values() if inspect.ismodule(v))
            mine = seen[fn] = frozenset(id(v) for v in mods if v in (tl, tl.core))
        return mine

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


if os.environ.get("TRITON_INTERPRET") == "1":
    _interpret_without_nested_repatching()


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
