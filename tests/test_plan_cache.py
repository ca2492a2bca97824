"""The eager call's plan cache (deepselect.api._PLANS): a repeated call skips
validation, so every change of shape, stride, dtype, device, k or option must reach a
plan of its own, and misuse must still be refused after a valid call was cached."""

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import deepselect
from deepselect import api, oracle_topk, topk_rows
from deepselect.api import make_options

HAS_CUDA = torch.cuda.is_available()

ROWS, N, K = 4, 300, 5


def _x(rows=ROWS, n=N, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, n, generator=g).to(dtype)
    x[:, 10:30] = x[:, 9:10]  # ties: the lowest index must win
    return x


def _want(x, k, **kw):
    opt_kw = {
        name: kw[name]
        for name in (
            "largest", "order", "begin", "end", "index_offset", "fill_value", "fill_index",
            "index_dtype",
        )
        if name in kw
    }  # fmt: skip
    return oracle_topk(x.cpu(), k, make_options(x.cpu(), k, **_cpu(opt_kw)))


def _cpu(kw):
    return {n: (v.cpu() if isinstance(v, torch.Tensor) else v) for n, v in kw.items()}


def _check(x, k, **kw):
    """Two calls (the second one from the cache) against the oracle."""
    want_v, want_i = _want(x, k, **kw)
    for _ in range(2):
        v, i = topk_rows(x, k, **kw)
        i = i.cpu()
        order = kw.get("order", "none")
        assert i.dtype == kw.get("index_dtype", torch.int32)
        if order == "none":  # any order: compare the sets, row by row
            i, perm = i.sort(dim=1)
            want = want_i.sort(dim=1)
            assert torch.equal(i, want.values)
            if v is not None:
                v = v.cpu().gather(1, perm)
                assert torch.equal(v.view(-1).view(torch.uint8), want_v.gather(
                    1, want.indices).view(-1).view(torch.uint8))  # fmt: skip
        else:
            assert torch.equal(i, want_i)
            if v is not None:  # bit for bit (fills included)
                assert torch.equal(v.cpu().reshape(-1).view(torch.uint8),
                                   want_v.reshape(-1).view(torch.uint8))  # fmt: skip
        if kw.get("return_values", True) is False:
            assert v is None
        else:
            assert v is not None and v.dtype == x.dtype


def _variants(device):
    x = _x().to(device)
    wide = _x(n=N + 20).to(device)
    yield "base", x, K, {}
    yield "rows", _x(rows=ROWS + 1).to(device), K, {}
    yield "n", _x(n=N + 1).to(device), K, {}
    yield "row stride", wide[:, :N], K, {}
    yield "column stride", _x(rows=N, n=ROWS).to(device).t(), K, {}
    yield "offset start", wide[:, 1 : N + 1], K, {}
    for dtype in (torch.bfloat16, torch.float16):
        yield f"dtype {dtype}", x.to(dtype), K, {}
    if device == "cpu":
        yield "dtype float64", x.double(), K, {}
    yield "k", x, K + 1, {}
    yield "k = 1", x, 1, {}
    yield "k > N", x, N + 3, {}
    yield "largest", x, K, {"largest": False}
    yield "order value", x, K, {"order": "value"}
    yield "order index", x, K, {"order": "index"}
    yield "index_offset", x, K, {"index_offset": 7, "order": "index"}
    yield "index_offset 0", x, K, {"index_offset": 0}
    yield "fill_value", x, N + 3, {"fill_value": 3.5, "order": "value"}
    yield "fill_value int", x, N + 3, {"fill_value": 2, "order": "value"}
    yield "fill_index", x, N + 3, {"fill_index": -5, "order": "value"}
    yield "index_dtype", x, K, {"index_dtype": torch.int64}
    yield "no values", x, K, {"return_values": False}
    end = torch.tensor([N, 3, 0, 100], device=device)
    yield "end", x, K, {"end": end, "order": "value"}
    yield "begin", x, K, {"begin": torch.tensor([0, 1, 0, 95], device=device), "end": end}
    yield "end int32", x, K, {"end": end.int(), "order": "value"}
    yield "backend", x, K, {"backend": "oracle", "order": "value"}


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_each_change_gets_its_own_plan(device):
    """Each change of shape, stride, dtype, k or an option, in turn, after the base
    call's plan is cached: every result against the oracle, and the base call again
    after each (its plan must not have been replaced by the other's)."""
    api._PLANS.clear()
    base = _x().to(device)
    for _name, x, k, kw in _variants(device):
        _check(x, k, **kw)
        _check(base, K)


