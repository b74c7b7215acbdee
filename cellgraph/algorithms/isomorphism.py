"""The isomorphism class ``Iso(T)`` of an unfolded cell tree (paper, Sec. 3.1 and Eq. 5;
docs/paper-notes.md, *Tree distances: VD, TD and Iso*).

``Iso(T)`` holds every tree obtained from ``T`` by swapping the two children of positions
whose op is commutative, together with their edge matrices (:meth:`Tree.swap`), each
position of the unfolded tree independently. The loss takes the minimum of TD over it.

An isomorph is named by the set of heap labels of ``T`` (Sec. 3.3: root 1, children
``2i``, ``2i+1``) at which it swaps, see :func:`iso_swaps`; :func:`apply_swaps` builds it.
The class is enumerated without duplicates by construction, in the AHU manner of
:mod:`cellgraph.algorithms.canonical`: a position swaps only when its two children have
different canonical codes, i.e. different DAG nodes (the layout-free canonical code is
one-to-one on :class:`~cellgraph.cell.expr.Expr`). Swapping two equal operands changes nothing,
so the class has

    ``|Iso(u(o(a, b)))| = |Iso(a)| |Iso(b)| (2 if o is commutative and a != b else 1)``

members (:func:`iso_class_size`). Two members are the same tree when every position
computes the same DAG node (:func:`position_key`); vectors, carried along by the swaps,
are assumed to be functions of the DAG node, as :meth:`Tree.with_vectors` lays them.
"""

from __future__ import annotations

from typing import Collection

from cellgraph.cell.expr import Expr, Leaf, Node
from cellgraph.cell.tree import Tree
from cellgraph.errors import CellGraphError

__all__ = [
    "DEFAULT_MAX_SIZE", "iso_class", "iso_class_size", "iso_swaps", "apply_swaps", "position_key",
]

#: Largest class :func:`iso_class` and :func:`iso_swaps` enumerate unless told otherwise
#: (``gru``: 512 members, ``gru_torch``: 1024).
DEFAULT_MAX_SIZE = 4096


def iso_class_size(obj: Tree | Expr) -> int:
    """``|Iso(T)|`` of a tree (or of the unfolded tree of a DAG node), without enumerating."""
    root = obj.expr if isinstance(obj, Tree) else obj
    sizes: dict[Expr, int] = {}
    for e in root.walk():
        if isinstance(e, Leaf):
            sizes[e] = 1
            continue
        n: Node = e  # type: ignore[assignment]
        sizes[n] = sizes[n.left] * sizes[n.right] * (2 if n.commutative and n.left != n.right else 1)
    return sizes[root]


def _check_size(tree: Tree, max_size: int) -> None:
    size = iso_class_size(tree)
    if size > max_size:
        raise CellGraphError(
            f"Iso(T) of the tree rooted at {tree.expr} has {size} members, more than "
            f"max_size={max_size}; pass a larger max_size or use a smaller target tree"
        )


def iso_swaps(tree: Tree, max_size: int = DEFAULT_MAX_SIZE) -> list[frozenset[int]]:
    """Every member of ``Iso(tree)`` as the set of heap labels of ``tree`` to swap.

    The empty set (``tree`` itself) comes first; no two sets give the same tree. Raises
    :class:`CellGraphError` when the class has more than ``max_size`` members.
    """
    _check_size(tree, max_size)

    def go(t: Tree, label: int) -> list[frozenset[int]]:
        if t.is_leaf:
            return [frozenset()]
        first, second = t.children
        out = [a | b for a in go(first, 2 * label) for b in go(second, 2 * label + 1)]
        if t.expr.commutative and first.expr != second.expr:  # type: ignore[union-attr]
            out += [s | {label} for s in out]
        return out

    return go(tree, 1)


def apply_swaps(tree: Tree, swaps: Collection[int]) -> Tree:
    """``tree`` with the children (and edges, vectors carried) swapped at heap labels ``swaps``."""
    swaps = frozenset(swaps)
    unknown = swaps - {label for label, _ in tree.positions()}
    if unknown:
        raise CellGraphError(f"apply_swaps: heap labels {sorted(unknown)} are not internal positions")

    def go(t: Tree, label: int) -> Tree:
        if t.is_leaf:
            return t
        first, second = t.children
        out = Tree(t.expr, (go(first, 2 * label), go(second, 2 * label + 1)), t.edges, t.vector)
        return out.swap() if label in swaps else out

    return go(tree, 1)


def iso_class(tree: Tree, max_size: int = DEFAULT_MAX_SIZE) -> list[Tree]:
    """The distinct members of ``Iso(tree)``, ``tree`` first (vectors carried along).

    Raises :class:`CellGraphError` when the class has more than ``max_size`` members.
    """
    return [apply_swaps(tree, s) for s in iso_swaps(tree, max_size)]


def position_key(tree: Tree) -> tuple:
    """Identity of an ordered tree as computations: the DAG node at every position.

    Unlike :meth:`Tree.ordered_key`, it tells ``add_r(L=a, R=b)`` from ``add_r(R=a, L=b)``
    drawn in the same order. For ``T = add_0(add_1(a, b), add_1(b, a))``, swapping at label
    3, or at labels 1 and 3, both give the ordered key ``add_0(add_1(a, b), add_1(a, b))``,
    but the first computes ``add_1(a, b)`` at label 2 and the second ``add_1(b, a)``: two
    members of ``Iso(T)`` with different node vectors.
    """
    return (tree.expr, tuple(position_key(c) for c in tree.children))
