"""Vectors of the constant leaves ``S_aux`` (paper, Sec. 3.2: "auxiliary vectors such as the
zero vector, etc."; docs/paper-notes.md, *Objects: leaves, nodes, tuples*).

A constant leaf (role ``const``) is named

* ``zero``: the zero vector ``0``;
* ``one``: the all-ones vector ``1``;
* ``e0``, ``e1``, ...: the unit vectors of ``R^p`` (``e_k`` has a 1 at index ``k``).

:func:`constant_vector` gives one of them; :func:`fill_constants` and
:func:`default_leaf_values` complete a mapping of leaf values so that callers give only the
data, previous-state and current-state leaves. Arrays are numpy ``float64``; a backend
converts them to its own type.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, TypeVar

import numpy as np

from cellgraph.cell.expr import Leaf, Role
from cellgraph.cell.layout import SearchSpace
from cellgraph.errors import CellGraphError

__all__ = ["constant_vector", "fill_constants", "default_leaf_values"]

_UNIT = re.compile(r"e(0|[1-9][0-9]*)")

V = TypeVar("V")


def constant_vector(leaf: Leaf, p: int) -> np.ndarray:
    """The ``(p,)`` float64 vector of the constant leaf ``leaf`` (``zero``, ``one``, ``e<k>``)."""
    if leaf.role is not Role.CONST:
        raise CellGraphError(
            f"leaf {leaf.name!r} has role {leaf.role.value!r}: only const leaves have a fixed vector"
        )
    if leaf.name == "zero":
        return np.zeros(p)
    if leaf.name == "one":
        return np.ones(p)
    unit = _UNIT.fullmatch(leaf.name)
    if unit is None:
        raise CellGraphError(
            f"unknown constant leaf {leaf.name!r} (known: zero, one, unit vectors e0, e1, ...)"
        )
    k = int(unit.group(1))
    if k >= p:
        raise CellGraphError(f"constant leaf {leaf.name!r}: unit index {k} out of range for p = {p}")
    vector = np.zeros(p)
    vector[k] = 1.0
    return vector


def fill_constants(leaves: Iterable[Leaf], values: Mapping[Leaf, V], p: int) -> dict[Leaf, V | np.ndarray]:
    """Values of ``leaves`` in their order: the given one, else the constant's vector.

    Given values are passed through unchanged (any array type). A data, previous-state or
    current-state leaf without a value is an error.
    """
    filled: dict[Leaf, V | np.ndarray] = {}
    for leaf in leaves:
        if leaf in values:
            filled[leaf] = values[leaf]
        elif leaf.role is Role.CONST:
            filled[leaf] = constant_vector(leaf, p)
        else:
            given = ", ".join(repr(l) for l in values) or "none"
            raise CellGraphError(
                f"no value given for leaf {leaf!r} (role {leaf.role.value}); data, prev and "
                f"current leaves need one (given: {given})"
            )
    return filled


def default_leaf_values(space: SearchSpace, values: Mapping[Leaf, V], p: int) -> dict[Leaf, V | np.ndarray]:
    """Values of Algorithm 2's initial nodes ``space.leaves`` (``S_data``, ``S_prev``,
    ``S_aux``, in that order), constants filled in by :func:`constant_vector`."""
    return fill_constants(space.leaves, values, p)
