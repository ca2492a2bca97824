"""Argument validation of the row API: every misuse names the argument."""

import pytest
import torch

import deepselect
from deepselect import topk_rows


def x2(rows=3, n=40, dtype=torch.float32):
    return torch.randn(rows, n).to(dtype)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(k=0), ValueError, "k must be >= 1"),
        (dict(k=2.0), TypeError, "k must be an int"),
        (dict(k=True), TypeError, "k must be an int"),
        (dict(k=3, order="bogus"), ValueError, "order must be one of"),
        (dict(k=3, index_dtype=torch.int16), TypeError, "index_dtype"),
        (dict(k=3, largest=1), TypeError, "largest"),
        (dict(k=3, begin=torch.zeros(2, dtype=torch.int64)), ValueError, r"begin must have shape"),
        (dict(k=3, begin=torch.zeros(3)), TypeError, "begin must have dtype"),
        (dict(k=3, end=torch.full((3,), 41)), ValueError, "windows must satisfy"),
        (
            dict(k=3, begin=torch.tensor([0, 5, 2]), end=torch.tensor([1, 4, 3])),
            ValueError,
            "row 1",
        ),
        (dict(k=3, index_offset=torch.zeros(3)), TypeError, "index_offset must have dtype"),
        (dict(k=3, index_offset=1.5), TypeError, "index_offset"),
        (dict(k=3, fill_index=1.0), TypeError, "fill_index"),
        (
            dict(k=3, out_indices=torch.empty(3, 4, dtype=torch.int32)),
            ValueError,
            "out_indices must have shape",
        ),
        (
            dict(k=3, out_indices=torch.empty(3, 3, dtype=torch.int64)),
            TypeError,
            "out_indices must have dtype",
        ),
        (
            dict(k=3, out_values=torch.empty(3, 3, dtype=torch.float16)),
            TypeError,
            "out_values must have dtype",
        ),
        (
            dict(k=3, return_values=False, out_values=torch.empty(3, 3)),
            ValueError,
            "return_values=False",
        ),
        (dict(k=3, backend="gpu"), ValueError, "backend must be"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        topk_rows(x2(), **kwargs)


def test_bad_input_tensor():
    with pytest.raises(ValueError, match="x must be 2-D"):
        topk_rows(torch.randn(4), 2)
    with pytest.raises(TypeError, match="x must have dtype"):
        topk_rows(torch.zeros(2, 4, dtype=torch.int32), 2)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        topk_rows([[1.0, 2.0]], 1)


def test_writes_into_given_buffers():
    x = x2()
    ov = torch.full((3, 5), 7.0)
    oi = torch.full((3, 5), 7, dtype=torch.int32)
    v, i = topk_rows(x, 5, out_values=ov, out_indices=oi, order="value")
    assert v is ov and i is oi
    want_v, want_i = deepselect.oracle_topk(x, 5, deepselect.TopkOptions(order="value"))
    assert torch.equal(i, want_i) and torch.equal(v, want_v)


def test_indices_only():
    v, i = topk_rows(x2(), 4, return_values=False)
    assert v is None and i.shape == (3, 4)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"order": "value", "largest": False, "index_dtype": torch.int64},
        {"order": "index", "begin": torch.tensor([0, 5, 30]), "end": torch.tensor([40, 9, 40])},
        {
            "index_offset": torch.tensor([10, -3, 1 << 20]),
            "fill_value": 7.5,
            "fill_index": -4,
            "end": torch.tensor([3, 40, 0]),
        },
        {"index_offset": 5, "end": torch.tensor([2, 40, 0]), "return_values": False},
        {"fill_value": -1.0, "end": torch.tensor([3, 3, 3]), "order": "value"},
    ],
)
def test_topk_rows_traced_by_torch_compile(kw):
    """Under torch.compile the call becomes the registered op plus tensor ops (one
    graph, fullgraph=True) and returns what the eager call returns."""
    x = torch.randn(3, 40, generator=torch.Generator().manual_seed(3))
    x[1, 4:20] = x[1, 3]  # ties
    want = topk_rows(x, 6, **kw)
    got = torch.compile(lambda t: topk_rows(t, 6, **kw), backend="eager", fullgraph=True)(x)
    torch._dynamo.reset()
    assert (got[0] is None) == (want[0] is None)
    assert got[1].dtype == want[1].dtype and torch.equal(got[1], want[1])
    if want[0] is not None:
        assert torch.equal(got[0], want[0])
    ov, oi = torch.empty(3, 6), torch.empty(3, 6, dtype=torch.int32)
    f = torch.compile(
        lambda t: topk_rows(t, 6, out_values=ov, out_indices=oi), backend="eager", fullgraph=True
    )
    v, i = f(x)
    torch._dynamo.reset()
    assert v is ov and i is oi
    assert torch.equal(oi, topk_rows(x, 6)[1])


def test_values_carry_gradients():
    """topk_rows' values are differentiable like torch.topk's (the gradient goes to the
    selected positions), with offsets and fills applied around the registered op."""
    x = x2(rows=4, n=30).requires_grad_()
    end = torch.tensor([30, 2, 0, 17])
    v, i = topk_rows(x, 5, order="value", end=end, index_offset=100, fill_index=-9)
    assert v.grad_fn is not None
    want_v, want_i = topk_rows(x.detach(), 5, order="value", end=end, index_offset=100,
                               fill_index=-9)  # fmt: skip
    assert torch.equal(i, want_i) and torch.equal(v.detach(), want_v)
    v.masked_fill(i < 0, 0).sum().backward()
    grad = torch.zeros(4, 30)
    real = want_i >= 0
    grad[torch.arange(4)[:, None].expand(4, 5)[real], (want_i - 100)[real].long()] = 1.0
    assert torch.equal(x.grad, grad)


def test_meta_and_fake_tensors_give_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    v, i = topk_rows(torch.empty(3, 50, device="meta"), 4, index_dtype=torch.int64)
    assert v.shape == (3, 4) and i.dtype == torch.int64 and i.device.type == "meta"
    with FakeTensorMode():
        v, i = topk_rows(torch.empty(5, 60), 7, index_offset=3)
    assert v.shape == (5, 7) and i.shape == (5, 7) and i.dtype == torch.int32


def test_overlap_is_exact_for_disjoint_parts_of_one_buffer():
    """Outputs in one storage with the input are refused only where they overlap."""
    buf = torch.randn(3, 50)
    x = buf[:, :40]
    v, i = topk_rows(x, 3, out_values=torch.empty(3, 3), order="value")
    ov = torch.empty(60)
    got = topk_rows(ov[:40].view(4, 10)[:3], 3, out_values=ov[40:49].view(3, 3))
    assert got[0].data_ptr() == ov[40:].data_ptr()
    with pytest.raises(ValueError, match="out_values overlaps x"):
        topk_rows(x, 3, out_values=buf[:, 45:48])  # inside x's byte range
