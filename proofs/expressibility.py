"""The scoring function of the expressibility theorems, built by construction (paper,
Appendix "Proof of Theorem GRUapp and LSTMapp"; corrected Lemma 1, docs/paper-notes.md,
*Errata*, item 1).

The proof asks for one ``alpha`` under which Algorithm 2 picks the intended node ``c_k*`` at
every iteration ``k``. Along the intended path the candidate sets are known: ``V^k`` is built
from ``S_data, S_prev, S_aux`` and ``P_{k-1} = (c_1*, ..., c_{k-1}*)``. So

1. enumerate every candidate of ``V^1, ..., V^N`` along that path (each a vector);
2. merge vectors equal within ``EXCLUSION_TOL`` (Algorithm 2 tells them apart no better);
3. list the points from worst to best: every other vector, then ``c_N*, ..., c_1*``;
4. ``alpha`` = :func:`~cellgraph.proofs.lemma1.ranked_alpha` of that list.

At iteration ``k`` the nodes ``c_1*, ..., c_{k-1}*`` are excluded by value, every other
eligible candidate ranks below ``c_k*``, so ``c_k*`` is chosen. The intended order is the
DAG's post-order (children first, left subtree before right), which is an order Algorithm 2
can generate: the earlier node of a pair is always the left operand.

For a multi-state cell (LSTM) each run gets its own ``alpha``, built with the states of the
earlier runs as leaves (Appendix "Extensions of RRNN model").
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from cellgraph.algorithm2 import EXCLUSION_TOL, pairs
from cellgraph.backends.numpy.plugin import evaluate_cell, search_cell
from cellgraph.backends.numpy.eval import as_params, combine, numpy_activation, numpy_op
from cellgraph.backends.numpy.search import SearchResult
from cellgraph.cell.constants import default_leaf_values
from cellgraph.cell.expr import Expr, Leaf, Node, Role
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import SearchSpace
from cellgraph.errors import CellGraphError
from cellgraph.proofs.lemma1 import ranked_alpha

__all__ = ["path_candidates", "merge_close", "intended_alpha", "construct"]

Alpha = Callable[[np.ndarray], float]
Params = Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]


def path_candidates(
    space: SearchSpace, params: Params, leaves: Mapping[Leaf, np.ndarray], intended: Sequence[Node]
) -> tuple[np.ndarray, np.ndarray]:
    """Every candidate vector of ``V^1, ..., V^N`` along the intended path, and the intended
    vectors ``c_1*, ..., c_N*``: arrays ``(M, p)`` and ``(N, p)``.

    ``V^k`` holds the candidates of ``V^{k-1}`` plus those built with ``c_{k-1}*``, so the
    union is ``V^N``: every ``(r, o, u)`` on every pair of ``S_data, S_prev, S_aux,
    c_1*, ..., c_{N-1}*``. Raises if an intended node is not a candidate of its iteration
    (tuple, op or activation not in the space, operands not in the node list in order).
    """
    weights = as_params(params)
    p = weights[0][2].shape[0]
    given = default_leaf_values(space, leaves, p)
    nodes: list[Expr] = list(space.leaves)
    vectors: list[np.ndarray] = [np.asarray(given[leaf], dtype=np.float64) for leaf in space.leaves]
    forms = [(r, o, u) for r in space.tuples for o in space.ops for u in space.activations]
    for k, node in enumerate(intended, 1):
        index = {n: i for i, n in enumerate(nodes)}
        i, j = index.get(node.left, -1), index.get(node.right, -1)
        if (node.tuple, node.op, node.act) not in forms or not 0 <= i < j:
            raise CellGraphError(
                f"intended node {k} ({node}) is not a candidate of iteration {k}: its form or "
                f"operands are not in the search space's sets / node list in order"
            )
        nodes.append(node)
        vectors.append(combine(weights[node.tuple], numpy_op(node.op), numpy_activation(node.act),
                               vectors[i], vectors[j]))
    found = [
        combine(weights[r], numpy_op(o), numpy_activation(u), vectors[a], vectors[b])
        for r, o, u in forms for a, b in pairs(len(nodes) - 1)
    ]
    return np.array(found), np.array(vectors[len(space.leaves):])


def merge_close(points: np.ndarray, tol: float = EXCLUSION_TOL) -> np.ndarray:
    """One representative per group of rows equal within ``tol`` (max-abs), in first-seen order."""
    points = np.unique(points, axis=0)
    order = np.argsort(points.sum(axis=1), kind="stable")
    sums = points[order].sum(axis=1)
    window = tol * points.shape[1]
    keep = np.ones(len(points), dtype=bool)
    for a in range(len(order)):
        if not keep[order[a]]:
            continue
        b = a + 1
        while b < len(order) and sums[b] - sums[a] <= window:
            if keep[order[b]] and np.max(np.abs(points[order[b]] - points[order[a]])) <= tol:
                keep[order[b]] = False
            b += 1
    return points[keep]


def _cached(alpha: Alpha) -> Alpha:
    """``alpha`` memoized on the exact bytes of its argument (Algorithm 2 rescores the same
    candidates at every iteration)."""
    cache: dict[bytes, float] = {}

    def scored(v: np.ndarray) -> float:
        key = np.ascontiguousarray(v, dtype=np.float64).tobytes()
        if key not in cache:
            cache[key] = alpha(v)
        return cache[key]

    return scored


def intended_alpha(
    space: SearchSpace, params: Params, leaves: Mapping[Leaf, np.ndarray], intended: Sequence[Node]
) -> tuple[Alpha, int]:
    """The corrected Lemma 1 scoring function under which Algorithm 2 builds ``intended``
    (the steps of the module docstring), and the number of points it ranks."""
    candidates, chosen = path_candidates(space, params, leaves, intended)
    distance = np.max(np.abs(candidates[:, None, :] - chosen[None, :, :]), axis=2)  # (M, N)
    others = merge_close(candidates[~np.any(distance <= EXCLUSION_TOL, axis=1)])
    points = np.concatenate([others, chosen[::-1]])
    return _cached(ranked_alpha(points)), len(points)


def construct(
    cell: MultiCell,
    spaces: Sequence[SearchSpace],
    params: Params,
    leaves: Mapping[Leaf, np.ndarray],
) -> tuple[list[SearchResult], int]:
    """Run Algorithm 2 (:func:`~cellgraph.backends.numpy.plugin.search_cell`) on one sample
    with, for each run, the scoring function that makes it build ``cell``'s graph of that
    run. Returns the search results and the largest number of ranked points."""
    states = evaluate_cell(cell, leaves, params)
    known = dict(leaves)
    alphas: list[Alpha] = []
    n_points = 0
    for graph, space in zip(cell, spaces):
        alpha, n = intended_alpha(space, params, known, graph.root.internal_nodes())
        alphas.append(alpha)
        n_points = max(n_points, n)
        known[Leaf(graph.state, Role.CURRENT)] = states[graph.state]
    return search_cell(spaces, params, leaves, alphas, cell.states), n_points
