"""Launch configuration and dispatch for the Triton kernels.

Everything here is decided from shapes, dtypes, strides and the device — never from
the data — so a call can be captured in a CUDA graph.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from functools import cache

import torch
import triton

from . import launch_cache, reference
from ._log import log_launch
from .ops.triton.common import NREG, THREADS, WORDS, _inf_bits
from .ops.triton.filter import HIST_BYTES, filter_asm
from .ops.triton.launch import (
    _ORDER_CODE,
    _RAW,
    CROWDED_PER_SM,
    KeptRows,
    PageMap,
    _fill_bits,
    _interpreting,
    _next_pow2,
    bundle,
    kept_arguments,
    occupancy_cap,
    page_arguments,
    row_arguments,
)
from .ops.triton.stream import ROWS_DEFAULTS, ROWS_GROUPS, deepselect_rows_kernel
from .ops.triton.sync import ring_base_asm, ring_bytes, ring_read_asm
from .options import Order, TopkOptions
from .oracle import run_oracle

MAX_FAST_K = 4096
"""Largest k of the one-pass kernel; larger k takes the exact sort-based path."""

# after a signature's first launch, launches skip Triton's per-call argument binding
_rows_kernel = launch_cache.cached(deepselect_rows_kernel)


@dataclass(frozen=True)
class LaunchConfig:
    """Shape-only launch parameters of the streaming kernel (``deepselect_rows_kernel``);
    :func:`stream_config` sets them for a call shape, and docs/tuning.md gives the
    measurement behind each rule.

    B: elements per block, 8 KiB of input (one 32-bit word per thread per column for
       8 columns and 256 threads: 16 bf16/fp16 or 8 fp32 per thread).
    CAP: candidate buffer capacity in slots (a power of two); B2 = CAP - k - B (or
       less, where ``check_every`` blocks go between checks), the slack that keeps
       the buffer bound k + B2 + B within CAP.
    KP: k's power of two (at least 16): the output's tile.
    programs_per_sm, maxnreg: persistent programs per SM and the register cap that
       fits them (:func:`occupancy_cap`).
    check_every: blocks between compaction checks of the block-synchronous loop (the
       buffer then holds that many blocks' worst case, :func:`check_variant`).
    w32: the warp-private loop: each warp filters its share of every block at its own
       pace and the warps meet only to compact (the PTX path with 16-byte loads).
    ring: with ``w32``, the stages of each warp's ring of 1 KiB in shared memory filled
       by ``cp.async`` (0: two register-held blocks).
    raise_every: with ``ring`` and ``sample_pre``, every this many blocks a warp in turn
       offers the threshold key that k hits of a shared-memory histogram reach (0: off).
    sample_pre: a long enough row's threshold starts at the bound of a sample of it,
       found before the stream over keys held in registers (False: the bound is the
       first compaction's, of the sample appended as the row's first blocks).
    sample_tol: the bisection for that bound may stop once between the rank and
       ``rank * (1 + 2^-sample_tol)`` sampled keys lie at or above the key (a lower
       bound, as valid; 0: exact).
    sample_keys: the sample's size (a power of two; 0: CAP, at most SAMPLE_HELD).
    sample_radix: the sample's bound by a radix select (8-bit digits) rather than
       the bisection; ``sample_bits``: the select stops once that many top bits of
       the key are known (the lowest key of their bin: a lower bound; 0: all).
    sample_z: the margin of the sample's rank (:func:`deepselect.reference.sample_rank`;
       a negative one makes rows fall back to the selection without a sample, which
       tests use to reach that path).
    """

    B: int
    CAP: int
    B2: int
    KP: int
    programs_per_sm: int = 2
    maxnreg: int | None = 128
    check_every: int = 1
    w32: bool = False
    ring: int = 0
    raise_every: int = 0
    sample_pre: bool = True
    sample_tol: int = 0
    sample_keys: int = 0
    sample_radix: bool = False
    sample_bits: int = 0
    sample_z: float = reference.SAMPLE_Z

    @property
    def sample_keys_held(self) -> int:
        """The keys of the sample read into registers for its bound: ``sample_keys``,
        or all ``CAP`` of the first compaction's sample, at most SAMPLE_HELD."""
        return min(self.sample_keys or self.CAP, self.CAP, SAMPLE_HELD)


