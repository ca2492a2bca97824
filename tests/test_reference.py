"""The NumPy reference of DeepSelect against the oracle, and its cost counters."""

import math

import numpy as np
import pytest
import torch
from helpers import assert_same_topk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepselect.distributions import KINDS, make
from deepselect.options import Order, TopkOptions
from deepselect.oracle import oracle_topk
from deepselect.reference import (
    BLOCK_ORDERS,
    block_at,
    block_permutation,
    block_stride,
    radix_select,
    reference_topk,
    sample_blocks,
    select_row,
    unsigned_keys,
)

DTYPES = [torch.bfloat16, torch.float16, torch.float32, torch.float64]
# (k, B, B2): B dividing N or not, B2 below and above k, B larger than the row
CONFIGS = [(1, 16, 16), (7, 8, 3), (50, 32, 64), (96, 13, 100), (203, 64, 17), (300, 1, 1)]


def check(x, k, opt=None, **kw):
    """Reference == oracle exactly; also returns the stats for further checks."""
    opt = opt or TopkOptions()
    v, i, stats = reference_topk(x, k, opt, return_stats=True, **kw)
    assert_same_topk((v, i), oracle_topk(x, k, opt), opt.order, msg=f"k={k} {kw}")
    assert v.dtype == x.dtype and i.dtype == opt.index_dtype and i.shape == (x.shape[0], k)
    B, B2 = kw.get("B", 1024), kw.get("B2", 1024)
    for s in stats:
        assert s.peak <= k + B2 + B
        assert s.work == s.appended + k * s.compactions
        assert s.compactions * B2 <= s.appended <= s.n
        assert s.blocks == math.ceil(s.n / B)
    return stats


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_and_dtype(kind, dtype):
    x = make(kind, 2, 203, dtype, seed=3)
    for k, B, B2 in CONFIGS:
        for block_order in ("random", "sequential"):
            for largest in (True, False):
                check(x, k, TopkOptions(largest=largest), B=B, B2=B2, block_order=block_order)


@pytest.mark.parametrize("k", [1, 2, 5, 64, 100])
def test_lengths_around_k(k):
    for n in sorted({0, 1, max(k - 1, 0), k, k + 1, 2 * k + 3, 3 * k - 1, 257}):
        x = make("distinct32", 3, n, torch.float32, seed=n)
        for B, B2 in [(1, 1), (4, 4), (7, 3), (64, 128)]:
            for block_order in BLOCK_ORDERS:
                for order in Order:
                    check(x, k, TopkOptions(order=order), B=B, B2=B2, block_order=block_order)


@pytest.mark.parametrize("k", [511, 4096, 4097, 5000])
def test_large_k(k):
    n = 9001
    x = make("normal", 1, n, torch.bfloat16, seed=k)  # bf16: many ties at this length
    for B, B2 in [(1024, 1024), (700, 300)]:
        check(x, k, TopkOptions(order=Order.VALUE), B=B, B2=B2)
    check(make("ascending", 1, n, torch.float32), k, B=512, B2=512, block_order="sequential")


def test_options():
    rows, n = 5, 150
    x = make("distinct32", rows, n, torch.float32, seed=1)
    x[1, 7] = float("nan")
    x[2, 9] = -float("nan")
    windows = dict(
        begin=torch.tensor([0, 10, 50, 149, 75], dtype=torch.int32),
        end=torch.tensor([150, 40, 50, 150, 140], dtype=torch.int64),
    )
    for k in (1, 3, 30, 64, 151):
        for order in Order:
            for largest in (True, False):
                for index_dtype in (torch.int32, torch.int64):
                    opts = [
                        TopkOptions(largest=largest, order=order, index_dtype=index_dtype),
                        TopkOptions(
                            largest=largest,
                            order=order,
                            index_dtype=index_dtype,
                            index_offset=1000,
                            fill_value=7.5,
                            fill_index=-9,
                            **windows,
                        ),
                        TopkOptions(
                            largest=largest,
                            order=order,
                            index_dtype=index_dtype,
                            index_offset=torch.arange(rows) * 100,
                            begin=torch.tensor([3, 0, 120, 0, 200]),  # clamped to N
                        ),
                    ]
                    for opt in opts:
                        check(x, k, opt, B=16, B2=8, block_order="affine", seed=k)


