"""RRNN, RRNN-GRU and baseline recurrent modules (paper, Sec. 3 and Sec. 5; docs/paper-notes.md,
*Scoring, choice modes and the margin* and *RRNN-GRU: where the weights go*).

Shaped like ``torch/nn/modules/rnn.py``: a cell (one time step) and a sequence module that
runs it over ``(T, B, p)`` inputs (``batch_first`` gives ``(B, T, p)``). The input size is
the hidden size ``p`` (the model embeds its tokens to ``p``).

* :class:`RRNNCell` / :class:`RRNN`: every sample and step builds its own cell with the
  batched Algorithm 2 (:mod:`cellgraph.backends.torch.search`).
* :class:`RRNNGRUCell` / :class:`RRNNGRU`: the tree is fixed to the paper's GRU; the scoring
  network picks, at each node, which weight tuple to use (``flexible`` placement; ``gates``:
  only at the nodes with trainable edges).
* :class:`GRUBaseline` / :class:`LSTMBaseline`: ``torch.nn.GRU`` / ``LSTM`` with the same
  call convention, always in float32: under autocast torch runs cuDNN's GRU and LSTM in
  float16 whatever dtype was asked for (bfloat16 included), without the loss scaling float16
  needs, so the recurrent layer runs outside autocast.

All sequence modules return ``(output, final_state, traces)``; multi-state states are
tuples in state order (LSTM: ``(c, h)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

from cellgraph.algorithm2 import SPREAD_FLOOR, check_mode, check_tau_units
from cellgraph.backends.torch import ops as torch_ops
from cellgraph.backends.torch.compiled import Compiled
from cellgraph.backends.torch.device import no_autocast
from cellgraph.backends.torch.estimator import straight_through
from cellgraph.backends.torch.plan import group_nodes
from cellgraph.backends.torch.search import CompiledSearch, SearchParams, prepare, search
from cellgraph.backends.torch.structure import n_slots, zero_logits
from cellgraph.backends.torch.trace import SearchTrace
from cellgraph.cell.expr import Leaf, Role, h, x, zero
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout, SearchSpace, TupleSpec
from cellgraph.errors import CellGraphError
from cellgraph.targets import GRU_U, OPS, target

__all__ = [
    "RRNNCell", "RRNN", "RRNNGRUCell", "RRNNGRU", "GRUBaseline", "LSTMBaseline", "structure", "PLACEMENTS", "GRU_TREES",
]

State = Tensor | tuple[Tensor, ...]


def _tuple_layout(n_tuples: int, identity_trainable: bool = False) -> Layout:
    """``n_tuples`` trainable tuples ``(L_i, R_i, b_i)`` and the identity tuple: fixed
    ``(I, I, 0)``, or a trainable tuple ``tI`` (initialised at the identity)."""
    last = TupleSpec("tI", "L_I", "R_I", "b_I") if identity_trainable else TupleSpec.identity_tuple()
    return Layout(tuple(TupleSpec(f"t{i}", f"L_{i}", f"R_{i}", f"b_{i}") for i in range(n_tuples)) + (last,))


def _uniform(*shape: int, bound: float) -> nn.Parameter:
    return nn.Parameter((torch.rand(*shape) * 2 - 1) * bound)


def _scoring_net(p: int, hidden: int) -> nn.Sequential:
    """``alpha(v) = w_2 . tanh(W_1 v + b_1) + b_2`` (paper, Sec. 5: 2-layer FC network)."""
    return nn.Sequential(nn.Linear(p, hidden), nn.Tanh(), nn.Linear(hidden, 1))


class _TupleModule(nn.Module):
    """Holds the trainable tuples ``weight_L, weight_R (n, p, p)``, ``bias (n, p)`` of a
    layout and the fixed identity tuples (``identity`` buffer)."""

    def _init_tuples(self, layout: Layout, p: int, identity: Sequence[int] = ()) -> None:
        """Trainable tuples uniform in ``+-1/sqrt(p)``; those of layout indices ``identity``
        start at ``(I, I, 0)``."""
        self.layout, self.hidden_size = layout, p
        n, k = len(layout.trainable_indices), p ** -0.5
        self.weight_L, self.weight_R, self.bias = _uniform(n, p, p, bound=k), _uniform(n, p, p, bound=k), _uniform(n, p, bound=k)
        self.register_buffer("identity", torch.eye(p))
        with torch.no_grad():
            for r in identity:
                pos = layout.trainable_indices.index(r)
                self.weight_L[pos], self.weight_R[pos] = self.identity, self.identity
                self.bias[pos] = 0.0

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
        tau_units: ``score`` (``softmax(alpha / tau)``) or ``std`` (``tau`` times the spread
            of each sample's eligible scores; :data:`cellgraph.algorithm2.TAU_UNITS`).
        states: state names in run order, e.g. ``("h",)`` or ``("c", "h")``.
        candidate_norm: normalise every candidate before it is scored (``none``, ``batch``:
            statistics over the batch and the features of each candidate slot, as its
            authors' ``BatchNorm1d(affine=False, track_running_stats=False)``; ``sample``:
            over each sample's features; :mod:`cellgraph.algorithm2`).
        spaces, layout: explicit search spaces (one per state) and their layout, instead of
            the sets above.
        compile: run each search with gradients on (training) through ``torch.compile``, as
            one graph (:class:`~cellgraph.backends.torch.search.CompiledSearch`; the first
            steps compile; where compilation fails it warns once and this model runs
            eagerly). Without gradients (evaluation) the search runs eagerly: compiled, the
            hard search was slower on the CPU (docs/benchmarks-history.md, "The whole
            search compiled").
        compile_mode: ``torch.compile``'s mode (``default``, or ``reduce-overhead``: CUDA
            graphs on a GPU, where the compiled search is sync-free).
        sync_free: the search reads nothing from the device until it ends (``search``'s
            ``sync_free``; ``None``: where it is compiled for a GPU). The same results.
        structure_term: add the structural term ``s_k[slot]`` to ``alpha``
            (:mod:`~cellgraph.backends.torch.structure`): one learned logit per iteration and
            candidate slot, per run, starting at zero (the paper's score).
        exclusion: what ``v not in P_{k-1}`` excludes: ``value`` (the paper's) or ``slot``
            (:data:`cellgraph.algorithm2.EXCLUSIONS`).

    Shape:
        - x: ``(B, p)``; state: ``(B, p)`` or a tuple in ``states`` order (``None``: zeros).
        - output: ``(new_state, traces)`` with one :class:`SearchTrace` per run.
    """

    def __init__(self, hidden_size: int = 100, n_tuples: int = 3, n_iterations: int = 9,
                 activations: Sequence[str] = ("sigmoid", "tanh", "one_minus", "identity"),
                 ops: Sequence[str] = ("add", "mul"), aux: Sequence[str] = ("zero",),
                 scoring_hidden: int = 256, mode: str = "soft", tau: float = 1.0,
                 states: Sequence[str] = ("h",), candidate_norm: str = "none",
                 spaces: Sequence[SearchSpace] | None = None, layout: Layout | None = None,
                 compile: bool = False, tau_units: str = "score", sync_free: bool | None = None,
                 compile_mode: str = "default", structure_term: bool = False,
                 exclusion: str = "value") -> None:
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
        self.mode, self.tau, self.compile_search = check_mode(mode), tau, compile
        self.tau_units = check_tau_units(tau_units)
        self.compiled = CompiledSearch(compile_mode) if compile else None  # this model's, fallback included
        self.scoring = nn.ModuleList(_scoring_net(hidden_size, scoring_hidden) for _ in spaces)
        self.structure_logits = nn.ParameterList(zero_logits(space.n_iterations, n_slots(space))
                                                 for space in spaces) if structure_term else None
        self.candidate_norm, self.sync_free, self.exclusion = candidate_norm, sync_free, exclusion

    def alpha_parameters(self) -> list[nn.Parameter]:
        """``alpha``'s parameters (the scoring networks)."""
        return list(self.scoring.parameters())

    def scoring_parameters(self) -> list[nn.Parameter]:
        """``alpha``'s parameters and the structural logits."""
        return self.alpha_parameters() + list(self.structure_logits or ())

    def prepare(self) -> list[SearchParams]:
        """The per-run search parameters; compute once per sequence and pass to forward."""
        L, R, b = self.layout_tuples()
        logits = list(self.structure_logits or [None] * len(self.spaces))
        return [prepare(space, L, R, b, net[0].weight, net[0].bias, net[2].weight[0], net[2].bias[0],
                        self.candidate_norm, s, self.exclusion)
                for space, net, s in zip(self.spaces, self.scoring, logits)]

    def forward(self, x: Tensor, state: State | None = None,
                params: list[SearchParams] | None = None) -> tuple[State, list[SearchTrace]]:
        params = self.prepare() if params is None else params
        prev = _state_dict(self.states, state, x, self.hidden_size)
        made: dict[str, Tensor] = {}
        traces = []
        for i, (space, name) in enumerate(zip(self.spaces, self.states)):
            leaves = torch.stack([torch_ops.leaf_vector(leaf, x, prev, made).expand_as(x)
                                  for leaf in space.leaves], 1)
            run = self.compiled if self.compiled is not None and torch.is_grad_enabled() else search
            trace = run(params[i], leaves, self.mode, self.tau, name, self.tau_units, self.sync_free)
            made[name] = trace.vectors[:, -1]
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