NUM_WARPS = 8
"""Warps of a streaming program (256 threads: one column of a block each)."""
W32_FROM = 128
"""Rows of at least this many blocks take the warp-private loop (``w32``)."""

SAMPLE_HELD = 8192
"""The most sample keys held in registers for the bound (32 a thread)."""


RING_MAX = 5
"""The most stages ``LaunchConfig.ring`` may have: 40 KiB of static shared memory a
program of 8 warps (:func:`ring_stages_max` bounds it further for larger k)."""
LAUNCH_SMEM = 48 * 1024
"""Shared memory a launch may use without opting in (static and dynamic together;
Triton opts in only where its own dynamic part alone exceeds it)."""


def own_smem(kp: int) -> int:
    """The most shared memory the kernel itself takes at ``kp``: its largest part is
    the sorted output's, up to 8 bytes a slot (16 KiB at kp = 2048, 32 KiB at 4096:
    bf16 and fp32 sorted by value, ptxas for sm_90)."""
    return 8 * kp


def ring_stages_max(kp: int) -> int:
    """The most ring stages a program may declare beside the kernel's own shared
    memory (:func:`own_smem`), within LAUNCH_SMEM. Past it the launch fails
    ("invalid argument")."""
    return max(0, min(RING_MAX, (LAUNCH_SMEM - own_smem(kp)) // ring_bytes(1)))


RAISE_MAX = 32
"""The largest ``LaunchConfig.raise_every``."""


def raise_fits(kp: int, ring: int) -> bool:
    """Whether the histogram of ``LaunchConfig.raise_every`` fits beside a ring of
    ``ring`` stages and the kernel's own shared memory (as :func:`ring_stages_max`)."""
    return own_smem(kp) + ring_bytes(ring) + HIST_BYTES <= LAUNCH_SMEM


RAISE_EVERY = 8
"""``LaunchConfig.raise_every`` for 16-bit keys (32-bit keys: off)."""
RING_STAGES = 4
"""``LaunchConfig.ring`` where :func:`ring_stages_max` allows it (k up to 2048)."""
CROWDED_MAX_K = 512
"""The largest k that a crowded launch takes."""
SHORT_SAMPLE_N = 65536
"""16-bit rows of up to this many elements, k <= SHORT_SAMPLE_MAX_K, take a sample of
4096 keys (``sample_keys``)."""
SHORT_SAMPLE_MAX_K = 512
W32_MID_BLOCKS = 32
"""Rows of this many blocks or more, below W32_FROM, may take the warp-private loop."""
W32_MID_MAX_K32 = 2048
"""... for 32-bit keys, k up to this."""
W32_MID_MAX_K16 = 512
"""... for 16-bit keys, k up to this."""
CHUNK_EVERY = 4
"""Blocks between the compaction checks of 16-bit rows in the block-synchronous loop."""


@cache
def launch_config(dtype: torch.dtype, k: int) -> LaunchConfig:
    """The launch every shape starts from: two programs per SM at 128 registers, a
    buffer of at least 8192 slots, the ring where it fits, the raised threshold for
    16-bit keys, and for 32-bit keys a sample bound that may stop early."""
    bits = 16 if dtype in (torch.bfloat16, torch.float16) else 32
    B = THREADS * WORDS * (32 // bits)
    cap = max(8192, _next_pow2(k + B + max(B // 2, k)))
    kp = max(16, _next_pow2(k))
    return LaunchConfig(
        B=B, CAP=cap, B2=cap - k - B, KP=kp, sample_tol=2 if bits == 32 else 0,
        ring=RING_STAGES if ring_stages_max(kp) >= RING_STAGES else 0,
        raise_every=RAISE_EVERY if bits == 16 else 0,
    )  # fmt: skip


def kernel_constants(
    dtype: torch.dtype,
    cfg: LaunchConfig,
    *,
    largest: bool,
    order: Order,
    has_window: int,
    off_tensor: bool,
    write_values: bool,
    asm: bool,
    vec: bool = False,
) -> dict:
    """The compile-time parameters of ``deepselect_rows_kernel`` for one call shape
    (also used by scripts/compile_check.py, so both compile the same kernel)."""
    bits = 16 if dtype in (torch.bfloat16, torch.float16) else 32
    fp16 = dtype == torch.float16
    if cfg.sample_keys < 0 or cfg.sample_keys & (cfg.sample_keys - 1):
        raise ValueError(f"sample_keys must be 0 or a power of two, not {cfg.sample_keys}")
    if cfg.CAP >= 1 << 20:  # the compaction's passes pack counts of candidates in 20 bits
        raise ValueError(f"the candidate buffer needs CAP < 2^20, not {cfg.CAP}")
    w32 = cfg.w32 and vec and asm and cfg.check_every == 1
    ring = cfg.ring if w32 else 0
    if not 0 <= cfg.raise_every <= RAISE_MAX or cfg.raise_every & (cfg.raise_every - 1):
        raise ValueError(
            f"raise_every must be 0 or a power of two up to {RAISE_MAX}, not {cfg.raise_every}"
        )
    # the threshold raised from the hits' histogram: only in the ring's loop, from the
    # bound of a sample taken in registers, where the histogram fits
    raising = bool(ring and cfg.sample_pre and raise_fits(cfg.KP, ring))
    raise_every = cfg.raise_every if raising else 0
    if not 0 <= cfg.sample_bits <= bits:
        raise ValueError(f"sample_bits must be 0 to {bits} for {dtype}, not {cfg.sample_bits}")
    if not 0 <= cfg.ring <= ring_stages_max(cfg.KP):  # static and the kernel's own under 48 KiB
        raise ValueError(
            f"LaunchConfig.ring is 0 to {ring_stages_max(cfg.KP)} stages at KP = {cfg.KP}, "
            f"got {cfg.ring}"
        )
    held = cfg.sample_keys_held
    return dict(
        KEY_BITS=bits,
        KEY_MASK=(1 << bits) - 1,
        SIGN=1 << (bits - 1),
        INF_BITS=_inf_bits(bits, fp16),
        LARGEST=largest,
        ORDER=_ORDER_CODE[order],
        HAS_WINDOW=has_window,
        OFF_TENSOR=off_tensor,
        WRITE_VALUES=write_values,
        USE_ASM=asm,
        FILTER=filter_asm(bits, largest, fp16, vec, raise_every > 0) if asm else "",
        B=cfg.B,
        CAP=cfg.CAP,
        KP=cfg.KP,
        CHECK_EVERY=cfg.check_every,
        VEC=vec,
        W32=w32,
        RING=ring,
        RING_BASE=ring_base_asm(ring) if ring else "",
        RING_READ=ring_read_asm(ring) if ring else "",
        RAISE=raise_every,
        SAMPLE_Z=float(cfg.sample_z),
        SAMPLE_PRE=cfg.sample_pre,
        SAMPLE_RADIX=cfg.sample_radix,
        SAMPLE_BITS=cfg.sample_bits if cfg.sample_radix and cfg.sample_bits < bits else 0,
        SAMPLE_TOL=cfg.sample_tol if cfg.sample_pre else 0,
        SAMPLE_KEYS=held,
        # the sample as runs of 128 bytes (or of the block, or of the sample, if
        # shorter) spread over the whole window
        SAMPLE_CHUNK=min(1024 // bits, cfg.B, held),
        # the middle blocks a row needs for its sample: the first compaction's CAP // B
        # (so also where the bound is taken from registers, as timed), or, past
        # SAMPLE_HELD, those the keys of the bound from registers take
        SAMPLE_BLOCKS=(
            -(-held // cfg.B) if cfg.sample_pre and cfg.CAP > SAMPLE_HELD else cfg.CAP // cfg.B
        ),
    )


def occupancy_variant(cfg: LaunchConfig, programs_per_sm: int) -> LaunchConfig:
    """``cfg`` with ``programs_per_sm`` programs per SM at the register cap that fits
    them."""
    return dataclasses.replace(
        cfg, programs_per_sm=programs_per_sm, maxnreg=occupancy_cap(programs_per_sm)
    )


def check_variant(cfg: LaunchConfig, k: int, every: int) -> LaunchConfig:
    """``cfg`` checking for compaction every ``every`` blocks, with the buffer grown to
    hold that many blocks' worst case (the keys are not held in registers, so its
    size costs only scratch memory where it is not filled)."""
    cap = max(cfg.CAP, _next_pow2(k + (1 + every) * cfg.B + max(cfg.B // 2, k)))
    return dataclasses.replace(cfg, CAP=cap, B2=cap - k - every * cfg.B, check_every=every)


@cache  # decided once per call shape: the rules' dataclass copies are host time per call
def stream_config(dtype: torch.dtype, k: int, rows: int, n: int, sm_count: int) -> LaunchConfig:
    """The streaming kernel's launch for ``rows`` rows of ``n`` on ``sm_count`` SMs,
    from shapes only (the rules' measurements: docs/tuning.md).

    - 16-bit rows of up to SHORT_SAMPLE_N, k <= SHORT_SAMPLE_MAX_K: a 4096-key sample.
    - Rows of W32_MID_BLOCKS blocks or more below W32_FROM: 32-bit keys, k <=
      W32_MID_MAX_K32, take the warp-private loop (crowded, CROWDED_PER_SM programs
      per SM, where they take more than two waves and k <= CROWDED_MAX_K); 16-bit
      keys, k <= W32_MID_MAX_K16, take it at two programs per SM unless crowded.
    - More rows than two programs per SM cover, k <= CROWDED_MAX_K: crowded; a
      block-synchronous one whose buffer holds two blocks' worst case checks every
      second block with the sample's bound from a first compaction; other crowded
      launches only where the third program per SM saves a wave of rows.
    - Then: 16-bit rows of the block-synchronous loop check every CHUNK_EVERY blocks,
      and rows below W32_FROM blocks take the sample's bound by a radix select (of
      16 top bits for 32-bit keys); rows of W32_FROM blocks or more stream by
      independent warps.
    """
    cfg = stream_shape(dtype, k, rows, n, sm_count)
    below_w32 = n < W32_FROM * cfg.B
    sixteen = dtype in (torch.bfloat16, torch.float16)
    if sixteen and not cfg.w32 and below_w32 and cfg.check_every == 1:
        cfg = check_variant(cfg, k, CHUNK_EVERY)
    if below_w32:
        cfg = dataclasses.replace(cfg, sample_radix=True, sample_bits=0 if sixteen else 16)
    elif not cfg.w32:
        cfg = dataclasses.replace(cfg, w32=True)
    return cfg


def stream_shape(dtype: torch.dtype, k: int, rows: int, n: int, sm_count: int) -> LaunchConfig:
    """:func:`stream_config`'s rules on occupancy, the loop and the sample's size."""
    cfg = launch_config(dtype, k)
    sixteen = dtype in (torch.bfloat16, torch.float16)
    if sixteen and n <= SHORT_SAMPLE_N and k <= SHORT_SAMPLE_MAX_K:
        cfg = dataclasses.replace(cfg, sample_keys=4096)
    mid = W32_MID_BLOCKS * cfg.B <= n < W32_FROM * cfg.B
    two_waves = rows <= 2 * cfg.programs_per_sm * sm_count
    if mid and not sixteen and k <= W32_MID_MAX_K32:
        if two_waves or k > CROWDED_MAX_K:
            return dataclasses.replace(cfg, w32=True)
        return dataclasses.replace(occupancy_variant(cfg, CROWDED_PER_SM), w32=True)
    if rows > cfg.programs_per_sm * sm_count and k <= CROWDED_MAX_K:
        crowded = occupancy_variant(cfg, CROWDED_PER_SM)
        every2 = check_variant(crowded, k, 2)
        if every2.CAP == crowded.CAP and n < W32_FROM * cfg.B:
            return dataclasses.replace(every2, sample_pre=False)
        waves = triton.cdiv(rows, cfg.programs_per_sm * sm_count)
        if triton.cdiv(rows, CROWDED_PER_SM * sm_count) < waves:  # a wave of rows saved
            return crowded
    if mid and sixteen and k <= W32_MID_MAX_K16:  # at two programs per SM
        return dataclasses.replace(cfg, w32=True)
    return cfg


@cache  # one dict per call shape: no per-call rebuild
def _constants(dtype: torch.dtype, cfg: LaunchConfig, diag: tuple, page_flags: tuple, **kw) -> dict:
    """:func:`kernel_constants` with the diagnostics' flags ``(PROFILE, PRESET)`` and the
    page map's and the sampling output's (``(name, value)`` pairs), bundled as the
    kernel's tuple parameters take them (``ROWS_GROUPS``)."""
    flat = dict(kernel_constants(dtype, cfg, **kw), PROFILE=diag[0], PRESET=diag[1])
    return bundle(ROWS_GROUPS, dict(flat, **dict(page_flags)), ROWS_DEFAULTS)


def _check_buffer(cfg: LaunchConfig) -> None:
    """ValueError unless a region holds ``check_every`` blocks' worst case and the
    slack B2 is at least 1."""
    if cfg.CAP // 8 <= cfg.check_every * (cfg.B // 8) or cfg.B2 < 1:
        raise ValueError(f"launch config {cfg}: the buffer cannot hold check_every blocks")


@cache
def _portable() -> bool:
    """DEEPSELECT_PORTABLE=1 (read once per process): the portable filter even where
    the PTX one could run."""
    return os.environ.get("DEEPSELECT_PORTABLE", "0") not in ("", "0")


@cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def sm_count(device: torch.device) -> int:
    """The SMs the dispatch plans for on ``device``: a CUDA device's own count, else 4
    (the interpreter's launches, on CPU tensors)."""
    return _sm_count(device.index or 0) if device.type == "cuda" else 4


def _words_aligned(x: torch.Tensor) -> bool:
    """The PTX filter reads 32-bit words: the rows must start on 4-byte boundaries."""
    return x.data_ptr() % 4 == 0 and (x.stride(0) * x.element_size()) % 4 == 0


def _vec_aligned(x: torch.Tensor) -> bool:
    """The vector loads read 16 bytes: the rows must start on 16-byte boundaries."""
    return x.data_ptr() % 16 == 0 and (x.stride(0) * x.element_size()) % 16 == 0


def use_asm(x: torch.Tensor) -> bool:
    return x.device.type == "cuda" and not _interpreting() and _words_aligned(x) and not _portable()


def streams(x: torch.Tensor, k: int, opt: TopkOptions) -> bool:
    """Whether :func:`run_triton` selects the top-k of ``x``'s rows with the streaming
    kernel (not the short or split path, nor the sort-based one): from shapes only."""
    from .triton_short import short_path

    rows, n = x.shape
    if rows == 0 or k > MAX_FAST_K or n >= 2**31 - 2**16:
        return False
    sm = sm_count(x.device)
    return short_path(x, k, opt, sm) is None


def run_triton(
    x: torch.Tensor,
    k: int,
    opt: TopkOptions,
    out_values: torch.Tensor | None,
    out_indices: torch.Tensor,
    *,
    seed: int = 0,
    grid: int | None = None,
    config: LaunchConfig | None = None,
    profile: torch.Tensor | None = None,
    preset: torch.Tensor | None = None,
    page: PageMap | None = None,
    kept: KeptRows | None = None,
) -> None:
    """Write the exact top-k of every row of ``x`` into the given buffers.

    ``seed`` picks the block order (the result never depends on it); ``grid`` and
    ``config`` override the shape-derived launch (tests use a small B and CAP to
    drive many blocks and compactions through the interpreter). Diagnostics for
    benchmarks/profile_kernel.py: ``profile`` (int64 ``[grid, PROF_SLOTS]``) receives cycles
    per phase; ``preset`` (one selection key per row, at most the row's k-th key)
    starts the threshold there. ``page`` maps the written indices through a page
    table (:class:`PageMap`; contiguous ``[rows, k]`` index buffers, k <= MAX_FAST_K).
    ``kept``: the streaming kernel writes each row's sampling output instead
    (:class:`KeptRows`; whole rows, k <= MAX_FAST_K, no values, ``out_indices`` only
    stands in for absent tensors); the caller checks that it streams (:func:`streams`)."""
    rows, n = x.shape
    if rows == 0:
        return
    if kept is not None and (k > MAX_FAST_K or opt.begin is not None or opt.end is not None):
        raise ValueError("a sampling output needs whole rows and k <= MAX_FAST_K")
    if page is not None and (k > MAX_FAST_K or out_indices.stride(1) != 1):
        raise ValueError("a page map needs k <= MAX_FAST_K and a unit-stride index buffer")
    sm = sm_count(x.device)
    if config is None and grid is None and kept is None:  # short rows, or few of them
        from .triton_short import run_short, short_path

        plan = short_path(x, k, opt, sm)
        if plan is not None:
            log_launch("triton-short", x.dtype, x.shape, k, opt.order, plan=plan)
            run_short(x, k, opt, out_values, out_indices, plan, page=page)
            return
    if k > MAX_FAST_K or n >= 2**31 - 2**16:
        run_oracle(x, k, opt, out_values, out_indices)  # exact, sort-based
        return
    if x.stride(1) != 1:
        x = x.contiguous()
    # the kernel writes rows with unit column stride: stage other layouts
    staged = [
        (buf, torch.empty_like(buf, memory_format=torch.contiguous_format))
        for buf in (out_values, out_indices)
        if buf is not None and buf.stride(1) != 1 and k > 1
    ]
    if staged:
        swap = {id(b): t for b, t in staged}
        run_triton(
            x,
            k,
            opt,
            swap.get(id(out_values), out_values),
            swap.get(id(out_indices), out_indices),
            seed=seed,
            grid=grid,
            config=config,
            profile=profile,
            preset=preset,
            page=page,
            kept=kept,
        )
        for buf, tmp in staged:
            buf.copy_(tmp)
        return
    cfg = config or stream_config(x.dtype, k, rows, n, sm)
    _check_buffer(cfg)
    bits = 16 if x.dtype in (torch.bfloat16, torch.float16) else 32
    raw = x.view(_RAW[x.dtype])
    asm = use_asm(x) and cfg.B == THREADS * WORDS * (32 // bits)
    if grid is None:
        grid = min(rows, sm * cfg.programs_per_sm if x.device.type == "cuda" else 4)
    dev = x.device
    scratch_k = launch_cache.scratch((grid, 2 * cfg.CAP), torch.int32, dev)
    scratch_i = launch_cache.scratch((grid, 2 * cfg.CAP), torch.int32, dev)
    scratch_n = launch_cache.scratch((grid, NREG.value), torch.int32, dev)
    has_window, begin, end, off_tensor, off_ptr, off_scalar = row_arguments(x, opt, out_indices)
    write_values = out_values is not None
    ov = out_values.view(_RAW[x.dtype]) if write_values else raw
    page_args, page_flags = page_arguments(page, out_indices)
    kept_args, kept_flags = kept_arguments(kept, x.dtype)
    log_launch("triton-stream", x.dtype, x.shape, k, opt.order, grid=grid, asm=asm, config=cfg)
    _rows_kernel[(grid,)](
        (raw, x.stride(0), rows, n),
        (begin, end, off_ptr, off_scalar),
        (ov, out_indices, ov.stride(0) if write_values else 0, out_indices.stride(0)),
        (scratch_k, scratch_i, scratch_n),
        k,
        cfg.B2,
        (opt.fill_index, _fill_bits(opt.resolved_fill_value(x.dtype), x.dtype)),
        seed,
        (
            profile if profile is not None else out_indices,
            preset if preset is not None else out_indices,
        ),
        page_args,
        kept_args,
        **_constants(
            x.dtype,
            cfg,
            (profile is not None, preset is not None),
            tuple(page_flags.items()) + tuple(kept_flags.items()),
            largest=opt.largest,
            order=opt.order,
            has_window=has_window,
            off_tensor=off_tensor,
            write_values=write_values,
            asm=asm,
            vec=asm and _vec_aligned(x),
        ),
        num_warps=NUM_WARPS,
        **({} if cfg.maxnreg is None or _interpreting() else {"maxnreg": cfg.maxnreg}),
    )
