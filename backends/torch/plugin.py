"""The ``torch`` backend: entry point ``cellgraph.backends.torch.plugin:backend``.

It exposes the training modules (:mod:`~cellgraph.backends.torch.models.rrnn`,
:mod:`~cellgraph.backends.torch.models.rrnn_gru`, :mod:`~cellgraph.backends.torch.models.gated`), the
batched search (:mod:`~cellgraph.backends.torch.algorithm2.search`) and frozen cells
(:mod:`~cellgraph.backends.torch.models.freeze`) and the cell search's evaluator
(:mod:`~cellgraph.backends.torch.discover.evaluator`, on planted data;
:mod:`~cellgraph.backends.torch.discover.task_evaluator`, on a training task), and follows the core's
:class:`cellgraph.backend.Backend` protocol: it evaluates core graphs on leaf vectors
through a float64 :class:`FrozenCell` and returns numpy arrays.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch

from cellgraph.backends.torch.algorithm2 import search as torch_search
from cellgraph.backends.torch.models.gated import GRUBaseline, LSTMBaseline
from cellgraph.backends.torch.models.freeze import FrozenCell, freeze
from cellgraph.backends.torch.models.rrnn import RRNN, RRNNCell, structure
from cellgraph.backends.torch.models.rrnn_gru import RRNNGRU, RRNNGRUCell
from cellgraph.cell.expr import Expr, Leaf
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.discover.evaluator import ERROR_FLOOR

__all__ = ["TorchBackend", "backend"]


def _frozen(cell: CellGraph | MultiCell, leaves: Mapping[Leaf, Any], params: Any
            ) -> tuple[FrozenCell, dict[Leaf, torch.Tensor]]:
    frozen = freeze(cell, params, dtype=torch.float64)
    values = {leaf: torch.as_tensor(np.asarray(v, dtype=np.float64)) for leaf, v in leaves.items()}
    return frozen, values


class TorchBackend:
    """Torch numerics for cellgraph (CPU or GPU)."""

    name = "torch"
    RRNNCell, RRNN, RRNNGRUCell, RRNNGRU = RRNNCell, RRNN, RRNNGRUCell, RRNNGRU
    GRUBaseline, LSTMBaseline = GRUBaseline, LSTMBaseline
    FrozenCell = FrozenCell
    freeze = staticmethod(freeze)
    search = staticmethod(torch_search.search)
    prepare_search = staticmethod(torch_search.prepare)
    structure = staticmethod(structure)

    def resolve_device(self, name: str) -> str:
        """The device a ``device`` setting means on this machine (``cpu``, ``cuda:N``); an
        error where it asks for a GPU the machine lacks."""
        from cellgraph.backends.torch.runtime.device import resolve_device

        return str(resolve_device(name))

    def train(self, config, out_dir, resume: bool = False, argv=None, log=print, dist=None) -> dict[str, Any]:
        """Train a model as ``cellgraph train`` does (:func:`~cellgraph.backends.torch.runs.train.train`);
        ``log`` receives the per-epoch summaries and warnings; ``dist`` is the value of
        :meth:`launched` (default: one process)."""
        from cellgraph.backends.torch.runs.train import train

        return train(config, out_dir, resume=resume, argv=argv, log=log, dist=dist)

    def launched(self, device: str):
        """The processes of a ``torchrun`` launch (NCCL on GPUs, gloo on the CPU), else this
        one (:func:`~cellgraph.backends.torch.training.distributed.launched`)."""
        from cellgraph.backends.torch.training.distributed import launched

        return launched(device)

    def evaluate_run(self, run_dir, split: str = "test", checkpoint: str = "best",
                     mode: str | None = None, device: str | None = None) -> dict[str, Any]:
        """The metric of a run's checkpoint on a split
        (:func:`~cellgraph.backends.torch.runs.run.evaluate_run`)."""
        from cellgraph.backends.torch.runs.run import evaluate_run

        return evaluate_run(run_dir, split, checkpoint, mode, device)

    def load_run(self, path, checkpoint: str = "best", device: str | None = None):
        """A trained run folder (:func:`~cellgraph.backends.torch.runs.run.load_run`) on ``device``."""
        from cellgraph.backends.torch.runs.run import load_run

        return load_run(path, checkpoint, device)

    def planted_evaluator(self, data, parsimony: float | None = None, num_threads: int | None = None,
                          penalty: str = "relative", *, floor: float = ERROR_FLOOR, **fit: Any):
        """The cell search's evaluator on planted regression data
        (:class:`~cellgraph.backends.torch.discover.evaluator.PlantedEvaluator`); ``fit``: the
        fields of :class:`~cellgraph.backends.torch.discover.fit.FitSettings` but ``epochs``."""
        from cellgraph.backends.torch.discover.evaluator import PlantedEvaluator
        from cellgraph.backends.torch.discover.fit import FitSettings

        return PlantedEvaluator(data, FitSettings(**fit), parsimony, num_threads, penalty, floor)

    def task_evaluator(self, task: str, settings: Mapping[str, Any], folder, parsimony: float | None = None,
                       penalty: str = "relative"):
        """The cell search's evaluator on a training task
        (:class:`~cellgraph.backends.torch.discover.task_evaluator.TaskEvaluator`): each
        candidate a ``model = cell`` run under ``folder``, trained with the proxy's settings
        under ``settings`` (:func:`~cellgraph.backends.torch.discover.task_evaluator.proxy_config`)."""
        from cellgraph.backends.torch.discover.task_evaluator import TaskEvaluator, proxy_config

        return TaskEvaluator(proxy_config(task, settings), folder, parsimony, penalty)

    def evaluate(self, root: Expr, leaves: Mapping[Leaf, Any], params: Any) -> dict[Expr, np.ndarray]:
        """The float64 vector of every node of the DAG rooted at ``root`` (leaf values
        ``(p,)`` or ``(B, p)``; constants may be left out; ``params[r] = (L_r, R_r, b_r)``)."""
        frozen, values = _frozen(CellGraph(root), leaves, params)
        with torch.no_grad():
            return {e: v.numpy() for e, v in frozen.node_values(values).items()}

    def evaluate_cell(self, cell: MultiCell | CellGraph, leaves: Mapping[Leaf, Any],
                      params: Any) -> dict[str, np.ndarray]:
        """State name -> value; run ``i`` reads the states of runs ``< i`` as ``current``
        leaves."""
        cell = cell if isinstance(cell, MultiCell) else MultiCell((cell,))
        frozen, values = _frozen(cell, leaves, params)
        with torch.no_grad():
            return {s: v.numpy() for s, v in zip(cell.states, frozen.run(values))}


backend = TorchBackend()
