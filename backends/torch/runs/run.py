"""A trained run loaded for use from Python (:func:`cellgraph.load_run` with the torch backend).

:func:`load_run` rebuilds a run folder's model from ``config.json`` and a checkpoint, with the
run's data set for its vocabulary and splits. The model is ready for ``model(tokens)``: in
evaluation mode, its cells searched in the run's ``eval_mode`` (``hard`` unless set), as
``cellgraph eval`` and ``cellgraph export`` search them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import torch
from torch import Tensor

from cellgraph.backends.torch.runs.evaluation import evaluate
from cellgraph.backends.torch.runs.train import build_model, load_data, run_cell
from cellgraph.backends.torch.runtime.device import resolve_device
from cellgraph.backends.torch.training.checkpoint import load_latest
from cellgraph.backends.torch.training.epoch import tau_at
from cellgraph.backends.torch.training.task import TaskModel, Traces
from cellgraph.cell.expr import Expr
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.data.datasets import Dataset
from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import TrainConfig, load_run_config
from cellgraph.experiment.runs import RunDir
from cellgraph.export import jsonio

__all__ = ["LoadedRun", "load_run", "load_parts", "evaluate_run", "export_cell", "cell_vectors"]


def cell_vectors(traces: Traces, t: int, b: int) -> dict[Expr, np.ndarray]:
    """The vector (float64 ``(p,)``) of every node of the cell sample ``b`` built at step
    ``t``, leaves included, by node; with several states, each run's own nodes."""
    vectors: dict[Expr, np.ndarray] = {}
    for trace in traces[t]:
        values = trace.vectors[b].detach().to("cpu", torch.float64).numpy()
        vectors.update(zip(trace.nodes(b), values))
    return vectors


@dataclass
class LoadedRun:
    """A run folder's trained model with what it takes to feed it and read its cells.

    Attributes:
        path: the run folder.
        config: its :class:`~cellgraph.experiment.config.TrainConfig`.
        dataset: its data set (``vocab``, ``classes``, ``metric``, the ``train``/``val``/``test``
            splits of token ids), cut as the run was (``max_train``, ``max_eval``).
        model: the :class:`~cellgraph.backends.torch.training.task.TaskModel`;
            ``model(tokens (B, T) int64) -> (logits, traces)``.
        epoch: the epoch the checkpoint was saved after.
        checkpoint: ``best`` or ``last``.
    """

    path: Path
    config: TrainConfig
    dataset: Dataset
    model: TaskModel
    epoch: int
    checkpoint: str

    def __repr__(self) -> str:
        return (f"LoadedRun({str(self.path)!r}: {self.config.model} on {self.config.task}, "
                f"{self.checkpoint} checkpoint of epoch {self.epoch})")

    @property
    def vocab(self) -> tuple[str, ...]:
        """Token strings by id."""
        return self.dataset.vocab

    @property
    def layout(self) -> Layout:
        """The weight tuples of the searched cells (rrnn, rrnn-gru) or of the fixed cell (cell)."""
        return self.model.layout

    def tokens(self, split: str = "test", samples: int | Iterable[int] | None = None) -> Tensor:
        """``(B, T)`` int64 token ids of ``samples`` (indices, default all) of ``split``."""
        data = self.dataset.splits.get(split)
        if data is None:
            raise CellGraphError(f"unknown split {split!r} (train, val or test)")
        if samples is None:
            index = np.arange(len(data))
        else:
            index = np.asarray([samples] if isinstance(samples, int) else list(samples), dtype=np.int64)
        bad = [int(i) for i in index if not 0 <= i < len(data)]
        if bad:
            raise CellGraphError(f"sample {bad[0]} is outside split {split} (0..{len(data) - 1})")
        return torch.from_numpy(data.inputs[index])

    def encode(self, tokens: Sequence[str]) -> Tensor:
        """``(1, T)`` token ids of a sequence of token strings (a ``str`` is a sequence of
        characters, the tokens of the character-level tasks)."""
        ids = {token: i for i, token in enumerate(self.vocab)}
        unknown = [token for token in tokens if token not in ids]
        if unknown:
            raise CellGraphError(f"token {unknown[0]!r} is not in the vocabulary of {self.path} "
                                 f"({len(self.vocab)} tokens)")
        return torch.tensor([[ids[token] for token in tokens]], dtype=torch.int64)

    def cell(self, traces: Traces, t: int, b: int) -> MultiCell:
        """The cell sample ``b`` used at step ``t`` of ``traces`` (from ``model(tokens)``)."""
        return self.model.cell(traces, t, b)

    def vectors(self, traces: Traces, t: int, b: int) -> dict[Expr, np.ndarray]:
        """The vector of every node of that cell (:func:`cell_vectors`)."""
        return cell_vectors(traces, t, b)

    def document(self, traces: Traces, t: int, b: int, dag: bool = False) -> dict[str, Any]:
        """That cell as a cellgraph JSON document with its vectors and layout
        (``docs/FORMAT.md``): the unfolded tree, or with ``dag`` the cell graph. Save it
        with :func:`cellgraph.export.jsonio.save`; ``cellgraph distance`` reads it."""
        return jsonio.cell_document(self.cell(traces, t, b), self.layout, self.vectors(traces, t, b), dag)

    @torch.no_grad()
    def sample_cell(self, split: str, sample: int, t: int) -> tuple[MultiCell, dict[Expr, np.ndarray]]:
        """The cell sequence ``sample`` of ``split`` uses at step ``t``, and its vectors
        (``model = cell``: its fixed cell, with the values it computes there)."""
        fixed = self.model.fixed
        if not self.model.structured and fixed is None:
            raise CellGraphError(f"{self.path}: model {self.config.model!r} has no discovered cells")
        tokens = self.tokens(split, [sample]).to(next(self.model.parameters()).device)
        if not 0 <= t < tokens.shape[1]:
            raise CellGraphError(f"step t={t} is outside 0..{tokens.shape[1] - 1}")
        if fixed is not None:
            values = self.model.core.node_values(self.model.embedding(tokens.T), t)
            return fixed.cell, {e: (v[0] if v.dim() > 1 else v).to("cpu", torch.float64).numpy()
                                for e, v in values.items()}  # a constant is one (p,) vector
        _, traces = self.model(tokens)
        return self.cell(traces, t, 0), self.vectors(traces, t, 0)


