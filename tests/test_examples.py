"""The programs in examples/ run as a user would run them, on small shapes, and their
own checks pass (each exits non-zero when its result is wrong)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_example(name: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if (ROOT / "src").is_dir():  # a checkout: its package, as the other tests use
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_indexer_decode():
    r = run_example("indexer_decode.py", "--batch", "3", "--context", "2048", "--k", "128",
                    "--page-size", "16", "--steps", "3")  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines[:3]] == ["step 0", "step 1", "step 2"]
    assert "lengths [2048, 1707, 1366]" in lines[0]  # 2048 - r * (2048 // 6) per row
    assert "lengths [2050, 1709, 1368]" in lines[2]  # each step appends a token
    assert lines[-1].endswith(": exact")


def test_sampler_step():
    r = run_example("sampler_step.py", "--batch", "4", "--vocab", "32000")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 5 and lines[0].startswith("row 0: k=   1 ")
    assert "(rank 0)" in lines[0]  # k = 1 is greedy: the row's best token
    assert lines[-1].endswith(": ok")
