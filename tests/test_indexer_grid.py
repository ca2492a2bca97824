"""``deepselect bench --scenario indexer-grid`` on the CPU: its cells, its verdicts on
made-up timings, a cell checked and timed with a stand-in for FlashInfer, and the
command end to end on tiny shapes with its CSV. Nothing here asserts on speed."""

from __future__ import annotations

import csv

import pytest
import torch

from deepselect import distributions
from deepselect.bench import indexer_grid as grid
from deepselect.bench import run
from deepselect.bench.run import BenchConfig
from deepselect.cli import main as cli_main

# ------------------------------------------------------------------------- cells


def test_full_grid_holds_every_shape_and_two_windows_per_dtype_and_k():
    cells = grid.grid_cells("cuda")
    whole = [c for c in cells if c.window == "none"]
    assert {(c.dtype, c.n, c.batch, c.k) for c in whole} == {
        (grid.DTYPES[d], n, b, k)
        for d in ("fp32", "bf16")
        for n in (8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 1 << 20)
        for b in (1, 8, 64, 512, 4096)
        for k in (512, 2048)
    }
    windows = [(c.dtype, c.k, c.window, c.batch) for c in cells if c.window != "none"]
    assert len(windows) == len(set(windows)) == 8
    assert {(w, b) for _, _, w, b in windows} == {("prefill", 4096), ("decode", 64)}


def test_quick_grid_and_overrides():
    quick = grid.grid_cells("cuda", quick=True)
    assert {c.k for c in quick} == {2048}
    assert {c.batch for c in quick if c.window == "none"} == {8, 64, 512, 4096}
    assert {c.n for c in quick if c.window == "none"} == {16 << 10, 128 << 10}
    assert [c.window for c in quick if c.window != "none"] == ["prefill"]
    one = grid.grid_cells("cpu", quick=True, dtypes=["fp32"], ns=[2048, 1024], batches=[3], ks=[5])
    assert [(c.dtype, c.batch, c.n, c.k, c.window) for c in one] == [
        (torch.float32, 3, 2048, 5, "none"),
        (torch.float32, 3, 1024, 5, "none"),
        (torch.float32, 64, 2048, 5, "prefill"),  # the window at the longest N given
    ]


def test_window_lengths():
    pre = grid.window_lengths("prefill", 4096, 8192)
    assert pre.dtype == torch.int32 and pre.shape == (4096,)
    assert int(pre[0]) == 8192 - 4095 and int(pre[-1]) == 8192
    assert bool((pre.diff() == 1).all())
    dec = grid.window_lengths("decode", 64, 1 << 20, seed=3)
    assert int(dec.min()) >= 1 << 19 and int(dec.max()) <= 1 << 20
    assert len(set(dec.tolist())) > 32  # drawn, not one length
    assert torch.equal(dec, grid.window_lengths("decode", 64, 1 << 20, seed=3))
    assert grid.window_lengths("none", 4, 10) is None
    with pytest.raises(ValueError, match="window must be"):
        grid.window_lengths("paged", 4, 10)


# ---------------------------------------------------------------------- verdicts


def _row(**kw):
    base = dict(dist="normal", batch=8, n=16 << 10, deepselect_us=10.0, fi_ratio=2.0,
                fi_tb1_ratio=3.0, status="ok", deepselect_status="exact")  # fmt: skip
    base.update(kw)
    return base


