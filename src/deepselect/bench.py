"""``deepselect bench``: effective bandwidth against torch.topk."""

from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser("bench", help="benchmark against torch.topk")
    p.add_argument("--quick", action="store_true", help="a short run")
    p.set_defaults(func=lambda args: print("no benchmark yet") or 0)
