"""The torch.topk drop-in and the registered op, on the CPU.

Every expectation comes from torch itself (``torch.topk`` where its answer is unique, a
stable ``torch.sort`` for the lowest-index tie policy), never from deepselect.
"""

import inspect
import math
import warnings

import pytest
import torch
from helpers import assert_same_along_dim, bits
from hypothesis import given, settings
from hypothesis import strategies as st

from deepselect import torch_ops
from deepselect.torch_ops import topk, topk_rows_op

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def distinct(shape, dtype=torch.float32, seed=0):
    """Distinct values, exactly representable in ``dtype`` (small integers, shuffled)."""
    g = torch.Generator().manual_seed(seed)
    n = math.prod(shape)
    limit = {torch.bfloat16: 256, torch.float16: 2048}.get(dtype, 1 << 20)
    assert n <= 2 * limit
    v = torch.randperm(n, generator=g) - n // 2
    return v.to(dtype).reshape(shape)


def assert_same_as_torch(got, want, dim, sorted_):
    assert isinstance(got, torch.return_types.topk)
    assert_same_along_dim(got, want, dim, sorted_)


def test_signature_matches_torch_topk():
    params = inspect.signature(topk).parameters
    assert list(params) == ["input", "k", "dim", "largest", "sorted", "out"]
    assert [params[p].default for p in ("dim", "largest", "sorted", "out")] == [
        -1,
        True,
        True,
        None,
    ]
    assert params["out"].kind is inspect.Parameter.KEYWORD_ONLY


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "shape, dim", [((7,), 0), ((4, 9), -1), ((4, 9), 0), ((3, 5, 6), 1), ((2, 3, 4, 5), -3)]
)
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("sorted_", [True, False])
def test_equals_torch_on_distinct_values(dtype, shape, dim, largest, sorted_):
    x = distinct(shape, dtype, seed=len(shape) + dim)
    n = shape[dim]
    for k in sorted({1, min(3, n), n}):
        got = topk(x, k, dim, largest, sorted_)
        want = torch.topk(x, k, dim, largest, sorted_)
        assert_same_as_torch(got, want, dim, sorted_)


def test_positional_and_keyword_forms():
    x = distinct((5, 8))
    want = torch.topk(x, 3, 0, False, True)
    assert_same_as_torch(topk(x, 3, 0, False, True), want, 0, True)
    assert_same_as_torch(topk(x, k=3, dim=0, largest=False), want, 0, True)
    assert_same_as_torch(topk(input=x, k=3, dim=0, largest=False), want, 0, True)


def test_non_contiguous_inputs():
    base = distinct((6, 20))
    for x, dim in [(base.t(), 0), (base.t(), 1), (base[:, ::3], 1), (base[::2, 1:], -1)]:
        for k in (1, 2):
            assert_same_as_torch(topk(x, k, dim), torch.topk(x, k, dim), dim, True)


@pytest.mark.parametrize("k", [0, 1])
def test_zero_dim_input(k):
    x = torch.tensor(2.5)
    got, want = topk(x, k), torch.topk(x, k)
    assert got.values.shape == want.values.shape == ()
    assert torch.equal(got.values, want.values) and torch.equal(got.indices, want.indices)
    assert got.indices.dtype == torch.int64
    assert torch.equal(topk(x, k, dim=-1).values, want.values)


