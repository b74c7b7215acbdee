"""``cellgraph reproduce``: the whole Table 1 protocol (:mod:`cellgraph.experiment.reproduce`) in one
resumable command: searches with equal budgets, the best configuration and the paper's preset
with every seed, then one summary table and plots per experiment."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reproduce",
        help="run the Table 1 protocol: equal-budget searches, best and preset rows over seeds, tables",
        description="Run the protocol of docs/reproduce.md for each experiment: a random search of --trials "
        "trials per model on the experiment's proxy (the same for both models), the best trial's settings "
        "and the paper's preset trained on the full data for every seed, then a table of val / test (both "
        "search modes for RRNN models) and plots. Every run, search, log and the CPU time of each command "
        "go under --dir; the records (no checkpoints) to --records. Re-running the same command skips what "
        "is done and resumes what was started; Ctrl-C stops every running command at a safe point.",
        epilog="examples: cellgraph reproduce --dry-run; cellgraph reproduce --only planted --jobs 2; "
        "cellgraph reproduce --only wiki --trials 8 --dir /data/t1 --set device=cuda",
    )
    from cellgraph.data.datadir import DATA_DIR_HELP
    from cellgraph.experiment.reproduce import PROTOCOL, SEEDS, TRIALS

    names = [e.name for e in PROTOCOL]
    p.add_argument("--only", nargs="+", choices=names, default=[], metavar="EXPERIMENT",
                   help=f"run these experiments only (default: all of {', '.join(names)})")
    p.add_argument("--dir", default="reproduce", help="folder of every run, search and log (default reproduce)")
    p.add_argument("--records", default=None, metavar="DIR",
                   help="where each finished run's records, the tables and plots go (default DIR/records)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="runs at once (default 1); each gets cores / N torch threads unless --set num_threads")
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), metavar="SEED",
                   help=f"seeds of every row (default {' '.join(map(str, SEEDS))})")
    p.add_argument("--trials", type=int, default=TRIALS, metavar="N",
                   help=f"trials of each model's search (default {TRIALS}, the same for every model)")
    p.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                   help="override a setting in every run and trial (repeatable), e.g. --set device=cuda")
    p.add_argument("--data", metavar="DIR", default=None, help=DATA_DIR_HELP)
    p.add_argument("--dry-run", action="store_true",
                   help="print every job, its state (a started run: its epochs done) and command; run nothing")
    p.add_argument("--table", action="store_true",
                   help="print Table 1 (the paper's numbers beside ours) and the searches from the records "
                   "(--records, e.g. results/table1); run nothing, write nothing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import os

    from cellgraph.errors import CellGraphError
    from cellgraph.experiment.config import parse_set
    from cellgraph.experiment.jobs import Runner, status
    from cellgraph.experiment.reproduce import experiments, plan

    if args.jobs < 1 or args.trials < 1:
        raise CellGraphError(f"--jobs and --trials must be >= 1, got {args.jobs} and {args.trials}")
    sets = parse_set(args.set)
    sets.setdefault("num_threads", max(1, (os.cpu_count() or 1) // args.jobs))
    exps = experiments(args.only)
    root = Path(args.dir).resolve()
    records = Path(args.records).resolve() if args.records else root / "records"
    if args.table:
        _table1(records, write=False)
        return 0
    jobs = plan(root, exps, args.seeds, args.trials, sets, args.data)
    if args.dry_run:
        import shlex

        for job in jobs:
            print(f"[{status(job)}] {job.name}" + (f" (after {', '.join(job.needs)})" if job.needs else ""))
            for argv in job.commands():
                print(f"    cellgraph {shlex.join(argv)}")
        return 0
    print(f"{sum(not job.done() for job in jobs)} of {len(jobs)} jobs to run, {args.jobs} at once; "
          f"logs in {root / 'logs'}", flush=True)
    def settled(experiment: str) -> None:  # its table and plots now, while the plan goes on
        records.mkdir(parents=True, exist_ok=True)
        _report(experiment, records)
        _table1(records, write=True, show=False)

    try:
        failed = Runner(root, records, args.jobs, lambda line: print(line, flush=True), settled=settled).run(jobs)
    except KeyboardInterrupt:
        print("interrupted: run the same command to resume", file=sys.stderr)
        return 130
    _table1(records, write=False)  # settled() has written it after each experiment
    if failed:
        print(f"{len(failed)} jobs failed or were skipped: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _table1(records: Path, write: bool, show: bool = True) -> None:
    """Table 1, the searches and the reading, printed (``show``) and written to
    ``records/table1.md`` (``write``)."""
    from cellgraph.errors import CellGraphError
    from cellgraph.experiment.table1 import reading_table, results_table, searches_table

    if not records.is_dir():
        raise CellGraphError(f"no records folder {records} (give --records, e.g. results/table1)")
    text = (f"{results_table(records)}\n\nSearches:\n\n{searches_table(records)}\n\n"
            f"Reading (each model's row with the better validation metric):\n\n{reading_table(records)}\n")
    if write:
        (records / "table1.md").write_text(text, encoding="utf-8")
    if show:
        print(text, end="")


def _report(name: str, records: Path) -> None:
    """The experiment's table (``records/NAME.md``, and printed) and plots (``records/plots/NAME``)."""
    from cellgraph.experiment.summary import markdown, summarize

    runs = sorted(p for p in records.glob(f"{name}-*") if (p / "final.json").is_file())
    if not runs:
        return
    rows = summarize([str(p) for p in runs], by="name", skip=lambda line: None)
    table = markdown(rows, recovery=any(row["recovery"] for row in rows))
    (records / f"{name}.md").write_text(table + "\n", encoding="utf-8")
    print(f"\n{name}:\n{table}")
    from cellgraph.errors import CellGraphError
    from cellgraph.experiment.plots import plot_runs
    from cellgraph.experiment.runlog import RunLog

    try:  # the runs are done and the table written: a missing matplotlib costs the plots only
        paths = plot_runs([RunLog.load(p) for p in runs], records / "plots" / name)
    except CellGraphError as err:
        print(f"no plots: {err}", file=sys.stderr)
        return
    for path in paths:
        print(path)
