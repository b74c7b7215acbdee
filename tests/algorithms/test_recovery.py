"""Exact structure recovery (:mod:`cellgraph.algorithms.recovery`): a cell against the targets,
relabelled and swapped copies, one-node changes, and node sharing that shape forms miss."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cellgraph.algorithms.recovery import exact_recovery
from cellgraph.algorithms.shape import shape_form
from cellgraph.cell import registry
from cellgraph.cell.expr import Expr, Node, h, relabel, x, zero
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout, TupleSpec
from cellgraph.errors import CellGraphError
from cellgraph.targets import target, target_names

#: The targets that are one structure under two names (torch's LSTM is the paper's graph).
SAME = {frozenset({"lstm", "lstm_torch"})}


def _map_nodes(cell: MultiCell, label) -> MultiCell:
    return MultiCell(tuple(CellGraph(relabel(g.root, label), g.state) for g in cell))


@pytest.mark.parametrize("a, b", itertools.product(target_names(), repeat=2))
def test_each_target_recovers_itself_and_no_other(a, b):
    ta, tb = target(a), target(b)
    assert exact_recovery(ta.cell, ta.layout, tb.cell, tb.layout) == (a == b or frozenset({a, b}) in SAME)


def test_shared_gate_is_structure_though_the_shape_forms_agree():
    """MGU's one gate f against MUT2's r and z: the unfolded trees have one shape form."""
    mgu, mut2 = target("mgu"), target("mut2")
    assert shape_form(mgu.cell, mgu.layout) == shape_form(mut2.cell, mut2.layout)
    assert not exact_recovery(mgu.cell, mgu.layout, mut2.cell, mut2.layout)
    assert not exact_recovery(mut2.cell, mut2.layout, mgu.cell, mgu.layout)


@pytest.mark.parametrize("name", target_names())
def test_relabelled_tuples_and_another_layout_are_the_same_structure(name):
    """Trainable tuples permuted and the identity tuple moved to the front of a new layout."""
    t = target(name)
    trainable = t.layout.trainable_indices
    k = len(trainable)
    new_index = {r: 1 + (i + 1) % k for i, r in enumerate(trainable)}
    new_index.update({r: 0 for r in t.layout.identity_indices})
    layout = Layout((TupleSpec.identity_tuple("eye"), *(TupleSpec(f"t{i}") for i in range(k))))
    moved = _map_nodes(t.cell, lambda n: (n.op, n.act, new_index[n.tuple]))
    assert moved != t.cell
    assert exact_recovery(moved, layout, t.cell, t.layout)
    assert exact_recovery(t.cell, t.layout, moved, layout)


@pytest.mark.parametrize("name", target_names())
def test_every_one_node_change_is_another_structure(name):
    """Each node's activation changed, or its tuple's kind (W <-> I) flipped: not recovered."""
    t = target(name)
    identity, trainable = min(t.layout.identity_indices), t.layout.trainable_indices[0]
    for g in t.cell:
        for node in g.internal_nodes():
            act = next(a for a in ("sigmoid", "tanh") if a != node.act)
            flip = identity if node.tuple != identity else trainable
            for label in (lambda n: (n.op, act if n == node else n.act, n.tuple),
                          lambda n: (n.op, n.act, flip if n == node else n.tuple)):
                changed = MultiCell(tuple(CellGraph(relabel(c.root, label), c.state) if c is g else c
                                          for c in t.cell))
                assert not exact_recovery(changed, t.layout, t.cell, t.layout), (node, label(node))


def _swap(root: Expr, at: Node) -> Expr:
    """``root`` with the operands of ``at`` swapped (the same op, act and tuple)."""
    built: dict[Expr, Expr] = {}
    for e in root.walk():
        if isinstance(e, Node):
            left, right = built[e.left], built[e.right]
            built[e] = Node(e.op, e.act, e.tuple, *((right, left) if e == at else (left, right)))
        else:
            built[e] = e
    return built[root]


def test_operands_of_a_commutative_trainable_node_may_come_in_either_order():
    """MUT1's n = tanh(L_h tanh(x) + R_h (r * h) + b_h) built with r * h first: L and R are
    both free W, so it is MUT1's structure (its shape form, which keeps the edge labels of
    trainable tuples, differs)."""
    t = target("mut1")
    n = next(e for e in t.graph.internal_nodes() if e.act == "tanh" and e.tuple == 2)
    swapped = CellGraph(_swap(t.graph.root, n), "h")
    assert swapped.root != t.graph.root
    assert exact_recovery(swapped, t.layout, t.cell, t.layout)
    assert shape_form(MultiCell((swapped,)), t.layout) != shape_form(t.cell, t.layout)


def test_a_non_commutative_op_keeps_its_sides():
    layout = Layout((TupleSpec("w"), TupleSpec.identity_tuple()))
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(registry._OPS, "sub", registry.Op("sub", False, lambda a, b: a - b,
                                                     {"numpy": np.subtract}, "-"))
        a = CellGraph(Node("sub", "tanh", 1, x, Node("add", "sigmoid", 0, x, h)))
        b = CellGraph(Node("sub", "tanh", 1, Node("add", "sigmoid", 0, x, h), x))
        assert exact_recovery(a, layout, a, layout)
        assert not exact_recovery(a, layout, b, layout)
        assert exact_recovery(b, layout, CellGraph(Node("sub", "tanh", 1, Node("add", "sigmoid", 0, h, x), x)),
                              layout)


def test_states_must_match_and_tuples_must_be_in_the_layout():
    lstm, gru = target("lstm"), target("gru")
    c_only = MultiCell((lstm.cell.graphs[0],))
    assert exact_recovery(c_only, lstm.layout, c_only, lstm.layout)
    assert not exact_recovery(c_only, lstm.layout, lstm.cell, lstm.layout)
    bad = CellGraph(Node("add", "tanh", 7, x, zero))
    with pytest.raises(CellGraphError, match="tuple index 7 out of range"):
        exact_recovery(bad, gru.layout, gru.cell, gru.layout)
