"""The warp-private loop's machinery: per-warp loads, the ring of shared-memory stages
filled by cp.async, the shared sync state the warps poll, the raised threshold's
histogram, the per-block trigger, and shared-memory histograms (inline PTX)."""

from __future__ import annotations

import triton
import triton.language as tl

from .filter import (
    HIST_ADDR_MASK,
    HIST_BINS,
    HIST_PACK_ASM,
    HIST_ZERO_ASM,
)


def _edge_word(c: int) -> int:
    """Word ``c`` (0..7) of a lane's share of a block, from the lane's first word: four
    consecutive words, then four more 1024 words on (the two 16-byte pieces)."""
    return (c // 4) * 1024 + c % 4


def _ptx_in_window(off: int, first: str, lo: str, hi: str) -> list[str]:
    """%p := word ``first + off`` lies in words [lo, hi) (needs ``.reg .b32 %w``)."""
    return [f"add.s32 %w, {first}, {off};", f"setp.ge.s32 %p, %w, {lo};",
            f"setp.lt.and.s32 %p, %w, {hi}, %p;"]  # fmt: skip


def load32_asm() -> str:
    """Eight words per thread (vector layout, :func:`_word_elem`): $8 the address of
    the thread's first word, $9 nonzero when the whole block lies in the window (two
    16-byte loads), else each word $10 + r (+ 1024) is loaded only inside words
    [$11, $12), 0 outside."""
    out = [
        "{",
        ".reg .pred %pf, %p;",
        ".reg .b32 %w;",
        "setp.ne.s32 %pf, $9, 0;",
        "@%pf ld.global.nc.v4.b32 {$0, $1, $2, $3}, [$8];",
        "@%pf ld.global.nc.v4.b32 {$4, $5, $6, $7}, [$8 + 4096];",
        "@%pf bra $$L32D${:uid};",
    ]
    for c in range(8):
        off = _edge_word(c)
        out += [f"mov.b32 ${c}, 0;", *_ptx_in_window(off, "$10", "$11", "$12")]
        out.append(f"@%p ld.global.nc.b32 ${c}, [$8 + {4 * off}];")
    out += ["$$L32D${:uid}:", "}"]
    return "\n".join(out)


LOAD32_ASM = tl.constexpr(load32_asm())


# RING > 0 (LaunchConfig.ring): each warp streams its share of the blocks through a
# ring of RING stages in static shared memory, filled by cp.async, in place of the two
# register-held word sets: RING - 1 blocks are in flight while one is filtered, at no
# register cost. A stage is a warp's 1 KiB of a block, each lane's two 16-byte pieces at
# its lane * 16 and 512 + lane * 16 (the vector layout's words, :func:`_word_elem`); a
# lane reads back only what its own copies wrote, so no barrier is needed, only its
# own cp.async.wait_group.
RING_STAGE_BYTES = tl.constexpr(1024)


def ring_bytes(stages: int, warps: int = 8) -> int:
    """Static shared memory a program's ring takes: ``stages`` stages for each warp."""
    return warps * stages * RING_STAGE_BYTES.value


def ring_base_asm(stages: int) -> str:
    """The ring's shared-memory address: :func:`ring_bytes` declared once per program
    (the asm runs once, before the row loop)."""
    size = ring_bytes(stages)
    return f"{{ .shared .align 128 .b8 deepselect_ring[{size}]; mov.u32 $0, deepselect_ring; }}"


def ring_read_asm(stages: int) -> str:
    """This lane's eight words of the stage at $8, once its copies are in: the ring's
    copies are committed one group a step (:func:`ring_issue_asm`), so all but the
    ``stages - 1`` newest groups being complete means this stage's are."""
    return (
        f"cp.async.wait_group {stages - 1}; "
        "ld.shared.v4.b32 {$0, $1, $2, $3}, [$8]; ld.shared.v4.b32 {$4, $5, $6, $7}, [$8+512];"
    )


def ring_issue_asm() -> str:
    """Copy this lane's share of a block into its stage at $1 and commit one group
    (empty if $8 == 0: nothing is left to load). $2 nonzero: the block lies wholly in
    the window, two 16-byte copies from $3 (the lane's first word) and $3 + 4096;
    else each word $4 + r (+ 1024) is copied only inside words [$5, $6) and zero
    filled outside (a 4-byte copy reading nothing, from the row's start $7)."""
    out = [
        "{",
        ".reg .pred %pf, %p;",
        ".reg .b32 %w, %n;",
        ".reg .b64 %g;",
        "setp.eq.s32 %p, $8, 0;",
        "@%p bra $$LRD${:uid};",
        "setp.ne.s32 %pf, $2, 0;",
        "@%pf cp.async.cg.shared.global [$1], [$3], 16;",
        "@%pf cp.async.cg.shared.global [$1+512], [$3+4096], 16;",
        "@%pf bra $$LRD${:uid};",
    ]
    for c in range(8):
        off = _edge_word(c)
        out += [
            *_ptx_in_window(off, "$4", "$5", "$6"),
            "selp.u32 %n, 4, 0, %p;",
            f"add.s64 %g, $3, {4 * off};",
            "selp.b64 %g, %g, $7, %p;",
            f"cp.async.ca.shared.global [$1+{(c // 4) * 512 + 4 * (c % 4)}], [%g], 4, %n;",
        ]
    out += ["$$LRD${:uid}:", "cp.async.commit_group;", "mov.b32 $0, 0;", "}"]
    return "\n".join(out)


RING_ISSUE_ASM = tl.constexpr(ring_issue_asm())


def raise_asm() -> str:
    """Offer the threshold key the warps may raise to (see HIST_BINS): $1 the
    histogram's packed address (HIST_PACK_ASM), $2 its base key, $3 k. Lane l holds
    bins 8l .. 8l + 7; a suffix sum over the lanes finds the last lane whose bins and
    those above reach k, that lane the last of its bins that does: that bin's first
    key goes to the spare sync word (word 3) if above what it holds; nothing where no
    bin start has k candidates at or above it. The counts only grow while the row
    streams, so a stale read gives a lower key, never a wrong one."""
    per = HIST_BINS.value // 32
    b = [f"%b{j}" for j in range(per)]
    out = [
        "{",
        f".reg .b32 %b<{per}>, %a, %s, %t, %u, %bal, %lane, %j, %acc, %sh;",
        ".reg .pred %p;",
        "mov.u32 %lane, %laneid;",
        f"and.b32 %a, $1, {HIST_ADDR_MASK};",
        f"mad.lo.u32 %a, %lane, {4 * per}, %a;",
    ]
    out += [
        f"ld.volatile.shared.v4.u32 {{{', '.join(b[q : q + 4])}}}, [%a+{4 * q}];"
        for q in range(0, per, 4)
    ]
    out += [f"add.u32 %s, {b[0]}, {b[1]};"] + [f"add.u32 %s, %s, {x};" for x in b[2:]]
    for d in (1, 2, 4, 8, 16):  # %s: this lane's bins and all above
        out += [f"shfl.sync.down.b32 %t|%p, %s, {d}, 31, 0xffffffff;", "@%p add.u32 %s, %s, %t;"]
    out += [
        "shfl.sync.down.b32 %u|%p, %s, 1, 31, 0xffffffff;",  # the bins above this lane's
        "@!%p mov.u32 %u, 0;",
        "setp.hs.u32 %p, %s, $3;",
        "vote.sync.ballot.b32 %bal, %p, 0xffffffff;",
        "mov.u32 %acc, %u;",
        "mov.u32 %j, 0;",
    ]
    for x in reversed(b):  # %j: how many of this lane's bin starts have k at or above
        out += [f"add.u32 %acc, %acc, {x};", "setp.hs.u32 %p, %acc, $3;", "@%p add.u32 %j, %j, 1;"]
    out += [
        f"mad.lo.u32 %j, %lane, {per}, %j;",
        "sub.u32 %j, %j, 1;",  # this lane's last bin reaching k (if it is the lane)
        "bfind.u32 %t, %bal;",  # the last lane reaching k
        "shfl.sync.idx.b32 %j, %j, %t, 31, 0xffffffff;",
        "bfe.u32 %sh, $1, 18, 5;",
        "shl.b32 %j, %j, %sh;",
        "add.u32 %j, %j, $2;",
        "setp.ne.u32 %p, %bal, 0;",
        "setp.eq.and.u32 %p, %lane, 0, %p;",
        "mov.b32 %a, global_smem;",
        "@%p red.shared.max.u32 [%a+12], %j;",
        "mov.b32 $0, 0;",
        "}",
    ]
    return "\n".join(out)


RAISE_ASM = tl.constexpr(raise_asm())


# POLL_ASM, with bit 2 set where the spare sync word $7 (an offered threshold key) is
# above this warp's $8
POLL_RAISE_ASM = tl.constexpr(
    "{ .reg .pred %p; .reg .b32 %a, %w; setp.gt.s32 %p, $1, $2; "
    "@%p st.volatile.shared.b32 [$6+8], 1; selp.b32 %w, 1, $5, %p; "
    "and.b32 %a, $3, $4; setp.eq.u32 %p, %a, 0x01010101; selp.b32 %a, 2, 0, %p; "
    "or.b32 %w, %a, %w; setp.hi.u32 %p, $7, $8; selp.b32 %a, 4, 0, %p; or.b32 $0, %a, %w; }"
)


# the spare sync word := 0 (no key offered): as a row starts, and after a compaction
# (whose reductions may have used it)
RAISE_CLEAR_ASM = tl.constexpr(
    "{ .reg .b32 %a; mov.b32 %a, global_smem; st.volatile.shared.b32 [%a+12], 0; mov.b32 $0, 0; }"
)


# W32: lane 0 of each warp stores $1 at word warp of shared bytes 16.. (free between
# the meetings); after a barrier, TK_MIN_ASM reads the least of the eight
TK_STORE_ASM = tl.constexpr(
    "{ .reg .pred %p; .reg .b32 %t, %l, %a; mov.u32 %t, %tid.x; and.b32 %l, %t, 31; "
    "setp.eq.u32 %p, %l, 0; shr.u32 %t, %t, 5; shl.b32 %t, %t, 2; add.u32 %a, %t, 16; "
    "mov.b32 %t, global_smem; add.u32 %a, %a, %t; @%p st.shared.b32 [%a], $1; "
    "mov.b32 $0, 0; }"
)


TK_MIN_ASM = tl.constexpr(
    "{ .reg .b32 %a<8>, %p; mov.b32 %p, global_smem; add.u32 %p, %p, 16; "
    "ld.shared.v4.b32 {%a0, %a1, %a2, %a3}, [%p]; ld.shared.v4.b32 {%a4, %a5, %a6, %a7}, [%p+16]; "
    "min.u32 %a0, %a0, %a1; min.u32 %a2, %a2, %a3; min.u32 %a4, %a4, %a5; "
    "min.u32 %a6, %a6, %a7; min.u32 %a0, %a0, %a2; min.u32 %a4, %a4, %a6; "
    "min.u32 $0, %a0, %a4; }"
)


# lane $2's value of $1 (every lane gets it)
LANE_PICK_ASM = tl.constexpr("shfl.sync.idx.b32 $0, $1, $2, 0x1f, 0xffffffff;")


# The warps' sync state in shared memory (Triton's own reductions use the same bytes
# only inside a compaction, between barriers, and it is rewritten after it): bytes
# 0..7 "warp w has filtered all its blocks" (0 or 1), word 2 "a compaction is
# wanted". One 16-byte load reads it all (SYNC_READ_ASM), issued when a step starts
# so that its latency passes under the filter; POLL_ASM then decides with it.
SYNC_READ_ASM = tl.constexpr("ld.volatile.shared.v4.b32 {$0, $1, $2, $3}, [$5];")


# the shared-memory address of those words, taken once per program: a symbol's
# address in a (non-pure) asm of the loop is computed again at every step
SMEM_BASE_ASM = tl.constexpr("mov.u32 $0, global_smem;")


# $0: bit 0 the wanted-flag (as read in $5, or raised here if $1 > $2: this warp's
# region is nearly full), bit 1 every warp done (the done bytes $3, $4 as read);
# $6 the words' address (SMEM_BASE_ASM).
POLL_ASM = tl.constexpr(
    "{ .reg .pred %p; .reg .b32 %a, %w; setp.gt.s32 %p, $1, $2; "
    "@%p st.volatile.shared.b32 [$6+8], 1; selp.b32 %w, 1, $5, %p; "
    "and.b32 %a, $3, $4; setp.eq.u32 %p, %a, 0x01010101; selp.b32 %a, 2, 0, %p; "
    "or.b32 $0, %a, %w; }"
)


# this warp's done byte := $1 (every lane stores the same); with $2, wanted := 0
SET_SYNC_ASM = tl.constexpr(
    "{ .reg .b32 %t, %a; .reg .pred %p; mov.u32 %t, %tid.x; shr.u32 %t, %t, 5; "
    "mov.b32 %a, global_smem; add.u32 %a, %a, %t; "
    "st.volatile.shared.u8 [%a], $1; setp.ne.s32 %p, $2, 0; "
    "@%p st.volatile.shared.b32 [global_smem+8], 0; mov.b32 $0, 0; }"
)


# a done warp waits a little before polling again (the working warps issue meanwhile)
NAP_ASM = tl.constexpr("{ nanosleep.u32 64; mov.b32 $0, 0; }")


@triton.jit
def _smem_base(dep32):
    """The shared-memory address of the sync words (see SMEM_BASE_ASM)."""
    return tl.inline_asm_elementwise(
        SMEM_BASE_ASM, "=r,r", [dep32], dtype=tl.int32, is_pure=True, pack=1
    )


@triton.jit
def _sync_read(dep32, sb32):
    """The sync state as it is now (see SYNC_READ_ASM; ``sb32`` from
    :func:`_smem_base`): done bytes, wanted, spare."""
    return tl.inline_asm_elementwise(
        SYNC_READ_ASM, "=r,=r,=r,=r,r,r", [dep32, sb32],
        dtype=(tl.int32,) * 4, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def _poll(wcnt32, limit, d0, d1, wanted, sb32):
    """Warp-uniform sync state from a :func:`_sync_read` (see POLL_ASM): bit 0 a
    compaction is wanted (raised here if this warp's count exceeds ``limit``), bit 1
    every warp is done."""
    st = tl.inline_asm_elementwise(
        POLL_ASM, "=r,r,r,r,r,r,r", [wcnt32, wcnt32 * 0 + limit, d0, d1, wanted, sb32],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip
    return tl.max(st, axis=0)


@triton.jit
def _set_sync(done32, clear):
    """This warp's done byte := ``done32`` (the same in every lane); if ``clear``, the
    wanted-flag := 0."""
    return tl.inline_asm_elementwise(
        SET_SYNC_ASM, "=r,r,r", [done32, done32 * 0 + clear],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def _nap(dep32):
    return tl.inline_asm_elementwise(
        NAP_ASM, "=r,r", [dep32], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip


# lane 0 of each warp stores $1 (its warp's count) at $2 + 4 * warp
PUBLISH_ASM = tl.constexpr(
    "{ .reg .pred %p; .reg .b32 %t, %l; .reg .b64 %o, %a; mov.u32 %t, %tid.x; "
    "and.b32 %l, %t, 31; setp.eq.u32 %p, %l, 0; shr.u32 %t, %t, 5; "
    "mul.wide.u32 %o, %t, 4; add.s64 %a, $2, %o; @%p st.global.b32 [%a], $1; "
    "mov.b32 $0, 0; }"
)


@triton.jit
def _load32(xw_row, j, first, woff32, lo, hi, nblk, live, B: tl.constexpr, KEY_BITS: tl.constexpr):
    """Block ``j`` of the row's ``nblk`` (from block ``first``): its 8 words per thread
    into warp-private tensors (see :func:`load32_asm`); nothing if not live. The
    middle blocks ``1 .. nblk - 2`` lie wholly in the window [lo, hi) (block 0 holds
    ``lo``, block ``nblk - 1`` the element before ``hi``) and take the 16-byte loads;
    the two ends test each word."""
    PER_WORD: tl.constexpr = 32 // KEY_BITS
    wstart = (j + first) * (B // PER_WORD)
    full = (live & (j > 0) & (j < nblk - 1)).to(tl.int32)
    wlo = tl.where(live, lo // PER_WORD, 0x7FFFFFFF)
    whi = (hi + PER_WORD - 1) // PER_WORD
    wfirst = wstart + woff32  # this lane's first word
    zero = woff32 * 0
    return tl.inline_asm_elementwise(
        LOAD32_ASM, "=r,=r,=r,=r,=r,=r,=r,=r,l,r,r,r,r",
        [xw_row + wfirst, zero + full, wfirst, zero + wlo, zero + whi],
        dtype=(tl.int32,) * 8, is_pure=True, pack=1,
    )  # fmt: skip


@triton.jit
def _asm_once(dep32, ASM: tl.constexpr):
    """Run ``ASM`` (one int32 result, one operand: ``dep32``, what it waits for), never
    merged with another run nor dropped: the ring's and the histogram's addresses
    (:func:`ring_base_asm`, HIST_BASE_ASM), the offered key cleared (RAISE_CLEAR_ASM)."""
    return tl.inline_asm_elementwise(
        ASM, "=r,r", [dep32], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip


@triton.jit
def _ring_read(slot32, RING_READ: tl.constexpr):
    """This lane's eight words of the stage at ``slot32`` (see :func:`ring_read_asm`)."""
    return tl.inline_asm_elementwise(
        RING_READ, "=r,=r,=r,=r,=r,=r,=r,=r,r", [slot32],
        dtype=(tl.int32,) * 8, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def _ring_issue(slot32, xw_row, j, first, woff32, lo, hi, nblk, live, B: tl.constexpr,
                KEY_BITS: tl.constexpr, MIDDLE: tl.constexpr = False):  # fmt: skip
    """Block ``j`` (of the row's ``nblk``, from block ``first``) into this warp's stage
    at ``slot32`` by cp.async, one group committed (see :func:`ring_issue_asm`); the
    middle blocks whole, the two ends word by word as :func:`_load32` reads them.
    MIDDLE: ``j`` is known to be a middle block (no test)."""
    PER_WORD: tl.constexpr = 32 // KEY_BITS
    wstart = (j + first) * (B // PER_WORD)
    if MIDDLE:
        full = live.to(tl.int32)
    else:
        full = (live & (j > 0) & (j < nblk - 1)).to(tl.int32)
    wfirst = wstart + woff32
    zero = woff32 * 0
    return tl.inline_asm_elementwise(
        RING_ISSUE_ASM, "=r,r,r,l,r,r,r,l,r",
        [slot32, zero + full, xw_row + wfirst, wfirst, zero + lo // PER_WORD,
         zero + (hi + PER_WORD - 1) // PER_WORD, xw_row + zero, zero + live.to(tl.int32)],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def _lane_pick(v32, lane):
    """Lane ``lane``'s element of the warp-private ``v32``, in every lane."""
    return tl.inline_asm_elementwise(
        LANE_PICK_ASM, "=r,r,r", [v32, v32 * 0 + lane], dtype=tl.int32, is_pure=True, pack=1
    )  # fmt: skip


@triton.jit
def _hist_start(hist32, tid32, base, hi_key, RAISE: tl.constexpr):
    """A row's histogram (see HIST_BINS): this thread's word of it zeroed (every
    thread's, with a barrier after, before any warp counts), and its address packed
    with the bin width that fits keys ``base`` .. ``hi_key`` (uint32) into its bins and
    the blocks until this warp's turn to offer (its turn ``warp * RAISE`` of every
    ``8 * RAISE``)."""
    tl.inline_asm_elementwise(
        HIST_ZERO_ASM, "=r,r", [hist32 + tid32 * 4], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip
    rng = (hi_key - base).to(tl.int32, bitcast=True)
    packed = tl.inline_asm_elementwise(
        HIST_PACK_ASM, "=r,r,r", [hist32, hist32 * 0 + rng], dtype=tl.int32, is_pure=True, pack=1
    )  # fmt: skip
    packed = packed | ((((8 - tid32 // 32) % 8) * RAISE) << 23)
    return tl.max(packed, axis=0)  # the same in every lane


@triton.jit
def _raise_offer(hreg, hbase, k, dep32):
    """Offer the key the warps' thresholds may rise to (see :func:`raise_asm`);
    ``dep32`` any warp-private [32] value."""
    z = dep32 * 0
    tl.inline_asm_elementwise(
        RAISE_ASM, "=r,r,r,r", [z + hreg, z + hbase.to(tl.int32, bitcast=True), z + k],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def _poll_raise(wcnt32, limit, d0, d1, wanted, sb32, d3, tk):
    """:func:`_poll`, with bit 2 set where the offered key ``d3`` (the sync read's
    spare word) is above this warp's threshold key ``tk`` (see POLL_RAISE_ASM)."""
    st = tl.inline_asm_elementwise(
        POLL_RAISE_ASM, "=r,r,r,r,r,r,r,r,r",
        [wcnt32, wcnt32 * 0 + limit, d0, d1, wanted, sb32, d3,
         wcnt32 * 0 + tk.to(tl.int32, bitcast=True)],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip
    return tl.max(st, axis=0)


@triton.jit
def _tk_least(tk, dep32):
    """The least of the warps' threshold keys ``tk`` (a barrier between their stores
    and the reads; W32, at a meeting)."""
    tl.inline_asm_elementwise(
        TK_STORE_ASM, "=r,r", [dep32 + tk.to(tl.int32, bitcast=True)],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip
    tl.debug_barrier()
    least = tl.inline_asm_elementwise(
        TK_MIN_ASM, "=r,r", [dep32], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip
    return tl.max(least, axis=0).to(tl.uint32, bitcast=True)


# the trigger's slots: 2 x 8 words of shared memory from byte 16 (past the w32 sync
# words; Triton's own reductions use these bytes only between barriers elsewhere).
# Lane 0 of each warp stores $1 to slot $2 (0 or 1), word warp; the block-sync
# loop has no Triton shared-memory use between this store and the reads after the
# barrier
TRIG_STORE_ASM = tl.constexpr(
    "{ .reg .pred %p; .reg .b32 %t, %l, %a; mov.u32 %t, %tid.x; and.b32 %l, %t, 31; "
    "setp.eq.u32 %p, %l, 0; shr.u32 %t, %t, 5; shl.b32 %a, $2, 5; add.u32 %a, %a, 16; "
    "shl.b32 %t, %t, 2; add.u32 %a, %a, %t; mov.b32 %t, global_smem; add.u32 %a, %a, %t; "
    "@%p st.shared.b32 [%a], $1; mov.b32 $0, 0; }"
)


# every lane: the sum of slot $1's 8 words
TRIG_SUM_ASM = tl.constexpr(
    "{ .reg .b32 %a<8>, %p; shl.b32 %p, $1, 5; add.u32 %p, %p, 16; mov.b32 %a0, global_smem; "
    "add.u32 %p, %p, %a0; ld.shared.v4.b32 {%a0, %a1, %a2, %a3}, [%p]; "
    "ld.shared.v4.b32 {%a4, %a5, %a6, %a7}, [%p+16]; add.s32 %a0, %a0, %a1; "
    "add.s32 %a2, %a2, %a3; add.s32 %a4, %a4, %a5; add.s32 %a6, %a6, %a7; "
    "add.s32 %a0, %a0, %a2; add.s32 %a4, %a4, %a6; add.s32 $0, %a0, %a4; }"
)


@triton.jit
def _trigger_sum(val, parity):
    """The block-wide sum of ``val`` ([256]: each warp's count, the same in every
    lane) as a scalar, with one barrier: each warp's lane 0 stores it to slot
    ``parity`` in shared memory, and after the barrier every lane adds the 8 words
    itself (a [32]-shaped value, reduced within the warp), so no second barrier."""
    tl.inline_asm_elementwise(
        TRIG_STORE_ASM, "=r,r,r", [val, val * 0 + parity], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip
    tl.debug_barrier()
    z32 = tl.zeros([32], tl.int32)
    s = tl.inline_asm_elementwise(
        TRIG_SUM_ASM, "=r,r", [z32 + parity], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip
    return tl.max(s, axis=0)


# A histogram in shared memory. Triton 3.6 lowers tl.histogram to warp votes, one per
# bin bit and key, then a popcount per 32 bins: ~80 instructions a key for 256 bins
# at 16 keys a thread (SASS, sm_90). Here each key adds one to its bin's word with a
# shared-memory atomic. The bins are the first NB words of the kernel's shared
# memory: nothing else of the kernel uses it between the barriers of
# _smem_histogram, and the allocation Triton makes for its own operations must
# cover NB words (see there; a compile test checks it). Word $1 := 0:
SMEM_ZERO_ASM = tl.constexpr(
    "{ .reg .b32 %a, %b; shl.b32 %a, $1, 2; mov.b32 %b, global_smem; add.u32 %a, %a, %b; "
    "st.shared.b32 [%a], 0; mov.b32 $0, 0; }"
)


# word $1 += 1 where $2 != 0 (the comment marks it in the PTX: SMEM_HIST_MARK)
SMEM_HIST_MARK = "deepselect-smem-histogram"


SMEM_ADD_ASM = tl.constexpr(
    "{ /* " + SMEM_HIST_MARK + " */ .reg .pred %p; .reg .b32 %a, %b; setp.ne.s32 %p, $2, 0; "
    "shl.b32 %a, $1, 2; "
    "mov.b32 %b, global_smem; add.u32 %a, %a, %b; @%p red.shared.add.u32 [%a], 1; "
    "mov.b32 $0, 0; }"
)


# $0 := word $1
SMEM_LOAD_ASM = tl.constexpr(
    "{ .reg .b32 %a, %b; shl.b32 %a, $1, 2; mov.b32 %b, global_smem; add.u32 %a, %a, %b; "
    "ld.shared.b32 $0, [%a]; }"
)


# word $1 := $3 where $2 != 0 (positions staged at their slots: bracket._collected)
SMEM_STORE_ASM = tl.constexpr(
    "{ .reg .pred %p; .reg .b32 %a, %b; setp.ne.s32 %p, $2, 0; shl.b32 %a, $1, 2; "
    "mov.b32 %b, global_smem; add.u32 %a, %a, %b; @%p st.shared.b32 [%a], $3; "
    "mov.b32 $0, 0; }"
)


@triton.jit
def _smem_words_store(at, vals, mask):
    """Word ``at`` of shared memory := ``vals`` (int32) where ``mask``, in the layout
    the operands have; read back by :func:`_smem_bins_read` (which reserves the words)
    after a barrier, with no other use of shared memory in between."""
    tl.inline_asm_elementwise(
        SMEM_STORE_ASM, "=r,r,r,r", [at, mask.to(tl.int32), vals.to(tl.int32)],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def _smem_words_zero(NB: tl.constexpr, ZERO_ASM: tl.constexpr):
    """``NB`` words of shared memory := 0 by ``ZERO_ASM`` (word ``$1`` := 0), between
    barriers (Triton's earlier uses of the bytes are over)."""
    j = tl.arange(0, NB)
    tl.debug_barrier()
    tl.inline_asm_elementwise(ZERO_ASM, "=r,r", [j], dtype=tl.int32, is_pure=False, pack=1)
    tl.debug_barrier()


@triton.jit
def _smem_bins_zero(NB: tl.constexpr):
    """Start a histogram in shared memory (:func:`_smem_histogram`): its ``NB`` words
    := 0."""
    _smem_words_zero(NB, SMEM_ZERO_ASM)


@triton.jit
def _smem_bins_add(bins, mask):
    """Add one to the word of each element's bin where ``mask``: after
    :func:`_smem_bins_zero`, any number of times, with no other use of shared memory
    in between; ``bins`` at least as long as the program's threads."""
    tl.inline_asm_elementwise(
        SMEM_ADD_ASM, "=r,r,r", [bins, mask.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip


@triton.jit
def _smem_bins_read(NB: tl.constexpr):
    """The histogram's ``NB`` counts (a barrier after the adds, one after the read);
    and the reservation that makes Triton allocate the words."""
    j = tl.arange(0, NB)
    tl.debug_barrier()
    h = tl.inline_asm_elementwise(
        SMEM_LOAD_ASM, "=r,r", [j], dtype=tl.int32, is_pure=False, pack=1
    )  # fmt: skip
    tl.debug_barrier()  # every thread has read the bins before Triton uses the bytes
    # Triton sizes the kernel's shared memory by its own operations only: a
    # tl.histogram of NB bins, which takes NB words, under a condition it cannot
    # decide (an opaque zero from PTX) reserves them; ptxas then drops the branch
    zero = tl.inline_asm_elementwise(
        "mov.b32 $0, 0;", "=r,r", [tl.full((), 0, tl.int32)], dtype=tl.int32, is_pure=True,
        pack=1,
    )  # fmt: skip
    if zero != 0:
        h += tl.histogram(j, NB)
    return h


# The same in 64-bit words, for sums of int64 values (counts, fixed-point weights):
# word $1 := 0; word $1 += $3 where $2 != 0; $0 := word $1. The reservation is 2 NB
# 32-bit words (see _smem_wide_read).
SMEM_ZERO64_ASM = tl.constexpr(
    "{ .reg .b32 %a, %b; .reg .b64 %z; shl.b32 %a, $1, 3; mov.b32 %b, global_smem; "
    "add.u32 %a, %a, %b; mov.b64 %z, 0; st.shared.b64 [%a], %z; mov.b32 $0, 0; }"
)
SMEM_ADD64_ASM = tl.constexpr(
    "{ /* " + SMEM_HIST_MARK + " */ .reg .pred %p; .reg .b32 %a, %b; setp.ne.s32 %p, $2, 0; "
    "shl.b32 %a, $1, 3; mov.b32 %b, global_smem; add.u32 %a, %a, %b; "
    "@%p red.shared.add.u64 [%a], $3; mov.b32 $0, 0; }"
)
SMEM_LOAD64_ASM = tl.constexpr(
    "{ .reg .b32 %a, %b; shl.b32 %a, $1, 3; mov.b32 %b, global_smem; add.u32 %a, %a, %b; "
    "ld.shared.b64 $0, [%a]; }"
)


@triton.jit
def _smem_wide_zero(NB: tl.constexpr):
    """Start ``NB`` int64 sums in shared memory (:func:`_smem_bins_zero` in 64-bit
    words)."""
    _smem_words_zero(NB, SMEM_ZERO64_ASM)


@triton.jit
def _smem_wide_add(bins, vals, mask):
    """Add each element's int64 ``vals`` to its bin's sum where ``mask`` (as
    :func:`_smem_bins_add`: ``bins`` at least as long as the program's threads)."""
    tl.inline_asm_elementwise(
        SMEM_ADD64_ASM, "=r,r,r,l", [bins, mask.to(tl.int32), vals.to(tl.int64)],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def _smem_wide_read(NB: tl.constexpr):
    """The ``NB`` int64 sums (:func:`_smem_bins_read` in 64-bit words, reserving 2 NB
    32-bit words)."""
    j = tl.arange(0, NB)
    tl.debug_barrier()
    h = tl.inline_asm_elementwise(
        SMEM_LOAD64_ASM, "=l,r", [j], dtype=tl.int64, is_pure=False, pack=1
    )  # fmt: skip
    tl.debug_barrier()
    zero = tl.inline_asm_elementwise(
        "mov.b32 $0, 0;", "=r,r", [tl.full((), 0, tl.int32)], dtype=tl.int32, is_pure=True,
        pack=1,
    )  # fmt: skip
    if zero != 0:
        h += tl.sum(tl.histogram(tl.arange(0, 2 * NB), 2 * NB), axis=0).to(tl.int64)
    return h


@triton.jit
def _smem_histogram(bins, mask, NB: tl.constexpr):
    """``tl.histogram(bins, NB, mask=mask)`` (``bins`` int32 in [0, NB), ``mask`` the
    elements that count) by shared-memory atomics; GPU only (inline PTX). Every
    thread of the program takes part: a call is block-wide, between barriers.
    ``bins`` must have at least as many elements as the program has threads (see
    :func:`_histogram`, which callers take)."""
    _smem_bins_zero(NB)
    _smem_bins_add(bins, mask)
    return _smem_bins_read(NB)


@triton.jit
def _histogram(bins, mask, NB: tl.constexpr, SMEM: tl.constexpr, NT: tl.constexpr):
    """``tl.histogram(bins, NB, mask=mask)`` (``mask`` None: every element counts),
    by shared-memory atomics (:func:`_smem_histogram`) where ``SMEM`` asks for them
    and ``bins`` has at least as many elements as the program's ``NT`` threads: a
    shorter tensor is held by several threads at once, and each copy would add its
    key again."""
    if SMEM and bins.shape[0] >= NT:
        if mask is None:
            h = _smem_histogram(bins, bins >= 0, NB)
        else:
            h = _smem_histogram(bins, mask, NB)
    elif mask is None:
        h = tl.histogram(bins, NB)
    else:
        h = tl.histogram(bins, NB, mask=mask)
    return h
