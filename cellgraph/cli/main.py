"""The ``cellgraph`` command line: symbolic RRNN cell search, training and proofs.

Subcommands live in :mod:`cellgraph.cli.commands`, one module each; run ``cellgraph COMMAND -h``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from cellgraph import __version__
from cellgraph.cli import commands
from cellgraph.errors import CellGraphError


#: How to install the torch the project is tested with (README).
TORCH_INSTALL = "pip install torch==2.13.0"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cellgraph",
        description="Symbolic cell search for Recursive-Recurrent Neural Networks (RRNN).",
    )
    parser.add_argument("--version", action="version", version=f"cellgraph {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit code. Bad input (a :class:`CellGraphError` or an
    ``OSError`` such as a missing file or a folder given as a file) is one line on stderr
    and exit code 2, and so is a missing torch, named with its install command; argparse
    exits 2 on bad arguments, and so does an argument with a NUL byte (no file name or value
    can hold one; the operating system would refuse it deep inside). When the reader of
    stdout goes away (``cellgraph ... | head``) the command stops quietly with code 141, as a
    process ended by SIGPIPE does."""
    parser = build_parser()
    given = sys.argv[1:] if argv is None else argv
    bad = next((arg for arg in given if "\x00" in arg), None)
    if bad is not None:
        parser.error(f"argument {bad!r} holds a NUL byte")
    if given and given[0] in commands.OLD_NAMES:
        print(f"cellgraph {given[0]} is the old name of cellgraph {commands.OLD_NAMES[given[0]]}", file=sys.stderr)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        with _sigterm_as_interrupt():
            code = int(args.func(args) or 0)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # Python ignores SIGPIPE: point stdout at /dev/null so that the interpreter's last
        # flush cannot fail again and print a traceback (Python docs, "Note on SIGPIPE").
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except (CellGraphError, OSError) as err:
        print(f"cellgraph {args.command}: error: {err}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as err:
        if (err.name or "").partition(".")[0] != "torch":
            raise
        print(f"cellgraph {args.command}: error: this command needs torch, which is not installed: "
              f"{TORCH_INSTALL}", file=sys.stderr)
        return 2


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """While a command runs, SIGTERM (``kill``'s default) stops it as Ctrl-C does: a run saves
    at a safe point and says how to resume, a runner passes the stop on to its commands. A
    command started in the background ignores SIGINT, so this is how it is stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
