"""Top-p alone by rejection over pools of key classes: the draw that
``docs/notes/2026-12-07-top-p-one-read.md`` plans, defined in torch on the CPU, its
exactness checked by many draws, and what each draw would read counted.

    python benchmarks/top_p_rejection.py                 # the reads table (~1 minute)
    python benchmarks/top_p_rejection.py --check         # draws against w / W_S

A row's weights are the kernels' fixed-point weights (``ops.triton.top_p._fixed``: int64
multiples of ``2**-(62 - bit_length(V))``). Its kept set ``S`` is the contract's: ranks by
value, ties to the lowest column, rank j kept while the ranks before it weigh less than
``top_p`` of the total, rank 0 always. Read 0 (one read of the row) keeps each fine bin's
weight (a key's top ``FINE`` bits) and each class's weight in each block of ``B``
columns (its top ``CLASS`` bits). Round r draws a candidate with probability
proportional to its weight in the pool (the row, then every class at or above the cut's):
the class from the classes' weights, the block from that class's block sums (one block
read), the column in it. A candidate whose fine bin is above the cut's is kept, below
it is not, in it the exact check reads the row. Rejection from a superset of ``S``
draws exactly ``w_j / W_S`` over ``S``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field

import torch

from deepselect import engine, triton_sampling

FINE = 11  # a key's top bits for the fine bins (the cut's bin)
CLASS = 5  # a key's top bits for the classes
B = 4096  # columns a block
ROUNDS = 64  # rounds before the fallback (rank 0)


@dataclass
class Row:
    """A row after read 0: its weights, keys' bins and classes, the sums read 0 keeps,
    the kept set and the cut's fine bin and class."""

    w: torch.Tensor  # int64 [V]
    fine: torch.Tensor  # int64 [V]
    cls: torch.Tensor  # int64 [V]
    block_sums: torch.Tensor  # int64 [classes, blocks]
    kept: torch.Tensor  # bool [V]
    cut_bin: int
    cut_cls: int
    reads: dict = field(default_factory=lambda: {"blocks": 0, "checks": 0, "rounds": 0})


def fixed(p: torch.Tensor) -> torch.Tensor:
    """``ops.triton.top_p._fixed`` of fp32 weights in ``[0, 1]``, as int64."""
    fix = triton_sampling.fixed_scale(p.numel())
    return (p.clamp(0.0, 1.0).double() * fix + 0.5).floor().to(torch.int64)


