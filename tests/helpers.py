"""Helpers shared by the tests: exact comparisons, CUDA graph capture, the streaming
kernel at a small launch, and the short-row kernel run by a plan."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from deepselect import TopkOptions, oracle_topk, triton_short
from deepselect.ops.triton.launch import _next_pow2
from deepselect.options import Order
from deepselect.triton_backend import LaunchConfig, run_triton
from deepselect.triton_short import ShortConfig, describe, run_short, short_path


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


# ------------------------------------------------ the streaming kernel, a small launch


def small_config(k: int, every: int = 1) -> LaunchConfig:
    """A launch of blocks of 128 elements and a buffer of at least 512 slots, so that
    rows of a few thousand elements take many blocks and compactions."""
    B = 128
    cap = max(512, _next_pow2(k + every * B + max(B // 2, k)))
    return LaunchConfig(
        B=B, CAP=cap, B2=cap - k - every * B, KP=max(16, _next_pow2(k)), check_every=every
    )


def run_small(
    x,
    k,
    grid=None,
    seed=0,
    every=1,
    sample_z=None,
    pre=None,
    sample_tol=0,
    sample_keys=0,
    sample_radix=False,
    sample_bits=0,
    **kw,
):
    """``x``'s top-k by the streaming kernel at :func:`small_config`'s launch; ``pre``
    (the sample's bound from registers, or from a first compaction), ``sample_z`` (its
    margin), ``sample_tol``, ``sample_keys``, ``sample_radix`` and ``sample_bits`` as
    LaunchConfig's fields; the rest are TopkOptions."""
    opt = TopkOptions(**kw)
    rows = x.shape[0]
    ov = torch.empty((rows, k), dtype=x.dtype, device=x.device)
    oi = torch.empty((rows, k), dtype=opt.index_dtype, device=x.device)
    cfg = dataclasses.replace(
        small_config(k, every), sample_tol=sample_tol, sample_keys=sample_keys,
        sample_radix=sample_radix, sample_bits=sample_bits,
    )  # fmt: skip
    if sample_z is not None:
        cfg = dataclasses.replace(cfg, sample_z=sample_z)
    if pre is not None:
        cfg = dataclasses.replace(cfg, sample_pre=pre)
    run_triton(x, k, opt, ov, oi, config=cfg, grid=grid, seed=seed)
    return (ov, oi), opt


def check_small(x, k, **kw):
    """:func:`run_small`'s outputs, exactly the oracle's."""
    got, opt = run_small(x, k, **kw)
    assert_same_topk(got, oracle_topk(x, k, opt), opt.order)


# -------------------------------------------------- the short-row kernel, by its plan
SM = 4  # a pretend SM count: the split aims for 2 programs per SM
# the small slices' configs split rows while fewer than SM, whatever their bytes
FEW = dict(split_rows=(1.0, 1.0, 1.0))
SHORT = ShortConfig(nmax=512, min_seg=64, **FEW)
SPLIT = ShortConfig(nmax=128, min_seg=64, **FEW)


def the_split(plan):
    """A plan with radix passes as the split it also holds (the plan sorted by value
    takes)."""
    return dataclasses.replace(plan, pass_level=None, pass_tiles=1, grid_sync=False)


def gpu_plan(x, k, opt, sm, cfg):
    """The plan a GPU that launches cooperatively makes for this call, with the
    interpreter's capabilities (no tuple reductions; the radix passes one launch per
    phase, as where a device refuses their cooperative launch, because the
    interpreter runs programs one after another): so that the radix passes, which
    the interpreter's own plan never takes, run here."""
    if not triton_short.COOPERATIVE:
        pytest.skip("this Triton cannot launch cooperatively: no radix passes")
    rows, n = x.shape
    by_value = Order(opt.order) == Order.VALUE
    plan = triton_short._plan(rows, n, k, sm, cfg, False, x.element_size() * 8, by_value)
    assert plan is not None
    return dataclasses.replace(plan, grid_sync=False, fused_stats=False)


def run_plan(x, k, cfg=SHORT, sm=SM, values=True, want_kind=None, passes=False, edit=None, **kw):
    """``run_short`` by the plan for this call (``passes``: :func:`gpu_plan`'s, with
    the radix passes; ``edit``: then edited)."""
    opt = TopkOptions(**kw)
    rows = x.shape[0]
    plan = gpu_plan(x, k, opt, sm, cfg) if passes else short_path(x, k, opt, sm, cfg)
    assert plan is not None
    if passes:
        assert plan.passes, describe(plan)
    if edit is not None:
        plan = edit(plan)
    if want_kind is not None:
        assert plan.kind == want_kind, describe(plan)
    ov = torch.full((rows, k), 123.0, dtype=x.dtype, device=x.device) if values else None
    oi = torch.full((rows, k), -77, dtype=opt.index_dtype, device=x.device)
    run_short(x, k, opt, ov, oi, plan)
    return (ov, oi), opt


def check_plan(x, k, **kw):
    """:func:`run_plan`'s outputs, exactly the oracle's; returned."""
    got, opt = run_plan(x, k, **kw)
    want = oracle_topk(x, k, opt)
    if got[0] is None:
        want = (None, want[1])
    assert_same_topk(got, want, opt.order)
    return got


def same_bits(a, b):
    """Bit-for-bit equal outputs, position by position."""
    assert torch.equal(a[1].cpu(), b[1].cpu())
    if a[0] is not None:
        assert torch.equal(bits(a[0].cpu()), bits(b[0].cpu()))