@pytest.mark.parametrize(
    "shape, k, dim",
    [
        ((0, 5), 2, 1),
        ((3, 0), 0, 1),
        ((3, 0), 0, 0),
        ((4, 6), 0, 1),
        ((2, 0, 3), 2, 2),
        ((0,), 0, 0),
    ],
)
def test_zero_size_dims(shape, k, dim):
    x = torch.randn(shape)
    got, want = topk(x, k, dim), torch.topk(x, k, dim)
    assert got.values.shape == want.values.shape
    assert got.indices.shape == want.indices.shape and got.indices.dtype == torch.int64


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return e
    raise AssertionError("no exception raised")


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((5,), {}),  # k > size of dim
        ((-1,), {}),
        ((4, 0), {}),  # k > size of dim 0
        ((2,), dict(dim=2)),
        ((2,), dict(dim=-3)),
        ((2.0,), {}),
        ((True,), {}),
        ((None,), {}),
        ((2,), dict(dim=1.0)),
        ((2,), dict(largest=1)),
        ((2,), dict(sorted=None)),
        ((2,), dict(out=torch.empty(0))),
        ((2,), dict(out=(torch.empty(0, dtype=torch.float64), torch.empty(0, dtype=torch.long)))),
        ((2,), dict(out=(torch.empty(0), torch.empty(0, dtype=torch.int32)))),
    ],
)
def test_errors_have_torch_types(args, kwargs):
    x = torch.randn(3, 4)
    ours = _raised(lambda: topk(x, *args, **kwargs))
    theirs = _raised(lambda: torch.topk(x, *args, **kwargs))
    assert isinstance(ours, type(theirs)), (type(ours), type(theirs), theirs)
    # deepselect's own rule: bad arguments are ValueError / TypeError naming the argument
    assert isinstance(ours, (ValueError, TypeError))


def test_error_messages_name_the_rule():
    x = torch.randn(3, 4)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        topk(x, 5)
    with pytest.raises(ValueError, match=r"k must be in \[0, 4\]"):
        topk(x, 5)
    with pytest.raises(IndexError, match=r"Dimension out of range.*\[-2, 1\]"):
        topk(x, 1, dim=2)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        topk(torch.tensor(1.0), 2)
    with pytest.raises(IndexError, match=r"\[-1, 0\]"):
        topk(torch.tensor(1.0), 1, dim=1)
    with pytest.raises(TypeError, match="argument 'input'"):
        topk([1.0, 2.0], 1)


def test_out_writes_in_place_and_returns_the_buffers():
    x = distinct((5, 9))
    v = torch.full((5, 3), 7.0)
    i = torch.full((5, 3), 7, dtype=torch.int64)
    got = topk(x, 3, out=(v, i))
    assert got.values is v and got.indices is i
    assert_same_as_torch(got, torch.topk(x, 3), 1, True)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_out_any_dim(dim):
    x = distinct((4, 5, 6), seed=dim)
    want = torch.topk(x, 2, dim)
    v = torch.empty(want.values.shape)
    i = torch.empty(want.indices.shape, dtype=torch.int64)
    got = topk(x, 2, dim, out=(v, i))
    assert got.values is v and got.indices is i
    assert_same_as_torch(got, want, dim, True)


def test_out_resizes_like_torch():
    x = distinct((3, 6))
    for make in (lambda: torch.empty(0), lambda: torch.empty(2, 2)):
        bufs = [(make(), make().long()) for _ in range(2)]
        with warnings.catch_warnings(record=True) as ours:
            warnings.simplefilter("always")
            got = topk(x, 2, out=bufs[0])
        with warnings.catch_warnings(record=True) as theirs:
            warnings.simplefilter("always")
            want = torch.topk(x, 2, out=bufs[1])
        assert len(ours) == len(theirs)  # a warning only when elements are thrown away
        assert got.values is bufs[0][0] and got.values.shape == want.values.shape
        assert_same_as_torch(got, want, 1, True)


def test_out_zero_dim_and_empty():
    x = torch.tensor(-3.0)
    v, i = torch.empty(()), torch.empty((), dtype=torch.int64)
    got = topk(x, 1, out=(v, i))
    assert got.values is v and float(v) == -3.0 and int(i) == 0
    v, i = torch.empty(0), torch.empty(0, dtype=torch.int64)
    got = topk(torch.randn(4, 6), 0, out=(v, i))
    assert got.values.shape == (4, 0) and got.indices.shape == (4, 0)


def test_out_with_grad_raises_like_torch():
    x = torch.randn(3, 4, requires_grad=True)
    out = (torch.empty(0), torch.empty(0, dtype=torch.int64))
    ours = _raised(lambda: topk(x, 2, out=out))
    theirs = _raised(lambda: torch.topk(x, 2, out=out))
    assert isinstance(ours, type(theirs)) and "out=" in str(ours)
    with torch.no_grad():
        assert_same_as_torch(topk(x, 2, out=out), torch.topk(x.detach(), 2), 1, True)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [0, 1])
