"""The benchmark harness itself: case lists, metrics, exactness judge, timer, outputs.

Nothing here asserts on speed; timings are only checked for shape and plumbing.
"""

from __future__ import annotations

import csv
import datetime
import math

import pytest
import torch

import deepselect
from deepselect import bench, distributions, runinfo, topk_rows
from deepselect.bench.plotting import plot_results
from deepselect.cli import build_parser
from deepselect.cli import main as cli_main
from deepselect.options import Order, TopkOptions
from deepselect.oracle import oracle_topk

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# ------------------------------------------------------------------ case lists


def test_published_case_list():
    cases = bench.case_list("all", device="cuda")
    indexer = [c for c in cases if c.scenario == "indexer"]
    sampler = [c for c in cases if c.scenario == "sampler"]
    assert {(c.batch, c.n, c.k) for c in indexer} == {
        (b, n, k)
        for b in (6, 256, 512, 768, 4096)
        for n in (256, 1024, 4096, 16384, 65536, 131072, 262144, 524288, 1048576)
        for k in (512, 1024)
    }
    assert len(indexer) == 5 * 9 * 2
    assert all(c.dtype == torch.bfloat16 and c.order == "none" for c in indexer)
    assert [c.batch for c in sampler] == [6, 256, 512, 768, 4096]
    assert all(
        (c.n, c.k, c.dtype, c.order) == (129_280, 512, torch.float32, "value") for c in sampler
    )


def test_case_list_overrides_and_scenarios():
    cases = bench.case_list("indexer", batches=[3], ns=[1000, 2000], ks=[7], dtype=torch.float16)
    assert [(c.batch, c.n, c.k, c.dtype) for c in cases] == [
        (3, 1000, 7, torch.float16),
        (3, 2000, 7, torch.float16),
    ]
    assert {c.scenario for c in bench.case_list("sampler")} == {"sampler"}
    quick = bench.case_list("all", quick=True)
    assert 0 < len(quick) < len(bench.case_list("all"))


def test_cpu_case_list_is_small():
    # about a minute even for the sorting fallback: bound the elements per call
    for quick in (False, True):
        cases = bench.case_list("all", device="cpu", quick=quick)
        assert cases
        assert sum(c.batch * c.n for c in cases) <= 64 * 2**20


def test_scenario_names_and_fixed_shape_scenarios():
    assert bench.scenario_list("all") == ["indexer", "sampler"]
    assert bench.scenario_list("kernel, all,kernel") == ["kernel", "indexer", "sampler"]
    with pytest.raises(ValueError, match="scenario must be 'all' or among"):
        bench.scenario_list("indexer,decoder")
    with pytest.raises(ValueError, match="at least one"):
        bench.scenario_list(",")
    kernel = bench.case_list("kernel")
    assert [(c.dtype_name, c.batch, c.n, c.k, c.order) for c in kernel] == list(bench.KERNEL_CASES)
    assert len(bench.case_list("kernel", quick=True)) == 5
    short = bench.case_list("short")
    assert [(c.batch, c.n) for c in short][:2] == [(1, 1 << 20), (6, 1 << 20)]
    assert {c.scenario for c in bench.case_list("short,read")} == {"short", "read"}
    # overrides replace their field in every fixed shape; the reads take no k
    one = bench.case_list("kernel,read", batches=[3], ns=[2048], ks=[16])
    assert {(c.scenario, c.batch, c.n, c.k) for c in one} == {
        ("kernel", 3, 2048, 16),
        ("read", 3, 2048, 1),
    }
    assert {c.dtype for c in one} == {torch.bfloat16, torch.float32}
    for name in ("kernel", "short", "read"):  # the CPU's lists stay small
        cases = bench.case_list(name, device="cpu")
        assert cases and all(c.batch * c.n <= 32 << 20 for c in cases)


