"""The benchmark's cases and their inputs: DeepSelect's published shapes (and the
smaller CPU lists), the size syntax of the command line, and random rows drawn on the
device."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .. import distributions

INDEXER_BATCHES = (6, 256, 512, 768, 4096)
INDEXER_NS = (256, 1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 17, 1 << 18, 1 << 19, 1 << 20)
INDEXER_KS = (512, 1024)
SAMPLER_BATCHES = (6, 256, 512, 768, 4096)
SAMPLER_N = 129_280  # DeepSeek's vocabulary
SAMPLER_K = 512

# A GPU run that still shows both ends of each figure (launch-bound and bandwidth-bound).
QUICK_INDEXER_BATCHES = (6, 512, 4096)
QUICK_INDEXER_NS = (1 << 14, 1 << 17, 1 << 20)
QUICK_SAMPLER_BATCHES = (6, 512, 4096)

# Without a GPU: shapes that keep the whole run near a minute on two cores, even
# when topk_rows falls back to the sorting oracle (~1 s per 8M elements).
CPU_INDEXER_BATCHES = (6, 32)
CPU_INDEXER_NS = (1 << 14, 1 << 17, 1 << 20)
CPU_SAMPLER_BATCHES = (6, 32)
CPU_QUICK_INDEXER_NS = (1 << 14, 1 << 18)
CPU_QUICK_SAMPLER_BATCHES = (6,)

# Fixed shapes (dtype, batch, N, k, order) of the scenarios beyond DeepSelect's figures.
# kernel: the streaming kernel's table, long rows from launch-bound to bandwidth-bound
# (quick: the first five); short: few rows and short rows, the register-resident
# short/split paths; read: the plain reads alone (k unused), the ceiling of the others.
KERNEL_CASES = (
    ("bf16", 4096, 1 << 20, 512, "none"),
    ("bf16", 256, 1 << 20, 512, "none"),
    ("bf16", 256, 1 << 16, 512, "none"),
    ("fp32", 4096, 129_280, 512, "value"),
    ("fp32", 256, 129_280, 512, "value"),
    ("bf16", 768, 1 << 18, 1024, "none"),
    ("bf16", 512, 1 << 17, 2048, "none"),
    ("bf16", 6, 1 << 20, 512, "none"),
    ("fp32", 6, 129_280, 512, "value"),
)
QUICK_KERNEL_CASES = KERNEL_CASES[:5]
SHORT_CASES = (
    ("bf16", 1, 1 << 20, 512, "none"),
    ("bf16", 6, 1 << 20, 512, "none"),
    ("bf16", 6, 1 << 16, 512, "none"),
    ("bf16", 256, 1 << 16, 512, "none"),
    ("bf16", 4096, 4096, 512, "none"),
    ("bf16", 1, 4096, 512, "none"),
    ("fp32", 6, 129_280, 512, "none"),
)
QUICK_SHORT_CASES = SHORT_CASES[1::2]
READ_CASES = (
    ("bf16", 4096, 1 << 20, 1, "none"),
    ("bf16", 256, 1 << 20, 1, "none"),
    ("fp32", 4096, 129_280, 1, "none"),
)
QUICK_READ_CASES = READ_CASES[:1]
# On the CPU: the same kinds of shape, small enough for a 2-core machine.
CPU_KERNEL_CASES = (
    ("bf16", 32, 1 << 20, 512, "none"),
    ("bf16", 6, 1 << 20, 512, "none"),
    ("fp32", 32, 129_280, 512, "value"),
)
CPU_SHORT_CASES = (
    ("bf16", 1, 1 << 20, 512, "none"),
    ("bf16", 6, 1 << 16, 512, "none"),
    ("bf16", 256, 4096, 512, "none"),
    ("fp32", 6, 129_280, 512, "none"),
)
CPU_READ_CASES = (("bf16", 32, 1 << 20, 1, "none"), ("fp32", 32, 129_280, 1, "none"))

GRID_SCENARIO = "indexer-grid"
"""The indexer's grid (:mod:`.indexer_grid`): its own cells and columns, so it runs
alone, never in :func:`case_list`."""
SCENARIOS = ("indexer", "sampler", "kernel", "short", "read", GRID_SCENARIO)
"""``all`` is DeepSelect's two figures, indexer and sampler."""
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
_DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


