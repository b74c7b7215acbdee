"""The paper's tree distances VD and TD (Sec. 3.3; docs/paper-notes.md,
*Tree distances: VD, TD and Iso*), in float64.

Heap labels ``I(T)`` number the internal positions (root 1, children ``2i``, ``2i+1``); the
vector ``v_{i,T}`` sits on label ``i``. For trees whose internal positions carry vectors
(:meth:`Tree.require_vectors`):

    VD(T1, T2) = sum_{i in I1 & I2} ||v_{i,T1} - v_{i,T2}||^2
               + sum_{i in I1 - I2} ||v_{i,T1}||^2 + sum_{i in I2 - I1} ||v_{i,T2}||^2

    TD(Tpd, Ttgt) = sum_{n1 in V(Tpd)} min_{n2 in V(Ttgt)} VD(Subtree(Tpd, n1), Subtree(Ttgt, n2))

``n1`` and ``n2`` range over all positions, leaves included; a leaf's subtree has no
internal position, so a leaf of ``Tpd`` adds nothing. The Eq. 5 loss uses
``td_iso = min over Iso(Ttgt) of TD`` (:mod:`cellgraph.algorithms.isomorphism`).

Matching a subtree to a target *leaf* costs its own mass, so a predicted tree whose vectors
are all zero is at TD 0 from every target: from a start far from the target, TD is lowered
by shrinking the predicted vectors as well as by moving them towards the target
(docs/paper-notes.md, *TD's zero minimum*). ``match`` selects the ``n2`` a subtree may match:

- ``"any"``: every position, leaves included (the paper's definition);
- ``"internal"``: internal positions only, so each predicted subtree is compared with a
  target subtree that carries vectors (zero vectors then cost the target's mass);
- ``"root"``: only ``n1 = root(Tpd)`` against ``n2 = root(Ttgt)``, i.e. ``VD(Tpd, Ttgt)`` of
  the whole trees: the squared distance of the node vectors, position by position, that the
  authors' RRNN-GRU code uses for its fixed GRU-shaped tree.

Algorithms. Label ``i`` of a subtree's child is ``2i`` or ``2i + 1`` of that child's own
labelling, so VD is the recursion

    VD(A, B) = ||v_A - v_B||^2 + VD(A_1, B_1) + VD(A_2, B_2),   VD(leaf, B) = mass(B),

with ``mass(B) = sum ||v||^2`` over the internal positions of ``B``. TD memoises VD over all
pairs (internal position of ``Tpd``, position of ``Ttgt``): one row of the table per
predicted position, children first, each row a numpy vector over target positions, and all
members of ``Iso(Ttgt)`` at once (they share their positions and only permute children).

DAG form (:func:`td_dag`). A shared DAG node ``a`` of a predicted cell has the same subtree,
hence the same row of VD values, at each of the ``mult(a)`` positions it occupies in the
unfolded tree (:func:`multiplicities`), so

    TD(unfold(root), Ttgt) = sum_{internal DAG nodes a} mult(a) min_{n2} VD(a, Subtree(Ttgt, n2)).

The batched torch loss computes this same sum.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from cellgraph.algorithms.isomorphism import DEFAULT_MAX_SIZE, iso_swaps
from cellgraph.cell.expr import Expr, Node
from cellgraph.cell.tree import Tree
from cellgraph.errors import CellGraphError

__all__ = ["vd", "td", "td_iso", "td_dag", "multiplicities", "MATCHES", "check_match"]

#: the target positions a predicted subtree may match in TD (module docstring)
MATCHES = ("any", "internal", "root")

Vectors = Mapping[Expr, np.ndarray] | Callable[[Expr], np.ndarray]


def _mass(t: Tree) -> float:
    return sum((float(s.vector @ s.vector) for _, s in t.positions()), 0.0)  # type: ignore[operator]


def _sq(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        raise CellGraphError(f"node vectors of different shapes {a.shape} and {b.shape}")
    d = a - b
    return float(d @ d)


def _vd(a: Tree, b: Tree) -> float:
    if a.is_leaf:
        return _mass(b)
    if b.is_leaf:
        return _mass(a)
    (a1, a2), (b1, b2) = a.children, b.children
    return _sq(a.vector, b.vector) + _vd(a1, b1) + _vd(a2, b2)  # type: ignore[arg-type]


def vd(t1: Tree, t2: Tree) -> float:
    """``VD(T1, T2)``: squared vector differences over the heap labels of both trees."""
    t1.require_vectors("vd: first tree")
    t2.require_vectors("vd: second tree")
    return _vd(t1, t2)


def _stack(vectors: Sequence[np.ndarray], what: str) -> np.ndarray:
    shapes = {v.shape for v in vectors}
    if any(len(shape) != 1 for shape in shapes):
        raise CellGraphError(f"{what}: node vectors must be 1-d, got shapes {sorted(shapes)}")
    if len(shapes) > 1:
        raise CellGraphError(f"{what}: node vectors have different shapes {sorted(shapes)}")
    return np.stack(vectors).astype(np.float64, copy=False) if vectors else np.zeros((0, 0))


def _flatten(tree: Tree, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Internal positions children first: vectors ``(n, p)``, first and second child
    indices ``(n,)`` (``n`` for a leaf child) and heap labels ``(n,)``."""
    tree.require_vectors(what)
    vectors: list[np.ndarray] = []
    children: list[tuple[int | None, int | None]] = []
    labels: list[int] = []

    def go(t: Tree, label: int) -> int | None:
        if t.is_leaf:
            return None
        pair = (go(t.children[0], 2 * label), go(t.children[1], 2 * label + 1))
        vectors.append(t.vector)  # type: ignore[arg-type]
        children.append(pair)
        labels.append(label)
        return len(vectors) - 1

    go(tree, 1)
    n = len(vectors)
    index = np.array([[n if i is None else i for i in pair] for pair in children], dtype=np.intp)
    index = index.reshape(n, 2)
    return _stack(vectors, what), index[:, 0], index[:, 1], np.array(labels, dtype=np.int64)


