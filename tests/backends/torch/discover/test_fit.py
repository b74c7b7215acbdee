"""The search's evaluator: a fixed cell trained from scratch on planted values, restarts batched."""

import math

import pytest
import torch

from cellgraph.backends.torch.discover.fit import FitResult, FitSettings, _clip_each, fit_cell
from cellgraph.data.planted_values import load_planted_values
from cellgraph.errors import CellGraphError
from cellgraph.targets import target

SMALL = dict(n_train=100, n_val=40, n_test=40, seq_len=5, p=4, n_out=4)


@pytest.fixture(scope="module")
def data():
    return load_planted_values("mgu", seed=0, **SMALL)


def test_seeded_restarts_and_scores(data):
    t = target("mgu")
    settings = FitSettings(epochs=3, restarts=3, batch_size=25)
    a, b, c = (fit_cell(t.cell, t.layout, data, settings, seed=s) for s in (0, 0, 1))
    assert a.val == b.val and a.test == b.test and a.val != c.val
    assert len(a.val) == 3 and len(set(a.val)) == 3  # three different initialisations
    assert a.loss == min(a.val) and a.test_loss == a.test[a.best]


def test_restarts_train_as_if_alone(data):
    """Restart k of a batched fit is the fit of that initialisation alone: same seed, same result."""
    t = target("gru")
    settings = FitSettings(epochs=2, restarts=2, batch_size=25)
    both = fit_cell(t.cell, t.layout, data, settings, seed=5)
    torch.manual_seed(0)
    alone = fit_cell(t.cell, t.layout, data, FitSettings(epochs=2, restarts=1, batch_size=25), seed=5)
    assert math.isclose(both.val[0], alone.val[0], rel_tol=1e-4)


def test_training_lowers_the_error(data):
    t = target("mgu")
    short, longer = (fit_cell(t.cell, t.layout, data, FitSettings(epochs=e, restarts=2, batch_size=25)).loss
                     for e in (1, 15))
    assert longer < 0.5 * short


def test_clip_each_restart_alone():
    grads = {"w": torch.tensor([[3.0, 4.0], [0.3, 0.4], [float("nan"), 1.0]])}
    _clip_each(grads, 1.0)
    assert torch.allclose(grads["w"][0], torch.tensor([0.6, 0.8]), atol=1e-5)
    assert torch.allclose(grads["w"][1], torch.tensor([0.3, 0.4]))
    assert torch.equal(grads["w"][2], torch.zeros(2))  # a diverged restart stops, the others go on


def test_a_diverged_restart_counts_as_infinite():
    r = FitResult((float("inf"), 0.5), (float("inf"), 0.6), 0.0)
    assert r.best == 1 and r.loss == 0.5 and r.test_loss == 0.6


@pytest.mark.parametrize("bad", [dict(epochs=0), dict(restarts=0), dict(lr=0.0), dict(clip=-1.0)])
def test_bad_settings(bad):
    with pytest.raises(CellGraphError, match="fit settings must be positive"):
        FitSettings(**bad)


def test_a_fit_leaves_no_tensor_behind(data):
    """A search fits thousands of cells in one process: each fit must free what it made (at an
    earlier commit every fit kept about 55 MB alive, and a search was killed at 23 GB)."""
    import gc

    def alive() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if issubclass(type(o), torch.Tensor))  # type(): no deprecated proxies

    t = target("mgu")
    fit_cell(t.cell, t.layout, data, FitSettings(epochs=1, restarts=2, batch_size=50))
    before = alive()
    for _ in range(3):
        fit_cell(t.cell, t.layout, data, FitSettings(epochs=1, restarts=2, batch_size=50))
    assert alive() <= before
