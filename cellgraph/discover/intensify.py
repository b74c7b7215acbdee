"""Intensification: the search's answer raced over training seeds (docs/discover.md,
*Intensification*).

One training seed's objective is one draw: a cell can beat a better one by the luck of its
initialisation. SMAC's *Intensify* (F. Hutter, H. H. Hoos and K. Leyton-Brown, "Sequential
Model-Based Optimization for General Algorithm Configuration", LION 2011, Procedure 2; after
the racing of O. Maron and A. Moore, NIPS 1994) keeps an *incumbent* fitted on several seeds
and lets a challenger take its place only when it is better over them. Here, with ``S`` =
:attr:`Fidelity.seeds <cellgraph.discover.fidelity.Fidelity.seeds>` > 1 and the search's
training seed ``s``, the race seeds are ``s, s + 1, ..., s + S - 1``:

- every candidate that completes full fidelity (its objective at ``s``) challenges the
  incumbent; it is fitted at the race seeds in order, one at a time, and loses as soon as its
  mean objective over the seeds it has is not below the incumbent's mean over all ``S``;
- a challenger still below with all ``S`` fits, or any challenger when there is no incumbent
  yet, becomes the incumbent.

SMAC compares a challenger's mean with the incumbent's over the same seeds; comparing with the
incumbent's whole mean instead keeps a cell trained after a lucky one from losing to the luck
of the incumbent's first seed (the test of this module: ``tests/discover/test_intensify.py``).
The last comparison, both with all ``S`` fits, is the same.

A race's fits are trials of their own (user attributes ``fit_of``, the challenger's trial
number, and ``fit_seed``; their epochs count in the budget). Its verdict is a study user
attribute, ``race:N`` for challenger ``N`` (a finished trial cannot change):
``{"won": bool, "end": M}``, ``M`` the number of the race's last trial, so the incumbent at
any point is the last winner. :class:`Board` reads that record;
:mod:`cellgraph.discover.search` runs the races.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import mean
from typing import Any, Iterable, Mapping

from optuna.trial import FrozenTrial, TrialState

__all__ = ["PREFIX", "Board", "Fit", "Verdict", "race_seeds"]

#: The study user attributes of the verdicts: ``race:N``.
PREFIX = "race:"


def race_seeds(seed: int, seeds: int) -> tuple[int, ...]:
    """The training seeds a race runs, in order: ``seed``, the search's, first."""
    return tuple(range(seed, seed + seeds))


@dataclass(frozen=True)
class Fit:
    """The next step of a race: fit trial ``challenger``'s cell with training seed ``seed``."""

    challenger: int
    seed: int


@dataclass(frozen=True)
class Verdict:
    """A race's end: ``won`` or lost."""

    challenger: int
    won: bool


class Board:
    """The races recorded in a study's ``trials`` and user attributes ``attrs`` (module
    docstring) with race seeds ``seeds``.

    ``fits[n]`` maps a race seed to trial ``n``'s objective with it (``inf`` where that fit
    failed); ``verdicts[n]`` is trial ``n``'s verdict; ``incumbent`` is the trial number of the
    last winner (None before the first)."""

    def __init__(self, trials: Iterable[FrozenTrial], attrs: Mapping[str, Any], seeds: tuple[int, ...]) -> None:
        self.seeds = seeds
        self.fits: dict[int, dict[int, float]] = {}
        self.verdicts = {int(k[len(PREFIX):]): v for k, v in attrs.items() if k.startswith(PREFIX)}
        for t in trials:
            if "fit_of" in t.user_attrs:
                if t.state == TrialState.COMPLETE or "error" in t.user_attrs:
                    value = t.value if t.state == TrialState.COMPLETE else float("inf")
                    self.fits.setdefault(t.user_attrs["fit_of"], {})[t.user_attrs["fit_seed"]] = value
            elif t.state == TrialState.COMPLETE and "hash" in t.user_attrs and "duplicate_of" not in t.user_attrs:
                self.fits.setdefault(t.number, {})[seeds[0]] = t.value
        wins = [(v["end"], n) for n, v in self.verdicts.items() if v["won"]]
        self.incumbent = max(wins)[1] if wins else None

    def next(self, challenger: int) -> Fit | Verdict:
        """What trial ``challenger``'s race does next (module docstring)."""
        mine = self.fits.get(challenger, {})
        rival = self.incumbent
        if rival is not None and rival != challenger and self.mean(challenger) >= self.mean(rival):
            return Verdict(challenger, False)
        missing = [s for s in self.seeds if s not in mine]
        return Fit(challenger, missing[0]) if missing else Verdict(challenger, True)

    def mean(self, number: int) -> float:
        """Trial ``number``'s mean objective over the race seeds it has."""
        return mean(self.fits[number].values())
