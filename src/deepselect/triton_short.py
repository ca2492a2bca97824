"""The register-resident GPU path's plan and launches: rows short enough for one
program (:mod:`.ops.triton.short`), a few long rows split into segments whose exact
top-k are merged in the same launch (:mod:`.ops.triton.split`), or selected by radix
passes that every segment's program shares (:mod:`.ops.triton.passes`). Decided from
shapes only (:func:`short_path`), so a call can be captured in a CUDA graph; the
measured reason behind each rule is in ``docs/tuning.md`` ("Short rows and the split")."""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from dataclasses import dataclass, fields
from functools import cache

import torch

from . import launch_cache
from .ops.triton.launch import (
    _ORDER_CODE,
    _RAW,
    CROWDED_PER_SM,
    PageMap,
    _fill_bits,
    _interpreting,
    _next_pow2,
    bundle,
    key_constants,
    occupancy_cap,
    page_arguments,
    row_arguments,
    smem_hist,
)
from .ops.triton.passes import PASSES_DEFAULTS, PASSES_GROUPS, radix_phases_kernel
from .ops.triton.short import SHORT_DEFAULTS, SHORT_GROUPS, short_rows_kernel
from .ops.triton.split import SPLIT_DEFAULTS, SPLIT_GROUPS, split_fused_kernel
from .options import Order, TopkOptions
from .triton_bracket import BRACKET, run_bracket

# after a signature's first launch, launches skip Triton's per-call argument binding
_short_kernel = launch_cache.cached(short_rows_kernel)
_split_kernel = launch_cache.cached(split_fused_kernel)
_passes_kernel = launch_cache.cached(radix_phases_kernel)


def _can_launch_cooperatively() -> bool:
    """Whether this Triton launches a kernel cooperatively (``launch_cooperative_grid``,
    from Triton 3.3): every program resident at once, or the launch refused."""
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:  # pragma: no cover - a Triton without the NVIDIA backend
        return False
    return "launch_cooperative_grid" in {f.name for f in fields(CUDAOptions)}


COOPERATIVE = _can_launch_cooperatively()
_COOPERATIVE_REFUSED: dict[torch.device, int] = {}
"""Per device, the fewest programs a cooperative launch of the radix passes was
refused with (fewer SMs to this process than the device has, under MPS or a green
context; or programs too large to share an SM, as ``grid_per_sm > 1`` may ask):
passes of as many programs or more run one launch per phase from then on."""


# ---------------------------------------------------------------------- the kernel
# ------------------------------------------------------------------------- the plan
def _hash_once(self) -> int:
    """A frozen dataclass's hash, computed on first use and kept: configs and plans are
    cache keys on every call (hashing a plan's fields again costs ~1 us)."""
    h = self.__dict__.get("_hash")
    if h is None:
        h = self.__dict__["_hash"] = hash(tuple(getattr(self, f.name) for f in fields(self)))
    return h


@dataclass(frozen=True)
class ShortConfig:
    """The sizes a plan is built from. The product takes the defaults; the tests
    shrink them, so that the interpreter reaches the split, its merge levels and the
    radix passes on rows of a few hundred elements.

    nmax: the largest slice one program holds in registers (a power of two), 16
        elements a thread: the longest short row (but a wide one, twice as long at 32
        a thread: WIDE_SHORT_SLICES), the split's segment and merge group.
    min_seg: the shortest segment of a split or of the radix passes; a split's
        segment is also at least ``4 k`` long.
    split_rows: rows split (more than one) while ``rows < frac * sm_count``, ``frac``
        the first for rows of up to MID_BYTES, the second up to LONG_BYTES, the third
        beyond: the longer the row, the fewer rows split.
    """

    nmax: int = 8192
    min_seg: int = 1024
    split_rows: tuple[float, float, float] = (0.5, 0.25, 0.11)

    __hash__ = _hash_once


