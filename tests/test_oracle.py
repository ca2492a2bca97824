"""The oracle against a second, independent formulation and against torch.topk."""

import math

import pytest
import torch

from deepselect.distributions import KINDS, make
from deepselect.options import Order, TopkOptions
from deepselect.oracle import oracle_topk


def brute(x: torch.Tensor, k: int, opt: TopkOptions):
    """Python-level: sort (rank, index) tuples, where rank follows DESIGN.md's order."""
    rows, n = x.shape
    begin, end = opt.window_bounds(rows, n, x.device)
    offs = opt.offset_tensor(rows, x.device)
    fill = opt.resolved_fill_value(x.dtype)
    out_v, out_i = [], []
    for r in range(rows):
        vals = x[r].double().tolist()

        def rank(j, vals=vals):
            v = vals[j]
            if math.isnan(v):
                return (0, 0.0, j) if opt.largest else (1, 0.0, j)
            v = v + 0.0
            return (1, -v, j) if opt.largest else (0, v, j)

        cand = sorted(range(int(begin[r]), int(end[r])), key=rank)[:k]
        if opt.order is Order.INDEX:
            cand = sorted(cand)
        vs = [x[r, j] for j in cand] + [torch.tensor(fill, dtype=x.dtype)] * (k - len(cand))
        out_v.append(torch.stack(vs) if vs else x.new_empty(0))
        out_i.append([j + int(offs[r]) for j in cand] + [opt.fill_index] * (k - len(cand)))
    return torch.stack(out_v), torch.tensor(out_i, dtype=opt.index_dtype)


def same(a, b):
    av, ai = a
    bv, bi = b
    assert torch.equal(ai, bi)
    w = av.element_size() * 8
    it = {16: torch.int16, 32: torch.int32, 64: torch.int64}[w]
    assert torch.equal(av.view(it), bv.view(it))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("largest", [True, False])
def test_oracle_matches_brute(kind, dtype, largest):
    x = make(kind, 3, 97, dtype, seed=5)
    for k in (1, 7, 97, 130):
        for order in Order:
            opt = TopkOptions(largest=largest, order=order)
            got = oracle_topk(x, k, opt)
            if order is Order.NONE:  # the oracle's "none" is value order
                opt = TopkOptions(largest=largest, order=Order.VALUE)
            same(got, brute(x, k, opt))


def test_windows_offsets_fill():
    x = make("distinct32", 4, 50, torch.float32, seed=2)
    opt = TopkOptions(
        begin=torch.tensor([0, 10, 45, 20]),
        end=torch.tensor([50, 30, 48, 20]),
        index_offset=torch.tensor([0, 100, -5, 7]),
        fill_value=123.0,
        fill_index=-9,
        index_dtype=torch.int64,
        order=Order.VALUE,
    )
    got = oracle_topk(x, 8, opt)
    same(got, brute(x, 8, opt))
    assert got[1][2].tolist()[3:] == [-9] * 5 and got[1][3].tolist() == [-9] * 8
    assert got[0][3].tolist() == [123.0] * 8


def test_matches_torch_topk_on_distinct_values():
    x = torch.randn(5, 1000, dtype=torch.float64)
    v, i = oracle_topk(x, 17, TopkOptions(order=Order.VALUE, index_dtype=torch.int64))
    tv, ti = torch.topk(x, 17)
    assert torch.equal(i, ti) and torch.equal(v, tv)
    v, i = oracle_topk(
        x, 17, TopkOptions(largest=False, order=Order.VALUE, index_dtype=torch.int64)
    )
    tv, ti = torch.topk(x, 17, largest=False)
    assert torch.equal(i, ti) and torch.equal(v, tv)


def test_ties_go_to_lowest_index():
    x = torch.tensor([[1.0, 2.0, 2.0, 2.0, 0.0, 2.0]])
    _, i = oracle_topk(x, 2)
    assert i.tolist() == [[1, 2]]
    x = torch.tensor([[math.nan, 0.0, -0.0, math.nan, 0.0]])
    _, i = oracle_topk(x, 3, TopkOptions(order=Order.VALUE))
    assert i.tolist() == [[0, 3, 1]]
    _, i = oracle_topk(x, 3, TopkOptions(order=Order.VALUE, largest=False))
    assert i.tolist() == [[1, 2, 4]]


def test_empty_shapes():
    v, i = oracle_topk(torch.empty(0, 10), 3)
    assert v.shape == (0, 3) and i.shape == (0, 3)
    v, i = oracle_topk(torch.empty(2, 0), 3)
    assert i.tolist() == [[-1] * 3] * 2 and bool(torch.isinf(v).all())
