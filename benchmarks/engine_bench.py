"""Engine operations timed beside the plain-torch way (and FlashInfer when it imports).

Three figures, one run:

* **Indexer** (sparse attention): decode (rows 1, 8, 64) and prefill (rows 1024,
  4096) over lengths 8K, 128K and 1M, k in {512, 2048}, fp32 and bf16. For each shape:
  ``deepselect.topk_rows`` on the scores (``select``), ``indexer_topk`` plain / ragged /
  paged — the *transform's overhead* is their time over ``select`` in percent (target
  <= 3 %; the four are timed interleaved, round by round, and the overhead is the
  median of the per-round ratios) — and the plain-torch way: ``torch.topk`` of the
  length-masked scores, then a gather through the page table (``torch_paged``;
  ``torch_topk`` is the bare top-k).
* **Sampler**: vocabulary 129,280, batch 1, 64, 1024, 4096, fp32 logits, k = 512:
  ``top_k_mask_logits`` (int k and per-row k with k_max = 1024), ``top_k_renorm_probs``
  and ``top_k_sampling_from_logits`` (multinomial and per-row seeds) beside the
  plain-torch way (a threshold at the k-th value from ``torch.topk``, or from a full
  ``torch.sort`` for per-row k; softmax + ``torch.multinomial``).
* **Indexer step**: the plain-torch lightning indexer's scores (64 heads, d = 128,
  bf16) and ``indexer_topk`` on them (k = 2048), timed apart
  (``bench.indexer.benchmark_indexer_split``): how a step splits between scoring
  and selecting, beside an unfused scorer.

Every row of a score matrix is valid to its full length, so ``select`` and the indexer
calls do the same selection and the difference is the transform alone. Timing uses
``deepselect.bench``: inputs rotate through copies that together exceed the L2 cache
(cold L2), CUDA events, warm-up, median of repeats. Shapes whose inputs exceed
``--max-gib`` are skipped. Small batches are timed as CUDA-graph replays
(``--graph auto``: rows <= 64, as a decode step runs, and calls of at most
``GRAPH_ELEMENTS`` scores, ~0.1 ms on an H200, whose eager time is the host's
launch path rather than the GPU's); a method that cannot be
captured is timed eagerly and marked so.

    python benchmarks/engine_bench.py [--quick] [--csv out/engine.csv]
    python benchmarks/engine_bench.py --device cpu --quick      # tiny shapes, any machine
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from deepselect import bench
from deepselect.api import topk_rows
from deepselect.bench.indexer import benchmark_indexer_split
from deepselect.engine import (
    indexer_topk,
    top_k_mask_logits,
    top_k_renorm_probs,
    top_k_sampling_from_logits,
)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
K8, K128, M1 = 1 << 13, 1 << 17, 1 << 20
VOCAB = 129_280
SAMPLER_K = 512
SAMPLER_K_MAX = 1024
# calls this small (prefill 1024 x 8K: ~0.1 ms) are timed as graph replays: eager, the
# host's launch path (~0.1 ms) races the GPU and decides the time
GRAPH_ELEMENTS = 1 << 24
TRANSFORMS = ("select", "plain", "ragged", "paged")  # timed together, interleaved

# (phase, rows) x lengths x k x dtype
INDEXER_FULL = dict(
    rows=[("decode", 1), ("decode", 8), ("decode", 64), ("prefill", 1024), ("prefill", 4096)],
    lengths=[K8, K128, M1],
    ks=[512, 2048],
    dtypes=["fp32", "bf16"],
)
INDEXER_QUICK = dict(  # (phase, rows, length) pairs: the figure's corners, bf16, k 2048
    shapes=[("decode", 1, K128), ("decode", 64, K128), ("decode", 64, M1), ("prefill", 4096, K128)],
    ks=[2048],
    dtypes=["bf16"],
)
SAMPLER_FULL = [1, 64, 1024, 4096]
SAMPLER_QUICK = [1, 4096]
CPU_INDEXER = dict(rows=[("decode", 1), ("decode", 4)], lengths=[K8, 1 << 16], ks=[512])
CPU_SAMPLER = [1, 4]
# the whole indexer step: plain-torch scoring (64 heads of d = 128, bf16) + selection
# (k = 2048); the scorer holds [rows, heads, N] fp32, so rows x N stays <= 8M
STEP_HEADS, STEP_D, STEP_K = 64, 128, 2048
STEP_FULL = [(1, K128), (64, K128), (1, M1), (8, M1)]
STEP_QUICK = [(1, K128), (8, M1)]
CPU_STEP = [(1, K8)]

COLUMNS = [
    "section",
    "phase",
    "rows",
    "n",
    "k",
    "dtype",
    "method",
    "median_us",
    "timed_calls",
    "graph",
    "vs_select_pct",
    "torch_over_method",
    "checked",
    "note",
]


def log(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------- shapes


def indexer_shapes(device: str, quick: bool) -> list[tuple[str, int, int, int, str]]:
    """``(phase, rows, n, k, dtype)`` of the indexer figure."""
    if device == "cpu":
        dts = ["bf16"] if quick else ["fp32", "bf16"]
        lens = CPU_INDEXER["lengths"][:1] if quick else CPU_INDEXER["lengths"]
        grid = [(p, r, n) for p, r in CPU_INDEXER["rows"] for n in lens]
        ks = CPU_INDEXER["ks"]
    elif quick:
        grid, ks, dts = INDEXER_QUICK["shapes"], INDEXER_QUICK["ks"], INDEXER_QUICK["dtypes"]
    else:
        grid = [(p, r, n) for p, r in INDEXER_FULL["rows"] for n in INDEXER_FULL["lengths"]]
        ks, dts = INDEXER_FULL["ks"], INDEXER_FULL["dtypes"]
    return [(p, r, n, k, d) for (p, r, n) in grid for k in ks for d in dts if k <= n]


def sampler_batches(device: str, quick: bool) -> list[int]:
    if device == "cpu":
        return CPU_SAMPLER[:1] if quick else CPU_SAMPLER
    return SAMPLER_QUICK if quick else SAMPLER_FULL


# --------------------------------------------------------------------------- timing


class Timer:
    """Times named calls on rotating cold-L2 inputs; records one CSV row per call."""

    def __init__(self, args, device: torch.device):
        self.args = args
        self.device = device
        self.cold = bench.cache_bytes(device)
        self.failed = ""

    def copies(self, rows: int, n: int, dtype: torch.dtype, seed: int) -> list[torch.Tensor]:
        case = bench.Case("indexer", dtype, rows, n, 1, "none")
        cps = bench.input_copies(case, "normal", self.device, cold_bytes=self.cold, seed=seed)
        return cps

    def use_graph(self, rows: int, n: int) -> bool:
        if self.device.type != "cuda" or self.args.graph == "off":
            return False
        return self.args.graph == "on" or rows <= 64 or rows * n <= GRAPH_ELEMENTS

    def time(self, fn: Callable, inputs, rows: int, n: int) -> tuple[float | None, int, str, str]:
        """``(median µs, timed calls, graph|eager, note)``; errors become a note."""
        res = self.time_group({"fn": fn}, inputs, rows, n)
        return res["fn"][:4] if res else (None, 0, "", self.failed)

    def time_group(self, fns: dict, inputs, rows: int, n: int) -> dict:
        """Calls timed interleaved (:func:`deepselect.bench.time_fns`): name -> ``(median
        µs, timed calls, graph|eager, note, samples µs)``; {} when they fail (the
        reason in ``self.failed``)."""
        graph = self.use_graph(rows, n)
        kw = dict(
            repeats=self.args.repeats, warmup=self.args.warmup, max_seconds=self.args.max_seconds
        )
        note = ""
        for mode in (graph, False) if graph else (False,):
            try:
                t = bench.time_fns(fns, inputs, self.device, graph=mode, **kw)
            except Exception as exc:  # a call that cannot be captured is timed eagerly
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                note = f"graph capture failed ({type(exc).__name__}); eager"
                self.failed = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
                continue
            how = "graph" if mode else "eager"
            return {
                name: (v.median_s * 1e6, len(v.samples), how, note, [x * 1e6 for x in v.samples])
                for name, v in t.items()
            }
        return {}


def _sets_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.to(torch.int64).sort(dim=1).values, b.to(torch.int64).sort(dim=1).values)


def _flashinfer():
    if importlib.util.find_spec("flashinfer") is None:
        return None
    try:
        import flashinfer

        return flashinfer
    except Exception:  # a broken install must not stop the benchmark
        return None


# --------------------------------------------------------------------------- indexer


def bench_indexer(timer: Timer, phase, rows, n, k, dname, fi) -> list[dict]:
    args, dev = timer.args, timer.device
    dtype = DTYPES[dname]
    base = dict(section="indexer", phase=phase, rows=rows, n=n, k=k, dtype=dname)
    nbytes = rows * n * dtype.itemsize
    # the torch path holds a masked copy and a token-level table may be built: ~3x input
    if 3 * nbytes > args.max_gib * 2**30:
        return [dict(base, method="all", note=f"skipped: 3 x {nbytes / 2**30:.1f} GiB > budget")]
    inputs = timer.copies(rows, n, dtype, seed=rows + n + k)
    lengths = torch.full((rows,), n, dtype=torch.int32, device=dev)
    offsets = (torch.arange(rows, dtype=torch.int32, device=dev) * 7919) % (1 << 30)
    ps = args.page_size
    pages = -(-n // ps)
    g = torch.Generator(device=dev).manual_seed(1)
    table = torch.randperm(rows * pages, generator=g, device=dev).to(torch.int32)
    table = table.view(rows, pages)
    out = torch.empty(rows, k, dtype=torch.int32, device=dev)
    col = torch.arange(n, device=dev)[None, :]
    ninf = torch.tensor(float("-inf"), dtype=dtype, device=dev)
    row_ids = torch.arange(rows, device=dev)[:, None]

    def torch_topk(x):
        return torch.topk(x, k, dim=1, sorted=False).indices

    def torch_paged(x):  # mask past the length, top-k, then map through the pages
        masked = torch.where(col < lengths[:, None], x, ninf)
        p = torch.topk(masked, k, dim=1, sorted=False).indices
        return table[row_ids, p // ps] * ps + p % ps

    methods: dict[str, Callable] = {
        "select": lambda x: topk_rows(
            x, k, index_dtype=torch.int32, return_values=False, out_indices=out
        ),
        "plain": lambda x: indexer_topk(x, lengths, k, out=out),
        "ragged": lambda x: indexer_topk(x, lengths, k, ragged_offsets=offsets, out=out),
        "paged": lambda x: indexer_topk(x, lengths, k, page_table=table, page_size=ps, out=out),
        "torch_topk": torch_topk,
        "torch_paged": torch_paged,
    }
    if fi is not None and dev.type == "cuda":
        if hasattr(fi, "top_k"):
            methods["flashinfer_top_k"] = lambda x: fi.top_k(x, k)
        if hasattr(fi, "top_k_ragged_transform"):
            methods["flashinfer_ragged"] = lambda x: fi.top_k_ragged_transform(
                x, offsets, lengths, k
            )
        if hasattr(fi, "top_k_page_table_transform") and 12 * rows * n < args.max_gib * 2**30:
            # FlashInfer's table is token-level ([rows, max_len]): the same mapping expanded
            col32 = torch.arange(n, dtype=torch.int32, device=dev)
            tok = table.repeat_interleave(ps, dim=1)[:, :n] * ps + col32 % ps
            methods["flashinfer_paged"] = lambda x: fi.top_k_page_table_transform(
                x, tok, lengths, k
            )

    # correctness first, on one copy: the indexer calls against the plain select
    x0 = inputs[0]
    sel = topk_rows(x0, k, index_dtype=torch.int32, return_values=False)[1]
    checked = {
        "select": "ref",
        "plain": _sets_equal(indexer_topk(x0, lengths, k), sel),
        "ragged": _sets_equal(
            indexer_topk(x0, lengths, k, ragged_offsets=offsets), sel + offsets[:, None]
        ),
        "paged": _sets_equal(
            indexer_topk(x0, lengths, k, page_table=table, page_size=ps),
            table[row_ids, sel.long() // ps] * ps + sel.long() % ps,
        ),
    }
    # the select and its three indexer forms timed interleaved, round by round: their
    # differences (a few %) are smaller than the spread between separate runs
    group = timer.time_group({m: methods[m] for m in TRANSFORMS}, inputs, rows, n)
    results = []
    for name, fn in methods.items():
        got = group.get(name) or timer.time(fn, inputs, rows, n)
        us, calls, mode, note = got[:4]
        ok = checked.get(name, "")
        results.append(
            dict(base, method=name, median_us=us, timed_calls=calls, graph=mode, note=note,
                 checked=ok if isinstance(ok, str) else ("exact" if ok else "MISMATCH"))
        )  # fmt: skip
        if name != "select" and name in group:  # paired: the median of per-round ratios
            pairs = zip(group[name][4], group["select"][4], strict=True)
            results[-1]["vs_select_pct"] = 100.0 * (statistics.median(a / b for a, b in pairs) - 1)
    by = {r["method"]: r["median_us"] for r in results}
    for r in results:
        t = r["median_us"]
        ref = by.get("torch_paged") if r["method"] != "torch_topk" else None
        if t and ref and r["method"] not in ("torch_paged",):
            r["torch_over_method"] = ref / t
    del inputs
    return results


def bench_step(timer: Timer, rows: int, n: int) -> list[dict]:
    """The indexer step split into scoring and selection
    (:func:`deepselect.bench.indexer.benchmark_indexer_split`)."""
    r = benchmark_indexer_split(
        rows, STEP_HEADS, STEP_D, n, min(STEP_K, n), device=timer.device,
        repeats=timer.args.repeats,
    )  # fmt: skip
    base = dict(section="step", phase="step", rows=rows, n=n, k=r["k"], dtype="bf16")
    base["graph"] = "graph" if r["graph"] else "eager"
    share = f"selection {100 * r['topk_share']:.1f}% of the step"
    return [
        dict(base, method="scores", median_us=r["scores_ms"] * 1e3),
        dict(base, method="select", median_us=r["topk_ms"] * 1e3, note=share),
    ]


# --------------------------------------------------------------------------- sampler


def bench_sampler(timer: Timer, batch: int, fi) -> list[dict]:
    dev = timer.device
    k, kmax = SAMPLER_K, SAMPLER_K_MAX
    base = dict(section="sampler", phase="sample", rows=batch, n=VOCAB, k=k, dtype="fp32")
    logits = timer.copies(batch, VOCAB, torch.float32, seed=batch)
    probs = [torch.softmax(x, dim=1) for x in logits]
    g = torch.Generator().manual_seed(batch)
    krow = torch.randint(1, kmax + 1, (batch,), generator=g, dtype=torch.int32).to(dev)
    seeds = torch.randint(0, 2**62, (batch,), generator=g).to(dev)
    ninf = torch.tensor(float("-inf"), device=dev)
    zero = torch.tensor(0.0, device=dev)

    def torch_mask(x):  # the usual way: keep what reaches the k-th value
        thr = torch.topk(x, k, dim=1).values[:, -1:]
        return torch.where(x < thr, ninf, x)

    def torch_mask_rowk(x):  # per-row k: a full sort, then each row's k-th value
        s = torch.sort(x, dim=1, descending=True).values
        thr = s.gather(1, (krow.long() - 1).clamp(min=0)[:, None])
        return torch.where(x < thr, ninf, x)

    def torch_renorm(p):
        thr = torch.topk(p, k, dim=1).values[:, -1:]
        kept = torch.where(p < thr, zero, p)
        return kept / kept.sum(dim=1, keepdim=True)

    def torch_sample(x):
        return torch.multinomial(torch.softmax(torch_mask(x), dim=1), 1).squeeze(1)

    # (name, fn, inputs, reference name for the speedup)
    methods: list[tuple[str, Callable, list, str | None]] = [
        ("mask", lambda x: top_k_mask_logits(x, k), logits, "torch_mask"),
        ("torch_mask", torch_mask, logits, None),
        ("mask_rowk", lambda x: top_k_mask_logits(x, krow, k_max=kmax), logits, "torch_mask_rowk"),
        ("torch_mask_rowk", torch_mask_rowk, logits, None),
        ("renorm", lambda p: top_k_renorm_probs(p, k), probs, "torch_renorm"),
        ("torch_renorm", torch_renorm, probs, None),
        ("sample", lambda x: top_k_sampling_from_logits(x, k), logits, "torch_sample"),
        ("sample_seeds", lambda x: top_k_sampling_from_logits(x, k, seeds=seeds), logits,
         "torch_sample"),
        ("torch_sample", torch_sample, logits, None),
    ]  # fmt: skip
    fs = getattr(fi, "sampling", None) if dev.type == "cuda" else None
    if fs is not None:
        for name, fname, inp in [
            ("flashinfer_mask", "top_k_mask_logits", logits),
            ("flashinfer_renorm", "top_k_renorm_probs", probs),
            ("flashinfer_sample", "top_k_sampling_from_logits", logits),
        ]:
            f = getattr(fs, fname, None)
            if f is not None:
                ref = "torch_" + name.split("_", 1)[1]
                methods.append((name, lambda x, f=f: f(x, k), inp, ref))

    # correctness first: int k keeps exactly k per row, and equals torch's threshold
    # mask on every row whose k-th and (k+1)-th values differ (no tie at the border)
    x0 = logits[0]
    ours = top_k_mask_logits(x0, k)
    border = torch.topk(x0, min(k + 1, VOCAB), dim=1).values[:, k - 1 :]
    distinct = border[:, 0] != border[:, -1]
    same = (ours == torch_mask(x0)).all(dim=1)
    exact_k = (ours != float("-inf")).sum(dim=1) == k
    check = "exact" if bool((exact_k & (same | ~distinct)).all()) else "MISMATCH"

    results = []
    for name, fn, inp, _ in methods:
        us, calls, mode, note = timer.time(fn, inp, batch, VOCAB)
        row = dict(base, method=name, median_us=us, timed_calls=calls, graph=mode, note=note)
        if name == "mask":
            row["checked"] = check
        if name == "mask_rowk":
            row["k"] = f"rows<={kmax}"
        results.append(row)
    by = {r["method"]: r["median_us"] for r in results}
    for (_name, _, _, ref), r in zip(methods, results, strict=True):
        if ref and r["median_us"] and by.get(ref):
            r["torch_over_method"] = by[ref] / r["median_us"]
    return results


# --------------------------------------------------------------------------- output


def write_csv(rows: list[dict], path: str) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            cells = {c: r.get(c, "") for c in COLUMNS}
            w.writerow({c: f"{v:.6g}" if isinstance(v, float) else v for c, v in cells.items()})


def _t(us) -> str:
    return bench.format_time(us) if us else "—"


def _pct(r) -> str:
    v = None if r is None else r.get("vs_select_pct")
    return "—" if v is None else f"{v:+.1f}%"


def _x(a, b) -> str:
    """``a / b`` as a speedup, or a dash."""
    return f"{a / b:.1f}x" if a and b else "—"


INDEXER_HEAD = (
    f"{'phase':7} {'rows':>5} {'n':>5} {'dtype':5} {'k':>4} | {'select':>9} {'plain':>7} "
    f"{'ragged':>7} {'paged':>7} | {'torch_paged':>11} {'speedup':>7} | {'flashinfer':>10}"
)
SAMPLER_HEAD = (
    f"{'batch':>5} | {'mask':>9} {'torch':>9} {'x':>5} | {'mask_rowk':>9} {'torch':>9} {'x':>5} | "
    f"{'renorm':>9} {'torch':>9} {'x':>5} | {'sample':>9} {'seeds':>9} {'torch':>9} {'x':>5} | "
    f"{'flashinfer mask/renorm/sample'}"
)


def summary_lines(rows: list[dict]) -> list[str]:
    """One line per shape. Indexer: ``select``'s time, the plain / ragged / paged
    overheads over it, the plain-torch paged time and its ratio to ``paged``.
    Sampler: deepselect's time, the plain-torch time and their ratio per operation."""
    shapes: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        key = (r["section"], r["phase"], r["rows"], r["n"], r["dtype"])
        key += (str(r["k"]) if r["section"] != "sampler" else "",)
        shapes.setdefault(key, {})[r["method"]] = r
    lines = []
    for (sec, phase, nrows, n, dname, k), by in shapes.items():
        us = {m: r.get("median_us") for m, r in by.items()}
        flags = [m for m, r in by.items() if r.get("checked") == "MISMATCH"]
        flags += [f"{m} failed" for m, r in by.items() if str(r.get("note", "")).startswith("fail")]
        if "all" in by:
            flags.append(by["all"].get("note", ""))
        if sec == "step":
            s, t = us.get("scores"), us.get("select")
            share = 100 * t / (s + t) if s and t else float("nan")
            line = (
                f"{nrows:>5} {bench.format_size(n):>5} {k:>4} | {_t(s):>9} {_t(t):>9} {share:5.1f}%"
            )
        elif sec == "indexer":
            line = (
                f"{phase:7} {nrows:>5} {bench.format_size(n):>5} {dname:5} {k:>4} | "
                f"{_t(us.get('select')):>9} {_pct(by.get('plain')):>7} "
                f"{_pct(by.get('ragged')):>7} {_pct(by.get('paged')):>7} | "
                f"{_t(us.get('torch_paged')):>11} {_x(us.get('torch_paged'), us.get('paged')):>7}"
                f" | {_t(us.get('flashinfer_paged')):>10}"
            )
        else:
            cells = []
            for ours, ref in [("mask", "torch_mask"), ("mask_rowk", "torch_mask_rowk"),
                              ("renorm", "torch_renorm")]:  # fmt: skip
                cells.append(
                    f"{_t(us.get(ours)):>9} {_t(us.get(ref)):>9} {_x(us.get(ref), us.get(ours)):>5}"
                )
            cells.append(
                f"{_t(us.get('sample')):>9} {_t(us.get('sample_seeds')):>9} "
                f"{_t(us.get('torch_sample')):>9} {_x(us.get('torch_sample'), us.get('sample')):>5}"
            )
            fi = [_t(us.get(f"flashinfer_{m}")) for m in ("mask", "renorm", "sample")]
            line = f"{nrows:>5} | " + " | ".join(cells) + " | " + "/".join(fi)
        lines.append(line + ("  " + "; ".join(flags) if flags else ""))
    return lines


