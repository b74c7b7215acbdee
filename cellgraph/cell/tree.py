"""The unfolded tree of a cell (paper, Sec. 3.1 and 3.3; docs/paper-notes.md,
*Objects: leaves, nodes, tuples* and *Tree distances: VD, TD and Iso*).

A cell is a DAG (:class:`~cellgraph.cell.expr.Expr`); the paper's tree ``T_t`` is that DAG
unfolded from its root, every use of a shared node becoming its own position. A
:class:`Tree` is such an unfolded, *ordered* tree:

* ``expr``: the DAG node computed at this position (a :class:`Leaf` or :class:`Node`);
* ``children``: ``()`` for a leaf, ``(first, second)`` for an internal node;
* ``edges``: which edge matrix each child carries, ``("L", "R")`` as built, ``("R", "L")``
  after the children of a commutative node were swapped *together with their edges*
  (the moves that generate ``Iso(T)``);
* ``vector``: optional numeric vector on the position (``numpy`` array of shape ``(p,)``),
  used by the distances VD and TD.

Heap labels (Sec. 3.3) number the *internal* positions: the root is 1 and the children of
``i`` are ``2i`` and ``2i+1`` (first and second child in the current order).
"""

from __future__ import annotations

from typing import Callable, Iterator, Mapping

import numpy as np

from cellgraph.cell.expr import Expr, Leaf, Node
from cellgraph.errors import CellGraphError

__all__ = ["Tree", "unfold"]

EDGES = ("L", "R")
SWAPPED = ("R", "L")


class Tree:
    """An ordered, unfolded cell tree with optional vectors on its positions."""

    __slots__ = ("expr", "children", "edges", "vector")

    def __init__(
        self,
        expr: Expr,
        children: tuple["Tree", ...] = (),
        edges: tuple[str, ...] | None = None,
        vector: np.ndarray | None = None,
    ) -> None:
        if not isinstance(expr, Expr):
            raise CellGraphError(f"Tree position must hold a Leaf or Node, got {type(expr).__name__}")
        if isinstance(expr, Leaf):
            if children:
                raise CellGraphError(f"leaf {expr.name!r} cannot have children")
            edges = ()
        else:
            if len(children) != 2:
                raise CellGraphError(
                    f"{expr.op}/{expr.act} node needs exactly two children, got {len(children)}"
                )
            edges = EDGES if edges is None else tuple(edges)
            if edges not in (EDGES, SWAPPED):
                raise CellGraphError(f"edges must be ('L','R') or ('R','L'), got {edges!r}")
            by_edge = dict(zip(edges, children))
            if by_edge["L"].expr != expr.left or by_edge["R"].expr != expr.right:
                raise CellGraphError(
                    f"children of {expr} do not match its left/right operands under edges {edges}"
                )
        if vector is not None:
            if not (isinstance(vector, np.ndarray) and vector.dtype == np.float64 and not vector.flags.writeable):
                vector = np.array(vector, dtype=np.float64)  # a copy: the caller's array may change
            if vector.ndim != 1:
                raise CellGraphError(f"vector at {expr} must be 1-d, got shape {vector.shape}")
            vector.flags.writeable = False
        object.__setattr__(self, "expr", expr)
        object.__setattr__(self, "children", tuple(children))
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "vector", vector)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Tree is immutable")

    # --- structure ---------------------------------------------------------------------
    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def swapped(self) -> bool:
        return self.edges == SWAPPED

    def swap(self) -> "Tree":
        """Swap the two children together with their edge matrices (commutative ops only)."""
        if self.is_leaf:
            raise CellGraphError("a leaf has no children to swap")
        if not self.expr.commutative:  # type: ignore[union-attr]
            raise CellGraphError(f"cannot swap the children of non-commutative op {self.expr.op!r}")  # type: ignore[union-attr]
        a, b = self.children
        return Tree(self.expr, (b, a), (self.edges[1], self.edges[0]), self.vector)

    def positions(self) -> Iterator[tuple[int, "Tree"]]:
        """``(heap_label, subtree)`` for every internal position, in breadth-first order."""
        queue: list[tuple[int, Tree]] = [(1, self)] if not self.is_leaf else []
        while queue:
            label, t = queue.pop(0)
            yield label, t
            for k, child in enumerate(t.children):
                if not child.is_leaf:
                    queue.append((2 * label + k, child))

    def subtrees(self) -> Iterator["Tree"]:
        """Every position (leaves included), pre-order."""
        stack = [self]
        while stack:
            t = stack.pop()
            yield t
            stack.extend(reversed(t.children))

    def n_internal(self) -> int:
        return sum(1 for _ in self.positions())

    def leaf_depths(self) -> list[int]:
        """Depth of every leaf position, left to right (the ``l_k`` of Lemma 2)."""
        out: list[int] = []

        def go(t: Tree, d: int) -> None:
            if t.is_leaf:
                out.append(d)
            for ch in t.children:
                go(ch, d + 1)

        go(self, 0)
        return out

    def ordered_key(self) -> tuple:
        """Key of the ordered tree's labels (op, act, tuple; leaf role and name), without
        vectors or edge labels. Equal keys do not mean the same computation: a swap can exchange
        two operands that differ only in their edges, leaving the key unchanged (use
        :func:`cellgraph.algorithms.isomorphism.position_key` to tell such trees apart)."""
        if self.is_leaf:
            return ("leaf", self.expr.role.value, self.expr.name)  # type: ignore[union-attr]
        e: Node = self.expr  # type: ignore[assignment]
        return ("node", e.op, e.act, e.tuple) + tuple(c.ordered_key() for c in self.children)

    # --- vectors -----------------------------------------------------------------------
    def with_vectors(self, values: Mapping[Expr, np.ndarray] | Callable[[Expr], np.ndarray]) -> "Tree":
        """A copy with ``vector = values[expr]`` at every position (``values`` may be a
        mapping from DAG nodes to vectors, e.g. a backend's evaluation, or a function)."""
        get = values if callable(values) else values.__getitem__
        return Tree(
            self.expr,
            tuple(c.with_vectors(get) for c in self.children),
            self.edges,
            np.asarray(get(self.expr), dtype=np.float64),
        )

    def require_vectors(self, what: str = "tree") -> None:
        """Raise unless every internal position carries a vector (VD/TD need them)."""
        for label, t in self.positions():
            if t.vector is None:
                raise CellGraphError(
                    f"{what}: internal node at heap label {label} ({t.expr}) has no vector"
                )

    def __repr__(self) -> str:
        if self.is_leaf:
            return f"Tree({self.expr!r})"
        inner = ", ".join(repr(c) for c in self.children)
        sw = ", swapped" if self.swapped else ""
        e: Node = self.expr  # type: ignore[assignment]
        return f"Tree({e.op}/{e.act}/{e.tuple}{sw}: {inner})"


def unfold(root: Expr) -> Tree:
    """The paper's tree of a cell DAG: every use of a shared node becomes its own position."""
    memo: dict[Expr, Tree] = {}

    def go(e: Expr) -> Tree:
        if e not in memo:
            memo[e] = Tree(e) if isinstance(e, Leaf) else Tree(e, (go(e.left), go(e.right)))
        return memo[e]

    return go(root)
