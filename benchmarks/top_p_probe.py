"""Top-p draws of probabilities, timed in the tree this process imports: top-p alone
(``k = 0``, FlashInfer's ``top_p_sampling_from_probs``), top-k then top-p at ``k = 50``
and 512, and a per-row k in ``[25, 50]`` (``k_max`` 50); softmax of N(0, 1) logits,
top_p 0.9, seeded. CUDA-graph replays and eager calls, interleaved, cold L2
(``deepselect.bench.timing.time_fns``), us: the median and, in brackets, the mean (a
call whose rows the parts leave undecided costs far more than the median shows). The
last line of each shape is the first rows' tokens, to compare two trees' draws.

Two trees, one process each (``docs/notes/2026-12-07-top-p-parts-first.md``), and a
variant of one (``--set``: a module constant of :mod:`deepselect.triton_sampling`)::

    PYTHONPATH=old/src python benchmarks/top_p_probe.py --tag old
    PYTHONPATH=src python benchmarks/top_p_probe.py --tag new
    PYTHONPATH=src python benchmarks/top_p_probe.py --tag two --set SPLIT_PROGRAMS_PER_SM=2

On the CPU each call runs once on tiny rows, and nothing is timed.
"""

from __future__ import annotations

import argparse

import torch

from deepselect import engine, triton_sampling
from deepselect.bench import parse_size
from deepselect.bench.timing import time_fns

TOP_P = 0.9


def calls(rows: int, device: str, generator: torch.Generator) -> dict:
    """The four draws of ``[rows, V]`` probabilities, by name."""
    seeds = torch.arange(rows, dtype=torch.int64, device=device)
    per_row = torch.randint(25, 51, (rows,), generator=generator, device=device)
    draw = engine.top_k_top_p_sampling_from_probs
    return {
        "top_p": lambda x: draw(x, 0, TOP_P, seeds=seeds),
        "k50": lambda x: draw(x, 50, TOP_P, seeds=seeds),
        "k512": lambda x: draw(x, 512, TOP_P, seeds=seeds),
        "per_row_k50": lambda x: draw(x, per_row, TOP_P, seeds=seeds, k_max=50),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="1,8,64", help="comma-separated batch sizes")
    p.add_argument("--vocab", type=parse_size, default=129280)
    p.add_argument("--copies", type=int, default=8, help="input copies (rows drawn anew)")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--tag", default="", help="a name for this tree, first on each line")
    p.add_argument("--set", action="append", default=[], metavar="NAME=INT",
                   help="set an int constant of deepselect.triton_sampling (repeatable)")
    a = p.parse_args(argv)
    for item in a.set:
        name, _, value = item.partition("=")
        if not isinstance(getattr(triton_sampling, name, None), int):
            p.error(f"--set {item}: triton_sampling has no int constant {name!r}")
        setattr(triton_sampling, name, int(value))
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    vocab = a.vocab if cuda else min(a.vocab, 600)
    for rows in map(int, a.rows.split(",")):
        g = torch.Generator(device=device).manual_seed(0)
        xs = [
            torch.softmax(torch.randn(rows, vocab, device=device, generator=g), dim=1)
            for _ in range(a.copies if cuda else 1)
        ]
        fns = calls(rows, device, g)
        head = f"{a.tag} rows={rows} V={vocab}"
        tokens = {name: fn(xs[0])[:4].tolist() for name, fn in fns.items()}
        if not cuda:
            print(f"{head}: ran once (no CUDA device: not timed)")
        for graph in (True, False) if cuda else ():
            t = time_fns(fns, xs, device, repeats=a.repeats, graph=graph)
            cells = "  ".join(
                f"{name} {t[name].median_s * 1e6:7.1f} "
                f"({sum(t[name].samples) / len(t[name].samples) * 1e6:7.1f})"
                for name in fns
            )
            print(f"{head} {'graph' if graph else 'eager'}: {cells}", flush=True)
        print(f"{head} tokens: {tokens}", flush=True)


if __name__ == "__main__":
    main()
