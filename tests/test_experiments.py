"""The experiments reproduce the algorithm write-up's figures; the CLI prints them."""

import math

import pytest

from deepselect.cli import main
from deepselect.experiments import (
    b2_tradeoff_rows,
    block_order_rows,
    bounds_rows,
    cost_bound,
    experiment_input,
    format_table,
    harmonic,
    proof_rows,
    read_once_rows,
)


@pytest.fixture(scope="module")
def block_order_table():
    # the write-up's configuration: N = 262,144, k = 512, B = B2 = 1024
    return {(r.input, r.order): r for r in block_order_rows()}


def test_block_order_sequential_figures(block_order_table):
    # Figures from the write-up's block-order table; they follow from the algorithm by
    # hand: ascending rows accept every block (A = N) and compact after each block from
    # the second on (R = 256 - 1); descending rows stop accepting after two blocks.
    for kind in ("ascending", "staircase"):
        r = block_order_table[(kind, "sequential")]
        assert (r.appended, r.compactions, r.work) == (262_144, 255, 392_704)
    r = block_order_table[("descending", "sequential")]
    assert (r.appended, r.compactions, r.work) == (2_048, 1, 2_560)
    r = block_order_table[("random", "sequential")]  # ~6,599 / 5 / 9,159 in the write-up
    assert 5_000 < r.appended < 8_000 and r.compactions == 5


def test_block_order_random_band_and_correctness(block_order_table):
    assert len(block_order_table) == 8
    for (kind, order), r in block_order_table.items():
        assert r.correct, (kind, order)
        assert r.work == r.appended + 512 * r.compactions
        if order == "random":  # a mean over 16 block orders
            assert r.trials == 16
            assert 0.03 <= r.work_per_n <= 0.05, (kind, r)
            assert r.min_work <= r.work <= r.max_work < 0.1 * r.n
        else:
            assert r.trials == 1 and r.min_work == r.work == r.max_work


def test_block_order_other_shapes():
    # B not a multiple of the staircase step and N not a multiple of B: still exact
    rows = block_order_rows(n=10_001, k=37, B=100, B2=50, seed=3)
    assert all(r.correct for r in rows)
    asc = next(r for r in rows if (r.input, r.order) == ("ascending", "sequential"))
    # every block beats the ones before: A = N, and each full block of 100 >= k + B2 compacts
    assert asc.appended == 10_001 and asc.compactions == 100


def test_table2_figures():
    want = {  # N: (bound, asymptotic, k ln(N/k), bound/asym), from the write-up's Table 2
        4_096: (8_000, 5_323, 1_065, 1.50),
        65_536: (18_217, 15_970, 2_484, 1.14),
        1_048_576: (28_835, 26_617, 3_904, 1.08),
        16_777_216: (39_480, 37_264, 5_323, 1.06),
    }
    rows = bounds_rows()
    assert [r.n for r in rows] == list(want)
    for r in rows:
        b, a, kl, ratio = want[r.n]
        assert (round(r.bound), round(r.asymptotic), round(r.k_log)) == (b, a, kl)
        assert round(r.ratio, 2) == ratio


def test_bound_formula_by_hand():
    assert harmonic(0) == 0 and harmonic(4) == pytest.approx(25 / 12)
    # N = 4096, B = 1024: m = 4, L = 2560, (1 + 1/2) * 2560 * 25/12 = 8000
    assert cost_bound(4096, 512, 1024, 1024) == pytest.approx(8000)
    # m rounds up: 4097 elements make 5 blocks
    assert cost_bound(4097, 512, 1024, 1024) == pytest.approx(1.5 * 2560 * (25 / 12 + 1 / 5))


def test_b2_tradeoff_minimum_near_k():
    rows = b2_tradeoff_rows(1_048_576, 512, 1024)
    best = min(rows, key=lambda r: r.bound)
    assert best.b2 == 1024  # the optimum sqrt(k (k + B)) ~ 887 lies between 512 and 1024
    assert round(best.bound) == 28_835
    bounds = [r.bound for r in rows]
    i = bounds.index(best.bound)
    assert all(a > b for a, b in zip(bounds[:i], bounds[1 : i + 1], strict=True))
    assert all(a < b for a, b in zip(bounds[i:], bounds[i + 1 :], strict=False))


def test_read_once_against_sort_model():
    (r,) = read_once_rows((1_048_576,), 512)
    assert (r.read_once, round(r.sort_model)) == (1_048_576, 9_437_184)
    assert r.ratio == pytest.approx(9.0)