def test_judge_every_target_on_both_sides():
    assert grid.judge(_row()) == {"fi": True, "fi_tb1": True, "latency": True}
    assert grid.judge(_row(fi_ratio=1.49, fi_tb1_ratio=1.99)) == {
        "fi": False, "fi_tb1": False, "latency": True,
    }  # fmt: skip
    # latency: 12 us up to 128K, 16 us beyond; only batch <= 64
    assert grid.judge(_row(deepselect_us=12.5))["latency"] is False
    assert grid.judge(_row(deepselect_us=12.0, n=128 << 10))["latency"] is True
    assert grid.judge(_row(deepselect_us=15.9, n=1 << 20))["latency"] is True
    assert grid.judge(_row(deepselect_us=16.1, n=1 << 20))["latency"] is False
    # the graph replay is judged, the eager time only where there is none
    assert grid.judge(_row(deepselect_us=11.0, deepselect_eager_us=80.0))["latency"] is True
    assert grid.judge(_row(deepselect_us=None, deepselect_eager_us=80.0))["latency"] is False
    # bandwidth: from batch 512, no latency target there
    big = grid.judge(_row(batch=512, pct_of_read=69.9, deepselect_us=900.0))
    assert big == {"fi": True, "fi_tb1": True, "read": False}
    assert grid.judge(_row(batch=4096, pct_of_read=70.0))["read"] is True
    # no FlashInfer: nothing judged on it
    assert grid.judge(_row(fi_ratio=None, fi_tb1_ratio=""))["fi"] is None
    # adversarial rows: only their time relative to normal rows
    assert grid.judge(_row(dist="tiny", rel_normal=1.3, fi_ratio=0.1)) == {"dist": True}
    assert grid.judge(_row(dist="tiny", rel_normal=1.31)) == {"dist": False}


def test_verdict_text_names_each_missed_target():
    assert grid.verdict_text(_row()) == "ok"
    text = grid.verdict_text(_row(fi_ratio=1.2, deepselect_us=20.0))
    assert text.startswith("miss: ") and "FI 1.20x < 1.5x" in text and "20.0 us > 12 us" in text
    assert "FI-tb1" not in text
    assert grid.verdict_text(_row(deepselect_status="inexact: wrong values")) == "INEXACT"
    assert set(grid.judge(_row(deepselect_status="error: boom")).values()) == {False}
    assert grid.verdict_text(_row(fi_ratio=None, fi_tb1_ratio=None, deepselect_us=None)) == "—"


def test_summary_counts_cells_per_target_and_geometric_means():
    rows = [
        _row(fi_ratio=2.0, fi_tb1_ratio=8.0),
        _row(fi_ratio=0.5, fi_tb1_ratio=2.0, deepselect_us=30.0),
        _row(batch=4096, pct_of_read=80.0, fi_ratio=None, fi_tb1_ratio=None),
        _row(dist="shifted", rel_normal=1.5),
        _row(status="skipped: input 20 GiB > memory budget", fi_ratio=0.1),
        _row(deepselect_status="inexact: wrong values in rows 0"),
    ]
    lines = grid.grid_summary(rows)
    # the inexact cell misses every target it is judged on; the skipped one counts nowhere
    assert "≥ 1.5x FlashInfer default: 1/3 cells" in lines
    assert "≥ 2.0x FlashInfer tie_break=1: 2/3 cells" in lines
    assert "≥ 70% of the plain read (batch ≥ 512): 1/1 cells" in lines
    assert any(line.startswith("graph replay ≤ 12 us") and line.endswith(": 1/3 cells")
               for line in lines)  # fmt: skip
    assert "adversarial rows ≤ 1.3x the normal rows' time: 0/1 cells" in lines
    # geometric means over the exact cells: FlashInfer sqrt(2 * 0.5), tie_break=1 sqrt(8 * 2)
    assert "FlashInfer default / deepselect: geometric mean 1.00x over 2 cells" in " ".join(lines)
    assert "tie_break=1 / deepselect: geometric mean 4.00x over 2 cells" in " ".join(lines)
    assert "adversarial / normal rows: geometric mean 1.50x, worst 1.50x" in lines
    assert lines[-1] == "1 cells where deepselect was NOT exact"