def test_ties_go_to_the_lowest_index(largest, dim):
    g = torch.Generator().manual_seed(3)
    x = torch.randint(0, 4, (6, 40), generator=g).float()  # massive ties
    k = 5 if dim == 1 else 3
    got = topk(x, k, dim, largest)
    # a stable sort keeps tied elements in index order
    ref = torch.sort(x, dim=dim, descending=largest, stable=True)
    want_i = ref.indices.narrow(dim, 0, k)
    assert torch.equal(got.indices, want_i)
    assert torch.equal(got.values, ref.values.narrow(dim, 0, k))
    # values agree with torch.topk even where its indices are a different valid choice
    assert torch.equal(got.values, torch.topk(x, k, dim, largest).values)
    unsorted = topk(x, k, dim, largest, sorted=False)
    assert torch.equal(unsorted.indices.sort(dim).values, want_i.sort(dim).values)


def test_signed_zeros_tie():
    x = torch.tensor([[0.0, -0.0, -1.0, 0.0, -0.0]])
    got = topk(x, 3)
    assert got.indices.tolist() == [[0, 1, 3]]
    assert torch.equal(torch.signbit(got.values), torch.signbit(x[0, [0, 1, 3]])[None])
    assert topk(x, 3, largest=False).indices.tolist() == [[2, 0, 1]]


@pytest.mark.parametrize("largest", [True, False])
def test_nan_counts_as_largest(largest):
    x = distinct((4, 12), seed=5)
    x[0, 3] = math.nan
    x[2, 0] = math.nan
    x[3, 11] = -math.nan
    for k in (1, 4, 12):
        got, want = topk(x, k, largest=largest), torch.topk(x, k, largest=largest)
        assert torch.equal(got.indices, want.indices)
        assert torch.equal(got.values, want.values) or torch.allclose(
            got.values, want.values, equal_nan=True
        )


def test_many_nans_lowest_index_first():
    x = torch.tensor([[1.0, math.nan, 5.0, math.nan, -math.nan, math.inf]])
    assert topk(x, 3).indices.tolist() == [[1, 3, 4]]
    assert topk(x, 4).indices.tolist() == [[1, 3, 4, 5]]
    assert topk(x, 5, largest=False).indices.tolist() == [[0, 2, 5, 1, 3]]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.int16])
def test_integer_dtypes_fall_back_to_torch(dtype):
    x = distinct((4, 10)).clamp(-100, 100).add(100).to(dtype)
    for largest in (True, False):
        got, want = topk(x, 3, 1, largest), torch.topk(x, 3, 1, largest)
        assert torch.equal(got.values, want.values) and torch.equal(got.indices, want.indices)
    bad_bool = _raised(lambda: topk(torch.zeros(3, dtype=torch.bool), 1))
    assert isinstance(
        bad_bool, type(_raised(lambda: torch.topk(torch.zeros(3, dtype=torch.bool), 1)))
    )


