"""The fused sampling kernels (:mod:`deepselect.ops.triton.sampling`) against the
engine's torch definitions, in Triton's interpreter on CPU tensors: the two-launch path
(the select, then a pass) and the one launch of the streaming kernel that writes the
rows itself (:func:`deepselect.triton_sampling.kept_rows`).

Each test runs an engine operation twice on the same input: once as the CPU path
defines it (torch ops around the exact select) and once routed through the GPU path
(the select, then the kernels), by making ``engine._uses_kernels`` say yes for CPU
tensors. Masks must agree bit for bit, seeded draws token for token, renormalised
probabilities within fp32 rounding of a differently ordered sum."""

from __future__ import annotations

import itertools

import pytest
import torch
import triton
import triton.language as tl
from helpers import bits

from deepselect import engine, topk_rows, triton_sampling
from deepselect.distributions import make
from deepselect.keys import SUPPORTED_DTYPES
from deepselect.ops.triton import sampling as sampling_ops
from deepselect.ops.triton import top_p as top_p_ops
from deepselect.triton_sampling import fuses, kept_rows, mask_rows, renorm_rows, stream_tile

# 0 / 0 and log(0) in the kernels, which numpy (the interpreter) warns about
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

ADVERSARIAL = ["normal", "distinct2", "nan_hotspots", "signed_zeros", "bits_negative", "huge"]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@pytest.fixture
def kernels(monkeypatch):
    """Call ``fn(*args, **kw)`` routed through the kernels."""

    def run(fn, *args, **kw):
        with monkeypatch.context() as m:
            m.setattr(engine, "_uses_kernels", lambda x: x.dtype in SUPPORTED_DTYPES)
            return fn(*args, **kw)

    return run


@pytest.fixture(params=[False, True], ids=["one-program", "split"])
def split(request, monkeypatch):
    """Top-p draws of whole rows with their first read and check by one program a row,
    or split over several (``triton_sampling._split_parts``; the launches' grids are
    recorded, so that a test sees the split ran)."""
    grids = []
    if request.param:
        monkeypatch.setattr(triton_sampling, "SPLIT_PROGRAMS_PER_SM", 16)
        real = triton_sampling._top_p_part

        class Spy:
            def __getitem__(self, grid):
                grids.append(grid)
                return real[grid]

        monkeypatch.setattr(triton_sampling, "_top_p_part", Spy())
    else:
        monkeypatch.setattr(triton_sampling, "SPLIT_MAX_ROWS", 0)
    return request.param, grids


def rows_with_edges(kind: str, rows: int, v: int, dtype, seed: int) -> torch.Tensor:
    """``rows`` rows of ``kind``, the last few rewritten: ties at the top (all equal),
    +-inf and -0.0/0.0 mixed in, and a row of NaN and -inf only."""
    x = make(kind, rows, v, dtype, seed=seed)
    x[-1] = float("-inf")
    x[-1, ::3] = float("nan")
    x[-2] = 1.5
    x[-3, ::2] = -0.0
    x[-3, 1::2] = 0.0
    x[-3, ::7] = float("inf")
    x[-3, 5::11] = float("-inf")
    return x


def per_row_k(rows: int, v: int, k_max: int) -> torch.Tensor:
    """Per-row k through every edge: <= 0, 1, k_max, >= V, and values between."""
    base = [0, -3, 1, k_max, v, v + 7, 2, k_max - 1, v - 1 if v - 1 <= k_max else 3]
    return torch.tensor([base[r % len(base)] for r in range(rows)], dtype=torch.int64)


