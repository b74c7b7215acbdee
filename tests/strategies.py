"""Hypothesis strategies shared by the tests: random cell DAGs and unfolded trees over a
small search space, optionally with float64 vectors, and random isomorphs of a tree.

Import from a test module as ``from strategies import ...`` (pytest puts ``tests/`` on the
path). Use :data:`DETERMINISTIC` (or ``settings(parent=DETERMINISTIC, ...)``) so CI runs the
same examples every time.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from hypothesis import settings, strategies as st

from cellgraph.cell.expr import Expr, Node, h, x, zero
from cellgraph.cell.layout import Layout, SearchSpace, TupleSpec
from cellgraph.cell.tree import Tree, unfold

__all__ = ["DETERMINISTIC", "LAYOUT", "SPACE", "exprs", "trees", "isomorphs"]

DETERMINISTIC = settings(derandomize=True, max_examples=150, deadline=None)

#: Two trainable tuples and the identity tuple (index 2).
LAYOUT = Layout((
    TupleSpec("a", "L_a", "R_a", "b_a"),
    TupleSpec("b", "L_b", "R_b", "b_b"),
    TupleSpec.identity_tuple(),
))

SPACE = SearchSpace((0, 1, 2), ("sigmoid", "tanh", "identity"), ("add", "mul"), (x,), (h,), (zero,), 4)

VectorMode = Literal["node", "position"] | None


@st.composite
def exprs(
    draw: st.DrawFn,
    space: SearchSpace = SPACE,
    min_nodes: int = 0,
    max_nodes: int | None = None,
    equal_children: bool = True,
) -> Expr:
    """A random DAG grown as Algorithm 2 grows one: each new node picks an ordered pair of
    earlier nodes (leaves of ``space`` first), a tuple, an op and an activation; the last
    node is the root (a leaf when no node is made). ``equal_children`` allows ``c_i = c_j``."""
    n = draw(st.integers(min_nodes, space.n_iterations if max_nodes is None else max_nodes))
    nodes: list[Expr] = list(space.leaves)
    root: Expr = draw(st.sampled_from(nodes))
    for _ in range(n):
        i = draw(st.integers(0, len(nodes) - 1))
        j = draw(st.integers(0, len(nodes) - 1))
        if i == j and not equal_children:
            j = (j + 1) % len(nodes)
        root = Node(
            draw(st.sampled_from(space.ops)),
            draw(st.sampled_from(space.activations)),
            draw(st.sampled_from(space.tuples)),
            nodes[i],
            nodes[j],
        )
        nodes.append(root)
    return root


@st.composite
def trees(
    draw: st.DrawFn,
    space: SearchSpace = SPACE,
    vectors: VectorMode = None,
    p: int = 3,
    **expr_kwargs,
) -> Tree:
    """``unfold`` of :func:`exprs`; ``vectors="node"`` lays one random float64 vector per DAG
    node (as :meth:`Tree.with_vectors` with a mapping), ``"position"`` a fresh one on every
    position (leaves included)."""
    tree = unfold(draw(exprs(space, **expr_kwargs)))
    if vectors is None:
        return tree
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from((1e-3, 1.0, 10.0)))
    if vectors == "node":
        return tree.with_vectors({e: scale * rng.normal(size=p) for e in tree.expr.walk()})
    return tree.with_vectors(lambda _: scale * rng.normal(size=p))


@st.composite
def isomorphs(draw: st.DrawFn, tree: Tree) -> Tree:
    """A random member of ``Iso(tree)``: every commutative position swapped (children with
    their edges and vectors) or not, independently."""

    def go(t: Tree) -> Tree:
        if t.is_leaf:
            return t
        out = Tree(t.expr, tuple(go(c) for c in t.children), t.edges, t.vector)
        return out.swap() if t.expr.commutative and draw(st.booleans()) else out

    return go(tree)
