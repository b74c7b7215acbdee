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

Three *motif* moves add the building blocks of gated cells in one step, where the moves
above would need several, each of which alone rarely improves a cell (docs/discover.md,
*Motifs*). A gate ``g`` is a new ``sigmoid(W x + U h + b)`` node or a sigmoid node the cell
already has (which lets one gate serve twice, as MGU's does):

* ``gate``: the state update gated, ``root -> g * root + h * (1 - g)`` (the update of MGU,
  MUT1-3 and, up to the complement trade, the GRU);
* ``reset``: a node's ``h`` operand gated, ``h -> h * g`` (the GRU's reset);
* ``wrap``: an operand ``e`` put through an activation on the identity tuple,
  ``e -> u(e + 0)`` (MUT1's ``tanh(x)``, MUT3's ``tanh(h)``).

:func:`neighbours` lists, in a fixed order, every valid child one ``op``, ``activation``,
``kind``, ``rewire`` or ``remove`` change away (the identifiability check of
docs/discover.md); ``insert`` is left out unless asked for (``insert=True``:
:func:`insertions`, hundreds of children per cell, as its new node's choices are a space of
their own). With ``motifs=True`` it adds every valid child one motif move away.

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

from cellgraph.cell.expr import Expr, Leaf, Node, Role, substitute, zero
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.space import IDENTITY, CellSpace, kind, renumber, validate

__all__ = ["MUTATIONS", "MOTIFS", "Mutation", "mutate", "neighbours", "hashed_neighbours", "change_op",
           "change_activation", "change_kind", "rewire", "insert_node", "insertions", "remove_node"]

#: Operand sides, as :func:`neighbours` names them.
SIDES = ("left", "right")


def _substitute(root: Expr, old: Expr, new: Expr) -> Expr:
    """``root`` with node ``old`` replaced by ``new`` for every reader, renumbered as a candidate."""
    return renumber(substitute(root, old, new))


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


def _pick(root: Expr, rng: random.Random) -> Node:
    return rng.choice(root.internal_nodes())


def _replace(root: Expr, n: Node, replacements: list[Node], rng: random.Random) -> Expr:
    """``root`` with ``n`` replaced by one of ``replacements`` drawn uniformly (``root`` when
    there is none)."""
    return _substitute(root, n, rng.choice(replacements)) if replacements else root


def _with_operand(n: Node, side: int, operand: Expr) -> Node:
    """``n`` reading ``operand`` on ``side``."""
    operands = list(n.children)
    operands[side] = operand
    return Node(n.op, n.act, n.tuple, *operands)


def _ops(n: Node, space: CellSpace) -> list[Node]:
    """``n`` with each other operation of the space."""
    return [Node(op, n.act, n.tuple, n.left, n.right) for op in space.ops if op != n.op]


def _activations(n: Node, space: CellSpace) -> list[Node]:
    """``n`` with each other activation of the space."""
    return [Node(n.op, act, n.tuple, n.left, n.right) for act in space.activations if act != n.act]


def _kind_flipped(root: Expr, n: Node) -> Node:
    """``n`` on the identity tuple when trainable, else on a tuple of its own."""
    return Node(n.op, n.act, _fresh(root) if kind(n) == "I" else IDENTITY, n.left, n.right)


def _rewired(root: Expr, n: Node, side: int, space: CellSpace) -> list[Node]:
    """``n`` with operand ``side`` replaced by each other leaf or node that does not depend on it."""
    return [_with_operand(n, side, e) for e in _free(root, n, space) if e != n.children[side]]


def change_op(root: Expr, rng: random.Random, space: CellSpace) -> Expr:
    """A node's operation replaced by another of the space's."""
    n = _pick(root, rng)
    return _replace(root, n, _ops(n, space), rng)


def change_activation(root: Expr, rng: random.Random, space: CellSpace) -> Expr:
    """A node's activation replaced by another of the space's."""
    n = _pick(root, rng)
    return _replace(root, n, _activations(n, space), rng)


def change_kind(root: Expr, rng: random.Random, space: CellSpace) -> Expr:
    """A trainable node put on the identity tuple, or an identity node on a tuple of its own."""
    n = _pick(root, rng)
    return _substitute(root, n, _kind_flipped(root, n))


def rewire(root: Expr, rng: random.Random, space: CellSpace) -> Expr:
    """One operand of a node replaced by another leaf or node that does not depend on it."""
    n = _pick(root, rng)
    return _replace(root, n, _rewired(root, n, rng.randrange(2), space), rng)


def _edges(root: Expr) -> list[tuple[Node | None, int]]:
    """Where :func:`insert_node` may put a node: each operand ``side`` of each node, then above
    the root (``None``)."""
    return [(n, side) for n in root.internal_nodes() for side in (0, 1)] + [(None, 0)]


