"""Bar charts of ``deepselect bench`` results, in the layout of DeepSelect's figures.

Indexer: one figure per (dtype, k, distribution), one subplot per batch size, row
length N on the x axis, effective bandwidth of deepselect and torch.topk side by side
(plus any other library whose results were exact), and the plain read's bandwidth
over the same input as a tick per N. Sampler: one figure with batch on the x axis.
Bandwidth is drawn in TB/s for GPU rows and GB/s for CPU rows (``device`` column).

Rows are the dicts :func:`deepselect.bench.run_case` returns (or rows read back from
the CSV): only the columns ``scenario, dist, dtype, batch, n, k, status,
deepselect_tbps, torch_tbps, read_tbps`` and ``<lib>_tbps`` / ``<lib>_status`` are used.

>>> from deepselect.bench.plotting import plot_results
>>> plot_results([], "/tmp/none")
[]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

_COLORS = {"deepselect": "#d62728", "torch.topk": "#1f77b4"}
_EXTRA_COLORS = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2")


def _num(v) -> float | None:
    if v is None or v == "":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _size_label(n: int) -> str:
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10}K"
    return str(n)


def _series(rows: Sequence[dict], extra_names: Sequence[str]) -> list[tuple[str, str, str]]:
    """(label, TB/s column, status column or "") of every library with a number."""
    out = []
    for label, col, st in (
        ("deepselect", "deepselect_tbps", "deepselect_status"),
        ("torch.topk", "torch_tbps", ""),
    ):
        if any(_num(r.get(col)) is not None for r in rows):
            out.append((label, col, st))
    for name in extra_names:
        if any(_num(r.get(f"{name}_tbps")) is not None for r in rows):
            out.append((name, f"{name}_tbps", f"{name}_status"))
    return out


def _value(r: dict, col: str, status_col: str) -> float:
    # an inexact result is no result: draw no bar for it
    if status_col and r.get(status_col) not in ("exact", None):
        return 0.0
    return _num(r.get(col)) or 0.0


def _bars(
    ax, rows: Sequence[dict], xkey: str, series, xlabel: str, unit: tuple[str, float]
) -> None:
    unit_name, scale = unit
    xs = sorted({int(r[xkey]) for r in rows})
    by_x = {int(r[xkey]): r for r in rows}
    width = 0.8 / max(len(series), 1)
    for j, (label, col, st) in enumerate(series):
        color = _COLORS.get(label, _EXTRA_COLORS[j % len(_EXTRA_COLORS)])
        heights = [_value(by_x[x], col, st) * scale for x in xs]
        pos = [i + (j - (len(series) - 1) / 2) * width for i in range(len(xs))]
        ax.bar(pos, heights, width=width, label=label, color=color)
    ceiling = [_num(by_x[x].get("read_tbps")) for x in xs]
    pts = [(i, c * scale) for i, c in enumerate(ceiling) if c is not None]
    if pts:
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            linestyle="none",
            marker="_",
            markersize=18,
            markeredgewidth=2,
            color="black",
            label="plain read (ceiling)",
        )
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels([_size_label(x) if xkey == "n" else str(x) for x in xs], rotation=45)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"effective {unit_name}")
    ax.grid(axis="y", alpha=0.3)


def _usable(rows: Sequence[dict]) -> list[dict]:
    return [r for r in rows if r.get("status", "ok") == "ok"]


def plot_results(
    rows: Sequence[dict],
    out_dir: str | Path,
    extra_names: Sequence[str] = (),
    prefix: str = "indexer",
) -> list[Path]:
    """Write PNG bar charts of benchmark rows into ``out_dir``; returns the files.

    Args:
        rows: result rows (dicts) as produced by ``deepselect bench``.
        out_dir: directory, created if missing.
        extra_names: other libraries whose ``<name>_tbps`` columns to draw.
        prefix: the name and title of the indexer's figures (e.g. ``indexer-grid``).

    Returns:
        Paths of the PNG files written (none when no row has timings).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from .metrics import bandwidth_unit

    out_dir = Path(out_dir)
    rows = _usable(rows)
    written: list[Path] = []
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["scenario"] == "indexer":
            key = ("indexer", r["dtype"], int(r["k"]), r["dist"], None)
        else:
            key = (r["scenario"], r["dtype"], int(r["k"]), r["dist"], int(r["n"]))
        groups.setdefault(key, []).append(r)
    for (scenario, dtype, k, dist, n), group in groups.items():
        series = _series(group, extra_names)
        if not series:
            continue
        device = group[0].get("device", "")
        unit = bandwidth_unit(device)
        if scenario == "indexer":
            batches = sorted({int(r["batch"]) for r in group})
            fig = Figure(figsize=(4.2 * len(batches), 3.8), layout="constrained")
            FigureCanvasAgg(fig)  # Agg, whatever pyplot's backend is
            axes = fig.subplots(1, len(batches), squeeze=False)[0]
            for ax, b in zip(axes, batches, strict=True):
                _bars(ax, [r for r in group if int(r["batch"]) == b], "n", series, "N", unit)
                ax.set_title(f"batch = {b}")
            fig.suptitle(f"{prefix} top-k: {dtype}, k = {k}, {dist} inputs ({device})")
            name = f"{prefix}_{dtype}_k{k}_{dist}.png"
        else:
            fig = Figure(figsize=(7, 4), layout="constrained")
            FigureCanvasAgg(fig)
            ax = fig.subplots()
            _bars(ax, group, "batch", series, "batch", unit)
            fig.suptitle(
                f"{scenario} top-k: {dtype}, N = {n}, k = {k}, sorted, {dist} inputs ({device})"
            )
            name = f"{scenario}_{dtype}_n{n}_k{k}_{dist}.png"
        handles, labels = fig.axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=len(labels))
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / name
        fig.savefig(path, dpi=110)
        written.append(path)
    return written
