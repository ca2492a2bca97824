"""The algorithm's experiments: block order, the expected-cost bound, and a check of it.

Three commands under ``deepselect experiment``, each a thin printer around a plain
function that returns rows (so tests check numbers, not text):

* ``block-order`` (:func:`block_order_rows`): ``A``, ``R``, ``W`` of the reference on
  random, ascending, descending and staircase rows, visited sequentially and in a
  random block order. Sequential order costs ``W ~ 1.5 N`` when the large values sit at
  the end; a random order keeps ``W/N`` at a few percent whatever the input.
* ``bounds`` (:func:`bounds_rows`, :func:`b2_tradeoff_rows`, :func:`read_once_rows`):
  the proof's bound ``E[W] <= (1 + k/B2) (k + B + B2) H_m``, its asymptotic form, its
  dependence on ``B2``, and the read-once cost against an ``N log2 k`` sort model.
  Pure formulas, no measurement.
* ``proof`` (:func:`proof_rows`): mean and max of ``A``, ``R``, ``W`` and the peak buffer
  over many random block orders of one fixed row, beside the bound, for several inputs.

Costs are counted in elements (see :class:`deepselect.reference.RowStats`), never timed.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass

import numpy as np
import torch

from .distributions import make
from .keys import key_bits
from .oracle import oracle_topk
from .reference import BLOCK_ORDERS, select_row, unsigned_keys

EXPERIMENT_INPUTS: tuple[str, ...] = (
    "random",
    "ascending",
    "descending",
    "staircase",
    "few_distinct",
)
"""Rows of the experiments (see :func:`experiment_input`)."""

# The configuration the algorithm's write-up recommends for k = 512.
DEFAULT_K, DEFAULT_B, DEFAULT_B2 = 512, 1024, 1024
BLOCK_ORDER_N = 262_144
TABLE2_N: tuple[int, ...] = (4_096, 65_536, 1_048_576, 16_777_216)
TRADEOFF_B2: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096, 8192)


def experiment_input(kind: str, n: int, seed: int = 0) -> torch.Tensor:
    """One fp32 row ``[1, n]`` of an experiment input.

    * ``random``: uniform floats in ``[0, 1)`` (``numpy.random.default_rng(seed)``);
    * ``ascending`` / ``descending``: ``j / n`` and ``-j / n`` for position ``j``;
    * ``staircase``: :mod:`deepselect.distributions`' staircase, rising steps of 64
      equal values. When ``B`` is a multiple of 64, every block's values beat all
      earlier blocks', so a sequential scan costs exactly what the ascending row does
      (``A = N``, ``R = m - 1``), while the ties inside each step still exercise the
      lowest-index rule;
    * ``few_distinct``: 32 distinct values in random positions (massive ties).

    >>> experiment_input("ascending", 4).tolist()
    [[0.0, 0.25, 0.5, 0.75]]
    """
    if kind == "random":
        row = np.random.default_rng(seed).random(n, dtype=np.float32)
        return torch.from_numpy(row)[None]
    named = {
        "ascending": "ascending",
        "descending": "descending",
        "staircase": "staircase",
        "few_distinct": "distinct32",
    }
    if kind not in named:
        raise ValueError(f"kind must be one of {', '.join(EXPERIMENT_INPUTS)}; got {kind!r}")
    return make(named[kind], 1, n, torch.float32, seed=seed)


def _check_positive(**values: int) -> None:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int; got {type(v).__name__}")
        if v < 1:
            raise ValueError(f"{name} must be >= 1; got {v}")


# ---------------------------------------------------------------------------------------
# block order


@dataclass(frozen=True)
class BlockOrderRow:
    """One line of the block-order table: the reference's costs on one row.

    A sequential order is deterministic (one run). A random order is a random variable,
    so its costs are means over ``trials`` block orders, with the spread of ``W``.
    """

    input: str
    order: str
    n: int
    trials: int
    appended: float  # A (mean)
    compactions: float  # R (mean)
    work: float  # W = A + k R (mean)
    min_work: int
    max_work: int
    correct: bool  # every run returned the oracle's answer

    @property
    def work_per_n(self) -> float:
        return self.work / self.n


def block_order_rows(
    n: int = BLOCK_ORDER_N,
    k: int = DEFAULT_K,
    B: int = DEFAULT_B,
    B2: int = DEFAULT_B2,
    seed: int = 0,
    trials: int = 16,
    inputs: tuple[str, ...] = ("random", "ascending", "descending", "staircase"),
    orders: tuple[str, ...] = ("sequential", "random"),
) -> list[BlockOrderRow]:
    """The block-order experiment: one row per (input, block order).

    With the defaults (N = 262,144, k = 512, B = B2 = 1024) the sequential rows are
    exact: ascending and staircase ``A = 262,144, R = 255, W = 392,704``; descending
    ``A = 2,048, R = 1, W = 2,560``. Random-order rows (means over ``trials`` block
    orders, seeds ``seed .. seed + trials - 1``) land at ``W/N ~ 0.03-0.05`` on every
    input; a single random order spreads around that (about 0.015-0.065 here).

    >>> r = block_order_rows(4096, 8, 64, 64, inputs=("ascending",), orders=("sequential",))
    >>> r[0].appended, r[0].compactions, r[0].work  # every block beats all before it
    (4096.0, 63.0, 4600.0)
    """
    _check_positive(n=n, k=k, B=B, B2=B2, trials=trials)
    for order in orders:
        if order not in BLOCK_ORDERS:
            raise ValueError(f"orders must be among {', '.join(BLOCK_ORDERS)}; got {order!r}")
    rows = []
    for kind in inputs:
        x = experiment_input(kind, n, seed)
        keys = unsigned_keys(x)[0]
        want = np.sort(oracle_topk(x, k)[1][0].numpy().astype(np.int64))
        for order in orders:
            runs = 1 if order == "sequential" else trials
            stats, correct = [], True
            for t in range(runs):
                pos, st = select_row(
                    keys, k, B=B, B2=B2, key_width=key_bits(x.dtype), block_order=order,
                    seed=seed + t,
                )  # fmt: skip
                stats.append(st)
                correct &= bool(np.array_equal(np.sort(pos), want))
            w = [s.work for s in stats]
            rows.append(
                BlockOrderRow(
                    input=kind,
                    order=order,
                    n=n,
                    trials=runs,
                    appended=float(np.mean([s.appended for s in stats])),
                    compactions=float(np.mean([s.compactions for s in stats])),
                    work=float(np.mean(w)),
                    min_work=min(w),
                    max_work=max(w),
                    correct=correct,
                )
            )
    return rows


# ---------------------------------------------------------------------------------------
# the bound


def harmonic(m: int) -> float:
    """``H_m = 1 + 1/2 + ... + 1/m`` (``H_0 = 0``)."""
    return math.fsum(1.0 / i for i in range(1, m + 1))


def append_bound(n: int, k: int, B: int, B2: int) -> float:
    """``E[A] <= L H_m`` with ``L = k + B + B2`` and ``m = ceil(n / B)``."""
    return (k + B + B2) * harmonic(-(-n // B))


def cost_bound(n: int, k: int, B: int, B2: int) -> float:
    """The proof's bound ``E[W] <= (1 + k/B2) L H_m`` for a uniform random block order.

    >>> round(cost_bound(4096, 512, 1024, 1024))
    8000
    """
    return (1 + k / B2) * append_bound(n, k, B, B2)


def asymptotic_bound(n: int, k: int, B: int, B2: int) -> float:
    """``(1 + k/B2) (k + B + B2) ln(n / B)``: the bound with ``H_m`` replaced by ``ln m``."""
    return (1 + k / B2) * (k + B + B2) * math.log(n / B)


@dataclass(frozen=True)
class BoundRow:
    """One line of Table 2: the bound, its asymptotic form and ``k ln(N/k)``."""

    n: int
    bound: float
    asymptotic: float
    k_log: float

    @property
    def ratio(self) -> float:
        return self.bound / self.asymptotic


def bounds_rows(
    ns: tuple[int, ...] = TABLE2_N, k: int = DEFAULT_K, B: int = DEFAULT_B, B2: int = DEFAULT_B2
) -> list[BoundRow]:
    """Table 2: the bound against its asymptotic form; their ratio tends to 1."""
    _check_positive(k=k, B=B, B2=B2)
    for n in ns:
        _check_positive(n=n)
    return [
        BoundRow(
            n=n,
            bound=cost_bound(n, k, B, B2),
            asymptotic=asymptotic_bound(n, k, B, B2),
            k_log=k * math.log(n / k),
        )
        for n in ns
    ]


@dataclass(frozen=True)
class TradeoffRow:
    """The bound at one compaction slack ``B2``."""

    b2: int
    factor: float  # 1 + k/B2: compactions re-read the k survivors
    span: int  # L = k + B + B2: the rank an appended element can have
    bound: float


def b2_tradeoff_rows(
    n: int = 1_048_576,
    k: int = DEFAULT_K,
    B: int = DEFAULT_B,
    b2s: tuple[int, ...] = TRADEOFF_B2,
) -> list[TradeoffRow]:
    """The bound against ``B2`` at fixed ``n``: small ``B2`` compacts too often (the
    ``1 + k/B2`` factor), large ``B2`` lets more elements in (``L``). The product
    ``(1 + k/B2)(k + B + B2)`` is smallest at ``B2 = sqrt(k (k + B))``, near ``k``."""
    _check_positive(n=n, k=k, B=B)
    for b2 in b2s:
        _check_positive(B2=b2)
    return [
        TradeoffRow(b2=b2, factor=1 + k / b2, span=k + B + b2, bound=cost_bound(n, k, B, b2))
        for b2 in b2s
    ]


@dataclass(frozen=True)
class ReadOnceRow:
    """Elements touched: the read-once pass (plus the bound on extra work) against
    a sort-like ``N log2 k`` model."""

    n: int
    read_once: int
    extra_bound: float  # E[W], the selection work on top of the read
    sort_model: float  # N log2 k

    @property
    def ratio(self) -> float:
        return self.sort_model / self.read_once


def read_once_rows(
    ns: tuple[int, ...] = TABLE2_N, k: int = DEFAULT_K, B: int = DEFAULT_B, B2: int = DEFAULT_B2
) -> list[ReadOnceRow]:
    """Read-once cost ``N`` against ``N log2 k`` (at ``N = 2^20, k = 512``: 1,048,576
    against 9,437,184)."""
    _check_positive(k=k, B=B, B2=B2)
    return [
        ReadOnceRow(
            n=n, read_once=n, extra_bound=cost_bound(n, k, B, B2), sort_model=n * math.log2(k)
        )
        for n in ns
    ]


# ---------------------------------------------------------------------------------------
# the bound, checked


@dataclass(frozen=True)
class ProofRow:
    """Costs of one fixed row over ``trials`` block orders, beside the proof's bounds."""

    input: str
    trials: int
    mean_appended: float
    max_appended: int
    append_bound: float  # L H_m
    mean_compactions: float
    max_compactions: int
    mean_work: float
    max_work: int
    work_bound: float  # (1 + k/B2) L H_m
    max_peak: int
    peak_limit: int  # k + B2 + B
    correct: int  # trials that returned the oracle's answer

    @property
    def work_ratio(self) -> float:
        """Mean W over the bound on E[W] (the proof says this is <= 1 in expectation)."""
        return self.mean_work / self.work_bound


