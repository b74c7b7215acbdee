r"""The task model of the experiments and the target sources of its TD term (paper, Sec. 5 and
Eq. 5; docs/paper-notes.md, *TD target vectors: self and teacher* and
*Experiments: data protocol*).

:class:`TaskModel` embeds tokens, runs a recurrent core over them and reads every step out:

.. math::
    x_t = E[w_t], \qquad (h_t, T_t) = \mathrm{core}(x_t, h_{t-1}), \qquad
    q_t = g(x_t, h_t; \Gamma) = \Gamma [x_t; h_t] + \gamma

The core is chosen by ``config.model``: ``rrnn`` (:class:`~cellgraph.backends.torch.models.rrnn.RRNN`,
one search per state of ``config.target``), ``rrnn-gru``
(:class:`~cellgraph.backends.torch.models.rrnn_gru.RRNNGRU`), the ``gru`` / ``lstm`` baselines
(:mod:`~cellgraph.backends.torch.models.gated`), or ``cell``: the fixed cell of ``config.cell``
(:mod:`cellgraph.experiment.cellspec`) frozen into a recurrent module,
:class:`~cellgraph.backends.torch.models.freeze.FrozenRNN` of
:func:`~cellgraph.backends.torch.models.freeze.freeze` with every trainable tuple drawn uniformly
in ``(-1/sqrt(p), 1/sqrt(p))`` (``torch.nn.GRU``'s initialisation), in the baselines' place.

The TD term needs vectors on the target tree at every step; a *target source* gives them for
one batch: :class:`SelfTargets` (the target tree with the model's own tuples on the model's
leaves) or :class:`TeacherTargets` (a finished ``gru`` run's ``nn.GRU`` on its own embeddings
of the same tokens, laid on the ``gru_torch`` tree).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from cellgraph.backends.torch.models.freeze import FrozenRNN, freeze
from cellgraph.backends.torch.models.gated import GRUBaseline, LSTMBaseline
from cellgraph.backends.torch.training.loss import TargetTree
from cellgraph.backends.torch.models.rrnn import RRNN
from cellgraph.backends.torch.models.rrnn_gru import RRNNGRU
from cellgraph.backends.torch.training.td_targets import SelfTargetProvider, TeacherTargetProvider
from cellgraph.backends.torch.algorithm2.trace import SearchTrace
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.errors import CellGraphError
from cellgraph.experiment.cellspec import FixedCell, resolve_cell
from cellgraph.experiment.config import TrainConfig, load_run_config
from cellgraph.targets import target

__all__ = ["TaskModel", "SelfTargets", "TeacherTargets", "STRUCTURED_MODELS", "load_teacher"]

#: Models whose cells are searched (they have traces, tuples and a scoring network).
STRUCTURED_MODELS = ("rrnn", "rrnn-gru")

Traces = list[list[SearchTrace]]


def constant_alpha(config: TrainConfig) -> bool:
    """Whether ``alpha`` is a constant in runs of ``config``: the warm start zeroes its output
    layer and ``score_lr=0`` keeps it so (the discovery recipe), which the cells then skip."""
    return config.warm_start == "teacher" and config.score_lr == 0


def _core(config: TrainConfig, states: tuple[str, ...], fixed: FixedCell | None = None) -> nn.Module:
    p = config.hidden_size
    if fixed is not None:
        return FrozenRNN(freeze(fixed.cell, layout=fixed.layout, hidden_size=p,
                                fixed_matrices=config.fixed_matrices),
                         compile=config.compile, compile_mode=config.compile_mode)
    if config.model == "rrnn":
        return RRNN(p, n_tuples=config.n_tuples, n_iterations=config.n_iterations,
                    scoring_hidden=config.scoring_hidden, mode=config.mode, tau=config.tau,
                    tau_units=config.tau_units, states=states, candidate_norm=config.candidate_norm,
                    compile=config.compile, compile_mode=config.compile_mode, recompute=config.recompute,
                    structure_term=config.structure_term, exclusion=config.exclusion,
                    constant_alpha=constant_alpha(config))
    if config.model == "rrnn-gru":
        return RRNNGRU(p, n_tuples=config.n_tuples, scoring_hidden=config.scoring_hidden,
                       mode=config.mode, tau=config.tau, tau_units=config.tau_units,
                       placement=config.placement,
                       identity_trainable=config.identity_trainable, compile=config.compile,
                       compile_mode=config.compile_mode, recompute=config.recompute, tree=config.tree,
                       structure_term=config.structure_term, constant_alpha=constant_alpha(config))
    return GRUBaseline(p) if config.model == "gru" else LSTMBaseline(p)


class TaskModel(nn.Module):
    r"""Embedding, recurrent core and output layer of one task (module docstring equations).

    Args:
        config: the run's :class:`~cellgraph.experiment.config.TrainConfig` (``model``, ``hidden_size``
            ``p`` and the core's settings).
        vocab_size: number of token ids ``V``.
        n_classes: output size ``C``.
        per_step: read out every step (``lm``, ``tag``) or only the last (``classify``).
        padding_idx: the padding token id (its embedding stays zero), or ``None``.
        states: the states the ``rrnn`` core makes, in run order (default: those of
            ``config.target``).
        embedding: ``(V, p)`` initial embedding (e.g. GloVe), else ``N(0, 1)``.
        fixed: ``model = cell``: the resolved cell (default: :func:`resolve_cell` of
            ``config.cell``; a run passes the copy it keeps in ``RUN_DIR/cell.json``).

    Shape:
        - tokens: ``(B, T)`` int64.
        - output: ``(logits, traces)``; logits ``(B, T, C)`` if ``per_step`` else ``(B, C)``;
          ``traces[t][i]`` the :class:`SearchTrace` of run ``i`` at step ``t`` (``None`` for
          the baselines).
    """

    def __init__(self, config: TrainConfig, vocab_size: int, n_classes: int, per_step: bool,
                 padding_idx: int | None = None, states: Sequence[str] | None = None,
                 embedding: np.ndarray | None = None, fixed: FixedCell | None = None) -> None:
        super().__init__()
        p = config.hidden_size
        self.model_name, self.per_step = config.model, per_step
        self.fixed = (fixed or resolve_cell(config.cell)) if config.model == "cell" else None
        if self.fixed is not None:
            states = self.fixed.cell.states
        self.states = tuple(states) if states is not None else target(config.target).cell.states
        self.embedding = nn.Embedding(vocab_size, p, padding_idx=padding_idx)
        if embedding is not None:
            if embedding.shape != (vocab_size, p):
                raise CellGraphError(
                    f"TaskModel: initial embedding of shape {embedding.shape}, expected ({vocab_size}, {p})"
                )
            with torch.no_grad():
                self.embedding.weight.copy_(torch.as_tensor(embedding, dtype=torch.float32))
        self.core = _core(config, self.states, self.fixed)
        self.output = nn.Linear(2 * p, n_classes)

    @property
    def structured(self) -> bool:
        return self.model_name in STRUCTURED_MODELS

    def _require_structure(self, what: str) -> None:
        if not self.structured:
            raise CellGraphError(f"{what}: model {self.model_name!r} has no searched cells "
                                 f"(only {', '.join(STRUCTURED_MODELS)} do)")

    @property
    def layout(self) -> Layout:
        """The tuples of the searched cells, or of ``model = cell``'s fixed cell."""
        if self.fixed is not None:
            return self.fixed.layout
        self._require_structure("layout")
        return self.core.cell.layout

    def layout_tuples(self) -> tuple[Tensor, Tensor, Tensor]:
        """``L, R (n, p, p)``, ``b (n, p)`` indexed like :attr:`layout`."""
        self._require_structure("layout_tuples")
        return self.core.cell.layout_tuples()

    def penalized_parameters(self, embedding: bool = False) -> list[nn.Parameter]:
        r"""The parameters of Eq. 5's L2 term ``\lambda_{l2} \sum_\phi \|\phi\|^2``: core and
        output layer, and the input embedding only with ``embedding``. The paper's :math:`\Phi`
        (Sec. 3.2) holds the cell's parameters; its embeddings are fixed pre-trained vectors, so
        no penalty reaches them. Here they are learned from ``N(0, 1)``, and ``V p`` such entries
        would outweigh the rest (docs/paper-notes.md, *What the L2 term covers*)."""
        if embedding:
            return list(self.parameters())
        return [p for name, p in self.named_parameters() if not name.startswith("embedding.")]

    def tuple_parameters(self) -> list[nn.Parameter]:
        self._require_structure("tuple_parameters")
        return self.core.cell.tuple_parameters()

    def scoring_parameters(self) -> list[nn.Parameter]:
        self._require_structure("scoring_parameters")
        return self.core.cell.scoring_parameters()

    def alpha_parameters(self) -> list[nn.Parameter]:
        """The scoring network's parameters (not the structural logits)."""
        self._require_structure("alpha_parameters")
        return self.core.cell.alpha_parameters()

    def structure_parameters(self) -> list[nn.Parameter]:
        """The structural logits (none without the structural term)."""
        self._require_structure("structure_parameters")
        return self.core.cell.structure_parameters()

    def choices(self, traces: Traces) -> Tensor:
        """RRNN-GRU: ``(B, T, n_choosing_nodes)`` tuple chosen at each choosing node and step."""
        if self.model_name != "rrnn-gru":
            raise CellGraphError(f"choices: only rrnn-gru has tuple choices, not {self.model_name!r}")
        return torch.stack([self.core.cell.choices(step[0]) for step in traces], 1)

    @contextmanager
    def choice_mode(self, mode: str) -> Iterator[None]:
        """Run the core's search in ``mode`` (``hard``, ``soft``, ``straight-through``) inside
        the block; no effect on the baselines."""
        if not self.structured:
            yield
            return
        cell, old = self.core.cell, self.core.cell.mode
        cell.mode = mode
        try:
            yield
        finally:
            cell.mode = old

    def set_tau(self, tau: float) -> None:
        """Set the softmax temperature of the core's soft choices (no effect on the baselines)."""
        if self.structured:
            self.core.cell.tau = tau

    def cell(self, traces: Traces, t: int, b: int) -> MultiCell:
        """The cell sample ``b`` used at step ``t``."""
        self._require_structure("cell")
        return self.core.graph(traces, t, b)

    def forward(self, tokens: Tensor) -> tuple[Tensor, Traces | None]:
        x = self.embedding(tokens.T)  # (T, B, p)
        h, _, traces = self.core(x)
        logits = self.output(torch.cat([x, h], -1)).transpose(0, 1)  # (B, T, C)
        return (logits if self.per_step else logits[:, -1]), traces


