"""What a search step's reading of its study costs as the study grows (docs/discover.md,
*Storage and workers*).

Before each proposal and each rung a search worker needs three sums over its study: the epochs
spent and reserved, the best result per cell hash and the losses recorded at a rung
(:class:`~cellgraph.discover.ledger.Ledger`). This benchmark takes a ``cellgraph discover
--teacher`` run folder and, at each of ``sizes`` (its first N trials), times in CPU
milliseconds the three sums:

* read in full: a new ledger folding all N trials, one pass over the study (what each such
  step cost before a worker kept its ledger: a trial stopped at its first rung made five);
* kept: a ledger that has read the first N - 1 trials reading the study once one more exists.

Each time is the best of ``repeat`` after a warm-up call. The record, ``--json``, holds the
run's name, the sizes, the times and the package versions.

    python -m cellgraph.benchmarks.ledger_bench runs/recovery-small/minimal1-2to3-random-screen-s2 --sizes 1000,10000,30000
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from optuna.trial import FrozenTrial

from cellgraph.benchmarks.proposal_bench import best_ms, sized_main
from cellgraph.benchmarks.subcells import load_search
from cellgraph.discover.fidelity import Fidelity
from cellgraph.discover.ledger import Ledger
from cellgraph.errors import CellGraphError
from cellgraph.experiment.runs import package_versions

__all__ = ["reading_costs", "table", "main"]


class _Prefix:
    """A study whose trials are the first ``size`` of ``trials`` (what a ledger reads)."""

    def __init__(self, trials: list[FrozenTrial], size: int) -> None:
        self.trials, self.size = trials, size

    def get_trials(self, deepcopy: bool = False) -> list[FrozenTrial]:
        return self.trials[:self.size]


def _sums(ledger: Ledger, rung: int, key: str) -> None:
    ledger.read()
    ledger.epochs(), ledger.entry(key), ledger.rung_losses(rung)


def reading_costs(run_dir: Path, sizes: Sequence[int] | None = None, repeat: int = 3) -> dict[str, Any]:
    """The times of the module docstring at each of ``sizes`` trials of the search in ``run_dir``
    (all its trials by default)."""
    spec, _, trials = load_search(run_dir)
    rung = Fidelity.from_dict(spec["fidelity"]).epochs[0]
    key = next((t.user_attrs["hash"] for t in trials if "hash" in t.user_attrs), "")
    rows = []
    for size in sizes or [len(trials)]:
        if not 1 < size <= len(trials):
            raise CellGraphError(f"size {size}: {run_dir.name} has {len(trials)} trials (give 2 or more)")
        kept: list[Ledger] = []

        def before() -> None:  # a ledger that has read all but the last trial
            kept[:] = [Ledger(_Prefix(trials, size - 1))]  # type: ignore[arg-type]
            kept[0].read()
            kept[0].study = _Prefix(trials, size)  # type: ignore[assignment]

        rows.append({"trials": size,
                     "full_ms": best_ms(lambda: _sums(Ledger(_Prefix(trials, size)), rung, key), repeat),  # type: ignore[arg-type]
                     "kept_ms": best_ms(lambda: _sums(kept[0], rung, key), repeat, before)})
    return {"run": run_dir.name, "repeat": repeat, "rows": rows, "versions": package_versions()}


def table(result: dict[str, Any]) -> str:
    """The rows as a Markdown table."""
    lines = ["| trials | read in full (ms) | kept (ms) |", "|---|---|---|"]
    lines += [f"| {r['trials']:,} | {r['full_ms']:.1f} | {r['kept_ms']:.2f} |" for r in result["rows"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    sized_main("python -m cellgraph.benchmarks.ledger_bench", __doc__, "a cellgraph discover --teacher run folder",
               reading_costs, table, argv)


if __name__ == "__main__":
    main()
