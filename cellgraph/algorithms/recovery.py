"""Exact structure recovery: whether a discovered cell has a teacher's structure (the planted
task, docs/paper-notes.md, *Planted teachers*).

The *structure* of a cell is its DAG with every generated node labelled by its op, its
activation and the kind of its tuple, trainable ``W`` or identity ``I``, as
:func:`cellgraph.algorithms.shape.shape` labels it; leaves by role and name. A found cell
recovers the teacher exactly when, state by state, the two structures are isomorphic as
DAGs. Which trainable tuple a node uses does not matter, whether two nodes are one shared
node does. An edge of a commutative op carries no side: ``o(L a, R b)`` and ``o(L b, R a)``
on ``W`` differ only in which free matrix is called ``L``, and on ``I`` not at all; a
non-commutative op keeps its operands' sides.

How other rewrites are treated:

* commutative swaps (``a + b`` against ``b + a``, ``z * n`` against ``n * z``) and the
  renaming of trainable tuples are the same structure;
* node sharing is structure: MGU's gate ``f`` used as both reset and update gate is one node,
  MUT2's ``r`` and ``z`` are two. Their unfolded trees, and so their
  :func:`~cellgraph.algorithms.shape.shape_form`, are the same; here they differ;
* algebraic rewrites that compute the same function family are different structures and
  are not counted: ``(1 - z) * h + z * n`` against ``h + z * (n - h)``, a tuple's bias
  split over two nodes, an identity-tuple node ``u(0 + I a)`` inserted on an edge;
* a trainable tuple whose teacher fixes a matrix to ``I`` (``mut1``'s ``L_h``) is ``W``:
  the found cell need not learn the ``I``.

:func:`structure_form` is a canonical string of that structure, so the test is an equality of
strings and the cell search can hash it (:mod:`cellgraph.discover.cache`): each node is
written at its first visit of a depth-first walk from the root, its operands in the order
of their unfolded-tree codes (either order under a commutative op), and again as a
reference ``#k``. Distinct nodes with the same unfolded tree (MUT2's ``r`` and ``z``) are
the only choice left; the form is the least string over their orders, which makes it equal
for isomorphic structures, and a string that writes every node and edge reachable from the
root tells non-isomorphic ones apart.
"""

from __future__ import annotations

from functools import cache
from itertools import permutations, product
from typing import Callable

from cellgraph.cell.expr import Expr, Leaf, Node
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.cell.names import as_multicell

__all__ = ["structure_form", "exact_recovery"]


def structure_form(graph: CellGraph, layout: Layout) -> str:
    """The canonical string of one state's structure (module docstring): equal for two
    graphs exactly when their DAGs are isomorphic with nodes labelled by op, activation and
    tuple kind (``W`` trainable, ``I`` identity under ``layout``), leaves by role and name."""
    identity = layout.identity_indices

    def label(e: Expr) -> str:
        if isinstance(e, Leaf):
            return f"{e.role.value}:{e.name}"
        return f"{e.op}.{e.act}.{'I' if e.tuple in identity else 'W'}"

    @cache
    def tree(e: Expr) -> str:
        if isinstance(e, Leaf):
            return label(e)
        a, b = tree(e.left), tree(e.right)
        return f"{label(e)}({','.join(sorted((a, b)) if e.commutative else (a, b))})"

    twins: dict[str, list[Node]] = {}
    for n in graph.internal_nodes():
        twins.setdefault(tree(n), []).append(n)
    tied = [group for group in twins.values() if len(group) > 1]
    return min(_walk(graph.root, label, tree, {n: k for order in orders for k, n in enumerate(order)})
               for orders in product(*(permutations(group) for group in tied)))


def _walk(root: Expr, label: Callable[[Expr], str], tree: Callable[[Expr], str], rank: dict[Node, int]) -> str:
    """The depth-first string of ``root``'s DAG, operands of a commutative node ordered by
    ``(tree code, rank)``, a node seen before written ``#k`` (its visit number)."""
    seen: dict[Node, int] = {}

    def visit(e: Expr) -> str:
        if isinstance(e, Leaf):
            return label(e)
        if e in seen:
            return f"#{seen[e]}"
        seen[e] = len(seen)
        operands = [e.left, e.right]
        if e.commutative:
            operands.sort(key=lambda c: (tree(c), rank.get(c, 0)))
        return f"{label(e)}({visit(operands[0])},{visit(operands[1])})"

    return visit(root)


def exact_recovery(
    found: MultiCell | CellGraph, found_layout: Layout, teacher: MultiCell | CellGraph, teacher_layout: Layout
) -> bool:
    """Whether ``found`` (over ``found_layout``) has the structure of ``teacher`` (over
    ``teacher_layout``): the same states in the same order, each state's
    :func:`structure_form` the teacher's. See the module docstring for the rewrites that
    count as the same structure."""
    a, b = as_multicell(found).validate(found_layout), as_multicell(teacher).validate(teacher_layout)
    return a.states == b.states and all(
        structure_form(ga, found_layout) == structure_form(gb, teacher_layout) for ga, gb in zip(a, b))
