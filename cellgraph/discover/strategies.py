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
  (:func:`~cellgraph.discover.mutations.neighbours`, with the motif moves when ``motifs``
  and every insertion of a node when ``insert``) not
  yet evaluated are proposed in a random order, the motif moves' before the single changes'
  (the larger steps first: best improvement still scans them all, but a search cut short has
  tried them); once all are, the best of them becomes the centre if it is better, and at a local
  optimum the best record not yet a centre does (a random cell when there is none). The chain of
  centres is recomputed from the history at every proposal, so the strategy keeps no state.
* :class:`EnumerationSearch`: every candidate of one generated node, then every one of two,
  and so on up to ``nodes`` (:func:`~cellgraph.discover.enumeration.cells_of_size`), each size
  in an order shuffled by ``seed``; once all are proposed, random cells. With successive
  halving over a cheap first rung this is exhaustive search of the small cells: the budget
  decides how far it gets, not the landscape. With ``grow`` the listed cells are the starts of
  a local search with first improvement whose neighbourhood also has every insertion of a
  node (:func:`~cellgraph.discover.mutations.insertions`): a cell one node larger than the list
  is found from any of its sub-cells the search reaches as a centre (the best listed cell
  first, then, at each local optimum, the best record not yet a centre). With ``expand`` the
  list is followed by its best-first expansion instead: the insertions of the listed cells,
  parent by parent in the order of their loss at the first rung, so the cells one node larger
  than the list come in the order of how well their sub-cells did after the cheapest training;
  with probe rungs (:class:`~cellgraph.discover.fidelity.Fidelity` ``probes``) the parents are
  ranked at each early rung and the rankings taken in turn, for no single training ranks every
  teacher's sub-cell well.