def _masses(vectors: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """``mass`` of every subtree, children-first rows, plus a trailing 0 for a leaf."""
    n = len(first)
    mass = np.zeros(n + 1)
    for a in range(n):
        mass[a] = vectors[a] @ vectors[a] + mass[first[a]] + mass[second[a]]
    return mass


def check_match(match: str) -> None:
    """Raise a clear error for an unknown TD ``match`` (:data:`MATCHES`)."""
    if match not in MATCHES:
        raise CellGraphError(f"unknown TD match {match!r}: one of {', '.join(MATCHES)}")


def _td_batch(
    pred: tuple[np.ndarray, np.ndarray, np.ndarray],
    weights: np.ndarray,
    tgt: tuple[np.ndarray, np.ndarray, np.ndarray],
    match: str = "any",
) -> np.ndarray:
    """TD of one prediction against ``K`` target orientations, shape ``(K,)``.

    ``pred``: vectors ``(n, p)``, first/second child ``(n,)`` in ``[0, n]`` (``n`` = leaf),
    rows children first (the root last); ``weights (n,)``: positions per row. ``tgt``: vectors
    ``(m, p)``, first/second child ``(K, m)`` in ``[0, m]`` (``m`` = leaf) for each orientation,
    children first (the root last). ``match``: :data:`MATCHES`.
    """
    check_match(match)
    pv, pf, ps = pred
    tv, tf, ts = tgt
    n, (k, m) = len(pf), tf.shape
    if n and m and pv.shape[1] != tv.shape[1]:
        raise CellGraphError(
            f"predicted vectors have length {pv.shape[1]}, target vectors {tv.shape[1]}"
        )
    p_mass = _masses(pv, pf, ps)
    if m == 0:  # the target is a leaf: VD(a, leaf) = mass(a)
        return np.full(k, p_mass[n - 1] if match == "root" and n else weights @ p_mass[:n])
    # the target masses do not depend on the orientation: use the first one's children
    t_mass = _masses(tv, tf[0], ts[0])
    # rows[a, j, q] = VD(pred row a, target position q of orientation j); q = m is a leaf,
    # a = n is a leaf row (VD(leaf, q) = mass(q))
    rows = np.empty((n + 1, k, m + 1))
    rows[n] = t_mass
    total = np.zeros(k)
    for a in range(n):
        diff = tv - pv[a]
        rows[a, :, :m] = (
            np.einsum("qp,qp->q", diff, diff)
            + np.take_along_axis(rows[pf[a]], tf, axis=1)
            + np.take_along_axis(rows[ps[a]], ts, axis=1)
        )
        rows[a, :, m] = p_mass[a]
        if match != "root":
            total += weights[a] * rows[a, :, : m if match == "internal" else m + 1].min(axis=1)
    if match == "root":
        return rows[n - 1, :, m - 1] if n else np.full(k, t_mass[m - 1])
    return total


def _targets(t_tgt: Tree, swaps: Sequence[frozenset[int]]) -> tuple[np.ndarray, ...]:
    """The target's positions with each orientation's first/second children, ``(K, m)``."""
    vectors, first, second, labels = _flatten(t_tgt, "td: target tree")
    swapped = np.array([[label in s for label in labels] for s in swaps], dtype=bool)
    swapped = swapped.reshape(len(swaps), len(labels))
    return vectors, np.where(swapped, second, first), np.where(swapped, first, second)


def _pred_tree(t_pred: Tree) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    vectors, first, second, _ = _flatten(t_pred, "td: predicted tree")
    return (vectors, first, second), np.ones(len(first))


def td(t_pred: Tree, t_tgt: Tree, match: str = "any") -> float:
    """``TD(Tpd, Ttgt)`` for one fixed orientation of the target (``match``: :data:`MATCHES`)."""
    pred, weights = _pred_tree(t_pred)
    return float(_td_batch(pred, weights, _targets(t_tgt, [frozenset()]), match)[0])


def td_iso(t_pred: Tree, t_tgt: Tree, max_size: int = DEFAULT_MAX_SIZE, match: str = "any") -> float:
    """``min over Iso(Ttgt) of TD(Tpd, T)``, the tree term of Eq. 5 (``max_size`` bounds
    ``|Iso(Ttgt)|``, see :func:`~cellgraph.algorithms.isomorphism.iso_swaps`; ``match``:
    :data:`MATCHES`)."""
    pred, weights = _pred_tree(t_pred)
    return float(_td_batch(pred, weights, _targets(t_tgt, iso_swaps(t_tgt, max_size)), match).min())


def multiplicities(root: Expr) -> dict[Expr, int]:
    """Number of positions each DAG node occupies in ``unfold(root)`` (the root: 1)."""
    mult: dict[Expr, int] = {root: 1}
    for n in reversed(root.internal_nodes()):  # every parent before its children
        for child in n.children:
            mult[child] = mult.get(child, 0) + mult[n]
    return mult


def td_dag(pred_root: Expr, pred_vectors: Vectors, t_tgt: Tree, match: str = "any") -> float:
    """``TD(unfold(pred_root).with_vectors(pred_vectors), t_tgt)`` computed on the DAG: one
    VD row per distinct generated node, weighted by its :func:`multiplicities` (module
    docstring). ``pred_vectors`` maps DAG nodes to vectors (mapping or function); ``match``:
    :data:`MATCHES` (``"root"`` needs no multiplicities: it reads the root's row only)."""
    get = pred_vectors if callable(pred_vectors) else pred_vectors.__getitem__
    nodes: tuple[Node, ...] = pred_root.internal_nodes()
    index = {node: i for i, node in enumerate(nodes)}
    n = len(nodes)
    vectors = []
    for node in nodes:
        try:
            vectors.append(np.asarray(get(node), dtype=np.float64))
        except KeyError:
            raise CellGraphError(f"td_dag: predicted node {node} has no vector") from None
    first = np.array([index.get(node.left, n) for node in nodes], dtype=np.intp)
    second = np.array([index.get(node.right, n) for node in nodes], dtype=np.intp)
    mult = multiplicities(pred_root)
    weights = np.array([mult[node] for node in nodes], dtype=np.float64)
    pred = (_stack(vectors, "td_dag: predicted cell"), first, second)
    return float(_td_batch(pred, weights, _targets(t_tgt, [frozenset()]), match)[0])