def _edge_operands(root: Expr, edge: tuple[Node | None, int], space: CellSpace) -> tuple[Expr, list[Expr]]:
    """The operand a node inserted on ``edge`` reads, and the leaves and nodes its other
    operand may be (above the root: every leaf and node)."""
    n, side = edge
    if n is None:
        return root, [*space.leaves, *root.internal_nodes()]
    return n.children[side], _free(root, n, space)


def _inserted(root: Expr, edge: tuple[Node | None, int], new: Node) -> Expr:
    """``root`` with ``new`` on ``edge``."""
    n, side = edge
    return renumber(new) if n is None else _substitute(root, n, _with_operand(n, side, new))


def _new_node(operand: Expr, others: list[Expr], root: Expr, rng: random.Random, space: CellSpace) -> Node:
    """A random node reading ``operand`` and one of ``others``, on either side."""
    pair = [operand, rng.choice(others)]
    rng.shuffle(pair)
    tuple_index = IDENTITY if rng.choice(space.kinds) == "I" else _fresh(root)
    return Node(rng.choice(space.ops), rng.choice(space.activations), tuple_index, *pair)


def insert_node(root: Expr, rng: random.Random, space: CellSpace) -> Expr:
    """A new node on an edge: between a node and one of its operands, or above the root."""
    edge = rng.choice(_edges(root))
    operand, others = _edge_operands(root, edge, space)
    return _inserted(root, edge, _new_node(operand, others, root, rng, space))


def insertions(root: Expr, space: CellSpace) -> list[tuple[str, Expr]]:
    """Every child of one :func:`insert_node`: on each edge, a node of each op, activation and
    kind reading the edge's operand and each possible other operand, on either side; named
    ``"insert N SIDE OP ACT KIND OTHER"`` (``N SIDE`` the edge, ``root`` above the root; ``OTHER``
    the other operand, ``OTHER|`` when it is the left one), not yet validated or deduplicated."""
    name, out = _namer(root), []
    for edge in _edges(root):
        operand, others = _edge_operands(root, edge, space)
        at = "root" if edge[0] is None else f"{name(edge[0])} {SIDES[edge[1]]}"
        for op in space.ops:
            for act in space.activations:
                for k in space.kinds:
                    index = IDENTITY if k == "I" else _fresh(root)
                    for other in others:
                        label = f"insert {at} {op} {act} {k} {name(other)}"
                        out += [(label, _inserted(root, edge, Node(op, act, index, operand, other))),
                                (f"{label}|", _inserted(root, edge, Node(op, act, index, other, operand)))]
    return out


def remove_node(root: Expr, rng: random.Random, space: CellSpace) -> Expr:
    """A node removed: its readers read one of its operands instead."""
    n = _pick(root, rng)
    return _substitute(root, n, n.children[rng.randrange(2)])


def _namer(root: Expr) -> Callable[[Expr], str]:
    """Names of a cell's leaves (their own) and nodes (``n0, n1, ...`` children first)."""
    label = {n: f"n{i}" for i, n in enumerate(root.internal_nodes())}
    return lambda e: e.name if isinstance(e, Leaf) else label[e]  # type: ignore[index]


def _leaf(space: CellSpace, role: Role) -> Leaf | None:
    return next((leaf for leaf in space.leaves if leaf.role is role), None)


def _gates(root: Expr, free: list[Expr], space: CellSpace, name: Callable[[Expr], str]) -> list[tuple[str, Node]]:
    """The gates a motif may use: a new ``sigmoid(W x + U h + b)`` node (named ``new``) and
    every sigmoid node of ``free``."""
    data, prev = _leaf(space, Role.DATA), _leaf(space, Role.PREV)
    new = [("new", Node("add", "sigmoid", _fresh(root), data, prev))] if data and prev else []
    return new + [(name(e), e) for e in free if isinstance(e, Node) and e.act == "sigmoid"]


def gate_moves(root: Expr, space: CellSpace) -> list[tuple[str, Expr]]:
    """``root -> g * root + h * (1 - g)`` for each gate ``g`` (module docstring), named
    ``"gate root g=G"``."""
    prev, name = _leaf(space, Role.PREV), _namer(root)
    if prev is None or not isinstance(root, Node):
        return []
    free = [e for e in root.internal_nodes() if e != root]
    out = []
    for label, g in _gates(root, free, space, name):
        keep = Node("mul", "identity", IDENTITY, prev, Node("add", "one_minus", IDENTITY, zero, g))
        out.append((f"gate root g={label}", renumber(Node("add", "identity", IDENTITY,
                                                           Node("mul", "identity", IDENTITY, g, root), keep))))
    return out


def reset_moves(root: Expr, space: CellSpace) -> list[tuple[str, Expr]]:
    """A node's ``h`` operand replaced by ``h * g`` for each gate ``g`` that does not depend
    on the node, named ``"reset N SIDE g=G"``."""
    prev, name = _leaf(space, Role.PREV), _namer(root)
    out = []
    for n in root.internal_nodes():
        for side in (0, 1):
            if n.children[side] == prev:
                for label, g in _gates(root, _free(root, n, space), space, name):
                    gated = Node("mul", "identity", IDENTITY, prev, g)
                    out.append((f"reset {name(n)} {SIDES[side]} g={label}",
                                _substitute(root, n, _with_operand(n, side, gated))))
    return out


