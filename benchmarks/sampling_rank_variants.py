"""A per-row k's threshold in ``top_k_mask_logits`` / ``top_k_renorm_probs``, two ways:
each program of the pass ranks the row's selection itself (``ranked``: a sort of ``m``
entries in every program, as ``triton_sampling.best_first`` decides up to ``RANK_MAX``),
or the select returns it best first and a program loads entry ``k - 1`` (``best_first``:
``triton_sampling.best_first`` patched true for every per-row k; the select sorts).
CUDA-graph replays, interleaved, inputs rotated past the L2, beside ``x * 1.0``; results
compared bit for bit (mask) or within fp32 rounding (renorm).

    python benchmarks/sampling_rank_variants.py [--rows 1 64 256] [--k 512 1024]

fp32 normal logits of V = 129,280 (their softmax for renorm), k per row in ``[k/2, k]``,
``k_max = k``.
"""

from __future__ import annotations

import argparse
import sys

import torch

from deepselect import engine, triton_sampling
from deepselect.bench.timing import cold_copies, time_fns

RULE = triton_sampling.best_first
VARIANTS = {"ranked": RULE, "best_first": lambda k, m: isinstance(k, torch.Tensor)}
OPS = {"mask": engine.top_k_mask_logits, "renorm": engine.top_k_renorm_probs}


def _call(op: str, kt: torch.Tensor, k: int, rule):
    def run(x):
        triton_sampling.best_first = rule
        try:
            return OPS[op](x, kt, k_max=k)
        finally:
            triton_sampling.best_first = RULE

    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, nargs="*", default=[1, 64, 256])
    p.add_argument("--k", type=int, nargs="*", default=[512, 1024])
    p.add_argument("--repeats", type=int, default=20)
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    v, bad = 129280, 0
    print("op | rows | k | ranked us | best_first us | x*1.0 us | ranked / best_first | status")
    for op in OPS:
        for rows in a.rows:
            for k in a.k:
                g = torch.Generator(device="cuda").manual_seed(rows * 7 + k)
                copies = cold_copies(rows * v * 4, "cuda", cap=1 << 20)  # (uncapped)
                xs = [torch.randn(rows, v, device="cuda", generator=g) for _ in range(copies)]
                if op == "renorm":
                    xs = [x.softmax(dim=1) for x in xs]
                kt = torch.randint(max(1, k // 2), k + 1, (rows,), device="cuda", generator=g)
                fns = {n: _call(op, kt, k, r) for n, r in VARIANTS.items()}
                want = fns["ranked"](xs[0])
                ok = True
                for name in [n for n in fns if n != "ranked"]:
                    got = fns[name](xs[0])
                    if op == "mask":
                        ok &= torch.equal(got.view(torch.int32), want.view(torch.int32))
                    else:
                        ok &= torch.equal(got == 0, want == 0) and torch.allclose(
                            got, want, rtol=1e-6, atol=0, equal_nan=True
                        )
                bad += not ok
                fns["rw"] = lambda x: x * 1.0
                t = time_fns(fns, xs, "cuda", repeats=a.repeats, graph=True)
                us = {n: s.median_s * 1e6 for n, s in t.items()}
                print(
                    f"{op} | {rows} | {k} | {us['ranked']:.1f} | {us['best_first']:.1f} | "
                    f"{us['rw']:.1f} | {us['ranked'] / us['best_first']:.2f} | "
                    f"{'ok' if ok else 'DIFFERS'}",
                    flush=True,
                )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
