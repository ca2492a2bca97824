"""Top-p draws over flat rows (``top_k_top_p_sampling_from_probs``, the softmax of N(0,
1) logits, top_p 0.9; k = 0 is top-p alone, the whole row) at each
``triton_sampling.READ_BLOCK`` given, device time of eager calls (median of 20; ``--graph``:
CUDA-graph replays), fp32 V = 129,280; draws checked equal across variants. FlashInfer's
same operation beside them where it imports (its draws differ: another definition).

    python benchmarks/top_p_variants.py [--blocks 256,1024,2048] [--rows 1,256,4096] [--graph]
        [--parts 0,4] [--ranks 1024,128] [--scale 1,4]

``--parts``: each whole row's first read and check in this many parts at any batch (0:
the dispatch's rule, ``triton_sampling._split_parts``). The last column is a checksum of
the draws, to compare runs of other trees. ``--ranks``: ``triton_sampling.TOP_P_RANKS``
values (the selection of a row kept whole). ``--scale``: the logits' scale before the
softmax, one table each (1: flat rows, whose cut lies far past any selection; 4: rows
whose cut may lie inside one).
"""

from __future__ import annotations

import argparse

import torch
import triton

from deepselect import engine, triton_sampling

try:
    from flashinfer import sampling as flashinfer_sampling
except ImportError:  # its column stays empty
    flashinfer_sampling = None


def flashinfer_call(x: torch.Tensor, k: int, top_p: float):
    """FlashInfer's draw of the same operation (top-p alone where ``k <= 0``)."""
    if k <= 0:
        return lambda: flashinfer_sampling.top_p_sampling_from_probs(x, top_p)
    return lambda: flashinfer_sampling.top_k_top_p_sampling_from_probs(x, k, top_p)


def time_us(fn, repeats: int = 20, graph: bool = False) -> float:
    fn()
    torch.cuda.synchronize()
    if graph:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        fn = g.replay
        fn()
        torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1000)
    return sorted(times)[len(times) // 2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", default="256,1024,2048")
    ap.add_argument("--rows", default="1,256,4096")
    ap.add_argument("--top-p", type=float, default=0.9)
    ap.add_argument("--k", type=int, default=0)
    ap.add_argument("--graph", action="store_true", help="time CUDA-graph replays")
    ap.add_argument("--parts", default="0", help="parts a whole row's first read (0: the rule)")
    ap.add_argument("--ranks", default=str(triton_sampling.TOP_P_RANKS), help="TOP_P_RANKS")
    ap.add_argument("--scale", default="1", help="logit scales, a table each")
    args = ap.parse_args()
    for scale in (float(c) for c in args.scale.split(",")):
        table(args, scale)


def table(args, scale: float) -> None:
    rule = triton_sampling._split_parts
    variants = [
        (int(b), int(s), int(r))
        for b in args.blocks.split(",")
        for s in args.parts.split(",")
        for r in args.ranks.split(",")
    ]
    head = [f"READ_BLOCK {b} parts {s or 'rule'} ranks {r} us" for b, s, r in variants]
    head += ["FlashInfer us", "draws (checksum)"]
    mode = "graph replays" if args.graph else "eager"
    print(f"k = {args.k}, top_p = {args.top_p}, logits x {scale}, {mode}")
    print("rows | " + " | ".join(head))
    for rows in (int(r) for r in args.rows.split(",")):
        g = torch.Generator(device="cuda").manual_seed(rows)
        x = (torch.randn(rows, 129280, device="cuda", generator=g) * scale).softmax(dim=1)
        seeds = torch.arange(rows, device="cuda", dtype=torch.int64) * 7919
        out, ref = [], None
        for b, parts, ranks in variants:
            triton_sampling.READ_BLOCK = b
            triton_sampling._split_parts = _forced(parts, b, rule) if parts else rule
            triton_sampling.TOP_P_RANKS = ranks

            def call(x=x, seeds=seeds):
                return engine.top_k_top_p_sampling_from_probs(x, args.k, args.top_p, seeds=seeds)

            got = call()
            ref = got if ref is None else ref
            assert torch.equal(got, ref), (rows, b, parts, ranks)
            out.append(time_us(call, graph=args.graph))
        cells = [f"{t:.1f}" for t in out]
        if flashinfer_sampling is not None:
            cells.append(f"{time_us(flashinfer_call(x, args.k, args.top_p), graph=args.graph):.1f}")
        cells += [""] * (len(head) - 1 - len(cells))
        cells.append(str(int((ref * torch.arange(1, rows + 1, device="cuda")).sum())))
        print(f"{rows} | " + " | ".join(cells + [""] * (len(head) - len(cells))), flush=True)


def _forced(parts: int, block: int, rule):
    """The split rule with ``parts`` parts a row wherever it splits at all."""

    def split(rows, v, k, device):
        if rule(1, v, k, device)[0] == 1:
            return 1, v
        length = triton.cdiv(triton.cdiv(v, parts), block) * block
        return triton.cdiv(v, length), length

    return split


if __name__ == "__main__":
    main()