def test_run_read_case_times_every_plain_read():
    case = bench.Case("read", torch.bfloat16, 2, 4096, 1, "none")
    config = bench.BenchConfig(device="cpu", repeats=2, warmup=1, cold_factor=0)
    row = bench.run_read_case(case, "normal", config)
    assert row["status"] == "ok" and row["bytes"] == 2 * 4096 * 2
    timed = [m for m in bench.READ_METHODS if f"{m}_us" in row]
    assert timed == ["amax", "amax-bits", "sum", "copy"]  # no Triton read on the CPU
    assert row["read_us"] == min(row[f"{m}_us"] for m in timed if m != "copy")
    # the copy's bandwidth counts its writes too
    assert row["copy_tbps"] == pytest.approx(bench.tbps(2 * row["bytes"], row["copy_us"] / 1e6))
    small = bench.BenchConfig(device="cpu", max_bytes=1000)
    assert bench.run_read_case(case, "normal", small)["status"].startswith("skipped")
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(bench.render_read_table([row], unit="GB/s"))
    text = console.export_text()
    assert "fastest read" in text and "copy GB/s" in text and "triton" not in text


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(scenario="decoder"), "scenario must be"),
        (dict(device="tpu"), "device must be"),
        (dict(batches=[0]), "batches must be"),
        (dict(ks=[]), "ks must be"),
    ],
)
def test_case_list_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bench.case_list(**kwargs)


def test_parse_and_format_size():
    assert bench.parse_size("16k") == 16 * 1024
    assert bench.parse_size("1M") == 1 << 20
    assert bench.parse_size(" 129280 ") == 129280
    for n in (256, 1024, 131072, 1 << 20, 129280, 1000):
        assert bench.parse_size(bench.format_size(n)) == n
    for bad in ("", "1.5M", "K", "0", "-3"):
        with pytest.raises(ValueError, match="sizes must"):
            bench.parse_size(bad)


# --------------------------------------------------------------------- metrics


def test_effective_bytes_counts_input_and_outputs():
    # bf16 input 4 x 1000, k = 10: 8000 input bytes + 40 * (2 value + 4 index) bytes
    assert bench.effective_bytes(4, 1000, 10, torch.bfloat16) == 8000 + 240
    # fp32, int64 indices, no values, 300 valid elements in all
    assert (
        bench.effective_bytes(4, 1000, 10, torch.float32, valid=300, index_bytes=8, values=False)
        == 1200 + 320
    )


def test_tbps_speedup_percent_from_known_times():
    assert bench.tbps(3e12, 1.5) == pytest.approx(2.0)
    assert bench.tbps(5e9, 1e-3) == pytest.approx(5.0)
    assert bench.tbps(1.0, None) is None and bench.tbps(1.0, 0.0) is None
    assert bench.speedup(35.0e-3, 2.5e-3) == pytest.approx(14.0)
    assert bench.speedup(None, 1.0) is None and bench.speedup(1.0, 0.0) is None
    assert bench.percent(3.0, 4.0) == pytest.approx(75.0)
    assert bench.percent(1.0, None) is None


def test_fill_metrics_from_known_times():
    # 4096 x 1M bf16, k = 512: bytes by hand, times in µs
    nbytes = 4096 * 2**20 * 2 + 4096 * 512 * 6
    row = {"bytes": nbytes, "deepselect_us": 2000.0, "torch_us": 35000.0, "read_us": 1900.0}
    row["lib_us"] = 4000.0
    bench.fill_metrics(row, input_bytes=4096 * 2**20 * 2, extra_names=["lib"])
    assert row["speedup"] == pytest.approx(17.5)
    assert row["deepselect_tbps"] == pytest.approx(nbytes / 2e-3 / 1e12)
    assert row["torch_tbps"] == pytest.approx(nbytes / 35e-3 / 1e12)
    assert row["read_tbps"] == pytest.approx(4096 * 2**20 * 2 / 1.9e-3 / 1e12)
    assert row["lib_tbps"] == pytest.approx(nbytes / 4e-3 / 1e12)
    assert row["pct_of_read"] == pytest.approx(100 * row["deepselect_tbps"] / row["read_tbps"])
    assert row["spread"] is None  # no extremes in the row: no spread
    empty = bench.fill_metrics({"bytes": 10, "torch_us": 1.0}, input_bytes=8)
    assert empty["speedup"] is None and empty["deepselect_tbps"] is None


