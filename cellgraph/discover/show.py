"""How a search candidate reads: its one-line form and its sympy equations, as ``cellgraph
discover`` and the demo print them (docs/reading-cells.md)."""

from __future__ import annotations

from cellgraph.algorithms.canonical import canonical_string
from cellgraph.cell.expr import Expr
from cellgraph.discover.space import to_cell
from cellgraph.export.symbolic import equations, sstr

__all__ = ["candidate_form", "candidate_equations"]


def candidate_form(root: Expr) -> str:
    """The one-line form ``h = ...`` of candidate ``root`` (as ``cellgraph target --format form``
    prints a target)."""
    cell, layout = to_cell(root)
    return f"h = {canonical_string(cell.output, layout)}"


def candidate_equations(root: Expr, indent: str = "    ") -> str:
    """The sympy equations of candidate ``root``, one node a line (``c_1 = ...``, then ``h_t =
    ...``), each line after ``indent``."""
    return "\n".join(indent + line for line in sstr(equations(*to_cell(root))).splitlines())
