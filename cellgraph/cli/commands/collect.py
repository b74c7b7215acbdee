"""Copy each run folder's record into DIR/[PREFIX-]NAME: config.json, env.json, metrics.jsonl,
final.json, eval_*.json, structures/ and a warm start's teacher/ (its record), never checkpoints, so that the runs behind a table can
be committed and 'cellgraph summarize' reprints it. Runs without final.json (stopped or
killed) are skipped unless --unfinished."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("collect", description=__doc__,
                       help="copy the records of run folders (config, env, metrics, final and eval JSON, structures)",
                       epilog="example: cellgraph collect runs/w5k-s0 runs/w5k-s1 --into results/runs --prefix w5k03")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--into", metavar="DIR", required=True, help="the folder the records go to")
    p.add_argument("--prefix", default="", help="prefix of each record's name: PREFIX-NAME")
    p.add_argument("--unfinished", action="store_true",
                   help="also copy runs without final.json (their metrics.jsonl is then the record)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from cellgraph.errors import CellGraphError
    from cellgraph.experiment.runs import copy_record

    for folder in map(Path, args.runs):
        if not (folder / "config.json").is_file():
            raise CellGraphError(f"{folder} is not a run folder (no config.json)")
        if not (folder / "final.json").is_file() and not args.unfinished:
            print(f"cellgraph collect: skipping {folder}: no final.json (unfinished; --unfinished "
                  "takes it)", file=sys.stderr)
            continue
        name = f"{args.prefix}-{folder.name}" if args.prefix else folder.name
        print(copy_record(folder, Path(args.into) / name))
    return 0
