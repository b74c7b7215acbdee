"""Freeze a cell graph into an ordinary recurrent ``nn.Module`` (paper, Sec. 3.1: the cell as
a computational tree; Appendix "Extensions" for multi-state cells).

:func:`freeze` compiles the DAG(s) of a :class:`~cellgraph.graph.CellGraph`,
:class:`~cellgraph.graph.MultiCell` or :class:`~cellgraph.targets.Target` once into a
straight-line program: every node ``u(o(L_r c_i, R_r c_j) + b_r)`` in topological order,
with all the edge matrices that read the same child stacked into one matmul (the GRU's
``W_r x``, ``W_z x``, ``W_h x`` are one ``x @ [W_r; W_z; W_h]^T``). Edges of identity
tuples ``(I, I, 0)`` cost nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from cellgraph.backends import torch_ops
from cellgraph.errors import CellGraphError
from cellgraph.expr import Expr, Leaf, Node, Role
from cellgraph.graph import CellGraph, MultiCell
from cellgraph.layout import Layout, TupleSpec
from cellgraph.targets import Target, target, torch_tuples

__all__ = ["FrozenCell", "freeze"]


@dataclass(frozen=True)
class _Projection:
    """``values[child] @ W^T`` for the stacked edge matrices ``rows`` (indices into
    ``cat([L, R])`` of the trainable tuples)."""

    child: int
    rows: tuple[int, ...]


@dataclass(frozen=True)
class _Operand:
    """A node operand: the child's value, or chunk ``chunk`` of its projection."""

    child: int
    chunk: int | None


@dataclass(frozen=True)
class _Step:
    slot: int
    op: Callable[[Tensor, Tensor], Tensor]
    act: Callable[[Tensor], Tensor]
    left: _Operand
    right: _Operand
    bias: int | None  # trainable position of b_r, None for an identity tuple
    projections: tuple[_Projection, ...]  # of this node's value, run right after it