def test_spread_is_the_larger_max_over_min():
    row = {"bytes": 10, "deepselect_us": 2.0, "deepselect_min_us": 1.0, "deepselect_max_us": 3.0,
           "torch_us": 5.0, "torch_min_us": 4.0, "torch_max_us": 6.0}  # fmt: skip
    assert bench.fill_metrics(row, input_bytes=8)["spread"] == pytest.approx(3.0)
    row.update(torch_min_us=1.0, torch_max_us=5.0)
    assert bench.fill_metrics(row, input_bytes=8)["spread"] == pytest.approx(5.0)


def test_bandwidth_unit_fits_the_device():
    assert bench.bandwidth_unit("cpu") == ("GB/s", 1000.0)
    assert bench.bandwidth_unit("cuda") == ("TB/s", 1.0)
    assert bench.bandwidth_unit("cuda:1") == ("TB/s", 1.0)


# ------------------------------------------------------------------- exactness


def _case(rows=5, n=300, k=20, dtype=torch.float32, kind="distinct32", seed=1):
    x = distributions.make(kind, rows, n, dtype, seed=seed)
    return x, torch.topk(x, min(k, n), dim=1, sorted=True).values


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_check_exact_accepts_the_oracle_in_any_order(dtype):
    x, want = _case(dtype=dtype)
    v, i = oracle_topk(x, 20, TopkOptions(order=Order.VALUE))
    assert bench.check_exact(x, v, i, want, 20, ordered=True) == bench.EXACT
    perm = torch.randperm(20)
    assert bench.check_exact(x, v[:, perm], i[:, perm], want, 20, ordered=False) == bench.EXACT
    assert bench.check_exact(x, None, i[:, perm], want, 20, ordered=False) == bench.EXACT


def test_check_exact_accepts_other_tied_indices():
    # every value appears at least twice: ties may pick any copy
    x = torch.tensor([[5.0, 5.0, 1.0, 3.0, 3.0, 0.0]])
    want = torch.topk(x, 3).values
    assert bench.check_exact(x, None, torch.tensor([[1, 0, 4]]), want, 3, ordered=True) == "exact"


def test_check_exact_flags_wrong_results():
    x, want = _case()
    v, i = oracle_topk(x, 20, TopkOptions(order=Order.VALUE))
    # a non-top element swapped in (row 2's minimum is far below its top 20)
    j = i.clone()
    j[2, 5] = int(x[2].argmin())
    assert bench.check_exact(x, None, j, want, 20, ordered=False).startswith("inexact")
    assert "rows 2" in bench.check_exact(x, None, j, want, 20, ordered=False)
    # right indices, a value that is not x[row, index]
    w = v.clone()
    w[1, 0] = w[1, 0] + 1
    assert "not x[row, index]" in bench.check_exact(x, w, i, want, 20, ordered=True)
    # the same index twice
    j = i.clone()
    j[0, 1] = j[0, 0]
    assert "repeated" in bench.check_exact(x, None, j, want, 20, ordered=False)
    # out of range
    j = i.clone()
    j[3, 3] = 300
    assert "out of range" in bench.check_exact(x, None, j, want, 20, ordered=False)
    # right set, wrong order, when sorted output was asked for
    rev = torch.arange(19, -1, -1)
    distinct = (want[:, 0] != want[:, -1]).all()
    assert distinct
    assert bench.check_exact(x, v[:, rev], i[:, rev], want, 20, ordered=True) != bench.EXACT
    # too few columns
    assert "shape" in bench.check_exact(x, None, i[:, :5], want, 20, ordered=False)


def test_check_exact_short_rows_and_fills():
    x, want = _case(n=12, k=20)
    v, i = oracle_topk(x, 20, TopkOptions())
    assert bench.check_exact(x, v, i, want, 20, ordered=False, fill_index=-1) == bench.EXACT
    i2 = i.clone()
    i2[0, 15] = 3
    assert "fill" in bench.check_exact(x, v, i2, want, 20, ordered=False, fill_index=-1)


