"""The torch.topk drop-in on a CUDA device: equality, CUDA graphs, torch.compile, autograd.

Skipped without a CUDA device (see conftest.py). Expectations come from torch: ``torch.topk``
on distinct values, a stable ``torch.sort`` for the lowest-index tie policy.
"""

import pytest
import torch
from helpers import assert_same_along_dim, warm_then_capture

from deepselect.torch_ops import topk

pytestmark = pytest.mark.gpu

DEV = "cuda"
FLOATS = [torch.float32, torch.bfloat16, torch.float16]


def rand(shape, dtype=torch.float32, seed=0):
    """Random normal values; 16-bit rows this long hold many ties, which is intended."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    return torch.randn(shape, generator=g, device=DEV).to(dtype)


def check(got, x, k, dim=-1, largest=True, sorted_=True):
    """``got`` must hold the first k of a stable sort (ties by lower index), and its
    values must be ``torch.topk``'s."""
    assert isinstance(got, torch.return_types.topk)
    gv, gi = got
    ref = torch.sort(x, dim=dim, descending=largest, stable=True)
    wv, wi = ref.values.narrow(dim, 0, k), ref.indices.narrow(dim, 0, k)
    assert torch.equal(wv, torch.topk(x, k, dim, largest, True).values)
    assert gv.device == x.device
    assert_same_along_dim((gv, gi), (wv, wi), dim, sorted_)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "shape, dim, k",
    [
        ((8, 1000), -1, 16),
        ((3, 129_280), 1, 512),  # sampler shape
        ((2, 1 << 20), -1, 2048),  # indexer shape
        ((1, 5000), 1, 5000),  # k = N
        ((7, 300), 0, 5),  # dim not last: strided rows
        ((4, 6, 900), 2, 100),
        ((4, 900, 6), 1, 33),
        ((5, 0, 3), 2, 2),  # no rows
    ],
)
@pytest.mark.parametrize("largest", [True, False])
def test_equals_torch(dtype, shape, dim, k, largest):
    x = rand(shape, dtype, seed=k)
    for sorted_ in (True, False):
        got = topk(x, k, dim, largest, sorted_)
        check(got, x, k, dim, largest, sorted_)


def test_distinct_values_equal_torch_topk():
    g = torch.Generator(device=DEV).manual_seed(0)
    x = torch.rand(64, 100_000, generator=g, device=DEV).argsort(dim=1).float()  # distinct
    for largest in (True, False):
        got, want = topk(x, 300, largest=largest), torch.topk(x, 300, largest=largest)
        assert torch.equal(got.indices, want.indices) and torch.equal(got.values, want.values)


@pytest.mark.parametrize("dtype", FLOATS)
def test_ties_go_to_the_lowest_index(dtype):
    g = torch.Generator(device=DEV).manual_seed(1)
    x = torch.randint(0, 8, (16, 50_000), generator=g, device=DEV).to(dtype)
    check(topk(x, 600), x, 600)
    check(topk(x, 600, largest=False, sorted=False), x, 600, largest=False, sorted_=False)


def test_nan_and_signed_zero():
    x = torch.tensor([[0.0, float("nan"), -0.0, 1.0, float("nan"), -1.0]], device=DEV)
    assert topk(x, 3).indices.tolist() == [[1, 4, 3]]
    assert topk(x, 4, largest=False).indices.tolist() == [[5, 0, 2, 3]]


def test_fp64_and_integers_fall_back_to_torch():
    x = rand((4, 3000), seed=2).double()
    check(topk(x, 10), x, 10)
    xi = torch.randperm(3000, device=DEV).int().expand(4, 3000)
    got, want = topk(xi, 10, largest=False), torch.topk(xi, 10, largest=False)
    assert torch.equal(got.indices, want.indices) and torch.equal(got.values, want.values)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, k, dim", [((6, 200_000), 512, -1), ((64, 4096), 64, 1)])
