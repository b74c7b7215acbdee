"""Typed mutations of a candidate DAG (docs/discover.md, *Mutations*).

Each mutation is a pure function ``(root, rng, space) -> root`` that changes one thing:

* ``op``: a node's operation; ``activation``: its activation; ``kind``: its tuple,
  trainable ``W`` <-> identity ``I``;
* ``rewire``: one operand of a node to another leaf or node that does not depend on it
  (so the graph stays acyclic);
* ``insert``: a new node on an edge (between a node and one of its operands, or above the
  root), reading the edge's operand and another leaf or node;
* ``remove``: a node bypassed by one of its operands (every reader of the node reads that
  operand instead).

A child may be invalid (:func:`cellgraph.discover.space.validate`); :func:`mutate` picks a
mutation uniformly and returns the child with the mutation's name, or the reason it was
rejected, for the search to count. ``op`` and ``rewire`` are the op and hidden-state
mutations of regularized evolution (E. Real et al., "Regularized Evolution for Image
Classifier Architecture Search", AAAI 2019); ``insert`` and ``remove`` let the size vary.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from cellgraph.cell.expr import Expr, Node
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.space import IDENTITY, CellSpace, kind, renumber, validate

__all__ = ["MUTATIONS", "Mutation", "mutate", "change_op", "change_activation", "change_kind", "rewire",
           "insert_node", "remove_node"]


def _substitute(root: Expr, old: Expr, new: Expr) -> Expr:
    """``root`` with node ``old`` replaced by ``new`` for every reader (``new`` may read
    nodes of ``root`` that do not depend on ``old``)."""
    built: dict[Expr, Expr] = {}
    for e in root.walk():
        if e == old:
            built[e] = new
        elif isinstance(e, Node):
            built[e] = Node(e.op, e.act, e.tuple, built[e.left], built[e.right])
        else:
            built[e] = e
    return renumber(built[root])


def _free(root: Expr, node: Node, space: CellSpace) -> list[Expr]:
    """Leaves of the space and nodes of ``root`` that do not depend on ``node`` (possible
    operands of ``node`` or of a node inserted below it)."""
    depends: dict[Expr, bool] = {}
    for e in root.walk():
        depends[e] = e == node or (isinstance(e, Node) and (depends[e.left] or depends[e.right]))
    return [*space.leaves, *(e for e, d in depends.items() if isinstance(e, Node) and not d)]


def _fresh(root: Expr) -> int:
    """A trainable tuple index no node of ``root`` uses."""
    return 1 + max((n.tuple for n in root.internal_nodes()), default=IDENTITY)


def _other(value: str, choices: tuple[str, ...], rng: random.Random) -> str:
    others = [c for c in choices if c != value]
    return rng.choice(others) if others else value


def _pick(root: Expr, rng: random.Random) -> Node:
    return rng.choice(root.internal_nodes())


def change_op(root: Expr, rng: random.Random, space: CellSpace) -> Expr:
    """A node's operation replaced by another of the space's."""
    n = _pick(root, rng)
    return _substitute(root, n, Node(_other(n.op, space.ops, rng), n.act, n.tuple, n.left, n.right))


def change_activation(root: Expr, rng: random.Random, space: CellSpace) -> Expr:
    """A node's activation replaced by another of the space's."""
    n = _pick(root, rng)
    return _substitute(root, n, Node(n.op, _other(n.act, space.activations, rng), n.tuple, n.left, n.right))


def change_kind(root: Expr, rng: random.Random, space: CellSpace) -> Expr:
    """A trainable node put on the identity tuple, or an identity node on a tuple of its own."""
    n = _pick(root, rng)
    tuple_index = _fresh(root) if kind(n) == "I" else IDENTITY
    return _substitute(root, n, Node(n.op, n.act, tuple_index, n.left, n.right))


def rewire(root: Expr, rng: random.Random, space: CellSpace) -> Expr:
    """One operand of a node replaced by another leaf or node that does not depend on it."""
    n = _pick(root, rng)
    side = rng.randrange(2)
    choices = [e for e in _free(root, n, space) if e != n.children[side]]
    if not choices:
        return root
    operands = list(n.children)
    operands[side] = rng.choice(choices)
    return _substitute(root, n, Node(n.op, n.act, n.tuple, *operands))


def _new_node(operand: Expr, others: list[Expr], root: Expr, rng: random.Random, space: CellSpace) -> Node:
    """A random node reading ``operand`` and one of ``others``, on either side."""
    pair = [operand, rng.choice(others)]
    rng.shuffle(pair)
    tuple_index = IDENTITY if rng.choice(space.kinds) == "I" else _fresh(root)
    return Node(rng.choice(space.ops), rng.choice(space.activations), tuple_index, *pair)


def insert_node(root: Expr, rng: random.Random, space: CellSpace) -> Expr:
    """A new node on an edge: between a node and one of its operands, or above the root."""
    nodes = root.internal_nodes()
    edge = rng.randrange(2 * len(nodes) + 1)
    if edge == 2 * len(nodes):  # above the root: every node and leaf may be its other operand
        return renumber(_new_node(root, [*space.leaves, *nodes], root, rng, space))
    n, side = nodes[edge // 2], edge % 2
    operands = list(n.children)
    operands[side] = _new_node(operands[side], _free(root, n, space), root, rng, space)
    return _substitute(root, n, Node(n.op, n.act, n.tuple, *operands))


def remove_node(root: Expr, rng: random.Random, space: CellSpace) -> Expr:
    """A node removed: its readers read one of its operands instead."""
    n = _pick(root, rng)
    return _substitute(root, n, n.children[rng.randrange(2)])


#: name -> mutation, in the order :func:`mutate` draws from.
MUTATIONS: dict[str, Callable[[Expr, random.Random, CellSpace], Expr]] = {
    "op": change_op,
    "activation": change_activation,
    "kind": change_kind,
    "rewire": rewire,
    "insert": insert_node,
    "remove": remove_node,
}


@dataclass(frozen=True)
class Mutation:
    """The result of :func:`mutate`: the ``child`` (None when rejected), the mutation's
    ``name`` and, for a rejected child, the ``reason``."""

    child: Expr | None
    name: str
    reason: str | None = None


def mutate(root: Expr, rng: random.Random, space: CellSpace) -> Mutation:
    """One mutation drawn uniformly from :data:`MUTATIONS`; its child is rejected when
    :func:`~cellgraph.discover.space.validate` gives a reason or when it has the parent's
    structure (reason ``"same structure as the parent"``)."""
    name = rng.choice(list(MUTATIONS))
    child = MUTATIONS[name](root, rng, space)
    reason = validate(child, space)
    if reason is None and cell_hash(child) == cell_hash(root):
        reason = "same structure as the parent"
    return Mutation(None if reason else child, name, reason)
