"""Where an engine operation's device time goes, launch by launch (torch.profiler).

For each op and shape: every kernel the op launches, its mean device time per call and
launches per call, and their sum, over ``--calls`` eager calls after three warm-up
calls (inputs in L2 after the first: a breakdown, not a timing; ``deepselect bench
--scenario sampling-ops`` times the ops). The inputs and calls are that scenario's
own: fp32 normal logits (their softmax for the ``_from_probs`` ops), per-row k drawn
in ``[k/2, k]``, seeded draws, top_p 0.9.

    python benchmarks/launch_breakdown.py --op top_k_top_p_sampling_from_logits \\
        --rows 1,256 --k 50,512 [--per-row]

Without a CUDA device each op runs once on tiny rows, and no times are printed.
"""

from __future__ import annotations

import argparse
import collections
import functools

import torch
from torch.profiler import ProfilerActivity, profile

from deepselect.bench import parse_size
from deepselect.bench.sampling_ops import OPS, TOP_P_ONLY, _inputs, _ours


def breakdown(fn, calls: int) -> list[tuple[str, float, float]]:
    """``(kernel, us per call, launches per call)``, largest first."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    spent: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            s = spent[e.name[:80]]
            s[0] += e.device_time_total
            s[1] += 1
    rows = [(name, t / calls, n / calls) for name, (t, n) in spent.items()]
    return sorted(rows, key=lambda r: -r[1])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--op", default="top_k_top_p_sampling_from_logits", choices=OPS)
    p.add_argument("--rows", default="1,256", help="comma-separated batch sizes")
    p.add_argument("--vocab", type=parse_size, default=129280)
    p.add_argument("--k", default="50,512", help="comma-separated k")
    p.add_argument("--per-row", action="store_true", help="a per-row k tensor (k_max = k)")
    p.add_argument("--calls", type=int, default=30)
    a = p.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    vocab = a.vocab if cuda else min(a.vocab, 600)
    for rows in map(int, a.rows.split(",")):
        for k in map(int, a.k.split(",")):
            k = min(k, vocab - 1)
            # the scenario's inputs and call (its first input copy)
            xs, kw, _ = _inputs(a.op, rows, vocab, k, a.per_row, device, seed=1)
            fn = _ours(a.op, kw, rows, device)
            call = functools.partial(fn, xs[0])
            title = f"{a.op} rows={rows} V={vocab} k={k}{' per-row' if a.per_row else ''}"
            if not cuda:
                call()
                print(f"== {title}: ran once (no CUDA device: no launch times)")
                continue
            rows_ = breakdown(call, a.calls)
            print(f"== {title}")
            for name, us, n in rows_:
                print(f"  {us:8.1f} us  x{n:4.1f}  {name}")
            print(f"  {sum(r[1] for r in rows_):8.1f} us  device time a call")
            if a.op == TOP_P_ONLY:
                break  # k does not enter


if __name__ == "__main__":
    main()