def read0(p: torch.Tensor, top_p: float, block: int = B) -> Row:
    """What read 0 keeps of the fp32 probabilities ``p`` ``[V]`` (``>= 0``), and the
    kept set the definition draws from (found here by sorting: a test's oracle)."""
    w = fixed(p)
    raw = p.view(torch.int32).to(torch.int64)  # >= 0: raw bits in the values' order
    fine, cls = raw >> (31 - FINE), raw >> (31 - CLASS)
    v = p.numel()
    blocks = -(-v // block)
    sums = torch.zeros(1 << CLASS, blocks, dtype=torch.int64)
    sums.index_put_((cls, torch.arange(v) // block), w, accumulate=True)
    order = torch.sort(p, descending=True, stable=True).indices  # ties: lowest column
    ranked = w[order]
    before = torch.cumsum(ranked, 0) - ranked
    stays = before.double() < top_p * float(ranked.sum())  # exact below 2**53
    stays[0] = True
    kept = torch.zeros(v, dtype=torch.bool)
    kept[order[stays]] = True
    last = int(order[int(stays.nonzero().max())])
    return Row(w, fine, cls, sums, kept, int(fine[last]), int(cls[last]))


def uniform46(seed: int, row: int, r: int) -> float:
    """A number in ``[0, 1)`` of 46 bits from two counter hashes of ``(seed, row, r)``."""
    s = torch.tensor([seed], dtype=torch.int64)
    cols = torch.tensor([[2 * (row * ROUNDS + r), 2 * (row * ROUNDS + r) + 1]])
    u = engine._uniform_at(s, cols)[0]  # 23 bits each
    hi, lo = int(u[0] * (1 << 23)), int(u[1] * (1 << 23))
    return ((hi << 23) | lo) / float(1 << 46)


def _pick(cum: torch.Tensor, t: int) -> int:
    """The first position whose running sum passes ``t`` (``0 <= t < cum[-1]``)."""
    return int(torch.searchsorted(cum, torch.tensor([t]), right=True))


def draw(row: Row, seed: int, r_index: int, block: int = B) -> int:
    """One draw by rejection (the reads it would make counted in ``row.reads``)."""
    cls_w = row.block_sums.sum(dim=1)  # each class's weight
    classes = torch.arange(cls_w.numel() - 1, -1, -1)  # from the top
    pool = torch.ones_like(cls_w, dtype=torch.bool)
    for r in range(ROUNDS):
        row.reads["rounds"] += 1
        cw = torch.where(pool, cls_w, 0)[classes]
        total = int(cw.sum())
        t = min(int(uniform46(seed, r_index, r) * total), total - 1)
        c = int(classes[_pick(torch.cumsum(cw, 0), t)])
        t -= int(cw[: int((classes == c).nonzero())].sum())
        b = _pick(torch.cumsum(row.block_sums[c], 0), t)
        t -= int(row.block_sums[c, :b].sum())
        row.reads["blocks"] += 1
        cols = torch.arange(b * block, min((b + 1) * block, row.w.numel()))
        ws = torch.where(row.cls[cols] == c, row.w[cols], 0)
        j = int(cols[_pick(torch.cumsum(ws, 0), t)])
        if row.fine[j] == row.cut_bin:
            row.reads["checks"] += 1  # the exact check: the weight of the ranks before j
        if row.fine[j] > row.cut_bin or (row.fine[j] == row.cut_bin and row.kept[j]):
            return j
        pool = torch.arange(cls_w.numel()) >= row.cut_cls  # every class at or above the cut's
    return int(torch.argmax(torch.where(row.kept, row.w, -1)))  # rank 0 (never reached here)


def softmax_rows(rows: int, v: int, scale: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(scale * torch.randn(rows, v, generator=g), dim=1)


def check(draws: int) -> None:
    """Draws of small rows against ``w / W_S``: every draw kept, and the counts'
    chi-square over the kept columns within 5 standard deviations of its mean (rows of
    distinct values and rows of 6 values, whose ties fill the cut's fine bin)."""
    g = torch.Generator().manual_seed(5)
    ties = torch.softmax(torch.randint(0, 6, (300,), generator=g).float(), dim=0)
    cases = [
        ("normal", softmax_rows(1, 300, 1.0, seed=1)[0], 0.9, 32),
        ("normal x2", softmax_rows(1, 300, 2.0, seed=2)[0], 0.5, 16),
        ("normal /2", softmax_rows(1, 257, 0.5, seed=3)[0], 0.99, 64),
        ("6 values", ties, 0.7, 32),
    ]
    for name, p, top_p, block in cases:
        row = read0(p, top_p, block)
        counts = torch.zeros(p.numel())
        for d in range(draws):
            counts[draw(row, seed=12345 + d, r_index=0, block=block)] += 1
        assert bool(row.kept[counts > 0].all()), "a draw outside the kept set"
        q = torch.where(row.kept, row.w.double(), 0.0)
        e = (draws * q / q.sum())[row.kept]
        chi2 = float(((counts[row.kept] - e) ** 2 / e).sum())
        df = int(row.kept.sum()) - 1
        assert chi2 < df + 5 * math.sqrt(2 * max(df, 1)), (name, chi2, df)
        print(f"{name}, top_p {top_p}: {draws} draws over {df + 1} kept columns, chi-square "
              f"{chi2:.0f} (df {df}), checks {row.reads['checks'] / draws:.3f} a draw")  # fmt: skip


def table(v: int, rows: int, draws: int) -> None:
    """Reads a row by scale and top_p: read 0, plus a block a round, plus a read of the
    row for each candidate in the cut's fine bin (expected over the draws)."""
    print("| scale | top_p | kept | rounds | blocks | checks | row reads |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for scale in (1.0, 2.0, 4.0, 8.0):
        for top_p in (0.5, 0.9, 0.95, 0.99):
            x = softmax_rows(rows, v, scale, seed=7)
            tot = {"blocks": 0, "checks": 0, "rounds": 0}
            kept = 0
            for i in range(rows):
                row = read0(x[i], top_p)
                kept += int(row.kept.sum())
                for d in range(draws):
                    draw(row, seed=1000 + d, r_index=i)
                for key in tot:
                    tot[key] += row.reads[key]
            n = rows * draws
            reads = 1 + tot["blocks"] / n * B / v + tot["checks"] / n
            print(f"| {scale:g} | {top_p:g} | {kept // rows} | {tot['rounds'] / n:.2f} | "
                  f"{tot['blocks'] / n:.2f} | {tot['checks'] / n:.3f} | {reads:.3f} |")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--check", action="store_true")
    a.add_argument("--draws", type=int, default=0, help="default: 3000 checked, 100 a row")
    a.add_argument("--rows", type=int, default=2)
    a.add_argument("--v", type=int, default=129_280)
    args = a.parse_args(argv)
    if args.check:
        check(args.draws or 3000)
    else:
        table(args.v, args.rows, args.draws or 100)


if __name__ == "__main__":
    main()
