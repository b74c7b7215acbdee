"""The planted regression task: the data on which a cell search is judged by exact recovery
(docs/discover.md, *The planted regression task*).

The ``planted`` task (:mod:`cellgraph.data.planted`) labels token sequences with classes; on it
the GRU matches most teachers and a teacher's own structure does not stand out. This task
exposes the structure, as symbolic-regression benchmarks do with continuous data:

1. inputs ``x_t ~ N(0, I_p)``, ``(n, T, p)``, drawn from the seed (no vocabulary, so the
   teacher's cell is exercised on a continuum of inputs and no embedding is learned);
2. the teacher (a target name, ``random:SEED`` or ``random:SEED:LOW-HIGH``, as the
   ``planted_teacher`` setting) runs in float64 with tuples drawn as
   :func:`cellgraph.data.planted.teacher_tuples` draws them, at
   ``weight_scale`` (default 2: its nonlinearities are used, not left in their linear range);
3. the targets are ``y_t = W h_t + b``, ``(n, T, n_out)``, with a random readout ``W``
   ``(n_out, p)`` (rows ``N(0, 1/p)``), each output standardised over the train split: zero
   mean, unit variance, so a mean squared error is ``1 - R^2`` on the train split's scale.

A teacher that is not finite over the inputs is refused (``random:SEED`` redraws), as in the
``planted`` task.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.data.planted import check_finite, first_finite, run_cell, teacher_tuples
from cellgraph.errors import CellGraphError
from cellgraph.targets import Target

__all__ = ["SPLITS", "PlantedValues", "load_planted_values"]

SPLITS = ("train", "val", "test")


@dataclass(frozen=True, eq=False)
class PlantedValues:
    """A planted regression data set.

    Shapes: ``inputs[split]`` ``(n, T, p)``, ``targets[split]`` ``(n, T, n_out)`` (float64);
    ``params[r] = (L_r, R_r, b_r)`` the teacher's tuples by layout index.
    """

    teacher: str
    cell: MultiCell
    layout: Layout
    params: tuple
    inputs: dict[str, np.ndarray]
    targets: dict[str, np.ndarray]
    seed: int
    weight_scale: float
    draws: int | None = None

    @property
    def p(self) -> int:
        return self.inputs["train"].shape[2]

    @property
    def n_out(self) -> int:
        return self.targets["train"].shape[2]

    def info(self) -> dict:
        """The sizes and settings, as plain JSON types."""
        n, steps, p = self.inputs["train"].shape
        return {"teacher": self.teacher, "seed": self.seed, "p": p, "n_out": self.n_out, "seq_len": steps,
                "weight_scale": self.weight_scale, **{f"n_{s}": len(self.inputs[s]) for s in SPLITS},
                **({} if self.draws is None else {"draws": self.draws})}


def load_planted_values(
    teacher: str = "mgu",
    seed: int = 0,
    n_train: int = 1_000,
    n_val: int = 200,
    n_test: int = 200,
    seq_len: int = 10,
    p: int = 8,
    n_out: int = 8,
    weight_scale: float = 2.0,
    bias_scale: float = 0.1,
) -> PlantedValues:
    """The planted regression data of teacher ``teacher`` (a target name or a random teacher,
    :func:`cellgraph.data.planted.random_spec`), all drawn from ``seed``; see the module
    docstring."""
    if min(n_train, n_val, n_test, seq_len, p, n_out) < 1:
        raise CellGraphError("planted values: sizes must be >= 1")
    sizes = dict(zip(SPLITS, (n_train, n_val, n_test)))

    def attempt(tgt: Target, draws: int | None) -> PlantedValues:
        rng = np.random.default_rng(seed)  # every cell drawn gets the same data and weights
        inputs = {s: rng.standard_normal((n, seq_len, p)) for s, n in sizes.items()}
        params = teacher_tuples(rng, p, weight_scale, bias_scale, tgt.layout)
        readout = rng.standard_normal((n_out, p)) / np.sqrt(p)
        with np.errstate(over="ignore", invalid="ignore"):
            states = {s: run_cell(tgt.cell, params, x)[tgt.cell.output.state] for s, x in inputs.items()}
            raw = {s: h @ readout.T for s, h in states.items()}
            flat = raw["train"].reshape(-1, n_out)
            mean, deviation = flat.mean(axis=0), np.maximum(flat.std(axis=0), 1e-12)
            targets = {s: (y - mean) / deviation for s, y in raw.items()}
        check_finite(teacher, {**{f"state h ({s})": h for s, h in states.items()},
                               **{f"the standardised readout ({s})": y for s, y in targets.items()}})
        return PlantedValues(teacher, tgt.cell, tgt.layout, params, inputs, targets, seed, weight_scale, draws)

    return first_finite(teacher, attempt)
