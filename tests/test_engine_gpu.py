"""Engine operations on a CUDA device, inside CUDA graphs, against plain torch.

Each graph is captured once; between replays the per-row tensors it reads (lengths,
starts, per-row k, seeds) and the scores are changed *in place*, and every replay is
compared exactly with a plain-torch reference computed from the new values. This is
the engine's use: one captured decode step, replayed with new sequence lengths.

The reference ranks a row by (NaN first, value descending, column ascending) with two
stable sorts (:func:`ranked`); it shares no code with the library and is itself
checked against a Python sort on the CPU (the one test here that needs no GPU).

Shapes stay modest (rows <= 64, rows up to 300K columns): seconds of device time plus
kernel compilation. ``DEEPSELECT_TEST_DEVICE=cpu`` runs the bodies eagerly on the CPU
(graphs become plain calls) to check the test logic without a GPU.
"""

from __future__ import annotations

import math
import os

import pytest
import torch
from helpers import warm_then_capture

from deepselect.engine import (
    counter_uniform,
    indexer_topk,
    top_k_mask_logits,
    top_k_renorm_probs,
    top_k_sampling_from_logits,
    top_k_sampling_from_probs,
)

DEV = os.environ.get("DEEPSELECT_TEST_DEVICE", "cuda")
gpu = pytest.mark.gpu  # every test but the reference's own check
FLOATS = [torch.float32, torch.bfloat16]


# --------------------------------------------------------------------------- reference


