"""The ``cellgraph`` command line: symbolic RRNN cell search, training and proofs.

Subcommands live in :mod:`cellgraph.commands`, one module each; run ``cellgraph COMMAND -h``.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from cellgraph import commands
from cellgraph.errors import CellGraphError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cellgraph",
        description="Symbolic cell search for Recursive-Recurrent Neural Networks (RRNN).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except (CellGraphError, FileNotFoundError, PermissionError) as err:
        print(f"cellgraph {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
