"""Target providers: the vectors on the target tree of the TD term of Eq. 5
(docs/paper-notes.md, *TD target vectors: self and teacher*).

Both providers evaluate a target cell's DAG node by node,

    c = u(o(L_r c_i, R_r c_j) + b_r)    (identity tuple: c = u(o(c_i, c_j)))

and lay the node vectors on the positions of its :class:`~cellgraph.backends.torch.training.loss.TargetTree`
(``(B, m, p)``, the order :func:`~cellgraph.backends.torch.training.loss.td_loss` expects):

* :class:`SelfTargetProvider` (``self``): the target tree on the same leaves as the model's
  cell, with the model's own tuples (GRU: ``r``, ``z``, ``h~`` -> model tuples 0, 1, 2;
  identity edges -> the fixed ``(I, I, 0)``). Differentiable w.r.t. tuples and leaves.
* :class:`TeacherTargetProvider` (``teacher``): a trained ``torch.nn.GRU`` run on the same
  inputs with its own hidden states, laid on the ``gru_torch`` tree, which computes what
  torch computes, ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`` (not the authors'
  ``(r * h) W_hn + r * b_hn``). The teacher is frozen: its vectors carry no gradient.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import torch
from torch import Tensor, nn

from cellgraph.algorithms.isomorphism import DEFAULT_MAX_SIZE
from cellgraph.backends.torch.runtime import ops as torch_ops
from cellgraph.backends.torch.training.loss import TargetTree
from cellgraph.backends.torch.algorithm2.trace import SearchTrace
from cellgraph.cell.expr import Expr, Leaf, Role
from cellgraph.errors import CellGraphError
from cellgraph.targets import Target, target as named_target, torch_tuples

__all__ = ["evaluate_target", "trace_leaves", "SelfTargetProvider", "TeacherTargetProvider"]

Weights = tuple[Tensor, Tensor, Tensor]


def trace_leaves(trace: SearchTrace) -> dict[Leaf, Tensor]:
    """The leaf values ``(B, p)`` of a search trace, by leaf."""
    return {leaf: trace.vectors[:, i] for i, leaf in enumerate(trace.space.leaves)}


def evaluate_target(tree: TargetTree, leaves: Mapping[Leaf, Tensor],
                    tuples: Sequence[Weights | None]) -> Tensor:
    """``(B, m, p)`` vectors of ``tree``'s positions.

    Args:
        tree: the target structure.
        leaves: leaf -> ``(B, p)``; constant leaves that are missing get their fixed vector.
        tuples: indexed by the target layout: ``(L (p, p), R (p, p), b (p,))``, or ``None``
            for the fixed identity tuple ``(I, I, 0)``.
    """
    if not leaves:
        raise CellGraphError("evaluate_target: no leaf values given")
    like = next(iter(leaves.values()))
    values: dict[Expr, Tensor] = {}
    for node in tree.tree.expr.walk():
        if isinstance(node, Leaf):
            if node in leaves:
                values[node] = leaves[node]
            elif node.role is Role.CONST:
                values[node] = torch_ops.constant(node, like.shape[-1], like.dtype, like.device)
            else:
                raise CellGraphError(
                    f"evaluate_target: target leaf {node.name!r} ({node.role.value}) has no value "
                    f"(given: {', '.join(l.name for l in leaves)})"
                )
            continue
        if node.tuple >= len(tuples):
            raise CellGraphError(f"evaluate_target: node {node} uses tuple {node.tuple}, only {len(tuples)} given")
        a, b = values[node.left], values[node.right]
        weights = tuples[node.tuple]
        if weights is None:
            z = torch_ops.op(node.op)(a, b)
        else:
            L, R, bias = weights
            z = torch_ops.op(node.op)(a @ L.T, b @ R.T) + bias
        values[node] = torch_ops.activation(node.act)(z)
    return tree.lay(values)


def _as_target(spec: Target | str) -> Target:
    return named_target(spec) if isinstance(spec, str) else spec


class SelfTargetProvider:
    r"""Target vectors from the target tree evaluated with the model's own tuples
    (docs/paper-notes.md, *TD target vectors: self and teacher*).

    For every run ``i`` of a (multi-state) target, the target graph of that run is evaluated
    on the leaves of the model's run ``i`` (``x_t``, the previous states, this step's earlier
    states, constants), each target node ``r`` using model tuple ``tuple_map[r]``:

    .. math::
        c = u(o(L_{map(r)} c_i, R_{map(r)} c_j) + b_{map(r)})

    Args:
        target: a :class:`~cellgraph.targets.Target` or its name (``"gru"``).
        tuple_map: target layout index -> model tuple index, or ``None`` for the fixed
            identity ``(I, I, 0)``. Default: the target's trainable tuples in order map to
            model tuples ``0, 1, ...``; identity tuples stay the fixed identity.
        max_size: bound on ``|Iso|`` of the prepared target trees.

    Attributes:
        trees: one :class:`TargetTree` per run.

    Call: ``provider(runs, tuples) -> [(B, m_i, p) per run]``; ``runs`` holds per run a
    :class:`SearchTrace` or a mapping leaf -> ``(B, p)``; ``tuples = (L (n, p, p),
    R (n, p, p), b (n, p))`` indexed by model tuple index (e.g. the RRNN's
    ``layout_tuples()`` or its trainable ``(weight_L, weight_R, bias)``).
    """

    def __init__(self, target: Target | str, tuple_map: Mapping[int, int | None] | None = None,
                 max_size: int = DEFAULT_MAX_SIZE) -> None:
        self.target = _as_target(target)
        layout = self.target.layout
        if tuple_map is None:
            tuple_map = {r: k for k, r in enumerate(layout.trainable_indices)}
            tuple_map.update({r: None for r in layout.identity_indices})
        unmapped = sorted({n.tuple for g in self.target.cell for n in g.internal_nodes()} - set(tuple_map))
        if unmapped:
            names = [layout.tuples[r].name for r in unmapped]
            raise CellGraphError(f"SelfTargetProvider({self.target.name}): tuple_map misses target tuples {names}")
        self.tuple_map = dict(tuple_map)
        self.trees = tuple(TargetTree(g.unfold(), max_size) for g in self.target.cell)

    def __call__(self, runs: Sequence[SearchTrace | Mapping[Leaf, Tensor]], tuples: Weights) -> list[Tensor]:
        if len(runs) != len(self.trees):
            raise CellGraphError(
                f"SelfTargetProvider({self.target.name}): {len(runs)} runs given, the target has {len(self.trees)}"
            )
        L, R, b = tuples
        n = L.shape[0]
        bad = {r: k for r, k in self.tuple_map.items() if k is not None and not 0 <= k < n}
        if bad:
            raise CellGraphError(f"SelfTargetProvider({self.target.name}): tuple_map {bad} out of range for {n} model tuples")
        weights = [None if (k := self.tuple_map.get(r)) is None else (L[k], R[k], b[k])
                   for r in range(len(self.target.layout))]
        return [evaluate_target(tree, trace_leaves(run) if isinstance(run, SearchTrace) else run, weights)
                for tree, run in zip(self.trees, runs)]


class TeacherTargetProvider:
    r"""Target vectors from a trained GRU, laid on the ``gru_torch`` tree
    (docs/paper-notes.md, *TD target vectors: self and teacher*).

    .. math::
        r = \sigma(W_{ir} x + b_{ir} + W_{hr} h + b_{hr}), \quad
        z = \sigma(W_{iz} x + b_{iz} + W_{hz} h + b_{hz}), \\
        n = \tanh(W_{in} x + b_{in} + r \odot (W_{hn} h + b_{hn})), \quad
        h' = (1 - z) \odot n + z \odot h

    exactly as ``torch.nn.GRU`` computes it; ``h`` is the teacher's own hidden state.

    Args:
        gru: a one-layer, one-direction ``nn.GRU`` or an ``nn.GRUCell`` with input size =
            hidden size, or its weights ``(weight_ih (3p, p), weight_hh (3p, p), bias_ih
            (3p,), bias_hh (3p,))``.
        max_size: bound on ``|Iso(gru_torch)|``.

    Attributes:
        trees: ``(TargetTree of gru_torch,)``.

    Shape:
        - ``step(x (B, p), h (B, p)) -> (vectors (B, m, p), h' (B, p))``;
        - ``provider(inputs (T, B, p), h0 (B, p) | None) -> [[vectors (B, m, p)] per step]``
          (one run per step, as :class:`RRNNLoss` takes them).
    """

    def __init__(self, gru: nn.GRU | nn.GRUCell | Sequence[Tensor], max_size: int = DEFAULT_MAX_SIZE) -> None:
        if isinstance(gru, nn.GRU):
            if gru.num_layers != 1 or gru.bidirectional:
                raise CellGraphError("TeacherTargetProvider: the teacher must be a one-layer, one-direction GRU")
            if gru.batch_first:
                raise CellGraphError("TeacherTargetProvider: pass a GRU with batch_first=False (inputs are (T, B, p))")
            names = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")
        elif isinstance(gru, nn.GRUCell):
            names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        else:
            names = ()
        if names:
            weight = getattr(gru, names[0])
            bias = [getattr(gru, k, None) for k in names[2:]]  # absent or None when bias=False
            weights = [weight, getattr(gru, names[1])] + [weight.new_zeros(weight.shape[0]) if v is None else v
                                                          for v in bias]
        else:
            weights = list(gru)
        self.dtype = weights[0].dtype
        self.device = weights[0].device
        arrays = torch_tuples("gru_torch", *(w.detach().cpu().double().numpy() for w in weights))
        self.target = named_target("gru_torch")
        identity = self.target.layout.identity_indices
        self.tuples: list[Weights | None] = [
            None if r in identity else tuple(torch.as_tensor(a, dtype=self.dtype, device=self.device) for a in t)
            for r, t in enumerate(arrays)
        ]
        self.trees = (TargetTree(self.target.graph.unfold(), max_size),)
        self._leaves = {leaf.name: leaf for leaf in self.target.graph.leaves() if leaf.role is not Role.CONST}

    @property
    def hidden_size(self) -> int:
        return self.tuples[0][2].shape[0]  # type: ignore[index]

    @torch.no_grad()
    def step(self, x: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        vectors = evaluate_target(self.trees[0], {self._leaves["x"]: x, self._leaves["h"]: h}, self.tuples)
        return vectors, vectors[:, 0]

    @torch.no_grad()
    def __call__(self, inputs: Tensor, h0: Tensor | None = None) -> list[list[Tensor]]:
        T, B, p = inputs.shape
        if p != self.hidden_size:
            raise CellGraphError(f"TeacherTargetProvider: inputs of size {p}, the teacher's hidden size is {self.hidden_size}")
        h = inputs.new_zeros(B, p) if h0 is None else h0
        out = []
        for x in inputs:
            vectors, h = self.step(x, h)
            out.append([vectors])
        return out
