"""A structural evaluator: a loss that is a cheap function of a candidate's structure, for
checking the search without training (docs/discover.md, *Evaluators*).

:class:`StructureEvaluator` hides a target candidate. For a depth ``d``, ``S_d(c)`` is the
multiset of the subexpressions of cell ``c`` cut at depth ``d`` (a node's label: op,
activation, tuple kind, with its operands' labels cut at ``d - 1``, commutative operands
sorted; a leaf's: its name), as the Weisfeiler-Lehman subtree features of N. Shervashidze
et al., "Weisfeiler-Lehman Graph Kernels", JMLR 2011. The loss is

    loss(c) = mean_{d = 0..D} |S_d(c) - S_d(t)| / |S_d(t)| + [cell_hash(c) != cell_hash(t)]
              + noise * g / sqrt(epochs)

(``-``: multiset symmetric difference; ``D`` = ``depth``, 2 by default; ``g`` a standard normal
drawn from the candidate's hash and the seed, so the same cell gets the same loss). Without
noise it is 0 exactly at the target's structure; shallow matches lower it before the whole
structure does.
"""

from __future__ import annotations

import math
import random
from collections import Counter

from cellgraph.cell.expr import Expr, Leaf
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.space import from_cell, kind

__all__ = ["StructureEvaluator", "features"]


def features(root: Expr, depth: int) -> Counter:
    """``S_depth``: the multiset of ``root``'s subexpressions cut at ``depth`` (module docstring)."""
    cut: dict[Expr, object] = {}

    def label(e: Expr, d: int) -> object:
        if isinstance(e, Leaf):
            return e.name
        if d == 0:
            return (e.op, e.act, kind(e))
        key = (e, d)
        if key not in cut:
            cut[key] = (e.op, e.act, kind(e), tuple(sorted(repr(label(c, d - 1)) for c in e.children)))
        return cut[key]

    return Counter(repr(label(n, depth)) for n in root.internal_nodes())


def _distance(a: Counter, b: Counter) -> float:
    return sum(((a - b) + (b - a)).values()) / sum(b.values())


class StructureEvaluator:
    """The loss of the module docstring for the hidden candidate ``target``; ``calls``
    counts evaluations per hash."""

    def __init__(self, target: Expr, noise: float = 0.01, depth: int = 2) -> None:
        self.depth = depth
        self.target = [features(target, d) for d in range(self.depth + 1)]
        self.hash = cell_hash(target)
        self.noise = noise
        self.calls: Counter = Counter()

    def evaluate(self, cell: MultiCell, layout: Layout, epochs: int, seed: int) -> float:
        root = from_cell(cell, layout)
        key = cell_hash(root)
        self.calls[key] += 1
        shallow = sum(_distance(features(root, d), t) for d, t in enumerate(self.target)) / len(self.target)
        exact = float(key != self.hash)
        return shallow + exact + self.noise * random.Random(f"{key}/{seed}").gauss(0.0, 1.0) / math.sqrt(epochs)
