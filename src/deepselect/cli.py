"""The ``deepselect`` command line: ``deepselect experiment ...``, ``deepselect bench``."""

from __future__ import annotations

import argparse
import sys

# What each optional dependency is installed with, for the message when it is missing.
_EXTRAS = {"rich": "bench", "tqdm": "bench", "matplotlib": "bench", "triton": "gpu"}


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except where there is none to show (None, or off
    for a flag): those options say in their help what happens without them."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """An argument parser whose help shows defaults; subcommands inherit it
    (``add_subparsers`` makes parsers of its parent's class)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    from . import bench, experiments
    from .runinfo import version_line

    parser = Parser(
        prog="deepselect", description="Exact top-k at the speed of reading the input once."
    )
    parser.add_argument(
        "--version", action="version", version=version_line(),
        help="print the versions of deepselect, torch, Triton, Numba and Python, and exit",
    )  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    experiments.register(sub)
    bench.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ModuleNotFoundError as exc:
        extra = _EXTRAS.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        print(
            f"deepselect {args.command}: needs {exc.name}, which is not installed; "
            f"install it with pip install 'deepselect[{extra}]'",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