* :class:`TPESearch`: the tree-structured Parzen estimator (J. Bergstra, R. Bardenet, Y. Bengio,
  B. Kegl, "Algorithms for Hyper-Parameter Optimization", NeurIPS 2011) over the slot encoding
  of :mod:`cellgraph.discover.slots`, as Optuna's ``TPESampler(multivariate=True, group=True)``
  samples it (the group decomposition models the conditional slots). Each proposal replays the
  history into a fresh in-memory study, the *view*: a record that reached full fidelity is a
  COMPLETE trial at its loss, one stopped at a lower rung a PRUNED trial with its last rung's
  loss (TPE ranks it below every complete one), one whose training failed a PRUNED trial with
  no loss (ranked last). The sampler draws parameters in the view until they decode to a
  candidate; each invalid draw is counted in ``rejected`` by its reason and told PRUNED with no
  loss in the view, so the next draw of the same proposal avoids it. The parameters are the
  proposal's (``params``), which the search records as its trial's Optuna parameters, so the
  history holds what the sampler drew (a duplicate's trial too, with the loss it reuses). While
  the history has fewer than ``starts`` records the draws are uniform (Optuna's
  ``RandomSampler``, as TPE's own start). Seed cells are proposed first, as their encoding.

Random search, local search and the enumeration take a ``screen``
(:class:`~cellgraph.discover.screen.Screen`): they then propose only the cells it keeps.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import random
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence

import optuna
from optuna.distributions import BaseDistribution
from optuna.exceptions import ExperimentalWarning
from optuna.samplers import BaseSampler, RandomSampler, TPESampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState, create_trial

from cellgraph.cell.expr import Expr
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.enumeration import cells_of_size
from cellgraph.discover.mutations import MOTIFS, hashed_neighbours, mutate
from cellgraph.discover.screen import Screen
from cellgraph.discover.slots import SlotEncoding
from cellgraph.discover.space import CellSpace, sample_cell, validate
from cellgraph.errors import CellGraphError

__all__ = ["Record", "Proposal", "Strategy", "RandomSearch", "RegularizedEvolution", "LocalSearch", "EnumerationSearch", "TPESearch"]

#: How many mutations of one parent are tried before the search gives up on it.
MAX_MUTATIONS = 1000
#: How many parameter sets one TPE proposal draws, or random cells one screened proposal, before
#: the search gives up.
MAX_DRAWS = 1000


@dataclass(frozen=True)
class Record:
    """One finished trial: its ``number``, candidate ``root`` and ``hash``, ``loss`` (None
    when it failed), whether it reached full fidelity (``complete``), the Optuna
    parameters it was drawn as (``params``, empty for strategies that draw none) and its losses
    at the rungs every candidate trains (``early``: the fidelity's probes and its first rung
    that prunes, :attr:`~cellgraph.discover.fidelity.Fidelity.early`; fewer or none when it
    failed or trained none, as a duplicate) and at every rung it reached (``rungs``: ``early``
    and the rungs it was promoted to)."""

    number: int
    root: Expr
    hash: str
    loss: float | None
    complete: bool
    params: Mapping[str, Any] = field(default_factory=dict, compare=False)
    early: tuple[float, ...] = ()
    rungs: tuple[float, ...] = field(default=(), compare=False)

    @classmethod
    def from_trial(cls, trial: FrozenTrial, root: Expr, early: Sequence[int],
                   rungs: Sequence[int] = ()) -> "Record":
        """The record of a search's ``trial`` (its user attributes ``hash`` and ``loss``), its
        candidate ``root`` read from it, ``early`` the rungs' epochs of :attr:`early` and
        ``rungs`` every rung's (the fidelity's epochs) of :attr:`rungs`."""
        values = trial.intermediate_values

        def reached(epochs: Sequence[int]) -> tuple[float, ...]:
            return tuple(values[e] for e in itertools.takewhile(values.__contains__, epochs))

        return cls(trial.number, root, trial.user_attrs["hash"], trial.user_attrs.get("loss"),
                   trial.state == TrialState.COMPLETE, trial.params, reached(early), reached(rungs))


@dataclass(frozen=True)
class Proposal:
    """A candidate to evaluate, how it was made (``origin``: ``seed``, ``random``, ``tpe``, ``enumerate`` or
    the mutation's name), the trial number of its ``parent`` (None when it has none), the
    Optuna parameters it was drawn as (``params``, each with its distribution in
    ``distributions``), which the search records as its trial's parameters, and whether it
    trains the fidelity's probe rungs (``probing``; False for a cell whose early losses no
    ranking reads, which successive halving may then stop from its first rung)."""

    root: Expr
    origin: str
    parent: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict, compare=False)
    distributions: Mapping[str, BaseDistribution] = field(default_factory=dict, compare=False)
    probing: bool = True


class Strategy(Protocol):
    """Proposes the next candidate; ``rejected`` counts the reasons of the invalid ones."""

    name: str

    def propose(self, history: Sequence[Record], space: CellSpace, rng: random.Random,
                rejected: Counter) -> Proposal: ...

    def to_dict(self) -> dict: ...


def _keeps(screen: Screen | None, cell: Expr) -> bool:
    """Whether ``screen`` keeps ``cell`` (every cell without one)."""
    return screen is None or screen.problem(cell) is None


def _screened(screen: Screen | None, space: CellSpace, rng: random.Random, rejected: Counter) -> Expr:
    """A random candidate (:func:`~cellgraph.discover.space.sample_cell`) that ``screen`` keeps,
    the others counted in ``rejected`` as ``screen: KIND``."""
    for _ in range(MAX_DRAWS):
        cell = sample_cell(space, rng, rejected)
        problem = None if screen is None else screen.problem(cell)
        if problem is None:
            return cell
        rejected[f"screen: {problem}"] += 1
    raise CellGraphError(f"the screen kept none of {MAX_DRAWS} random cells ({dict(rejected.most_common(3))}): "
                         f"widen the space or search without the screen")


def _with_screen(out: dict, screen: Screen | None) -> dict:
    """``out`` (a strategy's ``to_dict``) with the screen's settings when there is one: a study
    made without one matches."""
    return out if screen is None else {**out, "screen": screen.to_dict()}


@dataclass(frozen=True)
class RandomSearch:
    """Uniformly-ish random candidates (:func:`~cellgraph.discover.space.sample_cell`), only
    those ``screen`` keeps when given."""

    screen: Screen | None = None

    name = "random"

    def propose(self, history: Sequence[Record], space: CellSpace, rng: random.Random,
                rejected: Counter) -> Proposal:
        return Proposal(_screened(self.screen, space, rng, rejected), "random")

    def to_dict(self) -> dict:
        return _with_screen({"name": self.name}, self.screen)


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


@functools.lru_cache(maxsize=1024)
def _around(root: Expr, space: CellSpace, motifs: bool, insert: bool) -> tuple[tuple[str, Expr, str], ...]:
    """:func:`~cellgraph.discover.mutations.hashed_neighbours`, kept: local search recomputes its
    chain of centres at every proposal."""
    return tuple(hashed_neighbours(root, space, motifs, insert))


def _rank(record: Record) -> tuple[float, int]:
    return record.loss, record.number  # type: ignore[return-value]


@dataclass(frozen=True)
class LocalSearch:
    """Best-improvement local search over the one-change neighbourhood, and the motif moves
    when ``motifs`` and the insertions when ``insert`` (module docstring), started from
    ``seeds`` or from the best of ``starts`` random cells. With ``first_improvement`` the
    centre moves as soon as one of its neighbours has reached full fidelity with a lower loss
    (to the best such neighbour), without waiting for the rest of its neighbourhood. With
    ``screen`` only the neighbours it keeps are proposed, and random cells likewise."""

    starts: int = 10
    seeds: tuple[Expr, ...] = ()
    motifs: bool = False
    first_improvement: bool = False
    insert: bool = False
    screen: Screen | None = None

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
            return Proposal(_screened(self.screen, space, rng, rejected), "random")
        centre, visited = min(firsts, key=_rank), set()
        while centre is not None:
            around = _around(centre.root, space, self.motifs, self.insert)
            better = min((done[key] for _, _, key in around if key in done), key=_rank, default=None)
            if self.first_improvement and better is not None and _rank(better) < _rank(centre):
                visited.add(centre.hash)
                centre = better
                continue
            fresh = [(name, child) for name, child, key in around if key not in seen and _keeps(self.screen, child)]
            motif = [(name, child) for name, child in fresh if name.split()[0] in MOTIFS]
            if fresh:
                name, child = (motif or fresh)[rng.randrange(len(motif or fresh))]
                return Proposal(child, name.split()[0], centre.number)
            visited.add(centre.hash)
            best = better
            if best is None or best.hash in visited or _rank(best) >= _rank(centre):
                best = min((r for r in done.values() if r.hash not in visited), key=_rank, default=None)
            centre = best
        return Proposal(_screened(self.screen, space, rng, rejected), "random")

    def to_dict(self) -> dict:
        # studies made before these options match
        new = {key: True for key, on in (("first_improvement", self.first_improvement), ("insert", self.insert)) if on}
        return _with_screen({"name": self.name, "starts": self.starts, "seeds": len(self.seeds), "motifs": self.motifs,
                             **new}, self.screen)


@functools.lru_cache(maxsize=4)
def _enumeration(space: CellSpace, nodes: int, seed: int, screen: Screen | None) -> tuple[tuple[Expr, str], ...]:
    """The cells :class:`EnumerationSearch` proposes, in order, with their hashes."""
    order: list[Expr] = []
    for k in range(max(1, space.min_nodes), min(nodes, space.max_nodes) + 1):
        cells = [cell for cell in cells_of_size(k, space) if _keeps(screen, cell)]
        random.Random(f"{seed}/{k}").shuffle(cells)
        order += cells
    return tuple((cell, cell_hash(cell)) for cell in order)


@dataclass(frozen=True)
class EnumerationSearch:
    """Exhaustive search of the small cells (module docstring): the candidates of ``1 ..
    nodes`` generated nodes, smallest first, each size in the order ``seed`` shuffles; the
    first not yet in the history is proposed, then random cells, or with ``grow`` a
    :class:`LocalSearch` with first improvement whose neighbourhood has every insertion of a
    node, started from the best listed cell (``starts``: the listed ones), or with ``expand``
    the insertions of the listed cells, best first (:meth:`expansion`), and with ``depth`` D > 1
    the insertions of the cells so made, up to ``nodes + D`` nodes; with ``all_rungs`` the
    parents are ranked at every rung they reached, not only at the early ones; with
    ``probe_parents_only`` the insertions of ``nodes + D`` nodes, which no level ranks, skip the
    probe rungs (:class:`Proposal` ``probing``). With ``screen`` only the cells it keeps are
    listed, grown, expanded and drawn."""

    nodes: int = 2
    seed: int = 0
    grow: bool = False
    screen: Screen | None = None
    expand: bool = False
    depth: int = 1
    all_rungs: bool = False
    probe_parents_only: bool = False

    name = "enumerate"

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise CellGraphError(f"enumeration: nodes must be >= 1, got {self.nodes}")
        if self.grow and self.expand:
            raise CellGraphError("enumeration: grow (local search) and expand (best first) are two ways to go on; "
                                 "choose one")
        if self.depth < 1 or (self.depth > 1 and not self.expand):
            raise CellGraphError(f"enumeration: depth must be >= 1, and above 1 only with expand, got {self.depth}")
        for option, on in (("all_rungs", self.all_rungs), ("probe_parents_only", self.probe_parents_only)):
            if on and not self.expand:
                raise CellGraphError(f"enumeration: {option} is about the parents of an expansion; it needs expand")

    def propose(self, history: Sequence[Record], space: CellSpace, rng: random.Random,
                rejected: Counter) -> Proposal:
        seen = {r.hash for r in history}
        listed = self.listed(space)
        for cell, key in listed:
            if key not in seen:
                return Proposal(cell, "enumerate")
        if self.grow:
            return LocalSearch(len(listed), motifs=False, first_improvement=True, insert=True,
                               screen=self.screen).propose(history, space, rng, rejected)
        if self.expand:
            proposal = self.expansion(history, {key for _, key in listed}, space, seen)
            if proposal is not None:
                return proposal
        return Proposal(_screened(self.screen, space, rng, rejected), "random")

    def listed(self, space: CellSpace) -> tuple[tuple[Expr, str], ...]:
        """The cells of ``1 .. nodes`` nodes in the order they are proposed, with their hashes."""
        return _enumeration(space, self.nodes, self.seed, self.screen)

    def expansion(self, history: Sequence[Record], listed: set[str], space: CellSpace,
                  seen: set[str]) -> Proposal | None:
        """The first cell of :meth:`expansion_order` not yet in the history (``seen``), or None
        once every insertion of every listed cell is. A parent all of whose insertions are
        seen is passed over at one set comparison, not walked child by child: the expansion
        goes back over its first parents at every proposal."""
        for parent in self.expansion_parents(history, listed):
            if _insertion_keys(parent.root, parent.hash, space, self.seed, self.screen) <= seen:
                continue
            children = _insertions(parent.root, parent.hash, space, self.seed, self.screen)
            child = next(child for child, key in children if key not in seen)
            leaf = self.probe_parents_only and _size(child) >= self.nodes + self.depth
            return Proposal(child, "insert", parent.number, probing=not leaf)
        return None

    def expansion_order(self, history: Sequence[Record], listed: set[str],
                        space: CellSpace) -> Iterator[tuple[Expr, str, int]]:
        """Best-first expansion of the list: the listed cells (hashes ``listed``) that trained,
        best first (:func:`_interleaved`: by their loss at the first rung, or, when the records
        have losses at several early rungs, by each rung's ranking in turn), each parent's
        insertions of one node (:func:`~cellgraph.discover.mutations.insertions`) in the order
        ``seed`` shuffles, those the screen keeps, each with its hash and its parent's trial
        number; a cell two parents share comes again. A cell of ``nodes + 1`` nodes comes as
        soon as its best-ranked sub-cell's turn does, so how early depends on how that sub-cell
        ranks after the cheapest trainings.

        With ``depth`` D > 1 the trained cells of ``nodes + 1`` to ``nodes + D - 1`` nodes are
        parents too, a level per size; the rankings of every level (and early rung) are taken in
        turn, so a cell that ranks first among its level's is expanded as soon as that level's
        turn comes, whichever level it is (best first over the tree of insertions).

        With ``all_rungs`` each level is also ranked at the later rungs (:attr:`Record.rungs`,
        among the cells promoted there), so a parent that ranks well only after longer training
        comes as soon as that ranking's turn does (docs/discover.md, *One level deeper*)."""
        for parent in self.expansion_parents(history, listed):
            yield from ((child, key, parent.number)
                        for child, key in _insertions(parent.root, parent.hash, space, self.seed, self.screen))

    def expansion_parents(self, history: Sequence[Record], listed: set[str]) -> Iterator[Record]:
        """The parents of :meth:`expansion_order`, each once, in its first turn."""
        levels: list[dict[str, Record]] = [{} for _ in range(self.depth)]
        for r in history:
            if not r.early:
                continue
            if r.hash in listed:
                levels[0][r.hash] = r
            elif self.depth > 1 and 0 < (level := _size(r.root) - self.nodes) < self.depth:
                levels[level][r.hash] = r
        losses = (lambda r: r.rungs) if self.all_rungs else (lambda r: r.early)
        return _interleaved([list(level.values()) for level in levels], losses)

    def to_dict(self) -> dict:
        return _with_screen({"name": self.name, "nodes": self.nodes, "seed": self.seed,
                             **({"grow": True} if self.grow else {}),
                             **({"expand": True} if self.expand else {}),
                             **({"depth": self.depth} if self.depth > 1 else {}),
                             **({"all_rungs": True} if self.all_rungs else {}),
                             **({"probe_parents_only": True} if self.probe_parents_only else {})}, self.screen)


@functools.lru_cache(maxsize=8192)
def _insertions(root: Expr, key: str, space: CellSpace, seed: int, screen: Screen | None) -> tuple[tuple[Expr, str], ...]:
    """(cell, hash): the insertions of one node into ``root`` (hash ``key``) in the order
    ``seed`` shuffles, those ``screen`` keeps; kept, since the expansion walks its first
    parents' insertions again at every proposal."""
    children = [(child, h) for name, child, h in _around(root, space, False, True) if name.startswith("insert ")]
    random.Random(f"{seed}/{key}").shuffle(children)
    return tuple((child, h) for child, h in children if _keeps(screen, child))


@functools.lru_cache(maxsize=8192)
def _insertion_keys(root: Expr, key: str, space: CellSpace, seed: int, screen: Screen | None) -> frozenset[str]:
    """The hashes of :func:`_insertions`, kept for the expansion's test of a parent walked to its end."""
    return frozenset(h for _, h in _insertions(root, key, space, seed, screen))


def _interleaved(levels: Sequence[Sequence[Record]],
                 losses: Callable[[Record], tuple[float, ...]]) -> Iterator[Record]:
    """The records of ``levels`` (groups, e.g. cells of one size) ranked, per level, by their loss
    at each rung of ``losses`` (:attr:`Record.early` or :attr:`Record.rungs`; the lowest first,
    ties by trial; rung ``j`` ranks those with a loss there), all the rankings taken in turn
    (level by level, rung by rung), one record from each, a record already taken skipped: each
    record comes no later than about as many places as rankings times its best rank."""
    rankings = []
    for records in levels:
        depth = max((len(losses(r)) for r in records), default=0)
        rankings += [iter(sorted((r for r in records if len(losses(r)) > j), key=lambda r: (losses(r)[j], r.number)))
                     for j in range(depth)]
    taken: set[int] = set()
    while rankings:
        for ranking in list(rankings):
            record = next((r for r in ranking if r.number not in taken), None)
            if record is None:
                rankings.remove(ranking)
                continue
            taken.add(record.number)
            yield record


@functools.lru_cache(maxsize=65536)
def _size(root: Expr) -> int:
    """``root``'s generated nodes."""
    return len(root.internal_nodes())


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence optuna's warning that ``group`` is experimental and its note, one per
    proposal, that a study was created in memory (the view)."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(max(verbosity, optuna.logging.WARNING))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExperimentalWarning)
            yield
    finally:
        optuna.logging.set_verbosity(verbosity)


def _observed(record: Record, encoding: SlotEncoding) -> FrozenTrial:
    """``record`` as a trial of the view (module docstring): COMPLETE at its loss when it reached
    full fidelity, else PRUNED with its last rung's loss, or with none when it failed."""
    params = dict(record.params)
    distributions = {name: encoding.distributions[name] for name in params}
    if record.complete:
        return create_trial(params=params, distributions=distributions, value=record.loss)
    return create_trial(params=params, distributions=distributions, state=TrialState.PRUNED,
                        intermediate_values={} if record.loss is None else {0: record.loss})


def _view(history: Sequence[Record], encoding: SlotEncoding, sampler: BaseSampler) -> Study:
    """A fresh in-memory study that has ``history`` as its trials and draws with ``sampler``."""
    view = optuna.create_study(sampler=sampler, direction="minimize")
    view.add_trials([_observed(r, encoding) for r in history])
    return view


@dataclass(frozen=True)
class TPESearch:
    """Grouped multivariate TPE over the slot encoding (module docstring), uniform draws for
    the first ``starts`` records, started from ``seeds`` when given."""

    starts: int = 10
    seeds: tuple[Expr, ...] = ()

    name = "tpe"

    def __post_init__(self) -> None:
        if self.starts < 1:
            raise CellGraphError(f"tpe: starts must be >= 1, got {self.starts}")

    def check(self, space: CellSpace) -> None:
        """Every seed must be a candidate of ``space``."""
        _check_seeds(self.name, self.seeds, space)

    def propose(self, history: Sequence[Record], space: CellSpace, rng: random.Random,
                rejected: Counter) -> Proposal:
        encoding = SlotEncoding(space)
        seed = _unevaluated_seed(self.seeds, history)
        if seed is not None:
            return Proposal(seed, "seed", params=encoding.encode(seed), distributions=encoding.distributions)
        modelled = len(history) >= self.starts
        with _quiet():
            sampler = (TPESampler(multivariate=True, group=True, n_startup_trials=0, constant_liar=False,
                                  seed=rng.randrange(2**32)) if modelled else RandomSampler(rng.randrange(2**32)))
            view = _view(history, encoding, sampler)
            for _ in range(MAX_DRAWS):
                trial = view.ask()
                params = encoding.suggest(trial)
                decoded = encoding.decode(params)
                if decoded.root is not None:
                    return Proposal(decoded.root, "tpe" if modelled else "random", params=params,
                                    distributions=encoding.distributions)
                rejected[decoded.reason] += 1
                view.tell(trial, state=TrialState.PRUNED)
        raise CellGraphError(f"tpe: {MAX_DRAWS} draws in a row decoded to no candidate "
                             f"({dict(rejected.most_common(3))}): widen the space")

    def to_dict(self) -> dict:
        return {"name": self.name, "starts": self.starts, "seeds": len(self.seeds)}
