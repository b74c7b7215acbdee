"""The discrete cell search: propose, look up, evaluate, record (docs/discover.md).

:func:`discover` runs one worker of a search whose state is an Optuna study
(:mod:`cellgraph.discover.storage`). Each step:

1. fail the RUNNING trials of workers on this machine that no longer exist (a killed
   search), then read the study's trials;
2. stop when the next evaluation would pass the budget: epochs spent by every trial plus the
   epochs reserved by running ones, counted in full-fidelity evaluations;
3. ask the strategy for a candidate (:mod:`cellgraph.discover.strategies`) and hash it
   (:func:`cellgraph.discover.cache.cell_hash`);
4. look the hash up: running in another worker -> skip it (counted, no trial); otherwise
   create a trial carrying the hash and the proposal's Optuna parameters (the TPE strategy's;
   the others draw none): finished -> the trial reuses its result (``duplicate_of``, no
   training); new -> read again and withdraw it when another worker created one for the same
   hash meanwhile (so no hash is ever trained twice);
5. train it rung by rung (:mod:`cellgraph.discover.fidelity`), reserving each rung's epochs
   before training it, and tell the trial COMPLETE, PRUNED or FAILED;
6. with race seeds (``Fidelity.seeds`` > 1), race a COMPLETE one against the incumbent
   (:mod:`cellgraph.discover.intensify`), each fit a trial of its own reserved as a rung is.

Trial user attributes: ``cell`` (``cellgraph.dag`` document), ``hash``, ``origin`` (``seed``,
``random`` or the mutation), ``parent`` (trial number), ``worker`` (host:pid), ``fidelity``
(epochs reached), ``spent`` (epochs trained), ``reserve`` (epochs of the rung in progress),
``loss``, ``cpu_s`` (CPU seconds of this worker on the trial), ``rejected`` (reasons of the
invalid candidates drawn before it), and ``duplicate_of``, ``error``, ``withdrawn`` or
``stopped`` where they apply; ``fit_of`` and ``fit_seed`` on a race's fit (the verdicts are
study user attributes, :mod:`cellgraph.discover.intensify`); besides them, what the evaluator
reported about its last rung (its ``last_details``, :mod:`cellgraph.discover.evaluator`), which
:class:`Found` carries as ``details``.
"""

from __future__ import annotations

import bisect
import os
import random
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from optuna.storages import BaseStorage
from optuna.study import Study
from optuna.trial import FrozenTrial, Trial, TrialState

from cellgraph.cell.expr import Expr
from cellgraph.discover.cache import Entry, cell_from_json, cell_hash, cell_json
from cellgraph.discover.evaluator import Evaluator, measure, resumes
from cellgraph.discover.fidelity import Fidelity
from cellgraph.discover.intensify import PREFIX, Board, Fit, race_seeds
from cellgraph.discover.ledger import FINISHED, Ledger, is_evaluation
from cellgraph.discover.space import CellSpace, to_cell
from cellgraph.discover.storage import open_search, open_search_storage, storage_name
from cellgraph.discover.strategies import Proposal, Record, Strategy
from cellgraph.errors import CellGraphError
from cellgraph.experiment.runs import package_versions
from cellgraph.files import write_json
from cellgraph.progress import note, progress

__all__ = ["Found", "TargetHit", "Discovery", "History", "best_trials", "discover"]

#: Proposals in a row that train nothing (duplicates, cells running elsewhere) after which a
#: worker stops: the strategy keeps proposing what the study already has.
IDLE_LIMIT = 5000
#: The trial user attributes the search itself writes (module docstring); the others are the evaluator's.
BOOKKEEPING = frozenset({"cell", "hash", "origin", "parent", "worker", "fidelity", "spent", "reserve", "loss",
                         "cpu_s", "rejected", "duplicate_of", "error", "withdrawn", "stopped", "budget"})


@dataclass(frozen=True)
class Found:
    """A candidate that reached full fidelity: trial number, hash, loss, cell document, what
    the evaluator reported about it (``details``) and, when it raced, its objective per race
    seed (``fits``, :mod:`cellgraph.discover.intensify`)."""

    trial: int
    hash: str
    loss: float
    cell: dict[str, Any]
    details: dict[str, Any] = field(default_factory=dict)
    fits: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TargetHit:
    """A trial with the target's hash, with the full-fidelity evaluations and the CPU seconds
    (all workers) the search had spent up to it, that trial included."""

    trial: int
    evaluations: float
    cpu_seconds: float


