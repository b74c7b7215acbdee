"""A worker's reading of its study, kept up to date in time that does not grow with the study.

Before each proposal, and before each rung it trains, a worker of :func:`cellgraph.discover.search.discover`
needs three sums over the whole study (all workers): the epochs spent and reserved (does the
budget hold the next rung?), the best result per cell hash (is the cell trained, or training
elsewhere?) and every loss recorded at a rung (does the candidate go on?). Read from every
trial each time, they cost a pass over the study per step, so a long search (tens of
thousands of trials, as random search's are) spends a growing share of its time re-reading
trials that cannot change. A finished trial does not change, so :class:`Ledger` folds each one
into running totals once, when it first reads it finished, and reads again only the trials
running at its last reading and those created since.
"""

from __future__ import annotations

from collections import defaultdict

from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from cellgraph.discover.cache import Entry, ResultCache

__all__ = ["Ledger", "is_evaluation"]

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


def is_evaluation(t: FrozenTrial) -> bool:
    """A trial that trains (or trained, or failed training) its cell: not a reused result,
    not withdrawn, not stopped with its worker."""
    if "duplicate_of" in t.user_attrs or "hash" not in t.user_attrs:
        return False
    return t.state != TrialState.FAIL or "error" in t.user_attrs


def _entry(t: FrozenTrial) -> Entry:
    return Entry(t.number, t.state == TrialState.RUNNING, t.user_attrs.get("loss"), t.state == TrialState.COMPLETE)


class Ledger:
    """The study ``study`` as last read by :meth:`read`: finished trials folded in once,
    running ones read each time.

    Attributes:
        trials: every trial of the study, in trial order, at the last reading.
    """

    def __init__(self, study: Study) -> None:
        self.study = study
        self.trials: list[FrozenTrial] = []
        self._read = 0  # trials[:_read] were read at least once
        self._open: list[int] = []  # trials not finished at their last reading
        self._spent = 0  # epochs of the finished trials
        self._cache = ResultCache()  # the finished evaluations
        self._losses: dict[int, list[float]] = defaultdict(list)  # epochs -> finished trials' losses

    def read(self) -> list[FrozenTrial]:
        """Read the study again: fold in the trials finished since the last reading."""
        self.trials = self.study.get_trials(deepcopy=False)
        pending = [*self._open, *range(self._read, len(self.trials))]
        self._read = len(self.trials)
        self._open = [n for n in pending if not self._fold(self.trials[n])]
        return self.trials

    def _fold(self, t: FrozenTrial) -> bool:
        """Fold ``t`` into the totals if it is finished; whether it was."""
        if t.state not in FINISHED:
            return False
        self._spent += t.user_attrs.get("spent", 0)
        if is_evaluation(t):
            self._cache.add(t.user_attrs["hash"], _entry(t))
        for epochs, loss in t.intermediate_values.items():
            self._losses[epochs].append(loss)
        return True

    def _running(self) -> list[FrozenTrial]:
        return [t for t in (self.trials[n] for n in self._open) if t.state == TrialState.RUNNING]

    def spent(self) -> int:
        """Epochs spent by every trial, finished or running."""
        return self._spent + sum(t.user_attrs.get("spent", 0) for t in self._running())

    def epochs(self) -> int:
        """Epochs spent by every trial plus those reserved by running ones."""
        return self.spent() + sum(t.user_attrs.get("reserve", 0) for t in self._running())

    def entry(self, key: str, own: int | None = None) -> Entry | None:
        """The best result of the cell of hash ``key`` over the finished and running evaluations
        but trial ``own``'s, as :class:`~cellgraph.discover.cache.ResultCache` ranks them; None
        when no other trial evaluates it."""
        found = ResultCache([(key, e)] if (e := self._cache.get(key)) is not None else [])
        for t in self._running():
            if t.number != own and t.user_attrs.get("hash") == key and is_evaluation(t):
                found.add(key, _entry(t))
        return found.get(key)

    def rung_losses(self, epochs: int) -> list[float]:
        """Every loss recorded at ``epochs`` epochs, by finished and running trials."""
        return [*self._losses.get(epochs, ()), *(t.intermediate_values[epochs] for t in self._running()
                                                  if epochs in t.intermediate_values)]
