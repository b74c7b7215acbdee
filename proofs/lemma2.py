"""Lemma 2 (paper, Appendix "Gradient Control", lemma:length), checked on every tree shape.

    Let l_1, ..., l_{N+1} be the leaf depths of a full binary tree with N internal nodes.
    For 0 < C0 < 1/2 there is eps = eps(C0) in (0, 1) with sum_k C0^{l_k} <= 1 - eps.

The proof shows by induction ``sum_k C0^{l_k} <= C0^N + sum_{k=1}^N C0^k`` (equality for a
caterpillar) and takes ``eps = 1/2 - C0``. The statement holds; the proof's base case is
misstated (a tree with ``N = 1`` has two leaves of depth 1, not depths ``{2, 2, 1}``, which is
``N = 2``), the bound is right.

The check enumerates *every* full binary tree with ``N <= 12`` internal nodes, each once, as
its left-to-right sequence of leaf depths (it determines the tree); counts them against the
Catalan numbers ``C_N = binom(2N, N) / (N + 1)``; checks Kraft's equality
``sum_k 2^{-l_k} = 1`` as a sanity check; then both inequalities on a grid of ``C0 < 1/2``.
"""

from __future__ import annotations

import math

import numpy as np

from cellgraph.proofs.report import Outcome, Result, timed

__all__ = ["catalan", "leaf_depth_sequences", "induction_bound", "check"]


def catalan(n: int) -> int:
    """The ``n``-th Catalan number, the number of full binary trees with ``n`` internal nodes."""
    return math.comb(2 * n, n) // (n + 1)


def leaf_depth_sequences(max_internal: int) -> list[np.ndarray]:
    """``out[n]``: ``(C_n, n + 1)`` int8 array, the left-to-right leaf depths of every full
    binary tree with ``n`` internal nodes, ``n = 0..max_internal``. A tree is a leaf (depth
    ``0``) or a root over a left tree with ``i`` and a right tree with ``n - 1 - i`` internal
    nodes, all of whose depths grow by one."""
    out = [np.zeros((1, 1), dtype=np.int8)]
    for n in range(1, max_internal + 1):
        blocks = []
        for i in range(n):
            left, right = out[i], out[n - 1 - i]
            blocks.append(np.hstack([np.repeat(left, len(right), axis=0),
                                     np.tile(right, (len(left), 1))]) + 1)
        out.append(np.concatenate(blocks))
    return out


def induction_bound(c0: np.ndarray, n: int) -> np.ndarray:
    """``C0^N + sum_{k=1}^N C0^k``, the proof's induction hypothesis, for each ``C0``."""
    return c0 ** n + sum(c0 ** k for k in range(1, n + 1))


@timed
def check(seed: int = 0, max_internal: int = 12) -> Result:
    """Every tree with ``1 <= N <= max_internal`` internal nodes; ``C0`` on a grid of
    ``(0, 1/2)`` (``seed`` is unused: the check is exhaustive)."""
    shapes = leaf_depth_sequences(max_internal)
    c0 = np.concatenate([np.linspace(0.01, 0.49, 49), [0.499, 0.4999999]])
    counts_ok = kraft_ok = True
    n_trees = n_pairs = violations = 0
    worst_ratio = 0.0  # max over trees of sum / induction bound: 1 means tight
    worst_gap = math.inf  # min over trees of (1 - eps) - sum
    for n, depths in enumerate(shapes):
        distinct = len(np.unique(depths, axis=0))
        counts_ok &= len(depths) == catalan(n) == distinct
        kraft_ok &= bool(np.all(np.abs(np.sum(2.0 ** -depths.astype(np.float64), axis=1) - 1.0) < 1e-12))
        if n == 0:
            continue  # the lemma is about cells, N >= 1
        histogram = np.stack([np.sum(depths == d, axis=1) for d in range(n + 1)], axis=1)
        sums = histogram @ (c0[None, :] ** np.arange(n + 1)[:, None])  # (C_n, grid)
        bound = induction_bound(c0, n)
        one_minus_eps = 1.0 - (0.5 - c0)
        violations += int(np.sum(sums > bound * (1 + 1e-12))) + int(np.sum(sums > one_minus_eps))
        worst_ratio = max(worst_ratio, float(np.max(sums / bound)))
        worst_gap = min(worst_gap, float(np.min(one_minus_eps - sums)))
        n_trees += len(depths)
        n_pairs += sums.size
    holds = counts_ok and kraft_ok and violations == 0
    summary = (f"all {n_trees} full binary trees with 1..{max_internal} internal nodes "
               f"(counts = Catalan: {counts_ok}), {len(c0)} values of C0 in (0, 1/2): "
               f"{violations} violations of the induction bound or of 1 - eps")
    return Result(
        name="lemma2",
        title="Lemma 2 (sum of C0^depth over the leaves of a full binary tree <= 1 - eps)",
        literal=Outcome(holds, summary),
        evidence={
            "trees": n_trees,
            "catalan_match": str(counts_ok),
            "kraft_equality": str(kraft_ok),
            "tree_c0_pairs": n_pairs,
            "max_sum_over_bound": worst_ratio,
            "min_gap_to_1_minus_eps": worst_gap,
        },
    )