@dataclass(frozen=True)
class Case:
    """One benchmark shape: ``batch`` rows of ``n`` elements, top ``k`` of each."""

    scenario: str
    dtype: torch.dtype
    batch: int
    n: int
    k: int
    order: str  # deepselect's output order: "none" (indexer) or "value" (sampler)

    @property
    def dtype_name(self) -> str:
        return _DTYPE_NAMES.get(self.dtype, str(self.dtype).removeprefix("torch."))

    @property
    def input_bytes(self) -> int:
        return self.batch * self.n * self.dtype.itemsize


def parse_size(text: str) -> int:
    """``"129280"``, ``"128K"``, ``"1M"`` -> int (K = 1024, M = 1024**2).

    >>> parse_size("128K"), parse_size("1M"), parse_size("129280")
    (131072, 1048576, 129280)
    """
    t = str(text).strip().upper()
    scale = 1
    if t.endswith("K"):
        scale, t = 1 << 10, t[:-1]
    elif t.endswith("M"):
        scale, t = 1 << 20, t[:-1]
    try:
        value = int(t) * scale
    except ValueError:
        raise ValueError(
            f"sizes must be integers with an optional K or M suffix; got {text!r}"
        ) from None
    if value < 1:
        raise ValueError(f"sizes must be >= 1; got {text!r}")
    return value


def format_size(n: int) -> str:
    """Inverse of :func:`parse_size` where exact: 131072 -> ``"128K"``, 129280 -> ``"129280"``."""
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10}K"
    return str(n)


def scenario_list(text: str) -> list[str]:
    """``"indexer,kernel"`` -> ``["indexer", "kernel"]``; ``all``: indexer and sampler.

    >>> scenario_list("all"), scenario_list("short, read")
    (['indexer', 'sampler'], ['short', 'read'])
    """
    names: list[str] = []
    for t in str(text).replace(",", " ").split():
        for name in ("indexer", "sampler") if t == "all" else (t,):
            if name not in SCENARIOS:
                raise ValueError(
                    f"scenario must be 'all' or among {', '.join(SCENARIOS)}; got {t!r}"
                )
            if name not in names:
                names.append(name)
    if not names:
        raise ValueError("give at least one scenario")
    return names


def _fixed_cases(name: str, cpu: bool, quick: bool) -> tuple:
    lists = {
        "kernel": (CPU_KERNEL_CASES, QUICK_KERNEL_CASES, KERNEL_CASES),
        "short": (CPU_SHORT_CASES, QUICK_SHORT_CASES, SHORT_CASES),
        "read": (CPU_READ_CASES, QUICK_READ_CASES, READ_CASES),
    }[name]
    return lists[0] if cpu else lists[1] if quick else lists[2]


def case_list(
    scenario: str = "all",
    *,
    device: str = "cuda",
    quick: bool = False,
    batches: Sequence[int] | None = None,
    ns: Sequence[int] | None = None,
    ks: Sequence[int] | None = None,
    dtype: torch.dtype | None = None,
) -> list[Case]:
    """The benchmark's cases, in the order they run.

    Args:
        scenario: one of :data:`SCENARIOS`, ``"all"`` (indexer and sampler), or
            several, comma-separated (:func:`scenario_list`).
        device: ``"cuda"`` gives DeepSelect's published list (or its ``quick`` subset);
            ``"cpu"`` gives small shapes that finish in about a minute.
        quick: a shorter list.
        batches, ns, ks, dtype: replace the list's batches / row lengths / k / dtype
            in every selected scenario (e.g. a single custom shape).

    Returns:
        ``list[Case]``; indexer cases are unsorted (``order="none"``), sampler cases
        sorted by value; the kernel, short and read scenarios have fixed shapes
        (:data:`KERNEL_CASES`, :data:`SHORT_CASES`, :data:`READ_CASES`; read cases
        time plain reads only, their k unused).

    >>> [c.n for c in case_list("indexer", device="cuda", ks=[512], batches=[6])][:3]
    [256, 1024, 4096]
    >>> [(c.batch, c.n, c.order) for c in case_list("kernel", quick=True)][-1]
    (256, 129280, 'value')
    """
    names = scenario_list(scenario)
    if GRID_SCENARIO in names:
        raise ValueError(f"scenario {GRID_SCENARIO} runs alone (its own cells and columns)")
    if device not in ("cuda", "cpu"):
        raise ValueError(f"device must be 'cuda' or 'cpu'; got {device!r}")
    for name, seq in (("batches", batches), ("ns", ns), ("ks", ks)):
        if seq is not None and (not seq or any(int(v) < 1 for v in seq)):
            raise ValueError(f"{name} must be a non-empty list of integers >= 1; got {seq!r}")
    cpu = device == "cpu"
    if cpu:
        ib, i_ns = CPU_INDEXER_BATCHES, CPU_QUICK_INDEXER_NS if quick else CPU_INDEXER_NS
        i_ks, sb = (512,), CPU_QUICK_SAMPLER_BATCHES if quick else CPU_SAMPLER_BATCHES
    elif quick:
        ib, i_ns, i_ks, sb = QUICK_INDEXER_BATCHES, QUICK_INDEXER_NS, (512,), QUICK_SAMPLER_BATCHES
    else:
        ib, i_ns, i_ks, sb = INDEXER_BATCHES, INDEXER_NS, INDEXER_KS, SAMPLER_BATCHES
    listed = {
        "indexer": [
            ("bf16", b, n, k, "none") for k in ks or i_ks for b in batches or ib for n in ns or i_ns
        ],
        "sampler": [
            ("fp32", b, n, k, "value")
            for k in ks or (SAMPLER_K,)
            for b in batches or sb
            for n in ns or (SAMPLER_N,)
        ],
    }
    cases: list[Case] = []
    for name in names:
        shapes = listed.get(name)
        if shapes is None:  # a fixed list: each override replaces its field
            shapes = [
                (d, b, n, k, order)
                for d, b0, n0, k0, order in _fixed_cases(name, cpu, quick)
                for k in (ks if ks and name != "read" else (k0,))
                for b in batches or (b0,)
                for n in ns or (n0,)
            ]
        for d, b, n, k, order in shapes:
            case = Case(name, dtype or DTYPES[d], b, n, k, order)
            if case not in cases:
                cases.append(case)
    return cases


