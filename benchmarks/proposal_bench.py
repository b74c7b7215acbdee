"""What a proposal of the best-first expansion costs as a search's study grows (docs/discover.md,
*Storage and workers*).

Before each candidate a search worker reads its study into records
(:class:`~cellgraph.discover.search.History`) and asks its strategy for a proposal. Both grow
with the trials, and a trial stopped after its first rungs trains for a fraction of a second,
so at thousands of trials they are a real share of a search's time. This benchmark takes a
finished or stopped ``cellgraph discover --strategy enumerate --expand`` run folder and, at each
of ``sizes`` (its first N trials), times in milliseconds:

* making the records of the trials again from their cells, parsed once (what every proposal
  did before the worker kept the records), and taking them from a history that has read them
  (a proposal's call when no trial finished since the last);
* a proposal (:meth:`~cellgraph.discover.strategies.EnumerationSearch.propose`) with each
  parent's screened, shuffled insertions made anew (what every proposal did before they were
  kept) and kept.

Each time is the best of ``repeat`` after a warm-up call. The record, ``--json``, holds the run's
name, the sizes, the times and the package versions.

    python -m cellgraph.benchmarks.proposal_bench runs/recovery-small/minimal25-4to7-enumerate-expand2-all-probe-screen-s0 --sizes 1000,3000,7000
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

from cellgraph.benchmarks.subcells import expansion_strategy, load_search, search_space
from cellgraph.discover import strategies
from cellgraph.discover.fidelity import Fidelity
from cellgraph.discover.search import History
from cellgraph.discover.strategies import Record
from cellgraph.errors import CellGraphError
from cellgraph.experiment.runs import package_versions
from cellgraph.files import writable_file, write_json

__all__ = ["best_ms", "proposal_costs", "table", "sized_main", "main"]


def best_ms(call: Callable[[], Any], repeat: int, before: Callable[[], Any] = lambda: None) -> float:
    """The fastest of ``repeat`` calls of ``call`` after a warm-up one, in CPU milliseconds,
    ``before`` run ahead of each and not timed."""
    before()
    call()
    times = []
    for _ in range(repeat):
        before()
        start = time.process_time()
        call()
        times.append(time.process_time() - start)
    return 1e3 * min(times)


def _forget_insertions() -> None:
    strategies._insertions.cache_clear()
    strategies._insertion_keys.cache_clear()


def proposal_costs(run_dir: Path, sizes: Sequence[int] | None = None, repeat: int = 3) -> dict[str, Any]:
    """The times of the module docstring at each of ``sizes`` trials of the search in ``run_dir``
    (all its trials by default)."""
    spec, _, trials = load_search(run_dir)
    strategy, space = expansion_strategy(spec), search_space(spec)
    if strategy is None:
        raise CellGraphError(f"{run_dir} ran no best-first expansion (--strategy enumerate --expand)")
    fidelity = Fidelity.from_dict(spec["fidelity"])
    rows = []
    for size in sizes or [len(trials)]:
        if not 0 < size <= len(trials):
            raise CellGraphError(f"size {size}: {run_dir.name} has {len(trials)} trials")
        part, kept = trials[:size], History(fidelity)  # a history reads a study that only grows
        history = kept(part)
        cells = {r.number: r.root for r in history}
        by_number = [t for t in part if t.number in cells]

        def rebuilt() -> None:
            [Record.from_trial(t, cells[t.number], fidelity.early, fidelity.epochs) for t in by_number]

        def propose() -> None:
            strategy.propose(history, space, random.Random(0), Counter())

        rows.append({"trials": size, "records": len(history),
                     "records_rebuilt_ms": best_ms(rebuilt, repeat),
                     "records_kept_ms": best_ms(lambda: kept(part), repeat),
                     "propose_anew_ms": best_ms(propose, repeat, _forget_insertions),
                     "propose_kept_ms": best_ms(propose, repeat)})
    return {"run": run_dir.name, "repeat": repeat, "rows": rows, "versions": package_versions()}


def table(result: dict[str, Any]) -> str:
    """The rows as a Markdown table."""
    lines = ["| trials | records, made again (ms) | records, kept (ms) | proposal, insertions anew (ms) | proposal, kept (ms) |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['trials']:,} | {r['records_rebuilt_ms']:.1f} | {r['records_kept_ms']:.3f} | {r['propose_anew_ms']:.1f} "
              f"| {r['propose_kept_ms']:.1f} |" for r in result["rows"]]
    return "\n".join(lines)


def sized_main(prog: str, doc: str, run_help: str, costs: Callable[[Path, list[int] | None, int], dict[str, Any]],
               table: Callable[[dict[str, Any]], str], argv: list[str] | None) -> None:
    """The command line of a benchmark timed on a search's study at several sizes: this one's
    and :mod:`cellgraph.benchmarks.ledger_bench`'s (``costs(run_dir, sizes, repeat)``)."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help=run_help)
    parser.add_argument("--sizes", default=None, help="trial counts, comma-separated (default: all the run's trials)")
    parser.add_argument("--repeat", type=int, default=3, help="timed calls of each, the best kept (default 3)")
    parser.add_argument("--json", type=writable_file, default=None, help="write the record here")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    except ValueError:
        parser.error(f"--sizes {args.sizes}: give trial counts such as 1000,3000")
    try:
        result = costs(args.run_dir, sizes, max(1, args.repeat))
    except CellGraphError as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")
    print(table(result))
    if args.json:
        write_json(Path(args.json), result)


def main(argv: list[str] | None = None) -> None:
    sized_main("python -m cellgraph.benchmarks.proposal_bench", __doc__,
               "a cellgraph discover --strategy enumerate --expand run folder", proposal_costs, table, argv)


if __name__ == "__main__":
    main()
