import pytest

from cellgraph.discover.fidelity import Fidelity
from cellgraph.errors import CellGraphError


def test_successive_halving_rungs_costs_and_promotion():
    f = Fidelity.successive_halving(1, 3, 3)
    assert f.epochs == (1, 3, 9) and f.full == 9
    assert [f.cost(k, resumes=False) for k in range(3)] == [1, 3, 9]
    assert [f.cost(k, resumes=True) for k in range(3)] == [1, 2, 6]
    assert f.promote(0.5, [0.5])  # the first is the best so far
    assert not f.promote(0.9, [0.5, 0.9])  # max(1, 2 // 3) = 1 promoted: 0.5
    assert f.promote(0.4, [0.5, 0.9, 0.7, 0.8, 0.3, 0.4])  # top 2 of 6
    assert not f.promote(0.5, [0.5, 0.9, 0.7, 0.8, 0.3, 0.4])


@pytest.mark.parametrize("epochs, eta", [((), 3), ((3, 1), 3), ((0, 1), 3), ((1, 3), 1)])
def test_bad_ladders_are_refused(epochs, eta):
    with pytest.raises(CellGraphError):
        Fidelity(epochs, eta)
