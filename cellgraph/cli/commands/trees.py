"""Most frequent discovered structures (canonical forms) with their counts, from the run's
structure log (last epoch by default), and which leaves their output h_t reads (column
``reads``: leaf names such as ``h,x``; ``-`` none; ``?`` not known for a log without cell dumps)
with the shares of cells reading x_t, h_{t-1} and both, and of identity chains."""

from __future__ import annotations

import argparse

from cellgraph.cli.commands import add_structure_log_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trees", description=__doc__,
                       help="list the most frequent discovered cell structures of a run")
    add_structure_log_args(p, 10, "forms to list")
    p.add_argument("--save", metavar="DIR", default=None,
                   help="also write each listed form as DIR/form_K.json (a cell document, docs/FORMAT.md)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cellgraph.experiment.runlog import RunLog, reads_summary
    from cellgraph.files import write_json

    chosen = RunLog.load(args.run).structure_log(args.epoch)
    total = max(1, chosen["n_cells"])
    print(f"epoch {chosen['epoch']}: {chosen['n_cells']} cells, "
          f"{len(chosen['forms'])} distinct forms, target share {chosen.get('target_share', 0):.3f}")
    print(reads_summary(chosen))
    print(f"{'rank':>4} {'count':>6} {'share':>6} {'depth':>5} {'nodes':>5} {'reads':>7}  form")
    listed = chosen["forms"][: args.top]
    for k, form in enumerate(listed, 1):
        mark = " (target)" if form.get("is_target") else ""
        print(f"{k:>4} {form['count']:>6} {form['count'] / total:>6.3f} {form['depth']:>5} "
              f"{form['n_internal']:>5} {_read_leaves(form):>7}  {form['canonical']}{mark}")
        if args.save:
            Path(args.save).mkdir(parents=True, exist_ok=True)
            write_json(Path(args.save) / f"form_{k}.json", form["cell"])
    if args.save and listed:
        print(_saved_note(args.run, args.save, len(listed), listed[0].get("example")))
    return 0


def _read_leaves(form: dict) -> str:
    """The leaves ``h_t`` reads, by name in alphabetical order (``h,x``); ``-`` for none, ``?``
    where not known."""
    if "reads" not in form:
        return "?"
    return ",".join(sorted(name for name, read in form["reads"].items() if read)) or "-"


def _saved_note(run: str, folder: str, n: int, example: dict | None) -> str:
    """What the saved files hold, and the command that writes a cell with vectors."""
    note = f"saved {n} forms to {folder}/form_K.json: structures without vectors"
    if example:
        note += (f"; with vectors (for cellgraph distance), form 1's example cell: cellgraph export "
                 f"{run} --split val --sample {example['sample']} --t {example['t']} --format json")
    return note
