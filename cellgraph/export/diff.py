"""A cell beside a target cell as sympy equations, marked node by node
(:mod:`cellgraph.algorithms.celldiff` defines new, missing and kept nodes).

Every equation of the cell (:func:`cellgraph.export.symbolic.equations`, one per generated node,
children first) is marked ``+`` where its node is new and left unmarked where the target has the
same subtree; a last line, marked ``-``, names the target's missing nodes as the target's own
equations name them (``cellgraph target gru --format sympy`` prints those).
"""

from __future__ import annotations

from cellgraph.algorithms.celldiff import cell_diff
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.cell.names import node_names, subscripted
from cellgraph.export.symbolic import equations, sstr
from cellgraph.targets import Target

__all__ = ["diff_lines"]


def diff_lines(cell: MultiCell, layout: Layout, goal: Target) -> list[str]:
    """The lines that show how ``cell`` (over ``layout``) departs from ``goal``: a count line,
    the marked equations and the missing nodes (module docstring); one line where the
    structures are the same."""
    diffs = cell_diff(cell, layout, goal.cell, goal.layout)
    new = {n for d in diffs for n in d.new}
    missing = [n for d in diffs for n in d.missing]
    kept = sum(len(d.kept) for d in diffs)
    if all(d.same for d in diffs):
        return [f"the structure of {goal.name}: all {kept} nodes kept, none new or missing"]
    size = len({n for g in goal.cell for n in g.internal_nodes()})
    lines = [f"{len(new)} new, {len(missing)} missing, {kept} kept ({goal.name} has {size} nodes)"]
    names = {subscripted(*name): node for node, name in node_names(cell).items()}
    lines += [f"{'+' if names.get(eq.lhs.name) in new else ' '} {sstr(eq)}" for eq in equations(cell, layout)]
    if missing:
        theirs = node_names(goal.cell)
        lines.append(f"- missing, as {goal.name} names them: {', '.join(subscripted(*theirs[n]) for n in missing)}")
    return lines