def test_proof_rows_bound_holds():
    rows = proof_rows(n=32_768, k=64, B=128, B2=128, trials=12, seed=1)
    assert {r.input for r in rows} == {
        "random",
        "ascending",
        "descending",
        "staircase",
        "few_distinct",
    }
    for r in rows:
        assert r.correct == r.trials == 12
        assert r.mean_work <= r.work_bound and r.mean_appended <= r.append_bound
        assert r.max_peak <= r.peak_limit == 64 + 128 + 128
        assert r.max_work >= r.mean_work >= r.mean_appended
        assert r.work_bound == pytest.approx((1 + 64 / 128) * (64 + 128 + 128) * harmonic(256))


def test_proof_sequential_exceeds_the_bound():
    # the bound needs a random order: sequential ascending costs W ~ 1.5 N
    (r,) = proof_rows(n=32_768, k=64, B=128, B2=128, trials=2, inputs=("ascending",),
                      block_order="sequential")  # fmt: skip
    assert r.mean_work == 32_768 + 64 * 255 > r.work_bound


def test_experiment_inputs():
    asc = experiment_input("ascending", 8)[0].tolist()
    assert asc == sorted(asc) and len(set(asc)) == 8
    stairs = experiment_input("staircase", 256)[0]
    # every block of 64 (and so of any multiple of 64) beats all earlier blocks
    assert all(stairs[j + 64 :].min() > stairs[j : j + 64].max() for j in range(0, 192, 64))
    few = experiment_input("few_distinct", 1000)[0]
    assert len(set(few.tolist())) <= 32
    rnd = experiment_input("random", 1000, seed=2)[0]
    assert 0 <= rnd.min() and rnd.max() < 1 and len(set(rnd.tolist())) > 990
    with pytest.raises(ValueError, match="kind must be one of"):
        experiment_input("zigzag", 10)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: block_order_rows(n=0), "n must be >= 1"),
        (lambda: block_order_rows(k=0), "k must be >= 1"),
        (lambda: block_order_rows(trials=0), "trials must be >= 1"),
        (lambda: block_order_rows(n=10, orders=("zigzag",)), "orders must be among"),
        (lambda: bounds_rows(B=0), "B must be >= 1"),
        (lambda: b2_tradeoff_rows(b2s=(0,)), "B2 must be >= 1"),
        (lambda: proof_rows(trials=0), "trials must be >= 1"),
        (lambda: proof_rows(n=100, trials=1, block_order="zigzag"), "block_order"),
    ],
)
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_format_table_aligns():
    text = format_table(["name", "value"], [["a", "1"], ["long", "1,000"]])
    lines = text.splitlines()
    assert len({len(line) for line in lines}) == 1
    assert lines[3].endswith("1,000") and lines[2].endswith("    1")


def test_cli_block_order(capsys):
    assert main(["experiment", "block-order", "--n", "16384", "--k", "64", "--B", "128",
                 "--B2", "128", "--trials", "3"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "W/N" in out and "correct" in out and "mean of 3 block orders" in out
    lines = [line.split() for line in out.splitlines()]
    rows = [w for w in lines if w and w[0] in ("random", "ascending", "descending", "staircase")]
    assert len(rows) == 8 and all(w[-1] == "True" for w in rows)
    asc = next(w for w in rows if w[:2] == ["ascending", "sequential"])
    assert asc[2:5] == ["16,384", "127", f"{16384 + 64 * 127:,}"]


def test_cli_bounds(capsys):
    assert main(["experiment", "bounds"]) == 0
    out = capsys.readouterr().out
    for text in ("bound/asym", "28,835", "39,480", "1.06", "<- min", "9,437,184"):
        assert text in out, text


def test_cli_proof(capsys):
    argv = ["experiment", "proof", "--n", "8192", "--k", "32", "--B", "64", "--B2", "64",
            "--trials", "3", "--no-progress", "--seed", "4"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "mean W" in out and "3/3" in out and "every input: yes" in out
    bound = (1 + 32 / 64) * (32 + 64 + 64) * harmonic(128)
    assert f"{bound:,.0f}" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["experiment"],
        ["experiment", "nonsense"],
        ["experiment", "block-order", "--k", "0"],
        ["experiment", "proof", "--trials", "-1"],
        ["experiment", "proof", "--order", "zigzag"],
    ],
)
def test_cli_rejects_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2


def test_harmonic_matches_log():
    # H_m = ln m + gamma + O(1/m)
    assert harmonic(10_000) == pytest.approx(math.log(10_000) + 0.5772156649, abs=1e-4)
