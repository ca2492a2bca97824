"""deepselect.distributed: sharded top-k equals the single-process top-k, bit for bit.

Multi-rank tests spawn one gloo group per world size and run every case inside it
(process start-up is the cost). Each rank builds the same full rows from a seed,
keeps its shard, and compares the distributed result with ``topk_rows`` on the full
rows. A rank records failures instead of raising at once, so that every rank keeps
taking part in the same collectives and no rank hangs; it raises at the end.
"""

from __future__ import annotations

import datetime
import itertools

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from helpers import assert_same_topk

import deepselect
from deepselect.distributed import exchange_bytes, gather_bytes, merge_candidates, topk
from deepselect.options import Order, TopkOptions

NAN_BITS = {  # NaNs of both signs with distinct payloads, per dtype
    torch.float32: [0x7FC00001, 0xFFC00123, 0x7F800ABC],
    torch.bfloat16: [0x7FC1, 0xFFC3],
}


def _rows(kind: str, rows: int, n: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if kind == "normal":
        x = torch.randn(rows, n, generator=g).to(dtype)
    elif kind == "ties":  # few distinct values: ties straddle every shard border
        x = torch.randint(0, 3, (rows, n), generator=g).to(dtype) - 1.0
        x = x.to(dtype)
        x[torch.rand(rows, n, generator=g) < 0.2] = -0.0
    else:  # "nan": NaNs of both signs with payloads, infinities, signed zeros
        x = torch.randint(-2, 3, (rows, n), generator=g).to(dtype)
        itype = {torch.float32: torch.int32, torch.bfloat16: torch.int16}[dtype]
        xb = x.view(itype)
        pats = NAN_BITS[dtype]
        for p in pats:
            if p >= 1 << (8 * x.element_size() - 1):
                p -= 1 << (8 * x.element_size())
            xb[torch.rand(rows, n, generator=g) < 0.08] = p
        x[torch.rand(rows, n, generator=g) < 0.05] = float("inf")
        x[torch.rand(rows, n, generator=g) < 0.05] = float("-inf")
        x[torch.rand(rows, n, generator=g) < 0.1] = -0.0
    return x


def _windows(rows: int, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed + 7)
    b = torch.randint(0, n + 1, (rows,), generator=g)
    e = torch.randint(0, n + 1, (rows,), generator=g)
    b, e = torch.minimum(b, e), torch.maximum(b, e)
    b[0], e[0] = 0, n  # whole row
    if rows > 1:
        b[1], e[1] = n // 3, n // 3  # empty window
    return b, e


def _cases(world: int):
    """Yield (shard sizes, kind, dtype, k, largest, order, index dtype, windows?, dst)."""
    if world == 2:
        shardings = [[13, 0], [5, 28], [1, 1]]
    else:
        shardings = [[6, 0, 11, 20], [0, 0, 9, 0], [3, 3, 3, 3]]
    combos = itertools.product(
        shardings,
        ["normal", "ties", "nan"],
        [torch.float32, torch.bfloat16],
        ["none", "value", "index"],
    )
    for i, (sizes, kind, dtype, order) in enumerate(combos):
        n = sum(sizes)
        for k in (1, 4, n + 3):  # n + 3: every row short
            yield dict(
                sizes=sizes,
                kind=kind,
                dtype=dtype,
                k=k,
                largest=bool(i % 2),
                order=order,
                index_dtype=torch.int32 if (i + k) % 2 else torch.int64,
                window=(i + k) % 3 != 0,
                dst=None if i % 4 else world - 1,
                seed=1000 * world + 10 * i + k,
            )


def _run_case(c: dict, rank: int, dev: torch.device, failures: list) -> None:
    """One sharded call of case ``c`` on this rank (rows built from the case's seed,
    this rank's shard on ``dev``), against ``topk_rows`` on the full rows; a mismatch
    is recorded in ``failures``."""
    sizes, rows = c["sizes"], c.get("rows", 3)
    name = c.get("name", str(c))
    n = sum(sizes)
    full = _rows(c["kind"], rows, n, c["dtype"], c["seed"]).to(dev)
    start = sum(sizes[:rank])
    shard = full[:, start : start + sizes[rank]]
    begin = end = None
    if c["window"]:
        begin, end = (t.to(dev) for t in _windows(rows, n, c["seed"]))
    kw = dict(
        largest=c["largest"],
        order=c["order"],
        begin=begin,
        end=end,
        index_dtype=c["index_dtype"],
    )
    ss = sizes if c["seed"] % 2 else None  # every other case skips the size exchange
    got = topk(shard, c["k"], dst=c["dst"], shard_sizes=ss, **kw)
    if c["dst"] is not None and rank != c["dst"]:
        if got is not None:
            failures.append(f"{name}: rank {rank} is not dst but got a result")
        return
    want = deepselect.topk_rows(full, c["k"], **kw)
    try:
        assert got[0].device == dev, f"{name}: result on {got[0].device}"
        assert got[1].dtype == c["index_dtype"] and got[0].dtype == c["dtype"], name
        assert_same_topk(got, want, c["order"], msg=name)
    except AssertionError as exc:
        failures.append(str(exc))


def _worker(rank: int, world: int, init: str, out) -> None:
    dist.init_process_group(
        "gloo",
        init_method=init,
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )
    failures = []
    count = 0
    try:
        for c in _cases(world):
            _run_case(c, rank, torch.device("cpu"), failures)
            count += 1
        # an index offset and a user fill on top of the global indices
        sizes = [4, 0, 7, 2][:world] if world == 4 else [4, 9]
        n = sum(sizes)
        full = _rows("ties", 2, n, torch.float32, 5)
        start = sum(sizes[:rank])
        off = torch.tensor([100, 7])
        kw = dict(order="value", index_offset=off, fill_value=2.5, fill_index=-9)
        got = topk(full[:, start : start + sizes[rank]], n + 2, **kw)
        want = deepselect.topk_rows(full, n + 2, index_dtype=torch.int64, **kw)
        try:
            assert_same_topk(got, want, "value", msg="offset/fill")
        except AssertionError as exc:
            failures.append(str(exc))
        # the whole call traced into one graph: collectives, select, merge, fills
        traced = torch.compile(topk, backend="eager", fullgraph=True)
        shard = full[:, start : start + sizes[rank]]
        bw, ew = torch.tensor([1, 0]), torch.tensor([n, n - 2])
        for args, kw2 in (((n + 2,), kw), ((3,), dict(order="index", begin=bw, end=ew))):
            got = traced(shard, *args, **kw2)
            want = deepselect.topk_rows(full, *args, index_dtype=torch.int64, **kw2)
            try:
                assert_same_topk(got, want, kw2["order"], msg=f"compiled {kw2['order']}")
            except AssertionError as exc:
                failures.append(str(exc))
        torch._dynamo.reset()
        # a sub-group: ranks and dst are ranks of the group, not of the world
        members = [1, 3] if world == 4 else [1, 0]
        sub = dist.new_group(members)
        if rank in members:
            me = dist.get_rank(sub)
            sub_sizes = [5, 8]
            sub_full = _rows("nan", 2, 13, torch.bfloat16, 11)
            shard = sub_full[:, sum(sub_sizes[:me]) : sum(sub_sizes[: me + 1])]
            for dst in (None, 1):
                got = topk(shard, 6, group=sub, order="value", dst=dst)
                if dst is not None and me != dst:
                    if got is not None:
                        failures.append("sub-group: non-dst rank got a result")
                    continue
                want = deepselect.topk_rows(sub_full, 6, order="value", index_dtype=torch.int64)
                try:
                    assert_same_topk(got, want, "value", msg=f"sub-group dst={dst}")
                except AssertionError as exc:
                    failures.append(str(exc))
        # shards with different row counts are refused on every rank alike
        try:
            topk(torch.zeros(2 + rank, 3), 2)
            failures.append("different row counts were accepted")
        except ValueError as exc:
            if "same number of rows" not in str(exc):
                failures.append(f"wrong message: {exc}")
        # a window outside the global row is refused on every rank alike
        try:
            topk(full[:, start : start + sizes[rank]], 2, end=torch.tensor([n + 1, 1]))
            failures.append("window beyond N was accepted")
        except ValueError as exc:
            if "begin <= end <= N" not in str(exc):
                failures.append(f"wrong message: {exc}")
        _disagreements(rank, world, failures)
    finally:
        # every rank done with its collectives before any tears its connections down
        dist.barrier()
        dist.destroy_process_group()
    out.put((rank, count, failures))


def _disagreements(rank: int, world: int, failures: list) -> None:
    """Calls that differ between ranks, or that one rank refuses: every rank raises
    (after one metadata exchange), none hangs and none returns garbage."""
    x = torch.randn(2, 5 + rank, generator=torch.Generator().manual_seed(rank))
    sizes = [5 + r for r in range(world)]
    last = rank == world - 1
    cases = {
        "k": (dict(k=2 + rank), ValueError, "k must be the same"),
        "dtype": (dict(x=x.to(torch.bfloat16) if last else x), ValueError, "dtype"),
        "largest": (dict(largest=last), ValueError, "largest"),
        "order": (dict(order="value" if last else "none"), ValueError, "order"),
        "index_dtype": (
            dict(index_dtype=torch.int32 if last else torch.int64),
            ValueError,
            "index_dtype",
        ),
        "window": (dict(end=torch.tensor([3, 3]) if last else None), ValueError, "end"),
        "dst": (dict(dst=rank), ValueError, "dst"),
        "shard_sizes": (dict(shard_sizes=[s + last for s in sizes]), ValueError, "shard_sizes"),
        "refused": (dict(k=0 if last else 2), ValueError, "k must be >= 1" if last else "rank"),
        "float-offset": (
            dict(index_offset=1.5 if last else 1),
            (TypeError, ValueError),
            "index_offset" if last else "rank",
        ),
    }
    for name, (kw, exc, match) in cases.items():
        kw = dict(kw)
        xx = kw.pop("x", x)
        k = kw.pop("k", 2)
        try:
            topk(xx, k, **kw)
            failures.append(f"disagreement {name}: rank {rank} got a result")
        except exc as e:
            if match not in str(e):
                failures.append(f"disagreement {name}: rank {rank} said {e}")
    # after all of them the group still works
    got = topk(x, 3, order="value")
    if got is None or got[0].shape != (2, 3):
        failures.append("the group no longer works after the refused calls")


def _free_init(tmp_path) -> str:
    return f"file://{tmp_path / 'rendezvous'}"


@pytest.mark.parametrize(
    "world",
    [2, pytest.param(4, marks=pytest.mark.slow)],  # 4 processes on 2 cores: ~100 s
)
def test_sharded_equals_unsharded(world, tmp_path):
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    mp.spawn(_worker, args=(world, _free_init(tmp_path), out), nprocs=world, join=True)
    results = [out.get() for _ in range(world)]
    expected_cases = sum(1 for _ in _cases(world))
    for rank, count, failures in sorted(results):
        assert count == expected_cases, f"rank {rank} ran {count} of {expected_cases} cases"
        assert not failures, f"rank {rank}: {len(failures)} failures, first: {failures[0]}"


def _local_candidates(full, sizes, k, opt_largest):
    """Hand-built exchange buffers: each shard's top-k in index order, by the oracle."""
    vb, ix = [], []
    start = 0
    for s in sizes:
        shard = full[:, start : start + s]
        v, i = deepselect.oracle_topk(
            shard,
            k,
            TopkOptions(
                largest=opt_largest,
                order=Order.INDEX,
                index_offset=start,
                fill_index=-1,
                index_dtype=torch.int64,
            ),
        )
        vb.append(v.view(torch.int32))
        ix.append(i)
        start += s
    return torch.stack(vb), torch.stack(ix)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("order", ["none", "value", "index"])
def test_merge_candidates_matches_oracle(largest, order):
    sizes = [7, 0, 12, 1, 9]
    full = _rows("nan", 4, sum(sizes), torch.float32, 3)
    for k in (1, 5, 40):
        vb, ix = _local_candidates(full, sizes, k, largest)
        opt = TopkOptions(largest=largest, order=Order(order), index_dtype=torch.int64)
        got = merge_candidates(vb, ix, k, torch.float32, opt)
        want = deepselect.oracle_topk(full, k, opt)
        assert_same_topk(got, want, order, msg=f"k={k}")


def test_merge_candidates_by_hand():
    # rank 0 holds positions 0..2 = [1, 5, 5], rank 1 holds 3..4 = [5, nan]; k = 3
    bits = torch.tensor([[[5.0, 5.0, 1.0]], [[5.0, float("nan"), 0.0]]]).view(torch.int32)
    idx = torch.tensor([[[1, 2, 0]], [[3, 4, -1]]])
    v, i = merge_candidates(bits, idx, 3, torch.float32, TopkOptions(order=Order.VALUE))
    assert i.tolist() == [[4, 1, 2]]
    assert torch.isnan(v[0, 0]) and v[0, 1:].tolist() == [5.0, 5.0]
    # a fill slot in the middle of the buffer is skipped; short rows get fills
    bits = torch.tensor([[[2.0, 0.0]], [[3.0, 0.0]]]).view(torch.int32)
    idx = torch.tensor([[[0, -1]], [[1, -1]]])
    v, i = merge_candidates(bits, idx, 4, torch.float32, TopkOptions(order=Order.INDEX))
    assert i.tolist() == [[0, 1, -1, -1]]
    assert v.tolist() == [[2.0, 3.0, float("-inf"), float("-inf")]]


def test_byte_counts():
    assert exchange_bytes(512, 2, torch.float32, torch.int32) == 512 * 2 * 8
    assert exchange_bytes(512, 8, torch.bfloat16, torch.int64) == 512 * 8 * 10
    assert gather_bytes(2 * 524_288, torch.bfloat16) == 2 * 1_048_576


def test_bad_input_without_group():
    with pytest.raises(ValueError, match="x_local must be 2-D"):
        topk(torch.zeros(4), 1)
    with pytest.raises(ValueError, match="k must be >= 1"):
        topk(torch.zeros(2, 4), 0)
    with pytest.raises(TypeError, match="index_dtype"):
        topk(torch.zeros(2, 4), 1, index_dtype=torch.int16)
    if not dist.is_initialized():
        with pytest.raises(ValueError, match="init_process_group"):
            topk(torch.zeros(2, 4), 1)
