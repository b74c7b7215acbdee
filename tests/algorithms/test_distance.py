"""VD, TD and min-over-Iso TD (paper Sec. 3.3; docs/paper-notes.md,
*Tree distances: VD, TD and Iso*) against brute-force references written straight from the
paper's definitions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st
from strategies import DETERMINISTIC, isomorphs, trees

from cellgraph.algorithms.distance import MATCHES, multiplicities, td, td_dag, td_iso, vd
from cellgraph.algorithms.isomorphism import apply_swaps, iso_class
from cellgraph.cell.expr import Node, h, x
from cellgraph.cell.tree import Tree, unfold
from cellgraph.errors import CellGraphError
from cellgraph.targets import target

RTOL = 1e-12


# --- references: the paper's definitions, literally --------------------------------------
def heap_labels(tree: Tree) -> dict[int, np.ndarray]:
    """``I(T)`` with the vectors: internal nodes only, root 1, children 2i and 2i+1."""
    out: dict[int, np.ndarray] = {}
    queue = [(1, tree)]
    while queue:
        label, t = queue.pop()
        if t.children:
            out[label] = t.vector
            queue += [(2 * label, t.children[0]), (2 * label + 1, t.children[1])]
    return out


def vd_ref(t1: Tree, t2: Tree) -> float:
    v1, v2 = heap_labels(t1), heap_labels(t2)
    return (sum(float(np.sum((v1[i] - v2[i]) ** 2)) for i in v1.keys() & v2.keys())
            + sum(float(np.sum(v1[i] ** 2)) for i in v1.keys() - v2.keys())
            + sum(float(np.sum(v2[i] ** 2)) for i in v2.keys() - v1.keys()))


def all_subtrees(tree: Tree) -> list[Tree]:
    """``Subtree(T, n)`` for every node ``n`` of ``V(T)``, leaves included."""
    return [tree] + [s for c in tree.children for s in all_subtrees(c)]


def td_ref(t_pred: Tree, t_tgt: Tree, match: str = "any") -> float:
    """``any``: the paper's TD; ``internal``: a predicted subtree with an internal root matches
    only target subtrees with an internal root (unless the target is a leaf; a predicted leaf
    still matches a target leaf and adds nothing); ``root``: VD of the whole trees."""
    if match == "root":
        return vd_ref(t_pred, t_tgt)
    targets = all_subtrees(t_tgt)
    if match == "internal" and not t_tgt.is_leaf:
        targets = [t for t in targets if not t.is_leaf]
    return sum(min(vd_ref(s1, s2) for s2 in targets) for s1 in all_subtrees(t_pred) if not s1.is_leaf)


def iso_ref(tree: Tree) -> list[Tree]:
    """All 2^k swap patterns of the commutative positions (duplicates do not change a min)."""
    if tree.is_leaf:
        return [tree]
    first, second = tree.children
    out = [Tree(tree.expr, (a, b), tree.edges, tree.vector)
           for a, b in itertools.product(iso_ref(first), iso_ref(second))]
    return out + [t.swap() for t in out] if tree.expr.commutative else out


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=RTOL, abs_tol=1e-300)


# --- properties ------------------------------------------------------------------------
@DETERMINISTIC
@given(trees(vectors="position"), trees(vectors="position"))
def test_vd_equals_the_definition(t1, t2):
    d = vd(t1, t2)
    assert type(d) is float and close(d, vd_ref(t1, t2))
    assert d == vd(t2, t1) and d >= 0
    assert vd(t1, t1) == 0.0


@DETERMINISTIC
@given(trees(vectors="position"), trees(vectors="position"), st.sampled_from(MATCHES))
def test_td_of_every_match_equals_its_definition(t_pred, t_tgt, match):
    d = td(t_pred, t_tgt, match=match)
    assert type(d) is float and close(d, td_ref(t_pred, t_tgt, match)) and d >= 0
    assert td(t_pred, t_pred, match=match) == 0.0
    assert td(t_pred, t_tgt, match="internal") >= td(t_pred, t_tgt)  # fewer subtrees to match


@DETERMINISTIC
@given(trees(vectors="node", max_nodes=3), trees(vectors="node", max_nodes=3), st.sampled_from(MATCHES))
def test_td_iso_of_every_match_equals_min_over_brute_force_isomorphs(t_pred, t_tgt, match):
    """Node vectors, as in a cell: ``Iso`` skips swaps of equal subtrees, which are no-ops then."""
    assert close(td_iso(t_pred, t_tgt, match=match), min(td_ref(t_pred, t, match) for t in iso_ref(t_tgt)))


def test_zero_vectors_are_at_td_zero_from_any_target_only_when_leaves_match():
    """TD's degenerate minimum (docs/paper-notes.md, *TD's zero minimum*): every predicted
    subtree may match a target leaf at the cost of its own mass, which is 0 for zero vectors."""
    tgt = target("gru").graph.unfold().with_vectors(lambda e: np.ones(3))
    zeros = target("gru").graph.unfold().with_vectors(lambda e: np.zeros(3))
    assert td(zeros, tgt) == 0.0 and td_iso(zeros, tgt) == 0.0
    assert td(zeros, tgt, match="internal") > 0 and td(zeros, tgt, match="root") == vd(zeros, tgt) > 0
    with pytest.raises(CellGraphError, match="unknown TD match 'leaf'"):
        td(zeros, tgt, match="leaf")


@DETERMINISTIC
@given(trees(vectors="position", max_nodes=3), trees(vectors="position", max_nodes=3))
def test_td_iso_equals_min_over_brute_force_isomorphs(t_pred, t_tgt):
    d = td_iso(t_pred, t_tgt)
    assert close(d, min(td_ref(t_pred, t) for t in iso_ref(t_tgt)))
    assert d <= td(t_pred, t_tgt)


@DETERMINISTIC
@given(st.data())
def test_td_iso_is_the_same_for_every_isomorph_of_the_target(data):
    t_pred = data.draw(trees(vectors="node"))
    t_tgt = data.draw(trees(vectors="node"))
    other = data.draw(isomorphs(t_tgt))
    assert close(td_iso(t_pred, other), td_iso(t_pred, t_tgt))
    assert td_iso(other, t_tgt) == 0.0


@DETERMINISTIC
@given(trees(vectors="node", min_nodes=1, max_nodes=6), trees(vectors="node"), st.sampled_from(MATCHES))
def test_td_dag_equals_td_of_the_unfolded_tree(t_pred, t_tgt, match):
    vectors = {s.expr: s.vector for s in t_pred.subtrees()}
    assert close(td_dag(t_pred.expr, vectors, t_tgt, match), td(t_pred, t_tgt, match))
    mult = multiplicities(t_pred.expr)
    assert sum(mult[n] for n in t_pred.expr.internal_nodes()) == t_pred.n_internal()


# --- examples --------------------------------------------------------------------------
def test_small_example_by_hand():
    a = Node("add", "tanh", 0, x, h)
    b = Node("mul", "identity", 1, a, x)
    v = {a: np.array([1.0, 0.0]), b: np.array([0.0, 2.0])}
    pred, tgt = unfold(a).with_vectors(lambda e: v.get(e, np.zeros(2))), unfold(b).with_vectors(
        lambda e: v.get(e, np.zeros(2)))
    # labels: pred {1: a}; tgt {1: b, 2: a}
    assert vd(pred, tgt) == (1 + 4) + 1
    # pred's root a matches tgt's subtree at label 2 exactly; leaves add nothing
    assert td(pred, tgt) == 0.0
    # tgt's root: min(VD vs pred's tree = 6, vs a leaf = mass = 4 + 1); tgt's a: 0
    assert td(tgt, pred) == 5.0
    assert td_dag(b, v, pred) == td(tgt, pred)


def test_shared_nodes_count_once_per_position():
    a = Node("add", "tanh", 0, x, h)
    root = Node("mul", "identity", 1, a, a)
    assert multiplicities(root) == {root: 1, a: 2, x: 2, h: 2}
    v = {a: np.array([3.0]), root: np.array([1.0])}
    tgt = unfold(Node("add", "tanh", 0, h, x)).with_vectors(lambda e: np.zeros(1))
    # each copy of a: min(vs tgt's root ||3 - 0||^2, vs a leaf mass(a) = 9) = 9;
    # the root: min(vs tgt's root 1 + 9 + 9, vs a leaf 1 + 9 + 9) = 19
    assert td_dag(root, v, tgt) == 2 * 9 + 19 == td(unfold(root).with_vectors(lambda e: v.get(e, 0 * v[a])), tgt)


def test_leaf_trees():
    t = unfold(Node("add", "tanh", 0, x, h)).with_vectors(lambda e: np.array([2.0, 1.0]))
    leaf = unfold(x)
    assert vd(leaf, t) == vd(t, leaf) == 5.0
    assert td(leaf, t) == 0.0 and td(t, leaf) == 5.0 == td_iso(t, leaf)


def test_gru_target_batched_orientations_equal_one_by_one():
    tree = target("gru").graph.unfold()
    rng = np.random.default_rng(1)
    node_vector = {e: rng.normal(size=4) for e in tree.expr.walk()}
    t_tgt = tree.with_vectors(node_vector)
    # a prediction near one isomorph of the target
    near = apply_swaps(t_tgt, {1, 3})
    t_pred = near.with_vectors(lambda e: node_vector[e] + 0.1 * rng.normal(size=4))
    each = [td(t_pred, m) for m in iso_class(t_tgt)]
    assert len(each) == 512 and len(set(each)) > 10 and min(each) < 1.0 < max(each)
    assert td_iso(t_pred, t_tgt) == pytest.approx(min(each), rel=RTOL)


def test_missing_or_mismatched_vectors_are_errors():
    t = unfold(Node("add", "tanh", 0, x, h))
    with pytest.raises(CellGraphError, match="vd: first tree: internal node at heap label 1"):
        vd(t, t)
    with pytest.raises(CellGraphError, match="td: target tree: internal node at heap label 1"):
        td(t.with_vectors(lambda e: np.zeros(2)), t)
    with pytest.raises(CellGraphError, match="predicted vectors have length 2, target vectors 3"):
        td(t.with_vectors(lambda e: np.zeros(2)), t.with_vectors(lambda e: np.zeros(3)))
    with pytest.raises(CellGraphError, match="td_dag: predicted node tanh\\[add_0\\]\\(x, h\\) has no vector"):
        td_dag(t.expr, {}, t.with_vectors(lambda e: np.zeros(2)))
