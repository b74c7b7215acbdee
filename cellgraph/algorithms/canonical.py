"""Canonical forms of labelled cell trees (paper, Sec. 3.1 "Iso"; docs/paper-notes.md,
*Tree distances: VD, TD and Iso*).

Two unfolded trees are isomorphic when one is obtained from the other by swapping the two
children of nodes whose op is commutative, *together with their edge matrices* (the moves
that generate ``Iso(T)``). The canonical code is the labelled form of the
Aho-Hopcroft-Ullman tree-isomorphism encoding (A. V. Aho, J. E. Hopcroft, J. D. Ullman,
*The Design and Analysis of Computer Algorithms*, 1974, Sec. 3.2): a node's code is built
from its label and its children's codes, the children's codes *sorted* where their order
is free (commutative ops), so isomorphic trees get equal codes and only they do.

* leaf: ``("leaf", role, name)``;
* generated node: ``("node", op, act, tuple, entries)`` with ``entries`` the pairs
  ``(child_code, edge)``, ``edge`` in ``{"L", "R"}``; sorted when the op is commutative, in
  ``(L, R)`` order otherwise.

Given a :class:`~cellgraph.cell.layout.Layout`, the edge labels of nodes whose tuple is an
identity tuple (``L_r = R_r = I``) are dropped (``edge`` is ``None``): there which operand
takes ``L_r`` does not change the function, so ``mul(h, z)`` and ``mul(z, h)`` on the
identity tuple become isomorphic.

networkx's ``rooted_tree_isomorphism`` and ``to_nested_tuple`` ignore labels,
hence this module. The code of a DAG node is computed once per distinct node (memoised
over :meth:`~cellgraph.cell.expr.Expr.walk`) and equals the code of its unfolded tree.
"""

from __future__ import annotations

from cellgraph.cell.expr import IMPLIED_ROLES, Expr, Leaf, Node
from cellgraph.cell.graph import CellGraph
from cellgraph.cell.layout import Layout
from cellgraph.cell.tree import Tree
from cellgraph.errors import CellGraphError

__all__ = ["canonical", "canonical_string", "isomorphic"]

Cell = Tree | Expr | CellGraph


def _root(obj: Cell) -> Expr:
    """The DAG root behind a tree, expression or cell graph.

    A :class:`Tree` always satisfies ``children[edges.index("L")].expr == expr.left``, so
    its canonical code is that of its DAG root, whatever swaps it went through.
    """
    if isinstance(obj, Tree):
        return obj.expr
    if isinstance(obj, CellGraph):
        return obj.root
    if isinstance(obj, Expr):
        return obj
    raise CellGraphError(
        f"canonical form: expected a Tree, Expr or CellGraph, got {type(obj).__name__}"
    )


def canonical(obj: Cell, layout: Layout | None = None) -> tuple:
    """AHU canonical code of the unfolded tree of ``obj`` (see the module docstring).

    Args:
        obj: a :class:`~cellgraph.cell.tree.Tree`, an :class:`~cellgraph.cell.expr.Expr` or a
            :class:`~cellgraph.cell.graph.CellGraph`.
        layout: when given, edge labels are dropped at nodes on its identity tuples.

    Returns:
        A nested tuple; ``canonical(a) == canonical(b)`` iff ``a`` and ``b`` are isomorphic.
    """
    identity = layout.identity_indices if layout is not None else frozenset()
    codes: dict[Expr, tuple] = {}
    for e in _root(obj).walk():
        if isinstance(e, Leaf):
            codes[e] = ("leaf", e.role.value, e.name)
            continue
        n: Node = e  # type: ignore[assignment]
        drop = n.tuple in identity
        entries = ((codes[n.left], None if drop else "L"), (codes[n.right], None if drop else "R"))
        if n.commutative:
            entries = tuple(sorted(entries))
        codes[n] = ("node", n.op, n.act, n.tuple, entries)
    return codes[_root(obj)]


def _code_string(code: tuple) -> str:
    if code[0] == "leaf":
        _, role, name = code
        return name if IMPLIED_ROLES.get(name) == role else f"{name}@{role}"
    _, op, act, r, entries = code
    args = ", ".join(
        _code_string(child) if edge is None else f"{edge}={_code_string(child)}"
        for child, edge in entries
    )
    return f"{act}[{op}_{r}]({args})"


def canonical_string(obj: Cell, layout: Layout | None = None) -> str:
    """Readable, stable form of :func:`canonical`, e.g. for counting discovered structures.

    ``act[op_r](L=first, R=second)`` per node (``(first, second)`` without edge labels on
    identity tuples when ``layout`` is given), leaves by name (``name@role`` when the role
    is not the one implied by the name). For leaf names that are identifiers (all built-in
    and target leaves), equal strings iff equal canonical codes.
    """
    return _code_string(canonical(obj, layout))


def isomorphic(a: Cell, b: Cell, layout: Layout | None = None) -> bool:
    """Whether ``a`` and ``b`` are in the same class ``Iso(T)`` (equal canonical codes)."""
    return canonical(a, layout) == canonical(b, layout)
