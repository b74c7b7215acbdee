"""The ``planted`` task: data made by a hidden teacher cell, so that structure recovery can be
measured (TD to the teacher's tree, frequency of its canonical form among discovered cells).

Generation (all from one seed):

1. token ids ``tokens[i, t]`` uniform over ``vocab_size`` symbols, every row distinct;
2. a fixed random embedding ``E`` ``(vocab_size, p)``, ``N(0, 1)`` entries: ``x_t = E[tokens[:, t]]``;
3. the teacher cell runs over ``x_1..x_T`` from zero states, evaluated in float64 by the
   numpy backend with random tuples ``(L_r, R_r, b_r)``: ``L_r, R_r ~ N(0, weight_scale^2/p)``,
   ``b_r ~ N(0, bias_scale^2)``; identity tuples stay ``(I, I, 0)``;
4. the target at step ``t`` is ``argmax_k (W h_t + b)_k`` with a fixed random readout: rows
   ``N(0, 1/p)``, then each logit standardised (zero mean, unit deviation) over the train
   states, which keeps the classes roughly balanced.

The task is learnable exactly by the teacher's structure. The teacher is any target of
:mod:`cellgraph.targets` (``gru``, ``lstm``, ...) or ``random``: a cell drawn by
:func:`random_cell` over a :class:`~cellgraph.cell.layout.SearchSpace` (default: the ``gru``
target's space and layout). The :class:`Teacher` is kept on the data set
(``dataset.teacher``) with a JSON-serialisable description (:meth:`Teacher.to_json`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import networkx as nx
import numpy as np

from cellgraph.algorithm2 import EXCLUSION_TOL
from cellgraph.backend import backend
from cellgraph.cell.expr import Expr, Leaf, Node, Role
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout, SearchSpace
from cellgraph.data.datasets import Dataset, Split
from cellgraph.errors import CellGraphError
from cellgraph.targets import target, target_names

__all__ = ["Teacher", "random_cell", "make_teacher", "distinct_rows", "load_planted"]

RANDOM = "random"
#: Batch size and vector size of the probe on which :func:`random_cell` checks its nodes.
_PROBE_BATCH, _PROBE_P = 16, 4


@dataclass(frozen=True, eq=False)
class Teacher:
    """The hidden cell of a planted task.

    Shapes: ``params[r] = (L_r (p, p), R_r (p, p), b_r (p,))`` by layout index, ``embedding``
    ``(vocab_size, p)``, ``readout`` ``(n_classes, p)``, ``readout_bias`` ``(n_classes,)``.
    :meth:`states` maps tokens ``(n, T)`` to each state ``(n, T, p)``; :meth:`predict` gives
    the classes ``(n, T)``.
    """

    kind: str
    cell: MultiCell
    layout: Layout
    spaces: tuple[SearchSpace, ...]
    params: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]
    embedding: np.ndarray
    readout: np.ndarray
    readout_bias: np.ndarray

    @property
    def p(self) -> int:
        return self.embedding.shape[1]

    @property
    def data_leaf(self) -> Leaf:
        (leaf,) = {l for g in self.cell for l in g.leaves() if l.role is Role.DATA}
        return leaf

    def states(self, tokens: np.ndarray) -> dict[str, np.ndarray]:
        """State name -> ``(n, T, p)`` values over the sequences ``tokens`` ``(n, T)``."""
        tokens = np.asarray(tokens)
        n, steps = tokens.shape
        prev = {s: np.zeros((n, self.p)) for s in self.cell.states}
        out: dict[str, list[np.ndarray]] = {s: [] for s in self.cell.states}
        for t in range(steps):
            leaves = {Leaf(s, Role.PREV): v for s, v in prev.items()}
            leaves[self.data_leaf] = self.embedding[tokens[:, t]]
            prev = backend("numpy").evaluate_cell(self.cell, leaves, self.params)
            for s, v in prev.items():
                out[s].append(v)
        return {s: np.stack(v, axis=1) for s, v in out.items()}

    def logits(self, tokens: np.ndarray) -> np.ndarray:
        """``W h_t + b`` ``(n, T, n_classes)``, ``h_t`` the output state."""
        return self.states(tokens)[self.cell.output.state] @ self.readout.T + self.readout_bias

    def predict(self, tokens: np.ndarray) -> np.ndarray:
        """The target classes ``(n, T)`` of ``tokens`` ``(n, T)``."""
        return self.logits(tokens).argmax(axis=-1)

    def to_json(self) -> dict[str, Any]:
        """Everything needed to rebuild the teacher, as plain JSON types. Each graph is
        :meth:`CellGraph.to_networkx` in networkx's node-link form."""
        return {
            "kind": self.kind,
            "p": self.p,
            "cell": [
                {"state": g.state, "expr": str(g.root),
                 "graph": nx.node_link_data(g.to_networkx(), edges="edges")}
                for g in self.cell
            ],
            "layout": [asdict(t) for t in self.layout.tuples],
            "params": [[a.tolist() for a in tup] for tup in self.params],
            "embedding": self.embedding.tolist(),
            "readout": self.readout.tolist(),
            "readout_bias": self.readout_bias.tolist(),
        }

    def describe(self) -> str:
        cells = "; ".join(f"{g.state} = {g.root}" for g in self.cell)
        return f"{self.kind} cell, p = {self.p}, {len(self.layout)} tuples: {cells}"


