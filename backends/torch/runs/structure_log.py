"""Structure logs: the cells a task model builds on the first ``log_structures`` sequences of a
split, counted by form, with what each reads (``structures/epoch_EEE.json``;
:mod:`cellgraph.experiment.runlog`), and the planted task's recovery of its teacher.

A cell *is* a target's or teacher's structure when their
:func:`~cellgraph.algorithms.recovery.structure_form` agree state by state
(:func:`~cellgraph.algorithms.recovery.exact_recovery`: node sharing counts, so MUT2's two
gates are not MGU's one, nor GRU's ``r`` and ``z`` MGU's ``f``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from cellgraph.algorithms.canonical import canonical_string
from cellgraph.algorithms.recovery import structure_form
from cellgraph.backends.torch.training.batches import batches, chunks, device_of
from cellgraph.backends.torch.training.loss import td_loss
from cellgraph.backends.torch.training.td_targets import SelfTargetProvider
from cellgraph.backends.torch.training.task import TaskModel
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.data.datasets import Dataset, Split
from cellgraph.experiment.config import TrainConfig
from cellgraph.experiment.runlog import form_reads, read_shares, structure_summary
from cellgraph.export.jsonio import dump_cell
from cellgraph.progress import Progress, progress
from cellgraph.targets import Target, target

__all__ = ["structure_log", "structure_recovery", "discovered", "exact_form", "structure_key", "known_cell"]

#: The fixed cell of each baseline: ``torch.nn.GRU`` and ``torch.nn.LSTM`` compute these targets.
BASELINE_CELLS = {"gru": "gru_torch", "lstm": "lstm_torch"}


def structure_key(cell: MultiCell, layout: Layout) -> tuple[tuple[str, str], ...]:
    """``((state, structure form), ...)`` in run order: equal for two cells exactly when
    :func:`~cellgraph.algorithms.recovery.exact_recovery` holds between them."""
    return tuple((g.state, structure_form(g, layout)) for g in cell)


def known_cell(model: TaskModel) -> tuple[MultiCell, Layout] | None:
    """The one cell a model without a search computes: ``model = cell``'s fixed cell, the
    baselines' :data:`BASELINE_CELLS`; None for the searching models."""
    if model.fixed is not None:
        return model.fixed.cell, model.fixed.layout
    if model.model_name in BASELINE_CELLS:
        tgt = target(BASELINE_CELLS[model.model_name])
        return tgt.cell, tgt.layout
    return None


def exact_form(cell: MultiCell, layout: Layout) -> str:
    """``state = canonical form; ...``: a cell's form with its tuples (the key of a structure log)."""
    return "; ".join(f"{g.state} = {canonical_string(g, layout)}" for g in cell)


@torch.no_grad()
def discovered(model: TaskModel, split: Split, config: TrainConfig, n: int):
    """``(sample indices, traces)`` per evaluation batch of the first ``n`` samples of ``split``."""
    model.eval()
    with model.choice_mode(config.eval_mode):
        parts = chunks(np.arange(min(n, len(split))), config.eval_batch_size)
        for index, tokens, _ in batches(split, parts, device_of(model)):
            _, traces = model(tokens)
            yield index, traces


def cells_progress(split: Split, config: TrainConfig, desc: str) -> Progress:
    """Progress over the cells (a sequence's time steps) of the first ``log_structures``
    sequences of ``split``, which a structure log reads: their forms can take minutes."""
    return progress(min(config.log_structures, len(split)) * split.inputs.shape[1], desc, unit="cells")


