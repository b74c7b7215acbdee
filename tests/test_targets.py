"""The target cells (GRU, LSTM and the planted teachers MGU, MUT1-3): sizes, layouts, search
spaces, and Algorithm 2 building each of them."""

import numpy as np
import pytest

from cellgraph import CellGraphError, Leaf, Role, target, target_names
from cellgraph.backends.numpy.plugin import evaluate, evaluate_cell, search_cell
from cellgraph.targets import torch_tuples

SIZES = {"gru": [8], "gru_torch": [9], "lstm": [6, 3], "lstm_torch": [6, 3],
         "rnn": [1], "mgu": [7], "mut1": [9], "mut2": [8], "mut3": [9]}


def test_all_targets_build():
    assert set(target_names()) == set(SIZES)
    sizes = {n: [len(g.internal_nodes()) for g in target(n).cell] for n in target_names()}
    assert sizes == SIZES


def _distance_alpha(targets):
    """Scores that make iteration ``k`` choose the candidate whose vector is ``targets[k-1]``
    (``N + 1 - k`` for it exactly, below 1 for a vector away from every target)."""
    n = len(targets)
    return lambda v: max(n + 1 - k - 1e6 * np.linalg.norm(v - t) for k, t in enumerate(targets, 1))


@pytest.mark.parametrize("name", target_names())
def test_algorithm2_builds_every_target(name):
    """Algorithm 2's numpy reference, led node by node to the target's vectors (random tuples,
    identity tuples fixed), builds exactly the target's cell: each node is a candidate of its
    search space, with its operands in Algorithm 2's order (the earlier node on the left)."""
    t, rng, p = target(name), np.random.default_rng(7), 5
    params = [(np.eye(p), np.eye(p), np.zeros(p)) if r in t.layout.identity_indices
              else (rng.normal(size=(p, p)), rng.normal(size=(p, p)), rng.normal(size=p))
              for r in range(len(t.layout))]
    leaves = {leaf: rng.normal(size=p) for g in t.cell for leaf in g.leaves()
              if leaf.role in (Role.DATA, Role.PREV)}
    states = evaluate_cell(t.cell, leaves, params)
    alphas = []
    for g in t.cell:
        values = evaluate(g.root, {**leaves, **{Leaf(s, Role.CURRENT): v for s, v in states.items()}}, params)
        alphas.append(_distance_alpha([values[n] for n in g.internal_nodes()]))
    results = search_cell(t.spaces, params, leaves, alphas, t.cell.states)
    assert [r.root for r in results] == [g.root for g in t.cell]
    assert [r.chosen for r in results] == [g.internal_nodes() for g in t.cell]


def test_gru_layout_matches_the_paper():
    t = target("gru")
    assert [s.name for s in t.layout.tuples] == ["r", "z", "h", "id"]
    assert t.layout.identity_indices == {3}
    space = t.spaces[0]
    assert [str(l) for l in space.leaves] == ["x", "h", "zero"]
    assert space.activations == ("sigmoid", "tanh", "one_minus", "identity")


def test_unknown_target_lists_known():
    with pytest.raises(CellGraphError, match="known: gru, gru_torch"):
        target("elman")


def test_torch_tuples_shapes_are_checked():
    p = 3
    with pytest.raises(CellGraphError, match="expected weight_ih"):
        torch_tuples("gru_torch", np.zeros((9, 2)), np.zeros((9, 3)), np.zeros(9), np.zeros(9))
    tuples = torch_tuples("lstm_torch", np.ones((12, p)), np.ones((12, p)), np.ones(12), np.ones(12))
    assert len(tuples) == 5 and tuples[0][2].tolist() == [2.0, 2.0, 2.0]


def test_a_hand_made_target_is_checked():
    """A :class:`Target` checks its cell against its layout, one search space per state, each
    space's tuples and its number of iterations."""
    from dataclasses import replace
    gru = target("gru")
    space = gru.spaces[0]
    assert replace(gru, name="copy").cell == gru.cell
    with pytest.raises(CellGraphError, match=r"^target bad: one search space per state is needed$"):
        replace(gru, name="bad", spaces=(space, space))
    with pytest.raises(CellGraphError, match=r"^target bad: state h has 8 generated nodes but n_iterations=7$"):
        replace(gru, name="bad", spaces=(replace(space, n_iterations=7),))
    with pytest.raises(CellGraphError, match=r"^search space: tuple index 9 out of range"):
        replace(gru, name="bad", spaces=(replace(space, tuples=(*space.tuples, 9)),))
    with pytest.raises(CellGraphError, match="out of range"):
        replace(gru, name="bad", layout=type(gru.layout)(gru.layout.tuples[:2]))