class SelfTargets:
    """``self`` target source: :class:`SelfTargetProvider` of ``target_name`` on the model's
    leaves with the model's tuples. Call: ``(model, tokens, traces) -> [[(B, m_i, p)] per
    step]``."""

    name = "self"

    def __init__(self, target_name: str) -> None:
        self.provider = SelfTargetProvider(target_name)

    @property
    def trees(self) -> tuple[TargetTree, ...]:
        return self.provider.trees

    def __call__(self, model: TaskModel, tokens: Tensor, traces: Traces) -> list[list[Tensor]]:
        tuples = model.layout_tuples()
        return [self.provider(step, tuples) for step in traces]


class TeacherTargets:
    """``teacher`` target source: a finished ``gru`` run's embedding and ``nn.GRU`` (frozen)
    run on the same tokens, laid on ``gru_torch`` (:class:`TeacherTargetProvider`).

    Build with :meth:`from_run`. Call: ``(model, tokens, traces) -> [[(B, m, p)] per step]``.
    """

    name = "teacher"

    def __init__(self, embedding: nn.Embedding, gru: nn.GRU, source: str) -> None:
        self.embedding = embedding.requires_grad_(False)
        self.provider = TeacherTargetProvider(gru)
        self.source = source

    @property
    def trees(self) -> tuple[TargetTree, ...]:
        return self.provider.trees

    @classmethod
    def from_run(cls, run_dir: str | Path, config: TrainConfig, vocab_size: int, n_classes: int,
                 per_step: bool, padding_idx: int | None,
                 device: torch.device | str = "cpu") -> "TeacherTargets":
        """The teacher of ``config`` from ``run_dir`` (:func:`load_teacher`)."""
        model = load_teacher(run_dir, config, vocab_size, n_classes, per_step, padding_idx, device)
        return cls(model.embedding, model.core.rnn, str(run_dir))

    def __call__(self, model: TaskModel, tokens: Tensor, traces: Traces) -> list[list[Tensor]]:
        with torch.no_grad():
            return self.provider(self.embedding(tokens.T))


