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


def test_the_default_ladder_and_eta_carry_through():
    assert Fidelity.successive_halving() == Fidelity((1, 3, 9), 3)
    assert Fidelity.successive_halving(2, 2, 4) == Fidelity((2, 4, 8, 16), 2)


def test_promotion_keeps_the_floor_of_len_over_eta():
    f = Fidelity((1, 3), 3)
    # 5 losses: 5 // 3 = 1 goes on, so the second best stops (5 / 3 would let it through)
    assert f.promote(0.1, [0.1, 0.2, 0.3, 0.4, 0.5])
    assert not f.promote(0.2, [0.1, 0.2, 0.3, 0.4, 0.5])


def test_to_dict_names_the_rungs_and_eta():
    """The study records these settings; a stored study is compared with them key by key."""
    assert Fidelity((20, 60), 3).to_dict() == {"epochs": [20, 60], "eta": 3}
    assert "probes" not in Fidelity((20, 60), 3).to_dict()  # studies made before probes resume


def test_probe_rungs_prune_nothing_then_successive_halving_prunes():
    f = Fidelity((1, 5, 20), 10, probes=1)
    assert f.early == (1, 5) and Fidelity((1, 5, 20), 10).early == (1,)
    assert [f.prunes(rung) for rung in range(3)] == [False, True, False]  # a probe, then halving, then full
    assert [Fidelity((1, 5, 20), 10).prunes(rung) for rung in range(3)] == [True, True, False]
    assert [f.prunes(rung, probing=False) for rung in range(3)] == [True, True, False]  # a cell that skips them
    assert Fidelity.from_dict(f.to_dict()) == f and f.to_dict()["probes"] == 1
    assert Fidelity.from_dict({"epochs": [5, 20], "eta": 3}) == Fidelity((5, 20), 3)


@pytest.mark.parametrize("probes", [-1, 3])
def test_probes_must_leave_the_last_rung(probes):
    with pytest.raises(CellGraphError, match="probes must be 0 to 2"):
        Fidelity((1, 5, 20), 3, probes)
