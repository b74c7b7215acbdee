"""The planted search's setup: what ``cellgraph discover --teacher`` and the benchmarks that
train candidates on a planted teacher's values share (docs/discover.md, *The planted regression
task*): the data's default sizes, the fit's default settings, and :func:`planted_search`, which
makes the data, the teacher's candidate and the backend's evaluator from them."""

from __future__ import annotations

from typing import Any

from cellgraph.backend import discover_backend
from cellgraph.cell.expr import Expr
from cellgraph.data.planted_values import PlantedValues, load_planted_values
from cellgraph.discover.evaluator import ERROR_FLOOR, Evaluator, parsimony_weight
from cellgraph.discover.space import CellSpace, from_cell, validate
from cellgraph.errors import CellGraphError

__all__ = ["SIZES", "FIT", "planted_search"]

#: The planted data's sizes: flag -> load_planted_values argument and its default.
SIZES = {"n_train": 1000, "n_val": 200, "n_test": 200, "seq_len": 10, "p": 8, "n_out": 8}
#: The fit's settings besides epochs: flag -> FitSettings field and its default.
FIT = {"restarts": (int, 4), "lr": (float, 3e-2), "batch_size": (int, 50), "clip": (float, 1.0)}


def planted_search(teacher: str, data_seed: int, sizes: dict[str, int] | None = None,
                   fit: dict[str, Any] | None = None, *, backend: str = "torch", num_threads: int = 1,
                   penalty: str = "relative", parsimony: float | None = None, weight_scale: float = 2.0,
                   floor: float = ERROR_FLOOR) -> tuple[PlantedValues, Expr, Evaluator, dict[str, Any]]:
    """What a search for planted ``teacher`` needs, as ``cellgraph discover --teacher`` makes
    it: the planted data (``sizes``: :data:`SIZES`' keys, default theirs), the teacher's
    candidate, the evaluator of the ``backend`` plugin (``fit``: :data:`FIT`'s keys, default
    theirs; ``parsimony`` None: the ``penalty``'s default weight; ``floor``: the error floor) and the settings the losses
    depend on (``discover(settings=)``)."""
    parsimony = parsimony_weight(penalty, parsimony)
    sizes = {**SIZES, **(sizes or {})}
    fit = {**{k: default for k, (_, default) in FIT.items()}, **(fit or {})}
    data = load_planted_values(teacher, data_seed, weight_scale=weight_scale, **sizes)
    if len(data.cell.states) != 1:
        raise CellGraphError(f"teacher {teacher} has {len(data.cell.states)} states; the search finds "
                             "one-state cells")
    root = from_cell(data.cell, data.layout)
    reason = validate(root, CellSpace())
    if reason:
        raise CellGraphError(f"teacher {teacher} is not a candidate of the search's space: {reason}")
    evaluator = discover_backend(backend).planted_evaluator(data, parsimony, num_threads, penalty, floor=floor, **fit)
    settings = {"data": data.info(), "fit": fit, "parsimony": parsimony, "penalty": penalty, "backend": backend}
    if floor:  # a search without one keeps the settings it always had, so its study resumes
        settings["floor"] = floor
    return data, root, evaluator, settings
