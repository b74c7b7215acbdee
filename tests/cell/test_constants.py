"""Filling Algorithm 2's constant leaves (:mod:`cellgraph.cell.constants`): the error for a
missing data or state value names what was given, so a caller can see which key was wrong."""

from __future__ import annotations

import numpy as np
import pytest

from cellgraph.cell.constants import fill_constants
from cellgraph.cell.expr import h, one, x, zero
from cellgraph.errors import CellGraphError


def test_given_values_pass_through_and_constants_are_filled():
    given = np.arange(3.0)
    filled = fill_constants([x, zero, one], {x: given}, 3)
    assert filled[x] is given and list(filled) == [x, zero, one]
    assert filled[zero].tolist() == [0, 0, 0] and filled[one].tolist() == [1, 1, 1]


def test_a_missing_value_names_the_leaf_and_the_given_ones():
    with pytest.raises(CellGraphError, match=r"^no value given for leaf Leaf\('h'\) \(role prev\); data, prev and "
                                             r"current leaves need one \(given: Leaf\('x'\), Leaf\('zero'\)\)$"):
        fill_constants([x, h], {x: 1.0, zero: 0.0}, 3)
    with pytest.raises(CellGraphError, match=r"\(given: none\)$"):
        fill_constants([h], {}, 3)
