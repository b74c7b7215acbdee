"""The space of the discrete cell search: which one-state cells are candidates
(docs/discover.md, *Space*).

A candidate is the root :class:`~cellgraph.cell.expr.Node` of a one-state cell
``h_t = root`` whose nodes compute ``u(o(L_r c_i, R_r c_j) + b_r)`` (paper, Sec. 3.1). Its
structure is what is searched, not which weights are shared: a node's tuple is either the
fixed identity tuple ``(I, I, 0)`` (kind ``I``, tuple index :data:`IDENTITY` = 0) or a
trainable tuple of its own (kind ``W``, tuple indices 1, 2, ..., one per node). Two nodes
never share a trainable tuple, so a candidate *is* its structure
(:func:`cellgraph.algorithms.recovery.structure_form`). :func:`to_cell` gives the cell and
:class:`~cellgraph.cell.layout.Layout` a backend trains (trainable tuples ``t0, t1, ...`` in a
canonical order, the identity tuple last); :func:`from_cell` reads a cell (a target such as
the GRU) back, giving each trainable node its own tuple.

:func:`validate` names why a cell is not a candidate (``None`` when it is);
:func:`sample_cell` draws a random candidate.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from cellgraph.algorithms.canonical import canonical
from cellgraph.algorithms.shape import shape_code
from cellgraph.cell import registry
from cellgraph.cell.expr import Expr, Leaf, Node, Role, h, rebuild, relabel, x, zero
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout, TupleSpec
from cellgraph.errors import CellGraphError

__all__ = ["IDENTITY", "KINDS", "CANDIDATE_LAYOUT", "CellSpace", "kind", "complexity", "renumber", "absorbed",
           "to_cell", "from_cell", "validate", "sample_cell"]

#: The tuple index of the identity tuple in a candidate; trainable nodes use 1, 2, ...
IDENTITY = 0
#: Tuple kinds: ``W`` a trainable tuple of the node's own, ``I`` the identity tuple.
KINDS = ("W", "I")
#: The layout under which candidates are read: index 0 is the identity tuple, every other
#: index is trainable (used by :func:`cellgraph.algorithms.shape.shape` and the hash).
CANDIDATE_LAYOUT = Layout((TupleSpec.identity_tuple("I"),))


@dataclass(frozen=True)
class CellSpace:
    """What candidates are made of.

    Attributes:
        leaves: initial nodes; every ``data`` and ``prev`` leaf must be read by a candidate.
        ops: binary operations ``O``.
        activations: activations ``U``.
        kinds: tuple kinds allowed, a subset of :data:`KINDS`.
        min_nodes, max_nodes: range of the number of distinct generated nodes.
        absorb: refuse the nodes whose trainable tuple absorbs what they add (:func:`absorbed`):
            ``one_minus`` on a ``W`` node, and a ``W`` ``add`` of one operand twice. Each is a
            cell of the space reparametrised, so with ``absorb`` one cell stands for each such
            function class.
    """

    leaves: tuple[Leaf, ...] = (x, h, zero)
    ops: tuple[str, ...] = ("add", "mul")
    activations: tuple[str, ...] = ("sigmoid", "tanh", "one_minus", "identity")
    kinds: tuple[str, ...] = KINDS
    min_nodes: int = 1
    max_nodes: int = 15
    absorb: bool = False

    def __post_init__(self) -> None:
        for name in self.activations:
            registry.activation(name)
        for name in self.ops:
            registry.op(name)
        if not self.ops or not self.activations or not self.kinds:
            raise CellGraphError("a cell space needs at least one op, activation and tuple kind")
        if not set(self.kinds) <= set(KINDS):
            raise CellGraphError(f"tuple kinds must be among {KINDS}, got {self.kinds}")
        if not 1 <= self.min_nodes <= self.max_nodes:
            raise CellGraphError(f"node range {self.min_nodes}..{self.max_nodes}: need 1 <= min <= max")
        if self.absorb and "one_minus" in self.activations and "identity" not in self.activations:
            raise CellGraphError("absorb: a trainable one_minus is absorbed into the identity, which the space lacks")
        if len(set(self.leaves)) != len(self.leaves) or not self.required:
            raise CellGraphError(f"leaves must be distinct and include a data or prev leaf, got {self.leaves}")

    @property
    def required(self) -> frozenset[Leaf]:
        """The leaves every candidate reads: the data and previous-state ones."""
        return frozenset(leaf for leaf in self.leaves if leaf.role in (Role.DATA, Role.PREV))

    def to_dict(self) -> dict:
        """A JSON form (recorded with a search)."""
        return {"leaves": [leaf.name for leaf in self.leaves], "ops": list(self.ops),
                "activations": list(self.activations), "kinds": list(self.kinds),
                "min_nodes": self.min_nodes, "max_nodes": self.max_nodes, **({"absorb": True} if self.absorb else {})}


def kind(node: Node) -> str:
    """``"I"`` for a node on the identity tuple, ``"W"`` otherwise."""
    return "I" if node.tuple == IDENTITY else "W"


def complexity(root: Expr) -> int:
    """The size a parsimony term charges: distinct generated nodes plus the trainable matrices
    they use (docs/discover.md, *Identifiability*). A ``W`` node has two, ``L_r`` and ``R_r``,
    less one for each operand that is the zero constant (its matrix multiplies zero: MUT1's
    ``z = sigmoid(W_z x + b_z)`` has one); an ``I`` node has none."""
    nodes = root.internal_nodes()
    return len(nodes) + sum(2 - sum(1 for c in n.children if c == zero) for n in nodes if kind(n) == "W")


def renumber(root: Expr, order: tuple[Node, ...] | None = None) -> Expr:
    """``root`` with its trainable nodes on tuples 1, 2, ... in ``order`` (default: the DAG's
    children-first order); identity nodes keep tuple :data:`IDENTITY`."""
    nodes = root.internal_nodes() if order is None else order
    index = {n: i + 1 for i, n in enumerate(n for n in nodes if kind(n) == "W")}
    return relabel(root, lambda n: (n.op, n.act, index.get(n, IDENTITY)))


def _canonical_order(root: Expr) -> tuple[Node, ...]:
    """Generated nodes children first, the operands of a commutative node visited in the
    order of their shape codes: isomorphic candidates list corresponding nodes alike."""
    code = {n: shape_code(n, CANDIDATE_LAYOUT) for n in root.internal_nodes()}
    seen: dict[Node, None] = {}

    def visit(e: Expr) -> None:
        if isinstance(e, Leaf) or e in seen:
            return
        children = list(e.children)
        if e.commutative:
            children.sort(key=lambda c: repr(code[c]) if isinstance(c, Node) else f"leaf {c.name}")
        for child in children:
            visit(child)
        seen[e] = None

    visit(root)
    return tuple(seen)


def to_cell(root: Expr, state: str = "h") -> tuple[MultiCell, Layout]:
    """The one-state cell of candidate ``root`` and its layout: trainable tuples ``t0,
    t1, ...`` in a canonical node order, then the identity tuple ``id``."""
    order = _canonical_order(root)
    k = sum(1 for n in order if kind(n) == "W")
    numbered = renumber(root, order)
    cell_root = relabel(numbered, lambda n: (n.op, n.act, k if n.tuple == IDENTITY else n.tuple - 1))
    layout = Layout((*(TupleSpec(f"t{i}", f"L{i}", f"R{i}", f"b{i}") for i in range(k)),
                     TupleSpec.identity_tuple()))
    return MultiCell((CellGraph(cell_root, state),)), layout


def from_cell(cell: MultiCell | CellGraph, layout: Layout | None) -> Expr:
    """The candidate of a one-state ``cell``: identity-tuple nodes on :data:`IDENTITY`, every
    other node on a trainable tuple of its own (tuple sharing is dropped). Without a
    ``layout`` every tuple is trainable (as ``cellgraph train --model cell`` reads a cell
    document without one)."""
    graphs = (cell,) if isinstance(cell, CellGraph) else tuple(cell)
    if len(graphs) != 1:
        raise CellGraphError(f"a candidate has one state; this cell has {len(graphs)}")
    identity = frozenset() if layout is None else layout.identity_indices
    nodes = graphs[0].root.internal_nodes()
    own = {n: i + 1 for i, n in enumerate(nodes)}
    return renumber(relabel(graphs[0].root, lambda n: (n.op, n.act, IDENTITY if n.tuple in identity else own[n])))


def _node_reason(n: Node, space: CellSpace) -> str | None:
    """Why node ``n`` cannot be in a candidate of ``space``, or None."""
    if n.op not in space.ops:
        return "op outside the space"
    if n.act not in space.activations:
        return "activation outside the space"
    if kind(n) not in space.kinds:
        return "tuple kind outside the space"
    consts = [c for c in n.children if isinstance(c, Leaf) and c.role is Role.CONST]
    if len(consts) == 2:
        return "node of constants only"
    if n.op == "mul" and zero in consts:
        return "product with zero (a constant)"
    if kind(n) == "I" and n.act == "identity" and n.op == "add" and zero in consts:
        return "no-op node (identity add of zero)"
    if space.absorb and kind(n) == "W":
        if n.act == "one_minus":
            return "one_minus on a trainable tuple (the identity, its tuple negated)"
        if n.op == "add" and n.children[0] == n.children[1]:
            return "one operand added twice on a trainable tuple (one matrix)"
    return None


def absorbed(root: Expr) -> Expr:
    """``root`` with what its trainable tuples absorb taken out, the cell that stands for its
    function class in a space with ``absorb``: a ``W`` node's ``one_minus`` becomes the identity,
    since ``1 - (L a + R b + c) = (-L) a + (-R) b + (1 - c)``, and a ``W`` ``add`` of one operand
    twice reads it once, since ``L a + R a + c = (L + R) a + c`` is ``add(a, zero)``'s
    ``L' a + c``."""
    def absorb(n: Node, left: Expr, right: Expr) -> Node:
        if kind(n) != "W":
            return Node(n.op, n.act, n.tuple, left, right)
        return Node(n.op, "identity" if n.act == "one_minus" else n.act, n.tuple, left,
                    zero if n.op == "add" and left == right else right)

    return renumber(rebuild(root, absorb))