def draw(
    kind: str,
    rows: int,
    n: int,
    dtype: torch.dtype,
    device: torch.device | str,
    seed: int = 0,
) -> torch.Tensor:
    """A ``[rows, n]`` tensor of distribution ``kind``, drawn on ``device``.

    The benchmark kinds (:data:`deepselect.distributions.BENCH_KINDS`, and
    ``all_equal``) are drawn directly on the device in fp32 and rounded to ``dtype``
    (same distributions as :func:`deepselect.distributions.make`, which builds fp64 on
    the CPU and would take minutes for a 4096 x 1M batch); other kinds come from
    ``distributions.make``.

    >>> draw("ascending", 2, 4, torch.float32, "cpu")[1].tolist()
    [0.0, 0.25, 0.5, 0.75]
    """
    device = torch.device(device)
    if kind not in distributions.KINDS:
        raise ValueError(f"dist must be one of {', '.join(distributions.KINDS)}; got {kind!r}")
    if kind not in ("normal", "shifted", "tiny", "ascending", "distinct32", "all_equal"):
        return distributions.make(kind, rows, n, dtype, device, seed)
    g = torch.Generator(device=device).manual_seed(seed)
    out = torch.empty(rows, n, dtype=dtype, device=device)
    if kind == "all_equal":  # as distributions.make: every element 1.5
        return out.fill_(1.5)
    if kind == "ascending":
        out.copy_((torch.arange(n, device=device, dtype=torch.float64) / max(n, 1)).expand(rows, n))
        return out
    pool = torch.randn(32, generator=g, device=device) * 10
    chunk = max(1, (64 << 20) // max(n, 1))  # bound the fp32 / int64 temporaries
    for r in range(0, rows, chunk):
        m = min(chunk, rows - r)
        if kind == "distinct32":
            part = pool[torch.randint(0, 32, (m, n), generator=g, device=device)]
        else:
            part = torch.randn(m, n, generator=g, device=device)
            if kind == "shifted":
                part += 100.0
            elif kind == "tiny":
                part *= 1e-8
        out[r : r + m] = part
    return out


def input_copies(
    case: Case, kind: str, device: torch.device | str, *, cold_bytes: int, seed: int = 0
) -> list[torch.Tensor]:
    """Views ``[batch, n]`` of one buffer at least ``cold_bytes`` large (one copy at
    least), filled with fresh random data: rotating through them defeats the cache."""
    copies = max(1, math.ceil(cold_bytes / max(case.input_bytes, 1)))
    buf = draw(kind, copies * case.batch, case.n, case.dtype, device, seed)
    return list(buf.view(copies, case.batch, case.n).unbind(0))
