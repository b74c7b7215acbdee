"""RRNN: the recurrent module whose every sample and step builds its own cell (paper, Sec. 3
and Sec. 5; docs/paper-notes.md, *Scoring, choice modes and the margin*).

Shaped like ``torch/nn/modules/rnn.py``: a cell (one time step) and a sequence module that
runs it over ``(T, B, p)`` inputs (``batch_first`` gives ``(B, T, p)``). The input size is
the hidden size ``p`` (the model embeds its tokens to ``p``).

* :class:`RRNNCell` / :class:`RRNN`: every sample and step builds its own cell with the
  batched Algorithm 2 (:mod:`cellgraph.backends.torch.algorithm2.search`).
* What RRNN shares with RRNN-GRU (:mod:`cellgraph.backends.torch.models.rrnn_gru`): the layout of
  ``n`` trainable tuples ``(L_i, R_i, b_i)`` and the identity tuple (:func:`tuple_layout`),
  the module that holds them, ``weight_L, weight_R (n, p, p)``, ``bias (n, p)``
  (:class:`TupleModule`), the scoring network ``alpha`` (:func:`scoring_net`) and the
  sequence module (:class:`RecurrentSequence`, each step checkpointed under ``recompute``:
  :func:`checkpointed`).
* The ``torch.nn.GRU`` / ``LSTM`` baselines with the same call convention are in
  :mod:`cellgraph.backends.torch.models.gated`.

All sequence modules return ``(output, final_state, traces)``; multi-state states are
tuples in state order (e.g. ``(c, h)``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

from cellgraph.algorithm2 import check_mode, check_tau_units
from cellgraph.backends.torch.runtime import ops as torch_ops
from cellgraph.backends.torch.algorithm2.search import CompiledSearch, SearchParams, prepare, search
from cellgraph.backends.torch.algorithm2.logits import n_slots, zero_logits
from cellgraph.backends.torch.algorithm2.trace import SearchTrace
from cellgraph.cell.expr import Leaf, Role, x
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout, SearchSpace, TupleSpec
from cellgraph.errors import CellGraphError

__all__ = [
    "RRNNCell", "RRNN", "structure", "tuple_layout", "scoring_net", "TupleModule", "RecurrentSequence",
    "checkpointed",
]

State = Tensor | tuple[Tensor, ...]


def tuple_layout(n_tuples: int, identity_trainable: bool = False) -> Layout:
    """``n_tuples`` trainable tuples ``(L_i, R_i, b_i)`` and the identity tuple: fixed
    ``(I, I, 0)``, or a trainable tuple ``tI`` (initialised at the identity)."""
    last = TupleSpec("tI", "L_I", "R_I", "b_I") if identity_trainable else TupleSpec.identity_tuple()
    return Layout(tuple(TupleSpec(f"t{i}", f"L_{i}", f"R_{i}", f"b_{i}") for i in range(n_tuples)) + (last,))


def _uniform(*shape: int, bound: float) -> nn.Parameter:
    return nn.Parameter((torch.rand(*shape) * 2 - 1) * bound)


def scoring_net(p: int, hidden: int) -> nn.Sequential:
    """``alpha(v) = w_2 . tanh(W_1 v + b_1) + b_2`` (paper, Sec. 5: 2-layer FC network)."""
    return nn.Sequential(nn.Linear(p, hidden), nn.Tanh(), nn.Linear(hidden, 1))


class TupleModule(nn.Module):
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


class RRNNCell(TupleModule):
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
            one graph (:class:`~cellgraph.backends.torch.algorithm2.search.CompiledSearch`; the first
            steps compile; where compilation fails it warns once and this model runs
            eagerly). Without gradients (evaluation) the search runs eagerly: compiled, the
            hard search was slower on the CPU (docs/benchmarks-history.md,
            *The whole search compiled*).
        compile_mode: ``torch.compile``'s mode (``default``, or ``reduce-overhead``: CUDA
            graphs on a GPU, where the compiled search is sync-free).
        sync_free: the search reads nothing from the device until it ends (``search``'s
            ``sync_free``; ``None``: where it is compiled for a GPU). The same results.
        structure_term: add the structural term ``s_k[slot]`` to ``alpha``
            (:mod:`~cellgraph.backends.torch.algorithm2.logits`): one learned logit per iteration and
            candidate slot, per run, starting at zero (the paper's score).
        exclusion: what ``v not in P_{k-1}`` excludes: ``value`` (the paper's) or ``slot``
            (:data:`cellgraph.algorithm2.EXCLUSIONS`).
        constant_alpha: ``alpha``'s output weights are zero and stay so (the discovery
            recipe's warm start with ``score_lr=0``), so ``alpha(v) = b_2`` for every
            candidate and the search does not run the scoring network (the same scores, faster;
            its first layer and output weights get no gradient).

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
                 exclusion: str = "value", constant_alpha: bool = False) -> None:
        super().__init__()
        states = tuple(states)
        if spaces is None:
            layout = tuple_layout(n_tuples)
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
        self.scoring = nn.ModuleList(scoring_net(hidden_size, scoring_hidden) for _ in spaces)
        self.structure_logits = nn.ParameterList(zero_logits(space.n_iterations, n_slots(space))
                                                 for space in spaces) if structure_term else None
        self.candidate_norm, self.sync_free, self.exclusion = candidate_norm, sync_free, exclusion
        self.constant_alpha = constant_alpha

    def alpha_parameters(self) -> list[nn.Parameter]:
        """``alpha``'s parameters (the scoring networks)."""
        return list(self.scoring.parameters())

    def structure_parameters(self) -> list[nn.Parameter]:
        """The structural logits, one table per space (none without the structural term)."""
        return list(self.structure_logits or ())

    def scoring_parameters(self) -> list[nn.Parameter]:
        """``alpha``'s parameters and the structural logits."""
        return self.alpha_parameters() + self.structure_parameters()

    def prepare(self) -> list[SearchParams]:
        """The per-run search parameters; compute once per sequence and pass to forward."""
        L, R, b = self.layout_tuples()
        logits = list(self.structure_logits or [None] * len(self.spaces))
        return [prepare(space, L, R, b, net[0].weight, net[0].bias, net[2].weight[0], net[2].bias[0],
                        self.candidate_norm, s, self.exclusion, not self.constant_alpha)
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


def checkpointed(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` checkpointed (non-reentrant): recomputed in the backward pass, in full.
    Stopping the recomputation early raises an exception out of ``fn``, which a compiled
    ``fn`` (:class:`~cellgraph.backends.torch.runtime.compiled.Compiled`) would take for a failure of
    the compiler."""
    with set_checkpoint_early_stop(False):
        return checkpoint(fn, *args, use_reentrant=False)


class RecurrentSequence(nn.Module):
    """Runs ``self.cell`` over a sequence; the output at ``t`` is the last state ``h_t``."""

    cell: nn.Module

    def __init__(self, batch_first: bool = False, return_traces: bool = True,
                 recompute: bool = False) -> None:
        super().__init__()
        self.batch_first, self.return_traces, self.recompute = batch_first, return_traces, recompute

    def _step(self, x_t: Tensor, state: State | None, params) -> tuple[State, list[SearchTrace] | None]:
        if self.recompute and torch.is_grad_enabled():
            state, traces = checkpointed(self.cell, x_t, state, params)
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


class RRNN(RecurrentSequence):
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