def test_non_contiguous_input_and_nan_payloads():
    base = make("nan_hotspots", 4, 300, torch.float32, seed=2)
    bits = base.view(torch.int32)
    bits[:, ::37] = 0x7FC00123  # a NaN with a payload must come back bit for bit
    x = base[:, ::2]  # strided rows
    assert not x.is_contiguous()
    check(x, 20, TopkOptions(order=Order.VALUE), B=8, B2=8)
    check(x.t().contiguous().t(), 20, B=8, B2=8)


def test_sequential_ascending_trace():
    # Worked by hand: ascending, N = 40, k = 4, B = 8, B2 = 4 sequentially. Block 0 fills
    # the buffer to 8 = k + B2 and compacts; each later block beats the threshold entirely,
    # so 4 + 8 elements compact again after every block: A = 40, R = 5, W = 40 + 4*5.
    x = make("ascending", 1, 40, torch.float32)
    (s,) = check(x, 4, B=8, B2=4, block_order="sequential")
    assert (s.appended, s.compactions, s.work, s.peak) == (40, 5, 60, 12)
    # descending: block 0 fills the buffer to k + B2 and compacts; nothing later beats T
    (s,) = check(-x, 4, B=8, B2=4, block_order="sequential")
    assert (s.appended, s.compactions, s.work, s.peak) == (8, 1, 12, 8)
    # all equal: ties go to the lower index, so after block 0 no later element beats T
    (s,) = check(x * 0 + 1, 4, B=8, B2=4, block_order="sequential")
    assert (s.appended, s.compactions) == (8, 1)


def test_result_independent_of_block_order_and_sizes():
    x = make("distinct4096", 2, 1000, torch.float16, seed=4)
    want = oracle_topk(x, 77, TopkOptions(order=Order.INDEX))
    for seed in range(4):
        for block_order in BLOCK_ORDERS:
            for B, B2 in [(1, 1), (3, 1000), (999, 2), (1001, 77)]:
                got = reference_topk(
                    x, 77, TopkOptions(order=Order.INDEX), B=B, B2=B2,
                    block_order=block_order, seed=seed,
                )  # fmt: skip
                assert_same_topk(got, want, Order.INDEX)


@pytest.mark.parametrize("block_order", BLOCK_ORDERS)
@pytest.mark.parametrize("m", [0, 1, 2, 6, 97, 256])
def test_block_permutation_is_a_permutation(block_order, m):
    p = block_permutation(m, block_order, seed=5, row=3)
    assert sorted(p.tolist()) == list(range(m))
    assert np.array_equal(p, block_permutation(m, block_order, seed=5, row=3))  # seeded


def test_block_orders_differ_by_row_and_seed():
    a = block_permutation(256, "random", seed=0, row=0)
    assert not np.array_equal(a, block_permutation(256, "random", seed=0, row=1))
    assert not np.array_equal(a, block_permutation(256, "random", seed=1, row=0))
    assert np.array_equal(block_permutation(256, "sequential"), np.arange(256))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 400),
    st.integers(1, 300),
    st.sampled_from([8, 16, 32, 64]),
    st.integers(0, 2**32),
)
def test_radix_select_matches_sort(n, k, width, seed):
    k = min(k, n - 1) if n > 1 else None
    if k is None or k < 1:
        return
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 2**width, size=max(1, n // 5), dtype=np.uint64, endpoint=False)
    keys = rng.choice(pool, size=n)  # many ties
    idx = rng.permutation(n * 3)[:n].astype(np.int64)  # distinct, unordered
    take, kk, ki = radix_select(keys, idx, k, width, 16)
    best = np.lexsort((idx, ~keys))[:k]  # key descending, index ascending
    assert sorted(np.flatnonzero(take).tolist()) == sorted(best.tolist())
    assert (kk, ki) == (int(keys[best[-1]]), int(idx[best[-1]]))


def test_unsigned_keys_order():
    x = torch.tensor([[-float("inf"), -1.0, -0.0, 0.0, 1e-40, 2.0, float("inf"), float("nan")]])
    for dtype in DTYPES:
        u = unsigned_keys(x.to(dtype))[0]
        assert u.dtype == np.uint64
        assert all(u[j] <= u[j + 1] for j in range(len(u) - 1))
        assert u[2] == u[3]  # -0.0 == +0.0
        assert u[-1] == 2 ** (8 * x.to(dtype).element_size()) - 1  # NaN on top


VALUES = st.sampled_from(
    [0.0, -0.0, 1.0, -1.0, 2.5, 1e-30, -1e30, float("inf"), -float("inf"), float("nan")]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    n=st.integers(0, 60),
    k=st.integers(1, 70),
    B=st.integers(1, 20),
    B2=st.integers(1, 20),
    dtype=st.sampled_from(DTYPES),
    largest=st.booleans(),
    order=st.sampled_from(list(Order)),
    block_order=st.sampled_from(BLOCK_ORDERS),
    seed=st.integers(0, 1000),
)
def test_property_small_inputs(data, n, k, B, B2, dtype, largest, order, block_order, seed):
    rows = data.draw(st.integers(1, 3))
    vals = data.draw(st.lists(st.one_of(VALUES, st.floats(-4, 4)), min_size=rows * n,
                              max_size=rows * n))  # fmt: skip
    x = torch.tensor(vals, dtype=torch.float64).reshape(rows, n).to(dtype)
    begin = torch.tensor([data.draw(st.integers(0, n)) for _ in range(rows)])
    end = torch.tensor([data.draw(st.integers(int(b), n)) for b in begin])
    opt = TopkOptions(largest=largest, order=order, begin=begin, end=end, index_offset=3)
    check(x, k, opt, B=B, B2=B2, block_order=block_order, seed=seed)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(k=0), "k must be >= 1"),
        (dict(k=3, B=0), "B must be >= 1"),
        (dict(k=3, B2=0), "B2 must be >= 1"),
        (dict(k=3, B2=-5), "B2 must be >= 1"),
        (dict(k=3, block_order="reverse"), "block_order must be one of"),
    ],
)
def test_bad_arguments(kwargs, match):
    x = torch.randn(2, 10)
    with pytest.raises(ValueError, match=match):
        reference_topk(x, **kwargs)
    keys = unsigned_keys(x)[0]
    with pytest.raises(ValueError, match=match):
        select_row(keys, **kwargs)


