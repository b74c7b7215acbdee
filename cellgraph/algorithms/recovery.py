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
* one algebraic rewrite is the same structure, because it only renames weights: a sigmoid node
  on a trainable tuple whose op takes a sign into its weights (``add``, ``mul``) and its
  complement ``1 - g`` (``one_minus(0 + I g)``) trade places. ``1 - sigma(L a + R b + b_r)`` is
  ``sigma(-L a - R b - b_r)``, so the cell whose readers of ``g`` read ``1 - g`` and whose readers
  of ``1 - g`` read ``g`` computes the same function family with as many nodes and weights
  (the GRU's ``z * h + (1 - z) * n`` against MGU's ``(1 - f) * h + f * n``);
* other algebraic rewrites that compute the same function family are different structures and
  are not counted: ``(1 - z) * h + z * n`` against ``h + z * (n - h)``, a tuple's bias split over
  two nodes, an identity-tuple node ``u(0 + I a)`` inserted on an edge;
* a trainable tuple whose teacher fixes a matrix to ``I`` (``mut1``'s ``L_h``) is ``W``:
  the found cell need not learn the ``I``.

:func:`structure_form` is a canonical string of that structure, so the test is an equality of
strings and the cell search can hash it (:mod:`cellgraph.discover.cache`): each node is
written at its first visit of a depth-first walk from the root, its operands in the order
of their unfolded-tree codes (either order under a commutative op), and again as a
reference ``#k``. Distinct nodes with the same unfolded tree (MUT2's ``r`` and ``z``) and the
sigmoid-complement pairs that may trade places are the only choices left; the form is the
least string over them, which makes it equal for structures that are isomorphic once pairs
have traded places, and a string that writes every node and edge reachable from the root
tells the others apart.
"""

from __future__ import annotations

from functools import cache
from itertools import combinations, permutations, product
from typing import Callable, Sequence

from cellgraph.cell.expr import Expr, Leaf, Node
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.cell.names import as_multicell

__all__ = ["structure_form", "complement_pairs", "exact_recovery"]

#: Ops whose trainable node takes a sign into its weights: ``-(L a + R b + b) = (-L) a + (-R) b - b``,
#: ``-(L a * R b + b) = (-L) a * R b - b``.
_SIGNED = frozenset({"add", "mul"})


def structure_form(graph: CellGraph, layout: Layout) -> str:
    """The canonical string of one state's structure (module docstring): equal for two
    graphs exactly when their DAGs are isomorphic with nodes labelled by op, activation and
    tuple kind (``W`` trainable, ``I`` identity under ``layout``), leaves by role and name, once
    sigmoid-complement pairs (:func:`complement_pairs`) have traded places."""
    pairs = complement_pairs(graph.root, layout)
    return min(_form(_traded(graph.root, chosen), layout)
               for k in range(len(pairs) + 1) for chosen in combinations(pairs, k))


def complement_pairs(root: Expr, layout: Layout) -> list[tuple[Node, Node]]:
    """``(g, c)`` for each sigmoid node ``g`` of ``root`` on a trainable tuple of ``layout`` with
    op ``add`` or ``mul`` (which take a sign into the weights) whose complement
    ``c = one_minus(0 + I g)`` is a node of ``root`` too, and which something besides ``c``
    reads (or which is the root), so that trading places keeps every node. A ``g`` whose
    complement has a complement of its own (``1 - (1 - g)``) is left out: there the trade is
    not its own inverse (the double complement's reader would read ``1 - g`` after it), so the
    two cells are counted as different structures."""
    identity, nodes = layout.identity_indices, root.internal_nodes()
    readers: dict[Expr, set[Node]] = {}
    for n in nodes:
        for child in n.children:
            readers.setdefault(child, set()).add(n)
    pairs = []
    for g in nodes:
        if g.act != "sigmoid" or g.op not in _SIGNED or g.tuple in identity:
            continue
        c = _complement(g, nodes, identity)
        if c is not None and (g == root or readers[g] - {c}) and _complement(c, nodes, identity) is None:
            pairs.append((g, c))
    return pairs


def _complement(g: Expr, nodes: Sequence[Node], identity: frozenset[int] | set[int]) -> Node | None:
    """The node ``one_minus(0 + I g)`` among ``nodes``, or None."""
    return next((n for n in nodes if n.tuple in identity and n.act == "one_minus" and n.op == "add"
                 and {n.left, n.right} == {g, Leaf("zero")}), None)


def _traded(root: Expr, pairs: Sequence[tuple[Node, Node]]) -> Expr:
    """``root`` with each pair's readers swapped: what read ``g`` reads ``c`` and what read ``c``
    reads ``g`` (``c`` itself still reads ``g``; the state reads as any reader does)."""
    swap = {**{g: c for g, c in pairs}, **{c: g for g, c in pairs}}
    complements = {c for _, c in pairs}

    @cache
    def build(e: Expr) -> Expr:
        if isinstance(e, Leaf):
            return e
        if e in complements:
            return Node(e.op, e.act, e.tuple, build(e.left), build(e.right))
        return Node(e.op, e.act, e.tuple, build(swap.get(e.left, e.left)), build(swap.get(e.right, e.right)))

    return build(swap.get(root, root))


def _form(root: Expr, layout: Layout) -> str:
    """The canonical string of ``root``'s DAG, complement pairs left as they are."""
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
    for n in root.internal_nodes():
        twins.setdefault(tree(n), []).append(n)
    tied = [group for group in twins.values() if len(group) > 1]
    return min(_walk(root, label, tree, {n: k for order in orders for k, n in enumerate(order)})
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
