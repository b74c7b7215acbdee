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
    assert leaf.leaf_depths() == [0] and TREE.leaf_depths() == [2, 2, 1]


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


def test_malformed_positions_are_one_line_errors():
    node = TREE.expr
    inner, leaf = TREE.children
    with pytest.raises(CellGraphError, match=r"^add/tanh node needs exactly two children, got 1$"):
        Tree(node, (inner,))
    with pytest.raises(CellGraphError, match=r"^edges must be \('L','R'\) or \('R','L'\), got \('L', 'L'\)$"):
        Tree(node, (inner, leaf), ("L", "L"))
    with pytest.raises(CellGraphError, match=r"^children of tanh\[add_0\]\(sigmoid\[mul_1\]\(x, h\), h\) do not match "
                                             r"its left/right operands under edges \('L', 'R'\)$"):
        Tree(node, (inner, Tree(x)))  # only the right operand is wrong
    with pytest.raises(CellGraphError, match=r"^vector at x must be 1-d, got shape \(1, 2\)$"):
        Tree(x, vector=[[1.0, 2.0]])


def test_a_vector_is_a_read_only_float64_copy():
    given = [1, 2]
    t = Tree(x, vector=given)
    assert t.vector.dtype == "float64" and not t.vector.flags.writeable and t.vector.tolist() == [1.0, 2.0]
