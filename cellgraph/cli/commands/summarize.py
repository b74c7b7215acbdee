"""``cellgraph summarize RUN_DIR ...``: mean and standard deviation over seeds, per
(task, model), as a Markdown table (the form of RESULTS.md)."""

from __future__ import annotations

import argparse

from cellgraph.files import writable_file


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "summarize",
        help="aggregate finished runs into a mean ± std table per task and model",
        description="Group finished runs (folders with final.json) by task and model and print "
        "validation and test metrics as mean ± std over seeds (the value alone for one seed), "
        "with training time, as Markdown. Unfinished runs, runs whose final.json cannot be read and "
        "folders that hold no run are skipped with a note on stderr (so 'cellgraph summarize runs/*' "
        "works mid-experiment).",
    )
    p.add_argument("runs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--json", metavar="OUT", type=writable_file, default=None, help="also write the table as JSON")
    p.add_argument("--by", choices=("model", "name"), default="model",
                   help="group by task and model (default), or by run folder name without its "
                   "-s<seed> suffix (variants of one model as rows of their own)")
    p.add_argument("--recovery", action="store_true",
                   help="add the planted structure recovery: the share of test cells with the teacher's shape")
    p.add_argument("--recoveries", action="store_true",
                   help="add the planted runs' exact recovery (the share of runs whose cell has the teacher's "
                   "structure) and accuracy recovery (the share within 0.01 test accuracy of the run, among "
                   "those given, that trains the teacher's structure with model=cell on the same teacher, "
                   "sizes, epochs and seed; 'no reference run' without one)")
    p.add_argument("--reads", action="store_true",
                   help="add the shares of the last structure log's cells whose h_t reads x_t, "
                   "h_{t-1} and both, and of identity chains (runs that log structures)")
    p.add_argument("--terms", action="store_true",
                   help="add the last epoch's weighted loss terms (task / TD / margin / L2)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cellgraph.experiment.summary import markdown, summarize
    from cellgraph.files import write_json

    import sys

    def note(line: str) -> None:
        print(f"cellgraph summarize: {line}", file=sys.stderr)

    rows = summarize(args.runs, by=args.by, skip=note, reads=args.reads)
    print(markdown(rows, terms=args.terms, recovery=args.recovery, reads=args.reads, recoveries=args.recoveries))
    if args.json:
        write_json(args.json, rows)
    return 0
