"""Expressions as values (:mod:`cellgraph.cell.expr`): :func:`relabel` (the torch trainer's
structure key and the GRU theorem's activation swaps use it), immutability and leaf names."""

from __future__ import annotations

import pytest

from cellgraph.cell.expr import Leaf, Node, h, relabel, x
from cellgraph.errors import CellGraphError


def test_relabel_keeps_shape_leaves_and_sharing():
    shared = Node("add", "sigmoid", 3, x, h)
    root = Node("mul", "tanh", 1, shared, shared)
    out = relabel(root, lambda n: ("add", n.act, n.tuple + 10))
    assert out == Node("add", "tanh", 11, Node("add", "sigmoid", 13, x, h), Node("add", "sigmoid", 13, x, h))
    assert out.left is out.right  # one node, as in the input DAG
    assert relabel(x, lambda n: ("add", "tanh", 0)) is x


def test_expressions_are_immutable_and_say_so():
    node = Node("add", "tanh", 0, x, h)
    with pytest.raises(AttributeError, match="^Node is immutable$"):
        del node.op
    with pytest.raises(AttributeError, match="^Leaf is immutable$"):
        del x.name


@pytest.mark.parametrize("name", ["", 3])
def test_a_leaf_name_is_a_non_empty_string(name):
    with pytest.raises(CellGraphError, match=rf"^leaf name must be a non-empty string, got {name!r}$"):
        Leaf(name, "data")
