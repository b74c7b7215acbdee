"""The planted regression task: continuous inputs, the teacher's standardised readout as targets."""

import warnings

import numpy as np
import pytest

from cellgraph.backend import backend
from cellgraph.cell.expr import Leaf, Role
from cellgraph.data.planted import MAX_DRAWS
from cellgraph.data.planted_values import SPLITS, load_planted_values
from cellgraph.errors import CellGraphError
from cellgraph.targets import target

SMALL = dict(n_train=60, n_val=20, n_test=20, seq_len=5, p=4, n_out=3)


def test_seeded_and_shaped():
    a, b, c = (load_planted_values("mgu", seed=s, **SMALL) for s in (1, 1, 2))
    for s in SPLITS:
        assert np.array_equal(a.inputs[s], b.inputs[s]) and np.array_equal(a.targets[s], b.targets[s])
    assert not np.array_equal(a.targets["train"], c.targets["train"])
    assert a.inputs["val"].shape == (20, 5, 4) and a.targets["test"].shape == (20, 5, 3)
    assert a.info() == {"teacher": "mgu", "seed": 1, "p": 4, "n_out": 3, "seq_len": 5, "weight_scale": 2.0,
                        "n_train": 60, "n_val": 20, "n_test": 20}


def test_targets_are_the_teachers_standardised_readout():
    d = load_planted_values("mut3", seed=0, **SMALL)
    assert d.cell == target("mut3").cell and d.layout == target("mut3").layout
    flat = d.targets["train"].reshape(-1, 3)
    assert np.allclose(flat.mean(0), 0, atol=1e-12) and np.allclose(flat.std(0), 1)
    # step by step with the numpy backend: the targets are an affine map of the teacher's h_t
    x = d.inputs["val"]
    hs, h = [], np.zeros((len(x), d.p))
    for t in range(x.shape[1]):
        leaves = {Leaf("x", Role.DATA): x[:, t], Leaf("h", Role.PREV): h}
        h = backend("numpy").evaluate_cell(d.cell, leaves, d.params)["h"]
        hs.append(h)
    states = np.stack(hs, 1).reshape(-1, d.p)
    design = np.hstack([states, np.ones((len(states), 1))])
    y = d.targets["val"].reshape(-1, 3)
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    assert np.abs(design @ coef - y).max() < 1e-8


def test_the_teacher_matters():
    a, b = (load_planted_values(t, seed=0, **SMALL) for t in ("mgu", "mut1"))
    assert np.array_equal(a.inputs["train"], b.inputs["train"])
    assert not np.allclose(a.targets["train"], b.targets["train"])


def test_random_teacher_and_non_finite():
    d = load_planted_values("random:3", seed=0, **SMALL)
    assert d.draws >= 1 and d.info()["draws"] == d.draws
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused by name, not with numpy's RuntimeWarnings
        with pytest.raises(CellGraphError, match="planted teacher gru: state h"):
            load_planted_values("gru", weight_scale=1e308, **SMALL)
    redrawn = load_planted_values("random:3", weight_scale=1e100, **{**SMALL, "seq_len": 20})
    assert 1 < redrawn.draws <= MAX_DRAWS


@pytest.mark.parametrize("bad", [dict(n_train=0), dict(n_val=0), dict(n_test=0), dict(p=0), dict(seq_len=0),
                                 dict(n_out=0)])
def test_bad_sizes(bad):
    with pytest.raises(CellGraphError, match="sizes must be >= 1"):
        load_planted_values("gru", **{**SMALL, **bad})


def test_unknown_teacher():
    with pytest.raises(CellGraphError, match="unknown target 'nope'"):
        load_planted_values("nope", **SMALL)


def test_sizes_of_one_are_allowed():
    d = load_planted_values("gru", n_train=1, n_val=1, n_test=1, seq_len=1, p=1, n_out=1)
    assert d.inputs["train"].shape == (1, 1, 1) and d.targets["test"].shape == (1, 1, 1)


def test_the_defaults_are_the_documented_task():
    """MGU, 1,000/200/200 sequences of 10 steps, p = 8, 8 outputs, weight scale 2, bias scale 0.1
    (docs/discover.md, *The planted regression task*)."""
    d = load_planted_values()
    assert d.info() == {"teacher": "mgu", "seed": 0, "p": 8, "n_out": 8, "seq_len": 10, "weight_scale": 2.0,
                        "n_train": 1000, "n_val": 200, "n_test": 200}
    small = load_planted_values(**SMALL)
    assert np.array_equal(small.targets["val"], load_planted_values(bias_scale=0.1, **SMALL).targets["val"])
    assert not np.array_equal(small.targets["val"], load_planted_values(bias_scale=1.1, **SMALL).targets["val"])
