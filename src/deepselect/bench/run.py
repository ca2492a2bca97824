"""One case, checked and timed: a row of the table and the CSV."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .. import runinfo
from .cases import Case, input_copies
from .checks import EXACT, check_against_oracle, check_exact
from .libraries import Library, torch_library
from .metrics import effective_bytes, percent, speedup, tbps
from .timing import Timing, cache_bytes, read_calls, read_kernels, time_fn, time_fns


@dataclass
class BenchConfig:
    """What one ``deepselect bench`` run does (see :func:`register` for the flags)."""

    device: str = "cuda"
    repeats: int = 20
    warmup: int = 3
    graph: bool = False
    max_bytes: int = 1 << 30
    cold_factor: float = 3.0
    max_seconds: float | None = None
    seed: int = 0


BASE_COLUMNS = (
    "scenario",
    "dist",
    "dtype",
    "batch",
    "n",
    "k",
    "order",
    "device",
    "graph",
    "copies",
    "bytes",
    "deepselect_us",
    "torch_us",
    "read_us",
    "deepselect_min_us",
    "deepselect_max_us",
    "torch_min_us",
    "torch_max_us",
    "spread",
    "speedup",
    "deepselect_tbps",
    "torch_tbps",
    "read_tbps",
    "pct_of_read",
    "deepselect_status",
    "status",
    *runinfo.FIELDS,
)
"""CSV columns every run writes; each extra library adds ``<name>_us``,
``<name>_tbps`` and ``<name>_status``. Times are medians (``*_us``) and extremes
(``*_min_us``, ``*_max_us``) in µs; ``spread`` is the larger slowest-over-fastest
ratio of deepselect's and torch.topk's calls; the last columns say what the run ran
on (:data:`deepselect.runinfo.FIELDS`, the same in every row of a run)."""


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return text[:80]


def case_fields(case, dist: str, device: str) -> dict:
    """The columns that name a case (shared by measured and failed rows)."""
    return {
        "scenario": case.scenario,
        "dist": dist,
        "dtype": case.dtype_name,
        "batch": case.batch,
        "n": case.n,
        "k": case.k,
        "order": case.order,
        "device": device,
    }


def budget_inputs(case: Case, dist: str, config: BenchConfig) -> tuple[list | None, str]:
    """``(input copies, "ok")`` for ``case`` on ``config.device`` (copies that defeat
    the cache, one where two would pass the memory budget), or ``(None, status)``:
    skipped over the budget, or the error of an allocation that failed."""
    if case.input_bytes > config.max_bytes:
        return None, f"skipped: input {case.input_bytes / 2**30:.1f} GiB > memory budget"
    dev = torch.device(config.device)
    try:
        cold = 0 if case.input_bytes * 2 > config.max_bytes else config.cold_factor
        inputs = input_copies(
            case, dist, dev, cold_bytes=int(cold * cache_bytes(dev)), seed=config.seed
        )
    except (RuntimeError, MemoryError) as exc:  # out of memory: report, go on
        return None, f"error: {_short(exc)}"
    return inputs, "ok"


def run_case(
    case: Case,
    dist: str,
    config: BenchConfig,
    ours: Library | None,
    extras: Sequence[Library] = (),
) -> dict:
    """Check and time one case; returns one CSV row (see :data:`BASE_COLUMNS`).

    ``ours`` is deepselect's adapter, or None when its backend cannot run here.
    """
    dev = torch.device(config.device)
    nbytes = effective_bytes(case.batch, case.n, case.k, case.dtype)
    row: dict = {
        **case_fields(case, dist, dev.type),
        "graph": config.graph,
        "bytes": nbytes,
        "deepselect_status": "n/a" if ours is None else "",
        "status": "ok",
    }
    inputs, row["status"] = budget_inputs(case, dist, config)
    if inputs is None:
        return row
    row["copies"] = len(inputs)
    ordered = case.order == "value"
    x0 = inputs[0]
    timed: list[tuple[str, Library]] = []
    want = torch_library().call(x0, case.k, ordered)[0]
    for lib in ([ours] if ours is not None else []) + list(extras):
        col = "deepselect" if lib is ours else lib.name
        try:
            v, i = lib.call(x0, case.k, ordered)
        except Exception as exc:  # another library may lack a shape; ours must not
            word = "error" if lib is ours else "unsupported"
            row[f"{col}_status"] = f"{word}: {_short(exc)}"
            continue
        status = check_exact(x0, v, i, want, case.k, ordered=ordered, fill_index=lib.fill_index)
        if lib is ours and status == EXACT:
            status = check_against_oracle(x0, v, i, case.k, case.order)
        row[f"{col}_status"] = status
        timed.append((col, lib))
        del v, i
    del want

    def timeit(fn) -> Timing:
        return time_fn(
            fn,
            inputs,
            dev,
            repeats=config.repeats,
            warmup=config.warmup,
            graph=config.graph,
            max_seconds=config.max_seconds,
        )

    def record(col: str, t: Timing) -> None:
        row[f"{col}_us"] = t.median_s * 1e6
        if col in ("deepselect", "torch"):
            row[f"{col}_min_us"] = min(t.samples) * 1e6
            row[f"{col}_max_us"] = max(t.samples) * 1e6

    k = case.k
    record("torch", timeit(lambda x: torch_library().call(x, k, ordered)))
    reads = []
    for _, read in read_kernels(dev):
        try:
            reads.append(timeit(read).median_s)
        except Exception:  # a read that cannot run here just does not count
            continue
    row["read_us"] = min(reads) * 1e6 if reads else None
    for col, lib in timed:
        try:
            record(col, timeit(lambda x, lib=lib: lib.call(x, k, ordered)))
        except Exception as exc:
            row[f"{col}_status"] = f"error: {_short(exc)}"
    fill_metrics(row, case.input_bytes, [lib.name for lib in extras])
    del x0
    inputs.clear()  # free the copies before the next case allocates its own
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return row


def fill_metrics(row: dict, input_bytes: int, extra_names: Sequence[str] = ()) -> dict:
    """Derive TB/s, speedup, % of the read ceiling and the spread from the row's times
    (µs) and ``row["bytes"]``; the read ceiling is the plain read's bandwidth over the
    input; the spread is the larger max/min of deepselect's and torch.topk's calls.

    >>> r = fill_metrics({"bytes": 2e6, "deepselect_us": 1.0, "torch_us": 4.0,
    ...                   "read_us": 0.5}, input_bytes=1e6)
    >>> r["speedup"], r["deepselect_tbps"], r["read_tbps"], r["pct_of_read"]
    (4.0, 2.0, 2.0, 100.0)
    """

    def sec(col):
        us = row.get(col)
        return None if us is None or us == "" else float(us) / 1e6

    nbytes = float(row["bytes"])
    row["deepselect_tbps"] = tbps(nbytes, sec("deepselect_us"))
    row["torch_tbps"] = tbps(nbytes, sec("torch_us"))
    row["read_tbps"] = tbps(input_bytes, sec("read_us"))
    row["speedup"] = speedup(sec("torch_us"), sec("deepselect_us"))
    row["pct_of_read"] = percent(row["deepselect_tbps"], row["read_tbps"])
    ratios = [
        hi / lo
        for lo, hi in ((sec(f"{c}_min_us"), sec(f"{c}_max_us")) for c in ("deepselect", "torch"))
        if lo and hi
    ]
    row["spread"] = max(ratios) if ratios else None
    for name in extra_names:
        row[f"{name}_tbps"] = tbps(nbytes, sec(f"{name}_us"))
    return row


def run_read_case(case: Case, dist: str, config: BenchConfig) -> dict:
    """Time every plain read (:func:`deepselect.bench.timing.read_calls`) of one
    ``read`` case, interleaved; ``<read>_us`` and ``<read>_tbps`` per read, and the
    fastest read's (the copy aside) as ``read_us`` and ``read_tbps``."""
    dev = torch.device(config.device)
    row: dict = {
        **case_fields(case, dist, dev.type),
        "graph": config.graph,
        "bytes": case.input_bytes,
        "status": "ok",
    }
    if case.input_bytes > config.max_bytes:
        row["status"] = f"skipped: input {case.input_bytes / 2**30:.1f} GiB > memory budget"
        return row
    cold = 0 if case.input_bytes * 2 > config.max_bytes else config.cold_factor
    inputs = input_copies(
        case, dist, dev, cold_bytes=int(cold * cache_bytes(dev)), seed=config.seed
    )
    row["copies"] = len(inputs)
    calls = read_calls(inputs[0])
    times = time_fns(
        {name: fn for name, (fn, _) in calls.items()},
        inputs,
        dev,
        repeats=config.repeats,
        warmup=config.warmup,
        graph=config.graph,
        max_seconds=config.max_seconds,
    )
    for name, (_, moved) in calls.items():
        row[f"{name}_us"] = times[name].median_s * 1e6
        row[f"{name}_tbps"] = tbps(moved * case.input_bytes, times[name].median_s)
    best = min(times[name].median_s for name in calls if name != "copy")
    row["read_us"] = best * 1e6
    row["read_tbps"] = tbps(case.input_bytes, best)
    inputs.clear()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return row