def random_cell(
    space: SearchSpace,
    layout: Layout,
    rng: np.random.Generator,
    state: str = "h",
    max_tries: int = 1000,
) -> CellGraph:
    """A seeded random cell with ``space.n_iterations`` generated nodes over ``space``.

    Nodes are built as Algorithm 2 orders them: each is ``(r, o, u)`` drawn uniformly with
    an ordered pair ``i < j`` of the node list ``S_data, S_prev, S_aux, P_{k-1}`` (the earlier
    node is the left child). Every generated node is used by a later one (one operand comes
    from the unused ones, two when needed), so the DAG rooted at the last node has exactly
    ``n_iterations`` nodes, and the root depends on every data and previous-state leaf.
    Evaluated on a random probe (random tuples, identity tuples of ``layout`` kept), no node
    may be constant over the probe or equal (within ``EXCLUSION_TOL``) to an earlier node,
    as Algorithm 2's exclusion by value asks. Drawings that miss a rule are redrawn
    (``max_tries``).
    """
    space.check(layout)
    required = set(space.data + space.prev)
    probe_leaves = {leaf: rng.standard_normal((_PROBE_BATCH, _PROBE_P)) for leaf in required}
    probe_params = [_random_tuple(rng, _PROBE_P, 1.0, 1.0, layout, r) for r in range(len(layout))]
    for _ in range(max_tries):
        root = _draw_cell(space, rng)
        if root is not None and required <= set(root.leaves()) and _distinct_and_varying(
            backend("numpy").evaluate(root, probe_leaves, probe_params)
        ):
            return CellGraph(root, state)
    raise CellGraphError(
        f"random_cell: no cell with {space.n_iterations} distinct, input-dependent nodes using "
        f"all of {sorted(map(str, required))} found in {max_tries} tries"
    )


def _distinct_and_varying(values: dict[Expr, np.ndarray]) -> bool:
    """Every generated node's probe value varies over the batch and differs from the leaves'
    and the earlier nodes' values (``values`` in :meth:`Expr.walk` order)."""
    shape = (_PROBE_BATCH, _PROBE_P)
    known = [np.broadcast_to(v, shape) for e, v in values.items() if isinstance(e, Leaf)]
    for node in (e for e in values if isinstance(e, Node)):
        v = values[node]
        if np.ptp(v, axis=0).max() <= EXCLUSION_TOL:
            return False
        if any(np.abs(v - w).max() <= EXCLUSION_TOL for w in known):
            return False
        known.append(v)
    return True


def _draw_cell(space: SearchSpace, rng: np.random.Generator) -> Expr | None:
    nodes: list[Expr] = list(space.leaves)
    unused: list[int] = []
    for k in range(space.n_iterations):
        remaining = space.n_iterations - k
        forced = [unused.pop(rng.integers(len(unused)))] if unused else []
        if len(unused) >= remaining:  # one operand would leave too many unused nodes
            forced.append(unused.pop(rng.integers(len(unused))))
        others = [i for i in range(len(nodes)) if i not in forced]
        while len(forced) < 2:
            if not others:
                return None
            forced.append(others.pop(rng.integers(len(others))))
        i, j = sorted(forced)
        node = Node(
            space.ops[rng.integers(len(space.ops))],
            space.activations[rng.integers(len(space.activations))],
            space.tuples[rng.integers(len(space.tuples))],
            nodes[i], nodes[j],
        )
        if node in nodes:
            return None
        unused = [u for u in unused if u not in (i, j)] + [len(nodes)]
        nodes.append(node)
    return nodes[-1]


