"""A reference lightning indexer in plain torch, and its top-k selection.

DeepSeek Sparse Attention scores every context token for every query row with a few
cheap ReLU heads, then attends only to the k best tokens. This module is the plain
torch version of the scoring (the reference any fused kernel is compared with), a
helper that chains it into :func:`deepselect.engine.indexer_topk`, and a benchmark
function that reports how the time splits between scoring and selection.
"""

from __future__ import annotations

import torch

from .engine import indexer_topk


def lightning_indexer_scores(q: torch.Tensor, keys: torch.Tensor, weights: torch.Tensor):
    """Indexer scores ``s[r, n] = sum_h weights[r, h] * relu(q[r, h] . keys[n])``.

    Args:
        q: ``[rows, heads, d]`` query projections (any float dtype).
        keys: ``[N, d]`` indexer keys.
        weights: ``[rows, heads]`` per-row head weights.

    Returns:
        fp32 ``[rows, N]`` (accumulated in fp32 whatever the input dtype).

    >>> q = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    >>> k = torch.tensor([[2.0, -1.0], [-1.0, 3.0]])
    >>> lightning_indexer_scores(q, k, torch.tensor([[1.0, 0.5]])).tolist()
    [[2.0, 1.5]]
    """
    if q.dim() != 3:
        raise ValueError(f"q must be 3-D [rows, heads, d]; got shape {list(q.shape)}")
    rows, heads, d = q.shape
    if keys.dim() != 2 or keys.shape[1] != d:
        raise ValueError(f"keys must be [N, d = {d}]; got shape {list(keys.shape)}")
    if tuple(weights.shape) != (rows, heads):
        raise ValueError(
            f"weights must be [rows, heads] = [{rows}, {heads}]; got {list(weights.shape)}"
        )
    logits = torch.einsum("rhd,nd->rhn", q.float(), keys.float()).relu_()
    return torch.einsum("rhn,rh->rn", logits, weights.float())


def lightning_indexer_topk(
    q: torch.Tensor,
    keys: torch.Tensor,
    weights: torch.Tensor,
    lengths: torch.Tensor,
    k: int,
    **kwargs,
) -> torch.Tensor:
    """Score with :func:`lightning_indexer_scores`, then select with
    :func:`deepselect.engine.indexer_topk` (``kwargs`` are passed on: ``starts``,
    ``ragged_offsets``, ``page_table``, ``page_size``, ``row_to_batch``, ``order``,
    ``out``).

    Returns:
        int32 ``[rows, k]`` positions, ``-1`` where a row has fewer than k tokens.
    """
    return indexer_topk(lightning_indexer_scores(q, keys, weights), lengths, k, **kwargs)
