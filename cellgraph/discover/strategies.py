"""Search strategies: what to evaluate next, given what was evaluated (docs/discover.md,
*Strategies*).

A strategy proposes; the search loop (:func:`cellgraph.discover.search.discover`) evaluates
and records. :meth:`Strategy.propose` reads the history, the study's trials in trial order as
:class:`Record` s, and returns a :class:`Proposal`; a strategy keeps no state of its own, so
several workers share one search and a stopped search resumes from its study alone.

* :class:`RandomSearch`: a fresh :func:`~cellgraph.discover.space.sample_cell` each time.
* :class:`RegularizedEvolution`: aging evolution (E. Real et al., "Regularized Evolution for
  Image Classifier Architecture Search", AAAI 2019, Algorithm 1). The population is the last
  ``population`` records that reached full fidelity; while there are fewer, the seed cells
  (not yet evaluated) are proposed, then mutants of a seed drawn at random (the seeded
  arm: the population starts around the seeds), or random cells without seeds. Afterwards each proposal samples
  ``sample`` members of the population uniformly without replacement, takes the one of
  lowest loss as the parent and mutates it (:func:`~cellgraph.discover.mutations.mutate`,
  again until a child is valid; with ``motifs``, the motif moves are drawn beside the
  mutations). The child joins the population when its evaluation
  finishes and the oldest member leaves, because the population is the *last* records.
* :class:`LocalSearch`: the one-change neighbourhood scanned systematically (C. White, S.
  Nolen, Y. Savani, "Exploring the Loss Landscape in Neural Architecture Search", UAI 2021: local
  search is a strong baseline of architecture search), best improvement first. Its first centre
  is a seed, or the best of ``starts`` random cells; the centre's neighbours
  (:func:`~cellgraph.discover.mutations.neighbours`, with the motif moves when ``motifs``) not
  yet evaluated are proposed in a random order, the motif moves' before the single changes'
  (the larger steps first: best improvement still scans them all, but a search cut short has
  tried them); once all are, the best of them becomes the centre if it is better, and at a local
  optimum the best record not yet a centre does (a random cell when there is none). The chain of
  centres is recomputed from the history at every proposal, so the strategy keeps no state.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Protocol, Sequence

from cellgraph.cell.expr import Expr
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.mutations import MOTIFS, mutate, neighbours
from cellgraph.discover.space import CellSpace, sample_cell, validate
from cellgraph.errors import CellGraphError

__all__ = ["Record", "Proposal", "Strategy", "RandomSearch", "RegularizedEvolution", "LocalSearch"]

#: How many mutations of one parent are tried before the search gives up on it.
MAX_MUTATIONS = 1000


@dataclass(frozen=True)
class Record:
    """One finished trial: its ``number``, candidate ``root`` and ``hash``, ``loss`` (None
    when it failed) and whether it reached full fidelity (``complete``)."""

    number: int
    root: Expr
    hash: str
    loss: float | None
    complete: bool


@dataclass(frozen=True)
class Proposal:
    """A candidate to evaluate, how it was made (``origin``: ``seed``, ``random`` or the
    mutation's name) and the trial number of its ``parent`` (None when it has none)."""

    root: Expr
    origin: str
    parent: int | None = None


class Strategy(Protocol):
    """Proposes the next candidate; ``rejected`` counts the reasons of the invalid ones."""

    name: str

    def propose(self, history: Sequence[Record], space: CellSpace, rng: random.Random,
                rejected: Counter) -> Proposal: ...

    def to_dict(self) -> dict: ...


@dataclass(frozen=True)
class RandomSearch:
    """Uniformly-ish random candidates (:func:`~cellgraph.discover.space.sample_cell`)."""

    name = "random"

    def propose(self, history: Sequence[Record], space: CellSpace, rng: random.Random,
                rejected: Counter) -> Proposal:
        return Proposal(sample_cell(space, rng, rejected), "random")

    def to_dict(self) -> dict:
        return {"name": self.name}


@dataclass(frozen=True)
class RegularizedEvolution:
    """Aging evolution with population ``population`` (P) and sample size ``sample`` (S),
    the initial population made of ``seeds`` (candidates) and their mutants, or of random
    cells without seeds; ``motifs`` adds the motif moves to the mutations."""

    population: int = 20
    sample: int = 5
    seeds: tuple[Expr, ...] = ()
    motifs: bool = False

    name = "evolution"

    def __post_init__(self) -> None:
        if not 1 <= self.sample <= self.population:
            raise CellGraphError(f"evolution: need 1 <= sample ({self.sample}) <= population ({self.population})")

    def check(self, space: CellSpace) -> None:
        """Every seed must be a candidate of ``space``."""
        _check_seeds(self.name, self.seeds, space)

    def propose(self, history: Sequence[Record], space: CellSpace, rng: random.Random,
                rejected: Counter) -> Proposal:
        members = [r for r in history if r.complete]
        if len(members) >= self.population:
            population = members[-self.population:]
            return self._child(min(rng.sample(population, self.sample), key=lambda r: r.loss), space, rng, rejected)  # type: ignore
        seed = _unevaluated_seed(self.seeds, history)
        if seed is not None:
            return Proposal(seed, "seed")
        keys = {cell_hash(seed) for seed in self.seeds}
        seeded = [r for r in members if r.hash in keys]
        if seeded:
            return self._child(rng.choice(seeded), space, rng, rejected)
        return Proposal(sample_cell(space, rng, rejected), "random")

    def _child(self, parent: Record, space: CellSpace, rng: random.Random, rejected: Counter) -> Proposal:
        """A valid mutation of ``parent``."""
        for _ in range(MAX_MUTATIONS):
            child = mutate(parent.root, rng, space, self.motifs)
            if child.child is not None:
                return Proposal(child.child, child.name, parent.number)
            rejected[child.reason] += 1
        raise CellGraphError(f"evolution: {MAX_MUTATIONS} mutations of trial #{parent.number} were all rejected "
                             f"({dict(rejected.most_common(3))}): widen the space")

    def to_dict(self) -> dict:
        return {"name": self.name, "population": self.population, "sample": self.sample,
                "seeds": len(self.seeds), "motifs": self.motifs}


def _check_seeds(strategy: str, seeds: Sequence[Expr], space: CellSpace) -> None:
    """Raise, naming ``strategy`` and the seed, where a seed cell is not a candidate of ``space``."""
    for i, seed in enumerate(seeds):
        reason = validate(seed, space)
        if reason:
            raise CellGraphError(f"{strategy}: seed cell {i} is not a candidate of the space: {reason}")


def _unevaluated_seed(seeds: Sequence[Expr], history: Sequence[Record]) -> Expr | None:
    """The first of ``seeds`` no trial of ``history`` has evaluated, or None."""
    seen = {r.hash for r in history}
    return next((seed for seed in seeds if cell_hash(seed) not in seen), None)


def _rank(record: Record) -> tuple[float, int]:
    return record.loss, record.number  # type: ignore[return-value]


@dataclass(frozen=True)
class LocalSearch:
    """Best-improvement local search over the one-change neighbourhood, and the motif moves
    when ``motifs`` (module docstring), started from ``seeds`` or from the best of ``starts``
    random cells."""

    starts: int = 10
    seeds: tuple[Expr, ...] = ()
    motifs: bool = False

    name = "local"

    def __post_init__(self) -> None:
        if self.starts < 1:
            raise CellGraphError(f"local search: starts must be >= 1, got {self.starts}")

    def check(self, space: CellSpace) -> None:
        """Every seed must be a candidate of ``space``."""
        _check_seeds("local search", self.seeds, space)

    def propose(self, history: Sequence[Record], space: CellSpace, rng: random.Random,
                rejected: Counter) -> Proposal:
        seed = _unevaluated_seed(self.seeds, history)
        if seed is not None:
            return Proposal(seed, "seed")
        seen = {r.hash for r in history}
        done = {r.hash: r for r in history if r.complete and r.loss is not None}
        firsts = [done[cell_hash(seed)] for seed in self.seeds if cell_hash(seed) in done] or \
            [r for r in history[:self.starts] if r.hash in done]
        if len(history) < self.starts and not self.seeds or not firsts:
            return Proposal(sample_cell(space, rng, rejected), "random")
        centre, visited = min(firsts, key=_rank), set()
        while centre is not None:
            around = [(name, child, cell_hash(child)) for name, child in neighbours(centre.root, space, self.motifs)]
            fresh = [(name, child) for name, child, key in around if key not in seen]
            motif = [(name, child) for name, child in fresh if name.split()[0] in MOTIFS]
            if fresh:
                name, child = (motif or fresh)[rng.randrange(len(motif or fresh))]
                return Proposal(child, name.split()[0], centre.number)
            visited.add(centre.hash)
            best = min((done[key] for _, _, key in around if key in done), key=_rank, default=None)
            if best is None or best.hash in visited or _rank(best) >= _rank(centre):
                best = min((r for r in done.values() if r.hash not in visited), key=_rank, default=None)
            centre = best
        return Proposal(sample_cell(space, rng, rejected), "random")

    def to_dict(self) -> dict:
        return {"name": self.name, "starts": self.starts, "seeds": len(self.seeds), "motifs": self.motifs}