def make_teacher(
    kind: str,
    rng: np.random.Generator,
    p: int,
    vocab_size: int,
    n_classes: int,
    center_on: np.ndarray,
    weight_scale: float = 1.0,
    bias_scale: float = 0.1,
    space: SearchSpace | None = None,
    layout: Layout | None = None,
) -> Teacher:
    """A random teacher of ``kind`` (a target name or ``random``), its readout standardised
    on the states of the token rows ``center_on`` (steps 2-4 of the module docstring)."""
    if kind == RANDOM:
        if (space is None) != (layout is None):
            raise CellGraphError("random teacher: give both space and layout, or neither")
        if space is None:
            gru = target("gru")
            space, layout = gru.spaces[0], gru.layout
        space.check(layout)
        if len(space.data) != 1 or any(l != Leaf("h", Role.PREV) for l in space.prev):
            raise CellGraphError(
                "random teacher: the space needs one data leaf and only the previous state h "
                f"(a one-run cell makes h), got data {list(map(str, space.data))}, "
                f"prev {list(map(str, space.prev))}"
            )
        cell, spaces = MultiCell((random_cell(space, layout, rng),)), (space,)
    elif kind in target_names():
        if space is not None or layout is not None:
            raise CellGraphError(f"teacher {kind!r} has its own space and layout")
        tgt = target(kind)
        cell, spaces, layout = tgt.cell, tgt.spaces, tgt.layout
    else:
        raise CellGraphError(f"unknown teacher {kind!r} (known: {', '.join(target_names())}, {RANDOM})")
    params = tuple(_random_tuple(rng, p, weight_scale, bias_scale, layout, r) for r in range(len(layout)))
    embedding = rng.standard_normal((vocab_size, p))
    readout = rng.standard_normal((n_classes, p)) / np.sqrt(p)
    teacher = Teacher(kind, cell, layout, spaces, params, embedding, readout, np.zeros(n_classes))
    logits = teacher.logits(center_on).reshape(-1, n_classes)
    scale = 1.0 / np.maximum(logits.std(axis=0), 1e-12)
    return Teacher(kind, cell, layout, spaces, params, embedding, readout * scale[:, None],
                   -logits.mean(axis=0) * scale)


def _random_tuple(
    rng: np.random.Generator, p: int, weight_scale: float, bias_scale: float, layout: Layout, r: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if r in layout.identity_indices:
        return np.eye(p), np.eye(p), np.zeros(p)
    scale = weight_scale / np.sqrt(p)
    return (rng.standard_normal((p, p)) * scale, rng.standard_normal((p, p)) * scale,
            rng.standard_normal(p) * bias_scale)


def distinct_rows(rng: np.random.Generator, n: int, seq_len: int, vocab_size: int) -> np.ndarray:
    """``n`` distinct uniform token rows ``(n, seq_len)``, in drawing order."""
    if vocab_size ** seq_len < n:
        raise CellGraphError(
            f"planted: {n} distinct sequences need vocab_size ** seq_len >= {n}, "
            f"got {vocab_size} ** {seq_len}"
        )
    rows: dict[bytes, np.ndarray] = {}
    while len(rows) < n:
        for row in rng.integers(vocab_size, size=(n, seq_len)):
            rows.setdefault(row.tobytes(), row)
            if len(rows) == n:
                break
    return np.stack(list(rows.values()))


def load_planted(
    n_train: int = 1_000,
    n_val: int = 200,
    n_test: int = 200,
    seq_len: int = 10,
    seed: int = 0,
    teacher: str = "gru",
    p: int = 8,
    vocab_size: int = 8,
    n_classes: int = 4,
    weight_scale: float = 1.0,
    bias_scale: float = 0.1,
    space: SearchSpace | None = None,
    layout: Layout | None = None,
) -> Dataset:
    """The planted task (task ``tag``: a class per step, metric accuracy); ``dataset.teacher``
    is the :class:`Teacher`. Small by default: it trains in a minute."""
    if min(n_train, n_val, n_test, seq_len, p, vocab_size) < 1 or n_classes < 2:
        raise CellGraphError("planted: sizes must be >= 1 and n_classes >= 2")
    rng = np.random.default_rng(seed)
    tokens = distinct_rows(rng, n_train + n_val + n_test, seq_len, vocab_size)
    hidden = make_teacher(
        teacher, rng, p, vocab_size, n_classes, tokens[:n_train], weight_scale, bias_scale,
        space, layout,
    )
    targets = hidden.predict(tokens)
    bounds = np.cumsum([0, n_train, n_val, n_test])
    splits = [Split(tokens[a:b], targets[a:b], np.arange(a, b), source=f"planted-{teacher}")
              for a, b in zip(bounds, bounds[1:])]
    return Dataset(
        "planted", "tag", "accuracy", tuple(f"t{i}" for i in range(vocab_size)), *splits,
        classes=tuple(f"class{k}" for k in range(n_classes)), seed=seed,
        info={"p": p, "weight_scale": weight_scale, "bias_scale": bias_scale},
        teacher=hidden,
    )
