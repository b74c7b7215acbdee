"""Exact structure recovery: whether a discovered cell has a teacher's structure (the planted
task, docs/paper-notes.md, *Planted teachers*).

The *structure* of a cell is its DAG with every generated node labelled by its op, its
activation and the kind of its tuple, trainable ``W`` or identity ``I``, as
:func:`cellgraph.algorithms.shape.shape` labels it; leaves by role and name. A found cell
recovers the teacher exactly when, state by state, the two structures are isomorphic as
DAGs (networkx's VF2, ``is_isomorphic`` with node and edge matches; L. P. Cordella, P.
Foggia, C. Sansone, M. Vento, "A (sub)graph isomorphism algorithm for matching large graphs",
IEEE TPAMI 26(10), 2004). Which trainable tuple a node uses does not matter, whether two
nodes are one shared node does. An edge of a commutative op carries no side: ``o(L a, R b)``
and ``o(L b, R a)`` on ``W`` differ only in which free matrix is called ``L``, and on ``I``
not at all; a non-commutative op keeps its operands' sides.

How other rewrites are treated:

* commutative swaps (``a + b`` against ``b + a``, ``z * n`` against ``n * z``) and the
  renaming of trainable tuples are the same structure;
* node sharing is structure: MGU's gate ``f`` used as both reset and update gate is one node,
  MUT2's ``r`` and ``z`` are two. Their unfolded trees, and so their
  :func:`~cellgraph.algorithms.shape.shape_form`, are the same; here they differ;
* algebraic rewrites that compute the same function family are different structures and
  are not counted: ``(1 - z) * h + z * n`` against ``h + z * (n - h)``, a tuple's bias
  split over two nodes, an identity-tuple node ``u(0 + I a)`` inserted on an edge;
* a trainable tuple whose teacher fixes a matrix to ``I`` (``mut1``'s ``L_h``) is ``W``:
  the found cell need not learn the ``I``.
"""

from __future__ import annotations

import networkx as nx
from networkx.algorithms.isomorphism import categorical_multiedge_match, categorical_node_match

from cellgraph.cell.expr import Leaf
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.cell.names import as_multicell

__all__ = ["structure_graph", "exact_recovery"]

_NODE_MATCH = categorical_node_match("label", None)
_EDGE_MATCH = categorical_multiedge_match("side", None)


def structure_graph(graph: CellGraph, layout: Layout) -> nx.MultiDiGraph:
    """The structure of one state's DAG: a node per distinct expression, labelled
    ``("leaf", role, name)`` or ``("node", op, act, "W" | "I")``; an edge child -> parent per
    operand with ``side`` ``"L"``/``"R"``, or ``None`` under a commutative op."""
    identity = layout.identity_indices
    g = nx.MultiDiGraph()
    for e in graph.nodes():
        if isinstance(e, Leaf):
            g.add_node(e, label=("leaf", e.role.value, e.name))
            continue
        g.add_node(e, label=("node", e.op, e.act, "I" if e.tuple in identity else "W"))
        for side, child in (("L", e.left), ("R", e.right)):
            g.add_edge(child, e, side=None if e.commutative else side)
    return g


def exact_recovery(
    found: MultiCell | CellGraph, found_layout: Layout, teacher: MultiCell | CellGraph, teacher_layout: Layout
) -> bool:
    """Whether ``found`` (over ``found_layout``) has the structure of ``teacher`` (over
    ``teacher_layout``): the same states in the same order, each state's structure
    (:func:`structure_graph`) isomorphic to the teacher's. See the module docstring for the
    rewrites that count as the same structure."""
    a, b = as_multicell(found).validate(found_layout), as_multicell(teacher).validate(teacher_layout)
    if a.states != b.states:
        return False
    return all(
        nx.is_isomorphic(structure_graph(ga, found_layout), structure_graph(gb, teacher_layout),
                         node_match=_NODE_MATCH, edge_match=_EDGE_MATCH)
        for ga, gb in zip(a, b)
    )
