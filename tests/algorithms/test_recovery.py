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

#: The targets that are one structure under two names: torch's LSTM is the paper's graph, and
#: MUT2's nearest form (``r``'s ``L_r`` trainable) is the GRU once ``z`` and ``1 - z`` trade places.
SAME = {frozenset({"lstm", "lstm_torch"}), frozenset({"gru", "mut2"})}


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


def _vf2_graph(graph: CellGraph, layout: Layout):
    """The structure as a networkx multigraph (the oracle: VF2 isomorphism, Cordella et al. 2004)."""
    import networkx as nx

    g = nx.MultiDiGraph()
    for e in graph.nodes():
        if e.is_leaf:
            g.add_node(e, label=("leaf", e.role.value, e.name))
            continue
        g.add_node(e, label=("node", e.op, e.act, e.tuple in layout.identity_indices))
        for side, child in (("L", e.left), ("R", e.right)):
            g.add_edge(child, e, side=None if e.commutative else side)
    return g


def test_structure_form_agrees_with_vf2_isomorphism_on_random_cells_and_their_mutants():
    """Equal forms exactly when networkx finds the structures isomorphic, over pairs of random
    candidates and pairs one mutation apart (where twins and shared nodes come up); pairs with a
    sigmoid-complement pair, which the form lets trade places, are left to the tests below."""
    import random

    import networkx as nx
    from networkx.algorithms.isomorphism import categorical_multiedge_match, categorical_node_match

    from cellgraph.algorithms.recovery import complement_pairs, structure_form
    from cellgraph.discover.mutations import mutate
    from cellgraph.discover.space import CellSpace, sample_cell, to_cell

    space, rng, agree, equal = CellSpace(max_nodes=6), random.Random(0), 0, 0
    match = dict(node_match=categorical_node_match("label", None), edge_match=categorical_multiedge_match("side", None))
    for _ in range(150):
        a = sample_cell(space, rng)
        for b in (mutate(a, rng, space).child or sample_cell(space, rng), _swapped(a, rng)[0]):
            (ca, la), (cb, lb) = to_cell(a), to_cell(b)
            if complement_pairs(ca.output.root, la) or complement_pairs(cb.output.root, lb):
                continue
            same_form = structure_form(ca.output, la) == structure_form(cb.output, lb)
            assert same_form == nx.is_isomorphic(_vf2_graph(ca.output, la), _vf2_graph(cb.output, lb), **match)
            equal += same_form
    assert equal >= 100  # every swapped copy is isomorphic


def _swapped(root: Expr, rng, identity: frozenset[int] = frozenset({0})) -> tuple[Expr, Layout]:
    """``root`` with every commutative node's operands swapped and its trainable tuples renumbered
    (tuples in ``identity`` become tuple 0), and the layout it reads under (0 the identity tuple)."""
    from functools import cache

    nodes = root.internal_nodes()
    numbers = iter(rng.sample(range(1, 10 * len(nodes) + 1), len(nodes)))

    @cache
    def copy(e: Expr) -> Expr:
        if e.is_leaf:
            return e
        left, right = (copy(e.right), copy(e.left)) if e.commutative else (copy(e.left), copy(e.right))
        return Node(e.op, e.act, 0 if e.tuple in identity else next(numbers), left, right)

    out = copy(root)
    size = max(n.tuple for n in out.internal_nodes()) + 1
    return out, Layout((TupleSpec.identity_tuple(), *(TupleSpec(f"t{i}") for i in range(1, size))))


@pytest.mark.parametrize("name", target_names())
def test_swapped_copies_of_every_target_have_its_form(name):
    """Operands swapped at every commutative node: MUT2's twin gates r and z (one unfolded tree)
    then meet the walk in the other order, and the form must not depend on it."""
    import random

    from cellgraph.algorithms.recovery import structure_form

    t, rng = target(name), random.Random(1)
    for g in t.cell:
        for _ in range(5):
            copy, layout = _swapped(g.root, rng, t.layout.identity_indices)
            assert structure_form(CellGraph(copy, g.state), layout) == structure_form(g, t.layout)