def test_check_against_oracle_demands_lowest_tied_index():
    x = torch.tensor([[5.0, 5.0, 1.0, 3.0, 3.0, 0.0]] * 3)
    v, i = oracle_topk(x, 3, TopkOptions())
    assert bench.check_against_oracle(x, v, i, 3, "none") == bench.EXACT
    assert bench.check_against_oracle(x, v[:, [2, 0, 1]], i[:, [2, 0, 1]], 3, "none") == bench.EXACT
    tied = torch.tensor([[0, 1, 4]] * 3, dtype=i.dtype)  # 4 is a tie that should lose to 3
    assert bench.check_exact(x, None, tied, torch.topk(x, 3).values, 3, ordered=False) == "exact"
    assert bench.check_against_oracle(x, None, tied, 3, "none").startswith("inexact")
    # sorted output: position matters
    vs, is_ = oracle_topk(x, 3, TopkOptions(order=Order.VALUE))
    assert bench.check_against_oracle(x, vs, is_, 3, "value") == bench.EXACT
    assert bench.check_against_oracle(x, vs, is_[:, [1, 0, 2]], 3, "value") != bench.EXACT


def test_check_against_oracle_takes_the_calls_options():
    """With the call's TopkOptions: windows (per-row tensors, taken for the compared
    rows), the smallest, fills where a window is short."""
    x = torch.tensor([[5.0, 4.0, 1.0, 3.0, 2.0, 0.0]] * 4)
    opt = TopkOptions(
        largest=False,
        order=Order.VALUE,
        begin=torch.tensor([0, 1, 2, 4]),
        end=torch.tensor([6, 5, 4, 5]),
    )
    v, i = oracle_topk(x, 3, opt)
    assert bench.check_against_oracle(x, v, i, 3, opt, max_rows=2) == bench.EXACT
    assert bench.check_against_oracle(x, v, i, 3, opt) == bench.EXACT
    # the same outputs judged without the window: they are not the rows' top-3
    assert bench.check_against_oracle(x, v, i, 3, "value").startswith("inexact")
    wrong = i.clone()
    wrong[3, 1] = 0  # the fill of the one-element window replaced by an index
    assert bench.check_against_oracle(x, v, wrong, 3, opt).startswith("inexact")


# ---------------------------------------------------------------------- timing


def test_time_fn_rotates_inputs_and_reports_median():
    inputs = [torch.full((2, 3), float(j)) for j in range(4)]
    seen: list[float] = []
    t = bench.time_fn(lambda x: seen.append(float(x[0, 0])), inputs, "cpu", repeats=6, warmup=2)
    assert seen == [0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0]
    assert len(t.samples) == 6
    assert t.median_s == sorted(t.samples)[2] or t.median_s == pytest.approx(
        (sorted(t.samples)[2] + sorted(t.samples)[3]) / 2
    )
    assert all(s >= 0 for s in t.samples)


def test_time_fn_max_seconds_and_bad_input():
    import time

    t = bench.time_fn(
        lambda x: time.sleep(0.02), [torch.ones(1)], "cpu", repeats=50, warmup=0, max_seconds=0.05
    )
    assert 1 <= len(t.samples) < 50
    with pytest.raises(ValueError, match="graph=True needs a CUDA"):
        bench.time_fn(lambda x: x, [torch.ones(1)], "cpu", graph=True)
    with pytest.raises(ValueError, match="inputs"):
        bench.time_fn(lambda x: x, [], "cpu")
    with pytest.raises(ValueError, match="repeats"):
        bench.time_fn(lambda x: x, [torch.ones(1)], "cpu", repeats=0)


def test_time_fns_interleaves_rounds_in_a_rotated_order():
    import time

    inputs = [torch.full((1,), float(j)) for j in range(3)]
    seen: list[tuple[str, float]] = []
    fns = {n: (lambda x, n=n: seen.append((n, float(x[0])))) for n in "abc"}
    fns["slow"] = lambda x: time.sleep(0.01)
    t = bench.time_fns(fns, inputs, "cpu", repeats=4, warmup=1)
    assert sorted(t) == ["a", "b", "c", "slow"]
    assert all(len(v.samples) == 4 for v in t.values())
    assert seen[:3] == [("a", 0.0), ("b", 0.0), ("c", 0.0)]  # warm-up: every call once
    rounds = [seen[3 + 3 * r : 6 + 3 * r] for r in range(4)]
    # round r: every call on input (1 + r) mod 3, starting one name later each round
    assert [[x for _, x in rnd] for rnd in rounds] == [[1.0] * 3, [2.0] * 3, [0.0] * 3, [1.0] * 3]
    assert [rnd[0][0] for rnd in rounds] == ["a", "b", "c", "a"]  # "slow" first in round 3
    assert [rnd[-1][0] for rnd in rounds] == ["c", "a", "b", "c"]
    assert t["slow"].median_s >= 0.01 > t["a"].median_s
    with pytest.raises(ValueError, match="at least one"):
        bench.time_fns({}, inputs, "cpu")