def test_bad_types():
    x = torch.randn(2, 10)
    with pytest.raises(TypeError, match="k must be an int"):
        reference_topk(x, 2.0)
    with pytest.raises(TypeError, match="B must be an int"):
        reference_topk(x, 2, B=1.5)
    with pytest.raises(ValueError, match="x must be 2-D"):
        reference_topk(x[0], 2)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        reference_topk([[1.0]], 1)
    with pytest.raises(ValueError, match="block_order must be one of"):
        block_permutation(4, "shuffled")


def _records(a: int, c: int, m: int) -> int:
    """Blocks of the order (a*i + c) mod m that lie beyond every block before them."""
    pos = (a * np.arange(m, dtype=np.int64) + c) % m
    return int(np.count_nonzero(pos == np.maximum.accumulate(pos)))


@pytest.mark.parametrize("m", [*range(1, 130), 255, 256, 257, 295, 780, 1986, 4096, 8192])
def test_block_stride_has_no_near_periodic_runs(m):
    """The kernels' block order is a bijection, and on a monotone row (ascending:
    records of the positions; descending: of the mirrored ones) few blocks are full of
    hits, from any start (the earlier multiplier, m/phi^2 plus jitter, had up to m/2)."""
    a = block_stride(m)
    assert (a == 0) if m <= 1 else (0 < a < m and math.gcd(a, m) == 1)
    if m > 1:
        starts = range(0, m, max(1, m // 32))
        worst = max(max(_records(a, c, m), _records(m - a, c, m)) for c in starts)
        assert worst <= 24


@pytest.mark.parametrize("s", [0, 1, 4])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 63, 64, 65, 256, 1000])
def test_block_order_is_a_permutation_with_the_ends_after_the_sample(m, s):
    """The kernels' block order: every block once, the first s (or all middle blocks, if
    fewer) from the middle, then the last and the first block, so that on a monotone
    row (either direction) the best block comes right after the sample."""
    mid = max(m - 2, 1)
    a = block_stride(mid)
    p = max(min(s, m - 2), 0)
    for c in range(0, mid, max(1, mid // 16)):
        order = [block_at(i, m, a, c, s) for i in range(m)]
        assert sorted(order) == list(range(m))
        assert all(0 < b < m - 1 for b in order[:p])
        assert order[p : p + 2] == [m - 1, 0][: min(m, 2)]
        # the middle blocks keep their stride order around the ends
        assert [b for b in order if 0 < b < m - 1] == [1 + (a * t + c) % mid for t in range(m - 2)]


def test_sample_blocks_cover_the_first_compaction():
    assert sample_blocks(4096, 8192) == 1
    assert sample_blocks(8192, 4096) == 2
    assert sample_blocks(8193, 4096) == 3