def check_same_mask(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(bits(got), bits(want))


def test_tiles_cover_rows_longer_than_one_tile():
    """The shapes below need several tiles per row, the last one partial."""
    assert stream_tile(2, 1300, 4) < 1300 and 1300 % stream_tile(2, 1300, 4)
    assert stream_tile(2, 1300, 2) < 1300 and 1300 % stream_tile(2, 1300, 2)


@pytest.mark.parametrize("kind", ADVERSARIAL)
@pytest.mark.parametrize("dtype", DTYPES)
def test_mask_logits_bitwise(kernels, kind, dtype):
    v = 1300
    x = rows_with_edges(kind, 6, v, dtype, seed=3)
    for k in (0, 1, 7, 50, v - 1, v, v + 5):
        want = engine.top_k_mask_logits(x, k)
        check_same_mask(kernels(engine.top_k_mask_logits, x, k), want)
    kt = per_row_k(6, v, 40)
    want = engine.top_k_mask_logits(x, kt, k_max=40)
    check_same_mask(kernels(engine.top_k_mask_logits, x, kt, k_max=40), want)
    kt32 = kt.to(torch.int32)
    check_same_mask(kernels(engine.top_k_mask_logits, x, kt32), engine.top_k_mask_logits(x, kt32))


def test_mask_logits_strided_one_column_and_empty(kernels):
    x = make("distinct32", 5, 97, torch.float32, seed=4)
    wide = torch.zeros(5, 2 * 97 + 3)
    wide[:, 1 : 2 * 97 + 1 : 2] = x
    xs = wide[:, 1 : 2 * 97 + 1 : 2]
    for k in (3, torch.tensor([0, 1, 3, 97, 9])):
        check_same_mask(kernels(engine.top_k_mask_logits, xs, k), engine.top_k_mask_logits(x, k))
    one = make("normal", 4, 1, torch.float32, seed=5)
    for k in (0, 1, 2, torch.tensor([0, 1, 2, -1])):
        check_same_mask(kernels(engine.top_k_mask_logits, one, k), one)
    empty = torch.empty(0, 10)
    assert kernels(engine.top_k_mask_logits, empty, 3).shape == (0, 10)
    assert kernels(engine.top_k_mask_logits, torch.empty(3, 0), 0).shape == (3, 0)


def test_mask_k_max_below_k_keeps_k_max():
    """On a device (no value checks) rows with k_max < k < V keep only k_max."""
    x = make("normal", 3, 50, torch.float32, seed=6)
    vals, idx = topk_rows(x, 4, order="value")
    got = mask_rows(x, torch.tensor([10, 4, 49]), vals, idx)
    assert torch.isfinite(got).sum(dim=1).tolist() == [4, 4, 4]
    check_same_mask(got, engine.top_k_mask_logits(x, 4))


@pytest.mark.parametrize("kind", ["distinct2", "nan_hotspots"])
def test_mask_and_renorm_take_a_selection_in_any_order(kind):
    """Where :func:`best_first` says no, the passes rank the selection themselves:
    the selection reversed and shuffled gives the same mask and renorm, for an int k
    (the worst selected entry is the threshold) and a per-row k (the k[row]-th best),
    with ties at the threshold taken from the lowest index and NaN and signed zeros
    among the kept."""
    x = rows_with_edges(kind, 6, 1300, torch.float32, seed=31)
    p = x.abs().nan_to_num(0.0, 0.0, 0.0)
    kt = per_row_k(6, 1300, 50)
    assert not triton_sampling.best_first(50, 50) and not triton_sampling.best_first(kt, 50)
    vals, idx = topk_rows(x, 50, order="value")
    pv, pi = topk_rows(p, 50, order="value")
    perm = torch.randperm(50, generator=torch.Generator().manual_seed(1))
    for k in (50, kt):
        kw = dict(k_max=50) if k is kt else {}
        want = engine.top_k_mask_logits(x, k, **kw)
        want_p = engine.top_k_renorm_probs(p, k, **kw)
        for cols in (torch.arange(49, -1, -1), perm):
            check_same_mask(mask_rows(x, k, vals[:, cols], idx[:, cols]), want)
            got = renorm_rows(p, k, pv[:, cols], pi[:, cols])
            torch.testing.assert_close(got, want_p, rtol=1e-6, atol=0, equal_nan=True)


@pytest.mark.parametrize("kind", ["normal", "distinct2", "all_equal", "signed_zeros", "huge"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_renorm_probs(kernels, kind, dtype):
    v = 1300
    probs = make(kind, 6, v, dtype, seed=13).abs()
    probs[-1] = 0.0  # kept sum 0: NaN everywhere, as 0 / 0
    probs[-2, :9] = 0.0
    # fp32 sums in another order: within a few fp32 ulps, then rounded to the dtype
    rtol = 1e-6 if dtype == torch.float32 else 8e-3
    for k in (0, 1, 9, v, torch.tensor([0, 1, 5, v, 9, 3])):
        want = engine.top_k_renorm_probs(probs, k)
        got = kernels(engine.top_k_renorm_probs, probs, k)
        assert got.dtype == dtype
        assert torch.equal(got == 0, want == 0) and torch.equal(got.isnan(), want.isnan())
        torch.testing.assert_close(got, want, rtol=rtol, atol=0, equal_nan=True)
    assert bool(got[-1].isnan().all())


def logits_and_seeds(kind: str, rows: int, v: int, seed: int):
    x = make(kind, rows, v, torch.float32, seed=seed)
    seeds = torch.arange(rows, dtype=torch.int64) * 7919 - 2**40 + seed
    seeds[0] = -1
    seeds[-1] = 2**63 - 1
    return x, seeds


@pytest.mark.parametrize("kind", ["normal", "distinct2", "nan_hotspots", "bits_negative"])
def test_seeded_draw_from_logits_identical(kernels, kind):
    v = 300
    x, seeds = logits_and_seeds(kind, 9, v, 23)
    temp = torch.linspace(0.25, 4.0, 9)
    f = engine.top_k_sampling_from_logits
    for k in (1, 5, 100, v - 1, 0, v, per_row_k(9, v, 60)):
        k_max = 60 if isinstance(k, torch.Tensor) else None
        for t in (temp, 0.7, 1.0):
            want = f(x, k, temperature=t, seeds=seeds, k_max=k_max)
            got = kernels(f, x, k, temperature=t, seeds=seeds, k_max=k_max)
            assert torch.equal(got, want), (k, t, got, want)


def test_draws_without_seeds_or_generator_on_a_device_are_seeded(kernels):
    """On a device a draw with neither ``seeds=`` nor ``generator=`` is the seeded
    draw, its per-row seeds drawn from torch's default generator: reproducible under
    torch.manual_seed, and on the kernels like any seeded draw."""
    x, _ = logits_and_seeds("normal", 5, 300, 61)
    probs = torch.softmax(x, dim=1)
    for fn, args, kw in (
        (engine.top_k_sampling_from_logits, (x, 7), {"temperature": 0.8}),
        (engine.top_k_sampling_from_probs, (probs, per_row_k(5, 300, 20)), {"k_max": 20}),
        (engine.top_k_top_p_sampling_from_logits, (x, 7, 0.8), {}),
        (engine.top_k_top_p_sampling_from_probs, (probs, 7, 0.8), {}),
    ):
        with torch.random.fork_rng():
            torch.manual_seed(4)
            got = kernels(fn, *args, **kw)
            torch.manual_seed(4)
            seeds = torch.randint(-(2**62), 2**62, (5,))
            assert torch.equal(got, kernels(fn, *args, seeds=seeds, **kw)), fn.__name__


@pytest.mark.parametrize("kind", ["normal", "distinct2", "nan_hotspots", "huge"])
def test_top_p_draw_identical(kernels, kind):
    """The top-k, top-p draws of an int k in one program a row: the same tokens as the
    torch definitions, for logits (temperatures as floats and per row) and
    probabilities, top_p tiny (rank 0 only), in between, at 1 and per row (NaN and 0
    keep rank 0 only on a device); ties at the cut (two distinct values), NaN rows,
    rows of one value and of -inf and NaN only."""
    v = 300
    x, seeds = logits_and_seeds(kind, 9, v, 41)
    x[-1] = float("-inf")
    x[-1, ::3] = float("nan")
    x[-2] = 0.5
    probs = torch.softmax(torch.nan_to_num(x, 0.0, 60.0, -60.0), dim=1)
    probs[-3] = 0.0
    probs[-3, 7] = 1.0
    temp = torch.linspace(0.25, 4.0, 9)
    rows_p = torch.tensor([0.5, 1.0, 1e-9, 0.9, 0.99, 0.3, 0.75, 0.6, 0.95], dtype=torch.float64)
    f, g = engine.top_k_top_p_sampling_from_logits, engine.top_k_top_p_sampling_from_probs
    for k in (1, 7, 100, v - 1):
        for p in (1e-9, 0.5, 0.9, 1.0, rows_p):
            for t in (temp, 0.7):
                want = f(x, k, p, temperature=t, seeds=seeds)
                assert torch.equal(kernels(f, x, k, p, temperature=t, seeds=seeds), want), (k, p)
            want = g(probs, k, p, seeds=seeds)
            assert torch.equal(kernels(g, probs, k, p, seeds=seeds), want), (k, p)


@pytest.mark.parametrize("rounds", [triton_sampling.TOP_P_ROUNDS, 1])
@pytest.mark.parametrize(
    "kind, dtype",
    [(kind, torch.float32) for kind in ("tiny", "distinct32", "signed_zeros", "normal")]
    + [("tiny", torch.bfloat16), ("distinct32", torch.float16)],
)
def test_top_p_draw_past_the_selection(kernels, monkeypatch, kind, dtype, rounds):
    """Top-p draws whose kept ranks reach past the select's best-first entries (4 of
    them here, ``TOP_P_RANKS`` patched): a per-row k without k_max (rows of k in (4, V)
    find their k-th key in passes over the row), whole rows (k <= 0, >= V, as ints and
    per row) that are flat ("tiny", or a high temperature) or peaked, ties at the cut
    ("distinct32", +-0.0), NaN, +-inf and all-equal rows: the same tokens as the torch
    definitions, for logits and probabilities, top_p tiny to 1 and per row. Whole rows
    draw in rounds; with one round, most of them find their cut after it."""
    monkeypatch.setattr(triton_sampling, "TOP_P_RANKS", 4)
    monkeypatch.setattr(triton_sampling, "READ_BLOCK", 64)  # five steps a read
    monkeypatch.setattr(triton_sampling, "TOP_P_ROUNDS", rounds)
    v = 300
    x = rows_with_edges(kind, 9, v, dtype, seed=47)
    seeds = torch.arange(9, dtype=torch.int64) * 7919 - 2**40
    finite = torch.nan_to_num(x.float(), 0.0, 60.0, -60.0)
    probs = torch.softmax(finite * (0.02 if kind == "normal" else 1.0), dim=1).to(dtype)
    temp = torch.linspace(0.25, 8.0, 9)
    rows_p = torch.tensor([0.5, 1.0, 1e-9, 0.9, 0.99, 0.3, 0.75, 0.6, 0.95], dtype=torch.float64)
    per_row = per_row_k(9, v, 50)
    f, g = engine.top_k_top_p_sampling_from_logits, engine.top_k_top_p_sampling_from_probs
    for k, p, t in (
        (per_row, rows_p, temp), (per_row, 0.5, 0.7), (per_row, 1.0, temp),
        (0, 0.97, temp), (v + 3, rows_p, 0.7), (0, 1e-9, 0.7),
    ):  # fmt: skip
        want = f(x, k, p, temperature=t, seeds=seeds)
        got = kernels(f, x, k, p, temperature=t, seeds=seeds)
        assert torch.equal(got, want), (k, p, t, got, want)
    for k, p in ((per_row, rows_p), (per_row, 0.97), (0, 0.5), (v + 3, 1.0)):
        want = g(probs, k, p, seeds=seeds)
        assert torch.equal(kernels(g, probs, k, p, seeds=seeds), want), (k, p)


@pytest.mark.parametrize(
    "kind, split",
    [pytest.param(kind, False, id=kind) for kind in ("tiny", "distinct32", "normal")]
    + [pytest.param(kind, True, id=f"{kind}-split") for kind in ("tiny", "normal")],
    indirect=["split"],
)
def test_whole_rows_draw_in_rounds(kernels, monkeypatch, kind, split):
    """Whole rows past the selection (``TOP_P_RANKS`` patched to 4) whose top_p is at
    least 0.05 draw within the rounds, without the cut's descent (patched to fail
    here): the same tokens as the torch definitions, flat and peaked rows, ties
    ("distinct32"), logits at several temperatures and probabilities."""
    monkeypatch.setattr(triton_sampling, "TOP_P_RANKS", 4)
    monkeypatch.setattr(triton_sampling, "READ_BLOCK", 64)  # five steps a read

    def no_descent(*args, **kwargs):
        raise AssertionError("a whole row's draw took the cut's descent")

    monkeypatch.setattr(top_p_ops, "_descend", no_descent)
    rows, v = 16, 300
    gen = torch.Generator().manual_seed(61)
    x = make(kind, rows, v, torch.float32, seed=67)
    seeds = torch.randint(-(2**62), 2**62, (rows,), generator=gen)
    rows_p = torch.rand(rows, generator=gen, dtype=torch.float64) * 0.95 + 0.05
    temp = torch.linspace(0.5, 16.0, rows)
    probs = torch.softmax(x * 0.05, dim=1)
    f, g = engine.top_k_top_p_sampling_from_logits, engine.top_k_top_p_sampling_from_probs
    for k, p in ((0, rows_p), (v + 3, 0.5), (torch.tensor([0, v] * (rows // 2)), 0.9)):
        want = f(x, k, p, temperature=temp, seeds=seeds)
        assert torch.equal(kernels(f, x, k, p, temperature=temp, seeds=seeds), want), (k, p)
        want = g(probs, k, p, seeds=seeds)
        assert torch.equal(kernels(g, probs, k, p, seeds=seeds), want), (k, p)
    assert bool(split[1]) == split[0]  # the split ran where asked


def test_probabilities_in_parts_select_only_the_rows_they_leave(kernels, monkeypatch, split):
    """Top-p draws of whole rows of probabilities read in parts: the parts run before
    the selection. With an int k (every row whole) nothing is selected: each row's
    top-1, from the parts, stands for the selection. With a per-row k, a row the parts
    draw gets an empty window there, so the selection leaves it; the rest are selected
    whole. The same tokens as the torch definition either way, and a row the parts draw
    draws what it draws with top_p 1 (its candidate). Rows with a NaN, +inf or negative
    entry (unchecked on a device) are never left out, and draw as when the selection
    comes first. In one program a row, the selection comes first, over whole rows."""
    monkeypatch.setattr(triton_sampling, "TOP_P_RANKS", 4)
    monkeypatch.setattr(triton_sampling, "READ_BLOCK", 32)  # two steps a part of 64
    rows, v = 12, 300
    probs = torch.softmax(make("tiny", rows, v, torch.float32, seed=89), dim=1)
    probs[7] = 1.0 / v  # ties at the top, top_p 1e-9: the lowest column alone stays
    gen = torch.Generator().manual_seed(97)
    seeds = torch.randint(-(2**62), 2**62, (rows,), generator=gen)
    top_p = torch.tensor([0.99, 1e-9] * (rows // 2), dtype=torch.float64)
    k_rows = torch.tensor([0, v, 3, 0, 7, v + 1] * (rows // 6))  # whole rows and not
    ends = []
    real = engine.topk_rows

    def spy(x, m, **kw):
        ends.append(kw.get("end"))
        return real(x, m, **kw)

    monkeypatch.setattr(engine, "topk_rows", spy)
    g = engine.top_k_top_p_sampling_from_probs
    got = kernels(g, probs, 0, top_p, seeds=seeds)
    selected = list(ends)  # the kernels' selections
    assert torch.equal(got, g(probs, 0, top_p, seeds=seeds))
    if not split[0]:
        assert selected == [None]  # one, over whole rows
        return
    assert selected == []
    ends.clear()
    got = kernels(g, probs, k_rows, top_p, seeds=seeds)
    (end,) = ends  # the kernels' one selection
    assert torch.equal(got, g(probs, k_rows, top_p, seeds=seeds))
    left = end == 0
    whole = (k_rows <= 0) | (k_rows >= v)
    assert set(end.tolist()) <= {0, v} and bool(left.any()) and not bool((left & ~whole).any())
    assert torch.equal(got[left], g(probs, 0, 1.0, seeds=seeds)[left])
    probs[-1, 17] = float("nan")
    probs[-2, 40] = float("inf")
    probs[-3, 5] = -probs[-3, 5]
    vals, idx = topk_rows(probs, 4, order="value")
    for k, p in itertools.product((0, k_rows), (top_p, 0.99, 1.0)):
        ends.clear()
        first = triton_sampling.top_p_draw(
            probs, k, None, None, seeds, p, from_probs=True,
            select=(4, lambda end: spy(probs, 4, order="value", end=end)),
        )  # fmt: skip
        want = triton_sampling.top_p_draw(probs, k, vals, idx, seeds, p, from_probs=True)
        assert torch.equal(first, want), (k, p)
        if isinstance(k, int):
            assert ends == []
        else:
            assert not bool((ends[0][-3:] == 0).any()), ends
    assert bool(split[1])


def candidates_needed(vals, scores, weights, seeds, top_p) -> list[int]:
    """Per row, the candidates a whole row's top-p draw checks before one stays, as its
    rounds find them in the torch definition's terms: the best Gumbel score over the
    pool (first the row, then the ranks before the last candidate, ranked by ``vals``,
    ties to the lowest column) stays where the ``weights`` before it are below
    ``top_p`` of the row's."""
    v = vals.shape[1]
    cols = torch.arange(v)
    gumbel = scores - torch.log(-torch.log(engine._uniform_at(seeds, cols[None, :])))
    need = []
    for r in range(vals.shape[0]):
        w = weights[r].double()
        pool = torch.ones(v, dtype=torch.bool)
        for n in range(1, v + 1):
            c = int(torch.where(pool, gumbel[r], float("-inf")).argmax())  # the first best
            ahead = (vals[r] > vals[r, c]) | ((vals[r] == vals[r, c]) & (cols < c))
            if float(w[ahead].sum()) < float(top_p[r]) * float(w.sum()):
                need.append(n)
                break
            pool = ahead
    return need


@pytest.mark.parametrize("split", [True], indirect=True, ids=["split"])
@pytest.mark.parametrize("from_probs", [False, True], ids=["logits", "probs"])
def test_parts_draw_rows_whose_first_candidates_go(kernels, monkeypatch, split, from_probs):
    """Whole rows read in parts whose first candidates go (top_p 0.3-0.8, flat rows past
    the selection, ``TOP_P_RANKS`` patched to 4): the parts' check rounds draw every row
    that needs at most ``PART_ROUNDS`` candidates, so the draw's own rounds and the
    cut's descent (patched to fail) never run; the same tokens as the torch definition.
    With one round fewer, a row goes past them."""
    monkeypatch.setattr(triton_sampling, "TOP_P_RANKS", 4)
    monkeypatch.setattr(triton_sampling, "READ_BLOCK", 64)  # five steps a read
    monkeypatch.setattr(triton_sampling, "PART_BLOCK", 32)  # a part's steps smaller

    def fail(*args, **kwargs):
        raise AssertionError("a row went past the parts' rounds")

    monkeypatch.setattr(top_p_ops, "_draw_by_rounds", fail)
    monkeypatch.setattr(top_p_ops, "_descend", fail)
    rows, v = 12, 300
    x = make("normal", rows, v, torch.float32, seed=101)
    vals = torch.softmax(x * 0.05, dim=1) if from_probs else x
    scores = torch.log(vals) if from_probs else x
    weights = vals if from_probs else torch.exp(x - x.amax(dim=1, keepdim=True))
    rounds = triton_sampling.PART_ROUNDS
    gen = torch.Generator().manual_seed(103)
    for _ in range(200):  # a batch whose rows need 1, 2, ..., PART_ROUNDS candidates
        seeds = torch.randint(-(2**62), 2**62, (rows,), generator=gen)
        top_p = torch.rand(rows, generator=gen, dtype=torch.float64) * 0.5 + 0.3
        need = candidates_needed(vals, scores, weights, seeds, top_p)
        if max(need) <= rounds and set(range(1, rounds + 1)) <= set(need):
            break
    else:
        pytest.fail("no batch of rows needing 1 to PART_ROUNDS candidates")
    f = engine.top_k_top_p_sampling_from_logits
    if from_probs:
        f = engine.top_k_top_p_sampling_from_probs
    got = kernels(f, vals, 0, top_p, seeds=seeds)
    assert torch.equal(got, f(vals, 0, top_p, seeds=seeds)), need
    assert split[1]  # the parts ran
    monkeypatch.setattr(triton_sampling, "PART_ROUNDS", rounds - 1)
    with pytest.raises(Exception, match="past the parts' rounds"):
        kernels(f, vals, 0, top_p, seeds=seeds)


def test_whole_rows_with_a_nan_score_find_their_cut(monkeypatch, split):
    """Probabilities below zero (unchecked on a device; their log, the score, is NaN)
    in flat rows kept whole: the rounds stop at the NaN and the cut's descent decides,
    whether the ranks that stay hold it (then the top-1) or not: the same tokens as
    without rounds (``TOP_P_ROUNDS`` 0), where the descent always decides."""
    monkeypatch.setattr(triton_sampling, "TOP_P_RANKS", 4)
    monkeypatch.setattr(triton_sampling, "READ_BLOCK", 64)  # five steps a read
    rows, v = 6, 300
    probs = torch.softmax(make("tiny", rows, v, torch.float32, seed=71), dim=1)
    probs[:, 5] = -probs[:, 5]  # ranked last: in the set only where top_p reaches it
    vals, idx = topk_rows(probs, 4, order="value")
    seeds = torch.arange(rows, dtype=torch.int64) * 104729
    draws = {}
    for rounds in (triton_sampling.TOP_P_ROUNDS, 0):
        monkeypatch.setattr(triton_sampling, "TOP_P_ROUNDS", rounds)
        draws[rounds] = [
            triton_sampling.top_p_draw(probs, 0, vals, idx, seeds, p, from_probs=True)
            for p in (0.5, 0.999999, torch.tensor([0.3, 1.0, 0.7, 0.9999999, 0.9, 0.99999]))
        ]
    for got, want in zip(*draws.values(), strict=True):
        assert torch.equal(got, want)
    # top_p 1 keeps the NaN, so the top-1; below 1 the last rank (the NaN's) goes
    assert int(draws[0][2][1]) == int(idx[1, 0])
    assert not bool((draws[0][0] == idx[:, 0]).any())


@triton.jit
def _every_log_step(score, col, key, live, best, best_col, nan, top, FROM_PROBS: tl.constexpr,
                    PRECISE_LOG: tl.constexpr):  # fmt: skip
    """``sampling._filtered_step`` without its filter: the logs of every entry."""
    best, best_col, nan = sampling_ops._scored_step(
        score, col, key, live, best, best_col, nan, FROM_PROBS, PRECISE_LOG
    )  # fmt: skip
    return best, best_col, nan, tl.maximum(top, tl.max(best, axis=0))


@pytest.mark.parametrize(
    "scale, split",
    [(1.0, False), (3000.0, False), pytest.param(1.0, True, id="1.0-split")],
    indirect=["split"],
)
def test_whole_row_draws_where_every_gumbel_score_is_close(kernels, monkeypatch, scale, split):
    """Rows whose logits are ``c`` minus each column's own Gumbel noise (the draw's
    ``-log(-log u)`` for the row's seed), plus a little: every entry's Gumbel score is
    within ~1e-4 of every other's, so a read that skips the logs of entries that cannot
    beat its best so far (``_filtered_step``) must keep nearly all of them and still
    find the one best, at scores near 0 and near ``scale``. Whole rows past the
    selection (``TOP_P_RANKS`` patched to 4), top_p 1 (one read draws), 0.5 (the
    rounds), and 0.9 without rounds (the cut's descent, then the draw): the same
    tokens as with the logs of every entry, and for logits as the torch definition.
    (The interpreter's log of a probability may differ from torch's by an ulp, which
    decides near-ties; on a device both are CUDA's logf.)"""
    monkeypatch.setattr(triton_sampling, "TOP_P_RANKS", 4)
    monkeypatch.setattr(triton_sampling, "READ_BLOCK", 32)  # ten steps a read
    rows, v = 8, 300
    gen = torch.Generator().manual_seed(83)
    seeds = torch.randint(-(2**62), 2**62, (rows,), generator=gen)
    noise = -torch.log(-torch.log(engine._uniform_at(seeds, torch.arange(v)[None, :])))
    x = scale - noise + torch.rand(rows, v, generator=gen) * 1e-4
    # the best among the entries whose u is nearest 1 (-log u is then 1 - u, the
    # tightest case of the test), by less than the test's slack
    x = x + torch.where(noise > 4.0, 3e-3, 0.0)
    probs = torch.softmax(x - scale, dim=1)
    f, g = engine.top_k_top_p_sampling_from_logits, engine.top_k_top_p_sampling_from_probs
    cases = ((triton_sampling.TOP_P_ROUNDS, 1.0), (triton_sampling.TOP_P_ROUNDS, 0.5), (0, 0.9))
    for rounds, p in cases:
        monkeypatch.setattr(triton_sampling, "TOP_P_ROUNDS", rounds)
        got = kernels(f, x, 0, p, temperature=1.0, seeds=seeds)
        assert torch.equal(got, f(x, 0, p, temperature=1.0, seeds=seeds)), p
        got_probs = kernels(g, probs, 0, p, seeds=seeds)
        with monkeypatch.context() as m:
            for module in (sampling_ops, top_p_ops):
                m.setattr(module, "_filtered_step", _every_log_step)
            assert torch.equal(kernels(f, x, 0, p, temperature=1.0, seeds=seeds), got)
            assert torch.equal(kernels(g, probs, 0, p, seeds=seeds), got_probs), p


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_top_p_draws_stay_in_the_kept_ties(kernels, monkeypatch, dtype):
    """Rows of one value, past the select (``TOP_P_RANKS`` patched to 4): the top-k set
    is the first ``kk`` columns and rank j stays while ``j < top_p * kk``, so every
    draw is below ``ceil(top_p * kk)`` (top_p 0.5: rank ``kk / 2`` of an even ``kk``
    goes, its weight before exactly the cut); and the same tokens as the torch
    definitions.
    Many rows, so a tie counted one too many at either cut (the k-th key's or the
    weights') is drawn somewhere."""
    monkeypatch.setattr(triton_sampling, "TOP_P_RANKS", 4)
    rows, v = 64, 32
    gen = torch.Generator().manual_seed(53)
    k = torch.randint(5, v + 8, (rows,), generator=gen)
    k[::7] = 0
    x = torch.full((rows, v), -2.5, dtype=dtype)
    seeds = torch.randint(-(2**62), 2**62, (rows,), generator=gen)
    kk = torch.where((k <= 0) | (k >= v), v, k)
    for top_p in (torch.rand(rows, generator=gen, dtype=torch.float64) * 0.9 + 0.05, 0.5, 1.0):
        bound = torch.ceil(torch.as_tensor(top_p, dtype=torch.float64) * kk).clamp(min=1)
        for fn, t in ((engine.top_k_top_p_sampling_from_logits, 0.9), (None, None)):
            if fn is None:
                fn, args = engine.top_k_top_p_sampling_from_probs, (x.float().softmax(1).to(dtype),)
                kw = {}
            else:
                args, kw = (x,), {"temperature": t}
            got = kernels(fn, *args, k, top_p, seeds=seeds, **kw)
            assert bool((got < bound).all()), (got, bound)
            assert torch.equal(got, fn(*args, k, top_p, seeds=seeds, **kw))


def test_top_p_draw_of_a_bad_top_p_keeps_the_top_1():
    """A device does not check top_p: a row's top_p <= 0 or NaN keeps rank 0 alone
    (the top-1), also for flat rows kept whole whose set reaches past the selection;
    top_p > 1 keeps the whole top-k set (here the row: some draw is not the top-1)."""
    rows, v = 6, 300
    x = make("tiny", rows, v, torch.float32, seed=59)
    vals, idx = topk_rows(x, 4, order="value")
    seeds = torch.arange(rows, dtype=torch.int64) * 131
    top_p = torch.tensor([0.0, -1.0, float("nan"), 0.0, float("nan"), -0.5], dtype=torch.float64)
    for k in (0, torch.tensor([0, v, 50, -1, 7, v + 1])):
        got = triton_sampling.top_p_draw(x, k, vals, idx, seeds, top_p, 3.0)
        assert torch.equal(got, idx[:, 0].long()), (k, got)
        wide = triton_sampling.top_p_draw(x, k, vals, idx, seeds, top_p.abs() + 2, 3.0)
        assert not torch.equal(wide, idx[:, 0].long())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_seeded_draw_16_bit(kernels, dtype):
    x, seeds = logits_and_seeds("distinct32", 6, 200, 29)
    x = x.to(dtype)
    f = engine.top_k_sampling_from_logits
    for k in (3, 0, per_row_k(6, 200, 20)):
        k_max = 20 if isinstance(k, torch.Tensor) else None
        want = f(x, k, temperature=0.5, seeds=seeds, k_max=k_max)
        assert torch.equal(kernels(f, x, k, temperature=0.5, seeds=seeds, k_max=k_max), want)


def test_seeded_draw_from_probs_identical(kernels):
    v = 300
    x, seeds = logits_and_seeds("distinct32", 9, v, 31)
    probs = torch.softmax(x, dim=1)
    probs[1, :50] = 0.0
    probs[1] /= probs[1].sum()
    f = engine.top_k_sampling_from_probs
    for k in (1, 4, 64, 0, v, per_row_k(9, v, 60)):
        k_max = 60 if isinstance(k, torch.Tensor) else None
        want = f(probs, k, seeds=seeds, k_max=k_max)
        assert torch.equal(kernels(f, probs, k, seeds=seeds, k_max=k_max), want), k


def test_draw_rows_without_a_distribution_take_their_top1(kernels):
    ninf, inf, nan = float("-inf"), float("inf"), float("nan")
    x = torch.tensor(
        [
            [ninf] * 6,
            [0.5, 2.0, 1.0, 2.0, -1.0, 0.0],
            [0.5, inf, 1.0, inf, -1.0, 0.0],
            [0.5, nan, 1.0, 3.0, nan, 0.0],
            [-3.0, -2.0, -5.0, -2.5, -1.0, -9.0],
        ]
    )
    temp = torch.tensor([1.0, 1e-45, 1.0, 1.0, 1e-45])
    seeds = torch.arange(5, dtype=torch.int64)
    f = engine.top_k_sampling_from_logits
    for k, k_max in ((3, None), (torch.full((5,), 3), 4), (0, None)):
        want = f(x, k, temperature=temp, seeds=seeds, k_max=k_max)
        got = kernels(f, x, k, temperature=temp, seeds=seeds, k_max=k_max)
        assert torch.equal(got, want), (k, got, want)
    assert got[:3].tolist() == [0, 1, 1]  # k = 0: the whole row's top-1


def test_draw_batch_invariant_and_inside_the_kept_set(kernels):
    v = 500
    x, seeds = logits_and_seeds("distinct2", 12, v, 37)
    k = per_row_k(12, v, 30)
    f = engine.top_k_sampling_from_logits
    full = kernels(f, x, k, seeds=seeds, k_max=30)
    keep = torch.isfinite(engine.top_k_mask_logits(x, k, k_max=30))
    assert bool(keep[torch.arange(12), full].all())
    for r in (0, 5, 11):
        alone = kernels(f, x[r : r + 1], k[r : r + 1], seeds=seeds[r : r + 1], k_max=30)
        assert int(alone[0]) == int(full[r])


def test_generator_draws_keep_the_torch_path(kernels):
    """``generator=`` stays torch.multinomial: the same stream gives the same tokens."""
    x, _ = logits_and_seeds("normal", 4, 100, 41)
    f = engine.top_k_sampling_from_logits
    a = f(x, 5, generator=torch.Generator().manual_seed(1))
    b = kernels(f, x, 5, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)


# ------------------------------------------------ the one launch (kept_rows)


def small_stream(k: int):
    """A streaming launch of blocks of 128 and a buffer of 512+ slots (as
    helpers.small_config): rows of 1,500 take a dozen blocks and several
    compactions."""
    from helpers import small_config

    return small_config(k)


FUSED_KINDS = ["distinct2", "nan_hotspots", "bits_negative"]


@pytest.mark.parametrize("kind", FUSED_KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_kept_rows_mask_bitwise(kind, dtype):
    """Ties at the k-th value (two distinct values), NaN of both signs, +-inf and
    subnormals, rows of one value and of NaN and -inf only; per-row k through <= 0,
    1, k_max and >= V; a grid of fewer programs than rows."""
    v = 1500
    x = rows_with_edges(kind, 6, v, dtype, seed=17)
    got = kept_rows(x, 37, 37, renorm=False, config=small_stream(37), grid=4)
    check_same_mask(got, engine.top_k_mask_logits(x, 37))
    kt = per_row_k(8, v, 40)[[0, 1, 2, 4, 3, 7]]  # <= 0, 1, >= V and k_max, k_max - 1
    got = kept_rows(x, kt, 40, renorm=False, config=small_stream(40), grid=4)
    check_same_mask(got, engine.top_k_mask_logits(x, kt, k_max=40))


@pytest.mark.parametrize("dtype", DTYPES)
def test_kept_rows_renorm(dtype):
    """Kept sums of 0 (NaN everywhere), of negative values (unchecked on a device:
    -0.0 where not kept), ties everywhere."""
    v = 1500
    probs = make("distinct32", 6, v, dtype, seed=19).abs()
    probs[-1] = 0.0  # kept sum 0: NaN everywhere, as 0 / 0
    probs[-2] = 0.25  # ties everywhere
    probs[2] = -probs[2]
    probs[1, 100:400] = 0.0
    rtol = 1e-6 if dtype == torch.float32 else 8e-3
    kt = torch.tensor([5, 0, 40, v, 1, 40], dtype=torch.int32)
    for k, m in ((9, 9), (kt, 40)):
        want = engine.top_k_renorm_probs(probs, k, k_max=m if k is kt else None)
        got = kept_rows(probs, k, m, renorm=True, config=small_stream(m), grid=4)
        assert got.dtype == dtype
        assert torch.equal(got == 0, want == 0) and torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got.signbit() & ~got.isnan(), want.signbit() & ~want.isnan())
        torch.testing.assert_close(got, want, rtol=rtol, atol=0, equal_nan=True)
    assert bool(got[-1].isnan().all()) and bool(got[2][got[2] == 0].signbit().all())


def test_kept_rows_k_max_below_k_keeps_k_max():
    """As the two-launch path: on a device rows with k_max < k < V keep only k_max."""
    x = make("normal", 3, 500, torch.float32, seed=6)
    got = kept_rows(x, torch.tensor([10, 4, 499]), 4, renorm=False, config=small_stream(4))
    assert torch.isfinite(got).sum(dim=1).tolist() == [4, 4, 4]
    check_same_mask(got, engine.top_k_mask_logits(x, 4))


def test_engine_takes_the_one_launch_where_it_fuses(kernels, monkeypatch):
    """The engine's mask and renorm through :func:`kept_rows` (here at the launch the
    shapes give) wherever :func:`fuses` says so, and the torch definitions' results."""
    taken = []

    def spy(*args, **kw):
        taken.append(kw["renorm"])
        return kept_rows(*args, **kw)

    monkeypatch.setattr(triton_sampling, "fuses", lambda x, m: m > 0)
    monkeypatch.setattr(triton_sampling, "kept_rows", spy)
    x = rows_with_edges("normal", 5, 700, torch.float32, seed=29)
    kt = torch.tensor([3, 0, 700, 1, 64])
    check_same_mask(
        kernels(engine.top_k_mask_logits, x, kt, k_max=64),
        engine.top_k_mask_logits(x, kt, k_max=64),
    )
    p = x.abs().nan_to_num(0.0, 0.0, 0.0)
    got = kernels(engine.top_k_renorm_probs, p, 12)
    want = engine.top_k_renorm_probs(p, 12)  # (row 2 sums to 0: NaN)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0, equal_nan=True)
    check_same_mask(kernels(engine.top_k_mask_logits, x, 0), x)  # nothing selected
    assert taken == [False, True]


def test_fuses_where_the_select_streams():
    """From shapes only: the rows the streaming kernel selects (long rows, enough of
    them), never without a selection (m = 0), past the streaming kernel's k, on rows the
    short path holds."""
    wide = torch.empty(64, 129280, device="meta")
    assert fuses(wide, 512) and fuses(wide, 4096)
    assert not fuses(wide, 0) and not fuses(wide, 4097)
    assert not fuses(torch.empty(64, 4000, device="meta"), 50)
    assert not fuses(torch.empty(0, 129280, device="meta"), 50)


def test_a_scalar_top_p_keeps_its_53_bits(kernels):
    """A float ``top_p`` reaches the kernel in fp64: rows of probabilities 0.45, 0.45,
    0.1 (fp32) put the cut of ``top_p = 0.9`` between fp32(0.9) and 0.9 times their
    total, so that the third rank stays only at fp64. The draws match the torch
    definitions, and some of them are that rank."""
    rows = 64
    probs = torch.zeros(rows, 40)
    probs[:, :3] = torch.tensor([0.45, 0.45, 0.1])
    seeds = torch.arange(rows, dtype=torch.int64) * 104729 + 11
    g = engine.top_k_top_p_sampling_from_probs
    for k in (3, 0):
        want = g(probs, k, 0.9, seeds=seeds)
        assert bool((want == 2).any()), "the case no longer separates fp32 from fp64"
        assert torch.equal(kernels(g, probs, k, 0.9, seeds=seeds), want), k
