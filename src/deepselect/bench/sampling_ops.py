"""``deepselect bench --scenario sampling-ops``: the engine's sampling operations
against FlashInfer's and against one read + one write of the logits (``x * 1.0``).

Grid (GPU): op {top_k_mask_logits, top_k_renorm_probs, top_k_sampling_from_logits,
top_k_sampling_from_probs, top_k_top_p_sampling_from_logits / _from_probs (top_p =
0.9), top_p_sampling_from_probs (k = 0: top-p over whole rows, once a shape)} x
batch {1, 64, 256, 1024, 4096} x vocab {129280, 152064} x
k {50, 512, 1024} x k {an int, a per-row tensor}; ``--quick`` a subset that runs in
about a minute. Each case: deepselect eager and CUDA-graph replay, FlashInfer's same
op (eager and replay; empty columns where ``flashinfer`` does not import or has no
such op), the ``x * 1.0`` time, and the ratios. Inputs are fp32 normal logits (the
softmax of them for the probability ops); per-row k is drawn in ``[k/2, k]`` with
``k_max = k``; draws are seeded (``seeds=``, graph-safe). On the CPU the same table on
tiny shapes (eager only), so the command is tested without a GPU.

    deepselect bench --scenario sampling-ops --quick --csv ops.csv --plot plots/
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import itertools
from collections.abc import Callable
from pathlib import Path

import torch

from .. import engine
from .report import progress_bar
from .timing import cold_copies, time_fns

OPS = (
    "top_k_mask_logits",
    "top_k_renorm_probs",
    "top_k_sampling_from_logits",
    "top_k_sampling_from_probs",
    "top_k_top_p_sampling_from_logits",
    "top_k_top_p_sampling_from_probs",
    "top_p_sampling_from_probs",
)
TOP_P_ONLY = "top_p_sampling_from_probs"  # ours: k = 0 (whole rows), one case a shape
TOP_P = 0.9  # the top-p operations' threshold (a float: FlashInfer's scalar form)
GRID = dict(batch=(1, 64, 256, 1024, 4096), vocab=(129280, 152064), k=(50, 512, 1024))
QUICK = dict(batch=(1, 256, 4096), vocab=(129280,), k=(50, 512))
CPU_GRID = dict(batch=(1, 4), vocab=(1000,), k=(50,))
MAX_COPIES = 32  # input copies rotated for a cold cache (small inputs, eager calls)

COLUMNS = [
    "op", "batch", "vocab", "k", "k_kind", "ds_eager_us", "ds_graph_us", "fi_eager_us",
    "fi_graph_us", "rw_us", "fi_over_ds_eager", "fi_over_ds_graph", "ds_graph_over_rw",
    "status",
]  # fmt: skip


def _flashinfer_ops() -> dict[str, Callable]:
    """FlashInfer's sampling functions by our op names (those it has), or none."""
    if importlib.util.find_spec("flashinfer") is None:
        return {}
    try:
        from flashinfer import sampling
    except Exception:  # noqa: BLE001 - a broken install is an absent library here
        return {}
    return {op: getattr(sampling, op) for op in OPS if hasattr(sampling, op)}


def _inputs(op: str, batch: int, vocab: int, k: int, per_row: bool, device: str, seed: int):
    """``(copies, ours, theirs_args)``: input copies and the two calls' k arguments."""
    g = torch.Generator(device=device).manual_seed(seed)
    xs = []
    for _ in range(cold_copies(batch * vocab * 4, device, MAX_COPIES)):
        x = torch.randn(batch, vocab, device=device, generator=g)
        xs.append(torch.softmax(x, dim=1) if "probs" in op else x)
    if per_row:
        kt = torch.randint(max(1, k // 2), k + 1, (batch,), device=device, generator=g)
        return xs, dict(k=kt, k_max=k), kt.to(torch.int32)
    return xs, dict(k=k), k


def _ours(op: str, kw: dict, batch: int, device: str) -> Callable:
    if op == TOP_P_ONLY:
        seeds = torch.arange(batch, dtype=torch.int64, device=device)
        return lambda x: engine.top_k_top_p_sampling_from_probs(x, 0, TOP_P, seeds=seeds)
    fn = getattr(engine, op)
    if "top_p" in op:
        seeds = torch.arange(batch, dtype=torch.int64, device=device)
        return lambda x: fn(x, kw["k"], TOP_P, seeds=seeds, k_max=kw.get("k_max"))
    if "sampling" in op:
        seeds = torch.arange(batch, dtype=torch.int64, device=device)
        return lambda x: fn(x, kw["k"], seeds=seeds, k_max=kw.get("k_max"))
    return lambda x: fn(x, kw["k"], k_max=kw.get("k_max"))


def _theirs(op: str, fn: Callable, top_k) -> Callable:
    if op == TOP_P_ONLY:
        return lambda x: fn(x, TOP_P, deterministic=True)
    if "top_p" in op:
        return lambda x: fn(x, top_k, TOP_P, deterministic=True)
    if "sampling" in op:
        return lambda x: fn(x, top_k, deterministic=True)
    return lambda x: fn(x, top_k)


def _us(t) -> float | None:
    return None if t is None else t.median_s * 1e6


def _ratio(a, b) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def run_case(op, batch, vocab, k, per_row, device, repeats, seed, fi_ops) -> dict:
    """One row of the table (``status`` says why a column is empty)."""
    row = dict(op=op, batch=batch, vocab=vocab, k=k, k_kind="per-row" if per_row else "int")
    xs, kw, top_k = _inputs(op, batch, vocab, k, per_row, device, seed)
    eager = {"ds": _ours(op, kw, batch, device), "rw": lambda x: x * 1.0}
    if op in fi_ops:
        eager["fi"] = _theirs(op, fi_ops[op], top_k)
    warm = 0 if device == "cpu" else 3
    times = time_fns(eager, xs, device, repeats=repeats, warmup=warm)
    row.update(
        ds_eager_us=_us(times["ds"]), rw_us=_us(times["rw"]), fi_eager_us=_us(times.get("fi"))
    )
    notes = []
    if device == "cuda":
        for name in [n for n in ("ds", "fi") if n in eager]:
            try:
                t = time_fns(
                    {name: eager[name]}, xs, device, repeats=repeats, warmup=warm, graph=True
                )
                row[f"{name}_graph_us"] = _us(t[name])
            except Exception as exc:  # noqa: BLE001 - a call that cannot be captured
                notes.append(f"{name} graph: {type(exc).__name__}")
    row["fi_over_ds_eager"] = _ratio(row.get("fi_eager_us"), row["ds_eager_us"])
    row["fi_over_ds_graph"] = _ratio(row.get("fi_graph_us"), row.get("ds_graph_us"))
    row["ds_graph_over_rw"] = _ratio(row.get("ds_graph_us"), row["rw_us"])
    row["status"] = "; ".join(notes) or "ok"
    return row


def grid(args: argparse.Namespace, device: str) -> list[tuple]:
    """The run's cases ``(op, batch, vocab, k, per_row)``: the grid for the device,
    narrowed by ``--batch``, ``--n`` (vocabularies) and ``--k``."""
    base = CPU_GRID if device == "cpu" else (QUICK if args.quick else GRID)
    batches = args.batch or base["batch"]
    vocabs = args.n or base["vocab"]
    ks = args.k or base["k"]
    cases = [
        (op, b, v, k, per_row)
        for op, b, v, k, per_row in itertools.product(OPS, batches, vocabs, ks, (False, True))
        if k < v and op != TOP_P_ONLY
    ]
    return cases + [(TOP_P_ONLY, b, v, 0, False) for b in batches for v in vocabs]


def _fmt(v) -> str:
    if v is None:
        return ""
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def print_table(rows: list[dict]) -> None:
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in COLUMNS}
    print("  ".join(c.rjust(widths[c]) for c in COLUMNS))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).rjust(widths[c]) for c in COLUMNS))


