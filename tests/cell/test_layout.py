"""Layouts and search spaces (:mod:`cellgraph.cell.layout`): the identity tuple is ``(I, I, 0)``,
tuple indices stop one before the layout's length, and every malformed space or layout is a
one-line error that names what is wrong."""

from __future__ import annotations

import pytest

from cellgraph.cell.expr import Leaf, Role, h, x, zero
from cellgraph.cell.layout import Layout, SearchSpace, TupleSpec
from cellgraph.errors import CellGraphError

LAYOUT = Layout((TupleSpec("W"), TupleSpec.identity_tuple()))


def test_the_identity_tuple_is_I_I_0_and_fixed():
    assert TupleSpec.identity_tuple("eye") == TupleSpec("eye", "I", "I", "0", identity=True)
    assert LAYOUT.identity_indices == frozenset({1}) and LAYOUT.trainable_indices == (0,)


def test_layout_errors_name_the_tuples():
    with pytest.raises(CellGraphError, match=r"^layout tuple names must be distinct, got \['W', 'W'\]$"):
        Layout((TupleSpec("W"), TupleSpec("W")))
    assert LAYOUT.index("id") == 1
    with pytest.raises(CellGraphError, match=r"^layout has no tuple 'V' \(has \['W', 'id'\]\)$"):
        LAYOUT.index("V")


def test_tuple_indices_run_from_0_to_one_before_the_length():
    LAYOUT.check_index(0)
    LAYOUT.check_index(1)
    for bad in (2, -1):
        with pytest.raises(CellGraphError, match=rf"^at: tuple index {bad} out of range for a layout of 2 tuples "
                                                 r"\(W, id\)$"):
            LAYOUT.check_index(bad, "at: ")


def _space(**changes) -> SearchSpace:
    fields = dict(tuples=(0, 1), activations=("tanh",), ops=("add",), data=(x,), prev=(h,), aux=(zero,),
                  n_iterations=2)
    return SearchSpace(**{**fields, **changes})


@pytest.mark.parametrize("empty", ["tuples", "activations", "ops"])
def test_a_space_needs_a_tuple_an_activation_and_an_op(empty):
    with pytest.raises(CellGraphError, match="^a search space needs at least one tuple, activation and op$"):
        _space(**{empty: ()})


def test_space_errors_name_the_problem():
    with pytest.raises(CellGraphError, match="^n_iterations must be >= 1, got 0$"):
        _space(n_iterations=0)
    with pytest.raises(CellGraphError, match="^leaf 'h' has role 'prev', not allowed in data$"):
        _space(data=(h,))
    with pytest.raises(CellGraphError, match=r"^leaves must be distinct, got \['x', 'h', 'h'\]$"):
        _space(prev=(h, Leaf("h", Role.PREV)), aux=())
    with pytest.raises(CellGraphError, match=r"^search space: tuple index 2 out of range for a layout of 2 tuples"):
        _space(tuples=(0, 2)).check(LAYOUT)
