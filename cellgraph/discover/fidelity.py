"""Fidelities: how many epochs a candidate trains before the search judges it
(docs/discover.md, *Fidelities*).

A :class:`Fidelity` is a ladder of rungs, epochs ``e_0 < e_1 < ... < e_K``; ``e_K`` is full
fidelity. Asynchronous successive halving (L. Li et al., "A System for Massively Parallel
Hyperparameter Tuning", MLSys 2020; Optuna's ``SuccessiveHalvingPruner`` decides in the same
way when a trial reports): a candidate trains ``e_0`` epochs; after rung ``k`` it goes on to
rung ``k + 1`` only when its loss is among the best ``max(1, floor(n / eta))`` of the ``n``
losses recorded at rung ``k`` so far (its own included), else it stops there (the trial is
PRUNED). :meth:`Fidelity.successive_halving` makes the ladder ``m, m eta, m eta^2, ...``.
The first ``probes`` rungs prune nothing: every candidate trains through them, so each has its
loss at every one of the :attr:`Fidelity.early` rungs (the probes and the first rung that
prunes), which the best-first expansion ranks its parents by
(:meth:`cellgraph.discover.strategies.EnumerationSearch.expansion_order`).

With ``seeds`` > 1 the search's answer is raced over that many training seeds
(:mod:`cellgraph.discover.intensify`): full fidelity then means the incumbent's mean over them.

Budgets are counted in full-fidelity evaluations: epochs spent divided by ``e_K``. A rung
costs ``e_k`` epochs, or ``e_k - e_{k-1}`` when the evaluator resumes its training
(:class:`cellgraph.discover.evaluator.Evaluator`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from cellgraph.errors import CellGraphError

__all__ = ["Fidelity"]


@dataclass(frozen=True)
class Fidelity:
    """Rungs ``epochs`` (increasing; the last is full fidelity), the reduction factor ``eta``,
    how many of the first rungs promote every candidate (``probes``) and the training seeds a
    challenger of the answer races over (``seeds``; 1: no race, the lowest objective wins)."""

    epochs: tuple[int, ...] = (1,)
    eta: int = 3
    probes: int = 0
    seeds: int = 1

    def __post_init__(self) -> None:
        if not self.epochs or any(e < 1 for e in self.epochs) or list(self.epochs) != sorted(set(self.epochs)):
            raise CellGraphError(f"fidelity rungs must be increasing positive epochs, got {self.epochs}")
        if self.eta < 2:
            raise CellGraphError(f"the reduction factor eta must be >= 2, got {self.eta}")
        if not 0 <= self.probes < len(self.epochs):
            raise CellGraphError(f"probes must be 0 to {len(self.epochs) - 1} (rungs before the last), got "
                                 f"{self.probes}")
        if self.seeds < 1:
            raise CellGraphError(f"the race seeds must be 1 or more, got {self.seeds}")

    @staticmethod
    def successive_halving(min_epochs: int = 1, eta: int = 3, rungs: int = 3) -> "Fidelity":
        """Rungs ``min_epochs * eta**k`` for ``k < rungs`` (1, 3, 9 by default)."""
        return Fidelity(tuple(min_epochs * eta**k for k in range(rungs)), eta)

    @property
    def full(self) -> int:
        """Epochs of full fidelity."""
        return self.epochs[-1]

    @property
    def early(self) -> tuple[int, ...]:
        """The rungs every candidate that does not fail trains: the probes and the first rung
        that prunes."""
        return self.epochs[:self.probes + 1]

    def cost(self, rung: int, resumes: bool) -> int:
        """Epochs that rung ``rung`` trains."""
        return self.epochs[rung] - (self.epochs[rung - 1] if resumes and rung else 0)

    def promote(self, loss: float, losses: Sequence[float]) -> bool:
        """Whether a candidate with ``loss`` at a rung goes on, ``losses`` being every loss
        recorded at that rung, its own included."""
        better = sum(1 for other in losses if other < loss)
        return better < max(1, len(losses) // self.eta)

    def prunes(self, rung: int, probing: bool = True) -> bool:
        """Whether rung ``rung`` may stop a candidate (as :meth:`promote` says): not the last,
        and not a probe unless the candidate skips the probes (``probing`` False: a cell whose
        early losses no ranking reads)."""
        return (self.probes if probing else 0) <= rung < len(self.epochs) - 1

    @staticmethod
    def from_dict(record: dict) -> "Fidelity":
        """The fidelity :meth:`to_dict` wrote ``record`` from."""
        return Fidelity(tuple(record["epochs"]), record["eta"], record.get("probes", 0), record.get("seeds", 1))

    def to_dict(self) -> dict:
        return {"epochs": list(self.epochs), "eta": self.eta, **({"probes": self.probes} if self.probes else {}),
                **({"seeds": self.seeds} if self.seeds > 1 else {})}