def write_csv(rows: list[dict], path: str | Path, info: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = COLUMNS + sorted(info)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: _fmt({**r, **info}.get(c)) for c in cols})
    return path


def plot(rows: list[dict], out_dir: str | Path) -> list[Path]:
    """One PNG per op: deepselect's time over FlashInfer's (graph replay where timed,
    else eager) and over the read + write, against batch, one line per (vocab, k, kind)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for op in OPS:
        mine = [r for r in rows if r["op"] == op and r.get("ds_eager_us")]
        if not mine:
            continue
        fig = Figure(figsize=(11, 4))
        FigureCanvasAgg(fig)
        for ax, (num, den, title) in zip(
            fig.subplots(1, 2),
            (("ds", "fi", "deepselect / FlashInfer"), ("ds", "rw", "deepselect / (x * 1.0)")),
            strict=True,
        ):
            keys = sorted({(r["vocab"], r["k"], r["k_kind"]) for r in mine})
            for key in keys:
                pts = []
                for r in sorted((r for r in mine if (r["vocab"], r["k"], r["k_kind"]) == key),
                                key=lambda r: r["batch"]):  # fmt: skip
                    a = r.get(f"{num}_graph_us") or r.get(f"{num}_eager_us")
                    b = r.get(f"{den}_graph_us") or r.get(f"{den}_eager_us") or r.get("rw_us")
                    if a and b:
                        pts.append((r["batch"], a / b))
                if pts:
                    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                    ax.plot(xs, ys, marker="o", label=f"V={key[0]} k={key[1]} {key[2]}")
            ax.set_xscale("log", base=2)
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_title(f"{op}: {title}")
            ax.set_xlabel("batch")
            ax.set_ylabel("time ratio (lower is faster)")
            ax.legend(fontsize=6)
        path = out_dir / f"sampling_ops_{op}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        paths.append(path)
    return paths


def main(args: argparse.Namespace) -> int:
    """Run the grid behind a progress bar; print the table, write the CSV and the plots
    asked for."""
    from rich.console import Console

    from .. import runinfo

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        print("deepselect bench: --device cuda: no CUDA device is available")
        return 2
    repeats = args.repeats or (
        (3 if args.quick else 5) if device == "cpu" else (10 if args.quick else 20)
    )
    fi_ops = _flashinfer_ops() if device == "cuda" else {}
    print(f"sampling ops on {device}; FlashInfer: {', '.join(fi_ops) or 'not available'}")
    rows = []
    cases = grid(args, device)
    with progress_bar(Console(stderr=True)) as progress:
        task = progress.add_task("sampling-ops", total=len(cases))
        for case in cases:
            op, b, v, k, per_row = case
            kind = "per-row" if per_row else "int"
            progress.update(task, description=f"{op} b={b} V={v} k={k} {kind}")
            try:
                rows.append(run_case(*case, device, repeats, args.seed, fi_ops))
            except Exception as exc:  # noqa: BLE001 - one broken case must not lose the others
                rows.append(
                    dict(op=op, batch=b, vocab=v, k=k, k_kind=kind, status=f"error: {exc}")
                )
                if device == "cuda":
                    torch.cuda.empty_cache()
            progress.advance(task)
    print_table(rows)
    if args.csv:
        print(f"CSV: {write_csv(rows, args.csv, runinfo.run_info(device))}")
    if args.plot:
        for path in plot(rows, args.plot):
            print(f"plot: {path}")
    return 0 if all(not str(r["status"]).startswith("error") for r in rows) else 1