def test_time_fns_flushes_before_every_timed_call():
    """``flush``: called once before each timed call, none before the warm-up's; off
    by default on the CPU."""
    log: list[str] = []
    fns = {n: (lambda x, n=n: log.append(n)) for n in "ab"}
    bench.time_fns(fns, [torch.ones(1)], "cpu", repeats=3, warmup=2, flush=lambda: log.append("F"))
    assert log[:4] == ["a", "b", "a", "b"]  # the warm-up
    assert log[4:] == ["F", "a", "F", "b", "F", "b", "F", "a", "F", "a", "F", "b"]
    log.clear()
    bench.time_fns(fns, [torch.ones(1)], "cpu", repeats=2, warmup=0)
    assert "F" not in log and len(log) == 4


def test_triton_read_kernel_reads_everything():
    # the read ceiling's kernel must really read every element (its max is x's max)
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # interpreter without a GPU
    x = torch.randn(3, 40_000, device=dev).to(torch.bfloat16)
    x[2, 39_999] = 1000.0  # the very last element holds the maximum
    assert float(bench.triton_read(x).max()) == 1000.0
    assert [name for name, _ in bench.read_kernels("cpu")] == ["amax", "amax-bits"]
    bits = dict(bench.read_kernels("cpu"))["amax-bits"]
    assert torch.equal(bits(x.cpu()), x.cpu().view(torch.int16).amax(dim=1))
    with pytest.raises(ValueError, match="contiguous"):
        bench.triton_read(x.t())


# ---------------------------------------------------------------------- inputs


@pytest.mark.parametrize("kind", distributions.BENCH_KINDS)
def test_draw_bench_kinds(kind):
    x = bench.draw(kind, 3, 500, torch.bfloat16, "cpu", seed=3)
    assert x.shape == (3, 500) and x.dtype == torch.bfloat16
    assert bool(torch.isfinite(x).all())
    assert not bool((x == 0).all())
    assert torch.equal(x, bench.draw(kind, 3, 500, torch.bfloat16, "cpu", seed=3))
    if kind == "distinct32":
        assert x.float().unique().numel() <= 32
    if kind == "shifted":
        assert float(x.float().mean()) == pytest.approx(100.0, abs=1.0)
    if kind == "tiny":
        assert float(x.float().abs().max()) < 1e-6
    if kind == "ascending":
        assert bool((x.float().diff(dim=1) >= 0).all())


def test_draw_other_kinds_and_bad_kind():
    x = bench.draw("nan_hotspots", 2, 200, torch.float32, "cpu")
    assert bool(torch.isnan(x).any())
    with pytest.raises(ValueError, match="dist must be one of"):
        bench.draw("gaussianish", 2, 10, torch.float32, "cpu")


def test_input_copies_exceed_the_cache():
    case = bench.Case("indexer", torch.bfloat16, 4, 1000, 16, "none")  # 8000 bytes a copy
    copies = bench.input_copies(case, "normal", "cpu", cold_bytes=50_000)
    assert len(copies) == 7  # ceil(50000 / 8000)
    assert all(c.shape == (4, 1000) and c.is_contiguous() for c in copies)
    assert not torch.equal(copies[0], copies[1])
    assert len(bench.input_copies(case, "normal", "cpu", cold_bytes=0)) == 1


# --------------------------------------------------------------- runner, output


def _config(**kw):
    base = dict(device="cpu", repeats=2, warmup=0, max_bytes=1 << 30, cold_factor=0.0)
    base.update(kw)
    return bench.BenchConfig(**base)


