"""``deepselect bench --scenario sampling-ops`` on the CPU: the grid it would run on a
GPU, and a tiny run end to end (table, CSV, plots; FlashInfer's columns empty)."""

from __future__ import annotations

import argparse
import csv

from deepselect.bench import sampling_ops
from deepselect.cli import main as cli_main


def _args(**kw) -> argparse.Namespace:
    base = dict(batch=None, n=None, k=None, quick=False)
    base.update(kw)
    return argparse.Namespace(**base)


def test_gpu_grid_and_quick_subset():
    full = sampling_ops.grid(_args(), "cuda")
    top_p_only = [c for c in full if c[0] == sampling_ops.TOP_P_ONLY]
    assert len(sampling_ops.OPS) == 7 and len(top_p_only) == 5 * 2  # k = 0, once a shape
    assert {(c[3], c[4]) for c in top_p_only} == {(0, False)}
    assert len(full) == (len(sampling_ops.OPS) - 1) * 5 * 2 * 3 * 2 + len(top_p_only)
    assert {c[0] for c in full} == set(sampling_ops.OPS)
    assert {c[1] for c in full} == {1, 64, 256, 1024, 4096}
    assert {c[2] for c in full} == {129280, 152064} and {c[3] for c in full} == {0, 50, 512, 1024}
    quick = sampling_ops.grid(_args(quick=True), "cuda")
    assert set(quick) < set(full) and {c[4] for c in quick} == {False, True}
    narrowed = sampling_ops.grid(_args(batch=[8], n=[100], k=[10, 200]), "cuda")
    assert {(c[1], c[2], c[3]) for c in narrowed} == {(8, 100, 10), (8, 100, 0)}  # k < V only


def test_cli_runs_the_grid_on_the_cpu(tmp_path, capsys):
    path = tmp_path / "ops.csv"
    argv = ["bench", "--scenario", "sampling-ops", "--device", "cpu", "--batch", "1,3",
            "--n", "300", "--k", "20", "--repeats", "1", "--csv", str(path),
            "--plot", str(tmp_path / "plots")]  # fmt: skip
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert "top_k_sampling_from_probs" in out and "FlashInfer: not available" in out
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == (len(sampling_ops.OPS) - 1) * 2 * 2 + 2
    ops = [op for op in sampling_ops.OPS if op != sampling_ops.TOP_P_ONLY]
    assert {(r["op"], r["batch"], r["k_kind"]) for r in rows} == {
        (op, b, kind) for op in ops for b in ("1", "3") for kind in ("int", "per-row")
    } | {(sampling_ops.TOP_P_ONLY, b, "int") for b in ("1", "3")}
    for r in rows:
        assert r["status"] == "ok" and float(r["ds_eager_us"]) > 0 and float(r["rw_us"]) > 0
        assert r["fi_eager_us"] == r["ds_graph_us"] == r["fi_over_ds_eager"] == ""
        assert r["torch_version"]
    assert len(list((tmp_path / "plots").glob("*.png"))) == len(sampling_ops.OPS)
