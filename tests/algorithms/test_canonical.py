"""Canonical forms, isomorphism and Iso(T) (paper Sec. 3.1; docs/paper-notes.md,
*Tree distances: VD, TD and Iso*).

References used here: networkx ``is_isomorphic`` on the labelled unfolded trees, and Iso(T)
by brute force over all 2^k swap patterns of the k commutative positions.
"""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, strategies as st
from strategies import DETERMINISTIC, LAYOUT, exprs, isomorphs, trees

from cellgraph.algorithms.canonical import canonical, canonical_string, isomorphic
from cellgraph.cell import registry
from cellgraph.algorithms.isomorphism import (
    apply_swaps, iso_class, iso_class_size, iso_swaps, position_key,
)
from cellgraph.cell.expr import Expr, Leaf, Node, h, rebuild, x, zero
from cellgraph.cell.graph import CellGraph
from cellgraph.cell.layout import Layout
from cellgraph.cell.tree import Tree, unfold
from cellgraph.errors import CellGraphError
from cellgraph.targets import target

ID = 2  # LAYOUT's identity tuple


@pytest.fixture(scope="module")
def sub():
    """A non-commutative op, registered for this module only."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(registry._OPS, "sub", registry.Op("sub", False, lambda a, b: a - b,
                                                     {"numpy": np.subtract}, "-"))
        yield "sub"


# --- references ------------------------------------------------------------------------
def labelled(tree: Tree, layout: Layout | None = None) -> nx.DiGraph:
    """The unfolded tree as a labelled DiGraph (parent -> child): node label, edge label
    (dropped on identity tuples) and, for non-commutative ops, the operand slot."""
    identity = layout.identity_indices if layout is not None else frozenset()
    g = nx.DiGraph()

    def go(t: Tree) -> int:
        i = g.number_of_nodes()
        e = t.expr
        if t.is_leaf:
            g.add_node(i, label=("leaf", e.role.value, e.name))
            return i
        g.add_node(i, label=("node", e.op, e.act, e.tuple))
        for slot, (child, edge) in enumerate(zip(t.children, t.edges)):
            g.add_edge(i, go(child), edge=None if e.tuple in identity else edge,
                       slot=None if e.commutative else slot)
        return i

    go(tree)
    return g


def nx_isomorphic(a: Expr | Tree, b: Expr | Tree, layout: Layout | None = None) -> bool:
    ta, tb = (t if isinstance(t, Tree) else unfold(t) for t in (a, b))
    return nx.is_isomorphic(
        labelled(ta, layout), labelled(tb, layout),
        node_match=lambda u, v: u["label"] == v["label"], edge_match=lambda u, v: u == v,
    )


def all_positions(tree: Tree, label: int = 1):
    """``(label, position)`` for every position, leaves included (heap numbering)."""
    yield label, tree
    for k, child in enumerate(tree.children):
        yield from all_positions(child, 2 * label + k)


def brute_key(tree: Tree) -> frozenset:
    """A tree as the DAG node computed at every heap label."""
    return frozenset((label, t.expr) for label, t in all_positions(tree))


def swap_at(tree: Tree, labels: set[int], label: int = 1) -> Tree:
    if tree.is_leaf:
        return tree
    out = Tree(tree.expr, tuple(swap_at(c, labels, 2 * label + k) for k, c in enumerate(tree.children)),
               tree.edges, tree.vector)
    return out.swap() if label in labels else out


def brute_iso(tree: Tree) -> dict[frozenset, Tree]:
    """Iso(T) by all 2^k swap patterns of the commutative positions, deduplicated."""
    free = [label for label, t in all_positions(tree) if not t.is_leaf and t.expr.commutative]
    out: dict[frozenset, Tree] = {}
    for mask in itertools.product((False, True), repeat=len(free)):
        t = swap_at(tree, {label for label, m in zip(free, mask) if m})
        out.setdefault(brute_key(t), t)
    return out


@st.composite
def flip_identity_operands(draw, root: Expr) -> Expr:
    """The DAG with the operands of identity-tuple nodes exchanged at random (a different
    Expr, the same function)."""
    def flip(n: Node, left: Expr, right: Expr) -> Node:
        if n.tuple == ID and draw(st.booleans()):
            left, right = right, left
        return Node(n.op, n.act, n.tuple, left, right)

    return rebuild(root, flip)


# --- canonical forms -------------------------------------------------------------------
def tiny_exprs(ops: tuple[str, ...]) -> list[Expr]:
    """Every DAG of at most 2 generated nodes over leaves x, h, ``ops``, tuples {0, ID}."""
    leaves = [x, h]
    one = [Node(o, "identity", r, a, b) for o in ops for r in (0, ID) for a in leaves for b in leaves]
    two = [Node(o, "identity", r, a, b) for o in ops for r in (0, ID)
           for a in leaves + one for b in leaves + one if a in one or b in one]
    return leaves + one + two


@pytest.mark.parametrize("layout", [None, LAYOUT], ids=["edges", "identity-layout"])
def test_canonical_partition_equals_networkx_exhaustively(sub, layout):
    """The classes of equal canonical code are exactly networkx's isomorphism classes."""
    classes: dict[tuple, list[Expr]] = {}
    for e in tiny_exprs(("add", sub)):
        classes.setdefault(canonical(e, layout), []).append(e)
    for members in classes.values():
        assert all(nx_isomorphic(members[0], m, layout) for m in members[1:])
    by_labels: dict[tuple, list[Expr]] = {}
    for members in classes.values():
        g = labelled(unfold(members[0]), layout)
        by_labels.setdefault(tuple(sorted(map(str, nx.get_node_attributes(g, "label").values()))),
                             []).append(members[0])
    pairs = [(a, b) for reps in by_labels.values() for a, b in itertools.combinations(reps, 2)]
    assert pairs and not any(nx_isomorphic(a, b, layout) for a, b in pairs)
    # without a layout the code is one-to-one on DAGs; identity tuples merge operand orders
    assert (len(classes) == len(tiny_exprs(("add", sub)))) == (layout is None)


