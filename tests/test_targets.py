"""The GRU and LSTM targets: sizes, layouts and search spaces."""

import numpy as np
import pytest

from cellgraph import CellGraphError, target, target_names
from cellgraph.targets import torch_tuples


def test_all_targets_build():
    assert set(target_names()) == {"gru", "gru_torch", "lstm", "lstm_torch"}
    sizes = {n: [len(g.internal_nodes()) for g in target(n).cell] for n in target_names()}
    assert sizes == {"gru": [8], "gru_torch": [9], "lstm": [6, 3], "lstm_torch": [6, 3]}


def test_gru_layout_matches_the_paper():
    t = target("gru")
    assert [s.name for s in t.layout.tuples] == ["r", "z", "h", "id"]
    assert t.layout.identity_indices == {3}
    space = t.spaces[0]
    assert [str(l) for l in space.leaves] == ["x", "h", "zero"]
    assert space.activations == ("sigmoid", "tanh", "one_minus", "identity")


def test_unknown_target_lists_known():
    with pytest.raises(CellGraphError, match="known: gru, gru_torch"):
        target("rnn")


def test_torch_tuples_shapes_are_checked():
    p = 3
    with pytest.raises(CellGraphError, match="expected weight_ih"):
        torch_tuples("gru_torch", np.zeros((9, 2)), np.zeros((9, 3)), np.zeros(9), np.zeros(9))
    tuples = torch_tuples("lstm_torch", np.ones((12, p)), np.ones((12, p)), np.ones(12), np.ones(12))
    assert len(tuples) == 5 and tuples[0][2].tolist() == [2.0, 2.0, 2.0]
