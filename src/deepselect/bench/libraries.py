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


def _flashinfer_library() -> Library | None:
    if importlib.util.find_spec("flashinfer") is None:
        return None
    import flashinfer

    fn = getattr(flashinfer, "top_k", None)
    if fn is None:
        topk_mod = getattr(flashinfer, "topk", None)
        fn = getattr(topk_mod, "top_k", None)
    if fn is None:
        return None

    def call(x, k, ordered):
        v, i = fn(x, k, sorted=ordered)
        return v, i

    return Library("flashinfer", call)


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
