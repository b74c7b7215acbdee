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

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.errors import CellGraphError

__all__ = ["Evaluator", "Outcome", "PENALTIES", "TASK_PENALTIES", "ERROR_FLOOR", "parsimony_weight", "penalised",
           "resumes", "details", "measure"]

#: How a parsimony weight ``lambda`` charges complexity, and each penalty's default weight on
#: the planted task (docs/discover.md, *Identifiability*).
PENALTIES: dict[str, float] = {"relative": 0.1, "absolute": 1e-3}
#: The default weights on a training task (docs/discover.md, *On real data*): there a better
#: cell lowers the validation bpc or perplexity by percents, not by the planted task's factors,
#: so relatively each unit of complexity must buy 1%, not 10%.
TASK_PENALTIES: dict[str, float] = {"relative": 0.01, "absolute": 1e-3}


#: The planted task's default error floor (docs/discover.md, *The error floor*): validation
#: errors below it count as equal. The targets have unit variance, so it is ``1 - R^2 = 1e-5``;
#: below it two structures' fits differ by the optimiser (the GRU teacher's structure and a
#: one-node-larger twin fitted 9.5e-7 and 4.1e-7), not by what they can compute.
ERROR_FLOOR = 1e-5


def parsimony_weight(penalty: str, parsimony: float | None = None,
                     defaults: dict[str, float] = PENALTIES) -> float:
    """The weight ``lambda`` of ``penalty``: ``parsimony``, or ``defaults[penalty]`` for None;
    an error for an unknown penalty or a negative weight."""
    if penalty not in defaults:
        raise CellGraphError(f"unknown penalty {penalty!r} (known: {', '.join(defaults)})")
    weight = defaults[penalty] if parsimony is None else parsimony
    if not weight >= 0:
        raise CellGraphError(f"the parsimony weight must be >= 0, got {weight}")
    return weight


def penalised(error: float, complexity: int, parsimony: float, penalty: str = "relative", floor: float = 0.0
              ) -> float:
    """A candidate's objective from its validation ``error``, raised to ``floor`` when below
    it (errors under the floor count as equal: :data:`ERROR_FLOOR`), and its ``complexity``:

    * ``relative``: ``error * exp(lambda * complexity)``, so each unit of complexity must lower
      the error by the factor ``exp(-lambda)`` (``log`` of it is ``log(error) + lambda * complexity``,
      an information criterion's form for Gaussian errors);
    * ``absolute``: ``error + lambda * complexity``, which weighs a unit of complexity the same
      whatever the error's scale.
    """
    error = max(error, floor)
    if penalty == "relative":
        return error * math.exp(parsimony * complexity)
    if penalty == "absolute":
        return error + parsimony * complexity
    raise CellGraphError(f"unknown penalty {penalty!r} (known: {', '.join(PENALTIES)})")


class Evaluator(Protocol):
    """Trains a candidate cell and returns its loss (module docstring)."""

    def evaluate(self, cell: MultiCell, layout: Layout, epochs: int, seed: int) -> float: ...


def resumes(evaluator: Evaluator) -> bool:
    """Whether ``evaluator`` continues its previous training of a cell (``resumes = True``)."""
    return bool(getattr(evaluator, "resumes", False))


def details(evaluator: Evaluator) -> dict[str, Any]:
    """What ``evaluator`` reported about its last evaluation (its ``last_details``; none: ``{}``)."""
    return dict(getattr(evaluator, "last_details", None) or {})


@dataclass(frozen=True)
class Outcome:
    """One evaluation: its finite ``loss``, or None and the ``error`` that failed it, and the
    evaluator's ``details`` (:func:`details`; empty when the call raised)."""

    loss: float | None
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def measure(evaluator: Evaluator, cell: MultiCell, layout: Layout, epochs: int, seed: int) -> Outcome:
    """Evaluate once; an exception or a non-finite loss fails this cell only (an error
    message: a :class:`~cellgraph.errors.CellGraphError`'s own words, else the exception's type
    and words)."""
    reported: dict[str, Any] = {}
    try:
        loss = float(evaluator.evaluate(cell, layout, epochs, seed))
        reported = details(evaluator)
        if not math.isfinite(loss):
            raise CellGraphError(f"the loss is {loss}")
    except Exception as err:  # any failure of this cell fails it alone
        return Outcome(None, str(err) if isinstance(err, CellGraphError) else f"{type(err).__name__}: {err}",
                       reported)
    return Outcome(loss, None, reported)
