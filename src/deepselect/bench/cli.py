"""``deepselect bench``: its options and its run."""

from __future__ import annotations

import argparse
import sys

import torch

from .. import distributions, runinfo
from .cases import DTYPES, GRID_SCENARIO, case_list, format_size, parse_size, scenario_list
from .libraries import backend_problem, deepselect_library, extra_libraries
from .metrics import bandwidth_unit
from .report import notes, progress_bar, render_read_table, render_table, summary, write_csv
from .run import BenchConfig, _short, case_fields, run_case, run_read_case
from .timing import READ_METHODS, cache_bytes, measure_read_peak


def _int_list(text: str) -> list[int]:
    """An option's list of sizes; argparse prints the error's text as it is."""
    try:
        values = [parse_size(t) for t in text.replace(",", " ").split()]
    except ValueError:
        values = []
    if not values:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a list of sizes: give integers >= 1, each with an optional "
            "K (x1024) or M (x1024^2) suffix, separated by commas, e.g. '6,4096' or '16K,1M'"
        )
    return values


def register(subparsers) -> None:
    """Add ``deepselect bench`` to the CLI's subparsers."""
    p = subparsers.add_parser(
        "bench",
        help="benchmark against torch.topk on this machine",
        description=(
            "Time deepselect against torch.topk on DeepSelect's performance cases "
            "(indexer: bf16, unsorted; sampler: fp32, N=129280, k=512, sorted), checking "
            "every result for exactness first. Without a GPU, runs the CPU backend on "
            "small shapes. Prints median times, the spread of each measurement "
            "(slowest call / fastest), the speedup and the effective bandwidth (TB/s on "
            "a GPU, GB/s on a CPU)."
        ),
    )
    p.add_argument(
        "--scenario",
        default="all",
        metavar="NAMES",
        help="comma-separated: indexer (bf16, unsorted, k 512/1024, N 256..1M), sampler "
        "(fp32, N=129280, k=512, sorted by value), all (both), kernel (the streaming "
        "kernel's table: long rows, bf16 unsorted and fp32 sorted, k up to 2048), short "
        "(few rows and short rows), read (the plain reads alone: torch's amax and sum, a "
        "copy and a Triton read, the ceiling of the others); indexer-grid alone (the "
        "indexer's grid beside FlashInfer's two modes and a plain read, each cell judged "
        "against the targets; --dist all adds adversarial rows), sampling-ops alone (the "
        "engine's sampling operations against FlashInfer's and a read + write)",
    )
    p.add_argument(
        "--batch", type=_int_list, metavar="SIZES",
        help="batch sizes, e.g. '6,4096' (default: the scenario's list, e.g. "
        "6,256,512,768,4096 on a GPU, 6,32 on a CPU)",
    )  # fmt: skip
    p.add_argument(
        "--n", type=_int_list, metavar="SIZES",
        help="row lengths with an optional K/M suffix, e.g. '16K,1M' (default: the "
        "scenario's list: up to 1M for the indexer, 129280 for the sampler)",
    )  # fmt: skip
    p.add_argument(
        "--k", type=_int_list, metavar="SIZES",
        help="k values, e.g. '512,1024' (default: 512,1024 for the indexer's full run on a "
        "GPU, else 512)",
    )  # fmt: skip
    p.add_argument(
        "--dtype", choices=tuple(DTYPES),
        help="override the scenario's dtype (default: bf16 for the indexer, fp32 for the "
        "sampler)",
    )  # fmt: skip
    p.add_argument(
        "--dist",
        default="normal",
        help=f"input distribution(s), comma-separated, or 'all' = "
        f"{','.join(distributions.BENCH_KINDS)}",
    )
    p.add_argument("--quick", action="store_true", help="a short run")
    p.add_argument("--graph", action="store_true", help="time CUDA-graph replays")
    p.add_argument(
        "--csv", metavar="PATH",
        help="write the results as CSV, each row with the run's versions, device, "
        "threads, commit and date",
    )  # fmt: skip
    p.add_argument("--plot", metavar="DIR", help="write PNG bar charts into DIR")
    p.add_argument(
        "--repeats", type=int,
        help="timed calls per measurement (default: 20 on a GPU, 10 with --quick; 5 on a "
        "CPU, 3 with --quick)",
    )  # fmt: skip
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda if available, else cpu")
    p.add_argument(
        "--max-gib",
        type=float,
        help="memory budget for one input copy, GiB; larger cases are skipped "
        "(default: 30%% of the GPU's memory, 2 GiB on the CPU)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.set_defaults(func=main)


def _dists(text: str, every: tuple[str, ...] = distributions.BENCH_KINDS) -> list[str]:
    if text == "all":
        return list(every)
    kinds = [t for t in text.replace(",", " ").split() if t]
    for kind in kinds:
        if kind not in distributions.KINDS:
            raise ValueError(
                f"--dist must be 'all' or among {', '.join(distributions.KINDS)}; got {kind!r}"
            )
    return kinds


def _config(args: argparse.Namespace, device: str) -> BenchConfig:
    cpu = device == "cpu"
    if args.max_gib is not None:
        max_bytes = int(args.max_gib * 2**30)
    elif cpu:
        max_bytes = 2 << 30
    else:
        max_bytes = int(0.3 * torch.cuda.get_device_properties(0).total_memory)
    return BenchConfig(
        device=device,
        repeats=args.repeats or ((3 if args.quick else 5) if cpu else (10 if args.quick else 20)),
        # on the CPU the exactness check just before timing is the warm-up (and the
        # JIT compile); the sorting fallback is too slow to call more than needed
        warmup=0 if cpu else 3,
        graph=args.graph,
        max_bytes=max_bytes,
        # the CPU fallback may sort whole rows: bound each measurement, not the case list
        max_seconds=1.5 if cpu else None,
        seed=args.seed,
    )


def _check_options(args: argparse.Namespace, device: str) -> None:
    """ValueError naming the option at fault."""
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available")
    if args.graph and device != "cuda":
        raise ValueError("--graph needs --device cuda")
    if args.repeats is not None and args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1; got {args.repeats}")
    if args.max_gib is not None and not args.max_gib > 0:
        raise ValueError(f"--max-gib must be > 0; got {args.max_gib}")


def _cases(args: argparse.Namespace, device: str) -> tuple[list, list[str]]:
    """The run's cases and distributions; ValueError naming the option at fault."""
    _check_options(args, device)
    dists = _dists(args.dist)
    try:
        scenarios = ",".join(scenario_list(args.scenario))
    except ValueError as exc:
        raise ValueError(f"--{exc}") from None
    cases = case_list(
        scenarios,
        device=device,
        quick=args.quick,
        batches=args.batch,
        ns=args.n,
        ks=args.k,
        dtype=DTYPES[args.dtype] if args.dtype else None,
    )
    return cases, dists


def _announce(err, name: str, info: dict, config: BenchConfig, count: int) -> None:
    unit, scale = bandwidth_unit(config.device)
    dev = torch.device(config.device)
    cache = cache_bytes(dev)
    peak = measure_read_peak(dev, int(config.cold_factor * cache))
    err.print(
        f"[bold]deepselect bench[/] on {name}: cache {cache / 2**20:.0f} MiB, "
        f"read ceiling {peak * scale:.3g} {unit} (plain read of a cold buffer); "
        f"{count} cases, median of {config.repeats}"
        + (", CUDA-graph replay" if config.graph else "")
    )
    err.print(
        f"deepselect {info['deepselect_version']}"
        + (f" at {info['git_commit']}" if info["git_commit"] else "")
        + f", torch {info['torch_version']}, triton {info['triton_version'] or '-'}, "
        f"numba {info['numba_version'] or '-'}"
    )


def _run_cases(err, cases, dists, config: BenchConfig, ours, extras) -> list[dict]:
    """Every case of every distribution, behind a progress bar; a case that fails
    becomes a row saying why, and the others go on."""
    rows: list[dict] = []
    progress = progress_bar(err)
    with progress:
        task = progress.add_task("bench", total=len(cases) * len(dists))
        for dist in dists:
            for case in cases:
                progress.update(
                    task,
                    description=f"{case.scenario} {case.dtype_name} b={case.batch} "
                    f"N={format_size(case.n)} k={case.k} {dist}",
                )
                try:
                    if case.scenario == "read":
                        row = run_read_case(case, dist, config)
                    else:
                        row = run_case(case, dist, config, ours, extras)
                except Exception as exc:  # one broken case must not lose the others
                    if config.device == "cuda":
                        torch.cuda.empty_cache()
                    row = {
                        **case_fields(case, dist, config.device),
                        "status": f"error: {_short(exc)}",
                    }
                rows.append(row)
                progress.advance(task)
    return rows


def _report(out, rows: list[dict], extra_names: list[str], name: str, unit: str) -> int:
    """Print the tables, the summary and the notes; the number of inexact results."""
    topk = [r for r in rows if r["scenario"] != "read"]
    reads = [r for r in rows if r["scenario"] == "read"]
    if topk:
        out.print(render_table(topk, extra_names, title=f"deepselect bench — {name}", unit=unit))
        line = summary(topk)
        if line:
            out.print(line)
        for line in notes(topk):
            out.print(f"[yellow]{line}[/]" if line.startswith("warning") else line)
    if reads:
        out.print(render_read_table(reads, title=f"plain reads — {name}", unit=unit))
    bad = [r for r in topk if str(r.get("deepselect_status", "")).startswith("inexact")]
    for r in bad[:10]:
        out.print(
            f"[red]inexact[/] {r['scenario']} b={r['batch']} N={r['n']} k={r['k']} "
            f"{r['dist']}: {r['deepselect_status']}"
        )
    return len(bad)


def main(args: argparse.Namespace) -> int:
    """Run ``deepselect bench``; returns the exit status (1 if any result was inexact)."""
    from rich.console import Console

    if args.scenario == "sampling-ops":  # its own grid and table
        from .sampling_ops import main as sampling_ops_main

        return sampling_ops_main(args)
    # a pipe or file gets a wide table rather than rich's 80-column default
    out = Console() if sys.stdout.isatty() else Console(width=200)
    err = Console(stderr=True)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.scenario.strip() == GRID_SCENARIO:  # its own cells, columns and verdicts
        from .indexer_grid import ADVERSARIAL_KINDS
        from .indexer_grid import main as grid_main

        try:
            _check_options(args, device)
            dists = _dists(args.dist, ADVERSARIAL_KINDS)
        except ValueError as exc:
            err.print(f"[red]deepselect bench: {exc}[/]")
            return 2
        return grid_main(args, _config(args, device), dists, out, err)
    try:
        cases, dists = _cases(args, device)
    except ValueError as exc:
        err.print(f"[red]deepselect bench: {exc}[/]")
        return 2
    config = _config(args, device)
    problem, note = backend_problem(device)
    ours = None if problem else deepselect_library()
    extras = extra_libraries(device) if any(c.scenario != "read" for c in cases) else []
    extra_names = [lib.name for lib in extras]
    info = runinfo.run_info(device)
    if device == "cpu":
        name = f"CPU ({info['device_name']}, {info['threads']} threads)"
    else:
        name = torch.cuda.get_device_name(torch.device(device))
    _announce(err, name, info, config, len(cases) * len(dists))
    if problem:
        err.print(f"[yellow]{problem}[/]")
    if note:
        err.print(f"[yellow]note: {note}[/]")
    for lib in extras:
        err.print(f"also timing {lib.name}" + (f" ({lib.note})" if lib.note else ""))
    rows = _run_cases(err, cases, dists, config, ours, extras)
    bad = _report(out, rows, extra_names, name, bandwidth_unit(device)[0])
    if args.csv:
        columns = extra_names + [m for m in READ_METHODS if any(f"{m}_us" in r for r in rows)]
        out.print(f"CSV: {write_csv(rows, args.csv, columns, info)}")
    if args.plot:
        from .plotting import plot_results

        topk = [r for r in rows if r["scenario"] != "read"]
        for path in plot_results(topk, args.plot, extra_names):
            out.print(f"plot: {path}")
    return 1 if bad else 0