def test_eager_path_skips_the_dispatcher(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("the registered op was called")

    monkeypatch.setattr(torch_ops, "topk_rows_op", boom)
    x = distinct((3, 8))
    assert_same_as_torch(topk(x, 2), torch.topk(x, 2), 1, True)
    with pytest.raises(AssertionError, match="registered op"):  # autograd needs the op
        topk(x.requires_grad_(), 2)
    with torch.no_grad():
        topk(x, 2)


# --------------------------------------------------------------------------------------
# the registered op
# --------------------------------------------------------------------------------------


def op_cases():
    g = torch.Generator().manual_seed(11)
    x = torch.randn(3, 8, generator=g)
    xd = torch.randn(4, 6, dtype=torch.float64, generator=g, requires_grad=True)
    win_b = torch.tensor([0, 2, 1])
    win_e = torch.tensor([8, 4, 1])
    return [
        (x, 3, True, "value", None, None, torch.int64),
        (x, 3, False, "none", None, None, torch.int32),
        (x, 10, True, "value", win_b, win_e, torch.int64),  # fills: k > N and short windows
        (x.t().contiguous().t(), 2, True, "index", None, None, torch.int64),
        (xd, 2, True, "value", None, None, torch.int64),
        (xd, 5, False, "index", torch.tensor([1, 0, 3, 6]), None, torch.int64),
        (x.to(torch.bfloat16), 4, True, "value", None, torch.tensor([8, 3, 0]), torch.int64),
    ]


@pytest.mark.parametrize("case", range(len(op_cases())))
def test_opcheck(case):
    args = op_cases()[case]
    torch.library.opcheck(topk_rows_op, args)


def test_op_matches_row_api():
    from deepselect.api import topk_rows

    for x, k, largest, order, b, e, idt in op_cases():
        got = torch.ops.deepselect.topk_rows(x, k, largest, order, b, e, idt)
        want = topk_rows(
            x.detach(), k, largest=largest, order=order, begin=b, end=e, index_dtype=idt
        )
        assert torch.equal(got[1], want[1])
        assert torch.equal(got[0].view(torch.uint8), want[0].view(torch.uint8))


# --------------------------------------------------------------------------------------
# autograd
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dim, largest, sorted_", [(1, True, True), (0, False, True), (-1, True, False)]
)
def test_gradcheck_topk(dim, largest, sorted_):
    x = distinct((5, 7), torch.float64, seed=dim + 9).mul(0.25).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: topk(t, 3, dim, largest, sorted_).values, (x,))
    got = topk(x, 3, dim, largest, sorted_)
    assert not got.indices.requires_grad


def test_gradient_equals_torch():
    x = distinct((3, 4, 5), torch.float64, seed=2).requires_grad_()
    w = torch.randn(3, 2, 5, dtype=torch.float64)
    (gx,) = torch.autograd.grad((topk(x, 2, dim=1).values * w).sum(), x)
    (wx,) = torch.autograd.grad((torch.topk(x, 2, dim=1).values * w).sum(), x)
    assert torch.equal(gx, wx)


def test_gradcheck_op_with_fills():
    x = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    b, e = torch.tensor([0, 2, 5]), torch.tensor([6, 3, 5])

    def f(t):
        return torch.ops.deepselect.topk_rows(t, 4, True, "value", b, e, torch.int64)[0]

    # fill slots hold -inf: keep them out of the checked function's output
    def finite(t):
        v = f(t)
        return torch.where(torch.isfinite(v), v, torch.zeros_like(v))

    assert torch.autograd.gradcheck(finite, (x,))

    def smallest_with_fills(t):  # k = 9 > N = 6: three +inf fills per row
        v, _ = torch.ops.deepselect.topk_rows(t, 9, False, "none", None, None, torch.int64)
        return v.clamp(-100, 100)

    assert torch.autograd.gradcheck(smallest_with_fills, (x,))


# --------------------------------------------------------------------------------------
# torch.compile (slow to compile: few, broad cases)
# --------------------------------------------------------------------------------------


def test_compile_fullgraph_dynamic_one_graph():
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")

    def f(x, k):
        r = topk(x, k, dim=1, largest=False)
        return r.values * 2, r.indices

    cf = torch.compile(f, fullgraph=True, dynamic=True, backend=counter)
    for shape, k in [((3, 9, 4), 2), ((5, 11, 2), 3), ((2, 7, 3), 7), ((6, 4, 5), 2)]:
        x = distinct(shape, seed=k)
        got = cf(x, k)
        want = torch.topk(x, k, dim=1, largest=False)
        assert torch.equal(got[0], want.values * 2) and torch.equal(got[1], want.indices)
    # one graph for every shape and k (sizes 0 and 1 would be specialised: none here)
    assert counter.frame_count == 1


def test_compile_inductor_out_and_grad():
    torch._dynamo.reset()

    def f(x, v, i):
        r = topk(x, 3, out=(v, i))
        return r.values.sum()

    cf = torch.compile(f, fullgraph=True, dynamic=True)
    x = distinct((4, 10))
    v, i = torch.empty(4, 3), torch.empty(4, 3, dtype=torch.int64)
    cf(x, v, i)
    want = torch.topk(x, 3)
    assert torch.equal(v, want.values) and torch.equal(i, want.indices)

    def g(x):
        return (topk(x, 2, dim=0, sorted=False).values ** 2).sum()

    cg = torch.compile(g, fullgraph=True, dynamic=True)
    x = distinct((6, 5), seed=4).requires_grad_()
    cg(x).backward()
    (want_grad,) = torch.autograd.grad((torch.topk(x, 2, dim=0).values ** 2).sum(), x)
    assert torch.equal(x.grad, want_grad)


