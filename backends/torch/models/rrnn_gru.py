r"""RRNN-GRU: the paper's GRU tree, whose nodes choose their weight tuples (paper, Sec. 5;
docs/paper-notes.md, *RRNN-GRU: where the weights go* and *Scoring, choice modes and the margin*).

Every node of the fixed GRU tree computes ``u(o(L_r c_i, R_r c_j) + b_r)``; the scoring
network ``alpha(v) = w_2 . tanh(W_1 v + b_1) + b_2`` picks, at each choosing node, which
tuple ``(L_r, R_r, b_r)`` to use (``flexible`` placement; ``gates``: only at the nodes with
trainable edges). Shaped like :mod:`cellgraph.backends.torch.models.rrnn`, whose tuples
(:class:`~cellgraph.backends.torch.models.rrnn.TupleModule`), scoring network and sequence module
(:class:`~cellgraph.backends.torch.models.rrnn.RecurrentSequence`) it shares:

* :class:`RRNNGRUCell`: one step, ``x, h_{t-1} (B, p) -> (h_t, [trace])``; the tree compiled
  to a program of grouped elementwise ops (:class:`_GRUGroup`) run level by level
  (:func:`_levels`), from the per-sequence parameters :class:`_GRUParams`;
* :class:`RRNNGRU`: the cell over ``(T, B, p)`` inputs, ``x``'s projections made for all
  steps in one matmul;
* :data:`PLACEMENTS`, :data:`GRU_TREES`: the placements and trees it accepts.

The sequence module returns ``(output, final_state, traces)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from cellgraph.algorithm2 import SPREAD_FLOOR, check_mode, check_tau_units
from cellgraph.backends.torch.runtime import ops as torch_ops
from cellgraph.backends.torch.runtime.compiled import Compiled
from cellgraph.backends.torch.algorithm2.estimator import straight_through
from cellgraph.backends.torch.models.plan import group_nodes
from cellgraph.backends.torch.models.rrnn import (
    RecurrentSequence, TupleModule, checkpointed, scoring_net, tuple_layout,
)
from cellgraph.backends.torch.algorithm2.logits import zero_logits
from cellgraph.backends.torch.algorithm2.trace import SearchTrace
from cellgraph.cell.expr import Role, h, x, zero
from cellgraph.cell.layout import SearchSpace
from cellgraph.errors import CellGraphError
from cellgraph.targets import GRU_U, OPS, target

__all__ = ["RRNNGRUCell", "RRNNGRU", "PLACEMENTS", "GRU_TREES"]

#: RRNN-GRU's placements of the weight tuples (:class:`RRNNGRUCell`).
PLACEMENTS = ("flexible", "gates")
#: RRNN-GRU's trees (:class:`RRNNGRUCell`): target cells of one state.
GRU_TREES = ("gru", "gru_torch")


@dataclass(frozen=True)
class _GRUGroup:
    """Nodes of the RRNN-GRU tree over the value list (leaves, then nodes) that read the same
    children with the same op and activation, computed as one elementwise op
    ``act(op(L_r left, R_r right) + b_r)`` over the layout tuples ``rows``. Value ``outs[k]``
    is made from the candidates ``spans[k]`` of that op (one candidate: the node is fixed;
    several: it chooses among them); ``aliases``: ``(value, earlier value)`` of a member with
    the same tuples as an earlier one (it computes the same vector)."""

    left: int
    right: int
    op: Callable[[Tensor, Tensor], Tensor]
    act: Callable[[Tensor], Tensor]
    rows: slice
    outs: tuple[int, ...]
    spans: tuple[slice, ...]
    aliases: tuple[tuple[int, int], ...]


def _levels(groups: Sequence[_GRUGroup], n_leaves: int) -> tuple[tuple[_GRUGroup, ...], ...]:
    """``groups`` (in program order) by depth: a group's level is one more than the deepest
    of its children (leaves at depth 0), so the groups of one level read only values of
    earlier levels and their choosing nodes can be scored together."""
    depth = dict.fromkeys(range(n_leaves), 0)
    levels: dict[int, list[_GRUGroup]] = {}
    for g in groups:
        level = 1 + max(depth[g.left], depth[g.right])
        for value in (*g.outs, *(alias for alias, _ in g.aliases)):
            depth[value] = level
        levels.setdefault(level, []).append(g)
    return tuple(tuple(levels[k]) for k in sorted(levels))


class _GRUParams(NamedTuple):
    """What one sequence takes from the parameters: the stacked rows ``((n+1) p, p)`` of all
    layout tuples' ``L`` and ``R``, their biases ``(n+1, p)``, the scoring network
    ``(W_1, b_1, w_2, b_2)``, the temperature ``tau`` (a tensor, so that a compiled step
    takes a new value as an input, not as a new constant) and the structural logits
    ``(n_choosing_nodes, k)`` (None without the structural term)."""

    weight: dict[str, Tensor]
    bias: Tensor
    scoring: tuple[Tensor, Tensor, Tensor, Tensor]
    tau: Tensor
    structure: Tensor | None = None


class RRNNGRUCell(TupleModule):
    r"""One step of RRNN-GRU (paper, Sec. 5): the GRU tree

    .. math::
        r_t = \sigma(L x_t + R h_{t-1} + b), \; z_t = \sigma(\cdot), \;
        \tilde h_t = \tanh(L x_t + R (r_t \odot h_{t-1}) + b), \;
        h_t = z_t \odot h_{t-1} + (1 - z_t) \odot \tilde h_t

    in which every node computes ``u(o(L_r c_i, R_r c_j) + b_r)`` and "the only dynamic
    component is the choice of the tuple ``(L_r, R_r, b_r)`` to use on each pair of
    parent-child nodes" (the paper): a choosing node scores the candidate of each tuple it
    may use with ``alpha`` and picks (hard), mixes by ``softmax(alpha / tau)`` (soft) or both
    (straight-through).

    Placements (``placement``):

    - ``flexible`` (the paper's and its authors' model): ``r`` and ``z`` use the fixed,
      distinct tuples 0 and 1; each of the six other nodes (``r * h``, ``h~``, ``1 - z``,
      ``(1 - z) * h~``, ``z * h``, ``h_t``) chooses among all tuples, the identity tuple
      ``(I, I, 0)`` included.
    - ``gates`` (an ablation): ``r``, ``z``, ``h~`` choose among the trainable tuples, the
      other nodes use the fixed identity tuple. ``r`` and ``z`` then have the same candidates
      and the same scores, so ``r_t = z_t`` at every step: a weaker cell than the GRU.

    Args:
        hidden_size: ``p``.
        n_tuples: trainable tuples ``(L_r, R_r, b_r)`` (``flexible`` needs at least 2).
        scoring_hidden: hidden width of ``alpha``.
        mode, tau: the choice mode and the softmax temperature.
        tau_units: ``score`` or ``std`` (``tau`` times the spread of the node's scores).
        placement: ``flexible`` or ``gates``.
        identity_trainable: ``flexible`` only: the identity tuple is a trainable tuple
            initialised at ``(I, I, 0)`` (its authors trained it), else fixed.
        tree: the GRU tree whose tuples are chosen: ``gru`` (the paper's, reset before
            ``W_h'``) or ``gru_torch`` (``torch.nn.GRU``'s, reset after ``W_hn``, two more
            nodes and tuples ``hn``, ``n``: what a warm start from a ``gru`` run computes).
        structure_term: add a learned logit per choosing node and tuple to ``alpha``
            (:mod:`~cellgraph.backends.torch.algorithm2.logits`), zero at the start.
        constant_alpha: ``alpha``'s output weights are zero and stay so (the discovery
            recipe's warm start with ``score_lr=0``): ``alpha(v) = b_2`` for every
            candidate, and the scoring network is not run.

    How it is computed: each value a node reads is projected once by the stacked matrices of
    all tuples (``[L_0..L_n]`` or ``[R_0..R_n]``, one matmul; ``x`` for the whole sequence
    at once by :class:`RRNNGRU`), so the candidates of a node are one ``(B, k, p)``
    elementwise op. Nodes with the same children, op and activation share that op (the
    program order of :mod:`cellgraph.backends.torch.models.plan`, which
    :class:`~cellgraph.backends.torch.models.freeze.FrozenCell` uses too): ``r`` and ``z`` are one
    ``(B, 2, p)`` op; nodes that compute the same vector (``gates``: ``r = z``) are computed
    once. The choosing nodes of one depth (``flexible``: ``r * h``, ``1 - z`` and ``z * h``)
    are scored, mixed and ranked together, as one ``(B, 3, k, p)`` stack.

    Shape:
        - x, state: ``(B, p)``; output ``(h_t, [trace])``. The trace is a
          :class:`SearchTrace` over the ``gru`` tree (fixed ``left``/``right``/``op``/``act``,
          ``tuple_pos`` the layout tuple of every node; fixed nodes have ``best_score`` 0 and
          ``second_score`` -inf).
    """

    def __init__(self, hidden_size: int = 100, n_tuples: int = 3, scoring_hidden: int = 64,
                 mode: str = "soft", tau: float = 1.0, placement: str = "flexible",
                 identity_trainable: bool = False, tau_units: str = "score", tree: str = "gru",
                 structure_term: bool = False, constant_alpha: bool = False) -> None:
        super().__init__()
        if tree not in GRU_TREES:
            raise CellGraphError(f"unknown RRNN-GRU tree {tree!r} (known: {', '.join(GRU_TREES)})")
        if placement not in PLACEMENTS:
            raise CellGraphError(f"unknown RRNN-GRU placement {placement!r} (known: {', '.join(PLACEMENTS)})")
        if placement == "flexible" and n_tuples < 2:
            raise CellGraphError(f"RRNN-GRU placement 'flexible' fixes r and z to tuples 0 and 1: "
                                 f"n_tuples must be at least 2, got {n_tuples}")
        if structure_term and placement != "flexible":
            raise CellGraphError("structure_term needs placement 'flexible' (under 'gates' r and z share "
                                 "one computation, so they could not follow logits of their own)")
        if identity_trainable and placement != "flexible":
            raise CellGraphError("identity_trainable needs placement 'flexible' (with 'gates' the "
                                 "identity nodes have no choice to make)")
        layout = tuple_layout(n_tuples, identity_trainable)
        self._init_tuples(layout, hidden_size, identity=(n_tuples,) if identity_trainable else ())
        self.mode, self.tau, self.states = check_mode(mode), tau, ("h",)
        self.tau_units = check_tau_units(tau_units)
        self.placement, self.identity_trainable, self.tree = placement, identity_trainable, tree
        self.scoring, self.constant_alpha = scoring_net(hidden_size, scoring_hidden), constant_alpha
        gru = target(tree)
        self.space = SearchSpace(tuple(range(len(layout))), GRU_U, OPS, (x,), (h,), (zero,),
                                 gru.spaces[0].n_iterations)
        tuples, children, self._source = self._plan(gru, n_tuples)
        self._groups = self._compile(gru, tuples, children)
        self._levels = _levels(self._groups, len(self.space.leaves))
        self.choosing_nodes = tuple(k for k, allowed in enumerate(tuples) if len(allowed) > 1)
        self.allowed = tuple(tuples)
        self.structure_logits = zero_logits(len(self.choosing_nodes), len(tuples[self.choosing_nodes[0]])) \
            if structure_term else None
        lefts, rights = {g.left for g in self._groups}, {g.right for g in self._groups}
        self._sides = {c: tuple(side for side, read in (("L", lefts), ("R", rights)) if c in read)
                       for c in lefts | rights}
        self._zeros = {i for i, leaf in enumerate(self.space.leaves) if leaf.role is Role.CONST
                       and not torch_ops.constant(leaf, hidden_size, torch.float64).any()}
        nodes = gru.graph.internal_nodes()
        fixed = torch.tensor([[i for i, _ in children], [j for _, j in children],
                              [self.space.ops.index(e.op) for e in nodes],
                              [self.space.activations.index(e.act) for e in nodes],
                              [allowed[0] for allowed in tuples]])
        self.register_buffer("_fixed", fixed, persistent=False)
        self.register_buffer("_choosing", torch.tensor(self.choosing_nodes, dtype=torch.long), persistent=False)
        self.register_buffer("_first_tuple", torch.tensor([tuples[k].start for k in self.choosing_nodes],
                                                          dtype=torch.long), persistent=False)

    def _plan(self, gru, n_tuples: int) -> tuple[list[range], list[tuple[int, int]], tuple[int, ...]]:
        """Per node of the ``gru`` tree: the tuples it may use under the placement, its
        children as value indices, and the value whose vector it is (its own, or that of an
        earlier node with the same children, op, activation and tuples)."""
        identity = gru.layout.identity_indices
        index = {leaf: i for i, leaf in enumerate(self.space.leaves)}
        source = list(range(len(index)))  # value index -> index of its first computation
        seen: dict[tuple, int] = {}
        tuples, children = [], []
        for node in gru.graph.internal_nodes():
            if self.placement == "flexible":
                allowed = range(node.tuple, node.tuple + 1) if node.tuple in (0, 1) else range(n_tuples + 1)
            else:
                allowed = range(n_tuples, n_tuples + 1) if node.tuple in identity else range(n_tuples)
            i, j = source[index[node.left]], source[index[node.right]]
            index[node] = len(source)
            source.append(seen.setdefault((i, j, node.op, node.act, allowed), index[node]))
            tuples.append(allowed)
            children.append((i, j))
        return tuples, children, tuple(source)

    def _compile(self, gru, tuples: list[range], children: list[tuple[int, int]]) -> tuple[_GRUGroup, ...]:
        """The program: the nodes grouped by children, op and activation
        (:func:`~cellgraph.backends.torch.models.plan.group_nodes`), each group one op over the
        consecutive tuples of its distinct members, in tuple order."""
        nodes = gru.graph.internal_nodes()
        first = len(self.space.leaves)
        position = {node: k for k, node in enumerate(nodes)}
        groups = []
        for members in group_nodes(nodes, lambda n: (*children[position[n]], n.op, n.act)):
            ks = [position[n] for n in members]
            distinct = sorted((k for k in ks if self._source[first + k] == first + k), key=lambda k: tuples[k].start)
            rows = [r for k in distinct for r in tuples[k]]
            assert rows == list(range(rows[0], rows[-1] + 1)), "the placements give a group consecutive tuples"
            ends = [0]
            for k in distinct:
                ends.append(ends[-1] + len(tuples[k]))
            node = members[0]
            groups.append(_GRUGroup(
                *children[ks[0]], torch_ops.op(node.op), torch_ops.activation(node.act),
                slice(rows[0], rows[-1] + 1), tuple(first + k for k in distinct),
                tuple(slice(a, b) for a, b in zip(ends, ends[1:])),
                tuple((first + k, self._source[first + k]) for k in ks if k not in distinct)))
        return tuple(groups)

    def alpha_parameters(self) -> list[nn.Parameter]:
        """``alpha``'s parameters (the scoring network)."""
        return list(self.scoring.parameters())

    def structure_parameters(self) -> list[nn.Parameter]:
        """The structural logits (none without the structural term)."""
        return [self.structure_logits] if self.structure_logits is not None else []

    def scoring_parameters(self) -> list[nn.Parameter]:
        """``alpha``'s parameters and the structural logits."""
        return self.alpha_parameters() + self.structure_parameters()

    def prepare(self) -> _GRUParams:
        """The stacked ``[L_0..L_n]``, ``[R_0..R_n]`` ``((n+1) p, p)`` of all layout tuples and
        their biases, for one sequence."""
        L, R, b = self.layout_tuples()
        p = self.hidden_size
        first, _, last = self.scoring
        return _GRUParams({"L": L.reshape(-1, p), "R": R.reshape(-1, p)}, b,
                          (first.weight, first.bias, last.weight, last.bias), b.new_full((), self.tau),
                          self.structure_logits)

    def project(self, c: int, value: Tensor, params: _GRUParams) -> dict[str, Tensor]:
        """Value ``c`` (``(..., p)``) through the stacked matrices of its sides: side ->
        ``(..., n + 1, p)`` (zeros for the zero leaf)."""
        shape = (*value.shape[:-1], len(self.layout), self.hidden_size)
        if c in self._zeros:
            zeros = value.new_zeros(()).expand(shape)
            return {side: zeros for side in self._sides[c]}
        return {side: F.linear(value, params.weight[side]).view(shape) for side in self._sides[c]}

    def project_input(self, input: Tensor, params: _GRUParams) -> list[dict[str, Tensor]]:
        """The projections of ``x`` for every step of ``input (T, B, p)``, one matmul per side."""
        sides = self.project(0, input, params)
        return [dict(zip(sides, blocks)) for blocks in zip(*(v.unbind(0) for v in sides.values()))]

    def choices(self, trace: SearchTrace) -> Tensor:
        """``(B, n_choosing_nodes)`` the tuple chosen at each choosing node (for ``N_e``)."""
        return trace.tuple_pos.index_select(1, self._choosing)

    def forward(self, x: Tensor, state: Tensor | None = None, params: _GRUParams | None = None,
                x_proj: dict[str, Tensor] | None = None, traces: bool = True
                ) -> tuple[Tensor, list[SearchTrace]]:
        """One step; ``x_proj``: ``x``'s projection made ahead (:meth:`project_input`);
        ``traces=False`` returns no trace (and soft mode then ranks no candidates)."""
        params = self.prepare() if params is None else params
        B, p = x.shape
        vals: list[Tensor | None] = [x, x.new_zeros(B, p) if state is None else state, x.new_zeros(B, p)]
        vals += [None] * (len(self._source) - len(vals))  # the nodes', each written once below
        proj = {} if x_proj is None else {0: x_proj}
        ranked: dict[int, tuple[Tensor, Tensor, Tensor]] = {}
        for level in self._levels:
            choosing: list[tuple[int, Tensor]] = []
            for g in level:
                for c in (g.left, g.right):
                    if c not in proj:
                        proj[c] = self.project(c, vals[c], params)
                cands = g.act(g.op(proj[g.left]["L"][:, g.rows], proj[g.right]["R"][:, g.rows])
                              + params.bias[g.rows])
                for out, span in zip(g.outs, g.spans):
                    if span.stop - span.start == 1:
                        vals[out] = cands[:, span.start]
                    else:
                        choosing.append((out, cands[:, span]))
            self._choose_level(choosing, vals, ranked, params, traces)
            for g in level:
                for alias, original in g.aliases:
                    vals[alias] = vals[original]
        return vals[-1], ([self._trace(vals, ranked)] if traces else [])

    def _choose_level(self, choosing: list[tuple[int, Tensor]], vals: list[Tensor | None],
                      ranked: dict[int, tuple[Tensor, Tensor, Tensor]], params: _GRUParams, traced: bool) -> None:
        """Make the choosing nodes ``(value, candidates (B, k, p))`` of one level: those with
        the same ``k`` are scored, mixed and ranked together, stacked ``(B, m, k, p)``."""
        by_count: dict[int, list[tuple[int, Tensor]]] = {}
        for out, cands in choosing:
            by_count.setdefault(cands.shape[1], []).append((out, cands))
        for nodes in by_count.values():
            offset = self._offset(params, [out for out, _ in nodes])
            if len(nodes) == 1:
                (out, cands), = nodes
                vals[out], ranked[out] = self._choose(cands, params, traced, offset)
                continue
            value, rank = self._choose(torch.stack([cands for _, cands in nodes], 1), params, traced, offset)
            columns = zip(*(column.unbind(1) for column in rank)) if rank is not None else [None] * len(nodes)
            for (out, _), v, r in zip(nodes, value.unbind(1), columns):
                vals[out], ranked[out] = v, r

    def _offset(self, params: _GRUParams, outs: list[int]) -> Tensor | None:
        """The structural logits ``(k,)`` of the choosing node made as value ``outs[0]``, or
        ``(m, k)`` of the ``m`` nodes of ``outs`` (None without the structural term)."""
        if params.structure is None:
            return None
        first = len(self.space.leaves)
        rows = [self.choosing_nodes.index(out - first) for out in outs]
        return params.structure[rows[0]] if len(rows) == 1 else params.structure[rows]

    def _choose(self, cands: Tensor, params: _GRUParams, traced: bool, offset: Tensor | None = None
                ) -> tuple[Tensor, tuple[Tensor, Tensor, Tensor] | None]:
        """The nodes' vectors ``(..., p)`` from their candidates ``(..., k, p)`` by their scores
        ``alpha`` (plus the structural ``offset (k,)`` or ``(m, k)``), and ``(choice among the
        k, best score, second score)`` ``(...)`` when ranked."""
        W1, b1, w2, b2 = params.scoring
        if self.constant_alpha:  # alpha(v) = b_2
            scores = b2[0].expand(cands.shape[:-1])
        else:
            scores = F.linear(torch.tanh(F.linear(cands, W1, b1)), w2, b2)[..., 0]  # (..., k)
        if offset is not None:
            scores = scores + offset
        soft = None
        if self.mode != "hard":
            tau = params.tau if self.tau_units == "score" else params.tau * scores.detach().std(
                -1, unbiased=False, keepdim=True).clamp(min=SPREAD_FLOOR)
            weights = torch.softmax(scores / tau, -1)
            values = cands.detach() if self.mode == "straight-through" else cands  # estimator's relaxation
            soft = torch.matmul(weights.unsqueeze(-2), values).squeeze(-2)
            if self.mode == "soft" and not traced:
                return soft, None
        top = scores.detach().topk(2, -1).indices
        choice = top[..., 0]
        best, second = scores.gather(-1, top).unbind(-1)
        if self.mode == "soft":
            return soft, (choice, best, second)
        hard = torch.take_along_dim(cands, choice[..., None, None], -2).squeeze(-2)
        return (hard if soft is None else straight_through(hard, soft)), (choice, best, second)

    def _trace(self, vals: list[Tensor], ranked: dict[int, tuple[Tensor, Tensor, Tensor]]) -> SearchTrace:
        """The step's :class:`SearchTrace` from the values and each choosing node's ranking."""
        B, n_leaves = vals[0].shape[0], len(self.space.leaves)
        choice, best, second = (torch.stack(column, 1) for column in
                                zip(*(ranked[self._source[n_leaves + k]] for k in self.choosing_nodes)))
        left, right, op, act, tuple_pos = self._fixed.expand(B, -1, -1).clone().unbind(1)  # own memory
        tuple_pos.index_copy_(1, self._choosing, choice + self._first_tuple)
        n_nodes = len(self._source) - n_leaves
        best_full = best.new_zeros(B, n_nodes).index_copy(1, self._choosing, best)
        second_full = best.new_full((B, n_nodes), -torch.inf).index_copy(1, self._choosing, second)
        return SearchTrace(self.space, "h", torch.stack(vals, 1), left, right, tuple_pos, op, act,
                           best_full, second_full)


class RRNNGRU(RecurrentSequence):
    """RRNN-GRU over a sequence (args of :class:`RRNNGRUCell`, plus ``batch_first``,
    ``return_traces`` and ``recompute`` as in :class:`~cellgraph.backends.torch.models.rrnn.RRNN`).
    Shape: input ``(T, B, p)`` -> output ``(T, B, p)``. The projections of ``x`` by
    ``[L_1..L_n]`` are made for all steps in one matmul before the step loop; without traces,
    soft mode ranks no candidates.
    ``compile``: each step runs through ``torch.compile`` (:class:`Compiled`: the first steps
    compile, once per mode; eager where compilation fails), in ``torch.compile``'s mode
    ``compile_mode``."""

    def __init__(self, *args, batch_first: bool = False, return_traces: bool = True,
                 recompute: bool = False, compile: bool = False, compile_mode: str = "default", **kwargs) -> None:
        super().__init__(batch_first, return_traces, recompute)
        self.cell = RRNNGRUCell(*args, **kwargs)
        self.compiled = Compiled(self.cell, "the RRNN-GRU step", dynamic=False, mode=compile_mode) if compile else None

    def forward(self, input: Tensor, state: Tensor | None = None
                ) -> tuple[Tensor, Tensor, list[list[SearchTrace]] | None]:
        params = self.cell.prepare()
        projected = self.cell.project_input(input.transpose(0, 1) if self.batch_first else input, params)

        cell = self.compiled or self.cell

        def step(t: int, x_t: Tensor, state: Tensor | None) -> tuple[Tensor, list[SearchTrace]]:
            args = (x_t, state, params, projected[t], self.return_traces)
            if self.recompute and torch.is_grad_enabled():
                return checkpointed(cell, *args)
            return cell(*args)

        output, state, traces = torch_ops.run_sequence(step, input, state, self.batch_first)
        return output, state, (traces if self.return_traces else None)

    def tuple_parameters(self) -> list[nn.Parameter]:
        return self.cell.tuple_parameters()

    def scoring_parameters(self) -> list[nn.Parameter]:
        return self.cell.scoring_parameters()
