"""The structure of a cell without its trained weights: every node's tuple index replaced by
whether it is an identity tuple (paper, Sec. 3.1; docs/paper-notes.md, *Symbolic export and
canonical forms*).

Two cells built by Algorithm 2 over different layouts (the full RRNN's ``t0, t1, ...`` and the
GRU target's ``(W_r, W_r', b_r), ...``) compute the same kind of function at a node when the
node has the same op, activation, kind of tuple (trainable ``W`` or identity ``I``) and
operands of the same structure. :func:`shape` relabels a DAG so; its canonical code
(:func:`cellgraph.algorithms.canonical.canonical` over :data:`SHAPE_LAYOUT`) is the node's
*shape code*, equal for isomorphic structures whatever trainable tuples they use.
"""

from __future__ import annotations

from cellgraph.algorithms.canonical import canonical, canonical_string
from cellgraph.cell.expr import Expr, relabel
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout, TupleSpec

__all__ = ["SHAPE_LAYOUT", "shape", "shape_code", "shape_form"]

#: Layout of :func:`shape`: every trainable tuple becomes ``W`` (index 0), identity tuples
#: ``I`` (index 1).
SHAPE_LAYOUT = Layout((TupleSpec("W", "L", "R", "b"), TupleSpec.identity_tuple("I")))


def shape(root: Expr, layout: Layout) -> Expr:
    """``root`` relabelled onto :data:`SHAPE_LAYOUT` (tuple 1 where ``layout`` says identity,
    0 otherwise)."""
    identity = layout.identity_indices
    return relabel(root, lambda n: (n.op, n.act, int(n.tuple in identity)))


def shape_code(root: Expr, layout: Layout) -> tuple:
    """The canonical code of :func:`shape` of ``root``: equal for two subtrees exactly when
    their structures are isomorphic (commutative swaps allowed), trainable tuples aside."""
    return canonical(shape(root, layout), SHAPE_LAYOUT)


def shape_form(cell: MultiCell, layout: Layout) -> str:
    """Canonical form of ``cell`` ignoring which trainable tuple each node uses (the
    structure: shape, ops, activations, leaves, identity edges), ``state = form; ...``."""
    return "; ".join(f"{g.state} = {canonical_string(shape(g.root, layout), SHAPE_LAYOUT)}" for g in cell)
