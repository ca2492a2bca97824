"""The programs under benchmarks/ run: every one answers --help, and those that can run
without a GPU do so on tiny shapes. They time nothing that is asserted; the harness they
share (deepselect.bench) has its own tests."""

from __future__ import annotations

import importlib
import socket
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py"))


@pytest.fixture
def program(monkeypatch):
    """Import a benchmark program by name, as ``python benchmarks/<name>.py`` would."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))

    def load(name: str):
        return importlib.import_module(name)

    return load


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_program_answers_help(name, program, monkeypatch, capsys):
    module = program(name)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", "--help"])
    with pytest.raises(SystemExit) as exc:
        module.main()
    assert exc.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_profile_kernel_launches_and_shapes(program):
    pk = program("profile_kernel")
    from deepselect.triton_backend import launch_config, stream_config

    args = (torch.bfloat16, 512, 4096, 1 << 20, 132)
    assert pk.launch("launched", *args) == stream_config(*args)
    assert pk.launch("launchedpre", *args) == stream_config(*args)
    sync, w32 = pk.launch("sync", *args), pk.launch("w32pre", *args)
    assert not sync.w32 and w32.w32 and sync.CAP == launch_config(torch.bfloat16, 512).CAP
    with pytest.raises(ValueError, match="unknown launch"):
        pk.launch("w64", *args)
    assert pk.parse_shape("fp32:256:129280:512:value") == ("fp32", 256, 129280, 512, "value")
    assert pk.parse_shape("bf16:6:1M:2K") == ("bf16", 6, 1 << 20, 2048, "none")
    for bad in ("bf16:6", "int8:6:1M", "bf16:6:1M:512:up"):
        with pytest.raises(ValueError):
            pk.parse_shape(bad)


def test_ncu_source_summary_reads_a_source_page(program, tmp_path, capsys):
    page = tmp_path / "src.csv"
    page.write_text(
        '"Kernel: deepselect_rows_kernel"\n'
        '"Address","Source","Instructions Executed","Warp Stall Sampling (All Samples)",'
        '"stall_long_sb","stall_wait"\n'
        '"0x100","LDG.E R2, [R4.64] ;","1000","90","80","10"\n'
        '"0x110","@P0 BRA 0x100 ;","1000","10","0","10"\n'
        '"0x120","EXIT ;","1","0","0","0"\n'
    )
    program("ncu_source_summary").main([str(page), "--top", "2"])
    out = capsys.readouterr().out
    assert "2001 warp instructions executed, 100 stall samples" in out
    assert "long_sb 80.0%" in out and "000000-000010" in out and "LDG" in out


def test_engine_bench_on_cpu(program, capsys):
    rc = program("engine_bench").main(
        ["--device", "cpu", "--quick", "--only", "step", "--repeats", "1", "--warmup", "0"]
    )
    assert rc == 0
    assert "indexer step" in capsys.readouterr().out


def test_distributed_bench_one_rank_on_cpu(program, monkeypatch, capsys):
    with socket.socket() as s:  # a free port for the one-process group
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
    for key, value in {**env, "MASTER_PORT": str(port)}.items():
        monkeypatch.setenv(key, value)
    rc = program("distributed_bench").main(
        ["--device", "cpu", "--quick", "--repeats", "1", "--warmup", "0"]
    )
    assert rc == 0  # every sharded result matched the gathered one
    assert "sharded top-k over 1 ranks" in capsys.readouterr().out


def test_sampling_fused_variants_on_cpu(program, capsys):
    """Both paths in the interpreter on rows the streaming kernel takes there, checked
    against each other before they are timed; the engine as it was afterwards (CPU
    tensors back on the torch definitions, for the tests that run after it)."""
    from deepselect import engine

    before = engine._uses_kernels
    rc = program("sampling_fused_variants").main(["--cpu", "--repeats", "1", "--per-row"])
    assert engine._uses_kernels is before
    out = capsys.readouterr().out.splitlines()
    assert rc == 0, out
    assert out[0].startswith("op | rows") and len(out) == 5
    assert all(line.split(" | ")[4] == "True" and line.endswith("ok") for line in out[1:])


def test_large_k_passes_tiles_on_cpu(program, capsys):
    """The stream's side in the interpreter (the radix passes need a cooperative GPU
    launch), checked against torch.topk before it is timed."""
    rc = program("large_k_passes_tiles").main(["--cpu", "--repeats", "1"])
    out = capsys.readouterr().out.splitlines()
    assert rc == 0, out
    assert out[0].startswith("rows | n") and len(out) == 2
    assert out[1].split(" | ")[3] == "stream" and out[1].endswith("exact"), out


def test_launch_breakdown_on_cpu(program, capsys):
    """Without a GPU the op runs once a shape (and names it); times need a device."""
    module = program("launch_breakdown")
    module.main(["--op", "top_k_top_p_sampling_from_logits", "--rows", "2", "--k", "5",
                 "--per-row"])  # fmt: skip
    out = capsys.readouterr().out
    assert "top_k_top_p_sampling_from_logits rows=2 V=600 k=5 per-row: ran once" in out


def test_selection_skip_probe_on_cpu(program, capsys):
    """Without a GPU each call runs once (its shape printed); times need a device."""
    program("selection_skip_probe").main(["--rows", "2", "--m", "16"])
    out = capsys.readouterr().out
    for name in ("whole", "window", "empty"):
        assert f"rows=2 {name}: (2, 16) (no CUDA device: not timed)" in out, out


def test_top_p_probe_on_cpu(program, monkeypatch, capsys):
    """Without a GPU each draw runs once on tiny rows; its tokens are printed. ``--set``
    changes a constant of triton_sampling, and refuses a name it does not have."""
    from deepselect import triton_sampling

    monkeypatch.setattr(triton_sampling, "PART_ROUNDS", triton_sampling.PART_ROUNDS)
    program("top_p_probe").main(["--rows", "2", "--tag", "t", "--set", "PART_ROUNDS=1"])
    out = capsys.readouterr().out
    assert "t rows=2 V=600: ran once (no CUDA device: not timed)" in out, out
    assert "t rows=2 V=600 tokens: {'top_p': [" in out, out
    assert triton_sampling.PART_ROUNDS == 1
    with pytest.raises(SystemExit):
        program("top_p_probe").main(["--set", "NO_SUCH=1"])
    assert "no int constant 'NO_SUCH'" in capsys.readouterr().err


def test_top_p_rejection_draws_the_kept_mass(program, capsys):
    """The rejection draw's definition: every draw in the kept set and its counts
    within a chi-square bound of ``w / W_S`` (a wrong pool or a check that keeps the
    cut's bin whole fails it); the reads table on small rows."""
    mod = program("top_p_rejection")
    mod.check(800)
    out = capsys.readouterr().out
    assert out.count("chi-square") == 4, out
    mod.table(v=5000, rows=1, draws=5)
    assert "| 8 | 0.99 |" in capsys.readouterr().out