def validate(root: Expr, space: CellSpace) -> str | None:
    """Why ``root`` is not a candidate of ``space`` (a short reason, the same words for the
    same rule, so that reasons can be counted), or None when it is one.

    Rules: the root is a generated node; leaves, ops, activations and kinds are the space's;
    every data and previous-state leaf is read; the number of distinct generated nodes is in
    range; no node reads constants only, multiplies by zero, or is a no-op (identity tuple,
    identity activation, ``add`` of zero); no two identity-tuple nodes compute the same
    expression up to commutative swaps (two trainable nodes never do: their weights differ).
    Every node of a DAG built from its root is used by it.
    """
    if not isinstance(root, Node):
        return "the root is a leaf"
    leaves = set(root.leaves())
    if not leaves <= set(space.leaves):
        return "leaf outside the space"
    if not space.required <= leaves:
        return "does not read every data and state leaf"
    nodes = root.internal_nodes()
    if len(nodes) < space.min_nodes:
        return "too few nodes"
    if len(nodes) > space.max_nodes:
        return "too many nodes"
    for n in nodes:
        reason = _node_reason(n, space)
        if reason:
            return reason
    codes = [canonical(n, CANDIDATE_LAYOUT) for n in nodes if kind(n) == "I"]
    if len(set(codes)) != len(codes):
        return "duplicate identity subexpression"
    return None