class FrozenCell(nn.Module):
    r"""A fixed (searched or hand-made) RRNN cell as a recurrent cell module.

    Every generated node computes

    .. math::
        c = u\big(o(L_r c_i,\; R_r c_j) + b_r\big)

    over the leaves ``x_t``, the previous states, the states already made at step ``t``
    (multi-state cells, e.g. LSTM: run 1 makes ``c_t``, run 2 reads it) and constants.

    Args:
        cell: the multi-state cell (one graph per state, in run order), or one graph (its
            ``current`` leaves, if any, are then inputs of :meth:`run`).
        layout: the weight tuples; identity tuples are fixed ``(I, I, 0)`` buffers.
        params: per layout tuple ``(L (p, p), R (p, p), b (p,))`` (numpy or torch), or
            ``None`` for a uniform ``(-1/sqrt(p), 1/sqrt(p))`` initialisation.
        hidden_size: ``p`` (needed when ``params`` is ``None``).
        dtype: parameter dtype.

    Shape:
        - x: ``(B, p)``; state: ``(B, p)``, or a tuple in ``cell.states`` order.
        - output: the new state(s), same structure as ``state``.

    Attributes:
        weight_L, weight_R: ``(n_trainable, p, p)``; bias: ``(n_trainable, p)``, for the
            trainable tuples in layout order (``layout.trainable_indices``).
    """

    def __init__(self, cell: MultiCell | CellGraph, layout: Layout, params: Sequence | None = None,
                 hidden_size: int | None = None, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        cell.validate(layout)
        self.graphs = cell.graphs if isinstance(cell, MultiCell) else (cell,)
        self.layout, self.states = layout, tuple(g.state for g in self.graphs)
        trainable = layout.trainable_indices
        self._position = {r: k for k, r in enumerate(trainable)}
        if params is not None:
            if len(params) != len(layout):
                raise CellGraphError(f"freeze: {len(params)} parameter tuples for a layout of {len(layout)}")
            params = [tuple(torch.as_tensor(np.asarray(a) if not torch.is_tensor(a) else a).to(dtype)
                            for a in t) for t in params]
            p = params[0][2].shape[-1]
            if hidden_size is not None and hidden_size != p:
                raise CellGraphError(f"freeze: hidden_size={hidden_size} but the parameters have p={p}")
            for r in layout.identity_indices:
                L, R, b = params[r]
                eye = torch.eye(p, dtype=dtype)
                if not (torch.equal(L, eye) and torch.equal(R, eye) and not b.any()):
                    raise CellGraphError(f"freeze: tuple {r} ({layout.tuples[r].name}) is an identity "
                                         "tuple and must be (I, I, 0)")
            stack = lambda i: (torch.stack([params[r][i] for r in trainable])  # noqa: E731
                               if trainable else torch.zeros(0, *params[0][i].shape, dtype=dtype))
            L, R, b = stack(0), stack(1), stack(2)
        elif hidden_size is None:
            raise CellGraphError("freeze: give params or hidden_size")
        else:
            p, n, k = hidden_size, len(trainable), hidden_size ** -0.5
            L, R, b = ((torch.rand(n, *shape, dtype=dtype) * 2 - 1) * k
                       for shape in ((p, p), (p, p), (p,)))
        self.hidden_size = p
        self.weight_L, self.weight_R, self.bias = nn.Parameter(L), nn.Parameter(R), nn.Parameter(b)
        self._compile()

    # --- compilation ---------------------------------------------------------------------
    def _compile(self) -> None:
        slots: dict[Expr, int] = {}
        self._leaves: list[Leaf] = []
        self._roots: list[int] = []
        nodes: list[Node] = []
        n_slots = 0
        for g in self.graphs:
            for e in g.nodes():
                if e in slots:
                    continue
                if isinstance(e, Leaf) and e.role is Role.CURRENT:
                    made = self.states[:len(self._roots)]
                    if e.name in made:  # alias of a state made by an earlier run
                        slots[e] = self._roots[made.index(e.name)]
                        continue
                slots[e], n_slots = n_slots, n_slots + 1
                (self._leaves if isinstance(e, Leaf) else nodes).append(e)
            self._roots.append(slots[g.root])
        self._n_slots, self._slots = n_slots, slots
        self._leaf_slots = [slots[leaf] for leaf in self._leaves]
        reads: dict[int, list[int]] = {}  # child slot -> rows of cat([L, R])
        n_trainable = len(self._position)
        for n in nodes:
            if n.tuple in self._position:
                k = self._position[n.tuple]
                for child, row in ((n.left, k), (n.right, n_trainable + k)):
                    rows = reads.setdefault(slots[child], [])
                    if row not in rows:
                        rows.append(row)
        proj = lambda s: (_Projection(s, tuple(reads[s])),) if s in reads else ()  # noqa: E731
        self._leaf_projections = tuple(pr for s in self._leaf_slots for pr in proj(s))
        steps = []
        for n in nodes:
            k = self._position.get(n.tuple)
            operand = lambda child, row: _Operand(  # noqa: E731
                slots[child], None if k is None else reads[slots[child]].index(row))
            steps.append(_Step(
                slots[n], torch_ops.op(n.op), torch_ops.activation(n.act),
                operand(n.left, k), operand(n.right, None if k is None else n_trainable + k),
                k, proj(slots[n]),
            ))
        self._steps = tuple(steps)

    # --- execution -----------------------------------------------------------------------
    def run(self, values: Mapping[Leaf, Tensor]) -> list[Tensor]:
        """Evaluate the program on leaf values (``(B, p)`` or ``(p,)``; constants may be
        left out) and return the value of every graph's root, in run order."""
        vals = self._execute(values)
        return [vals[r] for r in self._roots]

    def node_values(self, values: Mapping[Leaf, Tensor]) -> dict[Expr, Tensor]:
        """The value of every node of every graph (leaves included), as :meth:`run`."""
        vals = self._execute(values)
        return {e: vals[slot] for e, slot in self._slots.items()}

    def _execute(self, values: Mapping[Leaf, Tensor]) -> list[Tensor]:
        p = self.hidden_size
        vals: list[Tensor | None] = [None] * self._n_slots
        for leaf, slot in zip(self._leaves, self._leaf_slots):
            if leaf in values:
                vals[slot] = values[leaf]
            elif leaf.role is Role.CONST:
                vals[slot] = torch_ops.constant(leaf, p, self.bias.dtype, self.bias.device)
            else:
                raise CellGraphError(f"no value given for leaf {leaf.name!r} ({leaf.role.value})")
        W = torch.cat([self.weight_L, self.weight_R])
        proj: dict[int, list[Tensor]] = {}

        def project(projections: tuple[_Projection, ...]) -> None:
            for pr in projections:
                rows = W[list(pr.rows)].reshape(-1, p)
                proj[pr.child] = (vals[pr.child] @ rows.T).split(p, -1)

        def operand(o: _Operand) -> Tensor:
            return vals[o.child] if o.chunk is None else proj[o.child][o.chunk]

        project(self._leaf_projections)
        for step in self._steps:
            pre = step.op(operand(step.left), operand(step.right))
            if step.bias is not None:
                pre = pre + self.bias[step.bias]
            vals[step.slot] = step.act(pre)
            project(step.projections)
        return vals

    def forward(self, x: Tensor, state: Tensor | tuple[Tensor, ...] | None = None):
        if state is None:
            state = tuple(x.new_zeros(x.shape[0], self.hidden_size) for _ in self.states)
        elif torch.is_tensor(state):
            state = (state,)
        if len(state) != len(self.states):
            raise CellGraphError(f"FrozenCell: expected {len(self.states)} states {self.states}, got {len(state)}")
        prev = dict(zip(self.states, state))
        values = {leaf: torch_ops.leaf_vector(leaf, x, prev, {})
                  for leaf in self._leaves if leaf.role is not Role.CURRENT}
        out = self.run(values)
        return out[0] if len(out) == 1 else tuple(out)

    @classmethod
    def from_torch(cls, module: nn.Module) -> "FrozenCell":
        """The ``gru_torch`` / ``lstm_torch`` cell with the weights of a ``torch.nn.GRUCell``
        / ``torch.nn.LSTMCell`` (input size = hidden size, with biases)."""
        name = {nn.GRUCell: "gru_torch", nn.LSTMCell: "lstm_torch"}.get(type(module))
        if name is None or module.bias_ih is None:
            raise CellGraphError(
                f"FrozenCell.from_torch: expected a torch.nn.GRUCell or LSTMCell with biases, "
                f"got {type(module).__name__}"
            )
        weights = [t.detach().cpu().double().numpy()
                   for t in (module.weight_ih, module.weight_hh, module.bias_ih, module.bias_hh)]
        return freeze(target(name), torch_tuples(name, *weights), dtype=module.weight_ih.dtype)


def freeze(cell: CellGraph | MultiCell | Target, params: Sequence | None = None,
           layout: Layout | None = None, hidden_size: int | None = None,
           dtype: torch.dtype = torch.float32) -> FrozenCell:
    """A :class:`FrozenCell` running ``cell`` with no search.

    ``layout`` defaults to the target's, else to all-trainable tuples ``t0, t1, ...`` up to
    the largest tuple index used.
    """
    if isinstance(cell, Target):
        layout = layout or cell.layout
        cell = cell.cell
    if not isinstance(cell, (MultiCell, CellGraph)):
        raise CellGraphError(f"freeze: expected a CellGraph, MultiCell or Target, got {type(cell).__name__}")
    if layout is None:
        graphs = cell.graphs if isinstance(cell, MultiCell) else (cell,)
        used = [n.tuple for g in graphs for n in g.internal_nodes()]
        layout = Layout(tuple(TupleSpec(f"t{i}") for i in range(max(used, default=-1) + 1)))
    return FrozenCell(cell, layout, params, hidden_size, dtype)
