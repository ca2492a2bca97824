"""Misuse of the public API, one row per kind of bad input: each must raise the
expected exception type with the offending argument's name in the message (never a
crash, a silent wrap, garbage output or another library's error).

Every case builds its own inputs (CPU tensors, a few elements): the table runs in
well under a second.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import deepselect
from deepselect import distributed as ds
from deepselect import (
    indexer_topk,
    top_k_mask_logits,
    top_k_renorm_probs,
    top_k_sampling_from_logits,
    topk,
    topk_rows,
)

I32 = torch.int32
I64 = torch.int64


def x3(n: int = 40) -> torch.Tensor:
    return torch.randn(3, n, generator=torch.Generator().manual_seed(0))


def sparse() -> torch.Tensor:
    return x3().to_sparse()


def rows_call(**kw):
    x = kw.pop("x", None)
    k = kw.pop("k", 3)
    return lambda: topk_rows(x3() if x is None else x, k, **kw)


def _out_over_x(name: str):
    def call():
        x = x3()
        if name == "out_values":
            return topk_rows(x, 3, out_values=x[:, :3])
        return topk_rows(x, 3, out_indices=x.view(I32)[:, 5:8])

    return call


def _outs_alias():
    buf = torch.empty(3, 3)
    return topk_rows(x3(), 3, out_values=buf, out_indices=buf.view(I32))


def _out_over_begin():
    buf = torch.zeros(3, 1, dtype=I32)
    return topk_rows(x3(), 1, begin=buf[:, 0], out_indices=buf)


def _grad(**kw):
    x = x3().requires_grad_()
    return topk_rows(x, 3, **kw)


def _topk_out_over_input():
    x = x3()
    return topk(x, 2, out=(x[:, :2], torch.empty(3, 2, dtype=I64)))


def _topk_outs_alias():
    buf = torch.empty(3, 2, dtype=I64)
    return topk(x3().double(), 2, out=(buf.view(torch.float64), buf))


def idx_call(**kw):
    scores = kw.pop("scores", None)
    lengths = kw.pop("lengths", torch.tensor([40, 10, 0]))
    k = kw.pop("k", 4)
    return lambda: indexer_topk(x3() if scores is None else scores, lengths, k, **kw)


TABLE = torch.arange(3 * 10, dtype=I32).reshape(3, 10)


def _table_with(value: int, page_size: int = 4) -> dict:
    t = TABLE.clone()
    t[0, 2] = value  # positions 8..11 of row 0: inside its length 40
    return dict(page_table=t, page_size=page_size)


def samp(**kw):
    logits = kw.pop("logits", None)
    k = kw.pop("k", 3)
    return lambda: top_k_sampling_from_logits(x3() if logits is None else logits, k, **kw)


def dist_call(**kw):
    x = kw.pop("x", None)
    k = kw.pop("k", 3)
    return lambda: ds.topk(x3() if x is None else x, k, **kw)


# (case id, call, exception type, argument name expected in the message)
# fmt: off
CASES = [
    # ---- topk_rows
    ("rows-x-list", lambda: topk_rows([[1.0, 2.0]], 1), TypeError, "x"),
    ("rows-x-1d", rows_call(x=torch.randn(5)), ValueError, "x must"),
    ("rows-x-int", rows_call(x=torch.arange(10).reshape(2, 5)), TypeError, "x must"),
    ("rows-x-sparse", rows_call(x=sparse()), TypeError, "x must be a dense"),
    ("rows-k-zero", rows_call(k=0), ValueError, "k must"),
    ("rows-k-float", rows_call(k=2.0), TypeError, "k must"),
    ("rows-k-bool", rows_call(k=True), TypeError, "k must"),
    ("rows-largest-int", rows_call(largest=1), TypeError, "largest"),
    ("rows-largest-str", rows_call(largest="yes"), TypeError, "largest"),
    ("rows-order", rows_call(order="bogus"), ValueError, "order"),
    ("rows-index-dtype", rows_call(index_dtype=torch.int16), TypeError, "index_dtype"),
    ("rows-begin-shape", rows_call(begin=torch.zeros(2, dtype=I64)), ValueError, "begin"),
    ("rows-begin-float", rows_call(begin=torch.zeros(3)), TypeError, "begin"),
    ("rows-begin-sparse", rows_call(begin=torch.zeros(3, dtype=I64).to_sparse()), TypeError,
     "begin"),
    ("rows-begin-device", rows_call(begin=torch.zeros(3, dtype=I64, device="meta")),
     ValueError, "begin"),
    ("rows-end-past-n", rows_call(end=torch.full((3,), 41)), ValueError, "end"),
    ("rows-end-float", rows_call(end=torch.full((3,), 4.0)), TypeError, "end"),
    ("rows-offset-float-tensor", rows_call(index_offset=torch.zeros(3)), TypeError,
     "index_offset"),
    ("rows-offset-float", rows_call(index_offset=1.5), TypeError, "index_offset"),
    ("rows-offset-2**63", rows_call(index_offset=2**63), ValueError, "index_offset"),
    ("rows-offset-past-int32", rows_call(index_offset=2**31 - 5), ValueError, "index_offset"),
    ("rows-offset-below-int32", rows_call(index_offset=-(2**31) - 1), ValueError,
     "index_offset"),
    ("rows-offset-past-int64", rows_call(index_offset=2**63 - 5, index_dtype=I64), ValueError,
     "index_offset"),
    ("rows-offset-tensor-past-int32", rows_call(index_offset=torch.tensor([0, 2**31 - 2, 0])),
     ValueError, "index_offset"),
    ("rows-fill-index-float", rows_call(fill_index=1.0), TypeError, "fill_index"),
    ("rows-fill-index-2**70", rows_call(fill_index=2**70), ValueError, "fill_index"),
    ("rows-fill-index-past-int32", rows_call(fill_index=2**31, k=50), ValueError,
     "fill_index"),
    ("rows-fill-value-str", rows_call(fill_value="x"), TypeError, "fill_value"),
    ("rows-out-indices-shape", rows_call(out_indices=torch.empty(3, 4, dtype=I32)),
     ValueError, "out_indices"),
    ("rows-out-indices-dtype", rows_call(out_indices=torch.empty(3, 3, dtype=I64)),
     TypeError, "out_indices"),
    ("rows-out-values-dtype", rows_call(out_values=torch.empty(3, 3, dtype=torch.float16)),
     TypeError, "out_values"),
    ("rows-out-values-sparse", rows_call(out_values=torch.zeros(3, 3).to_sparse()), TypeError,
     "out_values"),
    ("rows-out-values-over-x", _out_over_x("out_values"), ValueError, "out_values"),
    ("rows-out-indices-over-x", _out_over_x("out_indices"), ValueError, "out_indices"),
    ("rows-outs-alias", _outs_alias, ValueError, "out_values"),
    ("rows-out-indices-over-begin", _out_over_begin, ValueError, "out_indices"),
    ("rows-return-values-str", rows_call(return_values="no"), TypeError, "return_values"),
    ("rows-out-values-no-values", rows_call(return_values=False, out_values=torch.empty(3, 3)),
     ValueError, "out_values"),
    ("rows-backend", rows_call(backend="gpu"), ValueError, "backend"),
    ("rows-grad-out", lambda: _grad(out_values=torch.empty(3, 3)), ValueError, "out_values"),
    ("rows-grad-backend", lambda: _grad(backend="oracle"), ValueError, "backend"),
    # ---- topk (the torch.topk drop-in)
    ("topk-input-list", lambda: topk([1.0, 2.0], 1), TypeError, "input"),
    ("topk-input-sparse", lambda: topk(sparse(), 2), TypeError, "input"),
    ("topk-k-float", lambda: topk(x3(), 1.5), TypeError, "k"),
    ("topk-k-too-big", lambda: topk(x3(), 41), ValueError, "k"),
    ("topk-dim", lambda: topk(x3(), 2, dim=5), IndexError, "dim"),
    ("topk-largest-str", lambda: topk(x3(), 2, largest="x"), TypeError, "largest"),
    ("topk-sorted-none", lambda: topk(x3(), 2, sorted=None), TypeError, "sorted"),
    ("topk-out-list", lambda: topk(x3(), 2, out=torch.empty(3)), TypeError, "out"),
    ("topk-out-dtype", lambda: topk(x3(), 2, out=(torch.empty(3, 2), torch.empty(3, 2))),
     TypeError, "out"),
    ("topk-out-over-input", _topk_out_over_input, ValueError, "out"),
    ("topk-outs-alias", _topk_outs_alias, ValueError, "out"),
    # ---- indexer_topk
    ("idx-scores-int", idx_call(scores=torch.arange(120).reshape(3, 40)), TypeError, "scores"),
    ("idx-scores-1d", idx_call(scores=torch.randn(40)), ValueError, "scores"),
    ("idx-scores-sparse", idx_call(scores=sparse()), TypeError, "scores"),
    ("idx-k-zero", idx_call(k=0), ValueError, "k must"),
    ("idx-lengths-float", idx_call(lengths=torch.ones(3)), TypeError, "lengths"),
    ("idx-lengths-shape", idx_call(lengths=torch.ones(2, dtype=I64)), ValueError, "lengths"),
    ("idx-lengths-past", idx_call(lengths=torch.tensor([41, 0, 0])), ValueError, "lengths"),
    ("idx-starts-int16", idx_call(starts=torch.zeros(3, dtype=torch.int16)), TypeError,
     "starts"),
    ("idx-ragged-float", idx_call(ragged_offsets=torch.zeros(3)), TypeError, "ragged_offsets"),
    ("idx-ragged-past-int32", idx_call(ragged_offsets=torch.tensor([2**31 - 10, 0, 0])),
     ValueError, "ragged_offsets"),
    ("idx-ragged-and-pages", idx_call(ragged_offsets=torch.zeros(3, dtype=I64), page_table=TABLE,
     page_size=4), ValueError, "ragged_offsets"),
    ("idx-page-size-alone", idx_call(page_size=4), ValueError, "page_size"),
    ("idx-page-size-3", idx_call(page_table=TABLE, page_size=3), ValueError, "page_size"),
    ("idx-page-size-2**31", idx_call(page_table=TABLE, page_size=2**31), ValueError,
     "page_size"),
    ("idx-page-size-float", idx_call(page_table=TABLE, page_size=4.0), TypeError, "page_size"),
    ("idx-page-table-int64", idx_call(page_table=TABLE.long(), page_size=4), TypeError,
     "page_table"),
    ("idx-page-id-minus-one", idx_call(**_table_with(-1)), ValueError, "page_table"),
    ("idx-page-id-past-int32", idx_call(**_table_with(2**29)), ValueError, "page_table"),
    ("idx-row-to-batch-alone", idx_call(row_to_batch=torch.zeros(3, dtype=I64)), ValueError,
     "row_to_batch"),
    ("idx-out-dtype", idx_call(out=torch.empty(3, 4, dtype=I64)), ValueError, "out"),
    # ---- sampling operations
    ("samp-logits-int", samp(logits=torch.arange(10).reshape(2, 5)), TypeError, "logits"),
    ("samp-logits-sparse", samp(logits=sparse()), TypeError, "logits"),
    ("samp-logits-empty", samp(logits=torch.empty(2, 0)), ValueError, "logits"),
    ("samp-temperature-zero", samp(temperature=0.0), ValueError, "temperature"),
    ("samp-temperature-str", samp(temperature="hot"), TypeError, "temperature"),
    ("samp-temperature-negative", samp(temperature=torch.tensor([1.0, -1.0, 1.0])),
     ValueError, "temperature"),
    ("samp-seeds-int32", samp(seeds=torch.zeros(3, dtype=I32)), TypeError, "seeds"),
    ("samp-generator-and-seeds", samp(generator=torch.Generator(),
     seeds=torch.zeros(3, dtype=I64)), ValueError, "generator"),
    ("samp-generator-int", samp(generator=5), TypeError, "generator"),
    ("samp-k-max-int-k", samp(k_max=4), ValueError, "k_max"),
    ("samp-k-float-tensor", samp(k=torch.ones(3)), TypeError, "k"),
    ("mask-k-negative", lambda: top_k_mask_logits(x3(), -1), ValueError, "k must"),
    ("mask-k-float", lambda: top_k_mask_logits(x3(), 2.5), TypeError, "k must"),
    ("renorm-probs-1d", lambda: top_k_renorm_probs(torch.rand(5), 2), ValueError, "probs"),
    # ---- distributed (checks that run before any collective)
    ("dist-x-1d", dist_call(x=torch.randn(5)), ValueError, "x_local"),
    ("dist-k-zero", dist_call(k=0), ValueError, "k must"),
    ("dist-index-dtype", dist_call(index_dtype=torch.int16), TypeError, "index_dtype"),
    ("dist-offset-float", dist_call(index_offset=1.5), TypeError, "index_offset"),
    ("dist-fill-index-float", dist_call(fill_index=-1.5), TypeError, "fill_index"),
    ("dist-begin-float", dist_call(begin=torch.zeros(3)), TypeError, "begin"),
    ("dist-largest-str", dist_call(largest="yes"), TypeError, "largest"),
]
# fmt: on


@pytest.mark.parametrize("call, exc, name", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_misuse_names_the_argument(call, exc, name):
    with pytest.raises(exc) as info:
        call()
    assert name in str(info.value), f"{name!r} not named in: {info.value}"


def test_table_size():
    assert len(CASES) >= 60
    assert len({c[0] for c in CASES}) == len(CASES)


# ------------------------------------- accepted inputs that used to be refused or wrap


def test_numpy_bools_are_bools():
    x = x3()
    want = topk_rows(x, 3, largest=False)
    got = topk_rows(x, 3, largest=np.bool_(False))
    assert torch.equal(got[1], want[1])
    t = topk(x, 2, largest=np.bool_(True), sorted=np.bool_(True))
    assert torch.equal(t.indices, deepselect.topk(x, 2).indices)


def test_index_range_edges_are_accepted():
    """The range rule's last values that fit are taken (the rule is exact, not loose)."""
    x = x3()
    top = 2**31 - 1 - 39  # offset + (N - 1) == int32 max
    _, i = topk_rows(x, 3, index_offset=top, order="index")
    assert int(i.max()) <= 2**31 - 1 and i.dtype == I32
    _, i = topk_rows(x, 3, index_offset=torch.full((3,), top), order="index")
    assert int(i.min()) >= top
    _, i = topk_rows(x, 50, fill_index=-(2**31))
    assert int(i[0, -1]) == -(2**31)
    _, i = topk_rows(x, 50, fill_index=2**40, index_dtype=I64)
    assert int(i[0, -1]) == 2**40