@dataclass(frozen=True)
class Discovery:
    """What a search found, read from its study (all workers) but ``skipped``, this worker's
    count of proposals left to the worker already training them. ``best`` starts with the
    incumbent when the search races (``raced``: the race fits trained)."""

    study: str
    storage: str
    best: tuple[Found, ...]
    evaluations: float
    trials: int
    trained: int
    duplicates: int
    skipped: int
    rejected: Counter = field(default_factory=Counter)
    target: TargetHit | None = None
    proposed: TargetHit | None = None
    raced: int = 0

    def to_dict(self) -> dict[str, Any]:
        hit = lambda h: None if h is None else vars(h)  # noqa: E731
        return {"study": self.study, "storage": self.storage, "evaluations": self.evaluations,
                "trials": self.trials, "trained": self.trained, "duplicates": self.duplicates,
                "skipped": self.skipped, "rejected": dict(self.rejected), "raced": self.raced,
                "best": [vars(f) for f in self.best], "target": hit(self.target), "proposed": hit(self.proposed)}


def _worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _gone(t: FrozenTrial) -> bool:
    """Whether the worker of trial ``t`` (``host:pid``) ran on this machine and its process is gone."""
    name, _, pid = str(t.user_attrs.get("worker", "")).rpartition(":")
    return name == socket.gethostname() and pid.isdigit() and not _alive(int(pid))


def _fail_dead(study: Study, storage: BaseStorage, trials: list[FrozenTrial]) -> bool:
    """Fail the RUNNING trials of workers of this machine whose process is gone (attribute
    ``stopped``); whether there were any."""
    found = False
    for t in trials:
        if t.state == TrialState.RUNNING and _gone(t):
            storage.set_trial_user_attr(t._trial_id, "stopped", f"worker {t.user_attrs['worker']} is gone")
            study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
            found = True
    return found


class History:
    """What a strategy is shown of a study: the :class:`Record` of each finished trial that
    evaluated a candidate or reused one, in trial order. A finished trial does not change, so,
    as :class:`~cellgraph.discover.ledger.Ledger` does, a history reads each trial until it is
    finished, keeps its record, and then never reads it again: a call reads only the trials
    running at the last call and those created since.

    Each call is given the study's trials as they are now, trial ``n`` at index ``n`` (a list
    that only grows, as ``study.get_trials()`` is from one reading to the next).
    """

    def __init__(self, fidelity: Fidelity) -> None:
        self.fidelity = fidelity
        self.records: list[Record] = []  # in trial order
        self._read = 0  # trials[:_read] were read at least once
        self._open: list[int] = []  # trials not finished at their last reading

    def __call__(self, trials: Sequence[FrozenTrial]) -> list[Record]:
        if len(trials) < self._read:
            raise CellGraphError(f"a history of {self._read} trials was given {len(trials)}: give it the study's trials")
        pending = [*self._open, *range(self._read, len(trials))]
        self._read, self._open = len(trials), []
        for n in pending:
            t = trials[n]
            if t.state not in FINISHED:
                self._open.append(n)
            elif "hash" in t.user_attrs and (is_evaluation(t) or "duplicate_of" in t.user_attrs):
                record = Record.from_trial(t, cell_from_json(t.user_attrs["cell"]), self.fidelity.early,
                                           self.fidelity.epochs)
                self.records.insert(bisect.bisect(self.records, n, key=lambda r: r.number), record)
        return list(self.records)


