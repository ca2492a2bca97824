"""Sharded top-k timed against gathering the rows: ``deepselect.distributed.topk``.

Launched with torchrun, one process per GPU (NCCL), or on the CPU over gloo::

    torchrun --nproc-per-node 2 benchmarks/distributed_bench.py [--quick] [--csv out/dist.csv]
    torchrun --nproc-per-node 2 benchmarks/distributed_bench.py --device cpu --quick

Cases (per-rank shard x world): a vocabulary-parallel output layer, 129,280 fp32
logits per rank, k = 512 sorted, batch 256 and 4096; a context-parallel indexer,
512K bf16 scores per rank, k = 2048 unsorted, batch 64. Methods:

* ``sharded``: ``deepselect.distributed.topk`` (local select, one all-gather of the
  k candidates per rank with int32 indices, merge);
* ``gather+torch``: all-gather the whole rows, then ``torch.topk`` (the usual way);
* ``gather+deepselect``: all-gather the whole rows, then ``deepselect.topk_rows``
  (separates the exchange from the selection).

Bytes per row are what one rank receives: ``world * k * (value + index bytes)`` for
``sharded`` (:func:`deepselect.distributed.exchange_bytes`) and the whole row for the
gathers (:func:`deepselect.distributed.gather_bytes`). Every rank runs the same calls
in the same order (no early stop: a rank that stopped early would hang the others);
each rank takes the median of its calls and the table shows the slowest rank's.
``sharded`` is checked bit for bit against ``gather+deepselect`` before it is timed.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from deepselect import bench
from deepselect.api import topk_rows
from deepselect.distributed import exchange_bytes, gather_bytes, topk

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# name, rows, columns per rank, dtype, k, order
CASES_GPU = [
    ("vocabulary", 256, 129_280, "fp32", 512, "value"),
    ("vocabulary", 4096, 129_280, "fp32", 512, "value"),
    ("indexer", 64, 1 << 19, "bf16", 2048, "none"),
]
CASES_CPU = [
    ("vocabulary", 4, 8_080, "fp32", 64, "value"),
    ("vocabulary", 32, 8_080, "fp32", 64, "value"),
    ("indexer", 4, 1 << 15, "bf16", 256, "none"),
]
COLUMNS = [
    "case",
    "rows",
    "n_per_rank",
    "world",
    "dtype",
    "k",
    "order",
    "method",
    "median_us",
    "min_rank_us",
    "bytes_per_row",
    "checked",
    "backend",
]


def all_gather_rows(x: torch.Tensor, world: int) -> torch.Tensor:
    """``[rows, world * n]``: every rank's ``[rows, n]`` shard side by side."""
    rows, n = x.shape
    out = torch.empty((world * rows, n), dtype=x.dtype, device=x.device)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(out, x.contiguous())
    return out.view(world, rows, n).permute(1, 0, 2).reshape(rows, world * n)


def same_result(a, b, ordered: bool) -> bool:
    """Bitwise-equal values and equal indices (as sets per row when unordered)."""
    (av, ai), (bv, bi) = a, b
    ai, bi = ai.to(torch.int64), bi.to(torch.int64)
    if not ordered:
        ai, pa = ai.sort(dim=1)
        bi, pb = bi.sort(dim=1)
        av, bv = av.gather(1, pa), bv.gather(1, pb)
    itype = {2: torch.int16, 4: torch.int32}[av.element_size()]
    return torch.equal(ai, bi) and torch.equal(av.view(itype), bv.view(itype))


def slowest(us: float, device: torch.device) -> tuple[float, float]:
    """(max, min) of a per-rank number over the ranks."""
    t = torch.tensor([us, -us], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t[0]), -float(t[1])


