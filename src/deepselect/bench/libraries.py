"""The top-k implementations a run times: deepselect, torch.topk, and other GPU
libraries where they import (FlashInfer, sgl-kernel)."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass
class Library:
    """A top-k implementation behind one call: ``call(x, k, ordered) -> (values|None,
    indices)``. ``ordered`` asks for values sorted descending."""

    name: str
    call: Callable[[torch.Tensor, int, bool], tuple[torch.Tensor | None, torch.Tensor]]
    fill_index: int | None = None  # index written past N when k > N, if any
    note: str = ""


def deepselect_library() -> Library:
    """deepselect's ``topk_rows`` with int32 indices (backend picked by device)."""
    from ..api import topk_rows

    def call(x, k, ordered):
        return topk_rows(x, k, order="value" if ordered else "none", index_dtype=torch.int32)

    return Library("deepselect", call, fill_index=-1)


def torch_library() -> Library:
    def call(x, k, ordered):
        r = torch.topk(x, min(k, x.shape[1]), dim=1, largest=True, sorted=ordered)
        return r.values, r.indices

    return Library("torch.topk", call)


def backend_problem(device: torch.device | str) -> tuple[str | None, str]:
    """Whether deepselect's backend for ``device`` can run: ``(problem, note)``.

    ``problem`` is None when it can; ``note`` is a remark for the report (the CPU
    backend missing means ``topk_rows`` runs its sorting fallback).
    """
    device = torch.device(device)
    if device.type == "cuda":
        try:
            importlib.import_module("deepselect.triton_backend")
        except ImportError as exc:
            return (
                f"deepselect's Triton backend is not importable ({exc}); "
                "timing torch.topk and the read ceiling only",
                "",
            )
        return None, ""
    try:
        importlib.import_module("deepselect.cpu_backend")
    except ImportError as exc:
        return None, (
            f"deepselect's CPU backend is not importable ({exc}): topk_rows runs its exact "
            "sorting fallback, so its CPU times here are not the CPU backend's"
        )
    return None, ""


def _flashinfer():
    """The ``flashinfer`` module where it imports and has ``top_k``, else None."""
    if importlib.util.find_spec("flashinfer") is None:
        return None
    import flashinfer

    if getattr(flashinfer, "top_k", None) is None:
        topk_mod = getattr(flashinfer, "topk", None)
        if getattr(topk_mod, "top_k", None) is None:
            return None
        return topk_mod
    return flashinfer


FLASHINFER_MODES: dict[str, dict] = {
    "flashinfer": {},
    "flashinfer_tb1": {"deterministic": True, "tie_break": 1},
}
"""FlashInfer's two top-k modes, by column name: the default (fastest; any index among
ties) and ``deterministic=True, tie_break=1`` (the lowest index among ties, as ours)."""


def _flashinfer_library(mode: str = "flashinfer") -> Library | None:
    fi = _flashinfer()
    if fi is None:
        return None
    fn, kw = fi.top_k, FLASHINFER_MODES[mode]

    def call(x, k, ordered):
        v, i = fn(x, k, sorted=ordered, **kw)
        return v, i

    return Library(mode, call, note=", ".join(f"{a}={b}" for a, b in kw.items()))


def flashinfer_libraries(device: torch.device | str) -> tuple[list[Library], str]:
    """Both of FlashInfer's top-k modes (:data:`FLASHINFER_MODES`), and why there are
    none where FlashInfer cannot run here (no CUDA device, not importable)."""
    if torch.device(device).type != "cuda":
        return [], "FlashInfer runs on CUDA devices only"
    try:
        libs = [_flashinfer_library(mode) for mode in FLASHINFER_MODES]
    except Exception as exc:  # a broken install must not stop the benchmark
        return [], f"FlashInfer failed to import ({type(exc).__name__}: {exc})"
    if None in libs:
        return [], "FlashInfer (flashinfer.top_k) is not importable here"
    return libs, ""


def flashinfer_ragged(mode: str) -> Callable | None:
    """``call(x, lengths, k) -> int32 [rows, k]``: FlashInfer's
    ``top_k_ragged_transform`` in ``mode`` with zero offsets, i.e. the top-k columns
    of each row's first ``lengths[r]`` scores, -1 past them: the work of
    :func:`deepselect.engine.indexer_topk` with lengths. None where it is missing."""
    fi = _flashinfer()
    fn = getattr(fi, "top_k_ragged_transform", None) if fi is not None else None
    if fn is None:
        return None
    kw = FLASHINFER_MODES[mode]
    zeros: dict[tuple, torch.Tensor] = {}

    def call(x, lengths, k):
        key = (x.shape[0], x.device)
        if key not in zeros:  # allocated once, outside the timed calls
            zeros[key] = torch.zeros(key[0], dtype=torch.int32, device=x.device)
        return fn(x, zeros[key], lengths, k, **kw)

    return call


def _sgl_library() -> Library | None:
    if importlib.util.find_spec("sgl_kernel") is None:
        return None
    import sgl_kernel

    v2 = getattr(sgl_kernel, "fast_topk_v2", None)
    if v2 is not None:
        lengths: dict[tuple, torch.Tensor] = {}

        def call_v2(x, k, ordered):
            if ordered:
                raise NotImplementedError("fast_topk_v2 returns unsorted indices only")
            key = (x.shape[0], x.shape[1], x.device)
            if key not in lengths:  # allocated once, outside the timed calls
                lengths[key] = torch.full(key[:1], key[1], dtype=torch.int32, device=x.device)
            return None, v2(x, lengths[key], k)

        return Library("sgl-kernel", call_v2, note="fast_topk_v2")
    fast = getattr(sgl_kernel, "fast_topk", None)
    if fast is None:
        return None

    def call(x, k, ordered):
        v, i = fast(x, k, dim=-1)
        return v, i

    return Library("sgl-kernel", call, note="fast_topk")


def extra_libraries(device: torch.device | str) -> list[Library]:
    """Other GPU top-k libraries that import here (FlashInfer, sgl-kernel); a library
    that fails to import is left out, never an error."""
    if torch.device(device).type != "cuda":
        return []
    found = []
    for make in (_flashinfer_library, _sgl_library):
        try:
            lib = make()
        except Exception:  # a broken install must not stop the benchmark
            lib = None
        if lib is not None:
            found.append(lib)
    return found