def test_twin_operands_of_one_node_in_either_order_are_one_structure():
    """Two distinct nodes with one unfolded tree as the operands of one node, only one of them
    read again elsewhere: which the walk meets first must not change the form."""
    from cellgraph.algorithms.recovery import structure_form

    layout = Layout((TupleSpec.identity_tuple(), *(TupleSpec(f"t{i}") for i in range(1, 5))))
    a1, a2 = (Node("add", "sigmoid", k, x, h) for k in (1, 2))
    forms = {structure_form(CellGraph(Node("add", "tanh", 3, Node("add", "identity", 0, *pair),
                                           Node("mul", "identity", 0, a2, h))), layout)
             for pair in ((a1, a2), (a2, a1))}
    assert len(forms) == 1
    other = Node("add", "tanh", 3, Node("add", "identity", 0, a1, a2), Node("mul", "identity", 0, a2, x))
    assert structure_form(CellGraph(other), layout) not in forms


def _gru_reset_by_the_complement() -> CellGraph:
    """The GRU whose reset reads ``1 - z`` (its gate ``r`` gone): MGU once ``z`` and ``1 - z`` trade places."""
    I = 3
    z = Node("add", "sigmoid", 1, x, h)
    omz = Node("add", "one_minus", I, zero, z)
    n = Node("add", "tanh", 2, x, Node("mul", "identity", I, h, omz))
    return CellGraph(Node("add", "identity", I, Node("mul", "identity", I, h, z), Node("mul", "identity", I, omz, n)))


def test_a_sigmoid_and_its_complement_trading_places_is_one_structure():
    gru, mgu = target("gru"), target("mgu")
    cell = _gru_reset_by_the_complement()
    assert exact_recovery(cell, gru.layout, mgu.cell, mgu.layout)
    assert not exact_recovery(gru.cell, gru.layout, mgu.cell, mgu.layout)
    # an identity-tuple gate cannot take the sign: no pair, no trade
    frozen_gate = relabel(cell.root, lambda n: (n.op, n.act, 3 if n.act == "sigmoid" else n.tuple))
    assert not exact_recovery(CellGraph(frozen_gate), gru.layout, mgu.cell, mgu.layout)


def test_trading_places_computes_the_same_function_with_the_gates_weights_negated():
    """The traded cell with the sigmoid's L and b negated (add: and R) gives the same states: the
    rewire is a renaming of weights, on random cells that have a pair."""
    import random

    from cellgraph.algorithms.recovery import _traded, complement_pairs, structure_form
    from cellgraph.backend import backend
    from cellgraph.discover.space import CellSpace, sample_cell, to_cell

    space, rng, checked = CellSpace(max_nodes=8), random.Random(3), 0
    data = np.random.default_rng(0)
    while checked < 10:
        cell, layout = to_cell(sample_cell(space, rng))
        pairs = complement_pairs(cell.output.root, layout)
        if not pairs:
            continue
        traded = _traded(cell.output.root, pairs)
        assert len(traded.internal_nodes()) == len(cell.output.root.internal_nodes())  # nodes only trade places
        params = [(np.eye(3), np.eye(3), np.zeros(3)) if r in layout.identity_indices else
                  (data.normal(size=(3, 3)), data.normal(size=(3, 3)), data.normal(size=3)) for r in range(len(layout))]
        flipped = list(params)
        for g, _ in pairs:
            L, R, b = params[g.tuple]
            flipped[g.tuple] = (-L, -R if g.op == "add" else R, -b)
        leaves = {x: data.normal(size=(4, 3)), h: data.normal(size=(4, 3))}
        numpy = backend("numpy")
        assert np.allclose(numpy.evaluate(cell.output.root, leaves, params)[cell.output.root],
                           numpy.evaluate(traded, leaves, flipped)[traded])
        assert structure_form(CellGraph(traded), layout) == structure_form(cell.output, layout)
        checked += 1