@pytest.mark.gpu
def test_device_change_gets_its_own_plan():
    """The same call signature on the CPU and on a GPU: one plan each."""
    x = _x()
    for dev in ("cpu", "cuda", "cpu", "cuda"):
        _check(x.to(dev), K, order="value")


def test_out_buffers_reach_the_plan():
    """Caller-owned outputs: a new buffer layout is a new plan, and a buffer that
    overlaps the input is refused on a cached call as on the first."""
    x = _x()
    ov, oi = torch.empty(ROWS, K), torch.empty(ROWS, K, dtype=torch.int32)
    for _ in range(2):
        v, i = topk_rows(x, K, order="value", out_values=ov, out_indices=oi)
        assert v is ov and i is oi
        want_v, want_i = _want(x, K, order="value")
        assert torch.equal(oi, want_i) and torch.equal(ov, want_v)
    oi_t = torch.empty(K, ROWS, dtype=torch.int32).t()  # another stride
    topk_rows(x, K, order="value", out_values=ov, out_indices=oi_t)
    assert torch.equal(oi_t, _want(x, K, order="value")[1])
    with pytest.raises(TypeError, match="out_indices must have dtype"):
        topk_rows(x, K, out_indices=torch.empty(ROWS, K, dtype=torch.int64))
    big = torch.zeros(ROWS, N)
    big[:, :] = x
    inside = big[:, :K]  # same shape, strides and dtype as a valid out_values
    with pytest.raises(ValueError, match="overlaps"):
        topk_rows(big, K, out_values=inside, out_indices=oi)
    with pytest.raises(ValueError, match="overlaps"):
        topk_rows(big, K, out_values=inside, out_indices=oi)


@pytest.mark.parametrize(
    "good, bad, exc",
    [
        ({"k": 1}, {"k": True}, TypeError),
        ({"largest": True}, {"largest": 1}, TypeError),
        ({"return_values": False}, {"return_values": 0}, TypeError),
        ({"index_offset": 5}, {"index_offset": 5.0}, TypeError),
        ({"fill_index": -1}, {"fill_index": -1.0}, TypeError),
        ({"order": "value"}, {"order": "VALUE"}, ValueError),
        ({"index_offset": 2**31 - N}, {"index_offset": 2**31 - N + 1}, ValueError),
    ],
)
def test_cached_call_still_refuses_misuse(good, bad, exc):
    """A valid call is cached first; a call the key could confuse with it is still
    validated (``True == 1``, ``5.0 == 5`` and the like)."""
    x = _x()
    kw = {"k": K, **good}
    topk_rows(x, **kw)
    topk_rows(x, **kw)
    with pytest.raises(exc):
        topk_rows(x, **{**kw, **bad})


def test_fill_value_sign_of_zero():
    """-0.0 == 0.0 as a key, but the fills must carry the sign asked for."""
    x = _x()
    for fv in (0.0, -0.0, 0.0, -0.0):
        v, _ = topk_rows(x, N + 2, order="value", fill_value=fv)
        assert torch.equal(v[:, -1].view(torch.int32), torch.tensor(fv).expand(ROWS).view(
            torch.int32))  # fmt: skip


def test_cache_is_bounded():
    api._PLANS.clear()
    for k in range(1, api._PLAN_LIMIT + 10):
        topk_rows(_x(rows=1, n=8), k)
    assert len(api._PLANS) <= api._PLAN_LIMIT