# --------------------------------------------------------------------------------------
# property: any shape, dim, k, ties, NaN and signed zeros against a stable sort
# --------------------------------------------------------------------------------------

_POOL = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, math.inf, -math.inf, math.nan, -math.nan, 1e-3]


@settings(max_examples=80, deadline=None)
@given(
    shape=st.lists(st.integers(0, 6), min_size=1, max_size=3),
    data=st.data(),
    dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float64]),
    largest=st.booleans(),
    sorted_=st.booleans(),
)
def test_property_stable_sort_reference(shape, data, dtype, largest, sorted_):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1), label="dim")
    k = data.draw(st.integers(0, shape[dim]), label="k")
    picks = data.draw(
        st.lists(
            st.integers(0, len(_POOL) - 1), min_size=math.prod(shape), max_size=math.prod(shape)
        )
    )
    x = torch.tensor([_POOL[p] for p in picks], dtype=torch.float64).to(dtype).reshape(shape)
    got = topk(x, k, dim, largest, sorted_)
    # torch.sort: NaN largest, NaNs equal, -0.0 == +0.0, stable keeps index order in ties
    want_i = torch.sort(x, dim=dim, descending=largest, stable=True).indices.narrow(dim, 0, k)
    gi = got.indices if sorted_ else got.indices.sort(dim=dim).values
    wi = want_i if sorted_ else want_i.sort(dim=dim).values
    assert torch.equal(gi, wi)
    itype = {2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
    assert torch.equal(got.values.view(itype), x.view(itype).gather(dim, got.indices))


# ------------------------------------------------ transforms, traces, abstract tensors
TIES = torch.tensor([[1.0, 3.0, 3.0, 2.0, float("nan")], [0.0, -0.0, 5.0, 0.0, 5.0]])


def test_func_transforms_match_eager():
    """vmap, jvp and jacrev see composable ops (a stable sort): the same indices as the
    eager call, ties to the lowest index, NaN largest; gradients to the selected."""
    want = topk(TIES, 3)
    got = torch.func.vmap(lambda r: topk(r, 3))(TIES)
    assert torch.equal(got.indices, want.indices)
    assert torch.equal(bits(got.values), bits(want.values))
    small = torch.func.vmap(lambda r: topk(r, 2, largest=False, sorted=False))(TIES)
    want_small = topk(TIES, 2, largest=False).indices
    assert torch.equal(small.indices.sort(1).values, want_small.sort(1).values)
    _, tangent = torch.func.jvp(lambda t: topk(t, 2).values, (TIES,), (torch.ones_like(TIES),))
    assert torch.equal(tangent, torch.ones(2, 2))
    jac = torch.func.jacrev(lambda t: topk(t, 2).values)(TIES[1])
    assert torch.equal(jac, torch.tensor([[0.0, 0, 1, 0, 0], [0, 0, 0, 0, 1]]))


def test_jit_trace_records_the_op():
    traced = torch.jit.trace(lambda t: topk(t, 2).indices, TIES.nan_to_num())
    assert "deepselect::topk_rows" in str(traced.graph)
    assert traced(TIES).tolist() == [[4, 1], [2, 4]]


def test_meta_and_fake_inputs():
    from torch._subclasses.fake_tensor import FakeTensorMode

    r = topk(torch.empty(4, 9, 6, device="meta"), 3, dim=1)
    assert r.values.shape == (4, 3, 6) and r.indices.dtype == torch.int64
    with FakeTensorMode():
        r = topk(torch.empty(4, 9), 3)
    assert r.values.shape == (4, 3)


def test_torch_function_subclass_sees_the_call():
    seen = []

    class Logged(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return super().__torch_function__(func, types, args, kwargs or {})

    r = topk(TIES.as_subclass(Logged), 2)
    assert seen and seen[0] is topk
    assert type(r.values) is Logged
    assert r.indices.as_subclass(torch.Tensor).tolist() == [[4, 1], [2, 4]]
