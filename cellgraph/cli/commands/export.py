"""``cellgraph export RUN_DIR --sample I --t T --format FMT``: a discovered cell as a file."""

from __future__ import annotations

import argparse

from cellgraph.cli.commands import DEVICE_AUTO, add_device_flag
from cellgraph.cli.commands.target import DRAWING_FORMATS, TEXT_FORMATS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="export the cell a trained rrnn/rrnn-gru run builds for one sample and step",
        description="Run the best checkpoint's search (the run's eval_mode) on one sequence and "
        "export the cell it uses at step T: json (the unfolded tree, or with --dag the cell "
        "graph, with the vector of every node: cellgraph distance reads it), sympy/latex (one "
        "equation per generated node, then the states), or a drawing (dot, svg, png). Text formats "
        "go to stdout unless -o is given; drawings go to -o FILE, by default cell_I_T.EXT.",
        epilog="example: cellgraph export runs/p1 --sample 0 --t 5 --format sympy -o cell.txt",
    )
    p.add_argument("run", metavar="RUN_DIR")
    p.add_argument("--sample", type=int, required=True, metavar="I", help="sequence index in the split")
    p.add_argument("--t", type=int, required=True, metavar="T", help="time step, 0-based")
    p.add_argument("--split", choices=("train", "val", "test"), default="test")
    p.add_argument("--format", "-f", required=True, choices=TEXT_FORMATS + DRAWING_FORMATS)
    p.add_argument("-o", "--output", metavar="FILE", default=None)
    p.add_argument("--dag", action="store_true",
                   help="the cell graph (shared nodes once) instead of the unfolded tree")
    add_device_flag(p, None, f"{DEVICE_AUTO} (default: the run's device setting)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path
    from types import SimpleNamespace

    from cellgraph.cli.commands.target import emit
    from cellgraph.experiment.config import load_run_config
    from cellgraph.experiment.runs import load_run

    load_run_config(Path(args.run) / "config.json")  # bad settings: an error naming the file and key
    run = load_run(args.run, device=args.device)
    cell, vectors = run.sample_cell(args.split, args.sample, args.t)
    name = f"{args.run} {args.split} sample {args.sample}, t = {args.t}"
    subject = SimpleNamespace(cell=cell, layout=run.layout, vectors=vectors, name=name)
    return emit(args, subject, f"cell_{args.sample}_{args.t}")
