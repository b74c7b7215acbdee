"""Most frequent discovered structures (canonical forms) with their counts, from the run's
structure log (last epoch by default)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trees", description=__doc__,
                       help="list the most frequent discovered cell structures of a run")
    p.add_argument("run", metavar="RUN_DIR")
    p.add_argument("--top", type=int, default=10, help="how many forms to list (default 10)")
    p.add_argument("--epoch", type=int, default=None, help="epoch to read (default: the last logged)")
    p.add_argument("--save", metavar="DIR", default=None,
                   help="also write each listed form as DIR/form_K.json (a cell document, docs/FORMAT.md)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cellgraph.errors import CellGraphError
    from cellgraph.experiment.runlog import RunLog
    from cellgraph.files import write_json

    log = RunLog.load(args.run)
    logs = log.structures()
    if not logs:
        raise CellGraphError(f"{args.run} has no structure log (structures/epoch_*.json)")
    chosen = logs[-1] if args.epoch is None else next((s for s in logs if s["epoch"] == args.epoch), None)
    if chosen is None:
        raise CellGraphError(f"{args.run}: no structure log for epoch {args.epoch}")
    total = max(1, chosen["n_cells"])
    print(f"epoch {chosen['epoch']}: {chosen['n_cells']} cells, "
          f"{len(chosen['forms'])} distinct forms, target share {chosen.get('target_share', 0):.3f}")
    print(f"{'rank':>4} {'count':>6} {'share':>6} {'depth':>5} {'nodes':>5}  form")
    listed = chosen["forms"][: args.top]
    for k, form in enumerate(listed, 1):
        mark = " (target)" if form.get("is_target") else ""
        print(f"{k:>4} {form['count']:>6} {form['count'] / total:>6.3f} {form['depth']:>5} "
              f"{form['n_internal']:>5}  {form['canonical']}{mark}")
        if args.save:
            Path(args.save).mkdir(parents=True, exist_ok=True)
            write_json(Path(args.save) / f"form_{k}.json", form["cell"])
    if args.save and listed:
        print(_saved_note(args.run, args.save, len(listed), listed[0].get("example")))
    return 0


def _saved_note(run: str, folder: str, n: int, example: dict | None) -> str:
    """What the saved files hold, and the command that writes a cell with vectors."""
    note = f"saved {n} forms to {folder}/form_K.json: structures without vectors"
    if example:
        note += (f"; with vectors (for cellgraph distance), form 1's example cell: cellgraph export "
                 f"{run} --split val --sample {example['sample']} --t {example['t']} --format json")
    return note