def _checkpointed(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` checkpointed (non-reentrant): recomputed in the backward pass, in full.
    Stopping the recomputation early raises an exception out of ``fn``, which a compiled
    ``fn`` (:class:`Compiled`) would take for a failure of the compiler."""
    with set_checkpoint_early_stop(False):
        return checkpoint(fn, *args, use_reentrant=False)


class _Sequence(nn.Module):
    """Runs ``self.cell`` over a sequence; the output at ``t`` is the last state ``h_t``."""

    cell: nn.Module

    def __init__(self, batch_first: bool = False, return_traces: bool = True,
                 recompute: bool = False) -> None:
        super().__init__()
        self.batch_first, self.return_traces, self.recompute = batch_first, return_traces, recompute

    def _step(self, x_t: Tensor, state: State | None, params) -> tuple[State, list[SearchTrace] | None]:
        if self.recompute and torch.is_grad_enabled():
            state, traces = _checkpointed(self.cell, x_t, state, params)
        else:
            state, traces = self.cell(x_t, state, params)
        return state, (traces if self.return_traces else None)  # dropped now: memory

    def forward(self, input: Tensor, state: State | None = None
                ) -> tuple[Tensor, State, list[list[SearchTrace]] | None]:
        """``input (T, B, p)`` (``(B, T, p)`` if batch_first) -> ``(output, final_state,
        traces)``; ``traces[t]`` is the list of SearchTraces of step ``t`` (``None`` when
        ``return_traces`` is off). With ``recompute`` each step is checkpointed: its
        activations are dropped after the forward pass and the step (search included) is
        run again in the backward pass, so memory grows with ``T`` by the states only."""
        params = self.cell.prepare()
        output, state, traces = torch_ops.run_sequence(
            lambda t, x_t, state: self._step(x_t, state, params), input, state, self.batch_first)
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
    same values and gradients, less memory).

    Shape:
        - input: ``(T, B, p)``; output: ``(T, B, p)`` (the states ``h_t``).
    """

    def __init__(self, *args, batch_first: bool = False, return_traces: bool = True,
                 recompute: bool = False, **kwargs) -> None:
        super().__init__(batch_first, return_traces, recompute)
        self.cell = RRNNCell(*args, **kwargs)


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


class RRNNGRUCell(_TupleModule):
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
            (:mod:`~cellgraph.backends.torch.structure`), zero at the start.

    How it is computed: each value a node reads is projected once by the stacked matrices of
    all tuples (``[L_0..L_n]`` or ``[R_0..R_n]``, one matmul; ``x`` for the whole sequence
    at once by :class:`RRNNGRU`), so the candidates of a node are one ``(B, k, p)``
    elementwise op. Nodes with the same children, op and activation share that op (the
    program order of :mod:`cellgraph.backends.torch.plan`, which
    :class:`~cellgraph.backends.torch.freeze.FrozenCell` uses too): ``r`` and ``z`` are one
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
                 structure_term: bool = False) -> None:
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
        layout = _tuple_layout(n_tuples, identity_trainable)
        self._init_tuples(layout, hidden_size, identity=(n_tuples,) if identity_trainable else ())
        self.mode, self.tau, self.states = check_mode(mode), tau, ("h",)
        self.tau_units = check_tau_units(tau_units)
        self.placement, self.identity_trainable, self.tree = placement, identity_trainable, tree
        self.scoring = _scoring_net(hidden_size, scoring_hidden)
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
        (:func:`~cellgraph.backends.torch.plan.group_nodes`), each group one op over the
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

    def scoring_parameters(self) -> list[nn.Parameter]:
        """``alpha``'s parameters and the structural logits."""
        return self.alpha_parameters() + ([self.structure_logits] if self.structure_logits is not None else [])

    def prepare(self) -> _GRUParams:
        """The stacked ``[L_0..L_n]``, ``[R_0..R_n]`` ``((n+1) p, p)`` of all layout tuples and
        their biases, for one sequence."""
        L, R, b = self.layout_tuples()
        p = self.hidden_size
        first, _, last = self.scoring
        return _GRUParams({"L": L.reshape(-1, p), "R": R.reshape(-1, p)}, b,
                          (first.weight, first.bias, last.weight, last.bias), b.new_tensor(self.tau),
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


class RRNNGRU(_Sequence):
    """RRNN-GRU over a sequence (args of :class:`RRNNGRUCell`, plus ``batch_first``,
    ``return_traces`` and ``recompute`` as in :class:`RRNN`). Shape: input ``(T, B, p)`` ->
    output ``(T, B, p)``. The projections of ``x`` by ``[L_1..L_n]`` are made for all steps
    in one matmul before the step loop; without traces, soft mode ranks no candidates.
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
                return _checkpointed(cell, *args)
            return cell(*args)

        output, state, traces = torch_ops.run_sequence(step, input, state, self.batch_first)
        return output, state, (traces if self.return_traces else None)

    def tuple_parameters(self) -> list[nn.Parameter]:
        return self.cell.tuple_parameters()

    def scoring_parameters(self) -> list[nn.Parameter]:
        return self.cell.scoring_parameters()


class GRUBaseline(nn.Module):
    """``torch.nn.GRU`` (one layer, input size = hidden size) with the RRNN call convention:
    ``forward(input, state) -> (output, h_T, None)``; float32 under autocast (module docstring)."""

    def __init__(self, hidden_size: int = 100, batch_first: bool = False) -> None:
        super().__init__()
        self.rnn = nn.GRU(hidden_size, hidden_size, batch_first=batch_first)

    @no_autocast()
    def forward(self, input: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor, None]:
        output, h_n = self.rnn(input, None if state is None else state[None])
        return output, h_n[0], None


class LSTMBaseline(nn.Module):
    """``torch.nn.LSTM`` with the RRNN call convention; states in the order ``(c, h)``:
    ``forward(input, (c, h)) -> (output, (c_T, h_T), None)``; float32 under autocast (module
    docstring)."""

    def __init__(self, hidden_size: int = 100, batch_first: bool = False) -> None:
        super().__init__()
        self.rnn = nn.LSTM(hidden_size, hidden_size, batch_first=batch_first)

    @no_autocast()
    def forward(self, input: Tensor, state: tuple[Tensor, Tensor] | None = None
                ) -> tuple[Tensor, tuple[Tensor, Tensor], None]:
        hc = None if state is None else (state[1][None], state[0][None])
        output, (h_n, c_n) = self.rnn(input, hc)
        return output, (c_n[0], h_n[0]), None
