"""The results as a table, notes, a summary line and CSV."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from .cases import format_size
from .checks import EXACT
from .metrics import SPREAD_WARN, bandwidth_unit
from .run import BASE_COLUMNS


def progress_bar(console):
    """A rich progress bar on ``console`` that goes when done: what runs, how many of
    how many, the time so far."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    return Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=console, transient=True,
    )  # fmt: skip


def columns_for(extra_names: Sequence[str]) -> list[str]:
    cols = list(BASE_COLUMNS)
    for name in extra_names:
        cols += [f"{name}_us", f"{name}_tbps", f"{name}_status"]
    return cols


def write_csv(
    rows: Sequence[dict],
    path: str | Path,
    extra_names: Sequence[str] = (),
    info: Mapping[str, object] | None = None,
    columns: Sequence[str] | None = None,
) -> Path:
    """Write the result rows to ``path`` (parents created); missing cells stay empty.
    ``info`` (:func:`deepselect.runinfo.run_info`) fills the run's columns of every row;
    ``columns`` replaces :func:`columns_for`'s (a scenario with columns of its own)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = list(columns) if columns is not None else columns_for(extra_names)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            r = {**r, **(info or {})}
            w.writerow({c: _csv_cell(r.get(c)) for c in cols})
    return path


def _csv_cell(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


def format_time(us: float | None) -> str:
    """µs -> a short human string: ``"12.3 µs"``, ``"4.56 ms"``, ``"1.20 s"``."""
    if us is None or us == "":
        return "—"
    us = float(us)
    if us < 1000:
        return f"{us:.1f} µs"
    if us < 1e6:
        return f"{us / 1e3:.2f} ms"
    return f"{us / 1e6:.2f} s"


def _fmt(v, spec: str, suffix: str = "") -> str:
    return "—" if v is None or v == "" else f"{float(v):{spec}}{suffix}"


def _mark(status: str) -> str:
    if status == EXACT:
        return "[green]✓[/]"
    if not status or status == "n/a":
        return ""
    word = status.split(":")[0]
    color = "yellow" if word == "unsupported" else "red"
    return f"[{color}]{word}[/]"


OVER_READ_MARK = "†"
OVER_READ_NOTE = (
    "† faster than the plain read timed beside it (the fastest of torch's amax over the "
    "values and over their bits, and a Triton read on a GPU), so that read is not a "
    "ceiling for this shape: it fell short of the memory's bandwidth there (on short or "
    "few rows, fixed costs such as launches dominate both times)"
)


def _pct_cell(pct) -> str:
    if pct is None or pct == "":
        return "—"
    pct = float(pct)
    return f"{pct:.0f}%{OVER_READ_MARK}" if pct > 100 else f"{pct:.0f}%"


def _spread_cell(spread) -> str:
    if spread is None or spread == "":
        return "—"
    spread = float(spread)
    text = f"{spread:.2f}×"
    return f"[yellow]{text}![/]" if spread > SPREAD_WARN else text


def render_table(
    rows: Sequence[dict], extra_names: Sequence[str] = (), title: str = "", unit: str = ""
):
    """A ``rich.table.Table`` of the results (one line per case).

    Times are medians; ``spread`` is the slowest call over the fastest (see
    :data:`SPREAD_WARN`); bandwidth is in ``unit`` (default: GB/s when every row ran
    on the CPU, else TB/s); a share of the plain read above 100% carries
    :data:`OVER_READ_MARK` (explained by :data:`OVER_READ_NOTE`).
    """
    from rich.table import Table

    if not unit:
        unit = "GB/s" if rows and all(r.get("device") == "cpu" for r in rows) else "TB/s"
    scale = bandwidth_unit("cpu" if unit == "GB/s" else "cuda")[1]
    dists = {r["dist"] for r in rows}
    # the output order, where one scenario holds several (the kernel table's)
    orders = len({(r["scenario"], r.get("order")) for r in rows}) > len(
        {r["scenario"] for r in rows}
    )
    t = Table(title=title or None, header_style="bold")
    t.add_column("scenario", no_wrap=True)
    if len(dists) > 1:
        t.add_column("dist", no_wrap=True)
    if orders:
        t.add_column("order", no_wrap=True)
    for c in ("dtype", "batch", "N", "k", "deepselect", "torch.topk", "spread", "speedup", unit,
              "% read"):  # fmt: skip
        t.add_column(c, justify="right", no_wrap=True)
    for name in extra_names:
        t.add_column(name, justify="right", no_wrap=True)
    for r in rows:
        cells = [r["scenario"]]
        if len(dists) > 1:
            cells.append(r["dist"])
        if orders:
            cells.append(r.get("order", ""))
        cells += [r["dtype"], str(r["batch"]), format_size(int(r["n"])), str(r["k"])]
        if r.get("status", "ok") != "ok":
            cells += [f"[dim]{r['status']}[/]"] + [""] * (5 + len(extra_names))
            t.add_row(*cells)
            continue
        ds_status = r.get("deepselect_status", "")
        ds = format_time(r.get("deepselect_us"))
        if ds_status not in (EXACT, ""):
            ds = f"{ds} {_mark(ds_status)}" if r.get("deepselect_us") else _mark(ds_status)
        bw = r.get("deepselect_tbps")
        cells += [
            ds,
            format_time(r.get("torch_us")),
            _spread_cell(r.get("spread")),
            _fmt(r.get("speedup"), ".2f", "×"),
            _fmt(None if bw in (None, "") else float(bw) * scale, ".3g"),
            _pct_cell(r.get("pct_of_read")),
        ]
        for name in extra_names:
            st = r.get(f"{name}_status", "")
            us = r.get(f"{name}_us")
            cells.append(f"{format_time(us)} {_mark(st)}" if us else _mark(st))
        t.add_row(*cells)
    return t


def render_read_table(rows: Sequence[dict], title: str = "", unit: str = ""):
    """A ``rich.table.Table`` of the ``read`` scenario: each plain read's bandwidth
    (:data:`deepselect.bench.timing.READ_METHODS`; the copy counts its reads and
    writes) and the fastest read's time, one line per case."""
    from rich.table import Table

    from .timing import READ_METHODS

    if not unit:
        unit = "GB/s" if rows and all(r.get("device") == "cpu" for r in rows) else "TB/s"
    scale = bandwidth_unit("cpu" if unit == "GB/s" else "cuda")[1]
    methods = [m for m in READ_METHODS if any(f"{m}_us" in r for r in rows)]
    t = Table(title=title or None, header_style="bold")
    for c in ("dist", "dtype", "batch", "N", "fastest read", *(f"{m} {unit}" for m in methods)):
        t.add_column(c, justify="left" if c == "dist" else "right", no_wrap=True)
    for r in rows:
        cells = [r["dist"], r["dtype"], str(r["batch"]), format_size(int(r["n"]))]
        if r.get("status", "ok") != "ok":
            t.add_row(*cells, f"[dim]{r['status']}[/]", *[""] * len(methods))
            continue
        bws = [r.get(f"{m}_tbps") for m in methods]
        cells.append(format_time(r.get("read_us")))
        cells += [_fmt(None if bw in (None, "") else float(bw) * scale, ".3g") for bw in bws]
        t.add_row(*cells)
    return t


