"""The engine's ``top_k_mask_logits`` and ``top_k_renorm_probs`` two ways, in one process:
the select, then a pass over the logits (``old``: the input read twice), and the one
launch whose streaming programs write each row from its selection (``fused``: read once,
see ``triton_sampling.kept_rows``), beside one read + one write of the logits
(``x * 1.0``). Decided ``triton_sampling.fuses``.

    python benchmarks/sampling_fused_variants.py             # GPU: the table, < 90 s
    python benchmarks/sampling_fused_variants.py --per-row   # + per-row k tensors
    TRITON_INTERPRET=1 python benchmarks/sampling_fused_variants.py --cpu  # tiny, no GPU

Cells: op {mask, renorm} x rows {256, 4096} x vocab 129,280 fp32 x k {50, 512}, an int
k (``--per-row``: also a per-row k in ``[k/2, k]``, ``k_max = k``). Each cell first checks
the fused results against the old one (mask: bit for bit; renorm: the same zeros and
NaNs, values within fp32 rounding of a differently ordered kept sum), then times the
calls interleaved as CUDA-graph replays, input copies rotated for a cold L2
(``deepselect.bench``'s timer). Ratios: each path over ``x * 1.0``, and old over
fused.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from unittest import mock

import torch

from deepselect import engine, triton_sampling
from deepselect.bench.timing import cache_bytes, time_fns
from deepselect.keys import SUPPORTED_DTYPES
from deepselect.ops.triton.launch import _interpreting

OPS = {"mask": engine.top_k_mask_logits, "renorm": engine.top_k_renorm_probs}
GPU = dict(rows=(256, 4096), vocab=129280, k=(50, 512))
CPU = dict(rows=(2,), vocab=12000, k=(50,))  # rows the streaming kernel takes there (from 10,000)


VARIANTS = {"old": False, "fused": True}
"""Each path's ``one_launch`` argument of ``engine._kept_rows``."""


def inputs(op: str, rows: int, vocab: int, k: int, per_row: bool, device: str):
    """``(copies, kw)``: fp32 normal logits (their softmax for renorm), enough copies
    to exceed three L2s, and the call's k arguments."""
    g = torch.Generator(device=device).manual_seed(rows * 7 + k)
    size = rows * vocab * 4
    copies = 1 if device == "cpu" else max(1, math.ceil(3 * cache_bytes(device) / size))
    xs = []
    for _ in range(copies):
        x = torch.randn(rows, vocab, device=device, generator=g)
        xs.append(torch.softmax(x, dim=1) if op == "renorm" else x)
    if per_row:
        kt = torch.randint(max(1, k // 2), k + 1, (rows,), device=device, generator=g)
        return xs, dict(k=kt, k_max=k)
    return xs, dict(k=k)


def call(op: str, kw: dict, name: str):
    def run(x):
        return engine._kept_rows(
            x, kw["k"], kw.get("k_max"), renorm=op == "renorm", one_launch=VARIANTS[name]
        )

    return run


def check(op: str, got: torch.Tensor, want: torch.Tensor) -> str:
    """'' where the fused result is the old one's (see the module docstring), else why not."""
    if op == "mask":
        same = torch.equal(got.view(torch.int32), want.view(torch.int32))
        return "" if same else "mask differs from the two-launch path"
    if not (torch.equal(got == 0, want == 0) and torch.equal(got.isnan(), want.isnan())):
        return "renorm zeros/NaNs differ from the two-launch path"
    try:
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0, equal_nan=True)
    except AssertionError as e:
        return f"renorm values differ: {str(e).splitlines()[1]}"
    return ""


def run_cell(op, rows, vocab, k, per_row, device, repeats) -> dict:
    xs, kw = inputs(op, rows, vocab, k, per_row, device)
    m = min(kw.get("k_max", k), vocab)
    row = dict(op=op, rows=rows, k=k, k_kind="per-row" if per_row else "int")
    row["fuses"] = triton_sampling.fuses(xs[0], m)
    fns = {name: call(op, kw, name) for name in VARIANTS}
    problem = check(op, fns["fused"](xs[0]), fns["old"](xs[0]))
    if problem:
        return dict(row, status=f"fused: {problem}")
    fns["rw"] = lambda x: x * 1.0
    cuda = device == "cuda"
    t = time_fns(fns, xs, device, repeats=repeats, warmup=3 if cuda else 1, graph=cuda)
    us = {n: v.median_s * 1e6 for n, v in t.items()}
    for name in VARIANTS:
        row[f"{name}_us"] = us[name]
        row[f"{name}_rw"] = us[name] / us["rw"]
    return dict(row, rw_us=us["rw"], old_fused=us["old"] / us["fused"], status="ok")


COLUMNS = ["op", "rows", "k", "k_kind", "fuses", "rw_us", "old_us", "fused_us", "old_rw",
           "fused_rw", "old_fused", "status"]  # fmt: skip


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.1f}" if v >= 10 else f"{v:.3f}"
    return str(v)


def print_table(rows: list[dict], out=None, header: bool = True) -> None:
    out = out or sys.stdout
    if header:
        print(" | ".join(COLUMNS), file=out)
    for r in rows:
        print(" | ".join(_fmt(r.get(c, "")) for c in COLUMNS), file=out, flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true", help="tiny shapes on the CPU (interpreter)")
    p.add_argument("--per-row", action="store_true", help="also per-row k tensors")
    p.add_argument("--rows", type=int, nargs="*", help="row counts (default 256 4096)")
    p.add_argument("--k", type=int, nargs="*", help="k values (default 50 512)")
    p.add_argument("--repeats", type=int, default=20)
    a = p.parse_args(argv)
    device = "cpu" if a.cpu else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: run on a GPU, or with --cpu", file=sys.stderr)
        return 2
    if not a.cpu:
        return _run(a, device)
    if not _interpreting():
        print("--cpu runs the kernels in the interpreter: TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    # the kernels for CPU tensors too, for this run only (a caller's process keeps its
    # engine as it was)
    with mock.patch.object(engine, "_uses_kernels", lambda x: x.dtype in SUPPORTED_DTYPES):
        return _run(a, device)


def _run(a: argparse.Namespace, device: str) -> int:
    base = CPU if a.cpu else GPU
    if device == "cuda":
        print(f"# {torch.cuda.get_device_name()}, fp32, vocab {base['vocab']}", flush=True)
    cells = itertools.product(
        OPS, a.rows or base["rows"], a.k or base["k"], (False, True) if a.per_row else (False,)
    )
    rows = []
    for op, n_rows, k, per_row in cells:
        rows.append(run_cell(op, n_rows, base["vocab"], k, per_row, device, a.repeats))
        print_table(rows[-1:], out=sys.stderr, header=False)  # progress
    print_table(rows)
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
