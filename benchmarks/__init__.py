"""Benchmarks of the cell search and training step (``cellgraph bench``); torch lives here, not in the core."""