def ranked(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """int64 ``[rows, n]``: each row's columns best first — valid before invalid, then
    NaN first, then value descending (-0.0 == +0.0), then column ascending.

    Two stable sorts on float64 (exact for fp32/bf16) make the lexicographic order:
    by value first, then by group. NaN and -0.0 are rewritten before sorting, so the
    result does not depend on how a sort orders NaNs or signed zeros.
    """
    y = x.to(torch.float64)
    nan = torch.isnan(y)
    y = torch.where(nan, torch.zeros_like(y), y) + 0.0  # + 0.0 turns -0.0 into +0.0
    group = torch.where(valid, (~nan).to(torch.int64), torch.full_like(y, 2, dtype=torch.int64))
    by_value = torch.sort(y, dim=1, descending=True, stable=True).indices
    g = torch.gather(group, 1, by_value)
    by_group = torch.sort(g, dim=1, stable=True).indices
    return torch.gather(by_value, 1, by_group)


def window_mask(n: int, starts: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    col = torch.arange(n, device=starts.device)[None, :]
    s = starts.to(torch.int64)[:, None]
    return (col >= s) & (col < s + lengths.to(torch.int64)[:, None])


def ref_positions(scores, starts, lengths, k: int) -> torch.Tensor:
    """int64 ``[rows, k]``: the best k columns of each window, -1 past its length."""
    rows, n = scores.shape
    order = ranked(scores, window_mask(n, starts, lengths))
    kk = min(k, n)
    top = order[:, :kk]
    slot = torch.arange(kk, device=scores.device)[None, :]
    top = torch.where(slot < lengths.to(torch.int64)[:, None], top, torch.full_like(top, -1))
    if kk < k:
        top = torch.cat([top, torch.full((rows, k - kk), -1, device=top.device)], dim=1)
    return top


def as_sets(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.int64).sort(dim=1).values


def test_reference_matches_a_python_sort():
    """The reference itself, against sorted() with an explicit key (CPU, no GPU)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-2, 3, (5, 40), generator=g).to(torch.float32)
    x[torch.rand(5, 40, generator=g) < 0.1] = float("nan")
    x[torch.rand(5, 40, generator=g) < 0.1] = -0.0
    x[torch.rand(5, 40, generator=g) < 0.05] = float("-inf")
    starts = torch.tensor([0, 3, 10, 39, 5])
    lengths = torch.tensor([40, 30, 0, 1, 17])
    got = ref_positions(x, starts, lengths, 25)
    xs = x.tolist()
    for r in range(5):
        cols = range(int(starts[r]), int(starts[r] + lengths[r]))
        key = lambda c, r=r: (0 if math.isnan(xs[r][c]) else 1, -xs[r][c], c)
        want = sorted(cols, key=key)[:25]
        assert got[r].tolist() == want + [-1] * (25 - len(want)), r


# --------------------------------------------------------------------------- helpers


def captured(fn):
    """``fn`` captured in a CUDA graph (after two warm-up runs on a side stream, so
    kernels compile outside the capture); returns ``(replay, result)``. On the CPU
    (``DEEPSELECT_TEST_DEVICE=cpu``) replay simply calls ``fn`` again."""
    if DEV == "cpu":
        box = [fn()]

        def again():
            box[0] = fn()

        return again, box
    graph, result = warm_then_capture(fn)

    def replay():
        graph.replay()
        torch.cuda.synchronize()

    return replay, [result]


def scores_like(rows: int, n: int, dtype, seed: int) -> torch.Tensor:
    """Scores with many ties (few distinct values), some NaN, -0.0 and infinities."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    x = torch.randint(-40, 41, (rows, n), generator=g, device=DEV).to(torch.float32) / 8
    u = torch.rand(rows, n, generator=g, device=DEV)
    x[u < 0.002] = float("nan")
    x[(u >= 0.002) & (u < 0.004)] = float("inf")
    x[(u >= 0.004) & (u < 0.006)] = float("-inf")
    x[(u >= 0.006) & (u < 0.05)] = -0.0
    return x.to(dtype)


def new_windows(rows: int, max_len: int, k: int, seed: int):
    """Random windows with the edge rows every engine meets: the full row, a row
    shorter than k, an empty row and one of exactly k."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, max_len + 1, (rows,), generator=g)
    lengths[0] = max_len
    lengths[1] = min(k - 1, max_len)
    lengths[2] = 0
    lengths[3] = min(k, max_len)
    starts = (torch.rand(rows, generator=g) * (max_len - lengths + 1)).floor().to(torch.int64)
    starts[0] = 0
    return starts.to(DEV), lengths.to(DEV)


# --------------------------------------------------------------------------- indexer

INDEXER_SHAPES = [(64, 5003, 64), (8, 300_000, 2048)]  # (rows, max_len, k)


@gpu
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("rows, max_len, k", INDEXER_SHAPES)
def test_indexer_ragged_graph_replays(rows, max_len, k, dtype):
    scores = scores_like(rows, max_len, dtype, seed=1)
    starts = torch.zeros(rows, dtype=torch.int32, device=DEV)
    lengths = torch.full((rows,), max_len, dtype=torch.int32, device=DEV)
    g = torch.Generator().manual_seed(rows)
    offsets = torch.randint(0, 1 << 24, (rows,), generator=g, dtype=torch.int32).to(DEV)
    out = torch.empty(rows, k, dtype=torch.int32, device=DEV)
    replay, res = captured(
        lambda: indexer_topk(scores, lengths, k, starts=starts, ragged_offsets=offsets, out=out)
    )
    for step in range(4):
        if step:  # new lengths, starts and scores, in place: the graph reads them
            s, n = new_windows(rows, max_len, k, seed=10 * step + rows)
            starts.copy_(s)
            lengths.copy_(n)
            scores.copy_(scores_like(rows, max_len, dtype, seed=step + 1))
        replay()
        if DEV != "cpu":
            assert res[0] is out
        want = ref_positions(scores, starts, lengths, k)
        want = torch.where(want >= 0, want + offsets.to(torch.int64)[:, None], want)
        got = res[0]
        assert got.dtype == torch.int32 and got.shape == (rows, k)
        assert torch.equal(as_sets(got), as_sets(want)), f"step {step}"


@gpu
@pytest.mark.parametrize("page_size", [1, 16, 64])
def test_indexer_paged_graph_replays(page_size):
    batch, rows, max_len, k = 5, 24, 65_536, 512
    max_pages = max_len // page_size
    g = torch.Generator().manual_seed(page_size)
    # each sequence owns a random set of physical pages of a shared pool
    pool = torch.randperm(batch * max_pages + 7, generator=g)[: batch * max_pages]
    page_table = pool.reshape(batch, max_pages).to(torch.int32).to(DEV)
    row_to_batch = torch.randint(0, batch, (rows,), generator=g, dtype=torch.int32).to(DEV)
    scores = scores_like(rows, max_len, torch.bfloat16, seed=page_size)
    starts = torch.zeros(rows, dtype=torch.int64, device=DEV)
    lengths = torch.full((rows,), max_len, dtype=torch.int64, device=DEV)
    kw = dict(page_table=page_table, page_size=page_size, row_to_batch=row_to_batch)
    replay, res = captured(
        lambda: indexer_topk(scores, lengths, k, starts=starts, order="index", **kw)
    )
    for step in range(3):
        if step:
            s, n = new_windows(rows, max_len, k, seed=page_size + step)
            starts.copy_(s)
            lengths.copy_(n)
            row_to_batch.copy_(torch.randint(0, batch, (rows,), generator=g).to(DEV))
        replay()
        pos = ref_positions(scores, starts, lengths, k)
        pos = torch.where(pos >= 0, pos, torch.full_like(pos, max_len))  # fills sort last
        pos = pos.sort(dim=1).values  # order="index": ascending position
        b = row_to_batch.to(torch.int64)[:, None]
        p = pos.clamp(max=max_len - 1)
        phys = page_table.to(torch.int64)[b, p // page_size] * page_size + p % page_size
        want = torch.where(pos < max_len, phys, torch.full_like(phys, -1))
        assert torch.equal(res[0].to(torch.int64), want), f"page_size {page_size} step {step}"


# --------------------------------------------------------------------------- sampler

V = 129_280  # DeepSeek's vocabulary
K_MAX = 1024


def per_row_k(rows: int, seed: int) -> torch.Tensor:
    """Per-row k with the conventions' edges: 0 and >= V keep the row, 1, k_max."""
    g = torch.Generator().manual_seed(seed)
    k = torch.randint(1, K_MAX + 1, (rows,), generator=g)
    k[:5] = torch.tensor([0, 1, K_MAX, V, V + 3])
    return k[torch.randperm(rows, generator=g)].to(torch.int32).to(DEV)


def ref_keep(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Boolean ``[rows, V]``: the first k[r] of the reference ranking (all for k <= 0
    or k >= V)."""
    rows, v = x.shape
    order = ranked(x, torch.ones_like(x, dtype=torch.bool))
    kk = k.to(torch.int64)[:, None]
    take = torch.arange(v, device=x.device)[None, :] < kk
    keep = torch.zeros_like(take).scatter_(1, order, take)
    return keep | (kk <= 0) | (kk >= v)


def finite_logits(rows: int, dtype, seed: int) -> torch.Tensor:
    """Sampling logits: finite (a softmax needs them so), with many exact ties."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    return (torch.randint(-40, 41, (rows, V), generator=g, device=DEV) / 8).to(dtype)


def int_bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({2: torch.int16, 4: torch.int32}[t.element_size()])


@gpu
@pytest.mark.parametrize("dtype", FLOATS)
def test_mask_logits_per_row_k_graph_replays(dtype):
    rows = 48
    logits = scores_like(rows, V, dtype, seed=3)
    k = per_row_k(rows, seed=0)
    replay, res = captured(lambda: top_k_mask_logits(logits, k, k_max=K_MAX))
    for step in range(3):
        if step:
            k.copy_(per_row_k(rows, seed=step))
            logits.copy_(scores_like(rows, V, dtype, seed=3 + step))
        replay()
        keep = ref_keep(logits, k)
        ninf = torch.tensor(float("-inf"), dtype=dtype, device=DEV).reshape(1)
        want = torch.where(keep, int_bits(logits), int_bits(ninf))
        got = res[0]
        assert got.dtype == dtype and got.shape == logits.shape
        bad = (int_bits(got) != want).any(dim=1)
        assert not bool(bad.any()), f"step {step}: rows {bad.nonzero().flatten().tolist()}"


@gpu
def test_renorm_probs_per_row_k_graph_replays():
    rows = 32
    g = torch.Generator(device=DEV).manual_seed(4)

    def fresh():  # non-negative, with many exact ties and zeros
        p = torch.randint(0, 50, (rows, V), generator=g, device=DEV).to(torch.float32)
        return p / p.sum(dim=1, keepdim=True)

    probs = fresh()
    k = per_row_k(rows, seed=5)
    replay, res = captured(lambda: top_k_renorm_probs(probs, k, k_max=K_MAX))
    for step in range(3):
        if step:
            k.copy_(per_row_k(rows, seed=5 + step))
            probs.copy_(fresh())
        replay()
        keep = ref_keep(probs, k)
        got = res[0]
        assert torch.equal(got > 0, keep & (probs > 0)), f"step {step}: kept set"
        kept = torch.where(keep, probs, torch.zeros_like(probs))
        want = kept / kept.sum(dim=1, keepdim=True)
        assert torch.allclose(got, want, rtol=1e-5, atol=0), f"step {step}: values"
        assert torch.allclose(got.sum(dim=1), torch.ones(rows, device=DEV), atol=1e-4)


@gpu
def test_counter_uniform_is_the_same_on_cpu_and_gpu():
    seeds = torch.tensor([0, 1, -1, 2**62 + 12345, -(2**40), 987654321], dtype=torch.int64)
    here = counter_uniform(seeds.to(DEV), 4099).cpu()
    assert torch.equal(here, counter_uniform(seeds, 4099))


@gpu
@pytest.mark.parametrize("dtype", FLOATS)
def test_seeded_sampling_is_reproducible_and_batch_invariant(dtype):
    rows = 64
    logits = finite_logits(rows, dtype, seed=6)
    k = per_row_k(rows, seed=7)
    g = torch.Generator().manual_seed(8)
    seeds = torch.randint(-(2**62), 2**62, (rows,), generator=g).to(DEV)
    temp = (torch.rand(rows, generator=g) + 0.25).to(DEV)
    kw = dict(temperature=temp, seeds=seeds, k_max=K_MAX)
    a = top_k_sampling_from_logits(logits, k, **kw)
    b = top_k_sampling_from_logits(logits, k, **kw)
    assert a.dtype == torch.int64 and torch.equal(a, b)
    keep = ref_keep(logits, k)
    assert bool(keep.gather(1, a[:, None]).all()), "a token outside its row's top-k"
    # a row's draw depends on its own seed, logits, k and temperature only
    for r in (0, 17, rows - 1):
        one = top_k_sampling_from_logits(
            logits[r : r + 1],
            k[r : r + 1],
            temperature=temp[r : r + 1],
            seeds=seeds[r : r + 1],
            k_max=K_MAX,
        )
        assert int(one[0]) == int(a[r]), f"row {r}"
    # the same draws from a captured graph, and new ones after new seeds in place
    replay, res = captured(lambda: top_k_sampling_from_logits(logits, k, **kw))
    replay()
    assert torch.equal(res[0], a)
    seeds.add_(1)
    replay()
    assert torch.equal(res[0], top_k_sampling_from_logits(logits, k, **kw))


@gpu
def test_generator_sampling_is_reproducible():
    logits = finite_logits(16, torch.float32, seed=9)
    draws = []
    for _ in range(2):
        gen = torch.Generator(device=DEV).manual_seed(1234)
        draws.append(top_k_sampling_from_logits(logits, 512, temperature=0.7, generator=gen))
    assert torch.equal(draws[0], draws[1])
    keep = ref_keep(logits, torch.full((16,), 512, device=DEV))
    assert bool(keep.gather(1, draws[0][:, None]).all())
    if DEV == "cpu":  # (there: torch.multinomial)
        return
    # neither seeds nor a generator: the seeded draw, seeds from the default generator
    with torch.random.fork_rng(devices=[torch.cuda.current_device()]):
        torch.manual_seed(99)
        plain = top_k_sampling_from_logits(logits, 512, temperature=0.7)
        torch.manual_seed(99)
        seeds = torch.randint(-(2**62), 2**62, (16,), device=DEV)
        assert torch.equal(plain, top_k_sampling_from_logits(logits, 512, temperature=0.7,
                                                             seeds=seeds))  # fmt: skip


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_fused_ops_match_the_cpu_definitions(dtype):
    """The device's sampling kernels against the engine's torch definitions on the CPU:
    masks bit for bit, seeded draws token for token (the device's logf against the
    CPU's log: a draw could differ only where two Gumbel scores lie within an ulp),
    renormalised probabilities within fp32 rounding of a differently ordered sum."""
    rows = 40
    logits = scores_like(rows, V, dtype, seed=11)
    finite = finite_logits(rows, dtype, seed=12)
    probs = torch.softmax(finite.float(), dim=1).to(dtype)
    g = torch.Generator().manual_seed(13)
    seeds = torch.randint(-(2**62), 2**62, (rows,), generator=g)
    temp = torch.rand(rows, generator=g) + 0.25
    on = {"seeds": seeds.to(DEV), "temperature": temp.to(DEV)}
    for k, k_max in ((50, None), (1024, None), (0, None), (V, None), (per_row_k(rows, 14), K_MAX)):
        kc = k.cpu() if isinstance(k, torch.Tensor) else k
        got = top_k_mask_logits(logits, k, k_max=k_max).cpu()
        want = top_k_mask_logits(logits.cpu(), kc, k_max=k_max)
        assert torch.equal(int_bits(got), int_bits(want)), k
        got = top_k_renorm_probs(probs, k, k_max=k_max).cpu()
        want = top_k_renorm_probs(probs.cpu(), kc, k_max=k_max)
        torch.testing.assert_close(got, want, rtol=1e-5 if dtype == torch.float32 else 8e-3, atol=0)
        for t in (on["temperature"], 0.7):
            tc = t.cpu() if isinstance(t, torch.Tensor) else t
            got = top_k_sampling_from_logits(
                logits, k, temperature=t, seeds=on["seeds"], k_max=k_max
            )
            want = top_k_sampling_from_logits(
                logits.cpu(), kc, temperature=tc, seeds=seeds, k_max=k_max
            )
            assert torch.equal(got.cpu(), want), (k, t)
        got = top_k_sampling_from_probs(probs, k, seeds=on["seeds"], k_max=k_max)
        want = top_k_sampling_from_probs(probs.cpu(), kc, seeds=seeds, k_max=k_max)
        assert torch.equal(got.cpu(), want), k


# the top-p draws' k: an int (its selection holds the ranks), whole rows (0), a per-row
# k with and without k_max; one test each, so that parallel workers share the CPU's
# definitions, most of each test's time
TOP_P_KS = ("1", "50", "512", "4096", "0", "per-row", "per-row-k_max")


@gpu
@pytest.mark.parametrize("case", TOP_P_KS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_top_p_draws_match_the_cpu(dtype, case):
    """The top-k, top-p draws on the kernel (one program a row over the select's
    best-first entries, passes over the row where the ranks that stay reach past them)
    against the CPU definitions token for token: an int k, whole rows (k = 0) and a
    per-row k with and without k_max (rows of k in (TOP_P_RANKS, V) and whole rows
    among them); logits with ties, NaN and infinities (top-p sets of thousands at
    a high temperature), finite logits' probabilities, top_p tiny, in between, 1 and
    per row, temperatures as a float and per row; and graph replays."""
    from deepselect.engine import top_k_top_p_sampling_from_logits, top_k_top_p_sampling_from_probs

    rows = 40
    logits = scores_like(rows, V, dtype, seed=43)
    probs = torch.softmax(finite_logits(rows, torch.float32, seed=44), dim=1).to(dtype)
    seeds = torch.arange(rows, dtype=torch.int64, device=DEV) * 7919 + 5
    g = torch.Generator(device=DEV).manual_seed(45)
    rows_p = torch.rand(rows, generator=g, device=DEV, dtype=torch.float64).clamp(1e-6, 1)
    temp = torch.rand(rows, generator=g, device=DEV) * 4 + 0.1
    per_row = torch.tensor([0, 3, 600, V, 2000, -1, 1, 50], device=DEV).repeat(rows // 8)
    f, h = top_k_top_p_sampling_from_logits, top_k_top_p_sampling_from_probs
    cpu = lambda t: t.cpu() if isinstance(t, torch.Tensor) else t  # noqa: E731
    if case.isdigit():
        k, k_max = int(case), None
    elif case == "per-row":
        k, k_max = per_row, None
    else:  # per-row-k_max
        k, k_max = per_row.clamp(max=600), 600
    for p in (1e-9, 0.5, 0.9, 1.0, rows_p):
        for t in (0.7, temp):
            got = f(logits, k, p, temperature=t, seeds=seeds, k_max=k_max).cpu()
            want = f(logits.cpu(), cpu(k), cpu(p), temperature=cpu(t),
                     seeds=seeds.cpu(), k_max=k_max)  # fmt: skip
            assert torch.equal(got, want), (k, p, t)
        got = h(probs, k, p, seeds=seeds, k_max=k_max).cpu()
        want = h(probs.cpu(), cpu(k), cpu(p), seeds=seeds.cpu(), k_max=k_max)
        assert torch.equal(got, want), (k, p)
    if case != "per-row":
        return
    replay, res = captured(lambda: f(logits, per_row, rows_p, temperature=temp, seeds=seeds))
    for step in range(3):
        if step:
            seeds.add_(rows)
            rows_p.copy_(torch.rand(rows, generator=g, device=DEV, dtype=torch.float64))
        replay()
        assert torch.equal(res[0], f(logits, per_row, rows_p, temperature=temp, seeds=seeds))


@gpu
def test_top_p_draws_with_a_per_row_k_graph_replays():
    """A per-row k ranks whole rows (a row may keep itself whole): topk_rows past
    MAX_FAST_K, the sort-based path, which must not copy from the host. Captured, the
    draws equal the eager calls' and stay in each row's top-k."""
    from deepselect import topk_rows
    from deepselect.engine import top_k_top_p_sampling_from_logits, top_k_top_p_sampling_from_probs
    from deepselect.triton_backend import MAX_FAST_K

    rows, v = 6, MAX_FAST_K + 900
    logits = finite_logits(rows, torch.float32, seed=31)[:, :v].contiguous()
    probs = torch.softmax(logits, dim=1)
    k = torch.tensor([0, 1, 50, v, 7, 300], device=DEV)
    seeds = torch.arange(rows, dtype=torch.int64, device=DEV)

    def calls():
        return (
            top_k_top_p_sampling_from_logits(logits, k, 0.9, seeds=seeds, k_max=300),
            top_k_top_p_sampling_from_probs(probs, k, 0.9, seeds=seeds, k_max=300),
            topk_rows(logits, MAX_FAST_K + 1, order="value", fill_value=float("nan")),
        )

    replay, res = captured(calls)
    for step in range(3):
        if step:
            logits.copy_(finite_logits(rows, torch.float32, seed=31 + step)[:, :v])
            probs.copy_(torch.softmax(logits, dim=1))
            seeds.add_(rows)
        replay()
        a, b, (vals, idx) = res[0]
        want = calls()
        assert torch.equal(a, want[0]) and torch.equal(b, want[1])
        assert torch.equal(idx, want[2][1]) and torch.equal(int_bits(vals), int_bits(want[2][0]))
        for r, kr in enumerate(k.tolist()):
            if 0 < kr < v:  # inside the row's top-k
                top = set(topk_rows(logits[r : r + 1], kr)[1][0].tolist())
                assert int(a[r]) in top and int(b[r]) in top, (r, kr)


@gpu
def test_fused_ops_with_an_int_k_graph_replays():
    rows = 24
    logits = finite_logits(rows, torch.float32, seed=15)
    seeds = torch.arange(rows, dtype=torch.int64, device=DEV)
    replay, res = captured(
        lambda: (
            top_k_mask_logits(logits, 512),
            top_k_sampling_from_logits(logits, 512, seeds=seeds),
        )
    )
    for step in range(3):
        if step:
            logits.copy_(finite_logits(rows, torch.float32, seed=15 + step))
            seeds.add_(rows)
        replay()
        mask, tok = res[0]
        assert torch.equal(int_bits(mask), int_bits(top_k_mask_logits(logits, 512)))
        assert torch.equal(tok, top_k_sampling_from_logits(logits, 512, seeds=seeds))
        assert bool(torch.isfinite(mask.gather(1, tok[:, None])).all())


@gpu
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("rows", [300, 600])
def test_one_launch_and_two_launch_paths_match_the_cpu(rows, dtype):
    """The mask and renorm written by the streaming kernel from its selection (the
    one launch) and by the select and a pass, at launches of two and of three
    programs per SM, against the CPU definitions."""
    from deepselect import engine, triton_sampling

    logits = scores_like(rows, V, dtype, seed=21)
    probs = torch.softmax(finite_logits(rows, torch.float32, seed=22), dim=1).to(dtype)
    probs[0] = 0.0  # kept sum 0: NaN
    k_rows = per_row_k(rows, seed=23)
    want = {}
    for k, k_max in ((50, None), (512, None), (k_rows, K_MAX)):
        kc = k.cpu() if isinstance(k, torch.Tensor) else k
        want[k_max, kc if k_max is None else 0] = (
            int_bits(top_k_mask_logits(logits.cpu(), kc, k_max=k_max)),
            top_k_renorm_probs(probs.cpu(), kc, k_max=k_max),
        )
    if DEV != "cpu":
        assert triton_sampling.fuses(logits, 512) and triton_sampling.fuses(logits, K_MAX)
    rtol = 1e-5 if dtype == torch.float32 else 8e-3
    for fused in (True, False):
        for k, k_max in ((50, None), (512, None), (k_rows.to(DEV), K_MAX)):
            mask, renorm = want[k_max, k if k_max is None else 0]
            got = engine._kept_rows(logits, k, k_max, renorm=False, one_launch=fused).cpu()
            assert torch.equal(int_bits(got), mask), (fused, k_max)
            got = engine._kept_rows(probs, k, k_max, renorm=True, one_launch=fused).cpu()
            assert torch.equal(got.isnan(), renorm.isnan()), (fused, k_max)
            torch.testing.assert_close(got, renorm, rtol=rtol, atol=0, equal_nan=True)