def test_threads_calling_at_once():
    """Several threads calling at once (shared plans, new plans being made) each get
    their own exact result."""
    api._PLANS.clear()
    cases = [
        (_x(rows=r, n=n, dtype=dt, seed=r + n), k, order)
        for r, n, dt in (
            (1, 4096, torch.float32), (3, 1000, torch.bfloat16), (8, 257, torch.float16)
        )
        for k, order in ((1, "value"), (16, "index"), (64, "value"))
    ]  # fmt: skip
    want = [_want(x, k, order=order)[1] for x, k, order in cases]

    def work(seed):
        bad = 0
        for j in range(60):
            c = (seed * 7 + j) % len(cases)
            x, k, order = cases[c]
            if j % 2:
                i = deepselect.topk(x, k, sorted=order == "value").indices
                if order == "value":
                    bad += not torch.equal(i, want[c].long())
                else:
                    bad += not torch.equal(i.sort(dim=1).values, want[c].long())
            else:
                bad += not torch.equal(topk_rows(x, k, order=order)[1], want[c])
        return bad

    with ThreadPoolExecutor(4) as pool:
        assert sum(pool.map(work, range(8))) == 0


def _topk_want(x, k, dim, largest):
    if x.dim() == 0:
        return x, torch.zeros((), dtype=torch.int64)
    v, i = torch.sort(x, dim=dim, descending=largest, stable=True)
    return v.narrow(dim, 0, k), i.narrow(dim, 0, k)


def test_topk_each_change_gets_its_own_plan():
    """deepselect.topk's own cache (torch_ops._PLANS): shape, dim, k, largest, sorted,
    dtype and layout changed in turn, each against a stable sort."""
    base = torch.randn(3, 5, 40, generator=torch.Generator().manual_seed(1))
    base[:, :, 7:15] = base[:, :, 6:7]  # ties
    cases = [
        (base, 4, -1, True, True),
        (base[:, :, :39], 4, -1, True, True),
        (base, 4, 1, True, True),
        (base, 2, 0, True, True),
        (base.transpose(0, 1), 4, -1, True, True),  # same data, other layout
        (base, 5, -1, True, True),
        (base, 4, -1, False, True),
        (base, 4, -1, True, False),
        (base.double(), 4, -1, True, True),
        (base.bfloat16(), 4, -1, True, True),
        (base[0, 0], 3, 0, True, True),
        (base[0, 0, 0], 1, 0, True, True),
    ]
    for x, k, dim, largest, srt in cases:
        for _ in range(2):
            for y in (x, base):  # the base signature's plan is kept alongside
                kk = k if y is x else 4
                d, lg, s = (dim, largest, srt) if y is x else (-1, True, True)
                got = deepselect.topk(y, kk, d, lg, s)
                want_v, want_i = _topk_want(y, kk, d, lg)
                if s:
                    assert torch.equal(got.indices, want_i) and torch.equal(got.values, want_v)
                else:
                    assert torch.equal(got.indices.sort(dim=d).values, want_i.sort(dim=d).values)


def test_topk_cached_signature_still_checks_each_call():
    """A cached signature still builds the autograd graph and refuses misuse."""
    x = torch.randn(2, 30)
    deepselect.topk(x, 3)
    deepselect.topk(x, 3)
    xg = x.clone().requires_grad_()
    v = deepselect.topk(xg, 3).values
    assert v.grad_fn is not None
    v.sum().backward()
    assert xg.grad.sum() == 6
    with pytest.raises(TypeError):
        deepselect.topk(x, True)
    with pytest.raises(TypeError):
        deepselect.topk(x, 3, largest=1)
    with pytest.raises((RuntimeError, ValueError)):
        deepselect.topk(x, 31)


def test_traces_see_the_registered_op_after_eager_calls():
    """Eager calls cache their signature; torch.compile(fullgraph=True) and
    torch.export of the same calls still hold the registered op, not a graph break."""
    from torch._dynamo.testing import CompileCounterWithBackend

    x = torch.randn(3, 50)
    for _ in range(2):
        deepselect.topk(x, 4)
        topk_rows(x, 4, order="value")

    def f(t):
        return deepselect.topk(t, 4).indices, topk_rows(t, 4, order="value")[1]

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("eager")
    got = torch.compile(f, fullgraph=True, backend=counter)(x)
    assert counter.frame_count == 1
    assert torch.equal(got[0], deepselect.topk(x, 4).indices)
    assert torch.equal(got[1], topk_rows(x, 4, order="value")[1])

    class M(torch.nn.Module):
        def forward(self, t):
            return f(t)

    ep = torch.export.export(M(), (x,))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert any("deepselect.topk_rows" in t for t in targets), targets
    got = ep.module()(x)
    assert torch.equal(got[0], deepselect.topk(x, 4).indices)
    torch._dynamo.reset()