@DETERMINISTIC
@given(st.data())
def test_isomorphs_have_equal_codes(data):
    t = data.draw(trees())
    other = data.draw(isomorphs(t))
    for layout in (None, LAYOUT):
        assert canonical(other, layout) == canonical(t, layout)
        assert canonical_string(other, layout) == canonical_string(t, layout)
        assert isomorphic(t, other, layout) and nx_isomorphic(t, other, layout)


@DETERMINISTIC
@given(st.data())
def test_identity_operand_order_matters_only_without_layout(data):
    a = data.draw(exprs())
    b = data.draw(flip_identity_operands(a))
    assert isomorphic(a, b, LAYOUT) and nx_isomorphic(a, b, LAYOUT)
    assert isomorphic(a, b) == (a == b) == nx_isomorphic(a, b)


@DETERMINISTIC
@given(exprs(max_nodes=3), exprs(max_nodes=3))
def test_isomorphic_agrees_with_networkx(a, b):
    for layout in (None, LAYOUT):
        assert isomorphic(a, b, layout) == nx_isomorphic(a, b, layout)
        assert (canonical_string(a, layout) == canonical_string(b, layout)) == isomorphic(a, b, layout)


def test_non_commutative_children_never_swap(sub):
    a, b = Node(sub, "identity", ID, x, h), Node(sub, "identity", ID, h, x)
    assert not isomorphic(a, b, LAYOUT) and not nx_isomorphic(a, b, LAYOUT)
    assert canonical(Node(sub, "tanh", 0, zero, x))[4] == ((canonical(zero), "L"), (canonical(x), "R"))
    with pytest.raises(CellGraphError, match="non-commutative"):
        unfold(a).swap()


def test_accepts_tree_expr_and_graph():
    g = target("gru").graph
    tree = g.unfold()
    assert canonical(g) == canonical(g.root) == canonical(tree) == canonical(tree.swap())
    with pytest.raises(CellGraphError, match="expected a Tree, Expr or CellGraph, got str"):
        canonical("h")


