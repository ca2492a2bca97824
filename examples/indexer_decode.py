"""A sparse-attention decode loop: score the context, pick the k best tokens, map them
to KV-cache slots.

Every step, each sequence of the batch has one new query. The reference lightning
indexer (``deepselect.lightning_indexer``) scores every cached token of its sequence,
and ``deepselect.indexer_topk`` returns the k best tokens as *physical* slots of a paged
KV cache (each sequence's pages are scattered through one pool). Per-row lengths live
on the device and grow by one each step without a host sync. With a GPU, the whole
step is captured once in a CUDA graph and replayed; on a CPU it runs eagerly.

    python examples/indexer_decode.py                  # GPU if present, else CPU
    python examples/indexer_decode.py --context 65536 --k 2048 --steps 16
"""

from __future__ import annotations

import argparse

import torch

from deepselect import indexer_topk
from deepselect.lightning_indexer import lightning_indexer_scores


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=4, help="sequences decoded together")
    p.add_argument("--heads", type=int, default=8, help="indexer heads")
    p.add_argument("--dim", type=int, default=32, help="indexer head dimension")
    p.add_argument("--context", type=int, default=4096, help="cached tokens at the start")
    p.add_argument("--k", type=int, default=256, help="tokens each query attends to")
    p.add_argument("--page-size", type=int, default=64, help="tokens per KV-cache page")
    p.add_argument("--steps", type=int, default=4, help="decode steps")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    dev = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    b, h, d, ps = args.batch, args.heads, args.dim, args.page_size
    max_len = args.context + args.steps  # room for the tokens the loop appends

    # The paged KV cache: a pool of pages, each sequence owning a scattered set of them.
    pages_per_seq = -(-max_len // ps)
    pool = torch.randperm(b * pages_per_seq, generator=g).to(torch.int32)
    page_table = pool.view(b, pages_per_seq).to(dev)  # int32 [batch, max_pages]
    # The indexer keys of every sequence, in logical token order (a real engine reads
    # them through the same page table; kept logical here to keep the scorer plain).
    keys = torch.randn(b, max_len, d, generator=g).to(dev, torch.bfloat16)
    # Sequences of different lengths, as in a real batch; one query row per sequence.
    lengths = (args.context - torch.arange(b) * (args.context // (2 * b))).to(dev, torch.int32)
    q = torch.empty(b, h, d, device=dev, dtype=torch.bfloat16)
    w = torch.rand(b, h, generator=g).to(dev)
    slots = torch.empty(b, args.k, dtype=torch.int32, device=dev)  # the step's output

    def step() -> torch.Tensor:
        # scores [batch, max_len]: one row per query over its own sequence's keys
        scores = torch.stack(
            [lightning_indexer_scores(q[i : i + 1], keys[i], w[i : i + 1])[0] for i in range(b)]
        )
        indexer_topk(scores, lengths, args.k, page_table=page_table, page_size=ps, out=slots)
        lengths.add_(1)  # the token decoded this step joins the cache
        return scores

    replay = None
    if dev.type == "cuda":  # capture the step once; each replay re-reads q and lengths
        q.normal_()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up: Triton compiles outside the capture
            step()
            lengths.sub_(1)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            graph_scores = step()
        lengths.sub_(1)  # capture ran the step's increment once
        replay = graph.replay

    ok = True
    for t in range(args.steps):
        q.copy_(torch.randn(b, h, d, generator=g).to(dev, torch.bfloat16))
        before = lengths.clone()
        if replay is not None:
            replay()
            scores = graph_scores
        else:
            scores = step()
        # Check: the slots are the k best tokens of each row, mapped through the pages.
        best = torch.where(torch.arange(max_len, device=dev) < before[:, None], scores, -1e30)
        want = best.topk(args.k, dim=1).values
        pos = indexer_topk(scores, before, args.k)  # logical positions, same selection
        got = scores.gather(1, pos.long()).sort(dim=1, descending=True).values
        mapped = page_table.gather(1, (pos // ps).long()) * ps + pos % ps
        same_slots = torch.equal(mapped.sort(dim=1).values, slots.sort(dim=1).values)
        ok &= bool(torch.equal(got, want)) and same_slots  # ("none": any order in a row)
        print(
            f"step {t}: lengths {before.tolist()} -> first slots of row 0: "
            f"{sorted(slots[0].tolist())[:6]} ..."
        )
    print(f"{'graph replays' if replay else 'eager steps'} on {dev}: "
          f"{'exact' if ok else 'MISMATCH'}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
