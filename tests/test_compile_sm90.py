"""The Triton kernels built for an H100/H200 (sm_90) on any machine, GPU or not.

The streaming kernel's core is inline PTX, which the interpreter never runs: these
tests compile every kernel through Triton and ptxas as a launch on the GPU would, so
that a PTX error or a spill in the stream loop shows up here rather than on a GPU.
They run ``scripts/compile_check.py`` in a subprocess, because the test session's
kernels are built for the interpreter (``TRITON_INTERPRET``, see conftest.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "compile_check.py"

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="Triton's CUDA toolchain ships for Linux"
)


def compile_check(*args: str) -> list[str]:
    """Run compile_check.py with ``args``; its report lines (one per kernel built)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    r = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, f"compile_check {' '.join(args)} failed:\n{r.stderr[-3000:]}"
    lines = [ln for ln in r.stdout.splitlines() if "regs=" in ln]
    assert lines, r.stdout
    return lines


def spills(line: str) -> int:
    m = re.search(r"spill_st=(\d+) spill_ld=(\d+)", line)
    assert m, line
    return int(m.group(1)) + int(m.group(2))


def test_stream_kernel_warp_private_builds_without_spills():
    """The warp-private loop (1M-element rows) for bf16, fp16 and fp32: its PTX (filter,
    loads, L2 requests, sync state) assembles, in 128 registers, without spills."""
    lines = compile_check("--dtype", "all", "--w32", "--order", "none")
    assert len(lines) == 3
    for line in lines:
        assert spills(line) == 0, line


def test_stream_kernel_block_synchronous_builds_without_spills():
    """The block-synchronous loop (shorter rows) with the sorted output, fp32: the
    sampler's shape."""
    (line,) = compile_check("--dtype", "fp32", "--order", "value")
    assert spills(line) == 0, line


@pytest.mark.parametrize("loop", [["--every", "4"], ["--w32"]], ids=["block4", "w32"])
def test_stream_kernel_chunked_searches_build_without_spills(loop):
    """The compactions' radix passes and the sample's bound by a radix select
    (sample_radix: the histograms by shared-memory atomics, inline PTX), in the
    block-synchronous loop checked every 4 blocks and in the warp-private loop, for
    bf16, fp16 and fp32: they assemble in 128 registers without spills."""
    cfg = "sample_radix=1"
    lines = compile_check("--dtype", "all", *loop, "--cfg", cfg, "--order", "none")
    assert len(lines) == 3
    for line in lines:
        assert spills(line) == 0, line


@pytest.mark.slow  # builds for sm_90 through ptxas: 30-80 s on 2 cores
def test_stream_kernel_builds_with_k_one():
    """k = 1 reaches the streaming kernel as a compile-time constant (Triton specializes
    an integer argument equal to 1): bf16 64 x 65,536, the block-synchronous loop with
    the compactions' radix passes, builds in either direction."""
    for order in ("none", "value"):
        (line,) = compile_check(
            "--stream", "64x65536", "--dtype", "bf16", "--k", "1", "--order", order
        )
        assert "regs=" in line, line


def test_short_path_builds():
    """The register-resident short path with the page map (the paged indexer)."""
    lines = compile_check("--short", "1024x8192", "--dtype", "bf16", "--order", "none", "--paged")
    assert len(lines) == 1


@pytest.mark.slow  # builds for sm_90 through ptxas: 30-80 s on 2 cores
def test_split_in_one_launch_builds():
    """The split with its merges in its one launch: the segments and both merge levels
    of 1 x 1M, with the counters' atomics, build as one kernel."""
    lines = compile_check("--short", "1x1048576", "--dtype", "bf16", "--order", "value")
    assert len(lines) == 1 and "in-launch" in lines[0], lines


@pytest.mark.slow  # builds for sm_90 through ptxas: 30-80 s on 2 cores
def test_short_path_builds_with_k_one():
    """k = 1 reaches the kernels as a compile-time constant (Triton specializes an
    integer argument equal to 1): the split in one launch and every level of the split
    launched level by level (7 rows of 1M: too many programs to merge in their launch)
    build with it."""
    args = ("--dtype", "bf16", "--k", "1", "--order", "none")
    (line,) = compile_check("--short", "8x300000", *args)
    assert "in-launch" in line, line
    lines = compile_check("--short", "7x1048576", *args)
    assert len(lines) == 2 and "in-launch" not in lines[0], lines


@pytest.mark.slow  # builds for sm_90 through ptxas: 30-80 s on 2 cores
def test_radix_passes_build_in_one_launch_and_by_phase():
    """The radix passes: all phases in one cooperative launch (its row barriers' spin
    loops), with the page map, without spills; one launch per phase (where a device
    refuses the cooperative launch): fp32's four 8-bit passes and the write."""
    args = ("--short", "1x1048576", "--dtype", "bf16", "--order", "index")
    (line,) = compile_check(*args, "--paged")
    assert "one-launch" in line and spills(line) == 0, line
    args = ("--short", "2x129280", "--dtype", "fp32", "--order", "none")
    lines = compile_check(*args, "--variant", "by-phase")
    assert len(lines) == 5 and all("by-phase" in line for line in lines), lines