def test_cuda_graph_replay(dtype, shape, k, dim):
    x = rand(shape, dtype, seed=0)
    graph, result = warm_then_capture(lambda: topk(x, k, dim))
    for seed in range(1, 4):
        x.copy_(rand(shape, dtype, seed=seed))  # change the input in place
        graph.replay()
        torch.cuda.synchronize()
        check(result, x, k, dim)


@pytest.mark.parametrize("shape, dim", [((1000, 3000), 1), ((3000, 40), 0)])
def test_cuda_graph_replay_with_out(shape, dim):
    k = 100
    x = rand(shape, seed=5)
    out_shape = list(shape)
    out_shape[dim] = k
    v = torch.empty(out_shape, device=DEV)
    i = torch.empty(out_shape, device=DEV, dtype=torch.int64)
    graph, result = warm_then_capture(lambda: topk(x, k, dim, out=(v, i)))
    assert result.values is v and result.indices is i
    for seed in range(6, 9):
        x.copy_(rand(shape, seed=seed))
        graph.replay()
        torch.cuda.synchronize()
        check(torch.return_types.topk((v, i)), x, k, dim)


def _peak_extra(fn):
    """Device memory a call needs beyond what is live before it (after a warm-up call)."""
    fn()  # kernels compile, caches fill
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


@pytest.mark.parametrize("shape, dim", [((32, 100_000), 1), ((4, 8, 5000), -1)])
def test_out_allocates_nothing_beyond_the_row_api(shape, dim):
    from deepselect.api import topk_rows

    x = rand(shape, seed=7)
    k = 256
    v = torch.empty(shape[:-1] + (k,), device=DEV)
    i = torch.empty(shape[:-1] + (k,), device=DEV, dtype=torch.int64)
    x2, v2, i2 = x.view(-1, shape[-1]), v.view(-1, k), i.view(-1, k)
    ours = _peak_extra(lambda: topk(x, k, dim, out=(v, i)))
    # the row API writing into the same buffers: any scratch its backend needs
    rows = _peak_extra(
        lambda: topk_rows(
            x2, k, order="value", index_dtype=torch.int64, out_values=v2, out_indices=i2
        )
    )
    assert ours == rows, f"topk(out=...) allocated {ours - rows} bytes of its own"
    check(topk(x, k, dim, out=(v, i)), x, k, dim)


def test_compile_fullgraph_dynamic():
    torch._dynamo.reset()

    def f(x, k):
        r = topk(x, k, dim=-1)
        return r.values.float() * 2, r.indices

    cf = torch.compile(f, fullgraph=True, dynamic=True)
    for shape, k in [((4, 5000), 64), ((7, 12_345), 100), ((3, 2, 40_000), 512)]:
        x = rand(shape, seed=k)
        got = cf(x, k)
        check(torch.return_types.topk((got[0] / 2, got[1])), x, k)


def test_compile_reduce_overhead():
    # inductor's CUDA-graph mode: the op must be capturable inside the compiled graph
    torch._dynamo.reset()
    cf = torch.compile(lambda x: topk(x, 128, largest=False), mode="reduce-overhead")
    x = rand((16, 50_000), torch.bfloat16, seed=3)
    for seed in range(4):
        x.copy_(rand((16, 50_000), torch.bfloat16, seed=seed))
        got = cf(x)
        check(
            torch.return_types.topk((got.values.clone(), got.indices.clone())),
            x,
            128,
            largest=False,
        )


def test_autograd_equals_torch():
    g = torch.Generator(device=DEV).manual_seed(9)
    x = torch.rand(8, 3000, generator=g, device=DEV).argsort(dim=1).float().requires_grad_()
    w = torch.randn(8, 40, device=DEV)
    (gx,) = torch.autograd.grad((topk(x, 40).values * w).sum(), x)
    (wx,) = torch.autograd.grad((torch.topk(x, 40).values * w).sum(), x)
    assert torch.equal(gx, wx)
