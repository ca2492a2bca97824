"""Building blocks of a one-launch select over a row's segments, timed on a GPU:
a cooperative launch (every program resident at once, or the launch refused), a
barrier among a row's programs (an arrive counter and a spin), and ``tl.histogram``
of one segment's keys by digit width.

    python benchmarks/grid_probe.py [--repeats 50]

Each line is one CUDA-graph replay's device time per call (median of 5), beside an
empty launch; every result is checked.
"""

from __future__ import annotations

import argparse

import kernel_table
import torch
import triton
import triton.language as tl
from kernel_table import time_graph_ms

from deepselect.triton_backend import _sm_count


@triton.jit
def _barrier(cnt_ptr, target):
    """Arrive at a counter and wait until ``target`` programs have."""
    tl.debug_barrier()
    tl.atomic_add(cnt_ptr, 1, sem="release", scope="gpu")
    seen = tl.atomic_add(cnt_ptr, 0, sem="acquire", scope="gpu")
    while seen < target:
        seen = tl.atomic_add(cnt_ptr, 0, sem="acquire", scope="gpu")


@triton.jit
def barrier_kernel(cnt_ptr, sum_ptr, out_ptr, nseg, NBAR: tl.constexpr):
    """``NBAR`` rounds: each program adds its id + round to the row's sum, waits for the
    row's programs, reads the sum. Rows of ``nseg`` programs each."""
    pid = tl.program_id(0)
    row = pid // nseg
    acc = 0
    for b in tl.static_range(NBAR):
        tl.atomic_add(sum_ptr + row * NBAR + b, pid + b, sem="relaxed", scope="gpu")
        _barrier(cnt_ptr + row * NBAR + b, nseg)
        acc += tl.load(sum_ptr + row * NBAR + b, cache_modifier=".cg")
    tl.store(out_ptr + pid, acc)


@triton.jit
def hist_kernel(x_ptr, out_ptr, L, BINS: tl.constexpr, NT: tl.constexpr):
    """One segment of ``L`` keys per program, its histogram of the top digit."""
    pid = tl.program_id(0)
    offs = tl.arange(0, NT)
    x = tl.load(x_ptr + pid.to(tl.int64) * L + offs, mask=offs < L, other=0)
    d = (x.to(tl.int32) & (BINS - 1)).to(tl.int32)
    h = tl.histogram(d, BINS, mask=offs < L)
    tl.store(out_ptr + pid * BINS + tl.arange(0, BINS), h)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=50)
    a = p.parse_args()
    kernel_table.SYNC = False
    sm = _sm_count(0)
    dev = "cuda"
    one = torch.empty(1, device=dev)
    t_empty = time_graph_ms(lambda x: one.zero_(), [one], a.repeats)
    print(f"empty launch {t_empty * 1e3:.1f} us; {sm} SMs; triton {triton.__version__}")
    # barriers: rows x nseg programs, NBAR rounds, cooperative or not
    for rows, nseg in ((1, 128), (1, 132), (6, 16), (2, 132), (1, 264), (4, 132)):
        nprog = rows * nseg
        for nbar in (0, 1, 2, 4):
            for coop in (False, True):
                cnt = torch.zeros(rows * max(nbar, 1), dtype=torch.int32, device=dev)
                tot = torch.zeros_like(cnt)
                out = torch.empty(nprog, dtype=torch.int32, device=dev)

                def call(_x, cnt=cnt, tot=tot, out=out, rows=rows, nseg=nseg, nbar=nbar, coop=coop):
                    cnt.zero_()
                    tot.zero_()
                    barrier_kernel[(rows * nseg,)](
                        cnt, tot, out, nseg, NBAR=nbar, num_warps=8, launch_cooperative_grid=coop
                    )

                try:
                    call(None)
                    torch.cuda.synchronize()
                    pid = torch.arange(nprog, device=dev).view(rows, nseg)
                    want = sum(
                        (pid.sum(1, keepdim=True) + b * nseg).expand(rows, nseg)
                        for b in range(nbar)
                    )
                    ok = nbar == 0 or bool((out.view(rows, nseg) == want).all())
                    t = time_graph_ms(call, [None], a.repeats)
                    msg = f"{t * 1e3:7.1f} us {'ok' if ok else 'WRONG'}"
                except Exception as e:  # noqa: BLE001 - the refusal is what is probed
                    msg = f"refused: {type(e).__name__}: {str(e)[:80]}"
                    torch.cuda.synchronize()
                print(f"barrier {rows}x{nseg} nbar={nbar} coop={coop}: {msg}", flush=True)
    # histograms of 8192 keys per program, 128 programs, by bins and warps
    L = 8192
    x = torch.randint(0, 1 << 16, (128 * L,), dtype=torch.int32, device=dev)
    for bins in (16, 64, 256):
        for warps in (4, 8, 16):
            out = torch.empty(128 * bins, dtype=torch.int32, device=dev)

            def hcall(_x, out=out, bins=bins, warps=warps):
                hist_kernel[(128,)](x, out, L, BINS=bins, NT=L, num_warps=warps)

            hcall(None)
            want = torch.stack(
                [torch.bincount(r, minlength=bins) for r in (x.view(128, L) & (bins - 1))]
            )
            ok = bool((out.view(128, bins) == want.to(torch.int32)).all())
            t = time_graph_ms(hcall, [None], a.repeats)
            verdict = "ok" if ok else "WRONG"
            print(f"histogram 128x{L} bins={bins} warps={warps}: {t * 1e3:7.1f} us {verdict}")
    # a refused launch leaves the context usable
    try:
        barrier_kernel[(sm * 64,)](
            cnt, tot, out, sm * 64, NBAR=1, num_warps=8, launch_cooperative_grid=True
        )
        torch.cuda.synchronize()
        print("oversized cooperative grid: launched (unexpected)")
    except Exception as e:  # noqa: BLE001
        print(f"oversized cooperative grid: {type(e).__name__}: {str(e)[:100]}")
    print("context after:", float(torch.ones(4, device=dev).sum()))


if __name__ == "__main__":
    main()