def proof_rows(
    n: int = BLOCK_ORDER_N,
    k: int = DEFAULT_K,
    B: int = DEFAULT_B,
    B2: int = DEFAULT_B2,
    trials: int = 100,
    seed: int = 0,
    inputs: tuple[str, ...] = EXPERIMENT_INPUTS,
    block_order: str = "random",
    progress: bool = False,
) -> list[ProofRow]:
    """Empirical check of ``E[W] <= (1 + k/B2) L H_m``: for each input, one fixed row,
    ``trials`` block orders (seeds ``seed .. seed + trials - 1``), every answer checked
    against the oracle.

    >>> r = proof_rows(4096, 16, 64, 64, trials=3, inputs=("ascending",))[0]
    >>> r.correct, r.mean_work <= r.work_bound, r.max_peak <= r.peak_limit
    (3, True, True)
    """
    _check_positive(n=n, k=k, B=B, B2=B2, trials=trials)
    if block_order not in BLOCK_ORDERS:
        raise ValueError(f"block_order must be one of {', '.join(BLOCK_ORDERS)}")
    from tqdm import tqdm

    bar = tqdm(total=trials * len(inputs), disable=not progress, desc="trials", file=sys.stderr)
    rows = []
    for kind in inputs:
        x = experiment_input(kind, n, seed)
        keys = unsigned_keys(x)[0]
        want = np.sort(oracle_topk(x, k, None)[1][0].numpy().astype(np.int64))
        stats, correct = [], 0
        for t in range(trials):
            pos, st = select_row(
                keys, k, B=B, B2=B2, key_width=key_bits(x.dtype), block_order=block_order,
                seed=seed + t,
            )  # fmt: skip
            stats.append(st)
            correct += bool(np.array_equal(np.sort(pos), want))
            bar.update()
        a = np.array([s.appended for s in stats])
        r = np.array([s.compactions for s in stats])
        w = np.array([s.work for s in stats])
        rows.append(
            ProofRow(
                input=kind,
                trials=trials,
                mean_appended=float(a.mean()),
                max_appended=int(a.max()),
                append_bound=append_bound(n, k, B, B2),
                mean_compactions=float(r.mean()),
                max_compactions=int(r.max()),
                mean_work=float(w.mean()),
                max_work=int(w.max()),
                work_bound=cost_bound(n, k, B, B2),
                max_peak=max(s.peak for s in stats),
                peak_limit=k + B2 + B,
                correct=correct,
            )
        )
    bar.close()
    return rows