def _oracle_library():
    # the harness is under test, not a backend: judge the oracle, fast to start everywhere
    def call(x, k, ordered):
        return topk_rows(x, k, order="value" if ordered else "none", backend="oracle")

    return bench.Library("deepselect", call, fill_index=-1)


def _wrong_library():
    def call(x, k, ordered):  # the first k columns: right shape, wrong answer
        idx = torch.arange(k).expand(x.shape[0], k).contiguous()
        return x[:, :k].clone(), idx

    return bench.Library("firstk", call)


def _broken_library():
    def call(x, k, ordered):
        raise NotImplementedError("no such shape")

    return bench.Library("broken", call)


def test_run_case_checks_every_library_and_survives_failures():
    case = bench.Case("indexer", torch.float32, 3, 2000, 16, "none")
    extras = [_wrong_library(), _broken_library()]
    row = bench.run_case(case, "normal", _config(), _oracle_library(), extras)
    assert row["status"] == "ok"
    assert row["deepselect_status"] == bench.EXACT
    assert row["firstk_status"].startswith("inexact")
    assert row["broken_status"].startswith("unsupported")
    assert "broken_us" not in row
    for col in ("deepselect_us", "torch_us", "read_us", "firstk_us"):
        assert row[col] > 0
    assert row["bytes"] == bench.effective_bytes(3, 2000, 16, torch.float32)
    assert row["speedup"] == pytest.approx(row["torch_us"] / row["deepselect_us"])
    for col in ("deepselect", "torch"):
        assert 0 < row[f"{col}_min_us"] <= row[f"{col}_us"] <= row[f"{col}_max_us"]
    assert row["spread"] == pytest.approx(
        max(row[f"{c}_max_us"] / row[f"{c}_min_us"] for c in ("deepselect", "torch"))
    )


def test_run_case_without_deepselect_backend_and_over_budget():
    case = bench.Case("sampler", torch.float32, 2, 1000, 8, "value")
    row = bench.run_case(case, "normal", _config(), None)
    assert row["deepselect_status"] == "n/a" and row["torch_us"] > 0
    assert row["speedup"] is None
    skipped = bench.run_case(case, "normal", _config(max_bytes=100), None)
    assert skipped["status"].startswith("skipped") and "torch_us" not in skipped


def test_csv_table_and_plot_from_rows(tmp_path):
    cases = bench.case_list("all", device="cpu", batches=[2, 3], ns=[300, 600], ks=[8])
    rows = [bench.run_case(c, "normal", _config(), _oracle_library()) for c in cases]
    rows.append(
        bench.run_case(
            bench.Case("indexer", torch.bfloat16, 2, 10**6, 8, "none"),
            "normal",
            _config(max_bytes=1000),
            None,
        )
    )
    info = runinfo.run_info("cpu")
    path = bench.write_csv(rows, tmp_path / "out" / "r.csv", ["lib"], info)
    with path.open() as f:
        reader = csv.DictReader(f)
        got = list(reader)
        assert reader.fieldnames == list(bench.BASE_COLUMNS) + ["lib_us", "lib_tbps", "lib_status"]
    assert set(runinfo.FIELDS) <= set(bench.BASE_COLUMNS)
    assert all(r[f] == str(info[f]) for r in got for f in runinfo.FIELDS)
    assert len(got) == len(rows)
    assert {r["scenario"] for r in got} == {"indexer", "sampler"}
    assert float(got[0]["speedup"]) == pytest.approx(rows[0]["speedup"], rel=1e-5)
    assert got[-1]["status"].startswith("skipped") and got[-1]["torch_us"] == ""
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(bench.render_table(rows, ["lib"]))
    text = console.export_text()
    assert "skipped" in text and "torch.topk" in text
    assert "GB/s" in text and "TB/s" not in text  # every row ran on the CPU
    assert "spread" in text
    files = plot_results(got, tmp_path / "plots")  # from the CSV's strings
    assert sorted(p.name for p in files) == [
        "indexer_bf16_k8_normal.png",
        "sampler_fp32_n300_k8_normal.png",
        "sampler_fp32_n600_k8_normal.png",
    ]
    for p in files:
        assert p.read_bytes()[:8] == PNG_MAGIC