def structure_log(model: TaskModel, dataset: Dataset, config: TrainConfig, epoch: int) -> dict[str, Any]:
    """The ``structures/epoch_EEE.json`` document (:mod:`cellgraph.experiment.runlog`) of the first
    ``log_structures`` validation samples."""
    layout = model.layout
    goal = target(config.target)
    target_form = structure_key(goal.cell, goal.layout)
    forms: dict[str, dict[str, Any]] = {}
    n_cells = 0
    bar = cells_progress(dataset.val, config, f"structures, epoch {epoch}")
    for index, traces in discovered(model, dataset.val, config, config.log_structures):
        traces = [[trace.to("cpu") for trace in step] for step in traces]  # one copy, not one per cell
        for b, sample in enumerate(index.tolist()):
            for t in range(len(traces)):
                cell = model.cell(traces, t, b)
                key = exact_form(cell, layout)
                n_cells += 1
                if key in forms:
                    forms[key]["count"] += 1
                    continue
                forms[key] = {"canonical": key, "count": 1, **structure_summary(cell.output.unfold()),
                              "is_target": structure_key(cell, layout) == target_form,
                              **form_reads(cell, layout),
                              "example": {"sample": sample, "t": t}, "cell": dump_cell(cell, layout)}
            bar.update(len(traces))
    bar.close()
    ranked = sorted(forms.values(), key=lambda f: (-f["count"], f["canonical"]))
    share = sum(f["count"] for f in ranked if f["is_target"]) / max(n_cells, 1)
    return {"epoch": epoch, "n_cells": n_cells, "target": config.target, "target_share": share,
            **read_shares(ranked, n_cells), "forms": ranked}


@torch.no_grad()
def structure_recovery(model: TaskModel, dataset: Dataset, config: TrainConfig) -> dict[str, Any]:
    """Planted task: whether the run's cell has the teacher's structure (docs/training.md,
    *Recovery of a planted teacher*).

    A model without a search (``cell``, ``gru``, ``lstm``: :func:`known_cell`) has one cell:
    ``exact_recovery`` says whether it is the teacher's structure (``structure_recovery`` 1 or
    0), and ``teacher_structure`` whether the run trains that structure from scratch
    (``model = cell``), the reference of accuracy recovery. A searching model builds a cell per
    sample and step: over the first ``log_structures`` test samples, ``structure_recovery`` is
    the share of cells with the teacher's structure, ``exact_recovery`` whether the most
    frequent structure is the teacher's (``most_frequent_share`` its share), and
    ``td_iso_teacher`` the mean ``min_Iso TD`` to the teacher's structure evaluated with the
    model's own tuples on the same leaves. ``teacher`` describes the teacher in a line,
    ``teacher_json`` holds all of it (:meth:`~cellgraph.data.planted.Teacher.to_json`: its kind,
    cell, weights and readout)."""
    teacher = dataset.teacher
    teacher_key = structure_key(teacher.cell, teacher.layout)
    out: dict[str, Any] = {"teacher": teacher.describe(), "teacher_json": teacher.to_json()}
    known = known_cell(model)
    if known is not None:
        exact = structure_key(*known) == teacher_key
        return {**out, "exact_recovery": exact, "structure_recovery": float(exact),
                "teacher_structure": exact and model.fixed is not None}
    spec = Target("planted teacher", teacher.cell, teacher.layout, teacher.spaces, ())
    provider = SelfTargetProvider(spec)
    layout = model.layout
    counts: dict[tuple, int] = {}
    tds, n_cells = [], 0
    bar = cells_progress(dataset.test, config, "structure recovery")
    for index, traces in discovered(model, dataset.test, config, config.log_structures):
        tuples = model.layout_tuples()
        for t, step in enumerate(traces):
            vectors = provider(step, tuples)
            tds.append(sum(td_loss(trace, v, tree, iso=True)
                           for trace, v, tree in zip(step, vectors, provider.trees)))
            for b in range(len(index)):
                key = structure_key(model.cell(traces, t, b), layout)
                counts[key] = counts.get(key, 0) + 1
                n_cells += 1
            bar.update(len(index))
    bar.close()
    top = max(counts, key=counts.get, default=None)
    return {**out, "n_cells": n_cells,
            "structure_recovery": counts.get(teacher_key, 0) / max(n_cells, 1),
            "exact_recovery": top == teacher_key,
            "most_frequent_share": counts.get(top, 0) / max(n_cells, 1),
            "teacher_structure": False,
            "td_iso_teacher": float(torch.cat(tds).double().mean()) if tds else None}
