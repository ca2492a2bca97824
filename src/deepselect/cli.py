"""The ``deepselect`` command line: ``deepselect experiment ...``, ``deepselect bench``."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    from . import bench, experiments

    parser = argparse.ArgumentParser(
        prog="deepselect", description="Exact top-k at the speed of reading the input once."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    experiments.register(sub)
    bench.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