@pytest.mark.slow  # builds for sm_90 through ptxas: 30-80 s on 2 cores
def test_smem_histograms_have_their_shared_memory():
    """The shared-memory histograms' bins are the first words of the kernel's shared
    memory: every launch that takes one (the short rows' radix select of 6-bit digits,
    the lean split's of 8-bit digits in one launch, the passes in one launch and per
    phase) is given at least a word per bin, and none of them takes a warp vote."""
    runs = [
        (("--short", "4096x4096", "--dtype", "bf16", "--order", "none"), 64),
        (("--short", "6x129280", "--dtype", "fp32", "--order", "value"), 256),
        (("--short", "1x1048576", "--dtype", "bf16", "--order", "none"), 256),
        (("--short", "2x129280", "--dtype", "fp32", "--order", "none", "--variant", "by-phase"),
         256),
    ]  # fmt: skip
    for args, bins in runs:
        lines = compile_check(*args, "--sass-stats")
        # the launches with a histogram (the passes' write takes none)
        hist = [ln for ln in lines if "smem_hist=0" not in ln]
        assert hist, (args, lines)
        for line in hist:
            shared = int(re.search(r"shared=(\d+)", line).group(1))
            assert shared >= 4 * bins and "VOTE=0" in line, (args, line)
    # a tensor smaller than the program's threads is held by several threads at once,
    # and each copy would count its key again: rows of up to 16 (one warp holds 16
    # keys) take tl.histogram
    (line,) = compile_check("--short", "1x6", "--dtype", "bf16", "--k", "3", "--order", "none")
    assert "smem_hist=0" in line, line


@pytest.mark.slow  # builds for sm_90 through ptxas: 30-80 s on 2 cores
def test_short_launches_read_their_input_in_vectors():
    """The short rows' select, the split and the radix passes read each thread's run
    of contiguous input with 16-byte loads (as a launch on contiguous rows specializes
    them), not one element a thread per load."""
    runs = [
        (("--short", "4096x4096", "--dtype", "bf16"), 2),  # 16 keys a thread: 2 x 8
        (("--short", "4096x4096", "--dtype", "fp32"), 4),
        (("--short", "1x1048576", "--dtype", "bf16"), 2),  # the passes in one launch
        (("--short", "14x1048576", "--dtype", "bf16"), 2),  # the split
    ]
    for args, loads in runs:
        (line, *_) = compile_check(*args, "--order", "none", "--sass-stats")  # reads the input
        vec = int(re.search(r"LDG128=(\d+)", line).group(1))
        assert vec >= loads, (args, line)


@pytest.mark.slow  # builds for sm_90 through ptxas: 30-80 s on 2 cores
def test_crowded_stream_launch_builds_at_its_cap():
    """The crowded fp32 launches as run_triton takes them on an H200 (stream_config:
    three programs per SM), sorted, assemble within their 80-register cap: rows
    shorter than W32_MID_BLOCKS blocks block-synchronous (a check every second block,
    the first compaction's bound), the sampler's rows in more than two waves in the
    warp-private loop."""
    for shape in ("4096x60000", "4096x129280"):
        (line,) = compile_check("--stream", shape, "--dtype", "fp32", "--order", "value")
        assert int(re.search(r"regs=(\d+)", line).group(1)) <= 80, (shape, line)


def test_bracket_kernel_builds_without_clash_or_spills():
    """The bracket kernel's launch (bf16, k = 2048 and 512, by value too): its histogram's
    atomic adds present, no shared-memory instruction of Triton's own while its bins
    or its staged positions live (nor after the last barrier before the staging);
    where the dispatch takes it (unsorted: by value a program holds the row), no
    spills and no layout conversion in its loops over the row. Outside them a few: the
    runs' counts between reads (a handful a row, none a step), the narrowing among a
    staged bracket's keys after the write's read (two a row) and one in the write after
    the loops (16-bit values and 32-bit indices stored in vectors of 16 bytes). Its SASS
    (``compile_check.sass_loops``) holds the reads as loops: steps with a load, with
    histogram adds and with scattered stores."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "compile_bracket.py"), "--dtypes", "bf16",
         "--loops"],  # fmt: skip
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if "regs=" in ln]
    assert len(lines) == 3, r.stdout
    for line in lines:
        assert int(re.search(r"bins=(\d+)", line).group(1)) > 0, line
        assert " clash=0 " in line and " stage_clash=0 " in line, line
        # unsorted, the selection's scattered stores keep the loop's layout
        if "order=value" not in line:
            assert spills(line) == 0 and " loop_cvt=0 " in line, line
            assert int(re.search(r" cvt=(\d+)", line).group(1)) <= 10, line
    loops = [ln for ln in r.stdout.splitlines() if ln.startswith("  loop of ")]
    count = lambda ln, op: int(re.search(rf" {op}=(\d+)", ln).group(1))  # noqa: E731
    assert any(count(ln, "LDG") and count(ln, "ATOMS") for ln in loops), r.stdout
    assert any(count(ln, "LDG") and count(ln, "STG") for ln in loops), r.stdout
