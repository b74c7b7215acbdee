"""Every candidate of a given size: the exhaustive enumeration behind the ``enumerate``
strategy (docs/discover.md, *Strategies*).

Exhaustive symbolic regression (D. J. Bartlett, H. Desmond, P. G. Ferreira, "Exhaustive
Symbolic Regression", IEEE Trans. Evol. Comput. 2023) lists every expression up to a
complexity and scores them all, so no search heuristic can miss the answer. Here the
expressions are the search space's cells (:class:`~cellgraph.discover.space.CellSpace`).
:func:`cells_of_size` builds every sequence of ``k`` generated nodes ``n_1, ..., n_k``, each
reading the space's leaves and the nodes before it (its own trainable tuple, or the identity
tuple), keeps those whose root ``n_k`` uses every node and that
:func:`~cellgraph.discover.space.validate` accepts, and returns one cell per structure
(:func:`~cellgraph.discover.cache.cell_hash`), ordered by hash. With the default space
(leaves ``x``, ``h``, ``zero``; 2 ops, 4 activations, 2 kinds) there are 16 candidates of one
node and 1,616 of two; three nodes means 14.7 million sequences, minutes of enumeration, and
more candidates than any budget of the search trains.
"""

from __future__ import annotations

from collections.abc import Iterator

from cellgraph.cell.expr import Expr, Node
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.space import IDENTITY, CellSpace, renumber, validate
from cellgraph.errors import CellGraphError

__all__ = ["cells_of_size"]


def _sequences(k: int, pool: list[Expr], space: CellSpace) -> Iterator[Node]:
    """The last node of every sequence of ``k`` more nodes over ``pool``."""
    for op in space.ops:
        for act in space.activations:
            for kind in space.kinds:
                index = IDENTITY if kind == "I" else len(pool)
                for left in pool:
                    for right in pool:
                        node = Node(op, act, index, left, right)
                        if k == 1:
                            yield node
                        elif node not in pool:
                            yield from _sequences(k - 1, [*pool, node], space)


def cells_of_size(k: int, space: CellSpace) -> list[Expr]:
    """Every candidate of ``space`` with exactly ``k`` generated nodes, one per structure,
    ordered by :func:`~cellgraph.discover.cache.cell_hash` (module docstring)."""
    if k < 1:
        raise CellGraphError(f"a cell has at least one generated node, got {k}")
    found: dict[str, Expr] = {}
    for root in _sequences(k, list(space.leaves), space):
        if len(root.internal_nodes()) == k and validate(root, space) is None:
            found.setdefault(cell_hash(root), renumber(root))
    return [found[key] for key in sorted(found)]
