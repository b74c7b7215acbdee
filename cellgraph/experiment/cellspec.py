"""The ``cell`` setting of ``model = cell``: which fixed cell a run trains from scratch
(docs/training.md, *Training a given cell*).

A spec names the cell one of three ways:

* a target name (:func:`cellgraph.targets.target_names`: ``gru``, ``gru_torch``, ``lstm``,
  ``lstm_torch``, ``mgu``, ``mut1``, ``mut2``, ``mut3``), with the target's layout;
* ``random:SEED`` or ``random:SEED:LOW-HIGH``: the random cell of the planted task's teacher of
  that name at sub-seed 0 (:func:`cellgraph.data.planted.random_teacher`; the planted teacher is
  that cell unless its record says it drew more than one, ``draws > 1``); ``minimal:SEED`` or
  ``minimal:SEED:LOW-HIGH``: the first cell of that draw that is minimal and well conditioned
  (:func:`cellgraph.data.planted.first_cell`);
* a path to a cell JSON file (docs/FORMAT.md) as ``cellgraph export``, ``cellgraph diff`` and
  ``cellgraph trees --save`` write it, tree or DAG, with its layout, else every tuple index it
  uses a trainable tuple ``t0, t1, ...``. Vectors in the file are ignored: the run trains
  from scratch.

The cell must be a recurrent cell: one data leaf ``x``, previous states among the states it
makes, states of this step only those made by an earlier run; several states (an LSTM's
``(c, h)``) are supported, the output state being the last.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cellgraph.cell.expr import Role
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout, TupleSpec
from cellgraph.data.planted import MINIMAL, RANDOM, first_cell, random_spec
from cellgraph.errors import CellGraphError, FormatError
from cellgraph.export.jsonio import dump_cell, load_document
from cellgraph.targets import target, target_names

__all__ = ["FixedCell", "resolve_cell", "cell_problem"]


@dataclass(frozen=True)
class FixedCell:
    """A resolved ``cell`` spec: the spec as given, the cell and its layout."""

    spec: str
    cell: MultiCell
    layout: Layout

    def to_json(self) -> dict[str, Any]:
        """``{"spec": ..., "document": <cellgraph.dag document with its layout>}`` (final.json,
        ``RUN_DIR/cell.json``)."""
        return {"spec": self.spec, "document": dump_cell(self.cell, self.layout)}

    @classmethod
    def from_json(cls, value: Any, source: str | None = None) -> "FixedCell":
        """The inverse of :meth:`to_json` (a run's ``cell.json``)."""
        if not isinstance(value, dict) or not isinstance(value.get("spec"), str) or "document" not in value:
            raise FormatError("", "expected {\"spec\": ..., \"document\": ...} (a run's cell.json)", source)
        return _checked(value["spec"], value["document"])


def _checked(spec: str, src: Any) -> FixedCell:
    document = load_document(src)
    cell = document.cell
    layout = document.layout or _trainable_layout(cell)
    cell.validate(layout)
    problem = cell_problem(cell)
    if problem:
        raise CellGraphError(f"cell {spec}: {problem}")
    return FixedCell(spec, cell, layout)


def _trainable_layout(cell: MultiCell) -> Layout:
    """All-trainable tuples ``t0 .. tK`` up to the largest tuple index the cell uses."""
    used = [n.tuple for g in cell for n in g.internal_nodes()]
    return Layout(tuple(TupleSpec(f"t{i}") for i in range(max(used, default=-1) + 1)))


def cell_problem(cell: MultiCell) -> str | None:
    """What keeps ``cell`` from running as a recurrent cell (module docstring), or ``None``."""
    states = cell.states
    for k, g in enumerate(cell):
        if not g.internal_nodes():
            return f"state {g.state} has no generated node"
        for leaf in g.leaves():
            if leaf.role is Role.DATA and leaf.name != "x":
                return f"data leaf {leaf.name!r}: a recurrent cell reads one data leaf, x"
            if leaf.role is Role.PREV and leaf.name not in states:
                return f"it reads {leaf.name}_(t-1) but makes only {', '.join(states)}"
            if leaf.role is Role.CURRENT and leaf.name not in states[:k]:
                return f"state {g.state} reads {leaf.name}_t, which no earlier run makes"
    return None


def resolve_cell(spec: str) -> FixedCell:
    """The cell a ``cell`` spec names (module docstring); a one-line error otherwise."""
    if not isinstance(spec, str) or not spec:
        raise CellGraphError("cell: empty; give a target name, random:SEED[:LOW-HIGH], "
                             "minimal:SEED[:LOW-HIGH] or a cell JSON file")
    if spec in target_names():
        tgt = target(spec)
        return FixedCell(spec, tgt.cell, tgt.layout)
    chosen = random_spec(spec, "cell")
    if chosen is not None:
        tgt = first_cell(chosen)
        return FixedCell(spec, tgt.cell, tgt.layout)
    path = Path(spec)
    if not path.is_file():
        raise CellGraphError(f"cell {spec!r}: not a target name ({', '.join(target_names())}), "
                             f"{RANDOM}:SEED[:LOW-HIGH], {MINIMAL}:SEED[:LOW-HIGH], nor a cell JSON file")
    return _checked(spec, path)
