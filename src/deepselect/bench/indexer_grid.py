"""``deepselect bench --scenario indexer-grid``: the sparse-attention indexer's shapes
in one run, beside FlashInfer's two top-k modes and a plain read, each cell judged
against the indexer's targets.

The grid: dtype {fp32, bf16} x N {8K, 16K, 32K, 64K, 128K, 1M} x batch {1, 8, 64, 512,
4096} x k {512, 2048}, unsorted (:func:`deepselect.topk_rows`, values and int32
indices, as ``flashinfer.top_k`` returns them), and per dtype and k two window cases
through :func:`deepselect.engine.indexer_topk` with lengths (indices only): the ragged
causal prefill (4096 rows, row r of length N - 4095 + r, N = 128K) and decode (64 rows,
lengths uniform in [N/2, N], N = 1M). FlashInfer's window counterpart is
``top_k_ragged_transform`` with zero offsets, the same work.

Each cell is checked against the exact oracle (ours: indices and values on a few
rows; FlashInfer's: the values it selected) and then timed with
:func:`deepselect.bench.timing.time_fns` (cold L2 by rotated input copies, device
events, median of repeats): as CUDA-graph replays for every column, interleaved round
by round, and deepselect also eagerly, one call on an idle device (the host's launch
path included). Bandwidth is (valid input bytes + output bytes) / time; the plain
read is ``x.amax(dim=1)`` over the whole input. A cell whose input exceeds the memory
budget (``--max-gib``, default 30% of the GPU's memory: 4096 x 1M fp32 fits on an
80 GB card) is skipped and says so.

Targets (:class:`Targets`): every cell at least 1.5x FlashInfer's default and 2x its
``tie_break=1`` mode; batch >= 512 at least 70% of the plain read's bandwidth; batch
<= 64 a graph replay of at most 12 us up to N = 128K, 16 us beyond. ``--dist`` times
adversarial rows (:data:`deepselect.distributions.ADVERSARIAL_KINDS`) of every cell
beside its normal rows: at most 1.3x their time.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .. import distributions, runinfo
from ..api import topk_rows
from ..engine import indexer_topk
from ..options import TopkOptions
from .cases import DTYPES, GRID_SCENARIO, Case, format_size
from .checks import EXACT, check_against_oracle, check_exact
from .libraries import FLASHINFER_MODES, flashinfer_libraries, flashinfer_ragged
from .metrics import bandwidth_unit, effective_bytes, percent, speedup, tbps
from .report import format_time, progress_bar, write_csv
from .run import BenchConfig, _short, budget_inputs
from .timing import time_fn, time_fns

K, M = 1 << 10, 1 << 20
GRID_DTYPES = ("fp32", "bf16")
GRID_NS = (8 * K, 16 * K, 32 * K, 64 * K, 128 * K, M)
GRID_BATCHES = (1, 8, 64, 512, 4096)
GRID_KS = (512, 2048)
WINDOWS = ("prefill", "decode")
WINDOW_ROWS = {"prefill": 4096, "decode": 64}
WINDOW_NS = {"prefill": 128 * K, "decode": M}
# --quick: the batches that decide the verdicts at a short and a long row, k = 2048,
# and the prefill window: sized for about 90 s on an H100, compilation included
QUICK_BATCHES = (8, 64, 512, 4096)
QUICK_NS = (16 * K, 128 * K)
QUICK_KS = (2048,)
QUICK_WINDOWS = (("bf16", "prefill"),)
# Without a GPU: tiny shapes for CI (deepselect's CPU backend; no FlashInfer)
CPU_NS = (4 * K, 16 * K)
CPU_BATCHES = (1, 8, 64)
CPU_KS = (512,)
CPU_WINDOW_ROWS = {"prefill": 64, "decode": 8}
CPU_WINDOW_NS = {"prefill": 16 * K, "decode": 16 * K}
CPU_QUICK_NS = (4 * K,)
CPU_QUICK_BATCHES = (1, 8)
ADVERSARIAL_KINDS = distributions.ADVERSARIAL_KINDS
"""What ``--dist all`` times beside normal rows."""

FI_COLUMNS = tuple(FLASHINFER_MODES)  # ("flashinfer", "flashinfer_tb1")
COLUMNS = (
    "dist", "dtype", "window", "batch", "n", "k", "valid", "bytes", "copies", "device",
    "deepselect_us", "deepselect_eager_us", "flashinfer_us", "flashinfer_tb1_us", "read_us",
    "fi_ratio", "fi_tb1_ratio", "deepselect_tbps", "flashinfer_tbps", "flashinfer_tb1_tbps",
    "read_tbps", "pct_of_read", "rel_normal", "deepselect_status", "flashinfer_status",
    "flashinfer_tb1_status", "verdict", "status", *runinfo.FIELDS,
)  # fmt: skip
"""The CSV's columns. Times in µs: ``deepselect_us`` and FlashInfer's are graph replays
(empty on a CPU), ``deepselect_eager_us`` one eager call; ``fi_ratio`` and
``fi_tb1_ratio`` are FlashInfer's time over ours; ``rel_normal`` is ours on this
distribution over ours on normal rows of the same cell."""


@dataclass(frozen=True)
class Cell:
    """One shape of the grid: ``batch`` rows of ``n`` scores, top ``k`` of each;
    ``window`` ``"none"`` (whole rows), ``"prefill"`` or ``"decode"`` (per-row lengths,
    :func:`window_lengths`)."""

    dtype: torch.dtype
    batch: int
    n: int
    k: int
    window: str = "none"

    @property
    def dtype_name(self) -> str:
        return {v: k for k, v in DTYPES.items()}[self.dtype]

    @property
    def input_bytes(self) -> int:
        return self.batch * self.n * self.dtype.itemsize


def window_lengths(window: str, rows: int, n: int, seed: int = 0) -> torch.Tensor | None:
    """int32 ``[rows]`` valid lengths on the CPU (None for whole rows): ``prefill``, the
    ragged causal prefill, row r of length ``n - rows + 1 + r`` (the last row whole);
    ``decode``, uniform in ``[n // 2, n]``.

    >>> window_lengths("prefill", 4, 10).tolist()
    [7, 8, 9, 10]
    """
    if window == "none":
        return None
    if window == "prefill":
        return (torch.arange(rows) + (n - rows + 1)).clamp(0, n).to(torch.int32)
    if window == "decode":
        g = torch.Generator().manual_seed(seed)
        return torch.randint(n // 2, n + 1, (rows,), generator=g, dtype=torch.int32)
    raise ValueError(f"window must be none, prefill or decode; got {window!r}")


def grid_cells(
    device: str = "cuda",
    quick: bool = False,
    *,
    dtypes: Sequence[str] | None = None,
    ns: Sequence[int] | None = None,
    batches: Sequence[int] | None = None,
    ks: Sequence[int] | None = None,
) -> list[Cell]:
    """The grid's cells in the order they run: every (dtype, k, batch, N), then the
    window cases of each dtype and k. ``dtypes``, ``ns``, ``batches``, ``ks`` replace
    the lists (the window cases then run at the largest N given; their rows stay).

    >>> len(grid_cells()), len(grid_cells(quick=True))
    (128, 17)
    >>> grid_cells(quick=True)[-1].window, grid_cells(quick=True)[-1].batch
    ('prefill', 4096)
    """
    cpu = device == "cpu"
    if cpu:
        g_ns, g_b = (CPU_QUICK_NS, CPU_QUICK_BATCHES) if quick else (CPU_NS, CPU_BATCHES)
        g_ks, rows, w_ns = CPU_KS, CPU_WINDOW_ROWS, CPU_WINDOW_NS
    elif quick:
        g_ns, g_b, g_ks, rows, w_ns = QUICK_NS, QUICK_BATCHES, QUICK_KS, WINDOW_ROWS, WINDOW_NS
    else:
        g_ns, g_b, g_ks, rows, w_ns = GRID_NS, GRID_BATCHES, GRID_KS, WINDOW_ROWS, WINDOW_NS
    if quick:  # one window case
        windows = list(QUICK_WINDOWS)
    else:
        windows = [(d, w) for d in GRID_DTYPES for w in WINDOWS]
    if dtypes:
        windows = [(d, w) for d in dtypes for w in dict.fromkeys(w for _, w in windows)]
    cells = [
        Cell(DTYPES[d], b, n, k)
        for d in dtypes or GRID_DTYPES
        for k in ks or g_ks
        for b in batches or g_b
        for n in ns or g_ns
    ]
    cells += [
        Cell(DTYPES[d], rows[w], max(ns) if ns else w_ns[w], k, w)
        for d, w in windows
        for k in ks or g_ks
    ]
    return list(dict.fromkeys(cells))


# ----------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Targets:
    """The indexer's targets, judged per cell by :func:`judge`."""

    fi_ratio: float = 1.5  # FlashInfer default's time over ours, every cell
    fi_tb1_ratio: float = 2.0  # FlashInfer tie_break=1's time over ours, every cell
    read_pct: float = 70.0  # our bandwidth, % of the plain read's ...
    read_from_batch: int = 512  # ... from this batch up
    latency_to_batch: int = 64  # graph replay time up to this batch:
    latency_us: float = 12.0  # ... at most this for N up to latency_long_from
    latency_long_from: int = 128 * K  # rows longer than this (1M) ...
    latency_long_us: float = 16.0  # ... at most this
    dist_ratio: float = 1.3  # adversarial rows' time over normal rows'


TARGETS = Targets()
TARGET_LABELS = {
    "fi": "≥ {t.fi_ratio}x FlashInfer default",
    "fi_tb1": "≥ {t.fi_tb1_ratio}x FlashInfer tie_break=1",
    "read": "≥ {t.read_pct:.0f}% of the plain read (batch ≥ {t.read_from_batch})",
    "latency": "graph replay ≤ {t.latency_us:g} us (≤ {t.latency_long_us:g} us past N = 128K; "
    "batch ≤ {t.latency_to_batch})",
    "dist": "adversarial rows ≤ {t.dist_ratio}x the normal rows' time",
}


def _num(v) -> float | None:
    if v is None or v == "":
        return None
    return float(v)


def ours_us(row: dict) -> float | None:
    """Our time in µs that the targets judge: the graph replay, else (on a CPU, or
    where capture failed) the eager call."""
    graph = _num(row.get("deepselect_us"))
    return graph if graph is not None else _num(row.get("deepselect_eager_us"))


def judge(row: dict, targets: Targets = TARGETS) -> dict[str, bool | None]:
    """Each target that applies to ``row``: True (met), False (missed) or None (no
    figure to judge, e.g. FlashInfer absent). Normal rows are judged on ``fi``,
    ``fi_tb1`` and, by batch, ``read`` or ``latency``; adversarial rows on ``dist``. A
    result of ours that is not exact misses every target that applies.

    >>> judge({"dist": "normal", "batch": 8, "n": 1 << 20, "deepselect_us": 15.0,
    ...        "fi_ratio": 1.6, "fi_tb1_ratio": 1.9})
    {'fi': True, 'fi_tb1': False, 'latency': True}
    """
    t = targets

    def at_least(value, bound):
        value = _num(value)
        return None if value is None else value >= bound

    if row.get("dist", "normal") != "normal":
        rel = _num(row.get("rel_normal"))
        out = {"dist": None if rel is None else rel <= t.dist_ratio}
    else:
        out = {"fi": at_least(row.get("fi_ratio"), t.fi_ratio)}
        out["fi_tb1"] = at_least(row.get("fi_tb1_ratio"), t.fi_tb1_ratio)
        batch, n = int(row["batch"]), int(row["n"])
        if batch >= t.read_from_batch:
            out["read"] = at_least(row.get("pct_of_read"), t.read_pct)
        if batch <= t.latency_to_batch:
            limit = t.latency_long_us if n > t.latency_long_from else t.latency_us
            us = ours_us(row)
            out["latency"] = None if us is None else us <= limit
    if _failed(row):
        return dict.fromkeys(out, False)
    return out


def _failed(row: dict) -> bool:
    return str(row.get("deepselect_status", "")).startswith(("inexact", "error"))


def verdict_text(row: dict, targets: Targets = TARGETS) -> str:
    """``"ok"``, ``"miss: <target figures>"``, ``"INEXACT"`` or ``"—"`` (nothing judged).

    >>> verdict_text({"dist": "normal", "batch": 4096, "n": 1024, "fi_ratio": 2.0,
    ...               "fi_tb1_ratio": 3.0, "pct_of_read": 55.0})
    'miss: read 55% < 70%'
    """
    if _failed(row):
        return "INEXACT" if row["deepselect_status"].startswith("inexact") else "error"
    t = targets
    judged = judge(row, targets)
    if all(v is None for v in judged.values()):
        return "—"
    figures = {
        "fi": f"FI {_num(row.get('fi_ratio')) or 0:.2f}x < {t.fi_ratio}x",
        "fi_tb1": f"FI-tb1 {_num(row.get('fi_tb1_ratio')) or 0:.2f}x < {t.fi_tb1_ratio}x",
        "read": f"read {_num(row.get('pct_of_read')) or 0:.0f}% < {t.read_pct:.0f}%",
        "latency": f"{ours_us(row) or 0:.1f} us > "
        f"{t.latency_long_us if int(row['n']) > t.latency_long_from else t.latency_us:g} us",
        "dist": f"{_num(row.get('rel_normal')) or 0:.2f}x normal > {t.dist_ratio}x",
    }
    missed = [figures[name] for name, ok in judged.items() if ok is False]
    return "miss: " + "; ".join(missed) if missed else "ok"


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def grid_summary(rows: Sequence[dict], targets: Targets = TARGETS) -> list[str]:
    """Lines for the end of the run: per target, the cells meeting it of those judged;
    the geometric-mean ratios to FlashInfer's modes (over the exact cells); the
    inexact cells.

    >>> grid_summary([{"dist": "normal", "batch": 8, "n": 1024, "deepselect_us": 5.0,
    ...                "fi_ratio": 2.0, "fi_tb1_ratio": 4.0, "status": "ok"}])[:2]
    ['≥ 1.5x FlashInfer default: 1/1 cells', '≥ 2.0x FlashInfer tie_break=1: 1/1 cells']
    """
    done = [r for r in rows if r.get("status", "ok") == "ok"]
    lines = []
    for name, label in TARGET_LABELS.items():
        got = [judge(r, targets).get(name) for r in done]
        judged = [ok for ok in got if ok is not None]
        if judged:
            lines.append(f"{label.format(t=targets)}: {sum(judged)}/{len(judged)} cells")
    normal = [r for r in done if r.get("dist", "normal") == "normal" and not _failed(r)]
    for col, name in (("fi_ratio", "FlashInfer default"), ("fi_tb1_ratio", "tie_break=1")):
        ratios = [v for v in (_num(r.get(col)) for r in normal) if v]
        if ratios:
            lines.append(
                f"{name} / deepselect: geometric mean {_geomean(ratios):.2f}x over "
                f"{len(ratios)} cells (min {min(ratios):.2f}x, max {max(ratios):.2f}x)"
            )
    rel = [_num(r.get("rel_normal")) for r in done if r.get("dist") != "normal"]
    rel = [v for v in rel if v]
    if rel:
        lines.append(f"adversarial / normal rows: geometric mean {_geomean(rel):.2f}x, "
                     f"worst {max(rel):.2f}x")  # fmt: skip
    bad = [r for r in done if str(r.get("deepselect_status", "")).startswith("inexact")]
    if bad:
        lines.append(f"{len(bad)} cells where deepselect was NOT exact")
    return lines


# ------------------------------------------------------------------- one cell, run


@dataclass
class GridLibraries:
    """The calls a cell makes beside ours: FlashInfer's two modes on whole rows and on
    windows, by column (:data:`FI_COLUMNS`); ``note`` says why they are missing."""

    whole: dict[str, Callable]
    ragged: dict[str, Callable]
    note: str = ""

    @classmethod
    def find(cls, device: str) -> GridLibraries:
        libs, note = flashinfer_libraries(device)
        ragged = {}
        if libs:
            ragged = {m: f for m in FI_COLUMNS if (f := flashinfer_ragged(m)) is not None}
        return cls({lib.name: lib.call for lib in libs}, ragged, note)


def _calls(cell: Cell, lengths: torch.Tensor | None, libs: GridLibraries) -> dict:
    """``{column: fn(x)}``: ours and FlashInfer's calls for ``cell``."""
    k = cell.k
    if lengths is None:
        calls = {"deepselect": lambda x: topk_rows(x, k, index_dtype=torch.int32)}
        for name, fn in libs.whole.items():
            calls[name] = lambda x, fn=fn: fn(x, k, False)
        return calls
    calls = {"deepselect": lambda x: indexer_topk(x, lengths, k)}
    for name, fn in libs.ragged.items():
        calls[name] = lambda x, fn=fn: fn(x, lengths, k)
    return calls


def check_result(name: str, x: torch.Tensor, result, k: int, lengths: torch.Tensor | None) -> str:
    """Judge one call's result on ``x`` before it is timed: ours against the exact
    oracle (indices and values, a few rows), another library's by the values it picked
    (any index among ties) on the same rows against ``torch.topk`` of each window."""
    if name == "deepselect":
        if lengths is None:
            v, i = result
            return check_against_oracle(x, v, i, k, "none")
        return check_against_oracle(x, None, result, k, TopkOptions(end=lengths))
    v, i = result if lengths is None else (None, result)
    rows = x.shape[0]
    sel = torch.linspace(0, rows - 1, min(rows, 8)).round().to(torch.int64).unique().tolist()
    for r in sel:
        n = int(lengths[r]) if lengths is not None else x.shape[1]
        kv = min(k, n)
        if kv == 0:
            continue
        want = torch.topk(x[r : r + 1, :n], kv, dim=1).values
        got_v = v[r : r + 1] if v is not None else None
        status = check_exact(x[r : r + 1, :n], got_v, i[r : r + 1, :kv], want, kv, ordered=False)
        if status != EXACT:
            return status.replace("rows 0", f"row {r}")
    return EXACT


def _time_columns(calls: dict, inputs, config: BenchConfig, row: dict) -> None:
    """Graph replays of every call and the plain read, interleaved (CUDA; one by one
    where the group fails), and our eager call, into ``row``'s ``*_us``."""
    dev = torch.device(config.device)
    kw = dict(repeats=config.repeats, warmup=config.warmup, max_seconds=config.max_seconds)
    fns = {**calls, "read": lambda x: x.amax(dim=1)}
    graph = dev.type == "cuda"
    eager = time_fn(calls["deepselect"], inputs, dev, queued=False, **kw)
    row["deepselect_eager_us"] = eager.median_s * 1e6
    if not graph:  # a CPU: eager times only
        fns.pop("deepselect")
    try:
        times = time_fns(fns, inputs, dev, graph=graph, **kw)
    except Exception:  # one call that cannot be captured must not lose the others
        times = {}
        for name, fn in fns.items():
            try:
                times[name] = time_fn(fn, inputs, dev, graph=graph, **kw)
            except Exception as exc:
                if name != "read":
                    row[f"{name}_status"] = f"error: {_short(exc)}"
    for name, t in times.items():
        row[f"{name}_us"] = t.median_s * 1e6


def fill_grid_metrics(row: dict) -> dict:
    """Ratios, bandwidths and the share of the plain read from the row's times (µs),
    ``bytes`` (valid input + outputs) and ``input_bytes`` (what the read reads).

    >>> r = fill_grid_metrics({"bytes": 2e6, "input_bytes": 1e6, "deepselect_us": 1.0,
    ...                        "flashinfer_us": 3.0, "read_us": 0.5})
    >>> r["fi_ratio"], r["deepselect_tbps"], r["pct_of_read"]
    (3.0, 2.0, 100.0)
    """

    def sec(col):
        us = _num(row.get(col))
        return None if us is None else us / 1e6

    ours = ours_us(row)
    ours_s = None if ours is None else ours / 1e6
    nbytes = float(row["bytes"])
    row["fi_ratio"] = speedup(sec("flashinfer_us"), ours_s)
    row["fi_tb1_ratio"] = speedup(sec("flashinfer_tb1_us"), ours_s)
    row["deepselect_tbps"] = tbps(nbytes, ours_s)
    for name in FI_COLUMNS:
        row[f"{name}_tbps"] = tbps(nbytes, sec(f"{name}_us"))
    row["read_tbps"] = tbps(float(row["input_bytes"]), sec("read_us"))
    row["pct_of_read"] = percent(row["deepselect_tbps"], row["read_tbps"])
    return row


def run_cell(cell: Cell, dist: str, config: BenchConfig, libs: GridLibraries) -> dict:
    """Check and time one cell on one distribution; returns its row (:data:`COLUMNS`)."""
    dev = torch.device(config.device)
    lengths_cpu = window_lengths(cell.window, cell.batch, cell.n, config.seed)
    valid = int(lengths_cpu.sum()) if lengths_cpu is not None else cell.batch * cell.n
    row: dict = {
        "dist": dist, "dtype": cell.dtype_name, "window": cell.window, "batch": cell.batch,
        "n": cell.n, "k": cell.k, "valid": valid, "device": dev.type, "status": "ok",
        "input_bytes": cell.input_bytes,
        "bytes": effective_bytes(cell.batch, cell.n, cell.k, cell.dtype, valid=valid,
                                 values=cell.window == "none"),
    }  # fmt: skip
    case = Case(GRID_SCENARIO, cell.dtype, cell.batch, cell.n, cell.k, "none")
    inputs, row["status"] = budget_inputs(case, dist, config)
    if inputs is None:
        return row
    lengths = None if lengths_cpu is None else lengths_cpu.to(dev)
    row["copies"] = len(inputs)
    calls = _calls(cell, lengths, libs)
    for name in list(calls):
        try:
            status = check_result(name, inputs[0], calls[name](inputs[0]), cell.k, lengths)
        except Exception as exc:  # FlashInfer may lack a shape; ours must not
            status = f"{'error' if name == 'deepselect' else 'unsupported'}: {_short(exc)}"
        row[f"{name}_status"] = status
        if status.startswith(("error", "unsupported")):
            del calls[name]
    if "deepselect" in calls:
        _time_columns(calls, inputs, config, row)
    fill_grid_metrics(row)
    inputs.clear()  # free the copies before the next cell allocates its own
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return row


# ----------------------------------------------------------------------- the command


def _run_all(err, cells, dists, config, libs) -> list[dict]:
    """Every cell on normal rows, then on each adversarial kind, behind a progress bar;
    a cell that fails becomes a row saying why, and the others go on."""
    rows: list[dict] = []
    progress = progress_bar(err)
    with progress:
        task = progress.add_task(GRID_SCENARIO, total=len(cells) * len(dists))
        for cell in cells:
            normal = None
            for dist in dists:
                progress.update(task, description=f"{describe(cell)} {dist}")
                try:
                    row = run_cell(cell, dist, config, libs)
                except Exception as exc:
                    if config.device == "cuda":
                        torch.cuda.empty_cache()
                    row = {"dist": dist, "dtype": cell.dtype_name, "window": cell.window,
                           "batch": cell.batch, "n": cell.n, "k": cell.k,
                           "status": f"error: {_short(exc)}"}  # fmt: skip
                if dist == "normal":
                    normal = ours_us(row)
                else:
                    row["rel_normal"] = speedup(ours_us(row), normal)
                row["verdict"] = verdict_text(row) if row["status"] == "ok" else ""
                rows.append(row)
                progress.advance(task)
    return rows


def describe(cell: Cell) -> str:
    """``"bf16 b=4096 N=128K k=2048 prefill"``."""
    text = f"{cell.dtype_name} b={cell.batch} N={format_size(cell.n)} k={cell.k}"
    return text if cell.window == "none" else f"{text} {cell.window}"


def render_grid(rows: Sequence[dict], title: str, unit: str, fi_note: str):
    """The table (one line per cell and distribution) and its footnotes: why a
    FlashInfer cell is empty, and how the columns were timed."""
    from rich.table import Table

    scale = bandwidth_unit("cpu" if unit == "GB/s" else "cuda")[1]
    dists = len({r["dist"] for r in rows}) > 1
    t = Table(title=title, header_style="bold")
    heads = ["dtype", "window", "batch", "N", "k"] + (["dist"] if dists else [])
    heads += ["ours graph", "ours eager", "FI", "FI tb1", "FI/ours", "tb1/ours", "read",
              unit, "% read"] + (["×normal"] if dists else []) + ["verdict"]  # fmt: skip
    for h in heads:
        t.add_column(h, justify="left" if h in ("dtype", "window", "dist", "verdict") else "right")
    reasons: dict[str, str] = {}

    def fi_cell(r, name):
        us = r.get(f"{name}_us")
        if us not in (None, ""):
            return format_time(us)
        why = r.get(f"{name}_status") or fi_note or "not timed"
        if why == EXACT:
            why = "its timing failed"
        mark = reasons.setdefault(why, chr(ord("a") + len(reasons)))
        return f"— {mark}"

    def ratio(v):
        return "—" if _num(v) is None else f"{_num(v):.2f}×"

    for r in rows:
        window = "" if r["window"] == "none" else r["window"]
        cells = [r["dtype"], window, str(r["batch"]), format_size(int(r["n"])), str(r["k"])]
        cells += [r["dist"]] if dists else []
        if r.get("status", "ok") != "ok":
            t.add_row(*cells, f"[dim]{r['status']}[/]", *[""] * (len(heads) - len(cells) - 1))
            continue
        bw = _num(r.get("deepselect_tbps"))
        pct = _num(r.get("pct_of_read"))
        cells += [
            format_time(r.get("deepselect_us")), format_time(r.get("deepselect_eager_us")),
            fi_cell(r, "flashinfer"), fi_cell(r, "flashinfer_tb1"),
            ratio(r.get("fi_ratio")), ratio(r.get("fi_tb1_ratio")), format_time(r.get("read_us")),
            "—" if bw is None else f"{bw * scale:.3g}", "—" if pct is None else f"{pct:.0f}%",
        ] + ([ratio(r.get("rel_normal"))] if dists else [])  # fmt: skip
        v = r.get("verdict", "")
        cells.append(f"[green]{v}[/]" if v == "ok" else f"[red]{v}[/]" if v != "—" else v)
        t.add_row(*cells)
    notes = [f"{mark}: FlashInfer empty: {why}" for why, mark in reasons.items()]
    notes += [
        "graph: CUDA-graph replays, every column interleaved round by round, inputs rotated "
        "through copies and a read of twice the L2 before each timed call (cold L2); "
        "eager: one deepselect call on an idle device, the host's launch path included",
        "windows: deepselect's indexer_topk with lengths (indices only) beside FlashInfer's "
        "top_k_ragged_transform with zero offsets; whole rows: values + int32 indices "
        "(FlashInfer's top_k returns int64 indices); the read is x.amax(dim=1) over every "
        "column, bandwidth (valid input + output bytes) / time",
    ]
    if unit == "GB/s":
        notes.append("on a CPU: no graphs; the targets, a GPU's, judge the eager time")
    return t, notes


def main(args: argparse.Namespace, config: BenchConfig, dists: Sequence[str], out, err) -> int:
    """Run the grid (``deepselect bench --scenario indexer-grid``) with the command's
    checked options, ``config`` and the adversarial ``dists`` (normal rows are always
    timed, first); 1 if any result of ours was inexact."""
    device = config.device
    dists = ["normal"] + [d for d in dists if d != "normal"]
    cells = grid_cells(
        device, args.quick, dtypes=[args.dtype] if args.dtype else None,
        ns=args.n, batches=args.batch, ks=args.k,
    )  # fmt: skip
    libs = GridLibraries.find(device)
    info = runinfo.run_info(device)
    name = info["device_name"]
    err.print(
        f"[bold]deepselect bench --scenario {GRID_SCENARIO}[/] on {name}: {len(cells)} cells x "
        f"{len(dists)} distributions, median of {config.repeats}; deepselect "
        f"{info['deepselect_version']}, torch {info['torch_version']}, triton "
        f"{info['triton_version'] or '-'}"
        + ("" if libs.whole else f"; {libs.note}: FlashInfer columns empty")
    )
    rows = _run_all(err, cells, dists, config, libs)
    unit = bandwidth_unit(device)[0]
    table, notes = render_grid(rows, f"indexer grid — {name}", unit, libs.note)
    out.print(table)
    for line in notes:
        out.print(line)
    if args.csv:
        out.print(f"CSV: {write_csv(rows, args.csv, info=info, columns=COLUMNS)}")
    if args.plot:
        from .plotting import plot_results

        whole = [dict(r, scenario="indexer") for r in rows if r.get("window") == "none"]
        for path in plot_results(whole, args.plot, FI_COLUMNS, prefix=GRID_SCENARIO):
            out.print(f"plot: {path}")
    out.print(f"[bold]summary[/] ({', '.join(dists)}):")
    for line in grid_summary(rows):
        out.print(f"  {line}")
    bad = [r for r in rows if str(r.get("deepselect_status", "")).startswith("inexact")]
    return 1 if bad else 0


__all__ = [
    "COLUMNS",
    "Cell",
    "GridLibraries",
    "TARGETS",
    "Targets",
    "check_result",
    "fill_grid_metrics",
    "grid_cells",
    "grid_summary",
    "judge",
    "main",
    "run_cell",
    "verdict_text",
    "window_lengths",
]
