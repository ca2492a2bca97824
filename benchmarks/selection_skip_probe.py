"""What a selection costs for rows that need none: top-p's selection (``m`` best first)
over whole rows, against the same call with every row's window empty (``end = 0``).

The question behind it (``docs/notes/2026-12-07-top-p-launches.md``): at <= 64 rows,
the top-p draw's parts decide most rows before any selection; if a row with an empty
window costs the selection's kernels no more than their launch, the selection can run
after the parts, for the undecided rows only, with no kernel change. CUDA-graph
replays, interleaved, cold L2 (``deepselect.bench.timing.time_fns``); on the CPU the
calls run once on tiny rows and nothing is timed.

    python benchmarks/selection_skip_probe.py [--rows 1,8,64] [--vocab 129280] [--m 1024]
"""

from __future__ import annotations

import argparse

import torch

import deepselect
from deepselect.bench import parse_size
from deepselect.bench.timing import cold_copies, time_fns


def calls(rows: int, vocab: int, device: str) -> dict:
    """The three calls: whole rows, whole rows through a window, empty windows."""
    full = torch.full((rows,), vocab, dtype=torch.int64, device=device)
    empty = torch.zeros(rows, dtype=torch.int64, device=device)
    return {"whole": {}, "window": {"end": full}, "empty": {"end": empty}}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="1,8,64", help="comma-separated batch sizes")
    p.add_argument("--vocab", type=parse_size, default=129280)
    p.add_argument("--m", type=int, default=1024, help="entries selected a row")
    p.add_argument("--repeats", type=int, default=30)
    a = p.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    vocab = a.vocab if cuda else min(a.vocab, 500)
    m = min(a.m, vocab)
    for rows in map(int, a.rows.split(",")):
        copies = cold_copies(rows * vocab * 4, device)
        xs = [torch.randn(rows, vocab, device=device) for _ in range(copies)]
        fns = {
            name: lambda x, kw=kw: deepselect.topk_rows(x, m, order="value", **kw)
            for name, kw in calls(rows, vocab, device).items()
        }
        if not cuda:
            for name, fn in fns.items():
                _, idx = fn(xs[0])
                print(f"rows={rows} {name}: {tuple(idx.shape)} (no CUDA device: not timed)")
            continue
        t = time_fns(fns, xs, device, repeats=a.repeats, graph=True)
        cells = "  ".join(f"{name} {t[name].median_s * 1e6:7.1f} us" for name in fns)
        print(f"rows={rows:3d} V={vocab} m={m}: {cells}", flush=True)


if __name__ == "__main__":
    main()
