"""Subcommands of the ``cellgraph`` CLI, one module each.

Every module here defines ``register(subparsers)`` which adds its parser and sets
``func=`` to a handler ``(args) -> int``. :mod:`cellgraph.cli` discovers the modules, so a
new command is a new file. Modules must stay cheap to import (no torch, no heavy work at
import time): import what a command needs inside its handler.
"""
