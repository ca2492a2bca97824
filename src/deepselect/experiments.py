"""The seed chapter's runnable models (block-order experiment, complexity tables)."""

from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser("experiment", help="reproduce the algorithm's experiments")
    p.set_defaults(func=lambda args: print("no experiments yet") or 0)
