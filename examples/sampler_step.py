"""One sampling step of a decoder: logits -> a token per row, from its own top-k.

Each row (request) of the batch has its own k, temperature and seed, all as tensors
on the device, so the step never waits for the host and can sit in a CUDA graph.
``deepselect.top_k_sampling_from_logits`` keeps the exact top-k of each row (ties to
the lowest token id) and draws with a counter-based hash of (seed, token): a row's
token depends only on its seed, logits, k and temperature, not on the batch around it.

    python examples/sampler_step.py                   # GPU if present, else CPU
    python examples/sampler_step.py --vocab 129280 --batch 64
"""

from __future__ import annotations

import argparse

import torch

from deepselect import top_k_sampling_from_logits


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=4, help="rows (requests)")
    p.add_argument("--vocab", type=int, default=32000, help="vocabulary size")
    p.add_argument("--k-max", type=int, default=512, help="largest k of any row")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    dev = torch.device(args.device)
    g = torch.Generator().manual_seed(0)

    logits = (torch.randn(args.batch, args.vocab, generator=g) * 3).to(dev)
    # per-row settings: greedy (k = 1), then wider and wider top-k, as requests ask
    ks = [1, 50, 200, args.k_max]
    k = torch.tensor([ks[r % len(ks)] for r in range(args.batch)], device=dev)
    temperature = torch.linspace(0.5, 1.2, args.batch, device=dev)
    seeds = torch.arange(1000, 1000 + args.batch, dtype=torch.int64, device=dev)

    tokens = top_k_sampling_from_logits(
        logits, k, temperature=temperature, seeds=seeds, k_max=args.k_max
    )

    # Checks: every token is inside its row's top-k; the same seeds draw the same
    # tokens; a row sampled on its own draws what it drew within the batch.
    rank = (logits > logits.gather(1, tokens[:, None])).sum(dim=1)  # tokens ranked above
    inside = bool((rank < k).all())
    again = top_k_sampling_from_logits(
        logits, k, temperature=temperature, seeds=seeds, k_max=args.k_max
    )
    r = args.batch - 1
    alone = top_k_sampling_from_logits(
        logits[r:], k[r:], temperature=temperature[r:], seeds=seeds[r:], k_max=args.k_max
    )
    ok = inside and torch.equal(tokens, again) and int(alone[0]) == int(tokens[r])
    for row in range(args.batch):
        print(
            f"row {row}: k={int(k[row]):4d} temperature={float(temperature[row]):.2f} "
            f"seed={int(seeds[row])} -> token {int(tokens[row]):6d} (rank {int(rank[row])})"
        )
    print(f"sampled on {dev}: {'ok' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