def load_teacher(run_dir: str | Path, config: TrainConfig, vocab_size: int, n_classes: int,
                 per_step: bool, padding_idx: int | None, device: torch.device | str = "cpu") -> TaskModel:
    """The teacher of ``config`` from ``run_dir``: a finished ``gru`` run on the same task
    with the same hidden size, as a :class:`TaskModel` (its best checkpoint) on ``device``."""
    from cellgraph.backends.torch.training.checkpoint import load_latest
    from cellgraph.experiment.runs import RunDir

    run = RunDir(run_dir)
    if not run.file("config.json").exists():
        raise CellGraphError(f"teacher {run_dir}: not a run folder (no config.json)")
    teacher = load_run_config(run.file("config.json"))
    wrong = {k: (getattr(teacher, k), want) for k, want in
             (("model", "gru"), ("task", config.task), ("hidden_size", config.hidden_size))
             if getattr(teacher, k) != want}
    if wrong:
        raise CellGraphError(f"teacher {run_dir}: must be a gru run on the same task and hidden "
                             f"size; has " + ", ".join(f"{k}={v!r} (need {w!r})" for k, (v, w) in wrong.items()))
    if not run.file("final.json").exists():
        raise CellGraphError(f"teacher {run_dir}: the run has not finished (no final.json)")
    model = TaskModel(teacher, vocab_size, n_classes, per_step, padding_idx).to(device)
    state = load_latest(run.checkpoints / "best.pt", map_location=device)
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as err:
        raise CellGraphError(f"teacher {run_dir}: checkpoint does not fit this data set: {err}") from None
    return model