class _Search:
    """One worker's loop (module docstring)."""

    def __init__(self, study: Study, storage: BaseStorage, space: CellSpace, evaluator: Evaluator,
                 strategy: Strategy, fidelity: Fidelity, budget_epochs: int, seed: int, show: bool) -> None:
        self.study, self.storage, self.space, self.evaluator, self.strategy = study, storage, space, evaluator, strategy
        self.fidelity, self.budget_epochs, self.seed = fidelity, budget_epochs, seed
        self.resumes = resumes(evaluator)
        self.rejected: Counter = Counter()
        self.skipped = 0
        self.history = History(fidelity)
        self.seeds = race_seeds(seed, fidelity.seeds)
        self.ledger = Ledger(study)
        self.ledger.read()
        self.shown = self.ledger.spent()
        self.bar = progress(budget_epochs, "discover", show, unit="epochs", initial=self.shown)

    def read(self) -> list[FrozenTrial]:
        """Read the study again and move the progress line on to the epochs every worker has
        spent, so that it follows the whole study, not this worker alone."""
        trials = self.ledger.read()
        self.advance(self.ledger.spent() - self.shown)
        return trials

    def advance(self, epochs: int) -> None:
        """Show ``epochs`` more epochs spent (none when a reading is behind this worker's own count)."""
        if epochs > 0:
            self.bar.update(epochs)
            self.shown += epochs

    def trials(self) -> list[FrozenTrial]:
        trials = self.read()
        if _fail_dead(self.study, self.storage, trials):
            trials = self.read()
        return trials

    def run(self, rng: random.Random) -> None:
        for number in self.unraced(self.trials()):
            self.race(number)
        idle = 0
        while idle < IDLE_LIMIT:
            trials = self.trials()
            if self.ledger.epochs() + self.fidelity.cost(0, self.resumes) > self.budget_epochs:
                return
            start = time.process_time()
            proposal = self.strategy.propose(self.history(trials), self.space, rng, self.rejected)
            key = cell_hash(proposal.root)
            trained = self.step(proposal, key, self.ledger.entry(key), start)
            idle = 0 if trained else idle + 1
        note(f"discover: {IDLE_LIMIT} proposals in a row were cells the study already has; stopping")

    def step(self, proposal: Proposal, key: str, entry: Entry | None, start: float) -> bool:
        """Skip, reuse or train ``proposal`` (hash ``key``, the study's ``entry`` for it); whether it trained."""
        if entry is not None and entry.running:
            self.skipped += 1
            return False
        trial = self.study.ask()
        for name, value in proposal.params.items():
            distribution = proposal.distributions[name]
            self.storage.set_trial_param(trial._trial_id, name, distribution.to_internal_repr(value), distribution)
        attrs = {"hash": key, "cell": cell_json(proposal.root), "origin": proposal.origin, "parent": proposal.parent,
                 "worker": _worker(), "rejected": dict(self.rejected)}
        self.rejected.clear()
        for name, value in attrs.items():
            trial.set_user_attr(name, value)
        if entry is not None:
            self.reuse(trial, entry, start)
            return False
        self.read()
        other = self.ledger.entry(key, trial.number)
        if other is not None:
            trial.set_user_attr("withdrawn", f"trial #{other.number} has the same cell")
            self.study.tell(trial, state=TrialState.FAIL)
            return False
        if not proposal.probing:
            trial.set_user_attr("probing", False)
        if self.train(trial, proposal.root, start, proposal.probing) == TrialState.COMPLETE and len(self.seeds) > 1:
            self.race(trial.number)
        return True

    def reuse(self, trial: Trial, entry: Entry, start: float) -> None:
        trial.set_user_attr("duplicate_of", entry.number)
        trial.set_user_attr("cpu_s", time.process_time() - start)
        if entry.loss is None:
            trial.set_user_attr("error", f"the same cell failed in trial #{entry.number}")
            self.study.tell(trial, state=TrialState.FAIL)
            return
        trial.set_user_attr("loss", entry.loss)
        if entry.complete:
            self.study.tell(trial, entry.loss)
        else:
            self.study.tell(trial, state=TrialState.PRUNED)

    def fits(self, trial: Trial, cost: int) -> bool:
        """Reserve ``cost`` epochs for ``trial``, then check (reading every worker's
        reservations) that the budget holds them; release them when it does not."""
        trial.set_user_attr("reserve", cost)
        self.read()
        if self.ledger.epochs() <= self.budget_epochs:
            return True
        trial.set_user_attr("reserve", 0)
        return False

    def train(self, trial: Trial, root: Expr, start: float, probing: bool = True) -> TrialState:
        cell, layout = to_cell(root)
        spent, loss, state = 0, None, TrialState.COMPLETE
        for rung, epochs in enumerate(self.fidelity.epochs):
            cost = self.fidelity.cost(rung, self.resumes)
            if not self.fits(trial, cost):
                state = TrialState.PRUNED if rung else TrialState.FAIL
                trial.set_user_attr("withdrawn" if not rung else "budget", "the budget is spent")
                break
            outcome = measure(self.evaluator, cell, layout, epochs, self.seed)
            for name, value in outcome.details.items():
                trial.set_user_attr(name, value)
            loss = outcome.loss
            if outcome.error is not None:
                trial.set_user_attr("error", outcome.error)
                state = TrialState.FAIL
            spent += cost
            for name, value in (("spent", spent), ("reserve", 0), ("fidelity", epochs)):
                trial.set_user_attr(name, value)
            self.advance(cost)
            if loss is None:
                break
            trial.report(loss, epochs)
            trial.set_user_attr("loss", loss)
            if self.fidelity.prunes(rung, probing) and not self.fidelity.promote(loss, self.rung_losses(epochs)):
                state = TrialState.PRUNED
                break
        trial.set_user_attr("cpu_s", time.process_time() - start)
        self.study.tell(trial, loss if state == TrialState.COMPLETE else None, state=state)
        return state

    def unraced(self, trials: list[FrozenTrial]) -> list[int]:
        """The COMPLETE trials whose race a stopped worker left without a verdict."""
        if len(self.seeds) == 1:
            return []
        attrs = self.study.user_attrs
        return [t.number for t in trials if t.state == TrialState.COMPLETE and is_evaluation(t)
                and f"{PREFIX}{t.number}" not in attrs and _gone(t)]

    def race(self, challenger: int) -> None:
        """Race trial ``challenger`` against the incumbent, a fit at a time, reading the study
        before each step (another worker's race may have changed the incumbent), and record
        the verdict (study attribute ``race:N``); none when the budget ends the race."""
        while True:
            trials = self.study.get_trials(deepcopy=False)
            step = Board(trials, self.study.user_attrs, self.seeds).next(challenger)
            if isinstance(step, Fit):
                if not self.fit(trials[challenger], step.seed):
                    return
                continue
            end = max([challenger, *(t.number for t in trials if t.user_attrs.get("fit_of") == challenger)])
            self.study.set_user_attr(f"{PREFIX}{challenger}", {"won": step.won, "end": end})
            return

    def fit(self, challenger: FrozenTrial, seed: int) -> bool:
        """Train ``challenger``'s cell at full fidelity with training seed ``seed`` as a trial
        of its own; False when the budget cannot hold it."""
        start = time.process_time()
        trial = self.study.ask()
        for name, value in (("fit_of", challenger.number), ("fit_seed", seed), ("worker", _worker())):
            trial.set_user_attr(name, value)
        cost = self.fidelity.full
        if not self.fits(trial, cost):
            trial.set_user_attr("budget", "the budget is spent")
            self.study.tell(trial, state=TrialState.FAIL)
            return False
        cell, layout = to_cell(cell_from_json(challenger.user_attrs["cell"]))
        outcome = measure(self.evaluator, cell, layout, cost, seed)
        spent = (("spent", cost), ("reserve", 0), ("fidelity", cost), ("cpu_s", time.process_time() - start))
        for name, value in spent:
            trial.set_user_attr(name, value)
        self.advance(cost)
        if outcome.error is not None or outcome.loss is None:
            trial.set_user_attr("error", outcome.error or "no loss")
            self.study.tell(trial, state=TrialState.FAIL)
        else:
            self.study.tell(trial, outcome.loss)
        return True

    def rung_losses(self, epochs: int) -> list[float]:
        self.read()
        return self.ledger.rung_losses(epochs)


