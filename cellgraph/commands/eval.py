"""``cellgraph eval RUN_DIR``: the metric of a trained run's checkpoint on a split."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a run's checkpoint on the validation or test split",
        description="Evaluate the best (or last) checkpoint of a run on a split, searching cells "
        "in the run's eval_mode; print the metric and write RUN_DIR/eval_<split>.json.",
        epilog="example: cellgraph eval runs/p1 --split test",
    )
    p.add_argument("run", metavar="RUN_DIR")
    p.add_argument("--split", choices=("val", "test"), default="test")
    p.add_argument("--checkpoint", choices=("best", "last"), default="best")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cellgraph.backends.torch_train import evaluate_run
    from cellgraph.config import load_run_config
    from cellgraph.runs import write_json

    load_run_config(Path(args.run) / "config.json")  # bad settings: an error naming the file and key
    result = evaluate_run(args.run, args.split, args.checkpoint)
    key = f"{args.split}_{result['metric']}"
    write_json(Path(args.run) / f"eval_{args.split}.json", result)
    print(f"{key} {result[key]:.6f} ({args.checkpoint} checkpoint, epoch {result['epoch']}, "
          f"{result['n']} sequences)")
    return 0
