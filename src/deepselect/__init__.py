"""deepselect: exact top-k of every row of a large tensor, read once.

>>> import torch, deepselect
>>> v, i = deepselect.topk_rows(torch.tensor([[3.0, 1.0, 4.0, 1.0, 5.0]]), 2, order="value")
>>> i.tolist()
[[4, 2]]
"""

# The one place the version is written: pyproject.toml reads it from here.
__version__ = "0.1.0"

from . import distributed
from .api import topk_rows
from .engine import (
    indexer_topk,
    top_k_mask_logits,
    top_k_renorm_probs,
    top_k_sampling_from_logits,
    top_k_sampling_from_probs,
    top_k_top_p_sampling_from_logits,
    top_k_top_p_sampling_from_probs,
)
from .keys import from_keys, to_keys
from .options import Order, TopkOptions
from .oracle import oracle_topk
from .reference import reference_topk
from .torch_ops import topk

__all__ = [
    "distributed",
    "topk",
    "topk_rows",
    "oracle_topk",
    "reference_topk",
    "to_keys",
    "from_keys",
    "Order",
    "TopkOptions",
    "indexer_topk",
    "top_k_mask_logits",
    "top_k_renorm_probs",
    "top_k_sampling_from_logits",
    "top_k_sampling_from_probs",
    "top_k_top_p_sampling_from_logits",
    "top_k_top_p_sampling_from_probs",
]
