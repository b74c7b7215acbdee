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


def test_depth_and_size_count_internal_nodes_of_the_unfolded_tree():
    shared = Node("add", "sigmoid", 0, x, h)
    root = Node("mul", "tanh", 0, shared, Node("add", "tanh", 1, shared, x))
    assert (shared.depth, shared.size) == (1, 1)
    assert (root.depth, root.size) == (3, 4)  # shared counted once per use


@pytest.mark.parametrize("args, problem", [
    ((True, x, h), "tuple index must be an integer >= 0"),
    ((-1, x, h), "tuple index must be an integer >= 0"),
    (("0", x, h), "tuple index must be an integer >= 0"),
    ((0, None, h), "missing left child (a generated node has two)"),
    ((0, x, "h"), "right child must be a Leaf or Node, got str"),
])
def test_node_errors_name_the_node_and_the_problem(args, problem):
    tuple_index = args[0]
    with pytest.raises(CellGraphError) as err:
        Node("add", "tanh", *args)
    assert str(err.value) == f"Node(op='add', act='tanh', tuple={tuple_index!r}): {problem}"
