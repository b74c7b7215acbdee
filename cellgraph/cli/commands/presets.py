"""``cellgraph presets``: the named presets (the paper's settings, cellgraph's discovery recipe) and what each one sets."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "presets",
        help="list the presets: the paper's settings and the discovery recipe (for cellgraph train --preset)",
        description="Print every preset (the paper's Appendix hyper-parameters by task and model) with "
        "the settings it changes; every other setting keeps its default (cellgraph train --help lists "
        "them).",
        epilog="example: cellgraph presets; cellgraph train --preset paper-sst-gru --out runs/sst-gru",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cellgraph.experiment.presets import PRESETS

    for name, settings in PRESETS.items():
        print(name)
        print("  " + " ".join(f"{key}={value}" for key, value in settings.items()))
    return 0
