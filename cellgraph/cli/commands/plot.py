"""``cellgraph plot RUN_DIR [RUN_DIR ...]``: learning curves, N_e and tree shapes."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plot",
        help="plot learning curves, N_e and discovered tree shapes of runs",
        description="Write learning curves (one panel per metric, runs overlaid: one colour per "
        "run, train dashed, val solid), the paper's N_e figure (RRNN-GRU runs of two epochs or "
        "more) and the shapes of discovered trees over epochs as PNG and SVG; a figure with "
        "nothing to show is skipped with a note on stderr. Values spanning decades get a log axis.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders written by `cellgraph train`")
    p.add_argument("-o", "--out", default=None, help="output folder (default: RUN_DIR/plots of the first run)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cellgraph.experiment.plots import plot_runs
    from cellgraph.experiment.runlog import RunLog

    import sys

    logs = [RunLog.load(r) for r in args.runs]
    out = Path(args.out) if args.out else Path(args.runs[0]) / "plots"
    for path in plot_runs(logs, out, note=lambda line: print(f"cellgraph plot: {line}", file=sys.stderr)):
        print(path)
    return 0
