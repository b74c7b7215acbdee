"""How a cell departs from a target cell (the GRU), node by node.

The nodes of the two cells are matched by their *shape code*
(:func:`cellgraph.algorithms.shape.shape_code`: the canonical form of the node's whole subtree
with every trainable tuple written ``W`` and every identity tuple ``I``, so that the run's tuples
``t0, t1, ...`` and the GRU's ``(W_r, W_r', b_r), ...`` compare by kind; each operand keeps
the matrix ``L_r`` or ``R_r`` it is multiplied by, except on the identity tuple, and a
commutative op's operands may come in either order). Per state the two cells make (matched by name, e.g. ``h``):

* the *nodes* of a cell are the distinct generated nodes of its DAG (a node two parents use is
  one node), the root included;
* nodes are paired by equal shape code, as multisets (the GRU's ``r_t`` and ``z_t`` have one
  code: a cell with one such gate pairs one of them);
* a node of the cell left without a partner is **new**, a node of the target left without one
  is **missing**, the paired ones are **kept**.

A shape code covers the whole subtree below a node, so a change at one node makes every node
above it new as well (and the target's nodes above the changed one missing): the kept nodes are
the target's subtrees the cell computes unchanged. The cell has the target's structure
(``same``) where the roots' codes are equal, which holds exactly when no node is new or
missing, apart from a root that is a leaf. A state only one of the two cells makes has all its
nodes new (or missing).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from cellgraph.algorithms.shape import shape_code
from cellgraph.cell.expr import Expr, Node
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout

__all__ = ["StateDiff", "cell_diff"]


@dataclass(frozen=True)
class StateDiff:
    """The node-by-node difference of one state (module docstring); ``kept`` and ``new`` are
    nodes of the cell, ``missing`` nodes of the target, each in DAG order (children first)."""

    state: str
    kept: tuple[Node, ...]
    new: tuple[Node, ...]
    missing: tuple[Node, ...]
    same: bool


def _unpaired(nodes: tuple[Node, ...], codes: dict[Node, tuple], other: Counter) -> tuple[Node, ...]:
    """The ``nodes`` left without a partner once each takes one of ``other``'s codes."""
    left = Counter(other)
    out = []
    for n in nodes:
        if left[codes[n]] > 0:
            left[codes[n]] -= 1
        else:
            out.append(n)
    return tuple(out)


def _state_diff(state: str, root: Expr | None, layout: Layout, goal: Expr | None,
                goal_layout: Layout) -> StateDiff:
    nodes = root.internal_nodes() if root is not None else ()
    goal_nodes = goal.internal_nodes() if goal is not None else ()
    codes = {n: shape_code(n, layout) for n in nodes}
    goal_codes = {n: shape_code(n, goal_layout) for n in goal_nodes}
    new = _unpaired(nodes, codes, Counter(goal_codes.values()))
    missing = _unpaired(goal_nodes, goal_codes, Counter(codes.values()))
    same = (root is not None and goal is not None
            and shape_code(root, layout) == shape_code(goal, goal_layout))
    return StateDiff(state, tuple(n for n in nodes if n not in new), new, missing, same)


def cell_diff(cell: MultiCell, layout: Layout, target: MultiCell, target_layout: Layout) -> tuple[StateDiff, ...]:
    """One :class:`StateDiff` per state of ``cell`` (over ``layout``), then per state only
    ``target`` (over ``target_layout``) makes."""
    roots = {g.state: g.root for g in cell}
    goals = {g.state: g.root for g in target}
    states = list(dict.fromkeys([*roots, *goals]))
    return tuple(_state_diff(s, roots.get(s), layout, goals.get(s), target_layout) for s in states)