def _held_variants(device):
    """(name, x of the recorded call, x of the repeated call, k, options); the two
    inputs share a call signature (shape, strides, dtype) but not their values or
    storage."""
    a, b = _x(seed=1).to(device), _x(seed=2).to(device)
    yield "short", a, b, K, {}
    yield "short by value", a, b, K, {"order": "value", "largest": False}
    yield "short by index, int64", a, b, K, {"order": "index", "index_dtype": torch.int64}
    yield "short, no values", a, b, K, {"return_values": False}
    wa, wb = _x(n=N + 40, seed=3).to(device), _x(n=N + 40, seed=4).to(device)
    yield "short, rows of a wider buffer", wa[:, 4 : N + 4], wb[:, 8 : N + 8], K, {}
    ea = torch.tensor([N, 3, 0, 100], device=device)
    eb = torch.tensor([7, N, 50, 0], device=device)
    yield "short, windows", (a, ea), (b, eb), K, {"order": "value"}
    sa, sb = _x(rows=4, n=9000, seed=5).to(device), _x(rows=4, n=9000, seed=6).to(device)
    yield "stream", sa, sb, 16, {"order": "value"}
    yield "split", sa[:1], sb[:1], 16, {}


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_held_launches_repeat_with_new_tensors(device):
    """A signature's first call on the Triton backend (the interpreter on the CPU)
    is recorded, and the next call repeats its launches with its own input, outputs
    and windows: both against the oracle, for the short, stream and split paths.
    A repeated input whose 16-byte alignment differs from the recorded one's takes
    the full path, and is exact too."""
    for name, first, again, k, kw in _held_variants(device):
        api._PLANS.clear()
        for j, x in enumerate((first, again)):
            opts = dict(kw, backend="triton")
            if isinstance(x, tuple):
                x, opts["end"] = x
            repeated = []
            if j == 1 and api._PLANS:  # CPU windows are checked each call: no plan
                (plan,) = api._PLANS.values()
                assert plan.held is not None, name
                held = plan.held
                plan.held = lambda *a, held=held, seen=repeated: seen.append(held(*a)) or seen[-1]
            _check(x, k, **opts)  # two calls
            if j == 1 and not (device == "cpu" and "end" in opts):
                assert repeated == [True, True], name
    # 4 bytes off: same shape and strides, another alignment
    buf = _x(rows=1, n=ROWS * N + 4, seed=7).to(device).view(-1)
    for x in (buf[: ROWS * N].view(ROWS, N), buf[4:].view(ROWS, N), buf[1 : ROWS * N + 1]):
        _check(x.view(ROWS, N), K, backend="triton", order="value")


def test_cpu_backend_holds_its_short_calls():
    """The CPU backend's lean path of short rows holds a signature's call itself
    (``run.hold``): the next calls go straight to the compiled kernel with their own
    tensors, exact; the streaming path's calls are not held."""
    for n, held in ((N, True), (9000, False)):
        api._PLANS.clear()
        a, b = _x(n=n, seed=1), _x(n=n, seed=2)
        for x in (a, b, a):
            _check(x, K, order="value")
        (plan,) = api._PLANS.values()
        assert (plan.held is not None) == held, n
        if held:
            seen = []
            inner = plan.held
            plan.held = lambda *t, seen=seen, inner=inner: seen.append(inner(*t)) or seen[-1]
            _check(_x(n=n, seed=3), K, order="value")
            _check(_x(n=n, seed=4), K, return_values=False)  # another signature: no plan yet
            assert seen == [True, True]
