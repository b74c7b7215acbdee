"""Evaluate the best (or last) checkpoint of a run on a split, searching cells in the run's
eval_mode; print the metric and write RUN_DIR/eval_<split>[_<mode>][_last].json."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from cellgraph.algorithm2 import MODES
    from cellgraph.cli.commands import DEVICE_AUTO, add_backend_flag, add_device_flag

    p = sub.add_parser("eval", description=__doc__, epilog="example: cellgraph eval runs/p1 --split test",
                       help="evaluate a run's checkpoint on the validation or test split")
    p.add_argument("run", metavar="RUN_DIR")
    p.add_argument("--split", choices=("val", "test"), default="test")
    p.add_argument("--checkpoint", choices=("best", "last"), default="best")
    p.add_argument("--mode", choices=MODES, default=None,
                   help="search mode of the cells (default: the run's eval_mode, hard unless set); "
                   "the result goes to eval_<split>_<mode>.json")
    add_device_flag(p, None, f"{DEVICE_AUTO} (default: the run's device setting)")
    add_backend_flag(p, None, "the backend plugin that evaluates (default: the run's backend setting)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cellgraph.backend import training_backend
    from cellgraph.experiment.config import load_run_config
    from cellgraph.experiment.runs import eval_name
    from cellgraph.files import write_json

    config = load_run_config(Path(args.run) / "config.json")  # bad settings: an error naming the file and key
    result = training_backend(args.backend or config.backend).evaluate_run(args.run, args.split, args.checkpoint,
                                                           args.mode, args.device)
    key = f"{args.split}_{result['metric']}"
    write_json(Path(args.run) / eval_name(args.split, args.mode, args.checkpoint), result)
    print(f"{key} {result[key]:.6f} ({args.checkpoint} checkpoint, epoch {result['epoch']}, "
          f"{result['mode']} search, {result['n']} sequences)")
    return 0
