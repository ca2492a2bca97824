"""The sampling kernels built for sm_90 on any machine (``scripts/compile_sampling.py``
in a subprocess, outside the interpreter the test session runs in): every variant
compiles, and the divisions that must match torch's are correctly rounded; ptxas
reports its registers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="Triton's CUDA toolchain ships for Linux"
)


def field(line: str, name: str) -> int:
    return int(line.split(f" {name}=")[1].split()[0])


# the script's kernel families in two groups of about equal build time, and their builds
# per key width: the pass 2 ops x 3 rankings, the kept sums 3 rankings, the draw 8; the
# top-p draw 8 variants, one at BLOCK 128, one split with its two launches each before
# and after the selection
GROUPS = {("keep", "sums", "draw"): 2 * 3 + 3 + 8, ("top_p",): 8 + 1 + 1 + 3 * 3}


@pytest.mark.parametrize("bits", [16, 32])
@pytest.mark.parametrize("group", list(GROUPS), ids=lambda g: "-".join(g))
def test_every_sampling_kernel_builds_with_correctly_rounded_divisions(group, bits):
    """One group of kernel families at one key width, in a process of their own (the
    groups build in parallel under xdist)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    families = [a for f in group for a in ("--family", f)]
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "compile_sampling.py"), *families,
         "--bits", str(bits)],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert len(lines) == GROUPS[group], lines
    for line in lines:
        assert f" bits={bits} " in line, line
        divides = "RENORM=1" in line or ("draw_kernel" in line and "FROM_PROBS=0" in line)
        assert ("div=div.rn.f32" in line) == divides, line
        assert " regs=" in line and " regs=?" not in line, line
        if line.startswith("top_p_draw_kernel"):  # the descent's sums in shared memory
            assert field(line, "smem") >= 256 * 8 and field(line, "bins") > 0, line
        assert field(line, "clash") == 0, line