def test_gru_with_identity_operands_exchanged():
    tgt = target("gru")
    I = tgt.layout.index("id")
    r = Node("add", "sigmoid", 0, x, h)
    z = Node("add", "sigmoid", 1, x, h)
    htil = Node("add", "tanh", 2, x, Node("mul", "identity", I, r, h))
    omz = Node("add", "one_minus", I, z, zero)
    flipped = Node("add", "identity", I, Node("mul", "identity", I, htil, omz),
                   Node("mul", "identity", I, z, h))
    assert isomorphic(flipped, tgt.graph, tgt.layout)
    assert not isomorphic(flipped, tgt.graph)
    assert not isomorphic(target("gru_torch").graph, tgt.graph, tgt.layout)


def test_canonical_string_is_readable():
    e = Node("mul", "identity", ID, Node("add", "sigmoid", 0, x, h), Leaf("c", "current"))
    assert canonical_string(e) == "identity[mul_2](R=c@current, L=sigmoid[add_0](L=x, R=h))"
    assert canonical_string(e, LAYOUT) == "identity[mul_2](c@current, sigmoid[add_0](L=x, R=h))"
    assert canonical_string(CellGraph(x)) == "x"


# --- Iso(T) ----------------------------------------------------------------------------
@DETERMINISTIC
@given(trees(vectors="node", max_nodes=3))
def test_iso_class_equals_brute_force(t):
    members = iso_class(t)
    keys = [brute_key(m) for m in members]
    assert keys[0] == brute_key(t)
    assert len(set(keys)) == len(keys) == iso_class_size(t) == iso_class_size(t.expr)
    assert set(keys) == set(brute_iso(t))
    assert len({position_key(m) for m in members}) == len(members)
    code = canonical(t)
    vector = {s.expr: s.vector for s in t.subtrees()}
    shared = {id(s.vector) for s in t.subtrees()}
    for m in members:
        assert canonical(m) == code
        assert all(id(s.vector) in shared for s in m.subtrees())  # t's read-only arrays, not copies
        assert all(np.array_equal(s.vector, vector[s.expr]) for s in m.subtrees())


def test_gru_iso_class():
    tree = target("gru").graph.unfold()
    n_commutative = sum(1 for _, t in tree.positions() if t.expr.commutative)
    # 9 commutative positions (z is used twice), no node with two equal operands
    assert n_commutative == 9
    members = iso_class(tree)
    assert len(members) == 2**9 == len(brute_iso(tree))
    assert {brute_key(m) for m in members} == set(brute_iso(tree))
    assert iso_swaps(tree)[0] == frozenset() and members[0].ordered_key() == tree.ordered_key()


def test_iso_class_size_guard():
    tree = target("gru").graph.unfold()
    with pytest.raises(CellGraphError, match="has 512 members, more than max_size=100"):
        iso_class(tree, max_size=100)


def test_equal_operands_are_not_swapped():
    e = Node("mul", "identity", ID, Node("add", "tanh", 0, x, h), Node("add", "tanh", 0, x, h))
    assert iso_class_size(e) == 4 and len(iso_class(unfold(e))) == 4
    assert len(brute_iso(unfold(e))) == 4


def test_ordered_key_collision_keeps_both_members():
    """Two members with equal ordered_key compute different nodes at label 2."""
    a, b = Node("add", "tanh", 1, x, h), Node("add", "tanh", 1, h, x)
    tree = unfold(Node("add", "tanh", 0, a, b))
    one, two = apply_swaps(tree, {3}), apply_swaps(tree, {1, 3})
    assert one.ordered_key() == two.ordered_key() and position_key(one) != position_key(two)
    keys = {position_key(m) for m in iso_class(tree)}
    assert position_key(one) in keys and position_key(two) in keys and len(keys) == 8


def test_apply_swaps_rejects_unknown_labels():
    with pytest.raises(CellGraphError, match=r"heap labels \[5\] are not internal positions"):
        apply_swaps(unfold(Node("add", "tanh", 0, x, h)), {5})

