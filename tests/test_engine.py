"""Engine operations against plain references.

The reference order is a Python sort of each row by (NaN first, value descending,
index ascending): written independently of the library's key mapping.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import bits

from deepselect.bench.indexer import benchmark_indexer_split
from deepselect.distributions import KINDS, make
from deepselect.engine import (
    counter_uniform,
    indexer_topk,
    top_k_mask_logits,
    top_k_renorm_probs,
    top_k_sampling_from_logits,
    top_k_sampling_from_probs,
    top_k_top_p_sampling_from_logits,
    top_k_top_p_sampling_from_probs,
)
from deepselect.lightning_indexer import lightning_indexer_scores, lightning_indexer_topk
from deepselect.options import TopkOptions

# Chi-square critical value for 3 degrees of freedom at significance 0.001 (standard
# tables: P(chi2_3 > 16.266) = 0.001). With fixed seeds the tests are deterministic;
# the level says how unlikely a correct sampler is to land above it.
CHI2_DF3_P001 = 16.266


def ref_ranked(values: list[float], positions) -> list[int]:
    """Positions sorted best first: NaN largest, then value descending, then position."""
    return sorted(positions, key=lambda p: (0 if math.isnan(values[p]) else 1, -values[p], p))


def ref_rows(x: torch.Tensor, lo, hi, k: int) -> list[list[int]]:
    """Per-row best-first positions in [lo[r], hi[r]), at most k of them."""
    xs = x.double().tolist()
    return [ref_ranked(xs[r], range(lo[r], hi[r]))[:k] for r in range(x.shape[0])]


def as_sets(t: torch.Tensor) -> list[list[int]]:
    return [sorted(row) for row in t.tolist()]


def padded(rows: list[list[int]], k: int) -> list[list[int]]:
    return [r + [-1] * (k - len(r)) for r in rows]


def strided(x: torch.Tensor) -> torch.Tensor:
    """The same values with a row stride that is not the row length."""
    wide = torch.zeros(x.shape[0], 2 * x.shape[1] + 3, dtype=x.dtype)
    wide[:, 1 : 2 * x.shape[1] + 1 : 2] = x
    return wide[:, 1 : 2 * x.shape[1] + 1 : 2]


def windows(rows: int, max_len: int, k: int, seed: int):
    """Random starts/lengths with short rows (< k, 0) and full rows mixed in."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, max_len + 1, (rows,), generator=g)
    lengths[0] = max_len
    lengths[1] = min(k - 1, max_len) if k > 1 else 0
    lengths[2] = 0
    starts = (torch.rand(rows, generator=g) * (max_len - lengths + 1)).floor().to(torch.int64)
    starts[0] = 0
    return starts, lengths


# --------------------------------------------------------------------------- indexer

ROWS, MAX_LEN = 6, 97


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_indexer_windows_all_kinds(kind, dtype):
    x = strided(make(kind, ROWS, MAX_LEN, dtype, seed=3))
    assert x.stride(0) != MAX_LEN
    for k in (1, 17, 120):
        starts, lengths = windows(ROWS, MAX_LEN, k, seed=k)
        got = indexer_topk(x, lengths.to(torch.int32), k, starts=starts)
        assert got.dtype == torch.int32 and got.shape == (ROWS, k)
        want = ref_rows(x, starts.tolist(), (starts + lengths).tolist(), k)
        assert as_sets(got) == as_sets(torch.tensor(padded(want, k))), (kind, k)


@pytest.mark.parametrize("kind", ["distinct2", "nan_hotspots", "signed_zeros", "bits_negative"])
def test_indexer_orders(kind):
    x = make(kind, ROWS, MAX_LEN, torch.float32, seed=5)
    k = 20
    starts, lengths = windows(ROWS, MAX_LEN, k, seed=1)
    want = ref_rows(x, starts.tolist(), (starts + lengths).tolist(), k)
    by_value = indexer_topk(x, lengths, k, starts=starts, order="value")
    assert by_value.tolist() == padded(want, k)
    by_index = indexer_topk(x, lengths, k, starts=starts, order="index")
    assert by_index.tolist() == padded([sorted(r) for r in want], k)


def test_indexer_default_starts_and_short_rows():
    x = make("distinct32", 4, 50, torch.float32, seed=2)
    lengths = torch.tensor([50, 3, 0, 10])
    got = indexer_topk(x, lengths, 8, order="index")
    want = ref_rows(x, [0, 0, 0, 0], lengths.tolist(), 8)
    assert got.tolist() == padded([sorted(r) for r in want], 8)
    assert got[1, 3:].eq(-1).all() and got[2].eq(-1).all()


@pytest.mark.parametrize("kind", ["normal", "distinct2", "nan_hotspots"])
def test_indexer_ragged(kind):
    x = make(kind, ROWS, MAX_LEN, torch.bfloat16, seed=7)
    k = 25
    starts, lengths = windows(ROWS, MAX_LEN, k, seed=4)
    offsets = torch.tensor([0, 1000, 5, 77, 123456, 9], dtype=torch.int32)
    got = indexer_topk(x, lengths, k, starts=starts, ragged_offsets=offsets, order="index")
    want = ref_rows(x, starts.tolist(), (starts + lengths).tolist(), k)
    want = [[p + int(offsets[r]) for p in sorted(row)] for r, row in enumerate(want)]
    assert got.tolist() == padded(want, k)


