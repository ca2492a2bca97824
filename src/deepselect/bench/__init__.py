"""``deepselect bench``: DeepSelect's performance cases, timed against torch.topk.

The program a user runs first: it proves (or disproves) the speed on their own
machine. For every case it

1. draws random inputs and checks every library's result against ``torch.topk``'s
   values (and deepselect's indices against the exact oracle on a few rows),
2. times deepselect, ``torch.topk``, a plain read of the same bytes (the read
   ceiling) and any other top-k library it can import, with one shared timer,
3. prints a table, and optionally writes CSV and bar charts.

The case list follows DeepSelect's published figures: the sparse-attention
*indexer* (bf16, unsorted, k in {512, 1024}, N from 256 to 1M) and the *sampler*
(fp32 logits over a 129,280-token vocabulary, k = 512, sorted values). Without a
GPU the same program runs the CPU backend on shapes that finish in about a minute.

Effective bandwidth is DeepSelect's metric: (valid input bytes + output bytes) /
time, with the output counted as deepselect's call produces it (values + int32
indices). The bytes are counted once per case, so every library's TB/s on a row is
the same bytes over its own time and TB/s ratios equal time ratios. The table shows
TB/s on a GPU and GB/s on a CPU; the CSV's ``*_tbps`` columns are TB/s everywhere.

Further scenarios (``--scenario``): ``kernel``, the streaming kernel's table of long
rows; ``short``, few rows and short rows; ``read``, the plain reads alone, the
ceiling the others are held to. Benchmark programs under ``benchmarks/`` use this
harness's timer, inputs and checks rather than their own.

Modules: :mod:`.cases` (shapes and inputs), :mod:`.metrics`, :mod:`.checks` (the
exactness judge), :mod:`.timing` (the timer and the plain reads), :mod:`.libraries`,
:mod:`.run` (one case checked and timed), :mod:`.report` (tables and CSV) and
:mod:`.cli` (the command); this package holds their public names.

>>> cases = case_list("sampler", device="cuda", quick=True)
>>> [(c.batch, c.n, c.k, c.order) for c in cases][:1]
[(6, 129280, 512, 'value')]
"""

from __future__ import annotations

from .cases import (
    CPU_INDEXER_BATCHES,
    CPU_INDEXER_NS,
    CPU_KERNEL_CASES,
    CPU_QUICK_INDEXER_NS,
    CPU_QUICK_SAMPLER_BATCHES,
    CPU_READ_CASES,
    CPU_SAMPLER_BATCHES,
    CPU_SHORT_CASES,
    DTYPES,
    INDEXER_BATCHES,
    INDEXER_KS,
    INDEXER_NS,
    KERNEL_CASES,
    QUICK_INDEXER_BATCHES,
    QUICK_INDEXER_NS,
    QUICK_KERNEL_CASES,
    QUICK_READ_CASES,
    QUICK_SAMPLER_BATCHES,
    QUICK_SHORT_CASES,
    READ_CASES,
    SAMPLER_BATCHES,
    SAMPLER_K,
    SAMPLER_N,
    SCENARIOS,
    SHORT_CASES,
    Case,
    case_list,
    draw,
    format_size,
    input_copies,
    parse_size,
    scenario_list,
)
from .checks import EXACT, check_against_oracle, check_exact
from .cli import main, register
from .libraries import (
    Library,
    backend_problem,
    deepselect_library,
    extra_libraries,
    torch_library,
)
from .metrics import SPREAD_WARN, bandwidth_unit, effective_bytes, percent, speedup, tbps
from .report import (
    OVER_READ_MARK,
    OVER_READ_NOTE,
    columns_for,
    format_time,
    notes,
    render_read_table,
    render_table,
    summary,
    write_csv,
)
from .run import BASE_COLUMNS, BenchConfig, case_fields, fill_metrics, run_case, run_read_case
from .timing import (
    HEAD_START_S,
    READ_METHODS,
    Timing,
    cache_bytes,
    head_start,
    measure_read_peak,
    read_calls,
    read_kernels,
    time_fn,
    time_fns,
    triton_read,
)

__all__ = [
    "BASE_COLUMNS",
    "BenchConfig",
    "CPU_INDEXER_BATCHES",
    "CPU_INDEXER_NS",
    "CPU_KERNEL_CASES",
    "CPU_QUICK_INDEXER_NS",
    "CPU_QUICK_SAMPLER_BATCHES",
    "CPU_READ_CASES",
    "CPU_SAMPLER_BATCHES",
    "CPU_SHORT_CASES",
    "Case",
    "DTYPES",
    "EXACT",
    "HEAD_START_S",
    "INDEXER_BATCHES",
    "INDEXER_KS",
    "INDEXER_NS",
    "KERNEL_CASES",
    "Library",
    "OVER_READ_MARK",
    "OVER_READ_NOTE",
    "QUICK_INDEXER_BATCHES",
    "QUICK_INDEXER_NS",
    "QUICK_KERNEL_CASES",
    "QUICK_READ_CASES",
    "QUICK_SAMPLER_BATCHES",
    "QUICK_SHORT_CASES",
    "READ_CASES",
    "READ_METHODS",
    "SAMPLER_BATCHES",
    "SAMPLER_K",
    "SAMPLER_N",
    "SCENARIOS",
    "SHORT_CASES",
    "SPREAD_WARN",
    "Timing",
    "backend_problem",
    "bandwidth_unit",
    "cache_bytes",
    "case_fields",
    "case_list",
    "check_against_oracle",
    "check_exact",
    "columns_for",
    "deepselect_library",
    "draw",
    "effective_bytes",
    "extra_libraries",
    "fill_metrics",
    "format_size",
    "format_time",
    "head_start",
    "input_copies",
    "main",
    "measure_read_peak",
    "notes",
    "parse_size",
    "percent",
    "read_calls",
    "read_kernels",
    "register",
    "render_read_table",
    "render_table",
    "run_case",
    "run_read_case",
    "scenario_list",
    "speedup",
    "summary",
    "tbps",
    "time_fn",
    "time_fns",
    "torch_library",
    "triton_read",
    "write_csv",
]
