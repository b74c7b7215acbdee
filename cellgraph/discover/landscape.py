"""The landscape around a planted teacher: how well cells fit as they lie farther from it
(docs/discover.md, *The landscape around a teacher*).

A fitness-distance sample (T. Jones, S. Forrest, "Fitness Distance Correlation as a Measure of
Problem Difficulty for Genetic Algorithms", ICGA 1995): cells drawn at known walk lengths
from the teacher, each to be evaluated like a search's candidate, show how far the teacher's
basin reaches; a random draw of the space shows where a cold search starts.

* :func:`walk`: ``steps`` random single changes from a root (:func:`~cellgraph.discover.mutations.mutate`
  without the motif moves: ``op``, ``activation``, ``kind``, ``rewire``, ``insert``, ``remove``),
  each child valid and a structure the walk has not visited. Its length bounds the edit
  distance from the root from above: a later change can bring the walk back nearer.
* :func:`around`: ``per`` walks of each length, then ``per_random`` cells of
  :func:`~cellgraph.discover.space.sample_cell`, all distinct and none the root, named
  ``"walk L #k"`` and ``"random #k"``; drawn from ``seed`` alone: the same arguments draw the
  same cells.
* :func:`shells`: the structures at each move distance from a start in the local search's move
  graph (:func:`~cellgraph.discover.mutations.neighbours`: the single changes and, with
  ``motifs``, the motif moves), by breadth-first search. How many structures lie within ``d``
  moves of a search's start, and at which distance a teacher lies, say which teachers a search
  of a given budget can reach at all when no move on the way lowers the fit.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from cellgraph.cell.expr import Expr
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.mutations import hashed_neighbours, mutate
from cellgraph.discover.space import CellSpace, sample_cell
from cellgraph.errors import CellGraphError

__all__ = ["MAX_TRIES", "walk", "around", "shells", "distance"]

#: How many mutations one step of a walk draws before the walk gives up.
MAX_TRIES = 1000


def walk(root: Expr, steps: int, rng: random.Random, space: CellSpace) -> Expr:
    """The cell ``steps`` valid single changes away from ``root`` along a walk that never
    revisits a structure; an error when a step finds no such change in :data:`MAX_TRIES` draws."""
    if steps < 0:
        raise CellGraphError(f"a walk's length must be >= 0, got {steps}")
    seen, cell = {cell_hash(root)}, root
    for step in range(steps):
        for _ in range(MAX_TRIES):
            child = mutate(cell, rng, space).child
            if child is not None and cell_hash(child) not in seen:
                break
        else:
            raise CellGraphError(f"step {step + 1} of a walk found no new valid cell in {MAX_TRIES} mutations")
        seen.add(cell_hash(child))
        cell = child
    return cell


def around(root: Expr, lengths: Sequence[int], per: int, per_random: int, space: CellSpace,
           seed: int = 0) -> list[tuple[str, Expr]]:
    """``per`` cells at each walk length of ``lengths`` from ``root`` (:func:`walk`), then
    ``per_random`` random cells of ``space``: distinct structures, none ``root``'s. Each cell
    has a generator of its own, seeded by ``seed``, its group, its index and its attempt: a
    draw that gives a structure already drawn is redrawn with the next attempt's."""
    if per < 0 or per_random < 0 or any(n < 1 for n in lengths):
        raise CellGraphError(f"need lengths >= 1 and counts >= 0, got lengths {list(lengths)}, per {per}, "
                             f"per_random {per_random}")
    seen, out = {cell_hash(root)}, []
    draws = [(f"walk {n}", lambda rng, n=n: walk(root, n, rng, space)) for n in sorted(set(lengths))]
    draws.append(("random", lambda rng: sample_cell(space, rng)))
    for (label, draw), count in zip(draws, [per] * (len(draws) - 1) + [per_random]):
        for k in range(count):
            for attempt in range(MAX_TRIES):
                cell = draw(random.Random(f"{seed}/{label}/{k}/{attempt}"))
                if cell_hash(cell) not in seen:
                    break
            else:
                raise CellGraphError(f"{label}: no new structure in {MAX_TRIES} draws")
            seen.add(cell_hash(cell))
            out.append((f"{label} #{k}", cell))
    return out


def shells(start: Expr, depth: int, space: CellSpace, motifs: bool = True) -> list[set[str]]:
    """The :func:`~cellgraph.discover.cache.cell_hash` of every structure at move distance
    ``0, 1, ..., depth`` from ``start`` in the move graph of
    :func:`~cellgraph.discover.mutations.neighbours` (``motifs``: with the motif moves), one set
    per distance: ``shells(...)[d]`` holds the structures ``d`` moves away and no nearer."""
    if depth < 0:
        raise CellGraphError(f"a depth must be >= 0, got {depth}")
    seen = {cell_hash(start)}
    found, frontier = [set(seen)], [start]
    for _ in range(depth):
        shell: set[str] = set()
        nxt: list[Expr] = []
        for cell in frontier:
            for _, child, key in hashed_neighbours(cell, space, motifs):
                if key not in seen:
                    seen.add(key)
                    shell.add(key)
                    nxt.append(child)
        found.append(shell)
        frontier = nxt
    return found


def distance(found: Sequence[set[str]], target: Expr) -> int | None:
    """``target``'s move distance in ``found`` (:func:`shells`), None when it lies farther."""
    key = cell_hash(target)
    return next((d for d, shell in enumerate(found) if key in shell), None)
