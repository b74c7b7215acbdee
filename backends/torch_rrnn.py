"""RRNN, RRNN-GRU and baseline recurrent modules (paper, Sec. 3 and Sec. 5; SPEC §3, §6).

Shaped like ``torch/nn/modules/rnn.py``: a cell (one time step) and a sequence module that
runs it over ``(T, B, p)`` inputs (``batch_first`` gives ``(B, T, p)``). The input size is
the hidden size ``p`` (the model embeds its tokens to ``p``).

* :class:`RRNNCell` / :class:`RRNN`: every sample and step builds its own cell with the
  batched Algorithm 2 (:mod:`cellgraph.backends.torch_search`).
* :class:`RRNNGRUCell` / :class:`RRNNGRU`: the tree is fixed to the paper's GRU; the scoring
  network picks, at each node with trainable edges, which trainable tuple to use.
* :class:`GRUBaseline` / :class:`LSTMBaseline`: ``torch.nn.GRU`` / ``LSTM`` with the same
  call convention.

All sequence modules return ``(output, final_state, traces)``; multi-state states are
tuples in state order (LSTM: ``(c, h)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from cellgraph.backends import torch_ops
from cellgraph.backends.torch_search import MODES, SearchParams, prepare, search
from cellgraph.backends.torch_trace import SearchTrace
from cellgraph.errors import CellGraphError
from cellgraph.expr import Leaf, Role, h, x, zero
from cellgraph.graph import MultiCell
from cellgraph.layout import Layout, SearchSpace, TupleSpec
from cellgraph.targets import GRU_U, OPS, target

__all__ = [
    "RRNNCell", "RRNN", "RRNNGRUCell", "RRNNGRU", "GRUBaseline", "LSTMBaseline", "structure",
]

State = Tensor | tuple[Tensor, ...]


def _tuple_layout(n_tuples: int) -> Layout:
    """``n_tuples`` trainable tuples ``(L_i, R_i, b_i)`` and the fixed identity tuple."""
    return Layout(tuple(TupleSpec(f"t{i}", f"L_{i}", f"R_{i}", f"b_{i}") for i in range(n_tuples))
                  + (TupleSpec.identity_tuple(),))


def _uniform(*shape: int, bound: float) -> nn.Parameter:
    return nn.Parameter((torch.rand(*shape) * 2 - 1) * bound)


def _scoring_net(p: int, hidden: int) -> nn.Sequential:
    """``alpha(v) = w_2 . tanh(W_1 v + b_1) + b_2`` (paper, Sec. 5: 2-layer FC network)."""
    return nn.Sequential(nn.Linear(p, hidden), nn.Tanh(), nn.Linear(hidden, 1))


def _check_mode(mode: str) -> str:
    if mode not in MODES:
        raise CellGraphError(f"unknown choice mode {mode!r} (known: {', '.join(MODES)})")
    return mode


class _TupleModule(nn.Module):
    """Holds the trainable tuples ``weight_L, weight_R (n, p, p)``, ``bias (n, p)`` of a
    layout and the fixed identity tuples (``identity`` buffer)."""

    def _init_tuples(self, layout: Layout, p: int) -> None:
        self.layout, self.hidden_size = layout, p
        n, k = len(layout.trainable_indices), p ** -0.5
        self.weight_L, self.weight_R, self.bias = _uniform(n, p, p, bound=k), _uniform(n, p, p, bound=k), _uniform(n, p, bound=k)
        self.register_buffer("identity", torch.eye(p))

    def layout_tuples(self) -> tuple[Tensor, Tensor, Tensor]:
        """``L, R (len(layout), p, p)`` and ``b (len(layout), p)`` indexed like the layout."""
        pos = {r: k for k, r in enumerate(self.layout.trainable_indices)}
        zeros = torch.zeros_like(self.identity[0])
        pick = lambda t, fixed: torch.stack([t[pos[r]] if r in pos else fixed  # noqa: E731
                                             for r in range(len(self.layout))])
        return pick(self.weight_L, self.identity), pick(self.weight_R, self.identity), pick(self.bias, zeros)

    def tuple_parameters(self) -> list[nn.Parameter]:
        return [self.weight_L, self.weight_R, self.bias]


class RRNNCell(_TupleModule):
    r"""One step of RRNN: Algorithm 2 builds a cell per sample.

    .. math::
        (T_t, h_t) = f(\{x_t\} \cup S^{prev}_t \cup S^{aux}), \qquad
        c_k^* = \arg\max_{v \in V_t^k \setminus P_{k-1}} \alpha(v), \quad
        v = u(o(L_r c_i, R_r c_j) + b_r)

    with ``alpha(v) = w_2 . tanh(W_1 v + b_1) + b_2``. Multi-state cells (Appendix
    "Extensions") run Algorithm 2 once per state; run ``i`` sees the previous states and the
    states made by runs ``< i`` (role ``current``), each run with its own scoring network.

    Args:
        hidden_size: ``p``.
        n_tuples: trainable tuples ``(L_r, R_r, b_r)``; the identity tuple ``(I, I, 0)`` is
            added, fixed.
        n_iterations: ``N_bar``.
        activations, ops, aux: ``U``, ``O``, ``S_aux`` (constant leaf names).
        scoring_hidden: hidden width ``H`` of ``alpha``.
        mode: ``soft`` (training, the paper's), ``hard`` or ``straight-through``.
        tau: softmax temperature.
        states: state names in run order, e.g. ``("h",)`` or ``("c", "h")``.
        batch_norm: apply ``BatchNorm1d(p)`` to each state a run makes.
        spaces, layout: explicit search spaces (one per state) and their layout, instead of
            the sets above.
        compile: build and score the candidates with ``torch.compile`` (the first steps
            compile; where compilation fails it warns once and runs eagerly).

    Shape:
        - x: ``(B, p)``; state: ``(B, p)`` or a tuple in ``states`` order (``None``: zeros).
        - output: ``(new_state, traces)`` with one :class:`SearchTrace` per run.
    """

    def __init__(self, hidden_size: int = 100, n_tuples: int = 3, n_iterations: int = 9,
                 activations: Sequence[str] = ("sigmoid", "tanh", "one_minus", "identity"),
                 ops: Sequence[str] = ("add", "mul"), aux: Sequence[str] = ("zero",),
                 scoring_hidden: int = 256, mode: str = "soft", tau: float = 1.0,
                 states: Sequence[str] = ("h",), batch_norm: bool = False,
                 spaces: Sequence[SearchSpace] | None = None, layout: Layout | None = None,
                 compile: bool = False) -> None:
        super().__init__()
        states = tuple(states)
        if spaces is None:
            layout = _tuple_layout(n_tuples)
            spaces = tuple(
                SearchSpace(
                    tuple(range(len(layout))), tuple(activations), tuple(ops), (x,),
                    tuple(Leaf(s, Role.PREV) for s in states) + tuple(Leaf(s, Role.CURRENT) for s in states[:i]),
                    tuple(Leaf(a, Role.CONST) for a in aux), n_iterations,
                )
                for i in range(len(states))
            )
        elif layout is None:
            raise CellGraphError("RRNNCell: explicit spaces need their layout")
        if len(spaces) != len(states):
            raise CellGraphError(f"RRNNCell: {len(spaces)} search spaces for the states {states}")
        for space in spaces:
            space.check(layout)
        self._init_tuples(layout, hidden_size)
        self.spaces, self.states = tuple(spaces), states
        self.mode, self.tau, self.compile_search = _check_mode(mode), tau, compile
        self.scoring = nn.ModuleList(_scoring_net(hidden_size, scoring_hidden) for _ in spaces)
        self.norms = nn.ModuleList(nn.BatchNorm1d(hidden_size) for _ in spaces) if batch_norm else None

    def scoring_parameters(self) -> list[nn.Parameter]:
        return list(self.scoring.parameters())

    def prepare(self) -> list[SearchParams]:
        """The per-run search parameters; compute once per sequence and pass to forward."""
        L, R, b = self.layout_tuples()
        return [prepare(space, L, R, b, net[0].weight, net[0].bias, net[2].weight[0], net[2].bias[0])
                for space, net in zip(self.spaces, self.scoring)]

    def forward(self, x: Tensor, state: State | None = None,
                params: list[SearchParams] | None = None) -> tuple[State, list[SearchTrace]]:
        params = self.prepare() if params is None else params
        prev = _state_dict(self.states, state, x, self.hidden_size)
        made: dict[str, Tensor] = {}
        traces = []
        for i, (space, name) in enumerate(zip(self.spaces, self.states)):
            leaves = torch.stack([torch_ops.leaf_vector(leaf, x, prev, made).expand_as(x)
                                  for leaf in space.leaves], 1)
            trace = search(params[i], leaves, self.mode, self.tau, name, self.compile_search)
            out = trace.vectors[:, -1]
            made[name] = out if self.norms is None else self.norms[i](out)
            traces.append(trace)
        new = tuple(made[s] for s in self.states)
        return (new[0] if len(new) == 1 else new), traces


def _state_dict(states: tuple[str, ...], state: State | None, x: Tensor, p: int) -> dict[str, Tensor]:
    if state is None:
        state = tuple(x.new_zeros(x.shape[0], p) for _ in states)
    elif torch.is_tensor(state):
        state = (state,)
    if len(state) != len(states):
        raise CellGraphError(f"expected {len(states)} state tensors {states}, got {len(state)}")
    return dict(zip(states, state))


def structure(traces: Sequence[SearchTrace], b: int) -> MultiCell:
    """The cell sample ``b`` used at one step (one trace per run) as a core MultiCell."""
    return MultiCell(tuple(tr.graph(b) for tr in traces))


class _Sequence(nn.Module):
    """Runs ``self.cell`` over a sequence; the output at ``t`` is the last state ``h_t``."""

    cell: nn.Module

    def __init__(self, batch_first: bool = False, return_traces: bool = True,
                 recompute: bool = False) -> None:
        super().__init__()
        self.batch_first, self.return_traces, self.recompute = batch_first, return_traces, recompute

    def _check_recompute(self) -> None:
        if self.recompute and getattr(self.cell, "norms", None) is not None:
            raise CellGraphError("recompute=True with batch_norm: the recomputed step would update "
                                 "the BatchNorm running statistics a second time")

    def _step(self, x_t: Tensor, state: State | None, params) -> tuple[State, list[SearchTrace]]:
        if self.recompute and torch.is_grad_enabled():
            return checkpoint(self.cell, x_t, state, params, use_reentrant=False)
        return self.cell(x_t, state, params)

    def forward(self, input: Tensor, state: State | None = None
                ) -> tuple[Tensor, State, list[list[SearchTrace]] | None]:
        """``input (T, B, p)`` (``(B, T, p)`` if batch_first) -> ``(output, final_state,
        traces)``; ``traces[t]`` is the list of SearchTraces of step ``t`` (``None`` when
        ``return_traces`` is off). With ``recompute`` each step is checkpointed: its
        activations are dropped after the forward pass and the step (search included) is
        run again in the backward pass, so memory grows with ``T`` by the states only."""
        if self.batch_first:
            input = input.transpose(0, 1)
        params = self.cell.prepare()
        outputs, traces = [], []
        for x_t in input:
            state, step = self._step(x_t, state, params)
            outputs.append(state[-1] if isinstance(state, tuple) else state)
            if self.return_traces:
                traces.append(step)
        output = torch.stack(outputs, 1 if self.batch_first else 0)
        return output, state, (traces if self.return_traces else None)

    @staticmethod
    def graph(traces: list[list[SearchTrace]], t: int, b: int) -> MultiCell:
        """The cell of sample ``b`` at step ``t`` as a core MultiCell."""
        return structure(traces[t], b)


class RRNN(_Sequence):
    r"""RRNN over a sequence: ``h_t`` from :class:`RRNNCell` at every step.

    Args: those of :class:`RRNNCell`, plus ``batch_first``, ``return_traces`` (keep the
    per-step :class:`SearchTrace` lists; turn off to save memory) and ``recompute``
    (activation checkpointing per step: the search is recomputed in the backward pass;
    same values and gradients, less memory; not with ``batch_norm``).

    Shape:
        - input: ``(T, B, p)``; output: ``(T, B, p)`` (the states ``h_t``).
    """

    def __init__(self, *args, batch_first: bool = False, return_traces: bool = True,
                 recompute: bool = False, **kwargs) -> None:
        super().__init__(batch_first, return_traces, recompute)
        self.cell = RRNNCell(*args, **kwargs)
        self._check_recompute()


@dataclass(frozen=True)
class _GRUNode:
    """One node of the RRNN-GRU tree, over the value list (leaves, then nodes): a repeat of
    value ``same`` (an earlier node with the same children, op, activation and kind computes
    the same vector), or ``act(op(left, right))`` (``op`` ``None``: ``act(left)``, the other
    operand being the zero vector); a ``trainable`` node reads its children's projections and
    adds ``b`` unless its left child's projection fused it."""

    same: int | None
    op: Callable[[Tensor, Tensor], Tensor] | None
    act: Callable[[Tensor], Tensor]
    left: int
    right: int
    trainable: bool
    add_bias: bool


class _GRUParams(NamedTuple):
    """What one sequence takes from the parameters: per projected value its stacked rows
    ``(k n p, p)`` (``[L_1..L_n]`` and/or ``[R_1..R_n]``) and fused bias, the bias ``(n, p)``
    of the nodes that do not fuse it, the scoring network ``(W_1, b_1, w_2, b_2)``, the zero
    leaf ``(p,)``."""

    projections: dict[int, tuple[Tensor, Tensor | None]]
    bias: Tensor
    scoring: tuple[Tensor, Tensor, Tensor, Tensor]
    zero: Tensor


class RRNNGRUCell(_TupleModule):
    r"""One step of RRNN-GRU (paper, Sec. 5; SPEC §6): the GRU tree

    .. math::
        r_t = \sigma(L x_t + R h_{t-1} + b), \; z_t = \sigma(\cdot), \;
        \tilde h_t = \tanh(L x_t + R (r_t \odot h_{t-1}) + b), \;
        h_t = z_t \odot h_{t-1} + (1 - z_t) \odot \tilde h_t

    where each of the nodes ``r``, ``z``, ``h~`` picks its tuple ``(L, R, b)`` among the
    ``n_tuples`` trainable ones by the score ``alpha`` of its candidate vectors (hard, soft
    or straight-through); the identity nodes use the fixed ``(I, I, 0)``.

    How it is computed: every value that a trainable node reads is projected once by all the
    tuples' matrices it is read through (``x``: ``[L_1..L_n]``, with the biases fused into the
    ``addmm``; ``h`` and ``r * h``: ``[R_1..R_n]``), giving the ``n`` candidates of a node as
    one ``(B, n, p)`` elementwise op; ``x``'s projection is made for all steps at once by
    :class:`RRNNGRU`. Nodes with the same children, op and activation compute the same vector
    and are computed once: in this tree ``r`` and ``z`` have the same candidates
    ``sigma(L_k x + R_k h + b_k)`` and the same scores, so ``r_t = z_t`` (and the two nodes
    ``r * h``, ``z * h`` are one).

    Shape:
        - x, state: ``(B, p)``; output ``(h_t, [trace])``. The trace is a
          :class:`SearchTrace` over the ``gru`` tree (fixed ``left``/``right``/``op``/``act``,
          chosen ``tuple_pos``; fixed nodes have ``best_score`` 0, ``second_score`` -inf).
    """

    def __init__(self, hidden_size: int = 100, n_tuples: int = 3, scoring_hidden: int = 64,
                 mode: str = "soft", tau: float = 1.0) -> None:
        super().__init__()
        layout = _tuple_layout(n_tuples)
        self._init_tuples(layout, hidden_size)
        self.mode, self.tau, self.states = _check_mode(mode), tau, ("h",)
        self.scoring = _scoring_net(hidden_size, scoring_hidden)
        gru = target("gru")
        self.space = SearchSpace(tuple(range(len(layout))), GRU_U, OPS, (x,), (h,), (zero,),
                                 gru.spaces[0].n_iterations)
        identity = gru.layout.identity_indices
        index = {leaf: i for i, leaf in enumerate(self.space.leaves)}
        plan = []
        for node in gru.graph.internal_nodes():
            plan.append((index[node.left], index[node.right], self.space.ops.index(node.op),
                         self.space.activations.index(node.act), node.tuple not in identity))
            index[node] = len(index)
        self._plan = tuple(plan)
        self.trainable_nodes = tuple(k for k, step in enumerate(plan) if step[4])
        self._compile()

    def _compile(self) -> None:
        """The nodes (:class:`_GRUNode`), which sides of which values are projected, which
        projections fuse the bias, and the fixed columns of the trace."""
        n_leaves, n = len(self.space.leaves), len(self.layout.trainable_indices)
        zeros = {i for i, leaf in enumerate(self.space.leaves) if leaf.role is Role.CONST
                 and not torch_ops.constant(leaf, self.hidden_size, torch.float64).any()}
        same: list[int] = list(range(n_leaves))  # value index -> index of its first computation
        seen: dict[tuple, int] = {}
        sides: dict[int, list[str]] = {}
        unfused: set[int] = set()  # values read as left child by a non-additive trainable node
        for k, (i, j, o, u, trainable) in enumerate(self._plan):
            i, j = same[i], same[j]
            same.append(seen.setdefault((i, j, o, u, trainable), n_leaves + k))
            if trainable and same[-1] == n_leaves + k:
                for child, side in ((i, "L"), (j, "R")):
                    if side not in sides.setdefault(child, []):
                        sides[child].append(side)
                if not torch_ops.is_additive(self.space.ops[o]):
                    unfused.add(i)
        nodes = []
        for k, (i, j, o, u, trainable) in enumerate(self._plan):
            i, j, op = same[i], same[j], self.space.ops[o]
            first = same[n_leaves + k] == n_leaves + k
            additive = torch_ops.is_additive(op)
            if first and not trainable and additive and (i in zeros or j in zeros):
                i, j, fn = (j, j, None) if i in zeros else (i, i, None)
            else:
                fn = torch_ops.op(op)
            nodes.append(_GRUNode(None if first else same[n_leaves + k], fn,
                                  torch_ops.activation(self.space.activations[u]), i, j, trainable,
                                  trainable and (not additive or i in unfused)))
        self._nodes = tuple(nodes)
        self._sides = {c: tuple(s) for c, s in sides.items()}
        self._fused = {c for c, s in sides.items() if "L" in s and c not in unfused}
        self._sources = tuple(same[n_leaves + k] for k in self.trainable_nodes)
        fixed = torch.tensor([[step[q] for step in self._plan] for q in (0, 1, 2, 3)])
        self.register_buffer("_fixed", fixed, persistent=False)
        self.register_buffer("_trainable", torch.tensor(self.trainable_nodes, dtype=torch.long),
                             persistent=False)

    def scoring_parameters(self) -> list[nn.Parameter]:
        return list(self.scoring.parameters())

    def prepare(self) -> _GRUParams:
        """The stacked projection matrices ``[L_1..L_n]`` / ``[R_1..R_n]`` ``(n p, p)`` of
        every projected value (with ``b`` fused where it can be), for one sequence."""
        n, p = self.weight_L.shape[:2]
        mats = {"L": self.weight_L.reshape(n * p, p), "R": self.weight_R.reshape(n * p, p)}
        b = self.bias.reshape(n * p)
        projections = {}
        for c, sides in self._sides.items():
            W = mats[sides[0]] if len(sides) == 1 else torch.cat([mats[s] for s in sides])
            bias = None
            if c in self._fused:
                bias = torch.cat([b if s == "L" else torch.zeros_like(b) for s in sides]) if len(sides) > 1 else b
            projections[c] = (W, bias)
        first, _, last = self.scoring
        zero_vector = torch_ops.constant(zero, p, self.bias.dtype, self.bias.device)
        return _GRUParams(projections, self.bias, (first.weight, first.bias, last.weight, last.bias), zero_vector)

    def project(self, c: int, value: Tensor, params: _GRUParams) -> dict[str, Tensor]:
        """Value ``c`` (``(..., p)``) through its stacked matrices: side -> ``(..., n, p)``."""
        W, bias = params.projections[c]
        sides = self._sides[c]
        out = F.linear(value, W, bias).unflatten(-1, (len(sides), self.weight_L.shape[0], self.hidden_size))
        return dict(zip(sides, out.unbind(-3)))

    def project_input(self, input: Tensor, params: _GRUParams) -> list[dict[str, Tensor]]:
        """The projections of ``x`` for every step of ``input (T, B, p)``, one matmul."""
        if 0 not in self._sides:
            return [{} for _ in input]
        sides = self.project(0, input, params)
        return [dict(zip(sides, blocks)) for blocks in zip(*(v.unbind(0) for v in sides.values()))]

    def choices(self, trace: SearchTrace) -> Tensor:
        """``(B, n_trainable_nodes)`` the tuple chosen at each trainable node (for ``N_e``)."""
        return trace.tuple_pos[:, list(self.trainable_nodes)]

    def forward(self, x: Tensor, state: Tensor | None = None, params: _GRUParams | None = None,
                x_proj: dict[str, Tensor] | None = None, traces: bool = True
                ) -> tuple[Tensor, list[SearchTrace]]:
        """One step; ``x_proj``: ``x``'s projection made ahead (:meth:`project_input`);
        ``traces=False`` returns no trace (and soft mode then ranks no candidates)."""
        params = self.prepare() if params is None else params
        B, p = x.shape
        vals = [x, x.new_zeros(B, p) if state is None else state, params.zero.expand(B, p)]
        proj = {} if x_proj is None else {0: x_proj}
        chosen: dict[int, tuple[Tensor, Tensor, Tensor]] = {}
        for node in self._nodes:
            if node.same is not None:
                vals.append(vals[node.same])
            elif not node.trainable:
                vals.append(node.act(vals[node.left] if node.op is None else node.op(vals[node.left], vals[node.right])))
            else:
                for c in (node.left, node.right):
                    if c not in proj:
                        proj[c] = self.project(c, vals[c], params)
                pre = node.op(proj[node.left]["L"], proj[node.right]["R"])
                value, chosen[len(vals)] = self._choose(node.act(pre + params.bias if node.add_bias else pre),
                                                        params, traces)
                vals.append(value)
        return vals[-1], ([self._trace(vals, chosen)] if traces else [])

    def _choose(self, cands: Tensor, params: _GRUParams, traced: bool
                ) -> tuple[Tensor, tuple[Tensor, Tensor, Tensor] | None]:
        """The node's vector from its candidates ``(B, n, p)`` by their scores ``alpha``, and
        ``(choice, best score, second score)`` when ranked."""
        W1, b1, w2, b2 = params.scoring
        scores = F.linear(torch.tanh(F.linear(cands, W1, b1)), w2, b2)[..., 0]  # (B, n)
        soft = None
        if self.mode != "hard":
            weights = torch.softmax(scores if self.tau == 1 else scores / self.tau, 1)
            soft = torch.bmm(weights[:, None], cands)[:, 0]
            if self.mode == "soft" and not traced:
                return soft, None
        n = scores.shape[1]
        top = scores.detach().topk(min(2, n), 1).indices
        choice = top[:, 0]
        hard = torch.take_along_dim(cands, choice[:, None, None], 1)[:, 0]
        ranked = scores.gather(1, top)
        second = ranked[:, 1] if n > 1 else torch.full_like(ranked[:, 0], -torch.inf)
        value = hard if soft is None else soft if self.mode == "soft" else hard + (soft - soft.detach())
        return value, (choice, ranked[:, 0], second)

    def _trace(self, vals: list[Tensor], chosen: dict[int, tuple[Tensor, Tensor, Tensor]]) -> SearchTrace:
        """The step's :class:`SearchTrace` from the values and each trainable node's ranking."""
        B = vals[0].shape[0]
        choice, best, second = (torch.stack(column, 1) for column in zip(*(chosen[s] for s in self._sources)))
        fixed = self._fixed.expand(B, -1, -1).clone().unbind(1)  # the trace's own memory
        n_nodes, identity = len(self._plan), len(self.layout.trainable_indices)
        best_full = best.new_zeros(B, n_nodes).index_copy(1, self._trainable, best)
        second_full = best.new_full((B, n_nodes), -torch.inf).index_copy(1, self._trainable, second)
        tuple_pos = choice.new_full((B, n_nodes), identity).index_copy_(1, self._trainable, choice)
        return SearchTrace(self.space, "h", torch.stack(vals, 1), fixed[0], fixed[1], tuple_pos,
                           fixed[2], fixed[3], best_full, second_full)


class RRNNGRU(_Sequence):
    """RRNN-GRU over a sequence (args of :class:`RRNNGRUCell`, plus ``batch_first``,
    ``return_traces`` and ``recompute`` as in :class:`RRNN`). Shape: input ``(T, B, p)`` ->
    output ``(T, B, p)``. The projections of ``x`` by ``[L_1..L_n]`` are made for all steps
    in one matmul before the step loop; without traces, soft mode ranks no candidates."""

    def __init__(self, *args, batch_first: bool = False, return_traces: bool = True,
                 recompute: bool = False, **kwargs) -> None:
        super().__init__(batch_first, return_traces, recompute)
        self.cell = RRNNGRUCell(*args, **kwargs)

    def forward(self, input: Tensor, state: Tensor | None = None
                ) -> tuple[Tensor, Tensor, list[list[SearchTrace]] | None]:
        if self.batch_first:
            input = input.transpose(0, 1)
        params = self.cell.prepare()
        outputs, traces = [], []
        for x_t, x_proj in zip(input, self.cell.project_input(input, params)):
            args = (x_t, state, params, x_proj, self.return_traces)
            if self.recompute and torch.is_grad_enabled():
                state, step = checkpoint(self.cell, *args, use_reentrant=False)
            else:
                state, step = self.cell(*args)
            outputs.append(state)
            traces.append(step)
        output = torch.stack(outputs, 1 if self.batch_first else 0)
        return output, state, (traces if self.return_traces else None)

    def tuple_parameters(self) -> list[nn.Parameter]:
        return self.cell.tuple_parameters()

    def scoring_parameters(self) -> list[nn.Parameter]:
        return self.cell.scoring_parameters()


class GRUBaseline(nn.Module):
    """``torch.nn.GRU`` (one layer, input size = hidden size) with the RRNN call convention:
    ``forward(input, state) -> (output, h_T, None)``."""

    def __init__(self, hidden_size: int = 100, batch_first: bool = False) -> None:
        super().__init__()
        self.rnn = nn.GRU(hidden_size, hidden_size, batch_first=batch_first)

    def forward(self, input: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor, None]:
        output, h_n = self.rnn(input, None if state is None else state[None])
        return output, h_n[0], None


class LSTMBaseline(nn.Module):
    """``torch.nn.LSTM`` with the RRNN call convention; states in the order ``(c, h)``:
    ``forward(input, (c, h)) -> (output, (c_T, h_T), None)``."""

    def __init__(self, hidden_size: int = 100, batch_first: bool = False) -> None:
        super().__init__()
        self.rnn = nn.LSTM(hidden_size, hidden_size, batch_first=batch_first)

    def forward(self, input: Tensor, state: tuple[Tensor, Tensor] | None = None
                ) -> tuple[Tensor, tuple[Tensor, Tensor], None]:
        hc = None if state is None else (state[1][None], state[0][None])
        output, (h_n, c_n) = self.rnn(input, hc)
        return output, (c_n[0], h_n[0]), None
