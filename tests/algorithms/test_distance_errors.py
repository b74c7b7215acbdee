"""Bad input to the tree distances (:mod:`cellgraph.algorithms.distance`): every error names
the tree or cell and the shapes at fault, and the size bound of Iso(T) reaches ``td_iso``."""

from __future__ import annotations

import numpy as np
import pytest

from cellgraph.algorithms.distance import check_match, td_dag, td_iso, vd
from cellgraph.cell.expr import Node, h, x
from cellgraph.cell.tree import Tree, unfold
from cellgraph.errors import CellGraphError

INNER = Node("add", "tanh", 1, x, h)
ROOT = Node("add", "tanh", 0, INNER, h)


def _with(vectors: dict) -> Tree:
    return unfold(ROOT).with_vectors(lambda e: vectors.get(e, np.zeros(2)))


def test_vd_names_the_tree_without_vectors_and_mismatched_shapes():
    good = _with({})
    with pytest.raises(CellGraphError, match=r"^vd: second tree: internal node at heap label 1 "):
        vd(good, unfold(ROOT))
    with pytest.raises(CellGraphError, match=r"^node vectors of different shapes \(2,\) and \(3,\)$"):
        vd(good, _with({ROOT: np.zeros(3)}))


def test_td_dag_names_the_predicted_cell_and_its_shapes():
    target = _with({})
    with pytest.raises(CellGraphError, match=r"^td_dag: predicted cell: node vectors have different shapes "
                                             r"\[\(2,\), \(3,\)\]$"):
        td_dag(ROOT, {INNER: np.zeros(2), ROOT: np.zeros(3)}, target)
    with pytest.raises(CellGraphError, match=r"^td_dag: predicted cell: node vectors must be 1-d, got shapes "
                                             r"\[\(1, 2\), \(2,\)\]$"):
        td_dag(ROOT, {INNER: np.zeros((1, 2)), ROOT: np.zeros(2)}, target)
    assert td_dag(ROOT, lambda node: np.zeros(2), target) == 0.0  # a function of the node also works


def test_unknown_match_lists_the_known_ones():
    with pytest.raises(CellGraphError, match=r"^unknown TD match 'leaf': one of any, internal, root$"):
        check_match("leaf")


def test_td_iso_passes_its_size_bound_on():
    tree = Tree(ROOT, (unfold(INNER), Tree(h))).with_vectors(lambda e: np.zeros(2))
    assert td_iso(tree, tree, max_size=4) == 0.0
    with pytest.raises(CellGraphError, match="has 4 members, more than max_size=3"):
        td_iso(tree, tree, max_size=3)


def test_td_names_the_predicted_tree_without_vectors():
    from cellgraph.algorithms.distance import td

    with pytest.raises(CellGraphError, match=r"^td: predicted tree: internal node at heap label 1 "):
        td(unfold(ROOT), _with({}))
