"""Cells the discover tests share."""

from cellgraph.cell.expr import Node, h, x, zero
from cellgraph.discover.space import from_cell
from cellgraph.targets import target


def gru() -> Node:
    """The paper's GRU as a candidate (8 nodes)."""
    g = target("gru")
    return from_cell(g.cell, g.layout)


def small() -> Node:
    """A 4-node gated cell: ``f = sigmoid(W[x, h])``, ``h' = f * h + tanh(W[x, f])``."""
    f = Node("add", "sigmoid", 1, x, h)
    return Node("add", "identity", 0, Node("mul", "identity", 0, f, h), Node("add", "tanh", 2, x, f))


def no_op() -> Node:
    """A cell with a no-op node (identity add of zero on the identity tuple)."""
    f = Node("add", "sigmoid", 1, x, h)
    return Node("mul", "identity", 0, Node("add", "identity", 0, f, zero), Node("add", "tanh", 2, x, h))
