"""The unfolded tree (:mod:`cellgraph.cell.tree`, paper Sec. 3.1 and 3.3): a leaf has no edges,
heights are counted in edges, and the errors and the printed form a user meets."""

from __future__ import annotations

import pytest

from cellgraph.cell.expr import Node, h, x
from cellgraph.cell.tree import Tree, unfold
from cellgraph.errors import CellGraphError

TREE = unfold(Node("add", "tanh", 0, Node("mul", "sigmoid", 1, x, h), h))


def test_a_leaf_position_has_no_edges_and_height_0():
    leaf = Tree(x)
    assert leaf.edges == () and leaf.is_leaf and not leaf.swapped
    assert leaf.depth() == 0 and TREE.depth() == 2 and TREE.leaf_depths() == [2, 2, 1]


def test_errors_name_the_problem():
    with pytest.raises(CellGraphError, match="^Tree position must hold a Leaf or Node, got str$"):
        Tree("x")  # type: ignore[arg-type]
    with pytest.raises(CellGraphError, match="^a leaf has no children to swap$"):
        Tree(x).swap()
    with pytest.raises(CellGraphError, match=r"^tree: internal node at heap label 2 \(sigmoid\[mul_1\]\(x, h\)\) "
                                             r"has no vector$"):
        Tree(TREE.expr, TREE.children, vector=[0.0]).require_vectors()


def test_repr_shows_ops_swaps_and_leaves():
    assert repr(TREE) == "Tree(add/tanh/0: Tree(mul/sigmoid/1: Tree(Leaf('x')), Tree(Leaf('h'))), Tree(Leaf('h')))"
    assert repr(TREE.swap()).startswith("Tree(add/tanh/0, swapped: Tree(Leaf('h')), ")
