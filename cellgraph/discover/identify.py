"""The identifiability check: does a teacher's own structure score best among its neighbours?
(docs/discover.md, *Identifiability*).

A search can only recover a planted teacher whose structure has the lowest objective among
the structures near it. :func:`identify` evaluates, each once at full fidelity with the same
evaluator and seed, the teacher's structure, the GRU's and every single-change neighbour of the
teacher (:func:`cellgraph.discover.mutations.neighbours`), or a sample of ``limit`` of them
(the neighbours shuffled by ``seed``, the first ``limit`` taken: a larger limit extends a
smaller one). The verdict passes when

    (best other objective - teacher's objective) / |teacher's objective| >= margin.

Every result is written to ``path`` (JSON) as it comes; a rerun with the same settings skips
the structures already there, a rerun with other settings is refused, except one that only
changes the objective's penalty (:data:`OBJECTIVE`), whose evaluator can rescore a stored
row from its details (an ``objective(details)`` method): the rows are rescored, not retrained.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from cellgraph.cell.expr import Expr
from cellgraph.discover.cache import cell_hash, cell_json
from cellgraph.discover.evaluator import Evaluator, measure
from cellgraph.discover.mutations import hashed_neighbours
from cellgraph.discover.space import CellSpace, to_cell
from cellgraph.discover.storage import differing_keys
from cellgraph.errors import CellGraphError
from cellgraph.files import read_json, write_json
from cellgraph.progress import progress

__all__ = ["Row", "Identification", "OBJECTIVE", "contenders", "evaluate", "identify"]

#: The settings that change how a row's details are scored, not the details themselves.
OBJECTIVE = frozenset({"parsimony", "penalty", "floor"})


@dataclass(frozen=True)
class Row:
    """One structure evaluated: its ``name`` (``teacher``, ``gru`` or the change of
    :func:`~cellgraph.discover.mutations.neighbours`), ``hash``, ``objective`` (None when it
    failed, with ``error``), the evaluator's ``details`` and its cell document."""

    name: str
    hash: str
    objective: float | None
    details: dict[str, Any]
    cell: dict[str, Any]
    error: str | None = None


@dataclass(frozen=True)
class Identification:
    """The rows (teacher first), the required relative ``margin`` and the verdict."""

    rows: tuple[Row, ...]
    margin: float

    @property
    def teacher(self) -> Row:
        return self.rows[0]

    def row(self, name: str) -> Row | None:
        return next((r for r in self.rows if r.name == name), None)

    @property
    def best_other(self) -> Row | None:
        """The other structure of lowest objective (None when none has one)."""
        scored = [r for r in self.rows[1:] if r.objective is not None]
        return min(scored, key=lambda r: r.objective) if scored else None  # type: ignore[arg-type,return-value]

    @property
    def gap(self) -> float | None:
        """(best other - teacher) / |teacher|; None without both."""
        other, own = self.best_other, self.teacher.objective
        if other is None or own is None:
            return None
        return (other.objective - own) / abs(own) if own else float("inf")  # type: ignore[operator]

    @property
    def passed(self) -> bool:
        return self.gap is not None and self.gap >= self.margin

    def to_dict(self) -> dict[str, Any]:
        other = self.best_other
        return {"margin": self.margin, "gap": self.gap, "passed": self.passed,
                "teacher": self.teacher.objective, "best_other": None if other is None else other.name,
                "best_other_objective": None if other is None else other.objective,
                "gru": None if self.row("gru") is None else self.row("gru").objective}  # type: ignore[union-attr]


def contenders(teacher: Expr, gru: Expr, space: CellSpace, limit: int | None = None,
               seed: int = 0) -> list[tuple[str, Expr]]:
    """``("teacher", teacher)``, ``("gru", gru)`` unless it is the teacher's structure, then the
    teacher's neighbours but the GRU's structure: all of them, or the first ``limit`` once
    shuffled by ``seed``."""
    out = [("teacher", teacher)]
    if cell_hash(gru) != cell_hash(teacher):
        out.append(("gru", gru))
    gru_hash = cell_hash(gru)
    found = [(name, child) for name, child, key in hashed_neighbours(teacher, space) if key != gru_hash]
    random.Random(seed).shuffle(found)
    return out + (found if limit is None else found[:limit])


