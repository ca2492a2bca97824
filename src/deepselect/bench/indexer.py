"""How a decode step of the sparse-attention indexer splits its time between scoring
(the reference lightning indexer, plain torch) and the selection."""

from __future__ import annotations

import torch

from ..engine import indexer_topk
from ..lightning_indexer import lightning_indexer_scores
from .timing import time_fn


def benchmark_indexer_split(
    rows: int = 4,
    heads: int = 64,
    d: int = 128,
    n: int = 65536,
    k: int = 2048,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.bfloat16,
    repeats: int = 10,
    seed: int = 0,
    graph: bool | None = None,
) -> dict:
    """Time scoring and selection separately (:func:`time_fn`: median
    of ``repeats`` after a warm-up; on CUDA, events around each call).

    A program, not a test: it prints nothing and returns
    ``{"device", "rows", "n", "k", "scores_ms", "topk_ms", "topk_share", "graph"}``.
    The device defaults to CUDA when present. ``graph`` (default: on CUDA) times each
    part as a CUDA-graph replay, as a decode step runs, so that the host's launch
    path (tens of microseconds per call) is not counted as either part. The plain-torch
    scoring materialises ``[rows, heads, N]``, so it is the slow reference, not a
    fused kernel's speed.
    """
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(rows, heads, d, generator=g).to(device, dtype)
    keys = torch.randn(n, d, generator=g).to(device, dtype)
    w = torch.rand(rows, heads, generator=g).to(device, torch.float32)
    lengths = torch.full((rows,), n, dtype=torch.int32, device=device)
    graph = device.type == "cuda" if graph is None else graph

    def timed(fn):
        t = time_fn(lambda _: fn(), [q], device, repeats=repeats, graph=graph)
        return t.median_s * 1e3

    scores = lightning_indexer_scores(q, keys, w)
    s_ms = timed(lambda: lightning_indexer_scores(q, keys, w))
    t_ms = timed(lambda: indexer_topk(scores, lengths, k))
    return {
        "device": str(device),
        "rows": rows,
        "n": n,
        "k": k,
        "scores_ms": s_ms,
        "topk_ms": t_ms,
        "topk_share": t_ms / (s_ms + t_ms),
        "graph": graph,
    }
