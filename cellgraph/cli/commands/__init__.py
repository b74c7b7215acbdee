"""Subcommands of the ``cellgraph`` CLI, one module each.

Every module here defines ``register(subparsers)`` which adds its parser and sets
``func=`` to a handler ``(args) -> int``. :mod:`cellgraph.cli` discovers the modules, so a
new command is a new file. Modules must stay cheap to import (no torch, no heavy work at
import time): import what a command needs inside its handler.
"""

from __future__ import annotations

import argparse

#: The old name of a command -> its name: the old name still runs it, announced on stderr.
OLD_NAMES = {"search": "tune"}

#: How ``--device`` is explained where its default is ``auto``.
DEVICE_AUTO = "auto (a CUDA GPU when there is one, else the CPU), cpu, cuda or cuda:N"


def old_names(command: str) -> list[str]:
    """The old names of ``command``: the aliases its parser keeps."""
    return [old for old, name in OLD_NAMES.items() if name == command]


def device_flag(text: str) -> str:
    """The argparse ``type`` of ``--device``: a ``device`` setting of the right form (whether
    the machine has that device is checked where the command uses it)."""
    from cellgraph.experiment.config import DEVICE_FORMS, valid_device

    if not valid_device(text):
        raise argparse.ArgumentTypeError(f"invalid device {text!r} (one of {', '.join(DEVICE_FORMS)})")
    return text


def add_backend_flag(parser: argparse.ArgumentParser, default: str | None, help: str) -> None:
    """Add ``--backend NAME`` (a backend plugin that trains; an unknown name is an error that
    lists the installed ones)."""
    parser.add_argument("--backend", metavar="NAME", default=default, help=help)


def add_device_flag(parser: argparse.ArgumentParser, default: str | None, help: str) -> None:
    """Add ``--device DEVICE`` to a command's parser."""
    parser.add_argument("--device", type=device_flag, default=default, metavar="DEVICE", help=help)


def add_structure_log_args(parser: argparse.ArgumentParser, top: int, what: str) -> None:
    """Add ``RUN_DIR``, ``--top N`` (``what`` to list, ``top`` by default) and ``--epoch E``
    (the structure log to read, the last by default) to a command's parser."""
    parser.add_argument("run", metavar="RUN_DIR")
    parser.add_argument("--top", type=int, default=top, help=f"how many {what} (default {top})")
    parser.add_argument("--epoch", type=int, default=None, help="epoch to read (default: the last logged)")