def load_run(path: str | Path, checkpoint: str = "best", device: str | None = None) -> LoadedRun:
    """The run folder ``path`` with its ``best`` (or ``last``) checkpoint (module docstring), on
    ``device`` (a ``device`` setting; default: the run's own)."""
    config, dataset, model, epoch = load_parts(path, checkpoint, device)
    model.eval()
    if model.structured:
        model.core.cell.mode = config.eval_mode
    return LoadedRun(Path(path), config, dataset, model, epoch, checkpoint)


# --- finished runs, read back ------------------------------------------------------


def load_parts(run_dir: str | Path, checkpoint: str = "best",
              device: str | None = None) -> tuple[TrainConfig, Dataset, TaskModel, int]:
    """The run's config, data and model with its ``checkpoint`` loaded, on ``device`` (a
    ``device`` setting; default: the run's own)."""
    if checkpoint not in ("best", "last"):
        raise CellGraphError(f"unknown checkpoint {checkpoint!r} (best or last)")
    run = RunDir(run_dir)
    if not run.file("config.json").exists():
        raise CellGraphError(f"{run_dir} is not a run folder (no config.json)")
    config = load_run_config(run.file("config.json"))
    where = resolve_device(device or config.device)
    dataset = load_data(config)
    model = build_model(config, dataset, pretrained=False, fixed=run_cell(config, run_dir)).to(where)
    state = load_latest(run.checkpoints / f"{checkpoint}.pt", map_location=where)
    model.load_state_dict(state["model"])
    model.set_tau(tau_at(config, state["epoch"] / config.epochs))
    return config, dataset, model, state["epoch"]


def evaluate_run(run_dir: str | Path, split: str = "test", checkpoint: str = "best",
                 mode: str | None = None, device: str | None = None) -> dict[str, Any]:
    """The metric of a run's ``best`` (or ``last``) checkpoint on ``split`` (``val``/``test``),
    its cells searched in ``mode`` (default: the run's ``eval_mode``, hard unless set), computed
    on ``device`` (default: the run's ``device`` setting)."""
    if split not in ("val", "test"):
        raise CellGraphError(f"unknown split {split!r} (val or test)")
    config, dataset, model, epoch = load_parts(run_dir, checkpoint, device)
    config = config if mode is None else config.replace(eval_mode=mode)
    result = evaluate(model, dataset, split, config)
    return {"split": split, "checkpoint": checkpoint, "epoch": epoch, "mode": config.eval_mode,
            "metric": dataset.metric,
            f"{split}_{dataset.metric}": result[dataset.metric], "nats": result["nats"],
            "accuracy": result["accuracy"], "n": len(dataset.splits[split])}


def export_cell(run_dir: str | Path, sample: int, t: int, split: str = "test",
                device: str | None = None) -> tuple[MultiCell, Layout]:
    """The cell the best checkpoint builds (``eval_mode`` search) for ``sample`` of ``split``
    at step ``t``, and the model's tuple layout (with the node vectors:
    :meth:`LoadedRun.sample_cell`); searched on ``device``
    (default: the run's)."""
    run = load_run(run_dir, device=device)
    return run.sample_cell(split, sample, t)[0], run.layout
