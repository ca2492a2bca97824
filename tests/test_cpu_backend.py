"""The Numba CPU backend against the exact oracle."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("numba")

from helpers import assert_same_topk, bits  # noqa: E402

from deepselect import distributions  # noqa: E402
from deepselect.api import make_options, topk_rows  # noqa: E402
from deepselect.cpu_backend import CpuConfig, run_cpu  # noqa: E402
from deepselect.oracle import oracle_topk  # noqa: E402

DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.float64)

# Tiny blocks and buffers: many blocks, many compactions and chunk tests on small rows.
SMALL = CpuConfig(block=96, b2_min=16, warmup=64, min_segment=16)


def _run(x, k, segments=None, config=None, values=True, **kw):
    opt = make_options(x, k, **kw)
    rows = x.shape[0]
    out_i = torch.empty((rows, k), dtype=opt.index_dtype)
    out_v = torch.empty((rows, k), dtype=x.dtype) if values else None
    extra = {} if config is None else {"config": config}
    run_cpu(x, k, opt, out_v, out_i, segments=segments, **extra)
    return (out_v, out_i), opt


def _check(x, k, segments=None, config=None, **kw):
    got, opt = _run(x, k, segments=segments, config=config, **kw)
    want = oracle_topk(x, k, opt)
    assert_same_topk(got, want, opt.order, msg=f"{x.dtype} {list(x.shape)} k={k} {kw}")
    return got


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", distributions.KINDS)
def test_every_kind(kind, dtype):
    x = distributions.make(kind, 3, 3001, dtype, seed=7)
    for config in (None, SMALL):
        _check(x, 40, config=config, order="value")
        _check(x, 40, config=config, order="none", largest=False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [1, 7, 64])
def test_lengths(dtype, k):
    for n in sorted({0, 1, max(k - 1, 0), k, k + 1, 257, 1000, 4097}):
        x = distributions.make("normal", 2, n, dtype, seed=n)
        for config in (None, SMALL):
            _check(x, k, config=config, order="value")
            _check(x, k, config=config, order="index", largest=False)


@pytest.mark.parametrize("k", [1, 100, 513, 4095, 4096, 4097, 6000])
def test_k_sizes(k):
    x = distributions.make("distinct4096", 2, 20011, torch.float32, seed=k)
    _check(x, k, order="value")
    _check(x, k, config=SMALL, order="none")


def test_k_at_least_n_returns_all_then_fills():
    x = distributions.make("normal", 3, 50, torch.bfloat16, seed=1)
    for k in (50, 51, 4100):
        _check(x, k, order="value", fill_value=7.5, fill_index=-3)
        _check(x, k, order="none", largest=False)


@pytest.mark.parametrize("order", ["none", "value", "index"])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_windows_offsets_fills(order, largest, index_dtype):
    rows, n = 6, 5000
    x = distributions.make("distinct32", rows, n, torch.float16, seed=3)
    begin = torch.tensor([0, 10, 4990, 2500, 0, 77], dtype=torch.int32)
    end = torch.tensor([5000, 10, 5000, 2600, 33, 4999], dtype=torch.int64)
    offset = torch.tensor([0, 5, -7, 100, 1 << 20, 3], dtype=torch.int64)
    for config in (None, SMALL):
        _check(
            x,
            64,
            config=config,
            order=order,
            largest=largest,
            index_dtype=index_dtype,
            begin=begin,
            end=end,
            index_offset=offset,
            fill_value=-2.0,
            fill_index=-9,
        )
        _check(x, 64, config=config, order=order, index_offset=11, end=end)


def test_indices_only_and_int64():
    x = distributions.make("staircase", 4, 9000, torch.float32, seed=2)
    (v, i), opt = _run(x, 300, values=False, index_dtype=torch.int64, order="index")
    assert v is None
    assert_same_topk((None, i), oracle_topk(x, 300, opt), "index")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_non_contiguous_inputs(dtype):
    base = distributions.make("nan_hotspots", 6, 8002, dtype, seed=5)
    for x in (base[:, ::2], base[::2], base.t().contiguous().t(), base[1:2].expand(3, -1)):
        for config in (None, SMALL):
            _check(x, 50, config=config, order="value")
            _check(x, 50, config=config, order="none", segments=3)


def test_non_contiguous_outputs():
    x = distributions.make("normal", 4, 3000, torch.bfloat16, seed=9)
    opt = make_options(x, 20, order="value")
    out_v = torch.empty((20, 4), dtype=x.dtype).t()
    out_i = torch.empty((20, 4), dtype=torch.int32).t()
    run_cpu(x, 20, opt, out_v, out_i)
    assert_same_topk((out_v, out_i), oracle_topk(x, 20, opt), "value")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["normal", "distinct2", "ascending", "bits_negative"])
def test_segment_split_is_bit_identical(kind, dtype):
    x = distributions.make(kind, 2, 4099, dtype, seed=11)
    begin = torch.tensor([0, 1000])
    end = torch.tensor([4099, 1500])
    ref = _check(x, 70, segments=1, config=SMALL, order="value", begin=begin, end=end)
    for segments in (2, 3, 7, 64):
        got = _check(x, 70, segments=segments, config=SMALL, order="value", begin=begin, end=end)
        assert torch.equal(got[1], ref[1]), f"segments={segments} changed the result"
        assert torch.equal(bits(got[0]), bits(ref[0]))
        _check(x, 70, segments=segments, config=SMALL, order="none", begin=begin, end=end)


def test_values_are_raw_bits():
    # NaN payloads of both signs and -0.0 must come back exactly as stored
    pattern = [0x7FC1, 0xFFC3, 0x8000, 0x0000, 0x3F80, 0x7F81]
    raw = torch.tensor([[p - (1 << 16) if p >= 1 << 15 else p for p in pattern]], dtype=torch.int16)
    x = raw.view(torch.bfloat16)
    for k in (1, 3, 6):
        (v, i), opt = _run(x, k, order="value")
        assert torch.equal(bits(v), bits(x)[0, i[0].long()][None])
        assert_same_topk((v, i), oracle_topk(x, k, opt), "value")


def test_public_entry_point_dispatches_here():
    x = distributions.make("shifted", 5, 7777, torch.bfloat16, seed=4)
    for order in ("none", "value", "index"):
        got = topk_rows(x, 33, order=order, largest=order != "index")
        opt = make_options(x, 33, order=order, largest=order != "index")
        assert_same_topk(got, oracle_topk(x, 33, opt), order)
    empty = torch.empty(0, 10)
    v, i = topk_rows(empty, 4)
    assert v.shape == (0, 4) and i.shape == (0, 4)
