"""The cell search's evaluator on a training task: each candidate trained from scratch as
``cellgraph train --model cell`` trains a given cell (docs/discover.md, *On real data*).

A candidate's value is

.. math::
    \\mathrm{objective} = \\mathrm{val} \\cdot e^{\\lambda \\cdot \\mathrm{complexity}}
    \\quad\\text{(relative)} \\qquad\\text{or}\\qquad
    \\mathrm{val} + \\lambda \\cdot \\mathrm{complexity} \\quad\\text{(absolute)}

(:func:`cellgraph.discover.evaluator.penalised`), ``val`` the validation metric of the run's
best epoch (bpc on ``wiki`` and ``wiki5k``, perplexity on ``ptb``: the tasks whose metric is a
loss, lower better), ``complexity`` the candidate's generated nodes plus trainable matrices
(:func:`cellgraph.discover.space.complexity`) and ``lambda`` the ``parsimony`` (default by
penalty :data:`~cellgraph.discover.evaluator.TASK_PENALTIES`: 0.01 relative, 1e-3 absolute).

Each candidate is an ordinary run folder ``FOLDER/HASH-sSEED`` (config.json, metrics.jsonl,
checkpoints, final.json; HASH its :func:`~cellgraph.discover.cache.cell_hash`) that
:func:`cellgraph.backends.torch.runs.train.train` trains with the evaluator's settings and
``model = cell``, ``cell = FOLDER/HASH.json`` (its ``cellgraph.dag`` document), ``epochs`` the
search's rung and ``seed`` the search's seed. A later rung resumes that run (``resumes =
True``: the trainer's data order is a pure function of seed and epoch, so 5 epochs then 15
more are the 20-epoch run); a search killed mid-training resumes the run from its last
checkpoint, and a run that went past the rung asked for (a killed search's candidate
proposed again from its first rung) is started over.

The proxy. :func:`proxy_config` puts :data:`PROXY` under the caller's settings so that one
evaluation costs seconds, not the paper's minutes: the first ``max_train = 1000`` training
sequences (of ``wiki5k``'s 5,000 windows of ``seq_len = 20`` characters), the first
``max_eval = 500`` validation and test sequences, ``hidden_size = 64`` (the paper's 100) and
``batch_size = 32``; the epochs are the search's (``cellgraph discover --epochs``, default
20, or ``--fidelity``). Every other setting is ``cellgraph train``'s default.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Mapping

from cellgraph.backends.torch.runs.train import train
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.evaluator import TASK_PENALTIES, parsimony_weight, penalised
from cellgraph.discover.space import complexity, from_cell
from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import TrainConfig, resolve_config
from cellgraph.experiment.runlog import METRICS
from cellgraph.experiment.runs import RunDir
from cellgraph.export.jsonio import dump_cell
from cellgraph.files import write_json

__all__ = ["PROXY", "SEARCH_KEYS", "proxy_config", "TaskEvaluator"]

#: The proxy's settings under the caller's (module docstring).
PROXY: dict[str, Any] = {"hidden_size": 64, "max_train": 1000, "max_eval": 500, "batch_size": 32}
#: Settings the search gives every candidate's run itself: not the caller's to set.
SEARCH_KEYS = ("task", "model", "cell", "epochs", "seed")


def proxy_config(task: str, settings: Mapping[str, Any] | None = None) -> TrainConfig:
    """The training settings of the candidates on ``task``: ``cellgraph train``'s defaults <-
    :data:`PROXY` <- ``settings`` (``--set`` values, typed and checked as ``cellgraph train``
    does), with ``model = cell`` (its ``cell`` a placeholder, ``gru``, until a candidate
    replaces it). One-line errors for a task without a loss metric and for the keys the
    search sets (:data:`SEARCH_KEYS`)."""
    settings = dict(settings or {})
    if not METRICS.get(task, ("", False))[1]:
        losses = ", ".join(name for name, (_, lower) in METRICS.items() if lower)
        raise CellGraphError(f"task {task!r}: the search minimises a validation loss; tasks with one: {losses}")
    if owned := [key for key in SEARCH_KEYS if key in settings]:
        raise CellGraphError(f"--set {', '.join(owned)}: the search sets these itself (--task, --epochs or "
                             "--fidelity, --seed)")
    return resolve_config(overrides={**PROXY, **settings, "task": task, "model": "cell", "cell": "gru"})


class TaskEvaluator:
    """:class:`cellgraph.discover.evaluator.Evaluator` that trains each candidate on
    ``config``'s task into a run folder under ``folder`` and returns the objective of the
    module docstring. ``last_details`` holds ``metric`` (``bpc`` or ``perplexity``),
    ``val_METRIC`` and ``test_METRIC`` (the best epoch's), ``complexity``, ``parameters`` (the
    model's trainable parameters at the proxy's size), ``seconds`` (the
    run's CPU seconds), ``wall_seconds`` (this call's) and ``run`` (the run folder);
    :meth:`objective` rescores such details."""

    resumes = True

    def __init__(self, config: TrainConfig, folder: str | Path, parsimony: float | None = None,
                 penalty: str = "relative") -> None:
        if config.model != "cell" or not METRICS[config.task][1]:
            raise CellGraphError(f"a task evaluator trains model=cell on a task with a loss metric, not "
                                 f"model={config.model} on {config.task}")
        self.config, self.folder = config, Path(folder)
        self.parsimony = parsimony_weight(penalty, parsimony, TASK_PENALTIES)
        self.penalty = penalty
        self.last_details: dict[str, Any] = {}

    def settings(self) -> dict[str, Any]:
        """The training settings every candidate shares (those the search sets left out)."""
        return {k: v for k, v in self.config.to_dict().items() if k not in SEARCH_KEYS}

    def evaluate(self, cell: MultiCell, layout: Layout, epochs: int, seed: int) -> float:
        root = from_cell(cell, layout)
        key = cell_hash(root)
        document = self.folder / f"{key}.json"
        if not document.is_file():
            self.folder.mkdir(parents=True, exist_ok=True)
            write_json(document, dump_cell(cell, layout))
        run = self.folder / f"{key}-s{seed}"
        if len(RunDir(run).metrics()) > epochs:
            shutil.rmtree(run)
        start = time.perf_counter()
        final = train(self.config.replace(cell=str(document), epochs=epochs, seed=seed), run, resume=True,
                      log=_quiet)
        metric = final["metric"]
        self.last_details = {"metric": metric, f"val_{metric}": final[f"val_{metric}"],
                             f"test_{metric}": final[f"test_{metric}"], "complexity": complexity(root),
                             "parameters": final["parameters"],
                             "seconds": final.get("cpu_seconds"), "wall_seconds": time.perf_counter() - start,
                             "run": str(run)}
        return self.objective(self.last_details)

    def objective(self, details: dict[str, Any]) -> float:
        """The objective of an evaluation's ``details`` (its validation metric and ``complexity``)."""
        return penalised(details[f"val_{details['metric']}"], details["complexity"], self.parsimony, self.penalty)


def _quiet(_: str) -> None:
    """The candidates' runs print nothing: the search's progress bar speaks for them."""