def test_metrics_from_times():
    row = grid.fill_grid_metrics({"bytes": 3e6, "input_bytes": 2e6, "deepselect_us": 1.5,
                                  "flashinfer_us": 3.0, "flashinfer_tb1_us": 6.0,
                                  "read_us": 1.0})  # fmt: skip
    assert row["fi_ratio"] == 2.0 and row["fi_tb1_ratio"] == 4.0
    assert row["deepselect_tbps"] == pytest.approx(2.0)
    assert row["read_tbps"] == pytest.approx(2.0) and row["pct_of_read"] == pytest.approx(100.0)
    assert row["flashinfer_tb1_tbps"] == pytest.approx(0.5)
    cpu = grid.fill_grid_metrics({"bytes": 1e6, "input_bytes": 1e6, "deepselect_eager_us": 2.0})
    assert cpu["deepselect_tbps"] == pytest.approx(0.5) and cpu["fi_ratio"] is None


# ------------------------------------------------------------------- one cell


def _stand_in(wrong: bool = False) -> grid.GridLibraries:
    """FlashInfer's two modes played by torch.topk (``wrong``: the first k columns)."""

    def whole(x, k, ordered):
        if wrong:
            return x[:, :k].clone(), torch.arange(k).expand(x.shape[0], k)
        r = torch.topk(x, k, dim=1, sorted=ordered)
        return r.values, r.indices

    def ragged(x, lengths, k):
        masked = x.float().masked_fill(torch.arange(x.shape[1]) >= lengths[:, None], -1e30)
        i = torch.topk(masked, k, dim=1).indices
        return torch.where(torch.arange(k) < lengths[:, None], i, -1).to(torch.int32)

    fns = {"whole": whole, "ragged": ragged}
    return grid.GridLibraries(
        {m: fns["whole"] for m in grid.FI_COLUMNS}, {m: fns["ragged"] for m in grid.FI_COLUMNS}
    )


@pytest.fixture
def small_cache(monkeypatch):
    """A 1 MiB cache: the input copies stay small on hosts with a large one."""
    monkeypatch.setattr(run, "cache_bytes", lambda device: 1 << 20)


CONFIG = BenchConfig(device="cpu", repeats=2, warmup=0, graph=False, max_bytes=1 << 30)


@pytest.mark.parametrize("window", ["none", "prefill", "decode"])
def test_run_cell_checks_and_times_every_column(window, small_cache):
    cell = grid.Cell(torch.float32, 16, 3000, 40, window)
    row = grid.run_cell(cell, "distinct32", CONFIG, _stand_in())
    assert row["status"] == "ok"
    assert row["deepselect_status"] == row["flashinfer_status"] == "exact"
    assert row["flashinfer_tb1_status"] == "exact"
    for col in ("deepselect_eager_us", "flashinfer_us", "flashinfer_tb1_us", "read_us"):
        assert row[col] > 0
    assert row.get("deepselect_us") is None  # no graphs on a CPU
    assert row["fi_ratio"] > 0 and row["pct_of_read"] > 0
    lengths = grid.window_lengths(window, 16, 3000, CONFIG.seed)
    valid = 16 * 3000 if lengths is None else int(lengths.sum())
    out_bytes = 16 * 40 * (4 + (4 if window == "none" else 0))
    assert row["valid"] == valid and row["bytes"] == valid * 4 + out_bytes


def test_run_cell_flags_a_wrong_library_and_skips_what_does_not_fit(small_cache):
    cell = grid.Cell(torch.bfloat16, 4, 2000, 16)
    row = grid.run_cell(cell, "normal", CONFIG, _stand_in(wrong=True))
    assert row["deepselect_status"] == "exact"
    assert row["flashinfer_status"].startswith("inexact")
    small = BenchConfig(device="cpu", repeats=1, warmup=0, max_bytes=1000)
    assert grid.run_cell(cell, "normal", small, _stand_in())["status"].startswith("skipped")


def test_adversarial_kinds_draw_on_the_device_path():
    assert set(distributions.ADVERSARIAL_KINDS) <= set(distributions.KINDS)
    from deepselect.bench import draw

    x = draw("all_equal", 3, 100, torch.bfloat16, "cpu")
    assert torch.equal(x, distributions.make("all_equal", 3, 100, torch.bfloat16))


# ------------------------------------------------------------------- the command


