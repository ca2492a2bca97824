"""Summarise Nsight Compute's source page of one launch: where the warps' instructions
and stall samples go.

    ncu --kernel-name regex:deepselect_rows_kernel --launch-skip 1 --launch-count 1 \\
        --section SourceCounters --section WarpStateStats -o rep \\
        python benchmarks/one_call.py --rows 256 --n 1M
    ncu --import rep.ncu-rep --page source --csv --print-source sass > src.csv
    python benchmarks/ncu_source_summary.py src.csv [--runs 0.005] [--top 12]

Three views: the stall reasons over the whole launch; runs of consecutive SASS
instructions executed equally often (a loop body or one path through it: the
execution count says how often, e.g. rows x warps x blocks for a step of the
stream), each with its share of the executed instructions and of the stall
samples; and the single instructions with the most stall samples.
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def load(path: str) -> tuple[list[str], list[list[str]]]:
    rows = list(csv.reader(open(path, newline="")))
    # the first line names the kernel, the second holds the column names
    start = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    return rows[start], rows[start + 1 :]


def opcode(sass: str) -> str:
    parts = sass.split()
    if not parts:
        return ""
    op = parts[1] if parts[0].startswith("@") and len(parts) > 1 else parts[0]
    return op.split(".")[0].rstrip(";")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv")
    p.add_argument("--runs", type=float, default=0.005, help="show runs above this share")
    p.add_argument("--top", type=int, default=12)
    a = p.parse_args(argv)
    hdr, data = load(a.csv)
    col = {h: i for i, h in enumerate(hdr)}

    def num(r: list[str], h: str) -> float:
        try:
            return float(r[col[h]].replace(",", ""))
        except (KeyError, ValueError, IndexError):
            return 0.0

    stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    total_s = sum(num(r, SAMPLES) for r in data) or 1.0
    total_e = sum(num(r, EXECUTED) for r in data) or 1.0
    reasons = Counter({h[6:]: sum(num(r, h) for r in data) for h in stalls})
    print(f"{a.csv}: {total_e:.4g} warp instructions executed, {total_s:.0f} stall samples")
    print("stalls: " + ", ".join(f"{k} {v / total_s:.1%}" for k, v in reasons.most_common(8)))

    base = int(data[0][0], 16)
    runs: list[list] = []  # [first, last, count, n, samples, opcodes]
    for r in data:
        e, s, addr = num(r, EXECUTED), num(r, SAMPLES), int(r[0], 16) - base
        if runs and runs[-1][2] == e:
            runs[-1][1] = addr
            runs[-1][3] += 1
            runs[-1][4] += s
            runs[-1][5].add(opcode(r[1]))
        else:
            runs.append([addr, addr, e, 1, s, {opcode(r[1])}])
    print(f"\nruns of equally executed instructions (>= {a.runs:.1%} of either):")
    for first, last, e, n, s, ops in runs:
        if e * n / total_e >= a.runs or s / total_s >= a.runs:
            print(
                f"  {first:06x}-{last:06x} {e:9.0f} x {n:4d}: {e * n / total_e:5.1%} of "
                f"instructions, {s / total_s:5.1%} of samples  {' '.join(sorted(ops))[:60]}"
            )
    print(f"\nthe {a.top} instructions with most stall samples:")
    for r in sorted(data, key=lambda r: -num(r, SAMPLES))[: a.top]:
        s = num(r, SAMPLES)
        why = sorted(((num(r, h), h[6:]) for h in stalls), reverse=True)[:2]
        print(
            f"  {int(r[0], 16) - base:06x} {s / total_s:6.2%} x{num(r, EXECUTED):9.0f} "
            f"{r[1].strip()[:52]:52s} " + " ".join(f"{w} {v / max(s, 1):.0%}" for v, w in why)
        )


if __name__ == "__main__":
    main()
