"""``cellgraph demo``: GRU/LSTM constructions, RRNN vs RRNN-GRU vs GRU on generated data,
plots, the most frequent discovered cell and a cell search for a planted MGU, in a few
minutes with no data files."""

from __future__ import annotations

import argparse

from cellgraph.cli.commands import DEVICE_AUTO, add_backend_flag, add_device_flag


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="run the whole project on generated data in a few minutes",
        description="Checks that Algorithm 2 rebuilds GRU and LSTM, trains RRNN, RRNN-GRU and GRU on "
        "the planted task, prints a comparison table, writes plots, and renders the most "
        "frequent discovered cell as SVG and sympy equations; then, on values planted by MGU, local "
        "search with the motif moves from the tanh RNN and random search on the same budget (cellgraph "
        "discover), each best cell printed as equations beside the teacher's (needs the hpo extra).",
    )
    p.add_argument("-o", "--out", default="demo-out", help="output folder (default: demo-out)")
    p.add_argument("--seed", type=int, default=0, help="seed of every run (default 0)")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test in well under a minute")
    add_device_flag(p, "auto", f"where to train: {DEVICE_AUTO} (default auto)")
    add_backend_flag(p, "torch", "the backend plugin that trains (default torch)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cellgraph.cli.demo import run_demo
    from cellgraph.proofs.suite import statement

    run_demo((statement("gru"), statement("lstm")), args.out, seed=args.seed, quick=args.quick,
             device=args.device, backend=args.backend)
    return 0
