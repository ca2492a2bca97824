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

from . import reference
from . import triton_kernels as K
from .options import Order, TopkOptions

MAX_FAST_K = 4096
"""Largest k of the one-pass kernel; larger k takes the exact sort-based path."""

_ORDER_CODE = {Order.NONE: 0, Order.VALUE: 1, Order.INDEX: 2}
_RAW = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}


@dataclass(frozen=True)
class LaunchConfig:
    """Shape-only launch parameters.

    B: elements per block — 8 KiB of input, i.e. one 32-bit word per thread per
       column for 8 columns and 256 threads (16 bf16/fp16 or 8 fp32 per thread).
    CAP: candidate buffer capacity (a power of two, held in registers during
       compaction); B2 = CAP - k - B, the largest slack that keeps the buffer
       bound k + B2 + B within CAP. At N = 1M, k = 512 this compacts about 3 times
       per row (simulated with the reference: A ~ 1.3% of N).
    CH: candidates per chunk of a compaction pass (2 per thread).
    NP: pivots per pass of the compaction's search (3 bits of a key per pass);
       CH * NP / 256 counters per thread stay live, so CH * NP is kept at 4096
       (1024 x 16 pushed the kernel to 255 registers with spills).
    programs_per_sm: persistent programs per SM.
    reg_search: the compaction's key search over register-held keys (a bisection,
       one compare-and-sum per step) rather than passes over the buffer; where the
       keys fit (CAP <= 8192). Timed on an H200 at 022c042: 7-35% faster on 1M rows
       and the sampler shape (benchmarks/RESULTS.md); `other_search()` flips it.
    check_every: blocks between compaction checks (the only block-wide step of the
       stream); a region must then hold check_every blocks' worst-case hits, so
       ``CAP // 8 > check_every * B // 8``. An experiment: see `check_variant()`.
    vec: 16-byte loads of the block's words (two per thread, where the rows start on
       16-byte boundaries; masked 4-byte loads at window edges) and one block loaded
       ahead, rather than eight 4-byte loads per thread and three blocks rotated
       through registers (a copy of a pending load waits for it, so the rotation held
       no more loads in flight). Fewer instructions per block; the loop's cost is its
       instruction count (Nsight Compute: few memory stalls, see RESULTS.md).
    w32: the stream's per-thread state in warp-private [32]-shaped tensors: each warp
       filters its share of every block at its own pace, checks 16 bytes of shared
       sync state with each block and meets the others only for a compaction (its region
       nearly full) and at the end (needs ``vec``, ``check_every == 1``). Timed on an
       H200 (benchmarks/RESULTS.md): 12% faster at 4096 x 1M bf16, 3% at 256 x 1M,
       6-16% slower on rows of 16-64 blocks, where the per-row work dominates.
    w32_from: rows of at least this many blocks take ``w32`` (None: only ``w32``).
    ahead: with ``w32``, each warp also asks L2 for its share of the block this many
       blocks beyond the one it loads (0: none). Timed on an H200
       (benchmarks/RESULTS.md): with the register-held blocks, 2, 4, 8 ahead all 8-14%
       faster on 1M rows; with the ring, 4 ahead 4-12% slower than none, 8 slower yet.
    ring: with ``w32``, each warp streams through a ring of this many 1 KiB stages in
       static shared memory filled by ``cp.async`` (``ring - 1`` blocks in flight
       while one is filtered, no registers held for them) in place of two
       register-held blocks (0). On an H200 (ms, ring 4 without L2 requests against
       the register-held blocks with 4 ahead): bf16 4096 x 1M 2.52-2.54 / 2.64, 768 x
       1M 0.533 / 0.555, 256 x 1M 0.195 / 0.220, fp32 4096 x 129,280 sorted 0.965 /
       0.975, 256 rows 0.076 / 0.082; 3 and 5 stages within 1% of 4. launch_config
       takes RING_STAGES where :func:`ring_stages_max` allows them (k up to 2048).
    raise_every: with ``ring`` and the sample's bound from registers, the hits of a
       sampled row are also counted in a histogram in shared memory (1 KiB a program,
       where :func:`raise_fits`), and every this many blocks one warp in turn offers
       the highest bin start that k candidates reach, which every warp takes as its
       threshold key (0: off): the threshold follows the k-th of the row seen so far
       between compactions, not the sample's bound, so fewer hits. A power of two up
       to RAISE_MAX (a warp's turn is packed in 8 bits). launch_config takes
       RAISE_EVERY for 16-bit keys: on an H200 (ms, off / 8) bf16 4096 x 1M 2.350 /
       2.239, 256 x 1M 0.192 / 0.165; on an H100 3.29 / 3.24 and 0.236 / 0.221. Rows
       of 32 distinct values: H200 2.733 / 2.779 (8 with a 4096-key sample), H100
       3.542 / 3.586 (8). fp32 4096 x 129,280 sorted 0.918 / 0.941 (63 blocks a row:
       the raise comes late), so off.
    sample: the first compaction of a row keeps the rank
       :func:`deepselect.reference.sample_rank` of the candidates seen so far (a sample
       of the row) instead of the k-th, so the threshold starts near its final value;
       a row where fewer than k elements reach that bound is selected again without
       it. Fewer hits and compactions: timed on an H200 (benchmarks/RESULTS.md), bf16
       4096 x 1M 19% faster, fp32 4096 x 129,280 sorted 19%, 256-row shapes 7-12%.
       ``sample_z``: the rank's margin (a negative one forces the second selection,
       for tests).
    sample_pre: with ``sample``, the threshold starts at the sample's bound found
       before the stream, by a search over the sample's keys read into registers;
       the stream starts there, as at a preset key, and reads the sample's blocks
       again (from L2, mostly) with its other blocks. False: the bound from the first
       compaction (the sample appended one element at a time, then compacted to its
       rank). Where ``CAP <= 8192`` (the sample's keys are held, ``CAP / 256`` a
       thread), or with ``chunk_search`` (at most SAMPLE_HELD of them). Timed on an
       H200 (benchmarks/RESULTS.md), against the first compaction: bf16 4096 x 1M
       3.544 -> 2.724 ms, 256 x 64K 0.083 -> 0.054, fp32 256 x 129,280 sorted 0.129
       -> 0.097 (an earlier form that also placed the
       sample's survivors from registers: 3.168, 0.078, 0.112). The crowded fp32
       launch that checks every second block is even with it at best, so
       :func:`stream_config` leaves it off there. Taken by :func:`launch_config` like
       ``one_barrier`` (timed on Triton 3.6 only).
    burst: with ``sample_pre``, in the block-synchronous loop, a compaction check
       that finds k or more new candidates (and more than k in all) compacts at once,
       where it would wait for ``k + B2``: an ascending row's last block, read right
       after the sample, holds a block of hits above the sample's bound, and the
       next blocks in the order as many until the buffer fills and a full compaction
       follows. Timed on an H200 (benchmarks/RESULTS.md): no gain where aimed (fp32
       256 x 129,280 ascending 0.181 -> 0.179 ms), normal rows even; on the crowded
       fp32 launch with ``sample_pre`` turned on, ascending rows 14% faster but rows
       of 32 distinct values 10% slower. Off.
    sample_tol: with ``sample_pre``, the search for the sample's bound may stop once
       between the rank and rank * (1 + 2^-sample_tol) sampled keys lie at or above
       the key (a lower bound, as valid; fewer search steps: the search was ~8 us of
       a bf16 row and ~14 us of an fp32 one on an H200). 0: the rank's key. Timed on
       an H200 with 2 (benchmarks/RESULTS.md): fp32 256 x 129,280 sorted 0.098 ->
       0.091 ms (the search 14.6 -> 6.3 us), ascending rows 0.181 -> 0.172; bf16 256 x
       64K 2% faster, 4096 x 1M 2% slower (a lower bound, more hits). 2 for 32-bit
       keys, 0 for 16-bit ones (:func:`launch_config`).
    sample_keys: with ``sample_pre``, the sample's bound from only the first this many
       elements of the sample (a power of two; 0: all ``CAP``): less to load and to
       search (the search is ~8 us of a bf16 row with 32 keys a thread), for a lower
       bound (rows of 64K: ~1,200 hits a row at CAP / 4 against ~850). Timed on an
       H200 (benchmarks/RESULTS.md): half the sample, bf16 256 x 64K 0.049 -> 0.045
       ms, but its ascending rows 0.068 -> 0.097 as a one-block sample (see
       ``sample_spread``; spread, 0.064 against 0.068 with the whole sample), rows of
       1M 0-3% slower. See :func:`stream_config`.
    sample_spread: with ``sample_pre``, the sample as runs of 128 bytes spread evenly
       over the row's middle blocks (its whole window with ``sample_ends``) rather
       than whole blocks of the order. A block sample of a row with a trend
       misleads: an ascending row's sample that holds
       its top block puts the bound above the k-th, and the row is selected again
       (on an H200 ascending fp32 256 x 129,280 took 2-3.5x the normal rows' time,
       bf16 256 x 64K with a one-block sample 2.2x). Timed on an H200
       (benchmarks/RESULTS.md): fp32 256 x 129,280 sorted, ascending rows 0.141 ->
       0.070 ms, normal ones 0.080 -> 0.082; bf16 256 x 64K even (0.048), and with
       half the sample ascending rows 0.064 against 0.068 with the whole block
       sample; bf16 rows of 1M 1-2% slower (4096 rows 2.621 -> 2.655 ms). On with
       ``sample_pre``: the robustness for the 1-2%.
    search_tol: with ``reg_search``, a compaction before the last may stop its key
       search once between kk and kk * (1 + 2^-search_tol) candidates lie at or above
       the key (all of them survive; the threshold is then that much looser): fewer
       search steps, most on 32-bit keys. 0: exact. Timed on an H200
       (benchmarks/RESULTS.md), block-synchronous loop: fp32 4096 x 129,280 sorted 5-12%
       faster with 2, 3 or 4, other fp32 shapes within the spread; warp-private loop:
       bf16 4096 x 1M 2-8% slower (a looser threshold, more hits until the next
       meeting; 16-bit keys save fewer steps). 2 for 32-bit keys in the
       block-synchronous loop; 0 elsewhere.
    ballot: the filter places a block's hits with a ballot where no lane has two
       (:func:`triton_kernels.filter_asm`), else with a shuffle scan; False: always
       the shuffle scan (for A/B timing).
    fast: where a lane's compare is exact (the usual block with hits), the filter
       reads its hits off the packed compare, without an element's key and (key,
       index, window) test (:func:`triton_kernels.filter_asm`); False: always the
       test (for A/B timing).
    single: a lane with exactly one hit places it without testing each of its words
       and elements (:func:`triton_kernels.filter_asm`); False: the general
       placement for every lane (for A/B timing).
    one_barrier: the block-synchronous loop's per-block trigger sums the warps' counts
       through shared memory with one barrier (each lane reads all of them); False:
       a block-wide ``tl.sum`` (two barriers). :func:`launch_config` takes it only
       with the Triton it was timed on (see ``MEASURED_TRITON``).
    reg_ties: with ``reg_search``, a compaction with more candidates tied at the pivot
       key than may survive finds the exact index bound by a bisection over the tied
       indices held in registers; False: the chunked passes over the buffer. Taken
       by :func:`launch_config` like ``one_barrier``.
    ties_held: with ``reg_ties``, the tied indices' search holds only as many slots of
       each region as the fullest region fills (a quarter, a half or all of them, as
       the key search does), where it held all ``CAP`` (the final compaction of a bf16
       row usually has ties at its pivot key and about a quarter of the slots
       filled). Timed on an H200 (benchmarks/RESULTS.md), bf16 k = 512: 256 x 64K
       0.054 -> 0.048 ms, 256 x 1M 0.221 -> 0.214, 4096 x 1M 2.724 -> 2.615 (the tie
       search of a 64K row 9.2 -> 5.0 us); fp32 sampler rows within 1.3%, no spill
       added (ptxas, sm_90).
    lean_final: with ``reg_search`` and ``reg_ties`` (a bisection or trisection key
       search), the final compaction takes the counts above and at its pivot key from
       the search's steps, without the census pass over the buffer, and keeps every
       tied candidate where they fit (the threshold's index is not needed past the last
       block). Timed on an H200 (benchmarks/RESULTS.md): the census 2.8-3.8 -> 0.6 us
       a row, the tie search ~1 us longer (its index range from registers); fp32
       129,280 sorted 4096 rows 1.201 -> 1.184 ms, 256 rows 0.092 -> 0.090; bf16 within
       1% either way, with 24-40 bytes of spill added (ptxas), so 32-bit keys only
       (:func:`launch_config`).
    ties_rank: with ``reg_ties``, a compaction with at most 64 candidates tied at its
       pivot key (most bf16 rows' final one) finds the index bound by gathering the
       tied indices in one scan and ranking each against all, instead of a bisection
       over the index range (16-20 block-wide sums). Off: untimed. No use with
       ``chunk_search`` (a gather of the tied indices by atomics into global memory,
       ranked 64 x 64, was timed slower than its radix passes on an H200: the tie cut
       of a bf16 64K row 2.9 -> 5.4 us, each chunk's atomics a round trip to L2).
    radix_search: with ``reg_search``, the compaction's pivot key by a radix select
       over the held keys (digits of up to 6 bits, one histogram each; digits every
       candidate shares skipped) rather than a bisection of one compare-and-sum per
       key bit; ``search_tol`` then has no use. Tied indices by ``reg_ties``' bisection.
    smem_hist: with ``radix_search``, its histograms by shared-memory atomics (inline
       PTX: not in the interpreter) and its digits 8 bits wide: Triton 3.6's
       ``tl.histogram`` costs ~80 instructions a key for 256 bins, an atomic ~5.
    tri_search: with ``reg_search`` (and not ``radix_search``), the pivot key by a
       trisection: two pivots a step, their counts packed in one block-wide sum, so a
       32-bit key takes ~20 steps where the bisection takes 32. Tied indices as above.
    chunk_search: the compaction's pivot key, and the tied indices' bound where ties
       must be cut, by radix passes over the filled slots only, 8 bits a pass, the
       histograms by shared-memory atomics on the GPU
       (:func:`triton_kernels._chunk_kth`): no key held in registers, a pass costs per
       candidate, so the buffer may be of any size (``check_every`` > 1 without the
       block-wide searches of passes over every slot). Takes precedence over
       ``reg_search``. See :func:`chunk_variant`.
    sample_radix: with ``sample_pre``, the sample's bound by a radix select over its
       held keys (8-bit digits, each a histogram in shared memory on the GPU; the
       sample's key range skips digits every key shares: two passes for 16-bit keys,
       up to four for 32-bit ones) rather than the compactions' register-held search
       (a bisection, a compare and a block-wide sum a key bit); ``sample_tol`` then
       has no use (the rank's own key).
    sample_bits: with ``sample_radix``, the radix select of the sample's bound stops
       once this many of the key's top bits are known (0: all of them), and the bound is
       the lowest key with those bits: still at most the rank's key, so as valid, for
       fewer passes (32-bit keys: two of four with 16). The bound is then lower by at
       most the rest of its bin (at 16 bits of an fp32 key, a bin is 2^-7 of the value's
       binade: ~30 more hits on a normal 129,280-element row). Timed on an H200
       (benchmarks/RESULTS.md), 16 against all 32 bits, with ``values_from_keys``: fp32
       129,280 sorted, 4096 rows 0.854 -> 0.809 ms, 256 rows 0.064 -> 0.061 (the
       search 9.4 -> 4.7 us a row, 124 -> 127 hits in warp 0). :func:`chunked_config`
       takes 16 for 32-bit keys.
    sample_ends: with ``sample_spread``, the runs spread over the whole window, its first
       and last blocks too, rather than over its middle blocks: an ascending row's top
       lies in its last block, which the middle blocks' sample never sees, so its bound
       was the top of the blocks before and the whole last block passed it (bf16 rows
       of 64K: ~5,000 candidates a row, not ~1,000). Timed on an H200
       (benchmarks/RESULTS.md), ms, middle blocks / whole window: ascending rows, bf16
       256 x 64K 0.065 / 0.033, 256 x 1M 0.185 / 0.179, fp32 129,280 sorted 4096 rows
       0.725 / 0.691, 256 rows 0.061 / 0.057; normal rows within 0.6% either way. On
       by default (with ``sample_spread``).
    values_from_keys: the values written are rebuilt from the selected keys, which
       determine every value's bits but a zero's sign and a NaN's payload; only the
       selected zeros and NaNs are read from the row again (False: every selected value
       is gathered from the row, a dependent read from memory at the end of each row).
       Unsorted and sorted-by-value outputs (sorted by index, the keys are not carried
       through the sort). Timed on an H200 (benchmarks/RESULTS.md), ms, gathered /
       rebuilt: bf16 k = 512 4096 x 1M 2.235 / 2.221, 256 x 1M 0.167 / 0.164, 4096 x
       64K 0.386 / 0.379, 256 x 64K 0.035 / 0.035; fp32 129,280 sorted 4096 rows 0.872 /
       0.854, 256 rows 0.067 / 0.064. On by default.
    maxnreg: the register cap that keeps two programs per SM (256 threads each):
       without it, sorted outputs of k = 2048 take ~178 registers and one program
       per SM.
    """

    B: int
    CAP: int
    B2: int
    KP: int
    CH: int = 512
    NP: int = 8
    num_warps: int = 8
    programs_per_sm: int = 2
    reg_search: bool = False
    maxnreg: int | None = 128
    check_every: int = 1
    vec: bool = False
    w32: bool = False
    w32_from: int | None = 128
    ahead: int = 0
    ring: int = 0
    raise_every: int = 0
    sample: bool = True
    sample_z: float = reference.SAMPLE_Z
    sample_pre: bool = True
    burst: bool = False
    sample_tol: int = 0
    sample_keys: int = 0
    sample_spread: bool = False
    search_tol: int = 0
    ballot: bool = True
    fast: bool = True
    single: bool = True
    one_barrier: bool = True
    reg_ties: bool = True
    ties_held: bool = True
    lean_final: bool = False
    ties_rank: bool = False
    radix_search: bool = False
    tri_search: bool = False
    smem_hist: bool = False
    chunk_search: bool = False
    sample_radix: bool = False
    sample_bits: int = 0
    values_from_keys: bool = True
    sample_ends: bool = True

    @property
    def samples_in_registers(self) -> bool:
        """Whether the kernel takes the sample's bound from registers: ``sample_pre``
        where it applies (a sampled row; ``CAP <= 8192``, or at most SAMPLE_HELD keys
        of it with ``chunk_search``, whose buffer may be larger)."""
        held = self.CAP <= SAMPLE_HELD or self.chunk_search
        return self.sample and self.sample_pre and held

    @property
    def sample_keys_held(self) -> int:
        """The keys of the sample read into registers (:func:`samples_in_registers`):
        ``sample_keys``, or all ``CAP`` of the first compaction's sample, at most
        SAMPLE_HELD."""
        return min(self.sample_keys or self.CAP, self.CAP, SAMPLE_HELD)


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
    return max(0, min(RING_MAX, (LAUNCH_SMEM - own_smem(kp)) // K.ring_bytes(1)))


RAISE_MAX = 32
"""The largest ``LaunchConfig.raise_every``."""


def raise_fits(kp: int, ring: int) -> bool:
    """Whether the histogram of ``LaunchConfig.raise_every`` fits beside a ring of
    ``ring`` stages and the kernel's own shared memory (as :func:`ring_stages_max`)."""
    return own_smem(kp) + K.ring_bytes(ring) + K.HIST_BYTES <= LAUNCH_SMEM


def _next_pow2(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


MEASURED_TRITON = ("3.6.",)
"""Triton releases on which ``LaunchConfig.one_barrier`` and ``reg_ties`` were timed
faster (an H200, benchmarks/RESULTS.md), as built there (ptxas, sm_90: the sorted
fp32 block-synchronous kernel spills 60 bytes with them, 24 without; the warp-private
loop none either way). With Triton 3.9 they add spills where the kernel had none
(24-36 bytes, outside the stream loop); untimed there, they stay off, and so does
``tri_search`` for 32-bit keys, which was timed on 3.6 only and needs ``reg_ties``,
and ``sample_pre`` (timed on 3.6; on 3.9 its prologue adds 4-60 bytes of spill)."""


def _measured_triton() -> bool:
    return triton.__version__.startswith(MEASURED_TRITON)


RAISE_EVERY = 8
"""``LaunchConfig.raise_every`` for 16-bit keys where the ring and the sample's bound
from registers allow it (timed with Triton 3.6 only: benchmarks/RESULTS.md). 32-bit
keys keep it off: the fp32 sampler rows (63 blocks) lost 2-3% with it."""

RING_STAGES = 4
"""``LaunchConfig.ring`` where :func:`ring_stages_max` allows it (k up to 2048), else
the register-held blocks (timed on an H200: benchmarks/RESULTS.md)."""


@cache
def launch_config(dtype: torch.dtype, k: int) -> LaunchConfig:
    bits = 16 if dtype in (torch.bfloat16, torch.float16) else 32
    B = K.THREADS * K.WORDS * (32 // bits)
    cap = max(8192, _next_pow2(k + B + max(B // 2, k)))
    measured = _measured_triton()
    # 32-bit keys: the key search by trisection, 1.5-2.3% faster on the fp32 sampler
    # rows (129,280, batch 256-4096; benchmarks/RESULTS.md); 16-bit keys within 0.7%.
    # Timed with Triton 3.6 only, so taken there only (as one_barrier and reg_ties)
    return LaunchConfig(
        B=B, CAP=cap, B2=cap - k - B, KP=max(16, _next_pow2(k)), reg_search=cap <= 8192,
        vec=True, search_tol=2 if bits == 32 else 0, one_barrier=measured, reg_ties=measured,
        tri_search=bits == 32 and measured, sample_pre=measured, sample_tol=2 if bits == 32 else 0,
        sample_spread=measured, lean_final=bits == 32,
        ring=RING_STAGES if ring_stages_max(max(16, _next_pow2(k))) >= RING_STAGES else 0,
        raise_every=RAISE_EVERY if bits == 16 and measured else 0,
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
    reg_search = 0  # the compaction's key search (see deepselect_rows_kernel's REG_SEARCH)
    if cfg.chunk_search:  # radix passes over the filled slots (triton_kernels.CHUNK_RADIX)
        if asm and cfg.CH < K.NT_STREAM.value:
            raise ValueError(f"chunk_search needs CH >= {K.NT_STREAM.value}, not {cfg.CH}")
        if cfg.CAP >= 1 << 20:  # its passes pack counts of candidates in 20 bits
            raise ValueError(f"chunk_search needs CAP < 2^20, not {cfg.CAP}")
        reg_search = K.CHUNK_RADIX.value + (bits == 32) + 2 * asm
    elif cfg.reg_search:
        if cfg.radix_search:
            reg_search = 5 if cfg.smem_hist and asm else 3
        else:
            reg_search = 4 if cfg.tri_search else 2 if cfg.reg_ties else 1
    w32 = cfg.w32 and vec and asm and cfg.check_every == 1
    ring = cfg.ring if w32 else 0
    if not 0 <= cfg.raise_every <= RAISE_MAX or cfg.raise_every & (cfg.raise_every - 1):
        raise ValueError(
            f"raise_every must be 0 or a power of two up to {RAISE_MAX}, not {cfg.raise_every}"
        )
    # the threshold raised from the hits' histogram: only in the ring's loop, from the
    # bound of a sample taken in registers, where the histogram fits
    raising = bool(ring and cfg.samples_in_registers and raise_fits(cfg.KP, ring))
    raise_every = cfg.raise_every if raising else 0
    if not 0 <= cfg.sample_bits <= bits:
        raise ValueError(f"sample_bits must be 0 to {bits} for {dtype}, not {cfg.sample_bits}")
    if not 0 <= cfg.ring <= ring_stages_max(cfg.KP):  # static and the kernel's own under 48 KiB
        raise ValueError(
            f"LaunchConfig.ring is 0 to {ring_stages_max(cfg.KP)} stages at KP = {cfg.KP}, "
            f"got {cfg.ring}"
        )
    return dict(
        KEY_BITS=bits,
        KEY_MASK=(1 << bits) - 1,
        SIGN=1 << (bits - 1),
        INF_BITS=K._inf_bits(bits, fp16),
        LARGEST=largest,
        ORDER=_ORDER_CODE[order],
        HAS_WINDOW=has_window,
        OFF_TENSOR=off_tensor,
        WRITE_VALUES=write_values,
        USE_ASM=asm,
        FILTER=(
            K.filter_asm(
                bits, largest, fp16, vec, cfg.ballot, cfg.fast, cfg.single, raise_every > 0
            )
            if asm
            else ""
        ),
        B=cfg.B,
        CAP=cfg.CAP,
        KP=cfg.KP,
        CH=cfg.CH,
        NP=cfg.NP,
        REG_SEARCH=reg_search,
        # bit 0: ties_held; bit 1: lean_final, where the search counts (bisection or
        # trisection) and the tied indices are searched in registers; bit 2: ties_rank
        LEAN=int(cfg.ties_held)
        | 2 * int(cfg.lean_final and reg_search in (2, 4))
        | 4 * int(cfg.ties_rank),
        CHECK_EVERY=cfg.check_every,
        VEC=vec,
        W32=w32,
        AHEAD=cfg.ahead,
        RING=ring,
        RING_BASE=K.ring_base_asm(ring) if ring else "",
        RING_READ=K.ring_read_asm(ring) if ring else "",
        RAISE=raise_every,
        SAMPLE=cfg.sample,
        SAMPLE_Z=float(cfg.sample_z),
        SAMPLE_PRE=cfg.samples_in_registers,
        # the search for the sample's bound: the compactions' register-held one (their
        # passes over the slots, or none, a bisection), or, sample_radix, a radix select
        # (8-bit digits, shared-memory histograms on the GPU; 6-bit tl.histogram ones)
        SAMPLE_SEARCH=(5 if asm else 3) if cfg.sample_radix else reg_search,
        SAMPLE_BITS=cfg.sample_bits if cfg.sample_radix and cfg.sample_bits < bits else 0,
        SAMPLE_ENDS=cfg.sample_ends and cfg.sample_spread,
        BURST=cfg.burst and cfg.samples_in_registers,
        SAMPLE_TOL=cfg.sample_tol if cfg.samples_in_registers else 0,
        SAMPLE_KEYS=cfg.sample_keys_held,
        # sample_spread: runs of 128 bytes (or of the block, or of the sample, if shorter)
        SAMPLE_CHUNK=min(1024 // bits, cfg.B, cfg.sample_keys_held) if cfg.sample_spread else 0,
        # the middle blocks a row needs for its sample: the first compaction's CAP // B
        # (so also where the bound is taken from registers, as timed), or, past
        # SAMPLE_HELD (chunk_search), those the keys of the bound from registers take
        SAMPLE_BLOCKS=(
            -(-cfg.sample_keys_held // cfg.B)
            if cfg.samples_in_registers and cfg.CAP > SAMPLE_HELD
            else cfg.CAP // cfg.B
        ),
        SEARCH_TOL=cfg.search_tol,
        ONE_BARRIER=cfg.one_barrier,
        VALUES_FROM_KEYS=cfg.values_from_keys,
    )


def occupancy_cap(programs_per_sm: int) -> int:
    """The register cap that fits ``programs_per_sm`` programs of 256 threads in an
    SM's 64K registers (a multiple of 8, at most 255): 80 for three."""
    return min((65536 // (256 * programs_per_sm)) // 8 * 8, 255)


def occupancy_variant(
    cfg: LaunchConfig, programs_per_sm: int, reg_search: bool = False
) -> LaunchConfig:
    """``cfg`` with ``programs_per_sm`` programs per SM: the register cap that lets
    them fit (256 threads each, 64K registers per SM) and, unless ``reg_search``, the
    compaction's search by passes (its register-held form needs CAP / 256 more
    registers). For A/B timing, and :func:`stream_config`'s crowded launches."""
    return dataclasses.replace(
        cfg,
        programs_per_sm=programs_per_sm,
        maxnreg=occupancy_cap(programs_per_sm),
        reg_search=reg_search and cfg.reg_search,
    )


CROWDED_PER_SM = 3
"""Programs per SM of a crowded launch (:func:`stream_config`)."""
CROWDED_MAX_K = 512
"""The largest k that a crowded launch takes (:func:`stream_config`)."""
SHORT_SAMPLE_N = 65536
"""16-bit rows of up to this many elements take a spread sample of 4096 keys
(:func:`stream_config`)."""
SHORT_SAMPLE_MAX_K = 512
"""... for k up to this (timed at k = 512 only)."""
W32_MID_BLOCKS = 32
"""Rows of this many blocks or more, below ``w32_from``, take the warp-private loop
where :func:`stream_config` says."""
W32_MID_MAX_K32 = 2048
"""... for 32-bit keys, k up to this (timed at 512, 1024 and 2048)."""
W32_MID_MAX_K16 = 512
"""... for 16-bit keys, k up to this (timed at 512 only)."""


CHUNK_EVERY = 4
"""Blocks between the compaction checks of 16-bit rows in the block-synchronous loop
(:func:`chunked_config`)."""


def chunked_config(cfg: LaunchConfig, dtype: torch.dtype, k: int, n: int) -> LaunchConfig:
    """``cfg`` (:func:`stream_config`'s launch for rows of ``n``) with the compactions'
    searches by radix passes over the filled slots (``chunk_search``); 16-bit rows of
    the block-synchronous loop checked every CHUNK_EVERY blocks in a buffer grown for
    them (:func:`chunk_variant`: the per-block barrier's wait was a fifth of a 64K row),
    and rows shorter than ``w32_from`` blocks with the sample's bound by a radix select
    (``sample_radix``; for 32-bit keys from their top 16 bits, ``sample_bits``). Taken
    with the Triton it was timed on (``MEASURED_TRITON``).

    Timed on an H200 (Triton 3.6, benchmarks/RESULTS.md), ms, the launch before /
    this one, in one call: bf16 k = 512 256 x 64K 0.045 / 0.035, 4096 x 64K (three
    programs per SM) 0.513 / 0.388, 256 x 256K (warp-private) 0.074 / 0.065, 256 x 1M
    0.168 / 0.167, 4096 x 1M 2.280 / 2.233; bf16 768 x 256K k = 1024 0.305 / 0.234,
    512 x 128K k = 2048 0.176 / 0.146; fp32 129,280 sorted, k = 512, 4096 rows 0.921 /
    0.872, 256 rows 0.072 / 0.066. The parts (earlier calls): chunk_search alone 2-11%
    everywhere; the checks every 4 or 8 blocks another 10% on 64K rows (the
    warp-private loop's rows lost with them: they would leave it); the bound by a
    radix select 3-12% below w32_from blocks, 1% slower on 1M rows (not taken there).
    A buffer for 4 blocks between checks is half the one for 8 and as fast within 2%:
    32K slots a program at k = 512, so the scratch of its key and index halves is
    512 KiB a program (132 MiB for 264 programs, 4x the 8192-slot buffer's)."""
    if not _measured_triton():
        return cfg
    cfg = dataclasses.replace(cfg, chunk_search=True)
    below_w32 = cfg.w32_from is None or n < cfg.w32_from * cfg.B
    sixteen = dtype in (torch.bfloat16, torch.float16)
    if sixteen and not cfg.w32 and below_w32 and cfg.check_every == 1:
        cfg = chunk_variant(cfg, k, CHUNK_EVERY)
    if below_w32:  # 32-bit keys: the bound from the key's top 16 bits (two passes of four)
        cfg = dataclasses.replace(cfg, sample_radix=True, sample_bits=0 if sixteen else 16)
    return cfg


def stream_config(
    dtype: torch.dtype, k: int, rows: int, n: int, sm_count: int, chunked: bool = True
) -> LaunchConfig:
    """The streaming kernel's launch for ``rows`` rows of ``n`` on ``sm_count`` SMs
    (shape only): :func:`_stream_config`'s, by default with :func:`chunked_config`'s
    searches (``chunked=False``: without, for A/B timing)."""
    cfg = _stream_config(dtype, k, rows, n, sm_count)
    return chunked_config(cfg, dtype, k, n) if chunked else cfg


def _stream_config(dtype: torch.dtype, k: int, rows: int, n: int, sm_count: int) -> LaunchConfig:
    """The streaming kernel's launch for ``rows`` rows of ``n`` on ``sm_count`` SMs
    before :func:`chunked_config`.

    Rows that two programs per SM do not cover in one wave, k up to CROWDED_MAX_K,
    may take CROWDED_PER_SM programs per SM at the register cap that fits them (80), the
    register-held key search kept: more warps per SM hide the stream's latency, at
    the price of spills outside the stream loop. Timed on an H200 against two
    programs per SM (benchmarks/RESULTS.md): fp32 4096 x 129,280 sorted 1.80 -> 1.59
    ms, bf16 4096 x 1M 3.91 -> 3.65 ms, bf16 300 x 1M 0.66 -> 0.55 ms; fp32 300 rows
    even. Larger k lost (bf16 768 x 256K k = 1024 9% slower, 512 x 128K k = 2048 35%),
    so they, and fewer rows, keep :func:`launch_config`'s two programs per SM at 128
    registers.

    A crowded block-synchronous launch (rows shorter than ``w32_from`` blocks; 32-bit
    rows shorter than W32_MID_BLOCKS blocks, see below) whose
    buffer holds two blocks' worst case without growing (32-bit keys: 8192 slots,
    blocks of 2048) also checks for compaction every second block
    (:func:`check_variant`): fp32 4096 x 129,280 sorted 1.64 -> 1.30 ms in one call;
    uncrowded, 256 rows, it was 27% slower, so only crowded launches take it. That
    launch takes its sample's bound from the first compaction (``sample_pre`` off:
    1.189 against 1.198 ms with the bound from registers; 1.18 against 1.36 with the
    earlier form that also placed the sample), and it is taken whenever rows are crowded
    (512 x 129,280: 0.224 against 0.236 ms at two per SM). Other crowded launches
    are taken only where the third program per SM saves a wave of rows (ceil(rows /
    3 SMs) < ceil(rows / 2 SMs)): a crowded program is slower, and where both cover
    the rows in as many waves the plain launch won (bf16 k = 512, 512 x 1M 0.527
    against 0.608 ms, 512 x 256K 0.245 against 0.264; 768 x 256K, a wave saved,
    0.320 crowded against 0.356).

    16-bit rows of up to SHORT_SAMPLE_N elements, k <= SHORT_SAMPLE_MAX_K, whose
    sample is spread (``sample_spread``) take its bound from its first 4096 keys
    (``sample_keys``): the prologue's search is a fixed cost a row, most of a short
    row's. Timed on an H200 (benchmarks/RESULTS.md): bf16 256 x 64K 0.048 -> 0.044
    ms, its ascending rows 0.068 -> 0.064 (a one-block half sample had put them at
    0.097); rows of 1M 0-3% slower with half a block sample (more hits), so they
    keep the whole sample.

    Rows of W32_MID_BLOCKS blocks or more, below ``w32_from``, take the warp-private
    loop (``w32``, with the launch's own key searches) at two programs per SM:
    32-bit rows, k <= W32_MID_MAX_K32, where two waves of programs cover them or
    where no crowded launch would (k > CROWDED_MAX_K), else at CROWDED_PER_SM per SM
    with the register-held key search and the sample's bound from registers; 16-bit
    rows, k <= W32_MID_MAX_K16, where they keep two programs per SM (a crowded launch
    stays block-synchronous). The block-synchronous loop's per-block checks, with their
    barrier's wait for the slowest warp, were a quarter of an fp32 sampler row (22 of
    87 us). Timed on an H200 (benchmarks/RESULTS.md), against the launch before: fp32
    129,280 sorted, k = 512, 256 rows 0.090 -> 0.082 ms, 512 rows 0.223 -> 0.155, 4096
    rows 1.176 -> 1.136 (the crowded launch with w32: 1.180) but rows of 32 distinct
    values there 1.49-1.53 -> 1.76, so more than two waves keep the crowded launch;
    k = 1024 256 / 4096 rows 0.109 -> 0.099 / 1.582 -> 1.420, k = 2048 256 rows 0.164
    -> 0.150; 256 x 65,536 0.064 -> 0.060; bf16 256 x 256K 0.093 -> 0.083, 256 / 512
    x 128K 0.065 -> 0.062 / 0.122 -> 0.114; ascending fp32 129,280 -19%, bf16 256K
    +10%. The crowded bf16 launches lost with it (768 x 256K +5%, 4096 x 256K +10%,
    4096 x 128K +12%). Crowded fp32 129,280 sorted, 4096 rows, against the crowded
    block-synchronous launch (a check every second block, the bound from the first
    compaction): 1.193 -> 0.976 ms, ascending rows 1.757 -> 0.810, rows of 32
    distinct values 1.486 -> 1.528."""
    cfg = launch_config(dtype, k)
    sixteen = dtype in (torch.bfloat16, torch.float16)
    if cfg.sample_spread and sixteen and n <= SHORT_SAMPLE_N and k <= SHORT_SAMPLE_MAX_K:
        cfg = dataclasses.replace(cfg, sample_keys=4096)
    mid = cfg.w32_from and W32_MID_BLOCKS * cfg.B <= n < cfg.w32_from * cfg.B
    two_waves = rows <= 2 * cfg.programs_per_sm * sm_count
    if mid and not sixteen and k <= W32_MID_MAX_K32:
        if two_waves or k > CROWDED_MAX_K:
            return dataclasses.replace(cfg, w32=True)
        crowded = occupancy_variant(cfg, CROWDED_PER_SM, reg_search=True)
        return dataclasses.replace(crowded, w32=True)  # the sample's bound from registers
    if rows > cfg.programs_per_sm * sm_count and k <= CROWDED_MAX_K:
        crowded = occupancy_variant(cfg, CROWDED_PER_SM, reg_search=True)
        every2 = check_variant(crowded, k, 2)
        if every2.CAP == crowded.CAP and (cfg.w32_from is None or n < cfg.w32_from * cfg.B):
            return dataclasses.replace(every2, sample_pre=False)
        if triton.cdiv(rows, CROWDED_PER_SM * sm_count) < triton.cdiv(
            rows, cfg.programs_per_sm * sm_count
        ):  # a wave of rows saved
            return crowded
    if mid and sixteen and k <= W32_MID_MAX_K16:  # at two programs per SM
        return dataclasses.replace(cfg, w32=True)
    return cfg


def stream_launch(
    dtype: torch.dtype, k: int, rows: int, n: int, sm_count: int, config: LaunchConfig | None = None
) -> LaunchConfig:
    """The streaming kernel's launch as :func:`run_triton` takes it: ``config`` or
    :func:`stream_config`'s, with rows of ``w32_from`` blocks or more streamed by
    independent warps (by default their searches exact, by bisection: the trisection
    was timed on block-synchronous rows only)."""
    cfg = config or stream_config(dtype, k, rows, n, sm_count)
    if cfg.w32_from is not None and not cfg.w32 and n >= cfg.w32_from * cfg.B:
        cfg = dataclasses.replace(
            cfg,
            w32=True,
            search_tol=cfg.search_tol if config else 0,
            tri_search=cfg.tri_search if config else False,
        )
    return cfg


def other_search(cfg: LaunchConfig) -> LaunchConfig:
    """``cfg`` with the other compaction key search, where it fits (for A/B timing)."""
    if not cfg.reg_search and cfg.CAP > 8192:  # 16384 keys would not fit in registers
        return cfg
    return dataclasses.replace(cfg, reg_search=not cfg.reg_search)


_constants = cache(kernel_constants)  # one dict per call shape: no per-call rebuild


@dataclass(frozen=True)
class PageMap:
    """Indices written as physical slots of a paged cache (the engine's paged indexer):
    position ``p`` of row ``r`` becomes ``table[b, p // page_size] * page_size +
    p % page_size`` with ``b = row_to_batch[r]`` (or ``r``); fills stay fills.

    table: int32 ``[batch, max_pages]`` with unit column stride; page_size: a power of
    two; row_to_batch: ``[rows]`` integer tensor or None."""

    table: torch.Tensor
    page_size: int
    row_to_batch: torch.Tensor | None = None


def page_arguments(page: PageMap | None, placeholder: torch.Tensor) -> tuple[tuple, dict]:
    """The kernels' page-table arguments and compile-time flags for ``page``."""
    if page is None:
        return (placeholder, 0, 0, 0, placeholder), {}
    t = page.table
    if t.numel() == 0:  # no pages: every slot reads page 0 (as the plain mapping does)
        t = torch.zeros((1, 1), dtype=torch.int32, device=t.device)
    r2b = page.row_to_batch
    return (
        (t, t.stride(0), t.shape[1], t.shape[0], r2b if r2b is not None else placeholder),
        dict(
            PAGED=True,
            PAGE_SHIFT=page.page_size.bit_length() - 1,
            HAS_R2B=r2b is not None,
        ),
    )


@cache
def _fill_bits(value: float, dtype: torch.dtype) -> int:
    """The raw bit pattern of ``value`` in ``dtype`` (as the kernel's int16/int32 view)."""
    return int(torch.tensor(value, dtype=dtype).view(_RAW[dtype]).item())


def check_variant(cfg: LaunchConfig, k: int, every: int) -> LaunchConfig:
    """``cfg`` checking for compaction every ``every`` blocks, with the buffer grown to
    hold that many blocks' worst case (for A/B timing)."""
    cap = max(cfg.CAP, _next_pow2(k + (1 + every) * cfg.B + max(cfg.B // 2, k)))
    return dataclasses.replace(
        cfg, CAP=cap, B2=cap - k - every * cfg.B, reg_search=cap <= 8192, check_every=every
    )


def chunk_variant(cfg: LaunchConfig, k: int, every: int = 1) -> LaunchConfig:
    """``cfg`` with the compaction's searches by radix passes over the filled slots
    (``chunk_search``), checking for compaction every ``every`` blocks in a buffer
    grown for them (:func:`check_variant`; the keys are not held, so its size costs no
    time where it is not filled, only scratch memory); ``every = 1``: in the launch's
    own buffer."""
    grown = check_variant(cfg, k, every) if every > 1 else cfg
    return dataclasses.replace(grown, chunk_search=True)


def tight_variant(cfg: LaunchConfig, k: int, every: int) -> LaunchConfig:
    """``cfg`` checking for compaction every ``every`` blocks in its own buffer, the
    slack B2 shrunk to make room (for A/B timing); ValueError where it cannot."""
    tight = dataclasses.replace(cfg, check_every=every, B2=cfg.CAP - k - every * cfg.B)
    _check_buffer(tight)
    return tight


def _check_buffer(cfg: LaunchConfig) -> None:
    """ValueError unless a region holds ``check_every`` blocks' worst case and the
    slack B2 is at least 1."""
    if cfg.CAP // 8 <= cfg.check_every * (cfg.B // 8) or cfg.B2 < 1:
        raise ValueError(f"launch config {cfg}: the buffer cannot hold check_every blocks")


def row_arguments(x: torch.Tensor, opt: TopkOptions, placeholder: torch.Tensor) -> tuple:
    """The kernels' per-row window and index-offset arguments: ``(window, begin, end,
    off_tensor, off_ptr, off_scalar)``; ``placeholder`` stands in for absent tensors.
    ``window`` (the kernels' HAS_WINDOW) has bit 0 set when a begin tensor is given
    and bit 1 when an end tensor is: an absent bound costs no tensor and no load."""
    window = (opt.begin is not None) | (opt.end is not None) << 1
    begin = opt.begin if opt.begin is not None else placeholder
    end = opt.end if opt.end is not None else placeholder
    off_tensor = isinstance(opt.index_offset, torch.Tensor)
    off_ptr = opt.index_offset if off_tensor else placeholder
    off_scalar = 0 if off_tensor or opt.index_offset is None else int(opt.index_offset)
    return window, begin, end, off_tensor, off_ptr, off_scalar


@cache  # Triton reads it once, when the kernels are defined; so do we (host time per call)
def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@cache
def _portable() -> bool:
    """DEEPSELECT_PORTABLE=1 (read once per process): the portable filter even where
    the PTX one could run."""
    return os.environ.get("DEEPSELECT_PORTABLE", "0") not in ("", "0")


@cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _words_aligned(x: torch.Tensor) -> bool:
    """The PTX filter reads 32-bit words: the rows must start on 4-byte boundaries."""
    return x.data_ptr() % 4 == 0 and (x.stride(0) * x.element_size()) % 4 == 0


def _vec_aligned(x: torch.Tensor) -> bool:
    """The vector loads read 16 bytes: the rows must start on 16-byte boundaries."""
    return x.data_ptr() % 16 == 0 and (x.stride(0) * x.element_size()) % 16 == 0


def use_asm(x: torch.Tensor) -> bool:
    return x.device.type == "cuda" and not _interpreting() and _words_aligned(x) and not _portable()


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
) -> None:
    """Write the exact top-k of every row of ``x`` into the given buffers.

    ``seed`` picks the block order (the result never depends on it); ``grid`` and
    ``config`` override the shape-derived launch (tests use a small B and CAP to
    drive many blocks and compactions through the interpreter). Diagnostics for
    benchmarks/profile_kernel.py: ``profile`` (int64 ``[grid, PROF_SLOTS]``) receives cycles
    per phase; ``preset`` (one selection key per row, at most the row's k-th key)
    starts the threshold there. ``page`` maps the written indices through a page
    table (:class:`PageMap`; contiguous ``[rows, k]`` index buffers, k <= MAX_FAST_K)."""
    rows, n = x.shape
    if rows == 0:
        return
    if page is not None and (k > MAX_FAST_K or out_indices.stride(1) != 1):
        raise ValueError("a page map needs k <= MAX_FAST_K and a unit-stride index buffer")
    sm = _sm_count(x.device.index or 0) if x.device.type == "cuda" else 4
    if config is None and grid is None:  # short rows, or too few rows to fill the GPU
        from .triton_short import run_short, short_path

        plan = short_path(x, k, opt, sm)
        if plan is not None:
            run_short(x, k, opt, out_values, out_indices, plan, page=page)
            return
    if k > MAX_FAST_K or n >= 2**31 - 2**16:
        from .api import _run_oracle  # exact, sort-based

        _run_oracle(x, k, opt, out_values, out_indices)
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
        )
        for buf, tmp in staged:
            buf.copy_(tmp)
        return
    cfg = stream_launch(x.dtype, k, rows, n, sm, config)
    _check_buffer(cfg)
    bits = 16 if x.dtype in (torch.bfloat16, torch.float16) else 32
    raw = x.view(_RAW[x.dtype])
    asm = use_asm(x) and cfg.B == K.THREADS * K.WORDS * (32 // bits)
    if grid is None:
        grid = min(rows, sm * cfg.programs_per_sm if x.device.type == "cuda" else 4)
    dev = x.device
    scratch_k = torch.empty((grid, 2 * cfg.CAP), dtype=torch.int32, device=dev)
    scratch_i = torch.empty((grid, 2 * cfg.CAP), dtype=torch.int32, device=dev)
    scratch_n = torch.empty((grid, K.NREG.value), dtype=torch.int32, device=dev)
    has_window, begin, end, off_tensor, off_ptr, off_scalar = row_arguments(x, opt, out_indices)
    write_values = out_values is not None
    ov = out_values.view(_RAW[x.dtype]) if write_values else raw
    page_args, page_flags = page_arguments(page, out_indices)
    K.deepselect_rows_kernel[(grid,)](
        raw,
        x.stride(0),
        rows,
        n,
        begin,
        end,
        off_ptr,
        off_scalar,
        ov,
        out_indices,
        ov.stride(0) if write_values else 0,
        out_indices.stride(0),
        scratch_k,
        scratch_i,
        scratch_n,
        k,
        cfg.B2,
        opt.fill_index,
        _fill_bits(opt.resolved_fill_value(x.dtype), x.dtype),
        seed,
        profile if profile is not None else out_indices,
        preset if preset is not None else out_indices,
        *page_args,
        **_constants(
            x.dtype,
            cfg,
            largest=opt.largest,
            order=opt.order,
            has_window=has_window,
            off_tensor=off_tensor,
            write_values=write_values,
            asm=asm,
            vec=asm and cfg.vec and _vec_aligned(x),
        ),
        PROFILE=profile is not None,
        PRESET=preset is not None,
        **page_flags,
        num_warps=cfg.num_warps,
        **({} if cfg.maxnreg is None or _interpreting() else {"maxnreg": cfg.maxnreg}),
    )
