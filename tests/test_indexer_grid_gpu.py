"""The indexer grid's shapes on the GPU, exact against the oracle, and every dispatch
boundary the grid crosses, one case on each side, with the path each side took.

* :data:`GRID_CASES`: a fixed selection of 26 whole-row cases (fp32 and bf16; k in
  {1, 2, 2047, 2048, 2049, 4096}; N in {8K, 16K, 128K}; batch in {1, 64, 512}; each k,
  N and batch several times, not every combination) on normal, NaN-heavy, inf-heavy and
  tie-heavy rows, and :data:`WINDOW_CASES`, the ragged causal prefill and decode
  lengths through ``indexer_topk``. A heavy row holds k + k/4 + 1 NaNs (both signs) or
  +infs, so that the k-th element falls among them and the lowest index must win.
* :func:`boundaries`: the row length, rows and k where the dispatch changes path
  (``triton_short``'s short/split plan and ``ShortConfig.split_rows``, the split's
  k limit, the wide short rows' WIDE_SHORT_MIN_KP and WIDE_SHORT_SLICES, ``MAX_FAST_K``,
  ``triton_backend.stream_config``'s W32_FROM, W32_MID_BLOCKS, SHORT_SAMPLE_N and
  crowded launches), read by name from the dispatch
  modules, so a retuned constant moves its cases. Each side's expected path is
  computed from the dispatch functions, and the debug line of the call
  (``deepselect._log``) must name that plan or launch config; the table of expected
  path families per boundary is written out, so a rule that stops changing the path
  at its boundary fails. Row lengths step by 16 elements across a boundary, keeping
  the rows 16-byte aligned (the vector path) and Triton's divisibility
  specialisation on both sides.

Shapes are kept few and shared (one test function per table), since the GPU suite is
bound by compiling kernel specialisations. The selection and the boundaries' sides are
checked without a GPU too (the tests not marked ``gpu``), at 132 SMs.

    python -m pytest -p no:cacheprovider -q tests/test_indexer_grid_gpu.py -m gpu
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import pytest
import torch
from helpers import assert_same_topk

import deepselect
from deepselect.bench.indexer_grid import window_lengths
from deepselect.engine import indexer_topk
from deepselect.options import Order, TopkOptions
from deepselect.oracle import oracle_topk

gpu = pytest.mark.gpu
DEV = "cuda"
K8, K16, K128 = 8 << 10, 16 << 10, 128 << 10
F32, B16 = torch.float32, torch.bfloat16
STEP = 16  # elements between the two sides of a row-length boundary

# (dtype, batch, N, k, rows): each k with each N and batch at least once across the
# table, each dtype with each k; the rows' kind cycles through the hard ones
GRID_CASES = (
    (F32, 1, K8, 1, "normal"),
    (B16, 64, K128, 1, "nan"),
    (F32, 512, K16, 1, "ties2"),
    (F32, 512, K128, 1, "inf"),
    (B16, 1, K16, 2, "inf"),
    (F32, 64, K8, 2, "equal"),
    (B16, 512, K128, 2, "normal"),
    (F32, 1, K128, 2047, "nan"),
    (B16, 64, K16, 2047, "ties32"),
    (F32, 512, K8, 2047, "inf"),
    (B16, 1, K8, 2048, "normal"),
    (F32, 1, K16, 2048, "ties2"),
    (B16, 1, K128, 2048, "equal"),
    (F32, 64, K128, 2048, "normal"),
    (B16, 64, K8, 2048, "inf"),
    (B16, 512, K16, 2048, "nan"),
    (F32, 512, K128, 2048, "ties32"),
    (F32, 1, K16, 2049, "normal"),
    (F32, 64, K8, 2049, "equal"),
    (B16, 64, K128, 2049, "ties2"),
    (B16, 512, K8, 2049, "nan"),
    (B16, 1, K8, 4096, "normal"),
    (B16, 1, K128, 4096, "ties32"),
    (F32, 64, K16, 4096, "nan"),
    (F32, 512, K8, 4096, "normal"),
    (B16, 512, K16, 4096, "inf"),
)
# (dtype, window, rows, N, k, rows' kind): lengths from the grid's own window_lengths
WINDOW_CASES = (
    (B16, "prefill", 512, K8, 2048, "normal"),
    (F32, "prefill", 64, K128, 2049, "ties32"),
    (B16, "decode", 64, K128, 2048, "nan"),
    (F32, "decode", 64, K16, 2047, "inf"),
)
KINDS = ("normal", "nan", "inf", "ties2", "ties32", "equal")


def scores(kind: str, rows: int, n: int, k: int, dtype, device=DEV, seed=0) -> torch.Tensor:
    """``[rows, n]`` rows of ``kind`` (:data:`KINDS`), drawn on ``device``."""
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(rows, n, generator=g, device=device)
    if kind in ("nan", "inf"):
        m = min(n, k + k // 4 + 1)  # more than k: the k-th falls among them
        extra = min(n - m, k // 4 + 1)  # -inf (inf rows) or +inf (NaN rows) beside them
        pos = torch.rand(rows, n, generator=g, device=device).topk(m + extra, dim=1).indices
        big = torch.full((rows, m), math.inf if kind == "inf" else math.nan, device=device)
        if kind == "nan":
            big[:, ::2] = big[:, ::2].neg()  # NaNs of both signs: all equal in the order
        x.scatter_(1, pos[:, :m], big)
        other = -math.inf if kind == "inf" else math.inf
        x.scatter_(1, pos[:, m:], torch.full((rows, extra), other, device=device))
    elif kind == "ties2":
        x = torch.where(x > 0, 1.0, -1.0)
    elif kind == "ties32":
        pool = torch.randn(32, generator=g, device=device) * 10
        x = pool[torch.randint(0, 32, (rows, n), generator=g, device=device)]
    elif kind == "equal":
        x.fill_(1.5)
    elif kind != "normal":
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    return x.to(dtype)


def _case_id(case) -> str:
    *head, kind = case
    parts = [str(p).removeprefix("torch.") for p in head]
    return "-".join(parts + [kind])


@gpu
@pytest.mark.parametrize("case", GRID_CASES, ids=_case_id)
def test_grid_shapes_exact(case):
    dtype, rows, n, k, kind = case
    x = scores(kind, rows, n, k, dtype, seed=rows + k)
    got = deepselect.topk_rows(x, k)
    want = oracle_topk(x, k, TopkOptions())
    assert_same_topk(got, want, Order.NONE, msg=_case_id(case))


@gpu
@pytest.mark.parametrize("case", WINDOW_CASES, ids=_case_id)
def test_grid_windows_exact(case):
    dtype, window, rows, n, k, kind = case
    x = scores(kind, rows, n, k, dtype, seed=rows + k)
    lengths = window_lengths(window, rows, n, seed=k).to(DEV)
    got = indexer_topk(x, lengths, k)
    _, want = oracle_topk(x, k, TopkOptions(end=lengths))
    assert got.dtype == torch.int32
    assert_same_topk((None, got), (None, want), Order.NONE, msg=_case_id(case))


def test_grid_selection_covers_every_k_n_batch_and_kind():
    """Each k with each N and with each batch, each dtype with each k, every kind of
    row; about 30 cases in all."""
    ks, ns, batches = {1, 2, 2047, 2048, 2049, 4096}, {K8, K16, K128}, {1, 64, 512}
    assert {(k, n) for _, _, n, k, _ in GRID_CASES} == {(k, n) for k in ks for n in ns}
    assert {(k, b) for _, b, _, k, _ in GRID_CASES} == {(k, b) for k in ks for b in batches}
    assert {(d, k) for d, _, _, k, _ in GRID_CASES} == {(d, k) for d in (F32, B16) for k in ks}
    assert {c[-1] for c in GRID_CASES + WINDOW_CASES} == set(KINDS)
    assert {(w, d) for d, w, *_ in WINDOW_CASES} == {
        (w, d) for w in ("prefill", "decode") for d in (F32, B16)
    }
    assert 26 <= len(GRID_CASES) + len(WINDOW_CASES) <= 34
    assert len(set(GRID_CASES)) == len(GRID_CASES)


def test_grid_cases_of_wide_short_rows():
    """The grid's bf16 rows of 16K at k = 2048 by 512 take the bracket kernel, as 4096 do
    (and rows of 8K by 4096); at k = 1024 one program a row holds the row at 16 warps;
    its fp32 and 128K rows, and k = 4096, take neither."""
    from deepselect import triton_short as ts

    held = {
        c[:4] for c in GRID_CASES
        if expected_path(c[0], c[1], c[2], c[3], "none", 132)[0] in ("short", "bracket")
        and c[2] > ts.ShortConfig().nmax
    }  # fmt: skip
    assert held == {(B16, 512, K16, 2048)}
    for rows, n in ((512, K16), (4096, K16), (4096, K16 // 2)):
        assert expected_path(B16, rows, n, 2048, "none", 132)[0] == "bracket", (rows, n)
    assert expected_path(B16, 512, K16, 2048, "value", 132)[0] == "short"
    for rows in (512, 4096):
        _, plan = expected_path(B16, rows, K16, 1024, "none", 132)
        assert str(plan) == "short nmax=16384 warps=16", rows


def test_heavy_rows_put_the_kth_among_their_specials():
    x = scores("nan", 3, 4000, 100, torch.float32, device="cpu")
    nan = torch.isnan(x)
    assert bool((nan.sum(dim=1) == 126).all())
    assert bool((torch.signbit(x) & nan).any()) and bool((~torch.signbit(x) & nan).any())
    y = scores("inf", 3, 4000, 100, torch.bfloat16, device="cpu")
    assert bool(((y == math.inf).sum(dim=1) == 126).all())
    assert bool(((y == -math.inf).sum(dim=1) == 26).all())
    assert scores("ties2", 2, 100, 4, F32, device="cpu").unique().numel() == 2


# ------------------------------------------------------------------------ boundaries


@dataclass(frozen=True)
class Boundary:
    """A dispatch rule and one call shape ``(rows, n, k)`` on each side of it.

    ``feature``: ``"path"`` (which code path: :func:`expected_path`'s labels) or a
    ``LaunchConfig`` field of the streaming kernel's launch; ``expect``: the values
    the feature takes on each side (for ``"path"``, sets of labels: the short path's
    split may run as radix passes where the GPU can launch them cooperatively)."""

    name: str
    dtype: torch.dtype
    sides: tuple[tuple[int, int, int], tuple[int, int, int]]
    feature: str
    expect: tuple
    order: str = "none"


SPLIT = frozenset({"split", "passes"})


def boundaries(sm: int) -> list[Boundary]:
    """Every boundary for a GPU of ``sm`` SMs, from the dispatch modules' constants."""
    from deepselect import triton_backend as tb
    from deepselect import triton_short as ts
    from deepselect.ops.triton.launch import CROWDED_PER_SM

    cfg = ts.ShortConfig()
    b16, b32 = tb.launch_config(B16, 512).B, tb.launch_config(F32, 512).B
    two = tb.launch_config(B16, 512).programs_per_sm
    mid_n = ts.MID_BYTES // 2  # bf16 rows of MID_BYTES
    # rows from which a row of each size class streams rather than splits
    r_mid, r_long, r_far = (math.ceil(f * sm) for f in cfg.split_rows)
    k_split = cfg.nmax // 4  # a split's segment is at least 4 k long, at most nmax
    many = two * sm  # rows that two programs per SM hold in one wave
    stream, short = frozenset({"stream"}), frozenset({"short"})
    bracket = frozenset({"bracket"})
    crowd = ts.CROWDED * sm  # rows of one slice that crowd the SMs
    # many rows of 16-bit keys held whole by one program (more rows than SMs: no
    # radix passes either side), from kp = WIDE_SHORT_MIN_KP, up to WIDE_SHORT_SLICES
    wide_rows, wide_n, wide_k = max(512, sm + 1), ts.WIDE_SHORT_SLICES * cfg.nmax, 1024
    # rows of 128K 16-bit keys whose segments the passes hold at PASS_MAX_TILES a program
    pass_n = 8 * cfg.nmax
    r_pass = sm // -(-(pass_n // cfg.nmax) // ts.PASS_MAX_TILES)
    passes = frozenset({"passes"}) if ts.COOPERATIVE else stream
    # rows of W32_FROM blocks that stream at k = 2048: more than the passes hold
    r_w32 = max(r_far + 1, sm // -(-(tb.W32_FROM * b16 // cfg.nmax) // ts.PASS_MAX_TILES) + 1)
    return [
        Boundary("short nmax", B16, ((1, cfg.nmax, 512), (1, cfg.nmax + STEP, 512)), "path",
                 (short, SPLIT)),
        Boundary("split_rows, rows", B16, ((r_mid - 1, mid_n, 512), (r_mid, mid_n, 512)),
                 "path", (SPLIT, stream)),
        Boundary("MID_BYTES", B16, ((r_mid - 1, mid_n, 512), (r_mid - 1, mid_n + STEP, 512)),
                 "path", (SPLIT, stream)),
        Boundary("LONG_BYTES", F32, ((r_long - 1, ts.LONG_BYTES // 4, 512),
                                     (r_long - 1, ts.LONG_BYTES // 4 + STEP, 512)),
                 "path", (SPLIT, stream)),
        Boundary("split k", B16, ((1, K128, k_split), (1, K128, k_split + 1)), "path",
                 (frozenset({"split"}), stream), order="value"),
        Boundary("MAX_FAST_K", B16, ((many, mid_n, tb.MAX_FAST_K),
                                     (many, mid_n, tb.MAX_FAST_K + 1)),
                 "path", (stream, frozenset({"oracle"}))),
        Boundary("W32_FROM", B16, ((r_w32, tb.W32_FROM * b16 - STEP, 2048),
                                   (r_w32, tb.W32_FROM * b16, 2048)),
                 "w32", (False, True)),
        Boundary("W32_MID_BLOCKS", F32, ((r_far + 1, tb.W32_MID_BLOCKS * b32 - STEP, 1024),
                                         (r_far + 1, tb.W32_MID_BLOCKS * b32, 1024)),
                 "w32", (False, True)),
        Boundary("PASS_OVER_STREAM_KP", F32, ((r_long, mid_n, ts.PASS_OVER_STREAM_KP // 2),
                                              (r_long, mid_n, ts.PASS_OVER_STREAM_KP // 2 + 1)),
                 "path", (stream, frozenset({"passes"}) if ts.COOPERATIVE else stream)),
        Boundary("PASS_MAX_TILES", B16, ((r_pass, pass_n, 2048), (r_pass + 1, pass_n, 2048)),
                 "path", (passes, stream)),
        Boundary("SHORT_SAMPLE_N", B16, ((r_long, tb.SHORT_SAMPLE_N, tb.SHORT_SAMPLE_MAX_K),
                                         (r_long, tb.SHORT_SAMPLE_N + STEP,
                                          tb.SHORT_SAMPLE_MAX_K)),
                 "sample_keys", (4096, 0)),
        # (rows of 32K: at 16K and k > 512 the rows are wide short rows)
        Boundary("CROWDED_MAX_K", B16, ((many + 1, 2 * mid_n, tb.CROWDED_MAX_K),
                                        (many + 1, 2 * mid_n, tb.CROWDED_MAX_K + 1)),
                 "programs_per_sm", (CROWDED_PER_SM, two)),
        Boundary("crowded rows", B16, ((many, mid_n, 512), (many + 1, mid_n, 512)),
                 "programs_per_sm", (two, CROWDED_PER_SM)),
        Boundary("WIDE_SHORT_MIN_KP", B16, ((wide_rows, wide_n, ts.WIDE_SHORT_MIN_KP // 2),
                                            (wide_rows, wide_n, ts.WIDE_SHORT_MIN_KP // 2 + 1)),
                 "path", (stream, short)),
        Boundary("WIDE_SHORT_SLICES", B16, ((wide_rows, wide_n, wide_k),
                                            (wide_rows, wide_n + STEP, wide_k)),
                 "path", (short, stream)),
        # the bracket kernel: wide short rows from kp = BRACKET_KP, and rows of one
        # slice from half a slice where they crowd the SMs
        Boundary("BRACKET_KP", B16, ((wide_rows, wide_n, ts.BRACKET_KP // 2),
                                     (wide_rows, wide_n, ts.BRACKET_KP // 2 + 1)),
                 "path", (short, bracket)),
        Boundary("bracket crowded rows", B16, ((crowd - 1, cfg.nmax, ts.BRACKET_KP),
                                               (crowd, cfg.nmax, ts.BRACKET_KP)),
                 "path", (short, bracket)),
        Boundary("bracket crowded fp32 rows", F32, ((crowd - 1, cfg.nmax, ts.BRACKET_KP),
                                                    (crowd, cfg.nmax, ts.BRACKET_KP)),
                 "path", (short, bracket)),
        # 32-bit rows of up to two slices at kp = BRACKET_KP too (more rows than SMs: no
        # radix passes), longer ones stream
        Boundary("bracket fp32 rows of two slices", F32, ((wide_rows, wide_n, ts.BRACKET_KP),
                                                          (wide_rows, wide_n + STEP,
                                                           ts.BRACKET_KP)),
                 "path", (bracket, stream)),
    ]  # fmt: skip


def expected_path(dtype, rows: int, n: int, k: int, order: str, sm: int):
    """``(label, plan or launch config)`` that the dispatch picks for the shape, in
    ``run_triton``'s order: the short path's plan (``short``, ``split``, or ``passes``
    where an unsorted split runs as radix passes), else ``oracle`` past MAX_FAST_K,
    else the streaming kernel's ``stream_config``."""
    from deepselect import triton_backend as tb
    from deepselect import triton_short
    from deepselect.triton_short import ShortConfig

    bits = torch.empty((), dtype=dtype).element_size() * 8
    # the plan a GPU build makes (the interpreter never takes the radix passes)
    plan = triton_short._plan(rows, n, k, sm, ShortConfig(), False, bits, order == "value")
    if plan is not None:
        if plan.kind in ("short", "bracket"):
            return plan.kind, plan
        return ("passes" if plan.passes and order != "value" else "split"), plan
    if k > tb.MAX_FAST_K:
        return "oracle", None
    return "stream", tb.stream_config(dtype, k, rows, n, sm)


def _feature(b: Boundary, side: int, sm: int):
    rows, n, k = b.sides[side]
    label, what = expected_path(b.dtype, rows, n, k, b.order, sm)
    if b.feature == "path":
        return label, what
    assert label == "stream", f"{b.name}: side {side} takes {label}, not the stream kernel"
    return getattr(what, b.feature), what


def _check_sides(b: Boundary, sm: int) -> list:
    """Each side's expected path or config as the test table says; returns them."""
    got = []
    for side in (0, 1):
        value, what = _feature(b, side, sm)
        want = b.expect[side]
        ok = value in want if isinstance(want, frozenset) else value == want
        assert ok, f"{b.name} at {b.sides[side]}: {b.feature} is {value}, want {want}"
        got.append((value, what))
    return got


@pytest.mark.parametrize("sm", [132, 114, 78])
def test_boundaries_change_path_at_their_constants(sm):
    """Without a GPU: at H100 SXM / PCIe and a smaller count of SMs, each boundary's
    two sides take the paths the table says (the GPU test then runs them)."""
    seen = boundaries(sm)
    assert len({b.name for b in seen}) == len(seen) == 19
    for b in seen:
        assert all(r >= 1 and n >= 1 for r, n, _ in b.sides), b.name
        _check_sides(b, sm)


def _launch_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "deepselect"]


@gpu
@pytest.mark.parametrize("side", [0, 1], ids=["below", "above"])
@pytest.mark.parametrize("name", [b.name for b in boundaries(132)])
def test_boundary_side_takes_its_path_exactly(name, side, caplog):
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    (b,) = [b for b in boundaries(sm) if b.name == name]
    _check_sides(b, sm)  # on this GPU's SM count, the sides are as the table says
    label, what = expected_path(b.dtype, *b.sides[side], b.order, sm)
    rows, n, k = b.sides[side]
    x = scores("normal", rows, n, k, b.dtype, seed=side)
    caplog.set_level(logging.DEBUG, logger="deepselect")
    got = deepselect.topk_rows(x, k, order=b.order)
    lines = _launch_lines(caplog)
    assert len(lines) == 1, lines
    line = lines[0]
    if label in ("short", "split", "passes", "bracket"):
        assert line.startswith("triton-short ") and line.endswith(f"plan={what}"), line
    elif label == "oracle":
        assert line.startswith("oracle "), line
    else:
        assert line.startswith("triton-stream ") and f"config={what!r}" in line, line
    want = oracle_topk(x, k, TopkOptions(order=Order.parse(b.order)))
    assert_same_topk(got, want, b.order, msg=f"{name} side {side}")
