"""Display names of a cell's leaves and generated nodes, without sympy: shared by the
symbolic export (:mod:`cellgraph.export.symbolic`), the drawings (:mod:`cellgraph.export.draw`) and the
JSON files (:mod:`cellgraph.export.jsonio`).

A leaf is named by its role (data ``x`` -> ``x_t``, previous state ``h`` -> ``h_{t-1}``, a
state made earlier in the same step ``c`` -> ``c_t``, ``zero`` -> ``0``, ``e3`` -> ``e_3``);
generated nodes are ``c_1, c_2, ...`` in DAG order and the root of a run is its state at
``t`` (``h_t``, ``c_t``).
"""

from __future__ import annotations

import re

from cellgraph.cell.expr import Expr, Leaf, Node, Role
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.errors import CellGraphError

__all__ = ["CellLike", "as_multicell", "subscripted", "leaf_parts", "node_names"]

_UNIT_VECTOR = re.compile(r"e([0-9]+)")

CellLike = Expr | CellGraph | MultiCell


def as_multicell(obj: CellLike) -> MultiCell:
    """``obj`` as a multi-state cell: an expression is the one state ``h``."""
    if isinstance(obj, MultiCell):
        return obj
    if isinstance(obj, CellGraph):
        return MultiCell((obj,))
    if isinstance(obj, Expr):
        return MultiCell((CellGraph(obj),))
    raise CellGraphError(f"expected an Expr, CellGraph or MultiCell, got {type(obj).__name__}")


def subscripted(base: str, sub: str) -> str:
    """A name with its subscript in LaTeX form: ``("c", "1")`` -> ``c_1``,
    ``("h", "t-1")`` -> ``h_{t-1}``, ``("0", "")`` -> ``0``."""
    if not sub:
        return base
    return f"{base}_{sub}" if len(sub) == 1 else f"{base}_{{{sub}}}"


def leaf_parts(leaf: Leaf) -> tuple[str, str]:
    """``(base, subscript)`` of a leaf's display name: ``x`` -> ``("x", "t")``,
    ``h`` -> ``("h", "t-1")``, ``zero`` -> ``("0", "")``, ``e3`` -> ``("e", "3")``."""
    if leaf.role is Role.DATA or leaf.role is Role.CURRENT:
        return leaf.name, "t"
    if leaf.role is Role.PREV:
        return leaf.name, "t-1"
    unit = _UNIT_VECTOR.fullmatch(leaf.name)
    if unit:
        return "e", unit.group(1)
    return {"zero": ("0", ""), "one": ("1", "")}.get(leaf.name, (leaf.name, ""))


def node_names(cell: CellLike) -> dict[Node, tuple[str, str]]:
    """``(base, subscript)`` of every generated node: a run's root is its state at ``t``,
    the others ``c_1, c_2, ...`` in DAG order over the runs (a node shared by two runs
    keeps its first name)."""
    names: dict[Node, tuple[str, str]] = {}
    roots = {g.root: (g.state, "t") for g in as_multicell(cell) if isinstance(g.root, Node)}
    k = 0
    for g in as_multicell(cell):
        for n in g.internal_nodes():
            if n in names:
                continue
            if n in roots:
                names[n] = roots[n]
            else:
                k += 1
                names[n] = ("c", str(k))
    return names