def run_case(args, device, world, rank, name, rows, n, dname, k, order) -> list[dict]:
    dtype = DTYPES[dname]
    cold = bench.cache_bytes(device)
    case = bench.Case(name, dtype, rows, n, k, order)
    inputs = bench.input_copies(case, "normal", device, cold_bytes=cold, seed=17 + rank)
    sizes = [n] * world
    ordered = order == "value"

    def sharded(x):
        return topk(x, k, order=order, index_dtype=torch.int32, shard_sizes=sizes)

    def gather_torch(x):
        full = all_gather_rows(x, world)
        return torch.topk(full, k, dim=1, sorted=ordered)

    def gather_ds(x):
        full = all_gather_rows(x, world)
        return topk_rows(full, k, order=order, index_dtype=torch.int32)

    # correctness first (collectives in the same order on every rank)
    got = sharded(inputs[0])
    want = gather_ds(inputs[0])
    ok = torch.tensor([1 if same_result(got, want, ordered) else 0], device=device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    checked = "exact" if int(ok) == 1 else "MISMATCH"

    base = dict(case=name, rows=rows, n_per_rank=n, world=world, dtype=dname, k=k, order=order)
    base["backend"] = dist.get_backend()
    results = []
    for method, fn, nbytes in [
        ("sharded", sharded, exchange_bytes(k, world, dtype, torch.int32)),
        ("gather+torch", gather_torch, gather_bytes(world * n, dtype)),
        ("gather+deepselect", gather_ds, gather_bytes(world * n, dtype)),
    ]:
        dist.barrier()
        t = bench.time_fn(fn, inputs, device, repeats=args.repeats, warmup=args.warmup)
        hi, lo = slowest(t.median_s * 1e6, device)
        row = dict(base, method=method, median_us=hi, min_rank_us=lo, bytes_per_row=nbytes)
        row["checked"] = checked if method == "sharded" else ""
        results.append(row)
    del inputs
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return results


def table(rows: list[dict]) -> list[str]:
    head = (
        f"{'case':10} {'rows':>5} {'n/rank':>7} {'dtype':5} {'k':>5} | {'sharded':>9} "
        f"{'gather+torch':>12} {'gather+ds':>10} {'speedup':>7} | {'B/row sharded':>13} "
        f"{'B/row gather':>12} {'ratio':>6}"
    )
    out = [head]
    groups: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        groups.setdefault((r["case"], r["rows"], r["n_per_rank"], r["dtype"], r["k"]), {})[
            r["method"]
        ] = r
    for (name, nrows, n, dname, k), by in groups.items():
        s, g, d = by["sharded"], by["gather+torch"], by["gather+deepselect"]
        line = (
            f"{name:10} {nrows:>5} {bench.format_size(n):>7} {dname:5} {k:>5} | "
            f"{bench.format_time(s['median_us']):>9} {bench.format_time(g['median_us']):>12} "
            f"{bench.format_time(d['median_us']):>10} {g['median_us'] / s['median_us']:>6.1f}x | "
            f"{s['bytes_per_row']:>13,} {g['bytes_per_row']:>12,} "
            f"{g['bytes_per_row'] / s['bytes_per_row']:>5.0f}x"
        )
        if s["checked"] != "exact":
            line += "  MISMATCH"
        out.append(line)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--quick", action="store_true", help="fewer repeats (same shapes)")
    ap.add_argument("--csv", default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args(argv)
    if args.repeats is None:
        args.repeats = 10 if args.quick else 30
    device = torch.device(args.device)
    if "RANK" not in os.environ:
        print("launch with torchrun --nproc-per-node 2 ...", file=sys.stderr)
        return 2
    local = int(os.environ.get("LOCAL_RANK", 0))
    if device.type == "cuda":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    cases = CASES_GPU if device.type == "cuda" else CASES_CPU

    def say(msg):
        if rank == 0:
            print(msg, flush=True)

    say(
        f"distributed_bench: world {world}, backend {dist.get_backend()}, device "
        f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}, "
        f"repeats {args.repeats}"
    )
    rows: list[dict] = []
    t0 = time.perf_counter()
    try:
        for i, c in enumerate(cases):
            t = time.perf_counter()
            rows += run_case(args, device, world, rank, *c)
            say(f"[{i + 1}/{len(cases)} {time.perf_counter() - t:5.1f} s] {table(rows)[-1]}")
    finally:
        if rank == 0 and rows:
            print(f"\n==== sharded top-k over {world} ranks ({time.perf_counter() - t0:.0f} s; "
                  "time of the slowest rank; speedup = gather+torch / sharded;")  # fmt: skip
            print("bytes each rank receives per row)")
            print("\n".join(table(rows)), flush=True)
            if args.csv:
                p = Path(args.csv)
                p.parent.mkdir(parents=True, exist_ok=True)
                with p.open("w", newline="") as f:
                    w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
                    w.writeheader()
                    for r in rows:
                        w.writerow(
                            {c: f"{v:.6g}" if isinstance(v, float) else v for c, v in r.items()}
                        )
        dist.destroy_process_group()
    return 1 if any(r.get("checked") == "MISMATCH" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
