"""How fast can a kernel only read the rows? The ceiling the top-k kernels are held to.

    python benchmarks/read_ceiling.py [--rows 4096] [--n 1048576] [--dtype bf16]

Times, beside torch's reductions (``x.amax(dim=1)``, ``x.sum(dim=1)``) and a copy, a
Triton read with the streaming kernel's shape: a persistent grid of ``per_sm``
programs a multiprocessor, each taking rows ``pid, pid + G, ...`` and reading each
row in blocks of ``B`` elements (16-byte loads), its max the only result. The
variants differ in programs a multiprocessor, warps a program and block size (the
bytes a warp has in flight: each block's loads are issued before any is used). Effective
bandwidth counts the bytes read (and, for the copy, written), as the tables do.
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl
from kernel_table import DT, draw, time_ms

from deepselect.triton_backend import _sm_count


@triton.jit
def read_rows_kernel(x_ptr, out_ptr, rows, N, stride, B: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, B)
    for row in range(pid, rows, nprog):
        x_row = x_ptr + row.to(tl.int64) * stride
        acc = tl.full([B], float("-inf"), tl.float32)
        for s in range(0, N, B):
            v = tl.load(x_row + s + offs, mask=s + offs < N, other=float("-inf"))
            acc = tl.maximum(acc, v.to(tl.float32))
        tl.store(out_ptr + row, tl.max(acc, axis=0))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--dtype", default="bf16", choices=list(DT))
    p.add_argument("--repeats", type=int, default=20)
    a = p.parse_args()
    dt = DT[a.dtype]
    x = draw("normal", a.rows, a.n, dt, 0)
    nbytes = x.numel() * x.element_size()
    # one input far larger than L2 reads cold each call; two smaller ones alternate
    inputs = [x] if nbytes > 1 << 30 else [x, draw("normal", a.rows, a.n, dt, 1)]
    sms = _sm_count(0)
    out = torch.empty(a.rows, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    lines = []

    def report(name: str, ms: float, moved: int) -> None:
        lines.append(f"{name:<36} {ms:8.3f} ms {moved / ms / 1e9:6.2f} TB/s")
        print(lines[-1], flush=True)

    print(f"# {torch.cuda.get_device_name()}: {a.dtype} {a.rows} x {a.n}, {sms} SMs")
    report("x.amax(dim=1)", time_ms(lambda t: t.amax(dim=1), inputs, a.repeats), nbytes)
    report("x.sum(dim=1)", time_ms(lambda t: t.sum(dim=1), inputs, a.repeats), nbytes)
    copy_ms = time_ms(lambda t: y.copy_(t), inputs, a.repeats)
    report("y.copy_(x) (read + write)", copy_ms, 2 * nbytes)
    per_elem = 16 // x.element_size()
    want = x.amax(dim=1).float()  # every variant's result on x
    for per_sm in (1, 2, 4):
        for warps in (4, 8):
            for blk_bytes in (8192, 16384, 32768, 65536):
                B = blk_bytes // x.element_size()
                if B // (32 * warps) < per_elem:
                    continue
                grid = (min(a.rows, per_sm * sms),)

                def fn(t, grid=grid, B=B, warps=warps):
                    read_rows_kernel[grid](t, out, a.rows, a.n, t.stride(0), B=B, num_warps=warps)

                ms = time_ms(fn, inputs, a.repeats)
                fn(x)  # the timed calls end on either input
                if not torch.equal(out, want):
                    raise SystemExit("read_rows_kernel: wrong maxima")
                report(f"triton {per_sm}/SM {warps} warps, blocks of {blk_bytes} B", ms, nbytes)
    best = max(lines[3:], key=lambda s: float(s.split()[-2]))
    print(f"best Triton read: {best}")


if __name__ == "__main__":
    main()