# ---------------------------------------------------------------------------------------
# printing


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    """Plain aligned text: first column left-aligned, the others right-aligned.

    >>> print(format_table(["a", "bb"], [["x", "1"], ["yy", "22"]]))
    a   bb
    --  --
    x    1
    yy  22
    """
    cols = list(zip(headers, *rows, strict=True))
    widths = [max(len(c) for c in col) for col in cols]

    def line(cells):
        out = [cells[0].ljust(widths[0])]
        out += [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _int(v: float) -> str:
    return f"{v:,.0f}"


def _num(v: float) -> str:
    """Integers as integers, means with one decimal."""
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"


def _print_block_order(args) -> int:
    rows = block_order_rows(args.n, args.k, args.B, args.B2, args.seed, args.trials)
    print(
        f"Block order: N = {args.n:,}, k = {args.k}, B = {args.B}, B2 = {args.B2}; "
        f"random rows: mean of {args.trials} block orders\n"
        "(A = appended, R = in-loop compactions, W = A + k*R)\n"
    )
    table = [
        [r.input, r.order, _int(r.appended), _num(r.compactions), _int(r.work),
         f"{r.work_per_n:.3f}",
         f"{r.min_work / r.n:.3f}-{r.max_work / r.n:.3f}" if r.trials > 1 else "-",
         str(r.correct)]
        for r in rows
    ]  # fmt: skip
    headers = ["input", "order", "A", "R", "W", "W/N", "W/N range", "correct"]
    print(format_table(headers, table))
    print(
        "\nThe answer never depends on the order; the cost does. A random block order keeps\n"
        "W/N small on every input; a sequential scan pays W ~ 1.5 N when the large values\n"
        "come last (ascending, staircase)."
    )
    return 0


def _print_bounds(args) -> int:
    k, B, B2 = args.k, args.B, args.B2
    ns = tuple(args.n)
    print(
        f"Expected-cost bound E[W] <= (1 + k/B2) * L * H_m, L = k + B + B2, m = ceil(N/B); "
        f"k = {k}, B = {B}, B2 = {B2}\n"
    )
    table = [
        [_int(r.n), _int(r.bound), _int(r.asymptotic), _int(r.k_log), f"{r.ratio:.2f}"]
        for r in bounds_rows(ns, k, B, B2)
    ]
    print(format_table(["N", "bound", "asymptotic", "k*ln(N/k)", "bound/asym"], table))

    tn = args.tradeoff_n
    trade = b2_tradeoff_rows(tn, k, B, tuple(args.b2_values))
    best = min(trade, key=lambda r: r.bound)
    print(f"\nBound against B2 at N = {tn:,} (continuous optimum B2 = sqrt(k(k+B)) = "
          f"{math.sqrt(k * (k + B)):,.0f})\n")  # fmt: skip
    table = [
        [_int(r.b2), f"{r.factor:.3f}", _int(r.span), _int(r.bound),
         "<- min" if r is best else ""]
        for r in trade
    ]  # fmt: skip
    print(format_table(["B2", "1+k/B2", "L", "bound", ""], table))

    print(f"\nRead once against an N*log2(k) sort model (k = {k})\n")
    table = [
        [_int(r.n), _int(r.read_once), _int(r.extra_bound), _int(r.sort_model),
         f"{r.ratio:.1f}x"]
        for r in read_once_rows(ns, k, B, B2)
    ]  # fmt: skip
    print(format_table(["N", "read once", "+ E[W] bound", "N*log2(k)", "sort/read"], table))
    return 0


def _print_proof(args) -> int:
    rows = proof_rows(
        args.n, args.k, args.B, args.B2, args.trials, args.seed,
        block_order=args.order, progress=not args.no_progress,
    )  # fmt: skip
    print(
        f"Expected-cost check: N = {args.n:,}, k = {args.k}, B = {args.B}, B2 = {args.B2}, "
        f"{args.trials} {args.order} block orders per input\n"
    )
    table = [
        [r.input, f"{r.mean_appended:,.0f}", _int(r.max_appended), _int(r.append_bound),
         f"{r.mean_compactions:.1f}", str(r.max_compactions), f"{r.mean_work:,.0f}",
         _int(r.max_work), _int(r.work_bound), f"{r.work_ratio:.2f}", _int(r.max_peak),
         _int(r.peak_limit), f"{r.correct}/{r.trials}"]
        for r in rows
    ]  # fmt: skip
    headers = ["input", "mean A", "max A", "L*H_m", "mean R", "max R", "mean W", "max W",
               "W bound", "mean/bound", "max peak", "k+B2+B", "correct"]  # fmt: skip
    print(format_table(headers, table))
    holds = all(r.mean_work <= r.work_bound for r in rows)
    print(f"\nmean W <= (1 + k/B2) L H_m on every input: {'yes' if holds else 'NO'}")
    return 0


def _positive_int(text: str) -> int:
    try:
        v = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer; got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1; got {v}")
    return v


def _add_shape(p: argparse.ArgumentParser, n_default) -> None:
    p.add_argument("--k", type=_positive_int, default=DEFAULT_K, help="elements to select")
    p.add_argument("--B", type=_positive_int, default=DEFAULT_B, help="block size")
    p.add_argument("--B2", type=_positive_int, default=DEFAULT_B2, help="compaction slack")
    if n_default is not None:
        p.add_argument("--n", type=_positive_int, default=n_default, help="row length N")
        p.add_argument("--seed", type=int, default=0, help="seed of inputs and block orders")


def register(subparsers) -> None:
    """Add ``deepselect experiment {block-order,bounds,proof}`` to the CLI."""
    p = subparsers.add_parser(
        "experiment",
        help="reproduce the algorithm's experiments",
        description="The algorithm's cost model, on any machine: costs are counted in "
        "elements the NumPy reference handles, never timed.",
    )
    sub = p.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")

    q = sub.add_parser(
        "block-order",
        help="cost of sequential vs random block order",
        description="A (elements appended), R (compactions) and W = A + k*R for random, "
        "ascending, descending and staircase rows, scanned sequentially and in a random "
        "block order (mean and spread over --trials orders); every row is checked "
        "against the oracle.",
    )
    _add_shape(q, BLOCK_ORDER_N)
    q.add_argument(
        "--trials", type=_positive_int, default=16, help="random block orders averaged per row"
    )
    q.set_defaults(func=_print_block_order)

    q = sub.add_parser(
        "bounds",
        help="the expected-cost bound, its B2 trade-off, read once",
        description="The expected-cost bound E[W] <= (1 + k/B2)(k + B + B2) H_m beside its "
        "asymptotic form and k ln(N/k), how it varies with B2, and reading N once against "
        "an N log2(k) sort.",
    )
    _add_shape(q, None)
    q.add_argument(
        "--n", type=_positive_int, nargs="+", default=list(TABLE2_N), help="row lengths N"
    )
    q.add_argument("--tradeoff-n", type=_positive_int, default=1_048_576, help="N of the B2 table")
    q.add_argument(
        "--b2-values", type=_positive_int, nargs="+", default=list(TRADEOFF_B2),
        help="B2 values of the trade-off table",
    )  # fmt: skip
    q.set_defaults(func=_print_bounds)

    q = sub.add_parser(
        "proof",
        help="mean and max cost over many random block orders",
        description="Mean and max of A, R, W and the peak candidate buffer over many "
        "block orders per input, beside the bound and the buffer limit k + B2 + B.",
    )
    _add_shape(q, BLOCK_ORDER_N)
    q.add_argument("--trials", type=_positive_int, default=100, help="block orders per input")
    q.add_argument("--order", choices=BLOCK_ORDERS, default="random", help="block order")
    q.add_argument("--no-progress", action="store_true", help="no progress bar")
    q.set_defaults(func=_print_proof)
