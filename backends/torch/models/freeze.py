"""Freeze a cell graph into an ordinary recurrent ``nn.Module`` (paper, Sec. 3.1: the cell as
a computational tree; Appendix "Extensions" for multi-state cells).

:func:`freeze` compiles the DAG(s) of a :class:`~cellgraph.cell.graph.CellGraph`,
:class:`~cellgraph.cell.graph.MultiCell` or :class:`~cellgraph.targets.Target` once into a flat
program over a list of registers, written the way ``torch.nn.GRUCell`` is written by hand:

* a node ``u(o(L_r c_i, R_r c_j) + b_r)`` with a trainable tuple reads its children through
  *projections*: all the edge matrices that read the same child are stacked into one matrix,
  so a child costs one matmul (the GRU's ``W_r x``, ``W_z x``, ``W_h x`` are one
  ``x @ [W_r; W_z; W_h]^T``);
* the bias ``b_r`` of an additive node (``o = +``) is fused into the ``addmm`` of one child's
  projection (the data leaf's or a constant's when the node reads one, as those are made once
  per sequence by :class:`FrozenRNN`);
* trainable nodes with the same children, operation and activation (the GRU's ``r`` and
  ``z``) form a group: their rows are adjacent in both projections, so the group is one
  elementwise ``u(o(., .))`` over ``(B, k p)`` whose column blocks are the nodes' values;
* identity tuples ``(I, I, 0)`` cost no matmul, and ``c + 0`` with the zero constant no op;
* with ``fixed_matrices``, a matrix of a trainable tuple that the layout names ``I`` or ``0``
  (``torch.nn.GRU``'s ``R`` of ``n`` in ``gru_torch``) stays the identity or zero: its
  parameter entries are zero, masked out and replaced by that value whenever the weights are
  gathered, so neither the loss nor the L2 term moves them.

:class:`FrozenRNN` runs a frozen cell over a sequence: the stacked weights are gathered once,
and the projections of ``x`` (for all time steps, in one matmul) and of the constants are
made before the loop, since they do not depend on the state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple, Sequence

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from cellgraph.backends.torch.runtime import ops as torch_ops
from cellgraph.backends.torch.runtime.compiled import Compiled
from cellgraph.backends.torch.models.plan import group_nodes
from cellgraph.cell.expr import Expr, Leaf, Node, Role
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout, TupleSpec
from cellgraph.errors import CellGraphError
from cellgraph.targets import Target, target, torch_tuples

__all__ = ["FrozenCell", "FrozenRNN", "freeze"]

#: One row of a projection: ``(row of cat([L, R]), row of the bias or None)``.
_Row = tuple[int, int | None]


@dataclass(frozen=True)
class _Projection:
    """``F.linear(registers[child], W, b)`` with the stacked rows of projection ``index``;
    the output's columns split into ``sizes`` blocks, written to the registers ``outs``."""

    index: int
    child: int
    bias: int | None  # index into _Prepared.biases
    sizes: tuple[int, ...]
    outs: tuple[int, ...]


@dataclass(frozen=True)
class _Group:
    """``act(op(registers[left], registers[right]) + bias)``, split into ``p`` column blocks
    written to the node registers ``outs``; ``op is None``: ``registers[left]`` alone (the
    other operand is the zero vector)."""

    op: Callable[[Tensor, Tensor], Tensor] | None
    act: Callable[[Tensor], Tensor]
    left: int
    right: int
    bias: int | None  # index into _Prepared.biases
    outs: tuple[int, ...]