def _draw(space: CellSpace, rng: random.Random) -> Expr:
    """A random DAG of ``min_nodes..max_nodes`` nodes: each node reads an earlier node that no
    node reads yet, where there is one, so that most nodes end up used by the last."""
    pool: list[Expr] = list(space.leaves)
    unused: list[Node] = []
    for _ in range(rng.randint(space.min_nodes, space.max_nodes)):
        first = unused.pop(rng.randrange(len(unused))) if unused else rng.choice(pool)
        second = rng.choice(pool)
        if rng.random() < 0.5:
            first, second = second, first
        tuple_index = IDENTITY if rng.choice(space.kinds) == "I" else len(pool) + 1
        node = Node(rng.choice(space.ops), rng.choice(space.activations), tuple_index, first, second)
        if node not in pool:
            pool.append(node)
            unused.append(node)
    return renumber(pool[-1])


def sample_cell(space: CellSpace, rng: random.Random, rejected: Counter | None = None,
                max_tries: int = 10_000) -> Node:
    """A random candidate: :func:`_draw` until :func:`validate` accepts, each rejection
    counted in ``rejected`` by its reason. Raises when ``max_tries`` draws all fail."""
    for _ in range(max_tries):
        root = _draw(space, rng)
        reason = validate(root, space)
        if reason is None:
            return root  # type: ignore[return-value]
        if rejected is not None:
            rejected[reason] += 1
    raise CellGraphError(f"no valid cell in {max_tries} random draws: the space {space.to_dict()} is too narrow")
