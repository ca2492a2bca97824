"""The DeepSelect algorithm in plain NumPy: the readable, instrumented reference.

One row at a time, exactly as the algorithm is written (DESIGN.md, "The algorithm"):

1. map values to order-preserving unsigned keys (:func:`deepselect.keys.to_keys`);
   (key, index) is the strict total order, ties going to the lowest index;
2. keep a threshold ``T = (key, index)`` of the current k-th element, starting at -inf;
3. visit the row in blocks of ``B`` elements in a data-independent block order;
4. append every element that beats ``T`` (key greater, or key equal and index lower)
   to the candidate buffer;
5. when the buffer holds ``>= k + B2`` elements, compact it: a radix select (8-bit
   digits from the top of the key, one 256-bin histogram per digit, then the same
   over the index among the elements tied with the k-th key, lowest index first)
   keeps the k best and sets ``T`` to the k-th;
6. after the last block, compact once more.

Every row is instrumented as in the expected-cost proof: ``A`` elements appended,
``R`` in-loop compactions, ``W = A + k*R`` elements read by all compactions, and the
peak buffer size, which never exceeds ``k + B2 + B``.

Block orders (all independent of the data):

* ``"random"`` — a uniform random permutation of the ``m = ceil(N/B)`` blocks:
  ``numpy.random.default_rng([seed, row]).permutation(m)``. This is the order the
  expected-cost bound ``E[W] <= (1 + k/B2) (k + B + B2) H_m`` is proved for.
* ``"affine"`` — block ``(a*i + c) mod m`` with ``gcd(a, m) = 1``, ``a`` and ``c``
  drawn from the same seeded generator: the cheap permutation a kernel can compute
  in registers (not uniform over all permutations, so the bound is not proved for it).
* ``"sequential"`` — blocks left to right; correct, but ``W`` can reach ``~1.5 N``
  on rows whose large values sit at the end.

The result never depends on the block order or on ``B``/``B2``: it is always the
oracle's answer. Slow (a Python loop over blocks); for tests and experiments only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .keys import key_bits, to_keys
from .options import Order, TopkOptions

BLOCK_ORDERS: tuple[str, ...] = ("random", "sequential", "affine")
"""Block orders :func:`select_row` knows."""

_RADIX_BITS = 8
_RADIX = 1 << _RADIX_BITS


@dataclass(frozen=True)
class RowStats:
    """Cost counters of one row, as defined in the expected-cost proof.

    Attributes:
        n: elements scanned (the row's window length).
        blocks: number of blocks ``m = ceil(n / B)``.
        appended: ``A``, elements appended to the candidate buffer.
        compactions: ``R``, compactions inside the loop (the final one not counted).
        work: ``W = A + k*R``, total input size of all compactions, final included.
        peak: largest candidate-buffer size reached (``<= k + B2 + B``).
    """

    n: int
    blocks: int
    appended: int
    compactions: int
    work: int
    peak: int


def _check_config(k: int, B: int, B2: int, block_order: str) -> None:
    for name, v in (("k", k), ("B", B), ("B2", B2)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be an int; got {type(v).__name__}")
        if v < 1:
            raise ValueError(f"{name} must be >= 1; got {v}")
    if block_order not in BLOCK_ORDERS:
        allowed = ", ".join(repr(o) for o in BLOCK_ORDERS)
        raise ValueError(f"block_order must be one of {allowed}; got {block_order!r}")


STRIDE_SPAN = 8  #: multipliers tried on each side of m / phi^2
STRIDE_GOOD = 6  #: a largest partial quotient this small ends the search
NO_STRIDE = 1 << 30  #: what _largest_quotient returns for an unusable multiplier


def _largest_quotient(m: int, a: int) -> int:
    """The largest partial quotient of the continued fraction of ``m / a``, or
    ``2**30`` when ``a`` is not in ``[1, m)`` or not coprime with ``m``."""
    if a < 1 or a >= m:
        return NO_STRIDE
    x, y, q = m, a, 0
    while y != 0:
        q = max(q, x // y)
        x, y = y, x % y
    return q if x == 1 else NO_STRIDE


SAMPLE_Z = 5.0  #: margin of the sample bound's rank, in standard deviations
SAMPLE_PAD = 2  #: and in elements


def sample_rank(seen: int, k: int, n: int, z: float = SAMPLE_Z) -> int:
    """Where a row's threshold may start once its first ``seen`` elements are
    candidates (the start of a random block order: a sample of the row's ``n``): the
    rank, among them, of an element with at least ``k`` of the row at or above it all
    but surely; 0 when that is no better than the k-th.

    About ``lam = seen * k / n`` of the sample lie in the row's top k (Poisson); the
    rank ``lam + z sqrt(lam) + 2`` is missed by iid rows with probability ~1e-5 at
    z = 5. A kernel that then finds fewer than k elements at or above its bound selects
    the row again without one, so results are exact either way. Rows of 1M start with
    ~5k elements at or above the threshold instead of ~n/8, rows of 129K with ~2.3k.

    >>> [sample_rank(4096, 512, n) for n in (1 << 20, 129_280, 4096)]
    [11, 38, 0]
    """
    lam = seen * k / max(n, 1)
    r = max(1, int(lam + z * math.sqrt(lam)) + SAMPLE_PAD)
    return r if r < k else 0


def block_stride(m: int) -> int:
    """The multiplier ``a`` of the kernels' block order ``(a*i + c) mod m``.

    Near ``m / phi^2`` (golden-ratio steps spread the first blocks over the whole row)
    and, among the multipliers within ``STRIDE_SPAN`` of it, coprime with ``m`` and
    with the smallest largest partial quotient of ``m / a``: a large quotient means a
    near-periodic order (a stride near ``m/2`` visits the row as two interleaved
    sequential scans), and on monotone rows every block that lies beyond all blocks
    visited before is a block full of hits. With this choice a row of ``m <= 2^16``
    blocks has at most ~21 such blocks from any start, ascending or descending
    (``m/phi^2`` plus hashed jitter had up to ``m / 2``). ``0`` for ``m <= 1``.

    >>> [block_stride(m) for m in (1, 2, 16, 256, 257)]
    [0, 1, 7, 97, 98]
    """
    if m <= 1:
        return 0
    a0 = (m * 0x61C88647) >> 32  # m / phi^2 (0x61C88647 = 2^32 / phi^2)
    best_a, best_q = 1, NO_STRIDE
    for d in range(STRIDE_SPAN):
        for a in (a0 + d, a0 - d):
            q = _largest_quotient(m, a)
            if q < best_q:
                best_a, best_q = a, q
        if best_q <= STRIDE_GOOD:
            break
    return best_a


def block_at(i: int, m: int, a: int, c: int, s: int = 0) -> int:
    """The ``i``-th block of an order of ``m`` blocks that visits ``s`` middle blocks,
    then the last block, the first, and then the other middle blocks: the middle
    blocks ``1 .. m-2`` in the stride order ``1 + (a*t + c) mod (m - 2)`` (``a =
    block_stride(m - 2)``, ``0 <= c < m - 2``), the ends at positions ``p = min(s, m -
    2)`` and ``p + 1``.

    The ends come early because rows with a trend along their length (a monotone row,
    scores rising with recency, attention sinks at the start) hold their best values
    there: once those are candidates the threshold sits above the rest of the row,
    where in the stride order every block beyond all earlier ones is all hits (up to
    ~21 such blocks, see :func:`block_stride`). To a row without a trend two fixed
    blocks are as good as any. They come after the first ``s`` blocks because those are
    the sample the threshold starts from (:func:`sample_rank`): a sample holds random
    blocks only if the ends are not in it (on a monotone row the last block alone holds
    the whole top k; among ties the first block holds the lowest indices).

    >>> [block_at(i, 6, block_stride(4), 2) for i in range(6)]
    [5, 0, 3, 4, 1, 2]
    >>> [block_at(i, 6, block_stride(4), 2, s=1) for i in range(6)]
    [3, 5, 0, 4, 1, 2]
    """
    p = max(min(s, m - 2), 0)
    if i == p:
        return m - 1
    if i == p + 1:
        return 0
    t = i if i < p else i - 2
    return 1 + (a * t + c) % (m - 2)


def sample_blocks(first: int, block: int) -> int:
    """Blocks of the order before its ends (:func:`block_at`'s ``s``) for a
    first compaction at ``first`` candidates: a threshold of -inf makes every element
    of a block a candidate, so ``ceil(first / block)`` middle blocks hold the sample."""
    return -(-first // block)


def block_permutation(m: int, block_order: str = "random", seed: int = 0, row: int = 0):
    """The order in which a row's ``m`` blocks are visited.

    Args:
        m: number of blocks, ``>= 0``.
        block_order: ``"random"``, ``"affine"`` or ``"sequential"`` (see the module doc).
        seed, row: the generator is seeded with ``[seed, row]``, so every row of a batch
            gets its own order and a fixed seed makes the whole run deterministic.

    Returns:
        ``int64`` array ``[m]`` holding each block number exactly once.

    >>> block_permutation(4, "sequential").tolist()
    [0, 1, 2, 3]
    >>> sorted(block_permutation(5, "affine", seed=3).tolist())
    [0, 1, 2, 3, 4]
    """
    if block_order not in BLOCK_ORDERS:
        allowed = ", ".join(repr(o) for o in BLOCK_ORDERS)
        raise ValueError(f"block_order must be one of {allowed}; got {block_order!r}")
    if block_order == "sequential" or m <= 1:
        return np.arange(m, dtype=np.int64)
    rng = np.random.default_rng([int(seed), int(row)])
    if block_order == "random":
        return rng.permutation(m).astype(np.int64)
    while True:  # a multiplier coprime to m makes i -> a*i + c a bijection mod m
        a = int(rng.integers(1, m))
        if math.gcd(a, m) == 1:
            break
    c = int(rng.integers(0, m))
    return (a * np.arange(m, dtype=np.int64) + c) % m


def unsigned_keys(x: torch.Tensor, largest: bool = True) -> np.ndarray:
    """Selection keys of ``x`` as a ``uint64`` NumPy array of the same shape.

    Values are the unsigned keys ``0 .. 2**bits - 1`` of :func:`deepselect.keys.to_keys`
    (for fp64, its signed storage is shifted back by ``2**63``), so one radix digit is
    simply ``(key >> shift) & 0xFF``.
    """
    keys = to_keys(x.detach().cpu(), largest=largest).numpy()
    u = keys.view(np.uint64)  # two's complement: for 16/32-bit keys (>= 0) a no-op
    if key_bits(x.dtype) == 64:
        u = u ^ np.uint64(1 << 63)
    return u


def _digit(a: np.ndarray, shift: int) -> np.ndarray:
    return ((a >> np.uint64(shift)) & np.uint64(_RADIX - 1)).astype(np.intp)


def radix_select(
    keys: np.ndarray, idx: np.ndarray, k: int, key_width: int, index_width: int
) -> tuple[np.ndarray, int, int]:
    """Select the k best of ``n > k`` candidates by radix select over (key, index).

    Digits of 8 bits are taken from the top of the key; each pass builds a 256-bin
    histogram of the candidates that still share the k-th element's prefix and finds
    the digit where the count from the top reaches the number still needed. After the
    key passes, the survivors all hold the k-th key; the same passes over the index,
    counting from the *lowest* index, pick which of those ties are kept.

    Args:
        keys: ``uint64 [n]`` unsigned keys, ``< 2**key_width``.
        idx: ``int64 [n]`` distinct non-negative positions, ``< 2**index_width``.
        k: how many to keep, ``1 <= k < n``.
        key_width, index_width: bit widths, multiples of 8.

    Returns:
        ``(take, kth_key, kth_index)``: ``take`` is a bool mask ``[n]`` with exactly k
        True entries; ``(kth_key, kth_index)`` is the k-th best element (the new ``T``).

    >>> keys = np.array([5, 9, 5, 1], dtype=np.uint64)
    >>> take, kk, ki = radix_select(keys, np.arange(4), 2, 8, 8)
    >>> take.tolist(), kk, ki
    ([True, True, False, False], 5, 0)
    """
    cand = np.arange(len(keys))
    need = k  # how many of `cand` still belong to the top k
    for shift in range(key_width - _RADIX_BITS, -1, -_RADIX_BITS):
        d = _digit(keys[cand], shift)
        hist = np.bincount(d, minlength=_RADIX)
        at_least = np.cumsum(hist[::-1])[::-1]  # at_least[t] = #(digit >= t)
        t = int(np.flatnonzero(at_least >= need)[-1])
        need -= int(at_least[t] - hist[t])
        cand = cand[d == t]
    kth_key = int(keys[cand[0]])
    idx_u = idx.astype(np.uint64)
    for shift in range(index_width - _RADIX_BITS, -1, -_RADIX_BITS):
        d = _digit(idx_u[cand], shift)
        hist = np.bincount(d, minlength=_RADIX)
        at_most = np.cumsum(hist)  # at_most[t] = #(digit <= t)
        t = int(np.flatnonzero(at_most >= need)[0])
        need -= int(at_most[t] - hist[t])
        cand = cand[d == t]
    # indices are distinct, so the passes end on exactly one element: the k-th
    assert len(cand) == 1 and need == 1, (len(cand), need)
    kth_index = int(idx[cand[0]])
    take = (keys > np.uint64(kth_key)) | ((keys == np.uint64(kth_key)) & (idx <= kth_index))
    return take, kth_key, kth_index


def _width(bits: int) -> int:
    return max(_RADIX_BITS, -(-bits // _RADIX_BITS) * _RADIX_BITS)


def select_row(
    keys: np.ndarray,
    k: int,
    *,
    B: int = 1024,
    B2: int = 1024,
    key_width: int = 64,
    block_order: str = "random",
    seed: int = 0,
    row: int = 0,
) -> tuple[np.ndarray, RowStats]:
    """DeepSelect on one row of keys: the positions of its exact top-k, and the costs.

    Args:
        keys: ``uint64 [n]`` unsigned selection keys (see :func:`unsigned_keys`), ``n >= 0``.
        k: elements to select, ``>= 1``; if ``n <= k`` all ``n`` positions come back.
        B: block size; B2: compaction slack (compact when the buffer holds ``>= k + B2``).
        key_width: bit width of the keys (16, 32 or 64; any multiple of 8 works).
        block_order, seed, row: the data-independent block order (:func:`block_permutation`).

    Returns:
        ``(positions, stats)``: ``positions`` is ``int64 [min(k, n)]``, the selected
        positions in buffer order (no particular order); ``stats`` a :class:`RowStats`.

    >>> keys = np.array([3, 7, 7, 1, 9], dtype=np.uint64)
    >>> pos, st = select_row(keys, 2, B=2, B2=1, block_order="sequential")
    >>> sorted(pos.tolist()), (st.appended, st.compactions, st.work)
    ([1, 4], (5, 2, 9))
    """
    _check_config(k, B, B2, block_order)
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    n = len(keys)
    m = -(-n // B)
    index_width = _width(max(n - 1, 1).bit_length())
    cap = k + B2 + B  # the proof's bound on the buffer; exceeding it is a bug
    buf_key = np.empty(cap, dtype=np.uint64)
    buf_idx = np.empty(cap, dtype=np.int64)
    size = appended = compactions = peak = 0
    have_t = False  # T = -inf until the first compaction
    t_key = t_idx = 0
    for b in block_permutation(m, block_order, seed, row):
        lo = int(b) * B
        hi = min(lo + B, n)
        kb = keys[lo:hi]
        if have_t:
            tk = np.uint64(t_key)
            hits = np.flatnonzero((kb > tk) | ((kb == tk) & (np.arange(lo, hi) < t_idx)))
        else:
            hits = np.arange(hi - lo)
        h = len(hits)
        if size + h > cap:
            raise AssertionError(f"candidate buffer overflow: {size + h} > k + B2 + B = {cap}")
        buf_key[size : size + h] = kb[hits]
        buf_idx[size : size + h] = hits + lo
        size += h
        appended += h
        peak = max(peak, size)
        if size >= k + B2:
            take, t_key, t_idx = radix_select(
                buf_key[:size], buf_idx[:size], k, key_width, index_width
            )
            have_t = True
            buf_key[:k] = buf_key[:size][take]
            buf_idx[:k] = buf_idx[:size][take]
            size = k
            compactions += 1
    if size > k:  # the final compaction
        take, _, _ = radix_select(buf_key[:size], buf_idx[:size], k, key_width, index_width)
        positions = buf_idx[:size][take]
    else:
        positions = buf_idx[:size].copy()
    stats = RowStats(
        n=n,
        blocks=m,
        appended=appended,
        compactions=compactions,
        work=appended + k * compactions,
        peak=peak,
    )
    return positions, stats


def reference_topk(
    x: torch.Tensor,
    k: int,
    options: TopkOptions | None = None,
    *,
    B: int = 1024,
    B2: int = 1024,
    block_order: str = "random",
    seed: int = 0,
    return_stats: bool = False,
):
    """Exact top-k of every row of ``x`` by the DeepSelect algorithm (NumPy reference).

    Same inputs, semantics and outputs as :func:`deepselect.oracle.oracle_topk`, for
    every :class:`TopkOptions` (windows, fills, offsets, ``largest=False``, the three
    orders, the index dtype). With ``order="none"`` the k elements come in the order
    they sit in the candidate buffer after the final compaction.

    Args:
        x: ``[rows, N]`` bf16 / fp16 / fp32 / fp64 tensor, any strides, any device.
        k: elements per row, ``>= 1``.
        options: output options; defaults to ``TopkOptions()``.
        B: block size, ``>= 1``. B2: compaction slack, ``>= 1``.
        block_order: ``"random"`` (default), ``"affine"`` or ``"sequential"``.
        seed: seeds the block order (row ``r`` uses ``[seed, r]``).
        return_stats: also return one :class:`RowStats` per row.

    Returns:
        ``(values [rows, k] of x.dtype, indices [rows, k] of options.index_dtype)``,
        plus ``stats: list[RowStats]`` when ``return_stats``. Values are bitwise
        ``x[row, index]``; outputs live on ``x``'s device.

    >>> x = torch.tensor([[1.0, 3.0, 3.0, 2.0, 0.5]])
    >>> opt = TopkOptions(order=Order.VALUE)
    >>> v, i, st = reference_topk(x, 2, opt, B=2, B2=1, block_order="sequential",
    ...                           return_stats=True)
    >>> i.tolist(), st[0].appended
    ([[1, 2]], 4)
    """
    _check_config(k, B, B2, block_order)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor; got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [rows, N]; got {x.dim()}-D shape {list(x.shape)}")
    opt = options or TopkOptions()
    order = Order.parse(opt.order)
    dev = x.device
    rows, n = x.shape
    xc = x.detach().cpu()
    keys = unsigned_keys(xc, largest=opt.largest)
    width = key_bits(x.dtype)
    begin, end = opt.window_bounds(rows, n, torch.device("cpu"))
    offsets = opt.offset_tensor(rows, torch.device("cpu"))
    idx = np.zeros((rows, k), dtype=np.int64)
    real = np.zeros((rows, k), dtype=bool)
    stats: list[RowStats] = []
    for r in range(rows):
        lo, hi = int(begin[r]), int(end[r])
        pos, st = select_row(
            keys[r, lo:hi], k, B=B, B2=B2, key_width=width, block_order=block_order,
            seed=seed, row=r,
        )  # fmt: skip
        stats.append(st)
        if order is Order.VALUE:  # best first: key descending, then index ascending
            pos = pos[np.lexsort((pos, ~keys[r, lo:hi][pos]))]
        elif order is Order.INDEX:
            pos = np.sort(pos)
        idx[r, : len(pos)] = pos + lo
        real[r, : len(pos)] = True
    idx_t = torch.from_numpy(idx)
    real_t = torch.from_numpy(real)
    # move values as bit patterns: float gather/where can rewrite NaN payloads
    ibits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
    xb = xc.view(ibits)
    values = torch.gather(xb, 1, idx_t) if n > 0 else xb.new_zeros(rows, k)
    fill_bits = torch.tensor(opt.resolved_fill_value(x.dtype), dtype=x.dtype).view(ibits)
    values = torch.where(real_t, values, fill_bits).view(x.dtype)
    out_idx = torch.where(real_t, idx_t + offsets[:, None], torch.full_like(idx_t, opt.fill_index))
    values, out_idx = values.to(dev), out_idx.to(device=dev, dtype=opt.index_dtype)
    if return_stats:
        return values, out_idx, stats
    return values, out_idx


def run_reference(
    x: torch.Tensor,
    k: int,
    opt: TopkOptions,
    out_values: torch.Tensor | None,
    out_indices: torch.Tensor,
) -> None:
    """Backend entry point for :mod:`deepselect.api`: writes into the given buffers."""
    v, i = reference_topk(x, k, opt)
    out_indices.copy_(i)
    if out_values is not None:
        out_values.copy_(v)