_DEFAULT = ShortConfig()
MID_BYTES, LONG_BYTES = 1 << 15, 1 << 17  # the row sizes between ShortConfig.split_rows
PER_THREAD = 16  # elements a thread holds: more spill, fewer add threads to every reduction
RADIX_BITS = 6  # a program's radix select: 5-6 bit digits do the least work (tl.histogram)
IN_LAUNCH_PER_SM = 6  # a split merges in its launch up to this many programs per SM
PASS_BITS = 8  # the digit of a radix pass
PASS_MIN_K = 1  # the radix passes for k above this: at k = 1 the split is as cheap
PASS_MAX_TILES = 8  # the most segments a program of the radix passes takes ...
PASS_TILES_MAX_BITS = 16  # ... and only for keys this wide (wider: a pass more to read)
PASS_OVER_STREAM_KP = 2048  # from this kp the radix passes, where they fit, beat the stream
LEAN_MAX_KP = 512  # a split of k up to this is lean (see lean_split)
LEAN_BITS = 8  # a lean split's digits
LEAN_REGS = 64  # a lean split's register cap: two programs of 16 warps per SM
BRACKET_KP = 2048  # many rows of 4K-16K at this kp: the bracket kernel
WIDE_SHORT_MIN_KP = 1024  # the smallest kp of a wide short row (k <= 512 stays streamed)
WIDE_SHORT_SLICES = 2  # the longest wide short row, in ShortConfig.nmax
"""Many rows (more than the split takes) of 16-bit keys, ``cfg.nmax < N <=
WIDE_SHORT_SLICES * cfg.nmax``, at kp >= WIDE_SHORT_MIN_KP: one program a row holds the
whole row (:func:`wide_short_plan`), not the streaming kernel, whose threshold rejects
little at k = N / 8 (bf16 4096 x 16K k = 2048: 434 us against 493 on an H100; the table
in docs/tuning.md)."""
MAX_IN_LAUNCH = 4
"""The most merge levels a split runs in one launch (:func:`split_fused_kernel`, where
each is another copy of the selection's code)."""

CROWDED = CROWDED_PER_SM
"""Programs per SM from which a short-row launch takes :meth:`Level.maxnreg`'s
occupancy cap, as many as the streaming kernel's crowded launches run (rows of one
program each: the cap only helps once every SM has programs waiting for the third
slot it makes)."""


@dataclass(frozen=True)
class Level:
    """One launch: ``nseg`` slices of ``L`` elements (or candidates) per row, held in
    ``nmax`` registers; ``src_cand``/``dst_cand`` say where it reads and writes."""

    L: int
    nseg: int
    nmax: int
    src_cand: bool
    dst_cand: bool
    num_warps: int
    crowded: bool = False  # programs enough for CROWDED per SM (set for short rows)

    def maxnreg(self, kp: int) -> int | None:
        """Register cap that keeps two programs per SM, where it costs (almost) no
        spills (ptxas, sm_90): 8 warps at <= 128 registers; 16 warps (8192 keys)
        writing the output at <= 64 where kp <= 1024 (larger kp, and levels writing
        candidates, spill there, so those stay uncapped). A crowded 8-warp launch
        (short rows, at least CROWDED programs per SM) takes the occupancy cap, three
        programs per SM."""
        if self.num_warps == 8:
            return occupancy_cap(CROWDED) if self.crowded else 128
        if self.num_warps == 16 and kp <= 1024 and not self.dst_cand and self.nmax <= 8192:
            return 64  # (a longer slice at 16 warps holds more than 16 a thread)
        return None


@dataclass(frozen=True)
class ShortPlan:
    """The launches of a short-row or split top-k, decided from shapes only.

    ``fused_stats``: (count, max, min) in one tuple reduction (not in the interpreter,
    which runs a tuple reduction element by element). ``lean``: a split of k up to
    LEAN_MAX_KP selects without the sampled prefilter, with LEAN_BITS-bit digits, at
    LEAN_REGS registers. ``in_launch``: a split whose merges run in its one launch
    (units of kp columns). ``pass_level``: unsorted or by index, radix passes over
    segments of the row instead, ``pass_tiles`` a program, in one cooperative launch
    (``grid_sync``) or one launch per phase."""

    kind: str  # "short", "split" or "bracket" (no levels: triton_bracket.run_bracket)
    levels: tuple[Level, ...]
    kp: int
    fused_stats: bool
    lean: bool = False
    in_launch: bool = False
    pass_level: Level | None = None
    pass_tiles: int = 1
    grid_sync: bool = False

    __hash__ = _hash_once

    def __str__(self) -> str:
        return describe(self)

    @property
    def passes(self) -> bool:
        return self.pass_level is not None


