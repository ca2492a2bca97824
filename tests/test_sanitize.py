"""The kernels under NVIDIA compute-sanitizer (scripts/sanitize_cases.py: a
representative subset of launches, each checked against the oracle).

On a GPU, memcheck over every case and racecheck over the block-synchronous, short
and split launches must report no error. The warp-private loop (``w32``) is left out
of racecheck: its warps poll shared-memory flags that another warp sets without a
barrier between them, by design (``compute-sanitizer --tool racecheck python
scripts/sanitize_cases.py --cases w32`` reports it).
Without a GPU, the case list itself runs at a small scale under the interpreter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "sanitize_cases.py"
sys.path.insert(0, str(SCRIPT.parent))
import sanitize_cases  # noqa: E402

# only the project's kernels are checked: the oracle's own torch kernels are not
# ours (racecheck reports hazards inside torch's int64 sum reduction on an H200,
# torch 2.11)
KERNELS = ["--kernel-name-exclude", "kns=native"]


SMALL = dict(sanitize_cases.cases("all", dev="cuda" if torch.cuda.is_available() else "cpu",
                                   scale=50))  # fmt: skip


@pytest.mark.slow  # under the interpreter: 80-160 s in all on 2 cores, 30 s the longest
@pytest.mark.parametrize("name", list(SMALL))
def test_every_case_agrees_with_the_oracle_at_a_small_scale(name):
    assert SMALL[name]()


@pytest.mark.gpu
# one case group a test, so that parallel workers share the sanitizer's slow runs
@pytest.mark.parametrize(
    "tool,which",
    [("memcheck", g) for g in sanitize_cases.GROUPS["all"]]
    + [("racecheck", g) for g in sanitize_cases.GROUPS["block"]],
)
def test_gpu_kernels_under_compute_sanitizer(tool, which):
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        pytest.skip("compute-sanitizer not found")
    env = dict(os.environ)
    # compile outside the sanitizer first: the run under it then loads the kernels
    # from Triton's cache
    subprocess.run([sys.executable, str(SCRIPT), "--cases", which], check=True, env=env)
    r = subprocess.run(
        [exe, "--tool", tool, "--error-exitcode", "3", *KERNELS, sys.executable,
         str(SCRIPT), "--cases", which],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    # each tool ends with its own summary line
    clean = {
        "memcheck": "ERROR SUMMARY: 0 errors",
        "racecheck": "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)",
    }[tool]
    assert clean in out, out[-6000:]
