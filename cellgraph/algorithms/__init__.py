"""Algorithms on cell trees, one per module (networkx style)."""