def test_plot_ignores_rows_without_times(tmp_path):
    rows = [
        {
            "scenario": "indexer",
            "dtype": "bf16",
            "batch": 6,
            "n": 256,
            "k": 512,
            "dist": "normal",
            "status": "skipped: too big",
        }
    ]
    assert plot_results(rows, tmp_path) == []
    assert plot_results([], tmp_path) == []


def test_summary_geometric_mean():
    rows = [
        {"speedup": 2.0, "deepselect_status": "exact"},
        {"speedup": 8.0, "deepselect_status": "exact"},
        {"speedup": 100.0, "deepselect_status": "inexact: wrong values in rows 0"},
    ]
    line = bench.summary(rows)
    assert f"{math.sqrt(16):.2f}×" in line and "over 2 cases" in line and "NOT exact" in line


def _table_text(rows, **kw) -> str:
    from rich.console import Console

    console = Console(width=250, record=True)
    console.print(bench.render_table(rows, **kw))
    return console.export_text()


def _timed_row(**kw):
    row = {"scenario": "indexer", "dist": "normal", "dtype": "bf16", "batch": 6, "n": 16384,
           "k": 512, "device": "cpu", "status": "ok", "deepselect_status": "exact",
           "deepselect_us": 100.0, "torch_us": 300.0, "speedup": 3.0,
           "deepselect_tbps": 2e-3, "pct_of_read": 60.0, "spread": 1.2}  # fmt: skip
    row.update(kw)
    return row


def test_table_units_marks_and_notes():
    calm = _timed_row()
    text = _table_text([calm])
    assert "GB/s" in text and " 2 " in text  # 2e-3 TB/s shown as 2 GB/s
    assert "60%" in text and "1.20×" in text and "†" not in text and "!" not in text
    assert bench.notes([calm]) == []
    on_gpu = _table_text([_timed_row(device="cuda")])
    assert "TB/s" in on_gpu and "0.002" in on_gpu and "GB/s" not in on_gpu
    # above the plain read: the share is marked and the note explains the mark
    over = _timed_row(pct_of_read=135.0)
    assert "135%†" in _table_text([over])
    assert bench.notes([over]) == [bench.OVER_READ_NOTE]
    assert bench.OVER_READ_NOTE.startswith("†")
    # an unsteady measurement is marked and warned about, with the threshold named
    noisy = _timed_row(spread=bench.SPREAD_WARN * 2)
    assert "3.00×!" in _table_text([noisy])
    (warning,) = bench.notes([calm, noisy])
    assert warning.startswith("warning: in 1 case ") and f"{bench.SPREAD_WARN}x" in warning
    at_limit = _timed_row(spread=bench.SPREAD_WARN)
    assert bench.notes([at_limit]) == []


# ------------------------------------------------------------------------ CLI


@pytest.fixture
def small_cache(monkeypatch):
    """A 1 MiB cache for the command's runs: the input copies that defeat it stay a few
    MiB, where this machine's last-level cache (480 MiB on some CI hosts) would have
    each case draw and rotate gigabytes; the rotation itself is tested above."""
    from deepselect.bench import cli, run

    for module in (cli, run):
        monkeypatch.setattr(module, "cache_bytes", lambda device: 1 << 20)


def test_cli_smoke_custom_shape_on_cpu(tmp_path, capsys, small_cache):
    csv_path = tmp_path / "bench.csv"
    rc = cli_main(
        [
            "bench",
            "--device", "cpu",
            "--batch", "3",
            "--n", "2K",
            "--k", "16",
            "--dist", "normal,distinct32",
            "--repeats", "2",
            "--csv", str(csv_path),
            "--plot", str(tmp_path / "plots"),
        ]
    )  # fmt: skip
    assert rc == 0
    out = capsys.readouterr().out
    assert "deepselect bench" in out and "torch.topk" in out
    with csv_path.open() as f:
        got = list(csv.DictReader(f))
    assert {(r["scenario"], r["dist"], r["n"], r["k"]) for r in got} == {
        (s, d, "2048", "16") for s in ("indexer", "sampler") for d in ("normal", "distinct32")
    }
    assert all(r["deepselect_status"] == "exact" and r["status"] == "ok" for r in got)
    for r in got:  # what the run ran on, in every row
        assert r["deepselect_version"] == deepselect.__version__
        assert r["torch_version"] == torch.__version__
        assert r["numba_version"] == runinfo.package_version("numba")
        assert r["threads"] == str(torch.get_num_threads()) and r["device_name"]
        assert datetime.datetime.fromisoformat(r["date"]).tzinfo is not None
        assert float(r["deepselect_min_us"]) <= float(r["deepselect_max_us"])
    assert "GB/s" in out and "spread" in out
    pngs = list((tmp_path / "plots").glob("*.png"))
    assert len(pngs) == 4