def test_cli_grid_on_cpu_writes_its_columns(tmp_path, capsys, small_cache):
    csv_path = tmp_path / "grid.csv"
    argv = ["bench", "--scenario", "indexer-grid", "--device", "cpu", "--quick", "--batch", "2",
            "--n", "2K", "--k", "16", "--dist", "all_equal", "--repeats", "1",
            "--csv", str(csv_path), "--plot", str(tmp_path / "plots")]  # fmt: skip
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert "indexer grid" in out and "FlashInfer empty" in out and "summary" in out
    with csv_path.open() as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == grid.COLUMNS
        got = list(reader)
    cells = {(r["dtype"], r["window"], r["batch"], r["n"], r["k"]) for r in got}
    assert cells == {("fp32", "none", "2", "2048", "16"), ("bf16", "none", "2", "2048", "16"),
                     ("bf16", "prefill", "64", "2048", "16")}  # fmt: skip
    assert sorted({r["dist"] for r in got}) == ["all_equal", "normal"]
    for r in got:
        assert r["status"] == "ok" and r["deepselect_status"] == "exact"
        assert float(r["deepselect_eager_us"]) > 0 and r["deepselect_us"] == ""
        assert r["flashinfer_us"] == "" and r["verdict"]
        assert (r["rel_normal"] != "") == (r["dist"] != "normal")
    assert len(list((tmp_path / "plots").glob("indexer-grid_*.png"))) == 4


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--dist", "bogus"], "--dist must be"),
        (["--repeats", "0"], "--repeats must be"),
        (["--max-gib", "0"], "--max-gib must be"),
    ],
)
def test_cli_grid_rejects_bad_options(argv, match, capsys):
    assert cli_main(["bench", "--scenario", "indexer-grid", "--device", "cpu", *argv]) == 2
    assert match in capsys.readouterr().err


def test_grid_runs_alone():
    from deepselect.bench import case_list

    with pytest.raises(ValueError, match="runs alone"):
        case_list("indexer,indexer-grid")


def test_flashinfer_modes_forward_their_arguments(monkeypatch):
    """Both modes and the ragged transform call FlashInfer as its wheel's signature
    reads (``top_k(x, k, sorted, deterministic, tie_break)``,
    ``top_k_ragged_transform(x, offsets, lengths, k, deterministic, tie_break)``),
    played here by a stand-in module that records its calls."""
    import importlib.machinery
    import sys
    import types

    from deepselect.bench import libraries

    seen = []
    fake = types.ModuleType("flashinfer")
    fake.__spec__ = importlib.machinery.ModuleSpec("flashinfer", None)

    def top_k(x, k, sorted=False, deterministic=False, tie_break=0):
        seen.append(("top_k", k, sorted, deterministic, tie_break))
        return x[:, :k], torch.arange(k).expand(x.shape[0], k)

    def top_k_ragged_transform(x, offsets, lengths, k, deterministic=False, tie_break=0):
        seen.append(("ragged", offsets.tolist(), lengths.tolist(), k, deterministic, tie_break))
        return torch.zeros(x.shape[0], k, dtype=torch.int32)

    fake.top_k, fake.top_k_ragged_transform = top_k, top_k_ragged_transform
    monkeypatch.setitem(sys.modules, "flashinfer", fake)
    x = torch.randn(2, 10)
    for mode in grid.FI_COLUMNS:
        lib = libraries._flashinfer_library(mode)
        assert lib.name == mode
        lib.call(x, 3, False)
        grid_call = libraries.flashinfer_ragged(mode)
        grid_call(x, torch.tensor([4, 9], dtype=torch.int32), 3)
    assert seen == [
        ("top_k", 3, False, False, 0),
        ("ragged", [0, 0], [4, 9], 3, False, 0),
        ("top_k", 3, False, True, 1),
        ("ragged", [0, 0], [4, 9], 3, True, 1),
    ]
    assert libraries.flashinfer_libraries("cpu") == ([], "FlashInfer runs on CUDA devices only")