def best_trials(trials: Iterable[FrozenTrial], keep: int) -> list[FrozenTrial]:
    """The ``keep`` lowest-objective complete (full-fidelity) trials, one per structure hash (its
    first trial), lowest objective first; ties go to the earlier trial."""
    best: dict[str, FrozenTrial] = {}
    for t in sorted((t for t in trials if t.state == TrialState.COMPLETE and "hash" in t.user_attrs),
                    key=lambda t: (t.value, t.number)):
        best.setdefault(t.user_attrs["hash"], t)
    return list(best.values())[:keep]


def _answer(trials: list[FrozenTrial], keep: int, board: Board | None) -> tuple[Found, ...]:
    """The best cells, the incumbent first when the search races."""
    ranked = best_trials(trials, keep)
    if board is not None and board.incumbent is not None:
        incumbent = trials[board.incumbent]
        ranked = [incumbent, *(t for t in best_trials(trials, keep + 1) if t.number != incumbent.number)][:keep]
    return tuple(Found(t.number, t.user_attrs["hash"], t.value, t.user_attrs["cell"],
                       {k: v for k, v in t.user_attrs.items() if k not in BOOKKEEPING},
                       {} if board is None else board.fits.get(t.number, {}))
                 for t in ranked)


def _result(study: Study, storage: str, full: int, skipped: int, keep: int, target_hash: str | None,
            seeds: tuple[int, ...]) -> Discovery:
    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    board = Board(trials, study.user_attrs, seeds) if len(seeds) > 1 else None
    wins = {} if board is None else {v["end"]: trials[n] for n, v in board.verdicts.items() if v["won"]}
    rejected: Counter = Counter()
    spent = cpu = 0.0
    proposed = incumbent = hit = None
    for t in trials:
        rejected.update(t.user_attrs.get("rejected", {}))
        spent += t.user_attrs.get("spent", 0)
        cpu += t.user_attrs.get("cpu_s", 0.0)
        mine = target_hash is not None and t.user_attrs.get("hash") == target_hash
        if proposed is None and mine:
            proposed = TargetHit(t.number, spent / full, cpu)
        if board is not None:
            if t.number in wins:  # the incumbent changes when its race ends
                winner = wins[t.number]
                hit = TargetHit(winner.number, spent / full, cpu) if winner.user_attrs["hash"] == target_hash else None
        elif t.state == TrialState.COMPLETE and "hash" in t.user_attrs and (incumbent is None or t.value < incumbent):
            incumbent = t.value
            hit = TargetHit(t.number, spent / full, cpu) if mine else None
    return Discovery(
        study=study.study_name, storage=storage, best=_answer(trials, keep, board),
        evaluations=spent / full, trials=len(trials),
        trained=sum(1 for t in trials if is_evaluation(t) and t.state != TrialState.RUNNING),
        duplicates=sum(1 for t in trials if "duplicate_of" in t.user_attrs),
        skipped=skipped, rejected=rejected, target=hit, proposed=proposed,
        raced=sum(1 for t in trials if "fit_of" in t.user_attrs and t.user_attrs.get("spent")))