def test_cli_read_scenario_on_cpu(tmp_path, capsys, small_cache):
    csv_path = tmp_path / "read.csv"
    argv = ["bench", "--device", "cpu", "--scenario", "read", "--batch", "2", "--n", "4K",
            "--repeats", "1", "--csv", str(csv_path)]  # fmt: skip
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert "plain reads" in out and "torch.topk" not in out  # no top-k table
    with csv_path.open() as f:
        got = list(csv.DictReader(f))
    assert [(r["scenario"], r["dtype"], r["n"]) for r in got] == [
        ("read", "bf16", "4096"),
        ("read", "fp32", "4096"),
    ]
    assert all(float(r["sum_us"]) > 0 and float(r["copy_tbps"]) > 0 for r in got)


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--device", "cpu", "--graph"], "--graph needs"),
        (["--device", "cpu", "--dist", "bogus"], "--dist must be"),
        (["--device", "cpu", "--repeats", "0"], "--repeats must be"),
        (["--device", "cpu", "--scenario", "decoder"], "--scenario must be"),
    ],
)
def test_cli_rejects_bad_options(argv, match, capsys):
    assert cli_main(["bench", *argv]) == 2
    assert match in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["lots", "1X", "1.5M", "0", ","])
def test_cli_rejects_bad_sizes_naming_the_accepted_forms(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["bench", "--n", bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --n: {bad!r} is not a list of sizes" in err
    assert "K (x1024) or M (x1024^2) suffix" in err and "'16K,1M'" in err


def test_cli_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"deepselect {deepselect.__version__} (torch {torch.__version__}, ")


def _subparsers(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def test_cli_help_shows_defaults_and_every_subcommand_has_a_description(capsys):
    with pytest.raises(SystemExit):
        cli_main(["bench", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: normal)" in out and "(default: all)" in out and "(default: 0)" in out
    assert "(default: None)" not in out and "(default: False)" not in out
    seen = []
    stack = list(_subparsers(build_parser()))
    while stack:
        name, parser = stack.pop()
        seen.append(name)
        assert parser.description, f"{name} has no description"
        stack += _subparsers(parser)
    assert sorted(seen) == ["bench", "block-order", "bounds", "experiment", "proof"]
    with pytest.raises(SystemExit):
        cli_main(["experiment", "proof", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: 100)" in out and "block orders per input" in out


def test_cli_names_the_extra_of_a_missing_dependency(monkeypatch, capsys):
    def needs_rich(args):
        raise ModuleNotFoundError("No module named 'rich'", name="rich")

    monkeypatch.setattr(bench.cli, "main", needs_rich)
    assert cli_main(["bench", "--device", "cpu"]) == 2
    assert "pip install 'deepselect[bench]'" in capsys.readouterr().err

    def needs_other(args):
        raise ModuleNotFoundError("No module named 'nope'", name="nope")

    monkeypatch.setattr(bench.cli, "main", needs_other)
    with pytest.raises(ModuleNotFoundError):  # not an extra of ours: raised as it is
        cli_main(["bench", "--device", "cpu"])


def test_library_discovery_on_cpu():
    problem, _ = bench.backend_problem("cpu")
    assert problem is None  # topk_rows always runs on the CPU (backend or fallback)
    assert bench.extra_libraries("cpu") == []
    lib = bench.deepselect_library()
    x = distributions.make("distinct32", 4, 300, torch.float32, seed=5)
    v, i = lib.call(x, 10, True)
    want = torch.topk(x, 10, dim=1).values
    assert i.dtype == torch.int32
    assert bench.check_exact(x, v, i, want, 10, ordered=True) == bench.EXACT
