"""Seeded fuzz of ``topk_rows`` on the GPU against the oracle, bit for bit.

Each case draws a shape next to one of the dispatch boundaries (row length, k,
batch, window), a dtype, an order, the options and an adversarial distribution, runs
``deepselect.topk_rows`` on the device and compares it with ``oracle_topk`` on the
CPU. The boundaries are read by name from the dispatch modules at run time
(``triton_backend``: MAX_FAST_K, SHORT_SAMPLE_N, ...; ``triton_short``: the short
path's ``nmax``, segment sizes, ...), so a retuned constant moves the fuzz with it.

A case is a pure function of ``(seed, case number)``: a failure names both and
the command that replays it. Environment:

* ``DEEPSELECT_FUZZ_CASES`` — how many cases (default 150); the first N cases of
  any run are the same, so ``DEEPSELECT_FUZZ_CASES=100`` is "the first 100";
* ``DEEPSELECT_FUZZ_SEED`` — the base seed (default: from the package's source,
  :func:`default_seed`, so each change runs other cases and one tree always the
  same: almost every case compiles kernels of its own, and a run of the GPU suite
  has time for about 150 of them);
* ``DEEPSELECT_FUZZ_START`` — the first case number to run (default 0).

GPU suite::

    python -m pytest -p no:cacheprovider -q tests/test_fuzz_gpu.py -m gpu

memcheck of the first 200 cases::

    DEEPSELECT_FUZZ_CASES=200 compute-sanitizer --tool memcheck \\
        python -m pytest -p no:cacheprovider -q tests/test_fuzz_gpu.py -m gpu

Without CUDA the same generator and comparison run on CPU tensors (the CPU backend)
for a few small cases, so CI checks the fuzz itself.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

import pytest
import torch
from helpers import assert_same_topk

import deepselect
from deepselect.distributions import KINDS, make
from deepselect.options import Order, TopkOptions

DTYPES = (torch.bfloat16, torch.float16, torch.float32)
ORDERS = ("none", "value", "index")

# (module, name) of the dispatch constants the shapes are drawn around: k limits
# (a k of the constant and its neighbours) and row lengths (in elements).
K_BOUNDS = (
    ("triton_backend", "MAX_FAST_K"),
    ("triton_backend", "CROWDED_MAX_K"),
    ("triton_backend", "SHORT_SAMPLE_MAX_K"),
    ("triton_backend", "W32_MID_MAX_K32"),
    ("triton_backend", "W32_MID_MAX_K16"),
)
N_BOUNDS = (("triton_backend", "SHORT_SAMPLE_N"),)
SHORT_CONFIG_N = ("nmax", "min_seg")  # fields of triton_short's ShortConfig
SHORT_BYTES = ("MID_BYTES", "LONG_BYTES")  # triton_short's row sizes in bytes


def _module(name: str):
    import importlib

    return importlib.import_module(f"deepselect.{name}")


def boundaries(dtype: torch.dtype, k: int = 512) -> tuple[list[int], list[int]]:
    """``(row lengths, ks)`` at the dispatch boundaries for ``dtype``, read by name."""
    tb = _module("triton_backend")
    ts = _module("triton_short")
    ks = [getattr(_module(m), n) for m, n in K_BOUNDS]
    ns = [getattr(_module(m), n) for m, n in N_BOUNDS]
    short = ts.ShortConfig()
    ns += [getattr(short, f) for f in SHORT_CONFIG_N]
    ks.append(short.nmax)  # above it the short path takes no k
    size = torch.empty((), dtype=dtype).element_size()
    ns += [getattr(ts, name) // size for name in SHORT_BYTES]
    # k where kp = next_pow2(k) changes the plan: wide short rows from kp 1024, the
    # bracket kernel at kp 2048; the rows it takes, held whole by a program
    ks += [ts.WIDE_SHORT_MIN_KP // 2, ts.BRACKET_KP // 2, ts.BRACKET_KP]
    ns += [short.nmax // 2, ts.WIDE_SHORT_SLICES * short.nmax]
    cfg = tb.launch_config(dtype, k)  # the stream kernel's block and buffer
    ns += [cfg.B, 2 * cfg.B, tb.W32_MID_BLOCKS * cfg.B, tb.W32_FROM * cfg.B, cfg.CAP]
    return sorted(set(ns)), sorted(set(ks))


@dataclass
class Case:
    number: int
    seed: int
    rows: int
    n: int
    k: int
    dtype: torch.dtype
    kind: str
    largest: bool
    order: str
    index_dtype: torch.dtype
    return_values: bool
    window: str  # "none", "begin", "end", "both"
    offset: str  # "none", "scalar", "tensor"
    fill: bool
    strided: bool
    out: bool
    near: str = ""
    extra: dict = field(default_factory=dict)

    def describe(self) -> str:
        dt = str(self.dtype).removeprefix("torch.")
        it = str(self.index_dtype).removeprefix("torch.")
        return (
            f"case {self.number} (seed {self.seed}): [{self.rows}, {self.n}] {dt} k={self.k} "
            f"{self.kind} largest={self.largest} order={self.order} {it} "
            f"values={self.return_values} window={self.window} offset={self.offset} "
            f"fill={self.fill} strided={self.strided} out={self.out} near {self.near}"
        )


PAST_EVERY = 25
"""Every this many cases, one takes k just past the largest k boundary (the sort-based
path), whatever the seed draws."""


def _near(rng: random.Random, v: int) -> int:
    return max(0, v + rng.choice((-1, 0, 0, 1)))


def draw_case(base_seed: int, number: int, device: str, max_elems: int, max_k: int) -> Case:
    """Case ``number`` of the fuzz with ``base_seed``: a pure function of both (and of
    the size caps and the dispatch constants)."""
    seed = base_seed * 1_000_003 + number
    rng = random.Random(seed)
    dtype = DTYPES[number % len(DTYPES)]
    kind = KINDS[(number // len(DTYPES)) % len(KINDS)]
    ns, ks = boundaries(dtype)
    sm = _module("triton_backend").sm_count(torch.device(device))
    n_choices = [n for n in ns if n <= max_elems] or [max_elems]
    k_choices = [k for k in ks if k <= max_k]
    what = rng.choice(("n", "n", "k", "rows", "many", "small"))
    if number % PAST_EVERY == PAST_EVERY - 1 and k_choices:  # k past every boundary
        what, b = "k", max(k_choices)
        k, near = b + 1, f"k={b}"
        n = rng.choice([k, k + 1, 2 * k + 5, rng.choice(n_choices)])
    elif what == "n":
        b = rng.choice(n_choices)
        n, near = _near(rng, b), f"N={b}"
        k = rng.choice([1, 2, 3, 64, rng.randint(1, min(max_k, 600))])
    elif what == "k" and k_choices:
        b = rng.choice(k_choices)
        k, near = _near(rng, b) or 1, f"k={b}"
        n = rng.choice([k - 1, k, k + 1, 2 * k + 5, rng.choice(n_choices)])
    elif what == "rows":
        b = rng.choice((1, 2, sm, 2 * sm, 3 * sm))
        n, near = rng.choice((17, 300, 1000, 4096)), f"rows={b}"
        k = rng.choice((1, 8, 64, 300))
        rows = _near(rng, b) or 1
    elif what == "many":  # the rows of 16-bit keys that the bracket kernel takes
        ts = _module("triton_short")
        nmax = ts.ShortConfig().nmax
        crowded = ts.CROWDED * sm
        b = rng.choice((crowded, crowded, sm // 2))  # crowded short rows; wide short rows
        rows, near = _near(rng, b) or 1, f"many={b}"
        n = _near(rng, rng.choice((nmax // 2 + 1, nmax, nmax, 2 * nmax)))
        kp = ts.BRACKET_KP
        k = _near(rng, rng.choice((ts.WIDE_SHORT_MIN_KP // 2 + 1, kp // 2 + 1, kp, kp)))
    else:
        n, near = rng.choice((0, 1, 2, 5, 31, 100, rng.randint(1, 3000))), "small"
        k = rng.choice((1, 2, 3, n, n + 1, n + 7))
    k = max(1, min(k, max_k))
    n = max(0, min(n, max_elems))
    if what not in ("rows", "many"):
        rows = rng.choice((1, 1, 2, 3, 6, 17))
    rows = max(1, min(rows, max(1, max_elems // max(n, 1))))
    return Case(
        number=number,
        seed=seed,
        rows=rows,
        n=n,
        k=k,
        dtype=dtype,
        kind=kind,
        largest=rng.random() < 0.6,
        order=rng.choice(ORDERS),
        index_dtype=rng.choice((torch.int32, torch.int64)),
        return_values=rng.random() < 0.8,
        window=rng.choice(("none", "none", "begin", "end", "both")),
        offset=rng.choice(("none", "none", "scalar", "tensor")),
        fill=rng.random() < 0.2,
        strided=rng.random() < 0.15,
        out=rng.random() < 0.2,
        near=near,
    )


def run_case(c: Case, device: str, base: int = 0) -> None:
    """Run case ``c`` (drawn with base seed ``base``) on ``device`` and compare it with
    the oracle, bit for bit."""
    rng = random.Random(c.seed + 1)
    g = torch.Generator().manual_seed(c.seed)
    full = make(c.kind, c.rows, c.n + (3 if c.strided else 0), c.dtype, seed=c.seed)
    x = full[:, 3:] if c.strided else full  # rows that start off their natural alignment
    begin = end = None
    if c.window in ("begin", "both"):
        begin = torch.randint(0, c.n + 1, (c.rows,), generator=g)
    if c.window in ("end", "both"):
        lo = begin if begin is not None else torch.zeros(c.rows, dtype=torch.int64)
        end = lo + torch.randint(0, c.n + 1, (c.rows,), generator=g)
        end = torch.minimum(end, torch.tensor(c.n))
        if rng.random() < 0.5 and c.rows:
            end[0] = lo[0]  # an empty window
    index_offset = None
    if c.offset == "scalar":
        index_offset = rng.randint(-1000, 1000)
    elif c.offset == "tensor":
        index_offset = torch.randint(0, 10**6, (c.rows,), generator=g)
    kw = dict(
        largest=c.largest,
        order=c.order,
        begin=begin,
        end=end,
        index_offset=index_offset,
        index_dtype=c.index_dtype,
    )
    if c.fill:
        kw.update(fill_value=-7.5, fill_index=-3)
    opt = TopkOptions(**{**kw, "order": Order(c.order)})
    want = deepselect.oracle_topk(x, c.k, opt)

    def dev(t):
        return t.to(device) if isinstance(t, torch.Tensor) else t

    xd = full.to(device)[:, 3:] if c.strided else x.to(device)
    dkw = {key: dev(v) for key, v in kw.items()}
    out = {}
    if c.out:
        out["out_indices"] = torch.empty((c.rows, c.k), dtype=c.index_dtype, device=device)
        if c.return_values:
            out["out_values"] = torch.empty((c.rows, c.k), dtype=c.dtype, device=device)
    got = deepselect.topk_rows(xd, c.k, return_values=c.return_values, **dkw, **out)
    if device == "cuda":
        torch.cuda.synchronize()
    if c.out:
        assert got[1].data_ptr() == out["out_indices"].data_ptr(), c.describe()
    assert got[1].dtype == c.index_dtype and got[1].shape == (c.rows, c.k), c.describe()
    gv = got[0].cpu() if got[0] is not None else None
    wv = want[0] if c.return_values else None
    assert (gv is None) == (not c.return_values), c.describe()
    assert_same_topk((gv, got[1].cpu()), (wv, want[1]), c.order, msg=_replay(c, base))


def _replay(c: Case, base: int) -> str:
    return (
        f"{c.describe()}; replay: DEEPSELECT_FUZZ_SEED={base} "
        f"DEEPSELECT_FUZZ_START={c.number} DEEPSELECT_FUZZ_CASES={c.number + 1} "
        f"python -m pytest tests/test_fuzz_gpu.py -m gpu;"
    )


def default_seed(root: str = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) -> int:
    """The base seed of a run that names none: 24 bits of a hash of the package's source
    under ``root`` (``src/deepselect``, every ``.py`` file's path and bytes), so that a
    changed tree draws other cases and the same tree the same ones, whatever its git
    metadata says; 0 where ``root`` holds no source."""
    import hashlib
    from pathlib import Path

    h = hashlib.sha256()
    src = Path(root) / "src" / "deepselect"
    files = sorted(src.rglob("*.py")) if src.is_dir() else []
    for f in files:
        h.update(str(f.relative_to(src)).encode() + b"\0" + f.read_bytes())
    return int(h.hexdigest()[:6], 16) if files else 0


def _settings(default_cases: int) -> tuple[int, int, int]:
    cases = int(os.environ.get("DEEPSELECT_FUZZ_CASES", str(default_cases)))
    seed = os.environ.get("DEEPSELECT_FUZZ_SEED")
    start = int(os.environ.get("DEEPSELECT_FUZZ_START", "0"))
    return cases, default_seed() if seed is None else int(seed), start


# Rows long enough for every boundary (the stream kernel's w32_from blocks of fp32 are
# 128 * 4096 elements), but a bounded case: at most 2**22 elements, k up to 5000.
GPU_MAX_ELEMS = 1 << 22
GPU_MAX_K = 5000


RUN_CASES = 150
"""Cases a run draws unless told (``DEEPSELECT_FUZZ_CASES``)."""

FUZZ_PARTS = 6
"""The cases run as this many tests of consecutive case numbers, so that the GPU
suite's parallel workers share them (one test of 300 cases outlasted a suite's call)."""


def part_numbers(start: int, cases: int, part: int, parts: int = FUZZ_PARTS) -> range:
    """Case numbers of ``part``: consecutive, and together ``range(start, cases)``.

    >>> [list(part_numbers(0, 7, p, 3)) for p in range(3)]
    [[0, 1], [2, 3], [4, 5, 6]]
    """
    numbers = range(start, max(start, cases))
    n = len(numbers)
    return numbers[part * n // parts : (part + 1) * n // parts]


@pytest.mark.gpu
@pytest.mark.parametrize("part", range(FUZZ_PARTS))
def test_fuzz_gpu(part):
    cases, seed, start = _settings(RUN_CASES)
    print(f"fuzz: base seed {seed}, cases {start}..{cases - 1}")
    for number in part_numbers(start, cases, part):
        run_case(draw_case(seed, number, "cuda", GPU_MAX_ELEMS, GPU_MAX_K), "cuda", seed)


def test_fuzz_parts_cover_every_case_once():
    for start, cases in ((0, 300), (5, 200), (0, 4), (10, 10), (7, 3)):
        got = [n for p in range(FUZZ_PARTS) for n in part_numbers(start, cases, p)]
        assert got == list(range(start, max(start, cases)))


def test_fuzz_generator_on_cpu():
    """The fuzz's own generator and comparison, on CPU tensors (the CPU backend), a few
    small cases: what CI can check of it without a GPU."""
    for number in range(20):
        run_case(draw_case(7, number, "cpu", 6000, 700), "cpu")


@pytest.mark.parametrize("seed", [0, 1, 2, 3, default_seed()])
def test_fuzz_covers_every_dtype_order_option_and_distribution(seed):
    """Of a GPU run's cases (drawn, not run), whatever its base seed: every dtype,
    order, option, distribution and boundary kind appears; shapes stay within the
    caps; the same seed draws the same cases."""
    drawn = [draw_case(seed, i, "cpu", GPU_MAX_ELEMS, GPU_MAX_K) for i in range(RUN_CASES)]
    assert {c.dtype for c in drawn} == set(DTYPES)
    assert {c.order for c in drawn} == set(ORDERS)
    assert {c.kind for c in drawn} == set(KINDS)
    assert {c.window for c in drawn} == {"none", "begin", "end", "both"}
    assert {c.offset for c in drawn} == {"none", "scalar", "tensor"}
    assert {c.index_dtype for c in drawn} == {torch.int32, torch.int64}
    for attr in ("largest", "return_values", "fill", "strided", "out"):
        assert {getattr(c, attr) for c in drawn} == {True, False}, attr
    nears = {c.near.split("=")[0] for c in drawn}
    assert {"N", "k", "rows", "many", "small"} <= nears
    _, ks = boundaries(torch.float32)
    assert sum(c.k == max(k for k in ks if k <= GPU_MAX_K) + 1 for c in drawn) >= 6
    assert all(c.rows * max(c.n, 1) <= GPU_MAX_ELEMS and c.k <= GPU_MAX_K for c in drawn)
    again = [draw_case(seed, i, "cpu", GPU_MAX_ELEMS, GPU_MAX_K) for i in range(RUN_CASES)]
    assert [c.describe() for c in again] == [c.describe() for c in drawn]


def test_the_default_seed_follows_the_source(tmp_path):
    """A run that names no seed takes one from the package's source: the same for the
    same source, another where one file changes, 0 where there is no source."""
    seed = default_seed()
    assert 0 < seed < 1 << 24 and default_seed() == seed
    src = tmp_path / "src" / "deepselect"
    src.mkdir(parents=True)
    (src / "a.py").write_text("x = 1\n")
    first = default_seed(str(tmp_path))
    assert default_seed(str(tmp_path)) == first
    (src / "a.py").write_text("x = 2\n")
    assert default_seed(str(tmp_path)) != first
    assert default_seed(str(tmp_path / "elsewhere")) == 0
