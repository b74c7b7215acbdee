"""What a search trial's bookkeeping costs in a SQLite study, by journal mode (docs/discover.md,
*Storage and workers*).

Every write to an Optuna ``RDBStorage`` is a transaction of its own, and a search trial makes
a few dozen of them (:mod:`cellgraph.discover.search`: the trial, its cell and hash, then at
each rung the epochs reserved, the loss reported and what the evaluator measured). In SQLite's
default rollback-journal mode with ``synchronous=FULL`` each commit waits for the disk; in
write-ahead-log mode with ``synchronous=NORMAL`` (what :func:`cellgraph.experiment.hpo.open_storage`
sets) a commit appends to the log and returns. This benchmark writes ``trials`` trials shaped
as the search's (the user attributes and intermediate values of a trial stopped after
``rungs`` rungs, the cell a ~1 KB JSON document) into a fresh study in each mode and reports
wall and CPU time per trial and per commit. Since a search's trial that is stopped at its
first rungs trains for a fraction of a second, the difference is the search's throughput.

    python -m cellgraph.benchmarks.storage_bench --trials 100 --json results/bench-storage.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import optuna
import sqlalchemy
from optuna.storages import RDBStorage
from optuna.trial import TrialState

from cellgraph.experiment.hpo import open_storage
from cellgraph.experiment.runs import package_versions
from cellgraph.files import writable_file, write_json

__all__ = ["MODES", "trial_writes", "measure_mode", "storage_bench", "table", "main"]

#: name -> how the benchmark opens a SQLite URL: Optuna's own storage (the rollback journal,
#: ``synchronous=FULL``) or cellgraph's (WAL, ``synchronous=NORMAL``).
MODES: dict[str, Callable[[str], RDBStorage]] = {
    "rollback journal (optuna's default)": lambda url: RDBStorage(url),
    "WAL, synchronous=NORMAL (cellgraph)": open_storage,
}
CELL = json.dumps({"format": "cellgraph.dag", "nodes": [{"op": "mul", "act": "tanh", "args": [i, i + 1]}
                                                         for i in range(24)]})


def trial_writes(study: optuna.Study, rungs: int) -> None:
    """One trial written as a search writes one stopped after ``rungs`` rungs."""
    trial = study.ask()
    for name, value in (("hash", "0" * 64), ("cell", CELL), ("origin", "insert"), ("parent", 1),
                        ("worker", "host:1"), ("rejected", {})):
        trial.set_user_attr(name, value)
    for rung in range(rungs):
        trial.set_user_attr("reserve", 5)
        trial.report(1.0 / (rung + 1), rung + 1)
        for name in ("fidelity", "spent", "loss", "val_mse", "test_mse", "complexity", "seconds"):
            trial.set_user_attr(name, rung + 1)
    trial.set_user_attr("cpu_s", 0.1)
    study.tell(trial, state=TrialState.PRUNED)


def measure_mode(open_url: Callable[[str], RDBStorage], folder: Path, trials: int, rungs: int) -> dict[str, Any]:
    """Wall and CPU seconds per trial and per commit of ``trials`` trials in a fresh study opened
    with ``open_url``, and the journal mode SQLite reports."""
    storage = open_url(f"sqlite:///{folder / 'study.db'}")
    commits = [0]
    sqlalchemy.event.listen(storage.engine, "commit", lambda _connection: commits.__setitem__(0, commits[0] + 1))
    study = optuna.create_study(storage=storage, study_name="bench")
    trial_writes(study, rungs)  # warm-up: the first trial also creates the study's rows
    commits[0] = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(trials):
        trial_writes(study, rungs)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    with storage.engine.connect() as connection:
        journal = connection.exec_driver_sql("PRAGMA journal_mode").scalar()
    storage.engine.dispose()
    return {"journal_mode": journal, "trials": trials, "commits_per_trial": commits[0] / trials,
            "wall_ms_per_trial": 1e3 * wall / trials, "cpu_ms_per_trial": 1e3 * cpu / trials,
            "wall_ms_per_commit": 1e3 * wall / commits[0]}


def storage_bench(trials: int = 100, rungs: int = 2, folder: str | None = None) -> dict[str, Any]:
    """Every mode of :data:`MODES` measured on ``trials`` trials, in a temporary folder under
    ``folder`` (the disk the searches write to; the system's temporary folder by default)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rows = {}
    for name, open_url in MODES.items():
        with tempfile.TemporaryDirectory(prefix="cellgraph-storage-", dir=folder) as tmp:
            rows[name] = measure_mode(open_url, Path(tmp), trials, rungs)
    return {"config": {"trials": trials, "rungs": rungs}, "rows": rows, "versions": package_versions()}


def table(result: dict[str, Any]) -> str:
    """The benchmark's rows as a Markdown table."""
    lines = ["| mode | commits / trial | wall ms / trial | CPU ms / trial | wall ms / commit |", "|---|---|---|---|---|"]
    lines += [f"| {name} | {r['commits_per_trial']:.0f} | {r['wall_ms_per_trial']:.1f} | {r['cpu_ms_per_trial']:.1f} "
              f"| {r['wall_ms_per_commit']:.2f} |" for name, r in result["rows"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m cellgraph.benchmarks.storage_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100, help="trials written in each mode (default 100)")
    parser.add_argument("--rungs", type=int, default=2, help="rungs each trial reaches (default 2)")
    parser.add_argument("--dir", default=None, help="where the studies are written (default: the temporary folder)")
    parser.add_argument("--json", type=writable_file, default=None, help="write the result here")
    args = parser.parse_args(argv)
    if args.trials < 1 or args.rungs < 1:
        parser.error("--trials and --rungs must be at least 1")
    result = storage_bench(args.trials, args.rungs, args.dir)
    print(table(result))
    if args.json:
        write_json(Path(args.json), result)


if __name__ == "__main__":
    main()
