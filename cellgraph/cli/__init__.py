"""The ``cellgraph`` command line: :func:`main`, one module per command in
:mod:`cellgraph.cli.commands`, and the demo."""

from cellgraph.cli.main import main

__all__ = ["main"]