def discover(space: CellSpace, evaluator: Evaluator, strategy: Strategy, budget: float, *,
             fidelity: Fidelity = Fidelity(), storage: str | None = None, study: str = "discover",
             run_dir: str | Path | None = None, seed: int = 0, worker: int = 0,
             target_hash: str | None = None, keep: int = 5, show_progress: bool = True,
             settings: dict[str, Any] | None = None) -> Discovery:
    """Run (or join, or resume) the search ``study`` until ``budget`` full-fidelity evaluations
    are spent, and report it.

    Args:
        space: the candidates; evaluator: trains them (:mod:`cellgraph.discover.evaluator`);
            strategy: proposes them (:mod:`cellgraph.discover.strategies`).
        budget: full-fidelity evaluations for the whole study (all workers, earlier runs included).
        fidelity: rungs of epochs (:class:`~cellgraph.discover.fidelity.Fidelity`).
        storage, study: where the state lives (:mod:`cellgraph.discover.storage`).
        run_dir: a folder for ``discover.json`` (settings, seed, versions), ``result.json``
            and, without ``storage``, the SQLite study ``study.db``.
        seed: the training seed of every candidate; with ``worker`` (give each worker of a
            study its own number) it seeds the proposals.
        target_hash: a planted cell's :func:`~cellgraph.discover.cache.cell_hash`. Exact
            recovery is the search's answer, its best full-fidelity cell, having that hash: the
            result's ``target`` is the trial at which the teacher became the best for good (None
            when the best is another cell), ``proposed`` the first trial that trained it at all.
        keep: how many of the best full-fidelity cells the result lists.
        settings: what else the losses depend on (the evaluator's data and training, JSON),
            recorded with the study's settings: a worker with other ones is refused.
    """
    if not budget > 0:
        raise CellGraphError(f"the budget must be a positive number of evaluations, got {budget}")
    check = getattr(strategy, "check", None)
    if check is not None:
        check(space)
    spec = {"space": space.to_dict(), "fidelity": fidelity.to_dict(), "strategy": strategy.to_dict(), "seed": seed,
            **({} if settings is None else {"evaluator": settings})}
    if run_dir is not None:  # holds the study, or a worker's files where the study is in ``storage``
        Path(run_dir).mkdir(parents=True, exist_ok=True)
    store = open_search_storage(storage, run_dir)
    search_study = open_search(store, study, spec)
    if run_dir is not None:
        write_json(Path(run_dir) / "discover.json", {**spec, "budget": budget, "worker": worker, "study": study,
                                                     "storage": storage_name(store), "target_hash": target_hash,
                                                     "versions": package_versions()})
    search = _Search(search_study, store, space, evaluator, strategy, fidelity, round(budget * fidelity.full), seed,
                     show_progress)
    rng = random.Random(f"{seed}/{worker}/{len(search_study.get_trials(deepcopy=False))}")
    try:
        search.run(rng)
    finally:
        search.bar.close()
    result = _result(search_study, storage_name(store), fidelity.full, search.skipped, keep, target_hash, search.seeds)
    if run_dir is not None:
        write_json(Path(run_dir) / "result.json", result.to_dict())
    return result
