"""The cell search's evaluator on the planted regression task, with a parsimony term
(docs/discover.md, *Identifiability*).

A candidate's value is

.. math::
    \\mathrm{objective} = \\mathrm{val\\_mse} \\cdot e^{\\lambda \\cdot \\mathrm{complexity}}
    \\quad\\text{(relative)} \\qquad\\text{or}\\qquad
    \\mathrm{val\\_mse} + \\lambda \\cdot \\mathrm{complexity} \\quad\\text{(absolute)}

(:func:`cellgraph.discover.evaluator.penalised`), ``val_mse`` the best restart's validation
error after training from scratch (:func:`~cellgraph.backends.torch.discover.fit.fit_cell`),
``complexity`` the candidate's generated nodes plus the trainable matrices they use
(:func:`cellgraph.discover.space.complexity`) and ``lambda`` the ``parsimony`` (default by
penalty: 0.1 relative, 1e-3 absolute). Loss alone does not identify a teacher: a superset of its
structure (the GRU around MGU, a trainable node where the teacher has an identity one) reaches
the same error, so among near-equal errors the simpler structure must win.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from cellgraph.backends.torch.discover.fit import FitSettings, fit_cell
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.data.planted_values import PlantedValues
from cellgraph.discover.evaluator import ERROR_FLOOR, parsimony_weight, penalised
from cellgraph.discover.space import complexity, from_cell
from cellgraph.errors import CellGraphError

__all__ = ["PlantedEvaluator"]


class PlantedEvaluator:
    """:class:`cellgraph.discover.evaluator.Evaluator` that fits each candidate to ``data``
    with ``settings`` (its ``epochs`` replaced by the search's rung) and returns the objective
    of the module docstring; ``last_details`` holds ``val_mse``, ``test_mse``, ``complexity``
    and ``seconds`` (CPU) of the last call; :meth:`objective` rescores such details.
    ``num_threads``: torch's intra-op threads (None: torch's default); ``floor``: the error
    floor of :func:`~cellgraph.discover.evaluator.penalised`."""

    resumes = False

    def __init__(self, data: PlantedValues, settings: FitSettings = FitSettings(), parsimony: float | None = None,
                 num_threads: int | None = None, penalty: str = "relative", floor: float = ERROR_FLOOR) -> None:
        parsimony = parsimony_weight(penalty, parsimony)
        if not floor >= 0:
            raise CellGraphError(f"the error floor must be >= 0, got {floor}")
        if num_threads is not None:
            if num_threads < 1:
                raise CellGraphError(f"num_threads must be >= 1, got {num_threads}")
            torch.set_num_threads(num_threads)
        self.data, self.settings, self.parsimony, self.penalty, self.floor = data, settings, parsimony, penalty, floor
        self.last_details: dict[str, Any] = {}

    def evaluate(self, cell: MultiCell, layout: Layout, epochs: int, seed: int) -> float:
        size = complexity(from_cell(cell, layout))
        fit = fit_cell(cell, layout, self.data, replace(self.settings, epochs=epochs), seed)
        self.last_details = {"val_mse": fit.loss, "test_mse": fit.test_loss, "complexity": size,
                             "seconds": fit.seconds}
        return self.objective(self.last_details)

    def objective(self, details: dict[str, Any]) -> float:
        """The objective of an evaluation's ``details`` (its ``val_mse`` and ``complexity``)."""
        return penalised(details["val_mse"], details["complexity"], self.parsimony, self.penalty, self.floor)