def _warps(nmax: int) -> int:
    return max(1, min(16, nmax // (32 * PER_THREAD)))


def _merge_levels(c: int, k: int, cfg: ShortConfig) -> list[Level]:
    """Candidate levels reducing ``c`` pairs per row to the final write."""
    out = []
    while True:
        g = min(cfg.nmax, max(16, _next_pow2(c)))
        nseg = -(-c // g)
        out.append(Level(g, nseg, g, True, nseg > 1, _warps(g)))
        if nseg == 1:
            return out
        c = nseg * k


def _in_launch_levels(units: int, kp: int, cfg: ShortConfig) -> list[Level] | None:
    """Merge levels for :func:`split_fused_kernel`: each reduces ``units`` of ``kp``
    candidate columns in groups of whole units (as many as ``nmax`` slots hold, fewer
    where fewer are left), each with the warps its slots want (the launch takes the
    most of its levels'); None where more than MAX_IN_LAUNCH levels would be needed
    or a group would hold only one unit."""
    out = []
    while True:
        g = min(cfg.nmax, max(16, _next_pow2(units * kp)))
        if g // kp < 2:
            return None
        groups = -(-units // (g // kp))
        out.append(Level(g, groups, g, True, groups > 1, _warps(g)))
        if groups == 1:
            return out if len(out) <= MAX_IN_LAUNCH else None
        units = groups


def short_path(
    x: torch.Tensor,
    k: int,
    opt: TopkOptions,
    sm_count: int,
    cfg: ShortConfig | None = None,
) -> ShortPlan | None:
    """Pick the register-resident path for ``x [rows, N]``, or None when the streaming
    kernel is the better choice (many long rows) or k is too large.

    Decided from ``rows``, ``N``, ``k``, the dtype's width and ``sm_count`` only —
    never from the data and without a device sync, so it is safe under CUDA-graph
    capture.

    >>> p = short_path(torch.empty(4, 3000), 64, TopkOptions(), sm_count=132)
    >>> describe(p)
    'short nmax=4096'
    """
    bits = x.element_size() * 8
    by_value = Order(opt.order) == Order.VALUE
    cfg = cfg or _DEFAULT
    return _plan(x.shape[0], x.shape[1], k, sm_count, cfg, _interpreting(), bits, by_value)


@cache  # decided once per shape: the plan is host work on every call
def _plan(
    rows: int,
    n: int,
    k: int,
    sm_count: int,
    cfg: ShortConfig,
    interpreting: bool,
    bits: int,
    by_value: bool,
) -> ShortPlan | None:
    if k > cfg.nmax or n >= 2**31 - 2**16:
        return None
    kp = max(16, _next_pow2(k))
    fused = not interpreting
    # many rows, k a large share of the row, unsorted or by index: the bracket kernel (a
    # program a row re-reading its row from L2), where a program held the whole row
    # (short, crowded: 16- and 32-bit keys; wide short: 16-bit) or the stream took it
    bracket = kp == BRACKET_KP and not by_value
    if n <= cfg.nmax:
        nm = max(16, _next_pow2(n))
        crowded = rows >= CROWDED * sm_count
        if bracket and crowded and n > cfg.nmax // 2:
            return ShortPlan("bracket", (), kp, fused)
        level = Level(max(n, 1), 1, nm, False, False, _warps(nm), crowded)
        return ShortPlan("short", (level,), kp, fused)
    # the radix passes: where one cooperative launch holds the rows' segments (the
    # interpreter runs programs one after another, so never there)
    passes = _pass_level(rows, n, sm_count, cfg, bits)
    pkw = {}
    if passes is not None and COOPERATIVE and not interpreting and k > PASS_MIN_K:
        pkw = dict(pass_level=passes[0], pass_tiles=passes[1], grid_sync=True)
    lmin = max(cfg.min_seg, _next_pow2(4 * k))
    if lmin > cfg.nmax:  # no split; radix passes (any k) unless sorted by value
        if not pkw or by_value:
            return None
        return ShortPlan("split", (pkw["pass_level"],), kp, fused, **pkw)
    row_bytes = n * bits // 8
    frac = cfg.split_rows[(row_bytes > MID_BYTES) + (row_bytes > LONG_BYTES)]
    if rows > 1 and rows >= frac * sm_count:
        # (one row always splits: a program alone leaves the rest idle). At large k the
        # stream's threshold rejects little, and the radix passes win wherever one
        # launch holds the rows' segments
        if pkw and not by_value and kp >= PASS_OVER_STREAM_KP:
            return ShortPlan("split", (pkw["pass_level"],), kp, fused, **pkw)
        if bracket and n <= WIDE_SHORT_SLICES * cfg.nmax:  # 16- and 32-bit keys
            return ShortPlan("bracket", (), kp, fused)
        if bits == 16 and kp >= WIDE_SHORT_MIN_KP and n <= WIDE_SHORT_SLICES * cfg.nmax:
            return wide_short_plan(n, k, cfg, interpreting)
        return None
    L = cfg.nmax
    nseg = -(-n // L)
    levels = [Level(L, nseg, L, False, True, _warps(L))]
    lean = kp <= LEAN_MAX_KP
    merges = None
    if rows * nseg <= IN_LAUNCH_PER_SM * sm_count:
        merges = _in_launch_levels(nseg, kp, cfg)
    if merges is not None:  # one launch: the warps that the largest slice wants
        w = max(lv.num_warps for lv in levels + merges)
        one = tuple(dataclasses.replace(lv, num_warps=w) for lv in levels + merges)
        return ShortPlan("split", one, kp, fused, lean, True, **pkw)
    levels += _merge_levels(nseg * k, k, cfg)
    return ShortPlan("split", tuple(levels), kp, fused, lean, **pkw)


def wide_short_plan(n: int, k: int, cfg: ShortConfig, interpreting: bool) -> ShortPlan:
    """One program a row of ``n`` elements, ``cfg.nmax < n <= WIDE_SHORT_SLICES *
    cfg.nmax``, holding the whole row at the warps of one slice (32 elements a thread)
    and selecting as a short row does (the sampled prefilter, RADIX_BITS-bit digits).

    >>> describe(wide_short_plan(16384, 2048, ShortConfig(), False))
    'short nmax=16384 warps=16'
    """
    if not cfg.nmax < n <= WIDE_SHORT_SLICES * cfg.nmax or k > cfg.nmax:
        raise ValueError(
            f"wide_short_plan takes {cfg.nmax} < n <= {WIDE_SHORT_SLICES * cfg.nmax} "
            f"and k <= {cfg.nmax}; got n = {n}, k = {k}"
        )
    kp = max(16, _next_pow2(k))
    level = Level(n, 1, _next_pow2(n), False, False, _warps(cfg.nmax))
    return ShortPlan("short", (level,), kp, not interpreting)


def _pass_level(
    rows: int, n: int, sm_count: int, cfg: ShortConfig, bits: int
) -> tuple[Level, int] | None:
    """The segments of a split's radix passes and how many a program takes, where one
    launch of at most a program per SM holds them (a program of up to 1,024 threads
    always fits an SM alone), else None: as many segments as there are SMs (at least
    ``min_seg`` long, at most ``nmax``), so that every SM shares the work; where more
    are needed, up to PASS_MAX_TILES a program for keys of up to PASS_TILES_MAX_BITS."""
    L = min(cfg.nmax, max(cfg.min_seg, _next_pow2(-(-rows * n // sm_count))))
    nseg = -(-n // L)
    per_row = sm_count // rows  # programs a row may have
    if per_row == 0:
        return None
    tiles = -(-nseg // per_row)  # the fewest segments a program
    if tiles > (PASS_MAX_TILES if bits <= PASS_TILES_MAX_BITS else 1):
        return None
    return Level(L, nseg, L, False, False, _warps(L)), tiles


def describe(plan: ShortPlan | None) -> str:
    """One line for a benchmark table: the path and, for a split, the segment length,
    segments per row and each merge level's group size x groups."""
    if plan is None:
        return "stream"
    if plan.kind == "bracket":
        return "bracket"
    if plan.kind == "short":
        lv = plan.levels[0]
        wide = lv.nmax > 32 * PER_THREAD * lv.num_warps  # (a wide short row's warps)
        warps = f" warps={lv.num_warps}" if wide else ""
        return f"short nmax={lv.nmax}{warps}" + (" crowded" if lv.crowded else "")
    first = plan.levels[0]
    merges = " ".join(f"{lv.L}x{lv.nseg}" for lv in plan.levels[1:])
    return (
        f"split L={first.L} seg={first.nseg} merge={merges}"
        + (" in-launch" if plan.in_launch else "")
        + (f" passes L={plan.pass_level.L}" if plan.passes else "")
        + (f" tiles={plan.pass_tiles}" if plan.pass_tiles > 1 else "")
        + (" one-launch" if plan.grid_sync else "")
    )


# ----------------------------------------------------------------------- the launch
def kernel_constants(
    dtype: torch.dtype,
    plan: ShortPlan,
    level: Level,
    *,
    largest: bool,
    order: Order,
    has_window: int,
    off_tensor: bool,
    write_values: bool,
) -> dict:
    """The compile-time parameters of ``short_rows_kernel`` for one level of a plan
    (the launch and a compile check without a GPU build the same kernel)."""
    return dict(
        **key_constants(dtype, largest),
        SRC_CAND=level.src_cand,
        DST_CAND=level.dst_cand,
        ORDER=_ORDER_CODE[Order(order)],
        HAS_WINDOW=has_window,
        OFF_TENSOR=off_tensor,
        WRITE_VALUES=write_values,
        NMAX=level.nmax,
        KP=plan.kp,
        FUSED_STATS=plan.fused_stats,
        SMEM_HIST=smem_hist(),
        RADIX_BITS=LEAN_BITS if plan.lean else RADIX_BITS,
        PREFILTER=prefilters(plan, level),
        CAND=cand_size(level.nmax, plan.kp),
        NT=32 * level.num_warps,
    )


def in_launch_constants(
    dtype: torch.dtype,
    plan: ShortPlan,
    *,
    largest: bool,
    order: Order,
    has_window: int,
    off_tensor: bool,
    write_values: bool,
) -> dict:
    """The compile-time parameters of ``split_fused_kernel`` for an ``in_launch`` plan:
    level 0's as :func:`kernel_constants` gives them, and per merge level its group
    slots (``MS``), prefilter (``PS``) and prefilter room (``CS``)."""
    first, merges = plan.levels[0], plan.levels[1:]
    kw = kernel_constants(
        dtype, plan, first, largest=largest, order=order, has_window=has_window,
        off_tensor=off_tensor, write_values=write_values,
    )  # fmt: skip
    del kw["SRC_CAND"], kw["DST_CAND"]
    kw["NLEV"] = len(merges)
    kw["MS"] = tuple(lv.nmax for lv in merges)
    kw["PS"] = tuple(prefilters(plan, lv) for lv in merges)
    kw["CS"] = tuple(cand_size(lv.nmax, plan.kp) for lv in merges)
    kw["SCR"] = max(kw["CAND"], *kw["CS"])
    return kw


def passes_constants(
    dtype: torch.dtype,
    plan: ShortPlan,
    sync: bool,
    *,
    largest: bool,
    order: Order,
    has_window: int,
    off_tensor: bool,
    write_values: bool,
) -> list[dict]:
    """The compile-time parameters of each ``radix_phases_kernel`` launch of a plan
    with ``passes``: all phases in one (``sync``: the plan's ``grid_sync``, where the
    device takes it) or one launch per phase (a pass per PASS_BITS-bit digit of the
    key, the write); the segments at the warps their length wants (not those of the
    split's merges)."""
    first = plan.pass_level
    kw = kernel_constants(
        dtype, plan, first, largest=largest, order=order, has_window=has_window,
        off_tensor=off_tensor, write_values=write_values,
    )  # fmt: skip
    common = {n: kw[n] for n in ("KEY_MASK", "SIGN", "INF_BITS", "LARGEST", "RAW16")}
    common.update(HAS_WINDOW=has_window, OFF_TENSOR=off_tensor, WRITE_VALUES=write_values)
    common.update(NMAX=first.nmax, KP=plan.kp, NT=kw["NT"], DIGIT=PASS_BITS)
    common.update(NSEGP=_next_pow2(first.nseg), TILES=plan.pass_tiles, SMEM_HIST=smem_hist())
    last = pass_count(dtype)
    if sync:
        return [dict(common, FIRST=0, LAST=last)]
    return [dict(common, FIRST=p, LAST=p) for p in range(last + 1)]


def pass_count(dtype: torch.dtype) -> int:
    """Radix passes over keys of ``dtype``."""
    return -(-torch.finfo(dtype).bits // PASS_BITS)


def cand_size(nmax: int, kp: int) -> int:
    """Room for the elements a prefilter keeps (a power of two): twice ``kp`` (the
    power of two >= k), at least an eighth of the slice."""
    return min(nmax, max(2 * kp, nmax // 8, 16))


def prefilters(plan: ShortPlan, level: Level) -> bool:
    """Whether ``level`` tries the sampled prefilter: not in a lean split, and slices
    long enough that the kept elements fill at most a quarter of them."""
    return not plan.lean and level.nmax >= 4 * cand_size(level.nmax, plan.kp)


@cache  # built once per plan and call shape: host time per call
def _launch_kwargs(
    dtype: torch.dtype, plan: ShortPlan, flags: tuple, page_flags: tuple, interp: bool
) -> tuple[dict, ...]:
    """Per level of ``plan``: its compile-time arguments (``flags``: the keyword
    arguments of :func:`kernel_constants` as ``(name, value)`` pairs; ``page_flags``
    those of the page map, for the level that writes the output) and launch options
    (warps, the register cap; none in the interpreter). An ``in_launch`` plan: one
    launch's (:func:`in_launch_constants`), at its levels' warps, uncapped unless
    lean."""
    if plan.in_launch:
        kw = in_launch_constants(dtype, plan, **dict(flags))
        kw.update(page_flags)
        kw["num_warps"] = plan.levels[0].num_warps
        if plan.lean and not interp:
            kw["maxnreg"] = LEAN_REGS
        return (kw,)
    out = []
    for lv in plan.levels:
        kw = kernel_constants(dtype, plan, lv, **dict(flags))
        if not lv.dst_cand:
            kw.update(page_flags)
        kw["num_warps"] = lv.num_warps
        cap = None if interp else (LEAN_REGS if plan.lean else lv.maxnreg(plan.kp))
        if cap is not None:
            kw["maxnreg"] = cap
        out.append(kw)
    return tuple(out)


@cache  # bundled once per plan and call shape
def _launch_bundles(
    dtype: torch.dtype, plan: ShortPlan, flags: tuple, page_flags: tuple, interp: bool
) -> tuple[tuple[dict, dict], ...]:
    """Per launch of :func:`_launch_kwargs`: its keyword arguments as they are and
    bundled as the kernel's tuple parameters take them."""
    groups, defaults = (SPLIT_GROUPS, SPLIT_DEFAULTS) if plan.in_launch else (
        SHORT_GROUPS, SHORT_DEFAULTS)  # fmt: skip
    each = _launch_kwargs(dtype, plan, flags, page_flags, interp)
    return tuple((kw, bundle(groups, kw, defaults)) for kw in each)


@cache
def _passes_bundles(
    dtype: torch.dtype, plan: ShortPlan, flags: tuple, page_flags: tuple, sync: bool
) -> tuple[dict, ...]:
    """:func:`_passes_kwargs`'s launches, bundled as ``radix_phases_kernel`` takes them."""
    each = _passes_kwargs(dtype, plan, flags, page_flags, sync)
    return tuple(bundle(PASSES_GROUPS, kw, PASSES_DEFAULTS) for kw in each)


@cache
def _passes_kwargs(
    dtype: torch.dtype, plan: ShortPlan, flags: tuple, page_flags: tuple, sync: bool
) -> tuple[dict, ...]:
    """Each launch's compile-time arguments and launch options (as
    :func:`_launch_kwargs` gives a level's; no register cap: they hold one slice;
    the one launch of ``sync`` cooperative)."""
    warps = plan.pass_level.num_warps
    each = passes_constants(dtype, plan, sync, **dict(flags))
    out = tuple(dict(kw, num_warps=warps) for kw in each)
    out[-1].update(page_flags)  # the write's
    if sync:
        out[0]["launch_cooperative_grid"] = True
    return out


def _flat_names(kernel, groups: dict) -> list[str]:
    """``kernel``'s arguments by name in order, each tuple parameter of ``groups`` as the
    arguments it bundles."""
    names = inspect.signature(kernel.fn).parameters
    return [m for name in names for m in groups.get(name, (name,))]


def kernel_signature(dtype: torch.dtype, idx64: bool) -> dict:
    """Argument types of ``short_rows_kernel`` by name, its tuple parameters' members
    apart (for ``scripts/compile_check.source``)."""
    raw = "*i16" if dtype in (torch.bfloat16, torch.float16) else "*i32"
    i32 = "i32"
    sig = dict(x_ptr=raw, stride_xr=i32, stride_xc=i32, N=i32, begin_ptr="*i64")
    sig.update(end_ptr="*i64", sk_ptr="*i32", si_ptr="*i32", C=i32, dk_ptr="*i32")
    sig.update(di_ptr="*i32", DC=i32, ov_ptr=raw, oi_ptr="*i64" if idx64 else "*i32")
    for name in ("stride_ovr", "stride_ovc", "stride_oir", "stride_oic"):
        sig[name] = i32
    sig.update(off_ptr="*i64", off_scalar=i32, fill_index=i32, fill_bits=i32)
    sig.update(k=i32, L=i32, nseg=i32, page_ptr="*i32", page_stride=i32, max_pages=i32)
    sig.update(n_batch=i32, r2b_ptr="*i64", scr_ptr="*i64")
    return sig


def passes_signature(dtype: torch.dtype, idx64: bool) -> dict:
    """Argument types of ``radix_phases_kernel``, as :func:`kernel_signature` gives
    them."""
    types = kernel_signature(dtype, idx64)
    types.update(tot_ptr="*i32", cnt_ptr="*i32", hs_ptr="*i32")
    names = _flat_names(radix_phases_kernel, PASSES_GROUPS)
    return {name: types[name] for name in names if name in types}


def in_launch_signature(dtype: torch.dtype, idx64: bool) -> dict:
    """Argument types of ``split_fused_kernel``, as :func:`kernel_signature` gives them:
    those of ``short_rows_kernel`` it shares, its candidate buffers and counters, in
    its own order."""
    types = kernel_signature(dtype, idx64)
    types.update(ck_ptr="*i32", ci_ptr="*i32", DCT="i32", cnt_ptr="*i32", NCNT="i32")
    names = _flat_names(split_fused_kernel, SPLIT_GROUPS)
    return {name: types[name] for name in names if name in types}


def run_short(
    x: torch.Tensor,
    k: int,
    opt: TopkOptions,
    out_values: torch.Tensor | None,
    out_indices: torch.Tensor,
    plan: ShortPlan,
    page: PageMap | None = None,
) -> None:
    """Write the exact top-k of every row of ``x`` into the given buffers, by ``plan``.

    Args:
        x: ``[rows, N]`` bf16 / fp16 / fp32 on a CUDA device (or the CPU under
            ``TRITON_INTERPRET=1``), any strides.
        k: outputs per row, at most the plan's ``nmax``.
        opt: the output options (windows, order, fills, offsets, index dtype).
        out_values: ``[rows, k]`` of ``x.dtype`` or None; out_indices: ``[rows, k]``
            of ``opt.index_dtype``; any strides.
        plan: from :func:`short_path` for this shape.
        page: optional :class:`~deepselect.ops.triton.launch.PageMap`: indices written as
            physical slots of a paged cache (final level only).

    >>> x = torch.randn(2, 300, device="cuda")  # doctest: +SKIP
    >>> oi = torch.empty(2, 8, dtype=torch.int32, device="cuda")  # doctest: +SKIP
    >>> plan = short_path(x, 8, TopkOptions(), sm_count=132)  # doctest: +SKIP
    >>> run_short(x, 8, TopkOptions(), None, oi, plan)  # doctest: +SKIP
    """
    rows, n = x.shape
    if rows == 0:
        return
    if plan.kind == "bracket":
        run_bracket(x, k, opt, out_values, out_indices, BRACKET, page)
        return
    dev = x.device
    raw = x.view(_RAW[x.dtype])  # same width: a view for any strides
    has_window, begin, end, off_tensor, off_ptr, off_scalar = row_arguments(x, opt, out_indices)
    fill_bits = _fill_bits(opt.resolved_fill_value(x.dtype), x.dtype)
    page_args, page_flags = page_arguments(page, out_indices)
    no_page, _ = page_arguments(None, out_indices)
    write_values = out_values is not None
    ov = out_values.view(_RAW[x.dtype]) if write_values else raw
    ov_strides = (ov.stride(0), ov.stride(1)) if write_values else (0, 0)
    xin = (raw, x.stride(0), x.stride(1), n)
    out = (ov, out_indices, *ov_strides, out_indices.stride(0), out_indices.stride(1))
    fills = (opt.fill_index, fill_bits)
    flags = (
        ("largest", opt.largest),
        ("order", opt.order),
        ("has_window", has_window),
        ("off_tensor", off_tensor),
        ("write_values", write_values),
    )
    if plan.passes and Order(opt.order) != Order.VALUE:
        first = plan.pass_level
        npass = pass_count(x.dtype)
        ntot = rows * npass << PASS_BITS
        zero = launch_cache.scratch(ntot + rows * npass, torch.int32, dev, zero=True)  # a memset
        hs = launch_cache.scratch((rows, first.nseg, npass << PASS_BITS), torch.int32, dev)
        grid = (rows * -(-first.nseg // plan.pass_tiles),)
        args = (
            xin, (begin, end), (zero[:ntot], zero[ntot:], hs), out, (off_ptr, off_scalar),
            fills, k, first.L, first.nseg, page_args,
        )  # fmt: skip
        refused = _COOPERATIVE_REFUSED.get(dev)
        if plan.grid_sync and (refused is None or grid[0] < refused):
            (kw,) = _passes_bundles(x.dtype, plan, flags, tuple(page_flags.items()), True)
            try:
                _passes_kernel[grid](*args, **kw)
                return
            except RuntimeError as e:  # more programs than the device holds at once
                if "cooperative" not in str(e):
                    raise
                _COOPERATIVE_REFUSED[dev] = grid[0]  # (nothing ran: counters still zero)
                warnings.warn(
                    f"{dev} refused a cooperative launch of {grid[0]} programs ({e}); "
                    "deepselect's radix passes of as many run one launch per phase on it "
                    "from now on (slower, as exact)",
                    RuntimeWarning,
                    stacklevel=2,
                )
        for kw in _passes_bundles(x.dtype, plan, flags, tuple(page_flags.items()), False):
            _passes_kernel[grid](*args, **kw)
        return
    launch_kw = _launch_bundles(x.dtype, plan, flags, tuple(page_flags.items()), _interpreting())
    if plan.in_launch:
        first, ((kw, bundled),) = plan.levels[0], launch_kw
        units = [first.nseg] + [lv.nseg for lv in plan.levels[1:-1]]
        dct = sum(units) * plan.kp  # every level's units but the last (the outputs)
        ck = launch_cache.scratch((rows, dct), torch.int32, dev)
        ci = launch_cache.scratch((rows, dct), torch.int32, dev)
        ncnt = sum(lv.nseg for lv in plan.levels[1:])  # one counter per merge group
        cnt = launch_cache.scratch((rows, ncnt), torch.int32, dev, zero=True)
        scr = out_indices  # unused unless a level prefilters
        if kw["PREFILTER"] or any(kw["PS"]):
            scr = launch_cache.scratch((rows * first.nseg, kw["SCR"]), torch.int64, dev)
        _split_kernel[(rows * first.nseg,)](
            xin, (begin, end), (ck, ci, dct), (cnt, ncnt), out, (off_ptr, off_scalar), fills, k,
            first.L, first.nseg, page_args, scr, **bundled,
        )  # fmt: skip
        return
    src_k = src_i = out_indices  # unused until a level writes candidates
    c = 0
    for lv, (kw, bundled) in zip(plan.levels, launch_kw, strict=True):
        if lv.dst_cand:
            dc = lv.nseg * k
            dst_k = launch_cache.scratch((rows, dc), torch.int32, dev)
            dst_i = launch_cache.scratch((rows, dc), torch.int32, dev)
        else:
            dc = 0
            dst_k = dst_i = out_indices
        scr = out_indices  # unused unless the level prefilters
        if kw["PREFILTER"]:
            scr = launch_cache.scratch((rows * lv.nseg, kw["CAND"]), torch.int64, dev)
        _short_kernel[(rows * lv.nseg,)](
            xin,
            (begin, end),
            (src_k, src_i, c),
            (dst_k, dst_i, dc),
            out,
            (off_ptr, off_scalar),
            fills,
            k,
            lv.L,
            lv.nseg,
            page_args if not lv.dst_cand else no_page,
            scr,
            **bundled,
        )
        src_k, src_i, c = dst_k, dst_i, dc