def print_tables(rows: list[dict]) -> None:
    ind = [r for r in rows if r["section"] == "indexer"]
    smp = [r for r in rows if r["section"] == "sampler"]
    step = [r for r in rows if r["section"] == "step"]
    if ind:
        log("\nindexer: select = topk_rows on the scores; plain/ragged/paged = indexer_topk's")
        log("overhead over select; speedup = torch_paged / paged (masked torch.topk + gather)")
        log(INDEXER_HEAD)
        for line in summary_lines(ind):
            log(line)
    if smp:
        log(f"\nsampler: V = {VOCAB:,}, fp32, k = {SAMPLER_K} (mask_rowk: per-row k <= "
            f"{SAMPLER_K_MAX}); x = plain-torch time / deepselect's")  # fmt: skip
        log(SAMPLER_HEAD)
        for line in summary_lines(smp):
            log(line)
    if step:
        log(f"\nindexer step: plain-torch lightning indexer scores ({STEP_HEADS} heads, d = "
            f"{STEP_D}, bf16; unfused) then indexer_topk; share = selection / step")  # fmt: skip
        log(f"{'rows':>5} {'N':>5} {'k':>4} | {'scores':>9} {'select':>9} {'share':>6}")
        for line in summary_lines(step):
            log(line)


# --------------------------------------------------------------------------- main


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--quick", action="store_true", help="a few shapes: < 60 s on an H200")
    ap.add_argument("--csv", default=None, help="write every timing here")
    ap.add_argument("--only", choices=["indexer", "sampler", "step"], default=None)
    ap.add_argument("--repeats", type=int, default=None, help="timed calls (median)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--max-seconds", type=float, default=None, help="per method, timed part")
    ap.add_argument("--max-gib", type=float, default=48.0, help="skip shapes beyond this memory")
    ap.add_argument("--page-size", type=int, default=64)
    ap.add_argument("--graph", choices=["auto", "on", "off"], default="auto")
    ap.add_argument(
        "--match",
        default=None,
        help="only indexer shapes whose 'phase rows n k dtype' (e.g. 'prefill 4096 8192 "
        "512 bf16') matches this regular expression",
    )
    args = ap.parse_args(argv)
    cpu = torch.device(args.device).type == "cpu"
    if args.repeats is None:
        args.repeats = 5 if cpu else (10 if args.quick else 20)
    if args.max_seconds is None:
        args.max_seconds = 0.5 if cpu or args.quick else 2.0
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: use --device cpu", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    fi = _flashinfer() if device.type == "cuda" else None
    timer = Timer(args, device)
    dev_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    log(
        f"engine_bench on {dev_name}: torch {torch.__version__}, flashinfer "
        f"{getattr(fi, '__version__', 'yes') if fi else 'not importable'}, "
        f"{'quick' if args.quick else 'full'}, repeats {args.repeats}, graph {args.graph}"
    )
    t0 = time.perf_counter()
    rows: list[dict] = []
    jobs = []
    if args.only in (None, "indexer"):
        shapes = indexer_shapes(device.type, args.quick)
        if args.match:
            pat = re.compile(args.match)
            shapes = [s for s in shapes if pat.search(" ".join(map(str, s)))]
        jobs += [("indexer", s) for s in shapes]
    if args.only in (None, "sampler"):
        jobs += [("sampler", b) for b in sampler_batches(device.type, args.quick)]
    if args.only in (None, "step"):
        steps = CPU_STEP if device.type == "cpu" else STEP_QUICK if args.quick else STEP_FULL
        jobs += [("step", s) for s in steps]
    for i, (kind, spec) in enumerate(jobs):
        t = time.perf_counter()
        if kind == "indexer":
            res = bench_indexer(timer, *spec, fi)
        elif kind == "step":
            res = bench_step(timer, *spec)
        else:
            res = bench_sampler(timer, spec, fi)
        rows += res
        if device.type == "cuda":
            torch.cuda.empty_cache()
        log(
            f"[{i + 1}/{len(jobs)} {time.perf_counter() - t:5.1f} s] {kind} {summary_lines(res)[0]}"
        )
        if args.csv:  # written as it goes: a run cut short keeps what it measured
            write_csv(rows, args.csv)
    log(f"\n==== engine operations ({time.perf_counter() - t0:.0f} s)")
    print_tables(rows)
    bad = [r for r in rows if r.get("checked") == "MISMATCH"]
    if bad:
        log(f"{len(bad)} MISMATCH rows: results differ from the plain select")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