@pytest.mark.parametrize("page_size", [1, 2, 16])
@pytest.mark.parametrize("kind", ["normal", "distinct32", "bits_positive"])
def test_indexer_paged(page_size, kind):
    batch, rows, max_len, k = 3, 8, 64, 12
    max_pages = max_len // page_size
    g = torch.Generator().manual_seed(page_size)
    # Each sequence owns a random set of physical pages out of a shared pool.
    pool = torch.randperm(batch * max_pages + 5, generator=g)[: batch * max_pages]
    page_table = pool.reshape(batch, max_pages).to(torch.int32)
    row_to_batch = torch.tensor([0, 0, 1, 2, 2, 2, 1, 0], dtype=torch.int32)
    x = make(kind, rows, max_len, torch.float32, seed=page_size)
    starts, lengths = windows(rows, max_len, k, seed=page_size + 10)
    got = indexer_topk(
        x,
        lengths,
        k,
        starts=starts,
        page_table=page_table,
        page_size=page_size,
        row_to_batch=row_to_batch,
        order="index",
    )
    want = ref_rows(x, starts.tolist(), (starts + lengths).tolist(), k)
    table = page_table.tolist()
    mapped = [
        [
            table[int(row_to_batch[r])][p // page_size] * page_size + p % page_size
            for p in sorted(row)
        ]
        for r, row in enumerate(want)
    ]
    assert got.tolist() == padded(mapped, k)


def test_indexer_paged_one_table_row_per_row_and_out_buffer():
    rows, max_len, k, ps = 3, 32, 5, 4
    x = make("staircase", rows, max_len, torch.float32, seed=1)
    lengths = torch.tensor([32, 2, 17])
    page_table = torch.arange(rows * 8, dtype=torch.int32).flip(0).reshape(rows, 8)
    out = torch.full((rows, k), 99, dtype=torch.int32)
    got = indexer_topk(x, lengths, k, page_table=page_table, page_size=ps, out=out)
    assert got is out
    want = ref_rows(x, [0] * rows, lengths.tolist(), k)
    table = page_table.tolist()
    mapped = [[table[r][p // ps] * ps + p % ps for p in row] for r, row in enumerate(want)]
    assert as_sets(out) == as_sets(torch.tensor(padded(mapped, k)))


def test_indexer_out_buffer_plain():
    x = make("normal", 2, 40, torch.float32, seed=0)
    out = torch.empty(2, 6, dtype=torch.int32)
    got = indexer_topk(x, torch.tensor([40, 40]), 6, out=out, order="value")
    assert got is out and out.tolist() == ref_rows(x, [0, 0], [40, 40], 6)


def test_indexer_validation():
    x = torch.randn(2, 16)
    lengths = torch.tensor([16, 4])
    pt = torch.zeros(2, 4, dtype=torch.int32)
    with pytest.raises(ValueError, match="ragged_offsets and page_table"):
        indexer_topk(x, lengths, 2, ragged_offsets=lengths, page_table=pt, page_size=4)
    with pytest.raises(ValueError, match="power of two"):
        indexer_topk(x, lengths, 2, page_table=pt, page_size=3)
    with pytest.raises(ValueError, match="page_size is required"):
        indexer_topk(x, lengths, 2, page_table=pt)
    with pytest.raises(ValueError, match="page_size is only valid"):
        indexer_topk(x, lengths, 2, page_size=4)
    with pytest.raises(ValueError, match="row_to_batch is only valid"):
        indexer_topk(x, lengths, 2, row_to_batch=lengths)
    with pytest.raises(TypeError, match="page_table must have dtype int32"):
        indexer_topk(x, lengths, 2, page_table=pt.long(), page_size=4)
    with pytest.raises(ValueError, match="page_table covers"):
        indexer_topk(x, lengths, 2, page_table=pt[:, :2], page_size=4)
    with pytest.raises(ValueError, match="row_to_batch values"):
        indexer_topk(x, lengths, 2, page_table=pt, page_size=4, row_to_batch=torch.tensor([0, 2]))
    with pytest.raises(ValueError, match="lengths must have shape"):
        indexer_topk(x, torch.tensor([1, 2, 3]), 2)
    with pytest.raises(TypeError, match="lengths must have dtype"):
        indexer_topk(x, lengths.float(), 2)
    with pytest.raises(ValueError, match="starts \\+ lengths <= max_len"):
        indexer_topk(x, lengths, 2, starts=torch.tensor([1, 13]))
    with pytest.raises(ValueError, match="k must be >= 1"):
        indexer_topk(x, lengths, 0)
    with pytest.raises(ValueError, match="out must be int32"):
        indexer_topk(x, lengths, 2, out=torch.empty(2, 2, dtype=torch.int64))


# --------------------------------------------------------------------------- masks

V = 53


def ref_keep(x: torch.Tensor, ks: list[int]) -> torch.Tensor:
    xs = x.double().tolist()
    keep = torch.zeros(x.shape, dtype=torch.bool)
    for r, k in enumerate(ks):
        if k <= 0 or k >= x.shape[1]:
            keep[r] = True
        else:
            keep[r, ref_ranked(xs[r], range(x.shape[1]))[:k]] = True
    return keep


def check_mask(x: torch.Tensor, got: torch.Tensor, keep: torch.Tensor) -> None:
    assert got.dtype == x.dtype and got.shape == x.shape
    assert torch.equal(bits(got)[keep], bits(x)[keep])  # kept: bitwise the input
    assert bool((got[~keep] == float("-inf")).all())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mask_logits_int_k(kind, dtype):
    x = make(kind, 5, V, dtype, seed=11)
    for k in (0, 1, 7, V - 1, V, V + 5):
        check_mask(x, top_k_mask_logits(x, k), ref_keep(x, [k] * 5))


@pytest.mark.parametrize("kind", ["normal", "distinct2", "distinct32", "nan_hotspots", "all_equal"])
def test_mask_logits_tensor_k(kind):
    x = strided(make(kind, 7, V, torch.float32, seed=12))
    ks = [0, 1, 3, 10, V - 1, V, 200]
    k = torch.tensor(ks)
    check_mask(x, top_k_mask_logits(x, k), ref_keep(x, ks))
    small = torch.tensor([0, 1, 3, 10, 10, 2, 5], dtype=torch.int32)
    check_mask(x, top_k_mask_logits(x, small, k_max=10), ref_keep(x, small.tolist()))


@pytest.mark.parametrize(
    "kind", ["normal", "distinct2", "distinct32", "all_equal", "staircase", "signed_zeros", "huge"]
)
def test_renorm_probs(kind):
    probs = make(kind, 6, V, torch.float32, seed=13).abs()  # abs adds ties of its own
    probs[:, 0] += 1e-3  # no all-zero rows
    ks = [1, 4, 9, 0, V, 30]
    for k in (ks, 5):
        kt = torch.tensor(k) if isinstance(k, list) else k
        kl = k if isinstance(k, list) else [k] * 6
        keep = ref_keep(probs, kl)
        kept = torch.where(keep, probs, torch.zeros(()))
        want = kept / kept.sum(dim=1, keepdim=True)
        got = top_k_renorm_probs(probs, kt)
        assert torch.equal(got == 0, want == 0)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0)


def test_mask_validation():
    x = torch.randn(3, 10)
    with pytest.raises(ValueError, match="k must be >= 0"):
        top_k_mask_logits(x, -1)
    with pytest.raises(TypeError, match="k must be an int"):
        top_k_mask_logits(x, 2.0)
    with pytest.raises(ValueError, match="k must have shape"):
        top_k_mask_logits(x, torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="k_max is only meaningful"):
        top_k_mask_logits(x, 3, k_max=4)
    with pytest.raises(ValueError, match="k must be <= k_max"):
        top_k_mask_logits(x, torch.tensor([1, 5, 2]), k_max=4)
    with pytest.raises(ValueError, match="logits must be 2-D"):
        top_k_mask_logits(x[0], 2)
    with pytest.raises(TypeError, match="probs must be a floating"):
        top_k_renorm_probs(torch.ones(2, 3, dtype=torch.int64), 2)


# --------------------------------------------------------------------------- sampling


def test_sampling_inside_top_k_and_reproducible():
    x = make("distinct32", 16, V, torch.float32, seed=21)
    ks = torch.tensor([1, 2, 3, 5, 8, 13, 0, V, 4, 4, 4, 4, 7, 7, 1, 30])
    keep = ref_keep(x, ks.tolist())
    temp = torch.linspace(0.3, 3.0, 16)
    for draw in range(20):
        seeds = torch.arange(16, dtype=torch.int64) * 1000 + draw
        a = top_k_sampling_from_logits(x, ks, temperature=temp, seeds=seeds)
        assert a.dtype == torch.int64 and a.shape == (16,)
        assert bool(keep[torch.arange(16), a].all())
        assert torch.equal(a, top_k_sampling_from_logits(x, ks, temperature=temp, seeds=seeds))
        g1 = torch.Generator().manual_seed(draw)
        g2 = torch.Generator().manual_seed(draw)
        b = top_k_sampling_from_logits(x, ks, temperature=temp, generator=g1)
        assert bool(keep[torch.arange(16), b].all())
        assert torch.equal(b, top_k_sampling_from_logits(x, ks, temperature=temp, generator=g2))


@pytest.mark.parametrize(
    "kind", ["normal", "distinct2", "nan_hotspots", "ascending", "bits_negative"]
)
def test_seeded_draw_is_gumbel_max_over_the_masked_row(kind):
    """With one k the draw scores only the k kept columns; it must be the draw that the
    definition gives over the whole masked row (ties in argmax: the lowest column)."""
    x = make(kind, 12, V, torch.float32, seed=23)
    temp = torch.linspace(0.25, 4.0, 12)
    for k in (1, 5, V // 3, V - 1):
        seeds = torch.arange(12, dtype=torch.int64) * 31 + k
        masked = top_k_mask_logits(x, k).to(torch.float32) / temp[:, None]
        want = torch.argmax(masked - torch.log(-torch.log(counter_uniform(seeds, V))), dim=1)
        got = top_k_sampling_from_logits(x, k, temperature=temp, seeds=seeds)
        assert torch.equal(got, want), (k, got, want)
        if not bool(x.isnan().any()):  # NaN logits make the probabilities NaN (documented)
            g = torch.Generator().manual_seed(k)
            b = top_k_sampling_from_logits(x, k, temperature=temp, generator=g)
            assert bool(ref_keep(x, [k] * 12)[torch.arange(12), b].all())


def test_sampling_seed_is_per_row():
    x = torch.randn(4, 100, generator=torch.Generator().manual_seed(0))
    seeds = torch.tensor([5, 6, 7, 8])
    full = top_k_sampling_from_logits(x, 50, seeds=seeds)
    alone = top_k_sampling_from_logits(x[2:3], 50, seeds=seeds[2:3])
    assert int(full[2]) == int(alone[0])
    u = counter_uniform(torch.tensor([1, 2, -(2**62)]), 1000)
    assert bool(((u > 0) & (u < 1)).all())
    assert not torch.equal(u[0], u[1]) and not torch.equal(u[0], u[2])
    # the extreme hashes too: a 1.0 would make a Gumbel score NaN and the draw leave
    # the kept set
    from deepselect.engine import _unit_interval

    ends = _unit_interval(torch.tensor([0, 1 << 31, (1 << 32) - 1], dtype=torch.int64))
    assert bool(((ends > 0) & (ends < 1)).all()), ends.tolist()


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


LOGITS8 = [0.5, 2.0, -1.0, 1.2, 1.9, 0.0, 1.0, -0.3]  # top-4: 1, 4, 3, 6


@pytest.mark.parametrize("mode", ["generator", "seeds", "tensor_k"])
def test_sampling_distribution_chi_square(mode):
    n, k, t = 40000, 4, 0.7
    logits = torch.tensor(LOGITS8)
    top = ref_ranked(LOGITS8, range(8))[:k]
    p = torch.softmax(torch.tensor([LOGITS8[i] for i in top]) / t, dim=0).double()
    x = logits.expand(n, 8).contiguous()
    if mode == "generator":
        s = top_k_sampling_from_logits(
            x, k, temperature=t, generator=torch.Generator().manual_seed(1)
        )
    elif mode == "seeds":
        s = top_k_sampling_from_logits(
            x, k, temperature=t, seeds=torch.arange(n, dtype=torch.int64)
        )
    else:
        s = top_k_sampling_from_logits(
            x,
            torch.full((n,), k),
            temperature=torch.full((n,), t),
            seeds=torch.arange(n, dtype=torch.int64) + 10**9,
            k_max=6,
        )
    counts = torch.bincount(s, minlength=8).double()
    assert counts.sum() == counts[top].sum(), "a sample fell outside the top-k"
    stat = chi_square(counts[top], p)
    assert stat < CHI2_DF3_P001, stat
    # The test has power: the same counts reject a slightly wrong distribution
    # (the temperature ignored).
    wrong = torch.softmax(torch.tensor([LOGITS8[i] for i in top]), dim=0).double()
    assert chi_square(counts[top], wrong) > CHI2_DF3_P001


def test_sampling_k_zero_keeps_whole_vocabulary():
    n = 4000
    x = torch.zeros(n, 8)
    s = top_k_sampling_from_logits(x, 0, seeds=torch.arange(n, dtype=torch.int64))
    counts = torch.bincount(s, minlength=8).double()
    # 7 degrees of freedom: critical value 24.322 at significance 0.001.
    assert chi_square(counts, torch.full((8,), 1 / 8, dtype=torch.float64)) < 24.322


def test_sampling_validation():
    x = torch.randn(2, 10)
    with pytest.raises(ValueError, match="exclusive"):
        top_k_sampling_from_logits(x, 2, generator=torch.Generator(), seeds=torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="temperature must be > 0"):
        top_k_sampling_from_logits(x, 2, temperature=0.0)
    with pytest.raises(ValueError, match="temperature must be > 0 in every row"):
        top_k_sampling_from_logits(x, 2, temperature=torch.tensor([1.0, -1.0]))
    with pytest.raises(TypeError, match="seeds must have dtype int64"):
        top_k_sampling_from_logits(x, 2, seeds=torch.tensor([1, 2], dtype=torch.int32))
    with pytest.raises(TypeError, match="generator must be"):
        top_k_sampling_from_logits(x, 2, generator=0)


# --------------------------------------------------------------------------- lightning indexer


def test_lightning_indexer_scores_and_topk():
    g = torch.Generator().manual_seed(3)
    rows, heads, d, n, k = 3, 4, 8, 70, 9
    q = torch.randn(rows, heads, d, generator=g)
    keys = torch.randn(n, d, generator=g)
    w = torch.rand(rows, heads, generator=g)
    want = torch.zeros(rows, n, dtype=torch.float64)
    for r in range(rows):
        for h in range(heads):
            want[r] += w[r, h].double() * (keys.double() @ q[r, h].double()).clamp(min=0)
    scores = lightning_indexer_scores(q, keys, w)
    assert scores.dtype == torch.float32
    torch.testing.assert_close(scores.double(), want, rtol=1e-5, atol=1e-5)
    lengths = torch.tensor([70, 5, 40])
    got = lightning_indexer_topk(q, keys, w, lengths, k, order="index")
    ref = ref_rows(scores, [0, 0, 0], lengths.tolist(), k)
    assert got.tolist() == padded([sorted(r) for r in ref], k)


def test_benchmark_indexer_split_reports_both_parts():
    r = benchmark_indexer_split(2, 4, 8, 3000, 16, device="cpu", repeats=2)
    assert (r["rows"], r["n"], r["k"], r["graph"], r["device"]) == (2, 3000, 16, False, "cpu")
    assert r["scores_ms"] > 0 and r["topk_ms"] > 0
    assert r["topk_share"] == pytest.approx(r["topk_ms"] / (r["scores_ms"] + r["topk_ms"]))
    with pytest.raises(ValueError, match="graph=True needs a CUDA"):
        benchmark_indexer_split(1, 2, 4, 100, 4, device="cpu", repeats=1, graph=True)


# ------------------------------------------- the page map fused into the Triton kernels
@pytest.mark.parametrize("page_size", [1, 4, 16])
@pytest.mark.parametrize("path", ["short", "stream"])
def test_page_map_fused_in_the_kernels(page_size, path):
    """The Triton kernels write physical slots themselves (the path CUDA tensors take):
    bit-identical to the indexer's plain-torch mapping, on both kernels, every order,
    with and without row_to_batch, fills (-1) included."""
    from deepselect.ops.triton.launch import PageMap
    from deepselect.triton_backend import LaunchConfig, run_triton

    rows, max_len, k = 5, 300, 24
    x = make("distinct32", rows, max_len, torch.float32, "cpu", seed=page_size)
    lengths = torch.tensor([300, 0, 17, 150, 299])
    starts = torch.tensor([0, 5, 3, 100, 1])
    batch = 3
    max_pages = -(-max_len // page_size) + 1
    g = torch.Generator().manual_seed(page_size)
    table = torch.randperm(batch * max_pages, generator=g).to(torch.int32).reshape(batch, -1)
    r2b = torch.tensor([2, 0, 1, 1, 2])
    config = None
    if path == "stream":  # a small block and buffer: several blocks and compactions
        config = LaunchConfig(B=64, CAP=256, B2=256 - k - 64, KP=32)
    for order in ("none", "value", "index"):
        for row_to_batch in (None, r2b):
            pt = table if row_to_batch is not None else table[r2b]
            want = indexer_topk(
                x, lengths, k, starts=starts, page_table=pt, page_size=page_size,
                row_to_batch=row_to_batch, order=order,
            )  # fmt: skip
            opt = TopkOptions(order=order, begin=starts, end=starts + lengths, fill_index=-1)
            got = torch.empty((rows, k), dtype=torch.int32)
            run_triton(
                x, k, opt, None, got, config=config,
                page=PageMap(pt.contiguous(), page_size, row_to_batch),
            )  # fmt: skip
            if order == "none":
                got, want = got.sort(dim=1).values, want.sort(dim=1).values
            assert torch.equal(got, want), (order, row_to_batch is not None)


# ------------------------------------------------------------- the contract at its edges
@pytest.mark.parametrize("mode", ["generator", "seeds", "tensor_k"])
def test_sampling_rows_without_a_distribution_take_their_top1(mode):
    """All -inf kept logits, a NaN or +inf among them, or a temperature that overflows
    logit / temperature: the row's top-1 (largest, NaN largest, lowest column on ties),
    never torch.multinomial's error."""
    ninf, inf, nan = float("-inf"), float("inf"), float("nan")
    x = torch.tensor(
        [
            [ninf] * 6,
            [0.5, 2.0, 1.0, 2.0, -1.0, 0.0],  # tiny temperature: col 1 (tie with col 3)
            [0.5, inf, 1.0, inf, -1.0, 0.0],
            [0.5, nan, 1.0, 3.0, nan, 0.0],
            [-3.0, -2.0, -5.0, -2.5, -1.0, -9.0],  # tiny temperature, all negative: col 4
        ]
    )
    temp = torch.tensor([1.0, 1e-45, 1.0, 1.0, 1e-45])
    kw = dict(temperature=temp)
    k = 3
    if mode == "generator":
        kw["generator"] = torch.Generator().manual_seed(0)
    elif mode == "seeds":
        kw["seeds"] = torch.arange(5, dtype=torch.int64)
    else:
        k = torch.full((5,), 3)
        kw["seeds"] = torch.arange(5, dtype=torch.int64)
        kw["k_max"] = 4
    got = top_k_sampling_from_logits(x, k, **kw)
    assert got.tolist() == [0, 1, 1, 1, 4]


def test_mask_logits_gradient_flows_through_kept_entries():
    x = torch.randn(3, 20, generator=torch.Generator().manual_seed(4)).requires_grad_()
    out = top_k_mask_logits(x, 5)
    assert out.grad_fn is not None
    keep = torch.isfinite(out.detach())
    torch.where(keep, out, 0.0).mul(torch.arange(20.0)).sum().backward()
    assert torch.equal(x.grad, torch.where(keep, torch.arange(20.0).expand(3, 20), 0.0))
    assert torch.equal(bits(out.detach()), bits(top_k_mask_logits(x.detach(), 5)))


@pytest.mark.parametrize("page_size", [1, 16])
def test_bad_page_ids_on_a_device_are_marked_not_wrapped(page_size):
    """The device rule, run through the fused kernels (interpreter) and the plain
    mapping: a real position on a negative page id, or on one whose slot is past int32,
    becomes -2**31 + p % page_size: never the fill -1, never a real slot."""
    from deepselect.engine import _guarded_table
    from deepselect.ops.triton.launch import PageMap
    from deepselect.triton_backend import run_triton

    rows, max_len, k = 2, 64, 64  # k = the whole row: every page is read
    x = make("distinct32", rows, max_len, torch.float32, "cpu", seed=3)
    pages = -(-max_len // page_size)
    table = torch.arange(rows * pages, dtype=torch.int32).reshape(rows, pages)
    table[0, 0] = -1
    if page_size > 1:  # (with pages of 1, every int32 id has an int32 slot)
        table[1, pages - 1] = 2**31 // page_size  # its first slot would be 2**31
    opt = TopkOptions(order="index", begin=None, end=torch.tensor([max_len, max_len]))
    got = torch.empty((rows, k), dtype=torch.int32)
    run_triton(x, k, opt, None, got, page=PageMap(_guarded_table(table, page_size), page_size))
    p = torch.arange(max_len)
    want = (table.long()[:, p // page_size] * page_size + p % page_size).to(torch.int32)
    want[0, :page_size] = -(2**31) + p[:page_size] % page_size
    if page_size > 1:
        want[1, -page_size:] = -(2**31) + p[-page_size:] % page_size
    assert torch.equal(got, want)


# ------------------------------------------------------- sampling from probs, top-k then top-p


def ref_top_p(weights: list[float], ranked: list[int], p: float) -> list[int]:
    """The smallest prefix of ``ranked`` (best first) holding ``p`` of its mass: rank j
    stays while the ranks before it hold less than p; rank 0 always; NaN mass: rank 0."""
    total = sum(weights[c] for c in ranked)
    out, before = [], 0.0
    for j, c in enumerate(ranked):
        if j == 0 or p >= 1 or before < p * total:
            out.append(c)
        before += weights[c]
    return out


def ref_kept_sets(x: torch.Tensor, ks: list[int], weights: torch.Tensor, ps: list[float]):
    """Bool [rows, V]: each row's exact top-k (Python sort), then its top-p prefix."""
    xs, ws = x.double().tolist(), weights.double().tolist()
    keep = torch.zeros(x.shape, dtype=torch.bool)
    for r, k in enumerate(ks):
        ranked = ref_ranked(xs[r], range(x.shape[1]))
        if 0 < k < x.shape[1]:
            ranked = ranked[:k]
        keep[r, ref_top_p(ws[r], ranked, ps[r])] = True
    return keep


def gumbel_ref(scores: torch.Tensor, keep: torch.Tensor, seeds: torch.Tensor) -> torch.Tensor:
    """Gumbel-max over the kept columns with the library's per-(seed, column) uniforms."""
    masked = torch.where(keep, scores, float("-inf"))
    return torch.argmax(masked - torch.log(-torch.log(counter_uniform(seeds, scores.shape[1]))), 1)


def dyadic_probs() -> torch.Tensor:
    """Rows of exact binary fractions: ties at the k-th value and at the top-p cut."""
    rows = [
        [0.25, 0.25, 0.25, 0.25, 0, 0, 0, 0],
        [0, 0.125, 0.25, 0.125, 0.125, 0.25, 0.125, 0],
        [0.5, 0.0625, 0.0625, 0.125, 0.0625, 0.0625, 0.125, 0],
        [0.125] * 8,
        [0, 0, 0, 0, 0, 0, 0, 1.0],
        [0.0625, 0.0625, 0.375, 0.0625, 0.0625, 0.125, 0.125, 0.125],
    ]
    return torch.tensor(rows, dtype=torch.float32)


TOP_P_CASES = [1.0, 0.5, 0.6, 0.25, 1e-9, 0.75]


@pytest.mark.parametrize("p", TOP_P_CASES)
def test_top_k_top_p_from_probs_matches_definition(p):
    probs = dyadic_probs()
    n = probs.shape[0]
    seeds = torch.arange(n, dtype=torch.int64) * 7 + 1
    for k in (0, 1, 2, 3, 5, 8, 9, [0, 2, 3, 8, -1, 4]):
        kl = k if isinstance(k, list) else [k] * n
        kt = torch.tensor(k) if isinstance(k, list) else k
        keep = ref_kept_sets(probs, kl, probs, [p] * n)
        want = gumbel_ref(torch.log(probs), keep, seeds)
        got = top_k_top_p_sampling_from_probs(probs, kt, p, seeds=seeds)
        assert torch.equal(got, want), (k, got, want)
        pt = torch.full((n,), p, dtype=torch.float64)
        assert torch.equal(top_k_top_p_sampling_from_probs(probs, kt, pt, seeds=seeds), want)
        b = top_k_top_p_sampling_from_probs(
            probs,
            kt,
            p,
            generator=torch.Generator().manual_seed(len(kl) + k if isinstance(k, int) else 3),
        )
        assert bool(keep[torch.arange(n), b].all())


def test_top_p_cut_ties_go_to_the_lowest_column():
    probs = torch.tensor([[0.125, 0.25, 0.125, 0.25, 0.25]])
    # p = 0.3: rank 0 is column 1, rank 1 column 3 (tie, lower first): mass before
    # rank 1 is 0.25 < 0.3, so columns 1 and 3 stay, never column 4.
    for s in range(200):
        tok = int(top_k_top_p_sampling_from_probs(probs, 0, 0.3, seeds=torch.tensor([s]))[0])
        assert tok in (1, 3)
    # tiny p keeps only rank 0, whatever the seed
    got = top_k_top_p_sampling_from_probs(probs.expand(50, 5), 0, 1e-9, seeds=torch.arange(50))
    assert bool((got == 1).all())


@pytest.mark.parametrize("kind", ["normal", "distinct2", "nan_hotspots", "all_equal", "huge"])
def test_top_k_top_p_from_logits_matches_definition(kind):
    x = make(kind, 8, V, torch.float32, seed=41)
    x[0, 3] = float("inf")  # +inf: no distribution, the row takes its top-1
    x[1, :] = float("-inf")
    x[1, 7] = 0.5  # one finite logit: always drawn
    temp = torch.linspace(0.5, 2.0, 8)
    # Cuts away from exact prefix masses (rounding would decide those; the exact
    # ties at the cut are in the dyadic test above).
    ps = [1.0, 0.93, 0.47, 1e-9, 0.31, 0.99, 0.67, 0.13]
    seeds = torch.arange(8, dtype=torch.int64) * 13 + 5
    for k in (0, 1, 5, V - 1, V, [0, 3, 10, V, -2, 1, 52, 20]):
        kl = k if isinstance(k, list) else [k] * 8
        kt = torch.tensor(k) if isinstance(k, list) else k
        scaled = x / temp[:, None]
        w = torch.softmax(torch.where(ref_keep(x, kl), scaled, float("-inf")), dim=1)
        keep = ref_kept_sets(x, kl, w, ps)
        want = gumbel_ref(scaled, keep, seeds)
        pt = torch.tensor(ps)
        got = top_k_top_p_sampling_from_logits(x, kt, pt, temperature=temp, seeds=seeds)
        assert torch.equal(got, want), (k, got, want)
        assert bool(keep[torch.arange(8), got].all())
        if not bool(x.isnan().any()):
            g = torch.Generator().manual_seed(9)
            b = top_k_top_p_sampling_from_logits(x, kt, pt, temperature=temp, generator=g)
            assert bool(keep[torch.arange(8), b].all())


@pytest.mark.parametrize("kind", ["normal", "distinct2", "all_equal", "signed_zeros"])
def test_top_k_sampling_from_probs_matches_definition(kind):
    probs = make(kind, 7, V, torch.float32, seed=43).abs()
    probs[:, 0] += 1e-3
    probs = probs / probs.sum(dim=1, keepdim=True)
    seeds = torch.arange(7, dtype=torch.int64) + 100
    for k in (0, 1, 4, V - 1, V, 60, [0, 1, 4, V, 60, -3, 9]):
        kl = k if isinstance(k, list) else [k] * 7
        kt = torch.tensor(k) if isinstance(k, list) else k
        keep = ref_keep(probs, kl)
        want = gumbel_ref(torch.log(probs), keep, seeds)
        assert torch.equal(top_k_sampling_from_probs(probs, kt, seeds=seeds), want), k
        b = top_k_sampling_from_probs(probs, kt, generator=torch.Generator().manual_seed(2))
        assert bool(keep[torch.arange(7), b].all())
    small = torch.tensor([1, 4, 9, 2, 9, 3, 5])
    want = gumbel_ref(torch.log(probs), ref_keep(probs, small.tolist()), seeds)
    assert torch.equal(top_k_sampling_from_probs(probs, small, seeds=seeds, k_max=9), want)


def test_new_samplers_reproducible_and_batch_invariant():
    x = torch.randn(6, 40, generator=torch.Generator().manual_seed(5))
    probs = torch.softmax(x, dim=1)
    seeds = torch.tensor([11, 12, 13, 14, 15, 16])
    k = torch.tensor([3, 0, 40, 7, 1, 20])
    calls = [
        lambda a, r: top_k_sampling_from_probs(torch.softmax(a, 1), k[r], **kw(r)),
        lambda a, r: top_k_top_p_sampling_from_probs(torch.softmax(a, 1), k[r], 0.8, **kw(r)),
        lambda a, r: top_k_top_p_sampling_from_logits(a, k[r], 0.8, temperature=0.7, **kw(r)),
    ]
    mode = {}

    def kw(r):
        if mode["m"] == "seeds":
            return dict(seeds=seeds[r])
        return dict(generator=torch.Generator().manual_seed(mode["g"]))

    for call in calls:
        for draw in range(5):
            mode.update(m="seeds")
            seeds += 100
            full = call(x, slice(None))
            assert torch.equal(full, call(x, slice(None)))
            for r in range(6):
                assert int(call(x[r : r + 1], slice(r, r + 1))[0]) == int(full[r])
            mode.update(m="generator", g=draw)
            assert torch.equal(call(x, slice(None)), call(x, slice(None)))
    assert probs.shape == (6, 40)


PROBS8 = torch.softmax(torch.tensor(LOGITS8, dtype=torch.float64), dim=0)


@pytest.mark.parametrize("mode", ["probs_generator", "probs_seeds", "top_p_probs", "top_p_logits"])
def test_new_samplers_distribution_chi_square(mode):
    n, k = 40000, 4
    top = ref_ranked(LOGITS8, range(8))[:k]  # 1, 4, 3, 6
    pk = PROBS8[top] / PROBS8[top].sum()
    support, want = top, pk
    x = PROBS8.to(torch.float32).expand(n, 8).contiguous()
    seeds = torch.arange(n, dtype=torch.int64) + 7 * 10**8
    if mode == "probs_generator":
        s = top_k_sampling_from_probs(x, k, generator=torch.Generator().manual_seed(3))
    elif mode == "probs_seeds":
        s = top_k_sampling_from_probs(x, torch.full((n,), k), seeds=seeds, k_max=5)
    else:
        # top-p 0.8 of the top-4 mass: ranks 1, 4, 3 (before rank 3: < 0.8), not 6.
        cum = torch.cumsum(pk, 0)
        assert float(cum[1]) < 0.8 < float(cum[2])
        support, want = top[:3], pk[:3] / pk[:3].sum()
        if mode == "top_p_probs":
            s = top_k_top_p_sampling_from_probs(x, k, 0.8, seeds=seeds)
        else:
            t = 0.7
            logits = torch.tensor(LOGITS8).expand(n, 8).contiguous()
            pt = torch.softmax(torch.tensor(LOGITS8, dtype=torch.float64)[top] / t, 0)
            assert float(pt[0] + pt[1]) < 0.8 < float(pt[:3].sum())
            want = pt[:3] / pt[:3].sum()
            s = top_k_top_p_sampling_from_logits(
                logits, k, 0.8, temperature=t, generator=torch.Generator().manual_seed(4)
            )
    counts = torch.bincount(s, minlength=8).double()
    assert counts.sum() == counts[support].sum(), "a sample fell outside the kept set"
    stat = chi_square(counts[support], want)
    crit = CHI2_DF3_P001 if len(support) == 4 else 13.816  # df 2 at 0.001
    assert stat < crit, stat
    # Power: the counts reject a slightly wrong renormalisation (the mass of the
    # dropped tokens spread evenly over the kept ones).
    dropped = 1 - float(PROBS8[support].sum()) if mode.startswith("probs") else 0.0
    base = PROBS8[support] if mode != "top_p_logits" else want
    wrong = base + (dropped if dropped else 0.1) / len(support)
    wrong = wrong / wrong.sum()
    assert chi_square(counts[support], wrong) > crit


def test_new_samplers_validation():
    probs = torch.full((2, 4), 0.25)
    x = torch.randn(2, 4)
    for f, a in (
        (top_k_sampling_from_probs, ()),
        (top_k_top_p_sampling_from_probs, (0.9,)),
    ):
        with pytest.raises(ValueError, match="probs must be >= 0"):
            f(torch.tensor([[1.5, -0.5, 0.0, 0.0]]), 2, *a)
        with pytest.raises(ValueError, match="probs must not hold NaN"):
            f(torch.tensor([[float("nan"), 1.0, 0.0, 0.0]]), 2, *a)
        with pytest.raises(ValueError, match="probs rows must sum to 1 within"):
            f(torch.tensor([[0.25, 0.25, 0.25, 0.2]]), 2, *a)
        with pytest.raises(ValueError, match="exclusive"):
            f(probs, 2, *a, generator=torch.Generator(), seeds=torch.tensor([1, 2]))
        with pytest.raises(ValueError, match="k must be >= 0"):
            f(probs, -1, *a)
        f(torch.tensor([[0.25, 0.25, 0.25, 0.25 + 5e-5]]), 2, *a)  # within tolerance
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="top_p must be in"):
            top_k_top_p_sampling_from_probs(probs, 2, bad)
        with pytest.raises(ValueError, match="top_p must be in"):
            top_k_top_p_sampling_from_logits(x, 2, torch.tensor([0.5, bad]))
    with pytest.raises(TypeError, match="top_p must be a float"):
        top_k_top_p_sampling_from_logits(x, 2, "0.5")
    with pytest.raises(ValueError, match="top_p must have shape"):
        top_k_top_p_sampling_from_logits(x, 2, torch.tensor([0.5]))
    with pytest.raises(ValueError, match="temperature must be > 0"):
        top_k_top_p_sampling_from_logits(x, 2, 0.5, temperature=0.0)
