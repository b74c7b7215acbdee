"""Float64 numpy evaluation of cell graphs (paper, Sec. 3.1; docs/paper-notes.md,
*Objects: leaves, nodes, tuples*).

Every generated node computes

    c = u(o(L_r c_i, R_r c_j) + b_r)

with the weight tuple ``r`` of the node, the operation ``o`` and activation ``u`` taken from
the registry's ``numeric["numpy"]`` forms (user-registered entries work too).

Shapes: ``params[r] = (L_r, R_r, b_r)`` with ``L_r``, ``R_r`` of shape ``(p, p)`` and ``b_r``
of shape ``(p,)``; a leaf value is ``(p,)`` (one sample) or ``(B, p)`` (a batch, rows are
samples); node values have the broadcast shape of their children.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from cellgraph.cell import registry
from cellgraph.cell.constants import fill_constants
from cellgraph.cell.expr import Expr, Leaf, Node, Role
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.errors import CellGraphError

__all__ = [
    "Params",
    "as_params",
    "as_leaf_vector",
    "numpy_op",
    "numpy_activation",
    "combine",
    "evaluate",
    "evaluate_cell",
    "mlp_alpha",
]

Params = Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]
Tuple = tuple[np.ndarray, np.ndarray, np.ndarray]


def as_params(params: Params) -> list[Tuple]:
    """``params`` as float64 arrays, shapes checked: ``L``, ``R`` ``(p, p)``, ``b`` ``(p,)``."""
    if len(params) == 0:
        raise CellGraphError("params must hold at least one tuple (L, R, b)")
    converted: list[Tuple] = []
    p = None
    for r, entry in enumerate(params):
        if len(entry) != 3:
            raise CellGraphError(f"params[{r}] must be a tuple (L, R, b), got {len(entry)} items")
        L, R, b = (np.asarray(a, dtype=np.float64) for a in entry)
        if b.ndim != 1:
            raise CellGraphError(f"params[{r}]: b must be a vector (p,), got shape {b.shape}")
        p = b.shape[0] if p is None else p
        if b.shape != (p,) or L.shape != (p, p) or R.shape != (p, p):
            raise CellGraphError(
                f"params[{r}]: expected L, R of shape ({p}, {p}) and b of shape ({p},), "
                f"got {L.shape}, {R.shape}, {b.shape}"
            )
        converted.append((L, R, b))
    return converted


def as_leaf_vector(leaf: Leaf, value: np.ndarray, p: int, batched: bool = True) -> np.ndarray:
    """A leaf value as float64, shape ``(p,)`` (or ``(B, p)`` when ``batched``) checked."""
    vector = np.asarray(value, dtype=np.float64)
    shapes = "(p,) or (B, p)" if batched else "(p,)"
    if vector.ndim not in ((1, 2) if batched else (1,)) or vector.shape[-1] != p:
        raise CellGraphError(f"leaf {leaf!r}: value of shape {vector.shape}, expected {shapes} with p = {p}")
    return vector


def numpy_op(name: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    entry = registry.op(name)
    if "numpy" not in entry.numeric:
        raise CellGraphError(f"operation {name!r} has no numpy form (has: {sorted(entry.numeric)})")
    return entry.numeric["numpy"]


def numpy_activation(name: str) -> Callable[[np.ndarray], np.ndarray]:
    entry = registry.activation(name)
    if "numpy" not in entry.numeric:
        raise CellGraphError(f"activation {name!r} has no numpy form (has: {sorted(entry.numeric)})")
    return entry.numeric["numpy"]


def combine(
    weights: Tuple,
    o: Callable[[np.ndarray, np.ndarray], np.ndarray],
    u: Callable[[np.ndarray], np.ndarray],
    left: np.ndarray,
    right: np.ndarray,
) -> np.ndarray:
    """``u(o(L_r left, R_r right) + b_r)`` for ``weights = (L_r, R_r, b_r)``; rows of a batch."""
    L, R, b = weights
    return u(o(left @ L.T, right @ R.T) + b)


def _weights(params: list[Tuple], node: Node) -> Tuple:
    if node.tuple >= len(params):
        raise CellGraphError(
            f"node {node} uses tuple {node.tuple} but params hold {len(params)} tuples"
        )
    return params[node.tuple]


def evaluate(root: Expr, leaves: Mapping[Leaf, np.ndarray], params: Params) -> dict[Expr, np.ndarray]:
    """The float64 vector of every node of the DAG rooted at ``root`` (leaves included).

    ``leaves`` gives the data, previous-state and current-state leaves; constant leaves
    without a value are filled with :func:`cellgraph.cell.constants.constant_vector`.
    """
    weights = as_params(params)
    p = weights[0][2].shape[0]
    given = fill_constants(root.leaves(), leaves, p)
    values: dict[Expr, np.ndarray] = {}
    for node in root.walk():
        if isinstance(node, Leaf):
            values[node] = as_leaf_vector(node, given[node], p)
        else:
            values[node] = combine(
                _weights(weights, node), numpy_op(node.op), numpy_activation(node.act),
                values[node.left], values[node.right],
            )
    return values


def evaluate_cell(
    cell: MultiCell | CellGraph, leaves: Mapping[Leaf, np.ndarray], params: Params
) -> dict[str, np.ndarray]:
    """State name -> value of a (multi-state) cell; run ``i`` sees the states made by runs
    ``< i`` as ``Leaf(state, Role.CURRENT)`` (paper, Appendix "Extensions of RRNN model")."""
    graphs = cell.graphs if isinstance(cell, MultiCell) else (cell,)
    known = dict(leaves)
    states: dict[str, np.ndarray] = {}
    for graph in graphs:
        states[graph.state] = evaluate(graph.root, known, params)[graph.root]
        known[Leaf(graph.state, Role.CURRENT)] = states[graph.state]
    return states


def mlp_alpha(W1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: float) -> Callable[[np.ndarray], float]:
    """The scoring network of the paper (Sec. 5: "a 2-layer fully connected neural network"):

        alpha(v) = w2 . tanh(W1 v + b1) + b2

    ``W1`` ``(H, p)``, ``b1`` ``(H,)``, ``w2`` ``(H,)``, ``b2`` a scalar; the torch backend
    uses the same form (``Linear(p, H)``, ``Tanh``, ``Linear(H, 1)``). The returned function
    maps a ``(p,)`` vector to a float (a ``(B, p)`` batch to ``(B,)`` scores).
    """
    W1, b1, w2 = (np.asarray(a, dtype=np.float64) for a in (W1, b1, w2))
    b2 = float(b2)
    H = W1.shape[0] if W1.ndim == 2 else -1
    if W1.ndim != 2 or b1.shape != (H,) or w2.shape != (H,):
        raise CellGraphError(
            f"mlp_alpha: expected W1 (H, p), b1 (H,), w2 (H,), got {W1.shape}, {b1.shape}, {w2.shape}"
        )

    def alpha(v: np.ndarray) -> float:
        score = np.tanh(v @ W1.T + b1) @ w2 + b2
        return float(score) if np.ndim(score) == 0 else score

    return alpha
