"""deepselect.distributed over NCCL: two ranks, one GPU each, bit for bit.

The same check as tests/test_distributed.py (gloo, CPU), on the GPU path: each rank
builds the full rows from a seed (the helpers of test_distributed), keeps its shard on
its own GPU, and compares ``deepselect.distributed.topk`` with ``deepselect.topk_rows``
on the whole rows on its GPU. Ranks record failures instead of raising, so both keep
taking part in every collective and neither hangs.

The case list is short on purpose: every distinct (dtype, k, order, window, ...) is a
kernel specialisation that each rank compiles (seconds each). It still covers uneven
and empty shards, ties across the shard border, NaNs with payloads, windows, int32
exchange, ``dst``, an index offset with user fills, a sub-group in reversed rank order
and the engine's shapes (a 2 x 129,280 vocabulary, a 2 x ~262K bf16 indexer row).

``DEEPSELECT_DIST_BACKEND=gloo`` runs the same cases on the CPU (to check the test
itself without GPUs): ``python tests/test_distributed_nccl.py``.
"""

from __future__ import annotations

import datetime
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from helpers import assert_same_topk
from test_distributed import _rows, _run_case

import deepselect
from deepselect.distributed import topk

BACKEND = os.environ.get("DEEPSELECT_DIST_BACKEND", "nccl")
WORLD = 2


def _cases():
    """(name, shard sizes, rows, kind, dtype, k, options, dst) of every check."""
    f32, bf16 = torch.float32, torch.bfloat16
    # name, sizes, rows, kind, dtype, k, largest, order, index dtype, windows, dst
    table = [
        ("empty shard", [13, 0], 3, "ties", f32, 4, True, "none", torch.int64, True, None),
        ("short rows", [13, 0], 3, "nan", bf16, 16, True, "value", torch.int64, False, 1),
        ("ties at border", [5, 28], 3, "ties", bf16, 4, True, "index", torch.int32, True, 0),
        ("nan payloads", [5, 28], 3, "nan", f32, 4, True, "value", torch.int32, True, None),
        ("one each", [1, 1], 3, "nan", f32, 5, True, "index", torch.int64, False, None),
        ("smallest", [5, 28], 3, "normal", f32, 4, False, "value", torch.int64, True, 1),
        ("vocabulary", [129_281, 129_279], 4, "ties", f32, 512, True, "value", torch.int64,
         False, None),
        ("indexer", [300_000, 224_288], 4, "nan", bf16, 2048, True, "none", torch.int32,
         True, 1),
    ]  # fmt: skip
    for i, (name, sizes, rows, kind, dtype, k, largest, order, idt, win, dst) in enumerate(table):
        yield dict(
            name=name,
            sizes=sizes,
            rows=rows,
            kind=kind,
            dtype=dtype,
            k=k,
            largest=largest,
            order=order,
            index_dtype=idt,
            window=win,
            dst=dst,
            seed=100 + i,
        )


def _device(rank: int) -> torch.device:
    return torch.device("cuda", rank) if BACKEND == "nccl" else torch.device("cpu")


def _check(failures: list, got, want, order, msg: str) -> None:
    try:
        assert_same_topk(got, want, order, msg=msg)
    except AssertionError as exc:
        failures.append(str(exc))


def _worker(rank: int, world: int, init: str, out) -> None:
    dev = _device(rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group(
        BACKEND,
        init_method=init,
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=180),
    )
    failures: list[str] = []
    count = 0
    try:
        for c in _cases():
            count += 1
            try:  # a case that raises is reported; the ranks go on to the next one together
                _run_case(c, rank, dev, failures)
            except Exception as exc:
                failures.append(f"{c['name']}: rank {rank} raised {type(exc).__name__}: {exc}")

        # an index offset tensor and a user fill on top of the global indices
        sizes = [4, 9]
        n = sum(sizes)
        full = _rows("ties", 2, n, torch.float32, 5).to(dev)
        start = sum(sizes[:rank])
        off = torch.tensor([100, 7], device=dev)
        kw = dict(order="value", index_offset=off, fill_value=2.5, fill_index=-9)
        got = topk(full[:, start : start + sizes[rank]], n + 2, **kw)
        want = deepselect.topk_rows(full, n + 2, index_dtype=torch.int64, **kw)
        _check(failures, got, want, "value", "offset/fill")
        count += 1

        # a sub-group whose rank order is the reverse of the world's: dst is a group rank
        sub = dist.new_group([1, 0])
        me = dist.get_rank(sub)
        sub_sizes = [5, 8]
        sub_full = _rows("nan", 2, 13, torch.bfloat16, 11).to(dev)
        shard = sub_full[:, sum(sub_sizes[:me]) : sum(sub_sizes[: me + 1])]
        for dst in (None, 1):
            got = topk(shard, 6, group=sub, order="value", dst=dst)
            count += 1
            if dst is not None and me != dst:
                if got is not None:
                    failures.append("sub-group: non-dst rank got a result")
                continue
            want = deepselect.topk_rows(sub_full, 6, order="value", index_dtype=torch.int64)
            _check(failures, got, want, "value", f"sub-group dst={dst}")
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        dist.barrier()
    except Exception as exc:  # report instead of hanging the other rank's join
        failures.append(f"rank {rank} raised {type(exc).__name__}: {exc}")
    finally:
        dist.destroy_process_group()
    out.put((rank, count, failures))


def run_ranks(tmp_dir) -> list[tuple[int, int, list[str]]]:
    """Spawn the ranks (file-store rendezvous in ``tmp_dir``); their reports by rank."""
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    init = f"file://{os.path.join(str(tmp_dir), 'rendezvous')}"
    mp.spawn(_worker, args=(WORLD, init, out), nprocs=WORLD, join=True)
    return sorted(out.get() for _ in range(WORLD))


def _two_gpus_with_nccl() -> bool:
    return (
        torch.cuda.is_available()
        and torch.cuda.device_count() >= 2
        and dist.is_available()
        and dist.is_nccl_available()
    )


@pytest.mark.gpu
@pytest.mark.skipif(not _two_gpus_with_nccl(), reason="needs 2 CUDA devices and NCCL")
def test_nccl_sharded_equals_unsharded(tmp_path):
    expected = sum(1 for _ in _cases()) + 3
    for rank, count, failures in run_ranks(tmp_path):
        assert not failures, f"rank {rank}: {len(failures)} failures, first: {failures[0]}"
        assert count == expected, f"rank {rank} ran {count} of {expected} checks"


if __name__ == "__main__":  # the same cases over gloo on the CPU: checks the test itself
    import tempfile

    BACKEND = os.environ.setdefault("DEEPSELECT_DIST_BACKEND", "gloo")
    with tempfile.TemporaryDirectory() as d:
        reports = run_ranks(d)
    for rank, count, failures in reports:
        print(f"rank {rank}: {count} checks, {len(failures)} failures", *failures[:3], sep="\n  ")
    raise SystemExit(1 if any(f for _, _, f in reports) else 0)
