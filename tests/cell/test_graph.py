"""Cell graphs and their networkx form (:mod:`cellgraph.cell.graph`): the attributes
:meth:`CellGraph.to_networkx` writes, the defaults :meth:`CellGraph.from_networkx` reads
(a hand-made graph gives only what it must), and the exact one-line errors of both classes."""

from __future__ import annotations

import networkx as nx
import pytest

from cellgraph.cell.expr import Leaf, Node, Role, h, x
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout, TupleSpec
from cellgraph.errors import CellGraphError

C_NOW = Leaf("c", Role.CURRENT)
INNER = Node("add", "tanh", 1, x, C_NOW)
GRAPH = CellGraph(Node("mul", "identity", 0, INNER, h), "h")


def test_to_networkx_writes_every_attribute():
    g = GRAPH.to_networkx()
    assert g.graph == {"root": 4, "state": "h"}
    assert dict(g.nodes(data=True)) == {
        0: dict(kind="leaf", name="x", role="data"), 1: dict(kind="leaf", name="c", role="current"),
        2: dict(kind="node", op="add", act="tanh", tuple=1), 3: dict(kind="leaf", name="h", role="prev"),
        4: dict(kind="node", op="mul", act="identity", tuple=0)}
    assert sorted(g.edges(data="edge")) == [(0, 2, "L"), (1, 2, "R"), (2, 4, "L"), (3, 4, "R")]
    back = CellGraph.from_networkx(g)
    assert back == GRAPH and back.leaves() == GRAPH.leaves()


def _hand_made() -> nx.DiGraph:
    """``tanh(add_1(x, c))`` with no ``kind``, names only where no role is implied."""
    g = nx.DiGraph(root="n")
    g.add_node("x")
    g.add_node("c", name="c", role="current")
    g.add_node("n", op="add", act="tanh", tuple=1)
    g.add_edge("x", "n", edge="L")
    g.add_edge("c", "n", edge="R")
    return g


def test_from_networkx_defaults_kind_name_root_and_state():
    assert CellGraph.from_networkx(_hand_made()) == CellGraph(INNER, "h")
    assert CellGraph.from_networkx(_hand_made(), state="c").state == "c"
    with_state = _hand_made()
    with_state.graph["state"] = "c"
    assert CellGraph.from_networkx(with_state).state == "c"
    assert CellGraph.from_networkx(_hand_made(), root="x") == CellGraph(x, "h")


def test_from_networkx_errors_name_the_node():
    cyclic = nx.DiGraph([("a", "b"), ("b", "a")])
    with pytest.raises(CellGraphError, match=r"^node 'a': the graph has a cycle \[\('a', 'b'\), \('b', 'a'\)\]$"):
        CellGraph.from_networkx(cyclic)
    with pytest.raises(CellGraphError, match="^root 'z' is not a node of the graph$"):
        CellGraph.from_networkx(_hand_made(), root="z")
    one_edge = _hand_made()
    one_edge.remove_edge("c", "n")
    with pytest.raises(CellGraphError, match=r"^node 'n': an internal node needs exactly one 'L' and one 'R' child, "
                                             r"got 1 in-edges labelled \['L'\]$"):
        CellGraph.from_networkx(one_edge)


def test_cell_and_multicell_errors():
    with pytest.raises(CellGraphError, match="^cell root must be a Leaf or Node, got str$"):
        CellGraph("x")  # type: ignore[arg-type]
    with pytest.raises(CellGraphError, match="^a multi-state cell needs at least one graph$"):
        MultiCell(())
    with pytest.raises(CellGraphError, match="^state 'h' is made twice$"):
        MultiCell((CellGraph(x, "h"), CellGraph(h, "h")))


def test_validate_checks_every_run_against_the_layout():
    layout = Layout((TupleSpec("W"),))
    cell = MultiCell((CellGraph(Node("add", "tanh", 0, x, h), "c"), GRAPH))
    with pytest.raises(CellGraphError, match=r"^tanh\[add_1\]\(x, c\): tuple index 1 out of range for a layout "
                                             r"of 1 tuples \(W\)$"):
        cell.validate(layout)
    assert cell.validate(None) is cell


def test_two_left_edges_are_not_an_internal_node():
    twice = _hand_made()
    twice.edges["c", "n"]["edge"] = "L"
    with pytest.raises(CellGraphError, match=r"^node 'n': an internal node needs exactly one 'L' and one 'R' child, "
                                             r"got 2 in-edges labelled \['L'\]$"):
        CellGraph.from_networkx(twice)