def _load(path: Path, spec: dict[str, Any], evaluator: Evaluator) -> dict[str, dict[str, Any]]:
    """The rows already in ``path`` by hash, rescored when only the :data:`OBJECTIVE` settings
    differ and ``evaluator`` can rescore; an error when it was written with other settings."""
    if not path.exists():
        return {}
    stored = read_json(path)
    old = stored.get("spec", {})
    differing = differing_keys(old, spec)
    rescore = getattr(evaluator, "objective", None)
    if differing and (rescore is None or not set(differing) <= OBJECTIVE):
        raise CellGraphError(f"{path} was written with other settings ({', '.join(differing)}); "
                             "use the same settings or another folder")
    rows = {row["hash"]: row for row in stored["rows"]}
    if differing:
        for row in rows.values():
            if row["objective"] is not None:
                row["objective"] = rescore(row["details"])
    return rows


def evaluate(chosen: list[tuple[str, Expr]], evaluator: Evaluator, epochs: int, seed: int, path: str | Path,
             spec: dict[str, Any], *, label: str = "identify", show_progress: bool = True,
             summary: Callable[[list[Row]], dict[str, Any]] | None = None) -> list[Row]:
    """Evaluate each named structure of ``chosen`` once with ``evaluator`` for ``epochs`` epochs
    and training seed ``seed``, writing ``path`` after each; ``spec``: the settings the results
    depend on, recorded and compared on a rerun, which skips the structures already there (a
    rerun that only changes :data:`OBJECTIVE` rescores them). Returns the rows in ``chosen``'s
    order; ``label`` names the progress bar; ``summary(rows)``, when given, adds its keys to the
    file's last write."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = _load(path, spec, evaluator)
    bar = progress(len(chosen), label, show_progress, unit="cells",
                   initial=sum(1 for _, root in chosen if cell_hash(root) in done))
    rows: list[Row] = []
    try:
        for name, root in chosen:
            key = cell_hash(root)
            if key not in done:
                outcome = measure(evaluator, *to_cell(root), epochs, seed)
                done[key] = vars(Row(name, key, outcome.loss, outcome.details, cell_json(root), outcome.error))
                write_json(path, {"spec": spec, "rows": list(done.values())})
                bar.update(1)
            rows.append(Row(**{**done[key], "name": name}))
    finally:
        bar.close()
    write_json(path, {"spec": spec, "rows": list(done.values()), **(summary(rows) if summary else {})})
    return rows


def identify(teacher: Expr, gru: Expr, space: CellSpace, evaluator: Evaluator, epochs: int, seed: int,
             path: str | Path, spec: dict[str, Any], *, limit: int | None = None, margin: float = 0.1,
             show_progress: bool = True) -> Identification:
    """Evaluate :func:`contenders` with ``evaluator`` for ``epochs`` epochs and training seed
    ``seed`` (``seed`` also draws the sample), writing ``path`` after each (:func:`evaluate`);
    ``spec``: the settings the results depend on (data, evaluator, epochs, seed), recorded and
    compared on a rerun. Returns the rows in :func:`contenders`' order."""
    if limit is not None and limit < 0:
        raise CellGraphError(f"the neighbour limit must be >= 0, got {limit}")
    if not margin >= 0:
        raise CellGraphError(f"the margin must be >= 0, got {margin}")
    rows = evaluate(contenders(teacher, gru, space, limit, seed), evaluator, epochs, seed, path, spec,
                    show_progress=show_progress,
                    summary=lambda found: {"verdict": Identification(tuple(found), margin).to_dict()})
    return Identification(tuple(rows), margin)
