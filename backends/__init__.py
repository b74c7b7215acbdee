"""Numeric backends of cellgraph, found by name through the ``cellgraph.backends`` entry points."""
