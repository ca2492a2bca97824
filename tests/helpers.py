"""Comparison helpers shared by the tests."""

from __future__ import annotations

import torch

from deepselect.options import Order


def bits(t: torch.Tensor) -> torch.Tensor:
    """A tensor's raw bit pattern as int64, so NaN payloads and -0.0 compare exactly."""
    width = t.element_size() * 8
    itype = {16: torch.int16, 32: torch.int32, 64: torch.int64}[width]
    return t.contiguous().view(itype).to(torch.int64)


def assert_same_topk(got, want, order: Order | str = Order.NONE, msg: str = "") -> None:
    """Exact comparison: identical indices (as a set per row when order is none) and
    bitwise-identical values in the same positions."""
    gv, gi = got
    wv, wi = want
    order = Order(order)
    gi, wi = gi.cpu().to(torch.int64), wi.cpu().to(torch.int64)
    if gv is not None:
        assert gv.dtype == wv.dtype
        # compared as bits, and moved as bits: torch.gather of bf16 on the CPU rewrites
        # NaN payloads
        gv, wv = bits(gv.cpu()), bits(wv.cpu())
    if order is Order.NONE:  # any order: compare after sorting each row by index
        gp = torch.argsort(gi, dim=1, stable=True)
        wp = torch.argsort(wi, dim=1, stable=True)
        gi, wi = torch.gather(gi, 1, gp), torch.gather(wi, 1, wp)
        if gv is not None:
            gv, wv = torch.gather(gv, 1, gp), torch.gather(wv, 1, wp)
    assert gi.shape == wi.shape, f"{msg} index shape {gi.shape} != {wi.shape}"
    bad = (gi != wi).any(dim=1)
    assert not bool(bad.any()), (
        f"{msg} indices differ in rows {bad.nonzero().flatten()[:8].tolist()}: "
        f"got {gi[bad][0][:16].tolist()} want {wi[bad][0][:16].tolist()}"
    )
    if gv is not None:
        vb = (gv != wv).any(dim=1)
        assert not bool(vb.any()), f"{msg} values differ in rows {vb.nonzero().flatten()[:8]}"


def assert_same_along_dim(got, want, dim: int, sorted_: bool) -> None:
    """``torch.return_types.topk``-style results, equal exactly: position by position
    when sorted, as the same (index, value) sets along ``dim`` otherwise."""
    gv, gi = got
    wv, wi = want
    assert gi.dtype == torch.int64 and gv.dtype == wv.dtype
    assert gv.shape == wv.shape and gi.shape == wi.shape
    if not sorted_ and gv.dim() > 0:
        gi, p = gi.sort(dim=dim)
        gv = gv.gather(dim, p)
        wi, p = wi.sort(dim=dim)
        wv = wv.gather(dim, p)
    assert torch.equal(gi, wi)
    assert torch.equal(gv, wv)


def warm_then_capture(fn):
    """Run ``fn`` twice on a side stream (kernels compile outside the capture), then
    capture it in a CUDA graph; returns ``(graph, result of the captured call)``."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = fn()
    return graph, result