class _Rows:
    """Where lists of rows of ``cat(sources)`` (each source ``n`` rows long) come from: a
    slice of one source when they are consecutive in it (and it is below ``limit``), else the
    ``index_select`` of all the others at once by the rows :attr:`gathered`."""

    def __init__(self, row_lists: Sequence[tuple[int, ...]], n: int, limit: int) -> None:
        self.slices: list[tuple[int, int, int] | None] = []
        self.gathered: list[int] = []
        self.sizes: list[int] = []
        for rows in row_lists:
            first, last = rows[0], rows[-1]
            if last < limit and first // n == last // n and list(rows) == list(range(first, last + 1)):
                self.slices.append((first // n, first % n, last % n + 1))
            else:
                self.slices.append(None)
                self.gathered += rows
                self.sizes.append(len(rows))

    def take(self, sources: Sequence[Tensor | None], index: Tensor) -> tuple[Tensor, ...]:
        """Each list's rows (``index``: :attr:`gathered` as a tensor), flattened over the row
        and the next dimension."""
        gathered = iter(())
        if self.gathered:
            rows = torch.cat(list(sources)).index_select(0, index).flatten(0, 1)
            gathered = iter(rows.split([k * sources[0].shape[1] for k in self.sizes]))
        return tuple(next(gathered) if sl is None else sources[sl[0]][sl[1]:sl[2]].flatten(0, 1)
                     for sl in self.slices)


class _Blocks:
    """The registers of projection blocks, after the ``first`` node registers: one per child
    and distinct tuple of rows, in the order asked for."""

    def __init__(self, first: int) -> None:
        self.n_registers = first
        self.table: dict[int, dict[tuple[_Row, ...], int]] = {}  # child -> rows -> register

    def register(self, child: int, rows: tuple[_Row, ...]) -> int:
        table = self.table.setdefault(child, {})
        if rows not in table:
            table[rows], self.n_registers = self.n_registers, self.n_registers + 1
        return table[rows]


class _Prepared(NamedTuple):
    """What a call (or a whole sequence) takes from the parameters: the stacked weight rows
    ``(k p, p)`` of each projection, the biases (of the projections that fuse one, then of the
    non-additive groups), and the constant leaves' ``(p,)`` vectors by register."""

    weights: tuple[Tensor, ...]
    biases: tuple[Tensor, ...]
    constants: Mapping[int, Tensor]


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
        fixed_matrices: the matrices of trainable tuples that the layout names ``I`` or ``0``
            (:attr:`~cellgraph.cell.layout.TupleSpec.fixed_matrices`) are that matrix and do
            not train; else every matrix of a trainable tuple trains.

    Shape:
        - x: ``(B, p)``; state: ``(B, p)``, or a tuple in ``cell.states`` order.
        - output: the new state(s), same structure as ``state``.

    Attributes:
        weight_L, weight_R: ``(n_trainable, p, p)``; bias: ``(n_trainable, p)``, for the
            trainable tuples in layout order (``layout.trainable_indices``).
    """

    def __init__(self, cell: MultiCell | CellGraph, layout: Layout, params: Sequence | None = None,
                 hidden_size: int | None = None, dtype: torch.dtype = torch.float32,
                 fixed_matrices: bool = False) -> None:
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
        self._fixed = fixed_matrices and self._fix(layout)
        self._constant_cache: dict[tuple[torch.dtype, torch.device], dict[int, Tensor]] = {}
        self._compile()

    def _fix(self, layout: Layout) -> bool:
        """Registers ``_keep (2, n, 1, 1)`` (0 for a fixed ``L`` / ``R``, else 1) and
        ``_fixed_value (2, n, p, p)`` (``I`` or 0 there, else 0) and zeroes the fixed entries of
        ``weight_L`` / ``weight_R``; False when the layout names no fixed matrix."""
        p, n, dtype = self.hidden_size, len(self._position), self.weight_L.dtype
        keep = torch.ones(2, n, 1, 1, dtype=dtype)
        value = torch.zeros(2, n, p, p, dtype=dtype)
        for r, k in self._position.items():
            for side, name in layout.tuples[r].fixed_matrices.items():
                keep["LR".index(side), k] = 0
                if name == "I":
                    value["LR".index(side), k] = torch.eye(p, dtype=dtype)
        if keep.all():
            return False
        self.register_buffer("_keep", keep, persistent=False)
        self.register_buffer("_fixed_value", value, persistent=False)
        with torch.no_grad():
            for weight, k in zip((self.weight_L, self.weight_R), keep):
                weight.mul_(k)
        return True

    # --- compilation ---------------------------------------------------------------------
    def _compile(self) -> None:
        """The program: the leaves' projections, then per group (or identity-tuple node) its
        elementwise op followed by the projections of the values it made. Registers
        ``0 .. n_slots - 1`` are the nodes (leaves included), the rest projection blocks."""
        nodes = self._assign_slots()
        items = self._group(nodes, self._slots)
        blocks = _Blocks(len(self._leaves) + len(nodes))  # after the node registers
        reads, group_biases = self._reads(items, blocks)
        projections, weight_rows, bias_rows = self._projections(blocks)
        shift = len(bias_rows)
        self._program = self._make_program(items, reads, projections, shift)
        self._projections = tuple(projections.values())
        self._n_registers = blocks.n_registers
        n_trainable = len(self._position)
        self._weight_rows = _Rows(weight_rows, n_trainable, 2 * n_trainable)
        self._bias_rows = _Rows(bias_rows + group_biases, n_trainable, n_trainable)  # not the zero row
        for name, rows in (("_weight_index", self._weight_rows), ("_bias_index", self._bias_rows)):
            self.register_buffer(name, torch.tensor(rows.gathered, dtype=torch.long), persistent=False)

    def _assign_slots(self) -> list[Node]:
        """A register per distinct node of the graphs (a ``current`` leaf of a state made by
        an earlier run aliases that state's root); sets the leaves, roots and slots, returns
        the generated nodes in order."""
        slots: dict[Expr, int] = {}
        self._leaves: list[Leaf] = []
        self._roots: list[int] = []
        nodes: list[Node] = []
        for g in self.graphs:
            for e in g.nodes():
                if e in slots:
                    continue
                if isinstance(e, Leaf) and e.role is Role.CURRENT:
                    made = self.states[:len(self._roots)]
                    if e.name in made:  # alias of a state made by an earlier run
                        slots[e] = self._roots[made.index(e.name)]
                        continue
                slots[e] = len(self._leaves) + len(nodes)
                (self._leaves if isinstance(e, Leaf) else nodes).append(e)
            self._roots.append(slots[g.root])
        self._slots = slots
        self._leaf_slots = [slots[leaf] for leaf in self._leaves]
        self._static = {slots[leaf] for leaf in self._leaves if leaf.role in (Role.DATA, Role.CONST)}
        return nodes

    def _reads(self, items: list[tuple[Node, ...]], blocks: "_Blocks"
               ) -> tuple[list[tuple[int, int, int | None] | None], list[tuple[int, ...]]]:
        """Per item the registers of its left and right projection blocks and the index of its
        own bias (a non-additive group; additive ones fuse ``b_r`` into a projection), ``None``
        for an identity-tuple node; and the bias rows of the non-additive groups."""
        n_trainable = len(self._position)
        group_biases: list[tuple[int, ...]] = []
        reads: list[tuple[int, int, int | None] | None] = []
        for members in items:
            first = members[0]
            if first.tuple not in self._position:
                reads.append(None)
                continue
            left, right = self._slots[first.left], self._slots[first.right]
            ks = tuple(self._position[n.tuple] for n in members)
            additive = torch_ops.is_additive(first.op)
            # fuse b_r into the projection made least often: a data leaf's or a constant's
            into_right = additive and right in self._static and left not in self._static
            rows_l = tuple((k, k if additive and not into_right else None) for k in ks)
            rows_r = tuple((n_trainable + k, k if into_right else None) for k in ks)
            reads.append((blocks.register(left, rows_l), blocks.register(right, rows_r),
                          None if additive else len(group_biases)))
            if not additive:
                group_biases.append(ks)
        return reads, group_biases

    def _projections(self, blocks: "_Blocks"
                     ) -> tuple[dict[int, _Projection], list[tuple[int, ...]], list[tuple[int, ...]]]:
        """One projection per child, its blocks side by side, with its weight rows and (a zero
        bias row where none is fused) its bias rows."""
        p, n_trainable = self.hidden_size, len(self._position)
        weight_rows: list[tuple[int, ...]] = []
        bias_rows: list[tuple[int, ...]] = []
        projections: dict[int, _Projection] = {}
        for index, (child, table) in enumerate(blocks.table.items()):
            rows = [row for block_rows in table for row in block_rows]
            weight_rows.append(tuple(w for w, _ in rows))
            bias = None
            if any(b is not None for _, b in rows):
                bias = len(bias_rows)
                bias_rows.append(tuple(n_trainable if b is None else b for _, b in rows))
            projections[child] = _Projection(index, child, bias, tuple(len(r) * p for r in table),
                                             tuple(table.values()))
        return projections, weight_rows, bias_rows

    def _make_program(self, items: list[tuple[Node, ...]], reads: list[tuple[int, int, int | None] | None],
                      projections: Mapping[int, _Projection], shift: int) -> tuple[_Projection | _Group, ...]:
        """The leaves' projections, then each item's op followed by the projections of what it
        made; a group's own bias is prepared bias ``shift + its index``."""
        program: list[_Projection | _Group] = [projections[s] for s in self._leaf_slots if s in projections]
        for members, read in zip(items, reads):
            first = members[0]
            outs = tuple(self._slots[n] for n in members)
            if read is None:
                program.append(self._identity_node(first, self._slots))
            else:
                left, right, bias = read
                program.append(_Group(torch_ops.op(first.op), torch_ops.activation(first.act), left, right,
                                      None if bias is None else shift + bias, outs))
            program += [projections[s] for s in outs if s in projections]
        return tuple(program)

    def _group(self, nodes: list[Node], slots: Mapping[Expr, int]) -> list[tuple[Node, ...]]:
        """The nodes in program order (:func:`~cellgraph.backends.torch.models.plan.group_nodes`):
        trainable nodes with the same children, op and activation as one group, in tuple order
        (so that their rows are often a slice), every identity-tuple node alone."""
        def key(n: Node) -> tuple | None:
            return (slots[n.left], slots[n.right], n.op, n.act) if n.tuple in self._position else None

        return [tuple(sorted(members, key=lambda n: self._position.get(n.tuple, 0)))
                for members in group_nodes(nodes, key)]

    def _identity_node(self, n: Node, slots: Mapping[Expr, int]) -> _Group:
        """``u(o(c_i, c_j))`` of an identity-tuple node; ``u(c)`` for ``c + 0``."""
        act = torch_ops.activation(n.act)
        if torch_ops.is_additive(n.op):
            for zero, other in ((n.left, n.right), (n.right, n.left)):
                if (isinstance(zero, Leaf) and zero.role is Role.CONST
                        and not torch_ops.constant(zero, self.hidden_size, torch.float64).any()):
                    return _Group(None, act, slots[other], slots[other], None, (slots[n],))
        return _Group(torch_ops.op(n.op), act, slots[n.left], slots[n.right], None, (slots[n],))

    # --- parameters ----------------------------------------------------------------------
    def prepare(self) -> _Prepared:
        """The stacked weight rows and biases of every projection and group (slices of the
        parameters where the rows are consecutive, else one ``index_select`` for all); a
        sequence module does this once per sequence."""
        p = self.hidden_size
        L, R = self.weight_L, self.weight_R
        if self._fixed:
            L, R = (w * k + v for w, k, v in zip((L, R), self._keep, self._fixed_value))
        weights = self._weight_rows.take((L, R), self._weight_index)
        zero_row = self.bias.new_zeros(1, p) if self._bias_rows.gathered else None
        biases = self._bias_rows.take((self.bias, zero_row), self._bias_index)
        key = (self.bias.dtype, self.bias.device)
        if key not in self._constant_cache:
            self._constant_cache[key] = {
                slot: torch_ops.constant(leaf, p, *key)
                for leaf, slot in zip(self._leaves, self._leaf_slots) if leaf.role is Role.CONST
            }
        return _Prepared(weights, biases, self._constant_cache[key])

    def project_static(self, params: _Prepared, x: Tensor
                       ) -> tuple[dict[int, tuple[tuple[Tensor, ...], ...]], dict[int, tuple[Tensor, ...]]]:
        """The projections that do not depend on the state, made ahead of a loop over
        ``x (T, B, p)``: ``({index: per step its blocks}, {index: blocks})`` for the data leaf
        (one matmul for all steps) and for the constants."""
        data, const = {}, {}
        for pr in self._projections:
            if pr.child in self._static:
                value = params.constants.get(pr.child, x)
                bias = None if pr.bias is None else params.biases[pr.bias]
                blocks = F.linear(value, params.weights[pr.index], bias).split(pr.sizes, -1)
                if pr.child in params.constants:
                    const[pr.index] = blocks
                else:  # unbind, not [t]: one backward op for all steps
                    data[pr.index] = tuple(zip(*(b.unbind(0) for b in blocks)))
        return data, const

    # --- execution -----------------------------------------------------------------------
    def run(self, values: Mapping[Leaf, Tensor]) -> list[Tensor]:
        """Evaluate the program on leaf values (``(B, p)`` or ``(p,)``; constants may be
        left out) and return the value of every graph's root, in run order."""
        vals = self._execute(values, self.prepare(), {})
        return [vals[r] for r in self._roots]

    def node_values(self, values: Mapping[Leaf, Tensor]) -> dict[Expr, Tensor]:
        """The value of every node of every graph (leaves included), as :meth:`run`."""
        vals = self._execute(values, self.prepare(), {})
        return {e: vals[slot] for e, slot in self._slots.items()}

    def _execute(self, values: Mapping[Leaf, Tensor], params: _Prepared,
                 made: Mapping[int, Sequence[Tensor]]) -> list[Tensor | None]:
        """Run the program; ``made``: the blocks of projections made ahead (by index)."""
        vals: list[Tensor | None] = [None] * self._n_registers
        for leaf, slot in zip(self._leaves, self._leaf_slots):
            if leaf in values:
                vals[slot] = values[leaf]
            elif slot in params.constants:
                vals[slot] = params.constants[slot]
            else:
                raise CellGraphError(f"no value given for leaf {leaf.name!r} ({leaf.role.value})")
        p = self.hidden_size
        for ins in self._program:
            if isinstance(ins, _Group):
                pre = vals[ins.left] if ins.op is None else ins.op(vals[ins.left], vals[ins.right])
                if ins.bias is not None:
                    pre = pre + params.biases[ins.bias]
                value = ins.act(pre)
                sizes = p
            elif ins.index in made:
                for register, block in zip(ins.outs, made[ins.index]):
                    vals[register] = block
                continue
            else:
                bias = None if ins.bias is None else params.biases[ins.bias]
                value = F.linear(vals[ins.child], params.weights[ins.index], bias)
                sizes = ins.sizes
            if len(ins.outs) == 1:
                vals[ins.outs[0]] = value
            else:
                for register, block in zip(ins.outs, value.split(sizes, -1)):
                    vals[register] = block
        return vals

    def step(self, x: Tensor, state: Tensor | tuple[Tensor, ...] | None, params: _Prepared,
             made: Mapping[int, Sequence[Tensor]]):
        """One step with prepared parameters and the projections made ahead (see
        :meth:`forward`, :meth:`prepare`, :meth:`project_static`)."""
        vals = self._execute(self._leaf_values(x, state), params, made)
        out = [vals[r] for r in self._roots]
        return out[0] if len(out) == 1 else tuple(out)

    def _leaf_values(self, x: Tensor, state: Tensor | tuple[Tensor, ...] | None) -> dict[Leaf, Tensor]:
        """The value of every leaf but the constants and this step's states: ``x`` and the
        previous states (zeros where ``state`` is None)."""
        if state is None:
            state = tuple(x.new_zeros(x.shape[0], self.hidden_size) for _ in self.states)
        elif torch.is_tensor(state):
            state = (state,)
        if len(state) != len(self.states):
            raise CellGraphError(f"FrozenCell: expected {len(self.states)} states {self.states}, got {len(state)}")
        prev = dict(zip(self.states, state))
        return {leaf: torch_ops.leaf_vector(leaf, x, prev, {})
                for leaf in self._leaves if leaf.role not in (Role.CURRENT, Role.CONST)}

    def forward(self, x: Tensor, state: Tensor | tuple[Tensor, ...] | None = None):
        return self.step(x, state, self.prepare(), {})

    def step_values(self, x: Tensor, state: Tensor | tuple[Tensor, ...] | None = None) -> dict[Expr, Tensor]:
        """The value of every node of every graph (leaves included) at one step from ``x``
        and ``state`` (as :meth:`forward`)."""
        return self.node_values(self._leaf_values(x, state))

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


class FrozenRNN(nn.Module):
    """A :class:`FrozenCell` over a sequence, with the call convention of the RRNN modules:
    ``forward(input, state) -> (output, final_state, None)``; the output at ``t`` is the last
    state the cell makes (``h`` of an LSTM-shaped ``(c, h)`` cell).

    The weights are gathered once per sequence, and the projections of ``x`` for all ``T``
    steps are one matmul ``(T B, p) x (p, k p)`` made before the step loop.

    ``compile``: with gradients on (training), the whole sequence, forward and backward, runs
    through ``torch.compile`` (:class:`~cellgraph.backends.torch.runtime.compiled.Compiled`, in
    ``torch.compile``'s mode ``compile_mode``): the step loop unrolled into one graph, its
    elementwise operations fused, one graph per input shape (the first call of each shape
    compiles, a minute or two on a CPU; eager where compilation fails). Without gradients
    (evaluation) it runs eagerly, which compiles nothing for the evaluation's shapes.

    Shape:
        - input: ``(T, B, p)`` (``(B, T, p)`` with ``batch_first``); state as the cell's.
        - output: ``(T, B, p)`` (``(B, T, p)``).
    """

    def __init__(self, cell: FrozenCell, batch_first: bool = False, compile: bool = False,
                 compile_mode: str = "default") -> None:
        super().__init__()
        self.cell, self.batch_first = cell, batch_first
        self.compiled = (Compiled(self._run, "the frozen cell over a sequence", dynamic=False,
                                  duration="a minute or two per input shape", mode=compile_mode)
                         if compile else None)

    def forward(self, input: Tensor, state: Tensor | tuple[Tensor, ...] | None = None):
        run = self.compiled if self.compiled is not None and torch.is_grad_enabled() else self._run
        return run(input, state)

    def _run(self, input: Tensor, state: Tensor | tuple[Tensor, ...] | None):
        params = self.cell.prepare()
        data, made = self.cell.project_static(params, input.transpose(0, 1) if self.batch_first else input)

        def step(t: int, x_t: Tensor, state: Tensor | tuple[Tensor, ...] | None):
            made.update((k, blocks[t]) for k, blocks in data.items())
            return self.cell.step(x_t, state, params, made), None

        output, state, _ = torch_ops.run_sequence(step, input, state, self.batch_first)
        return output, state, None

    def node_values(self, input: Tensor, t: int) -> dict[Expr, Tensor]:
        """The value ``(B, p)`` of every node of the cell (leaves included) at step ``t`` of
        ``input`` (``(T, B, p)``, or ``(B, T, p)`` with ``batch_first``), from zero states."""
        steps = input.transpose(0, 1) if self.batch_first else input
        state = self(steps[:t])[1] if t else None
        return self.cell.step_values(steps[t], state)


def freeze(cell: CellGraph | MultiCell | Target, params: Sequence | None = None,
           layout: Layout | None = None, hidden_size: int | None = None,
           dtype: torch.dtype = torch.float32, fixed_matrices: bool = False) -> FrozenCell:
    """A :class:`FrozenCell` running ``cell`` with no search.

    ``layout`` defaults to the target's, else to all-trainable tuples ``t0, t1, ...`` up to
    the largest tuple index used; ``fixed_matrices`` as :class:`FrozenCell`'s.
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
    return FrozenCell(cell, layout, params, hidden_size, dtype, fixed_matrices)
