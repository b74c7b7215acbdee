"""Canonical hashing of candidates and the cache of their results (docs/discover.md, *Cache*).

:func:`cell_hash` is the sha256 of the candidate's structure form
(:func:`cellgraph.algorithms.recovery.structure_form`, the form exact recovery compares):
isomorphic candidates (commutative operands swapped, trainable tuples numbered otherwise)
share one hash, so a search trains each structure once, and a candidate's hash equals a
planted teacher's exactly when it recovers the teacher. Distinct nodes of one unfolded tree
stay distinct (MUT2's gates ``r`` and ``z`` against MGU's one gate ``f``).
:class:`ResultCache` maps a hash to the evaluation that holds its result (the best finished
one, else one still running); the search builds it from its study's trials, so every worker
of a study sees the same cache.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from cellgraph.algorithms.recovery import structure_form
from cellgraph.cell.expr import Expr
from cellgraph.cell.graph import CellGraph
from cellgraph.discover.space import CANDIDATE_LAYOUT, from_cell, to_cell
from cellgraph.export.jsonio import dump_cell, load_document

__all__ = ["cell_form", "cell_hash", "cell_json", "cell_from_json", "Entry", "ResultCache"]


def cell_form(root: Expr) -> str:
    """The structure form of candidate ``root``: equal for two candidates exactly when they
    are the same model up to renaming weights."""
    return structure_form(CellGraph(root), CANDIDATE_LAYOUT)


def cell_hash(root: Expr) -> str:
    """sha256 (hex) of :func:`cell_form`."""
    return hashlib.sha256(cell_form(root).encode("utf-8")).hexdigest()


def cell_json(root: Expr) -> dict[str, Any]:
    """The ``cellgraph.dag`` document (docs/FORMAT.md) of candidate ``root``, with its layout."""
    return dump_cell(*to_cell(root))


def cell_from_json(document: Mapping[str, Any]) -> Expr:
    """The candidate of a :func:`cell_json` document."""
    loaded = load_document(document)
    return from_cell(loaded.cell, loaded.layout)


@dataclass(frozen=True)
class Entry:
    """The evaluation of one hash: its trial ``number``, ``running`` or not, its ``loss``
    (None while running or when it failed) and whether it reached full fidelity."""

    number: int
    running: bool
    loss: float | None = None
    complete: bool = False


def _better(a: Entry, b: Entry) -> bool:
    """Whether ``a`` is a better result than ``b``: finished before running, full fidelity
    before stopped early, then the lower loss."""
    def key(e: Entry) -> tuple:
        return (e.running, not e.complete, float("inf") if e.loss is None else e.loss, e.number)

    return key(a) < key(b)


class ResultCache:
    """hash -> best :class:`Entry`; :meth:`lookup` counts hits (a duplicate avoided)."""

    def __init__(self, entries: Iterable[tuple[str, Entry]] = ()) -> None:
        self._best: dict[str, Entry] = {}
        self.lookups = 0
        self.hits = 0
        for key, entry in entries:
            self.add(key, entry)

    def add(self, key: str, entry: Entry) -> None:
        old = self._best.get(key)
        if old is None or _better(entry, old):
            self._best[key] = entry

    def get(self, key: str) -> Entry | None:
        """The entry of ``key``, or None, counting nothing."""
        return self._best.get(key)

    def lookup(self, key: str) -> Entry | None:
        """The entry of ``key``, or None; a found one counts as a hit."""
        self.lookups += 1
        found = self.get(key)
        self.hits += found is not None
        return found

    @property
    def duplicate_rate(self) -> float:
        """Hits per lookup (0 before the first)."""
        return self.hits / self.lookups if self.lookups else 0.0

    def __len__(self) -> int:
        return len(self._best)

    def __contains__(self, key: str) -> bool:
        return key in self._best
