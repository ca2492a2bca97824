"""The CPU backend's lean path for small calls against the exact oracle, on both
sides of its size threshold."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("numba")

from helpers import assert_same_topk, bits  # noqa: E402

from deepselect import cpu_small, distributions  # noqa: E402
from deepselect.api import make_options, topk_rows  # noqa: E402
from deepselect.oracle import oracle_topk  # noqa: E402

DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.float64)
ORDERS = ("none", "value", "index")


@pytest.fixture
def lean_only(monkeypatch):
    """Fail if a call goes to the streaming kernel instead of the lean path."""

    def refuse(*a, **kw):
        raise AssertionError("a small call reached run_cpu")

    monkeypatch.setattr(cpu_small, "run_cpu", refuse)


def _check(x, k, values=True, out=None, **kw):
    opt = make_options(x, k, **kw)
    rows = x.shape[0]
    if out is None:
        out_i = torch.empty((rows, k), dtype=opt.index_dtype)
        out_v = torch.empty((rows, k), dtype=x.dtype) if values else None
    else:
        out_v, out_i = out
    cpu_small.run_cpu_small(x, k, opt, out_v, out_i)
    want = oracle_topk(x, k, opt)
    assert_same_topk((out_v, out_i), want, opt.order, msg=f"{x.dtype} {list(x.shape)} k={k} {kw}")
    return out_v, out_i


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", distributions.KINDS)
def test_every_kind(kind, dtype, lean_only):
    x = distributions.make(kind, 3, 1500, dtype, seed=11)
    for order in ORDERS:
        _check(x, 40, order=order)
        _check(x, 40, order=order, largest=False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [1, 7, 64, 300])
def test_lengths(dtype, k, lean_only):
    for n in sorted({0, 1, max(k - 1, 0), k, k + 1, 257, 4096}):
        x = distributions.make("normal", 2, n, dtype, seed=n)
        _check(x, k, order="value")
        _check(x, k, order="index", largest=False, index_dtype=torch.int64)
        _check(x, k, order="none", fill_value=3.5, fill_index=-4)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_windows_offsets_fills(order, largest, index_dtype, lean_only):
    x = distributions.make("distinct32", 6, 2000, torch.float16, seed=3)
    begin = torch.tensor([0, 10, 1990, 900, 0, 77], dtype=torch.int32)
    end = torch.tensor([2000, 10, 2000, 1000, 33, 1999], dtype=torch.int64)
    offset = torch.tensor([0, 5, -7, 100, 1 << 20, 3], dtype=torch.int64)
    kw = dict(order=order, largest=largest, index_dtype=index_dtype)
    _check(x, 64, begin=begin, end=end, index_offset=offset, fill_value=-2.0, fill_index=-9, **kw)
    _check(x, 64, index_offset=11, end=end, **kw)
    _check(x, 64, values=False, index_offset=-3, **kw)


def _specials(dtype):
    """NaNs of both signs and payloads, +-inf, +-0, subnormals, +-1, largest finite."""
    bits_ = torch.finfo(dtype).bits
    itype = {16: torch.int16, 32: torch.int32, 64: torch.int64}[bits_]
    inf = int(torch.tensor(float("inf"), dtype=dtype).view(itype).item())
    one = int(torch.tensor(1.0, dtype=dtype).view(itype).item())
    sign = 1 << (bits_ - 1)
    base = [inf + 1, inf | (inf >> 1), sign - 1, inf, 0, 1, (inf & -inf) - 1, one, inf - 1]
    pats = sorted({b for p in base for b in (p, p | sign)})
    signed = [p - 2 * sign if p >= sign else p for p in pats]
    return torch.tensor(signed, dtype=itype).view(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("largest", [True, False])
def test_special_values_and_ties(dtype, largest, lean_only):
    s = _specials(dtype)
    g = torch.Generator().manual_seed(5)
    x = s[torch.randint(0, s.numel(), (4, 700), generator=g)]
    x[3] = s[5]  # a row of one value
    for k in (1, 2, 17, 64, 699, 700, 800):
        for order in ORDERS:
            v, i = _check(x, k, order=order, largest=largest)
            n = min(k, 700)
            assert torch.equal(bits(v[:, :n]), bits(x).gather(1, i[:, :n].long()))


def test_non_contiguous_inputs_and_outputs(lean_only):
    base = distributions.make("nan_hotspots", 6, 2702, torch.bfloat16, seed=5)
    for x in (base[:, ::2], base[::2], base.t().contiguous().t(), base[1:2].expand(3, -1)):
        _check(x, 50, order="value")
        _check(x, 50, order="none", largest=False)
    x = base[:4]
    out = (torch.empty((20, 4), dtype=x.dtype).t(), torch.empty((20, 4), dtype=torch.int32).t())
    _check(x, 20, order="value", out=out)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_both_sides_of_the_threshold(dtype, monkeypatch):
    calls = []
    run_cpu = cpu_small.run_cpu
    monkeypatch.setattr(cpu_small, "run_cpu", lambda *a: calls.append(1) or run_cpu(*a))
    n = cpu_small.SMALL_N
    most = cpu_small.SMALL_WORK // n
    for rows, length, streamed in ((most, n, False), (most + 1, n, True), (1, n + 1, True)):
        x = distributions.make("distinct32", rows, length, dtype, seed=rows)
        for order in ORDERS:
            calls.clear()
            _check(x, 100, order=order, largest=order != "index")
            assert bool(calls) == streamed, (rows, length, order)


def test_public_entry_point_takes_the_lean_path(lean_only):
    x = distributions.make("shifted", 2, 3000, torch.float32, seed=4)
    for order in ORDERS:
        got = topk_rows(x, 33, order=order, largest=order != "index")
        opt = make_options(x, 33, order=order, largest=order != "index")
        assert_same_topk(got, oracle_topk(x, 33, opt), order)
    v, i = topk_rows(torch.empty(0, 10), 4)
    assert v.shape == (0, 4) and i.shape == (0, 4)