def notes(rows: Sequence[dict]) -> list[str]:
    """Lines to print under the table: what a mark in it means, and a warning when
    calls of one measurement varied more than :data:`SPREAD_WARN` times.

    >>> notes([{"spread": 1.1, "pct_of_read": 80.0}])
    []
    >>> [line[:9] for line in notes([{"spread": 3.0, "pct_of_read": 120.0}])]
    ['† faster ', 'warning: ']
    """

    def over(col: str, limit: float) -> int:
        return sum(1 for r in rows if r.get(col) not in (None, "") and float(r[col]) > limit)

    lines = []
    if over("pct_of_read", 100.0):
        lines.append(OVER_READ_NOTE)
    noisy = over("spread", SPREAD_WARN)
    if noisy:
        lines.append(
            f"warning: in {noisy} case{'s' if noisy > 1 else ''} (marked !) the slowest call "
            f"took more than {SPREAD_WARN}x the fastest, so the medians are unsteady: other "
            "load on the machine, changing clocks or a short run; rerun, or raise --repeats"
        )
    return lines


def summary(rows: Sequence[dict]) -> str:
    """One line: geometric-mean speedup over the cases where deepselect was exact."""
    ups = [
        float(r["speedup"])
        for r in rows
        if r.get("speedup") and r.get("deepselect_status") == EXACT
    ]
    inexact = [r for r in rows if str(r.get("deepselect_status", "")).startswith("inexact")]
    parts = []
    if ups:
        gm = math.exp(sum(math.log(u) for u in ups) / len(ups))
        parts.append(
            f"deepselect vs torch.topk: geometric-mean speedup {gm:.2f}× over {len(ups)} "
            f"cases (min {min(ups):.2f}×, max {max(ups):.2f}×)"
        )
    if inexact:
        parts.append(f"[red]{len(inexact)} cases where deepselect was NOT exact[/]")
    return "; ".join(parts)
