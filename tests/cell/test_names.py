"""Display names of leaves and generated nodes (:mod:`cellgraph.cell.names`), which the
symbolic export, the drawings and the JSON files all print."""

from __future__ import annotations

import pytest

from cellgraph.cell.expr import Leaf, Node, h, one, x, zero
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.names import as_multicell, leaf_parts, node_names
from cellgraph.errors import CellGraphError


def test_constant_leaves_are_named_by_their_value():
    assert leaf_parts(zero) == ("0", "") and leaf_parts(one) == ("1", "")
    assert leaf_parts(Leaf("e12", "const")) == ("e", "12")
    assert leaf_parts(Leaf("bias", "const")) == ("bias", "")
    assert leaf_parts(x) == ("x", "t") and leaf_parts(h) == ("h", "t-1")


def test_a_node_shared_by_two_runs_keeps_its_first_name_and_the_rest_are_numbered_on():
    """Run ``h`` reuses ``c_1`` of run ``c``; its own nodes after it still get names."""
    shared = Node("add", "sigmoid", 0, x, h)
    own = Node("add", "identity", 0, x, x)
    c_root, h_root = Node("add", "tanh", 0, shared, x), Node("mul", "tanh", 0, shared, own)
    names = node_names(MultiCell((CellGraph(c_root, "c"), CellGraph(h_root, "h"))))
    assert names == {shared: ("c", "1"), c_root: ("c", "t"), own: ("c", "2"), h_root: ("h", "t")}


def test_only_cells_are_accepted():
    with pytest.raises(CellGraphError, match="^expected an Expr, CellGraph or MultiCell, got int$"):
        as_multicell(3)  # type: ignore[arg-type]
