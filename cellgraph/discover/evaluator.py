"""What trains a candidate for the search: the evaluator protocol (docs/discover.md,
*Evaluators*).

The search (:func:`cellgraph.discover.search.discover`) never trains; it hands each
candidate, as the one-state cell and layout of :func:`cellgraph.discover.space.to_cell`, to
an evaluator::

    loss = evaluator.evaluate(cell, layout, epochs, seed)

``loss`` is a float, lower is better (e.g. a validation loss), finite; an exception or a
non-finite loss fails the candidate (its trial is FAILED with the error). A backend
implements it by training ``cell`` for ``epochs`` epochs with ``seed``. An evaluator whose
class sets ``resumes = True`` continues, when called again for the same cell and seed with
more epochs, the training of its previous call (it keeps that state itself), so a
successive-halving rung costs only its additional epochs (:mod:`cellgraph.discover.fidelity`).
An evaluator may also set ``last_details`` after each call, a dict of JSON values about that
evaluation (e.g. the raw validation error beside a penalised loss), which the search records
as trial user attributes.
"""

from __future__ import annotations

from typing import Any, Protocol

from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout

__all__ = ["Evaluator", "resumes", "details"]


class Evaluator(Protocol):
    """Trains a candidate cell and returns its loss (module docstring)."""

    def evaluate(self, cell: MultiCell, layout: Layout, epochs: int, seed: int) -> float: ...


def resumes(evaluator: Evaluator) -> bool:
    """Whether ``evaluator`` continues its previous training of a cell (``resumes = True``)."""
    return bool(getattr(evaluator, "resumes", False))


def details(evaluator: Evaluator) -> dict[str, Any]:
    """What ``evaluator`` reported about its last evaluation (its ``last_details``; none: ``{}``)."""
    return dict(getattr(evaluator, "last_details", None) or {})