def wrap_moves(root: Expr, space: CellSpace) -> list[tuple[str, Expr]]:
    """An operand ``e`` (not a constant) replaced by ``u(e + 0)`` on the identity tuple for
    each activation ``u`` but the identity, named ``"wrap N SIDE E u"``."""
    name = _namer(root)
    out = []
    for n in root.internal_nodes():
        for side, e in enumerate(n.children):
            if not (isinstance(e, Leaf) and e.role is Role.CONST):
                out += [(f"wrap {name(n)} {SIDES[side]} {name(e)} {act}",
                         _substitute(root, n, _with_operand(n, side, Node("add", act, IDENTITY, e, zero))))
                        for act in space.activations if act != "identity"]
    return out


#: name -> motif move: every child of a cell one such move away, each with its change's name.
MOTIFS: dict[str, Callable[[Expr, CellSpace], list[tuple[str, Expr]]]] = {
    "gate": gate_moves,
    "reset": reset_moves,
    "wrap": wrap_moves,
}


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


def mutate(root: Expr, rng: random.Random, space: CellSpace, motifs: bool = False) -> Mutation:
    """One mutation drawn uniformly from :data:`MUTATIONS` (and :data:`MOTIFS` when
    ``motifs``: a motif's child drawn uniformly from its moves); the child is rejected when
    :func:`~cellgraph.discover.space.validate` gives a reason or when it has the parent's
    structure (reason ``"same structure as the parent"``, also when a motif has no move)."""
    name = rng.choice([*MUTATIONS, *(MOTIFS if motifs else ())])
    if name in MUTATIONS:
        child = MUTATIONS[name](root, rng, space)
    else:
        moves = MOTIFS[name](root, space)
        child = rng.choice(moves)[1] if moves else root
    reason = validate(child, space)
    if reason is None and cell_hash(child) == cell_hash(root):
        reason = "same structure as the parent"
    return Mutation(None if reason else child, name, reason)


def neighbours(root: Expr, space: CellSpace, motifs: bool = False, insert: bool = False) -> list[tuple[str, Expr]]:
    """:func:`hashed_neighbours` without the hashes."""
    return [(change, child) for change, child, _ in hashed_neighbours(root, space, motifs, insert)]


def hashed_neighbours(root: Expr, space: CellSpace, motifs: bool = False,
                      insert: bool = False) -> list[tuple[str, Expr, str]]:
    """Every valid candidate one ``op``, ``activation``, ``kind``, one-operand ``rewire`` or
    ``remove`` change away from ``root`` (and, when ``insert``, one insertion away:
    :func:`insertions`; when ``motifs``, one ``gate``, ``reset`` or ``wrap`` move away; listed
    after them in that order), deduplicated by :func:`~cellgraph.discover.cache.cell_hash`
    (the first change that reaches a structure names it) and without ``root``'s own structure,
    each with its change's name and its hash (which the deduplication computes anyway).

    The order is deterministic: nodes children first (``n0, n1, ...``, as
    ``root.internal_nodes()`` lists them), and per node its ops, activations, kind, the rewires of
    its left then right operand (to the space's leaves, then to the nodes that do not depend on
    it) and its removals. A name says the change, e.g. ``"activation n2 sigmoid->tanh"`` or
    ``"rewire n4 right h->n1"``.
    """
    nodes, name = root.internal_nodes(), _namer(root)
    changes: list[tuple[str, Expr]] = []
    for n in nodes:
        at = name(n)
        changes += [(f"op {at} {n.op}->{new.op}", _substitute(root, n, new)) for new in _ops(n, space)]
        changes += [(f"activation {at} {n.act}->{new.act}", _substitute(root, n, new))
                    for new in _activations(n, space)]
        flipped = _kind_flipped(root, n)
        changes.append((f"kind {at} {kind(n)}->{kind(flipped)}", _substitute(root, n, flipped)))
        for side in (0, 1):
            changes += [(f"rewire {at} {SIDES[side]} {name(n.children[side])}->{name(new.children[side])}",
                         _substitute(root, n, new)) for new in _rewired(root, n, side, space)]
        changes += [(f"remove {at} keep {SIDES[side]} {name(n.children[side])}", _substitute(root, n, n.children[side]))
                    for side in (0, 1)]
    if insert:
        changes += insertions(root, space)
    if motifs:
        changes += [change for moves in MOTIFS.values() for change in moves(root, space)]
    seen = {cell_hash(root)}
    out = []
    for change, child in changes:
        if validate(child, space) is None:
            key = cell_hash(child)
            if key not in seen:
                seen.add(key)
                out.append((change, child, key))
    return out
