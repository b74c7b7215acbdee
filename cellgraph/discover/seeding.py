"""Seeds of a cell search from a training run's structure log: the most frequent cells a run
built (an RRNN's, by Algorithm 2), kept where they are candidates of the search's space
(docs/discover.md, *Seeds from an RRNN run*).

A structure log (:mod:`cellgraph.experiment.runlog`) lists a run's cell forms by decreasing
count, each with a dump of one cell that has it. Form ``k`` of the ``top`` first becomes a
seed when its dump reads (:func:`~cellgraph.export.jsonio.load_document`), the cell has one
state, its candidate (:func:`~cellgraph.discover.space.from_cell`: every trainable node on a
tuple of its own, so tuples the cell's nodes share are no longer shared; the row says
``shared``) is one :func:`~cellgraph.discover.space.validate` accepts, and no more frequent
form gave the same candidate. Otherwise it is refused with a short reason, the same words for
the same rule, so that refusals can be counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping

from cellgraph.cell.expr import Expr
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.show import candidate_form
from cellgraph.discover.space import CellSpace, from_cell, validate
from cellgraph.errors import CellGraphError
from cellgraph.export.jsonio import load_document

__all__ = ["Proposed", "Seeding", "seeding", "DUPLICATE"]

#: The reason a form is refused when a more frequent form gave the same candidate.
DUPLICATE = "same candidate as a more frequent form"


@dataclass(frozen=True)
class Proposed:
    """Form ``rank`` (from 1) of a structure log, seen in ``count`` cells: its ``form`` as the
    log writes it and either its candidate ``root`` (``shared``: the cell's nodes shared a
    trainable tuple, which the candidate does not) or the ``reason`` it was refused."""

    rank: int
    count: int
    form: str
    root: Expr | None = None
    reason: str | None = None
    shared: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rank": self.rank, "count": self.count, "form": self.form}
        if self.root is None:
            return {**out, "reason": self.reason}
        return {**out, "candidate": candidate_form(self.root), "hash": cell_hash(self.root), "shared": self.shared}


@dataclass(frozen=True)
class Seeding:
    """What :func:`seeding` made of a structure log: the log's ``epoch``, its ``n_cells`` cells
    and ``n_forms`` distinct forms, and a :class:`Proposed` row per form read, by rank."""

    epoch: int
    n_cells: int
    n_forms: int
    rows: tuple[Proposed, ...]

    @property
    def seeds(self) -> tuple[Expr, ...]:
        """The candidates kept, the most frequent first."""
        return tuple(r.root for r in self.rows if r.root is not None)

    @property
    def refusals(self) -> Counter:
        """reason -> forms refused for it."""
        return Counter(r.reason for r in self.rows if r.root is None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON form (recorded with a search): the counts, the refusals by reason and every row."""
        return {"epoch": self.epoch, "n_cells": self.n_cells, "n_forms": self.n_forms, "read": len(self.rows),
                "kept": len(self.seeds), "shared": sum(r.shared for r in self.rows),
                "refusals": dict(self.refusals.most_common()), "rows": [r.to_dict() for r in self.rows]}

    def refused(self) -> str:
        """The refusals counted by reason, the most frequent first: ``3 REASON, 1 REASON``."""
        return ", ".join(f"{n} {reason}" for reason, n in self.refusals.most_common())

    def summary(self) -> str:
        """One line: forms read, kept (with the tuple sharing dropped) and refused by reason."""
        shared = sum(r.shared for r in self.rows)
        kept = f"kept {len(self.seeds)}" + (f" ({shared} with tuple sharing dropped)" if shared else "")
        refused = self.refused()
        return (f"epoch {self.epoch}: read the {len(self.rows)} most frequent of {self.n_forms} forms "
                f"({self.n_cells} cells): {kept}, refused {len(self.rows) - len(self.seeds)}"
                + (f" ({refused})" if refused else ""))


def seeding(log: Mapping[str, Any], top: int, space: CellSpace | None = None) -> Seeding:
    """The seeds the ``top`` most frequent forms of structure log ``log`` give in ``space``
    (default :class:`CellSpace`'s), and why the others are refused (module docstring)."""
    space = space or CellSpace()
    rows: list[Proposed] = []
    seen: set[str] = set()
    for rank, form in enumerate(log["forms"][:top], 1):
        root, reason, shared = _candidate(form, space)
        if root is not None and cell_hash(root) in seen:
            root, reason = None, DUPLICATE
        if root is not None:
            seen.add(cell_hash(root))
        rows.append(Proposed(rank, form["count"], form["canonical"], root, reason, shared and root is not None))
    return Seeding(log["epoch"], log["n_cells"], len(log["forms"]), tuple(rows))


def _candidate(form: Mapping[str, Any], space: CellSpace) -> tuple[Expr | None, str | None, bool]:
    """``(candidate, None, shared)`` of a structure log's form, or ``(None, reason, False)``."""
    if "cell" not in form:
        return None, "no cell dump in the log", False
    try:
        loaded = load_document(form["cell"])
    except CellGraphError:
        return None, "unreadable cell dump", False
    if len(loaded.cell.states) != 1:
        return None, f"{len(loaded.cell.states)} states (a candidate has one)", False
    root = from_cell(loaded.cell, loaded.layout)
    reason = validate(root, space)
    return (None, reason, False) if reason else (root, None, _shares_tuples(loaded.cell, loaded.layout))


def _shares_tuples(cell: MultiCell, layout: Layout | None) -> bool:
    """Whether two generated nodes of one-state ``cell`` use the same trainable tuple."""
    identity = frozenset() if layout is None else layout.identity_indices
    used = [n.tuple for n in cell.output.root.internal_nodes() if n.tuple not in identity]
    return len(set(used)) < len(used)
