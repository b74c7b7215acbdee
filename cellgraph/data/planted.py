"""The ``planted`` task: data made by a hidden teacher cell, so that structure recovery can be
measured (TD to the teacher's tree, frequency of its canonical form among discovered cells).

Generation (all from one seed):

1. token ids ``tokens[i, t]`` uniform over ``vocab_size`` symbols, every row distinct;
2. a fixed random embedding ``E`` ``(vocab_size, p)``, ``N(0, 1)`` entries: ``x_t = E[tokens[:, t]]``;
3. the teacher cell runs over ``x_1..x_T`` from zero states, evaluated in float64 by the
   numpy backend with random tuples ``(L_r, R_r, b_r)``: ``L_r, R_r ~ N(0, weight_scale^2/p)``,
   ``b_r ~ N(0, bias_scale^2)``; identity tuples stay ``(I, I, 0)``, and a matrix whose display
   name in the layout is ``I`` or ``0`` is that (``gru_torch``'s ``R_n``, ``mut1``'s ``L_h``,
   ``mut2``'s ``L_r``: the nearest forms of docs/paper-notes.md, *Planted teachers*);
4. the target at step ``t`` is ``argmax_k (W h_t + b)_k`` with a fixed random readout: rows
   ``N(0, 1/p)``, then each logit standardised (zero mean, unit deviation) over the train
   states, which keeps the classes roughly balanced.

The task is learnable exactly by the teacher's structure. The teacher is any target of
:mod:`cellgraph.targets` (``gru``, ``lstm``, ``mgu``, ``mut1``, ...), ``random`` (a cell drawn
by :func:`random_cell` from the data seed over a :class:`~cellgraph.cell.layout.SearchSpace`,
default the ``gru`` target's space and layout) or ``random:SEED``: the cell
:func:`random_teacher` draws from ``SEED`` alone, whatever the data seed (which draws its
weights), of :data:`RANDOM_SIZES` generated nodes; ``random:SEED:LOW-HIGH`` draws its size from
``LOW-HIGH`` instead (:func:`random_spec` parses both). ``minimal:SEED[:LOW-HIGH]`` is the
first cell of that draw (sub-seeds ``0, 1, ...``) that is minimal and well conditioned
(:func:`probe_problem`: the filters of :mod:`cellgraph.data.minimal` on a probe drawn from
``SEED`` and the sub-seed), so it too depends on ``SEED`` alone. A teacher whose states or readout
logits are not finite over the data (overflow, NaN) is refused with a :class:`CellGraphError`
that names it; a random teacher first redraws its cell with the next sub-seed (a minimal one
with the next that passes the filters), up to :data:`MAX_DRAWS` cells, and records the number of
cells drawn as ``draws``. The
:class:`Teacher` is kept on the data set (``dataset.teacher``) with a
JSON-serialisable description (:meth:`Teacher.to_json`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator, TypeVar

import networkx as nx
import numpy as np

from cellgraph.algorithm2 import EXCLUSION_TOL
from cellgraph.backend import backend
from cellgraph.cell.expr import Expr, Leaf, Node, Role
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout, SearchSpace, TupleSpec
from cellgraph.data.datasets import Dataset, Split
from cellgraph.data.minimal import minimal_problem
from cellgraph.data.teacher_specs import (
    MAX_DRAWS, MAX_MINIMAL_DRAWS, MAX_RANDOM_NODES, MINIMAL, RANDOM, RANDOM_SIZES, TEACHERS, RandomSpec,
    is_teacher_spec, random_sizes, random_spec, teacher_folder,
)
from cellgraph.errors import CellGraphError
from cellgraph.targets import Target, target, target_names

__all__ = [
    "Teacher", "random_cell", "random_teacher", "random_teacher_problem", "make_teacher", "distinct_rows",
    "load_planted", "TEACHERS", "is_teacher_spec", "MAX_DRAWS", "RANDOM_SIZES", "MAX_RANDOM_NODES", "RandomSpec",
    "random_spec", "random_sizes", "teacher_folder", "MINIMAL", "MAX_MINIMAL_DRAWS", "PROBE", "probe_problem",
    "teacher_draws", "first_cell", "refusals",
]

#: Batch size and vector size of the probe on which :func:`random_cell` checks its nodes.
_PROBE_BATCH, _PROBE_P = 16, 4


@dataclass(frozen=True)
class Probe:
    """The probe of :func:`probe_problem`: ``draws`` draws of ``sequences`` input sequences of
    ``steps`` steps, ``x ~ N(0, I_p)``, and tuples drawn as :func:`teacher_tuples` draws them."""

    sequences: int = 64
    steps: int = 10
    p: int = 8
    weight_scale: float = 1.0
    bias_scale: float = 0.1
    draws: int = 4


#: The probe of ``minimal:SEED``: the planted regression task's default ``p`` and ``seq_len``
#: and the weight scale at which random teachers' own structures fit (docs/discover.md).
PROBE = Probe()
_T = TypeVar("_T")


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
    draws: int | None = None

    @property
    def p(self) -> int:
        return self.embedding.shape[1]

    def states(self, tokens: np.ndarray) -> dict[str, np.ndarray]:
        """State name -> ``(n, T, p)`` values over the sequences ``tokens`` ``(n, T)``."""
        return run_cell(self.cell, self.params, self.embedding[np.asarray(tokens)])

    def logits(self, tokens: np.ndarray) -> np.ndarray:
        """``W h_t + b`` ``(n, T, n_classes)``, ``h_t`` the output state."""
        return self.read(self.states(tokens))

    def read(self, states: dict[str, np.ndarray]) -> np.ndarray:
        """``W h_t + b`` of the output state in ``states`` (from :meth:`states`)."""
        return states[self.cell.output.state] @ self.readout.T + self.readout_bias

    def predict(self, tokens: np.ndarray) -> np.ndarray:
        """The target classes ``(n, T)`` of ``tokens`` ``(n, T)``."""
        return self.logits(tokens).argmax(axis=-1)

    def to_json(self) -> dict[str, Any]:
        """Everything needed to rebuild the teacher, as plain JSON types. Each graph is
        :meth:`CellGraph.to_networkx` in networkx's node-link form; ``draws`` (``random:SEED``
        only): the cells drawn, the last kept."""
        return {
            "kind": self.kind,
            **({} if self.draws is None else {"draws": self.draws}),
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


def run_cell(cell: MultiCell, params: tuple, inputs: np.ndarray) -> dict[str, np.ndarray]:
    """State name -> ``(n, T, p)`` values of ``cell`` (float64, the numpy backend, zero initial
    states) over the input vectors ``inputs`` ``(n, T, p)`` fed to its data leaf;
    ``params[r] = (L_r, R_r, b_r)`` by layout index."""
    (data,) = {l for g in cell for l in g.leaves() if l.role is Role.DATA}
    n, steps, p = inputs.shape
    prev = {s: np.zeros((n, p)) for s in cell.states}
    out: dict[str, list[np.ndarray]] = {s: [] for s in cell.states}
    for t in range(steps):
        leaves = {Leaf(s, Role.PREV): v for s, v in prev.items()}
        leaves[data] = inputs[:, t]
        prev = backend("numpy").evaluate_cell(cell, leaves, params)
        for s, v in prev.items():
            out[s].append(v)
    return {s: np.stack(v, axis=1) for s, v in out.items()}


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


def random_teacher_problem(cell: MultiCell, sizes: tuple[int, int] = RANDOM_SIZES) -> str | None:
    """What keeps ``cell`` from being a random teacher of ``sizes``, or ``None``: it must be one
    state ``h`` of ``LOW-HIGH`` generated nodes that reads ``x`` and ``h``, and no node
    may be an identity chain ``identity(add(I a, I zero))`` (``a`` copied) on tuple index
    ``identity`` of the ``gru`` layout. Every node of a :class:`CellGraph` is reachable from
    its root."""
    if cell.states != ("h",):
        return f"it makes states {list(cell.states)}, not h alone"
    graph, (low, high) = cell.output, sizes
    nodes = graph.internal_nodes()
    if not low <= len(nodes) <= high:
        return f"it has {len(nodes)} generated nodes, not {low}-{high}"
    missing = {Leaf("x"), Leaf("h")} - set(graph.leaves())
    if missing:
        return f"it does not read {', '.join(sorted(map(str, missing)))}"
    identity = target("gru").layout.identity_indices
    for n in nodes:
        if n.tuple in identity and n.act == "identity" and n.op == "add" and Leaf("zero") in n.children:
            return f"node {n} copies its operand (an identity chain)"
    return None


def random_teacher(seed: int, draw: int = 0, sizes: tuple[int, int] = RANDOM_SIZES) -> Target:
    """The cell of teacher ``random:SEED`` (``random:SEED:LOW-HIGH`` for other ``sizes``) at
    sub-seed ``draw``, from ``seed``, ``draw`` and ``sizes`` alone: ``N`` uniform in ``sizes``
    (inclusive), then :func:`random_cell` with ``N`` iterations over the ``gru`` target's space
    and layout (``x``, ``h``, ``zero``; sigmoid, tanh, one_minus, identity; add, mul; three
    trainable tuples and the identity). Raises :class:`CellGraphError` if the cell misses a
    rule of :func:`random_teacher_problem`."""
    name = str(RandomSpec(seed, sizes))
    if isinstance(draw, bool) or not isinstance(draw, int) or draw < 0:
        raise CellGraphError(f"random teacher {name}: the sub-seed must be an integer >= 0, got {draw!r}")
    rng = np.random.default_rng((seed, draw))
    gru = target("gru")
    space = dataclasses.replace(gru.spaces[0], n_iterations=int(rng.integers(sizes[0], sizes[1] + 1)))
    cell = MultiCell((random_cell(space, gru.layout, rng),))
    problem = random_teacher_problem(cell, sizes)
    if problem:
        raise CellGraphError(f"teacher {name}, sub-seed {draw}: {problem}")
    return Target(name, cell, gru.layout, (space,), (),
                  f"a random cell of {space.n_iterations} nodes (sub-seed {draw})")


class _NotFinite(CellGraphError):
    """A teacher whose states or logits are not finite over the planted data."""


_LOWER = "its tuples are drawn with weight_scale and bias_scale: lower them"


def make_teacher(
    kind: str,
    rng: np.random.Generator,
    p: int,
    vocab_size: int,
    n_classes: int,
    tokens: np.ndarray,
    n_center: int,
    weight_scale: float = 1.0,
    bias_scale: float = 0.1,
    space: SearchSpace | None = None,
    layout: Layout | None = None,
) -> tuple[Teacher, np.ndarray]:
    """A random teacher of ``kind`` (a target name, ``random`` or a :func:`random_spec`) and the
    classes ``(n, T)`` it gives the token rows ``tokens``; its readout is standardised on the
    states of the first ``n_center`` rows (steps 2-4 of the module docstring). A teacher that
    is not finite over ``tokens`` is an error; ``random:SEED`` redraws its cell first."""
    if random_spec(kind) is None:
        cell, layout, spaces = _teacher_cell(kind, rng, space, layout)
        return _label(Teacher(kind, cell, layout, spaces, *_weights(rng, p, vocab_size, n_classes, weight_scale,
                                                                     bias_scale, layout)), tokens, n_center)
    if space is not None or layout is not None:
        raise CellGraphError(f"teacher {kind!r} draws its own space and layout")
    start = rng.bit_generator.state

    def attempt(tgt: Target, draws: int | None) -> tuple[Teacher, np.ndarray]:
        rng.bit_generator.state = start  # every cell drawn gets the same weights
        weights = _weights(rng, p, vocab_size, n_classes, weight_scale, bias_scale, tgt.layout)
        return _label(Teacher(kind, tgt.cell, tgt.layout, tgt.spaces, *weights, draws=draws), tokens, n_center)

    return first_finite(kind, attempt)


def first_finite(spec: str, attempt: Callable[[Target, int | None], _T]) -> _T:
    """``attempt(cell, draws)`` for the cell of teacher ``spec``: a target name once
    (``draws`` ``None``), a :func:`random_spec` at the sub-seeds of :func:`teacher_draws`
    (``draws`` the cells drawn so far) until an attempt does not find the teacher non-finite
    (:func:`check_finite`), at most :data:`MAX_DRAWS` attempts."""
    chosen = random_spec(spec)
    if chosen is None:
        return attempt(target(spec), None)
    tried = []
    for draw, tgt in teacher_draws(chosen):
        try:
            return attempt(tgt, draw + 1)
        except _NotFinite as err:
            last, tried = err, [*tried, draw]
    if not tried:
        raise _no_minimal(chosen)
    which = f"sub-seeds {tried[0]}-{tried[-1]}" + ("" if not chosen.minimal else " that pass the filters")
    raise CellGraphError(f"{last} (the cells of {which}, all refused, the last)")


def probe_problem(tgt: Target, seed: int, draw: int, probe: Probe | None = None) -> str | None:
    """What keeps the cell of ``tgt`` (a random teacher's, one state ``h``) from being a
    ``minimal`` teacher, or ``None``: :func:`cellgraph.data.minimal.minimal_problem` on each of
    ``probe.draws`` probes (inputs, then tuples over ``tgt.layout``), drawn from ``(seed,
    draw)`` alone by a stream of their own (the cell's is ``(seed, draw)``)."""
    probe = probe or PROBE
    rng = np.random.default_rng((seed, draw, 1))
    for _ in range(probe.draws):
        inputs = rng.standard_normal((probe.sequences, probe.steps, probe.p))
        params = teacher_tuples(rng, probe.p, probe.weight_scale, probe.bias_scale, tgt.layout)
        problem = minimal_problem(tgt.cell.output.root, params, inputs, tgt.layout.identity_indices)
        if problem:
            return problem
    return None


def teacher_draws(spec: RandomSpec, refused: Counter | None = None) -> Iterator[tuple[int, Target]]:
    """``(sub-seed, cell)`` of teacher ``spec`` in drawing order, at most :data:`MAX_DRAWS`:
    :func:`random_teacher` at sub-seeds ``0, 1, ...``; for a ``minimal`` spec only those that
    :func:`probe_problem` passes, among the first :data:`MAX_MINIMAL_DRAWS` sub-seeds, each
    named ``spec``, the others counted in ``refused`` by the problem's kind (``forgetful``,
    ``remove``, ...)."""
    kept = 0
    for draw in range(MAX_MINIMAL_DRAWS if spec.minimal else MAX_DRAWS):
        tgt = random_teacher(spec.seed, draw, spec.sizes)
        problem = probe_problem(tgt, spec.seed, draw) if spec.minimal else None
        if problem:
            if refused is not None:
                refused[problem.partition(":")[0]] += 1
            continue
        yield draw, dataclasses.replace(tgt, name=str(spec), description=tgt.description
                                        + (", minimal and well conditioned on its probe" if spec.minimal else ""))
        kept += 1
        if kept == MAX_DRAWS:
            return


def _no_minimal(spec: RandomSpec) -> CellGraphError:
    refused: Counter = Counter()
    for _ in teacher_draws(spec, refused):
        break
    counts = ", ".join(f"{n} {kind}" for kind, n in refused.most_common())
    return CellGraphError(f"teacher {spec}: none of the cells of sub-seeds 0-{MAX_MINIMAL_DRAWS - 1} is minimal and "
                          f"well conditioned ({counts})")


def first_cell(spec: RandomSpec) -> Target:
    """The first cell of :func:`teacher_draws` (``random:SEED``'s is :func:`random_teacher`'s
    at sub-seed 0); a :class:`CellGraphError` where a ``minimal`` spec has none."""
    for _, tgt in teacher_draws(spec):
        return tgt
    raise _no_minimal(spec)


def refusals(spec: RandomSpec, draws: int) -> dict[str, int]:
    """Problem kind -> the cells among the first ``draws`` sub-seeds of teacher ``spec`` that
    :func:`teacher_draws` skipped (none for a ``random`` spec): why a teacher that records
    ``draws`` cells drew them."""
    refused: Counter = Counter()
    for draw, _ in teacher_draws(spec, refused):
        if draw + 1 >= draws:
            break
    return dict(refused.most_common())


def _teacher_cell(kind: str, rng: np.random.Generator, space: SearchSpace | None,
                  layout: Layout | None) -> tuple[MultiCell, Layout, tuple[SearchSpace, ...]]:
    """The cell, layout and spaces of teacher ``kind``, a target name or ``random``."""
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
        return MultiCell((random_cell(space, layout, rng),)), layout, (space,)
    if kind in target_names():
        if space is not None or layout is not None:
            raise CellGraphError(f"teacher {kind!r} has its own space and layout")
        tgt = target(kind)
        return tgt.cell, tgt.layout, tgt.spaces
    raise CellGraphError(f"unknown teacher {kind!r} (known: {', '.join(target_names())}, {RANDOM}, {RANDOM}:SEED, "
                         f"{RANDOM}:SEED:LOW-HIGH)")


def _weights(rng: np.random.Generator, p: int, vocab_size: int, n_classes: int, weight_scale: float,
             bias_scale: float, layout: Layout) -> tuple:
    """``params, embedding, readout, readout_bias`` of a teacher over ``layout``, in drawing
    order; the readout is not yet standardised (bias zero)."""
    params = teacher_tuples(rng, p, weight_scale, bias_scale, layout)
    embedding = rng.standard_normal((vocab_size, p))
    readout = rng.standard_normal((n_classes, p)) / np.sqrt(p)
    return params, embedding, readout, np.zeros(n_classes)


def teacher_tuples(rng: np.random.Generator, p: int, weight_scale: float, bias_scale: float,
                   layout: Layout) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
    """A teacher's tuples ``(L_r, R_r, b_r)`` over ``layout``, drawn as step 3 of the module
    docstring says (identity tuples and the matrices the layout names ``I`` or ``0`` fixed)."""
    return tuple(_fixed_parts(_random_tuple(rng, p, weight_scale, bias_scale, layout, r), layout.tuples[r])
                 for r in range(len(layout)))


def _fixed_parts(tup: tuple[np.ndarray, np.ndarray, np.ndarray], spec: TupleSpec
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``tup`` with each matrix whose display name in ``spec`` is ``I`` or ``0`` set to it."""
    p = len(tup[2])
    fixed = {"I": np.eye, "0": lambda n: np.zeros((n, n))}
    names = spec.fixed_matrices
    L, R = (fixed[names[side]](p) if side in names else m for side, m in (("L", tup[0]), ("R", tup[1])))
    return L, R, tup[2]


def _label(teacher: Teacher, tokens: np.ndarray, n_center: int) -> tuple[Teacher, np.ndarray]:
    """``teacher`` with its readout standardised on the first ``n_center`` rows of ``tokens``,
    and its classes of ``tokens``."""
    logits = _finite_logits(teacher, tokens[:n_center]).reshape(-1, teacher.readout.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        deviation = logits.std(axis=0)
    if not np.isfinite(deviation).all():
        raise _NotFinite(f"planted teacher {teacher.kind}: the readout's logits are too large to standardise "
                         f"(their deviation overflows); {_LOWER}")
    scale = 1.0 / np.maximum(deviation, 1e-12)
    teacher = dataclasses.replace(teacher, readout=teacher.readout * scale[:, None],
                                  readout_bias=-logits.mean(axis=0) * scale)
    return teacher, _finite_logits(teacher, tokens).argmax(axis=-1)


def _finite_logits(teacher: Teacher, tokens: np.ndarray) -> np.ndarray:
    """The teacher's logits of ``tokens`` ``(n, T)``; raises :class:`_NotFinite`, naming the
    teacher, the value and the first step, where a state or logit is NaN or infinite."""
    with np.errstate(over="ignore", invalid="ignore"):
        states = teacher.states(tokens)
        logits = teacher.read(states)
    check_finite(teacher.kind, {**{f"state {s}": v for s, v in states.items()}, "the readout's logits": logits})
    return logits


def check_finite(kind: str, values: dict[str, np.ndarray]) -> None:
    """Raise :class:`_NotFinite`, naming teacher ``kind``, the value and its first step, where
    one of ``values`` (name -> ``(n, T, ...)``) is NaN or infinite."""
    for what, v in values.items():
        bad = ~np.isfinite(v)
        if bad.any():
            step = int(np.flatnonzero(bad.reshape(*bad.shape[:2], -1).any(axis=(0, 2)))[0]) + 1
            raise _NotFinite(
                f"planted teacher {kind}: {what} is not finite from step {step} of {v.shape[1]} on "
                f"({int(np.isnan(v).sum())} NaN, {int(np.isinf(v).sum())} infinite of {v.size} "
                f"values); {_LOWER}"
            )


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
    hidden, targets = make_teacher(
        teacher, rng, p, vocab_size, n_classes, tokens, n_train, weight_scale, bias_scale, space, layout,
    )
    bounds = np.cumsum([0, n_train, n_val, n_test])
    splits = [Split(tokens[a:b], targets[a:b], np.arange(a, b), source=f"planted-{teacher}")
              for a, b in zip(bounds, bounds[1:])]
    return Dataset(
        "planted", "tag", "accuracy", tuple(f"t{i}" for i in range(vocab_size)), *splits,
        classes=tuple(f"class{k}" for k in range(n_classes)), seed=seed,
        info={"p": p, "weight_scale": weight_scale, "bias_scale": bias_scale},
        teacher=hidden,
    )
